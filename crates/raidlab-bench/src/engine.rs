//! The I/O engine: runs one [`Workload`] against a [`Target`] with exactly
//! `threads x qd` requests outstanding and records every completion's latency in
//! an HDR histogram.
//!
//! Two ways to keep `qd` requests in flight per thread:
//! - io_uring (files and devices): one OS thread per benchmark thread, each with its
//!   own ring of `qd` slots; a completed slot is refilled at once (`crate::uring`);
//! - blocking workers (the fallback, and the only way for in-process volumes such
//!   as arrays, whose `Volume` calls block): `qd` OS threads per benchmark thread,
//!   each with one request in flight, sharing the thread's sequential cursor so a
//!   sequential stream stays one stream.
//!
//! The engine never decides what a test is (that is the suites' job) and never
//! panics on a failing device: the first error stops every worker, in-flight
//! requests are waited for, and the error names the device, offset and operation.

use crate::buffer::AlignedBuf;
use crate::randmap::RandMap;
use crate::target::Target;
use hdrhistogram::Histogram;
use raidlab_core::{Error, ErrorKind, Op, Result, Volume};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Sequential or uniformly random offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Seq,
    Rand,
}

/// Reads, writes, or a mix with this percentage of reads (fio's rwmixread).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    Read,
    Write,
    Mix { read_pct: u32 },
}

/// What written buffers hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataFill {
    /// Pseudo-random bytes (CrystalDiskMark's default; defeats compression).
    Random,
    /// Zeros (CrystalDiskMark's "0Fill", fio's zero_buffers).
    Zero,
}

/// What happens to a slot's write buffer between two writes. It matters to the
/// figures: stamping or refilling costs the benchmark CPU time per write, and a
/// device that compresses or deduplicates sees different data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rewrite {
    /// Nothing: the buffer is filled once, so a slot writes the same bytes every
    /// time (CrystalDiskMark).
    Never,
    /// Every 512-byte block is stamped with its device offset and the write's
    /// serial number (fio's default, `scramble_buffers`): no two writes carry the
    /// same bytes, for the price of two cache lines per block.
    Scramble,
    /// Fresh bytes of the workload's [`DataFill`] before every write (fio's
    /// `refill_buffers`).
    Refill,
}

/// Which engine to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    /// io_uring where the target has a descriptor opened with O_DIRECT and the
    /// kernel allows it, else blocking workers (buffered files included: see
    /// [`run`]).
    Auto,
    /// io_uring or an error saying why not.
    Uring,
    /// Blocking workers, one per queue slot.
    Threads,
}

/// When a workload ends: whichever comes first. At least one must be set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limit {
    pub time: Option<Duration>,
    /// Total bytes over all threads, shared out evenly (each thread does its share,
    /// as each fio job does its own `size`).
    pub bytes: Option<u64>,
}

/// One measured workload: fio's vocabulary, CrystalDiskMark's tests are instances.
#[derive(Debug, Clone)]
pub struct Workload {
    pub access: Access,
    pub dir: Dir,
    /// Bytes per request.
    pub bs: usize,
    /// The region `[offset, offset + size)` of the target the requests fall in.
    pub offset: u64,
    pub size: u64,
    pub threads: usize,
    /// Requests in flight per thread.
    pub qd: usize,
    pub limit: Limit,
    pub data: DataFill,
    /// What a slot's write buffer holds from one write to the next.
    pub rewrite: Rewrite,
    /// Random offsets visit each block of a thread's region once per pass (fio's
    /// random map, on unless `norandommap`); otherwise each pick is independent
    /// and blocks repeat (CrystalDiskMark, IOzone). See [`crate::randmap`].
    pub random_map: bool,
    /// Seed of every random choice (offsets, mix, data), so runs repeat.
    pub seed: u64,
    /// Sequential threads each take their own `size / threads` slice (true, as
    /// CrystalDiskMark's threads do) or all start at `offset` (false, as fio's
    /// numjobs clones do).
    pub split: bool,
    pub engine: EngineKind,
}

/// Shared with whoever watches a run: a stop request (Ctrl-C) and bytes done so far
/// (for progress bars).
#[derive(Debug, Default)]
pub struct Control {
    stop: AtomicBool,
    done: AtomicU64,
}

impl Control {
    pub const fn new() -> Self {
        Control {
            stop: AtomicBool::new(false),
            done: AtomicU64::new(0),
        }
    }
    /// Ask every worker to stop after its current request.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
    /// Bytes completed since the control was made (all runs).
    pub fn done_bytes(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }
    pub(crate) fn add_done(&self, bytes: u64) {
        self.done.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// Figures of one direction.
#[derive(Debug, Clone)]
pub struct DirStats {
    pub bytes: u64,
    pub ios: u64,
    /// Completion latency in nanoseconds (submission to completion).
    pub hist: Histogram<u64>,
    /// Bytes and requests completed in each [`SAMPLE_WINDOW`] from the run's
    /// start, as fio samples bandwidth and IOPS for its min/max/mean/stddev;
    /// empty where not sampled (simulated targets, whose time is virtual).
    pub samples: Vec<(u64, u64)>,
}

/// The window of one bandwidth and IOPS sample: fio's default `bw_avg_time`
/// and `iops_avg_time` (500 ms, fio's man page).
pub const SAMPLE_WINDOW: Duration = Duration::from_millis(500);

impl Default for DirStats {
    fn default() -> Self {
        DirStats {
            bytes: 0,
            ios: 0,
            hist: new_hist(),
            samples: Vec::new(),
        }
    }
}

fn new_hist() -> Histogram<u64> {
    // Three significant digits from 1 ns, growing as needed: never fails.
    let mut h = Histogram::new(3).unwrap_or_else(|_| unreachable_hist());
    h.auto(true);
    h
}

#[cold]
fn unreachable_hist() -> Histogram<u64> {
    // Histogram::new(3) only fails for sigfig > 5; keep a bounded fallback anyway.
    Histogram::new_with_bounds(1, u64::MAX / 2, 2).unwrap_or_else(|_| std::process::abort())
}

impl DirStats {
    pub(crate) fn record(&mut self, bytes: u64, lat: Duration) {
        self.bytes += bytes;
        self.ios += 1;
        let ns = (lat.as_nanos() as u64).max(1);
        let _ = self.hist.record(ns);
    }
    /// [`DirStats::record`] of a request that completed `at` after the run's
    /// start, counted in its sample window too.
    pub(crate) fn record_at(&mut self, bytes: u64, lat: Duration, at: Duration) {
        self.record(bytes, lat);
        let i = (at.as_nanos() / SAMPLE_WINDOW.as_nanos()) as usize;
        if self.samples.len() <= i {
            self.samples.resize(i + 1, (0, 0));
        }
        self.samples[i].0 += bytes;
        self.samples[i].1 += 1;
    }
    pub(crate) fn merge(&mut self, o: &DirStats) {
        self.bytes += o.bytes;
        self.ios += o.ios;
        let _ = self.hist.add(&o.hist);
        if self.samples.len() < o.samples.len() {
            self.samples.resize(o.samples.len(), (0, 0));
        }
        for (a, b) in self.samples.iter_mut().zip(&o.samples) {
            a.0 += b.0;
            a.1 += b.1;
        }
    }
    /// Bandwidth (bytes/s) and IOPS of each whole sample window of a run that
    /// took `elapsed` (a last, partial window is left out, as fio takes a
    /// sample only when its window has passed).
    pub fn sampled_rates(&self, elapsed: Duration) -> (Vec<f64>, Vec<f64>) {
        let whole = (elapsed.as_nanos() / SAMPLE_WINDOW.as_nanos()) as usize;
        let secs = SAMPLE_WINDOW.as_secs_f64();
        (0..whole)
            .map(|i| {
                let (b, n) = self.samples.get(i).copied().unwrap_or((0, 0));
                (b as f64 / secs, n as f64 / secs)
            })
            .unzip()
    }
    /// 10^6 bytes per second over `elapsed`.
    pub fn mb_s(&self, elapsed: Duration) -> f64 {
        per_sec(self.bytes as f64, elapsed) / 1e6
    }
    pub fn iops(&self, elapsed: Duration) -> f64 {
        per_sec(self.ios as f64, elapsed)
    }
    /// Mean completion latency in microseconds (0 with no requests).
    pub fn mean_lat_us(&self) -> f64 {
        if self.ios == 0 {
            0.0
        } else {
            self.hist.mean() / 1000.0
        }
    }
}

fn per_sec(v: f64, elapsed: Duration) -> f64 {
    let s = elapsed.as_secs_f64();
    if s > 0.0 {
        v / s
    } else {
        0.0
    }
}

/// What one workload measured.
#[derive(Debug, Clone)]
pub struct Measured {
    pub read: DirStats,
    pub write: DirStats,
    /// From the moment every worker was ready to the last completion.
    pub elapsed: Duration,
    /// Stopped early by [`Control::stop`].
    pub interrupted: bool,
    /// "io_uring" or "threads".
    pub engine: &'static str,
}

impl Measured {
    /// The stats of the direction that moved data (reads for a mix).
    pub fn main(&self) -> &DirStats {
        if self.read.ios >= self.write.ios {
            &self.read
        } else {
            &self.write
        }
    }
}

/// Per-worker results before merging.
#[derive(Debug, Default)]
pub(crate) struct WorkerStats {
    pub read: DirStats,
    pub write: DirStats,
    pub end: Option<Instant>,
}

/// State every worker of one run shares.
pub(crate) struct Shared<'a> {
    pub w: &'a Workload,
    pub control: &'a Control,
    start: OnceLock<Instant>,
    /// Per thread: bytes it may still issue.
    remaining: Option<Vec<AtomicU64>>,
    failed: AtomicBool,
    error: Mutex<Option<Error>>,
    cursors: Vec<AtomicU64>,
    /// Per thread: (first byte, number of blocks) of its region.
    regions: Vec<(u64, u64)>,
    /// Per thread, with `random_map`: the blocks visited in this pass.
    maps: Vec<Mutex<RandMap>>,
    pub volume_name: String,
}

impl Shared<'_> {
    /// Start the clock (first caller wins) once every worker is ready.
    pub fn started(&self) -> Instant {
        *self.start.get_or_init(Instant::now)
    }

    /// May benchmark thread `t` issue another request?
    pub fn claim(&self, t: usize) -> bool {
        if self.control.stopped() || self.failed.load(Ordering::Relaxed) {
            return false;
        }
        if let Some(t) = self.w.limit.time {
            if self.started().elapsed() >= t {
                return false;
            }
        }
        if let Some(rem) = &self.remaining {
            let bs = self.w.bs as u64;
            return rem[t]
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |r| r.checked_sub(bs))
                .is_ok();
        }
        true
    }

    /// The offset of the next request of benchmark thread `t`.
    pub fn next_offset(&self, t: usize, rng: &mut ChaCha8Rng) -> u64 {
        let (start, blocks) = self.regions[t];
        let i = match self.w.access {
            Access::Seq => self.cursors[t].fetch_add(1, Ordering::Relaxed) % blocks,
            Access::Rand => match self.maps.get(t) {
                Some(map) => map.lock().unwrap_or_else(|p| p.into_inner()).take(rng),
                None => rng.gen_range(0..blocks),
            },
        };
        start + i * self.w.bs as u64
    }

    /// Read (true) or write for the next request.
    pub fn next_is_read(&self, rng: &mut ChaCha8Rng) -> bool {
        match self.w.dir {
            Dir::Read => true,
            Dir::Write => false,
            Dir::Mix { read_pct } => rng.gen_range(0..100) < read_pct,
        }
    }

    /// Record the first error and stop everyone.
    pub fn fail(&self, e: Error) {
        self.failed.store(true, Ordering::SeqCst);
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(e);
        }
    }
}

/// Fill a write buffer as the workload asks.
pub(crate) fn fill(buf: &mut [u8], data: DataFill, rng: &mut ChaCha8Rng) {
    match data {
        DataFill::Random => rng.fill_bytes(buf),
        DataFill::Zero => buf.fill(0),
    }
}

/// Stamp each 512-byte block of `buf`, a write to device offset `offset`, so that
/// it differs from every other block written in the run: the block's own offset
/// goes into one of its eight cache lines (which one changes from write to write,
/// so the stamps do not all sit at one stride), the write's `serial` into the last
/// 8 bytes of its first line. A trailing part-block is left alone.
pub(crate) fn scramble(buf: &mut [u8], offset: u64, serial: u64) {
    let line = ((serial ^ (offset >> 9)) & 7) as usize * 64;
    for (i, block) in buf.chunks_exact_mut(512).enumerate() {
        let at = offset.wrapping_add(i as u64 * 512);
        block[line..line + 8].copy_from_slice(&at.to_le_bytes());
        block[56..64].copy_from_slice(&serial.to_le_bytes());
    }
}

/// The serial number of a slot's `nth` write: unique in the run for each of up to
/// 2^24 slots (`slot_id` counts threads x queue slots).
pub(crate) fn write_serial(slot_id: usize, nth: u64) -> u64 {
    nth << 24 | (slot_id as u64 & 0xFF_FFFF)
}

pub(crate) fn worker_rng(seed: u64, t: usize, slot: usize) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(
        seed ^ ((t as u64) << 32 | slot as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
    )
}

impl Workload {
    /// Get a slot's buffer ready for a write to `offset` (see [`Rewrite`]).
    pub(crate) fn prepare_write(
        &self,
        buf: &mut [u8],
        offset: u64,
        serial: u64,
        rng: &mut ChaCha8Rng,
    ) {
        match self.rewrite {
            Rewrite::Never => {}
            Rewrite::Scramble => scramble(buf, offset, serial),
            Rewrite::Refill => fill(buf, self.data, rng),
        }
    }

    fn validate(&self, target: &Target) -> Result<()> {
        let bad = |m: String| Err(Error::invalid(m).on_device(target.label.clone()));
        if self.bs == 0 || self.threads == 0 || self.qd == 0 {
            return bad(format!(
                "block size ({}), threads ({}) and queue depth ({}) must all be at least 1",
                self.bs, self.threads, self.qd
            ));
        }
        if self.limit.time.is_none() && self.limit.bytes.is_none() {
            return bad("a workload needs a run time or a byte count to end".into());
        }
        let end = self.offset.checked_add(self.size);
        if end.map_or(true, |e| e > target.volume.size()) {
            return bad(format!(
                "the region at offset {} of {} bytes runs past the end of the target ({} bytes)",
                self.offset,
                self.size,
                target.volume.size()
            ));
        }
        let per_thread = if self.split && self.access == Access::Seq {
            self.size / self.threads as u64
        } else {
            self.size
        };
        if per_thread < self.bs as u64 {
            return bad(format!(
                "the region ({} bytes{}) is smaller than one block of {} bytes",
                per_thread,
                if self.split { " per thread" } else { "" },
                self.bs
            ));
        }
        if target.direct && (self.bs % 512 != 0 || self.offset % 512 != 0) {
            return bad(format!(
                "direct I/O needs the block size ({}) and offset ({}) to be multiples of 512 bytes: change them or run buffered",
                self.bs, self.offset
            ));
        }
        Ok(())
    }
}

/// Run `w` against `target` and return what was measured.
pub fn run(target: &Target, w: &Workload, control: &Control) -> Result<Measured> {
    w.validate(target)?;
    if let Some(sim) = &target.sim {
        return sim.run(w, control);
    }
    let bs = w.bs as u64;
    let regions: Vec<(u64, u64)> = (0..w.threads)
        .map(|t| {
            if w.split && w.access == Access::Seq {
                let span = w.size / w.threads as u64 / bs * bs;
                (w.offset + t as u64 * span, span / bs)
            } else {
                (w.offset, w.size / bs)
            }
        })
        .collect();
    let shared = Shared {
        w,
        control,
        start: OnceLock::new(),
        remaining: w.limit.bytes.map(|b| {
            let share = b / w.threads as u64;
            (0..w.threads)
                .map(|t| AtomicU64::new(share + if t == 0 { b % w.threads as u64 } else { 0 }))
                .collect()
        }),
        failed: AtomicBool::new(false),
        error: Mutex::new(None),
        cursors: (0..w.threads).map(|_| AtomicU64::new(0)).collect(),
        maps: if w.random_map && w.access == Access::Rand {
            regions
                .iter()
                .map(|&(_, blocks)| Mutex::new(RandMap::new(blocks)))
                .collect()
        } else {
            Vec::new()
        },
        regions,
        volume_name: target.volume.name(),
    };
    let rings = match (w.engine, &target.file) {
        (EngineKind::Threads, _) => None,
        (EngineKind::Uring, None) => {
            return Err(Error::new(
                ErrorKind::Unsupported,
                Op::Open,
                "io_uring needs a file or block device; this target runs in-process: use the threads engine",
            )
            .on_device(target.label.clone()))
        }
        // Buffered files: blocking workers, as fio's default engine (psync).
        // io_uring hands a request on a page-cache file that it cannot finish
        // without blocking to a kernel worker thread (io-wq; on tmpfs every
        // request), so each costs two thread hand-offs: fio's own io_uring
        // engine on a buffered tmpfs file wrote 75-244 MB/s here against
        // psync's 874-949 (issue 21, docs/benchmarks.md), and Bonnie++'s block
        // write came out at 4% of the real bonnie++. `--engine io-uring`
        // still forces it.
        (EngineKind::Auto, Some(_)) if !target.direct => None,
        (kind, Some(_)) => match crate::uring::rings(w.threads, w.qd) {
            Ok(r) => Some(r),
            Err(e) if kind == EngineKind::Uring => {
                return Err(Error::io(Op::Open, target.label.clone(), e)
                    .with_hint(" (io_uring is not available here: use the threads engine)"))
            }
            Err(_) => None,
        },
        (EngineKind::Auto, None) => None,
    };
    let (stats, engine) = match (rings, &target.file) {
        (Some(rings), Some(file)) => (run_uring(&shared, file, rings), "io_uring"),
        _ => {
            // Each thread's volume before the clock starts (an NBD export
            // opens a connection per thread here).
            let volumes = (0..w.threads)
                .map(|t| target.thread_volume(t))
                .collect::<Result<Vec<_>>>()?;
            (run_threads(&shared, &volumes), "threads")
        }
    };
    if let Some(e) = shared
        .error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
    {
        return Err(e);
    }
    let start = shared.started();
    let mut m = Measured {
        read: DirStats::default(),
        write: DirStats::default(),
        elapsed: Duration::ZERO,
        interrupted: control.stopped(),
        engine,
    };
    for s in &stats {
        m.read.merge(&s.read);
        m.write.merge(&s.write);
        if let Some(end) = s.end {
            m.elapsed = m.elapsed.max(end.saturating_duration_since(start));
        }
    }
    Ok(m)
}

fn run_uring(
    shared: &Shared<'_>,
    file: &Arc<std::fs::File>,
    rings: Vec<io_uring::IoUring>,
) -> Vec<WorkerStats> {
    let barrier = Barrier::new(rings.len());
    std::thread::scope(|s| {
        let handles: Vec<_> = rings
            .into_iter()
            .enumerate()
            .map(|(t, ring)| {
                let barrier = &barrier;
                s.spawn(move || crate::uring::worker(shared, file, ring, t, barrier))
            })
            .collect();
        join_all(shared, handles)
    })
}

fn run_threads(shared: &Shared<'_>, volumes: &[Arc<dyn Volume>]) -> Vec<WorkerStats> {
    let w = shared.w;
    let barrier = Barrier::new(w.threads * w.qd);
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (t, volume) in volumes.iter().enumerate() {
            for slot in 0..w.qd {
                let barrier = &barrier;
                let volume = volume.as_ref();
                handles.push(s.spawn(move || blocking_worker(shared, volume, t, slot, barrier)));
            }
        }
        join_all(shared, handles)
    })
}

fn join_all(
    shared: &Shared<'_>,
    handles: Vec<std::thread::ScopedJoinHandle<'_, WorkerStats>>,
) -> Vec<WorkerStats> {
    handles
        .into_iter()
        .filter_map(|h| match h.join() {
            Ok(s) => Some(s),
            Err(_) => {
                shared.fail(Error::new(
                    ErrorKind::Io,
                    Op::Read,
                    "internal error: a benchmark worker panicked (a bug: please report it)",
                ));
                None
            }
        })
        .collect()
}

/// One queue slot of one benchmark thread: issue, wait, record, repeat.
fn blocking_worker(
    shared: &Shared<'_>,
    volume: &dyn Volume,
    t: usize,
    slot: usize,
    barrier: &Barrier,
) -> WorkerStats {
    let w = shared.w;
    let mut rng = worker_rng(w.seed, t, slot);
    let mut buf = AlignedBuf::new(w.bs);
    fill(buf.as_mut_slice(), w.data, &mut rng);
    let mut st = WorkerStats::default();
    let mut writes = 0u64;
    barrier.wait();
    shared.started();
    while shared.claim(t) {
        let off = shared.next_offset(t, &mut rng);
        let read = shared.next_is_read(&mut rng);
        if !read {
            let serial = write_serial(t * w.qd + slot, writes);
            w.prepare_write(buf.as_mut_slice(), off, serial, &mut rng);
            writes += 1;
        }
        let t0 = Instant::now();
        let r = if read {
            volume.read_at(buf.as_mut_slice(), off)
        } else {
            volume.write_at(buf.as_slice(), off)
        };
        let lat = t0.elapsed();
        if let Err(e) = r {
            shared.fail(e.on_device(shared.volume_name.clone()).at(off, w.bs as u64));
            break;
        }
        let at = (t0 + lat).saturating_duration_since(shared.started());
        if read {
            st.read.record_at(w.bs as u64, lat, at);
        } else {
            st.write.record_at(w.bs as u64, lat, at);
        }
        shared.control.add_done(w.bs as u64);
    }
    st.end = Some(Instant::now());
    st
}

/// Error helpers local to the engine.
trait Hint {
    fn with_hint(self, hint: &str) -> Self;
}

impl Hint for Error {
    fn with_hint(mut self, hint: &str) -> Self {
        self.message.push_str(hint);
        self
    }
}

#[cfg(test)]
mod tests;
