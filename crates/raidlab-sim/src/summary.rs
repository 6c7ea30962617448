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
    /// Seconds raidlab's own live rebuild takes (`raidlab add` on a served
    /// array: 1 MiB steps, one at a time, under their stripe locks), simulated
    /// with the engine over a stretch at each of the same points, with no
    /// foreground load and no rate limit.
    pub engine_rebuild_seconds: Option<f64>,
    /// The role those rebuilds were simulated for.
    pub rebuild_role: Option<usize>,
    /// Seconds raidlab's scrub of the whole array (`raidlab check`) takes,
    /// simulated with the engine's scrub plans as the rebuild is, when the
    /// array has something to compare.
    pub engine_check_seconds: Option<f64>,
    /// What the engine's comparison finds in the configuration's mismatch
    /// ranges, when it has some.
    pub mismatches: Option<Mismatches>,
    pub model: crate::device::ModelInfo,
}

/// The configuration's mismatch ranges as raidlab's check and repair see
/// them: the engine's page comparison run over every page they touch (exact:
/// the rest of the members is consistent).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Mismatches {
    /// Ranges configured.
    pub ranges: usize,
    /// md's mismatch count a check reports: sectors of mismatched pages.
    pub mismatch_sectors: u64,
    /// Member writes a repair issues, and their bytes.
    pub rewrites: u64,
    pub rewritten_bytes: u64,
}

/// What a check and a repair of `g` (roles `failed` missing) find in
/// `ranges`.
pub fn mismatches(
    g: &Geometry,
    failed: &[usize],
    ranges: &[crate::contents::MismatchRange],
) -> Mismatches {
    let present: Vec<bool> = (0..g.raid_disks).map(|r| !failed.contains(&r)).collect();
    // The whole walk: member bytes on parity levels, array bytes on mirrors.
    let end = if g.is_parity() {
        g.member_bytes
    } else {
        g.array_bytes()
    };
    let found = crate::contents::Contents::new(ranges).compare(g, &present, 0, end, true);
    Mismatches {
        ranges: ranges.len(),
        mismatch_sectors: found.mismatch_sectors,
        rewrites: found.rewrites.len() as u64,
        rewritten_bytes: found.rewrites.iter().map(|r| r.2 as u64).sum(),
    }
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
    let mut found = None;
    let (tolerated_n, failed_now, rebuild, check) = match &cfg.array {
        None => (0, 0, None, None),
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
            let mut data = member.capacity().saturating_sub(crate::array::DATA_OFFSET);
            // Only `member_size` of each device when the array says so: a
            // rebuild rewrites that much (the build checked it fits).
            if let Some(s) = &a.member_size {
                data = raidlab_core::size::parse_size(s)
                    .map_err(|e| e.to_string())?
                    .min(data);
            }
            let g =
                Geometry::new(level, layout, chunk, a.members, data).map_err(|e| e.to_string())?;
            let ranges = a.mismatches()?;
            if !ranges.is_empty() {
                found = Some(mismatches(&g, &a.failed, &ranges));
            }
            let t = tolerated(&g);
            let rebuild = if t > 0 || level == Level::Raid10 {
                let make = || cfg.member(extra).map_err(|e| e.to_string());
                Some(sequential_seconds(&make, g.member_bytes)?)
            } else {
                None
            };
            // The rebuild a user would run next: of the role the engine's
            // `add` fills; with none failed, of the first role whose loss
            // the array survives.
            let add_fills =
                raidlab_raid::manage::role_an_add_fills(a.members, |r| a.failed.contains(&r));
            let role = match add_fills {
                Some(r) if a.rebuild.is_none() && g.survives(&a.failed) => Some(r),
                Some(_) => None,
                None => (0..a.members).find(|&r| a.rebuild.is_none() && g.survives(&[r])),
            };
            let engine = match role {
                Some(r) if rebuild.is_some() => engine_rebuild_seconds(cfg, extra, r)?,
                _ => None,
            };
            let checkable = a.rebuild.is_none()
                && !a.check
                && raidlab_raid::recovery_plan::scrub_can_compare(&g, &a.failed);
            let check = match checkable {
                true => engine_check_seconds(cfg, extra)?,
                false => None,
            };
            (t, a.failed.len(), rebuild.map(|s| (s, engine, role)), check)
        }
    };
    let (rebuild, engine, role) = match rebuild {
        Some((s, e, r)) => (Some(s), e, r),
        None => (None, None, None),
    };
    Ok(Summary {
        describe: cfg.describe(),
        capacity_bytes: dev.capacity(),
        failures_tolerated: tolerated_n,
        failed_now,
        rebuild_seconds: rebuild,
        engine_rebuild_seconds: engine,
        rebuild_role: role,
        engine_check_seconds: check,
        mismatches: found,
        model: dev.info(),
    })
}

/// Member bytes of each stretch whose rebuild is simulated.
const STRETCH: u64 = 64 << 20;

/// Seconds the engine's live rebuild of `role` takes on `cfg`'s hardware: at
/// `POINTS` evenly spaced positions, a rebuild resumed there runs for a
/// stretch in virtual time, and its rate bounds the member's part up to the
/// next position. `None` where the device built shows no rebuild (one
/// wrapped by a cache tier).
pub fn engine_rebuild_seconds(
    cfg: &SimConfig,
    extra: &[Preset],
    role: usize,
) -> Result<Option<f64>, String> {
    sampled_seconds(
        cfg,
        extra,
        |a, at| {
            // The estimate is of the rebuild alone: md runs one sync
            // action at a time, so a configured check waits for it.
            a.check = false;
            a.repair = false;
            a.check_max_rate = None;
            a.check_from = None;
            // A failed role being rebuilt is the new member's, no longer
            // failed.
            a.failed.retain(|&f| f != role);
            a.rebuild = Some(role);
            a.rebuild_max_rate = None;
            a.rebuild_from = Some(at.to_string());
        },
        |d| d.rebuild_progress().map(|p| (p.done, p.total)),
    )
}

/// Seconds raidlab's scrub (`raidlab check`; on a consistent array a
/// resync reads the same) of the whole array takes on `cfg`'s hardware,
/// sampled as [`engine_rebuild_seconds`] samples a rebuild. `None` where
/// the device built shows no scrub (one wrapped by a cache tier).
pub fn engine_check_seconds(cfg: &SimConfig, extra: &[Preset]) -> Result<Option<f64>, String> {
    sampled_seconds(
        cfg,
        extra,
        |a, at| {
            a.rebuild = None;
            a.rebuild_from = None;
            a.check = true;
            a.check_max_rate = None;
            a.check_from = Some(at.to_string());
        },
        |d| d.scrub_progress().map(|p| (p.done, p.total)),
    )
}

/// Seconds a background run over every member (a rebuild, a scrub) takes:
/// `start(array, at)` configures one resumed `at` bytes into the members,
/// `progress` reads how far it got (done, total member bytes).
fn sampled_seconds(
    cfg: &SimConfig,
    extra: &[Preset],
    start: impl Fn(&mut crate::config::ArrayConf, u64),
    progress: impl Fn(&dyn Device) -> Option<(u64, u64)>,
) -> Result<Option<f64>, String> {
    let Some(a) = &cfg.array else {
        return Err("a rebuild or a check needs an array".into());
    };
    let mut total_s = 0.0;
    let mut at = 0;
    loop {
        let mut c = cfg.clone();
        if let Some(ca) = c.array.as_mut() {
            // The estimate is the configuration's array as it starts: its
            // faults (a spare beside this rebuild, a member failing mid-way)
            // belong to a run, not to the estimate.
            ca.faults.clear();
            start(ca, at);
        }
        let mut dev = c.build(extra).map_err(|e| e.to_string())?;
        let Some((from, total)) = progress(dev.as_ref()) else {
            return Ok(None);
        };
        if total == 0 {
            return Err(format!("{}: the member has no data area", a.level));
        }
        let goal = (from + STRETCH).min(total);
        let mut done = Vec::new();
        let mut end = None;
        while let Some(t) = dev.next_event() {
            dev.advance(t, &mut done);
            if progress(dev.as_ref()).is_some_and(|(d, _)| d >= goal) {
                end = Some(t);
                break;
            }
        }
        let Some(end) = end.filter(|&t| t > 0) else {
            return Err("the simulated run stopped before its stretch".into());
        };
        let rate = (goal - from) as f64 / (end as f64 / 1e9);
        let next = (total / POINTS * (at / (total / POINTS).max(1) + 1)).max(goal);
        let span = next.min(total) - from;
        total_s += span as f64 / rate;
        at = next;
        if at >= total {
            return Ok(Some(total_s));
        }
    }
}
