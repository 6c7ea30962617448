//! Every verb of the offline CLI, including every refusal, run as a user would.

mod common;

use assert_cmd::Command;
use predicates::prelude::*;
use std::path::{Path, PathBuf};

fn raidlab() -> Command {
    Command::cargo_bin("raidlab").unwrap()
}

fn paths(dir: &Path, names: &[&str]) -> Vec<PathBuf> {
    names.iter().map(|n| dir.join(n)).collect()
}

fn create(dir: &Path, args: &[&str], members: &[&str]) {
    raidlab()
        .current_dir(dir)
        .arg("create")
        .args(args)
        .args(members)
        .assert()
        .success();
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    let mut x = seed as u32 | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

fn export(dir: &Path, members: &[&str]) -> Vec<u8> {
    let out = raidlab()
        .current_dir(dir)
        .arg("export")
        .args(members)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "export failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn detail_json(dir: &Path, members: &[&str]) -> serde_json::Value {
    let out = raidlab()
        .current_dir(dir)
        .args(["detail", "--json"])
        .args(members)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "detail failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn snapshot(files: &[PathBuf]) -> Vec<Vec<u8>> {
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

#[test]
fn round_trip_every_level_complete_and_degraded() {
    let cases: &[(&str, &str, usize)] = &[
        ("0", "", 3),
        ("1", "", 2),
        ("4", "", 4),
        ("5", "left-asymmetric", 4),
        ("5", "right-symmetric", 3),
        ("6", "parity-first", 5),
        ("6", "left-symmetric", 4),
        ("10", "n2", 4),
        ("10", "f2", 3),
        ("10", "o2", 4),
        ("10", "n3", 3),
    ];
    for &(level, layout, n) in cases {
        let dir = tempfile::tempdir().unwrap();
        let names: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
        let members: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut args = vec!["--level", level, "--chunk", "16K", "--member-size", "3M"];
        if !layout.is_empty() {
            args.extend(["--layout", layout]);
        }
        create(dir.path(), &args, &members);
        let d = detail_json(dir.path(), &members);
        let size = d["array_size_bytes"].as_u64().unwrap() as usize;
        assert_eq!(d["state"], "clean", "{level} {layout}");
        assert_eq!(
            d["resync_pending"], false,
            "fresh sparse members need no resync"
        );
        let data = pattern(size - 1000, n as u8);
        std::fs::write(dir.path().join("in"), &data).unwrap();
        raidlab()
            .current_dir(dir.path())
            .arg("import")
            .args(&members)
            .args(["--input", "in", "--offset", "1000"])
            .assert()
            .success();
        let mut reversed = members.clone();
        reversed.reverse();
        let got = export(dir.path(), &reversed);
        assert_eq!(got.len(), size);
        assert!(got[..1000].iter().all(|&b| b == 0));
        assert!(got[1000..] == data[..], "{level} {layout}: export differs");
        // Degraded: each member missing in turn for redundant levels.
        if level != "0" {
            for gone in 0..n {
                let mut m: Vec<&str> = members.clone();
                m[gone] = "missing";
                assert!(
                    export(dir.path(), &m)[1000..] == data[..],
                    "{level} {layout} without m{gone}"
                );
                m.remove(gone);
                let d = detail_json(dir.path(), &m);
                assert_eq!(d["health"], "degraded");
                assert_eq!(d["missing_roles"], serde_json::json!([gone]));
            }
        }
    }
}

#[test]
fn export_range_and_stdin_import_and_degraded_import() {
    let dir = tempfile::tempdir().unwrap();
    let m = ["a", "b", "c", "d"];
    create(
        dir.path(),
        &["--level", "6", "--chunk", "4K", "--member-size", "2M"],
        &m,
    );
    let data = pattern(300_000, 9);
    // Degraded import (two members gone from RAID 6), then read it back complete-minus-stale.
    raidlab()
        .current_dir(dir.path())
        .args(["import", "a", "missing", "c"])
        .args(["--offset", "12345"])
        .write_stdin(data.clone())
        .assert()
        .success();
    let out = raidlab()
        .current_dir(dir.path())
        .args([
            "export", "a", "c", "--offset", "12345", "--length", "300000",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(out.stdout == data);
    // b and d missed the write: the degraded import's commits listed them
    // removed (as md lists a device it does not have), detail says so and
    // assembly leaves them out rather than returning old data.
    let d = detail_json(dir.path(), &m);
    let stale: Vec<String> = d["removed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    assert_eq!(stale, vec!["b", "d"]);
    assert_eq!(d["health"], "degraded");
    let all = export(dir.path(), &m);
    assert!(all[12345..12345 + 300_000] == data[..]);
    // --output to a file.
    raidlab()
        .current_dir(dir.path())
        .args([
            "export", "a", "b", "c", "d", "--output", "out.bin", "--length", "4K",
        ])
        .assert()
        .success();
    assert_eq!(
        std::fs::read(dir.path().join("out.bin")).unwrap(),
        all[..4096]
    );
}

#[test]
fn refusals_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    create(
        d,
        &["--level", "5", "--member-size", "4M", "--chunk", "64K"],
        &["m0", "m1", "m2"],
    );
    let files = paths(d, &["m0", "m1", "m2"]);
    let before = snapshot(&files);
    let refuse = |args: &[&str], needle: &str| {
        raidlab()
            .current_dir(d)
            .args(args)
            .assert()
            .failure()
            .stderr(predicate::str::contains(needle));
        assert!(snapshot(&files) == before, "{args:?} changed a member");
    };
    refuse(
        &["create", "--level", "1", "m0", "m1"],
        "already carries an md superblock",
    );
    refuse(
        &[
            "create",
            "--level",
            "5",
            "--member-size",
            "4M",
            "n0",
            "n1",
            "n1",
        ],
        "given twice",
    );
    refuse(
        &[
            "create",
            "--level",
            "6",
            "--member-size",
            "4M",
            "n0",
            "n1",
            "n2",
        ],
        "at least 4 members",
    );
    refuse(
        &[
            "create",
            "--level",
            "5",
            "--member-size",
            "64K",
            "n0",
            "n1",
            "n2",
        ],
        "too small",
    );
    refuse(
        &["create", "--level", "5", "n0", "n1", "n2"],
        "does not exist",
    );
    refuse(
        &[
            "create",
            "--level",
            "5",
            "--chunk",
            "3K",
            "--member-size",
            "4M",
            "n0",
            "n1",
            "n2",
        ],
        "power of two",
    );
    refuse(
        &[
            "create",
            "--level",
            "5",
            "--chunk",
            "2K",
            "--member-size",
            "4M",
            "n0",
            "n1",
            "n2",
        ],
        "power of two",
    );
    refuse(
        &[
            "create",
            "--level",
            "5",
            "--layout",
            "f2",
            "--member-size",
            "4M",
            "n0",
            "n1",
            "n2",
        ],
        "left-symmetric",
    );
    refuse(
        &[
            "create",
            "--level",
            "10",
            "--layout",
            "left-symmetric",
            "--member-size",
            "4M",
            "n0",
            "n1",
            "n2",
        ],
        "n2",
    );
    refuse(
        &[
            "create",
            "--level",
            "5",
            "--spares",
            "3",
            "--member-size",
            "4M",
            "n0",
            "n1",
            "n2",
        ],
        "spare",
    );
    refuse(
        &["create", "--level", "9", "--member-size", "4M", "n0", "n1"],
        "unknown RAID level",
    );
    refuse(
        &[
            "create",
            "--level",
            "5",
            "--member-size",
            "4Q",
            "n0",
            "n1",
            "n2",
        ],
        "not a size",
    );
    for f in ["n0", "n1", "n2"] {
        assert!(!d.join(f).exists(), "a refused create left {f} behind");
    }
    // Mixed arrays, duplicates, non-members.
    create(d, &["--level", "1", "--member-size", "4M"], &["o0", "o1"]);
    refuse(
        &["detail", "m0", "m1", "o0"],
        "give the members of one array only",
    );
    std::fs::write(d.join("plain"), vec![0u8; 1 << 20]).unwrap();
    refuse(&["detail", "m0", "plain"], "carries no md superblock");
    std::fs::copy(d.join("m0"), d.join("m0copy")).unwrap();
    refuse(&["export", "m0", "m0copy", "m1"], "same member");
    // Too many missing members.
    refuse(&["export", "m0"], "missing or stale");
    // Out-of-range export and import.
    refuse(
        &["export", "m0", "m1", "m2", "--offset", "1G"],
        "past the end",
    );
    refuse(
        &[
            "export", "m0", "m1", "m2", "--offset", "1M", "--length", "100M",
        ],
        "past the end",
    );
    std::fs::write(d.join("big"), vec![7u8; 9 << 20]).unwrap();
    refuse(
        &["import", "m0", "m1", "m2", "--input", "big"],
        "nothing was written",
    );
    // A corrupted superblock is named, not trusted.
    let mut bytes = std::fs::read(d.join("m2")).unwrap();
    bytes[4096 + 100] ^= 0xff;
    std::fs::write(d.join("bad"), &bytes).unwrap();
    raidlab()
        .current_dir(d)
        .args(["examine", "bad"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("checksum"));
    // --force overwrites an existing member.
    raidlab()
        .current_dir(d)
        .args(["create", "--level", "1", "--force", "m0", "m1"])
        .assert()
        .success();
}

#[test]
fn create_on_used_members_marks_resync_pending() {
    let dir = tempfile::tempdir().unwrap();
    for f in ["u0", "u1", "u2"] {
        std::fs::write(dir.path().join(f), pattern(4 << 20, 3)).unwrap();
    }
    create(
        dir.path(),
        &["--level", "5", "--chunk", "64K"],
        &["u0", "u1", "u2"],
    );
    let d = detail_json(dir.path(), &["u0", "u1", "u2"]);
    assert_eq!(d["resync_pending"], true);
    raidlab()
        .current_dir(dir.path())
        .args(["detail", "u0", "u1", "u2"])
        .assert()
        .success()
        .stdout(predicate::str::contains("resync pending"));
    // Spares: the last member is a spare.
    create(
        dir.path(),
        &["--level", "1", "--spares", "1", "--member-size", "4M"],
        &["s0", "s1", "s2"],
    );
    let d = detail_json(dir.path(), &["s2", "s1", "s0"]);
    let states: Vec<(String, String)> = d["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["device"].as_str().unwrap().into(),
                m["state"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(
        states.contains(&("s2".into(), "spare".into())),
        "{states:?}"
    );
    assert_eq!(d["raid_devices"], 2);
}

#[test]
fn examine_shows_mdadm_fields() {
    let dir = tempfile::tempdir().unwrap();
    create(
        dir.path(),
        &[
            "--level",
            "6",
            "--layout",
            "right-asymmetric",
            "--chunk",
            "128K",
            "--name",
            "lab",
            "--member-size",
            "8M",
        ],
        &["q0", "q1", "q2", "q3", "q4"],
    );
    let out = raidlab()
        .current_dir(dir.path())
        .args(["examine", "q3"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "Array UUID :",
        "Raid Level : raid6",
        "Layout : right-asymmetric",
        "Chunk Size : 128K",
        "Raid Devices : 5",
        "Device Role : Active device 3",
        "Checksum :",
        "- correct",
        "Array State : AAAAA",
        "Data Offset :",
        "Events :",
    ] {
        assert!(text.contains(needle), "examine lacks {needle:?}:\n{text}");
    }
    let out = raidlab()
        .current_dir(dir.path())
        .args(["examine", "--json", "q0", "q1"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 2);
    assert_eq!(v[0]["array_uuid"], v[1]["array_uuid"]);
}

/// `raidlab explain --json ARGS` (a request or a sequence), which must
/// succeed, parsed.
fn explain_json(args: &[&str]) -> serde_json::Value {
    let out = raidlab()
        .args(["explain", "--json"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn explain(args: &[&str]) -> (Vec<usize>, Vec<usize>) {
    let v = explain_json(args);
    let phases = v["phases"].as_array().unwrap();
    let count = |kind: &str| {
        phases
            .iter()
            .map(|p| {
                p["ops"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|o| o["kind"] == kind)
                    .count()
            })
            .collect()
    };
    (count("read"), count("write"))
}

#[test]
fn explain_shows_the_classic_plans() {
    assert_eq!(
        explain(&["--level", "5", "--raid-devices", "5", "write", "0", "4K"]),
        (vec![2, 0], vec![0, 2])
    );
    assert_eq!(
        explain(&["--level", "6", "--raid-devices", "6", "write", "0", "4K"]),
        (vec![3, 0], vec![0, 3])
    );
    assert_eq!(
        explain(&["--level", "6", "--raid-devices", "5", "write", "0", "4K"]),
        (vec![2, 0], vec![0, 3])
    );
    // Full stripe of a 5-member RAID 5 with 64K chunks: 256K of data, no reads.
    assert_eq!(
        explain(&[
            "--level",
            "5",
            "--raid-devices",
            "5",
            "--chunk",
            "64K",
            "write",
            "0",
            "256K"
        ]),
        (vec![0], vec![5])
    );
    // Reading a chunk of missing member 0 reads the other four.
    assert_eq!(
        explain(&[
            "--level",
            "5",
            "--raid-devices",
            "5",
            "--missing",
            "0",
            "read",
            "0",
            "4K"
        ]),
        (vec![4], vec![0])
    );
    raidlab()
        .args([
            "explain",
            "--level",
            "5",
            "--raid-devices",
            "5",
            "--missing",
            "0,1",
            "read",
            "0",
            "4K",
        ])
        .assert()
        .failure()
        .stderr(predicate::str::contains("tolerates one"));
    raidlab()
        .args([
            "explain",
            "--level",
            "5",
            "--raid-devices",
            "5",
            "read",
            "1T",
            "4K",
        ])
        .assert()
        .failure()
        .stderr(predicate::str::contains("past the end"));
}

/// `explain --position`: one request on a RAID 5 of four 64K-chunk members
/// mid-reshape, as JSON: each piece's geometry, array bytes and member
/// reads and writes.
fn explain_mid_reshape(args: &[&str]) -> (Vec<(String, u64, u64)>, u64, u64) {
    let v = explain_json(&[&["-l", "5", "-n", "4", "-c", "64K"], args].concat());
    let pieces = v["pieces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["geometry"].as_str().unwrap().to_string(),
                p["offset"].as_u64().unwrap(),
                p["length"].as_u64().unwrap(),
            )
        })
        .collect();
    (
        pieces,
        v["reads"].as_u64().unwrap(),
        v["writes"].as_u64().unwrap(),
    )
}

#[test]
fn explain_cuts_a_request_where_a_reshape_stands() {
    let grow = ["--to-raid-devices", "5", "--position", "1M"];
    let piece = |g: &str, at: u64, len: u64| (g.to_string(), at, len);
    // Across the position: the part below it read-modify-written in the
    // new geometry, the rest in the old one.
    assert_eq!(
        explain_mid_reshape(&[&grow[..], &["write", "1020K", "8K"]].concat()),
        (
            vec![piece("new", 1020 << 10, 4096), piece("old", 1 << 20, 4096)],
            4,
            4
        )
    );
    // A whole stripe of each geometry: five member writes below the
    // position (four data chunks), four above it (three).
    assert_eq!(
        explain_mid_reshape(&[&grow[..], &["write", "768K", "256K"]].concat()),
        (vec![piece("new", 768 << 10, 256 << 10)], 0, 5)
    );
    assert_eq!(
        explain_mid_reshape(&[&grow[..], &["write", "1152K", "192K"]].concat()),
        (vec![piece("old", 1152 << 10, 192 << 10)], 0, 4)
    );
    // Fewer members run backwards: the new geometry from the position on.
    assert_eq!(
        explain_mid_reshape(&[
            "--to-raid-devices",
            "3",
            "--position",
            "1M",
            "read",
            "1020K",
            "8K"
        ]),
        (
            vec![piece("old", 1020 << 10, 4096), piece("new", 1 << 20, 4096)],
            2,
            0
        )
    );
    // A new chunk keeps the member count: forwards unless told otherwise.
    let chunk = [
        "--to-chunk",
        "128K",
        "--position",
        "1536K",
        "read",
        "1532K",
        "8K",
    ];
    let (forwards, _, _) = explain_mid_reshape(&chunk);
    assert_eq!(forwards[0].0, "new");
    let (backwards, _, _) = explain_mid_reshape(&[&chunk[..], &["--backwards"]].concat());
    assert_eq!(backwards[0].0, "old");
    let refused = |args: &[&str], why: &str| {
        raidlab()
            .args(["explain", "-l", "5", "-n", "4", "-c", "64K"])
            .args(args)
            .assert()
            .failure()
            .stderr(predicate::str::contains(why));
    };
    // md's walk records a forward position on whole new stripes (256K).
    refused(
        &[
            "--to-raid-devices",
            "5",
            "--position",
            "1000K",
            "read",
            "0",
            "4K",
        ],
        "for example 786432 or 1048576",
    );
    refused(
        &["--to-raid-devices", "5", "read", "0", "4K"],
        "give --position too",
    );
    refused(
        &["--position", "1M", "read", "0", "4K"],
        "give --to-raid-devices, --to-chunk or --to-layout",
    );
    refused(
        &[&grow[..], &["--stripe-cache", "write", "0", "4K"]].concat(),
        "one request on an array mid-reshape",
    );
    refused(
        &[&grow[..], &["--backwards", "read", "0", "4K"]].concat(),
        "runs forwards",
    );
    // The array mid-reshape is the smaller geometry: 3 GiB here.
    refused(
        &[&grow[..], &["read", "3G", "4K"]].concat(),
        "past the end of the array while it is mid-reshape",
    );
    raidlab()
        .args(["explain", "-l", "1", "-n", "2", "--to-raid-devices", "3"])
        .args(["--position", "0", "read", "0", "4K"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("not restriped in place"));
    // md resumes a RAID 10 reshape at any position: cut there too.
    let v = explain_json(&[
        "-l",
        "10",
        "-n",
        "4",
        "-c",
        "64K",
        "--to-raid-devices",
        "5",
        "--position",
        "1000K",
        "read",
        "996K",
        "8K",
    ]);
    assert_eq!(v["pieces"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["pieces"][1]["offset"], 1000 << 10);
    // md's RAID 10 rules, asked of the engine's grow: never the far layout.
    raidlab()
        .args([
            "explain",
            "-l",
            "10",
            "-p",
            "f2",
            "-n",
            "4",
            "--to-raid-devices",
            "5",
        ])
        .args(["--position", "0", "read", "0", "4K"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "Cannot reshape RAID10 in far-mode",
        ));
}

#[test]
fn bench_parity_reports_every_engine_and_one_choice() {
    let out = raidlab()
        .args([
            "bench",
            "parity",
            "--json",
            "--data-disks",
            "4",
            "--chunk",
            "16K",
            "--seconds",
            "0.02",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v.as_array().unwrap();
    for op in ["xor", "pq", "recover2"] {
        let of_op: Vec<_> = rows.iter().filter(|r| r["op"] == op).collect();
        assert!(!of_op.is_empty(), "no {op} rows");
        assert_eq!(
            of_op.iter().filter(|r| r["selected"] == true).count(),
            1,
            "{op}: exactly one selected engine"
        );
        for r in of_op {
            assert_eq!(r["data_disks"], 4);
            assert_eq!(r["chunk_bytes"], 16384);
            assert!(r["gbps"].as_f64().unwrap() > 0.0);
            assert!(r["engine"].as_str().is_some());
        }
    }
    raidlab()
        .args(["bench", "parity", "--data-disks", "1"])
        .assert()
        .failure();
}

#[test]
fn a_member_in_use_is_refused_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    create(
        dir.path(),
        &["--level", "1", "--member-size", "4M"],
        &["l0", "l1"],
    );
    // An import reading a pipe that stays open holds the members locked.
    let bin = assert_cmd::cargo::cargo_bin("raidlab");
    let mut holder = std::process::Command::new(bin)
        .current_dir(dir.path())
        .args(["import", "l0", "l1"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the holder really holds its exclusive lock (a FLOCK WRITE entry
    // with its pid in /proc/locks). Exporting before that would race it: the
    // export's shared lock could come first and the import would be refused.
    let pid = holder.id().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Some(status) = holder.try_wait().unwrap() {
            panic!("the holding import exited early ({status}) before it took its lock");
        }
        let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
        if locks.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.windows(4)
                .any(|w| w[0] == "FLOCK" && w[2] == "WRITE" && w[3] == pid)
        }) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the holding import never took its lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = raidlab()
        .current_dir(dir.path())
        .args(["export", "l0", "l1", "--length", "4K"])
        .output()
        .unwrap();
    let refused = (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).to_string());
    drop(holder.stdin.take());
    holder.wait().unwrap();
    let msg = refused.expect("export ran while import held the members");
    assert!(
        msg.contains("locked by process") && msg.contains("import"),
        "{msg}"
    );
}

#[test]
fn failure_verbs_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    create(
        d,
        &[
            "--level",
            "6",
            "--chunk",
            "64K",
            "--member-size",
            "8M",
            "--spares",
            "1",
        ],
        &["m0", "m1", "m2", "m3", "m4"],
    );
    let data = pattern(9_000_000, 4);
    std::fs::write(d.join("in"), &data).unwrap();
    raidlab()
        .current_dir(d)
        .args(["import", "m0", "m1", "m2", "m3", "m4", "--input", "in"])
        .assert()
        .success();
    let same = |members: &[&str]| {
        let mut args = vec!["export"];
        args.extend(members);
        args.extend(["--length", "9000000"]);
        let out = raidlab().current_dir(d).args(&args).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout == data, "export of {members:?} differs");
    };
    // Fail: the hot spare takes over and is rebuilt at once.
    raidlab()
        .current_dir(d)
        .args(["fail", "m0", "m1", "m2", "m3", "m4", "--member", "m1"])
        .assert()
        .success()
        .stdout(predicate::str::contains("hot spare m4"));
    let det = detail_json(d, &["m0", "m1", "m2", "m3", "m4"]);
    assert_eq!(det["state"], "clean");
    // Two more failures are within RAID 6's tolerance; a third is refused, nothing written.
    raidlab()
        .current_dir(d)
        .args(["fail", "m0", "m2", "m3", "m4", "--member", "m0"])
        .assert()
        .success();
    raidlab()
        .current_dir(d)
        .args(["fail", "m2", "m3", "m4", "--member", "m2"])
        .assert()
        .success();
    let files = paths(d, &["m3", "m4"]);
    let before = snapshot(&files);
    raidlab()
        .current_dir(d)
        .args(["fail", "m3", "m4", "--member", "m3"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("nothing was changed"));
    assert!(snapshot(&files) == before);
    same(&["m3", "m4"]);
    // Remove the failed ones; add new members: each goes into a missing slot and is rebuilt.
    raidlab()
        .current_dir(d)
        .args(["remove", "m3", "m4", "m0", "--member", "m0"])
        .assert()
        .success();
    raidlab()
        .current_dir(d)
        .args(["remove", "m3", "m4", "--member", "m3"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("fail it first"));
    raidlab()
        .current_dir(d)
        .args(["add", "m3", "m4", "--new", "n0", "--member-size", "8M"])
        .assert()
        .success()
        .stdout(predicate::str::contains("rebuilt n0"));
    raidlab()
        .current_dir(d)
        .args([
            "add",
            "m3",
            "m4",
            "n0",
            "--new",
            "n1",
            "--member-size",
            "8M",
        ])
        .assert()
        .success();
    // The rebuilt members alone (with one original) hold the data.
    same(&["n0", "n1", "m4"]);
    raidlab()
        .current_dir(d)
        .args(["check", "m3", "m4", "n0", "n1"])
        .assert()
        .success()
        .stdout(predicate::str::contains("mismatch_cnt: 0"));
    // Replace keeps redundancy and swaps at the end.
    raidlab()
        .current_dir(d)
        .args([
            "replace",
            "m3",
            "m4",
            "n0",
            "n1",
            "--old",
            "m3",
            "--with",
            "r0",
            "--member-size",
            "8M",
        ])
        .assert()
        .success();
    let det = detail_json(d, &["m3", "m4", "n0", "n1", "r0"]);
    let m3 = det["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["device"] == "m3")
        .unwrap()
        .clone();
    assert_eq!(m3["state"], "faulty");
    same(&["r0", "n0", "n1"]);
    // Adding a device that is too small, or already in an array, is refused.
    raidlab()
        .current_dir(d)
        .args([
            "add",
            "m4",
            "n0",
            "n1",
            "r0",
            "--new",
            "tiny",
            "--member-size",
            "1M",
        ])
        .assert()
        .failure()
        .stderr(predicate::str::contains("needs"));
    assert!(
        !d.join("tiny").exists(),
        "a refused add removes the file it created"
    );
    raidlab()
        .current_dir(d)
        .args(["add", "m4", "n0", "n1", "r0", "--new", "o0"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("does not exist"));
}

#[test]
fn check_finds_corruption_and_repair_fixes_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    create(
        d,
        &["--level", "6", "--chunk", "64K", "--member-size", "8M"],
        &["a", "b", "c", "e"],
    );
    let data = pattern(4_000_000, 8);
    std::fs::write(d.join("in"), &data).unwrap();
    raidlab()
        .current_dir(d)
        .args(["import", "a", "b", "c", "e", "--input", "in"])
        .assert()
        .success();
    // Flip a byte of member "b" inside its data area (data offset 1 MiB for 8M
    // members), in its first chunk: in stripe 0 of a 4-member left-symmetric RAID 6,
    // role 0 holds Q, roles 1 and 2 data, role 3 P.
    let mut bytes = std::fs::read(d.join("b")).unwrap();
    bytes[(1 << 20) + 5000] ^= 0x42;
    std::fs::write(d.join("b"), &bytes).unwrap();
    let out = raidlab()
        .current_dir(d)
        .args(["check", "--json", "a", "b", "c", "e"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "mismatches give exit status 3");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["mismatch_sectors"], 8);
    raidlab()
        .current_dir(d)
        .args(["repair", "a", "b", "c", "e"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "fixed b (role 1) at sector 8: data (located from P+Q)",
        ));
    raidlab()
        .current_dir(d)
        .args(["check", "a", "b", "c", "e"])
        .assert()
        .success();
    assert!(
        export(d, &["a", "b", "c", "e"])[..data.len()] == data[..],
        "RAID 6 repair corrected the data itself"
    );
}

/// A degraded RAID 6 is checked against the syndrome it has left: a corrupted Q
/// on a present member gives exit status 3 and names it, `repair` rewrites it
/// (and only it), the next check exits 0 and the data reads back. A degraded
/// RAID 5 has nothing left to compare and is refused.
#[test]
fn check_and_repair_a_degraded_raid6_and_refuse_a_degraded_raid5() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    create(
        d,
        &["--level", "6", "--chunk", "64K", "--member-size", "8M"],
        &["a", "b", "c", "e"],
    );
    let data = pattern(4_000_000, 9);
    std::fs::write(d.join("in"), &data).unwrap();
    raidlab()
        .current_dir(d)
        .args(["import", "a", "b", "c", "e", "--input", "in"])
        .assert()
        .success();
    let degraded = ["a", "missing", "c", "e"];
    raidlab()
        .current_dir(d)
        .arg("check")
        .args(degraded)
        .assert()
        .success()
        .stdout(predicate::str::contains("mismatch_cnt: 0"))
        .stdout(predicate::str::contains("degraded: role(s) [1] missing"));
    // Stripe 0 of a 4-member left-symmetric RAID 6: role 0 (a) holds Q, roles 1
    // and 2 data, role 3 P. With role 1 missing its data is rebuilt from P and Q
    // is checked; corrupt Q in its second page (data offset 1 MiB).
    let mut bytes = std::fs::read(d.join("a")).unwrap();
    bytes[(1 << 20) + 5000] ^= 0x42;
    std::fs::write(d.join("a"), &bytes).unwrap();
    let out = raidlab()
        .current_dir(d)
        .args(["check", "--json"])
        .args(degraded)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "mismatches give exit status 3");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["mismatch_sectors"], 8);
    assert_eq!(v["missing_roles"], serde_json::json!([1]));
    assert_eq!(v["findings"][0]["role"], 0);
    assert_eq!(v["findings"][0]["sector"], 8);
    assert!(v["pages_checked_q_only"].as_u64().unwrap() > 0);
    assert!(v["pages_checked_p_only"].as_u64().unwrap() > 0);
    raidlab()
        .current_dir(d)
        .arg("repair")
        .args(degraded)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "fixed a (role 0) at sector 8: syndrome Q (checked alone: data role 1 missing",
        ))
        .stdout(predicate::str::contains("cannot be located"));
    raidlab()
        .current_dir(d)
        .arg("check")
        .args(degraded)
        .assert()
        .success();
    assert!(export(d, &degraded)[..data.len()] == data[..]);

    create(
        d,
        &["--level", "5", "--chunk", "64K", "--member-size", "8M"],
        &["x", "y", "z"],
    );
    let members = paths(d, &["x", "z"]);
    let before = snapshot(&members);
    for verb in ["check", "repair"] {
        raidlab()
            .current_dir(d)
            .args([verb, "x", "missing", "z"])
            .assert()
            .failure()
            .stderr(predicate::str::contains("nothing left to compare"));
    }
    assert_eq!(snapshot(&members), before, "refusals write nothing");
}

/// md resyncs a RAID 6 with one member missing; so does `raidlab resync`, and
/// says what it checked with one syndrome left.
#[test]
fn resync_of_a_degraded_raid6_makes_it_clean() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (i, f) in ["g0", "g1", "g2", "g3"].iter().enumerate() {
        std::fs::write(d.join(f), pattern(4 << 20, 20 + i as u8)).unwrap();
    }
    // Members that held data: resync pending, parity disagrees with the data.
    create(
        d,
        &["--level", "6", "--chunk", "64K"],
        &["g0", "g1", "g2", "g3"],
    );
    let degraded = ["g0", "g1", "missing", "g3"];
    raidlab()
        .current_dir(d)
        .arg("check")
        .args(degraded)
        .assert()
        .code(3);
    raidlab()
        .current_dir(d)
        .arg("resync")
        .args(degraded)
        .assert()
        .success()
        .stdout(predicate::str::contains("resync complete"))
        .stdout(predicate::str::contains("degraded: role(s) [2] missing"))
        .stdout(predicate::str::contains("RAID 6 with one syndrome left"));
    assert_eq!(detail_json(d, &degraded)["resync_pending"], false);
    raidlab()
        .current_dir(d)
        .arg("check")
        .args(degraded)
        .assert()
        .success()
        .stdout(predicate::str::contains("mismatch_cnt: 0"));
}

#[test]
fn a_dirty_degraded_array_is_refused_unless_forced_and_resync_cleans() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for f in ["u0", "u1", "u2"] {
        std::fs::write(d.join(f), pattern(4 << 20, 5)).unwrap();
    }
    // Members that held data: resync pending (not clean).
    create(d, &["--level", "5", "--chunk", "64K"], &["u0", "u1", "u2"]);
    raidlab()
        .current_dir(d)
        .args(["export", "u0", "u1", "--length", "4K"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("not shut down cleanly"));
    raidlab()
        .current_dir(d)
        .args([
            "export",
            "u0",
            "u1",
            "--length",
            "4K",
            "--start-degraded-dirty",
        ])
        .assert()
        .success();
    raidlab()
        .current_dir(d)
        .args(["check", "u0", "u1", "u2"])
        .assert()
        .code(3);
    raidlab()
        .current_dir(d)
        .args(["resync", "u0", "u1", "u2"])
        .assert()
        .success();
    assert_eq!(detail_json(d, &["u0", "u1", "u2"])["resync_pending"], false);
    raidlab()
        .current_dir(d)
        .args(["check", "u0", "u1", "u2"])
        .assert()
        .success();
    raidlab()
        .current_dir(d)
        .args(["export", "u0", "u1", "--length", "4K"])
        .assert()
        .success();
    raidlab()
        .current_dir(d)
        .args(["resync", "u0", "u1", "u2"])
        .assert()
        .success()
        .stdout(predicate::str::contains("already in sync"));
}

/// md's partial parity log through the CLI: created and reported, written
/// through (unaligned writes too), read degraded; after a crash that left a
/// stripe's parity stale, a degraded read is refused until the log is replayed,
/// `resync` replays it (no full resync), and the data read degraded is right.
#[test]
fn ppl_closes_the_write_hole_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let names = ["p0", "p1", "p2", "p3"];
    create(
        d,
        &[
            "--level",
            "5",
            "--chunk",
            "16K",
            "--member-size",
            "4M",
            "--consistency-policy",
            "ppl",
        ],
        &names,
    );
    let js = detail_json(d, &names);
    assert_eq!(js["consistency_policy"], "ppl");
    let size = js["array_size_bytes"].as_u64().unwrap() as usize;
    let mut want = pattern(size, 9);
    std::fs::write(d.join("data"), &want).unwrap();
    raidlab()
        .current_dir(d)
        .args(["import", "p0", "p1", "p2", "p3", "--input", "data"])
        .assert()
        .success();
    // An unaligned write: merged with the sectors around it.
    let small = pattern(1000, 3);
    std::fs::write(d.join("small"), &small).unwrap();
    raidlab()
        .current_dir(d)
        .args([
            "import", "p0", "p1", "p2", "p3", "--input", "small", "--offset", "70001",
        ])
        .assert()
        .success();
    want[70001..71001].copy_from_slice(&small);
    assert!(export(d, &names) == want, "complete export differs");
    assert!(
        export(d, &["p0", "missing", "p2", "p3"]) == want,
        "degraded export differs"
    );
    raidlab()
        .current_dir(d)
        .args(["check", "p0", "p1", "p2", "p3"])
        .assert()
        .success();

    // The crash: 8 KiB into data chunk 0 of stripe 1; the log reached the
    // media, the parity update did not.
    let stripe = 3 * (16 << 10);
    let new = pattern(8192, 77);
    let members: Vec<String> = names
        .iter()
        .map(|n| d.join(n).display().to_string())
        .collect();
    common::ppl_crash(&members, stripe as u64, &new).unwrap();
    want[stripe..stripe + 8192].copy_from_slice(&new);
    // Without the member holding the untouched data chunk 1 of that stripe,
    // reading needs parity: refused until the log is replayed.
    let layout_missing = {
        use raidlab_layout::{Geometry, Layout, Level, ParityLayout};
        let g = Geometry::new(
            Level::Raid5,
            Layout::Parity(ParityLayout::LeftSymmetric),
            16 << 10,
            4,
            1 << 20,
        )
        .unwrap();
        g.stripe(1).data[1]
    };
    let degraded: Vec<&str> = names
        .iter()
        .enumerate()
        .map(|(i, n)| if i == layout_missing { "missing" } else { *n })
        .collect();
    raidlab()
        .current_dir(d)
        .arg("export")
        .args(&degraded)
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "partial parity log has not been replayed",
        ));
    // With --force (what a user who ignored the warning would get) the untouched
    // chunk reads wrong: the write hole is real.
    let forced = raidlab()
        .current_dir(d)
        .arg("export")
        .args(&degraded)
        .arg("--force")
        .output()
        .unwrap();
    assert!(forced.status.success());
    assert!(
        forced.stdout != want,
        "a stale parity must show through a forced degraded read"
    );
    raidlab()
        .current_dir(d)
        .arg("resync")
        .args(&degraded)
        .assert()
        .success()
        .stdout(predicate::str::contains("partial parity log was replayed"))
        .stderr(predicate::str::contains(
            "replayed 1 partial parity log entry",
        ));
    assert!(
        export(d, &degraded) == want,
        "degraded export after the replay differs"
    );
}

#[test]
fn detail_prints_mkfs_alignment_for_striped_levels_only() {
    let d = tempfile::tempdir().unwrap();
    let m = ["a0", "a1", "a2", "a3", "a4"];
    create(
        d.path(),
        &["-l", "6", "-c", "128K", "--member-size", "8M"],
        &m,
    );
    let j = detail_json(d.path(), &m);
    // 128K chunk = 32 ext4 blocks; RAID 6 of 5 has 3 data disks.
    assert_eq!(
        j["mkfs"]["ext4"],
        "mkfs.ext4 -b 4096 -E stride=32,stripe-width=96"
    );
    assert_eq!(j["mkfs"]["xfs"], "mkfs.xfs -d su=128k,sw=3");
    raidlab()
        .current_dir(d.path())
        .arg("detail")
        .args(m)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "XFS Alignment : mkfs.xfs -d su=128k,sw=3",
        ));
    let r1 = ["b0", "b1"];
    create(d.path(), &["-l", "1", "--member-size", "8M"], &r1);
    assert!(detail_json(d.path(), &r1)["mkfs"].is_null());
}

/// md's write journal through the CLI, on RAID 6: created with --write-journal
/// and reported; written through (an unaligned write too) and read back,
/// complete and degraded; refused without its journal device. After a crash
/// that left a stripe's P and Q stale (journal and data durable), a degraded
/// read is refused until the journal is replayed, a forced one shows the write
/// hole, and opening it for writing (`resync`) replays the journal: the degraded
/// read is then right and `check` finds nothing.
#[test]
fn journal_closes_the_raid6_write_hole_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let names = ["j0", "j1", "j2", "j3"];
    let mut args = vec![
        "create",
        "--level",
        "6",
        "--chunk",
        "16K",
        "--member-size",
        "4M",
        "--write-journal",
        "jdev",
    ];
    args.extend(names);
    raidlab()
        .current_dir(d)
        .args(&args)
        .assert()
        .success()
        .stdout(predicate::str::contains("write journal on jdev"));
    let with_j = ["j0", "j1", "j2", "j3", "jdev"];
    let js = detail_json(d, &with_j);
    assert_eq!(js["consistency_policy"], "journal");
    assert_eq!(js["members"][4]["state"], "journal");
    let text = raidlab()
        .current_dir(d)
        .arg("detail")
        .args(with_j)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("Consistency Policy : journal"), "{text}");
    assert!(text.contains("Journal : jdev (write-through"), "{text}");
    let size = js["array_size_bytes"].as_u64().unwrap() as usize;
    let mut want = pattern(size, 5);
    std::fs::write(d.join("data"), &want).unwrap();
    raidlab()
        .current_dir(d)
        .arg("import")
        .args(with_j)
        .args(["--input", "data"])
        .assert()
        .success();
    let small = pattern(1000, 4);
    std::fs::write(d.join("small"), &small).unwrap();
    raidlab()
        .current_dir(d)
        .arg("import")
        .args(with_j)
        .args(["--input", "small", "--offset", "70001"])
        .assert()
        .success();
    want[70001..71001].copy_from_slice(&small);
    assert!(export(d, &with_j) == want, "complete export differs");
    // Without the journal device: refused, as mdadm refuses it.
    raidlab()
        .current_dir(d)
        .arg("import")
        .args(names)
        .args(["--input", "small"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "journal device is missing or stale",
        ));
    raidlab()
        .current_dir(d)
        .arg("check")
        .args(with_j)
        .assert()
        .success();

    // The crash: 8 KiB into data chunk 0 of stripe 1.
    let stripe = 2 * (16 << 10);
    let new = pattern(8192, 66);
    let devices: Vec<String> = with_j
        .iter()
        .map(|n| d.join(n).display().to_string())
        .collect();
    common::journal_crash(&devices, stripe as u64, &new).unwrap();
    want[stripe..stripe + 8192].copy_from_slice(&new);
    let data1 = {
        use raidlab_layout::{Geometry, Layout, Level, ParityLayout};
        Geometry::new(
            Level::Raid6,
            Layout::Parity(ParityLayout::LeftSymmetric),
            16 << 10,
            4,
            1 << 20,
        )
        .unwrap()
        .stripe(1)
        .data[1]
    };
    let degraded: Vec<&str> = with_j
        .iter()
        .enumerate()
        .map(|(i, n)| if i == data1 { "missing" } else { *n })
        .collect();
    raidlab()
        .current_dir(d)
        .arg("export")
        .args(&degraded)
        .assert()
        .failure()
        .stderr(predicate::str::contains("not yet replayed"));
    let forced = raidlab()
        .current_dir(d)
        .arg("export")
        .args(&degraded)
        .arg("--force")
        .output()
        .unwrap();
    assert!(forced.status.success());
    assert!(
        forced.stdout != want,
        "stale P and Q must show through a forced degraded read"
    );
    raidlab()
        .current_dir(d)
        .arg("resync")
        .args(&degraded)
        .assert()
        .success()
        .stdout(predicate::str::contains("write journal was replayed"))
        .stderr(predicate::str::contains("replayed the write journal"));
    assert!(
        export(d, &degraded) == want,
        "degraded export after the replay differs"
    );
    raidlab()
        .current_dir(d)
        .arg("check")
        .args(with_j)
        .assert()
        .success();
    // Membership changes go to the journal device's superblock too (its role
    // table), while the journal keeps its own journal_tail.
    raidlab()
        .current_dir(d)
        .arg("fail")
        .args(with_j)
        .args(["--member", "j1"])
        .assert()
        .success();
    raidlab()
        .current_dir(d)
        .args([
            "add",
            "j0",
            "j2",
            "j3",
            "jdev",
            "--new",
            "j4",
            "--member-size",
            "4M",
        ])
        .assert()
        .success();
    let now = ["j0", "j4", "j2", "j3", "jdev"];
    let js = detail_json(d, &now);
    assert_eq!(js["missing_roles"], serde_json::json!([]), "{js}");
    let j4 = js["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["device"] == "j4")
        .unwrap();
    assert_eq!(j4["role"], 1, "{js}");
    assert_eq!(j4["state"], "active", "{js}");
    raidlab()
        .current_dir(d)
        .arg("check")
        .args(now)
        .assert()
        .success();
    assert!(export(d, &now) == want, "export after fail and add differs");
}

/// (reads, writes) per request of an `explain` sequence, the final flush last.
fn explain_sequence(args: &[&str]) -> Vec<(u64, u64)> {
    let v = explain_json(args);
    v["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["reads"].as_u64().unwrap(), r["writes"].as_u64().unwrap()))
        .collect()
}

/// How many of a request's metadata operations are `what`, of `kind`, and
/// on which devices.
fn metadata_ops(request: &serde_json::Value, what: &str, kind: &str) -> Vec<u64> {
    request["metadata"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["what"] == what && m["kind"] == kind)
        .map(|m| m["member"].as_u64().unwrap())
        .collect()
}

#[test]
fn explain_shows_the_superblocks_and_bitmap_a_first_write_to_a_clean_array_writes() {
    let base = ["-l", "5", "-n", "4", "--bitmap", "--bitmap-chunk", "1M"];
    let sorted = |mut d: Vec<u64>| {
        d.sort_unstable();
        d
    };
    // A whole stripe, then 4K in the same bitmap chunk (held), then the flush.
    let v = explain_json(&[&base[..], &["write", "0", "1536K", "write", "1536K", "4K"]].concat());
    let requests = v["requests"].as_array().unwrap();
    let first = &requests[0];
    // The dirty mark: every member's superblock, with its bitmap beside it
    // (one commit), then the write's intent bit on every member's bitmap;
    // each made durable by a flush of every member, before the data.
    assert_eq!(
        sorted(metadata_ops(first, "superblock", "write")),
        vec![0, 1, 2, 3],
        "{first}"
    );
    assert_eq!(
        sorted(metadata_ops(first, "bitmap", "write")),
        vec![0, 0, 1, 1, 2, 2, 3, 3],
        "{first}"
    );
    assert_eq!(
        sorted(metadata_ops(first, "flush", "flush")),
        vec![0, 0, 1, 1, 2, 2, 3, 3],
        "{first}"
    );
    assert_eq!(
        (first["reads"].as_u64(), first["writes"].as_u64()),
        (Some(0), Some(4))
    );
    // Already dirty, and the chunk's bit already set: neither the held write
    // nor its going down at the flush writes metadata.
    for r in &requests[1..] {
        assert_eq!(r["metadata"].as_array().unwrap().len(), 0, "{r}");
    }
    // A lone 4K write is held: the dirty mark comes with it, its intent bit
    // when it goes down (at the flush), before its data.
    let v = explain_json(&[&base[..], &["--stripe-cache", "write", "0", "4K"]].concat());
    let (first, flush) = (&v["requests"][0], &v["requests"][1]);
    assert_eq!(
        metadata_ops(first, "superblock", "write").len(),
        4,
        "{first}"
    );
    assert_eq!(metadata_ops(first, "bitmap", "write").len(), 4, "{first}");
    assert_eq!(
        metadata_ops(flush, "superblock", "write").len(),
        0,
        "{flush}"
    );
    assert_eq!(metadata_ops(flush, "bitmap", "write").len(), 4, "{flush}");
    assert_eq!(
        (flush["reads"].as_u64(), flush["writes"].as_u64()),
        (Some(2), Some(2))
    );
    // Without a bitmap the dirty mark is the superblocks alone.
    let v = explain_json(&[
        "-l", "5", "-n", "4", "write", "0", "4K", "write", "8K", "4K",
    ]);
    let first = &v["requests"][0];
    assert_eq!(
        metadata_ops(first, "superblock", "write").len(),
        4,
        "{first}"
    );
    assert_eq!(metadata_ops(first, "bitmap", "write").len(), 0, "{first}");
    // In text, each one labelled.
    raidlab()
        .args(["explain"])
        .args(base)
        .args(["write", "0", "4K"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "offset 4096         length 4K (superblock)",
        ))
        .stdout(predicate::str::contains("(bitmap)"))
        .stdout(predicate::str::contains("metadata operation(s)"));
}

#[test]
fn explain_shows_the_stripe_cache_merging_sequential_writes_into_whole_stripes() {
    let base = ["--level", "5", "--raid-devices", "4"];
    // Alone, a 1M write covers 2 of a stripe's 3 chunks: it reads.
    let (reads, _) = explain(&[&base[..], &["write", "0", "1M"]].concat());
    assert!(reads.iter().sum::<usize>() > 0);
    // In a sequence, the stripe cache holds it until the next one fills the
    // stripe: two whole stripes (4 writes each), no reads, nothing left over.
    let seq = explain_sequence(
        &[
            &base[..],
            &["write", "0", "1M", "write", "1M", "1M", "write", "2M", "1M"],
        ]
        .concat(),
    );
    assert_eq!(seq, vec![(0, 0), (0, 4), (0, 4), (0, 0)]);
    // A lone 4K write is held, then written at the flush at md's cost (2 + 2).
    let one = explain_sequence(&[&base[..], &["--stripe-cache", "write", "0", "4K"]].concat());
    assert_eq!(one, vec![(0, 0), (2, 2)]);
    // A read of held data is served from the cache.
    let read = explain_sequence(&[&base[..], &["write", "0", "8K", "read", "0", "8K"]].concat());
    assert_eq!(read[1], (0, 0));
    // Requests are triples.
    raidlab()
        .args([
            "explain", "-l", "5", "-n", "4", "write", "0", "1M", "write", "1M",
        ])
        .assert()
        .failure()
        .stderr(predicates::str::contains("triples"));
}

/// `serve --journal-mode write-back` needs a write journal: an array without
/// one (RAID 5 here; RAID 1 can have none) is refused with md's reason, and
/// so is a --plain file; an unknown mode names the two there are.
#[test]
fn write_back_without_a_journal_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    create(
        d,
        &["--level", "5", "--member-size", "4M"],
        &["w0", "w1", "w2"],
    );
    let sock = d.join("s.sock");
    let sock = sock.to_str().unwrap();
    raidlab()
        .current_dir(d)
        .args(["serve", "--socket", sock, "--journal-mode", "write-back"])
        .args(["w0", "w1", "w2"])
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .failure()
        .stderr(predicate::str::contains("write-back needs a write journal"));
    raidlab()
        .current_dir(d)
        .args([
            "serve",
            "--socket",
            sock,
            "--plain",
            "--journal-mode",
            "write-back",
            "w0",
        ])
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .failure()
        .stderr(predicate::str::contains("not a --plain file"));
    raidlab()
        .current_dir(d)
        .args([
            "serve",
            "--socket",
            sock,
            "--journal-mode",
            "write-later",
            "w0",
        ])
        .assert()
        .failure()
        .stderr(
            predicate::str::contains("write-through").and(predicate::str::contains("write-back")),
        );
}
