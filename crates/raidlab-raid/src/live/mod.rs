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
//! `resize.rs`; md's `--array-size` (what the clients may address) in
//! `array_size.rs`;
//! md's safe mode (dirty only while writes are pending) in `safe_mode.rs`;
//! per-member I/O counters in `stats.rs`; the membership verbs in
//! `members.rs`; what the server runs between requests in `poll.rs`; what
//! `detail` shows in `status.rs`.

mod rebuild;
pub use rebuild::rebuild_schedule;
mod reshape;
use reshape::Serving;
mod members;
mod poll;
pub use poll::drive_polls;
mod resize;
pub use array_size::ArraySizeChange;
mod array_size;
mod safe_mode;
mod stats;
mod status;
pub use status::{JournalStatus, LiveStatus, StripeCacheReport, TaskStatus};

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
                let array = self.array();
                let (cache, rmw, rcw) = array.stripe_cache_stats();
                let (kept_rows_now, kept_row_fills) = array.kept_counts().unwrap_or((0, 0));
                cache.map(|(config, stats)| StripeCacheReport {
                    config,
                    stats,
                    read_modify_write_plans: rmw,
                    reconstruct_write_plans: rcw,
                    kept_rows_now,
                    kept_row_fills,
                })
            },
            journal: self.array().journal().map(|j| JournalStatus {
                device: j.device_name(),
                mode: j.mode(),
                stripes_only_in_journal: j.pinned_stripes(),
                reclaims: j.reclaims(),
            }),
            array_size_cut_bytes: self.array_size_cut(),
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
        // A reshape recorded but not running (served read-only, or its
        // walk could not resume): refused before anything is marked.
        let (verb, op) = if repair {
            ("repair", raidlab_core::Op::Write)
        } else {
            ("check", raidlab_core::Op::Read)
        };
        lock(&self.asm).refuse_scrub_mid_reshape(verb, op)?;
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
