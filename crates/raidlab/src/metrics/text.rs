//! The Prometheus text exposition format, version 0.0.4: metric families
//! with one `# HELP` and one `# TYPE` line each, their samples together,
//! label values escaped, histograms as cumulative `_bucket` series with
//! `le` bounds in seconds, `_sum` and `_count`.
//!
//! It decides only how figures are written; it must never invent one: a
//! family with no sample is left out, and every sample's family must have
//! been declared (a programming error otherwise, caught by the tests).

use std::fmt::{Display, Write};

/// A family's type, as `# TYPE` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

#[derive(Debug)]
struct Family {
    name: &'static str,
    help: &'static str,
    kind: Kind,
    lines: String,
}

/// Samples gathered by family, in the order the families were declared.
#[derive(Debug, Default)]
pub struct Exposition {
    families: Vec<Family>,
}

/// A label value with `\`, `"` and newlines escaped, as the format asks.
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn labels(out: &mut String, labels: &[(&str, &str)], extra: Option<(&str, &str)>) {
    let all: Vec<(&str, String)> = labels
        .iter()
        .map(|&(k, v)| (k, escape(v)))
        .chain(extra.map(|(k, v)| (k, v.to_string())))
        .collect();
    if all.is_empty() {
        return;
    }
    out.push('{');
    for (i, (k, v)) in all.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{k}=\"{v}\"");
    }
    out.push('}');
}

/// Seconds from microseconds, as Prometheus wants durations.
fn seconds(us: u64) -> f64 {
    us as f64 / 1e6
}

impl Exposition {
    /// Declare a family; samples of it may follow. Declaring one twice keeps
    /// the first declaration.
    pub fn declare(&mut self, name: &'static str, kind: Kind, help: &'static str) {
        if self.families.iter().all(|f| f.name != name) {
            self.families.push(Family {
                name,
                help,
                kind,
                lines: String::new(),
            });
        }
    }

    fn family(&mut self, name: &str) -> &mut Family {
        self.families
            .iter_mut()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("metric family {name} was not declared"))
    }

    /// One sample of a counter or gauge.
    pub fn sample(&mut self, name: &str, l: &[(&str, &str)], value: impl Display) {
        let f = self.family(name);
        debug_assert!(f.kind != Kind::Histogram, "{name} is a histogram");
        f.lines.push_str(name);
        labels(&mut f.lines, l, None);
        let _ = writeln!(f.lines, " {value}");
    }

    /// One histogram: `counts` per bucket (not cumulative) with the last
    /// past every bound (+Inf), `bounds_us` and `sum_us` in microseconds.
    pub fn histogram(
        &mut self,
        name: &str,
        l: &[(&str, &str)],
        bounds_us: &[u64],
        counts: &[u64],
        sum_us: u64,
    ) {
        let f = self.family(name);
        debug_assert!(f.kind == Kind::Histogram, "{name} is not a histogram");
        let mut cumulative = 0u64;
        for (i, n) in counts.iter().enumerate() {
            cumulative += n;
            let le = match bounds_us.get(i) {
                Some(&b) => seconds(b).to_string(),
                None => "+Inf".to_string(),
            };
            let _ = write!(f.lines, "{name}_bucket");
            labels(&mut f.lines, l, Some(("le", &le)));
            let _ = writeln!(f.lines, " {cumulative}");
        }
        let _ = write!(f.lines, "{name}_sum");
        labels(&mut f.lines, l, None);
        let _ = writeln!(f.lines, " {}", seconds(sum_us));
        let _ = write!(f.lines, "{name}_count");
        labels(&mut f.lines, l, None);
        let _ = writeln!(f.lines, " {cumulative}");
    }

    /// The families that have samples, each with its HELP and TYPE.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for f in self.families.iter().filter(|f| !f.lines.is_empty()) {
            let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
            let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind.name());
            out.push_str(&f.lines);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_written_together_with_escaped_labels() {
        let mut e = Exposition::default();
        e.declare("a_total", Kind::Counter, "A.");
        e.declare("b", Kind::Gauge, "B.");
        e.declare("unused", Kind::Gauge, "Never sampled.");
        e.declare("h_seconds", Kind::Histogram, "H.");
        e.sample("a_total", &[("x", "1")], 3);
        e.sample("b", &[("p", "a\"b\\c\nd")], 1.5);
        e.sample("a_total", &[("x", "2")], 4);
        e.histogram("h_seconds", &[("x", "1")], &[10, 1000], &[1, 2, 3], 2500);
        let text = e.render();
        assert_eq!(
            text,
            "# HELP a_total A.\n# TYPE a_total counter\n\
             a_total{x=\"1\"} 3\na_total{x=\"2\"} 4\n\
             # HELP b B.\n# TYPE b gauge\n\
             b{p=\"a\\\"b\\\\c\\nd\"} 1.5\n\
             # HELP h_seconds H.\n# TYPE h_seconds histogram\n\
             h_seconds_bucket{x=\"1\",le=\"0.00001\"} 1\n\
             h_seconds_bucket{x=\"1\",le=\"0.001\"} 3\n\
             h_seconds_bucket{x=\"1\",le=\"+Inf\"} 6\n\
             h_seconds_sum{x=\"1\"} 0.0025\n\
             h_seconds_count{x=\"1\"} 6\n"
        );
    }
}
