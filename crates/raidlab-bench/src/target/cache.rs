//! `cache:CACHEDEV@ORIGIN` targets: a raidlab cache run in this process in
//! front of a file, device or array target. It decides which origins a cache
//! may front and how the cache is stopped; it must never bind a cache to an
//! origin it cannot identify.

use super::memory::{describe_limits, throttle_limits, throttled};
use super::{usable, Lanes, OpenOptions, Target, TargetKind};
use raidlab_cache::{CacheStack, StackOptions};
use raidlab_core::{Error, Result, Volume};
use raidlab_devices::{FileVolume, Limits, OpenMode, SystemClock};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// A cache target: the cache (with background cleaning while the tests
/// write, as a served cache runs it) and the origin target under it, stopped
/// in that order.
pub(super) struct CacheHold {
    pub(super) stack: CacheStack<Arc<dyn Volume>, Arc<dyn Volume>>,
    pub(super) origin: Box<Target>,
}

pub(super) fn open_cache(spec: &str, rest: &str, opts: OpenOptions) -> Result<Target> {
    let Some((dev, origin_spec)) = rest.split_once('@') else {
        return Err(Error::invalid(
            "write cache:CACHEDEV@ORIGIN, e.g. cache:ssd.img@array:m0,m1,m2 (the cache made by `raidlab cache create`)",
        )
        .on_device(spec));
    };
    if origin_spec.starts_with("cache:")
        || origin_spec.starts_with("mem:")
        || origin_spec.starts_with("nbd")
    {
        return Err(Error::invalid(
            "a cache target's origin is a file, a block device or an array:... target",
        )
        .on_device(spec));
    }
    if Path::new(origin_spec).is_dir() {
        return Err(Error::invalid(
            "a cache target's origin must be an existing file, block device or array (not a directory)",
        )
        .on_device(spec));
    }
    // The whole origin: a cache covers all of it, and the test region is
    // chosen below, on the cached volume.
    let origin = Target::open(origin_spec, OpenOptions { size: 0, ..opts })?;
    let Some(id) = origin.identity else {
        return Err(Error::invalid(
            "a cache target's origin must be an existing file, block device or array (not a directory)",
        )
        .on_device(spec));
    };
    let mut dev_parts = dev.split(',');
    let dev = dev_parts.next().unwrap_or("");
    let limits = throttle_limits(
        spec,
        dev_parts,
        "cache:CACHEDEV[,bw=RATE][,iops=N]@ORIGIN (the cache device throttled), e.g. cache:ssd.img,bw=500M,iops=50000@array:a.img,b.img,c.img,bw=150M,iops=150",
    )?;
    let cache = throttled(
        spec,
        FileVolume::open(Path::new(dev), OpenMode::ReadWrite)?,
        limits,
    )?;
    let stack = CacheStack::open(
        cache,
        origin.volume.clone(),
        id,
        Arc::new(SystemClock::default()),
        StackOptions {
            read_only: false,
            background_clean: opts.writes,
        },
    )
    .map_err(|e| e.on_device(spec))?;
    let cached = stack.cached().clone();
    let size = usable(spec, cached.size(), opts.size)?;
    let sb = cached.superblock();
    let mut notes = origin.notes.clone();
    notes.push(format!(
        "cache on {dev} ({} blocks of {} bytes, {:?}) in front of {origin_spec}; the cache device goes through the page cache; background cleaning runs while the tests do (dirty target {}%, rate {})",
        sb.layout.cache_blocks,
        sb.block_size,
        sb.mode,
        sb.dirty_target_pct,
        if sb.clean_rate == 0 { "unlimited".to_string() } else { format!("{} bytes/s", sb.clean_rate) }
    ));
    if limits != Limits::unlimited() {
        notes.push(format!(
            "the cache device throttled to {}",
            describe_limits(limits)
        ));
    }
    Ok(Target {
        label: spec.to_string(),
        kind: TargetKind::Cache,
        volume: cached.clone(),
        file: None,
        direct: false,
        size,
        notes,
        fresh: false,
        remove_on_drop: None,
        array: Mutex::new(None),
        identity: None,
        cache: Mutex::new(Some(CacheHold {
            stack,
            origin: Box::new(origin),
        })),
        sim: None,
        lanes: Lanes::default(),
    })
}

impl Target {
    /// A cache target's statistics (None for other targets, or once finished).
    pub fn cache_stats(&self) -> Option<raidlab_cache::Stats> {
        let hold = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        hold.as_ref().map(|h| h.stack.cached().stats())
    }
}
