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
//! Seed B (the SSD cache) runs the cache tier in the simulator (`b`).

//!
//! Each seed lives in its own file (`a.rs`, `c.rs`, ...): its configurations,
//! its article's figures, how it runs and its findings' rules. This file holds
//! what they share and the few `match`es that register them.

mod a;
mod b;
mod bonnie_runs;
mod c;
mod d;
mod e;
mod report;

use crate::target::{OpenOptions, Target};
use raidlab_core::{Error, Result};
use serde::Serialize;

/// Bonnie++'s file size for seeds C and D.
pub use bonnie_runs::BONNIE_SIZE;
pub use e::{e_error, E_CALIBRATION, E_MEASURE};
pub use report::verdict;

/// The format name of `raidlab seeds --json`.
pub const FORMAT: &str = "raidlab-seeds/1";

/// The seeds this module can run (B waits for the cache tier).
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
            Seed::B => b::SCOPE,
            Seed::C => "Bonnie++'s 8 KiB calls through XFS (su/sw, nobarrier) and Linux 2.6.2x's page cache (raidlab-sim fs/: writeback, read-ahead, allocation, log), block tests only; no metadata or IOzone tests",
            Seed::D => "block level: the article ran Bonnie++ on ext3/XFS; here Bonnie++'s tests on the volume (block tests in 1 MiB requests, seeks in 8 KiB; on the SSD the seekers share each 1 GiB file's lock as ext3 or XFS takes it, and writes land in the 2008 kernel's page cache until its writeback sends them down); through the file-system layer seed C uses, the 2008 page cache absorbs half the seeks and an HDD's figure loses its sense (docs/seeds.md)",
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

const C_DISKS: &str = "6xsamsung-hd753lj";
/// About 100 GB used per disk, as in article C.
const C_MEMBER: &str = "member-size=100G";
/// Articles C and D ran Linux of 2008 (2.6.18 to 2.6.26) on a 2.2 GHz dual
/// core: its default I/O scheduler was CFQ (`scheduler=cfq`, raidlab-sim
/// `sched.rs`) and its md RAID 5/6 did all parity work in one raid5d thread at
/// the speeds such a CPU printed at boot (`host=linux-2.6.2x-md`, raidlab-sim
/// `md_host.rs` and `presets/hosts.toml`).
const HOST_2008: &str = "scheduler=cfq:host=linux-2.6.2x-md";
/// The file system article C ran Bonnie++ through, on that kernel's page
/// cache (raidlab-sim `fs/`, `presets/kernels.toml`): XFS told the stripe
/// (su/sw; mkfs.xfs reads it from md by itself), mounted nobarrier.
const FS_XFS: &str = "fs=xfs";

impl Config {
    fn new(seed: Seed, name: &str, spec: String) -> Config {
        Config {
            seed,
            name: name.to_string(),
            spec,
        }
    }

    /// Whether the configuration runs through a simulated file system and
    /// page cache (an `fs=` part).
    fn through_fs(&self) -> bool {
        self.spec.split(':').any(|p| p.starts_with("fs="))
    }
}

/// The configurations, in the order the tables print them.
pub fn configs(seed: Seed) -> Vec<Config> {
    match seed {
        Seed::A => a::configs(),
        Seed::B => b::configs(seed),
        Seed::C => c::configs(),
        Seed::D => d::configs(),
        Seed::E => e::configs(),
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
        Seed::A => a::run(c),
        Seed::B => b::run(c),
        Seed::C | Seed::D => bonnie_runs::run(c),
        Seed::E => e::run(c),
    }
}

fn cell(c: &Config, test: &str, unit: &'static str, simulated: f64) -> Cell {
    let article = match c.seed {
        Seed::A => a::article(&c.name, test),
        Seed::D => d::article(&c.name, test),
        Seed::E => e::article(&c.name, test),
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
    match seed {
        Seed::A => a::findings(cells),
        Seed::B => b::evaluate(cells),
        Seed::C => c::findings(cells),
        Seed::D => d::findings(cells),
        Seed::E => e::findings(cells),
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
/// no article figure carry only the simulated bar. Each carries its seed's
/// findings, error figures and simulated configurations (`seed`), so the page
/// says what the terminal says.
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
        if let Ok(seed) = Seed::parse(letter) {
            b.seed = Some(report::section(r, seed));
        }
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
            article: e::article(config, test),
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
