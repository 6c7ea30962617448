//! Bonnie++'s tests: block write, rewrite, block read, random seeks, and on a
//! directory the file create/stat/delete tests in sequential and random order, with
//! Bonnie++'s CSV line (format 1.98) so that `bon_csv2html` renders the results.
//!
//! As in Bonnie++: chunks of 8 KiB by default; the file is twice the RAM unless a
//! size is given (so the page cache cannot hold it); rewrite reads each chunk,
//! changes it and writes it back in place; the seek test runs 5 concurrent seekers
//! doing 8192 seeks in all, each reading one chunk at a random place, and every
//! tenth seek writes the (changed) chunk back; latency is the slowest single
//! operation; %CPU is the process's CPU time over wall time. Rates are KiB/s in the
//! CSV (Bonnie++'s unit) and MB/s in the table and rows.
//!
//! Differences from Bonnie++, on purpose: the per-character tests (putc/getc) are
//! not run (as Bonnie++'s `-f`), so their CSV fields are empty; files and devices
//! use O_DIRECT unless buffered I/O is asked for (Bonnie++ relies on the file being
//! twice the RAM instead). This module never prints.

use crate::buffer::AlignedBuf;
use crate::engine::{self, Access, Control, DataFill, Dir, EngineKind, Limit, Rewrite, Workload};
use crate::schema::BenchReport;
use crate::table::{keys_in_order, SideBySide};
use crate::target::Target;
use raidlab_core::{Error, Op, Result};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::path::{Path, PathBuf};
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
    // SAFETY: rusage is plain old data (integers and timevals): all zeros is
    // a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes the struct it is given, which lives here.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
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

/// Bonnie++'s file names: a number (so sequential order is creation order) and
/// random letters.
fn file_names(n: usize, rng: &mut ChaCha8Rng) -> Vec<String> {
    (0..n)
        .map(|i| {
            let tail: String = (0..rng.gen_range(0..=12))
                .map(|_| rng.gen_range(b'a'..=b'z') as char)
                .collect();
            format!("{i:07}{tail}")
        })
        .collect()
}

/// Create, stat and delete `n` empty files in a fresh subdirectory of `dir`, in
/// order, then in random order.
fn file_tests(dir: &Path, n: usize, seed: u64, control: &Control) -> Result<FileTests> {
    let base = dir.join(format!("raidlab-bonnie-{}", std::process::id()));
    std::fs::create_dir(&base).map_err(|e| Error::io(Op::Write, base.display().to_string(), e))?;
    let result = file_tests_in(&base, n, seed, control);
    let _ = std::fs::remove_dir_all(&base);
    result
}

fn file_tests_in(base: &Path, n: usize, seed: u64, control: &Control) -> Result<FileTests> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let names = file_names(n, &mut rng);
    let paths: Vec<PathBuf> = names.iter().map(|nm| base.join(nm)).collect();
    let io = |op, p: &Path, e| Error::io(op, p.display().to_string(), e);
    let timed = |order: &[PathBuf], f: &dyn Fn(&Path) -> Result<()>| -> Result<Figure> {
        let m = Meter::wall();
        let mut worst = Duration::ZERO;
        let mut done = 0;
        for p in order {
            if control.stopped() {
                break;
            }
            let t0 = crate::target::monotonic_now();
            f(p)?;
            worst = worst.max(crate::target::monotonic_now() - t0);
            done += 1;
        }
        Ok(m.figure(done as f64, worst))
    };
    let create = |p: &Path| {
        std::fs::File::create(p)
            .map(drop)
            .map_err(|e| io(Op::Write, p, e))
    };
    let stat = |p: &Path| {
        std::fs::metadata(p)
            .map(drop)
            .map_err(|e| io(Op::Read, p, e))
    };
    let delete = |p: &Path| std::fs::remove_file(p).map_err(|e| io(Op::Discard, p, e));
    // Sequential: create in order, then stat and delete in directory order.
    let seq_create = timed(&paths, &create)?;
    let listed = list(base)?;
    let seq_stat = timed(&listed, &stat)?;
    let seq_delete = timed(&listed, &delete)?;
    // Random: create, stat and delete in shuffled orders.
    let mut order = paths.clone();
    order.shuffle(&mut rng);
    let ran_create = timed(&order, &create)?;
    order.shuffle(&mut rng);
    let ran_stat = timed(&order, &stat)?;
    order.shuffle(&mut rng);
    let ran_delete = timed(&order, &delete)?;
    Ok(FileTests {
        files: n,
        seq_create,
        seq_stat,
        seq_delete,
        ran_create,
        ran_stat,
        ran_delete,
    })
}

fn list(dir: &Path) -> Result<Vec<PathBuf>> {
    let name = dir.display().to_string();
    std::fs::read_dir(dir)
        .and_then(|it| it.map(|e| e.map(|e| e.path())).collect())
        .map_err(|e| Error::io(Op::Read, name, e))
}

/// Bonnie++'s latency text: whole microseconds up to five digits, then whole
/// milliseconds (its `%dus` / `%dms`).
fn latency(us: f64) -> String {
    if us < 100_000.0 {
        format!("{}us", us.round() as u64)
    } else {
        format!("{}ms", (us / 1000.0).round() as u64)
    }
}

/// The size field as Bonnie++ writes it: whole GiB as `1G`, else MiB (`512M`).
pub fn size_text(bytes: u64) -> String {
    if bytes >= 1 << 30 && bytes % (1 << 30) == 0 {
        format!("{}G", bytes >> 30)
    } else {
        format!("{}M", bytes >> 20)
    }
}

/// One line of Bonnie++'s CSV (format version 1.98), as `bon_csv2html` reads it.
pub fn csv_line(r: &BonnieResult, machine: &str) -> String {
    // Commas would split fields: the name is the only free text.
    let name: String = machine
        .chars()
        .map(|c| if c == ',' { '_' } else { c })
        .collect();
    let kib = |f: &Figure| {
        if !f.measured() {
            return "+++++,+++".to_string();
        }
        format!(
            "{},{}",
            (f.rate / 1024.0).round() as u64,
            f.cpu_pct.round() as u64
        )
    };
    let ops = |f: &Figure| {
        if !f.measured() {
            return "+++++,+++".to_string();
        }
        format!("{},{}", f.rate.round() as u64, f.cpu_pct.round() as u64)
    };
    let seeks = if r.random_seeks.measured() {
        format!(
            "{:.1},{}",
            r.random_seeks.rate,
            r.random_seeks.cpu_pct.round() as u64
        )
    } else {
        "+++++,+++".to_string()
    };
    let mut f: Vec<String> = vec![
        "1.98".into(),
        "2.00a".into(),
        name,
        "1".into(),
        r.seed.to_string(),
        size_text(r.size),
        if r.chunk == DEFAULT_CHUNK {
            String::new()
        } else {
            r.chunk.to_string()
        },
        r.seeks.to_string(),
        r.seekers.to_string(),
        ",".into(), // putc, putc_cpu: not run (as -f)
        kib(&r.put_block),
        kib(&r.rewrite),
        ",".into(), // getc, getc_cpu: not run
        kib(&r.get_block),
        seeks,
    ];
    match &r.files {
        Some(ft) => {
            f.push((ft.files / 1024).to_string());
            f.push(",,,".into()); // max_size, min_size, num_dirs, file_chunk_size: defaults
            for x in [
                &ft.seq_create,
                &ft.seq_stat,
                &ft.seq_delete,
                &ft.ran_create,
                &ft.ran_stat,
                &ft.ran_delete,
            ] {
                f.push(ops(x));
            }
        }
        None => {
            f.push(String::new());
            f.push(",,,".into());
            for _ in 0..6 {
                f.push(",".into());
            }
        }
    }
    f.push(String::new()); // putc latency
    f.push(latency(r.put_block.max_latency_us));
    f.push(latency(r.rewrite.max_latency_us));
    f.push(String::new()); // getc latency
    f.push(latency(r.get_block.max_latency_us));
    f.push(latency(r.random_seeks.max_latency_us));
    match &r.files {
        Some(ft) => {
            for x in [
                &ft.seq_create,
                &ft.seq_stat,
                &ft.seq_delete,
                &ft.ran_create,
                &ft.ran_stat,
                &ft.ran_delete,
            ] {
                f.push(latency(x.max_latency_us));
            }
        }
        None => f.push(",,,,,".into()),
    }
    f.join(",")
}

/// Every figure of one result in report order: (group, test, unit, the rate in
/// that unit, the figure). The table and the raidlab-bench/1 rows both read it.
fn figures(r: &BonnieResult) -> Vec<(&'static str, &'static str, &'static str, f64, Figure)> {
    let mut v = Vec::new();
    for (test, f) in [
        ("write", r.put_block),
        ("rewrite", r.rewrite),
        ("read", r.get_block),
    ] {
        v.push(("block", test, "MB/s", f.rate / 1e6, f));
    }
    let seeks = r.random_seeks;
    v.push(("seeks", "random seeks", "seeks/s", seeks.rate, seeks));
    if let Some(ft) = &r.files {
        for (group, test, f) in [
            ("files sequential", "create", ft.seq_create),
            ("files sequential", "stat", ft.seq_stat),
            ("files sequential", "delete", ft.seq_delete),
            ("files random", "create", ft.ran_create),
            ("files random", "stat", ft.ran_stat),
            ("files random", "delete", ft.ran_delete),
        ] {
            v.push((group, test, "files/s", f.rate, f));
        }
    }
    v
}

/// The raidlab-bench/1 report; `details` has every figure and the CSV lines.
pub fn report(results: &[BonnieResult], machine: &str) -> BenchReport {
    let mut rep = BenchReport::new("bonnie", results.iter().map(|r| r.label.clone()).collect());
    for r in results {
        let l = &r.label;
        for (group, test, unit, value, f) in figures(r) {
            rep.push(group, test, l, unit, value);
            rep.push(group, test, l, "latency max µs", f.max_latency_us);
        }
    }
    rep.details = serde_json::json!({
        "results": results,
        "csv": results.iter().map(|r| csv_line(r, machine)).collect::<Vec<_>>(),
    });
    rep
}

/// The side-by-side text table: a row per test, a column group per target (rate,
/// %CPU and the slowest operation, in Bonnie++'s latency text); "-" where a
/// target has no figure (file tests run on directory targets only).
pub fn table(results: &[BonnieResult]) -> String {
    let mut t = SideBySide::new(
        &[("test", 16), ("", 12), ("unit", 7)],
        results.iter().map(|r| r.label.clone()).collect(),
        &[("rate", 10), ("%CPU", 5), ("slowest", 9)],
    );
    let all: Vec<_> = results.iter().map(figures).collect();
    let keys = keys_in_order(
        all.iter()
            .map(|fs| fs.iter().map(|f| (f.0, f.1, f.2)).collect()),
    );
    for (group, test, unit) in keys {
        let cells = all
            .iter()
            .map(|fs| {
                fs.iter()
                    .find(|f| (f.0, f.1, f.2) == (group, test, unit))
                    .map(|&(_, _, _, value, f)| {
                        if f.measured() {
                            vec![
                                format!("{value:.1}"),
                                format!("{:.0}", f.cpu_pct),
                                latency(f.max_latency_us),
                            ]
                        } else {
                            // Bonnie++'s mark for a test too short to measure.
                            vec!["+++++".into(), "+++".into(), latency(f.max_latency_us)]
                        }
                    })
            })
            .collect();
        t.row(vec![group.into(), test.into(), unit.into()], cells);
    }
    t.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(rate: f64) -> Figure {
        Figure {
            rate,
            cpu_pct: 12.4,
            max_latency_us: 1500.0,
            seconds: 2.0,
        }
    }

    #[test]
    fn csv_line_has_bonnies_fields_in_place() {
        let r = BonnieResult {
            label: "x".into(),
            size: 64 << 20,
            chunk: DEFAULT_CHUNK,
            seeks: 8192,
            seekers: 5,
            seed: 42,
            put_block: fig(10.0 * 1024.0 * 1024.0),
            rewrite: fig(5.0 * 1024.0 * 1024.0),
            get_block: fig(20.0 * 1024.0 * 1024.0),
            random_seeks: fig(321.25),
            files: Some(FileTests {
                files: 1024,
                seq_create: fig(1000.0),
                seq_stat: fig(2000.0),
                seq_delete: fig(3000.0),
                ran_create: fig(4000.0),
                ran_stat: fig(5000.0),
                ran_delete: fig(6000.0),
            }),
            interrupted: false,
        };
        let line = csv_line(&r, "box,1");
        let f: Vec<&str> = line.split(',').collect();
        // 50 fields, as bonnie++ 2.00a writes them.
        assert_eq!(f.len(), 50, "{line}");
        assert_eq!(
            &f[..9],
            ["1.98", "2.00a", "box_1", "1", "42", "64M", "", "8192", "5"]
        );
        assert_eq!((f[11], f[12]), ("10240", "12"));
        assert_eq!(f[13], "5120");
        assert_eq!(f[17], "20480");
        assert_eq!(f[19], "321.2");
        assert_eq!(f[21], "1");
        assert_eq!(f[26], "1000");
        assert_eq!(f[36], "6000");
        assert_eq!(f[39], "1500us");
        assert_eq!(f[49], "1500us");
        let mut no_files = r.clone();
        no_files.files = None;
        assert_eq!(csv_line(&no_files, "m").split(',').count(), 50);
        // Bonnie++'s conventions: 1G, not 1024M; a test under 0.5 s is +++++.
        let mut quick = r.clone();
        quick.size = 1 << 30;
        quick.rewrite.seconds = 0.2;
        quick.files.as_mut().unwrap().seq_stat.seconds = 0.01;
        let line = csv_line(&quick, "m");
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 50, "{line}");
        assert_eq!(f[5], "1G");
        assert_eq!((f[13], f[14]), ("+++++", "+++"));
        assert_eq!((f[11], f[12]), ("10240", "12"));
        assert_eq!((f[28], f[29]), ("+++++", "+++"));
        assert_eq!(size_text(512 << 20), "512M");
        assert_eq!(size_text(3 << 29), "1536M");
        let t = table(&[quick]);
        assert!(t.contains("+++++"), "{t}");
    }

    #[test]
    fn latency_units_as_bonnie() {
        assert_eq!(latency(44.0), "44us");
        assert_eq!(latency(12_789.0), "12789us");
        assert_eq!(latency(250_400.0), "250ms");
    }
}
