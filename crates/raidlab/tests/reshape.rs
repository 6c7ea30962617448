//! `raidlab grow --raid-devices N --add ...` of a RAID 4/5/6 (a reshape, md's
//! way without a backup file: the data offset moves down and the data is
//! restriped onto more members) on real member files. The data written
//! before reads back byte for byte after, `check` finds no mismatch, the
//! superblocks say what md writes at the end of a reshape; a grow killed
//! (SIGKILL) at random points reads back exactly while stopped (read-only)
//! and after `--continue`; every refusal leaves every member file as it was.

mod common;

use common::verbs::*;
use std::path::Path;
use std::time::Duration;

fn create_filled(d: &Path, members: &[&str], size: &str, extra: &[&str]) -> Vec<u8> {
    create_imported(d, members, size, extra)
}

/// After a grow from `old` to `new` members: the old data first, zeros in
/// the new space, no mismatch, and md's end-of-reshape superblock fields.
fn assert_grown(d: &Path, new: &[&str], old_len: usize, a: &[u8], old_offset: u64) {
    let v = detail(d, new);
    let member = v["member_data_bytes"].as_u64().unwrap();
    let parity = match v["level"].as_str().unwrap() {
        "raid6" => 2,
        _ => 1,
    };
    let size = v["array_size_bytes"].as_u64().unwrap();
    assert_eq!(size, (new.len() as u64 - parity) * member, "{v}");
    assert_eq!(a.len() as u64, (old_len as u64 - parity) * member);
    let got = export(d, new);
    assert_eq!(got.len() as u64, size);
    assert!(got[..a.len()] == *a, "the data before the grow changed");
    assert!(
        got[a.len()..].iter().all(|&b| b == 0),
        "the new space is not zeros"
    );
    check_clean(d, new);
    for m in new {
        let e = examine(d, m);
        assert_eq!(e["raid_devices"].as_u64(), Some(new.len() as u64), "{e}");
        let f = e["feature_map"].as_u64().unwrap();
        assert_eq!(f & (4 | 64), 0, "{m}: reshape flags left set: {e}");
        let off = e["data_offset"].as_u64().unwrap();
        assert!(off < old_offset, "{m}: data offset {off} did not move down");
    }
}

fn data_offset(d: &Path, m: &str) -> u64 {
    examine(d, m)["data_offset"].as_u64().unwrap()
}

#[test]
fn raid5_grows_by_one_member_in_several_layouts_and_chunks() {
    for (layout, chunk) in [
        ("left-symmetric", "64K"),
        ("right-asymmetric", "128K"),
        ("left-asymmetric", "512K"),
        ("right-symmetric", "32K"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let old = ["m0", "m1", "m2"];
        let a = create_filled(
            d,
            &old,
            "16M",
            &["--level", "5", "--layout", layout, "--chunk", chunk],
        );
        let off = data_offset(d, "m0");
        let out = ok(
            d,
            &with(
                "grow",
                &old,
                &["--raid-devices", "4", "--add", "m3", "--member-size", "16M"],
            ),
        );
        assert!(out.contains("reshape done"), "{layout} {chunk}: {out}");
        let new = ["m0", "m1", "m2", "m3"];
        assert_grown(d, &new, 3, &a, off);
        assert_eq!(
            detail(d, &new)["layout"].as_str(),
            Some(layout),
            "{layout} {chunk}"
        );
    }
}

/// Metadata 0.90 has no new data offset: `--raid-devices` with `--add`
/// runs in place, the critical section (two old and three new stripes of
/// 64K chunks: 384K) backed up on the new member first, as mdadm grows
/// such an array without a backup file.
#[test]
fn a_090_raid5_grows_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let old = ["m0", "m1", "m2"];
    let a = create_filled(
        d,
        &old,
        "16M",
        &["--level", "5", "--metadata", "0.90", "--chunk", "64K"],
    );
    let out = ok(
        d,
        &with(
            "grow",
            &old,
            &["--raid-devices", "4", "--add", "m3", "--member-size", "16M"],
        ),
    );
    assert!(
        out.contains("in place") && out.contains("backed up 384K of critical section"),
        "{out}"
    );
    assert!(out.contains("reshape done"), "{out}");
    let new = ["m0", "m1", "m2", "m3"];
    let got = export(d, &new);
    assert!(got[..a.len()] == *a, "the data before the grow changed");
    assert!(
        got[a.len()..].iter().all(|&b| b == 0),
        "the new space is not zeros"
    );
    check_clean(d, &new);
    for m in new {
        let e = examine(d, m);
        assert_eq!(e["raid_devices"].as_u64(), Some(4), "{e}");
        assert_eq!(e["data_offset"].as_u64(), Some(0), "{e}");
        assert!(e["reshape"].is_null(), "{m}: still mid-reshape: {e}");
    }
}

/// The same with a new chunk in one reshape, as mdadm makes it (no backup
/// file: the critical section on the new member); `--backup-file` with it
/// refused, nothing written.
#[test]
fn a_090_raid5_grows_in_place_with_a_new_chunk() {
    // Without a backup file (the critical section on the new member) and
    // with one (in the file, as mdadm puts it when given one).
    for with_file in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let old = ["m0", "m1", "m2"];
        let a = create_filled(
            d,
            &old,
            "16M",
            &["--level", "5", "--metadata", "0.90", "--chunk", "64K"],
        );
        let grow = ["--raid-devices", "4", "--add", "m3", "--member-size", "16M"];
        let bak = d.join("bak");
        let mut args = with("grow", &old, &grow);
        args.extend(["--chunk", "32K"]);
        if with_file {
            // A backup file on a member of the array: mdadm refuses it.
            let mut bad = args.clone();
            bad.extend(["--backup-file", "m1"]);
            let before = files(d, &old);
            let o = run(d, &bad);
            let e = String::from_utf8_lossy(&o.stderr);
            assert!(
                !o.status.success() && e.contains("a member of the array"),
                "{e}"
            );
            assert!(!d.join("m3").exists(), "a refusal made files");
            assert!(files(d, &old) == before, "a refusal wrote");
            args.extend(["--backup-file", bak.to_str().unwrap()]);
        }
        let out = ok(d, &args);
        assert!(
            out.contains("in place") && out.contains("critical section"),
            "{out}"
        );
        assert_eq!(out.contains("in the backup file"), with_file, "{out}");
        assert!(!bak.exists(), "the backup file is left after the grow");
        let new = ["m0", "m1", "m2", "m3"];
        let got = export(d, &new);
        assert!(got[..a.len()] == *a, "the data before the grow changed");
        assert!(
            got[a.len()..].iter().all(|&b| b == 0),
            "the new space is not zeros"
        );
        check_clean(d, &new);
        for m in new {
            let e = examine(d, m);
            assert_eq!(e["raid_devices"].as_u64(), Some(4), "{e}");
            assert_eq!(e["chunk_size_kib"].as_u64(), Some(32), "{e}");
            assert!(e["reshape"].is_null(), "{m}: still mid-reshape: {e}");
        }
    }
}

#[test]
fn raid6_and_raid4_grow_by_two_members_and_a_second_grow_finds_room() {
    for level in ["6", "4"] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let old = ["m0", "m1", "m2", "m3"];
        let a = create_filled(d, &old, "24M", &["--level", level, "--chunk", "128K"]);
        let off = data_offset(d, "m0");
        ok(
            d,
            &with(
                "grow",
                &old,
                &[
                    "--raid-devices",
                    "6",
                    "--add",
                    "m4",
                    "--add",
                    "m5",
                    "--member-size",
                    "24M",
                ],
            ),
        );
        let new = ["m0", "m1", "m2", "m3", "m4", "m5"];
        assert_grown(d, &new, 4, &a, off);
        // What is there now, grown once more: half the room was left.
        let b = export(d, &new);
        let off = data_offset(d, "m0");
        ok(
            d,
            &with(
                "grow",
                &new,
                &["--raid-devices", "7", "--add", "m6", "--member-size", "24M"],
            ),
        );
        let newer = ["m0", "m1", "m2", "m3", "m4", "m5", "m6"];
        assert_grown(d, &newer, 6, &b, off);
    }
}

#[test]
fn a_hot_spare_takes_the_new_slot() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["m0", "m1", "m2", "s0"];
    ok(
        d,
        &with(
            "create",
            &m,
            &["--member-size", "16M", "--level", "5", "--spares", "1"],
        ),
    );
    let bytes = detail(d, &m)["array_size_bytes"].as_u64().unwrap();
    let a = pattern(bytes as usize, 3);
    std::fs::write(d.join("a.bin"), &a).unwrap();
    ok(d, &with("import", &m, &["--input", "a.bin"]));
    let off = data_offset(d, "m0");
    ok(d, &with("grow", &m, &["--raid-devices", "4"]));
    assert_grown(d, &m, 3, &a, off);
}

/// md restripes a RAID 5 with its internal bitmap in place: grown by a
/// member, the data is exact, parity checks, and every member (the new one
/// too) carries the bitmap md leaves, its chunk and sync size unchanged,
/// its event count the superblock's.
#[test]
fn a_raid5_with_a_bitmap_grows_by_a_member_and_keeps_the_bitmap_as_md_does() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let old = ["m0", "m1", "m2", "m3"];
    let a = create_filled(
        d,
        &old,
        "16M",
        &[
            "--level",
            "5",
            "--chunk",
            "64K",
            "--consistency-policy",
            "bitmap",
            "--bitmap-chunk",
            "256K",
        ],
    );
    let off = data_offset(d, "m0");
    let before = examine(d, "m0")["bitmap"].clone();
    assert!(before.is_object(), "no bitmap: {before}");
    ok(
        d,
        &with(
            "grow",
            &old,
            &["--raid-devices", "5", "--add", "m4", "--member-size", "16M"],
        ),
    );
    let new = ["m0", "m1", "m2", "m3", "m4"];
    assert_grown(d, &new, 4, &a, off);
    for m in new {
        let e = examine(d, m);
        let b = &e["bitmap"];
        for k in ["Version", "UUID", "Chunksize", "Sync Size", "State"] {
            assert_eq!(b[k], before[k], "{m}: {k}: {e}");
        }
        let events: u64 = b["Events"].as_str().unwrap().parse().unwrap();
        assert_eq!(Some(events), e["events"].as_u64(), "{m}: {e}");
    }
    // Then to RAID 6 (md's takeover through left-symmetric-6, Q rebuilt
    // onto the new member, restriped): the bitmap stays md's there too.
    let got = export(d, &new);
    ok(
        d,
        &with(
            "grow",
            &new,
            &["--level", "6", "--add", "m5", "--member-size", "16M"],
        ),
    );
    let six = ["m0", "m1", "m2", "m3", "m4", "m5"];
    assert_eq!(detail(d, &six)["level"], "raid6");
    assert!(export(d, &six) == got, "the data after RAID 5 to 6");
    check_clean(d, &six);
    for m in six {
        let e = examine(d, m);
        let b = &e["bitmap"];
        for k in ["Version", "UUID", "Chunksize", "Sync Size", "State"] {
            assert_eq!(b[k], before[k], "RAID 6: {m}: {k}: {e}");
        }
    }
}

/// The array's state from m0's superblock: (reshape active, raid disks).
fn state(d: &Path) -> (bool, u64) {
    let e = examine(d, "m0");
    (
        e["feature_map"].as_u64().unwrap() & 4 != 0,
        e["raid_devices"].as_u64().unwrap(),
    )
}

#[test]
fn a_grow_killed_at_random_points_reads_back_exactly_and_continue_finishes_it() {
    // A rate limit makes the run last a few seconds, so the kills land
    // anywhere in it: between steps, inside a step's writes, inside a
    // checkpoint. The delays come from a fixed seed (printed on failure).
    let mut x: u32 = 0x9e37_79b9;
    let mut delays = Vec::new();
    for _ in 0..6 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        delays.push(Duration::from_millis(150 + u64::from(x % 2600)));
    }
    for (k, delay) in delays.into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let level = if k % 2 == 0 { "5" } else { "6" };
        let old = ["m0", "m1", "m2", "m3"];
        let a = create_filled(d, &old, "24M", &["--level", level, "--chunk", "64K"]);
        let off = data_offset(d, "m0");
        killed_after(
            d,
            &with(
                "grow",
                &old,
                &[
                    "--raid-devices",
                    "5",
                    "--add",
                    "m4",
                    "--member-size",
                    "24M",
                    "--max-rate",
                    "8M",
                ],
            ),
            delay,
        );
        let new = ["m0", "m1", "m2", "m3", "m4"];
        let what = format!("RAID {level}, killed after {delay:?}");
        match state(d) {
            (true, 5) => {
                // Stopped mid-reshape: the array reads (read-only) exactly.
                let got = export(d, &new);
                assert!(got == a, "{what}: the stopped array reads other bytes");
                let out = ok(d, &with("grow", &new, &["--continue"]));
                assert!(out.contains("reshape done"), "{what}: {out}");
            }
            (false, 4) => {
                // Killed before the reshape was recorded: m4 may be a spare
                // already; growing again takes it (or adds it).
                let got = export(d, &old);
                assert!(got == a, "{what}: the array changed before its reshape");
                let spare = std::fs::metadata(d.join("m4")).is_ok()
                    && run(d, &["examine", "m4", "--json"]).status.success();
                if spare {
                    ok(d, &with("grow", &new, &["--raid-devices", "5"]));
                } else {
                    let _ = std::fs::remove_file(d.join("m4"));
                    ok(
                        d,
                        &with(
                            "grow",
                            &old,
                            &["--raid-devices", "5", "--add", "m4", "--member-size", "24M"],
                        ),
                    );
                }
            }
            (false, 5) => {}
            s => panic!("{what}: unexpected state {s:?}"),
        }
        assert_grown(d, &new, 4, &a, off);
    }
}

/// (level, chunk, layout) as `detail` reports them.
type Shape = (String, u64, String);

/// A restripe case: create level, create chunk, grow arguments, the shape
/// after.
type RestripeCase<'a> = (&'a str, &'a str, &'a [&'a str], (&'a str, u64, &'a str));

fn shape(d: &Path, m: &[&str]) -> Shape {
    let v = detail(d, m);
    (
        v["level"].as_str().unwrap().to_string(),
        v["chunk_bytes"].as_u64().unwrap(),
        v["layout"].as_str().unwrap().to_string(),
    )
}

#[test]
fn a_chunk_layout_or_level_reshape_killed_at_random_points_reads_back_exactly() {
    // Each case: (create level, create chunk, grow arguments, what detail
    // says after). The kills land anywhere in a rate-limited run (fixed
    // seed), as in the member-count test above; a run killed before it
    // recorded the reshape is simply run again.
    let cases: [RestripeCase; 5] = [
        (
            "5",
            "64K",
            &["--chunk", "256K"],
            ("raid5", 256 << 10, "left-symmetric"),
        ),
        (
            "5",
            "512K",
            &["--chunk", "64K"],
            ("raid5", 64 << 10, "left-symmetric"),
        ),
        (
            "6",
            "128K",
            &["--layout", "right-asymmetric"],
            ("raid6", 128 << 10, "right-asymmetric"),
        ),
        (
            "4",
            "64K",
            &["--level", "5", "--layout", "left-symmetric"],
            ("raid5", 64 << 10, "left-symmetric"),
        ),
        (
            "5",
            "128K",
            &["--level", "4"],
            ("raid4", 128 << 10, "parity-last"),
        ),
    ];
    let mut x: u32 = 0x1234_5679;
    for (level, chunk, grow, want) in cases {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let delay = Duration::from_millis(100 + u64::from(x % 2000));
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let m = ["m0", "m1", "m2", "m3", "m4"];
        let a = create_filled(d, &m, "24M", &["--level", level, "--chunk", chunk]);
        let off = data_offset(d, "m0");
        let what = format!("RAID {level} {chunk} {grow:?}, killed after {delay:?}");
        let mut args = with("grow", &m, grow);
        args.extend(["--max-rate", "8M"]);
        killed_after(d, &args, delay);
        let killed_mid = state(d).0;
        eprintln!("{what}: stopped mid-reshape: {killed_mid}");
        if killed_mid {
            // Stopped mid-reshape: the array reads (read-only) exactly.
            assert!(
                export(d, &m) == a,
                "{what}: the stopped array reads other bytes"
            );
            let out = ok(d, &with("grow", &m, &["--continue"]));
            assert!(out.contains("reshape done"), "{what}: {out}");
            if want.0 == "raid4" {
                // md's last step, the takeover, is asked for again.
                ok(d, &with("grow", &m, &["--level", "4"]));
            }
        } else if shape(d, &m) != (want.0.to_string(), want.1, want.2.to_string()) {
            assert!(
                export(d, &m) == a,
                "{what}: the array changed before its reshape"
            );
            ok(d, &with("grow", &m, grow));
        }
        assert_eq!(
            shape(d, &m),
            (want.0.to_string(), want.1, want.2.to_string()),
            "{what}"
        );
        assert!(export(d, &m) == a, "{what}: the data changed");
        check_clean(d, &m);
        for mm in m {
            let e = examine(d, mm);
            assert_eq!(
                e["feature_map"].as_u64().unwrap() & (4 | 64),
                0,
                "{what}: {e}"
            );
            assert!(
                data_offset(d, mm) < off,
                "{what}: {mm}'s data did not move down"
            );
        }
    }
}

#[test]
fn raid4_and_raid5_in_parity_last_take_each_other_over_without_moving_data() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["m0", "m1", "m2", "m3"];
    let a = create_filled(d, &m, "16M", &["--level", "4", "--chunk", "64K"]);
    let off = data_offset(d, "m0");
    let before = files(d, &m);
    let out = ok(d, &with("grow", &m, &["--level", "5"]));
    assert!(out.contains("takeover"), "{out}");
    assert_eq!(
        shape(d, &m),
        ("raid5".into(), 64 << 10, "parity-last".into())
    );
    // Only the superblocks changed: every data byte is where it was.
    let after = files(d, &m);
    for (b, a2) in before.iter().zip(&after) {
        let from = (off * 512) as usize;
        assert!(b[from..] == a2[from..], "a takeover moved data");
    }
    assert!(export(d, &m) == a);
    check_clean(d, &m);
    ok(d, &with("grow", &m, &["--level", "4"]));
    assert_eq!(
        shape(d, &m),
        ("raid4".into(), 64 << 10, "parity-last".into())
    );
    assert_eq!(data_offset(d, "m0"), off);
    assert!(export(d, &m) == a);
    check_clean(d, &m);
}

/// (level, layout, members active, members spare) as `detail` reports them.
fn members_of(d: &Path, m: &[&str]) -> (String, String, usize, usize) {
    let v = detail(d, m);
    let count = |s: &str| {
        v["members"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|x| x["state"] == s)
            .count()
    };
    (
        v["level"].as_str().unwrap().to_string(),
        v["layout"].as_str().unwrap().to_string(),
        count("active"),
        count("spare"),
    )
}

#[test]
fn raid5_becomes_raid6_and_back_through_mds_conversion_layouts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let r5 = ["m0", "m1", "m2", "m3"];
    let all = ["m0", "m1", "m2", "m3", "m4"];
    let a = create_filled(d, &r5, "16M", &["--level", "5", "--chunk", "64K"]);
    let s = |x: &str| x.to_string();
    // mdadm's default: Q on the new member, then restriped to the plain
    // RAID 6 layout.
    let out = ok(
        d,
        &with(
            "grow",
            &r5,
            &["--level", "6", "--add", "m4", "--member-size", "16M"],
        ),
    );
    assert!(
        out.contains("left-symmetric-6") && out.contains("reshape done"),
        "{out}"
    );
    assert_eq!(members_of(d, &all), (s("raid6"), s("left-symmetric"), 5, 0));
    assert!(export(d, &all) == a);
    check_clean(d, &all);
    // Back: restriped to left-symmetric-6, then Q's member is a spare.
    ok(d, &with("grow", &all, &["--level", "5"]));
    assert_eq!(members_of(d, &all), (s("raid5"), s("left-symmetric"), 4, 1));
    assert!(export(d, &all) == a);
    check_clean(d, &all);
    // Again with the spare, keeping md's conversion layout (no restripe):
    // the data offset stays where the first restripes left it.
    let off = data_offset(d, "m0");
    ok(
        d,
        &with("grow", &all, &["--level", "6", "--layout", "preserve"]),
    );
    assert_eq!(
        members_of(d, &all),
        (s("raid6"), s("left-symmetric-6"), 5, 0)
    );
    assert_eq!(data_offset(d, "m0"), off);
    assert!(export(d, &all) == a);
    check_clean(d, &all);
    // A RAID 6 in a "-6" layout becomes a RAID 5 by takeover alone.
    let before = files(d, &r5);
    ok(
        d,
        &with("grow", &all, &["--level", "5", "--raid-devices", "4"]),
    );
    assert_eq!(members_of(d, &all), (s("raid5"), s("left-symmetric"), 4, 1));
    let after = files(d, &r5);
    let from = (off * 512) as usize;
    for (b, x) in before.iter().zip(&after) {
        assert!(b[from..] == x[from..], "the takeover moved data");
    }
    assert!(export(d, &all) == a);
    check_clean(d, &all);
}

#[test]
fn a_raid5_to_raid6_conversion_killed_anywhere_is_finished_with_the_data_exact() {
    // Killed in the rebuild of Q or in the restripe after it; finished the
    // way the messages say: `rebuild` then `grow --layout`, or `--continue`.
    for (k, delay) in [300u64, 1500, 3500].into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let r5 = ["m0", "m1", "m2", "m3"];
        let all = ["m0", "m1", "m2", "m3", "m4"];
        let a = create_filled(d, &r5, "24M", &["--level", "5", "--chunk", "64K"]);
        let what = format!("case {k}, killed after {delay} ms");
        killed_after(
            d,
            &with(
                "grow",
                &r5,
                &[
                    "--level",
                    "6",
                    "--add",
                    "m4",
                    "--member-size",
                    "24M",
                    "--max-rate",
                    "8M",
                ],
            ),
            Duration::from_millis(delay),
        );
        let level = detail(d, &all)["level"].as_str().map(str::to_string);
        eprintln!("{what}: level {level:?}, mid-reshape {}", state(d).0);
        if level.as_deref() != Some("raid6") {
            // Killed before the takeover: still the RAID 5 (m4 a spare or
            // not there yet).
            assert!(export(d, &r5) == a, "{what}");
            let _ = std::fs::remove_file(d.join("m4"));
            ok(
                d,
                &with(
                    "grow",
                    &r5,
                    &["--level", "6", "--add", "m4", "--member-size", "24M"],
                ),
            );
        } else if state(d).0 {
            assert!(export(d, &all) == a, "{what}: stopped restripe reads wrong");
            ok(d, &with("grow", &all, &["--continue"]));
        } else if shape(d, &all).2 != "left-symmetric" {
            assert!(
                export(d, &all) == a,
                "{what}: the RAID 6 reads wrong before Q is rebuilt"
            );
            if detail(d, &all)["members"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["state"] == "rebuilding")
            {
                ok(d, &with("rebuild", &all, &[]));
            }
            ok(d, &with("grow", &all, &["--layout", "left-symmetric"]));
        }
        assert_eq!(
            members_of(d, &all),
            ("raid6".into(), "left-symmetric".into(), 5, 0),
            "{what}"
        );
        assert!(export(d, &all) == a, "{what}: the data changed");
        check_clean(d, &all);
    }
}

#[test]
fn a_stop_request_checkpoints_and_continue_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let old = ["m0", "m1", "m2"];
    let a = create_filled(d, &old, "32M", &["--level", "5", "--chunk", "64K"]);
    let off = data_offset(d, "m0");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_raidlab"))
        .current_dir(d)
        .args(with(
            "grow",
            &old,
            &[
                "--raid-devices",
                "4",
                "--add",
                "m3",
                "--member-size",
                "32M",
                "--max-rate",
                "8M",
            ],
        ))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // SIGINT: the run stops at a step boundary and records where.
    unsafe_sigint(child.id());
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "the grow was not stopped: {err}");
    assert!(err.contains("grow --continue"), "{err}");
    let new = ["m0", "m1", "m2", "m3"];
    let e = examine(d, "m0");
    assert_eq!(e["feature_map"].as_u64().unwrap() & 4, 4, "{e}");
    assert!(export(d, &new) == a);
    // Writing a mid-reshape array is refused, with nothing changed.
    let before = files(d, &new);
    std::fs::write(d.join("b.bin"), vec![1u8; 4096]).unwrap();
    let o = run(d, &with("import", &new, &["--input", "b.bin"]));
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("middle of a reshape"), "{err}");
    assert!(
        files(d, &new) == before,
        "a write changed a mid-reshape array"
    );
    let out = ok(d, &with("grow", &new, &["--continue"]));
    assert!(out.contains("reshape resumed at array byte"), "{out}");
    assert_grown(d, &new, 3, &a, off);
}

fn unsafe_sigint(pid: u32) {
    let s = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(s.success());
}

#[test]
fn refusals_say_why_and_change_no_byte() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let r5 = ["a0", "a1", "a2"];
    create_filled(d, &r5, "16M", &["--level", "5", "--chunk", "64K"]);
    let r0 = ["z0", "z1"];
    create_filled(d, &r0, "16M", &["--level", "0", "--chunk", "64K"]);
    let r10 = ["t0", "t1", "t2", "t3"];
    create_filled(d, &r10, "16M", &["--level", "10", "--chunk", "64K"]);
    let old = ["o0", "o1", "o2"];
    create_filled(d, &old, "16M", &["--level", "5", "--metadata", "0.90"]);
    let end = ["e0", "e1", "e2"];
    create_filled(d, &end, "16M", &["--level", "5", "--metadata", "1.0"]);
    let bm = ["b0", "b1", "b2"];
    create_filled(
        d,
        &bm,
        "16M",
        &["--level", "5", "--consistency-policy", "bitmap"],
    );
    let bm10 = ["u0", "u1", "u2", "u3"];
    create_filled(
        d,
        &bm10,
        "16M",
        &["--level", "10", "--consistency-policy", "bitmap"],
    );
    let ppl = ["p0", "p1", "p2"];
    create_filled(
        d,
        &ppl,
        "16M",
        &["--level", "5", "--consistency-policy", "ppl"],
    );
    // Degraded: the third member is gone.
    create_filled(d, &["g0", "g1", "g2"], "16M", &["--level", "5"]);
    std::fs::remove_file(d.join("g2")).unwrap();
    let deg = ["g0", "g1"];
    std::fs::write(d.join("plain"), vec![0u8; MIB as usize]).unwrap();
    let all = [
        "a0", "a1", "a2", "z0", "z1", "t0", "t1", "t2", "t3", "o0", "o1", "o2", "e0", "e1", "e2",
        "b0", "b1", "b2", "u0", "u1", "u2", "u3", "p0", "p1", "p2", "g0", "g1", "plain",
    ];
    let add = |m: &[&'static str], n: &'static str| -> Vec<&'static str> {
        let mut v = with("grow", m, &["--raid-devices", n]);
        v.extend(["--add", "new", "--member-size", "16M"]);
        v
    };
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (with("grow", &r5, &["--raid-devices", "4"]), "need 1 spare"),
        (add(&r5, "5"), "need 2 spare"),
        (add(&r5, "2"), "reduce the size of the array"),
        (add(&r5, "3"), "no change"),
        // A RAID 0 shrinks now, but only with the array size given first, as md asks.
        (add(&r0, "1"), "use --grow --array-size first"),
        (add(&r10, "3"), "reduce the size of the array"),
        // A 0.90 grow by a member runs in place now (raidlab-raid's
        // tests/reshape090.rs); its restripes that gain no data members
        // still need a backup file.
        (with("grow", &old, &["--layout", "ra"]), "backup file"),
        (add(&end, "4"), "backup file"),
        // A RAID 5 and a RAID 10 restripe with their bitmap now, a RAID 10
        // shrink too (raidlab-raid's tests/reshape_bitmap.rs,
        // reshape_bitmap_raid10.rs); one asked to keep more than the fewer
        // members hold is refused with md's words.
        (
            with(
                "grow",
                &bm10,
                &["--raid-devices", "3", "--array-size", "30M"],
            ),
            "does not fit in 3 members",
        ),
        (add(&ppl, "4"), "consistency-policy resync"),
        (add(&deg, "4"), "degraded"),
        (
            with(
                "grow",
                &r5,
                &[
                    "--raid-devices",
                    "4",
                    "--add",
                    "tiny",
                    "--member-size",
                    "1M",
                ],
            ),
            "needs",
        ),
        (
            with(
                "grow",
                &r5,
                &[
                    "--raid-devices",
                    "4",
                    "--add",
                    "plain",
                    "--add",
                    "new",
                    "--member-size",
                    "16M",
                ],
            ),
            "new slot",
        ),
        (with("grow", &r5, &["--continue"]), "not in the middle"),
        (with("grow", &r5, &["--level", "6"]), "Need 1 spare"),
        (
            with("grow", &r5, &["--level", "6", "--raid-devices", "5"]),
            "one member more",
        ),
        (with("grow", &ppl, &["--level", "6"]), "RAID 5 only"),
        (with("grow", &deg, &["--level", "6"]), "degraded"),
        (
            with("grow", &r10, &["--level", "5"]),
            "can only be changed to RAID0",
        ),
        (
            with("grow", &r5, &["--level", "6", "--chunk", "128K"]),
            "reshape",
        ),
        (
            with("grow", &r5, &["--level", "4", "--chunk", "128K"]),
            "Cannot change array level in the same operation as changing chunk size",
        ),
        (with("grow", &bm, &["--level", "6"]), "Need 1 spare"),
        (
            with("grow", &r0, &["--level", "6"]),
            "could not set level to raid6",
        ),
        (with("grow", &r10, &["--layout", "f2"]), "reshape"),
        (with("grow", &r5, &["--chunk", "48K"]), "power of two"),
        (with("grow", &r5, &["--chunk", "64K"]), "no change"),
        (with("grow", &r5, &["--layout", "ls"]), "no change"),
        (
            with("grow", &r5, &["--layout", "left-symmetric-6"]),
            "RAID 6 layout",
        ),
        (with("grow", &r5, &["--chunk", "sixty"]), "not a size"),
        (
            with("grow", &r5, &["--level", "5", "--layout", "zz"]),
            "valid raid5 layouts",
        ),
        (with("grow", &r5, &["--chunk", "8M"]), "evenly divide"),
        (with("grow", &old, &["--chunk", "128K"]), "backup file"),
        (
            with("grow", &ppl, &["--chunk", "128K"]),
            "consistency-policy resync",
        ),
        (with("grow", &ppl, &["--level", "4"]), "RAID 5 only"),
        (with("grow", &deg, &["--chunk", "128K"]), "degraded"),
        // More members and a new chunk go in one reshape now, as md
        // makes them (`reshape_combined.rs`): here the spare is missing.
        (
            with("grow", &r5, &["--chunk", "128K", "--raid-devices", "4"]),
            "need 1 spare",
        ),
        (
            with("grow", &r5, &["--size", "8M", "--raid-devices", "4"]),
            "one change per run",
        ),
        (
            with("grow", &r5, &["--continue", "--raid-devices", "4"]),
            "one change per run",
        ),
    ];
    for (args, why) in cases {
        let before = files(d, &all);
        let o = run(d, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(err.contains(why), "{args:?}: expected {why:?} in: {err}");
        assert!(files(d, &all) == before, "{args:?} changed a member file");
        for created in ["tiny", "new"] {
            assert!(!d.join(created).exists(), "{args:?} left {created} behind");
        }
    }
}

/// A metadata 0.90 RAID 5's new chunk and a RAID 6's new layout through
/// mdadm's backup file: exact, clean, the file gone at the end; killed at
/// points through the run, `export` refuses it without the file and reads
/// it exact with `--backup-file`, `--continue --backup-file` finishes it
/// exactly and without the file it is refused with mdadm's reason; the
/// file on a member or left from before is refused with no byte changed.
#[test]
fn a_090_restripe_runs_through_a_backup_file_and_resumes_from_it() {
    for (level, n, args, chunk, layout) in [
        ("5", 3, ["--chunk", "32K"], 32 << 10, "left-symmetric"),
        ("6", 5, ["--layout", "ra"], 64 << 10, "right-asymmetric"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let m: Vec<&str> = ["m0", "m1", "m2", "m3", "m4"][..n].to_vec();
        let a = create_filled(
            d,
            &m,
            "16M",
            &["--level", level, "--metadata", "0.90", "--chunk", "64K"],
        );
        let before = files(d, &m);
        std::fs::write(d.join("old.bak"), b"x").unwrap();
        for (file, why) in [
            ("m1", "must NOT be on the array"),
            ("old.bak", "File exists"),
        ] {
            let mut v = with("grow", &m, &args);
            v.extend(["--backup-file", file]);
            let o = run(d, &v);
            let e = String::from_utf8_lossy(&o.stderr);
            assert!(!o.status.success() && e.contains(why), "{e}");
        }
        assert!(files(d, &m) == before, "a refusal changed a member");
        let mut v = with("grow", &m, &args);
        v.extend(["--backup-file", "bak"]);
        let out = ok(d, &v);
        assert!(
            out.contains("backup file") && out.contains("reshape done"),
            "{out}"
        );
        assert!(!d.join("bak").exists(), "the backup file is left");
        assert!(export(d, &m) == a, "RAID {level}: restriped bytes differ");
        check_clean(d, &m);
        let (_, c, l) = shape(d, &m);
        assert_eq!((c, l.as_str()), (chunk, layout));
        assert!(examine(d, "m0")["reshape"].is_null());
    }
    // Killed at points through the run (a rate limit stretches it).
    for delay in [200, 700, 1300, 2100] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let m = ["m0", "m1", "m2", "m3"];
        let a = create_filled(d, &m, "16M", &["--level", "5", "--metadata", "0.90"]);
        let mut v = with("grow", &m, &["--chunk", "32K", "--backup-file", "bak"]);
        v.extend(["--max-rate", "8M"]);
        killed_after(d, &v, Duration::from_millis(delay));
        let mid = !examine(d, "m0")["reshape"].is_null();
        eprintln!("killed after {delay} ms: mid-reshape {mid}");
        if mid {
            // Read without the file: refused as md refuses it, no byte
            // changed; with it: put back, exact (still mid-reshape).
            let before = files(d, &m);
            let o = run(d, &with("export", &m, &[]));
            let e = String::from_utf8_lossy(&o.stderr);
            assert!(
                !o.status.success() && e.contains("--backup-file FILE"),
                "{e}"
            );
            assert!(files(d, &m) == before, "a refused export wrote");
            let o = run(d, &with("export", &m, &["--backup-file", "bak"]));
            let e = String::from_utf8_lossy(&o.stderr);
            assert!(o.status.success() && e.contains("put back"), "{e}");
            assert!(
                o.stdout == a,
                "killed after {delay} ms: export with the file"
            );
            assert!(!examine(d, "m0")["reshape"].is_null());
            let o = run(d, &with("grow", &m, &["--continue"]));
            let e = String::from_utf8_lossy(&o.stderr);
            assert!(!o.status.success() && e.contains("--backup-file"), "{e}");
            let out = ok(
                d,
                &with("grow", &m, &["--continue", "--backup-file", "bak"]),
            );
            assert!(
                out.contains("reshape done"),
                "killed after {delay} ms: {out}"
            );
        } else if d.join("bak").exists() && shape(d, &m).1 == 64 << 10 {
            // Killed before the reshape was recorded: the file is left.
            std::fs::remove_file(d.join("bak")).unwrap();
        }
        assert!(export(d, &m) == a, "killed after {delay} ms: bytes differ");
        check_clean(d, &m);
    }
}

/// A metadata 0.90 RAID 5 shrunk by a member from the command line, as
/// with mdadm: `--array-size` first and a `--backup-file` (refused without
/// either, and with the file on a member, no byte changed); killed
/// mid-walk, `--continue` without the file refused, with it finished; the
/// new members' bytes exact and clean, the one that left a spare, the file
/// gone.
#[test]
fn a_090_raid5_shrinks_by_a_member_through_a_backup_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["m0", "m1", "m2", "m3", "m4"];
    let a = create_filled(
        d,
        &m,
        "16M",
        &["--level", "5", "--metadata", "0.90", "--chunk", "64K"],
    );
    let member = detail(d, &m)["member_data_bytes"].as_u64().unwrap() as usize;
    let holds = 3 * member;
    let size = format!("{}K", holds / 1024);
    let before = files(d, &m);
    for (extra, why) in [
        (
            vec!["--raid-devices", "4", "--backup-file", "bak"],
            "reduce the size of the array",
        ),
        (
            vec!["--raid-devices", "4", "--array-size", &size],
            "need backup-file",
        ),
        (
            vec![
                "--raid-devices",
                "4",
                "--array-size",
                &size,
                "--backup-file",
                "m2",
            ],
            "must NOT be on the array",
        ),
    ] {
        let o = run(d, &with("grow", &m, &extra));
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && e.contains(why), "{extra:?}: {e}");
        assert!(!d.join("bak").exists(), "{extra:?} left a backup file");
    }
    assert!(files(d, &m) == before, "a refusal changed a member");
    let shrink = with(
        "grow",
        &m,
        &[
            "--raid-devices",
            "4",
            "--array-size",
            &size,
            "--backup-file",
            "bak",
            "--max-rate",
            "8M",
        ],
    );
    killed_after(d, &shrink, Duration::from_millis(900));
    eprintln!(
        "killed after 900 ms: mid-reshape {}",
        !examine(d, "m0")["reshape"].is_null()
    );
    if examine(d, "m0")["reshape"].is_null() && examine(d, "m0")["raid_devices"] == 5 {
        // Killed before the start's commit: run it again, to the end.
        let _ = std::fs::remove_file(d.join("bak"));
        let out = ok(d, &shrink);
        assert!(
            out.contains("backwards") && out.contains("reshape done"),
            "{out}"
        );
    } else if !examine(d, "m0")["reshape"].is_null() {
        let o = run(d, &with("grow", &m, &["--continue"]));
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && e.contains("--backup-file"), "{e}");
        let out = ok(
            d,
            &with("grow", &m, &["--continue", "--backup-file", "bak"]),
        );
        assert!(
            out.contains("reshape done") && out.contains("spare(s) now"),
            "{out}"
        );
    }
    assert!(!d.join("bak").exists(), "the backup file is left");
    let got = export(d, &m);
    assert_eq!(got.len(), holds);
    assert!(got == a[..holds], "the data the 4 members hold changed");
    check_clean(d, &m);
    for k in &m[..4] {
        let e = examine(d, k);
        assert_eq!(e["raid_devices"].as_u64(), Some(4), "{e}");
        assert!(e["reshape"].is_null(), "{k}: {e}");
    }
    // md's 0.90 words for the member that left: a spare's descriptor.
    let e = examine(d, "m4");
    let this = &e["disks"][0];
    assert_eq!(this["slot"].as_str(), Some("this"), "{e}");
    assert_eq!(this["state"].as_str(), Some("spare"), "{e}");
    assert_eq!(e["raid_devices"].as_u64(), Some(4), "{e}");
}
