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

use raidlab_cache::{BackgroundCleaner, CachedVolume, OriginId};
use raidlab_core::size::parse_size;
use raidlab_core::{check_range, Error, ErrorKind, Op, Result, Volume};
use raidlab_devices::{FileVolume, Limits, MemVolume, OpenMode, SystemClock, ThrottleVolume};
use raidlab_raid::assemble::{Assembly, Device};
use raidlab_raid::lifecycle::{StartOptions, Started};
use std::fs::File;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
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

/// An NBD target's first connection and the ones opened for more benchmark
/// threads, kept for the target's life so each test does not reconnect.
#[derive(Default)]
struct Lanes {
    first: Option<Arc<raidlab_nbd::client::NbdVolume>>,
    more: Mutex<Vec<Arc<dyn Volume>>>,
}

type Cached = CachedVolume<Arc<dyn Volume>, Arc<dyn Volume>>;

/// A cache target: the cached volume and the origin target under it, stopped
/// in that order.
struct CacheHold {
    cached: Arc<Cached>,
    origin: Box<Target>,
    /// Background cleaning while the tests write, as a served cache would run.
    cleaner: Option<BackgroundCleaner>,
}

/// An array started for writing, stopped cleanly by [`Target::finish`].
struct ArrayHold(Started);

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
            if let Some(report) = h.cleaner.map(BackgroundCleaner::stop) {
                if let Some(e) = report.error {
                    return Err(e);
                }
            }
            // A clean stop: the next open needs no recovery and keeps the
            // cache warm; then the origin's own clean stop.
            h.cached.shutdown()?;
            return h.origin.finish();
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

    /// The volume benchmark thread `t` drives. An NBD export that allows several
    /// connections gives each thread its own connection (opened on first use),
    /// as fio's nbd engine gives each job its own, so "T threads at queue depth
    /// Q" is T connections with Q requests in flight each, the load fio's
    /// `numjobs=T iodepth=Q` puts on the server; an export that does not allow
    /// several shares one connection. Every other target: the one volume.
    pub fn thread_volume(&self, t: usize) -> Result<Arc<dyn Volume>> {
        let Some(first) = &self.lanes.first else {
            return Ok(self.volume.clone());
        };
        if t == 0 || !first.allows_multi_conn() {
            return Ok(self.volume.clone());
        }
        let mut more = self.lanes.more.lock().unwrap_or_else(|p| p.into_inner());
        while more.len() < t {
            more.push(Arc::new(first.another()?));
        }
        Ok(more[t - 1].clone())
    }

    /// A cache target's statistics (None for other targets, or once finished).
    pub fn cache_stats(&self) -> Option<raidlab_cache::Stats> {
        let hold = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        hold.as_ref().map(|h| h.cached.stats())
    }
}

fn open_cache(spec: &str, rest: &str, opts: OpenOptions) -> Result<Target> {
    let Some((dev, origin_spec)) = rest.split_once('@') else {
        return Err(Error::invalid(
            "write cache:CACHEDEV@ORIGIN, e.g. cache:ssd.img@array:m0,m1,m2 (the cache made by `raidlab cache create`)",
        )
        .on_device(spec));
    };
    if origin_spec.starts_with("cache:")
        || origin_spec.starts_with("mem:")
        || origin_spec.starts_with("nbd")
    {
        return Err(Error::invalid(
            "a cache target's origin is a file, a block device or an array:... target",
        )
        .on_device(spec));
    }
    if Path::new(origin_spec).is_dir() {
        return Err(Error::invalid(
            "a cache target's origin must be an existing file, block device or array (not a directory)",
        )
        .on_device(spec));
    }
    // The whole origin: a cache covers all of it, and the test region is
    // chosen below, on the cached volume.
    let origin = Target::open(origin_spec, OpenOptions { size: 0, ..opts })?;
    let Some(id) = origin.identity else {
        return Err(Error::invalid(
            "a cache target's origin must be an existing file, block device or array (not a directory)",
        )
        .on_device(spec));
    };
    let mut dev_parts = dev.split(',');
    let dev = dev_parts.next().unwrap_or("");
    let limits = throttle_limits(
        spec,
        dev_parts,
        "cache:CACHEDEV[,bw=RATE][,iops=N]@ORIGIN (the cache device throttled), e.g. cache:ssd.img,bw=500M,iops=50000@array:a.img,b.img,c.img,bw=150M,iops=150",
    )?;
    let cache = throttled(
        spec,
        FileVolume::open(Path::new(dev), OpenMode::ReadWrite)?,
        limits,
    )?;
    let cached = CachedVolume::open(
        cache,
        origin.volume.clone(),
        id,
        Arc::new(SystemClock::default()),
    )
    .map_err(|e| e.on_device(spec))?;
    // Real devices: a write-back's next read overlaps this write.
    cached.set_overlapped_writeback(true);
    let cached = Arc::new(cached);
    let size = usable(spec, cached.size(), opts.size)?;
    let sb = cached.superblock();
    let mut notes = origin.notes.clone();
    notes.push(format!(
        "cache on {dev} ({} blocks of {} bytes, {:?}) in front of {origin_spec}; the cache device goes through the page cache; background cleaning runs while the tests do (dirty target {}%, rate {})",
        sb.layout.cache_blocks,
        sb.block_size,
        sb.mode,
        sb.dirty_target_pct,
        if sb.clean_rate == 0 { "unlimited".to_string() } else { format!("{} bytes/s", sb.clean_rate) }
    ));
    if limits != Limits::unlimited() {
        notes.push(format!(
            "the cache device throttled to {}",
            describe_limits(limits)
        ));
    }
    let cleaner = opts
        .writes
        .then(|| BackgroundCleaner::start(cached.clone(), raidlab_cache::driver::DEFAULT_INTERVAL));
    Ok(Target {
        label: spec.to_string(),
        kind: TargetKind::Cache,
        volume: cached.clone(),
        file: None,
        direct: false,
        size,
        notes,
        fresh: false,
        remove_on_drop: None,
        array: Mutex::new(None),
        identity: None,
        cache: Mutex::new(Some(CacheHold {
            cached,
            origin: Box::new(origin),
            cleaner,
        })),
        sim: None,
        lanes: Lanes::default(),
    })
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

fn open_nbd(spec: &str, opts: OpenOptions) -> Result<Target> {
    let v = raidlab_nbd::client::NbdVolume::connect(spec)?;
    if opts.writes && !v.is_writable() {
        return Err(Error::new(
            ErrorKind::ReadOnly,
            Op::Open,
            "the server exports this read-only: run the read tests only",
        )
        .on_device(spec));
    }
    let info = v.info();
    let multi = v.allows_multi_conn();
    let v = Arc::new(v);
    let mut t = Target::from_volume(spec, v.clone(), opts.size)?;
    t.kind = TargetKind::Nbd;
    t.lanes.first = Some(v);
    t.notes.push(format!(
        "NBD export of {} bytes through raidlab's NBD client: {}, as fio's nbd engine does; the server decides whether its own storage is cached",
        info.size,
        if multi {
            "one connection per benchmark thread, the queue depth's requests in flight on each"
        } else {
            "one connection (the server does not allow several) carrying every thread's requests in flight"
        }
    ));
    Ok(t)
}

/// The `bw=RATE` and `iops=N` options of a target (`usage` says how the
/// target is written, for the error); unlimited when there are none.
fn throttle_limits<'a>(
    spec: &str,
    options: impl Iterator<Item = &'a str>,
    usage: &str,
) -> Result<Limits> {
    let mut limits = Limits::unlimited();
    for p in options {
        match p.split_once('=') {
            Some(("bw", v)) => {
                limits.bytes_per_sec = Some(parse_size(v).map_err(|e| e.on_device(spec))?)
            }
            Some(("iops", v)) => {
                limits.iops = Some(v.parse().map_err(|_| {
                    Error::invalid(format!(
                        "iops={v} is not a whole number of requests per second"
                    ))
                    .on_device(spec)
                })?)
            }
            _ => {
                return Err(Error::invalid(format!(
                    "'{p}' is not a target option here: write {usage}"
                ))
                .on_device(spec))
            }
        }
    }
    Ok(limits)
}

/// `volume` behind a throttle of `limits`, or as it is when they are none.
fn throttled<V: Volume + 'static>(
    spec: &str,
    volume: V,
    limits: Limits,
) -> Result<Arc<dyn Volume>> {
    Ok(if limits == Limits::unlimited() {
        Arc::new(volume)
    } else {
        Arc::new(ThrottleVolume::new(volume, limits).map_err(|e| e.on_device(spec))?)
    })
}

fn open_memory(spec: &str, rest: &str, opts: OpenOptions) -> Result<Target> {
    let mut parts = rest.split(',');
    let size = parse_size(parts.next().unwrap_or("")).map_err(|e| e.on_device(spec))?;
    let limits = throttle_limits(
        spec,
        parts,
        "mem:SIZE[,bw=RATE][,iops=N], e.g. mem:256M,bw=100M",
    )?;
    if size > (64 << 30) {
        return Err(Error::invalid("a memory target is limited to 64G").on_device(spec));
    }
    let volume = throttled(spec, MemVolume::new(size), limits)?;
    let mut t = Target::from_volume(spec, volume, opts.size)?;
    t.kind = TargetKind::Memory;
    Ok(t)
}

fn open_sim(spec: &str, rest: &str, opts: OpenOptions) -> Result<Target> {
    let sim = Arc::new(crate::sim::SimTarget::open(rest)?);
    let volume: Arc<dyn Volume> = Arc::new(crate::sim::SimVolume(sim.clone()));
    let mut t = Target::from_volume(format!("{spec} (simulated)"), volume, opts.size)?;
    t.kind = TargetKind::Simulated;
    t.notes.push(format!(
        "simulated in virtual time: {}; block level, no file system; figures are the model's, the same on every machine",
        sim.describe
    ));
    t.sim = Some(sim);
    Ok(t)
}

fn open_array(spec: &str, list: &str, opts: OpenOptions) -> Result<Target> {
    let (options, paths): (Vec<&str>, Vec<&str>) = list
        .split(',')
        .filter(|s| !s.is_empty())
        .partition(|s| s.contains('='));
    let limits = throttle_limits(
        spec,
        options.into_iter(),
        "array:MEMBER,MEMBER,...[,bw=RATE][,iops=N] (each member throttled), e.g. array:a.img,b.img,c.img,bw=150M,iops=150",
    )?;
    if paths.is_empty() {
        return Err(Error::invalid(
            "no members given: write array:MEMBER,MEMBER,... (the member files or devices of one array, any order)",
        )
        .on_device(spec));
    }
    let mode = if opts.writes {
        OpenMode::ReadWrite
    } else {
        OpenMode::ReadOnly
    };
    let mut devices = Vec::new();
    for p in paths {
        let v = FileVolume::open(Path::new(p), mode)?;
        devices.push(Device {
            path: p.to_string(),
            volume: throttled(spec, v, limits)?,
        });
    }
    let asm = Assembly::assemble(devices).map_err(|e| e.on_device(spec))?;
    let uuid = asm.uuid;
    // The same start as serve and import: logs replayed and started before
    // the first write, md's refusals, the array marked dirty while written.
    let started = Started::start(
        asm,
        StartOptions {
            write: opts.writes,
            ..StartOptions::default()
        },
    )
    .map_err(|e| e.on_device(spec))?;
    let array = started.array.clone();
    let hold = opts.writes.then_some(ArrayHold(started));
    let size = usable(spec, array.size(), opts.size)?;
    Ok(Target {
        label: spec.to_string(),
        kind: TargetKind::Array,
        volume: array,
        file: None,
        direct: false,
        size,
        notes: {
            let mut notes = vec!["array members are opened through the page cache (raidlab's FileVolume), as `raidlab import` uses them".to_string()];
            if limits != Limits::unlimited() {
                notes.push(format!(
                    "each member throttled to {}",
                    describe_limits(limits)
                ));
            }
            notes
        },
        fresh: false,
        remove_on_drop: None,
        array: Mutex::new(hold),
        identity: Some(OriginId::ArrayUuid(uuid)),
        cache: Mutex::new(None),
        sim: None,
        lanes: Lanes::default(),
    })
}

static NEXT_TEST_FILE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn open_path(spec: &str, path: &Path, opts: OpenOptions) -> Result<Target> {
    let meta = std::fs::metadata(path);
    let (file_path, kind, remove) = match &meta {
        Ok(m) if m.is_dir() => (
            // Unique per open: fio clones and several targets may share a directory.
            path.join(format!(
                "raidlab-bench-{}-{}.tmp",
                std::process::id(),
                NEXT_TEST_FILE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            )),
            TargetKind::Directory,
            true,
        ),
        Ok(m) if m.file_type().is_block_device() => {
            if opts.writes && !opts.allow_device_writes {
                return Err(Error::new(
                    ErrorKind::ReadOnly,
                    Op::Open,
                    "this is a block device and the tests write to it, which destroys its contents: give --write-device to allow that, or benchmark a file on it",
                )
                .on_device(spec));
            }
            (path.to_path_buf(), TargetKind::BlockDevice, false)
        }
        Ok(m) if m.is_file() => (path.to_path_buf(), TargetKind::File, false),
        Ok(_) => {
            return Err(Error::new(
                ErrorKind::Invalid,
                Op::Open,
                "not a file, directory or block device",
            )
            .on_device(spec))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            (path.to_path_buf(), TargetKind::File, false)
        }
        Err(e) => {
            return Err(Error::io(
                Op::Open,
                spec,
                std::io::Error::new(e.kind(), e.to_string()),
            ))
        }
    };
    let name = file_path.display().to_string();
    let mut notes = Vec::new();
    let open = |direct: bool| {
        let mut o = std::fs::OpenOptions::new();
        o.read(true)
            .write(opts.writes || kind != TargetKind::BlockDevice);
        if kind != TargetKind::BlockDevice {
            o.create(true);
        }
        if direct {
            o.custom_flags(libc::O_DIRECT);
        }
        o.open(&file_path)
    };
    let (file, direct) = match open(opts.direct) {
        Ok(f) => (f, opts.direct),
        // tmpfs and some FUSE file systems refuse O_DIRECT with EINVAL.
        Err(e) if opts.direct && e.raw_os_error() == Some(libc::EINVAL) => {
            notes.push(format!(
                "{name}: the file system refuses O_DIRECT, so this target runs through the page cache"
            ));
            (
                open(false).map_err(|e| Error::io(Op::Open, &name, e))?,
                false,
            )
        }
        Err(e) => return Err(Error::io(Op::Open, &name, e)),
    };
    let remove_on_drop = remove.then(|| file_path.clone());
    let mut fresh = false;
    let size = if kind == TargetKind::BlockDevice {
        let mut f = &file;
        std::io::Seek::seek(&mut f, std::io::SeekFrom::End(0))
            .map_err(|e| Error::io(Op::Open, &name, e))?
    } else {
        let have = file
            .metadata()
            .map_err(|e| Error::io(Op::Open, &name, e))?
            .len();
        if have < opts.size {
            fresh = true;
            if let Err(e) = file.set_len(opts.size) {
                if let Some(p) = &remove_on_drop {
                    let _ = std::fs::remove_file(p);
                }
                return Err(Error::io(Op::Write, &name, e).at(0, opts.size));
            }
        }
        have.max(opts.size)
    };
    let file = Arc::new(file);
    let size = usable(&name, size, opts.size)?;
    let identity = match kind {
        TargetKind::File | TargetKind::BlockDevice => raidlab_cache::path_identity(&file_path).ok(),
        _ => None,
    };
    Ok(Target {
        label: spec.to_string(),
        kind,
        volume: Arc::new(RawFile {
            file: file.clone(),
            name,
            size,
        }),
        file: Some(file),
        direct,
        size,
        notes,
        fresh,
        remove_on_drop,
        array: Mutex::new(None),
        identity,
        cache: Mutex::new(None),
        sim: None,
        lanes: Lanes::default(),
    })
}

/// A file or device used as-is: positional reads and writes on the descriptor the
/// target opened (possibly O_DIRECT, so callers pass aligned buffers), no locking
/// (a benchmark may share a file with a fio run on purpose).
#[derive(Debug)]
struct RawFile {
    file: Arc<File>,
    name: String,
    size: u64,
}

impl Volume for RawFile {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        check_range(&self.name, Op::Read, self.size, offset, buf.len() as u64)?;
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| Error::io(Op::Read, &self.name, e).at(offset, buf.len() as u64))
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        check_range(&self.name, Op::Write, self.size, offset, buf.len() as u64)?;
        self.file
            .write_all_at(buf, offset)
            .map_err(|e| Error::io(Op::Write, &self.name, e).at(offset, buf.len() as u64))
    }
    fn flush(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| Error::io(Op::Flush, &self.name, e))
    }
}

/// Make a new array of sparse member files (`create` with mdadm's rules, members
/// zeroed so no resync is needed) and open it as a target. For `raidlab bench` with
/// no target; the caller owns (and removes) the files.
pub fn create_array(
    label: &str,
    level: raidlab_layout::Level,
    chunk: u64,
    members: &[PathBuf],
    member_size: u64,
    opts: OpenOptions,
) -> Result<Target> {
    use raidlab_raid::assemble::{create, CreateSpec, NewMember};
    let mut news = Vec::new();
    for p in members {
        let v = FileVolume::create_sparse(p, member_size)?;
        news.push(NewMember {
            device: Device {
                path: p.display().to_string(),
                volume: Arc::new(v),
            },
            zeroed: true,
        });
    }
    let spec = CreateSpec {
        level,
        layout: raidlab_layout::Layout::parse(level, None)?,
        chunk_bytes: chunk,
        spares: 0,
        name: label.to_string(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: false,
    };
    let asm = create(&spec, news)?;
    // Drop the creating handles (and their locks) and open it the way a user's
    // `array:` target is opened, so this measures exactly that path.
    drop(asm);
    let list: Vec<String> = members.iter().map(|p| p.display().to_string()).collect();
    let mut t = open_array(label, &list.join(","), opts)?;
    t.label = label.to_string();
    Ok(t)
}

/// A single file opened exactly as an array member is (raidlab's FileVolume), to
/// compare an array with one of its members like with like.
pub fn open_member_file(label: &str, path: &Path, size: u64, opts: OpenOptions) -> Result<Target> {
    let v = FileVolume::create_sparse(path, size)?;
    let mut t = Target::from_volume(label, Arc::new(v), opts.size)?;
    t.kind = TargetKind::File;
    t.notes
        .push("opened through the page cache, as array members are".into());
    Ok(t)
}

/// `limits` for a target's notes.
fn describe_limits(limits: Limits) -> String {
    let bw = limits
        .bytes_per_sec
        .map(|b| format!("{b} bytes/s"))
        .unwrap_or_else(|| "any bandwidth".into());
    let iops = limits
        .iops
        .map(|i| format!("{i} IOPS"))
        .unwrap_or_else(|| "any IOPS".into());
    format!("{bw}, {iops}")
}
