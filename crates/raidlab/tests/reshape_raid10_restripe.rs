//! `raidlab grow --chunk SIZE` and `--layout NAME` of a RAID 10 in the near
//! and offset layouts (md's RAID 10 reshape over the same members: the
//! same copies, the data offset moved down, the walk forwards, every copy
//! rewritten in the new geometry) on real member files. The data written
//! before reads back byte for byte after, the array keeps its size, `check`
//! finds the copies equal, the superblocks record md's reshape fields while
//! it runs and md's end state after; a restripe killed (SIGKILL) at random
//! points reads back exactly while stopped and after `--continue`; and
//! every refusal (the far layout, another number of copies, other members
//! at once, an array that is not whole new chunks, no room below the data)
//! says why and leaves every member file as it was.

mod common;

use common::verbs::*;
use raidlab_devices::{FileVolume, OpenMode};
use std::path::Path;
use std::time::Duration;

/// A member's superblock, read as md would.
fn superblock(d: &Path, m: &str) -> raidlab_md::Superblock {
    let vol = FileVolume::open(&d.join(m), OpenMode::ReadOnly).unwrap();
    raidlab_md::Superblock::read_from(&vol).unwrap().unwrap()
}

/// md's RAID 10 layout word of a short name (n2, o2, n3, o3).
fn md_layout(name: &str) -> u32 {
    let copies: u32 = name[1..].parse().unwrap();
    match &name[..1] {
        "n" => 0x100 | copies,
        "o" => 0x10000 | (copies << 8) | 1,
        other => panic!("not a near or offset layout: {other}"),
    }
}

/// After a restripe to `layout` with a `chunk_kib` chunk: the same bytes
/// and size as before, no mismatch between copies, md's end-of-reshape
/// superblock fields on every member (the new layout and chunk, the data
/// offset moved down and the data size grown by as much, no reshape flag
/// left), and each member's role as before.
fn assert_restriped(
    d: &Path,
    members: &[&str],
    layout: &str,
    chunk_kib: u32,
    a: &[u8],
    before: &[raidlab_md::Superblock],
) {
    let v = detail(d, members);
    assert_eq!(v["level"].as_str(), Some("raid10"), "{v}");
    assert_eq!(v["chunk_bytes"].as_u64(), Some(u64::from(chunk_kib) << 10));
    assert_eq!(v["array_size_bytes"].as_u64(), Some(a.len() as u64), "{v}");
    let got = export(d, members);
    assert!(got == a, "the data changed in the restripe to {layout}");
    check_clean(d, members);
    for (m, b) in members.iter().zip(before) {
        let sb = superblock(d, m);
        assert_eq!((sb.level, sb.raid_disks), (10, b.raid_disks), "{m}");
        assert_eq!(
            (sb.layout, sb.new_layout),
            (md_layout(layout), md_layout(layout))
        );
        assert_eq!((sb.chunksize, sb.new_chunk), (chunk_kib * 2, chunk_kib * 2));
        assert_eq!(
            (sb.delta_disks, sb.new_offset, sb.reshape_position),
            (0, 0, 0),
            "{m}"
        );
        assert_eq!(
            sb.feature_map & (4 | 64 | 128),
            0,
            "{m}: reshape flags left set"
        );
        assert!(
            sb.data_offset < b.data_offset,
            "{m}: data offset did not move down"
        );
        assert_eq!(
            sb.data_offset + sb.data_size,
            b.data_offset + b.data_size,
            "{m}: md's end of a reshape: the data size grows by the move"
        );
        assert_eq!(sb.size, b.size, "{m}: the component size");
        assert_eq!(sb.dev_roles, b.dev_roles, "{m}: the roles");
    }
}

fn superblocks(d: &Path, members: &[&str]) -> Vec<raidlab_md::Superblock> {
    members.iter().map(|m| superblock(d, m)).collect()
}

#[test]
fn near_and_offset_raid10_restripe_to_a_new_chunk_or_layout() {
    // (members, layout, chunk KiB before, layout, chunk KiB after)
    let cases = [
        (4, "n2", 64, "o2", 64),
        (4, "n2", 64, "n2", 256),
        (4, "n2", 512, "n2", 64),
        (4, "n2", 64, "o2", 256),
        (3, "o2", 128, "n2", 32),
        (3, "n3", 64, "o3", 64),
        (5, "o3", 32, "n3", 128),
    ];
    let names = ["m0", "m1", "m2", "m3", "m4"];
    for (n, from, fc, to, tc) in cases {
        let what = format!("{n} members {from} {fc}K -> {to} {tc}K");
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let members = &names[..n];
        let (fck, tck) = (format!("{fc}K"), format!("{tc}K"));
        let a = create_imported(
            d,
            members,
            "16M",
            &["--level", "10", "--layout", from, "--chunk", &fck],
        );
        let before = superblocks(d, members);
        let mut args = with("grow", members, &[]);
        if from != to {
            args.extend(["--layout", to]);
        }
        if fc != tc {
            args.extend(["--chunk", &tck]);
        }
        let out = ok(d, &args);
        assert!(out.contains("reshape done"), "{what}: {out}");
        assert!(out.contains("moves down"), "{what}: {out}");
        assert_restriped(d, members, to, tc, &a, &before);
    }
}

#[test]
fn mid_restripe_superblocks_say_what_md_records_and_continue_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["m0", "m1", "m2", "m3"];
    let a = create_imported(d, &m, "16M", &["--level", "10", "--chunk", "64K"]);
    let before = superblocks(d, &m);
    let out = ok(
        d,
        &with(
            "grow",
            &m,
            &["--layout", "o2", "--chunk", "256K", "--no-sync"],
        ),
    );
    assert!(out.contains("mid-reshape"), "{out}");
    for (name, b) in m.iter().zip(&before) {
        let sb = superblock(d, name);
        // md's RAID 10 reshape over the same members: the old layout and
        // chunk, the new ones beside them, no member added (delta_disks
        // 0), forwards (no RESHAPE_BACKWARDS), the data offset to move
        // down (NEW_OFFSET) by at least md's least move, the taller row
        // (offset=2 of 256K: 512 KiB).
        assert_eq!(
            (sb.level, sb.new_level, sb.raid_disks),
            (10, 10, 4),
            "{name}"
        );
        assert_eq!((sb.layout, sb.new_layout), (0x102, 0x10201), "{name}");
        assert_eq!((sb.chunksize, sb.new_chunk), (128, 512), "{name}");
        assert_eq!((sb.delta_disks, sb.reshape_position), (0, 0), "{name}");
        assert_eq!(sb.feature_map & (4 | 64 | 128), 4 | 64, "{name}");
        assert!(
            -i64::from(sb.new_offset) >= 1024,
            "{name}: {}",
            sb.new_offset
        );
        assert_eq!(sb.size, b.size, "{name}: the component size");
    }
    assert!(
        export(d, &m) == a,
        "the mid-reshape array reads other bytes"
    );
    let out = ok(d, &with("grow", &m, &["--continue"]));
    assert!(out.contains("reshape done"), "{out}");
    assert_restriped(d, &m, "o2", 256, &a, &before);
}

/// (reshape active, layout word) from m0's superblock.
fn state(d: &Path) -> (bool, u32) {
    let sb = superblock(d, "m0");
    (sb.feature_map & 4 != 0, sb.layout)
}

#[test]
fn a_restripe_killed_at_random_points_reads_back_exactly_and_continue_finishes_it() {
    // A rate limit makes the run last a few seconds, so the kills land
    // anywhere in it; the delays come from a fixed seed (printed on
    // failure). Each case changes the layout, so the superblock says
    // whether the reshape was recorded, ran or finished.
    let mut x: u32 = 0x6d2b_79f5;
    let m = ["m0", "m1", "m2", "m3"];
    let cases = [
        ("n2", "64K", "o2", "256K"),
        ("o2", "256K", "n2", "64K"),
        ("n2", "128K", "o2", "128K"),
        ("o2", "64K", "n2", "64K"),
    ];
    let mut mid = 0;
    for (from, fc, to, tc) in cases {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let delay = Duration::from_millis(200 + u64::from(x % 2400));
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let a = create_imported(
            d,
            &m,
            "24M",
            &["--level", "10", "--layout", from, "--chunk", fc],
        );
        let before = superblocks(d, &m);
        let restripe = |extra: &[&'static str]| {
            let mut args = with("grow", &m, &["--layout", to]);
            if fc != tc {
                args.extend(["--chunk", tc]);
            }
            args.extend_from_slice(extra);
            args
        };
        killed_after(d, &restripe(&["--max-rate", "8M"]), delay);
        let what = format!("{from} {fc} -> {to} {tc}, killed after {delay:?}");
        let s = state(d);
        eprintln!("{what}: (reshape active, layout) = {s:?}");
        match s {
            (true, l) if l == md_layout(from) => {
                mid += 1;
                let sb = superblock(d, "m0");
                assert_eq!(sb.new_layout, md_layout(to), "{what}");
                assert!(
                    export(d, &m) == a,
                    "{what}: the stopped array reads other bytes"
                );
                let out = ok(d, &with("grow", &m, &["--continue"]));
                assert!(out.contains("reshape done"), "{what}: {out}");
            }
            (false, l) if l == md_layout(from) => {
                // Killed before the reshape was recorded: restripe again.
                assert!(export(d, &m) == a, "{what}: changed before its reshape");
                ok(d, &restripe(&[]));
            }
            (false, l) if l == md_layout(to) => {}
            s => panic!("{what}: unexpected state {s:?}"),
        }
        let tck: u32 = tc.trim_end_matches('K').parse().unwrap();
        assert_restriped(d, &m, to, tck, &a, &before);
    }
    assert!(mid >= 2, "only {mid} kills landed mid-reshape");
}

#[test]
fn refusals_say_why_and_change_no_byte() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let r10 = ["t0", "t1", "t2", "t3"];
    create_imported(d, &r10, "16M", &["--level", "10", "--chunk", "64K"]);
    let far = ["f0", "f1", "f2", "f3"];
    create_imported(d, &far, "16M", &["--level", "10", "--layout", "f2"]);
    // Metadata 1.0: nothing below the data to move it into.
    let end = ["e0", "e1", "e2", "e3"];
    create_imported(d, &end, "16M", &["--level", "10", "--metadata", "1.0"]);
    let bm = ["b0", "b1", "b2", "b3"];
    create_imported(
        d,
        &bm,
        "16M",
        &["--level", "10", "--consistency-policy", "bitmap"],
    );
    // Three members of 64K near=2 with an odd number of chunks each: the
    // array is 33 chunks of 64K, not whole 128K chunks.
    let odd = ["o0", "o1", "o2"];
    create_imported(d, &odd, "16M", &["--level", "10", "--chunk", "64K"]);
    ok(d, &with("grow", &odd, &["--size", "1408K"]));
    let all = [
        "t0", "t1", "t2", "t3", "f0", "f1", "f2", "f3", "e0", "e1", "e2", "e3", "b0", "b1", "b2",
        "b3", "o0", "o1", "o2",
    ];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            with("grow", &far, &["--chunk", "128K"]),
            "Cannot reshape RAID10 in far-mode",
        ),
        (
            with("grow", &far, &["--layout", "n2"]),
            "Cannot reshape RAID10 in far-mode",
        ),
        (
            with("grow", &r10, &["--layout", "f2"]),
            "Cannot reshape RAID10 to far-mode",
        ),
        (
            with("grow", &r10, &["--layout", "o3"]),
            "Cannot change number of copies",
        ),
        (
            with("grow", &r10, &["--layout", "n3", "--chunk", "128K"]),
            "Cannot change number of copies",
        ),
        // Fewer members with a new chunk is one reshape, as md makes it
        // (`reshape_combined.rs`), refused when the array size is not whole
        // new chunks, as md refuses it.
        (
            with(
                "grow",
                &r10,
                &[
                    "--raid-devices",
                    "3",
                    "--chunk",
                    "128K",
                    "--array-size",
                    "8128K",
                ],
            ),
            "not a whole number of 128 KiB chunks",
        ),
        (with("grow", &r10, &["--chunk", "64K"]), "no change"),
        (with("grow", &r10, &["--layout", "n2"]), "no change"),
        (with("grow", &r10, &["--chunk", "48K"]), "power of two"),
        (
            with("grow", &odd, &["--chunk", "128K"]),
            "not a whole number of the new 128 KiB chunks",
        ),
        (
            with("grow", &odd, &["--chunk", "128K"]),
            "raidlab grow --size 1280K",
        ),
        (
            with("grow", &end, &["--chunk", "256K"]),
            "free below the data",
        ),
        (
            with("grow", &end, &["--layout", "o2"]),
            "the new geometry holds 30720 KiB of the members, less than the array's 31744 KiB",
        ),
        (with("grow", &r10, &["--continue"]), "not in the middle"),
    ];
    for (args, why) in cases {
        let before = files(d, &all);
        let o = run(d, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(err.contains(why), "{args:?}: expected {why:?} in: {err}");
        assert!(files(d, &all) == before, "{args:?} changed a member file");
        assert!(!d.join("new").exists(), "{args:?} left its --add file");
    }
}

#[test]
fn the_library_plans_fewer_or_more_members_and_a_new_chunk_at_once() {
    // md makes both in one reshape, and so does raidlab
    // (`reshape_combined.rs`); fewer members only once the array size is
    // given, whole new chunks, as md asks.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["m0", "m1", "m2", "m3"];
    create_imported(d, &m, "16M", &["--level", "10", "--chunk", "64K"]);
    let devices = m
        .iter()
        .map(|n| raidlab_raid::assemble::Device {
            path: n.to_string(),
            volume: std::sync::Arc::new(FileVolume::open(&d.join(n), OpenMode::ReadOnly).unwrap()),
        })
        .collect();
    let asm = raidlab_raid::assemble::Assembly::assemble(devices).unwrap();
    for n in [3, 5] {
        let req = raidlab_raid::grow::ReshapeRequest {
            raid_devices: Some(n),
            chunk_bytes: Some(128 << 10),
            ..Default::default()
        };
        if n == 3 {
            let e = asm
                .reshape_check_sized(&req, 0, None)
                .unwrap_err()
                .to_string();
            assert!(e.contains("use --grow --array-size first"), "{e}");
            // What the refusal names (what 3 members hold after md's move
            // up of two 128K rows), in whole new chunks.
            let k = e.rsplit("`--array-size ").next().unwrap();
            let kib: u64 = k[..k.find('K').unwrap()].parse().unwrap();
            let size = kib * 1024 / (128 << 10) * (128 << 10);
            let plan = asm.reshape_check_sized(&req, 0, Some(size)).unwrap();
            assert_eq!(
                (
                    plan.new_raid_devices,
                    plan.new_chunk_sectors,
                    plan.backwards
                ),
                (3, 256, true),
                "{plan:?}"
            );
            continue;
        }
        let plan = asm.reshape_check_sized(&req, 1, None).unwrap();
        assert_eq!(
            (plan.new_raid_devices, plan.new_chunk_sectors),
            (5, 256),
            "{plan:?}"
        );
    }
}
