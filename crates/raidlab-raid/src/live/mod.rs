//! An array in service: the membership changes of [`crate::manage`] (fail,
//! remove, add, replace) and the long runs of [`crate::recovery`] (rebuild,
//! check, repair) carried out while the array keeps serving I/O.
//!
//! The superblocks (the [`Assembly`]) and the running [`Array`] change
//! together. A member leaves the array first and the superblocks second, so no
//! request uses a member the superblocks call faulty; a member joins the
//! superblocks first (as rebuilding) and the array only when its rebuild is
//! complete. A rebuild runs on its own thread, one step at a time, each step
//! under the stripe locks of what it rebuilds ([`Array::recovery_step`]), while
//! writes reach the new member below its checkpoint; a hot spare steps into a
//! failed member's role the same way, with no pause for the clients.
//!
//! Same checks and the same superblock changes as the offline verbs: this module
//! never decides anything they would decide differently.
//!
//! The rebuild's own thread (start, steps, pacing, stop) is in `rebuild.rs`;
//! a reshape in service and the changes that swap the running array in
//! `reshape.rs`; a change of the component size and its resync in
//! `resize.rs`;
//! md's safe mode (dirty only while writes are pending) in `safe_mode.rs`;
//! per-member I/O counters in `stats.rs`.

mod rebuild;
pub use rebuild::rebuild_schedule;
mod reshape;
use reshape::Serving;
mod resize;
mod safe_mode;
mod stats;

pub use safe_mode::{WriteMark, SAFE_MODE_DELAY, SAFE_MODE_POLL};
pub use stats::{
    CountedVolume, Histogram, IoCounters, MemberIo, MemberIoRegistry, MemberIoStatus,
    LATENCY_BOUNDS_US,
};

use crate::array::{Array, Recovery};
use crate::assemble::{Assembly, Device, MemberState};
use crate::badblocks::BadBlockChange;
use crate::manage::{Added, ReAdd};
use crate::recovery::{Progress, RunOptions, ScrubReport};
use raidlab_core::SharedClock;
use raidlab_core::{Error, ErrorKind, Op, Result, Volume};
use serde::Serialize;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

const SECTOR: u64 = 512;
/// Bytes of member area per rebuild step: long enough to stream, short enough
/// that a write waiting on the step's stripe locks waits milliseconds.
pub const REBUILD_STEP: u64 = 1 << 20;
/// Rebuild position saved in the target's superblock at least this often.
const CHECKPOINT: u64 = 64 << 20;

/// A long run as `detail` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct TaskStatus {
    /// "rebuild", "re-add" (only the bitmap's dirty chunks), "replace",
    /// "check", "repair" or "reshape".
    pub kind: String,
    /// The member written (rebuild, replace) or the array (check, repair).
    pub device: String,
    pub role: Option<usize>,
    /// Bytes of each member's data area done, of `total`.
    pub done: u64,
    pub total: u64,
    /// Average since the start of this run.
    pub bytes_per_sec: f64,
    /// Bytes written to the member so far in this run (a re-add writes only
    /// the dirty chunks of what it has done).
    pub written: u64,
    pub running: bool,
    /// Why it stopped, when it did not finish.
    pub error: Option<String>,
    /// When it started, on the array's clock.
    #[serde(skip)]
    started: Duration,
    #[serde(skip)]
    first: u64,
}

impl TaskStatus {
    fn new(
        kind: &str,
        device: String,
        role: Option<usize>,
        from: u64,
        total: u64,
        now: Duration,
    ) -> Self {
        TaskStatus {
            kind: kind.into(),
            device,
            role,
            done: from,
            total,
            bytes_per_sec: 0.0,
            written: 0,
            running: true,
            error: None,
            started: now,
            first: from,
        }
    }

    fn advance(&mut self, done: u64, now: Duration) {
        self.done = done;
        let s = now.saturating_sub(self.started).as_secs_f64();
        if s > 0.0 {
            self.bytes_per_sec = done.saturating_sub(self.first) as f64 / s;
        }
    }

    /// A replacement whose old member left is a rebuild from then on.
    fn follow(&mut self, rec: &Recovery) {
        if self.kind == "replace" && !rec.replacing() {
            self.kind = "rebuild".into();
        }
        self.written = rec.copied();
    }

    /// Percent done.
    pub fn percent(&self) -> f64 {
        if self.total == 0 {
            100.0
        } else {
            self.done as f64 * 100.0 / self.total as f64
        }
    }
}

/// What is running or last ran.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LiveStatus {
    pub rebuild: Option<TaskStatus>,
    pub scrub: Option<TaskStatus>,
    /// A reshape in service (running, or how the last one ended), in array
    /// bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reshape: Option<TaskStatus>,
    /// What the superblocks say about writes (md's safe mode): `clean` when
    /// none is pending, `active` while they are; absent when safe mode is off
    /// (read-only, or a resync is owed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writes: Option<WriteMark>,
    /// A parity array's stripe cache: tunables and what it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stripe_cache: Option<StripeCacheReport>,
    /// The write journal of a running array: md's mode and what it holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub journal: Option<JournalStatus>,
}

/// A running array's write journal, as `detail` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct JournalStatus {
    pub device: String,
    pub mode: crate::journal::JournalMode,
    /// Write-back: stripes whose data is only in the journal now.
    pub stripes_only_in_journal: u64,
    /// Times the ring was full and space was reclaimed.
    pub reclaims: u64,
}

/// The stripe cache of a running array, as `detail` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct StripeCacheReport {
    pub config: crate::stripe_cache::StripeCacheConfig,
    pub stats: crate::stripe_cache::StripeCacheStats,
    /// Write plans that read members: read-modify-write (they read parity)
    /// and reconstruct-write (they read other data).
    pub read_modify_write_plans: u64,
    pub reconstruct_write_plans: u64,
}

struct RebuildTask {
    status: Arc<Mutex<TaskStatus>>,
    /// Asks this rebuild to save its position and stop.
    cancel: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// An assembled array and the running array over it, managed together.
pub struct LiveArray {
    asm: Mutex<Assembly>,
    /// The running array (swapped for the new geometry's at the end of a
    /// reshape in service).
    array: RwLock<Arc<Array>>,
    /// What the clients' requests reach: the running array, or while a
    /// reshape runs, both geometries through its gate (`reshape.rs`).
    serving: Serving,
    /// A reshape under way in service, for `detail`.
    reshape: Mutex<Option<TaskStatus>>,
    rebuild: Mutex<Option<RebuildTask>>,
    scrub: Mutex<Option<TaskStatus>>,
    /// Where the resync of the new space after a served `--size` is owed
    /// from (md's `resync_offset` unit), until it is done (`resize.rs`).
    resync_owed: Mutex<Option<u64>>,
    /// Asks the rebuild thread to save its position and stop (shutdown).
    stop: AtomicBool,
    max_rate: Mutex<Option<u64>>,
    /// What the rebuild's rate limit and safe mode's delay are measured
    /// against (the system clock unless a test gives another).
    clock: Mutex<SharedClock>,
    safe: safe_mode::SafeMode,
    /// What happened outside a poll (members recorded faulty before a dirty
    /// mark), for the next poll to report.
    said: Mutex<Vec<String>>,
    /// Per-member I/O counters, by device path (devices gained while in
    /// service are counted here too).
    io: MemberIoRegistry,
    /// md's bitmap daemon's schedule (`Array::bitmap_daemon_schedule`),
    /// from the first poll on; `poll` runs its passes when due.
    bitmap_daemon: Mutex<Option<crate::long_run::LongRun>>,
    /// The roles the running array had taken out when failures were last
    /// recorded in the superblocks.
    recorded_failed: Mutex<Vec<usize>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether two paths name the same file (as given, or after resolving links
/// and relative parts; the daemon and the command may run in different
/// directories).
fn same_path(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (
        std::fs::canonicalize(Path::new(a)),
        std::fs::canonicalize(Path::new(b)),
    ) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

impl LiveArray {
    /// Manage `array`, the running array of `asm`.
    pub fn new(asm: Assembly, array: Arc<Array>) -> Arc<LiveArray> {
        let live = Arc::new(LiveArray {
            asm: Mutex::new(asm),
            serving: Serving::new(array.clone()),
            array: RwLock::new(array),
            reshape: Mutex::new(None),
            rebuild: Mutex::new(None),
            scrub: Mutex::new(None),
            resync_owed: Mutex::new(None),
            stop: AtomicBool::new(false),
            max_rate: Mutex::new(None),
            clock: Mutex::new(raidlab_core::clock::system()),
            safe: safe_mode::SafeMode::new(),
            said: Mutex::new(Vec::new()),
            io: MemberIoRegistry::default(),
            bitmap_daemon: Mutex::new(None),
            recorded_failed: Mutex::new(Vec::new()),
        });
        // A write that would let go of a log covering a member taken out
        // records it first (`Array::record_take_outs`), as a flush does
        // before it is acknowledged. What recording said, a commit that
        // failed included, comes at the next poll, as for a flush. Weak: the
        // array must not keep its manager alive.
        live.install_recorder(&live.array());
        live
    }

    fn install_recorder(self: &Arc<Self>, array: &Array) {
        let weak = Arc::downgrade(self);
        array.set_recorder(Some(Arc::new(move |_: &Array| {
            if let Some(live) = weak.upgrade() {
                live.record_failures_now();
            }
            Ok(())
        })));
    }

    /// Report the I/O counted by `counted` (the members' volumes were wrapped
    /// with [`MemberIoRegistry::count`] before assembly) in
    /// [`LiveArray::member_io`].
    pub fn count_member_io(&self, counted: &MemberIoRegistry) {
        self.io.adopt(counted);
    }

    /// Each member's I/O since the server started (monotonic counters), for
    /// every member the assembly knows whose I/O is counted.
    pub fn member_io(&self) -> Vec<MemberIoStatus> {
        self.io.statuses(&lock(&self.asm))
    }

    /// Pace rebuilds started from now on against `clock` (tests: a clock whose
    /// sleeps they control, so a rebuild is provably still running).
    pub fn set_clock(&self, clock: SharedClock) {
        *lock(&self.clock) = clock;
    }

    /// Whether `path` names one of the array's members (any state).
    pub fn has_member(&self, path: &str) -> bool {
        lock(&self.asm)
            .members
            .iter()
            .any(|m| same_path(&m.device.path, path))
    }

    /// The running array (the old geometry's while a reshape runs).
    pub fn array(&self) -> Arc<Array> {
        self.array.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Look at the assembly (superblock state) as it is now.
    pub fn with_assembly<T>(&self, f: impl FnOnce(&Assembly) -> T) -> T {
        f(&lock(&self.asm))
    }

    /// Look at the assembly as a change made with the requests held sees
    /// it (`change_running`, a reshape's start): safe mode's own dirty mark
    /// counts as consistent, since the change flushes before it commits.
    pub fn with_assembly_in_service<T>(&self, f: impl FnOnce(&Assembly) -> T) -> T {
        let ours = self.dirty_mark_is_ours();
        lock(&self.asm).in_service(ours, |asm| f(asm))
    }

    /// Change the assembly directly (the server's clean stop, after
    /// [`LiveArray::shutdown`]).
    pub fn with_assembly_mut<T>(&self, f: impl FnOnce(&mut Assembly) -> T) -> T {
        f(&mut lock(&self.asm))
    }

    /// Take the assembly back (after [`LiveArray::shutdown`]).
    pub fn into_assembly(self: Arc<Self>) -> Result<Assembly> {
        match Arc::try_unwrap(self) {
            Ok(l) => Ok(l.asm.into_inner().unwrap_or_else(|p| p.into_inner())),
            Err(_) => Err(Error::invalid(
                "internal: the array is still in use by a management thread",
            )),
        }
    }

    pub fn status(&self) -> LiveStatus {
        LiveStatus {
            rebuild: lock(&self.rebuild)
                .as_ref()
                .map(|t| lock(&t.status).clone()),
            scrub: lock(&self.scrub).clone(),
            reshape: lock(&self.reshape).clone(),
            writes: self.write_mark(),
            stripe_cache: {
                let (cache, rmw, rcw) = self.array().stripe_cache_stats();
                cache.map(|(config, stats)| StripeCacheReport {
                    config,
                    stats,
                    read_modify_write_plans: rmw,
                    reconstruct_write_plans: rcw,
                })
            },
            journal: self.array().journal().map(|j| JournalStatus {
                device: j.device_name(),
                mode: j.mode(),
                stripes_only_in_journal: j.pinned_stripes(),
                reclaims: j.reclaims(),
            }),
        }
    }

    /// Whether a rebuild thread is running.
    pub fn rebuilding(&self) -> bool {
        lock(&self.rebuild)
            .as_ref()
            .is_some_and(|t| lock(&t.status).running)
    }

    fn find(asm: &Assembly, path: &str) -> Result<usize> {
        asm.members
            .iter()
            .position(|m| same_path(&m.device.path, path))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "{path} is not a member of this array (see `raidlab detail`)"
                ))
            })
    }

    /// Record members the running array took out (write errors, too many read
    /// errors) as faulty, and let a hot spare take over; mark the array clean
    /// after a quiet spell (safe mode); run the passes of md's bitmap daemon
    /// that its long run says are due. Returns what changed, for the log. Call it every
    /// [`SAFE_MODE_POLL`] (the daemon does).
    pub fn poll(self: &Arc<Self>) -> Vec<String> {
        let mut asm = lock(&self.asm);
        let mut said = std::mem::take(&mut *lock(&self.said));
        said.extend(self.record_failures(&mut asm));
        said.extend(self.write_bad_blocks(&mut asm));
        if let Err(e) = self.start_pending(&mut asm) {
            said.push(format!("cannot start the rebuild: {e}"));
        }
        said.extend(self.settle(&mut asm));
        said.extend(self.bitmap_daemon());
        said
    }

    /// The passes of md's bitmap daemon over the running array that are
    /// due, by its schedule (`Array::bitmap_daemon_schedule`: every
    /// `daemon_sleep`, the first one period after the first poll). A pass
    /// that cannot write the bitmap is said; the bits stay set, and the next
    /// pass is a period later all the same.
    fn bitmap_daemon(&self) -> Option<String> {
        use crate::long_run::{EachStep, Stepped};
        if self.resync_owed().is_some() {
            // The new space's bits say what the resync still owes (md's
            // NEEDED bits): no pass clears them before it is done.
            return None;
        }
        let clock = lock(&self.clock).clone();
        let mut daemon = lock(&self.bitmap_daemon);
        if daemon.is_none() {
            *daemon = Some(self.array().bitmap_daemon_schedule(clock.now())?);
        }
        let run = daemon.as_mut()?;
        let mut said = None;
        let mut pass = EachStep(|r: std::ops::Range<u64>| {
            if let Err(e) = self.array().bitmap_daemon_pass() {
                said = Some(format!(
                    "the bitmap daemon could not clear idle bits (they stay set): {e}"
                ));
            }
            Ok(Stepped {
                end: r.end,
                work: 0,
            })
        });
        // Nothing here fails: a pass's error is said, not returned.
        let _ = run.run_due(&*clock, &|| false, &mut pass);
        said
    }

    /// Before a flush or a FUA write is acknowledged: record the members the
    /// running array has taken out since the last time, so that a crash
    /// after the acknowledgement cannot assemble a dead member, with data
    /// older than the acknowledged write, as active. What it did is said at
    /// the next poll. Takes the assembly lock only when the array's set of
    /// taken-out members changed.
    pub(super) fn record_failures_now(&self) {
        let taken_out = self.taken_out();
        if *lock(&self.recorded_failed) == taken_out {
            return;
        }
        let mut asm = lock(&self.asm);
        let said = self.record_failures(&mut asm);
        lock(&self.said).extend(said);
    }

    /// The members the running array took out, recorded faulty in the
    /// superblocks (a hot spare takes over).
    fn record_failures(&self, asm: &mut Assembly) -> Vec<String> {
        let taken_out = self.taken_out();
        *lock(&self.recorded_failed) = taken_out.clone();
        let mut outcomes = Vec::new();
        for array in self.in_service() {
            match asm.record_taken_out(&array) {
                Ok(o) => outcomes.extend(o),
                Err(e) => {
                    return vec![format!(
                        "the members of role(s) {taken_out:?} failed, and recording them faulty failed: {e}"
                    )]
                }
            }
        }
        let mut said = Vec::new();
        for crate::manage::TakenOut {
            index: i,
            role,
            outcome,
        } in outcomes
        {
            let path = asm.members[i].device.path.clone();
            let spare = match outcome {
                Ok(spare) => spare,
                Err(e) => {
                    said.push(format!("{path} (role {role}) failed: {e}"));
                    continue;
                }
            };
            said.push(format!("{path} (role {role}) failed and is marked faulty"));
            if let Some(r) = self.carried_on(asm, Some(role)) {
                said.push(r);
            }
            if let Some(s) = spare {
                said.push(format!(
                    "hot spare {} takes role {role}",
                    asm.members[s].device.path
                ));
            }
        }
        said
    }

    /// Write the running array's bad-block changes (ranges it rewrote, ranges
    /// it could not) to the members' logs, then give it the lists as the logs
    /// now hold them. A range a member's log cannot take (full, or no log)
    /// fails the member, as md does. Returns what changed, for the log.
    fn write_bad_blocks(self: &Arc<Self>, asm: &mut Assembly) -> Vec<String> {
        let array = self.array();
        let lists = array.bad_block_lists();
        let changes = lists.take_changes();
        if changes.is_empty() {
            return Vec::new();
        }
        let mut said = Vec::new();
        for c in changes {
            let (role, start, len, good) = match c {
                BadBlockChange::MadeGood { role, start, len } => (role, start, len, true),
                BadBlockChange::Listed { role, start, len } => (role, start, len, false),
            };
            let Some(i) = asm.slots.get(role).copied().flatten() else {
                continue;
            };
            if asm.members[i].state != MemberState::Active {
                // Failed meanwhile (by an earlier change, or taken out).
                continue;
            }
            let path = asm.members[i].device.path.clone();
            let (a, b) = (start, start + len);
            let done = if good {
                asm.clear_bad_blocks(i, start, len).map(|_| true)
            } else {
                asm.list_bad_blocks(i, start, len)
            };
            match done {
                Ok(true) if good => said.push(format!(
                    "{path} (role {role}): bytes {a}..{b} rewritten, dropped from its bad-block log"
                )),
                Ok(true) => said.push(format!(
                    "{path} (role {role}): bytes {a}..{b} could not be rewritten, listed in its bad-block log"
                )),
                Ok(false) | Err(_) if good => {
                    said.push(format!("{path} (role {role}): cannot update its bad-block log"))
                }
                failed => {
                    let why = match failed {
                        Err(e) => e.to_string(),
                        _ => "it keeps no bad-block log".into(),
                    };
                    said.push(format!(
                        "{path} (role {role}): bytes {a}..{b} could not be rewritten nor listed ({why})"
                    ));
                    if self.array().fail_member(role).is_ok() {
                        if let Err(e) = asm.change_running(&self.array(), |a| a.fail(i)) {
                            said.push(format!("{path} (role {role}) failed: {e}"));
                        } else {
                            said.push(format!("{path} (role {role}) failed and is marked faulty"));
                        }
                    }
                }
            }
        }
        match asm.bad_blocks() {
            Ok(b) => lists.set(b),
            Err(e) => said.push(format!("cannot read the bad-block logs back: {e}")),
        }
        said
    }

    /// Mark a member faulty now (it leaves the running array first). A hot
    /// spare, if any, takes its role and is rebuilt in the background.
    pub fn fail(self: &Arc<Self>, path: &str) -> Result<String> {
        self.check_not_reshaping("failing a member")?;
        let (i, state, role) = {
            let asm = lock(&self.asm);
            let i = Self::find(&asm, path)?;
            (i, asm.members[i].state, asm.members[i].role)
        };
        if matches!(state, MemberState::Rebuilding | MemberState::Replacing)
            && role.is_some()
            && self.array().recovery().map(|r| r.role()) == role
        {
            // Outside the assembly lock: the rebuild takes it to stop.
            self.cancel_rebuild();
        }
        let mut asm = lock(&self.asm);
        let label = asm.members[i].device.path.clone();
        if let (MemberState::Active, Some(role)) = (asm.members[i].state, asm.members[i].role) {
            // Refused here when the array could not serve without it: nothing
            // is changed then.
            self.array().fail_member(role)?;
        }
        let spare = asm.change_running(&self.array(), |a| a.fail(i))?;
        let mut out = format!("{label} marked faulty");
        if let Some(r) = self.carried_on(&asm, role) {
            out += &format!("; {r}");
        }
        if let Some(s) = spare {
            out += &format!(
                "; hot spare {} takes its place and is being rebuilt",
                asm.members[s].device.path
            );
        }
        if let Err(e) = self.start_pending(&mut asm) {
            out += &format!("; the rebuild cannot start now: {e}");
        }
        Ok(out)
    }

    /// When the member of `role` just left while a replacement copied it: says
    /// that the replacement carries on as a rebuild.
    fn carried_on(&self, asm: &Assembly, role: Option<usize>) -> Option<String> {
        let rec = self.array().recovery()?;
        if Some(rec.role()) != role || rec.replacing() {
            return None;
        }
        let (index, _) = asm
            .rebuilding()
            .into_iter()
            .find(|&(_, slot)| Some(slot) == role)?;
        Some(format!(
            "its replacement {} carries on as a rebuild of role {} from {:.1}%",
            asm.members[index].device.path,
            rec.role(),
            rec.done() as f64 * 100.0 / asm.geometry.member_bytes.max(1) as f64
        ))
    }

    /// Take a faulty, stale or spare member out of the array.
    pub fn remove(&self, path: &str) -> Result<String> {
        self.check_not_reshaping("removing a member")?;
        let mut asm = lock(&self.asm);
        let i = Self::find(&asm, path)?;
        let label = asm.members[i].device.path.clone();
        asm.change_running(&self.array(), |a| a.remove(i))?;
        Ok(format!("{label} removed from the array"))
    }

    /// Add a device: into a missing role (rebuilt in the background at once
    /// unless `rebuild` is false) or as a hot spare.
    pub fn add(self: &Arc<Self>, device: Device, force: bool, rebuild: bool) -> Result<String> {
        self.check_not_reshaping("adding a member")?;
        let mut asm = lock(&self.asm);
        let device = self.io.count(device);
        let path = device.path.clone();
        let added = asm.change_running(&self.array(), |a| a.add(device, force))?;
        Ok(match added {
            Added::IntoSlot(slot) => {
                if rebuild {
                    if let Err(e) = self.start_pending(&mut asm) {
                        return Ok(format!("{path} added into missing role {slot}; the rebuild cannot start now: {e}"));
                    }
                    format!("{path} added into missing role {slot}; rebuilding in the background (`raidlab detail` shows progress)")
                } else {
                    format!("{path} added into missing role {slot}; start its rebuild with `raidlab rebuild`")
                }
            }
            Added::Spare => format!("{path} added as a hot spare"),
        })
    }

    /// Whether `device`, a former member, can be re-added now (md's re-add):
    /// checks only, against the bitmap as the running array has it.
    pub fn re_add_check(&self, device: &Device) -> Result<ReAdd> {
        let mut asm = lock(&self.asm);
        asm.change_running(&self.array(), |a| a.re_add_check(device))
    }

    /// Re-add a former member into its old role while the array serves
    /// (md's re-add): only the chunks the write-intent bitmap marks dirty
    /// when the rebuild reaches them are rewritten, those the bitmap marked
    /// while it was away and those written since. Refused, with md's reason
    /// and nothing written, when [`LiveArray::re_add_check`] is.
    pub fn re_add(self: &Arc<Self>, device: Device, rebuild: bool) -> Result<String> {
        self.check_not_reshaping("a re-add")?;
        let mut asm = lock(&self.asm);
        let device = self.io.count(device);
        let path = device.path.clone();
        let r = asm.change_running(&self.array(), |a| a.re_add(device))?;
        let what = format!(
            "{path} re-added into its role {} (its events {}, the bitmap cleared at {}; {} dirty chunk(s) to resync)",
            r.slot, r.events, r.events_cleared, r.dirty_chunks
        );
        if !rebuild {
            return Ok(format!("{what}; start its resync with `raidlab rebuild`"));
        }
        if let Err(e) = self.start_pending(&mut asm) {
            return Ok(format!("{what}; the resync cannot start now: {e}"));
        }
        Ok(format!(
            "{what}; resyncing in the background (`raidlab detail` shows progress)"
        ))
    }

    /// Start copying an active member onto a new device while both serve
    /// (md's replace); the new one takes over when the copy is complete.
    pub fn replace(
        self: &Arc<Self>,
        old: &str,
        device: Device,
        force: bool,
        rebuild: bool,
    ) -> Result<String> {
        self.check_not_reshaping("replacing a member")?;
        let mut asm = lock(&self.asm);
        let i = Self::find(&asm, old)?;
        let (label, new) = (asm.members[i].device.path.clone(), device.path.clone());
        if self.array().recovery().is_some() {
            return Err(Error::invalid(
                "a rebuild is running: replace a member after it finishes",
            ));
        }
        let device = self.io.count(device);
        asm.change_running(&self.array(), |a| a.replace(i, device, force))?;
        if rebuild {
            if let Err(e) = self.start_pending(&mut asm) {
                return Ok(format!(
                    "{new} will replace {label}; the copy cannot start now: {e}"
                ));
            }
        }
        Ok(format!("{new} is replacing {label}; copying in the background (`raidlab detail` shows progress)"))
    }

    /// Check (or repair) parity and mirrors while the array serves I/O; each
    /// step holds the stripe locks of what it compares. Refused while a rebuild
    /// runs (md refuses the same: the array is not complete).
    pub fn scrub(
        &self,
        repair: bool,
        opts: RunOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ScrubReport> {
        self.check_not_reshaping("a check or repair")?;
        if self.array().recovery().is_some() {
            return Err(Error::invalid(
                "a rebuild is running: check or repair after it finishes (`raidlab rebuild` waits for it)",
            ));
        }
        if lock(&self.scrub).as_ref().is_some_and(|s| s.running) {
            return Err(Error::invalid("a check or repair is running already"));
        }
        if repair {
            // A repair rewrites members: the superblocks must say dirty
            // while it does (safe mode waits for it as for a write).
            self.begin_write()?;
        }
        let mut copy = lock(&self.asm).clone();
        let total = copy.geometry.member_bytes;
        *lock(&self.scrub) = Some(TaskStatus::new(
            if repair { "repair" } else { "check" },
            "array".into(),
            None,
            0,
            total,
            lock(&self.clock).now(),
        ));
        let result = copy.scrub_running(&self.array(), repair, opts, &mut |p: Progress| {
            if let Some(s) = lock(&self.scrub).as_mut() {
                s.advance(p.done, lock(&self.clock).now());
            }
            progress(p)
        });
        if repair {
            // A repair rewrote listed ranges and dropped them from the logs
            // (and the superblock's flag with the last entry): the running
            // array reads them from the member again, and the superblocks
            // written from now on carry the flag as the repair left it.
            let mut asm = lock(&self.asm);
            for (m, c) in asm.members.iter_mut().zip(&copy.members) {
                let bit = raidlab_md::superblock::feature::BAD_BLOCKS;
                m.sb.feature_map = (m.sb.feature_map & !bit) | (c.sb.feature_map & bit);
            }
            if let Ok(b) = asm.bad_blocks() {
                self.array().bad_block_lists().set(b);
            }
        }
        if let Some(s) = lock(&self.scrub).as_mut() {
            s.running = false;
            if let Err(e) = &result {
                s.error = Some(e.to_string());
            }
        }
        if repair {
            self.end_write();
        }
        result
    }

    /// Stop background work, saving a rebuild's position in its superblock.
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::Release);
        self.cancel_rebuild();
        self.stop_reshape();
    }
}

impl std::fmt::Debug for LiveArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveArray")
            .field("array", &self.array())
            .field("status", &self.status())
            .finish()
    }
}
