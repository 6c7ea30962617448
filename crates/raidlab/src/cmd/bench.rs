//! `raidlab bench parity`: the parity engines on this CPU, the way Linux reports
//! its raid6 algorithm choice at boot; and `raidlab bench` with no target, the
//! main job: the articles' experiments simulated (`raidlab seeds`), with the report.

use crate::cli::BenchParityArgs;
use anyhow::{bail, Result};
use raidlab_core::size::format_size;
use std::process::ExitCode;
use std::time::Duration;

pub fn parity(a: BenchParityArgs) -> Result<ExitCode> {
    if a.data_disks < 2 || a.data_disks > 253 {
        bail!(
            "--data-disks {} is out of range: RAID 6 takes 2 to 253 data disks",
            a.data_disks
        );
    }
    if a.chunk < 64 || a.chunk > (64 << 20) {
        bail!("--chunk {} is out of range: use 64 bytes to 64M", a.chunk);
    }
    if !(a.seconds > 0.0 && a.seconds <= 60.0) {
        bail!(
            "--seconds {} is out of range: use more than 0 and at most 60",
            a.seconds
        );
    }
    let results = raidlab_parity::bench::run(
        a.data_disks,
        a.chunk as usize,
        Duration::from_secs_f64(a.seconds),
    );
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&results)?);
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "parity engines, {} data disks x {} chunk (GB/s of data):",
        a.data_disks,
        format_size(a.chunk)
    );
    outln!("  {:<9} {:<16} {:>8}", "op", "engine", "GB/s");
    for r in &results {
        outln!(
            "  {:<9} {:<16} {:>8.2}{}",
            r.op,
            r.engine,
            r.gbps,
            if r.selected { "  <- selected" } else { "" }
        );
    }
    let sel = raidlab_parity::selected().name();
    if let Some(best) = results
        .iter()
        .filter(|r| r.op == "pq" && r.selected)
        .map(|r| r.gbps)
        .next()
    {
        outln!(
            "raid6: using algorithm {sel} gen() {:.0} MB/s",
            best * 1000.0
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `raidlab bench` with no target.
pub fn main_job(a: crate::cli::BenchMainArgs) -> Result<ExitCode> {
    super::seeds::main_job(a)
}
