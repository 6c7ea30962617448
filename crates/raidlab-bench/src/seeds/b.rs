//! Seed B (SEEDS.md): an SSD cache in write-back mode in front of a software
//! RAID 5 of three 2 TB 7,200 rpm disks, IOzone `-I -i 0 -i 2 -r 4k` on a
//! 1 MiB and a 16 MiB file, with and without the cache, in virtual time: the
//! real raidlab-cache decisions over the real RAID engine on the disk and SSD
//! models (`raidlab_sim::cache`).
//!
//! Decides: the configurations, IOzone's tests as block-level jobs (write,
//! rewrite, random read, random write, 4 KiB records, one at a time: `-I` is
//! O_DIRECT and IOzone has one request in flight), and each finding's rule,
//! explained from the cache's own counters. It must never hard-code a
//! finding's outcome (every `reproduced` is computed from simulated figures)
//! and never print. SEEDS.md gives no figures for this article, only its
//! findings, so no cell has an article figure.

use super::{Cell, Config, Finding, Seed};
use raidlab_core::{Error, Result};
use raidlab_sim::config::SimConfig;
use raidlab_sim::device::{Device, Ns, SEC};
use raidlab_sim::workload::{self, Job, Pattern};

/// What the simulation leaves out, printed under the seed's table.
pub const SCOPE: &str = "block level: IOzone's file is the first bytes of the volume, no ext4 and no page cache (IOzone ran with -I); the article's 40 GB flashcache is raidlab's cache tier at its defaults but 4 KiB blocks (flashcache's block size) on 1 GiB of an Intel 520 (the files are 16 MiB at most, and the 10% dirty target is not reached either way)";

const DISKS: &str = "raid5:3xhgst-hds723020bla642:stripe-cache=0";
const CACHE: &str = "cache=intel-520/writeback:cache-block=4K:cache-size=1G";

/// The configurations: the RAID 5 alone, with the write-back cache at
/// raidlab's defaults, and the same cache with no sequential cutoff
/// (flashcache's default, `skip_seq_thresh_kb = 0`: it caches streams too).
pub fn configs(seed: Seed) -> Vec<Config> {
    let c = |name: &str, spec: String| Config {
        seed,
        name: name.into(),
        spec,
    };
    vec![
        c("raid5", DISKS.into()),
        c("raid5-cache", format!("{DISKS}:{CACHE}")),
        c(
            "raid5-cache-nocutoff",
            format!("{DISKS}:{CACHE}:cache-cutoff=0"),
        ),
    ]
}

/// The file sizes IOzone ran, and their names in the tables.
const FILES: [(u64, &str); 2] = [(1 << 20, "1M"), (16 << 20, "16M")];
const RECORD: u64 = 4096;

fn bad(c: &Config, e: impl std::fmt::Display) -> Error {
    Error::invalid(format!(
        "seed B configuration {} (sim:{}): {e}",
        c.name, c.spec
    ))
}

fn cell(c: &Config, test: String, unit: &'static str, simulated: f64) -> Cell {
    Cell {
        seed: "B",
        config: c.name.clone(),
        test,
        unit,
        simulated,
        article: None,
        role: None,
    }
}

/// One IOzone test on `dev` from `start`: (KiB/s, when it ended).
fn test(
    dev: &mut dyn Device,
    pattern: Pattern,
    read: bool,
    file: u64,
    start: Ns,
    seed: u64,
) -> std::result::Result<(f64, Ns), String> {
    let mut job = Job::new(pattern, RECORD, read, 1, 1, file);
    job.max_ops = file / RECORD;
    job.duration = 3600 * SEC;
    job.seed = seed;
    let o = workload::run(dev, &job, start)?;
    let kib_s = o.bytes as f64 / 1024.0 / (o.elapsed_ns.max(1) as f64 / 1e9);
    Ok((kib_s, o.end))
}

/// IOzone's tests in its order; KiB/s cells, and for a cached configuration
/// the counters that explain them.
pub fn run(c: &Config) -> Result<Vec<Cell>> {
    let cfg = SimConfig::short(&c.spec).map_err(|e| bad(c, e))?;
    let mut cells = Vec::new();
    for (file, fname) in FILES {
        // IOzone makes each file anew; each file gets fresh hardware.
        let mut cached = match cfg.cache {
            Some(_) => Some(cfg.build_cache(&[]).map_err(|e| bad(c, e))?),
            None => None,
        };
        let mut plain = match cfg.cache {
            Some(_) => None,
            None => Some(cfg.build(&[]).map_err(|e| bad(c, e))?),
        };
        let tests = [
            ("write", Pattern::Sequential, false),
            ("rewrite", Pattern::Sequential, false),
            ("random-read", Pattern::Random, true),
            ("random-write", Pattern::Random, false),
        ];
        let mut t = 0;
        for (i, (name, pattern, read)) in tests.into_iter().enumerate() {
            let before = cached.as_ref().map(|s| s.stats());
            let dev: &mut dyn Device = match (&mut cached, &mut plain) {
                (Some(s), _) => s,
                (None, Some(d)) => d.as_mut(),
                (None, None) => return Err(bad(c, "nothing was built")),
            };
            let (kib_s, end) =
                test(dev, pattern, read, file, t, 100 + i as u64).map_err(|e| bad(c, e))?;
            t = end;
            cells.push(cell(c, format!("{fname}-{name}"), "KiB/s", kib_s));
            let (Some(s), Some(b)) = (&cached, before) else {
                continue;
            };
            if let Some(e) = s.errors().first() {
                return Err(bad(c, e));
            }
            let a = s.stats();
            match name {
                "write" => cells.push(cell(
                    c,
                    format!("{fname}-write-bypassed"),
                    "KiB",
                    (a.bypass_sequential_bytes - b.bypass_sequential_bytes) as f64 / 1024.0,
                )),
                "random-read" => {
                    let hits = a.read_hits - b.read_hits;
                    let all = hits
                        + (a.read_misses - b.read_misses)
                        + (a.read_partial_hits - b.read_partial_hits);
                    cells.push(cell(
                        c,
                        format!("{fname}-random-read-hits"),
                        "%",
                        100.0 * hits as f64 / all.max(1) as f64,
                    ));
                }
                _ => {}
            }
        }
    }
    Ok(cells)
}

fn finding(text: &str, r: Option<(bool, String)>) -> Finding {
    let (reproduced, why) = r.unwrap_or((false, "a figure the rule needs is missing".into()));
    Finding {
        seed: "B",
        text: text.into(),
        reproduced,
        modelled: true,
        why,
    }
}

/// The article's findings, each from the simulated figures.
pub fn evaluate(cells: &[Cell]) -> Vec<Finding> {
    let g = |config: &str, test: &str| super::figure(cells, config, test);
    let gain = |test: &str| Some(g("raid5-cache", test)? / g("raid5", test)?);
    vec![
        finding(
            "random writes were much faster with the write-back cache",
            (|| {
                let (a, b) = (gain("1M-random-write")?, gain("16M-random-write")?);
                Some((
                    a >= 3.0 && b >= 3.0,
                    format!(
                        "cached / RAID 5 alone: {a:.0}x on the 1 MiB file, {b:.0}x on the 16 MiB file (rule: both at least 3x): every 4 KiB write completes on the SSD, where the RAID 5 reads old data and parity first"
                    ),
                ))
            })(),
        ),
        finding(
            "random reads were faster for the 1 MiB file",
            (|| {
                let a = gain("1M-random-read")?;
                let hits = g("raid5-cache", "1M-random-read-hits")?;
                Some((
                    a >= 1.5,
                    format!(
                        "{a:.0}x the RAID 5 alone (rule: at least 1.5x): {hits:.0}% of the random reads hit, the file having gone into the cache when it was written"
                    ),
                ))
            })(),
        ),
        finding(
            "random reads were no faster for the 16 MiB file (they seemed to come from the HDDs)",
            (|| {
                let a = gain("16M-random-read")?;
                let hits = g("raid5-cache", "16M-random-read-hits")?;
                let bypassed = g("raid5-cache", "16M-write-bypassed")?;
                let free =
                    g("raid5-cache-nocutoff", "16M-random-read")? / g("raid5", "16M-random-read")?;
                Some((
                    a < 1.25,
                    format!(
                        "{a:.1}x the RAID 5 alone (rule: under 1.25x). The counters say why reads come from the disks: writing the file sequentially sent {bypassed:.0} KiB of it around the cache (past the 4 MiB sequential cutoff), so only {hits:.0}% of the random reads hit and every miss is an HDD read; each miss is then promoted, so reads that repeat an offset hit. With no cutoff (flashcache's default) the whole file is cached and random reads run {free:.0}x"
                    ),
                ))
            })(),
        ),
    ]
}
