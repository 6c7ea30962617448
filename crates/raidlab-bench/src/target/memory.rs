//! `mem:` and `sim:` targets: memory (optionally throttled, for the harness's
//! ceiling and known-answer runs) and simulated hardware in virtual time. It
//! decides what their option strings mean; it must never accept an option it
//! would ignore.

use super::{OpenOptions, Target, TargetKind};
use raidlab_core::size::parse_size;
use raidlab_core::{Error, Result, Volume};
use raidlab_devices::{Limits, MemVolume, ThrottleVolume};
use std::sync::Arc;

/// The `bw=RATE` and `iops=N` options of a target (`usage` says how the
/// target is written, for the error); unlimited when there are none.
pub(super) fn throttle_limits<'a>(
    spec: &str,
    options: impl Iterator<Item = &'a str>,
    usage: &str,
) -> Result<Limits> {
    let mut limits = Limits::unlimited();
    for p in options {
        match p.split_once('=') {
            Some(("bw", v)) => {
                limits.bytes_per_sec = Some(parse_size(v).map_err(|e| e.on_device(spec))?)
            }
            Some(("iops", v)) => {
                limits.iops = Some(v.parse().map_err(|_| {
                    Error::invalid(format!(
                        "iops={v} is not a whole number of requests per second"
                    ))
                    .on_device(spec)
                })?)
            }
            _ => {
                return Err(Error::invalid(format!(
                    "'{p}' is not a target option here: write {usage}"
                ))
                .on_device(spec))
            }
        }
    }
    Ok(limits)
}

/// `volume` behind a throttle of `limits`, or as it is when they are none.
pub(super) fn throttled<V: Volume + 'static>(
    spec: &str,
    volume: V,
    limits: Limits,
) -> Result<Arc<dyn Volume>> {
    Ok(if limits == Limits::unlimited() {
        Arc::new(volume)
    } else {
        Arc::new(ThrottleVolume::new(volume, limits).map_err(|e| e.on_device(spec))?)
    })
}

/// `limits` for a target's notes.
pub(super) fn describe_limits(limits: Limits) -> String {
    let bw = limits
        .bytes_per_sec
        .map(|b| format!("{b} bytes/s"))
        .unwrap_or_else(|| "any bandwidth".into());
    let iops = limits
        .iops
        .map(|i| format!("{i} IOPS"))
        .unwrap_or_else(|| "any IOPS".into());
    format!("{bw}, {iops}")
}

pub(super) fn open_memory(spec: &str, rest: &str, opts: OpenOptions) -> Result<Target> {
    let mut parts = rest.split(',');
    let size = parse_size(parts.next().unwrap_or("")).map_err(|e| e.on_device(spec))?;
    let limits = throttle_limits(
        spec,
        parts,
        "mem:SIZE[,bw=RATE][,iops=N], e.g. mem:256M,bw=100M",
    )?;
    if size > (64 << 30) {
        return Err(Error::invalid("a memory target is limited to 64G").on_device(spec));
    }
    let volume = throttled(spec, MemVolume::new(size), limits)?;
    let mut t = Target::from_volume(spec, volume, opts.size)?;
    t.kind = TargetKind::Memory;
    Ok(t)
}

pub(super) fn open_sim(spec: &str, rest: &str, opts: OpenOptions) -> Result<Target> {
    let sim = Arc::new(crate::sim::SimTarget::open(rest)?);
    let volume: Arc<dyn Volume> = Arc::new(crate::sim::SimVolume(sim.clone()));
    let mut t = Target::from_volume(format!("{spec} (simulated)"), volume, opts.size)?;
    t.kind = TargetKind::Simulated;
    t.notes.push(format!(
        "simulated in virtual time: {}; block level, no file system; figures are the model's, the same on every machine",
        sim.describe
    ));
    t.sim = Some(sim);
    Ok(t)
}
