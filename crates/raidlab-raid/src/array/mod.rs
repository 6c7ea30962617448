//! An array as a volume: the path of one request through its stages, in one
//! direction: plan (`crate::planner`, pure) -> intent (the write-intent
//! bitmap's dirty bits, made durable before any lock is taken: `durability`)
//! -> stripe admission (the stripe locks, `crate::locks`) -> execute
//! (`crate::exec`, an `Executor`; a PPL or journal entry is the plan's log
//! step, written durably before the member writes) -> failure handling
//! (`failure`). Which log a write goes through is `write_log`; the stripe
//! cache in front of all this is wired in by `staging`. A rebuild running
//! beside requests is `rebuild`; where a request enters, as a `Volume`, is
//! `volume`.
//! This module holds the array's state (membership snapshots, the pieces a
//! request is cut into) and calls the stages in order; it decides no stage's
//! question itself.

mod around;
mod durability;
mod failure;
mod kept;
mod rebuild;
mod staging;
mod together;
mod trim;
mod volume;
mod write_log;
mod zeroes;

use crate::planner::Builders as _;
pub use failure::Recorder;
pub use rebuild::Recovery;
use rebuild::{Handover, Phase};
use write_log::WriteLog;

use crate::exec::{Executor, Failed, Members, ThreadPool, UserBuf};
use crate::journal::Journal;
use crate::level::Family;
use crate::locks::StripeLocks;
use crate::plan::{LogEntry, Plan};
use crate::planner::{
    plan_read, plan_write, plan_write_journaled, plan_write_kept, plan_write_logged,
    plan_write_unsynced,
};
use crate::ppl::PartialParityLog;
use crate::stripe_cache::StripeCache;
use raidlab_core::IoKind;
use raidlab_core::{check_range, Error, ErrorKind, Op, Result, StoredSink, Volume};
use raidlab_layout::Geometry;
use raidlab_parity::Engine;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// Requests larger than this are carried out in pieces, so that the scratch memory
/// of one plan stays bounded whatever the caller asks for.
const MAX_PIECE: u64 = 16 << 20;

/// Full stripes per logged write piece: few enough that a member's entries
/// always fit one PPL header (148).
const LOGGED_STRIPES: u64 = 32;

/// A member whose reads fail more often than this (each repaired from redundancy)
/// is taken out of the array, as md's max_corr_read_errors does.
pub const MAX_READ_ERRORS: u32 = 20;

/// A running array: geometry plus its member data areas by role.
pub struct Array {
    name: String,
    geometry: Geometry,
    /// What the array allows and how it plans: its geometry's level's
    /// entry, or, for a pass-through ([`Array::pass_through`]), the entry
    /// of the array it carries (linear, multi-zone RAID 0, mid-reshape)
    /// rather than its one-member placeholder geometry's.
    rules: &'static crate::level::Rules,
    /// Who serves each role; replaced whole when membership changes while the
    /// array runs (a member rebuilt in, replaced, taken out for good).
    membership: RwLock<Arc<Membership>>,
    engine: &'static dyn Engine,
    locks: StripeLocks,
    balance: crate::balance::ReadBalance,
    piece: u64,
    /// Members taken out during operation (a failed write, too many read errors).
    failed: Vec<AtomicBool>,
    /// Times a member was taken out (or a rebuild target failed): a request
    /// planned before one and run after it, once its stripe locks were its
    /// own, would still read the member taken out, whose blocks may be
    /// stale (a write that failed there), and compute parity from them. It
    /// plans again instead ([`Array::is_current`]).
    take_outs: std::sync::atomic::AtomicU64,
    /// How the owner of the array's superblocks records a member taken out
    /// (`failure.rs`, [`Array::record_take_outs`]), and the count of
    /// take-outs it had recorded the last time it was asked.
    recorder: std::sync::Mutex<Option<Recorder>>,
    recorded: AtomicU64,
    read_errors: Vec<AtomicU32>,
    /// Read errors repaired by rewriting the block (md's cnt_corrected_read).
    corrected: Vec<AtomicU32>,
    /// The write-intent bitmap, when the array keeps one: shared by the
    /// running arrays of one served reshape (its two sides and the array it
    /// replaced), so that one copy of the bits is written to the members.
    intent: RwLock<Option<Arc<Intent>>>,
    /// md's partial parity log, when the array keeps one (RAID 5).
    ppl: Option<PartialParityLog>,
    /// With a log, writes are whole sectors: a partial sector is read, merged
    /// and written back. That read-merge-write holds this exclusively and every
    /// other logged write holds it shared, so no write to the same sector can
    /// land between the read and the write-back and be undone by it.
    merging: raidlab_core::task::RwLock<()>,
    /// md's write journal on its own device, when the array keeps one (RAID 4/5/6).
    journal: Option<Arc<Journal>>,
    /// Write-back: a write of part of a page reads the rest and holds the
    /// whole page; it holds this exclusively, every other write-back write
    /// shared, so no write to that page lands between the read and the hold.
    page_merge: raidlab_core::task::RwLock<()>,
    /// Refuse writes (an array whose journal is missing, opened with --force).
    read_only: bool,
    /// Carries the plans out (the thread-pool executor unless given another).
    executor: Arc<dyn Executor>,
    /// Parity arrays running for writes: partial-stripe writes held and
    /// merged (`crate::stripe_cache`); set once, by [`Array::start_stripe_cache`].
    stripe_cache: std::sync::OnceLock<StripeCache>,
    /// Rows a write left in memory, which a later write of them reads
    /// instead of the members (`crate::kept_rows`, `kept.rs`); set with
    /// the stripe cache.
    kept: std::sync::OnceLock<crate::kept_rows::KeptRows>,
    /// Write plans that read members: read-modify-write (they read parity)
    /// and reconstruct-write (they read other data).
    plans_rmw: AtomicU64,
    plans_rcw: AtomicU64,
    /// md's bad-block lists of the members: reads are planned around them
    /// (`crate::badblocks`); rewrites change them while the array runs.
    bad_blocks: crate::badblocks::LiveBadBlocks,
    /// A resync is owed from this member byte while the array serves (the
    /// new space of a served `--size`); `u64::MAX`: none. Writes there
    /// compute parity from data (`planner::plan_write_unsynced`).
    unsynced_from: AtomicU64,
}

/// Who serves each role at one moment. A request works on the snapshot it took,
/// so a membership change never tears one request; changes replace the whole
/// snapshot.
struct Membership {
    /// The volume the executor uses for each role: the members in service, plus
    /// a recovery target in its role (written, below its checkpoint, by writes
    /// planned with the role present) or, for a replacement, a [`Tee`] that
    /// reads the old member and writes both.
    members: Vec<Option<Arc<dyn Volume>>>,
    /// Roles in service: present at open, or recovered in since.
    present: Vec<bool>,
    recovery: Option<Arc<Recovery>>,
}

/// md's write-intent bitmap at work: before a write reaches the members, the
/// chunks it touches are marked dirty on every member's copy of the bitmap (and
/// flushed); md's bitmap daemon clears them once idle (see
/// `crate::bitmap_daemon`), and a clean stop clears the rest, so after a crash
/// a resync need only cover the chunks written in the last few seconds.
pub(crate) struct Intent {
    /// Held across the bitmap's member writes: task-aware, so a simulated
    /// request that finds it held suspends (`raidlab_core::task`).
    state: raidlab_core::task::Mutex<IntentState>,
}

impl Intent {
    /// `bitmap` kept on `devices` (role, whole device, superblock). A served
    /// reshape's devices are those of both geometries' roles.
    pub(crate) fn new(
        bitmap: raidlab_md::bitmap::Bitmap,
        devices: Vec<(usize, Arc<dyn Volume>, raidlab_md::Superblock)>,
    ) -> Intent {
        Intent {
            state: raidlab_core::task::Mutex::new(IntentState {
                bitmap,
                devices,
                daemon: Default::default(),
                cleared: 0,
            }),
        }
    }
}

struct IntentState {
    bitmap: raidlab_md::bitmap::Bitmap,
    /// Whole member devices (the bitmap sits beside the superblock) with their
    /// roles and superblocks. A member taken out is skipped.
    devices: Vec<(usize, Arc<dyn Volume>, raidlab_md::Superblock)>,
    /// The writes under way per chunk and the daemon's last pass.
    daemon: crate::bitmap_daemon::Daemon,
    /// Bits the daemon has cleared and written back, since the start.
    cleared: u64,
}

impl std::fmt::Debug for Array {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Array")
            .field("name", &self.name)
            .field("geometry", &self.geometry)
            .field("present", &self.view().present)
            .finish()
    }
}

impl Array {
    /// Build an array over member data areas (index = role; `None` = missing).
    /// Refuses members smaller than the geometry needs, or too many missing members.
    pub fn new(
        name: impl Into<String>,
        geometry: Geometry,
        members: Vec<Option<Arc<dyn Volume>>>,
    ) -> Result<Array> {
        let name = name.into();
        if members.len() != geometry.raid_disks {
            return Err(Error::invalid(format!(
                "{} members given for an array of {} raid devices",
                members.len(),
                geometry.raid_disks
            ))
            .on_device(name));
        }
        for m in members.iter().flatten() {
            if m.size() < geometry.member_bytes {
                return Err(Error::invalid(format!(
                    "member data area is {} bytes but the array needs {}",
                    m.size(),
                    geometry.member_bytes
                ))
                .on_device(m.name()));
            }
        }
        let present: Vec<bool> = members.iter().map(Option::is_some).collect();
        let n = present.len();
        let membership = Membership {
            members,
            present: present.clone(),
            recovery: None,
        };
        let missing: Vec<usize> = (0..present.len()).filter(|&i| !present[i]).collect();
        if !geometry.survives(&missing) {
            return Err(Error::new(
                ErrorKind::Unrecoverable,
                Op::Open,
                format!(
                    "too many members missing (roles {missing:?}): {} with {} raid devices cannot serve its data without them",
                    geometry.level.name(),
                    geometry.raid_disks
                ),
            )
            .on_device(name));
        }
        let stripe = crate::planner::family(&geometry).piece_unit(&geometry);
        let piece = (MAX_PIECE / stripe).max(1) * stripe;
        Ok(Array {
            name,
            rules: crate::level::of(&geometry),
            geometry,
            membership: RwLock::new(Arc::new(membership)),
            engine: raidlab_parity::selected(),
            locks: StripeLocks::default(),
            balance: crate::balance::ReadBalance::new(n),
            piece,
            failed: (0..n).map(|_| AtomicBool::new(false)).collect(),
            take_outs: std::sync::atomic::AtomicU64::new(0),
            recorder: std::sync::Mutex::new(None),
            recorded: AtomicU64::new(0),
            read_errors: (0..n).map(|_| AtomicU32::new(0)).collect(),
            corrected: (0..n).map(|_| AtomicU32::new(0)).collect(),
            intent: RwLock::new(None),
            ppl: None,
            merging: raidlab_core::task::RwLock::new(()),
            journal: None,
            page_merge: raidlab_core::task::RwLock::new(()),
            read_only: false,
            executor: Arc::new(ThreadPool::default()),
            stripe_cache: std::sync::OnceLock::new(),
            kept: std::sync::OnceLock::new(),
            plans_rmw: AtomicU64::new(0),
            plans_rcw: AtomicU64::new(0),
            bad_blocks: crate::badblocks::LiveBadBlocks::default(),
            unsynced_from: AtomicU64::new(u64::MAX),
        })
    }

    /// An array that places each request itself (`volume`: linear and
    /// multi-zone RAID 0's zones, a stopped reshape's two geometries) run
    /// as one: every request goes to `volume` whole (its own member plans
    /// run on the executor it was given), and the engine's questions are
    /// answered by `rules`, the family of what `volume` is. The geometry is
    /// a one-member placeholder that only carries requests; no rule is
    /// read from it.
    pub fn pass_through(
        name: impl Into<String>,
        volume: Arc<dyn Volume>,
        rules: &'static crate::level::Rules,
    ) -> Result<Array> {
        const SECTOR: u64 = 512;
        let geometry = Geometry::from_md(1, 0, 0, 1, volume.size() / SECTOR)?;
        let mut a = Array::new(name, geometry, vec![Some(volume)])?;
        a.rules = rules;
        Ok(a)
    }

    /// What the array allows, asked in place of a branch on its level.
    pub fn rules(&self) -> &'static crate::level::Rules {
        self.rules
    }

    /// Carry plans out with `executor` instead of the thread pool (a simulator's
    /// device models; tests that record member operations).
    pub fn with_executor(mut self, executor: Arc<dyn Executor>) -> Array {
        self.executor = executor;
        self
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// Which member roles are in service (present, whether or not taken out
    /// since).
    pub fn present(&self) -> Vec<bool> {
        self.view().present.clone()
    }

    /// Whether a plan made from `view`, when `take_outs` members had been
    /// taken out, still holds: the membership is the same (compared in
    /// place: on the path of every write) and no member was taken out since.
    /// Asked once the plan's stripe locks are held, as a member is taken out
    /// before the request that failed it lets its locks go.
    fn is_current(&self, view: &Arc<Membership>, take_outs: u64) -> bool {
        Arc::ptr_eq(
            view,
            &self.membership.read().unwrap_or_else(|p| p.into_inner()),
        ) && (self.take_outs() == take_outs || planted!(PlanNotRecheckedAfterTakeOut))
    }

    /// Members taken out so far (see [`Array::is_current`]); read before
    /// the members' liveness a plan is made from.
    fn take_outs(&self) -> u64 {
        self.take_outs.load(Ordering::Acquire)
    }

    fn view(&self) -> Arc<Membership> {
        self.membership
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Read every mirrored block from its first usable copy while `yes`: for
    /// an array started unclean and not resynced, whose copies may differ
    /// (see `balance.rs`).
    pub fn read_first_copy_only(&self, yes: bool) {
        self.balance.first_copy_only(yes);
    }

    /// The plan a read would follow (as `explain` shows it).
    pub fn plan_read(&self, offset: u64, len: u64) -> Result<Plan> {
        self.read_plan(&self.live(), offset, len)
    }

    /// A read's plan over the members `live` says are usable, the copy chosen
    /// by the read balancer.
    fn read_plan(&self, live: &[bool], offset: u64, len: u64) -> Result<Plan> {
        let hint = self.balance.hint(&self.geometry, live, offset, len);
        if let Some(b) = self.bad_blocks.get() {
            return b.read_plan(&self.geometry, live, offset, len, hint);
        }
        plan_read(&self.geometry, live, offset, len, hint)
    }

    /// Never read the sectors md's bad-block logs list (see `crate::badblocks`).
    pub fn with_bad_blocks(self, bad: Option<crate::badblocks::BadBlocks>) -> Array {
        self.bad_blocks.set(bad);
        self
    }

    /// The roles whose members keep a bad-block log (`Assembly::bad_block_logs`):
    /// a read-error rewrite that fails there lists the range, as md does,
    /// instead of taking the member out.
    pub fn with_bad_block_logs(mut self, logs: Vec<bool>) -> Array {
        self.bad_blocks = std::mem::take(&mut self.bad_blocks).with_logs(logs);
        self
    }

    /// The running array's bad-block lists and the changes it made to them
    /// since they were last written (see `LiveArray::poll`).
    pub fn bad_block_lists(&self) -> &crate::badblocks::LiveBadBlocks {
        &self.bad_blocks
    }

    pub fn plan_write(&self, offset: u64, len: u64) -> Result<Plan> {
        plan_write(&self.geometry, &self.live(), offset, len)
    }

    /// Say that a resync is owed from member byte `from` (`None`: no
    /// longer), while the array serves: md's `recovery_cp` as its writes
    /// see it. Until it is cleared, writes to stripes from there compute
    /// parity from data.
    pub fn set_unsynced_from(&self, from: Option<u64>) {
        self.unsynced_from
            .store(from.unwrap_or(u64::MAX), Ordering::Release);
    }

    /// Where a resync is owed from while the array serves, if one is.
    pub fn unsynced_from(&self) -> Option<u64> {
        let from = self.unsynced_from.load(Ordering::Acquire);
        (from != u64::MAX).then_some(from)
    }

    /// Refuse every write (md runs an array whose journal is missing read-only).
    pub fn read_only(mut self) -> Array {
        self.read_only = true;
        self
    }

    /// Member `role`'s data area, if in service and not taken out.
    pub fn member(&self, role: usize) -> Option<Arc<dyn Volume>> {
        let view = self.view();
        if !self.member_live(&view, role) {
            return None;
        }
        view.members.get(role)?.clone()
    }

    fn member_live(&self, view: &Membership, role: usize) -> bool {
        view.present.get(role).copied().unwrap_or(false)
            && !self.failed[role].load(Ordering::Acquire)
    }

    /// Members in service and not taken out during operation.
    pub fn live(&self) -> Vec<bool> {
        self.live_in(&self.view())
    }

    fn live_in(&self, view: &Membership) -> Vec<bool> {
        (0..view.present.len())
            .map(|r| self.member_live(view, r))
            .collect()
    }

    /// Roles not live now.
    fn missing_now(&self) -> Vec<usize> {
        let live = self.live();
        (0..live.len()).filter(|&r| !live[r]).collect()
    }

    /// Roles taken out during operation; the owner records them as faulty.
    pub fn failed_members(&self) -> Vec<usize> {
        (0..self.failed.len())
            .filter(|&r| self.failed[r].load(Ordering::Acquire))
            .collect()
    }

    /// Read errors repaired per role since the array was opened.
    pub fn corrected_reads(&self) -> Vec<u32> {
        self.corrected
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect()
    }

    /// Write one piece: plan, lock, (log,) execute; repair and retry after a
    /// member fails.
    fn write_piece(&self, piece: &[u8], pos: u64, log: WriteLog<'_>) -> Result<()> {
        let n = piece.len() as u64;
        for attempt in 0.. {
            let take_outs = self.take_outs();
            let view = self.view();
            let mut live = self.live_in(&view);
            let phase = self.phase(&view, pos, n);
            match phase {
                Phase::Split(at) => {
                    let k = (at - pos) as usize;
                    self.write_piece(&piece[..k], pos, log)?;
                    return self.write_piece(&piece[k..], at, log);
                }
                Phase::Below => {
                    if let Some(r) = &view.recovery {
                        live[r.role] = true;
                    }
                }
                Phase::None | Phase::Above => {}
            }
            let kept = self.kept_for(&view, log, &live);
            let plan = log
                .plan(&self.geometry, &live, pos, n, self.unsynced_from(), kept)
                .map_err(|e| e.on_device(&self.name))?;
            let (plan, around) = self
                .plan_around_bad_blocks(log, plan, &live, pos, n)
                .map_err(|e| e.on_device(&self.name))?;
            let _bits = log.make_safe(self, &plan, pos, n)?;
            let held = self.locks.lock(&plan.locks);
            // The rebuild may have passed these stripes between planning and
            // locking, or one may have begun (a rebuild step needs these locks,
            // so neither can happen while they are held): plan again if so.
            // Without the second check, a write planned just before a rebuild
            // began could land after the rebuild passed its stripes and miss
            // the new member.
            if self.phase(&view, pos, n) != phase || !self.is_current(&view, take_outs) {
                drop(held);
                continue;
            }
            // Rows the plan takes from memory, gone since it was planned
            // (pushed out by another stripe's write): plan again.
            let ran = self.run_kept(log, &plan, &view.members, piece, kept, around.is_empty());
            let Some(result) = ran else {
                drop(held);
                continue;
            };
            match result {
                Ok(()) => {
                    self.count_method(&plan);
                    self.written_made_good(&plan);
                    // Before the locks go: no read may find the left-out
                    // blocks stale.
                    let around = self.rewrite_around(&around, &view);
                    drop(held);
                    crate::planner::recycle(plan);
                    return around;
                }
                // The journal could not be written: nothing of this piece went to
                // the members. md stops writing to such an array; so does this.
                Err(f) if f.log && f.members.is_empty() => {
                    let mut e = *f.error;
                    e.message = format!(
                        "{} (writing the journal; nothing of this write reached the members. Check the journal device, then assemble again: the journal is replayed at start)",
                        e.message
                    );
                    return Err(e);
                }
                // The log could not be written (or an earlier write made durable):
                // nothing of this piece went out. Without that member, plan again.
                Err(f) if f.log && !f.members.is_empty() => {
                    drop(held);
                    for &r in &f.members {
                        self.take_out(r, &view);
                    }
                    if !self.geometry.survives(&self.missing_now()) {
                        let mut e = *f.error;
                        e.kind = ErrorKind::Unrecoverable;
                        return Err(e);
                    }
                }
                // Every other member was written: with the failed one taken
                // out, the array holds the new data (degraded). Taken out before
                // the locks go (see `replaced_member_leaves`).
                Err(f) if f.kind == IoKind::Write && !f.members.is_empty() => {
                    for &r in &f.members {
                        self.take_out(r, &view);
                    }
                    let around = self.rewrite_around(&around, &view);
                    drop(held);
                    return self.survive_failure(f, pos, n).and(around);
                }
                // A read before the writes failed: repair it, then plan again.
                Err(f) if attempt < self.failed.len() + 3 => {
                    drop(held);
                    self.handle_failure(f, &view, pos, n)?;
                }
                Err(f) => return Err(*f.error),
            }
        }
        Ok(())
    }

    /// Refuse a change (write or trim) to an array running read-only.
    fn refuse_read_only(&self, op: Op, offset: u64, len: u64) -> Result<()> {
        if !self.read_only {
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::ReadOnly,
            op,
            "the array runs read-only: its write journal is missing or stale, and without it a write could tear a stripe (md does the same). Assemble it with its journal device to write",
        )
        .on_device(&self.name)
        .at(offset, len))
    }

    /// Split `[offset, offset+len)` at multiples of the piece size, when it
    /// is larger than a piece. One no larger is one piece wherever it lies:
    /// its scratch memory is bounded all the same, and split at a multiple
    /// its two halves would run one after the other (each plan waits for
    /// its last member request), so the second half's member requests would
    /// come a round trip late, on disks that had moved on to the next
    /// request (1 MiB requests on a RAID 5 of 64 KiB chunks cross a multiple
    /// once in 16 or so).
    fn pieces(&self, offset: u64, len: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let end = offset + len;
        let mut pos = offset;
        let whole = len <= self.piece;
        std::iter::from_fn(move || {
            if pos >= end {
                return None;
            }
            let next = if whole {
                end
            } else {
                ((pos / self.piece) + 1) * self.piece
            };
            let n = next.min(end) - pos;
            let r = (pos, n);
            pos += n;
            Some(r)
        })
    }
}

/// The member roles a plan writes.
fn write_roles(plan: &Plan) -> Vec<usize> {
    let mut roles: Vec<usize> = plan.writes().map(|op| op.member).collect();
    roles.sort_unstable();
    roles.dedup();
    roles
}
