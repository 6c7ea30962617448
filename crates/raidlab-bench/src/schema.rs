//! The one result type every suite produces ("raidlab-bench/1"), a contract with
//! `raidlab report`: rows are long-format figures (one chart per suite + metric,
//! grouped by `group`, a bar per test x target); `details` is suite-specific.
//!
//! Exporters (the text table, JSON, fio JSON, Bonnie++ CSV, HTML) read this type;
//! none of them measures anything.

use serde::{Deserialize, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};

pub const FORMAT: &str = "raidlab-bench/1";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BenchReport {
    pub format: String,
    pub suite: String,
    /// RFC 3339, UTC.
    pub created: String,
    pub host: Host,
    pub targets: Vec<String>,
    pub rows: Vec<Row>,
    pub details: serde_json::Value,
    /// The simulated targets among `targets`: each one's model and parameters
    /// (units, sources), so a report can tell virtual figures from measured ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub simulated: Vec<SimulatedTarget>,
    /// The target the others are compared with (`--baseline`); absent: the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    /// How each target was measured, so a report can say it beside the figures and
    /// refuse to compare unlike runs silently. Absent in results written before it
    /// existed; empty for suites that do not record it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<RunConditions>,
    /// `raidlab seeds` only: what a source article's experiment redone in
    /// simulation found, and what ran, for the report to say beside the
    /// figures (absent for every other suite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<SeedSection>,
}

/// One seed's findings, error figures and simulated configurations.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SeedSection {
    /// The seed's letter (SEEDS.md), "A" to "E".
    pub seed: String,
    /// What the simulation leaves out of the article's experiment.
    pub scope: String,
    pub findings: Vec<SeedFinding>,
    /// Median absolute errors |simulated/article - 1| over sets of cells
    /// (seed E's); empty where the seed has none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<SeedError>,
    /// What every configuration (a group of the rows) ran on: the run
    /// conditions of virtual figures, which no machine's speed enters.
    pub configs: Vec<SeedConfig>,
}

/// One of an article's findings and the simulation's verdict on it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SeedFinding {
    pub text: String,
    /// `reproduced`, `not reproduced` or `not modelled`.
    pub verdict: String,
    /// The figures the finding's rule compared, or what the model lacks.
    pub why: String,
}

/// A median absolute error over a set of cells.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SeedError {
    /// Which cells, in words.
    pub what: String,
    pub cells: usize,
    /// A fraction (0.082 is 8.2%).
    pub median_abs_error: f64,
}

/// A seed configuration and the simulated hardware and host it ran on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SeedConfig {
    /// The configuration's name (the rows' group).
    pub config: String,
    /// The simulator's short form, after `sim:`.
    pub spec: String,
    /// The drives (preset names and what they model) and their arrangement.
    pub drives: String,
    /// The RAID card and its mode, or that there is none.
    pub card: String,
    /// The host model: I/O scheduler and md's CPU model of an era.
    pub host: String,
    /// The file-system layer and its kernel, or block level.
    pub fs: String,
}

/// The conditions one target was measured under.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunConditions {
    pub target: String,
    /// How I/O reached the target: `O_DIRECT`, `page cache`, `in memory`,
    /// `NBD export`, `simulated` (virtual time, no I/O).
    pub io: String,
    /// Bytes of the test file or region.
    pub test_size: u64,
    /// Runs per test and seconds each run measures (absent where the suite runs
    /// each test once until done, as Bonnie++ and IOzone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measure_s: Option<f64>,
    /// The I/O engine that ran the tests (`io_uring`, `threads`, ...).
    pub engine: String,
    pub simulated: bool,
    /// `bench job` only: the conditions are those of this job section (a job
    /// file may run several jobs on one target, each its own way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// `bench job` only: the job's workload without its target, e.g.
    /// `randread bs=4096 iodepth=32 numjobs=1`: jobs on different targets with
    /// the same workload are compared with each other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// Requests in flight per job (fio's iodepth), where the suite records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_depth: Option<usize>,
}

impl RunConditions {
    /// The conditions of `t`: how it was opened, by what engine.
    pub fn of(t: &crate::Target, test_size: u64, engine: &str) -> RunConditions {
        use crate::target::TargetKind as K;
        let simulated = t.sim.is_some() || t.kind == K::Simulated;
        let io = if simulated {
            "simulated"
        } else {
            match (t.kind, t.direct) {
                (K::Memory, _) => "in memory",
                (K::Nbd, _) => "NBD export",
                (_, true) => "O_DIRECT",
                (_, false) => "page cache",
            }
        };
        RunConditions {
            target: t.label.clone(),
            io: io.to_string(),
            test_size,
            runs: None,
            measure_s: None,
            engine: engine.to_string(),
            simulated,
            job: None,
            workload: None,
            queue_depth: None,
        }
    }
}

/// A simulated target of a result: its label and what it is made of.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SimulatedTarget {
    pub target: String,
    pub model: serde_json::Value,
    /// What the configuration's faults (`fail=`, `lse=`, `spare=`) did over
    /// the verb's run, as `raidlab_sim::faults::report::FaultReport`; absent
    /// without faults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faults: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Host {
    pub hostname: String,
    pub cpus: usize,
    pub kernel: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Row {
    pub suite: String,
    pub group: String,
    pub test: String,
    pub target: String,
    pub metric: String,
    pub value: f64,
    pub higher_is_better: bool,
}

impl BenchReport {
    pub fn new(suite: &str, targets: Vec<String>) -> Self {
        BenchReport {
            format: FORMAT.to_string(),
            suite: suite.to_string(),
            created: rfc3339_utc(SystemTime::now()),
            host: Host::this(),
            targets,
            rows: Vec::new(),
            details: serde_json::Value::Null,
            simulated: Vec::new(),
            baseline: None,
            conditions: Vec::new(),
            seed: None,
        }
    }

    pub fn push(&mut self, group: &str, test: &str, target: &str, metric: &str, value: f64) {
        self.rows.push(Row {
            suite: self.suite.clone(),
            group: group.to_string(),
            test: test.to_string(),
            target: target.to_string(),
            metric: metric.to_string(),
            // JSON has no NaN or infinity; a figure that cannot be computed is 0.
            value: if value.is_finite() { value } else { 0.0 },
            higher_is_better: !metric.starts_with("latency"),
        });
    }
}

impl Host {
    pub fn this() -> Self {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".to_string())
        };
        Host {
            hostname: read("/proc/sys/kernel/hostname"),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel: read("/proc/sys/kernel/osrelease"),
        }
    }
}

/// `2026-11-21T14:45:00Z` for a time (whole seconds, UTC).
pub fn rfc3339_utc(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's days-to-civil algorithm (proleptic Gregorian).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rfc3339_known_dates() {
        let at = |s| rfc3339_utc(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_795_272_300), "2026-11-21T14:45:00Z");
    }

    #[test]
    fn report_shape_matches_the_contract() {
        let mut r = BenchReport::new("cdm", vec!["a".into()]);
        r.push("SEQ1M Q8T1", "read", "a", "MB/s", 10.0);
        r.push("SEQ1M Q8T1", "read", "a", "latency µs", f64::NAN);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["format"], "raidlab-bench/1");
        assert_eq!(v["rows"][0]["higher_is_better"], true);
        assert_eq!(v["rows"][1]["higher_is_better"], false);
        assert_eq!(v["rows"][1]["value"], 0.0);
        for k in ["suite", "created", "host", "targets", "rows", "details"] {
            assert!(v.get(k).is_some(), "{k}");
        }
        assert!(v["host"]["cpus"].as_u64().unwrap() >= 1);
    }
}
