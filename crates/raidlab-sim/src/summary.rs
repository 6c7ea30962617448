//! What a simulated configuration amounts to, for `raidlab sim show`: usable
//! capacity, failures tolerated, and how long rebuilding one member would take.
//!
//! Decides: how the rebuild estimate is made: the member device's own sequential
//! read and write speed, measured on the model in virtual time at evenly spaced
//! points from its start to its end (zoned disks slow down inwards), the slower
//! of the two at each point bounding that stretch, with no foreground load and no
//! rate limit. It must never claim more than that: a rebuild under load, or
//! paced, takes longer, and the text says so.

use crate::config::SimConfig;
use crate::device::{Device, SEC};
use crate::presets::Preset;
use crate::workload::{run, Job, Pattern};
use raidlab_layout::{Geometry, Layout, Level};

/// Points along a member at which its speed is measured.
const POINTS: u64 = 16;

#[derive(Debug, Clone, serde::Serialize)]
pub struct Summary {
    pub describe: String,
    pub capacity_bytes: u64,
    /// Members that may fail, whichever they are, with the data still served.
    pub failures_tolerated: usize,
    /// Members failed in the configuration now.
    pub failed_now: usize,
    /// Seconds to rebuild one member at the member's sequential speed, when the
    /// configuration has redundancy.
    pub rebuild_seconds: Option<f64>,
    pub model: crate::device::ModelInfo,
}

/// Failures every choice of which survives: the largest k such that any k
/// members may be missing.
pub fn tolerated(g: &Geometry) -> usize {
    let n = g.raid_disks;
    let mut k = 0;
    while k < n && every_subset_survives(g, k + 1) {
        k += 1;
    }
    k
}

fn every_subset_survives(g: &Geometry, k: usize) -> bool {
    fn walk(g: &Geometry, start: usize, k: usize, chosen: &mut Vec<usize>) -> bool {
        if chosen.len() == k {
            return g.survives(chosen);
        }
        for i in start..g.raid_disks {
            chosen.push(i);
            let ok = walk(g, i + 1, k, chosen);
            chosen.pop();
            if !ok {
                return false;
            }
        }
        true
    }
    walk(g, 0, k, &mut Vec::new())
}

/// Seconds to write (and read) `bytes` of a fresh `device` from its start, at
/// its sequential speed, the slower of reading and writing at each point.
pub fn sequential_seconds(
    make: &dyn Fn() -> Result<Box<dyn Device>, String>,
    bytes: u64,
) -> Result<f64, String> {
    let block = 1u64 << 20;
    let step = (bytes / POINTS / block).max(1) * block;
    let mut total = 0.0;
    let mut at = 0;
    while at < bytes {
        let span = step.min(bytes - at);
        let mut rate = f64::INFINITY;
        for read in [true, false] {
            let mut d = make()?;
            let len = (64 * block).min(d.capacity().saturating_sub(at) / block * block);
            if len == 0 {
                break;
            }
            let mut j = Job::new(Pattern::Sequential, block, read, 1, 2, len);
            j.region = (at, len);
            j.duration = 10 * SEC;
            j.max_ops = len / block;
            let out = run(d.as_mut(), &j, 0)?;
            rate = rate.min(out.mb_per_s * 1e6);
        }
        if rate.is_finite() && rate > 0.0 {
            total += span as f64 / rate;
        }
        at += span;
    }
    Ok(total)
}

/// Summarise `cfg`.
pub fn summarise(cfg: &SimConfig, extra: &[Preset]) -> Result<Summary, String> {
    let dev = cfg.build(extra).map_err(|e| e.to_string())?;
    let (tolerated_n, failed_now, rebuild) = match &cfg.array {
        None => (0, 0, None),
        Some(a) => {
            let level = Level::from_name(&a.level).map_err(|e| e.to_string())?;
            let layout = Layout::parse(level, a.layout.as_deref()).map_err(|e| e.to_string())?;
            let chunk = match level {
                Level::Raid1 => 0,
                _ => a
                    .chunk
                    .as_deref()
                    .map(raidlab_core::size::parse_size)
                    .transpose()
                    .map_err(|e| e.to_string())?
                    .unwrap_or(512 << 10),
            };
            let member = cfg.member(extra).map_err(|e| e.to_string())?;
            let data = member.capacity().saturating_sub(crate::array::DATA_OFFSET);
            let g =
                Geometry::new(level, layout, chunk, a.members, data).map_err(|e| e.to_string())?;
            let t = tolerated(&g);
            let rebuild = if t > 0 || level == Level::Raid10 {
                let make = || cfg.member(extra).map_err(|e| e.to_string());
                Some(sequential_seconds(&make, g.member_bytes)?)
            } else {
                None
            };
            (t, a.failed.len(), rebuild)
        }
    };
    Ok(Summary {
        describe: cfg.describe(),
        capacity_bytes: dev.capacity(),
        failures_tolerated: tolerated_n,
        failed_now,
        rebuild_seconds: rebuild,
        model: dev.info(),
    })
}
