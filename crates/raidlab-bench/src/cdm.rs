//! CrystalDiskMark 8's test set: its tests, profiles, runs and "best of" rule.
//!
//! Each test (e.g. SEQ1M Q8T1: sequential, 1 MiB blocks, queue depth 8, 1 thread)
//! runs `runs` times for `measure` each; the best run (highest MB/s) is reported
//! as CrystalDiskMark reports it, with the average of the runs beside it. As in
//! CrystalDiskMark, the test file is written in full first, the read column runs
//! before the write column, and `interval` passes between tests (idle time for the
//! device to settle). MB/s are 10^6 bytes per second.
//!
//! This module decides what to run and how to summarise it; it never does I/O
//! itself (the engine does) and never prints (the CLI does).

use crate::engine::{
    self, Access, Control, DataFill, Dir, EngineKind, Limit, Measured, Rewrite, Workload,
};
use crate::schema::BenchReport;
use crate::table::{keys_in_order, SideBySide};
use crate::target::Target;
use raidlab_core::{Error, Result};
use serde::Serialize;
use std::time::{Duration, Instant};

/// One CrystalDiskMark test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CdmTest {
    pub access: CdmAccess,
    pub bs: usize,
    pub qd: usize,
    pub threads: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CdmAccess {
    Seq,
    Rnd,
}

impl CdmTest {
    const fn new(access: CdmAccess, bs: usize, qd: usize, threads: usize) -> Self {
        CdmTest {
            access,
            bs,
            qd,
            threads,
        }
    }

    /// CrystalDiskMark's name, e.g. `SEQ1M Q8T1`, `RND4K Q32T16`.
    pub fn name(&self) -> String {
        let kind = match self.access {
            CdmAccess::Seq => "SEQ",
            CdmAccess::Rnd => "RND",
        };
        let size = if self.bs >= 1 << 20 {
            format!("{}M", self.bs >> 20)
        } else {
            format!("{}K", self.bs >> 10)
        };
        format!("{kind}{size} Q{}T{}", self.qd, self.threads)
    }
}

const SEQ1M_Q8T1: CdmTest = CdmTest::new(CdmAccess::Seq, 1 << 20, 8, 1);
const SEQ1M_Q1T1: CdmTest = CdmTest::new(CdmAccess::Seq, 1 << 20, 1, 1);
const SEQ128K_Q32T1: CdmTest = CdmTest::new(CdmAccess::Seq, 128 << 10, 32, 1);
const RND4K_Q32T1: CdmTest = CdmTest::new(CdmAccess::Rnd, 4 << 10, 32, 1);
const RND4K_Q32T16: CdmTest = CdmTest::new(CdmAccess::Rnd, 4 << 10, 32, 16);
const RND4K_Q1T1: CdmTest = CdmTest::new(CdmAccess::Rnd, 4 << 10, 1, 1);

/// CrystalDiskMark 8's profiles (Settings > Profile).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    Default,
    Peak,
    RealWorld,
    Nvme,
}

impl Profile {
    pub fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "default" => Profile::Default,
            "peak" => Profile::Peak,
            "real-world" | "realworld" => Profile::RealWorld,
            "nvme" => Profile::Nvme,
            _ => {
                return Err(Error::invalid(format!(
                    "profile '{s}' is not one of CrystalDiskMark's: default, peak, real-world, nvme"
                )))
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Profile::Default => "default",
            Profile::Peak => "peak",
            Profile::RealWorld => "real-world",
            Profile::Nvme => "nvme",
        }
    }

    /// The tests, in CrystalDiskMark's order.
    pub fn tests(self) -> Vec<CdmTest> {
        match self {
            Profile::Default => vec![SEQ1M_Q8T1, SEQ1M_Q1T1, RND4K_Q32T1, RND4K_Q1T1],
            Profile::Peak => vec![SEQ1M_Q8T1, RND4K_Q32T16],
            Profile::RealWorld => vec![SEQ1M_Q1T1, RND4K_Q1T1],
            Profile::Nvme => vec![SEQ1M_Q8T1, SEQ128K_Q32T1, RND4K_Q32T16, RND4K_Q1T1],
        }
    }
}

/// CrystalDiskMark's default Mix ratio: 70% reads, 30% writes.
pub const MIX_READ_PCT: u32 = 70;

/// How to run the set.
#[derive(Debug, Clone, Copy)]
pub struct CdmConfig {
    pub profile: Profile,
    /// Test file size (CrystalDiskMark's default 1 GiB).
    pub size: u64,
    pub runs: usize,
    pub measure: Duration,
    pub interval: Duration,
    pub data: DataFill,
    pub engine: EngineKind,
    /// Run the read column, the write column, or both.
    pub read: bool,
    pub write: bool,
    /// Also CrystalDiskMark's Mix column: each test with 70% reads and 30%
    /// writes (its default mix ratio), after the write column.
    pub mix: bool,
}

impl Default for CdmConfig {
    fn default() -> Self {
        CdmConfig {
            profile: Profile::Default,
            size: 1 << 30,
            runs: 5,
            measure: Duration::from_secs(5),
            interval: Duration::from_secs(5),
            data: DataFill::Random,
            engine: EngineKind::Auto,
            read: true,
            write: true,
            mix: false,
        }
    }
}

/// One run's figures.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RunFigure {
    pub mb_s: f64,
    pub iops: f64,
    pub latency_us: f64,
    pub bytes: u64,
    pub seconds: f64,
    pub interrupted: bool,
}

impl RunFigure {
    /// A read or write test's figures; a Mix test's count both directions, as
    /// CrystalDiskMark's Mix column does.
    fn from(m: &Measured, mix: bool) -> Self {
        let both;
        let d = if mix {
            let mut d = m.read.clone();
            d.merge(&m.write);
            both = d;
            &both
        } else {
            m.main()
        };
        RunFigure {
            mb_s: d.mb_s(m.elapsed),
            iops: d.iops(m.elapsed),
            latency_us: d.mean_lat_us(),
            bytes: d.bytes,
            seconds: m.elapsed.as_secs_f64(),
            interrupted: m.interrupted,
        }
    }
}

/// One test in one direction on one target.
#[derive(Debug, Clone, Serialize)]
pub struct CdmCell {
    pub test: String,
    pub dir: &'static str,
    pub runs: Vec<RunFigure>,
    /// The run with the highest MB/s (CrystalDiskMark's figure).
    pub best: RunFigure,
    pub avg_mb_s: f64,
    pub engine: &'static str,
}

/// Everything measured on one target.
#[derive(Debug, Clone, Serialize)]
pub struct CdmTargetResult {
    pub label: String,
    pub direct: bool,
    pub size: u64,
    pub notes: Vec<String>,
    pub cells: Vec<CdmCell>,
    /// Stopped early (Ctrl-C): the cells hold what was measured.
    pub interrupted: bool,
}

/// What the runner is doing, for progress displays.
#[derive(Debug, Clone)]
pub enum Event {
    /// Writing the test file before measuring.
    Prepare { target: String, bytes: u64 },
    /// Measuring one run.
    Run {
        target: String,
        test: String,
        dir: &'static str,
        run: usize,
        runs: usize,
        measure: Duration,
    },
    /// Waiting between tests.
    Interval { seconds: f64 },
}

/// Run the set on one target.
pub fn run(
    target: &Target,
    cfg: &CdmConfig,
    control: &Control,
    on: &mut dyn FnMut(&Event),
) -> Result<CdmTargetResult> {
    if cfg.runs == 0 || cfg.measure.is_zero() {
        return Err(Error::invalid(
            "runs and measure time must be at least 1 and more than 0 seconds",
        ));
    }
    let mut out = CdmTargetResult {
        label: target.label.clone(),
        direct: target.direct,
        size: target.size,
        notes: target.notes.clone(),
        cells: Vec::new(),
        interrupted: false,
    };
    let tests = cfg.profile.tests();
    if let Some(t) = tests.iter().find(|t| (t.bs as u64) > target.size) {
        return Err(Error::invalid(format!(
            "the test size ({} bytes) is smaller than one {} block: give a larger test size",
            target.size,
            t.name()
        ))
        .on_device(target.label.clone()));
    }
    on(&Event::Prepare {
        target: target.label.clone(),
        bytes: target.size,
    });
    prepare(target, cfg, control)?;
    let dirs: Vec<(&'static str, Dir)> = [
        ("read", Dir::Read, cfg.read),
        ("write", Dir::Write, cfg.write),
        (
            "mix",
            Dir::Mix {
                read_pct: MIX_READ_PCT,
            },
            cfg.mix,
        ),
    ]
    .into_iter()
    .filter(|d| d.2)
    .map(|d| (d.0, d.1))
    .collect();
    let mut first = true;
    'all: for (dir_name, dir) in dirs {
        for test in &tests {
            if control.stopped() {
                break 'all;
            }
            if !first && !cfg.interval.is_zero() {
                on(&Event::Interval {
                    seconds: cfg.interval.as_secs_f64(),
                });
                // A simulated device rests in virtual time (its caches
                // destage), with no wall-clock wait.
                match &target.sim {
                    Some(sim) => sim.idle(cfg.interval),
                    None => pause(cfg.interval, control),
                }
            }
            first = false;
            let mut runs = Vec::new();
            let mut engine_name = "";
            for run in 0..cfg.runs {
                if control.stopped() {
                    break;
                }
                on(&Event::Run {
                    target: target.label.clone(),
                    test: test.name(),
                    dir: dir_name,
                    run: run + 1,
                    runs: cfg.runs,
                    measure: cfg.measure,
                });
                let w = workload(test, dir, target.size, cfg, run as u64);
                let m = engine::run(target, &w, control)?;
                engine_name = m.engine;
                if m.read.ios + m.write.ios > 0 {
                    runs.push(RunFigure::from(&m, dir_name == "mix"));
                }
            }
            if let Some(cell) = summarise(test.name(), dir_name, runs, engine_name) {
                out.cells.push(cell);
            }
        }
    }
    out.interrupted = control.stopped();
    Ok(out)
}

fn summarise(
    test: String,
    dir: &'static str,
    runs: Vec<RunFigure>,
    engine: &'static str,
) -> Option<CdmCell> {
    let best = *runs.iter().max_by(|a, b| a.mb_s.total_cmp(&b.mb_s))?;
    let avg_mb_s = runs.iter().map(|r| r.mb_s).sum::<f64>() / runs.len() as f64;
    Some(CdmCell {
        test,
        dir,
        runs,
        best,
        avg_mb_s,
        engine,
    })
}

/// The workload of one CrystalDiskMark test.
pub fn workload(test: &CdmTest, dir: Dir, size: u64, cfg: &CdmConfig, seed: u64) -> Workload {
    Workload {
        access: match test.access {
            CdmAccess::Seq => Access::Seq,
            CdmAccess::Rnd => Access::Rand,
        },
        dir,
        bs: test.bs,
        offset: 0,
        size,
        threads: test.threads,
        qd: test.qd,
        limit: Limit {
            time: Some(cfg.measure),
            bytes: None,
        },
        data: cfg.data,
        rewrite: Rewrite::Never,
        random_map: false,
        seed: 0x00C0_FFEE ^ seed,
        split: true,
        engine: cfg.engine,
    }
}

/// Write the whole test region once, so reads read stored data (not holes).
fn prepare(target: &Target, cfg: &CdmConfig, control: &Control) -> Result<()> {
    let bs = (1usize << 20).min(target.size as usize);
    let w = Workload {
        access: Access::Seq,
        dir: Dir::Write,
        bs,
        offset: 0,
        size: target.size / bs as u64 * bs as u64,
        threads: 1,
        qd: 4,
        limit: Limit {
            time: None,
            bytes: Some(target.size / bs as u64 * bs as u64),
        },
        data: cfg.data,
        rewrite: Rewrite::Never,
        random_map: false,
        seed: 1,
        split: true,
        engine: cfg.engine,
    };
    engine::run(target, &w, control)?;
    target.volume.flush()
}

/// Sleep, waking early on a stop request.
fn pause(d: Duration, control: &Control) {
    let end = Instant::now() + d;
    while !control.stopped() {
        let now = Instant::now();
        if now >= end {
            break;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(50)));
    }
}

/// The raidlab-bench/1 report of a CrystalDiskMark run.
pub fn report(results: &[CdmTargetResult], cfg: &CdmConfig) -> BenchReport {
    let mut r = BenchReport::new("cdm", results.iter().map(|t| t.label.clone()).collect());
    for t in results {
        for c in &t.cells {
            r.push(&c.test, c.dir, &t.label, "MB/s", c.best.mb_s);
            r.push(&c.test, c.dir, &t.label, "IOPS", c.best.iops);
            r.push(&c.test, c.dir, &t.label, "latency µs", c.best.latency_us);
            r.push(&c.test, c.dir, &t.label, "MB/s avg", c.avg_mb_s);
        }
    }
    r.details = serde_json::json!({
        "profile": cfg.profile,
        "test_size": cfg.size,
        "runs": cfg.runs,
        "measure_s": cfg.measure.as_secs_f64(),
        "interval_s": cfg.interval.as_secs_f64(),
        "data": match cfg.data { DataFill::Random => "random", DataFill::Zero => "zero" },
        "targets": results,
    });
    r
}

/// The side-by-side text table: one row per test and direction, one column group
/// per target (best MB/s, average MB/s, IOPS and mean latency of the best run).
pub fn table(results: &[CdmTargetResult]) -> String {
    let mut t = SideBySide::new(
        &[("test", 14), ("", 5)],
        results.iter().map(|r| r.label.clone()).collect(),
        &[("MB/s", 10), ("(avg)", 10), ("IOPS", 10), ("lat µs", 9)],
    );
    let keys = keys_in_order(
        results
            .iter()
            .map(|r| r.cells.iter().map(|c| (c.test.clone(), c.dir)).collect()),
    );
    for (test, dir) in keys {
        let cells = results
            .iter()
            .map(|r| {
                r.cells
                    .iter()
                    .find(|c| c.test == test && c.dir == dir)
                    .map(|c| {
                        vec![
                            format!("{:.2}", c.best.mb_s),
                            format!("({:.2})", c.avg_mb_s),
                            format!("{:.0}", c.best.iops),
                            format!("{:.1}", c.best.latency_us),
                        ]
                    })
            })
            .collect();
        t.row(vec![test, dir.to_string()], cells);
    }
    t.render()
}

/// CrystalDiskMark's window for one target: its tests down, Read and Write (and
/// Mix when run) across, the best run's MB/s with two decimals, as the program
/// shows them.
pub fn grid(r: &CdmTargetResult) -> String {
    let tests = keys_in_order([r.cells.iter().map(|c| c.test.clone()).collect()]);
    let dirs = keys_in_order([r.cells.iter().map(|c| c.dir).collect()]);
    let tw = tests
        .iter()
        .map(|t| t.len())
        .fold(r.label.chars().count() + 8, usize::max)
        .max(14);
    let mut out = format!("{:<tw$}", format!("{} (MB/s)", r.label));
    for d in &dirs {
        let mut title = d.to_string();
        title[..1].make_ascii_uppercase();
        out.push_str(&format!(" {title:>10}"));
    }
    out.push('\n');
    for t in &tests {
        out.push_str(&format!("{t:<tw$}"));
        for d in &dirs {
            match r.cells.iter().find(|c| c.test == *t && c.dir == *d) {
                Some(c) => out.push_str(&format!(" {:>10.2}", c.best.mb_s)),
                None => out.push_str(&format!(" {:>10}", "-")),
            }
        }
        out.push('\n');
    }
    out
}

/// CrystalDiskMark's "Save text" layout (what people paste into forums and
/// compare): per direction a block of tests, each `MB/s [IOPS] <latency>`
/// with MB/s to three decimals, IOPS to one and latency in µs to two, as that
/// text shows them; then the profile, test size, runs and timing. One block
/// per target.
pub fn save_text(results: &[CdmTargetResult], cfg: &CdmConfig) -> String {
    let mut out = String::new();
    let rule = "-".repeat(78);
    for t in results {
        out.push_str(&format!(
            "{rule}\nraidlab {} - CrystalDiskMark 8 tests\n{rule}\n",
            env!("CARGO_PKG_VERSION")
        ));
        out.push_str("* MB/s = 1,000,000 bytes/s\n* KB = 1000 bytes, KiB = 1024 bytes\n");
        for (dir, title) in [
            ("read", "[Read]".to_string()),
            ("write", "[Write]".to_string()),
            (
                "mix",
                format!("[Mix] Read {}%/Write {}%", MIX_READ_PCT, 100 - MIX_READ_PCT),
            ),
        ] {
            let cells: Vec<&CdmCell> = t.cells.iter().filter(|c| c.dir == dir).collect();
            if cells.is_empty() {
                continue;
            }
            out.push_str(&format!("\n{title}\n"));
            for c in cells {
                out.push_str(&format!(
                    "  {}: {:>9.3} MB/s [{:>9.1} IOPS] <{:>9.2} us>\n",
                    save_text_name(&c.test),
                    c.best.mb_s,
                    c.best.iops,
                    c.best.latency_us
                ));
            }
        }
        out.push_str(&format!(
            "\nProfile: {}\n   Test: {} (x{}) [{}]\n   Mode: {}\n   Time: Measure {} sec / Interval {} sec\n",
            match cfg.profile {
                Profile::Default => "Default",
                Profile::Peak => "Peak Performance",
                Profile::RealWorld => "Real World Performance",
                Profile::Nvme => "Default (NVMe SSD)",
            },
            raidlab_core::size::format_size(t.size),
            cfg.runs,
            t.label,
            if t.direct { "O_DIRECT" } else { "page cache or in-process" },
            cfg.measure.as_secs_f64(),
            cfg.interval.as_secs_f64(),
        ));
    }
    out
}

/// `SEQ1M Q8T1` as the saved text names it: `SEQ    1MiB (Q=  8, T= 1)`.
fn save_text_name(test: &str) -> String {
    let (kind, rest) = test.split_at(3);
    let Some((size, qt)) = rest.split_once(' ') else {
        return test.to_string();
    };
    let (q, t) = qt
        .trim_start_matches('Q')
        .split_once('T')
        .unwrap_or((qt, ""));
    format!("{kind} {:>5}iB (Q={q:>3}, T={t:>2})", size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_profiles_match_crystaldiskmark() {
        let names = |p: Profile| p.tests().iter().map(|t| t.name()).collect::<Vec<_>>();
        assert_eq!(
            names(Profile::Default),
            ["SEQ1M Q8T1", "SEQ1M Q1T1", "RND4K Q32T1", "RND4K Q1T1"]
        );
        assert_eq!(
            names(Profile::Nvme),
            ["SEQ1M Q8T1", "SEQ128K Q32T1", "RND4K Q32T16", "RND4K Q1T1"]
        );
        assert_eq!(names(Profile::Peak), ["SEQ1M Q8T1", "RND4K Q32T16"]);
        assert_eq!(names(Profile::RealWorld), ["SEQ1M Q1T1", "RND4K Q1T1"]);
        assert!(Profile::parse("fast")
            .unwrap_err()
            .to_string()
            .contains("nvme"));
    }

    #[test]
    fn best_is_the_highest_run_and_average_beside_it() {
        let f = |mb_s| RunFigure {
            mb_s,
            iops: mb_s,
            latency_us: 1.0,
            bytes: 1,
            seconds: 1.0,
            interrupted: false,
        };
        let c = summarise(
            "T".into(),
            "read",
            vec![f(10.0), f(30.0), f(20.0)],
            "threads",
        )
        .unwrap();
        assert_eq!(c.best.mb_s, 30.0);
        assert_eq!(c.avg_mb_s, 20.0);
        assert!(summarise("T".into(), "read", vec![], "threads").is_none());
    }

    #[test]
    fn grid_is_tests_by_direction_in_mb_s() {
        let fig = |mb_s: f64| RunFigure {
            mb_s,
            iops: 1.0,
            latency_us: 1.0,
            bytes: 1,
            seconds: 1.0,
            interrupted: false,
        };
        let cell = |test: &str, dir: &'static str, mb_s: f64| CdmCell {
            test: test.into(),
            dir,
            runs: vec![fig(mb_s)],
            best: fig(mb_s),
            avg_mb_s: mb_s,
            engine: "threads",
        };
        let t = CdmTargetResult {
            label: "disk".into(),
            direct: true,
            size: 1 << 30,
            notes: vec![],
            cells: vec![
                cell("SEQ1M Q8T1", "read", 3515.0234),
                cell("RND4K Q1T1", "read", 54.1),
                cell("SEQ1M Q8T1", "write", 3012.4),
            ],
            interrupted: false,
        };
        let g = grid(&t);
        let lines: Vec<&str> = g.lines().collect();
        assert_eq!(lines[0], "disk (MB/s)          Read      Write");
        assert_eq!(lines[1], "SEQ1M Q8T1        3515.02    3012.40");
        assert_eq!(lines[2], "RND4K Q1T1          54.10          -");
        assert_eq!(lines.len(), 3);
    }

    #[test]
    fn save_text_reads_like_crystaldiskmarks() {
        let fig = |mb_s: f64, iops: f64, latency_us: f64| RunFigure {
            mb_s,
            iops,
            latency_us,
            bytes: 1,
            seconds: 5.0,
            interrupted: false,
        };
        let cell = |test: &str, dir: &'static str, f: RunFigure| CdmCell {
            test: test.into(),
            dir,
            runs: vec![f],
            best: f,
            avg_mb_s: f.mb_s,
            engine: "threads",
        };
        let t = CdmTargetResult {
            label: "disk.img".into(),
            direct: true,
            size: 1 << 30,
            notes: vec![],
            cells: vec![
                cell("SEQ1M Q8T1", "read", fig(3515.0234, 3352.21, 2383.934)),
                cell("RND4K Q32T1", "write", fig(507.29, 123850.14, 256.919)),
                cell("RND4K Q1T1", "mix", fig(54.1481, 13219.7, 75.51)),
            ],
            interrupted: false,
        };
        let text = save_text(&[t], &CdmConfig::default());
        assert!(text.contains("[Read]\n  SEQ    1MiB (Q=  8, T= 1):  3515.023 MB/s [   3352.2 IOPS] <  2383.93 us>\n"), "{text}");
        assert!(text.contains("[Write]\n  RND    4KiB (Q= 32, T= 1):   507.290 MB/s [ 123850.1 IOPS] <   256.92 us>\n"), "{text}");
        assert!(
            text.contains("[Mix] Read 70%/Write 30%\n  RND    4KiB (Q=  1, T= 1)"),
            "{text}"
        );
        assert!(text.contains("Profile: Default\n   Test: 1G (x5) [disk.img]\n   Mode: O_DIRECT\n   Time: Measure 5 sec / Interval 5 sec\n"), "{text}");
    }
}
