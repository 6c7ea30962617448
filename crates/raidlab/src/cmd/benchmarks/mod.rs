//! `raidlab bench cdm`, `bonnie`, `iozone`, `job`, `replay` and `raidlab bench`
//! with no target: argument checking, progress, Ctrl-C, and printing (several
//! targets side by side through raidlab-bench's `table`). What runs and how it
//! is summarised lives in raidlab-bench; these files never measure anything
//! themselves. One file a verb: `crystal.rs` (cdm and files), `bonnie.rs`,
//! `iozone.rs`, `job.rs`, `replay.rs`; what they share is here.

use super::bench_compare::{
    baseline_index, conditions_cdm, conditions_once, finish_report, print_comparison,
    print_job_conditions,
};
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use raidlab_bench::cdm::{self, CdmConfig, CdmTargetResult, Event, Profile};
use raidlab_bench::target::{create_array, open_member_file};
use raidlab_bench::{BenchReport, Control, DataFill, EngineKind, OpenOptions, Target};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

mod bonnie;
mod crystal;
mod iozone;
mod job;
mod replay;

/// How `raidlab bench job` prints its results.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OutputFormat {
    /// raidlab's raidlab-bench/1 object (with --json) or a table.
    Normal,
    /// fio's JSON shape (`{"fio version": ..., "jobs": [...]}`) with --json.
    Fio,
}

pub use bonnie::{bonnie, BonnieArgs};
pub use crystal::{cdm, quick, CdmArgs, QuickArgs};
pub use iozone::{iozone, IozoneArgs};
pub use job::{job, JobArgs};
pub use replay::{replay, ReplayArgs};

/// Exit status after Ctrl-C, as a shell reports a SIGINT death; the figures
/// measured until then are still printed.
const INTERRUPTED_EXIT: u8 = 130;

/// The one stop switch Ctrl-C flips; every run watches it.
static CONTROL: Control = Control::new();

fn size(s: &str) -> Result<u64, String> {
    raidlab_core::size::parse_size(s).map_err(|e| e.message)
}

fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=3600.0).contains(&v) => Ok(v),
        _ => Err(format!("'{s}' is not a number of seconds from 0 to 3600")),
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum EngineArg {
    /// io_uring for files and devices where the kernel allows it, else threads.
    Auto,
    /// io_uring, or an error saying why not.
    IoUring,
    /// One blocking worker thread per queue slot.
    Threads,
}

/// How targets are opened and driven (shared by the bench verbs).
#[derive(Debug, Clone, Args)]
pub struct IoArgs {
    /// Go through the page cache instead of O_DIRECT for files and devices.
    #[arg(long)]
    pub buffered: bool,
    /// I/O engine.
    #[arg(long, value_enum, default_value = "auto")]
    pub engine: EngineArg,
    /// Allow write tests on a block device (they destroy its contents).
    #[arg(long)]
    pub write_device: bool,
}

impl EngineArg {
    fn kind(self) -> EngineKind {
        match self {
            EngineArg::Auto => EngineKind::Auto,
            EngineArg::IoUring => EngineKind::Uring,
            EngineArg::Threads => EngineKind::Threads,
        }
    }
}

impl IoArgs {
    fn engine(&self) -> EngineKind {
        self.engine.kind()
    }
}

/// Which target the others are compared with, for the verbs that take their
/// targets on the command line (`job` names its own in the job file, so its
/// `--baseline` says so in its own words).
#[derive(Debug, Clone, Args)]
pub struct BaselineArgs {
    /// The target the others are compared with, as given on the command line
    /// (default: the first): each test's ratio to it, and in words, after the
    /// tables and in the JSON for `raidlab report`.
    #[arg(long, value_name = "TARGET")]
    pub baseline: Option<String>,
}

impl BaselineArgs {
    /// The baseline's place in `targets`; an error names a baseline that is
    /// not one of them.
    fn index(&self, targets: &[String]) -> Result<usize> {
        baseline_index(self.baseline.as_deref(), targets)
    }
}

/// Open every target before measuring any, so that a typo fails in a second,
/// not after the first target's minutes of tests. With `each_once`, a target
/// named twice is refused when its turn comes, before it is opened.
fn open_targets(specs: &[String], opts: OpenOptions, each_once: bool) -> Result<Vec<Target>> {
    let mut targets = Vec::with_capacity(specs.len());
    for spec in specs {
        if each_once && specs.iter().filter(|t| *t == spec).count() > 1 {
            bail!("{spec} is given twice: give each target once");
        }
        targets
            .push(Target::open(spec, opts).with_context(|| format!("cannot use target {spec}"))?);
    }
    Ok(targets)
}

/// Run `one` on each target in turn, under a progress bar of its own (made by
/// `bar`, shown only when stderr is a terminal), until all have run or Ctrl-C
/// stops them. A cache's figures are printed before `finish`, which takes the
/// cache away; `finish` follows each run, not the last, so that a target whose
/// writes did not reach its media fails the verb before the next one runs.
fn run_each<R>(
    targets: &[Target],
    bar: impl Fn(&Target) -> ProgressBar,
    mut one: impl FnMut(usize, &Target, Option<&ProgressBar>) -> Result<R>,
) -> Result<Vec<R>> {
    install_ctrlc();
    let mut results = Vec::new();
    for (i, t) in targets.iter().enumerate() {
        let pb = std::io::stderr().is_terminal().then(|| bar(t));
        let r = one(i, t, pb.as_ref())?;
        report_cache(t);
        t.finish()?;
        if let Some(pb) = pb {
            pb.finish_and_clear();
        }
        results.push(r);
        if CONTROL.stopped() {
            break;
        }
    }
    Ok(results)
}

/// A second Ctrl-C still kills the process; the first asks for a clean stop.
fn install_ctrlc() {
    let _ = ctrlc::set_handler(|| {
        if CONTROL.stopped() {
            std::process::exit(INTERRUPTED_EXIT.into());
        }
        CONTROL.stop();
    });
}

fn finish_status(interrupted: bool) -> ExitCode {
    if interrupted {
        eprintln!("raidlab: interrupted: the figures above are what was measured before Ctrl-C");
        ExitCode::from(INTERRUPTED_EXIT)
    } else {
        ExitCode::SUCCESS
    }
}

/// Write the result as `raidlab-bench-<time>.json` in `dir`.
fn write_json(dir: &Path, report: &BenchReport) -> Result<PathBuf> {
    let stamp: String = report
        .created
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    let path = dir.join(format!("raidlab-bench-{stamp}.json"));
    let text = serde_json::to_string_pretty(report)?;
    std::fs::write(&path, text + "\n")
        .with_context(|| format!("cannot write the JSON result to {}", path.display()))?;
    Ok(path)
}

/// Render `raidlab bench`'s HTML report beside its JSON result (same name,
/// `.html`), with the same code as `raidlab report`.
fn write_html_report(json_path: &Path, _report: &BenchReport) -> Result<Option<PathBuf>> {
    let html = json_path.with_extension("html");
    raidlab_report::write_report(&[json_path.to_path_buf()], &html, None)
        .with_context(|| format!("cannot write the HTML report {}", html.display()))?;
    Ok(Some(html))
}

/// A cache target's statistics on stderr after its run, so that the result can
/// be explained from what the cache did.
fn report_cache(t: &Target) {
    if let Some(s) = t.cache_stats() {
        eprintln!(
            "raidlab: cache of {}: reads {} hit, {} partial, {} miss; writes {} hit, {} partial, {} miss; \
             {} promoted ({} not yet, under the threshold), {} evicted, {} invalidated; \
             bypassed bytes: {} sequential, {} mode, {} cache full of dirty blocks, {} tail; \
             {} blocks cleaned; now {} of {} blocks used, {} dirty",
            t.label,
            s.read_hits,
            s.read_partial_hits,
            s.read_misses,
            s.write_hits,
            s.write_partial_hits,
            s.write_misses,
            s.promotions,
            s.not_promoted,
            s.evictions,
            s.invalidations,
            s.bypass_sequential_bytes,
            s.bypass_mode_bytes,
            s.bypass_full_bytes,
            s.bypass_tail_bytes,
            s.cleaned_blocks,
            s.occupied_blocks,
            s.cache_blocks,
            s.dirty_blocks
        );
    }
}
