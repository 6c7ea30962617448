//! `raidlab report` as a user runs it: the fixture results of raidlab-report into a
//! page and a CSV, and every refusal (bad format, bad value, output over an input)
//! with a message naming the file and the JSON path, and nothing written.

use assert_cmd::Command;
use predicates::prelude::*;
use std::fs;
use std::path::{Path, PathBuf};

fn raidlab() -> Command {
    Command::cargo_bin("raidlab").unwrap()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../raidlab-report/tests/fixtures")
        .join(name)
}

const FIXTURES: [&str; 5] = [
    "cdm-ssd-raid.json",
    "cdm-rerun.json",
    "bonnie-ssd-hdd-raid6.json",
    "job-desktop-hdd.json",
    "iozone-raid5-ssd-cache.json",
];

#[test]
fn report_writes_page_and_csv_of_every_row() {
    let d = tempfile::tempdir().unwrap();
    let html = d.path().join("report.html");
    let csv = d.path().join("report.csv");
    raidlab()
        .arg("report")
        .args(FIXTURES.map(fixture))
        .arg("--output")
        .arg(&html)
        .arg("--csv")
        .arg(&csv)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "81 measurements of 12 targets from 5 result files, 9 charts",
        ));
    let page = fs::read_to_string(&html).unwrap();
    let table = fs::read_to_string(&csv).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 1 + 81);
    assert_eq!(
        lines[0],
        "file,hostname,suite,group,test,target,metric,value,higher_is_better"
    );
    // Every value of every input file is in the page and the CSV.
    for f in FIXTURES {
        let v: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(fixture(f)).unwrap()).unwrap();
        for row in v["rows"].as_array().unwrap() {
            let value = row["value"].as_f64().unwrap().to_string();
            // Exact in the bar's tooltip (the tables round as the tools do).
            let metric = row["metric"].as_str().unwrap();
            assert!(
                page.contains(&format!(": {value} {metric}</title>")),
                "{f}: {value} not in page"
            );
            assert!(
                table.contains(&format!(",{value},")),
                "{f}: {value} not in CSV"
            );
        }
    }
}

fn refused(args: &[&Path], out: &Path, expect: &[&str]) {
    let csv = out.with_extension("csv");
    let assert = raidlab()
        .arg("report")
        .args(args)
        .arg("-o")
        .arg(out)
        .arg("--csv")
        .arg(&csv)
        .assert()
        .failure()
        .code(1);
    let err = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    for e in expect {
        assert!(err.contains(e), "stderr lacks {e:?}: {err}");
    }
    assert!(!csv.exists(), "CSV written despite the error");
}

#[test]
fn bad_inputs_are_refused_by_file_and_json_path_and_nothing_is_written() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out.html");
    let good = fixture("cdm-rerun.json");
    let text = fs::read_to_string(&good).unwrap();

    let future = d.path().join("future.json");
    fs::write(&future, text.replace("raidlab-bench/1", "raidlab-bench/2")).unwrap();
    refused(
        &[&good, &future],
        &out,
        &[
            "future.json: unknown result format \"raidlab-bench/2\" at $.format",
            "this raidlab reads \"raidlab-bench/1\"",
        ],
    );
    assert!(!out.exists());

    let bad = d.path().join("bad.json");
    fs::write(&bad, text.replacen("2544.12", "\"fast\"", 1)).unwrap();
    refused(
        &[&bad],
        &out,
        &["bad.json: at $.rows[0].value: invalid type: string \"fast\", expected a number"],
    );

    let cut = d.path().join("cut.json");
    fs::write(&cut, &text[..text.len() / 2]).unwrap();
    refused(
        &[&cut],
        &out,
        &["cut.json: not valid JSON", "run the benchmark again"],
    );

    refused(
        &[&d.path().join("nope.json")],
        &out,
        &["cannot read result file", "nope.json", "caused by"],
    );
    assert!(!out.exists());

    // An existing page is left as it was when the new report is refused.
    fs::write(&out, "old report").unwrap();
    refused(&[&bad], &out, &["bad.json"]);
    assert_eq!(fs::read_to_string(&out).unwrap(), "old report");
}

#[test]
fn output_over_an_input_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("r.json");
    fs::copy(fixture("cdm-rerun.json"), &input).unwrap();
    let before = fs::read(&input).unwrap();
    raidlab()
        .arg("report")
        .arg(&input)
        .arg("--output")
        .arg(&input)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("is one of the input result files"));
    assert_eq!(fs::read(&input).unwrap(), before);
}

#[test]
fn output_is_required() {
    raidlab()
        .arg("report")
        .arg(fixture("cdm-rerun.json"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--output"));
}
