//! How a cache is put in words and JSON: the mode and state names, `cache
//! detail`'s and `cache stats`'s output, offline (from the superblock and
//! table) and for a served cache (`cmd/cache_live.rs`, the status page).
//!
//! This module decides what a user reads about a cache; it must never open a
//! device, change a cache or judge its state (the figures it is given are
//! `raidlab-cache`'s).

use crate::cli::CacheMode;
use anyhow::Result;
use raidlab_cache::{Mode, OriginId, Stats, Superblock};
use raidlab_core::size::format_size;
use raidlab_raid::assemble::format_uuid;

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

pub(super) fn detail_json(sb: &Superblock, occupied: u64, dirty: u64) -> serde_json::Value {
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
