//! `raidlab grow --raid-devices N --array-size SIZE` with N below the
//! member count of a RAID 4/5/6: md's backward reshape (the data offset
//! moves up, the walk goes from the end of the array to its start) on real
//! member files. What the new members hold of the data written before
//! reads back byte for byte after, `check` finds no mismatch, the
//! superblocks say what md writes at the end of a reshape and the members
//! that left are spares; a shrink killed (SIGKILL) at random points reads
//! back exactly while stopped (read-only) and after `--continue`; a stop
//! request checkpoints; every refusal leaves every member file as it was.

mod common;

use common::verbs::*;
use std::path::Path;
use std::time::Duration;

const MIB: usize = 1 << 20;

/// A RAID `level` array over `members` (16 MiB files, 64K chunk) using
/// 14 MiB of each, so that each member has room after its data for md's
/// move of the data offset up; filled with a pattern, returned.
fn create_shrinkable(d: &Path, members: &[&str], level: &str) -> Vec<u8> {
    ok(
        d,
        &with(
            "create",
            members,
            &["--member-size", "16M", "--level", level, "--chunk", "64K"],
        ),
    );
    ok(d, &with("grow", members, &["--size", "14M"]));
    let bytes = detail(d, members)["array_size_bytes"].as_u64().unwrap();
    let a = pattern(bytes as usize, members.len() as u8 * 17 + 3);
    std::fs::write(d.join("a.bin"), &a).unwrap();
    ok(d, &with("import", members, &["--input", "a.bin"]));
    a
}

fn parity(level: &str) -> usize {
    if level == "6" {
        2
    } else {
        1
    }
}

/// What `n` members of 14 MiB hold.
fn holds(level: &str, n: usize) -> usize {
    (n - parity(level)) * 14 * MIB
}

fn data_offset(d: &Path, m: &str) -> u64 {
    examine(d, m)["data_offset"].as_u64().unwrap()
}

/// After a shrink to `kept` (the members that left: `left`): the array is
/// what the new members hold, its bytes the old array's first ones, no
/// mismatch, md's end-of-reshape fields, the data offset moved up, and the
/// members that left are spares.
fn assert_shrunk(d: &Path, kept: &[&str], left: &[&str], level: &str, a: &[u8], old_offset: u64) {
    let mut all = kept.to_vec();
    all.extend_from_slice(left);
    let v = detail(d, &all);
    let size = v["array_size_bytes"].as_u64().unwrap() as usize;
    assert_eq!(size, holds(level, kept.len()), "{v}");
    let got = export(d, &all);
    assert_eq!(got.len(), size);
    assert!(
        got == a[..size],
        "RAID {level}: the data the new members hold changed"
    );
    check_clean(d, &all);
    for m in kept {
        let e = examine(d, m);
        assert_eq!(e["raid_devices"].as_u64(), Some(kept.len() as u64), "{e}");
        assert_eq!(
            e["feature_map"].as_u64().unwrap() & (4 | 64 | 128),
            0,
            "{m}: reshape flags left set: {e}"
        );
        let off = e["data_offset"].as_u64().unwrap();
        assert!(off > old_offset, "{m}: data offset {off} did not move up");
    }
    for m in left {
        let e = examine(d, m);
        assert_eq!(e["role"].as_str(), Some("Spare"), "{m}: {e}");
    }
}

#[test]
fn raid5_raid6_and_raid4_shrink_and_read_back_exactly() {
    for (level, n, to) in [("5", 5, 4), ("6", 6, 5), ("4", 4, 3), ("6", 6, 4)] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let names = ["m0", "m1", "m2", "m3", "m4", "m5"];
        let old = &names[..n];
        let a = create_shrinkable(d, old, level);
        let off = data_offset(d, "m0");
        let size = format!("{}K", holds(level, to) / 1024);
        let out = ok(
            d,
            &with(
                "grow",
                old,
                &["--raid-devices", &to.to_string(), "--array-size", &size],
            ),
        );
        assert!(out.contains("reshape done"), "RAID {level}: {out}");
        assert!(out.contains("moved up"), "RAID {level}: {out}");
        assert!(out.contains("spare(s) now"), "RAID {level}: {out}");
        assert_shrunk(d, &names[..to], &names[to..n], level, &a, off);
    }
}

/// Whether m0 records a reshape, and its member count.
fn state(d: &Path) -> (bool, u64) {
    let e = examine(d, "m0");
    (
        e["feature_map"].as_u64().unwrap() & 4 != 0,
        e["raid_devices"].as_u64().unwrap(),
    )
}

#[test]
fn a_shrink_killed_at_random_points_reads_back_exactly_and_continue_finishes_it() {
    // A rate limit makes the run last a few seconds, so the kills land
    // anywhere in it: between steps, inside a step's writes, inside a
    // checkpoint. The delays come from a fixed seed (printed on failure).
    let mut x: u32 = 0x2545_f491;
    let mut delays = Vec::new();
    for _ in 0..6 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        delays.push(Duration::from_millis(150 + u64::from(x % 2600)));
    }
    let mut mid = 0;
    for (k, delay) in delays.into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let level = if k % 2 == 0 { "5" } else { "6" };
        let old = ["m0", "m1", "m2", "m3", "m4"];
        let kept = &old[..4];
        let a = create_shrinkable(d, &old, level);
        let off = data_offset(d, "m0");
        let size = format!("{}K", holds(level, 4) / 1024);
        let shrink = with(
            "grow",
            &old,
            &[
                "--raid-devices",
                "4",
                "--array-size",
                &size,
                "--max-rate",
                "8M",
            ],
        );
        killed_after(d, &shrink, delay);
        let what = format!("RAID {level}, killed after {delay:?}");
        match state(d) {
            (true, 4) => {
                // Stopped mid-reshape: the array reads (read-only) exactly
                // what the new members will hold.
                mid += 1;
                let got = export(d, &old);
                assert!(
                    got == a[..holds(level, 4)],
                    "{what}: the stopped array reads other bytes"
                );
                // (Killed right after the start was recorded, the walk
                // has not left the end yet: the run is no resume then.)
                let out = ok(d, &with("grow", &old, &["--continue"]));
                assert!(out.contains("reshape done"), "{what}: {out}");
            }
            (false, 5) => {
                // Killed before the reshape was recorded: nothing changed.
                assert!(export(d, &old) == a, "{what}: changed before its reshape");
                ok(d, &shrink);
            }
            (false, 4) => {}
            s => panic!("{what}: unexpected state {s:?}"),
        }
        assert_shrunk(d, kept, &old[4..], level, &a, off);
    }
    assert!(mid >= 2, "only {mid} kills landed mid-reshape");
}

#[test]
fn a_stop_request_checkpoints_and_continue_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let old = ["m0", "m1", "m2", "m3"];
    let a = create_shrinkable(d, &old, "5");
    let off = data_offset(d, "m0");
    let size = format!("{}K", holds("5", 3) / 1024);
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_raidlab"))
        .current_dir(d)
        .args(with(
            "grow",
            &old,
            &[
                "--raid-devices",
                "3",
                "--array-size",
                &size,
                "--max-rate",
                "8M",
            ],
        ))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let s = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(s.success());
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "the shrink was not stopped: {err}");
    assert!(err.contains("grow --continue"), "{err}");
    let e = examine(d, "m0");
    assert_eq!(e["feature_map"].as_u64().unwrap() & 4, 4, "{e}");
    // md's fields for a shrink: fewer members, the new offset above, no
    // backwards flag (md infers the direction from delta_disks < 0), the
    // position somewhere below the end it started from.
    assert_eq!(e["feature_map"].as_u64().unwrap() & 128, 0, "{e}");
    assert_eq!(e["raid_devices"].as_u64(), Some(3), "{e}");
    let text = String::from_utf8_lossy(&run(d, &["examine", "m0"]).stdout).to_string();
    let field = |name: &str| -> String {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in: {text}"));
        line.split(" : ").nth(1).unwrap().trim().to_string()
    };
    assert!(field("Delta Devices").starts_with("-1 (4->3)"), "{text}");
    let sectors = |v: String| v.split(' ').next().unwrap().parse::<u64>().unwrap();
    assert!(
        sectors(field("New Offset")) > sectors(field("Data Offset")),
        "{text}"
    );
    // mdadm prints the position in KiB.
    let pos = sectors(field("Reshape pos'n")) * 1024;
    assert!(
        pos > 0 && pos < holds("5", 3) as u64,
        "position {pos} is not inside the walk: {text}"
    );
    assert!(export(d, &old) == a[..holds("5", 3)]);
    let out = ok(d, &with("grow", &old, &["--continue"]));
    assert!(
        out.contains(&format!("reshape resumed at array byte {pos}")),
        "{out}"
    );
    assert_shrunk(d, &old[..3], &old[3..], "5", &a, off);
}

#[test]
fn refusals_say_why_and_change_no_byte() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let r5 = ["a0", "a1", "a2", "a3"];
    create_shrinkable(d, &r5, "5");
    let r6 = ["s0", "s1", "s2", "s3"];
    create_shrinkable(d, &r6, "6");
    // Every member's data reaches its end: no room to move the data up.
    let full = ["f0", "f1", "f2", "f3"];
    create_imported(d, &full, "16M", &["--level", "5", "--chunk", "64K"]);
    let r0 = ["z0", "z1", "z2"];
    create_imported(d, &r0, "16M", &["--level", "0", "--chunk", "64K"]);
    let r10 = ["t0", "t1", "t2", "t3"];
    create_imported(d, &r10, "16M", &["--level", "10", "--chunk", "64K"]);
    let all = [
        "a0", "a1", "a2", "a3", "s0", "s1", "s2", "s3", "f0", "f1", "f2", "f3", "z0", "z1", "z2",
        "t0", "t1", "t2", "t3",
    ];
    let fits3 = format!("{}K", holds("5", 3) / 1024);
    let over = format!("{}K", holds("5", 3) / 1024 + 64);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            with("grow", &r5, &["--raid-devices", "3"]),
            "this change will reduce the size of the array",
        ),
        (
            with("grow", &r5, &["--raid-devices", "3", "--array-size", &over]),
            "does not fit in 3 members",
        ),
        (
            with(
                "grow",
                &r5,
                &["--raid-devices", "3", "--array-size", "1000"],
            ),
            "whole number of KiB",
        ),
        (
            with("grow", &r6, &["--raid-devices", "3", "--array-size", "1M"]),
            "no fewer than 4 members",
        ),
        (
            with(
                "grow",
                &full,
                &["--raid-devices", "3", "--array-size", &fits3],
            ),
            "backup file",
        ),
        (
            with(
                "grow",
                &r5,
                &[
                    "--raid-devices",
                    "3",
                    "--array-size",
                    &fits3,
                    "--chunk",
                    "8M",
                ],
            ),
            // Fewer members with a new chunk are one reshape now, as md
            // makes them (`reshape_combined.rs`); this chunk does not divide
            // the 14 MiB component size (mdadm's rule).
            "evenly divide",
        ),
        (
            with(
                "grow",
                &r5,
                &["--raid-devices", "3", "--array-size", &fits3, "--add", "x"],
            ),
            "a shrink takes no new member",
        ),
        (with("grow", &r5, &["--array-size", &fits3]), "offline"),
        (
            with("grow", &r5, &["--raid-devices", "3", "--array-size", "max"]),
            "--array-size max",
        ),
        (
            with(
                "grow",
                &r5,
                &["--raid-devices", "5", "--array-size", &fits3],
            ),
            "goes with fewer --raid-devices",
        ),
        // A RAID 0 shrinks too (`reshape_shrink_raid0`), but not one whose
        // members have no room after their data: md cannot use less of a
        // RAID 0 member.
        (
            with("grow", &r0, &["--raid-devices", "2", "--array-size", "1M"]),
            "a larger device",
        ),
        (
            with(
                "grow",
                &r10,
                &["--raid-devices", "3", "--array-size", "1000K"],
            ),
            "not a whole number of 64 KiB chunks",
        ),
    ];
    for (args, why) in cases {
        let before = files(d, &all);
        let o = run(d, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(err.contains(why), "{args:?}: expected {why:?} in: {err}");
        assert!(files(d, &all) == before, "{args:?} changed a member file");
        assert!(!d.join("x").exists(), "{args:?} left x behind");
    }
}
