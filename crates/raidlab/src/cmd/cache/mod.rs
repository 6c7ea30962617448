//! `raidlab cache`: the cache verbs, offline on the devices. Opens the cache
//! device and the origin (an array by its members, or a plain file or device),
//! hands them to `raidlab-cache` and prints what it did. Every cache decision
//! lives in `raidlab-cache`; this module only wires and words.
//!
//! - this file: the verbs themselves, what each does in which order, and
//!   which go to a running server instead (`cmd/cache_live.rs`);
//! - [`wiring`]: opening and closing the origin and the cache device;
//! - [`render`]: what `cache detail` and `cache stats` print.
//!
//! It must never decide anything about the cache itself (`raidlab-cache`'s),
//! open or close a device other than through [`wiring`], or word a cache's
//! detail or stats other than through [`render`].

pub mod render;
mod wiring;

pub use render::{mode_name, render_detail, render_stats};

use crate::cli::{
    CacheCommand, CacheCreateArgs, CacheDetailArgs, CacheOriginArgs, CacheSetArgs, CacheStatsArgs,
};
use crate::cmd::cache_live;
use crate::control;
use anyhow::{bail, Context, Result};
use raidlab_cache::{
    attach, create, examine, examine_table, reset_counters, Config, Mode, Policy, Superblock,
};
use raidlab_core::size::format_size;
use raidlab_core::Volume;
use render::{detail_json, mode_from_cli, stats_of};
use std::process::ExitCode;
use wiring::{
    check_binding, close_origin, open_cache_device, open_cached, open_cached_or_fail, open_origin,
};

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
        mode: mode_from_cli(a.mode),
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
fn flush(a: CacheOriginArgs) -> Result<ExitCode> {
    if let Some(server) = control::find_cache(&a.at.cache)? {
        return cache_live::flush(&server, &a);
    }
    let (stack, origin) = open_cached_or_fail(&a.at, a.force)?;
    // No background cleaner in a verb: its clean stop is the cache's own.
    let v = stack.cached();
    let label = origin.label.clone();
    let bs = u64::from(v.superblock().block_size);
    let done = v.flush_dirty(|done, total| {
        if total > 0 && !a.at.json {
            eprint!("\rraidlab: writing back {done}/{total} block(s)");
        }
    })?;
    v.shutdown()?;
    drop(stack);
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
    let (stack, origin) = match open_cached(&a.at, a.force)? {
        Ok(x) => x,
        Err((e, origin)) => {
            let r = detach_unopened(&a, e);
            close_origin(origin)?;
            return r;
        }
    };
    let label = origin.label.clone();
    let v = stack.cached();
    let done = v.flush_dirty(|_, _| {})?;
    v.detach()?;
    drop(stack);
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
    let (stack, origin) = open_cached_or_fail(&a.at, a.force)?;
    // No background cleaner in a verb: its clean stop is the cache's own.
    let v = stack.cached();
    let sb = v.superblock();
    v.set_tunables(
        a.sequential_cutoff.unwrap_or(sb.sequential_cutoff),
        a.dirty_target.unwrap_or(sb.dirty_target_pct),
        a.clean_rate.unwrap_or(sb.clean_rate),
        a.promote_threshold.unwrap_or(sb.promote_threshold),
    )?;
    if let Some(m) = a.mode {
        v.set_mode(mode_from_cli(m))?;
    }
    v.shutdown()?;
    let sb = v.superblock();
    let stats = v.stats();
    drop(stack);
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
