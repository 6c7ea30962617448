//! What the status page shows, as one JSON document (`/api/status`): for
//! each served array what `raidlab detail --json` of it says (the same
//! `render_detail`, served part included), for each served cache what
//! `raidlab cache stats --json` and `cache detail --json` say, the recent
//! events, and per-second series (the last [`HISTORY`] seconds) of each
//! member's throughput, IOPS and mean latency, of each cache's requests and
//! of each array's rebuild or check speed.
//!
//! The series are kept here, sampled once a second by the server's own
//! thread, so a page opened late still has its charts' history and every
//! open page draws the same figures. Rates come from the differences of
//! monotonic counters between two samples divided by the time between them.
//! This module only reads: it must never change an array or a cache.

use super::events::Events;
use crate::cmd::cache::{render_detail as cache_detail, render_stats};
use crate::cmd::cache_live::ManagedCache;
use crate::cmd::info::{render_detail, ServedInfo};
use crate::cmd::live::Managed;
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Seconds of history kept per chart.
pub const HISTORY: usize = 120;

/// Monotonic counters of one member, as sampled.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counters {
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub errors: u64,
    /// Sums of the latencies of the reads and writes counted, microseconds.
    pub read_us: u64,
    pub write_us: u64,
}

/// One member's figures over one second.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    pub read_bps: f64,
    pub write_bps: f64,
    pub read_iops: f64,
    pub write_iops: f64,
    /// Mean latency of the operations that completed in the interval; None
    /// when none did.
    pub read_lat_us: Option<f64>,
    pub write_lat_us: Option<f64>,
}

impl Rates {
    /// The rates between two samples `secs` apart. A counter that went back
    /// (a member replaced by another of the same path) counts as zero.
    pub fn between(a: &Counters, b: &Counters, secs: f64) -> Rates {
        let d = |x: u64, y: u64| y.saturating_sub(x) as f64;
        let secs = secs.max(1e-3);
        let (r, w) = (d(a.reads, b.reads), d(a.writes, b.writes));
        Rates {
            read_bps: d(a.read_bytes, b.read_bytes) / secs,
            write_bps: d(a.write_bytes, b.write_bytes) / secs,
            read_iops: r / secs,
            write_iops: w / secs,
            read_lat_us: (r > 0.0).then(|| d(a.read_us, b.read_us) / r),
            write_lat_us: (w > 0.0).then(|| d(a.write_us, b.write_us) / w),
        }
    }
}

/// One second of one array: each member's rates, by device path, and the
/// speed of its rebuild or check over that second.
#[derive(Debug, Clone, Default)]
struct ArrayPoint {
    unix_ms: u64,
    members: BTreeMap<String, Rates>,
    recovery_bps: Option<f64>,
}

/// One second of one cache: requests per second and its fill.
#[derive(Debug, Clone, Default)]
struct CachePoint {
    unix_ms: u64,
    read_rps: f64,
    write_rps: f64,
    read_hit_pct: Option<f64>,
    dirty_blocks: u64,
    occupied_blocks: u64,
}

/// The last sample of an array: when, each member's counters, and the
/// running rebuild's or check's position.
type LastSample = (Instant, BTreeMap<String, Counters>, Option<(String, u64)>);

#[derive(Debug, Default)]
struct ArraySeries {
    last: Option<LastSample>,
    totals: BTreeMap<String, Counters>,
    points: VecDeque<ArrayPoint>,
}

#[derive(Debug, Default)]
struct CacheSeries {
    last: Option<(Instant, u64, u64, u64)>,
    points: VecDeque<CachePoint>,
}

fn push<T>(q: &mut VecDeque<T>, p: T) {
    if q.len() == HISTORY {
        q.pop_front();
    }
    q.push_back(p);
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Everything the page is made from.
pub struct Page {
    pub arrays: Arc<Vec<Managed>>,
    pub caches: Arc<Vec<ManagedCache>>,
    pub events: Arc<Events>,
    /// Whether management actions are open (a token was given).
    pub actions: bool,
    /// The series of each array and cache, in the order of `arrays` and
    /// `caches`.
    arrays_series: Mutex<Vec<ArraySeries>>,
    caches_series: Mutex<Vec<CacheSeries>>,
}

impl std::fmt::Debug for Page {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Page")
            .field("arrays", &self.arrays.len())
            .field("caches", &self.caches.len())
            .field("actions", &self.actions)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The running rebuild's or check's position: (kind and device, bytes done).
fn recovery_position(m: &Managed) -> Option<(String, u64)> {
    let st = m.live.status();
    st.rebuild
        .iter()
        .chain(&st.scrub)
        .find(|t| t.running)
        .map(|t| (format!("{} {}", t.kind, t.device), t.done))
}

impl Page {
    pub fn new(
        arrays: Arc<Vec<Managed>>,
        caches: Arc<Vec<ManagedCache>>,
        events: Arc<Events>,
        actions: bool,
    ) -> Page {
        let a = (0..arrays.len()).map(|_| ArraySeries::default()).collect();
        let c = (0..caches.len()).map(|_| CacheSeries::default()).collect();
        Page {
            arrays,
            caches,
            events,
            actions,
            arrays_series: Mutex::new(a),
            caches_series: Mutex::new(c),
        }
    }

    /// Take one sample of every array and cache (the sampler thread calls
    /// this once a second).
    pub fn sample(&self) {
        let t = Instant::now();
        let ms = now_ms();
        let mut series = lock(&self.arrays_series);
        for (m, s) in self.arrays.iter().zip(series.iter_mut()) {
            let now = super::member_counters(m);
            let rec = recovery_position(m);
            if let Some((t0, before, rec0)) = &s.last {
                let secs = t.duration_since(*t0).as_secs_f64();
                let members = now
                    .iter()
                    .map(|(dev, c)| {
                        let r = before
                            .get(dev)
                            .map_or_else(Rates::default, |b| Rates::between(b, c, secs));
                        (dev.clone(), r)
                    })
                    .collect();
                // Only when the same run was running at both samples.
                let recovery_bps = match (rec0, &rec) {
                    (Some((k0, d0)), Some((k1, d1))) if k0 == k1 => {
                        Some(d1.saturating_sub(*d0) as f64 / secs.max(1e-3))
                    }
                    _ => None,
                };
                push(
                    &mut s.points,
                    ArrayPoint {
                        unix_ms: ms,
                        members,
                        recovery_bps,
                    },
                );
            }
            s.totals = now.clone();
            s.last = Some((t, now, rec));
        }
        drop(series);
        let mut series = lock(&self.caches_series);
        for (c, s) in self.caches.iter().zip(series.iter_mut()) {
            let st = c.cached.stats();
            let reads = st.read_hits + st.read_partial_hits + st.read_misses;
            let writes = st.write_hits + st.write_partial_hits + st.write_misses;
            if let Some((t0, r0, w0, h0)) = s.last {
                let secs = t.duration_since(t0).as_secs_f64().max(1e-3);
                let dr = reads.saturating_sub(r0);
                push(
                    &mut s.points,
                    CachePoint {
                        unix_ms: ms,
                        read_rps: dr as f64 / secs,
                        write_rps: writes.saturating_sub(w0) as f64 / secs,
                        read_hit_pct: (dr > 0)
                            .then(|| st.read_hits.saturating_sub(h0) as f64 * 100.0 / dr as f64),
                        dirty_blocks: st.dirty_blocks,
                        occupied_blocks: st.occupied_blocks,
                    },
                );
            }
            s.last = Some((t, reads, writes, st.read_hits));
        }
    }

    /// The whole document.
    pub fn json(&self) -> Value {
        let series = lock(&self.arrays_series);
        let arrays: Vec<Value> = self
            .arrays
            .iter()
            .zip(series.iter())
            .map(|(m, s)| array_json(m, s))
            .collect();
        drop(series);
        let series = lock(&self.caches_series);
        let caches: Vec<Value> = self
            .caches
            .iter()
            .zip(series.iter())
            .map(|(c, s)| cache_json(c, s))
            .collect();
        drop(series);
        json!({
            "unix_ms": now_ms(),
            "pid": std::process::id(),
            "actions": self.actions,
            "history_seconds": HISTORY,
            "arrays": arrays,
            "caches": caches,
            "events": self.events.recent(),
        })
    }
}

fn array_json(m: &Managed, s: &ArraySeries) -> Value {
    let served = ServedInfo {
        pid: std::process::id(),
        export: m.export.clone(),
        status: m.live.status(),
        member_io: m.live.member_io(),
        io_modes: m.io_modes.lock().unwrap_or_else(|e| e.into_inner()).clone(),
    };
    let detail = m
        .live
        .with_assembly(|asm| render_detail(asm, Some(served), true))
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str::<Value>(&t).map_err(|e| e.to_string()));
    let t: Vec<u64> = s.points.iter().map(|p| p.unix_ms).collect();
    let recovery: Vec<Option<f64>> = s.points.iter().map(|p| p.recovery_bps).collect();
    // Column per figure, one value per second, null where the member was
    // not there (a spare that joined later).
    let mut members = Vec::new();
    for (dev, total) in &s.totals {
        let col = |f: &dyn Fn(&Rates) -> Option<f64>| -> Vec<Option<f64>> {
            s.points
                .iter()
                .map(|p| p.members.get(dev).and_then(f))
                .collect()
        };
        members.push(json!({
            "device": dev,
            "reads": total.reads,
            "writes": total.writes,
            "read_bytes": total.read_bytes,
            "write_bytes": total.write_bytes,
            "errors": total.errors,
            "read_bps": col(&|r| Some(r.read_bps)),
            "write_bps": col(&|r| Some(r.write_bps)),
            "read_iops": col(&|r| Some(r.read_iops)),
            "write_iops": col(&|r| Some(r.write_iops)),
            "read_lat_us": col(&|r| r.read_lat_us),
            "write_lat_us": col(&|r| r.write_lat_us),
        }));
    }
    json!({
        "export": m.export,
        "writable": m.writable,
        "detail": detail.as_ref().ok(),
        "error": detail.as_ref().err(),
        "io": { "t": t, "recovery_bps": recovery, "members": members },
    })
}

fn cache_json(c: &ManagedCache, s: &CacheSeries) -> Value {
    let sb = c.cached.superblock();
    let st = c.cached.stats();
    let parse = |r: anyhow::Result<String>| {
        r.ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .unwrap_or(Value::Null)
    };
    let stats = parse(render_stats(&sb, &st, &c.device, true, false, true));
    let detail = parse(cache_detail(
        &sb,
        st.occupied_blocks,
        st.dirty_blocks,
        &c.device,
        Some(&c.export),
        true,
    ));
    let p = &s.points;
    json!({
        "export": c.export,
        "device": c.device,
        "origin": c.origin_label,
        "detail": detail,
        "stats": stats,
        "series": {
            "t": p.iter().map(|x| x.unix_ms).collect::<Vec<_>>(),
            "read_rps": p.iter().map(|x| x.read_rps).collect::<Vec<_>>(),
            "write_rps": p.iter().map(|x| x.write_rps).collect::<Vec<_>>(),
            "read_hit_pct": p.iter().map(|x| x.read_hit_pct).collect::<Vec<_>>(),
            "dirty_blocks": p.iter().map(|x| x.dirty_blocks).collect::<Vec<_>>(),
            "occupied_blocks": p.iter().map(|x| x.occupied_blocks).collect::<Vec<_>>(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_over_a_second_and_a_half() {
        let a = Counters {
            reads: 10,
            writes: 5,
            read_bytes: 4096,
            write_bytes: 0,
            errors: 0,
            read_us: 1000,
            write_us: 500,
        };
        let b = Counters {
            reads: 13,
            writes: 5,
            read_bytes: 4096 + 3 * 4096,
            write_bytes: 0,
            errors: 0,
            read_us: 1000 + 3 * 200,
            write_us: 500,
        };
        let r = Rates::between(&a, &b, 1.5);
        assert_eq!(r.read_iops, 2.0);
        assert_eq!(r.read_bps, 8192.0);
        assert_eq!(r.read_lat_us, Some(200.0));
        assert_eq!(r.write_iops, 0.0);
        assert_eq!(r.write_lat_us, None);
        // A counter that went back (another device at that path) is no
        // negative rate.
        assert_eq!(Rates::between(&b, &a, 1.0).read_bps, 0.0);
    }
}
