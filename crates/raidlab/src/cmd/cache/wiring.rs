//! Opening and closing what a cache verb works on, offline: the origin (an
//! array by its members, started and stopped through
//! `raidlab_raid::lifecycle::Started` like every other user of an array, or a
//! plain file or device) and the cache device, and the check that a cache
//! belongs to the origin given before anything is opened for writing.
//!
//! This module decides how the devices are opened and closed and refuses a
//! cache bound to another origin; it must never decide anything about the
//! cache itself (that is `raidlab-cache`'s) and never print a verb's result
//! (only the start's and stop's own warnings).

use crate::cli::CacheOrigin;
use crate::open::open_members;
use anyhow::{bail, Context, Result};
use raidlab_cache::{examine, CacheStack, OriginId, StackOptions, Superblock};
use raidlab_core::Volume;
use raidlab_devices::{FileVolume, OpenMode, SystemClock};
use raidlab_raid::assemble::format_uuid;
use raidlab_raid::lifecycle::{StartOptions, Started};
use std::path::Path;
use std::sync::Arc;

/// An opened origin, and for an array what it takes to close it cleanly.
pub(super) struct Origin {
    pub(super) volume: Arc<dyn Volume>,
    pub(super) id: OriginId,
    pub(super) label: String,
    array: Option<Started>,
}

pub(super) fn open_origin(at: &CacheOrigin, write: bool, force: bool) -> Result<Origin> {
    let mode = if write {
        OpenMode::ReadWrite
    } else {
        OpenMode::ReadOnly
    };
    if at.plain {
        let [path] = at.origin.as_slice() else {
            bail!(
                "--plain takes one origin file or device, not {}",
                at.origin.len()
            );
        };
        let v = FileVolume::open(path, mode)
            .with_context(|| format!("cannot use origin {}", path.display()))?;
        return Ok(Origin {
            volume: Arc::new(v),
            id: raidlab_cache::path_identity(path)?,
            label: path.display().to_string(),
            array: None,
        });
    }
    let devices = open_members(&at.origin, mode)?;
    let asm = crate::open::assemble(devices)?;
    // The one start every user of an array goes through: logs replayed, the
    // dirty mark written before the array takes its copy of the bitmap (a
    // copy taken before it carries the old event count, and after a crash
    // the whole array would be resynced instead of the chunks written).
    let started = Started::start(
        asm,
        StartOptions {
            write,
            force,
            ..StartOptions::default()
        },
    )?;
    crate::open::say_started(&started.report, "");
    let uuid = started.asm().uuid;
    Ok(Origin {
        volume: started.array.clone(),
        id: OriginId::ArrayUuid(uuid),
        label: format!("array {}", format_uuid(&uuid)),
        array: Some(started),
    })
}

/// Flush the origin and, for an array, mark it clean again.
pub(super) fn close_origin(o: Origin) -> Result<()> {
    o.volume.flush()?;
    if let Some(started) = o.array {
        for path in started.stop()? {
            eprintln!("raidlab: {path} failed and is now marked faulty; the array is degraded (`raidlab detail`)");
        }
    }
    Ok(())
}

pub(super) fn open_cache_device(path: &Path, write: bool) -> Result<FileVolume> {
    let mode = if write {
        OpenMode::ReadWrite
    } else {
        OpenMode::ReadOnly
    };
    FileVolume::open(path, mode)
        .with_context(|| format!("cannot use cache device {}", path.display()))
}

/// An offline verb's cache: opened as every owner opens one, never cleaned
/// in the background (a verb does its one job and stops it).
pub(super) type Cached = CacheStack<FileVolume, Arc<dyn Volume>>;

/// Refuse a cache bound to another origin, or to this one at another size,
/// before anything is opened for writing.
pub(super) fn check_binding(sb: &Superblock, cache: &Path, origin: &Origin) -> Result<()> {
    if sb.origin_id != origin.id {
        bail!(
            "the cache on {} belongs to another origin ({}), not {}: give the origin it was \
             created for",
            cache.display(),
            sb.origin_label,
            origin.label
        );
    }
    if sb.origin_size != origin.volume.size() {
        bail!(
            "{} is {} bytes but the cache on {} recorded {}: it was resized or is another \
             device; nothing was changed",
            origin.label,
            origin.volume.size(),
            cache.display(),
            sb.origin_size
        );
    }
    Ok(())
}

/// Open the origin for writing, then the cache in front of it. An error
/// opening the cache comes back with the origin, for `detach` to judge.
pub(super) fn open_cached(
    at: &CacheOrigin,
    force: bool,
) -> Result<std::result::Result<(Cached, Origin), (anyhow::Error, Origin)>> {
    let origin = open_origin(at, true, force)?;
    let cache = match open_cache_device(&at.cache, true) {
        Ok(c) => c,
        Err(e) => return Ok(Err((e, origin))),
    };
    if let Ok(sb) = examine(&cache) {
        check_binding(&sb, &at.cache, &origin)?;
    }
    let clock = Arc::new(SystemClock::default());
    let opts = StackOptions::default();
    match CacheStack::open(cache, origin.volume.clone(), origin.id, clock, opts) {
        Ok(v) => Ok(Ok((v, origin))),
        Err(e) => Ok(Err((e.into(), origin))),
    }
}

/// `open_cached` for the verbs that need the cache working.
pub(super) fn open_cached_or_fail(at: &CacheOrigin, force: bool) -> Result<(Cached, Origin)> {
    match open_cached(at, force)? {
        Ok(x) => Ok(x),
        Err((e, origin)) => {
            close_origin(origin)?;
            Err(e)
        }
    }
}
