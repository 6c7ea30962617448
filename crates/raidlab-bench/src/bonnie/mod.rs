//! Bonnie++'s tests: per-character write, block write, rewrite, per-character
//! read, block read, random seeks, and on a directory the file create/stat/delete
//! tests in sequential and random order, with Bonnie++'s CSV line (format 1.98)
//! so that `bon_csv2html` renders the results.
//!
//! As in Bonnie++: chunks of 8 KiB by default; the file is twice the RAM unless a
//! size is given (so the page cache cannot hold it); rewrite reads each chunk,
//! changes it and writes it back in place; the seek test runs 5 concurrent seekers
//! doing 8192 seeks in all, each reading one chunk at a random place, and every
//! tenth seek writes the (changed) chunk back; latency is the slowest single
//! operation (for the per-character tests, the slowest chunk's worth of bytes);
//! %CPU is the process's CPU time over wall time. Rates are KiB/s in the CSV
//! (Bonnie++'s unit) and MB/s in the table and rows. The per-character tests
//! are skipped when asked ([`BonnieConfig::per_char`] false, Bonnie++'s `-f`);
//! their CSV fields are then empty, as Bonnie++ leaves them.
//!
//! Differences from Bonnie++, on purpose:
//! - the per-character tests write and read each byte through a buffered
//!   stream (std's `BufWriter`/`BufReader`, 8 KiB), the original Bonnie's
//!   putc()/getc(), over the whole file. Bonnie++ 1.9x and 2.00a instead make one
//!   write(2) or read(2) system call per byte, on 3 MiB only (its `-f SIZE`),
//!   which only a file system can take; raidlab's targets include arrays and
//!   devices opened O_DIRECT, which take whole aligned blocks. So raidlab's
//!   per-character figures are much higher than bonnie++ 2.00a's and not
//!   comparable with them: they measure a per-byte call into a user-space buffer
//!   plus the I/O, not a system call per byte;
//! - on a simulated target the per-character tests are not run (their fields
//!   stay empty): they measure the host's CPU per byte, which the simulation does
//!   not model, and in virtual time they would only repeat the block figures;
//! - files and devices use O_DIRECT unless buffered I/O is asked for (Bonnie++
//!   relies on the file being twice the RAM instead).
//!
//! This module never prints.

mod chars;
mod files;
mod output;

use chars::{get_char, put_char};
use files::file_tests;

pub use chars::STREAM_BUFFER;
pub use output::{csv_line, report, size_text, table};

use crate::buffer::AlignedBuf;
use crate::engine::{self, Access, Control, DataFill, Dir, EngineKind, Limit, Rewrite, Workload};
use crate::target::Target;
use raidlab_core::{Error, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::path::Path;
use std::time::Duration;

/// Bonnie++'s default chunk size; the CSV leaves the field empty for it.
pub const DEFAULT_CHUNK: usize = 8192;

#[derive(Debug, Clone)]
pub struct BonnieConfig {
    /// File size for the I/O tests.
    pub size: u64,
    pub chunk: usize,
    pub seeks: usize,
    pub seekers: usize,
    /// File tests: this many thousand (1024) files; 0 skips them.
    pub files_k: usize,
    /// Machine name in the CSV (Bonnie++'s `-m`).
    pub machine: String,
    /// Run the per-character tests (Bonnie++ does unless given `-f`); never
    /// on a simulated target.
    pub per_char: bool,
    pub seed: u64,
    pub engine: EngineKind,
}

/// The size Bonnie++ picks: twice the RAM (MemTotal), at least 64 MiB.
pub fn default_size() -> u64 {
    let kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(1 << 20);
    (kib * 1024 * 2).max(64 << 20)
}

/// One test's figures.
#[derive(Debug, Clone, Copy, Serialize, Default, PartialEq)]
pub struct Figure {
    /// Bytes per second (block tests) or operations per second (seeks, files).
    pub rate: f64,
    pub cpu_pct: f64,
    /// The slowest single operation.
    pub max_latency_us: f64,
    /// How long the test ran; under [`MIN_TIME`] its rate and %CPU print as
    /// Bonnie++'s `+++++` / `+++` (the figures stay in the JSON).
    pub seconds: f64,
}

impl Figure {
    /// Long enough to measure (Bonnie++'s rule).
    pub fn measured(&self) -> bool {
        self.seconds >= MIN_TIME.as_secs_f64()
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct FileTests {
    pub files: usize,
    pub seq_create: Figure,
    pub seq_stat: Figure,
    pub seq_delete: Figure,
    pub ran_create: Figure,
    pub ran_stat: Figure,
    pub ran_delete: Figure,
}

#[derive(Debug, Clone, Serialize)]
pub struct BonnieResult {
    pub label: String,
    pub size: u64,
    pub chunk: usize,
    pub seeks: usize,
    pub seekers: usize,
    pub seed: u64,
    /// The per-character write and read; `None` when not run (skipped as
    /// Bonnie++'s `-f`, or a simulated target).
    pub put_char: Option<Figure>,
    pub get_char: Option<Figure>,
    pub put_block: Figure,
    pub rewrite: Figure,
    pub get_block: Figure,
    pub random_seeks: Figure,
    pub files: Option<FileTests>,
    pub interrupted: bool,
}

/// Process CPU time (user + system) from getrusage, in seconds, to the
/// microsecond (the /proc tick of 10 ms made short tests show impossible
/// shares such as 325 %CPU on 2 CPUs).
fn cpu_seconds() -> f64 {
    crate::rusage::Usage::now().cpu_seconds()
}

/// Bonnie++ prints a test that ran shorter than this as `+++++` (and its %CPU
/// as `+++`): too short to measure (bonnie++'s man page, "If a test completes
/// in less than 500ms the output will be displayed as ++++").
pub const MIN_TIME: Duration = Duration::from_millis(500);

/// Time a test and its CPU share, by the target's clock ([`Target::now`]), or
/// by the monotonic clock for the file tests (which never touch the target).
struct Meter<'a> {
    target: Option<&'a Target>,
    t0: Duration,
    cpu: f64,
}

impl<'a> Meter<'a> {
    fn now(&self) -> Duration {
        match self.target {
            Some(t) => t.now(),
            None => crate::target::monotonic_now(),
        }
    }
    /// For the file tests.
    fn wall() -> Meter<'static> {
        Meter {
            target: None,
            t0: crate::target::monotonic_now(),
            cpu: cpu_seconds(),
        }
    }
    fn start(target: &'a Target) -> Self {
        Meter {
            target: Some(target),
            t0: target.now(),
            cpu: cpu_seconds(),
        }
    }
    fn figure(&self, units: f64, max_latency: Duration) -> Figure {
        let elapsed = self.now() - self.t0;
        let secs = elapsed.as_secs_f64().max(1e-9);
        let simulated = self.target.is_some_and(|t| t.sim.is_some());
        Figure {
            rate: units / secs,
            // The simulated host's CPU is not modelled: no share to report.
            cpu_pct: if simulated {
                0.0
            } else {
                ((cpu_seconds() - self.cpu) / secs * 100.0).max(0.0)
            },
            max_latency_us: max_latency.as_secs_f64() * 1e6,
            seconds: elapsed.as_secs_f64(),
        }
    }
}

/// Run the tests on `target` (and the file tests in `dir` when given).
pub fn run(
    target: &Target,
    dir: Option<&Path>,
    cfg: &BonnieConfig,
    control: &Control,
) -> Result<BonnieResult> {
    if cfg.chunk == 0 || cfg.seekers == 0 || cfg.seeks == 0 {
        return Err(Error::invalid(
            "chunk size, seeks and seekers must all be at least 1",
        ));
    }
    let size = target.size / cfg.chunk as u64 * cfg.chunk as u64;
    if size < cfg.chunk as u64 * 2 {
        return Err(Error::invalid(format!(
            "the file ({} bytes) must hold at least two chunks of {} bytes",
            target.size, cfg.chunk
        ))
        .on_device(target.label.clone()));
    }
    let mut r = BonnieResult {
        label: target.label.clone(),
        size,
        chunk: cfg.chunk,
        seeks: cfg.seeks,
        seekers: cfg.seekers,
        seed: cfg.seed,
        put_char: None,
        get_char: None,
        put_block: Figure::default(),
        rewrite: Figure::default(),
        get_block: Figure::default(),
        random_seeks: Figure::default(),
        files: None,
        interrupted: false,
    };
    let seq = |dir| Workload {
        access: Access::Seq,
        dir,
        bs: cfg.chunk,
        offset: 0,
        size,
        threads: 1,
        qd: 1,
        limit: Limit {
            time: None,
            bytes: Some(size),
        },
        data: DataFill::Random,
        rewrite: Rewrite::Never,
        random_map: false,
        seed: cfg.seed,
        split: true,
        engine: cfg.engine,
    };
    // Bonnie++'s order: per-character write, block write, rewrite,
    // per-character read, block read, seeks.
    let per_char = cfg.per_char && target.sim.is_none();
    if per_char {
        r.put_char = Some(put_char(target, size, cfg.chunk, control)?);
        if control.stopped() {
            r.interrupted = true;
            return Ok(r);
        }
    }
    // Block write, including the flush: Bonnie++ counts the time to get the data
    // to the disk.
    let m = Meter::start(target);
    let w = engine::run(target, &seq(Dir::Write), control)?;
    target.volume.flush()?;
    r.put_block = m.figure(
        w.write.bytes as f64,
        Duration::from_nanos(w.write.hist.max()),
    );
    if control.stopped() {
        r.interrupted = true;
        return Ok(r);
    }
    r.rewrite = rewrite(target, size, cfg.chunk, control)?;
    if control.stopped() {
        r.interrupted = true;
        return Ok(r);
    }
    if per_char {
        r.get_char = Some(get_char(target, size, cfg.chunk, control)?);
        if control.stopped() {
            r.interrupted = true;
            return Ok(r);
        }
    }
    let m = Meter::start(target);
    let rd = engine::run(target, &seq(Dir::Read), control)?;
    r.get_block = m.figure(
        rd.read.bytes as f64,
        Duration::from_nanos(rd.read.hist.max()),
    );
    if control.stopped() {
        r.interrupted = true;
        return Ok(r);
    }
    r.random_seeks = seeks(target, size, cfg, control)?;
    if let (Some(d), true) = (dir, cfg.files_k > 0) {
        if !control.stopped() {
            r.files = Some(file_tests(d, cfg.files_k * 1024, cfg.seed, control)?);
        }
    }
    r.interrupted = control.stopped();
    Ok(r)
}

/// Read each chunk, change it, write it back where it was.
fn rewrite(target: &Target, size: u64, chunk: usize, control: &Control) -> Result<Figure> {
    let mut buf = AlignedBuf::new(chunk);
    let mut worst = Duration::ZERO;
    let mut done = 0u64;
    let m = Meter::start(target);
    let mut off = 0;
    while off < size && !control.stopped() {
        let t0 = target.now();
        target.volume.read_at(buf.as_mut_slice(), off)?;
        // Dirty it, as Bonnie++ does, so the write is a real change.
        let b = buf.as_mut_slice();
        b[0] = b[0].wrapping_add(1);
        target.volume.write_at(buf.as_slice(), off)?;
        worst = worst.max(target.now() - t0);
        done += chunk as u64;
        off += chunk as u64;
    }
    target.volume.flush()?;
    Ok(m.figure(done as f64, worst))
}

/// The random seek test alone, on `cfg.size` (capped at the target's size) in
/// `cfg.chunk` chunks: for a caller whose block tests used another chunk size.
pub fn random_seeks(target: &Target, cfg: &BonnieConfig, control: &Control) -> Result<Figure> {
    if cfg.chunk == 0 || cfg.seekers == 0 || cfg.seeks == 0 {
        return Err(Error::invalid(
            "chunk size, seeks and seekers must all be at least 1",
        ));
    }
    let size = cfg.size.min(target.size) / cfg.chunk as u64 * cfg.chunk as u64;
    if size < cfg.chunk as u64 * 2 {
        return Err(Error::invalid(format!(
            "the file ({} bytes) must hold at least two chunks of {} bytes",
            target.size, cfg.chunk
        ))
        .on_device(target.label.clone()));
    }
    seeks(target, size, cfg, control)
}

/// `seekers` threads share `seeks` random chunk reads; every tenth writes back.
fn seeks(target: &Target, size: u64, cfg: &BonnieConfig, control: &Control) -> Result<Figure> {
    if target.sim.is_some() {
        return sim_seeks(target, size, cfg, control);
    }
    let chunks = size / cfg.chunk as u64;
    let m = Meter::start(target);
    let results: Vec<Result<(u64, Duration)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.seekers)
            .map(|i| {
                // Spread the total: the first seekers take one more when it does not divide.
                let mine = cfg.seeks / cfg.seekers + usize::from(i < cfg.seeks % cfg.seekers);
                s.spawn(move || -> Result<(u64, Duration)> {
                    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ ((i as u64 + 1) * 0x9E37));
                    let mut buf = AlignedBuf::new(cfg.chunk);
                    let mut worst = Duration::ZERO;
                    let mut n = 0;
                    for k in 0..mine {
                        if control.stopped() {
                            break;
                        }
                        let off = rng.gen_range(0..chunks) * cfg.chunk as u64;
                        let t0 = target.now();
                        target.volume.read_at(buf.as_mut_slice(), off)?;
                        if k % 10 == 9 {
                            let b = buf.as_mut_slice();
                            b[0] = b[0].wrapping_add(1);
                            target.volume.write_at(buf.as_slice(), off)?;
                        }
                        worst = worst.max(target.now() - t0);
                        n += 1;
                    }
                    Ok((n, worst))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::invalid(
                        "internal error: a seeker thread panicked (a bug)",
                    ))
                })
            })
            .collect()
    });
    let mut n = 0;
    let mut worst = Duration::ZERO;
    for r in results {
        let (k, w) = r?;
        n += k;
        worst = worst.max(w);
    }
    Ok(m.figure(n as f64, worst))
}

/// The seek test on a simulated target, in virtual time: the seekers are the
/// threads of one closed-loop random job (queue depth 1 each), and the tenth
/// seek's write-back is a write share of the job (1 in 11 requests), so the
/// seekers really overlap on the simulated device instead of taking turns on its
/// clock. The rate counts the reads, as Bonnie++ counts seeks.
fn sim_seeks(target: &Target, size: u64, cfg: &BonnieConfig, control: &Control) -> Result<Figure> {
    let requests = cfg.seeks as u64 + cfg.seeks as u64 / 10;
    let w = Workload {
        access: Access::Rand,
        dir: Dir::Mix { read_pct: 91 },
        bs: cfg.chunk,
        offset: 0,
        size,
        threads: cfg.seekers,
        qd: 1,
        limit: Limit {
            time: None,
            bytes: Some(requests * cfg.chunk as u64),
        },
        data: DataFill::Random,
        rewrite: Rewrite::Never,
        random_map: false,
        seed: cfg.seed,
        split: false,
        engine: cfg.engine,
    };
    let m = engine::run(target, &w, control)?;
    let secs = m.elapsed.as_secs_f64().max(1e-9);
    Ok(Figure {
        rate: m.read.ios as f64 / secs,
        cpu_pct: 0.0,
        max_latency_us: m.read.hist.max().max(m.write.hist.max()) as f64 / 1e3,
        seconds: m.elapsed.as_secs_f64(),
    })
}
