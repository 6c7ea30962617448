//! raidlab-report: benchmark results in, one self-contained HTML page and CSV out.
//!
//! ```text
//!  RESULT.json ...  ──ResultFile::from_json──▶  [ResultFile]  (strict: schema
//!  (raidlab-bench/1)     (input.rs)                 │          errors name file
//!                                                   ▼          and JSON path)
//!                                     Model::new (model.rs): merge, distinct
//!                                     target labels, charts per (suite, metric)
//!                                       │                         │
//!                    render_html (html.rs + svg.rs)        render_csv (csv.rs)
//! ```
//!
//! The page compares configurations the way the source articles' graphs did: one
//! chart per (suite, metric), groups such as `SEQ1M Q8T1` on the category axis, one
//! bar per (test, target) in a colour that stays with the target across charts,
//! the exact numbers under every chart, and per suite a summary table with each
//! target's ratio to the first (the single disk, usually).
//!
//! This crate must never reach the network or emit anything that does (the page
//! references no URL, runs no script: charts are SVG drawn here), never run or
//! render input text as markup (every input string is escaped), and never write a
//! partial output: [`write_report`] reads and checks every input before it writes,
//! and writes through a temporary file renamed into place.

mod compare;
mod csv;
mod error;
mod grid;
mod html;
mod input;
mod jobs;
mod model;
mod seed;
mod svg;

pub use crate::compare::comparison_text;
pub use crate::csv::{render_csv, HEADER as CSV_HEADER};
pub use crate::error::ReportError;
pub use crate::html::{render_html, render_html_with, shown, shown_in};
pub use crate::input::{Conditions, Host, ResultFile, Row, Simulated, FORMAT};
pub use crate::seed::{ErrorFigure, Finding, Seed, SimConfig, VERDICTS};

use std::fs;
use std::path::{Path, PathBuf};

/// What [`write_report`] wrote, for the caller to tell the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub files: usize,
    pub rows: usize,
    pub targets: usize,
    pub charts: usize,
}

/// Read and check result files (all of them, before anything is written).
pub fn load(inputs: &[PathBuf]) -> Result<Vec<ResultFile>, ReportError> {
    if inputs.is_empty() {
        return Err(ReportError::NoInputs);
    }
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut files = Vec::with_capacity(inputs.len());
    for p in inputs {
        let name = p.display().to_string();
        let text = fs::read_to_string(p).map_err(|source| ReportError::Read {
            file: name.clone(),
            source,
        })?;
        // Read succeeded, so the path exists and canonicalize only fails in races;
        // then the path as given still catches the common `a.json a.json`.
        let canon = fs::canonicalize(p).unwrap_or_else(|_| p.clone());
        if seen.contains(&canon) {
            return Err(ReportError::DuplicateInput { file: name });
        }
        seen.push(canon);
        files.push(ResultFile::from_json(&name, &text)?);
    }
    Ok(files)
}

/// The report of `inputs`: the page at `html` and, if asked, the CSV at `csv`.
/// Every input is read and checked first; on any error nothing is written.
/// This is the entry point for `raidlab report` and for `raidlab bench`, which
/// writes its results and then calls it.
pub fn write_report(
    inputs: &[PathBuf],
    html: &Path,
    csv: Option<&Path>,
) -> Result<Summary, ReportError> {
    write_report_with_baseline(inputs, html, csv, None)
}

/// [`write_report`] comparing every suite with the target labelled `baseline`
/// (where the suite measured it; the others keep their own baseline). A label
/// that no suite measured is an error, before anything is written.
pub fn write_report_with_baseline(
    inputs: &[PathBuf],
    html: &Path,
    csv: Option<&Path>,
    baseline: Option<&str>,
) -> Result<Summary, ReportError> {
    let files = load(inputs)?;
    for out in std::iter::once(html).chain(csv) {
        if is_one_of(out, inputs) {
            return Err(ReportError::OutputIsInput {
                path: out.to_path_buf(),
            });
        }
    }
    write_files(&files, html, csv, baseline)
}

/// [`write_report`] for results already in memory (a runner that has not written
/// them to files, or a caller that reads them some other way).
pub fn write_files(
    files: &[ResultFile],
    html: &Path,
    csv: Option<&Path>,
    baseline: Option<&str>,
) -> Result<Summary, ReportError> {
    if let Some(csv) = csv {
        // Also when neither exists yet: then the paths as given are compared.
        let same = match (fs::canonicalize(html), fs::canonicalize(csv)) {
            (Ok(a), Ok(b)) => a == b,
            _ => html == csv,
        };
        if same {
            return Err(ReportError::SameOutput {
                path: csv.to_path_buf(),
            });
        }
    }
    let model = model::Model::new(files, baseline);
    if model.rows.is_empty() {
        return Err(ReportError::NoRows);
    }
    if let Some(b) = baseline {
        let known =
            model.targets.iter().any(|t| t == b) || model.rows.iter().any(|m| m.row.target == b);
        if !known {
            return Err(ReportError::UnknownBaseline {
                baseline: b.to_string(),
                targets: model.targets.join(", "),
            });
        }
    }
    let summary = Summary {
        files: files.len(),
        rows: model.rows.len(),
        targets: model.targets.len(),
        charts: model.suites.iter().map(|s| s.charts.len()).sum(),
    };
    let page = render_html_with(files, baseline);
    let table = csv.map(|p| (p, render_csv(files)));
    // Both outputs go to temporary files first and are renamed only when both
    // are complete, so a full disk leaves the old report (or none), never half.
    let mut written: Vec<(PathBuf, &Path)> = Vec::new();
    let mut jobs: Vec<(&Path, &str)> = vec![(html, &page)];
    if let Some((p, text)) = &table {
        jobs.push((p, text));
    }
    for (path, text) in jobs {
        let tmp = temp_path(path);
        if let Err(source) = fs::write(&tmp, text) {
            let _ = fs::remove_file(&tmp);
            for (t, _) in &written {
                let _ = fs::remove_file(t);
            }
            return Err(ReportError::Write {
                path: path.to_path_buf(),
                source,
            });
        }
        written.push((tmp, path));
    }
    let mut failed = None;
    for (tmp, path) in &written {
        if failed.is_some() {
            let _ = fs::remove_file(tmp);
            continue;
        }
        if let Err(source) = fs::rename(tmp, path) {
            let _ = fs::remove_file(tmp);
            failed = Some(ReportError::Write {
                path: path.to_path_buf(),
                source,
            });
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(summary),
    }
}

/// `report.html` -> `.report.html.tmp-<pid>` beside it (same directory, so the
/// rename cannot cross file systems).
fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report".into());
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

/// Whether `out` names the same file as one of `inputs` (an existing output is
/// compared by canonical path; a new one cannot be an input).
fn is_one_of(out: &Path, inputs: &[PathBuf]) -> bool {
    let Ok(out) = fs::canonicalize(out) else {
        return false;
    };
    inputs
        .iter()
        .any(|i| fs::canonicalize(i).is_ok_and(|i| i == out))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROW: &str = r#"{"suite":"cdm","group":"SEQ1M Q8T1","test":"read","target":"a","metric":"MB/s","value":12.5,"higher_is_better":true}"#;

    fn result(rows: &str) -> String {
        format!(
            r#"{{"format":"raidlab-bench/1","suite":"cdm","created":"2026-11-21T10:00:00Z","host":{{"hostname":"h","cpus":2,"kernel":"6.1"}},"targets":["a"],"rows":[{rows}],"details":null}}"#
        )
    }

    #[test]
    fn writes_html_and_csv() {
        let d = tempfile::tempdir().unwrap();
        let input = d.path().join("r.json");
        fs::write(&input, result(ROW)).unwrap();
        let html = d.path().join("out.html");
        let csv = d.path().join("out.csv");
        let s = write_report(std::slice::from_ref(&input), &html, Some(&csv)).unwrap();
        assert_eq!(
            s,
            Summary {
                files: 1,
                rows: 1,
                targets: 1,
                charts: 1
            }
        );
        assert!(fs::read_to_string(&html).unwrap().contains(">12.50<"));
        assert!(fs::read_to_string(&csv).unwrap().contains(",12.5,true\r\n"));
        // No temporary files left behind.
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 3);
    }

    #[test]
    fn bad_input_writes_nothing() {
        let d = tempfile::tempdir().unwrap();
        let good = d.path().join("good.json");
        let bad = d.path().join("bad.json");
        fs::write(&good, result(ROW)).unwrap();
        fs::write(&bad, result(&ROW.replace("12.5", "\"fast\""))).unwrap();
        let html = d.path().join("out.html");
        let e = write_report(&[good, bad.clone()], &html, None).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with(&bad.display().to_string()), "{msg}");
        assert!(msg.contains("at $.rows[0].value"), "{msg}");
        assert!(!html.exists());
    }

    #[test]
    fn refusals() {
        let d = tempfile::tempdir().unwrap();
        let input = d.path().join("r.json");
        fs::write(&input, result(ROW)).unwrap();
        let e = write_report(std::slice::from_ref(&input), &input, None).unwrap_err();
        assert!(matches!(e, ReportError::OutputIsInput { .. }), "{e}");
        assert_eq!(fs::read_to_string(&input).unwrap(), result(ROW));
        let out = d.path().join("o.html");
        let e = write_report(&[input.clone(), input.clone()], &out, None).unwrap_err();
        assert!(e.to_string().contains("given more than once"), "{e}");
        let e = write_report(&[], &out, None).unwrap_err();
        assert!(matches!(e, ReportError::NoInputs));
        let empty = d.path().join("empty.json");
        fs::write(&empty, result("")).unwrap();
        let e = write_report(&[empty], &out, None).unwrap_err();
        assert!(matches!(e, ReportError::NoRows), "{e}");
        let e = write_report(std::slice::from_ref(&input), &out, Some(&out)).unwrap_err();
        assert!(matches!(e, ReportError::SameOutput { .. }), "{e}");
        let e = write_report_with_baseline(std::slice::from_ref(&input), &out, None, Some("b"))
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("--baseline b is not one of the targets (a)"),
            "{e}"
        );
        let e = write_report(&[d.path().join("missing.json")], &out, None).unwrap_err();
        assert!(e.to_string().starts_with("cannot read result file"), "{e}");
        assert!(!out.exists());
    }

    #[test]
    fn unwritable_output_is_an_error_naming_it() {
        let d = tempfile::tempdir().unwrap();
        let input = d.path().join("r.json");
        fs::write(&input, result(ROW)).unwrap();
        let out = d.path().join("no/such/dir/out.html");
        let e = write_report(&[input], &out, None).unwrap_err();
        assert!(e.to_string().contains("no/such/dir/out.html"), "{e}");
    }
}
