//! `raidlab detail --watch`: the live figures of a served array, redrawn in
//! the terminal every interval (as `watch cat /proc/mdstat` users expect):
//! state, members, rebuild/check progress with rate and ETA, and each
//! member's throughput, IOPS and latency when the server counts them.
//!
//! It asks the server the same `detail` the plain verb asks, once per
//! interval, and words the answer; rates are differences of the server's
//! counters between two answers. It must never change the array: it sends
//! nothing but `detail` requests.

use crate::control::{self, Command};
use anyhow::{Context, Result};
use raidlab_core::size::format_size_approx;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// One member's counters as the server reports them in `detail --json`
/// (`served.member_io`), when it does.
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    reads: u64,
    writes: u64,
    read_bytes: u64,
    write_bytes: u64,
    errors: u64,
    read_us: u64,
    write_us: u64,
}

/// One member's counters from its entry in `served.member_io`.
fn counters_of(m: &Value) -> Counters {
    let n = |x: &Value, k: &str| x.get(k).and_then(Value::as_u64).unwrap_or(0);
    Counters {
        reads: n(&m["io"], "reads"),
        writes: n(&m["io"], "writes"),
        read_bytes: n(&m["io"], "read_bytes"),
        write_bytes: n(&m["io"], "write_bytes"),
        errors: n(&m["io"], "errors"),
        read_us: n(&m["io"]["read_latency"], "sum_us"),
        write_us: n(&m["io"]["write_latency"], "sum_us"),
    }
}

/// The entries of `served.member_io`, by role (members without one last).
fn member_io(v: &Value) -> Vec<&Value> {
    let mut ms: Vec<&Value> = v
        .pointer("/served/member_io")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    ms.sort_by_key(|m| (m["role"].is_null(), m["role"].as_u64()));
    ms
}

fn counters(v: &Value) -> BTreeMap<String, Counters> {
    member_io(v)
        .into_iter()
        .filter_map(|m| Some((m.get("device")?.as_str()?.to_string(), counters_of(m))))
        .collect()
}

/// The plain `detail` of a served array: each member's I/O since the server
/// started, from one answer (`v` as `detail --json` gives it), in the words
/// and units of the `--watch` table. One answer has no interval, so it has
/// no rates: it says so and points to `--watch`. Empty when the server
/// counts nothing.
pub fn render_totals(v: &Value) -> String {
    let ms = member_io(v);
    if ms.is_empty() {
        return String::new();
    }
    let mut o = String::from(
        "\nMember I/O since the server started (throughput and IOPS need an interval: \
         raidlab detail --watch):\n",
    );
    o += "   Role  State       Device                             Reads    Writes       Read    Written   r lat   w lat  errors\n";
    for m in ms {
        let c = counters_of(m);
        let role = m["role"].as_u64().map_or("-".into(), |r| r.to_string());
        o += &format!(
            "   {role:>4}  {:<10}  {:<30}  {:>8}  {:>8}  {:>9}  {:>9}  {:>6}  {:>6}  {:>6}\n",
            s(m, "state"),
            s(m, "device"),
            c.reads,
            c.writes,
            format_size_approx(c.read_bytes),
            format_size_approx(c.write_bytes),
            lat(0, c.read_us, 0, c.reads),
            lat(0, c.write_us, 0, c.writes),
            c.errors
        );
    }
    o
}

pub fn run(server: &Path, members: &[PathBuf], interval: f64) -> Result<ExitCode> {
    let tty = std::io::stdout().is_terminal();
    let mut before: Option<(Instant, BTreeMap<String, Counters>)> = None;
    loop {
        let (text, _) = control::call(server, members, Command::Detail { json: true }, &mut |_| {})
            .context("the server stopped answering (is it still serving the array?)")?;
        let v: Value = serde_json::from_str(&text).context("the server's detail is not JSON")?;
        let now = (Instant::now(), counters(&v));
        let block = render(&v, before.as_ref(), &now, interval);
        let mut out = std::io::stdout().lock();
        if tty {
            // Home and clear, then the block: redrawn in place.
            write!(out, "\x1b[H\x1b[2J{block}")?;
        } else {
            writeln!(out, "{block}")?;
        }
        out.flush()?;
        before = Some(now);
        std::thread::sleep(Duration::from_secs_f64(interval));
    }
}

fn s(v: &Value, k: &str) -> String {
    match v.get(k) {
        Some(Value::String(x)) => x.clone(),
        Some(Value::Null) | None => "-".into(),
        Some(x) => x.to_string(),
    }
}

fn per_sec(a: u64, b: u64, secs: f64) -> f64 {
    b.saturating_sub(a) as f64 / secs.max(1e-3)
}

fn lat(sum0: u64, sum1: u64, n0: u64, n1: u64) -> String {
    let n = n1.saturating_sub(n0);
    if n == 0 {
        return "-".into();
    }
    let us = sum1.saturating_sub(sum0) as f64 / n as f64;
    if us >= 1000.0 {
        format!("{:.1}ms", us / 1000.0)
    } else {
        format!("{us:.0}us")
    }
}

fn eta(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return "-".into();
    }
    let s = secs.round() as u64;
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, x) => format!("{x}s"),
        (0, m, x) => format!("{m}m{x:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

/// One screenful: what the page shows for this array, as text.
fn render(
    v: &Value,
    before: Option<&(Instant, BTreeMap<String, Counters>)>,
    now: &(Instant, BTreeMap<String, Counters>),
    interval: f64,
) -> String {
    let mut o = String::new();
    let served = v.get("served").cloned().unwrap_or(Value::Null);
    o += &format!(
        "raidlab detail --watch (every {interval}s, Ctrl-C to stop)    export {} (pid {})\n\n",
        s(&served, "export"),
        s(&served, "pid")
    );
    o += &format!(
        "{} {} {}, {} ({} per member), chunk {}\n",
        s(v, "name"),
        s(v, "level"),
        s(v, "layout"),
        format_size_approx(v["array_size_bytes"].as_u64().unwrap_or(0)),
        format_size_approx(v["member_data_bytes"].as_u64().unwrap_or(0)),
        format_size_approx(v["chunk_bytes"].as_u64().unwrap_or(0)),
    );
    o += &format!("State : {}    Events : {}\n", s(v, "state"), s(v, "events"));
    for key in ["rebuild", "scrub"] {
        let Some(t) = served.get(key).filter(|t| !t.is_null()) else {
            continue;
        };
        let (done, total) = (
            t["done"].as_u64().unwrap_or(0),
            t["total"].as_u64().unwrap_or(0),
        );
        let pct = if total == 0 {
            100.0
        } else {
            done as f64 * 100.0 / total as f64
        };
        let rate = t["bytes_per_sec"].as_f64().unwrap_or(0.0);
        let running = t["running"].as_bool().unwrap_or(false);
        // md's mdstat bar: 20 cells.
        let cells = ((pct / 5.0) as usize).min(20);
        let bar = format!("[{}>{}]", "=".repeat(cells), ".".repeat(20 - cells));
        let what = match t["role"].as_u64() {
            Some(r) => format!("{} of role {r} onto {}", s(t, "kind"), s(t, "device")),
            None => s(t, "kind"),
        };
        if running {
            o += &format!(
                "{what}: {bar} {pct:.1}% ({} of {}) {}/s, ETA {}\n",
                format_size_approx(done),
                format_size_approx(total),
                format_size_approx(rate as u64),
                eta(total.saturating_sub(done) as f64 / rate)
            );
        } else if let Some(e) = t["error"].as_str() {
            o += &format!("{what}: stopped at {pct:.1}%: {e}\n");
        } else {
            o += &format!("{what}: finished\n");
        }
    }
    let io = !now.1.is_empty();
    o += "\n   Role  State       Device";
    if io {
        o +=
            "                          Read/s     Write/s    r IOPS  w IOPS  r lat   w lat  errors";
    }
    o += "\n";
    let mut ms: Vec<&Value> = v["members"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    ms.sort_by_key(|m| (m["role"].is_null(), m["role"].as_u64()));
    for m in ms {
        let dev = s(m, "device");
        let role = m["role"].as_u64().map_or("-".into(), |r| r.to_string());
        o += &format!("   {role:>4}  {:<10}  {dev:<30}", s(m, "state"));
        if io {
            let c = now.1.get(&dev).copied().unwrap_or_default();
            match before.and_then(|(t0, b)| b.get(&dev).map(|b| (*t0, *b))) {
                Some((t0, b)) => {
                    let secs = now.0.duration_since(t0).as_secs_f64();
                    o += &format!(
                        "  {:>9}  {:>9}  {:>6.0}  {:>6.0}  {:>6}  {:>6}  {:>6}",
                        format_size_approx(per_sec(b.read_bytes, c.read_bytes, secs) as u64),
                        format_size_approx(per_sec(b.write_bytes, c.write_bytes, secs) as u64),
                        per_sec(b.reads, c.reads, secs),
                        per_sec(b.writes, c.writes, secs),
                        lat(b.read_us, c.read_us, b.reads, c.reads),
                        lat(b.write_us, c.write_us, b.writes, c.writes),
                        c.errors
                    );
                }
                None => {
                    o += &format!(
                        "  {:>9}  {:>9}  {:>6}  {:>6}  {:>6}  {:>6}  {:>6}",
                        "-", "-", "-", "-", "-", "-", c.errors
                    )
                }
            }
        }
        o += "\n";
    }
    for r in v["missing_roles"].as_array().into_iter().flatten() {
        o += &format!("   {r:>4}  missing\n");
    }
    if !io {
        o += "\n(per-member throughput, IOPS and latency: not counted by this server)\n";
    }
    o
}
