//! The one interface every simulated block device has: disks, SSDs, a RAID card and
//! raidlab's own arrays over simulated members all look alike to a workload.
//!
//! Decides: nothing about any device. It fixes the contract between a device and
//! whoever drives it (a workload, or an array above it): requests are submitted at a
//! virtual time, the device says when it next has something to do, and the driver
//! advances it to exactly that time to collect completions. Time is virtual
//! nanoseconds; nothing here may read the wall clock or a random source, so the same
//! submissions always give the same completions.

use raidlab_core::IoKind;
use std::fmt::Debug;

/// Virtual time in nanoseconds since the start of a run.
pub type Ns = u64;

/// Nanoseconds per microsecond, millisecond and second, to keep unit conversions
/// readable.
pub const US: Ns = 1_000;
pub const MS: Ns = 1_000_000;
pub const SEC: Ns = 1_000_000_000;

/// One request to a device: `len` bytes at byte `offset`. `id` is chosen by the
/// submitter and comes back in the completion; it must be unique among the
/// submitter's requests in flight on this device.
///
/// Kinds: no modelled disk, SSD or card has a write-zeroes command, so each
/// serves [`IoKind::Zero`] as a write of `len` bytes (what Linux falls back to
/// for a device without one); a trim is whatever the model says it costs
/// (nothing on a disk). An array or cache over a volume hands a write-zeroes to
/// the engine's own `write_zeroes`, which may answer "unsupported" as an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub id: u64,
    pub kind: IoKind,
    pub offset: u64,
    pub len: u64,
    /// The host process that issued it, for a host I/O scheduler that serves
    /// processes in turn ([`crate::sched`]); devices themselves ignore it. A
    /// workload's thread `t` is process `t`; an array passes a host read's
    /// process on to its member reads and issues the rest as [`MD_THREAD`].
    pub process: u32,
}

/// The process of member I/O an array issues on its own behalf (md's raid5d
/// thread: parity writes and their reads, write-outs, rebuild steps).
pub const MD_THREAD: u32 = u32::MAX;

/// A finished request: its id and the virtual time it completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    pub id: u64,
    pub at: Ns,
}

/// One named parameter of a model, with its unit and where its value comes from,
/// for `raidlab sim devices`, `sim show` and the result JSON.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Param {
    pub name: String,
    pub value: f64,
    pub unit: String,
}

impl Param {
    pub fn new(name: &str, value: f64, unit: &str) -> Param {
        Param {
            name: name.into(),
            value,
            unit: unit.into(),
        }
    }
}

/// What a device is, for people: its model's name, its parameters and sources.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ModelInfo {
    /// e.g. "hdd", "ssd", "raid-card", "raidlab array".
    pub model: String,
    /// The preset's or the configuration's name.
    pub name: String,
    pub params: Vec<Param>,
    /// Where the parameter values come from (datasheets, reviews, papers).
    pub sources: Vec<String>,
    /// Devices underneath (members of an array, disks behind a card).
    pub parts: Vec<ModelInfo>,
}

impl ModelInfo {
    /// A single device (no parts).
    pub fn device(model: &str, name: &str, params: Vec<Param>, sources: Vec<String>) -> ModelInfo {
        ModelInfo {
            model: model.into(),
            name: name.into(),
            params,
            sources,
            parts: Vec::new(),
        }
    }
}

/// Move the completions due by `now` from `pending` to `done` (for devices that
/// know a completion's time before it is due).
/// The order among them is kept: it decides which request is resubmitted first.
pub fn hand_out(pending: &mut Vec<Completion>, now: Ns, done: &mut Vec<Completion>) {
    pending.retain(|c| {
        let due = c.at <= now;
        if due {
            done.push(*c);
        }
        !due
    });
}

/// A simulated block device.
///
/// The driver's side of the contract, which every implementation may rely on:
/// - virtual time never goes back: every `now` passed in is at least the previous;
/// - before `submit(now, ..)` the driver has called `advance(t, ..)` for every
///   `t = next_event()` that is at most `now`, so the device has nothing overdue;
/// - `advance(now, ..)` is called with `now` equal to `next_event()` (the driver
///   may also call it at a submission time; the device then does what is due).
///
/// The device's side: `next_event` is `None` only when no request is in flight
/// and no internal work (destaging a cache, garbage collection) is pending, and
/// every submitted request completes exactly once, at a time no earlier than its
/// submission.
pub trait Device: Debug + Send {
    /// Usable capacity in bytes.
    fn capacity(&self) -> u64;
    /// Accept a request at virtual time `now`. Requests past the end are a bug of
    /// the driver (the workload and the array keep inside the capacity).
    fn submit(&mut self, now: Ns, req: Request);
    /// The earliest virtual time at which the device has something to do.
    fn next_event(&self) -> Option<Ns>;
    /// Do everything due at or before `now`, pushing the requests that complete.
    fn advance(&mut self, now: Ns, done: &mut Vec<Completion>);
    /// The model and its parameters.
    fn info(&self) -> ModelInfo;
    /// Counters of member operations below this device, when it has members
    /// (arrays and cards); `None` for a single device.
    fn member_ops(&self) -> Option<&crate::stats::OpLog> {
        None
    }
    /// How far a rebuild running below this device got, when one runs.
    fn rebuild_progress(&self) -> Option<crate::array::RebuildProgress> {
        None
    }
    /// What the faults of an array below this device did, when it has some.
    fn fault_report(&self) -> Option<crate::faults::report::FaultReport> {
        None
    }
    /// How far a scrub running below this device got, when one runs.
    fn scrub_progress(&self) -> Option<crate::scrub::ScrubProgress> {
        None
    }
    /// The largest request its queue takes, in bytes (Linux's max_sectors_kb),
    /// when the model knows one: the host's plug merges no request past it
    /// ([`crate::host::HostCost::plug_merge`]). 0: none known.
    fn max_request_bytes(&self) -> u64 {
        0
    }
}

/// Virtual time as the real engine's and cache's `Clock`: moved only by the
/// simulator (`set`), so what they time (a stripe's hold, a cleaner's pace)
/// runs on the simulation's clock. One per simulated array or cache, and the
/// equivalence tests replay the same times on the real side with one.
#[derive(Debug, Default)]
pub struct VirtualClock(std::sync::atomic::AtomicU64);

impl VirtualClock {
    pub fn set(&self, now: Ns) {
        self.0.store(now, std::sync::atomic::Ordering::Relaxed);
    }
}

impl raidlab_devices::Clock for VirtualClock {
    fn now(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.0.load(std::sync::atomic::Ordering::Relaxed))
    }
    fn sleep(&self, d: std::time::Duration) {
        // A task (the engine run live, `array::TaskArray`; the cache tier's
        // cleaner, `cache::SimCache`) sleeps in virtual time: the simulator
        // resumes it when its clock gets there.
        if crate::array::sleep_in_task(self, d) {
            return;
        }
        // Otherwise nothing the simulator runs sleeps: the engine's threads
        // run as tasks. Should a thread sleep on it, a short
        // real pause keeps it from spinning; moving the clock here would let
        // a thread's timing into a run.
        std::thread::sleep(d.min(std::time::Duration::from_millis(10)));
    }
}
