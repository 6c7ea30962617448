//! `raidlab grow` (mdadm --grow without restriping) on real member files:
//! --size after the members grew (and shrinking, and back), --bitmap
//! internal|none, --consistency-policy resync|ppl, RAID 1 --raid-devices up
//! and down. After each change the data reads back exactly, the superblocks
//! say what md would write, and `check` finds no mismatch once the new space
//! is synced. Every refusal leaves every member file byte for byte as it was.

mod common;

use assert_cmd::Command;
use common::verbs::*;
use std::path::Path;

/// Create an array on 16 MiB members and fill it with a pattern; returns
/// the pattern.
fn create_filled(d: &Path, members: &[&str], extra: &[&str]) -> Vec<u8> {
    let mut args = vec!["--member-size", "16M"];
    args.extend_from_slice(extra);
    ok(d, &with("create", members, &args));
    let size = detail(d, members)["array_size_bytes"].as_u64().unwrap();
    let a = pattern(size as usize, 7);
    std::fs::write(d.join("a.bin"), &a).unwrap();
    ok(d, &with("import", members, &["--input", "a.bin"]));
    a
}

fn grow_files(d: &Path, members: &[&str], bytes: u64) {
    for m in members {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(d.join(m))
            .unwrap();
        f.set_len(bytes).unwrap();
    }
}

/// Every member's data offset in bytes (the same on every member here).
fn data_offset(d: &Path, m: &str) -> u64 {
    examine(d, m)["data_offset"].as_u64().unwrap() * 512
}

#[test]
fn raid5_size_max_uses_the_grown_members_resyncs_the_new_space_and_keeps_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["m0", "m1", "m2"];
    let a = create_filled(d, &m, &["--level", "5", "--chunk", "64K"]);
    let old = detail(d, &m)["member_data_bytes"].as_u64().unwrap();
    grow_files(d, &m, 32 * MIB);
    let out = ok(d, &with("grow", &m, &["--size", "max"]));
    assert!(out.contains("the new space is resynced"), "{out}");
    let v = detail(d, &m);
    let off = data_offset(d, "m0");
    // All of each member after the data offset, whole 64 KiB chunks.
    let want = (32 * MIB - off) / (64 << 10) * (64 << 10);
    assert_eq!(v["member_data_bytes"].as_u64().unwrap(), want);
    assert_eq!(v["array_size_bytes"].as_u64().unwrap(), 2 * want);
    assert_eq!(v["state"], "clean");
    for name in m {
        let e = examine(d, name);
        assert_eq!(e["used_dev_size"].as_u64().unwrap() * 512, want, "{name}");
        assert_eq!(e["avail_dev_size"].as_u64().unwrap() * 512, 32 * MIB - off);
        assert_eq!(e["resync_offset"].as_u64().unwrap(), u64::MAX);
    }
    assert!(want > old);
    check_clean(d, &m);
    let got = export(d, &m);
    assert_eq!(got.len() as u64, 2 * want);
    assert!(
        got[..a.len()] == a[..],
        "the data before the grow reads back"
    );
}

#[test]
fn raid1_size_with_a_bitmap_marks_only_the_new_chunks_and_shrinks_and_grows_back() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["m0", "m1"];
    let a = create_filled(
        d,
        &m,
        &[
            "--level",
            "1",
            "--consistency-policy",
            "bitmap",
            "--bitmap-chunk",
            "1M",
        ],
    );
    let old = detail(d, &m)["member_data_bytes"].as_u64().unwrap();
    grow_files(d, &m, 32 * MIB);
    // 24 MiB of each member: the new space is 24 MiB - old, in 1 MiB bits.
    let out = ok(d, &with("grow", &m, &["--size", "24M"]));
    let marked = (24 * MIB).div_ceil(MIB) - old / MIB;
    assert!(
        out.contains(&format!("{marked} bitmap chunk(s) marked")),
        "{out}"
    );
    let v = detail(d, &m);
    assert_eq!(v["member_data_bytes"].as_u64().unwrap(), 24 * MIB);
    assert_eq!(v["bitmap_dirty_chunks"].as_u64().unwrap(), 0);
    // mdadm -X's figure: KiB.
    let e = examine(d, "m0");
    let sync = e["bitmap"]["Sync Size"].as_str().unwrap().to_string();
    assert!(sync.starts_with(&format!("{} ", 24 * 1024)), "{sync}");
    check_clean(d, &m);
    assert!(export(d, &m)[..a.len()] == a[..]);
    // Shrink below the data (md allows it: the end is no longer served),
    // then grow back: everything is there again.
    let out = ok(d, &with("grow", &m, &["--size", "4M"]));
    assert!(out.contains("no longer served"), "{out}");
    assert_eq!(export(d, &m).len() as u64, 4 * MIB);
    ok(d, &with("grow", &m, &["--size", "max"]));
    check_clean(d, &m);
    assert!(export(d, &m)[..a.len()] == a[..]);
}

#[test]
fn raid10_near_size_max_with_a_bitmap_resyncs_the_new_space_and_keeps_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["m0", "m1", "m2", "m3"];
    let a = create_filled(
        d,
        &m,
        &[
            "--level",
            "10",
            "--layout",
            "n2",
            "--chunk",
            "64K",
            "--consistency-policy",
            "bitmap",
            "--bitmap-chunk",
            "1M",
        ],
    );
    let old = detail(d, &m)["member_data_bytes"].as_u64().unwrap();
    grow_files(d, &m, 32 * MIB);
    // One copy of the new space differs from the other, as stale bytes on a
    // replaced member would: only the resync makes the copies agree.
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(d.join("m0"))
            .unwrap();
        f.seek(SeekFrom::Start(16 * MIB)).unwrap();
        f.write_all(&pattern(8 * MIB as usize, 5)).unwrap();
    }
    let out = ok(d, &with("grow", &m, &["--size", "max"]));
    assert!(out.contains("the new space is resynced"), "{out}");
    // The bitmap counts array sectors: the new array space in 1 MiB bits.
    let off = data_offset(d, "m0");
    let want = (32 * MIB - off) / (64 << 10) * (64 << 10);
    let marked = (2 * want).div_ceil(MIB) - (2 * old) / MIB;
    assert!(
        out.contains(&format!("{marked} bitmap chunk(s) marked")),
        "{out}"
    );
    let v = detail(d, &m);
    assert_eq!(v["member_data_bytes"].as_u64().unwrap(), want);
    assert_eq!(v["array_size_bytes"].as_u64().unwrap(), 2 * want);
    assert_eq!(v["state"], "clean");
    assert_eq!(v["bitmap_dirty_chunks"].as_u64().unwrap(), 0);
    for name in m {
        let e = examine(d, name);
        assert_eq!(e["used_dev_size"].as_u64().unwrap() * 512, want, "{name}");
        assert_eq!(e["resync_offset"].as_u64().unwrap(), u64::MAX);
        let sync = e["bitmap"]["Sync Size"].as_str().unwrap().to_string();
        assert!(sync.starts_with(&format!("{} ", 2 * want / 1024)), "{sync}");
    }
    assert!(want > old);
    check_clean(d, &m);
    let got = export(d, &m);
    assert_eq!(got.len() as u64, 2 * want);
    assert!(
        got[..a.len()] == a[..],
        "the data before the grow reads back"
    );
}

#[test]
fn raid10_offset_size_is_kept_in_whole_rows_as_md_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["m0", "m1", "m2"];
    let a = create_filled(
        d,
        &m,
        &["--level", "10", "--layout", "o2", "--chunk", "64K"],
    );
    grow_files(d, &m, 32 * MIB);
    // 401 chunks asked; offset=2 keeps whole rows of two chunks: 400.
    let out = ok(d, &with("grow", &m, &["--size", "25664K"]));
    assert!(out.contains("the new space is resynced"), "{out}");
    let v = detail(d, &m);
    assert_eq!(v["member_data_bytes"].as_u64().unwrap(), 25 * MIB);
    // The superblocks record what md keeps (its dev_sectors), not what was asked.
    for name in m {
        let e = examine(d, name);
        assert_eq!(
            e["used_dev_size"].as_u64().unwrap() * 512,
            25 * MIB,
            "{name}"
        );
    }
    // 200 rows of three chunks.
    assert_eq!(
        v["array_size_bytes"].as_u64().unwrap(),
        200 * 3 * (64 << 10)
    );
    check_clean(d, &m);
    assert!(export(d, &m)[..a.len()] == a[..]);
}

#[test]
fn size_assume_clean_records_the_new_space_in_sync_without_a_resync() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["m0", "m1", "m2"];
    let a = create_filled(d, &m, &["--level", "5", "--chunk", "64K"]);
    grow_files(d, &m, 24 * MIB);
    let out = ok(d, &with("grow", &m, &["--size", "max", "--assume-clean"]));
    assert!(!out.contains("resynced"), "{out}");
    assert_eq!(detail(d, &m)["state"], "clean");
    // The new space is zeros on every member: its parity (zero) matches.
    check_clean(d, &m);
    assert!(export(d, &m)[..a.len()] == a[..]);
}

#[test]
fn bitmap_is_added_and_removed_and_the_array_stays_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["m0", "m1", "m2", "m3"];
    let a = create_filled(d, &m, &["--level", "6", "--chunk", "64K"]);
    let out = ok(
        d,
        &with(
            "grow",
            &m,
            &["--bitmap", "internal", "--bitmap-chunk", "256K"],
        ),
    );
    assert!(out.contains("internal bitmap added"), "{out}");
    for name in m {
        let e = examine(d, name);
        assert_eq!(e["bitmap"]["Chunksize"], "256 KB", "{name}: {e}");
        let text = ok(d, &["examine", name]);
        assert!(
            text.contains("Internal Bitmap : 8 sectors from superblock"),
            "{name}: {text}"
        );
    }
    let v = detail(d, &m);
    assert_eq!(v["consistency_policy"], "bitmap");
    assert_eq!(v["bitmap_dirty_chunks"].as_u64().unwrap(), 0);
    // Writes through the new bitmap, then a clean check.
    let b = pattern(MIB as usize, 9);
    std::fs::write(d.join("b.bin"), &b).unwrap();
    ok(
        d,
        &with("import", &m, &["--input", "b.bin", "--offset", "3M"]),
    );
    let mut want = a.clone();
    want[3 * MIB as usize..4 * MIB as usize].copy_from_slice(&b);
    check_clean(d, &m);
    assert!(export(d, &m) == want);
    ok(d, &with("grow", &m, &["--bitmap", "none"]));
    let v = detail(d, &m);
    assert_eq!(v["consistency_policy"], "resync");
    for name in m {
        assert!(examine(d, name)["bitmap"].is_null(), "{name}");
    }
    check_clean(d, &m);
    assert!(export(d, &m) == want);
}

#[test]
fn raid5_consistency_policy_goes_from_ppl_to_resync_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["m0", "m1", "m2"];
    let a = create_filled(
        d,
        &m,
        &[
            "--level",
            "5",
            "--chunk",
            "64K",
            "--consistency-policy",
            "ppl",
        ],
    );
    ok(d, &with("grow", &m, &["--consistency-policy", "resync"]));
    assert_eq!(detail(d, &m)["consistency_policy"], "resync");
    ok(d, &with("grow", &m, &["--consistency-policy", "ppl"]));
    assert_eq!(detail(d, &m)["consistency_policy"], "ppl");
    let b = pattern(MIB as usize, 3);
    std::fs::write(d.join("b.bin"), &b).unwrap();
    ok(
        d,
        &with("import", &m, &["--input", "b.bin", "--offset", "5M"]),
    );
    let mut want = a;
    want[5 * MIB as usize..6 * MIB as usize].copy_from_slice(&b);
    check_clean(d, &m);
    assert!(export(d, &m) == want);
}

#[test]
fn raid1_raid_devices_grow_rebuilds_the_new_mirror_and_shrink_needs_the_slot_empty() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["m0", "m1"];
    let a = create_filled(d, &m, &["--level", "1"]);
    let out = ok(
        d,
        &with(
            "grow",
            &m,
            &["--raid-devices", "3", "--add", "m2", "--member-size", "16M"],
        ),
    );
    assert!(out.contains("added into new role 2"), "{out}");
    let m3 = ["m0", "m1", "m2"];
    let v = detail(d, &m3);
    assert_eq!(v["raid_devices"], 3);
    assert_eq!(v["state"], "clean");
    for (i, name) in m3.iter().enumerate() {
        assert_eq!(examine(d, name)["raid_devices"], 3);
        assert_eq!(v["members"][i]["state"], "active");
    }
    check_clean(d, &m3);
    // The new mirror alone holds the data.
    assert!(export(d, &["m2"])[..a.len()] == a[..]);
    assert!(export(d, &m3)[..a.len()] == a[..]);
    // Three mirrors in service do not fit two slots: refused, nothing written.
    let before = files(d, &m3);
    let o = run(d, &with("grow", &m3, &["--raid-devices", "2"]));
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("fail and remove"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(files(d, &m3) == before, "a refused shrink wrote nothing");
    // Fail and remove m0: m1 and m2 move down into slots 0 and 1.
    ok(d, &with("fail", &m3, &["--member", "m0"]));
    ok(d, &with("remove", &m3, &["--member", "m0"]));
    let out = ok(d, &with("grow", &["m1", "m2"], &["--raid-devices", "2"]));
    assert!(out.contains("m2 moved from role 2 to role"), "{out}");
    let v = detail(d, &["m1", "m2"]);
    assert_eq!(v["raid_devices"], 2);
    assert_eq!(v["state"], "clean");
    check_clean(d, &["m1", "m2"]);
    assert!(export(d, &["m1", "m2"])[..a.len()] == a[..]);
}

#[test]
fn raid1_raid_devices_grow_takes_a_hot_spare() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["m0", "m1", "m2"];
    let a = create_filled(d, &m, &["--level", "1", "--spares", "1"]);
    let out = ok(d, &with("grow", &m, &["--raid-devices", "3"]));
    assert!(out.contains("hot spare m2 takes a new slot"), "{out}");
    let v = detail(d, &m);
    assert_eq!(v["raid_devices"], 3);
    assert_eq!(v["members"][2]["state"], "active");
    check_clean(d, &m);
    assert!(export(d, &m)[..a.len()] == a[..]);
}

/// Each refusal: the message names the reason, and no member file changes.
#[test]
fn refusals_say_why_and_change_no_byte() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let r5 = ["a0", "a1", "a2"];
    create_filled(d, &r5, &["--level", "5", "--chunk", "64K"]);
    let r0 = ["z0", "z1"];
    create_filled(d, &r0, &["--level", "0", "--chunk", "64K"]);
    let r1 = ["b0", "b1"];
    create_filled(d, &r1, &["--level", "1", "--consistency-policy", "bitmap"]);
    let r10 = ["n0", "n1"];
    create_filled(d, &r10, &["--level", "10", "--layout", "n2"]);
    let far = ["f0", "f1"];
    create_filled(d, &far, &["--level", "10", "--layout", "f2"]);
    let ppl = ["p0", "p1", "p2"];
    create_filled(d, &ppl, &["--level", "5", "--consistency-policy", "ppl"]);
    let jnl = ["j0", "j1", "j2", "jd"];
    let jargs = [
        "--member-size",
        "16M",
        "--level",
        "5",
        "--write-journal",
        "jd",
    ];
    ok(d, &with("create", &jnl[..3], &jargs));
    // Room to grow into, so only md's rules refuse.
    grow_files(d, &["n0", "n1", "f0", "f1", "p0", "p1", "p2"], 32 * MIB);
    grow_files(d, &jnl[..3], 32 * MIB);
    std::fs::write(d.join("plain"), vec![0u8; 4 * MIB as usize]).unwrap();
    let all = [
        "a0", "a1", "a2", "z0", "z1", "b0", "b1", "n0", "n1", "f0", "f1", "p0", "p1", "p2", "j0",
        "j1", "j2", "jd", "plain",
    ];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        // RAID 5 --raid-devices is a reshape now (tests/reshape.rs); with
        // no device for the new slot it is refused for want of one.
        (with("grow", &r5, &["--raid-devices", "4"]), "need 1 spare"),
        // RAID 5 to 6 is built now (tests/reshape.rs): without a device for
        // Q it is refused for want of one.
        (with("grow", &r5, &["--level", "6"]), "Need 1 spare"),
        // A RAID 4/5/6 --chunk or --layout is a reshape now
        // (tests/reshape.rs); for RAID 0 and 1 it is not built.
        (
            with("grow", &r0, &["--layout", "left-symmetric"]),
            "no layout",
        ),
        (
            with("grow", &r1, &["--layout", "left-asymmetric"]),
            "reshape",
        ),
        (with("grow", &r0, &["--raid-devices", "3"]), "--add"),
        (with("grow", &r5, &["--size", "64M"]), "does not fit"),
        (with("grow", &r5, &["--size", "32K"]), "at least one chunk"),
        (
            with("grow", &r5, &["--size", "1000"]),
            "whole number of KiB",
        ),
        (with("grow", &r0, &["--size", "max"]), "RAID 0"),
        (with("grow", &far, &["--size", "max"]), "far layout"),
        (with("grow", &r10, &["--size", "64M"]), "does not fit"),
        // md's raid5_resize refuses both logs.
        (with("grow", &ppl, &["--size", "max"]), "keeps a PPL"),
        (
            with("grow", &jnl, &["--size", "max"]),
            "keeps a write journal",
        ),
        (
            with("grow", &r0, &["--bitmap", "internal"]),
            "not meaningful",
        ),
        (with("grow", &r5, &["--bitmap", "none"]), "no bitmap found"),
        (with("grow", &r1, &["--bitmap", "internal"]), "already has"),
        (
            with("grow", &r1, &["--consistency-policy", "ppl"]),
            "RAID 5",
        ),
        (
            with("grow", &r5, &["--consistency-policy", "ppl"]),
            "Not enough space",
        ),
        (
            with("grow", &r5, &["--consistency-policy", "resync"]),
            "already resync",
        ),
        (
            with("grow", &r5, &["--consistency-policy", "bitmap"]),
            "--bitmap internal",
        ),
        (with("grow", &r1, &["--raid-devices", "3"]), "need 1 spare"),
        (
            with("grow", &r1, &["--raid-devices", "1"]),
            "fail and remove",
        ),
        (with("grow", &r1, &["--raid-devices", "2"]), "no change"),
        (
            with(
                "grow",
                &r1,
                &[
                    "--raid-devices",
                    "3",
                    "--add",
                    "tiny",
                    "--member-size",
                    "1M",
                ],
            ),
            "needs",
        ),
        (
            with("grow", &r5, &["--size", "max", "--bitmap", "internal"]),
            "one change per run",
        ),
        (with("grow", &r5, &[]), "nothing to change"),
        (
            with("grow", &["plain"], &["--size", "max"]),
            "no md superblock",
        ),
        (
            with("grow", &["nonexistent"], &["--size", "max"]),
            "nonexistent",
        ),
    ];
    for (args, why) in cases {
        let before = files(d, &all);
        let o = run(d, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(err.contains(why), "{args:?}: expected {why:?} in: {err}");
        assert!(files(d, &all) == before, "{args:?} changed a member file");
        assert!(
            !d.join("tiny").exists(),
            "{args:?} left a created file behind"
        );
    }
}

/// Metadata 0.90 (its superblock at the member's end, the data from the
/// start up to it): `--size` down, then `max` back up to the superblock,
/// as md's `super_90_load` counts the room; the bitmap (after the
/// superblock) resized with it, the new space resynced, the data exact; a
/// size past the superblock refused.
#[test]
fn metadata_090_size_shrinks_and_grows_back_with_its_bitmap() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["m0", "m1", "m2"];
    let a = create_filled(
        d,
        &m,
        &[
            "--level",
            "5",
            "--chunk",
            "64K",
            "--metadata",
            "0.90",
            "--consistency-policy",
            "bitmap",
            "--bitmap-chunk",
            "256K",
        ],
    );
    let full = detail(d, &m)["member_data_bytes"].as_u64().unwrap();
    // mdadm -X's figure, KiB (its human size after it only from 5000 KiB).
    let sync = |d: &Path| -> u64 {
        let e = examine(d, "m0");
        let s = e["bitmap"]["Sync Size"].as_str().unwrap().to_string();
        s.split_whitespace().next().unwrap().parse().unwrap()
    };
    assert_eq!(sync(d), full / 1024);
    let out = ok(d, &with("grow", &m, &["--size", "4M"]));
    assert!(out.contains("no longer served"), "{out}");
    assert_eq!(export(d, &m).len() as u64, 2 * 4 * MIB);
    assert_eq!(sync(d), 4 * 1024);
    let past = format!("{}K", full / 1024 + 64);
    let before = files(d, &m);
    let o = run(d, &with("grow", &m, &["--size", &past]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("does not fit"), "{err}");
    assert!(files(d, &m) == before, "the refusal wrote");
    let out = ok(d, &with("grow", &m, &["--size", "max"]));
    assert!(out.contains("bitmap chunk(s) marked"), "{out}");
    let v = detail(d, &m);
    assert_eq!(v["member_data_bytes"].as_u64().unwrap(), full);
    assert_eq!(v["bitmap_dirty_chunks"].as_u64().unwrap(), 0);
    assert_eq!(sync(d), full / 1024);
    check_clean(d, &m);
    assert!(export(d, &m)[..] == a[..], "the data is not what it was");
}

#[test]
fn a_locked_array_is_refused_and_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["m0", "m1"];
    create_filled(d, &m, &["--level", "1"]);
    grow_files(d, &m, 32 * MIB);
    let before = files(d, &m);
    // Another process holds m0 (as a raidlab serving it would).
    let mut holder = std::process::Command::new("flock")
        .current_dir(d)
        .args(["-x", "m0", "-c", "sleep 20"])
        .spawn()
        .expect("flock(1) runs");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let o = run(d, &with("grow", &m, &["--size", "max"]));
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("locked"), "{err}");
    assert!(files(d, &m) == before);
}

/// Metadata 1.0 keeps its superblock at the member's end, so members are
/// swapped for bigger ones (`replace`), then the array grows into them.
#[test]
fn metadata_1_0_raid1_grows_after_its_members_were_replaced_by_bigger_ones() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["m0", "m1"];
    let a = create_filled(
        d,
        &m,
        &[
            "--level",
            "1",
            "--metadata",
            "1.0",
            "--consistency-policy",
            "bitmap",
        ],
    );
    let old = detail(d, &m)["member_data_bytes"].as_u64().unwrap();
    ok(
        d,
        &with(
            "replace",
            &m,
            &["--old", "m0", "--with", "b0", "--member-size", "32M"],
        ),
    );
    let m = ["b0", "m1"];
    ok(
        d,
        &with(
            "replace",
            &m,
            &["--old", "m1", "--with", "b1", "--member-size", "32M"],
        ),
    );
    let m = ["b0", "b1"];
    ok(d, &with("grow", &m, &["--size", "max"]));
    let v = detail(d, &m);
    let new = v["member_data_bytes"].as_u64().unwrap();
    assert!(new > old + 15 * MIB, "{old} -> {new}");
    assert_eq!(v["state"], "clean");
    for name in m {
        let e = examine(d, name);
        // The data ends before the bitmap and the superblock near the end.
        let end = new / 512;
        assert!(end < e["super_offset"].as_u64().unwrap(), "{name}: {e}");
    }
    check_clean(d, &m);
    assert!(export(d, &m)[..a.len()] == a[..]);
}

/// What a served array cannot take (`--size` with `--no-sync`: the resync
/// of a served array runs in the server) is refused, naming the way: stop
/// it first.
#[test]
fn a_served_array_is_refused_and_unchanged() {
    use std::os::unix::net::UnixStream;
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["m0", "m1"];
    create_filled(d, &m, &["--level", "1"]);
    grow_files(d, &m, 32 * MIB);
    let run_dir = d.join("run");
    let socket = d.join("nbd.sock");
    let mut server = std::process::Command::new(env!("CARGO_BIN_EXE_raidlab"))
        .current_dir(d)
        .env("RAIDLAB_RUN_DIR", &run_dir)
        .args(["serve", "--socket"])
        .arg(&socket)
        .args(m)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let ctl = run_dir.join(format!("serve-{}.ctl", server.id()));
    let t = Instant::now();
    while UnixStream::connect(&socket).is_err() || !ctl.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "serve did not listen"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = Command::cargo_bin("raidlab")
        .unwrap()
        .current_dir(d)
        .env("RAIDLAB_RUN_DIR", &run_dir)
        .args(with("grow", &m, &["--size", "max", "--no-sync"]))
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("served") && err.contains("raidlab stop"),
        "{err}"
    );
    let size = detail(d, &m)["member_data_bytes"].as_u64().unwrap();
    assert!(size < 16 * MIB, "the array did not grow: {size}");
}
