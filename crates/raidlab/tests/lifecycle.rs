//! Every user of an array starts and stops it the same way (raidlab-raid's
//! `lifecycle`): the benchmark targets too. A journaled array is written by
//! `bench cdm array:...` (it used to refuse every write test: "the array runs
//! read-only"), and a PPL array left by a crash has its old logs replayed by the
//! benchmark's start before any new log is written, so parity is right after.

mod common;

use assert_cmd::Command;
use std::path::Path;

fn raidlab() -> Command {
    Command::cargo_bin("raidlab").unwrap()
}

const FAST: &[&str] = &["--runs", "1", "--measure", "0.05", "--interval", "0"];

fn ok(dir: &Path, args: &[&str]) -> String {
    let o = raidlab().current_dir(dir).args(args).output().unwrap();
    assert!(
        o.status.success(),
        "raidlab {args:?} exited {}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn abs(dir: &Path, names: &[&str]) -> Vec<String> {
    names
        .iter()
        .map(|n| dir.join(n).to_str().unwrap().to_string())
        .collect()
}

#[test]
fn bench_writes_a_journaled_array() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(
        d,
        &[
            "create",
            "--level",
            "5",
            "--chunk",
            "64K",
            "--member-size",
            "8M",
            "--write-journal",
            "j",
            "m0",
            "m1",
            "m2",
        ],
    );
    let out = ok(
        d,
        &[
            &["bench", "cdm", "array:m0,m1,m2,j", "--size", "1M", "--json"][..],
            FAST,
        ]
        .concat(),
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let writes = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["test"] == "write")
        .filter(|r| r["metric"] == "MB/s")
        .count();
    assert!(writes > 0, "no write test ran: {out}");
    // The benchmark's writes went through the journal: parity is consistent.
    let check = ok(d, &["check", "m0", "m1", "m2", "j"]);
    assert!(check.contains("mismatch_cnt: 0"), "{check}");
}

#[test]
fn bench_replays_a_crashed_arrays_partial_parity_log_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let names = ["m0", "m1", "m2", "m3"];
    ok(
        d,
        &[
            &[
                "create",
                "--level",
                "5",
                "--chunk",
                "64K",
                "--member-size",
                "8M",
            ][..],
            &["--consistency-policy", "ppl"],
            &names,
        ]
        .concat(),
    );
    let members = abs(d, &names);
    // A torn write at the start of stripe 8 (array bytes 1.5 MiB..; a stripe
    // holds 3 x 64K of data): the log is durable, the parity update lost.
    let at = 8 * 3 * (64 << 10);
    common::ppl_crash(&members, at, &[0x5a; 8192]).unwrap();
    let detail = ok(d, &[&["detail", "--json"][..], &names].concat());
    assert!(detail.contains("\"replay_pending\": \"ppl\""), "{detail}");
    // The benchmark writes only its first 1 MiB, away from the torn stripe.
    let spec = format!("array:{}", names.join(","));
    ok(
        d,
        &[&["bench", "cdm", &spec, "--size", "1M"][..], FAST].concat(),
    );
    // Its start replayed the old log: the torn stripe's parity is right, and
    // the array was stopped clean.
    let check = ok(d, &[&["check"][..], &names].concat());
    assert!(check.contains("mismatch_cnt: 0"), "{check}");
    let detail = ok(d, &[&["detail", "--json"][..], &names].concat());
    assert!(detail.contains("\"resync_pending\": false"), "{detail}");
    assert!(detail.contains("\"replay_pending\": null"), "{detail}");
}
