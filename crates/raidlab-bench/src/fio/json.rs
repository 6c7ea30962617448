//! fio's JSON output shape for raidlab's figures: which sections and keys fio
//! writes and what raidlab puts in them. It must never invent a figure raidlab
//! did not measure.

use super::CloneResult;
use crate::engine::DirStats;
use crate::schema::BenchReport;
use serde_json::{json, Value};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// fio's percentiles in its JSON key format.
const PERCENTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

/// fio's statistics object (`clat_ns`, `lat_ns`...) for a histogram of
/// nanoseconds, with json+'s `bins` (value in ns -> count), which fio's own
/// `fio_jsonplus_clat2csv` and fio-plot read.
fn lat_json(d: &DirStats) -> Value {
    if d.ios == 0 {
        return json!({"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0});
    }
    let mut pct = serde_json::Map::new();
    for p in PERCENTILES {
        pct.insert(
            format!("{p:.6}"),
            json!(d.hist.value_at_quantile(p / 100.0)),
        );
    }
    let mut bins = serde_json::Map::new();
    for v in d.hist.iter_recorded() {
        // The bucket's highest equivalent value, as fio names a bin by the
        // top of its range.
        let ns = d.hist.highest_equivalent(v.value_iterated_to());
        bins.insert(ns.to_string(), json!(v.count_at_value()));
    }
    json!({
        "min": d.hist.min(),
        "max": d.hist.max(),
        "mean": d.hist.mean(),
        "stddev": d.hist.stdev(),
        "N": d.ios,
        "percentile": pct,
        "bins": bins,
    })
}

/// One direction's section (`read`, `write`, `trim`) with every key fio writes
/// that raidlab measures. Latency: raidlab times each request from before it is
/// submitted to its completion, which is fio's `lat_ns` (total latency); fio's
/// `clat_ns` (completion after submission) carries the same figures, the
/// submission itself being part of them, and `slat_ns` is empty (N = 0) because
/// the submission is not timed apart. Bandwidth (KiB/s) and IOPS samples are
/// taken per 500 ms window, fio's default `bw_avg_time`/`iops_avg_time`, and
/// summarised as fio does (`bw_min`, `bw_max`, `bw_mean`, `bw_dev`,
/// `bw_samples`, `iops_*`); `bw_agg` is this job's share of its group's
/// bandwidth in percent.
fn dir_json(d: &DirStats, elapsed: Duration, group_bw: f64) -> Value {
    let ms = elapsed.as_millis() as u64;
    let bw_bytes = rate(d, elapsed);
    let lat = lat_json(d);
    let (bw_samples, iops_samples) = d.sampled_rates(elapsed);
    let kib: Vec<f64> = bw_samples.iter().map(|b| b / 1024.0).collect();
    let (bw_min, bw_max, bw_mean, bw_dev) = summary(&kib);
    let (iops_min, iops_max, iops_mean, iops_dev) = summary(&iops_samples);
    json!({
        "io_bytes": d.bytes,
        "io_kbytes": d.bytes / 1024,
        "bw_bytes": bw_bytes.round() as u64,
        "bw": (bw_bytes / 1024.0).round() as u64,
        "iops": d.iops(elapsed),
        "runtime": if d.ios == 0 { 0 } else { ms },
        "total_ios": d.ios,
        "short_ios": 0,
        "drop_ios": 0,
        "slat_ns": {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0},
        "clat_ns": lat.clone(),
        "lat_ns": lat,
        "bw_min": bw_min.round() as u64,
        "bw_max": bw_max.round() as u64,
        "bw_agg": if group_bw > 0.0 { bw_bytes / group_bw * 100.0 } else { 0.0 },
        "bw_mean": bw_mean,
        "bw_dev": bw_dev,
        "bw_samples": kib.len(),
        "iops_min": iops_min.round() as u64,
        "iops_max": iops_max.round() as u64,
        "iops_mean": iops_mean,
        "iops_stddev": iops_dev,
        "iops_samples": iops_samples.len(),
    })
}

/// min, max, mean and sample standard deviation (n - 1, as fio's), all 0
/// without samples.
fn summary(v: &[f64]) -> (f64, f64, f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0, 0.0, 0.0);
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = if v.len() > 1 {
        v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (min, max, mean, var.sqrt())
}

/// Bytes per second of one direction over a run.
fn rate(d: &DirStats, elapsed: Duration) -> f64 {
    if d.ios == 0 {
        0.0
    } else {
        d.bytes as f64 / elapsed.as_secs_f64().max(1e-9)
    }
}

/// fio's JSON output (`--output-format=json`) for the fields raidlab fills.
pub fn fio_json(results: &[CloneResult]) -> Value {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // Each group's bandwidth per direction, for `bw_agg`.
    let group_bw = |group: usize, read: bool| -> f64 {
        results
            .iter()
            .filter(|r| r.group == group)
            .map(|r| rate(if read { &r.read } else { &r.write }, r.elapsed))
            .sum()
    };
    let jobs: Vec<Value> = results
        .iter()
        .map(|r| {
            let elapsed = r.elapsed.as_secs_f64().max(1e-9);
            let cpu_pct = |t: Duration| t.as_secs_f64() / elapsed * 100.0;
            json!({
                "jobname": r.job,
                "groupid": r.group,
                "error": 0,
                "job options": r.options,
                "read": dir_json(&r.read, r.elapsed, group_bw(r.group, true)),
                "write": dir_json(&r.write, r.elapsed, group_bw(r.group, false)),
                // raidlab's jobs do not trim or sync: fio writes these
                // sections for every job, and its tools index them.
                "trim": dir_json(&DirStats::default(), r.elapsed, 0.0),
                "sync": {"total_ios": 0, "lat_ns": {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0}},
                "job_runtime": r.elapsed.as_millis() as u64,
                // getrusage over the job's group (see CloneResult::cpu), in
                // percent of the job's run time as fio gives them.
                "usr_cpu": cpu_pct(r.cpu.user),
                "sys_cpu": cpu_pct(r.cpu.system),
                "ctx": r.cpu.context_switches,
                "majf": r.cpu.major_faults,
                "minf": r.cpu.minor_faults,
                "raidlab": {"clone": r.clone, "target": r.target, "engine": r.engine, "cpu": "the process's getrusage over the job's group"},
            })
        })
        .collect();
    json!({
        "fio version": format!("raidlab-{}", env!("CARGO_PKG_VERSION")),
        "timestamp": now,
        "time": crate::schema::rfc3339_utc(SystemTime::now()),
        "jobs": jobs,
    })
}

/// The raidlab-bench/1 report of a job run; `details` is the fio-shaped output.
pub fn report(results: &[CloneResult]) -> BenchReport {
    let mut targets: Vec<String> = Vec::new();
    for r in results {
        if !targets.contains(&r.target) {
            targets.push(r.target.clone());
        }
    }
    let mut rep = BenchReport::new("job", targets);
    for r in results {
        let group = if r.clone == 0 {
            r.job.clone()
        } else {
            format!("{} #{}", r.job, r.clone)
        };
        for (test, d) in [("read", &r.read), ("write", &r.write)] {
            if d.ios == 0 {
                continue;
            }
            rep.push(&group, test, &r.target, "MB/s", d.mb_s(r.elapsed));
            rep.push(&group, test, &r.target, "IOPS", d.iops(r.elapsed));
            rep.push(&group, test, &r.target, "latency µs", d.mean_lat_us());
            rep.push(
                &group,
                test,
                &r.target,
                "latency p99 µs",
                d.hist.value_at_quantile(0.99) as f64 / 1000.0,
            );
        }
    }
    // One entry per job section (its clones ran alike).
    for r in results.iter().filter(|r| r.clone == 0) {
        rep.conditions.push(r.conditions.clone());
    }
    rep.details = fio_json(results);
    rep
}
