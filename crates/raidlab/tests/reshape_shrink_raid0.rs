//! `raidlab grow --raid-devices N --array-size SIZE` with N below the
//! member count of a RAID 0, on real member files: md's way, a RAID 4 of one
//! member more (its parity role empty) shrunk backwards, then taken back as
//! a RAID 0. What the kept members hold of the data written before reads
//! back byte for byte; the members that leave are out of the array, their
//! superblocks as md leaves them; a shrink stopped (Ctrl-C) or killed
//! (SIGKILL) reads back exactly while stopped and after `--continue`; every
//! refusal leaves every member file as it was.

mod common;

use common::verbs::*;
use std::path::Path;
use std::time::Duration;

/// A RAID 0 over `members` (16 MiB files, 64K chunk), filled with a pattern
/// over all of it, then each file grown to 18 MiB: room after the data for
/// md's move of the data offset up (md keeps a RAID 0 member's data size
/// when its device grows, and refuses `--size` of a RAID 0). The pattern,
/// and what each member holds.
fn create_roomy(d: &Path, members: &[&str]) -> (Vec<u8>, usize) {
    let a = create_imported(d, members, "16M", &["--level", "0", "--chunk", "64K"]);
    for m in members {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(d.join(m))
            .unwrap();
        f.set_len(18 * MIB).unwrap();
    }
    let each = a.len() / members.len();
    (a, each)
}

fn data_offset(d: &Path, m: &str) -> u64 {
    examine(d, m)["data_offset"].as_u64().unwrap()
}

fn shrink_args<'a>(members: &[&'a str], to: &'a str, size: &'a str) -> Vec<&'a str> {
    with(
        "grow",
        members,
        &["--raid-devices", to, "--array-size", size],
    )
}

/// After a shrink to `kept` (the members that left: `left`, the first of
/// them the one md gave the new parity role): a RAID 0 of the kept
/// members, its bytes the old array's first ones, no reshape flags, the
/// data offset moved up; the members that left out of the array, each
/// superblock as md's last write to it left it (the parity member its
/// RAID 4 role, the others spare).
fn assert_shrunk(d: &Path, kept: &[&str], left: &[&str], a: &[u8], each: usize, old_offset: u64) {
    let v = detail(d, kept);
    assert_eq!(v["level"].as_str(), Some("raid0"), "{v}");
    assert_eq!(v["raid_devices"].as_u64(), Some(kept.len() as u64), "{v}");
    let size = v["array_size_bytes"].as_u64().unwrap() as usize;
    assert_eq!(size, each * kept.len(), "{v}");
    let got = export(d, kept);
    assert!(got == a[..size], "the data the kept members hold changed");
    for m in kept {
        let e = examine(d, m);
        assert_eq!(e["level_number"].as_u64(), Some(0), "{m}: {e}");
        assert_eq!(e["raid_devices"].as_u64(), Some(kept.len() as u64), "{e}");
        assert_eq!(
            e["feature_map"].as_u64().unwrap() & (4 | 64 | 128),
            0,
            "{m}: reshape flags left set: {e}"
        );
        let off = e["data_offset"].as_u64().unwrap();
        assert!(off > old_offset, "{m}: data offset {off} did not move up");
    }
    for (k, m) in left.iter().enumerate() {
        let e = examine(d, m);
        assert_eq!(e["level_number"].as_u64(), Some(4), "{m}: {e}");
        let role = &e["role"];
        if k == 0 {
            assert_eq!(role["Active"].as_u64(), Some(kept.len() as u64), "{m}: {e}");
        } else {
            assert_eq!(role.as_str(), Some("Spare"), "{m}: {e}");
        }
    }
}

#[test]
fn raid0_shrinks_read_back_exactly() {
    for (n, to) in [(4, 3), (5, 2)] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let names = ["m0", "m1", "m2", "m3", "m4"];
        let old = &names[..n];
        let (a, each) = create_roomy(d, old);
        let off = data_offset(d, "m0");
        let size = format!("{}K", each * to / 1024);
        let out = ok(d, &shrink_args(old, &to.to_string(), &size));
        assert!(out.contains("reshape done"), "{n} to {to}: {out}");
        assert!(out.contains("moved up"), "{n} to {to}: {out}");
        assert!(
            out.contains("left the array (removed"),
            "{n} to {to}: {out}"
        );
        assert_shrunk(d, &names[..to], &names[to..n], &a, each, off);
        // The RAID 0 runs on: a write through it reads back.
        let b = pattern(each * to, 99);
        std::fs::write(d.join("b.bin"), &b).unwrap();
        ok(d, &with("import", &names[..to], &["--input", "b.bin"]));
        assert!(export(d, &names[..to]) == b);
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
fn a_stop_request_checkpoints_and_continue_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let old = ["m0", "m1", "m2", "m3"];
    let (a, each) = create_roomy(d, &old);
    let off = data_offset(d, "m0");
    let size = format!("{}K", each * 3 / 1024);
    let mut args = shrink_args(&old, "3", &size);
    args.extend_from_slice(&["--max-rate", "8M"]);
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_raidlab"))
        .current_dir(d)
        .args(&args)
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
    // md's RAID 4 reshape, as its takeover of the RAID 0 records it: one
    // role more than the RAID 0's, fewer by delta_disks, no backwards flag.
    let e = examine(d, "m0");
    assert_eq!(e["feature_map"].as_u64().unwrap() & (4 | 128), 4, "{e}");
    assert_eq!(e["level_number"].as_u64(), Some(4), "{e}");
    assert_eq!(e["raid_devices"].as_u64(), Some(4), "{e}");
    let text = String::from_utf8_lossy(&run(d, &["examine", "m0"]).stdout).to_string();
    let field = |name: &str| -> String {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in: {text}"));
        line.split(" : ").nth(1).unwrap().trim().to_string()
    };
    assert!(field("Delta Devices").starts_with("-1 (5->4)"), "{text}");
    let sectors = |v: String| v.split(' ').next().unwrap().parse::<u64>().unwrap();
    assert!(
        sectors(field("New Offset")) > sectors(field("Data Offset")),
        "{text}"
    );
    // mdadm prints the position in KiB.
    let pos = sectors(field("Reshape pos'n")) * 1024;
    assert!(
        pos > 0 && pos < (each * 3) as u64,
        "position {pos} is not inside the walk: {text}"
    );
    assert!(
        export(d, &old) == a[..each * 3],
        "stopped: reads other bytes"
    );
    let out = ok(d, &with("grow", &old, &["--continue"]));
    assert!(
        out.contains(&format!("reshape resumed at array byte {pos}")),
        "{out}"
    );
    assert!(out.contains("left the array (removed"), "{out}");
    assert_shrunk(d, &old[..3], &old[3..], &a, each, off);
}

#[test]
fn a_shrink_killed_at_random_points_reads_back_exactly_and_continue_finishes_it() {
    // Seeded delays across a rate-limited run (printed on failure): kills
    // between steps, inside a step's writes, inside a checkpoint.
    let mut x: u32 = 0x9e37_79b9;
    let mut mid = 0;
    for _ in 0..4 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let delay = Duration::from_millis(150 + u64::from(x % 2400));
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let old = ["m0", "m1", "m2", "m3", "m4"];
        let (a, each) = create_roomy(d, &old);
        let off = data_offset(d, "m0");
        let size = format!("{}K", each * 3 / 1024);
        let mut shrink = shrink_args(&old, "3", &size);
        shrink.extend_from_slice(&["--max-rate", "8M"]);
        killed_after(d, &shrink, delay);
        let what = format!("killed after {delay:?}");
        match state(d) {
            (true, 4) => {
                mid += 1;
                let got = export(d, &old);
                assert!(
                    got == a[..each * 3],
                    "{what}: the stopped array reads other bytes"
                );
                let out = ok(d, &with("grow", &old, &["--continue"]));
                assert!(out.contains("reshape done"), "{what}: {out}");
            }
            (false, 5) => {
                assert!(export(d, &old) == a, "{what}: changed before its reshape");
                ok(d, &shrink);
            }
            (false, 3) => {}
            // Killed between md's end of the RAID 4 reshape and the takeover
            // back: a complete RAID 4 of 4, which `--level 0` finishes.
            (false, 4) => {
                assert!(
                    export(d, &old) == a[..each * 3],
                    "{what}: the RAID 4 reads other bytes"
                );
                ok(d, &with("grow", &old, &["--level", "0"]));
            }
            s => panic!("{what}: unexpected state {s:?}"),
        }
        assert_shrunk(d, &old[..3], &old[3..], &a, each, off);
    }
    assert!(mid >= 1, "no kill landed mid-reshape");
}

#[test]
fn refusals_say_why_and_change_no_byte() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let r0 = ["a0", "a1", "a2", "a3"];
    let (_, each) = create_roomy(d, &r0);
    // Every member's data reaches its end: no room to move the data up.
    let full = ["f0", "f1", "f2"];
    create_imported(d, &full, "16M", &["--level", "0", "--chunk", "64K"]);
    let all = ["a0", "a1", "a2", "a3", "f0", "f1", "f2"];
    let fits3 = format!("{}K", each * 3 / 1024);
    let over = format!("{}K", each * 3 / 1024 + 64);
    let full_fits = format!("{}K", each * 2 / 1024);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            with("grow", &r0, &["--raid-devices", "3"]),
            "this change will reduce the size of the array",
        ),
        (shrink_args(&r0, "3", &over), "does not fit in 3 members"),
        (shrink_args(&r0, "0", "64K"), "no fewer than 1 member"),
        (shrink_args(&full, "2", &full_fits), "backup file"),
        (shrink_args(&full, "2", &full_fits), "a larger device"),
        (
            with(
                "grow",
                &r0,
                &[
                    "--raid-devices",
                    "3",
                    "--array-size",
                    &fits3,
                    "--level",
                    "4",
                ],
            ),
            "--array-size goes with fewer --raid-devices of a RAID 0/4/5/6 or 10",
        ),
    ];
    for (args, why) in cases {
        let before = files(d, &all);
        let o = run(d, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(err.contains(why), "{args:?}: expected {why:?} in: {err}");
        assert!(files(d, &all) == before, "{args:?} changed a member file");
    }
}
