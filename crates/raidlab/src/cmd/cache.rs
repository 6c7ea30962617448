//! `raidlab cache`: the cache verbs, offline on the devices. Opens the cache
//! device and the origin (an array by its members, or a plain file or device),
//! hands them to `raidlab-cache` and prints what it did. Every cache decision
//! lives in `raidlab-cache`; this module only wires and words.

use crate::cli::{
    CacheCommand, CacheCreateArgs, CacheDetailArgs, CacheMode, CacheOrigin, CacheOriginArgs,
    CacheSetArgs, CacheStatsArgs,
};
use crate::cmd::cache_live;
use crate::control;
use crate::open::open_members;
use anyhow::{bail, Context, Result};
use raidlab_cache::{
    attach, create, examine, examine_table, reset_counters, CachedVolume, Config, Mode, OriginId,
    Policy, Stats, Superblock,
};
use raidlab_core::size::format_size;
use raidlab_core::Volume;
use raidlab_devices::{FileVolume, OpenMode, SystemClock};
use raidlab_raid::assemble::format_uuid;
use raidlab_raid::lifecycle::{StartOptions, Started};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

pub fn run(c: CacheCommand) -> Result<ExitCode> {
    match c {
        CacheCommand::Create(a) => create_cmd(a),
        CacheCommand::Detail(a) => detail(a),
        CacheCommand::Flush(a) => flush(a),
        CacheCommand::Detach(a) => detach(a),
        CacheCommand::Set(a) => set(a),
        CacheCommand::Stats(a) => stats(a),
        CacheCommand::Attach(a) => attach_cmd(a),
    }
}

pub fn mode_from_name(name: &str) -> Option<Mode> {
    [Mode::WriteBack, Mode::WriteThrough, Mode::WriteAround]
        .into_iter()
        .find(|m| mode_name(*m) == name)
}

pub fn mode_from_cli(m: CacheMode) -> Mode {
    mode(m)
}

fn mode(m: CacheMode) -> Mode {
    match m {
        CacheMode::Writeback => Mode::WriteBack,
        CacheMode::Writethrough => Mode::WriteThrough,
        CacheMode::Writearound => Mode::WriteAround,
    }
}

pub fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::WriteBack => "writeback",
        Mode::WriteThrough => "writethrough",
        Mode::WriteAround => "writearound",
    }
}

/// An opened origin, and for an array what it takes to close it cleanly.
struct Origin {
    volume: Arc<dyn Volume>,
    id: OriginId,
    label: String,
    array: Option<Started>,
}

fn open_origin(at: &CacheOrigin, write: bool, force: bool) -> Result<Origin> {
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
    Ok(Origin {
        volume: started.array.clone(),
        id: OriginId::ArrayUuid(started.asm.uuid),
        label: format!("array {}", format_uuid(&started.asm.uuid)),
        array: Some(started),
    })
}

/// Flush the origin and, for an array, mark it clean again.
fn close_origin(o: Origin) -> Result<()> {
    o.volume.flush()?;
    if let Some(started) = o.array {
        for path in started.stop()? {
            eprintln!("raidlab: {path} failed and is now marked faulty; the array is degraded (`raidlab detail`)");
        }
    }
    Ok(())
}

fn open_cache_device(path: &Path, write: bool) -> Result<FileVolume> {
    let mode = if write {
        OpenMode::ReadWrite
    } else {
        OpenMode::ReadOnly
    };
    FileVolume::open(path, mode)
        .with_context(|| format!("cannot use cache device {}", path.display()))
}

type Cached = CachedVolume<FileVolume, Arc<dyn Volume>>;

/// Refuse a cache bound to another origin, or to this one at another size,
/// before anything is opened for writing.
fn check_binding(sb: &Superblock, cache: &Path, origin: &Origin) -> Result<()> {
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
fn open_cached(
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
    match CachedVolume::open(cache, origin.volume.clone(), origin.id, clock) {
        Ok(v) => {
            // Real devices: a flush's next read overlaps this write.
            v.set_overlapped_writeback(true);
            Ok(Ok((v, origin)))
        }
        Err(e) => Ok(Err((e.into(), origin))),
    }
}

/// `open_cached` for the verbs that need the cache working.
fn open_cached_or_fail(at: &CacheOrigin, force: bool) -> Result<(Cached, Origin)> {
    match open_cached(at, force)? {
        Ok(x) => Ok(x),
        Err((e, origin)) => {
            close_origin(origin)?;
            Err(e)
        }
    }
}

fn create_cmd(a: CacheCreateArgs) -> Result<ExitCode> {
    let block = u32::try_from(a.block)
        .ok()
        .filter(|b| raidlab_cache::format::check_block_size(*b).is_ok());
    let Some(block_size) = block else {
        bail!(
            "--block {} is not a power of two from 4K to 1G; pick one such as 64K",
            a.block
        );
    };
    let cache = open_cache_device(&a.at.cache, true)?;
    if let Ok((old, table)) = examine_table(&cache) {
        // A detached cache holds nothing: a new one may take its place.
        if !a.force && !old.detached {
            bail!(
                "{} already holds a cache for {} ({} dirty block(s), {}); creating a new one \
                 loses them: detach it first (`raidlab cache detach`), or give --force",
                a.at.cache.display(),
                old.origin_label,
                table.dirty_blocks,
                format_size(table.dirty_blocks * u64::from(old.block_size))
            );
        }
    } else if examine(&cache).is_ok() && !a.force {
        bail!(
            "{} holds a cache whose mapping table cannot be read; give --force to overwrite it",
            a.at.cache.display()
        );
    }
    let origin = open_origin(&a.at, false, false)?;
    let config = Config {
        mode: mode(a.mode),
        block_size,
        policy: Policy::TwoQ,
        sequential_cutoff: a.sequential_cutoff,
        dirty_target_pct: a.dirty_target,
        clean_rate: a.clean_rate,
        promote_threshold: a.promote_threshold,
    };
    let sb = create(
        &cache,
        &origin.volume,
        origin.id,
        &origin.label,
        *uuid::Uuid::new_v4().as_bytes(),
        config,
    )
    .with_context(|| format!("cannot create a cache on {}", a.at.cache.display()))?;
    if a.at.json {
        outln!("{}", serde_json::to_string_pretty(&detail_json(&sb, 0, 0))?);
    } else {
        outln!(
            "raidlab: created a {} cache of {} blocks of {} on {} for {}",
            mode_name(sb.mode),
            sb.layout.cache_blocks,
            format_size(u64::from(sb.block_size)),
            a.at.cache.display(),
            origin.label
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A cache's state in one word, as `cache detail`, `cache stats` and the
/// monitor say it: `failed` (the cache device failed while in use),
/// `detached`, or `attached`.
pub fn state_name(sb: &Superblock) -> &'static str {
    if sb.failed {
        "failed"
    } else if sb.detached {
        "detached"
    } else {
        "attached"
    }
}

/// What a failed cache does now, in words (see `raidlab_cache::failure`).
fn failed_words(sb: &Superblock, dirty: u64) -> String {
    if dirty == 0 {
        "failed: the cache device returned I/O errors and is no longer used; every request \
         passes through to the origin, which is complete"
            .to_string()
    } else {
        format!(
            "failed: the cache device returned I/O errors and is no longer used; it holds the \
             only up-to-date copy of {dirty} dirty block(s) ({}), read from it while it can \
             and never written back; writes to them are refused, the rest passes through to \
             the origin",
            format_size(dirty * u64::from(sb.block_size))
        )
    }
}

fn detail_json(sb: &Superblock, occupied: u64, dirty: u64) -> serde_json::Value {
    let bs = u64::from(sb.block_size);
    serde_json::json!({
        "state": state_name(sb),
        "origin": sb.origin_label,
        "origin_identity": match sb.origin_id {
            OriginId::ArrayUuid(u) => format!("array {}", format_uuid(&u)),
            OriginId::Signature(s) => format!("signature {}", s.iter().map(|b| format!("{b:02x}")).collect::<String>()),
        },
        "origin_size": sb.origin_size,
        "mode": mode_name(sb.mode),
        "policy": "2q",
        "block_size": bs,
        "cache_blocks": sb.layout.cache_blocks,
        "occupied_blocks": occupied,
        "occupied_bytes": occupied * bs,
        "dirty_blocks": dirty,
        "dirty_bytes": dirty * bs,
        "stopped_cleanly": sb.clean,
        "sequential_cutoff": sb.sequential_cutoff,
        "dirty_target_pct": sb.dirty_target_pct,
        "clean_rate": sb.clean_rate,
        "promote_threshold": sb.promote_threshold,
    })
}

fn detail(a: CacheDetailArgs) -> Result<ExitCode> {
    if let Some(server) = control::find_cache(&a.cache)? {
        return cache_live::detail(&server, &a);
    }
    let cache = open_cache_device(&a.cache, false)?;
    let (sb, t) = examine_table(&cache)?;
    let text = render_detail(
        &sb,
        t.occupied_blocks,
        t.dirty_blocks,
        &a.cache.display().to_string(),
        None,
        a.json,
    )?;
    out!("{text}");
    Ok(ExitCode::SUCCESS)
}

/// `cache detail`'s output, offline (from the device) or for a served cache
/// (`served` names the export; the state is the running cache's).
pub fn render_detail(
    sb: &Superblock,
    occupied: u64,
    dirty: u64,
    device: &str,
    served: Option<&str>,
    json: bool,
) -> Result<String> {
    let mut o = String::new();
    if json {
        let mut j = detail_json(sb, occupied, dirty);
        j["cache"] = device.into();
        if let Some(export) = served {
            j["served"] = serde_json::json!({ "pid": std::process::id(), "export": export });
        }
        textln!(o, "{}", serde_json::to_string_pretty(&j)?);
        return Ok(o);
    }
    let bs = u64::from(sb.block_size);
    let pct = |n: u64| n as f64 * 100.0 / sb.layout.cache_blocks as f64;
    textln!(o, "cache on {device}");
    if let Some(export) = served {
        textln!(
            o,
            "        served : by raidlab serve (pid {}) as export {export:?}; figures are the running cache's",
            std::process::id()
        );
    }
    textln!(
        o,
        "        origin : {} ({} bytes)",
        sb.origin_label,
        sb.origin_size
    );
    if sb.failed {
        textln!(o, "         state : {}", failed_words(sb, dirty));
    } else if sb.detached {
        textln!(
            o,
            "         state : detached: the origin is complete on its own and the cache holds \
             nothing (`raidlab cache attach` binds it again, empty)"
        );
    }
    textln!(o, "          mode : {}", mode_name(sb.mode));
    textln!(o, "    block size : {}", format_size(bs));
    textln!(
        o,
        "     occupancy : {} of {} blocks ({:.1}%), {}",
        occupied,
        sb.layout.cache_blocks,
        pct(occupied),
        format_size(occupied * bs)
    );
    textln!(
        o,
        "         dirty : {} blocks ({:.1}%), {}",
        dirty,
        pct(dirty),
        format_size(dirty * bs)
    );
    if served.is_none() {
        textln!(
            o,
            "  last stopped : {}",
            if sb.clean {
                "cleanly"
            } else {
                "not cleanly (clean blocks are dropped at the next open; dirty ones kept)"
            }
        );
    }
    textln!(
        o,
        "      tunables : policy 2q, sequential cutoff {}, dirty target {}%, cleaning rate {}, promote after {} miss(es)",
        if sb.sequential_cutoff == 0 { "off".to_string() } else { format_size(sb.sequential_cutoff) },
        sb.dirty_target_pct,
        if sb.clean_rate == 0 { "unlimited".to_string() } else { format!("{}/s", format_size(sb.clean_rate)) },
        sb.promote_threshold
    );
    Ok(o)
}

fn flush(a: CacheOriginArgs) -> Result<ExitCode> {
    if let Some(server) = control::find_cache(&a.at.cache)? {
        return cache_live::flush(&server, &a);
    }
    let (v, origin) = open_cached_or_fail(&a.at, a.force)?;
    let label = origin.label.clone();
    let bs = u64::from(v.superblock().block_size);
    let done = v.flush_dirty(|done, total| {
        if total > 0 && !a.at.json {
            eprint!("\rraidlab: writing back {done}/{total} block(s)");
        }
    })?;
    v.shutdown()?;
    drop(v);
    close_origin(origin)?;
    if a.at.json {
        outln!(
            "{}",
            serde_json::json!({ "written_back_blocks": done, "written_back_bytes": done * bs })
        );
    } else {
        if done > 0 {
            eprintln!();
        }
        outln!(
            "raidlab: wrote {done} dirty block(s) ({}) back to {label}; nothing is dirty",
            format_size(done * bs)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn detach(a: CacheOriginArgs) -> Result<ExitCode> {
    if let Some(server) = control::find_cache(&a.at.cache)? {
        return cache_live::detach(&server, &a);
    }
    let recorded = open_cache_device(&a.at.cache, false)
        .ok()
        .and_then(|c| examine(&c).ok());
    if let Some(sb) = recorded.filter(|sb| sb.detached) {
        if a.at.json {
            outln!(
                "{}",
                serde_json::json!({ "written_back_blocks": 0, "detached": true })
            );
        } else {
            outln!(
                "raidlab: the cache on {} is detached from {} already; nothing changed",
                a.at.cache.display(),
                sb.origin_label
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let (v, origin) = match open_cached(&a.at, a.force)? {
        Ok(x) => x,
        Err((e, origin)) => {
            let r = detach_unopened(&a, e);
            close_origin(origin)?;
            return r;
        }
    };
    let label = origin.label.clone();
    let done = v.flush_dirty(|_, _| {})?;
    v.detach()?;
    drop(v);
    close_origin(origin)?;
    if a.at.json {
        outln!(
            "{}",
            serde_json::json!({ "written_back_blocks": done, "detached": true })
        );
    } else {
        outln!(
            "raidlab: wrote back {done} dirty block(s) and detached the cache on {}: {label} is complete on its own",
            a.at.cache.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The cache cannot be opened (device gone, unreadable, corrupt). Say how much
/// dirty data it recorded; in write-back mode refuse unless forced, since the
/// origin alone may lack it.
fn detach_unopened(a: &CacheOriginArgs, e: anyhow::Error) -> Result<ExitCode> {
    let device = open_cache_device(&a.at.cache, true).ok();
    let recorded = device
        .as_ref()
        .map(|d| (examine(d).ok(), examine_table(d).ok()));
    let (sb, table) = match recorded {
        Some((sb, t)) => (sb, t.map(|(_, t)| t)),
        None => (None, None),
    };
    let dirty = match (&sb, &table) {
        (Some(sb), Some(t)) => Some((
            t.dirty_blocks,
            u64::from(sb.block_size),
            "in its mapping table",
        )),
        (Some(sb), None) => Some((
            sb.dirty_blocks,
            u64::from(sb.block_size),
            "at its last superblock write",
        )),
        _ => None,
    };
    let write_back = sb.as_ref().map_or(true, |s| s.mode == Mode::WriteBack);
    let what = match dirty {
        Some((n, bs, when)) => format!(
            "it recorded {n} dirty block(s) ({}) {when}",
            format_size(n * bs)
        ),
        None => "how much dirty data it held cannot be read".to_string(),
    };
    let at_risk = write_back && dirty.map_or(true, |(n, _, _)| n > 0);
    if at_risk && !a.force {
        bail!(
            "cannot open the cache on {}: {e:#}. In write-back mode the origin alone may lack \
             data only the cache holds: {what}. Fix or reconnect the cache device and run \
             again; or give --force to unbind the cache and use the origin as it is, losing \
             that data",
            a.at.cache.display()
        );
    }
    if let Some(d) = device {
        // Never leave a cache behind that could later be found with stale data.
        if let Err(err) = d.write_at_fua(&vec![0u8; 8192], 0) {
            eprintln!("raidlab: could not erase the cache's superblocks: {err}");
        }
    }
    if at_risk {
        eprintln!("raidlab: warning: detached by force; {what}, and it is lost");
    }
    outln!(
        "raidlab: the cache on {} is unbound; the origin is on its own",
        a.at.cache.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn set(a: CacheSetArgs) -> Result<ExitCode> {
    if a.mode.is_none()
        && a.sequential_cutoff.is_none()
        && a.dirty_target.is_none()
        && a.clean_rate.is_none()
        && a.promote_threshold.is_none()
    {
        bail!("nothing to set: give --mode, --sequential-cutoff, --dirty-target, --clean-rate or --promote-threshold");
    }
    if let Some(server) = control::find_cache(&a.at.cache)? {
        return cache_live::set(&server, &a);
    }
    let (v, origin) = open_cached_or_fail(&a.at, a.force)?;
    let sb = v.superblock();
    v.set_tunables(
        a.sequential_cutoff.unwrap_or(sb.sequential_cutoff),
        a.dirty_target.unwrap_or(sb.dirty_target_pct),
        a.clean_rate.unwrap_or(sb.clean_rate),
        a.promote_threshold.unwrap_or(sb.promote_threshold),
    )?;
    if let Some(m) = a.mode {
        v.set_mode(mode(m))?;
    }
    v.shutdown()?;
    let sb = v.superblock();
    let stats = v.stats();
    drop(v);
    close_origin(origin)?;
    if a.at.json {
        let j = detail_json(&sb, stats.occupied_blocks, stats.dirty_blocks);
        outln!("{}", serde_json::to_string_pretty(&j)?);
    } else {
        outln!(
            "raidlab: the cache on {} is now {}",
            a.at.cache.display(),
            mode_name(sb.mode)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// `cache stats`'s output. `s` holds the counters and the state now; `live`:
/// they are the running cache's (a server's), else as saved in the superblock.
pub fn render_stats(
    sb: &Superblock,
    s: &Stats,
    device: &str,
    live: bool,
    reset: bool,
    json: bool,
) -> Result<String> {
    let bs = u64::from(sb.block_size);
    let target_blocks = sb.layout.cache_blocks * u64::from(sb.dirty_target_pct) / 100;
    let over_target = s.dirty_blocks.saturating_sub(target_blocks);
    let reads = s.read_hits + s.read_partial_hits + s.read_misses;
    let writes = s.write_hits + s.write_partial_hits + s.write_misses;
    let from_text = if live {
        "live, from the running cache"
    } else if sb.clean {
        "as saved at the cache's last clean stop"
    } else {
        "as saved at the cache's last superblock write: it was not stopped cleanly, so \
         counts of its last run may be missing"
    };
    let mut o = String::new();
    if json {
        let j = serde_json::json!({
            "cache": device,
            "origin": sb.origin_label,
            "state": state_name(sb),
            "io_errors": s.io_errors,
            "mode": mode_name(sb.mode),
            "block_size": bs,
            "counters_from": if live { "live" } else { "saved" },
            "stopped_cleanly": sb.clean,
            "read_requests": reads,
            "read_hits": s.read_hits,
            "read_partial_hits": s.read_partial_hits,
            "read_misses": s.read_misses,
            "read_hit_ratio": ratio(s.read_hits, reads),
            "write_requests": writes,
            "write_hits": s.write_hits,
            "write_partial_hits": s.write_partial_hits,
            "write_misses": s.write_misses,
            "write_hit_ratio": ratio(s.write_hits, writes),
        });
        let more = serde_json::json!({
            "bypass_sequential_requests": s.bypass_sequential_requests,
            "bypass_sequential_bytes": s.bypass_sequential_bytes,
            "bypass_mode_requests": s.bypass_mode_requests,
            "bypass_mode_bytes": s.bypass_mode_bytes,
            "bypass_full_requests": s.bypass_full_requests,
            "bypass_full_bytes": s.bypass_full_bytes,
            "bypass_tail_requests": s.bypass_tail_requests,
            "bypass_tail_bytes": s.bypass_tail_bytes,
            "promotions": s.promotions,
            "not_promoted": s.not_promoted,
            "evictions": s.evictions,
            "invalidations": s.invalidations,
            "cleaned_blocks": s.cleaned_blocks,
            "cleaned_bytes": s.cleaned_bytes,
            "cache_blocks": sb.layout.cache_blocks,
            "occupied_blocks": s.occupied_blocks,
            "occupied_bytes": s.occupied_blocks * bs,
            "dirty_blocks": s.dirty_blocks,
            "dirty_bytes": s.dirty_blocks * bs,
            "dirty_target_pct": sb.dirty_target_pct,
            "dirty_target_blocks": target_blocks,
            "dirty_over_target_blocks": over_target,
            "clean_rate": sb.clean_rate,
            "sequential_cutoff": sb.sequential_cutoff,
            "promote_threshold": sb.promote_threshold,
            "reset": reset,
        });
        let mut j = j;
        if let (Some(j), serde_json::Value::Object(more)) = (j.as_object_mut(), more) {
            j.extend(more);
        }
        textln!(o, "{}", serde_json::to_string_pretty(&j)?);
        return Ok(o);
    }
    let pct = |n: u64, of: u64| ratio(n, of) * 100.0;
    let size = format_size;
    textln!(
        o,
        "cache on {device} in front of {} ({}, {} blocks)",
        sb.origin_label,
        mode_name(sb.mode),
        size(bs)
    );
    if sb.failed {
        textln!(
            o,
            "  {}{}",
            failed_words(sb, s.dirty_blocks),
            if live {
                format!(" ({} I/O error(s) of the cache device)", s.io_errors)
            } else {
                String::new()
            }
        );
    } else if sb.detached {
        textln!(
            o,
            "  detached: the cache holds nothing now; the counters are those of before the detach"
        );
    } else if live && s.io_errors > 0 {
        textln!(
            o,
            "  {} read error(s) of the cache device, each served from the origin or failed \
             (the device is failed at {}; a write or flush error fails it at once)",
            s.io_errors,
            raidlab_cache::failure::IO_ERROR_LIMIT
        );
    }
    textln!(
        o,
        "  counters since create or the last reset, {from_text}{}",
        if reset { "; reset to zero now" } else { "" }
    );
    textln!(
        o,
        "     reads : {reads} request(s): {} hit ({:.1}%), {} partial hit, {} miss",
        s.read_hits,
        pct(s.read_hits, reads),
        s.read_partial_hits,
        s.read_misses
    );
    textln!(
        o,
        "    writes : {writes} request(s): {} hit ({:.1}%), {} partial hit, {} miss",
        s.write_hits,
        pct(s.write_hits, writes),
        s.write_partial_hits,
        s.write_misses
    );
    textln!(
        o,
        "  bypassed : sequential run over {}: {} request(s), {}; write-around mode: {} request(s), {}",
        if sb.sequential_cutoff == 0 {
            "the cutoff (off)".to_string()
        } else {
            size(sb.sequential_cutoff)
        },
        s.bypass_sequential_requests,
        size(s.bypass_sequential_bytes),
        s.bypass_mode_requests,
        size(s.bypass_mode_bytes)
    );
    textln!(
        o,
        "             no clean block to evict (all dirty): {} request(s), {}; past the origin's last whole block: {} request(s), {}",
        s.bypass_full_requests,
        size(s.bypass_full_bytes),
        s.bypass_tail_requests,
        size(s.bypass_tail_bytes)
    );
    textln!(
        o,
        "  promoted : {} block(s); {} read miss(es) not promoted (under the threshold of {})",
        s.promotions,
        s.not_promoted,
        sb.promote_threshold
    );
    textln!(
        o,
        "   evicted : {} block(s) to make room (dm-cache's demotions); {} invalidated by write-around writes",
        s.evictions,
        s.invalidations
    );
    textln!(
        o,
        "  cleaning : {} block(s), {} written back; {} dirty now, target {}% ({} blocks), {} over it; rate {}",
        s.cleaned_blocks,
        size(s.cleaned_bytes),
        s.dirty_blocks,
        sb.dirty_target_pct,
        target_blocks,
        over_target,
        if sb.clean_rate == 0 {
            "unlimited".to_string()
        } else {
            format!("{}/s", size(sb.clean_rate))
        }
    );
    textln!(
        o,
        " occupancy : {} of {} blocks ({:.1}%), {}; dirty {} block(s) ({:.1}%), {}",
        s.occupied_blocks,
        sb.layout.cache_blocks,
        pct(s.occupied_blocks, sb.layout.cache_blocks),
        size(s.occupied_blocks * bs),
        s.dirty_blocks,
        pct(s.dirty_blocks, sb.layout.cache_blocks),
        size(s.dirty_blocks * bs)
    );
    Ok(o)
}

/// The counters a superblock keeps, with the state from its table.
pub fn stats_of(sb: &Superblock, occupied: u64, dirty: u64) -> Stats {
    Stats {
        occupied_blocks: occupied,
        dirty_blocks: dirty,
        cache_blocks: sb.layout.cache_blocks,
        block_size: sb.block_size,
        ..Stats::from_counters(sb.counters)
    }
}

fn stats(a: CacheStatsArgs) -> Result<ExitCode> {
    if let Some(server) = control::find_cache(&a.cache)? {
        return cache_live::stats(&server, &a);
    }
    let cache = open_cache_device(&a.cache, a.reset)?;
    let (sb, t) = examine_table(&cache)?;
    let s = stats_of(&sb, t.occupied_blocks, t.dirty_blocks);
    let device = a.cache.display().to_string();
    let text = render_stats(&sb, &s, &device, false, a.reset, a.json)?;
    if a.reset {
        reset_counters(&cache)
            .with_context(|| format!("cannot reset the counters of the cache on {device}"))?;
    }
    out!("{text}");
    Ok(ExitCode::SUCCESS)
}

fn attach_cmd(a: CacheOriginArgs) -> Result<ExitCode> {
    let device = a.at.cache.display().to_string();
    if control::find_cache(&a.at.cache)?.is_some() {
        bail!(
            "the cache on {device} is served by a running `raidlab serve`; attach works offline \
             only: stop the server, then attach; nothing was changed"
        );
    }
    // Read-only first: every refusal below leaves both devices untouched.
    let sb = examine(&open_cache_device(&a.at.cache, false)?)
        .with_context(|| format!("nothing to attach on {device}"))?;
    let origin = open_origin(&a.at, false, a.force)?;
    if !sb.detached {
        check_binding(&sb, &a.at.cache, &origin)?;
        let text = format!(
            "raidlab: the cache on {device} is attached to {} already; nothing changed",
            origin.label
        );
        return say_attached(&a, &sb, text);
    }
    check_binding(&sb, &a.at.cache, &origin).map_err(|e| {
        e.context(format!(
            "the detached cache on {device} stays detached; nothing was changed"
        ))
    })?;
    let cache = open_cache_device(&a.at.cache, true)?;
    let sb = attach(&cache, &origin.volume, origin.id)
        .with_context(|| format!("cannot attach the cache on {device}"))?;
    let text = format!(
        "raidlab: attached the cache on {device} to {} again ({}, {} blocks of {}), empty: \
         nothing cached before the detach is trusted",
        origin.label,
        mode_name(sb.mode),
        sb.layout.cache_blocks,
        format_size(u64::from(sb.block_size))
    );
    say_attached(&a, &sb, text)
}

fn say_attached(a: &CacheOriginArgs, sb: &Superblock, text: String) -> Result<ExitCode> {
    if a.at.json {
        let j = detail_json(sb, 0, 0);
        outln!("{}", serde_json::to_string_pretty(&j)?);
    } else {
        outln!("{text}");
    }
    Ok(ExitCode::SUCCESS)
}
