//! An array as a volume: plans each request, holds its stripe locks, executes it.

use crate::exec::{Executor, Failed, Members, ThreadPool, UserBuf};
use crate::journal::Journal;
use crate::locks::StripeLocks;
use crate::plan::{LogEntry, OpKind, Plan};
use crate::planner::{plan_read, plan_write, plan_write_journaled, plan_write_logged};
use crate::ppl::PartialParityLog;
use raidlab_core::{check_range, Error, ErrorKind, Op, Result, StoredSink, Volume};
use raidlab_layout::Geometry;
use raidlab_parity::Engine;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
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
    /// Who serves each role; replaced whole when membership changes while the
    /// array runs (a member rebuilt in, replaced, taken out for good).
    membership: RwLock<Arc<Membership>>,
    engine: &'static dyn Engine,
    locks: StripeLocks,
    next_mirror: AtomicUsize,
    piece: u64,
    /// Members taken out during operation (a failed write, too many read errors).
    failed: Vec<AtomicBool>,
    read_errors: Vec<AtomicU32>,
    /// Read errors repaired by rewriting the block (md's cnt_corrected_read).
    corrected: Vec<AtomicU32>,
    /// The write-intent bitmap, when the array keeps one.
    intent: Option<Intent>,
    /// md's partial parity log, when the array keeps one (RAID 5).
    ppl: Option<PartialParityLog>,
    /// With a log, writes are whole sectors: a partial sector is read, merged
    /// and written back. That read-merge-write holds this exclusively and every
    /// other logged write holds it shared, so no write to the same sector can
    /// land between the read and the write-back and be undone by it.
    merging: std::sync::RwLock<()>,
    /// md's write journal on its own device, when the array keeps one (RAID 4/5/6).
    journal: Option<Arc<Journal>>,
    /// Refuse writes (an array whose journal is missing, opened with --force).
    read_only: bool,
    /// Carries the plans out (the thread-pool executor unless given another).
    executor: Arc<dyn Executor>,
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

/// A member being rebuilt (or a replacement being copied) while the array
/// serves I/O. Everything below `done` (bytes of its data area) is current: the
/// rebuild wrote it under the stripe locks, and every write since has gone to
/// it too. Above `done` it holds nothing useful and is never read.
pub struct Recovery {
    role: usize,
    target: Arc<dyn Volume>,
    /// A replacement: the role stays in service on its old member meanwhile.
    /// Cleared for good if the old member leaves first: the copy then carries on
    /// as a rebuild (see [`Array::take_out`]).
    replacing: AtomicBool,
    /// The member being replaced.
    replaced: Option<Arc<dyn Volume>>,
    done: AtomicU64,
    /// A write to the target failed: the rebuild must stop, the target is not
    /// usable.
    failed: AtomicBool,
    /// Taking over the role (finish) and losing the old member (conversion to a
    /// rebuild) each move the role's partial parity log; this makes them take
    /// turns. Never held with the membership lock: a logged write holds its log
    /// and then reads the membership.
    handover: std::sync::Mutex<()>,
    /// The target has taken over the role: the old member leaving changes
    /// nothing any more.
    taken_over: AtomicBool,
}

impl std::fmt::Debug for Recovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recovery")
            .field("role", &self.role)
            .field("target", &self.target.name())
            .field("replacing", &self.replacing())
            .field("done", &self.done())
            .field("failed", &self.failed())
            .finish()
    }
}

impl Recovery {
    pub fn role(&self) -> usize {
        self.role
    }
    /// Bytes of the member's data area rebuilt so far.
    pub fn done(&self) -> u64 {
        self.done.load(Ordering::Acquire)
    }
    /// Whether a write to the target failed (the rebuild cannot finish).
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }
    pub fn target(&self) -> &Arc<dyn Volume> {
        &self.target
    }
    /// Whether this copies a member still in service (a replacement), rather
    /// than rebuilding a missing one.
    pub fn replacing(&self) -> bool {
        self.replacing.load(Ordering::Acquire)
    }
}

/// What became of a replacement when the member it replaces left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Handover {
    /// It carries on as a rebuild of the role.
    Rebuild,
    /// It had taken over the role already.
    TakenOver,
    /// No replacement of that role runs (finished or stopped meanwhile).
    Unchanged,
}

/// Where a write falls relative to a rebuild's checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No rebuild, or a replacement (its tee takes every write).
    None,
    /// Every stripe touched is rebuilt: the target must be written as a member.
    Below,
    /// No stripe touched is rebuilt yet: the rebuild will compute it later.
    Above,
    /// Both: split at this array offset and write each side on its own.
    Split(u64),
}

/// The volume a replacement runs under in its role: reads come from the old
/// member, writes go to both (above the copy's checkpoint the new one is
/// overwritten again by the copy, under the same stripe locks). The new one is
/// written even when the old one fails: if the old one leaves, the replacement
/// carries on as a rebuild that trusts everything below its checkpoint.
struct Tee {
    old: Arc<dyn Volume>,
    recovery: Arc<Recovery>,
}

impl Volume for Tee {
    fn name(&self) -> String {
        self.old.name()
    }
    fn size(&self) -> u64 {
        self.old.size()
    }
    fn block_size(&self) -> u32 {
        self.old.block_size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.old.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let old = self.old.write_at(buf, offset);
        let new = self.tee(|t| t.write_at(buf, offset));
        self.outcome(old, new)
    }
    fn flush(&self) -> Result<()> {
        let old = self.old.flush();
        let new = self.tee(|t| t.flush());
        self.outcome(old, new)
    }
    fn is_writable(&self) -> bool {
        self.old.is_writable()
    }
    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        let old = self.old.discard(offset, len);
        let new = self.tee(|t| t.discard(offset, len));
        self.outcome(old, new)
    }
    fn discard_zeroes(&self) -> bool {
        self.old.discard_zeroes() && self.recovery.target.discard_zeroes()
    }
}

impl Tee {
    /// Do `op` on the replacement unless it is lost already; a failure loses it.
    fn tee(&self, op: impl FnOnce(&dyn Volume) -> Result<()>) -> Result<()> {
        if self.recovery.failed() {
            return Ok(());
        }
        let r = op(self.recovery.target.as_ref());
        if r.is_err() {
            self.recovery.failed.store(true, Ordering::Release);
        }
        r
    }

    /// While the old member serves the role, its result is the role's (a lost
    /// replacement is not the array's failure: the old member has the data).
    /// Once it has left, the replacement is the role and its result counts.
    fn outcome(&self, old: Result<()>, new: Result<()>) -> Result<()> {
        if self.recovery.replacing() {
            old
        } else {
            new
        }
    }
}

/// Which log a write piece goes through.
#[derive(Clone, Copy)]
enum Logger<'a> {
    None,
    Ppl(&'a PartialParityLog),
    Journal(&'a Journal),
}

/// md's write-intent bitmap at work: before a write reaches the members, the
/// chunks it touches are marked dirty on every member's copy of the bitmap (and
/// flushed); they are cleared only when the array is stopped cleanly, so after a
/// crash a resync need only cover the dirty chunks.
struct Intent {
    state: std::sync::Mutex<IntentState>,
}

struct IntentState {
    bitmap: raidlab_md::bitmap::Bitmap,
    /// Whole member devices (the bitmap sits beside the superblock) with their
    /// roles and superblocks. A member taken out is skipped.
    devices: Vec<(usize, Arc<dyn Volume>, raidlab_md::Superblock)>,
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
        let stripe = if geometry.is_parity() {
            geometry.chunk_bytes * geometry.data_disks() as u64
        } else {
            geometry.chunk_bytes.max(4096) * geometry.raid_disks as u64
        };
        let piece = (MAX_PIECE / stripe).max(1) * stripe;
        Ok(Array {
            name,
            geometry,
            membership: RwLock::new(Arc::new(membership)),
            engine: raidlab_parity::selected(),
            locks: StripeLocks::default(),
            next_mirror: AtomicUsize::new(0),
            piece,
            failed: (0..n).map(|_| AtomicBool::new(false)).collect(),
            read_errors: (0..n).map(|_| AtomicU32::new(0)).collect(),
            corrected: (0..n).map(|_| AtomicU32::new(0)).collect(),
            intent: None,
            ppl: None,
            merging: std::sync::RwLock::new(()),
            journal: None,
            read_only: false,
            executor: Arc::new(ThreadPool),
        })
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

    /// Whether `view` is still the membership in force (compared in place: on
    /// the path of every write).
    fn is_current(&self, view: &Arc<Membership>) -> bool {
        Arc::ptr_eq(
            view,
            &self.membership.read().unwrap_or_else(|p| p.into_inner()),
        )
    }

    fn view(&self) -> Arc<Membership> {
        self.membership
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The plan a read would follow (as `explain` shows it).
    pub fn plan_read(&self, offset: u64, len: u64) -> Result<Plan> {
        self.read_plan(&self.live(), offset, len)
    }

    /// A read's plan over the members `live` says are usable, each read
    /// taking the next mirror in turn.
    fn read_plan(&self, live: &[bool], offset: u64, len: u64) -> Result<Plan> {
        let hint = self.next_mirror.fetch_add(1, Ordering::Relaxed);
        plan_read(&self.geometry, live, offset, len, hint)
    }

    pub fn plan_write(&self, offset: u64, len: u64) -> Result<Plan> {
        plan_write(&self.geometry, &self.live(), offset, len)
    }

    /// Keep `bitmap` up to date on `devices` (role, whole device, superblock)
    /// before every write.
    pub fn with_intent(
        mut self,
        bitmap: raidlab_md::bitmap::Bitmap,
        devices: Vec<(usize, Arc<dyn Volume>, raidlab_md::Superblock)>,
    ) -> Array {
        self.intent = Some(Intent {
            state: std::sync::Mutex::new(IntentState { bitmap, devices }),
        });
        self
    }

    /// Run `f` on the bitmap with every bitmap write held off, so that whoever
    /// writes superblocks (and the bitmap beside them) while the array runs
    /// writes its current dirty bits, not an older copy. `None` without a bitmap.
    pub fn with_bitmap_held<T>(
        &self,
        f: impl FnOnce(&mut raidlab_md::bitmap::Bitmap) -> T,
    ) -> Option<T> {
        let intent = self.intent.as_ref()?;
        let mut st = intent.state.lock().unwrap_or_else(|p| p.into_inner());
        Some(f(&mut st.bitmap))
    }

    /// Keep the bitmap on a further device too (a member being rebuilt in).
    pub fn add_intent_device(
        &self,
        role: usize,
        device: Arc<dyn Volume>,
        sb: raidlab_md::Superblock,
    ) -> Result<()> {
        let Some(intent) = &self.intent else {
            return Ok(());
        };
        let mut st = intent.state.lock().unwrap_or_else(|p| p.into_inner());
        st.bitmap.write_to(device.as_ref(), &sb)?;
        device.flush()?;
        st.devices
            .retain(|(r, d, _)| !(*r == role && d.name() == device.name()));
        st.devices.push((role, device, sb));
        Ok(())
    }

    /// Before a member is rebuilt into `role`, or replaces the role's member,
    /// while the array runs: its partial parity log. A rebuilt member's log is
    /// the role's at once (writes planned with the role present, below the
    /// rebuild's checkpoint, log to it). A replacement's log takes a copy of
    /// every log write of the role until it takes over, so that whichever
    /// member the superblocks name after a crash holds the role's last log
    /// write.
    pub fn add_log_device(
        &self,
        role: usize,
        device: Arc<dyn Volume>,
        sb: raidlab_md::Superblock,
        replacing: bool,
    ) -> Result<()> {
        match &self.ppl {
            Some(log) if replacing => log.attach_copy(role, device, sb),
            Some(log) => log.attach(role, device, sb),
            None => Ok(()),
        }
    }

    /// Once the superblocks name the member that replaced `role`: its log is
    /// the only one the role's log writes go to.
    pub fn settle_logs(&self, role: usize) {
        if let Some(log) = &self.ppl {
            log.drop_copy(role);
        }
    }

    /// Log every write's partial parity first (md's PPL; RAID 5 only). Refused
    /// when one stripe's partial parity could not fit a log write.
    pub fn with_ppl(mut self, log: PartialParityLog) -> Result<Array> {
        if self.geometry.level != raidlab_layout::Level::Raid5 {
            return Err(Error::invalid(format!(
                "a partial parity log is for RAID 5 only, not {}",
                self.geometry.level.name()
            ))
            .on_device(&self.name));
        }
        if self.geometry.chunk_bytes > log.pp_room() {
            return Err(Error::invalid(format!(
                "the chunk ({} bytes) is larger than the partial parity a log write can hold ({} bytes): md's PPL cannot cover a stripe of this array; assemble it without writing, or re-create it with a smaller chunk",
                self.geometry.chunk_bytes,
                log.pp_room()
            ))
            .on_device(&self.name));
        }
        self.ppl = Some(log);
        Ok(self)
    }

    /// Whether writes go through a partial parity log.
    pub fn has_ppl(&self) -> bool {
        self.ppl.is_some()
    }

    /// Run writes through md's write journal (RAID 4/5/6): each write's new data
    /// and parity are made durable on the journal device before the members are
    /// written. The journal must have been started (replayed) on this array's
    /// members.
    pub fn with_journal(mut self, journal: Arc<Journal>) -> Result<Array> {
        if !self.geometry.is_parity() {
            return Err(Error::invalid(format!(
                "md's write journal is for RAID 4, 5 and 6, not {}",
                self.geometry.level.name()
            ))
            .on_device(&self.name));
        }
        self.journal = Some(journal);
        Ok(self)
    }

    /// Whether writes go through a write journal.
    pub fn has_journal(&self) -> bool {
        self.journal.is_some()
    }

    /// The write journal, when writes go through one.
    pub fn journal(&self) -> Option<&Journal> {
        self.journal.as_deref()
    }

    /// Refuse every write (md runs an array whose journal is missing read-only).
    pub fn read_only(mut self) -> Array {
        self.read_only = true;
        self
    }

    /// Let the journal forget what the members now hold durably: flush the
    /// members and move `journal_tail` up (md's reclaim). For a clean stop.
    pub fn checkpoint_journal(&self) -> Result<()> {
        match &self.journal {
            Some(j) => j.checkpoint(&|| self.flush_members()),
            None => Ok(()),
        }
    }

    /// The bitmap as the array last wrote it.
    pub fn intent_bitmap(&self) -> Option<raidlab_md::bitmap::Bitmap> {
        self.with_bitmap_held(|b| b.clone())
    }

    /// Mark the bitmap chunks a write plan touches dirty, on every member, before
    /// the plan runs. md indexes RAID 10's bitmap by array sector, the other
    /// levels' by member sector.
    fn note_intent(&self, plan: &Plan, pos: u64, n: u64) -> Result<()> {
        let Some(intent) = &self.intent else {
            return Ok(());
        };
        let ranges: Vec<(u64, u64)> = if self.geometry.level == raidlab_layout::Level::Raid10 {
            vec![(pos / 512, (pos + n).div_ceil(512) - pos / 512)]
        } else {
            plan.writes()
                .map(|op| {
                    (
                        op.offset / 512,
                        (op.offset + op.length).div_ceil(512) - op.offset / 512,
                    )
                })
                .collect()
        };
        let mut st = intent.state.lock().unwrap_or_else(|p| p.into_inner());
        let IntentState {
            bitmap: bm,
            devices,
        } = &mut *st;
        let last = bm.chunks().saturating_sub(1);
        let already = ranges.iter().all(|&(start, len)| {
            (bm.chunk_of(start).min(last)..=bm.chunk_of(start + len.max(1) - 1).min(last))
                .all(|c| bm.is_dirty(c))
        });
        if already {
            return Ok(());
        }
        let sync = bm.sb.sync_size;
        for &(start, len) in ranges.iter().filter(|(start, _)| *start < sync) {
            bm.set_sectors(start, len.min(sync - start))?;
        }
        let view = self.view();
        for (role, dev, sb) in devices.iter() {
            let rebuilding = view.recovery.as_ref().is_some_and(|r| r.role == *role);
            if !rebuilding && !self.member_live(&view, *role) {
                continue;
            }
            if let Err(e) = bm.write_to(dev.as_ref(), sb).and_then(|()| dev.flush()) {
                // md fails a member whose bitmap cannot be written; the write
                // goes on without it if the array survives that.
                if rebuilding {
                    self.fail_recovery();
                    continue;
                }
                self.take_out(*role, &view);
                if !self.geometry.survives(&self.missing_now()) {
                    return Err(e);
                }
            }
        }
        Ok(())
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

    /// Take `role` out after an I/O error; `seen` is the membership the failed
    /// request ran on, which says whose error it was.
    fn take_out(&self, role: usize, seen: &Membership) {
        if let Some(rec) = seen.recovery.as_ref().filter(|r| r.role == role) {
            if !seen.present[role] {
                // The role's only volume was a rebuild target: the rebuild fails,
                // the role stays missing as it was.
                rec.failed.store(true, Ordering::Release);
                return;
            }
            // The member being replaced failed (through its tee, which records
            // a failure of the replacement itself).
            if self.replaced_member_leaves(rec) == Handover::TakenOver {
                // The replacement serves the role already (and got this write
                // through the tee): the old member's failure is not the role's.
                return;
            }
        }
        self.failed[role].store(true, Ordering::Release);
    }

    /// The member a replacement copies from leaves the array: as md does, the
    /// replacement carries on as an ordinary rebuild of the role from its
    /// checkpoint. Below the checkpoint it is current (the copy wrote it, and
    /// every write since went through the tee to it too); above, the rebuild
    /// computes it from the other members from now on.
    ///
    /// This must happen before the role is marked failed: a write that sees the
    /// role out must also see the rebuild, or it would skip the replacement below
    /// its checkpoint. And a failed write must call it before it lets go of its
    /// stripe locks, or the copy could take the old member's stale blocks there.
    fn replaced_member_leaves(&self, rec: &Arc<Recovery>) -> Handover {
        let current =
            |view: &Membership| view.recovery.as_ref().is_some_and(|r| Arc::ptr_eq(r, rec));
        {
            let _turn = rec.handover.lock().unwrap_or_else(|p| p.into_inner());
            if rec.taken_over.load(Ordering::Acquire) {
                // Published before the turn was given up: the role is the
                // replacement's now.
                return Handover::TakenOver;
            }
            if !rec.replacing() || !current(&self.view()) {
                return Handover::Unchanged;
            }
            rec.replacing.store(false, Ordering::Release);
            if let Some(log) = &self.ppl {
                // The new member's log is the role's now; the old member is gone.
                log.promote_copy(rec.role);
                log.drop_copy(rec.role);
            }
        }
        let mut slot = self.membership.write().unwrap_or_else(|p| p.into_inner());
        let view = slot.clone();
        if !current(&view) {
            // Stopped meanwhile: nothing to switch.
            return Handover::Unchanged;
        }
        let mut next = Membership {
            members: view.members.clone(),
            present: view.present.clone(),
            recovery: view.recovery.clone(),
        };
        next.present[rec.role] = false;
        next.members[rec.role] = Some(rec.target.clone());
        *slot = Arc::new(next);
        Handover::Rebuild
    }

    /// Take a member out of service now, as md's `--fail` does. Refused when the
    /// array could not serve its data without it.
    pub fn fail_member(&self, role: usize) -> Result<()> {
        if role >= self.failed.len() {
            return Err(
                Error::invalid(format!("no role {role} in this array")).on_device(&self.name)
            );
        }
        let mut missing = self.missing_now();
        if !missing.contains(&role) {
            missing.push(role);
        }
        if !self.geometry.survives(&missing) {
            return Err(Error::new(
                ErrorKind::Unrecoverable,
                Op::Write,
                format!("taking role {role} out would leave the array unable to serve its data (roles {missing:?} missing)"),
            )
            .on_device(&self.name));
        }
        let view = self.view();
        if let Some(rec) = view.recovery.as_ref().filter(|r| r.role == role) {
            if self.replaced_member_leaves(rec) == Handover::TakenOver {
                // The member asked for has been replaced already; the role
                // is served by its replacement, which stays.
                return Ok(());
            }
        }
        self.failed[role].store(true, Ordering::Release);
        Ok(())
    }

    fn fail_recovery(&self) {
        if let Some(r) = &self.view().recovery {
            r.failed.store(true, Ordering::Release);
        }
    }

    /// A member failed `kind` operations: reads are repaired from redundancy and
    /// the member's blocks rewritten (it stays in unless it keeps failing);
    /// writes take it out. Errs if the array can no longer serve the range.
    fn handle_failure(&self, f: Failed, seen: &Membership, pos: u64, n: u64) -> Result<()> {
        if f.members.is_empty() {
            return Err(*f.error);
        }
        if f.kind == OpKind::Write {
            for &r in &f.members {
                self.take_out(r, seen);
            }
        } else {
            for &r in &f.members {
                if self.read_errors[r].fetch_add(1, Ordering::Relaxed) + 1 > MAX_READ_ERRORS {
                    self.take_out(r, seen);
                }
            }
        }
        self.survive_failure(f, pos, n)
    }

    /// After `f`'s members were dealt with: errs if the array can no longer
    /// serve the range; repairs what a read could not read.
    fn survive_failure(&self, f: Failed, pos: u64, n: u64) -> Result<()> {
        let live = self.live();
        let mut without = live.clone();
        for &r in &f.members {
            without[r] = false;
        }
        let missing: Vec<usize> = (0..without.len()).filter(|&r| !without[r]).collect();
        if !self.geometry.survives(&missing) {
            let mut e = *f.error;
            e.kind = ErrorKind::Unrecoverable;
            e.message = format!(
                "{}; with role(s) {missing:?} unusable the array cannot serve this range",
                e.message
            );
            return Err(e);
        }
        if f.kind == OpKind::Read {
            for &r in f.members.iter().filter(|&&r| live[r]) {
                self.rewrite_from_redundancy(r, &without, pos, n)?;
            }
        }
        Ok(())
    }

    /// Rebuild what member `role` holds for the array range `[pos, pos+n)` from
    /// the members in `sources` and write it back to `role` (md's read-error
    /// correction). Holds the range's stripe locks so no write interleaves. A
    /// failed rewrite takes the member out.
    fn rewrite_from_redundancy(
        &self,
        role: usize,
        sources: &[bool],
        pos: u64,
        n: u64,
    ) -> Result<()> {
        let all = vec![true; self.geometry.raid_disks];
        let keys = plan_write(&self.geometry, &all, pos, n)?.locks;
        let _held = self.locks.lock(&keys);
        // The membership once the locks are held (a rebuild that began before
        // cannot pass these stripes now; see `write_piece`).
        let view = self.view();
        let Some(target) = view.members[role].as_ref().filter(|m| m.is_writable()) else {
            return Ok(()); // read-only: the data was still served from redundancy
        };
        let vols = view
            .members
            .iter()
            .zip(sources)
            .map(|(m, ok)| m.clone().filter(|_| *ok))
            .collect();
        let sub = Array::new(self.name.clone(), self.geometry, vols)?;
        let g = &self.geometry;
        let (moff, len) = if g.is_parity() {
            let stripe = g.chunk_bytes * g.data_disks() as u64;
            let first = pos / stripe;
            let last = (pos + n - 1) / stripe;
            (first * g.chunk_bytes, (last - first + 1) * g.chunk_bytes)
        } else {
            // Mirrors: the member range is found per copy below.
            (0, 0)
        };
        // Rewrite, then read back: a disk remaps a bad sector on write, and a block
        // that still cannot be read afterwards means the member is failing (md
        // fails it the same way).
        let verify = |off: u64, want: &[u8]| -> Result<()> {
            let mut back = vec![0u8; want.len()];
            target.read_at(&mut back, off)?;
            if back != want {
                return Err(Error::new(
                    ErrorKind::Io,
                    Op::Read,
                    "rewritten block reads back wrong",
                )
                .on_device(target.name()));
            }
            Ok(())
        };
        let result = if g.is_parity() {
            let sources: Vec<Option<Arc<dyn Volume>>> = (0..g.raid_disks)
                .map(|r| if r == role { None } else { sub.member(r) })
                .collect();
            crate::reconstruct::member_contents(&sub, &sources, g, role, moff, len).and_then(
                |data| {
                    target.write_at(&data, moff)?;
                    verify(moff, &data)
                },
            )
        } else {
            let mut data = vec![0u8; n as usize];
            sub.read_at(&mut data, pos).and_then(|_| {
                for (at, k, locs) in g.mirror_runs(pos, n) {
                    if let Some(l) = locs.iter().find(|l| l.member == role) {
                        let s = (at - pos) as usize;
                        target.write_at(&data[s..s + k as usize], l.offset)?;
                        verify(l.offset, &data[s..s + k as usize])?;
                    }
                }
                Ok(())
            })
        };
        match result {
            Ok(()) => {
                self.corrected[role].fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(_) => {
                // The block cannot be rewritten: md fails such a member.
                self.take_out(role, &view);
                Ok(())
            }
        }
    }

    /// Write one piece: plan, lock, (log,) execute; repair and retry after a
    /// member fails.
    fn write_piece(&self, piece: &[u8], pos: u64, log: Logger<'_>) -> Result<()> {
        let n = piece.len() as u64;
        for attempt in 0.. {
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
            let plan = match log {
                Logger::Ppl(_) => plan_write_logged(&self.geometry, &live, pos, n),
                Logger::Journal(_) => plan_write_journaled(&self.geometry, &live, pos, n),
                Logger::None => plan_write(&self.geometry, &live, pos, n),
            }
            .map_err(|e| e.on_device(&self.name))?;
            self.note_intent(&plan, pos, n)?;
            let held = self.locks.lock(&plan.locks);
            // The rebuild may have passed these stripes between planning and
            // locking, or one may have begun (a rebuild step needs these locks,
            // so neither can happen while they are held): plan again if so.
            // Without the second check, a write planned just before a rebuild
            // began could land after the rebuild passed its stripes and miss
            // the new member.
            if self.phase(&view, pos, n) != phase || !self.is_current(&view) {
                drop(held);
                continue;
            }
            let members: &Members = &view.members;
            let result = match log {
                Logger::Journal(journal) => {
                    // Held until the member writes are done: a reclaim (inside a
                    // later journal write) must not move the tail past this one.
                    let state = std::cell::RefCell::new(journal.writer());
                    let flush = || self.flush_members();
                    let writer = |entries: &[(LogEntry, &[u8])]| {
                        journal.write(&mut state.borrow_mut(), entries, &flush)
                    };
                    self.executor.run(
                        &plan,
                        members,
                        self.engine,
                        UserBuf::Write(piece),
                        Some(&writer),
                    )
                }
                Logger::Ppl(log) => {
                    let written: Vec<usize> = write_roles(&plan);
                    let guards = std::cell::RefCell::new(log.lock(&plan));
                    let flush = |r: usize| match self.member(r) {
                        Some(m) => m.flush(),
                        None => Ok(()),
                    };
                    let writer = |entries: &[(LogEntry, &[u8])]| {
                        log.write(&mut guards.borrow_mut(), entries, &written, &flush)
                    };
                    self.executor.run(
                        &plan,
                        members,
                        self.engine,
                        UserBuf::Write(piece),
                        Some(&writer),
                    )
                }
                Logger::None => {
                    self.executor
                        .run(&plan, members, self.engine, UserBuf::Write(piece), None)
                }
            };
            match result {
                Ok(()) => return Ok(()),
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
                Err(f) if f.kind == OpKind::Write && !f.members.is_empty() => {
                    for &r in &f.members {
                        self.take_out(r, &view);
                    }
                    drop(held);
                    return self.survive_failure(f, pos, n);
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

    /// A write to an array with a partial parity log: whole sectors only (a
    /// partial sector is merged with what the array holds), in pieces that are
    /// either one partial stripe or a run of whole stripes, so every member's
    /// share of a piece fits one log write.
    fn write_logged(&self, log: &PartialParityLog, buf: &[u8], offset: u64) -> Result<()> {
        let end = offset + buf.len() as u64;
        let (a, b) = (offset / 512 * 512, end.div_ceil(512) * 512);
        if (a, b) != (offset, end) {
            let _only = self.merging.write().unwrap_or_else(|p| p.into_inner());
            let mut merged = vec![0u8; (b - a) as usize];
            self.read_at(&mut merged[..512], a)?;
            let tail = merged.len() - 512;
            self.read_at(&mut merged[tail..], b - 512)?;
            merged[(offset - a) as usize..(end - a) as usize].copy_from_slice(buf);
            return self.write_logged_sectors(log, &merged, a);
        }
        let _shared = self.merging.read().unwrap_or_else(|p| p.into_inner());
        self.write_logged_sectors(log, buf, offset)
    }

    /// [`Array::write_logged`] of whole sectors.
    fn write_logged_sectors(&self, log: &PartialParityLog, buf: &[u8], offset: u64) -> Result<()> {
        let end = offset + buf.len() as u64;
        let stripe = self.geometry.chunk_bytes * self.geometry.data_disks() as u64;
        let mut pos = offset;
        while pos < end {
            let next = if pos % stripe != 0 || end - pos < stripe {
                (pos / stripe + 1) * stripe
            } else {
                let whole = (end - pos) / stripe;
                pos + whole.min(LOGGED_STRIPES) * stripe
            };
            let n = next.min(end) - pos;
            let start = (pos - offset) as usize;
            self.write_piece(&buf[start..start + n as usize], pos, Logger::Ppl(log))?;
            pos += n;
        }
        Ok(())
    }

    /// A write to an array with a journal: whole 4 KiB pages (a partial page is
    /// merged with what the array holds), in pieces that always fit the ring.
    fn write_journaled(&self, journal: &Journal, buf: &[u8], offset: u64) -> Result<()> {
        let end = offset + buf.len() as u64;
        let (a, b) = (offset / 4096 * 4096, end.div_ceil(4096) * 4096);
        if (a, b) != (offset, end) {
            let mut merged = vec![0u8; (b - a) as usize];
            self.read_at(&mut merged[..4096], a)?;
            let tail = merged.len() - 4096;
            self.read_at(&mut merged[tail..], b - 4096)?;
            merged[(offset - a) as usize..(end - a) as usize].copy_from_slice(buf);
            return self.write_journaled(journal, &merged, a);
        }
        let step = journal.max_piece().min(self.piece);
        let mut pos = offset;
        while pos < end {
            let n = step.min(end - pos);
            let start = (pos - offset) as usize;
            self.write_piece(
                &buf[start..start + n as usize],
                pos,
                Logger::Journal(journal),
            )?;
            pos += n;
        }
        Ok(())
    }

    /// Flush every live member (an error if one cannot make its writes durable).
    fn flush_members(&self) -> Result<()> {
        let view = self.view();
        let live = self.live_in(&view);
        for (r, m) in view.members.iter().enumerate() {
            if let (Some(m), true) = (m, live[r]) {
                m.flush()?;
            }
        }
        flush_target(&view);
        Ok(())
    }

    /// Start rebuilding `role` onto `target` (its data area) while the array
    /// serves I/O, from `from` bytes into the area (a resumed rebuild; rounded
    /// down to a chunk). With `replacing`, the role stays in service on its
    /// current member and `target` becomes a copy of it (md's replace).
    /// Refused while another rebuild runs, for a role in service (unless
    /// replacing), and for a read-only array. On an array with a partial
    /// parity log, the new member's log must be attached first
    /// ([`Array::add_log_device`]).
    pub fn begin_recovery(
        &self,
        role: usize,
        target: Arc<dyn Volume>,
        from: u64,
        replacing: bool,
    ) -> Result<Arc<Recovery>> {
        let mut slot = self.membership.write().unwrap_or_else(|p| p.into_inner());
        let view = slot.clone();
        let refuse = |why: String| Err(Error::invalid(why).on_device(&self.name));
        if role >= view.present.len() {
            return refuse(format!("no role {role} in this array"));
        }
        if let Some(r) = &view.recovery {
            return refuse(format!(
                "role {} is being rebuilt already: one rebuild at a time; wait for it to finish",
                r.role
            ));
        }
        if replacing && self.ppl.as_ref().is_some_and(|l| !l.copy_intact(role)) {
            return refuse(format!("internal: the replacement of role {role} needs its partial parity log attached first (Array::add_log_device)"));
        }
        if self.read_only || !target.is_writable() {
            return refuse(
                "the array or the new member is read-only: nothing can be rebuilt".into(),
            );
        }
        if target.size() < self.geometry.member_bytes {
            return refuse(format!(
                "the new member's data area is {} bytes but the array needs {}",
                target.size(),
                self.geometry.member_bytes
            ));
        }
        let live = self.member_live(&view, role);
        if replacing && !live {
            return refuse(format!(
                "role {role} is not in service: nothing to replace; add a member to rebuild it"
            ));
        }
        if !replacing && live {
            return refuse(format!(
                "role {role} is in service: fail it first, or replace it"
            ));
        }
        let unit = self.geometry.chunk_bytes.max(4096);
        let rec = Arc::new(Recovery {
            role,
            target: target.clone(),
            replacing: AtomicBool::new(replacing),
            replaced: if replacing {
                view.members[role].clone()
            } else {
                None
            },
            done: AtomicU64::new(from.min(self.geometry.member_bytes) / unit * unit),
            failed: AtomicBool::new(false),
            handover: std::sync::Mutex::new(()),
            taken_over: AtomicBool::new(false),
        });
        let mut next = Membership {
            members: view.members.clone(),
            present: view.present.clone(),
            recovery: Some(rec.clone()),
        };
        if let Some(old) = rec.replaced.clone() {
            next.members[role] = Some(Arc::new(Tee {
                old,
                recovery: rec.clone(),
            }));
        } else {
            next.present[role] = false;
            next.members[role] = Some(target);
        }
        *slot = Arc::new(next);
        Ok(rec)
    }

    /// The rebuild running, if any.
    pub fn recovery(&self) -> Option<Arc<Recovery>> {
        self.view().recovery.clone()
    }

    /// Rebuild the next `want` bytes (rounded to whole chunks) of the running
    /// rebuild's target, holding the stripe locks of that range so no write
    /// interleaves, and move its checkpoint past them. Returns the new
    /// checkpoint (the member's data size when done).
    pub fn recovery_step(
        &self,
        rec: &Recovery,
        want: u64,
        scratch: &mut Vec<Vec<u8>>,
    ) -> Result<u64> {
        let g = self.geometry;
        let unit = g.chunk_bytes.max(4096);
        let at = rec.done();
        if rec.failed() {
            return Err(Error::new(
                ErrorKind::Io,
                Op::Write,
                "a write to the member being rebuilt failed: the rebuild stopped (the member is not usable)",
            )
            .on_device(rec.target.name()));
        }
        if at >= g.member_bytes {
            return Ok(at);
        }
        let n = ((want / unit).max(1) * unit).min(g.member_bytes - at);
        let keys = self.member_range_keys(rec.role, at, n)?;
        let _held = self.locks.lock(&keys);
        // Membership as of now, under the locks: whether the old member of a
        // replacement is still there to copy from.
        let view = self.view();
        let mut live = self.live_in(&view);
        live[rec.role] = false;
        let mut out = std::mem::take(scratch.first_mut().unwrap_or(&mut Vec::new()));
        out.resize(n as usize, 0);
        let copied = match &rec.replaced {
            // Copy from the member being replaced, if it can be read.
            Some(old) if rec.replacing() => match old.read_at(&mut out, at) {
                Ok(()) => true,
                Err(_) => {
                    // Counted as any read error of the member; the blocks come
                    // from the other members instead.
                    let errors = self.read_errors[rec.role].fetch_add(1, Ordering::Relaxed);
                    if errors + 1 > MAX_READ_ERRORS {
                        self.take_out(rec.role, &view);
                    }
                    false
                }
            },
            _ => false,
        };
        let result = if copied {
            Ok(())
        } else if g.is_parity() {
            self.combine_step(&view, &live, rec.role, at, &mut out, scratch)
        } else {
            self.mirror_step(&view, &live, rec.role, at, &mut out)
        };
        let result = result.and_then(|()| rec.target.write_at(&out, at));
        if scratch.is_empty() {
            scratch.push(Vec::new());
        }
        scratch[0] = out;
        match result {
            Ok(()) => {
                rec.done.store(at + n, Ordering::Release);
                Ok(at + n)
            }
            Err(e) => {
                rec.failed.store(true, Ordering::Release);
                Err(e)
            }
        }
    }

    /// What `role` holds at `[at, at+out.len())`, combined from the same range
    /// of the live members (parity levels).
    fn combine_step(
        &self,
        view: &Membership,
        live: &[bool],
        role: usize,
        at: u64,
        out: &mut [u8],
        scratch: &mut Vec<Vec<u8>>,
    ) -> Result<()> {
        let n = out.len();
        scratch.resize_with(live.len() + 1, Vec::new);
        for (r, ok) in live.iter().enumerate() {
            let buf = &mut scratch[r + 1];
            if *ok && r != role {
                buf.resize(n, 0);
                view.members[r]
                    .as_ref()
                    .expect("a live role has a member")
                    .read_at(buf, at)?;
            }
        }
        let views: Vec<Option<&[u8]>> = (0..live.len())
            .map(|r| (live[r] && r != role).then(|| &scratch[r + 1][..n]))
            .collect();
        crate::reconstruct::combine_parity(&self.geometry, role, at, &views, out)
    }

    /// What mirror `role` holds at `[at, at+out.len())`, read from another copy.
    fn mirror_step(
        &self,
        view: &Membership,
        live: &[bool],
        role: usize,
        at: u64,
        out: &mut [u8],
    ) -> Result<()> {
        let g = &self.geometry;
        let n = out.len() as u64;
        let mut sources = live.to_vec();
        sources[role] = false;
        crate::reconstruct::mirror_pieces(g, role, at, n, |off, len, content| {
            let piece = &mut out[off as usize..(off + len) as usize];
            match content {
                raidlab_layout::Content::Data(l) => {
                    // Not `read_at`: this step holds the stripe locks already.
                    let plan = plan_read(g, &sources, l, len, role)?;
                    self.executor
                        .run(
                            &plan,
                            &view.members,
                            self.engine,
                            UserBuf::Read(piece),
                            None,
                        )
                        .map_err(|f| *f.error)
                }
                _ => {
                    piece.fill(0);
                    Ok(())
                }
            }
        })
    }

    /// The stripe-lock keys covering what `role` holds at `[at, at+n)` of its
    /// data area: the stripes there (parity levels), or the array ranges whose
    /// copies lie there (mirrors), as writes to them lock them.
    fn member_range_keys(&self, role: usize, at: u64, n: u64) -> Result<Vec<u64>> {
        let g = &self.geometry;
        if g.is_parity() {
            let c = g.chunk_bytes;
            return Ok((at / c..=(at + n - 1) / c).collect());
        }
        let all = vec![true; g.raid_disks];
        let mut keys = Vec::new();
        crate::reconstruct::mirror_pieces(g, role, at, n, |_, len, content| {
            if let raidlab_layout::Content::Data(l) = content {
                keys.extend(plan_write(g, &all, l, len)?.locks);
            }
            Ok(())
        })?;
        keys.sort_unstable();
        keys.dedup();
        Ok(keys)
    }

    /// Hold the stripe locks of array range `[pos, pos+n)` (a scrub step): no
    /// write to those stripes runs until the guard is dropped.
    pub fn hold_array_range(&self, pos: u64, n: u64) -> Result<crate::locks::StripeGuard<'_>> {
        let all = vec![true; self.geometry.raid_disks];
        let keys = plan_write(&self.geometry, &all, pos, n)?.locks;
        Ok(self.locks.lock(&keys))
    }

    /// Hold the stripe locks of member range `[at, at+n)` (parity levels: the
    /// stripes there; every member has the same).
    pub fn hold_member_range(&self, at: u64, n: u64) -> Result<crate::locks::StripeGuard<'_>> {
        let keys = self.member_range_keys(0, at, n)?;
        Ok(self.locks.lock(&keys))
    }

    /// The rebuild finished (checkpoint at the end): its target takes the role
    /// (a replaced member leaves). Returns the member volume that left, if any.
    pub fn finish_recovery(&self, rec: &Recovery) -> Result<Option<Arc<dyn Volume>>> {
        let ready = |view: &Membership| {
            view.recovery
                .as_ref()
                .is_some_and(|r| std::ptr::eq(r.as_ref(), rec))
                && rec.done() >= self.geometry.member_bytes
                && !rec.failed()
        };
        let incomplete = || {
            Err(
                Error::invalid("internal: finishing a rebuild that is not complete")
                    .on_device(&self.name),
            )
        };
        if !ready(&self.view()) {
            return incomplete();
        }
        // Held until the target is published as the member: whoever sees
        // `taken_over` (under the turn) also sees the new membership.
        let _turn = rec.handover.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(log) = self.ppl.as_ref().filter(|_| rec.replacing()) {
            if !log.copy_intact(rec.role) {
                rec.failed.store(true, Ordering::Release);
                return Err(Error::new(
                    ErrorKind::Io,
                    Op::Write,
                    "a write to the replacement's partial parity log failed: it cannot take over",
                )
                .on_device(rec.target.name()));
            }
            // The old log stays a copy until the superblocks name the new
            // member (`settle_logs`).
            log.promote_copy(rec.role);
        }
        let mut slot = self.membership.write().unwrap_or_else(|p| p.into_inner());
        let view = slot.clone();
        if !ready(&view) {
            return incomplete();
        }
        rec.taken_over.store(true, Ordering::Release);
        // Writes that planned with the target below its checkpoint used it as a
        // member; from here on it is one.
        let mut next = Membership {
            members: view.members.clone(),
            present: view.present.clone(),
            recovery: None,
        };
        next.members[rec.role] = Some(rec.target.clone());
        next.present[rec.role] = true;
        self.failed[rec.role].store(false, Ordering::Release);
        self.read_errors[rec.role].store(0, Ordering::Relaxed);
        self.corrected[rec.role].store(0, Ordering::Relaxed);
        *slot = Arc::new(next);
        Ok(rec.replaced.clone())
    }

    /// Stop a rebuild (failed, or cancelled): its target leaves; a replaced
    /// member stays in service.
    pub fn abort_recovery(&self) {
        // The log first, without the membership lock (see `Recovery::handover`).
        if let Some(rec) = self.view().recovery.as_ref().filter(|r| r.replacing()) {
            if let Some(log) = &self.ppl {
                log.drop_copy(rec.role);
            }
        }
        let mut slot = self.membership.write().unwrap_or_else(|p| p.into_inner());
        let view = slot.clone();
        let Some(rec) = &view.recovery else {
            return;
        };
        rec.failed.store(true, Ordering::Release);
        let mut next = Membership {
            members: view.members.clone(),
            present: view.present.clone(),
            recovery: None,
        };
        // A replaced member serves alone again; a rebuilt role is missing again.
        next.members[rec.role] = rec.replaced.clone();
        *slot = Arc::new(next);
    }

    /// Where the write `[pos, pos+n)` falls against a running rebuild.
    fn phase(&self, view: &Membership, pos: u64, n: u64) -> Phase {
        let Some(rec) = view
            .recovery
            .as_ref()
            .filter(|r| !r.replacing() && !r.failed())
        else {
            return Phase::None;
        };
        let g = &self.geometry;
        if !g.is_parity() {
            // Mirrors never read a copy to write one: writing the target above
            // its checkpoint is harmless (the rebuild rewrites it under the same
            // locks), so it is always written.
            return Phase::Below;
        }
        let done = rec.done();
        let stripe = g.chunk_bytes * g.data_disks() as u64;
        let (first, last) = (pos / stripe, (pos + n - 1) / stripe);
        if (last + 1) * g.chunk_bytes <= done {
            Phase::Below
        } else if first * g.chunk_bytes >= done {
            Phase::Above
        } else {
            // The rebuild advances in whole chunks.
            Phase::Split(done / g.chunk_bytes * stripe)
        }
    }

    /// Trim one piece of a RAID 0/1/10 array: the member ranges a write there
    /// would write (every live copy, and a rebuild target, which mirrors always
    /// write), under the same locks and write-intent bits.
    fn discard_piece(&self, pos: u64, n: u64) -> Result<()> {
        let view = self.view();
        let mut live = self.live_in(&view);
        if self.phase(&view, pos, n) == Phase::Below {
            if let Some(r) = &view.recovery {
                live[r.role] = true;
            }
        }
        let plan =
            plan_write(&self.geometry, &live, pos, n).map_err(|e| e.on_device(&self.name))?;
        let copies: Vec<(&Arc<dyn Volume>, usize, u64, u64)> = plan
            .writes()
            .filter_map(|op| {
                let m = view.members.get(op.member)?.as_ref()?;
                Some((m, op.member, op.offset, op.length))
            })
            .collect();
        if copies.is_empty() || !copies.iter().all(|(m, ..)| m.discard_zeroes()) {
            return Err(Error::new(
                ErrorKind::Unsupported,
                Op::Discard,
                "a member cannot promise zeros after a trim; the range keeps its data",
            )
            .on_device(&self.name)
            .at(pos, n));
        }
        self.note_intent(&plan, pos, n)?;
        let held = self.locks.lock(&plan.locks);
        if !self.is_current(&view) {
            // The membership changed before the locks were ours (a rebuild
            // began, say): plan with the new one (see `write_piece`).
            drop(held);
            return self.discard_piece(pos, n);
        }
        let mut zeros = Vec::new();
        for (i, (m, role, at, len)) in copies.into_iter().enumerate() {
            let e = match m.discard(at, len) {
                Ok(()) => continue,
                Err(e) => e,
            };
            if i == 0 && e.kind == ErrorKind::Unsupported {
                // Nothing trimmed yet: leave the range as it is rather than
                // turn every trim into writing zeros.
                return Err(e.on_device(&self.name));
            }
            // Keep the copies equal: what the others now read, this one holds.
            zeros.resize(len as usize, 0);
            if m.write_at(&zeros[..len as usize], at).is_err() {
                self.take_out(role, &view);
                if !self.geometry.survives(&self.missing_now()) {
                    return Err(Error::new(
                        ErrorKind::Unrecoverable,
                        Op::Discard,
                        format!("role {role} could be neither trimmed nor zeroed, and the array cannot serve without it"),
                    )
                    .on_device(&self.name)
                    .at(pos, n));
                }
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

    /// Split `[offset, offset+len)` at multiples of the piece size.
    fn pieces(&self, offset: u64, len: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let end = offset + len;
        let mut pos = offset;
        std::iter::from_fn(move || {
            if pos >= end {
                return None;
            }
            let next = ((pos / self.piece) + 1) * self.piece;
            let n = next.min(end) - pos;
            let r = (pos, n);
            pos += n;
            Some(r)
        })
    }
}

/// Flush a rebuild's target (a replacement's is flushed through its tee); one
/// that cannot make its writes durable fails the rebuild, not the array.
fn flush_target(view: &Membership) {
    if let Some(rec) = view.recovery.as_ref().filter(|r| !r.replacing()) {
        if !rec.failed() && rec.target.flush().is_err() {
            rec.failed.store(true, Ordering::Release);
        }
    }
}

/// A read plan's member reads in the order of the caller's buffer, when the plan
/// is nothing but reads that fill `[0, n)` of it end to end; `None` when it
/// computes anything (a degraded read) or uses scratch buffers.
fn stored_reads(plan: &Plan, n: u64) -> Option<Vec<(usize, u64, u64)>> {
    let [crate::plan::Step::Io(ops)] = plan.steps.as_slice() else {
        return None;
    };
    let mut ops: Vec<_> = ops
        .iter()
        .map(|op| {
            (op.kind == OpKind::Read && op.buf.buf == crate::plan::Buf::User).then_some((
                op.buf.offset as u64,
                op.member,
                op.offset,
                op.length,
            ))
        })
        .collect::<Option<_>>()?;
    ops.sort_unstable();
    let mut next = 0u64;
    for &(at, _, _, length) in &ops {
        if at != next {
            return None;
        }
        next += length;
    }
    (next == n).then(|| ops.into_iter().map(|(_, m, o, l)| (m, o, l)).collect())
}

/// The member roles a plan writes.
fn write_roles(plan: &Plan) -> Vec<usize> {
    let mut roles: Vec<usize> = plan.writes().map(|op| op.member).collect();
    roles.sort_unstable();
    roles.dedup();
    roles
}

impl Volume for Array {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn size(&self) -> u64 {
        self.geometry.array_bytes()
    }

    fn block_size(&self) -> u32 {
        4096
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        check_range(&self.name, Op::Read, self.size(), offset, buf.len() as u64)?;
        for (pos, n) in self.pieces(offset, buf.len() as u64) {
            let start = (pos - offset) as usize;
            let piece = &mut buf[start..start + n as usize];
            // A member read error is repaired and the read retried; each retry has
            // one member fewer or a rewritten block, so this ends.
            for attempt in 0.. {
                let view = self.view();
                let plan = self
                    .read_plan(&self.live_in(&view), pos, n)
                    .map_err(|e| e.on_device(&self.name))?;
                let held = self.locks.lock(&plan.locks);
                match self.executor.run(
                    &plan,
                    &view.members,
                    self.engine,
                    UserBuf::Read(&mut *piece),
                    None,
                ) {
                    Ok(()) => break,
                    Err(f) if attempt < self.failed.len() + 3 => {
                        drop(held);
                        self.handle_failure(f, &view, pos, n)?;
                    }
                    Err(f) => return Err(*f.error),
                }
            }
        }
        Ok(())
    }

    /// Where a read's bytes lie when every piece of it is a plain member read
    /// (no parity to compute: every member it needs is live). The membership
    /// snapshot and each piece's stripe locks are held while the sink takes
    /// the piece, as a read through `read_at` holds them.
    fn read_stored(&self, offset: u64, len: u64, sink: &mut StoredSink<'_>) -> Result<bool> {
        check_range(&self.name, Op::Read, self.size(), offset, len)?;
        let view = self.view();
        let live = self.live_in(&view);
        let mut plans = Vec::new();
        for (pos, n) in self.pieces(offset, len) {
            let plan = self
                .read_plan(&live, pos, n)
                .map_err(|e| e.on_device(&self.name))?;
            match stored_reads(&plan, n) {
                Some(ops) => plans.push((plan.locks, ops)),
                None => return Ok(false),
            }
        }
        for (locks, ops) in plans {
            let _held = self.locks.lock(&locks);
            for (member, at, n) in ops {
                let Some(m) = view.members.get(member).and_then(|m| m.as_ref()) else {
                    return Ok(false);
                };
                if !m.read_stored(at, n, sink)? {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        check_range(&self.name, Op::Write, self.size(), offset, buf.len() as u64)?;
        self.refuse_read_only(Op::Write, offset, buf.len() as u64)?;
        if let Some(log) = &self.ppl {
            return self.write_logged(log, buf, offset);
        }
        if let Some(journal) = &self.journal {
            // Journaled writes go one at a time (they already wait for each
            // other's journal flush): the page merge below reads, then writes.
            let _one = journal.serial();
            return self.write_journaled(journal.as_ref(), buf, offset);
        }
        for (pos, n) in self.pieces(offset, buf.len() as u64) {
            let start = (pos - offset) as usize;
            self.write_piece(&buf[start..start + n as usize], pos, Logger::None)?;
        }
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        let view = self.view();
        let live = self.live_in(&view);
        for (r, m) in view.members.iter().enumerate() {
            if let (Some(m), true) = (m, live[r]) {
                if m.flush().is_err() {
                    // A member that cannot make its writes durable is out.
                    self.take_out(r, &view);
                }
            }
        }
        flush_target(&view);
        let missing = self.missing_now();
        if self.geometry.survives(&missing) {
            Ok(())
        } else {
            Err(Error::new(
                ErrorKind::Io,
                Op::Flush,
                format!("flush failed on too many members (roles {missing:?})"),
            )
            .on_device(&self.name))
        }
    }

    /// RAID 0/1/10 whose members in service all read zeros after a trim (a
    /// copy that cannot be trimmed is zeroed instead, so the promise holds).
    fn discard_zeroes(&self) -> bool {
        if self.geometry.is_parity() || self.read_only {
            return false;
        }
        let view = self.view();
        let live = self.live_in(&view);
        view.members
            .iter()
            .zip(live)
            .all(|(m, ok)| !ok || m.as_ref().is_some_and(|m| m.discard_zeroes()))
    }

    /// Forget a range: on RAID 0, 1 and 10 each copy of it is trimmed on its
    /// member, when every member it lies on reads zeros after a trim (holes in
    /// files, memory), so the copies stay equal and a check stays clean. RAID
    /// 4, 5 and 6 ignore trims, as md does unless told the members can be
    /// trusted to return zeros: parity over trimmed blocks could not be
    /// trusted otherwise. A copy whose trim fails is zeroed instead.
    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        check_range(&self.name, Op::Discard, self.size(), offset, len)?;
        if self.geometry.is_parity() {
            return Err(Error::new(
                ErrorKind::Unsupported,
                Op::Discard,
                format!(
                    "{} ignores trims (md's default: parity over trimmed blocks could not be trusted)",
                    self.geometry.level.name()
                ),
            )
            .on_device(&self.name));
        }
        self.refuse_read_only(Op::Discard, offset, len)?;
        for (pos, n) in self.pieces(offset, len) {
            self.discard_piece(pos, n)?;
        }
        Ok(())
    }
    fn is_writable(&self) -> bool {
        !self.read_only
            && self
                .view()
                .members
                .iter()
                .flatten()
                .all(|m| m.is_writable())
    }
}

impl crate::replay::ReplayTarget for Array {
    fn geometry(&self) -> &Geometry {
        Array::geometry(self)
    }
    fn member(&self, role: usize) -> Option<Arc<dyn Volume>> {
        Array::member(self, role)
    }
}
