//! What the bench verbs add to a result so that it can be read beside others:
//! the baseline the user chose (`--baseline TARGET`), each target's run
//! conditions, and the comparison printed after the tables (the same text the
//! report page shows, from raidlab-report).
//!
//! It decides which target is the baseline and how a target's conditions are
//! described; it never measures and never changes a target.

use super::benchmarks::EngineArg;
use anyhow::{bail, Result};
use raidlab_bench::cdm::{CdmConfig, CdmTargetResult};
use raidlab_bench::{BenchReport, RunConditions, Target};

/// The position of `--baseline` among the targets as the user typed them
/// (default: the first). Checked before any target is opened, so a typo costs
/// nothing and changes nothing on disk.
pub fn baseline_index(baseline: Option<&str>, specs: &[String]) -> Result<usize> {
    let Some(b) = baseline else { return Ok(0) };
    match specs.iter().position(|s| s == b) {
        Some(i) => Ok(i),
        None => bail!(
            "--baseline {b} is not one of the targets ({}): give one of them exactly as typed",
            specs.join(", ")
        ),
    }
}

/// Record the baseline (the target at `index`, as opened) in `report`, with
/// each target's `conditions`. A baseline that was not run (Ctrl-C before it)
/// is left out: the report then compares with the first target.
pub fn finish_report<'a>(
    report: &mut BenchReport,
    targets: impl IntoIterator<Item = &'a Target>,
    index: usize,
    conditions: Vec<RunConditions>,
) {
    report.baseline = targets
        .into_iter()
        .nth(index)
        .map(|t| t.label.clone())
        .filter(|l| report.targets.contains(l));
    report.conditions = conditions
        .into_iter()
        .filter(|c| report.targets.contains(&c.target))
        .collect();
}

/// The engine a suite that does not record it ran `t` with, from the setting
/// and the rule the engine applies (io_uring only on an O_DIRECT descriptor).
pub fn engine_setting(e: EngineArg, t: &Target) -> &'static str {
    match e {
        EngineArg::Threads => "threads",
        EngineArg::IoUring => "io_uring",
        EngineArg::Auto if t.sim.is_some() => "virtual time",
        EngineArg::Auto if t.file.is_some() && t.direct => "io_uring (auto)",
        EngineArg::Auto => "threads (auto)",
    }
}

/// Each target's conditions for a suite that runs each test once (Bonnie++,
/// IOzone, replay): how it was opened, `size` bytes, the engine setting.
pub fn conditions_once<'a>(
    targets: impl IntoIterator<Item = &'a Target>,
    size: u64,
    engine: EngineArg,
) -> Vec<RunConditions> {
    targets
        .into_iter()
        .map(|t| RunConditions::of(t, size.min(t.size), engine_setting(engine, t)))
        .collect()
}

/// Each CrystalDiskMark target's conditions: the engine its tests ran on, its
/// test size, runs x seconds.
pub fn conditions_cdm(
    targets: &[Target],
    results: &[CdmTargetResult],
    cfg: &CdmConfig,
) -> Vec<RunConditions> {
    targets
        .iter()
        .zip(results)
        .map(|(t, r)| {
            let engine = r.cells.first().map_or("none (no test ran)", |c| c.engine);
            let mut c = RunConditions::of(t, r.size, engine);
            c.runs = Some(cfg.runs);
            c.measure_s = Some(cfg.measure.as_secs_f64());
            c
        })
        .collect()
}

/// How each job of a `bench job` run ran (the conditions its JSON records and
/// the report page lists): I/O path, size, runtime, engine, queue depth.
pub fn print_job_conditions(report: &BenchReport) -> Result<()> {
    outln!("\nRun conditions:");
    for c in &report.conditions {
        let runtime = c
            .measure_s
            .map_or("one pass".to_string(), |s| format!("{s} s"));
        outln!(
            "  [{}] on {}: {}, {}, {}, {}, QD {}{}",
            c.job.as_deref().unwrap_or("?"),
            c.target,
            c.io,
            raidlab_core::size::format_size(c.test_size),
            runtime,
            c.engine,
            c.queue_depth.map_or("?".to_string(), |q| q.to_string()),
            if c.simulated { ", simulated" } else { "" }
        );
    }
    Ok(())
}

/// The comparison of the result's targets with its baseline, as the report
/// page shows it; nothing for a single target.
pub fn print_comparison(report: &BenchReport) -> Result<()> {
    if report.targets.len() < 2 {
        return Ok(());
    }
    let text = serde_json::to_string(report)?;
    let file = raidlab_report::ResultFile::from_json("this run", &text)?;
    let table = raidlab_report::comparison_text(&[file], None);
    if !table.is_empty() {
        outln!("\n{}", table.trim_end());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baseline_must_be_a_target_as_typed() {
        let specs = vec!["/tmp/a".to_string(), "mem:1G".to_string()];
        assert_eq!(baseline_index(None, &specs).unwrap(), 0);
        assert_eq!(baseline_index(Some("mem:1G"), &specs).unwrap(), 1);
        let e = baseline_index(Some("mem:2G"), &specs)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "--baseline mem:2G is not one of the targets (/tmp/a, mem:1G): give one of them exactly as typed"
        );
    }
}
