//! The compact comparison of a suite's targets with its baseline, shared by the
//! page and the terminal so that both say the same: one line per test with its
//! headline figure (see [`SuiteView::headlines`]), each target's ratio to the
//! baseline, and one sentence per target saying it in words ("RAID 5, 4 members
//! is 0.41x-1.20x the single member").
//!
//! It decides which figure heads a test and how a ratio is said; it never
//! measures, never reads files and never prints.

use crate::html::shown_in;
use crate::input::ResultFile;
use crate::model::{Model, SuiteView, SummaryRow};
use std::fmt::Write as _;

/// `v / base`, where both exist and the baseline is not zero.
pub fn ratio(v: Option<f64>, base: Option<f64>) -> Option<f64> {
    match (v, base) {
        (Some(v), Some(b)) if b != 0.0 && v.is_finite() && b.is_finite() => Some(v / b),
        _ => None,
    }
}

/// The ratios of the suite's target at position `col` to its baseline, one per
/// headline line where both were measured.
pub fn ratios(suite: &SuiteView, lines: &[&SummaryRow], col: usize) -> Vec<f64> {
    lines
        .iter()
        .filter_map(|r| ratio(r.values[col], r.values[suite.baseline]))
        .collect()
}

/// "RAID 5 is 0.56x the single member", or with several tests the range and the
/// geometric mean. "the" goes before a baseline described in words ("single
/// member"), not before a name ("RAID 0", "/dev/sdb", "mem:1G").
pub fn in_words(target: &str, base: &str, ratios: &[f64], metrics: &[&str]) -> String {
    let words = base
        .chars()
        .all(|c| c.is_alphanumeric() || c == ' ' || c == ',' || c == '-');
    let the = if words && base.contains(' ') && base.starts_with(|c: char| c.is_lowercase()) {
        "the "
    } else {
        ""
    };
    let unit = match metrics {
        [one] => format!(" in {one}"),
        _ => String::new(),
    };
    match ratios {
        [] => format!("{target} has no test in common with {the}{base}"),
        [r] => format!("{target} is {r:.2}x {the}{base}{unit}"),
        many => {
            let lo = many.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = many.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let mean = if many.iter().all(|r| *r > 0.0) {
                let logs: f64 = many.iter().map(|r| r.ln()).sum();
                format!(
                    "geometric mean {:.2}x over {} tests",
                    (logs / many.len() as f64).exp(),
                    many.len()
                )
            } else {
                format!("{} tests", many.len())
            };
            format!("{target} is {lo:.2}x to {hi:.2}x {the}{base}{unit} ({mean})")
        }
    }
}

/// The distinct metrics of `lines`, in order.
pub fn metrics<'a>(lines: &[&'a SummaryRow]) -> Vec<&'a str> {
    let mut m: Vec<&str> = Vec::new();
    for r in lines {
        if !m.contains(&r.metric.as_str()) {
            m.push(&r.metric);
        }
    }
    m
}

/// The comparison as terminal text, per suite of `files` that measured more than
/// one target: what `raidlab bench` prints after its tables. `baseline` as for
/// [`crate::write_report_with_baseline`].
pub fn comparison_text(files: &[ResultFile], baseline: Option<&str>) -> String {
    let model = Model::new(files, baseline);
    let mut out = String::new();
    for suite in model.suites.iter().filter(|s| s.targets.len() > 1) {
        let names: Vec<&str> = suite
            .targets
            .iter()
            .map(|&t| model.targets[t].as_str())
            .collect();
        let base = names[suite.baseline];
        let lines = suite.headlines();
        let _ = writeln!(
            out,
            "Compared with {base} (the baseline; --baseline TARGET picks another):"
        );
        if !suite.jobs.is_empty() {
            // A job file's jobs are paired by workload, not by name.
            for w in crate::jobs::job_words(&model, suite) {
                let _ = writeln!(out, "{w}.");
            }
            continue;
        }
        let label = |r: &SummaryRow| format!("{} {}", r.group, r.test);
        let kw = lines
            .iter()
            .map(|r| label(r).chars().count())
            .fold(4, usize::max);
        let mw = lines
            .iter()
            .map(|r| r.metric.chars().count())
            .fold(6, usize::max);
        let cells: Vec<Vec<String>> = lines
            .iter()
            .map(|r| {
                (0..names.len())
                    .map(|c| {
                        let v = r.values[c]
                            .map_or("-".to_string(), |v| shown_in(v, &suite.name, &r.metric));
                        match ratio(r.values[c], r.values[suite.baseline]) {
                            Some(q) if c != suite.baseline => format!("{v} {q:>5.2}x"),
                            _ => v,
                        }
                    })
                    .collect()
            })
            .collect();
        let widths: Vec<usize> = (0..names.len())
            .map(|c| {
                cells
                    .iter()
                    .map(|row| row[c].chars().count())
                    .fold(names[c].chars().count(), usize::max)
            })
            .collect();
        let _ = write!(out, "{:<kw$}  {:<mw$}", "test", "metric");
        for (n, w) in names.iter().zip(&widths) {
            let _ = write!(out, "  {n:>w$}");
        }
        out.push('\n');
        for (r, row) in lines.iter().zip(&cells) {
            let _ = write!(out, "{:<kw$}  {:<mw$}", label(r), r.metric);
            for (c, w) in row.iter().zip(&widths) {
                let _ = write!(out, "  {c:>w$}");
            }
            out.push('\n');
        }
        let units = metrics(&lines);
        for (c, n) in names.iter().enumerate() {
            if c != suite.baseline {
                let _ = writeln!(
                    out,
                    "{}.",
                    in_words(n, base, &ratios(suite, &lines, c), &units)
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_in_words() {
        assert_eq!(
            in_words("RAID 5, 4 members", "single member", &[0.5612], &["MB/s"]),
            "RAID 5, 4 members is 0.56x the single member in MB/s"
        );
        assert_eq!(
            in_words("RAID 0", "/dev/sdb", &[0.5, 2.0], &["MB/s", "IOPS"]),
            "RAID 0 is 0.50x to 2.00x /dev/sdb (geometric mean 1.00x over 2 tests)"
        );
        assert_eq!(
            in_words("a", "mem:64M", &[1.0], &["MB/s"]),
            "a is 1.00x mem:64M in MB/s"
        );
        assert_eq!(
            in_words("a", "B", &[], &[]),
            "a has no test in common with B"
        );
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
        assert_eq!(ratio(Some(3.0), Some(2.0)), Some(1.5));
    }

    fn file(baseline: Option<&str>) -> ResultFile {
        let row = |group: &str, target: &str, metric: &str, value: f64| crate::Row {
            suite: "cdm".into(),
            group: group.into(),
            test: "read".into(),
            target: target.into(),
            metric: metric.into(),
            value,
            higher_is_better: !metric.starts_with("latency"),
        };
        ResultFile {
            source: "r.json".into(),
            format: crate::FORMAT.into(),
            suite: "cdm".into(),
            created: None,
            host: Default::default(),
            targets: vec!["RAID 5, 4 members".into(), "single member".into()],
            baseline: baseline.map(str::to_string),
            conditions: Vec::new(),
            simulated: Vec::new(),
            seed: None,
            rows: vec![
                row("SEQ1M Q8T1", "RAID 5, 4 members", "MB/s", 560.0),
                row("SEQ1M Q8T1", "RAID 5, 4 members", "latency µs", 9.0),
                row("SEQ1M Q8T1", "single member", "MB/s", 1000.0),
                row("SEQ1M Q8T1", "single member", "latency µs", 3.0),
            ],
        }
    }

    #[test]
    fn terminal_comparison_uses_the_chosen_baseline() {
        let files = [file(Some("single member"))];
        let text = comparison_text(&files, None);
        assert!(text.starts_with("Compared with single member"), "{text}");
        // One line for the test: its headline MB/s, not the latency.
        assert_eq!(text.lines().count(), 4, "{text}");
        assert!(text.contains("SEQ1M Q8T1 read  MB/s"), "{text}");
        assert!(text.contains("560.00  0.56x"), "{text}");
        assert!(text.contains("RAID 5, 4 members is 0.56x the single member in MB/s."));
        // The caller's choice wins over the file's.
        let text = comparison_text(&files, Some("RAID 5, 4 members"));
        assert!(
            text.contains("single member is 1.79x RAID 5, 4 members in MB/s."),
            "{text}"
        );
        // Without either, the first target.
        let text = comparison_text(&[file(None)], None);
        assert!(
            text.starts_with("Compared with RAID 5, 4 members"),
            "{text}"
        );
    }
}
