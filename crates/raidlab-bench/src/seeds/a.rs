//! Seed A (SEEDS.md): one 7K250 HDD against RAID 0 and RAID 1 of two, on the
//! disk workloads behind the article's desktop tasks.
//!
//! Decides: seed A's configurations, its workloads, the article's figures and
//! the rules of its findings. It must never hard-code a finding's outcome.

use super::{cell, context, figure, not_modelled, rule, Cell, Config, Finding, Seed};
use raidlab_core::Result;
use raidlab_sim::config::SimConfig;
use raidlab_sim::device::{Device, SEC};
use raidlab_sim::mixed::run_mixed;
use raidlab_sim::workload::{self, Job, Pattern};

pub(super) fn configs() -> Vec<Config> {
    let c = |name: &str, spec: &str| Config::new(Seed::A, name, spec.to_string());
    vec![
        c("one-disk", "hitachi-7k250"),
        c("raid0-2", "raid0:2xhitachi-7k250:chunk=64K"),
        c("raid1-2", "raid1:2xhitachi-7k250"),
    ]
}

/// Article A's figures: the browser start under background indexing, "nearly a
/// minute" on one disk and 8 s on the array (the mirror, whose parallel reads the
/// article credits for concurrent work).
pub(super) fn article(config: &str, test: &str) -> Option<f64> {
    match (config, test) {
        ("one-disk", "fg_under_scan") => Some(60.0),
        ("raid1-2", "fg_under_scan") => Some(8.0),
        _ => None,
    }
}

/// Where a browser's files lie: its program and profile (tens of MB in the
/// article's day) sit together in a few of ext3's block groups, 128 MiB each
/// (32768 blocks of 4 KiB, ext3's default), as ext3 keeps a directory's files in
/// its group; 1 GiB is eight groups. Placed mid-disk, away from where the scan
/// starts. A browser's reads jump about its files, not across the disk, and on a
/// mirror that is what keeps them on the copy the scanner is not using (the read
/// balancer takes the nearest head).
const BROWSER_FILES: u64 = 1 << 30;

/// Seed A's disk workloads behind the article's desktop tasks.
pub(super) fn run(c: &Config) -> Result<Vec<Cell>> {
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
    // reads in flight); the browser: 1000 random 64 KiB reads, one at a time,
    // within the files it starts from (BROWSER_FILES).
    let mut dev = build()?;
    let cap = dev.capacity() / (1 << 20) * (1 << 20);
    let mut bg = Job::new(Pattern::Sequential, 1 << 20, true, 1, 2, cap);
    bg.duration = 3600 * SEC;
    let mut fg = Job::new(Pattern::Random, 64 << 10, true, 1, 1, BROWSER_FILES);
    fg.region.0 = cap / 2 / (1 << 20) * (1 << 20);
    fg.max_ops = 1000;
    fg.duration = 3600 * SEC;
    fg.seed = 7;
    let o = run_mixed(dev.as_mut(), &bg, &fg, 0).map_err(|e| context(c, e))?;
    cells.push(cell(c, "fg_under_scan", "s", o.foreground_ns as f64 / 1e9));
    Ok(cells)
}

/// Seed A's findings, each decided from the simulated figures in `cells`.
pub(super) fn findings(cells: &[Cell]) -> Vec<Finding> {
    let seed = Seed::A;
    let g = |config: &str, test: &str| figure(cells, config, test);
    vec![
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
    ]
}
