//! What a benchmark runs against, opened the way the benchmark needs it.
//!
//! A target is named by one string:
//! - a directory: a test file `raidlab-bench-<pid>-<n>.tmp` is created there and removed
//!   when the target is dropped;
//! - a regular file (created if missing, grown to the test size if smaller; its
//!   contents are overwritten, as fio does);
//! - a block device (write tests only with [`OpenOptions::allow_device_writes`]:
//!   they destroy what the device holds);
//! - `array:M0,M1,...[,bw=RATE][,iops=N]`: a raidlab array given by its members, assembled and run in
//!   this process (marked dirty while written, clean after a flush, as `import` does);
//!   with `bw=`/`iops=`, each member behind a [`ThrottleVolume`] of those limits
//!   (HDD-like members on any machine); an element with `=` is an option, not a member;
//! - `cache:CACHEDEV[,bw=RATE][,iops=N]@ORIGIN`: a raidlab cache (made by `raidlab cache create`) on
//!   the file or device CACHEDEV (optionally throttled) in front of ORIGIN, itself a file, a block
//!   device or `array:...` target; run in this process, stopped cleanly by
//!   [`Target::finish`], its statistics in [`Target::cache_stats`];
//! - `mem:SIZE[,bw=RATE][,iops=N]`: memory, optionally behind a [`ThrottleVolume`]
//!   (for the harness ceiling and known-answer runs);
//! - `sim:SPEC`: simulated hardware in virtual time (raidlab-sim): a device
//!   preset, `LEVEL:NxPRESET[:OPTION...]` (raidlab's engine on simulated members,
//!   optionally behind a RAID card), or a `.toml` configuration; every figure is
//!   virtual and the label says "simulated" (see [`crate::sim`]);
//! - `nbd://HOST[:PORT]/EXPORT` or `nbd+unix:///EXPORT?socket=PATH`: an export of
//!   any NBD server, through raidlab's NBD client (one connection per benchmark
//!   thread when the server allows several, each with the queue depth's
//!   requests in flight, as fio's nbd engine runs a job).
//!
//! Files and devices are opened with O_DIRECT by default, so the page cache does not
//! measure itself; where the file system refuses O_DIRECT (tmpfs) the target says
//! so in [`Target::notes`] and runs buffered.
//!
//! [`ThrottleVolume`]: raidlab_devices::ThrottleVolume

mod array;
mod cache;
mod memory;
mod nbd;
mod path;

pub use array::{create_array, open_member_file};

use array::{open_array, ArrayHold};
use cache::{open_cache, CacheHold};
use memory::{open_memory, open_sim};
use nbd::{open_nbd, Lanes};
use path::open_path;
use raidlab_cache::OriginId;
use raidlab_core::{Error, ErrorKind, Op, Result, Volume};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How to open a target.
#[derive(Debug, Clone, Copy)]
pub struct OpenOptions {
    /// Bytes the test needs (the test file's size; capped by a device's size;
    /// 0: all of an existing file, device or array).
    pub size: u64,
    /// O_DIRECT for files and devices (false: through the page cache).
    pub direct: bool,
    /// The tests will write.
    pub writes: bool,
    /// Writing a block device is allowed (it destroys its contents).
    pub allow_device_writes: bool,
}

/// What kind of thing a target is, for reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    File,
    Directory,
    BlockDevice,
    Array,
    Memory,
    Nbd,
    Cache,
    Simulated,
}

/// An opened target. `volume` serves every engine; `file` is the raw descriptor
/// io_uring uses when there is one.
pub struct Target {
    pub label: String,
    pub kind: TargetKind,
    pub volume: Arc<dyn Volume>,
    pub file: Option<Arc<File>>,
    pub direct: bool,
    /// Bytes the tests use, from offset 0.
    pub size: u64,
    /// Things a person should know about how the target was opened.
    pub notes: Vec<String>,
    /// The test region may hold holes (a file this open created or grew), so a
    /// read test must write it first or it would measure holes.
    pub fresh: bool,
    remove_on_drop: Option<PathBuf>,
    array: Mutex<Option<ArrayHold>>,
    /// What a cache in front of this target would have to be bound to.
    identity: Option<OriginId>,
    cache: Mutex<Option<CacheHold>>,
    /// A simulated target's device and virtual clock; the engine runs workloads
    /// on it instead of doing I/O.
    pub sim: Option<Arc<crate::sim::SimTarget>>,
    /// An NBD export's connections, one per benchmark thread (see
    /// [`Target::thread_volume`]).
    lanes: Lanes,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("label", &self.label)
            .field("kind", &self.kind)
            .field("direct", &self.direct)
            .field("size", &self.size)
            .finish()
    }
}

impl Target {
    /// A volume already built by the caller (tests, `raidlab bench` with no target).
    pub fn from_volume(
        label: impl Into<String>,
        volume: Arc<dyn Volume>,
        size: u64,
    ) -> Result<Self> {
        let label = label.into();
        let size = usable(&label, volume.size(), size)?;
        Ok(Target {
            label,
            kind: TargetKind::Memory,
            volume,
            file: None,
            direct: false,
            size,
            notes: Vec::new(),
            fresh: false,
            remove_on_drop: None,
            array: Mutex::new(None),
            identity: None,
            cache: Mutex::new(None),
            sim: None,
            lanes: Lanes::default(),
        })
    }

    /// Open a target named as described in the module documentation.
    pub fn open(spec: &str, opts: OpenOptions) -> Result<Self> {
        if spec.starts_with("nbd://") || spec.starts_with("nbd+unix://") {
            return open_nbd(spec, opts);
        }
        if let Some(list) = spec.strip_prefix("array:") {
            return open_array(spec, list, opts);
        }
        if let Some(rest) = spec.strip_prefix("mem:") {
            return open_memory(spec, rest, opts);
        }
        if let Some(rest) = spec.strip_prefix("cache:") {
            return open_cache(spec, rest, opts);
        }
        if let Some(rest) = spec.strip_prefix("sim:") {
            return open_sim(spec, rest, opts);
        }
        open_path(spec, Path::new(spec), opts)
    }

    /// Flush, and for an array record a clean stop in its superblocks. Call once
    /// after the last test; an error here means written data may not be durable.
    pub fn finish(&self) -> Result<()> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = cache {
            // A clean stop: the next open needs no recovery and keeps the
            // cache warm; then the origin's own clean stop, whatever the
            // cache's said (an origin array left dirty is resynced whole).
            let stopped = h.stack.stop();
            let origin = h.origin.finish();
            if let Some(e) = stopped.cleaner_error {
                return Err(e);
            }
            stopped.shutdown?;
            return origin;
        }
        self.volume.flush()?;
        let mut hold = self.array.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(ArrayHold(started)) = hold.take() {
            if let Some(path) = started.stop()?.into_iter().next() {
                return Err(Error::new(
                    ErrorKind::Io,
                    Op::Write,
                    "a member failed during the benchmark and is now marked faulty: the array is degraded (see `raidlab detail`)",
                )
                .on_device(path));
            }
        }
        Ok(())
    }
}

/// Monotonic time since the first call in this process: the clock of every
/// target that is not simulated, and of tests that touch no target (Bonnie++'s
/// file tests).
pub fn monotonic_now() -> Duration {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed()
}

impl Target {
    /// The time this target's tests are timed by, from an arbitrary origin:
    /// virtual time for a simulated target (its figures must never depend on
    /// this machine's speed, so a flush or a read-modify-write done outside the
    /// engine counts the model's time), monotonic time otherwise. Every suite
    /// times its tests by this, never by `Instant` directly.
    pub fn now(&self) -> Duration {
        match &self.sim {
            Some(sim) => sim.now(),
            None => monotonic_now(),
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.finish();
        if let Some(p) = self.remove_on_drop.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The bytes a test may use: what was asked, or all of a smaller device; all of
/// it when nothing was asked (0).
fn usable(name: &str, volume_size: u64, wanted: u64) -> Result<u64> {
    let want = if wanted == 0 { volume_size } else { wanted };
    let size = want.min(volume_size) / 4096 * 4096;
    if size == 0 {
        return Err(Error::invalid(format!(
            "{volume_size} bytes is too small to benchmark: a target needs at least 4096 bytes (give a test size to make a test file)"
        ))
        .on_device(name));
    }
    Ok(size)
}
