//! `raidlab serve --metrics ADDR`: the figures of a running server in the
//! Prometheus text format, for Prometheus to scrape.
//!
//! This module decides which figures are published and under which names:
//! node_exporter's md collector names (`node_md_*`, labelled `device`) where
//! the fact is the same as md's, `raidlab_*` for the rest (members' I/O,
//! the stripe cache, the cache tier, the NBD server). It only reads what the
//! engine, the cache and the NBD server already count; it must never change
//! an array, hold up a request for longer than copying counters takes (the
//! cache's figures are read under its lock, as `raidlab cache stats` reads
//! them), or publish a figure it cannot read (a family with nothing to say
//! is left out). The HTTP side (binding,
//! refusing remote addresses, serving `GET /metrics`) is in `http.rs`; the
//! format in `text.rs`.

mod http;
mod text;

pub use http::{bind, MetricsArgs};

use crate::cmd::cache_live::Cached;
use raidlab_core::Volume;
use raidlab_nbd::StatsReader;
use raidlab_raid::assemble::{ArrayState, MemberState};
use raidlab_raid::live::{Histogram, LiveArray};
use std::sync::Arc;
use text::{Exposition, Kind};

/// Everything a server can report on.
pub struct Sources {
    /// Served arrays by export name (an array under a cache too).
    pub arrays: Vec<(String, Arc<LiveArray>)>,
    pub caches: Vec<CacheSource>,
    pub nbd: Option<StatsReader>,
}

/// A served cache: its export, its device path and the running cache.
pub struct CacheSource {
    pub export: String,
    pub device: String,
    pub cached: Arc<Cached>,
}

/// Every family published: name, type and help, in the order written. The
/// README's "Metrics" section lists the same names (a test checks).
const FAMILIES: &[(&str, Kind, &str)] = &[
    // node_exporter's md collector: same names, labels and meaning.
    (
        "node_md_state",
        Kind::Gauge,
        "Indicates the state of md-device.",
    ),
    (
        "node_md_disks",
        Kind::Gauge,
        "Number of active/failed/spare disks of device.",
    ),
    (
        "node_md_disks_required",
        Kind::Gauge,
        "Total number of disks of device.",
    ),
    (
        "node_md_raid_disks",
        Kind::Gauge,
        "Number of raid disks on device.",
    ),
    (
        "node_md_degraded",
        Kind::Gauge,
        "Number of degraded disks on device.",
    ),
    (
        "node_md_blocks",
        Kind::Gauge,
        "Total number of blocks on device.",
    ),
    (
        "node_md_blocks_synced",
        Kind::Gauge,
        "Number of blocks synced on device.",
    ),
    // The array.
    (
        "raidlab_array_info",
        Kind::Gauge,
        "A served array: its level and UUID as labels (always 1).",
    ),
    (
        "raidlab_array_state",
        Kind::Gauge,
        "1 for the array's state (clean, degraded: members missing, failed: too many missing to serve), 0 for the others.",
    ),
    (
        "raidlab_sync_progress_ratio",
        Kind::Gauge,
        "Fraction of each member's data area done by the running rebuild, replace, check or repair (0 to 1).",
    ),
    // Members.
    (
        "raidlab_member_info",
        Kind::Gauge,
        "Each member the array knows, with its role and state (active, spare, faulty, stale, removed, rebuilding, replacing) as labels (always 1).",
    ),
    (
        "raidlab_member_reads_total",
        Kind::Counter,
        "Reads the member device served since the server started.",
    ),
    (
        "raidlab_member_writes_total",
        Kind::Counter,
        "Writes (FUA writes included) the member device completed since the server started.",
    ),
    (
        "raidlab_member_read_bytes_total",
        Kind::Counter,
        "Bytes read from the member device since the server started.",
    ),
    (
        "raidlab_member_write_bytes_total",
        Kind::Counter,
        "Bytes written to the member device since the server started.",
    ),
    (
        "raidlab_member_flushes_total",
        Kind::Counter,
        "Flushes of the member device since the server started.",
    ),
    (
        "raidlab_member_errors_total",
        Kind::Counter,
        "Calls to the member device (any kind) that returned an error since the server started.",
    ),
    (
        "raidlab_member_read_latency_seconds",
        Kind::Histogram,
        "Time a member device took to serve a read.",
    ),
    (
        "raidlab_member_write_latency_seconds",
        Kind::Histogram,
        "Time a member device took to complete a write.",
    ),
    // Stripe cache.
    (
        "raidlab_stripe_cache_stripes",
        Kind::Gauge,
        "Stripes the stripe cache may hold (its size; 0: off).",
    ),
    (
        "raidlab_stripe_cache_held_stripes",
        Kind::Gauge,
        "Stripes the stripe cache holds now.",
    ),
    (
        "raidlab_stripe_cache_writes_held_total",
        Kind::Counter,
        "Write requests (or pieces of them) held to be merged.",
    ),
    (
        "raidlab_stripe_cache_full_stripes_total",
        Kind::Counter,
        "Whole stripes written with no member reads.",
    ),
    (
        "raidlab_stripe_cache_partial_stripes_total",
        Kind::Counter,
        "Stripes written out while still partial.",
    ),
    (
        "raidlab_stripe_cache_writeouts_total",
        Kind::Counter,
        "Partial stripes written out, by reason: expired (hold time passed), evicted (cache full), flushed (a flush or FUA write).",
    ),
    (
        "raidlab_stripe_cache_reads_avoided",
        Kind::Gauge,
        "Member reads the held writes would have needed alone, less those their write-outs needed.",
    ),
    (
        "raidlab_kept_rows",
        Kind::Gauge,
        "Rows (a 4 KiB page of every member) kept in memory after a write, for a later write of the row to read instead of the members.",
    ),
    (
        "raidlab_kept_row_fills_total",
        Kind::Counter,
        "Member ranges writes took from the rows kept in memory instead of reading a member.",
    ),
    (
        "raidlab_stripe_cache_read_hits_total",
        Kind::Counter,
        "Array reads served from held data, wholly (full) or partly (partial).",
    ),
    (
        "raidlab_array_write_plans_total",
        Kind::Counter,
        "Write plans that read members, by method (read_modify_write, reconstruct_write).",
    ),
    // Cache tier.
    (
        "raidlab_cache_requests_total",
        Kind::Counter,
        "Requests to the cache by operation (read, write) and result (hit, partial_hit, miss), since the cache was created or its counters reset.",
    ),
    (
        "raidlab_cache_bypass_bytes_total",
        Kind::Counter,
        "Bytes sent to the origin around the cache, by reason (sequential, tail, mode, full), since the cache was created or its counters reset.",
    ),
    (
        "raidlab_cache_promotions_total",
        Kind::Counter,
        "Blocks copied into the cache, since the cache was created or its counters reset.",
    ),
    (
        "raidlab_cache_evictions_total",
        Kind::Counter,
        "Blocks removed to make room for others, since the cache was created or its counters reset.",
    ),
    (
        "raidlab_cache_cleaned_bytes_total",
        Kind::Counter,
        "Dirty bytes written back to the origin, since the cache was created or its counters reset.",
    ),
    (
        "raidlab_cache_dirty_bytes",
        Kind::Gauge,
        "Bytes in the cache not yet written back to the origin.",
    ),
    (
        "raidlab_cache_occupied_bytes",
        Kind::Gauge,
        "Bytes of the cache holding origin blocks.",
    ),
    (
        "raidlab_cache_size_bytes",
        Kind::Gauge,
        "Bytes the cache can hold.",
    ),
    (
        "raidlab_cache_device_failed",
        Kind::Gauge,
        "1 when the cache device failed (I/O errors) and requests pass it by, else 0.",
    ),
    (
        "raidlab_cache_device_errors_total",
        Kind::Counter,
        "I/O errors of the cache device since the server opened the cache.",
    ),
    // NBD.
    (
        "raidlab_nbd_connections_open",
        Kind::Gauge,
        "NBD connections in transmission on the export now.",
    ),
    (
        "raidlab_nbd_connections_total",
        Kind::Counter,
        "NBD connections that reached transmission on the export since the server started.",
    ),
    (
        "raidlab_nbd_requests_total",
        Kind::Counter,
        "NBD requests answered, by command, since the server started.",
    ),
    (
        "raidlab_nbd_request_errors_total",
        Kind::Counter,
        "NBD requests answered with an error, by command, since the server started.",
    ),
    (
        "raidlab_nbd_request_latency_seconds",
        Kind::Histogram,
        "Time from an NBD request read in full to its reply, by command.",
    ),
];

/// The text of `GET /metrics` now.
pub fn render(s: &Sources) -> String {
    let mut e = Exposition::default();
    for &(name, kind, help) in FAMILIES {
        e.declare(name, kind, help);
    }
    for (export, live) in &s.arrays {
        array(&mut e, export, live);
    }
    for c in &s.caches {
        cache(&mut e, c);
    }
    if let Some(nbd) = &s.nbd {
        for x in nbd.stats() {
            let ex = [("export", x.export.as_str())];
            e.sample("raidlab_nbd_connections_open", &ex, x.connections_open);
            e.sample("raidlab_nbd_connections_total", &ex, x.connections_total);
            for c in &x.commands {
                let l = [("export", x.export.as_str()), ("command", c.command)];
                e.sample("raidlab_nbd_requests_total", &l, c.requests);
                e.sample("raidlab_nbd_request_errors_total", &l, c.errors);
                let h = &c.latency;
                e.histogram(
                    "raidlab_nbd_request_latency_seconds",
                    &l,
                    &h.bounds_us,
                    &h.counts,
                    h.sum_us,
                );
            }
        }
    }
    e.render()
}

fn state_name(s: MemberState) -> String {
    // The names `detail --json` uses (the enum's serde names).
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{s:?}").to_lowercase())
}

fn array(e: &mut Exposition, export: &str, live: &LiveArray) {
    let dev = [("device", export)];
    let status = live.status();
    let size = live.array().size();
    struct Shape {
        level: String,
        uuid: String,
        raid_disks: usize,
        active: usize,
        failed: usize,
        spare: usize,
        degraded: usize,
        state: ArrayState,
        members: Vec<(String, Option<usize>, String)>,
    }
    let shape = live.with_assembly(|asm| {
        let count = |s: MemberState| asm.members.iter().filter(|m| m.state == s).count();
        Shape {
            level: asm.level_name().to_string(),
            uuid: raidlab_raid::assemble::format_uuid(&asm.uuid),
            raid_disks: asm.geometry.raid_disks,
            // md's [n/m]: slots with an up-to-date member in service.
            active: asm.slots.iter().filter(|s| s.is_some()).count(),
            failed: count(MemberState::Faulty),
            spare: count(MemberState::Spare),
            degraded: asm.missing().len(),
            state: asm.state(),
            members: asm
                .members
                .iter()
                .map(|m| (m.device.path.clone(), m.role, state_name(m.state)))
                .collect(),
        }
    });

    // md's sync_action as /proc/mdstat shows it: a rebuild or replace is
    // "recovery", a check "check", a repair "resync" (md runs it as a
    // requested resync); node_exporter sets exactly one state to 1.
    let rebuild = status.rebuild.as_ref().filter(|t| t.running);
    let scrub = status.scrub.as_ref().filter(|t| t.running);
    let running = rebuild.or(scrub);
    let md_state = match (rebuild, scrub) {
        (Some(_), _) => "recovering",
        (None, Some(t)) if t.kind == "check" => "check",
        (None, Some(_)) => "resync",
        (None, None) => "active",
    };
    for s in ["active", "inactive", "recovering", "resync", "check"] {
        e.sample(
            "node_md_state",
            &[("device", export), ("state", s)],
            u8::from(s == md_state),
        );
    }
    for (s, n) in [
        ("active", shape.active),
        ("failed", shape.failed),
        ("spare", shape.spare),
    ] {
        e.sample("node_md_disks", &[("device", export), ("state", s)], n);
    }
    e.sample("node_md_disks_required", &dev, shape.raid_disks);
    e.sample("node_md_raid_disks", &dev, shape.raid_disks);
    e.sample("node_md_degraded", &dev, shape.degraded);
    e.sample("node_md_blocks", &dev, size / 1024);
    // As /proc/mdstat's "(done/total)": KiB of each member's data area while
    // a sync runs (md counts per member), the array's size otherwise (as
    // node_exporter reads it when no sync line is there).
    let synced = running.map_or(size / 1024, |t| t.done / 1024);
    e.sample("node_md_blocks_synced", &dev, synced);

    e.sample(
        "raidlab_array_info",
        &[
            ("device", export),
            ("level", &shape.level),
            ("uuid", &shape.uuid),
        ],
        1,
    );
    for (s, v) in [
        ("clean", ArrayState::Clean),
        ("degraded", ArrayState::Degraded),
        ("failed", ArrayState::Failed),
    ] {
        e.sample(
            "raidlab_array_state",
            &[("device", export), ("state", s)],
            u8::from(shape.state == v),
        );
    }
    for t in [rebuild, scrub].into_iter().flatten() {
        let ratio = if t.total == 0 {
            1.0
        } else {
            t.done as f64 / t.total as f64
        };
        e.sample(
            "raidlab_sync_progress_ratio",
            &[("device", export), ("action", &t.kind)],
            ratio,
        );
    }

    for (path, role, state) in &shape.members {
        let role = role.map(|r| r.to_string()).unwrap_or_default();
        e.sample(
            "raidlab_member_info",
            &[
                ("array", export),
                ("member", path),
                ("role", &role),
                ("state", state),
            ],
            1,
        );
    }
    for m in live.member_io() {
        let role = m.role.map(|r| r.to_string()).unwrap_or_default();
        let l = [
            ("array", export),
            ("member", m.device.as_str()),
            ("role", role.as_str()),
        ];
        let io = &m.io;
        e.sample("raidlab_member_reads_total", &l, io.reads);
        e.sample("raidlab_member_writes_total", &l, io.writes);
        e.sample("raidlab_member_read_bytes_total", &l, io.read_bytes);
        e.sample("raidlab_member_write_bytes_total", &l, io.write_bytes);
        e.sample("raidlab_member_flushes_total", &l, io.flushes);
        e.sample("raidlab_member_errors_total", &l, io.errors);
        let h = |e: &mut Exposition, name: &str, h: &Histogram| {
            e.histogram(name, &l, &h.bounds_us, &h.counts, h.sum_us)
        };
        h(e, "raidlab_member_read_latency_seconds", &io.read_latency);
        h(e, "raidlab_member_write_latency_seconds", &io.write_latency);
    }

    if let Some(sc) = &status.stripe_cache {
        let st = &sc.stats;
        e.sample("raidlab_stripe_cache_stripes", &dev, sc.config.stripes);
        e.sample("raidlab_stripe_cache_held_stripes", &dev, st.held_now);
        e.sample(
            "raidlab_stripe_cache_writes_held_total",
            &dev,
            st.writes_held,
        );
        e.sample(
            "raidlab_stripe_cache_full_stripes_total",
            &dev,
            st.full_stripes,
        );
        e.sample(
            "raidlab_stripe_cache_partial_stripes_total",
            &dev,
            st.partial_stripes,
        );
        for (reason, n) in [
            ("expired", st.expired),
            ("evicted", st.evicted),
            ("flushed", st.flushed),
        ] {
            e.sample(
                "raidlab_stripe_cache_writeouts_total",
                &[("device", export), ("reason", reason)],
                n,
            );
        }
        e.sample("raidlab_stripe_cache_reads_avoided", &dev, st.reads_avoided);
        e.sample("raidlab_kept_rows", &dev, sc.kept_rows_now);
        e.sample("raidlab_kept_row_fills_total", &dev, sc.kept_row_fills);
        for (kind, n) in [("full", st.read_hits), ("partial", st.read_partial_hits)] {
            e.sample(
                "raidlab_stripe_cache_read_hits_total",
                &[("device", export), ("kind", kind)],
                n,
            );
        }
        for (method, n) in [
            ("read_modify_write", sc.read_modify_write_plans),
            ("reconstruct_write", sc.reconstruct_write_plans),
        ] {
            e.sample(
                "raidlab_array_write_plans_total",
                &[("device", export), ("method", method)],
                n,
            );
        }
    }
}

fn cache(e: &mut Exposition, c: &CacheSource) {
    let s = c.cached.stats();
    let l = [("device", c.export.as_str()), ("cache", c.device.as_str())];
    for (op, result, n) in [
        ("read", "hit", s.read_hits),
        ("read", "partial_hit", s.read_partial_hits),
        ("read", "miss", s.read_misses),
        ("write", "hit", s.write_hits),
        ("write", "partial_hit", s.write_partial_hits),
        ("write", "miss", s.write_misses),
    ] {
        e.sample(
            "raidlab_cache_requests_total",
            &[l[0], l[1], ("op", op), ("result", result)],
            n,
        );
    }
    for (reason, n) in [
        ("sequential", s.bypass_sequential_bytes),
        ("tail", s.bypass_tail_bytes),
        ("mode", s.bypass_mode_bytes),
        ("full", s.bypass_full_bytes),
    ] {
        e.sample(
            "raidlab_cache_bypass_bytes_total",
            &[l[0], l[1], ("reason", reason)],
            n,
        );
    }
    e.sample("raidlab_cache_promotions_total", &l, s.promotions);
    e.sample("raidlab_cache_evictions_total", &l, s.evictions);
    e.sample("raidlab_cache_cleaned_bytes_total", &l, s.cleaned_bytes);
    e.sample("raidlab_cache_dirty_bytes", &l, s.dirty_bytes());
    e.sample("raidlab_cache_occupied_bytes", &l, s.occupied_bytes());
    e.sample(
        "raidlab_cache_size_bytes",
        &l,
        s.cache_blocks * u64::from(s.block_size),
    );
    e.sample("raidlab_cache_device_failed", &l, u64::from(s.failed));
    e.sample("raidlab_cache_device_errors_total", &l, s.io_errors);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readme_lists_every_family() {
        let readme = include_str!("../../../../README.md");
        let section = readme
            .split("\n## Metrics")
            .nth(1)
            .expect("README.md has a \"## Metrics\" section");
        let section = section.split("\n## ").next().unwrap_or(section);
        for (name, _, _) in FAMILIES {
            assert!(
                section.contains(&format!("`{name}`")),
                "README.md's Metrics section does not list `{name}`"
            );
        }
    }

    #[test]
    fn names_follow_the_conventions() {
        for (name, kind, help) in FAMILIES {
            assert!(!help.is_empty());
            assert_eq!(
                name.ends_with("_total"),
                *kind == Kind::Counter,
                "{name}: counters and only counters end in _total"
            );
        }
    }
}
