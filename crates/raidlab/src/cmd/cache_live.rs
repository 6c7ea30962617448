//! The cache verbs on a cache that `raidlab serve` is serving: the command side
//! (send the request to the server's control socket, show progress, print the
//! answer) and the server side (carry it out on the running cache). Same verbs,
//! flags and output as offline (`cmd/cache/`); the figures are the running
//! cache's. As for arrays (`cmd/live.rs`), every cache decision stays in
//! `raidlab-cache`; this module only routes and words.

use crate::cli::{CacheDetailArgs, CacheOrigin, CacheOriginArgs, CacheSetArgs, CacheStatsArgs};
use crate::cmd::cache::render::{
    mode_from_cli, mode_from_name, mode_name, render_detail, render_stats,
};
use crate::cmd::live::show;
use crate::control::{self, CacheOriginNamed, Command, Reply, Request};
use anyhow::{anyhow, bail, Result};
use raidlab_cache::CachedVolume;
use raidlab_core::size::format_size;
use raidlab_core::Volume;
use raidlab_devices::FileVolume;
use raidlab_raid::live::LiveArray;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

pub type Cached = CachedVolume<FileVolume, Arc<dyn Volume>>;

/// What a served cache is in front of.
pub enum ServedOrigin {
    /// An array (also managed by the array verbs).
    Array(Arc<LiveArray>),
    /// A plain file or block device, by its absolute path.
    File(String),
}

/// A cache a server serves, as the cache verbs see it.
pub struct ManagedCache {
    pub export: String,
    /// The cache device's absolute path.
    pub device: String,
    pub cached: Arc<Cached>,
    pub origin: ServedOrigin,
    /// The origin for messages.
    pub origin_label: String,
}

// ---- The command side -------------------------------------------------------

fn named(at: &CacheOrigin) -> CacheOriginNamed {
    CacheOriginNamed {
        paths: control::member_paths(&at.origin),
        plain: at.plain,
    }
}

fn call(server: &Path, cache: &Path, cmd: Command) -> Result<ExitCode> {
    show(|progress| control::call_cache(server, cache, cmd, progress))
}

pub fn detail(server: &Path, a: &CacheDetailArgs) -> Result<ExitCode> {
    call(server, &a.cache, Command::CacheDetail { json: a.json })
}

pub fn stats(server: &Path, a: &CacheStatsArgs) -> Result<ExitCode> {
    let cmd = Command::CacheStats {
        json: a.json,
        reset: a.reset,
    };
    call(server, &a.cache, cmd)
}

pub fn flush(server: &Path, a: &CacheOriginArgs) -> Result<ExitCode> {
    let cmd = Command::CacheFlush {
        origin: named(&a.at),
        json: a.at.json,
    };
    call(server, &a.at.cache, cmd)
}

pub fn detach(server: &Path, a: &CacheOriginArgs) -> Result<ExitCode> {
    let cmd = Command::CacheDetach {
        origin: named(&a.at),
        json: a.at.json,
    };
    call(server, &a.at.cache, cmd)
}

pub fn set(server: &Path, a: &CacheSetArgs) -> Result<ExitCode> {
    let cmd = Command::CacheSet {
        origin: named(&a.at),
        mode: a.mode.map(|m| mode_name(mode_from_cli(m)).to_string()),
        sequential_cutoff: a.sequential_cutoff,
        dirty_target: a.dirty_target,
        clean_rate: a.clean_rate,
        promote_threshold: a.promote_threshold,
        json: a.at.json,
    };
    call(server, &a.at.cache, cmd)
}

// ---- The server side --------------------------------------------------------

/// Refuse a verb given another origin than the one the served cache is in
/// front of, before anything changes.
fn check_origin(m: &ManagedCache, named: &CacheOriginNamed) -> Result<()> {
    let ok = match &m.origin {
        ServedOrigin::Array(live) => {
            !named.plain
                && !named.paths.is_empty()
                && named.paths.iter().all(|p| live.has_member(p))
        }
        ServedOrigin::File(f) => {
            named.plain
                && named.paths.len() == 1
                && std::fs::canonicalize(&named.paths[0]).ok() == std::fs::canonicalize(f).ok()
        }
    };
    if !ok {
        bail!(
            "the cache on {} is served in front of {}, not {}{}: give the origin it serves \
             (an array by its members, a file with --plain); nothing was changed",
            m.device,
            m.origin_label,
            if named.plain { "--plain " } else { "" },
            named.paths.join(" ")
        );
    }
    Ok(())
}

fn refuse_detached(m: &ManagedCache) -> Result<()> {
    if m.cached.superblock().detached {
        bail!(
            "the cache on {} was detached while served: export {:?} serves {} directly; \
             stop the server, then `raidlab cache attach` to bind it again",
            m.device,
            m.export,
            m.origin_label
        );
    }
    Ok(())
}

/// Write every dirty block back, telling the command how far it is (bytes).
fn write_back(stream: &UnixStream, m: &ManagedCache) -> Result<u64> {
    let bs = u64::from(m.cached.superblock().block_size);
    let done = m.cached.flush_dirty(|done, total| {
        if total > 0 {
            let _ = control::send(
                stream,
                &Reply::Progress {
                    what: "write-back".into(),
                    done: done * bs,
                    total: total * bs,
                },
            );
        }
    })?;
    Ok(done)
}

pub fn carry_out(
    stream: &UnixStream,
    req: Request,
    caches: &[ManagedCache],
    log: &dyn Fn(&str),
) -> Result<(String, u8)> {
    let want = req.cache.unwrap_or_default();
    let m = caches
        .iter()
        .find(|c| {
            c.device == want
                || std::fs::canonicalize(&c.device).ok() == std::fs::canonicalize(&want).ok()
        })
        .ok_or_else(|| anyhow!("this server does not serve a cache on {want}"))?;
    let said = |what: &str| {
        log(&format!(
            "export {:?}: cache {}: {what}",
            m.export, m.device
        ))
    };
    let device = m.device.as_str();
    let v = &m.cached;
    match req.command {
        Command::Find => Ok((String::new(), 0)),
        Command::CacheDetail { json } => {
            let s = v.stats();
            let text = render_detail(
                &v.superblock(),
                s.occupied_blocks,
                s.dirty_blocks,
                device,
                Some(&m.export),
                json,
            )?;
            Ok((text, 0))
        }
        Command::CacheStats { json, reset } => {
            let text = render_stats(&v.superblock(), &v.stats(), device, true, reset, json)?;
            if reset {
                v.reset_stats()?;
                said("counters reset");
            }
            Ok((text, 0))
        }
        Command::CacheFlush { origin, json } => {
            check_origin(m, &origin)?;
            refuse_detached(m)?;
            let done = write_back(stream, m)?;
            let bs = u64::from(v.superblock().block_size);
            said(&format!("flushed: {done} block(s) written back"));
            let mut o = String::new();
            if json {
                textln!(
                    o,
                    "{}",
                    serde_json::json!({ "written_back_blocks": done, "written_back_bytes": done * bs })
                );
            } else {
                textln!(
                    o,
                    "raidlab: wrote {done} dirty block(s) ({}) back to {}; nothing is dirty (the cache keeps serving)",
                    format_size(done * bs),
                    m.origin_label
                );
            }
            Ok((o, 0))
        }
        Command::CacheSet {
            origin,
            mode,
            sequential_cutoff,
            dirty_target,
            clean_rate,
            promote_threshold,
            json,
        } => {
            check_origin(m, &origin)?;
            refuse_detached(m)?;
            if mode.is_none()
                && sequential_cutoff.is_none()
                && dirty_target.is_none()
                && clean_rate.is_none()
                && promote_threshold.is_none()
            {
                bail!("nothing to set: give --mode, --sequential-cutoff, --dirty-target, --clean-rate or --promote-threshold");
            }
            let mode = match mode.as_deref() {
                Some(name) => {
                    Some(mode_from_name(name).ok_or_else(|| anyhow!("unknown mode {name:?}"))?)
                }
                None => None,
            };
            let sb = v.superblock();
            v.set_tunables(
                sequential_cutoff.unwrap_or(sb.sequential_cutoff),
                dirty_target.unwrap_or(sb.dirty_target_pct),
                clean_rate.unwrap_or(sb.clean_rate),
                promote_threshold.unwrap_or(sb.promote_threshold),
            )?;
            if let Some(mode) = mode {
                if mode != raidlab_cache::Mode::WriteBack {
                    // Leaving write-back writes back first: with progress.
                    write_back(stream, m)?;
                }
                v.set_mode(mode)?;
            }
            let sb = v.superblock();
            said(&format!("set: now {}", mode_name(sb.mode)));
            if json {
                let s = v.stats();
                let text = render_detail(
                    &sb,
                    s.occupied_blocks,
                    s.dirty_blocks,
                    device,
                    Some(&m.export),
                    true,
                )?;
                return Ok((text, 0));
            }
            Ok((
                format!(
                    "raidlab: the cache on {device} is now {} (served, export {:?})\n",
                    mode_name(sb.mode),
                    m.export
                ),
                0,
            ))
        }
        Command::CacheDetach { origin, json } => {
            check_origin(m, &origin)?;
            let mut o = String::new();
            if v.superblock().detached {
                textln!(
                    o,
                    "raidlab: the cache on {device} is detached from {} already; nothing changed",
                    m.origin_label
                );
                return Ok((o, 0));
            }
            said("detach asked: writing back");
            let done = write_back(stream, m)?;
            let before = v.stats().cleaned_blocks;
            v.detach()?;
            // Blocks written between the last batch and the detach itself.
            let done = done + v.stats().cleaned_blocks.saturating_sub(before);
            said(&format!(
                "detached after writing back {done} block(s); the export serves the origin directly"
            ));
            if json {
                textln!(
                    o,
                    "{}",
                    serde_json::json!({ "written_back_blocks": done, "detached": true, "served": true })
                );
            } else {
                textln!(
                    o,
                    "raidlab: wrote back {done} dirty block(s) and detached the cache on {device}: {} is complete on its own; export {:?} now serves it directly",
                    m.origin_label,
                    m.export
                );
            }
            Ok((o, 0))
        }
        _ => bail!("an array verb names the array's members, not a cache device"),
    }
}
