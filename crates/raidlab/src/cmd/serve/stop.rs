//! The end of each served export: what is flushed and recorded, in which
//! order (a cache before the origin under it; an array's rebuild or reshape
//! stopped, its writes flushed, members it took out recorded faulty, then
//! marked clean), and exports started before a failed start stopped the
//! same way.
//!
//! Must never skip the origin because its cache failed to stop, nor mark an
//! array clean whose final flush failed (it stays dirty, resynced at the
//! next start).

use super::Served;
use anyhow::{Context, Result};
use raidlab_core::Volume;
use raidlab_raid::lifecycle;

/// Stop exports started before serve gave up starting the rest: each is
/// flushed and marked clean as at a normal stop, so serve's failure costs no
/// resync.
pub(super) fn abandon(served: Vec<Served>) {
    for s in served {
        if let Err(e) = stop(s) {
            eprintln!("raidlab: error: {e:#}");
        }
    }
}

/// Flush and, for arrays, record what happened (failed members) and a clean stop.
pub(super) fn stop(s: Served) -> Result<()> {
    match s {
        Served::Cache {
            name,
            device,
            stack,
            origin,
            ..
        } => {
            // The cache first (its dirty blocks stay in it, recorded), then the
            // origin under it; the origin is stopped even if the cache fails.
            let stopped = stack.stop();
            if let Some(err) = stopped.cleaner_error {
                eprintln!(
                    "raidlab: export {name:?}: background cleaning of the cache on {} had stopped: {err}",
                    device.display()
                );
            }
            let cache = stopped.shutdown.with_context(|| {
                format!(
                    "export {name:?}: the cache on {} could not be stopped cleanly; its next \
                     open recovers (dirty blocks are kept)",
                    device.display()
                )
            });
            let under = stop(*origin);
            cache.and(under)
        }
        Served::Plain { volume } => volume
            .flush()
            .with_context(|| format!("flushing {} failed", volume.name())),
        Served::Array {
            name,
            live,
            was_clean,
            writable,
            ..
        } => {
            // A rebuild saves its position and stops first.
            live.shutdown();
            if !writable {
                return Ok(());
            }
            let array = live.array().clone();
            // The writes with the assembly let go: one that takes a member
            // out records it through the live array, which takes it.
            lifecycle::stop_writes(&array)
                .with_context(|| format!("export {name:?}: the final flush failed; the array stays marked dirty and is resynced at the next start"))?;
            let failed = live
                .stop_records(&array, was_clean)
                .with_context(|| format!("export {name:?}: cannot mark the array clean"))?;
            for path in failed {
                eprintln!("raidlab: export {name:?}: {path} failed while serving and is now marked faulty; the array is degraded (`raidlab detail`)");
            }
            Ok(())
        }
    }
}
