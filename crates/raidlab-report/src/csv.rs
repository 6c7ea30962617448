//! Every row of every file as CSV (RFC 4180): one line per measurement, with the
//! target label the page shows, so a spreadsheet and the charts agree.
//!
//! Written by hand rather than with the `csv` crate: quoting is a few lines, and
//! writing into a `String` cannot fail, so `render_csv` needs no error path that
//! could never be taken. The tests parse the output back with the `csv` crate.

use crate::input::ResultFile;
use crate::model::Model;
use std::fmt::Write as _;

/// The CSV header, in column order.
pub const HEADER: [&str; 9] = [
    "file",
    "hostname",
    "suite",
    "group",
    "test",
    "target",
    "metric",
    "value",
    "higher_is_better",
];

/// All rows of `files`, merged as the page merges them.
pub fn render_csv(files: &[ResultFile]) -> String {
    render_model(files, &Model::new(files, None))
}

pub(crate) fn render_model(files: &[ResultFile], model: &Model) -> String {
    let mut out = String::new();
    line(&mut out, HEADER.iter().map(|s| s.to_string()));
    for m in &model.rows {
        let f = &files[m.file];
        line(
            &mut out,
            [
                f.source.clone(),
                f.host.hostname.clone().unwrap_or_default(),
                m.row.suite.clone(),
                m.row.group.clone(),
                m.row.test.clone(),
                m.target.clone(),
                m.row.metric.clone(),
                // Rust's shortest round-trip form: the exact value read, no rounding.
                format!("{}", m.row.value),
                m.row.higher_is_better.to_string(),
            ],
        );
    }
    out
}

fn line(out: &mut String, fields: impl IntoIterator<Item = String>) {
    for (i, f) in fields.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        field(out, &f);
    }
    out.push_str("\r\n");
}

fn field(out: &mut String, s: &str) {
    if s.contains([',', '"', '\n', '\r']) || s.starts_with(' ') || s.ends_with(' ') {
        let _ = write!(out, "\"{}\"", s.replace('"', "\"\""));
    } else {
        out.push_str(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::Row;

    #[test]
    fn quoting_round_trips_through_the_csv_crate() {
        let nasty = "RAID 5, \"fast\"\nsecond line";
        let f = ResultFile {
            baseline: None,
            conditions: Vec::new(),
            simulated: Vec::new(),
            seed: None,
            source: "dir/x,y.json".into(),
            format: crate::FORMAT.into(),
            suite: "cdm".into(),
            created: None,
            host: Default::default(),
            targets: vec![nasty.into()],
            rows: vec![Row {
                suite: "cdm".into(),
                group: " SEQ1M Q8T1".into(),
                test: "read".into(),
                target: nasty.into(),
                metric: "latency µs".into(),
                value: 0.1 + 0.2,
                higher_is_better: false,
            }],
        };
        let text = render_csv(&[f]);
        let mut r = ::csv::ReaderBuilder::new()
            .has_headers(true)
            .from_reader(text.as_bytes());
        assert_eq!(r.headers().unwrap().iter().collect::<Vec<_>>(), HEADER);
        let recs: Vec<::csv::StringRecord> = r.records().map(|r| r.unwrap()).collect();
        assert_eq!(recs.len(), 1);
        let rec: Vec<&str> = recs[0].iter().collect();
        assert_eq!(
            rec,
            [
                "dir/x,y.json",
                "",
                "cdm",
                " SEQ1M Q8T1",
                "read",
                nasty,
                "latency µs",
                "0.30000000000000004",
                "false"
            ]
        );
        // The exact value survives the trip.
        assert_eq!(rec[7].parse::<f64>().unwrap(), 0.1 + 0.2);
    }
}
