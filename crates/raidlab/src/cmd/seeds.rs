//! `raidlab seeds [A|B|C|D|E]...`: the source articles' experiments in virtual time,
//! each article's figure beside the simulated one and each finding marked; and
//! `raidlab bench` with no target, which is the same run with the report.
//!
//! Decides: how the result is printed and which files are written. It must never
//! compute a figure or decide a finding (raidlab-bench's `seeds` does both), and
//! never write a partial report: the result files are written, then the report
//! is rendered from them by raidlab-report.

use crate::cli::{BenchMainArgs, SeedsArgs};
use anyhow::{Context, Result};
use raidlab_bench::seeds::{self, Seed, SeedOptions, SeedsResult};
use std::path::Path;
use std::process::ExitCode;

pub fn run(a: SeedsArgs) -> Result<ExitCode> {
    let wanted = a
        .seeds
        .iter()
        .map(|s| Seed::parse(s))
        .collect::<raidlab_core::Result<Vec<Seed>>>()?;
    let r = seeds::run(&wanted, &SeedOptions::default()).context("raidlab seeds")?;
    print(&r, a.json)?;
    if let Some(dir) = &a.out {
        write(&r, dir)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `raidlab bench` with no target: every runnable seed, with the report.
pub fn main_job(a: BenchMainArgs) -> Result<ExitCode> {
    eprintln!("raidlab bench: the articles' experiments (SEEDS.md A to E) simulated in virtual time; `raidlab bench files` is the real-file RAID 5 comparison");
    let only = a
        .seeds
        .iter()
        .map(|s| Seed::parse(s))
        .collect::<raidlab_core::Result<Vec<Seed>>>()?;
    let r = seeds::run(&only, &SeedOptions::default()).context("raidlab bench")?;
    print(&r, a.json)?;
    write(&r, &a.output)?;
    Ok(ExitCode::SUCCESS)
}

fn write(r: &SeedsResult, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot make the output directory {}", dir.display()))?;
    let json = dir.join("raidlab-seeds.json");
    std::fs::write(&json, serde_json::to_string_pretty(r)? + "\n")
        .with_context(|| format!("cannot write {}", json.display()))?;
    let mut inputs = Vec::new();
    for rep in seeds::reports(r) {
        let letter = rep
            .suite
            .split(':')
            .next()
            .unwrap_or("seed")
            .replace(' ', "-");
        let p = dir.join(format!("raidlab-{letter}.json"));
        std::fs::write(&p, serde_json::to_string_pretty(&rep)? + "\n")
            .with_context(|| format!("cannot write {}", p.display()))?;
        inputs.push(p);
    }
    let html = dir.join("raidlab-seeds.html");
    raidlab_report::write_report(&inputs, &html, None)
        .with_context(|| format!("cannot write the report {}", html.display()))?;
    eprintln!(
        "wrote {} (cells and findings), {} and the per-seed result files",
        json.display(),
        html.display()
    );
    Ok(())
}

fn print(r: &SeedsResult, json: bool) -> Result<()> {
    if json {
        outln!("{}", serde_json::to_string_pretty(r)?);
        return Ok(());
    }
    for letter in &r.seeds {
        let seed = Seed::parse(letter)?;
        outln!("seed {letter}: {}", seed.title());
        outln!("  ({})", seed.scope());
        outln!(
            "  {:<20} {:<20} {:>7} {:>10} {:>10} {:>7}  {}",
            "config",
            "test",
            "unit",
            "article",
            "simulated",
            "ratio",
            if seed == Seed::E { "role" } else { "" }
        );
        for c in r.cells.iter().filter(|c| c.seed == *letter) {
            outln!(
                "  {:<20} {:<20} {:>7} {:>10} {:>10.2} {:>7}  {}",
                c.config,
                c.test,
                c.unit,
                c.article.map_or("-".to_string(), |a| format!("{a:.2}")),
                c.simulated,
                c.ratio().map_or("-".to_string(), |x| format!("{x:.2}")),
                c.role.unwrap_or("")
            );
        }
        outln!();
    }
    if let Some(e) = r.seed_e_error {
        outln!(
            "seed E: median absolute error {:.1}% over {} cells; {:.1}% over the {} prediction cells (calibration cells in docs/seeds.md)",
            e.median_abs_error * 100.0,
            e.cells,
            e.prediction_median_abs_error * 100.0,
            e.prediction_cells
        );
    }
    outln!();
    outln!("findings:");
    for f in &r.findings {
        let mark = match (f.modelled, f.reproduced) {
            (false, _) => "not modelled",
            (true, true) => "reproduced",
            (true, false) => "NOT reproduced",
        };
        outln!("  {} [{mark}] {}", f.seed, f.text);
        outln!("      {}", f.why);
    }
    Ok(())
}
