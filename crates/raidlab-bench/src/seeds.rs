//! The five source articles' experiments (SEEDS.md), redone in virtual time on
//! simulated hardware: each article's figure beside the simulated one, cell by
//! cell, and each of the article's findings evaluated from the simulated figures.
//!
//! Decides: which configuration and which test every seed runs, the article's
//! figures (as SEEDS.md gives them; none is invented: a cell with no published
//! figure has `article: None`), and the rule that decides each finding. It must
//! never hard-code a finding's outcome (every `reproduced` is computed from
//! simulated figures, so a wrong model or configuration turns it false), never
//! time anything with the wall clock, and never print: the command renders.
//!
//! Seed B (the SSD cache) is in [`crate::seed_b`].

use crate::bonnie::{self, BonnieConfig};
use crate::cdm::{self, CdmAccess, CdmConfig, CdmTest};
use crate::engine::{self, Access, Control, DataFill, Dir, EngineKind, Limit, Rewrite, Workload};
use crate::target::{OpenOptions, Target};
use raidlab_core::{Error, Result};
use raidlab_sim::config::SimConfig;
use raidlab_sim::device::{Device, SEC};
use raidlab_sim::mixed::run_mixed;
use raidlab_sim::workload::{self, Job, Pattern};
use serde::Serialize;
use std::time::Duration;

/// The format name of `raidlab seeds --json`.
pub const FORMAT: &str = "raidlab-seeds/1";

/// The seeds this module can run.
pub const RUNNABLE: [Seed; 5] = [Seed::A, Seed::B, Seed::C, Seed::D, Seed::E];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Seed {
    A,
    B,
    C,
    D,
    E,
}

impl Seed {
    pub fn parse(s: &str) -> Result<Seed> {
        match s.to_ascii_uppercase().as_str() {
            "A" => Ok(Seed::A),
            "B" => Ok(Seed::B),
            "C" => Ok(Seed::C),
            "D" => Ok(Seed::D),
            "E" => Ok(Seed::E),
            _ => Err(Error::invalid(format!(
                "unknown seed `{s}`: the seeds are A, B, C, D and E (SEEDS.md)"
            ))),
        }
    }
    pub fn letter(self) -> &'static str {
        match self {
            Seed::A => "A",
            Seed::B => "B",
            Seed::C => "C",
            Seed::D => "D",
            Seed::E => "E",
        }
    }
    pub fn title(self) -> &'static str {
        match self {
            Seed::A => "RAID for a faster desktop (two 7K250 HDDs)",
            Seed::B => "SSD cache in front of software RAID 5",
            Seed::C => "Hardware RAID card vs Linux software RAID (six 750 GB HDDs)",
            Seed::D => "SSD vs SATA HDD RAID (Bonnie++)",
            Seed::E => "RAID levels on SATA SSDs behind a MegaRAID card (CrystalDiskMark)",
        }
    }
    /// What the simulation leaves out, printed under the seed's table.
    pub fn scope(self) -> &'static str {
        match self {
            Seed::A => "block level: the article timed desktop tasks on ext3; here the disk workloads behind them (streams, concurrent readers, a full-disk scanner beside a foreground reader)",
            Seed::B => crate::seed_b::SCOPE,
            Seed::C => "block level: the article ran Bonnie++ on ext3/XFS; here Bonnie++'s block tests on the volume (the file system's merging of its 8 KiB calls is modelled as 1 MiB requests)",
            Seed::D => "block level: the article ran Bonnie++ on ext3/XFS; here Bonnie++'s tests on the volume (block tests in 1 MiB requests, seeks in 8 KiB)",
            Seed::E => "block level, as CrystalDiskMark's test file on NTFS is one contiguous extent; 1 GiB test size",
        }
    }
}

/// One figure: the article's beside the simulated one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    pub seed: &'static str,
    pub config: String,
    pub test: String,
    pub unit: &'static str,
    pub simulated: f64,
    pub article: Option<f64>,
    /// Seed E only: "calibration" (a card parameter was fitted to this cell) or
    /// "prediction" (nothing was fitted to it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
}

impl Cell {
    /// simulated / article, where the article gives a figure.
    pub fn ratio(&self) -> Option<f64> {
        self.article
            .filter(|a| *a > 0.0)
            .map(|a| self.simulated / a)
    }
}

/// One of an article's findings and whether the simulated figures show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub seed: &'static str,
    pub text: String,
    pub reproduced: bool,
    /// False where the model cannot show the finding (file-system or CPU
    /// effects): then `reproduced` is false and `why` says what is missing.
    pub modelled: bool,
    /// The figures the rule compared, or why the model cannot show it.
    pub why: String,
}

/// Everything `raidlab seeds` found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeedsResult {
    pub format: &'static str,
    pub seeds: Vec<&'static str>,
    pub cells: Vec<Cell>,
    pub findings: Vec<Finding>,
    /// Per seed, what the simulation leaves out.
    pub notes: Vec<String>,
    /// Seed E: median absolute error over the cells with an article figure,
    /// over all of them and over the prediction cells alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed_e_error: Option<ErrorSummary>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ErrorSummary {
    pub cells: usize,
    pub median_abs_error: f64,
    pub prediction_cells: usize,
    pub prediction_median_abs_error: f64,
}

/// How to run the seeds.
#[derive(Debug, Clone)]
pub struct SeedOptions {
    /// Replace a configuration's simulator spec (config name, spec): lets a test
    /// run a deliberately wrong configuration and see a finding turn false.
    pub overrides: Vec<(String, String)>,
    /// Worker threads (the figures do not depend on it).
    pub threads: usize,
    /// Run only these configurations (empty: all): for tests of one seed's
    /// determinism that need not pay for every configuration.
    pub only: Vec<String>,
}

impl Default for SeedOptions {
    fn default() -> Self {
        SeedOptions {
            overrides: Vec::new(),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get().min(4)),
            only: Vec::new(),
        }
    }
}

/// One configuration of a seed, and the simulator spec it runs on.
#[derive(Debug, Clone)]
pub struct Config {
    pub seed: Seed,
    pub name: String,
    pub spec: String,
}

const E_CARD: &str = "card=megaraid-9361-4i";
/// The MegaRAID's default strip size for a new virtual drive (256 KiB on the
/// 93xx family's current firmware).
const E_CHUNK: &str = "chunk=256K";
const C_DISKS: &str = "6xsamsung-hd753lj";
/// About 100 GB used per disk, as in article C.
const C_MEMBER: &str = "member-size=100G";

/// The configurations, in the order the tables print them.
pub fn configs(seed: Seed) -> Vec<Config> {
    let c = |name: &str, spec: String| Config {
        seed,
        name: name.to_string(),
        spec,
    };
    match seed {
        Seed::A => vec![
            c("one-disk", "hitachi-7k250".into()),
            c("raid0-2", "raid0:2xhitachi-7k250:chunk=64K".into()),
            c("raid1-2", "raid1:2xhitachi-7k250".into()),
        ],
        Seed::B => crate::seed_b::configs(seed),
        Seed::C => {
            let mut v = Vec::new();
            for level in ["raid5", "raid6", "raid10"] {
                for chunk in ["64K", "256K", "1M"] {
                    for (kind, card) in [
                        ("sw", "card=adaptec-sas-31205/pass-through"),
                        ("hw", "card=adaptec-sas-31205"),
                    ] {
                        v.push(c(
                            &format!("{kind}-{level}-{}", chunk.to_ascii_lowercase()),
                            format!("{level}:{C_DISKS}:chunk={chunk}:{C_MEMBER}:{card}"),
                        ));
                    }
                }
            }
            v
        }
        Seed::D => vec![
            c("ssd", "mtron-mobi-32g".into()),
            c("hdd", "samsung-hd753lj".into()),
            c(
                "raid6-6hdd",
                format!(
                    "raid6:{C_DISKS}:chunk=256K:{C_MEMBER}:card=adaptec-sas-31205/pass-through"
                ),
            ),
        ],
        Seed::E => vec![
            c("1ssd", "sata-ssd-1tb-2021".into()),
            c(
                "raid0-2ssd",
                format!("raid0:2xsata-ssd-1tb-2021:{E_CHUNK}:{E_CARD}"),
            ),
            c("raid1-2ssd", format!("raid1:2xsata-ssd-1tb-2021:{E_CARD}")),
            c(
                "raid5-3ssd",
                format!("raid5:3xsata-ssd-1tb-2021:{E_CHUNK}:{E_CARD}"),
            ),
            c(
                "raid6-4ssd",
                format!("raid6:4xsata-ssd-1tb-2021:{E_CHUNK}:{E_CARD}"),
            ),
            c(
                "raid5-4ssd",
                format!("raid5:4xsata-ssd-1tb-2021:{E_CHUNK}:{E_CARD}"),
            ),
            c(
                "raid0-4ssd",
                format!("raid0:4xsata-ssd-1tb-2021:{E_CHUNK}:{E_CARD}"),
            ),
        ],
    }
}

/// Article E's table (MB/s), in SEEDS.md's column order; None where the article
/// gives "-".
const E_TESTS: [&str; 6] = [
    "SEQ1M-Q8T1-read",
    "SEQ1M-Q8T1-write",
    "SEQ1M-Q1T1-read",
    "SEQ1M-Q1T1-write",
    "RND4K-Q1T1-read",
    "RND4K-Q1T1-write",
];
#[rustfmt::skip]
const E_ARTICLE: [(&str, [Option<f64>; 6]); 7] = [
    ("1ssd",       [Some(564.95),  Some(529.17),  None,          None,          Some(48.45), Some(108.97)]),
    ("raid0-2ssd", [Some(1116.34), Some(1038.75), None,          None,          Some(48.69), Some(109.58)]),
    ("raid1-2ssd", [Some(1118.23), Some(529.37),  None,          None,          Some(48.18), Some(103.18)]),
    ("raid5-3ssd", [Some(2578.90), Some(1057.08), Some(1589.78), Some(410.39),  Some(71.08), Some(32.65)]),
    ("raid6-4ssd", [Some(2854.93), Some(1055.74), Some(1381.36), Some(406.60),  Some(63.62), Some(28.77)]),
    ("raid5-4ssd", [Some(3406.11), Some(1581.06), Some(2549.93), Some(332.83),  Some(75.39), Some(23.18)]),
    ("raid0-4ssd", [Some(2229.00), Some(2072.22), Some(2001.37), Some(1890.70), Some(48.64), Some(108.53)]),
];

/// The seed E cells a card parameter was fitted to (docs/seeds.md says which
/// parameter): everything else is a prediction.
pub const E_CALIBRATION: [(&str, &str); 4] = [
    ("raid0-2ssd", "RND4K-Q1T1-write"),
    ("raid5-3ssd", "SEQ1M-Q8T1-read"),
    ("raid5-3ssd", "RND4K-Q1T1-read"),
    ("raid5-3ssd", "RND4K-Q1T1-write"),
];

fn e_article(config: &str, test: &str) -> Option<f64> {
    let col = E_TESTS.iter().position(|t| *t == test)?;
    E_ARTICLE
        .iter()
        .find(|(c, _)| *c == config)
        .and_then(|(_, row)| row[col])
}

/// Article D's figures: SEEDS.md gives "roughly a hundred" seeks/s for one HDD.
fn d_article(config: &str, test: &str) -> Option<f64> {
    (config == "hdd" && test == "random_seeks").then_some(100.0)
}

/// Article A's figures: the browser start under background indexing, "nearly a
/// minute" on one disk and 8 s on the array (the mirror, whose parallel reads the
/// article credits for concurrent work).
fn a_article(config: &str, test: &str) -> Option<f64> {
    match (config, test) {
        ("one-disk", "fg_under_scan") => Some(60.0),
        ("raid1-2", "fg_under_scan") => Some(8.0),
        _ => None,
    }
}

/// Run `seeds` (B is skipped: see [`Seed::scope`]).
pub fn run(seeds: &[Seed], opts: &SeedOptions) -> Result<SeedsResult> {
    let mut seeds: Vec<Seed> = seeds.to_vec();
    if seeds.is_empty() {
        seeds = RUNNABLE.to_vec();
    }
    seeds.sort();
    seeds.dedup();
    let mut jobs: Vec<Config> = Vec::new();
    for &s in &seeds {
        for mut c in configs(s) {
            if !opts.only.is_empty() && !opts.only.contains(&c.name) {
                continue;
            }
            if let Some((_, spec)) = opts.overrides.iter().find(|(n, _)| *n == c.name) {
                c.spec = spec.clone();
            }
            jobs.push(c);
        }
    }
    let results = run_parallel(&jobs, opts.threads.max(1))?;
    let cells: Vec<Cell> = results.into_iter().flatten().collect();
    let mut findings = Vec::new();
    for &s in &seeds {
        findings.extend(evaluate(s, &cells));
    }
    let seed_e_error = seeds.contains(&Seed::E).then(|| e_error(&cells));
    Ok(SeedsResult {
        format: FORMAT,
        seeds: seeds.iter().map(|s| s.letter()).collect(),
        cells,
        findings,
        notes: seeds
            .iter()
            .map(|s| format!("{}: {}", s.letter(), s.scope()))
            .collect(),
        seed_e_error,
    })
}

/// Run every configuration on a few threads; results come back in `jobs` order
/// (each configuration has its own simulated device, so order cannot change a
/// figure).
fn run_parallel(jobs: &[Config], threads: usize) -> Result<Vec<Vec<Cell>>> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<Result<Vec<Cell>>>>> =
        jobs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads.min(jobs.len()).max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(c) = jobs.get(i) else { break };
                let r = run_config(c);
                *slots[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
            });
        }
    });
    slots
        .into_iter()
        .zip(jobs)
        .map(|(m, c)| {
            m.into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .unwrap_or_else(|| {
                    Err(Error::invalid(format!(
                        "internal error: seed {} configuration {} was not run (a worker panicked)",
                        c.seed.letter(),
                        c.name
                    )))
                })
        })
        .collect()
}

fn context(c: &Config, e: impl std::fmt::Display) -> Error {
    Error::invalid(format!(
        "seed {} configuration {} (sim:{}): {e}",
        c.seed.letter(),
        c.name,
        c.spec
    ))
}

fn run_config(c: &Config) -> Result<Vec<Cell>> {
    match c.seed {
        Seed::A => run_a(c),
        Seed::B => crate::seed_b::run(c),
        Seed::C | Seed::D => run_bonnie(c),
        Seed::E => run_e(c),
    }
}

fn cell(c: &Config, test: &str, unit: &'static str, simulated: f64) -> Cell {
    let article = match c.seed {
        Seed::A => a_article(&c.name, test),
        Seed::D => d_article(&c.name, test),
        Seed::E => e_article(&c.name, test),
        Seed::B | Seed::C => None,
    };
    let role = (c.seed == Seed::E && article.is_some()).then(|| {
        if E_CALIBRATION.contains(&(c.name.as_str(), test)) {
            "calibration"
        } else {
            "prediction"
        }
    });
    Cell {
        seed: c.seed.letter(),
        config: c.name.clone(),
        test: test.to_string(),
        unit,
        simulated,
        article,
        role,
    }
}

fn open(c: &Config, size: u64) -> Result<Target> {
    Target::open(
        &format!("sim:{}", c.spec),
        OpenOptions {
            size,
            direct: true,
            writes: true,
            allow_device_writes: false,
        },
    )
    .map_err(|e| context(c, e))
}

/// Virtual time each seed E random test measures (the sequential ones measure
/// CrystalDiskMark's 5 s). A random test's figure settles within tens of
/// milliseconds of virtual time; this keeps `raidlab seeds` under a minute.
pub const E_MEASURE: Duration = Duration::from_millis(500);

/// Seed E: CrystalDiskMark's order (reads, then writes; SEQ1M Q8T1, SEQ1M Q1T1,
/// RND4K Q32T1, RND4K Q1T1), on a 1 GiB test file written first, 5 s of idle
/// virtual time between tests as CrystalDiskMark's default interval. One run per
/// test: a simulated run repeats exactly, so CrystalDiskMark's best of 5 is the
/// same figure. RND4K Q32T1 runs (it shapes the card's cache for the next test)
/// but the article gives no figure for it, so it is not a cell.
fn run_e(c: &Config) -> Result<Vec<Cell>> {
    let size = 1u64 << 30;
    let target = open(c, size)?;
    let control = Control::new();
    let cfg = CdmConfig {
        runs: 1,
        measure: E_MEASURE,
        interval: Duration::from_secs(5),
        ..CdmConfig::default()
    };
    // Written first, as CrystalDiskMark writes its test file.
    let prep = seq_bytes(Dir::Write, 1 << 20, 4, size, cfg.engine);
    engine::run(&target, &prep, &control).map_err(|e| context(c, e))?;
    let tests = [
        (CdmAccess::Seq, 1usize << 20, 8usize, "SEQ1M-Q8T1"),
        (CdmAccess::Seq, 1 << 20, 1, "SEQ1M-Q1T1"),
        (CdmAccess::Rnd, 4 << 10, 32, "RND4K-Q32T1"),
        (CdmAccess::Rnd, 4 << 10, 1, "RND4K-Q1T1"),
    ];
    let sim = target
        .sim
        .clone()
        .ok_or_else(|| context(c, "not a simulated target"))?;
    let mut cells = Vec::new();
    for (dir, dname) in [(Dir::Read, "read"), (Dir::Write, "write")] {
        for (access, bs, qd, name) in tests {
            sim.idle(cfg.interval);
            let t = CdmTest {
                access,
                bs,
                qd,
                threads: 1,
            };
            // Sequential tests measure CrystalDiskMark's 5 s: several passes over
            // the file, so what the card's cache keeps counts as it did for the
            // article. Random tests settle within E_MEASURE and cost the most.
            let measure = if access == CdmAccess::Seq {
                Duration::from_secs(5)
            } else {
                cfg.measure
            };
            let w = cdm::workload(&t, dir, size, &CdmConfig { measure, ..cfg }, 0);
            let m = engine::run(&target, &w, &control).map_err(|e| context(c, e))?;
            let test = format!("{name}-{dname}");
            if E_TESTS.contains(&test.as_str()) {
                cells.push(cell(c, &test, "MB/s", m.main().mb_s(m.elapsed)));
            }
        }
    }
    Ok(cells)
}

fn seq_bytes(dir: Dir, bs: usize, qd: usize, size: u64, engine: EngineKind) -> Workload {
    Workload {
        access: Access::Seq,
        dir,
        bs,
        offset: 0,
        size: size / bs as u64 * bs as u64,
        threads: 1,
        qd,
        limit: Limit {
            time: None,
            bytes: Some(size / bs as u64 * bs as u64),
        },
        data: DataFill::Random,
        rewrite: Rewrite::Never,
        random_map: false,
        seed: 1,
        split: false,
        engine,
    }
}

/// Bonnie++'s file for seeds C and D: twice the articles' 2 GB of RAM.
pub const BONNIE_SIZE: u64 = 4 << 30;

/// Seeds C and D: Bonnie++'s block tests in 1 MiB requests (what the file
/// system sends for its 8 KiB calls), then its random seeks in 8 KiB chunks, on
/// the same simulated volume, in virtual time.
fn run_bonnie(c: &Config) -> Result<Vec<Cell>> {
    let target = open(c, BONNIE_SIZE)?;
    let control = Control::new();
    let mut cfg = BonnieConfig {
        size: BONNIE_SIZE,
        chunk: 1 << 20,
        seeks: 8192,
        seekers: 5,
        files_k: 0,
        machine: "sim".into(),
        seed: 42,
        engine: EngineKind::Auto,
    };
    let r = bonnie::run(&target, None, &cfg, &control).map_err(|e| context(c, e))?;
    let mb = |f: bonnie::Figure| f.rate / 1e6;
    let mut cells = vec![
        cell(c, "block_output", "MB/s", mb(r.put_block)),
        cell(c, "rewrite", "MB/s", mb(r.rewrite)),
        cell(c, "block_input", "MB/s", mb(r.get_block)),
    ];
    if c.seed == Seed::D {
        cfg.chunk = bonnie::DEFAULT_CHUNK;
        let s = bonnie::random_seeks(&target, &cfg, &control).map_err(|e| context(c, e))?;
        cells.push(cell(c, "random_seeks", "seeks/s", s.rate));
    }
    Ok(cells)
}

/// Seed A's disk workloads behind the article's desktop tasks.
fn run_a(c: &Config) -> Result<Vec<Cell>> {
    let cfg = SimConfig::short(&c.spec).map_err(|e| context(c, e))?;
    let build = || -> Result<Box<dyn Device>> { cfg.build(&[]).map_err(|e| context(c, e)) };
    // A big file, as the DV video the article exported: 4 GB from the start.
    let region = 4_000_000_000u64;
    let stream = |read: bool, threads: u32| -> Result<f64> {
        let mut dev = build()?;
        let mut job = Job::new(Pattern::Sequential, 1 << 20, read, threads, 1, region);
        job.duration = 10 * SEC;
        let o = workload::run(dev.as_mut(), &job, 0).map_err(|e| context(c, e))?;
        Ok(o.mb_per_s)
    };
    let mut cells = vec![
        cell(c, "seq_read", "MB/s", stream(true, 1)?),
        cell(c, "seq_write", "MB/s", stream(false, 1)?),
        cell(c, "2_readers", "MB/s", stream(true, 2)?),
        cell(c, "4_readers", "MB/s", stream(true, 4)?),
    ];
    // The indexer: a sequential scan of the whole disk with readahead (two 1 MiB
    // reads in flight); the browser: 1000 random 64 KiB reads, one at a time.
    let mut dev = build()?;
    let cap = dev.capacity() / (1 << 20) * (1 << 20);
    let mut bg = Job::new(Pattern::Sequential, 1 << 20, true, 1, 2, cap);
    bg.duration = 3600 * SEC;
    let mut fg = Job::new(Pattern::Random, 64 << 10, true, 1, 1, cap);
    fg.max_ops = 1000;
    fg.duration = 3600 * SEC;
    fg.seed = 7;
    let o = run_mixed(dev.as_mut(), &bg, &fg, 0).map_err(|e| context(c, e))?;
    cells.push(cell(c, "fg_under_scan", "s", o.foreground_ns as f64 / 1e9));
    Ok(cells)
}

/// The simulated figure of (config, test), if it was run.
pub fn figure(cells: &[Cell], config: &str, test: &str) -> Option<f64> {
    cells
        .iter()
        .find(|c| c.config == config && c.test == test)
        .map(|c| c.simulated)
}

/// A finding's rule over figures that may be missing (a seed run without the
/// configuration a rule needs reads as not reproduced).
fn rule(seed: Seed, text: &str, f: impl FnOnce() -> Option<(bool, String)>) -> Finding {
    let (reproduced, why) = f().unwrap_or((false, "a figure the rule needs is missing".into()));
    Finding {
        seed: seed.letter(),
        text: text.into(),
        reproduced,
        modelled: true,
        why,
    }
}

fn not_modelled(seed: Seed, text: &str, why: &str) -> Finding {
    Finding {
        seed: seed.letter(),
        text: text.into(),
        reproduced: false,
        modelled: false,
        why: why.into(),
    }
}

/// Each finding of `seed`, decided from the simulated figures in `cells`.
pub fn evaluate(seed: Seed, cells: &[Cell]) -> Vec<Finding> {
    let g = |config: &str, test: &str| figure(cells, config, test);
    match seed {
        Seed::A => vec![
            rule(seed, "a stripe doubles sequential reads and writes (RAID 0 halved the video export)", || {
                let (r1, r0) = (g("one-disk", "seq_read")?, g("raid0-2", "seq_read")?);
                let (w1, w0) = (g("one-disk", "seq_write")?, g("raid0-2", "seq_write")?);
                Some((r0 >= 1.8 * r1 && w0 >= 1.8 * w1,
                    format!("RAID 0 read {:.2}x, write {:.2}x one disk (rule: both at least 1.8x)", r0 / r1, w0 / w1)))
            }),
            rule(seed, "RAID 1 is clearly better for several simultaneous reads (both copies serve reads in parallel)", || {
                let (a2, m2) = (g("one-disk", "2_readers")?, g("raid1-2", "2_readers")?);
                let (a4, m4) = (g("one-disk", "4_readers")?, g("raid1-2", "4_readers")?);
                Some((m2 >= 1.5 * a2 && m4 >= 1.5 * a4,
                    format!("RAID 1 with 2 readers {:.2}x, 4 readers {:.2}x one disk (rule: both at least 1.5x)", m2 / a2, m4 / a4)))
            }),
            rule(seed, "under background indexing the browser starts far faster on the array (nearly a minute on one disk, 8 s on the array)", || {
                let (one, mirror) = (g("one-disk", "fg_under_scan")?, g("raid1-2", "fg_under_scan")?);
                Some((one >= 3.0 * mirror,
                    format!("foreground {one:.1} s on one disk, {mirror:.1} s on RAID 1: {:.1}x (rule: at least 3x)", one / mirror)))
            }),
            not_modelled(seed, "single tasks gained much less than theory (boot 12 s faster on both arrays); small-file development work and a CPU-bound compile gained little",
                "needs the file system, the page cache and the CPU, which the block-level simulation does not model"),
        ],
        Seed::B => crate::seed_b::evaluate(cells),
        Seed::C => {
            let chunks = ["64k", "256k", "1m"];
            vec![
                rule(seed, "software RAID 5 reads beat the card", || {
                    let mut wins = 0;
                    let mut s = Vec::new();
                    for ch in chunks {
                        let (sw, hw) = (g(&format!("sw-raid5-{ch}"), "block_input")?, g(&format!("hw-raid5-{ch}"), "block_input")?);
                        wins += usize::from(sw > hw);
                        s.push(format!("{ch}: {sw:.0} vs {hw:.0} MB/s"));
                    }
                    Some((wins >= 2, format!("block input sw vs hw, {} (rule: software ahead at 2 of 3 chunks)", s.join(", "))))
                }),
                rule(seed, "the card wins block writes on parity RAID by a wide margin", || {
                    let mut s = Vec::new();
                    let mut ok = true;
                    for (lv, ch) in [("raid5", "64k"), ("raid5", "256k"), ("raid6", "64k")] {
                        let (sw, hw) = (g(&format!("sw-{lv}-{ch}"), "block_output")?, g(&format!("hw-{lv}-{ch}"), "block_output")?);
                        ok &= hw >= 1.3 * sw;
                        s.push(format!("{lv} {ch}: hw {hw:.0} vs sw {sw:.0} MB/s"));
                    }
                    Some((ok, format!("{} (rule: the card at least 1.3x at each)", s.join(", "))))
                }),
                rule(seed, "the card wins rewrites", || {
                    let mut wins = 0;
                    let mut n = 0;
                    for lv in ["raid5", "raid6"] {
                        for ch in chunks {
                            let (sw, hw) = (g(&format!("sw-{lv}-{ch}"), "rewrite")?, g(&format!("hw-{lv}-{ch}"), "rewrite")?);
                            wins += usize::from(hw > sw);
                            n += 1;
                        }
                    }
                    Some((wins * 2 > n, format!("the card ahead in {wins} of {n} parity configurations (rule: a majority)")))
                }),
                rule(seed, "RAID 6 writes are slower than RAID 5 (two parity blocks)", || {
                    let mut slower = 0;
                    let mut n = 0;
                    for kind in ["sw", "hw"] {
                        for ch in chunks {
                            let (r5, r6) = (g(&format!("{kind}-raid5-{ch}"), "block_output")?, g(&format!("{kind}-raid6-{ch}"), "block_output")?);
                            slower += usize::from(r6 < r5);
                            n += 1;
                        }
                    }
                    Some((slower * 2 > n, format!("RAID 6 block output below RAID 5's in {slower} of {n} configurations (rule: a majority)")))
                }),
                rule(seed, "large chunks erased the card's lead on RAID 6", || {
                    let (sw, hw) = (g("sw-raid6-1m", "block_output")?, g("hw-raid6-1m", "block_output")?);
                    Some((hw <= 1.1 * sw, format!("RAID 6 1M block output: hw {hw:.0} vs sw {sw:.0} MB/s (rule: the card at most 1.1x)")))
                }),
                rule(seed, "small chunks made software RAID 6 writes faster than its reads", || {
                    let (w, r) = (g("sw-raid6-64k", "block_output")?, g("sw-raid6-64k", "block_input")?);
                    Some((w > r, format!("software RAID 6 64K: output {w:.0} vs input {r:.0} MB/s (rule: output higher)")))
                }),
                not_modelled(seed, "the card did poorly on small files in IOzone writes; XFS stripe alignment mattered a lot for metadata; the file system mattered as much as the RAID implementation",
                    "file-system effects: the simulation is block level, with no file system"),
            ]
        }
        Seed::D => vec![
            rule(seed, "the SSD's random seek rate is far above the HDD's (thousands per second against roughly a hundred)", || {
                let (ssd, hdd) = (g("ssd", "random_seeks")?, g("hdd", "random_seeks")?);
                Some((ssd >= 1000.0 && ssd >= 10.0 * hdd && (50.0..=250.0).contains(&hdd),
                    format!("SSD {ssd:.0}, HDD {hdd:.0} seeks/s (rule: SSD at least 1000 and 10x the HDD; HDD 50 to 250)")))
            }),
            rule(seed, "six HDDs in RAID 6 raise the seek rate a lot but still fall far short of the SSD", || {
                let (ssd, hdd, r6) = (g("ssd", "random_seeks")?, g("hdd", "random_seeks")?, g("raid6-6hdd", "random_seeks")?);
                Some((r6 >= 2.0 * hdd && r6 * 3.0 <= ssd,
                    format!("RAID 6 {r6:.0} seeks/s: {:.1}x the HDD, {:.2} of the SSD (rule: at least 2x the HDD, at most a third of the SSD)", r6 / hdd, r6 / ssd)))
            }),
            rule(seed, "for block transfer the SSD and one HDD are similar and the six-disk RAID 6 is clearly fastest", || {
                let mut ok = true;
                let mut s = Vec::new();
                for t in ["block_output", "block_input"] {
                    let (ssd, hdd, r6) = (g("ssd", t)?, g("hdd", t)?, g("raid6-6hdd", t)?);
                    ok &= (0.5..=2.0).contains(&(ssd / hdd)) && r6 >= 1.5 * ssd.max(hdd);
                    s.push(format!("{t}: SSD {ssd:.0}, HDD {hdd:.0}, RAID 6 {r6:.0} MB/s"));
                }
                Some((ok, format!("{} (rule: SSD/HDD within 0.5 to 2, RAID 6 at least 1.5x the faster)", s.join("; "))))
            }),
            not_modelled(seed, "XFS with write barriers made metadata tests about ten times slower; per dollar, HDD RAID gives tens of times the capacity",
                "metadata tests need a file system; prices are not part of the presets"),
        ],
        Seed::E => {
            let one = |t: &str| g("1ssd", t);
            vec![
                rule(seed, "RAID 5/6 random writes fall sharply (parity read-modify-write)", || {
                    let base = one("RND4K-Q1T1-write")?;
                    let mut s = Vec::new();
                    let mut ok = true;
                    for cfg in ["raid5-3ssd", "raid6-4ssd", "raid5-4ssd"] {
                        let v = g(cfg, "RND4K-Q1T1-write")?;
                        ok &= v <= 0.5 * base;
                        s.push(format!("{cfg} {:.2}x", v / base));
                    }
                    Some((ok, format!("RND4K Q1T1 write against one SSD: {} (rule: each at most 0.5x)", s.join(", "))))
                }),
                rule(seed, "random 4K reads at QD1 do not scale with the number of drives", || {
                    let base = one("RND4K-Q1T1-read")?;
                    let (r2, r4) = (g("raid0-2ssd", "RND4K-Q1T1-read")?, g("raid0-4ssd", "RND4K-Q1T1-read")?);
                    Some((r2 <= 1.25 * base && r4 <= 1.25 * base,
                        format!("RND4K Q1T1 read: RAID 0 x2 {:.2}x, x4 {:.2}x one SSD (rule: both at most 1.25x)", r2 / base, r4 / base)))
                }),
                rule(seed, "RAID 0 with 4 drives does not reach 4x", || {
                    let (q1, q1_4) = (one("SEQ1M-Q1T1-read")?, g("raid0-4ssd", "SEQ1M-Q1T1-read")?);
                    let (q8, q8_4) = (one("SEQ1M-Q8T1-read")?, g("raid0-4ssd", "SEQ1M-Q8T1-read")?);
                    Some((q1_4 < 4.0 * q1 && q8_4 < 4.0 * q8,
                        format!("RAID 0 x4 SEQ1M read: Q1T1 {:.2}x, Q8T1 {:.2}x one SSD (rule: both below 4x)", q1_4 / q1, q8_4 / q8)))
                }),
                rule(seed, "with 3+ drives the card's read cache lifts SEQ1M Q8T1 reads past the sum of the drives", || {
                    let base = one("SEQ1M-Q8T1-read")?;
                    let mut s = Vec::new();
                    let mut ok = true;
                    for (cfg, n) in [("raid5-3ssd", 3.0), ("raid6-4ssd", 4.0), ("raid5-4ssd", 4.0)] {
                        let v = g(cfg, "SEQ1M-Q8T1-read")?;
                        ok &= v > n * base;
                        s.push(format!("{cfg} {:.2}x the sum", v / (n * base)));
                    }
                    Some((ok, format!("SEQ1M Q8T1 read: {} (rule: each above the sum)", s.join(", "))))
                }),
            ]
        }
    }
}

/// Median of |simulated / article - 1| over seed E's cells with a figure.
pub fn e_error(cells: &[Cell]) -> ErrorSummary {
    let errs = |pred: bool| -> Vec<f64> {
        cells
            .iter()
            .filter(|c| c.seed == "E" && (!pred || c.role == Some("prediction")))
            .filter_map(|c| c.ratio().map(|r| (r - 1.0).abs()))
            .collect()
    };
    let all = errs(false);
    let pred = errs(true);
    ErrorSummary {
        cells: all.len(),
        median_abs_error: median(&all),
        prediction_cells: pred.len(),
        prediction_median_abs_error: median(&pred),
    }
}

fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The seeds as raidlab-bench/1 results, one per seed, for raidlab-report: the
/// targets are "article" and "simulated", the groups the configurations, so the
/// report's charts put the article's bars beside the simulated ones. Cells with
/// no article figure carry only the simulated bar.
pub fn reports(r: &SeedsResult) -> Vec<crate::schema::BenchReport> {
    let mut out = Vec::new();
    for letter in &r.seeds {
        let cells: Vec<&Cell> = r.cells.iter().filter(|c| c.seed == *letter).collect();
        if cells.is_empty() {
            continue;
        }
        let title = Seed::parse(letter).map_or("", Seed::title);
        let mut b = crate::schema::BenchReport::new(
            &format!("seed {letter}: {title}"),
            vec!["article".into(), "simulated".into()],
        );
        for c in cells {
            for (target, v) in [("article", c.article), ("simulated", Some(c.simulated))] {
                if let Some(v) = v {
                    b.push(&c.config, &c.test, target, c.unit, v);
                    if c.unit == "s" {
                        // A completion time: shorter is better.
                        if let Some(last) = b.rows.last_mut() {
                            last.higher_is_better = false;
                        }
                    }
                }
            }
        }
        b.details = serde_json::json!({
            "findings": r.findings.iter().filter(|f| f.seed == *letter).collect::<Vec<_>>(),
        });
        out.push(b);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(config: &str, test: &str, v: f64) -> Cell {
        Cell {
            seed: "E",
            config: config.into(),
            test: test.into(),
            unit: "MB/s",
            simulated: v,
            article: e_article(config, test),
            role: None,
        }
    }

    #[test]
    fn findings_follow_the_figures_not_a_constant() {
        let mut cells = vec![
            c("1ssd", "RND4K-Q1T1-write", 100.0),
            c("raid5-3ssd", "RND4K-Q1T1-write", 30.0),
            c("raid6-4ssd", "RND4K-Q1T1-write", 30.0),
            c("raid5-4ssd", "RND4K-Q1T1-write", 30.0),
        ];
        let sharp = |cells: &[Cell]| evaluate(Seed::E, cells)[0].reproduced;
        assert!(sharp(&cells));
        cells[3].simulated = 90.0;
        assert!(!sharp(&cells));
        // A missing figure is not a reproduction.
        cells.pop();
        assert!(!sharp(&cells));
    }

    #[test]
    fn median_and_ratio() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
        let x = c("1ssd", "SEQ1M-Q8T1-read", 564.95 * 1.1);
        assert!((x.ratio().unwrap() - 1.1).abs() < 1e-12);
        assert_eq!(c("1ssd", "SEQ1M-Q1T1-read", 1.0).ratio(), None);
    }

    #[test]
    fn unknown_seeds_are_errors() {
        assert!(Seed::parse("e").is_ok());
        assert!(Seed::parse("F")
            .unwrap_err()
            .to_string()
            .contains("A, B, C, D and E"));
    }
}
