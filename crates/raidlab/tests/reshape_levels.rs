//! `raidlab grow` of a RAID 0 or 1 into other shapes, on real member files,
//! the way md does it. A RAID 1 of two becomes a RAID 5 of two by md's
//! takeover (no data moves), then with `--raid-devices` a restripe onto
//! more members. A RAID 0 goes through a RAID 4 whose parity member is
//! missing. More members
//! (`--raid-devices N --add ...`) and a new chunk restripe the data and end
//! as a RAID 0 again; `--level 4|5 --add DEV` takes the array over with a
//! parity member, rebuilt, and for RAID 5 restriped to left-symmetric. The
//! data reads back byte for byte, the new space is zeros, the superblocks
//! say what md writes, a grow killed (SIGKILL) anywhere reads back exactly
//! while stopped and after `--continue`, and every refusal changes no byte.

mod common;

use common::verbs::*;
use raidlab_devices::{FileVolume, OpenMode};
use std::path::Path;
use std::time::Duration;

fn create_filled(d: &Path, members: &[&str], extra: &[&str]) -> Vec<u8> {
    let mut args = vec!["--level", "0"];
    args.extend_from_slice(extra);
    create_imported(d, members, "16M", &args)
}

/// The old data first, zeros after, and md's superblock of a RAID 0 of
/// `new` members whose data offset moved down from `old_offset`.
fn assert_raid0(d: &Path, new: &[&str], a: &[u8], old_offset: u64, chunk: u64) {
    let v = detail(d, new);
    assert_eq!(v["level"].as_str(), Some("raid0"), "{v}");
    assert_eq!(v["chunk_bytes"].as_u64(), Some(chunk), "{v}");
    let member = v["member_data_bytes"].as_u64().unwrap();
    let size = v["array_size_bytes"].as_u64().unwrap();
    assert_eq!(size, new.len() as u64 * member, "{v}");
    let got = export(d, new);
    assert_eq!(got.len() as u64, size);
    assert!(got[..a.len()] == *a, "the data before the grow changed");
    assert!(
        got[a.len()..].iter().all(|&b| b == 0),
        "the new space is not zeros"
    );
    for m in new {
        let e = examine(d, m);
        assert_eq!(e["level"].as_str(), Some("raid0"), "{m}: {e}");
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

/// A member's superblock, read as md would.
fn superblock(d: &Path, m: &str) -> raidlab_md::Superblock {
    let vol = FileVolume::open(&d.join(m), OpenMode::ReadOnly).unwrap();
    raidlab_md::Superblock::read_from(&vol).unwrap().unwrap()
}

#[test]
fn raid0_grows_by_one_then_two_members_and_takes_a_new_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let old = ["m0", "m1", "m2"];
    let a = create_filled(d, &old, &["--chunk", "64K"]);
    let off = data_offset(d, "m0");
    let out = ok(
        d,
        &with(
            "grow",
            &old,
            &["--raid-devices", "4", "--add", "m3", "--member-size", "16M"],
        ),
    );
    assert!(out.contains("reshape done"), "{out}");
    let four = ["m0", "m1", "m2", "m3"];
    assert_raid0(d, &four, &a, off, 64 << 10);
    // The new member took the old parity role of md's RAID 4: role 3.
    assert_eq!(
        examine(d, "m3")["device_role"].as_str(),
        Some("Active device 3")
    );

    let off = data_offset(d, "m0");
    let out = ok(
        d,
        &with(
            "grow",
            &four,
            &[
                "--raid-devices",
                "6",
                "--add",
                "m4",
                "--add",
                "m5",
                "--member-size",
                "16M",
            ],
        ),
    );
    assert!(out.contains("reshape done"), "{out}");
    let six = ["m0", "m1", "m2", "m3", "m4", "m5"];
    assert_raid0(d, &six, &a, off, 64 << 10);

    let off = data_offset(d, "m0");
    let out = ok(d, &with("grow", &six, &["--chunk", "256K"]));
    assert!(out.contains("reshape done"), "{out}");
    assert_raid0(d, &six, &a, off, 256 << 10);
}

/// What a RAID 0 restripe records while it runs, stopped right after it
/// started (`--no-sync`): md's RAID 4 of one member more with the new parity
/// role missing, the layout word md's takeover gives it (parity-last, 5),
/// kept for more members (mdadm's SET_ARRAY_INFO) and 0 for a new chunk
/// (mdadm's sysfs `layout`); readable as it stands, and `--continue` ends it
/// as a RAID 0 with layout word 0.
#[test]
fn a_raid0_restripe_records_md_s_raid4_while_it_runs() {
    let add = ["--raid-devices", "4", "--add", "m3", "--member-size", "16M"];
    let chunk = ["--chunk", "128K"];
    for (args, members, new_layout, new_chunk) in [
        (&add[..], &["m0", "m1", "m2", "m3"][..], 5, 128),
        (&chunk[..], &["m0", "m1", "m2"][..], 0, 256),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let old = ["m0", "m1", "m2"];
        let a = create_filled(d, &old, &["--chunk", "64K"]);
        let off = data_offset(d, "m0");
        let mut grow = args.to_vec();
        grow.push("--no-sync");
        let out = ok(d, &with("grow", &old, &grow));
        assert!(out.contains("mid-reshape"), "{args:?}: {out}");
        let n = members.len() as u32;
        for m in members {
            let sb = superblock(d, m);
            let got = (
                sb.level,
                sb.new_level,
                sb.layout,
                sb.new_layout,
                sb.raid_disks,
                sb.delta_disks,
                sb.chunksize,
                sb.new_chunk,
                sb.reshape_position,
            );
            let want = (4, 4, 5, new_layout, n + 1, n as i32 - 3, 128, new_chunk, 0);
            assert_eq!(got, want, "{args:?}: {m}");
            // No member holds the RAID 4's parity role (the last).
            let roles = &sb.dev_roles;
            assert!(!roles.contains(&(n as u16)), "{args:?}: {m}: {roles:?}");
        }
        assert!(
            export(d, members) == a,
            "{args:?}: the stopped array reads other bytes"
        );
        let out = ok(d, &with("grow", members, &["--continue"]));
        assert!(out.contains("reshape done"), "{args:?}: {out}");
        assert_raid0(d, members, &a, off, u64::from(new_chunk) * 512);
        for m in members {
            let sb = superblock(d, m);
            assert_eq!((sb.level, sb.layout), (0, 0), "{args:?}: {m}");
        }
    }
}

/// Rewrite a member's superblock as md would have written it.
fn edit_superblock(d: &Path, m: &str, f: impl FnOnce(&mut raidlab_md::Superblock)) {
    let vol = FileVolume::open(&d.join(m), OpenMode::ReadWrite).unwrap();
    let mut sb = raidlab_md::Superblock::read_from(&vol).unwrap().unwrap();
    f(&mut sb);
    sb.write_to(&vol).unwrap();
}

/// md's own RAID 0 grow stopped part-way differs from raidlab's in one
/// field: the new member in the old parity role is recovering
/// (RECOVERY_OFFSET, its offset raised with the reshape position), as the
/// md VM test's `r0-grow` shows md writing it. Made here from raidlab's
/// state stopped at position 0: raidlab reads it exact and `--continue`
/// ends it as a RAID 0 with that member in sync. With the position past
/// the member's recovery offset it is not taken: refused, nothing written.
#[test]
fn a_raid0_grow_md_stopped_with_its_new_member_recovering_reads_and_continues() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let old = ["m0", "m1", "m2"];
    let four = ["m0", "m1", "m2", "m3"];
    let a = create_filled(d, &old, &["--chunk", "64K"]);
    let off = data_offset(d, "m0");
    let grow = ["--raid-devices", "4", "--add", "m3", "--member-size", "16M"];
    let mut args = grow.to_vec();
    args.push("--no-sync");
    ok(d, &with("grow", &old, &args));
    edit_superblock(d, "m3", |sb| {
        sb.feature_map |= 2;
        sb.recovery_offset = 0;
    });

    // Behind: the position one stripe of the new geometry on (4 data
    // members of 64 KiB), the recovery offset still 0.
    let behind = tempfile::tempdir().unwrap();
    let b = behind.path();
    for m in four {
        std::fs::copy(d.join(m), b.join(m)).unwrap();
        edit_superblock(b, m, |sb| sb.reshape_position = 512);
    }
    let before: Vec<Vec<u8>> = four
        .iter()
        .map(|m| std::fs::read(b.join(m)).unwrap())
        .collect();
    for cmd in [
        with("export", &four, &["--output", "out.bin"]),
        with("grow", &four, &["--continue"]),
    ] {
        let o = run(b, &cmd);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains("missing"),
            "{cmd:?}: {err}"
        );
    }
    for (m, was) in four.iter().zip(&before) {
        assert!(std::fs::read(b.join(m)).unwrap() == *was, "{m} changed");
    }

    assert!(
        export(d, &four) == a,
        "md's stopped RAID 0 grow reads other bytes"
    );
    let out = ok(d, &with("grow", &four, &["--continue"]));
    assert!(out.contains("reshape done"), "{out}");
    assert_raid0(d, &four, &a, off, 64 << 10);
    let sb = superblock(d, "m3");
    assert_eq!(sb.feature_map & 2, 0, "m3 still recovering");
    assert_eq!(
        examine(d, "m3")["device_role"].as_str(),
        Some("Active device 3")
    );
}

#[test]
fn raid0_becomes_raid4_and_raid5_with_a_parity_member() {
    // The layout word in the superblocks: md's takeover records parity-last
    // (5) for a RAID 4 too, where mdadm --create writes 0.
    for (level, layout, word, extra) in [
        ("raid4", "parity-last", 5, None),
        ("raid5", "left-symmetric", 2, None),
        ("raid5", "parity-last", 5, Some("preserve")),
        ("raid5", "right-asymmetric", 1, Some("right-asymmetric")),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let old = ["m0", "m1", "m2"];
        let a = create_filled(d, &old, &["--chunk", "128K"]);
        let mut args = vec![
            "--level",
            &level[4..],
            "--add",
            "m3",
            "--member-size",
            "16M",
        ];
        if let Some(l) = extra {
            args.extend(["--layout", l]);
        }
        let out = ok(d, &with("grow", &old, &args));
        let what = format!("{level} {layout}");
        assert!(out.contains("rebuil"), "{what}: {out}");
        let new = ["m0", "m1", "m2", "m3"];
        let v = detail(d, &new);
        assert_eq!(v["level"].as_str(), Some(level), "{what}: {v}");
        assert_eq!(v["layout"].as_str(), Some(layout), "{what}: {v}");
        assert_eq!(v["raid_devices"].as_u64(), Some(4), "{what}: {v}");
        assert_eq!(v["state"].as_str(), Some("clean"), "{what}: {v}");
        assert_eq!(export(d, &new), a, "{what}: the data changed");
        check_clean(d, &new);
        let md_level: i32 = level[4..].parse().unwrap();
        for m in new {
            let sb = superblock(d, m);
            assert_eq!((sb.level, sb.layout), (md_level, word), "{what}: {m}");
        }
    }
}

/// `--level 5|4 --raid-devices N` of a RAID 0 of 3, as mdadm takes it: N-1
/// data members. The first new device takes parity (rebuilt), the reshape
/// restripes onto the others, and a RAID 5 is then restriped to
/// left-symmetric: the old data first, zeros after, parity consistent.
#[test]
fn raid0_becomes_raid5_or_raid4_of_more_members() {
    for (level, layout) in [("5", "left-symmetric"), ("4", "parity-last")] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let old = ["m0", "m1", "m2"];
        let a = create_filled(d, &old, &["--chunk", "64K"]);
        let args = [
            "--level",
            level,
            "--raid-devices",
            "5",
            "--add",
            "m3",
            "--add",
            "m4",
            "--member-size",
            "16M",
        ];
        let out = ok(d, &with("grow", &old, &args));
        assert!(out.contains("reshape done"), "{level}: {out}");
        let new = ["m0", "m1", "m2", "m3", "m4"];
        let v = detail(d, &new);
        assert_eq!(v["level"].as_str(), Some(&*format!("raid{level}")), "{v}");
        assert_eq!(v["layout"].as_str(), Some(layout), "{v}");
        assert_eq!(v["raid_devices"].as_u64(), Some(5), "{v}");
        assert_eq!(v["state"].as_str(), Some("clean"), "{v}");
        let member = v["member_data_bytes"].as_u64().unwrap();
        let size = v["array_size_bytes"].as_u64().unwrap();
        assert_eq!(size, 4 * member, "{level}: four data members: {v}");
        let got = export(d, &new);
        assert!(
            got[..a.len()] == *a,
            "{level}: the data before the grow changed"
        );
        assert!(
            got[a.len()..].iter().all(|&b| b == 0),
            "{level}: the new space is not zeros"
        );
        check_clean(d, &new);
    }
}

/// The same with `--no-sync`: the takeover only, and the steps left are
/// named; run one by one as named, they end where the one run ends.
#[test]
fn raid0_to_raid5_of_more_members_with_no_sync_names_the_steps_left() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let old = ["m0", "m1", "m2"];
    let a = create_filled(d, &old, &["--chunk", "64K"]);
    let args = [
        "--level",
        "5",
        "--raid-devices",
        "5",
        "--add",
        "m3",
        "--add",
        "m4",
        "--member-size",
        "16M",
        "--no-sync",
    ];
    let out = ok(d, &with("grow", &old, &args));
    let steps = [
        "`raidlab rebuild`",
        "`raidlab grow --raid-devices 5`",
        "`raidlab grow --layout left-symmetric`",
    ];
    for s in steps {
        assert!(out.contains(s), "{s} not named: {out}");
    }
    let new = ["m0", "m1", "m2", "m3", "m4"];
    ok(d, &with("rebuild", &new, &[]));
    ok(d, &with("grow", &new, &["--raid-devices", "5"]));
    ok(d, &with("grow", &new, &["--layout", "left-symmetric"]));
    let v = detail(d, &new);
    assert_eq!(v["level"].as_str(), Some("raid5"), "{v}");
    assert_eq!(v["layout"].as_str(), Some("left-symmetric"), "{v}");
    assert_eq!(v["raid_devices"].as_u64(), Some(5), "{v}");
    let got = export(d, &new);
    assert!(got[..a.len()] == *a, "the data before the grow changed");
    assert!(
        got[a.len()..].iter().all(|&b| b == 0),
        "the new space is not zeros"
    );
    check_clean(d, &new);
}

#[test]
fn a_raid0_grow_killed_at_random_points_reads_back_exactly_and_continue_finishes_it() {
    let mut x: u32 = 0x2545_f491;
    let mut delays = Vec::new();
    for _ in 0..5 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        delays.push(Duration::from_millis(150 + u64::from(x % 2400)));
    }
    let mut mid = 0;
    for delay in delays {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let old = ["m0", "m1", "m2"];
        let a = create_filled(d, &old, &["--chunk", "64K"]);
        let off = data_offset(d, "m0");
        killed_after(
            d,
            &with(
                "grow",
                &old,
                &[
                    "--raid-devices",
                    "4",
                    "--add",
                    "m3",
                    "--member-size",
                    "16M",
                    "--max-rate",
                    "8M",
                ],
            ),
            delay,
        );
        let new = ["m0", "m1", "m2", "m3"];
        let what = format!("killed after {delay:?}");
        let e = examine(d, "m0");
        let reshaping = e["feature_map"].as_u64().unwrap() & 4 != 0;
        match (reshaping, e["level"].as_str().unwrap()) {
            (true, "raid4") => {
                // md's state while it runs: a RAID 4 of 5, parity missing.
                assert_eq!(e["raid_devices"].as_u64(), Some(5), "{what}: {e}");
                let got = export(d, &new);
                assert!(got == a, "{what}: the stopped array reads other bytes");
                let out = ok(d, &with("grow", &new, &["--continue"]));
                assert!(out.contains("reshape done"), "{what}: {out}");
                mid += 1;
            }
            (false, "raid0") if e["raid_devices"].as_u64() == Some(3) => {
                // Killed before the reshape was recorded: m3 may be a spare
                // already, which the grow takes.
                assert!(export(d, &old) == a, "{what}: changed before the reshape");
                let spare = run(d, &["examine", "m3", "--json"]).status.success();
                if spare {
                    ok(d, &with("grow", &new, &["--raid-devices", "4"]));
                } else {
                    let _ = std::fs::remove_file(d.join("m3"));
                    ok(
                        d,
                        &with(
                            "grow",
                            &old,
                            &["--raid-devices", "4", "--add", "m3", "--member-size", "16M"],
                        ),
                    );
                }
            }
            (false, "raid0") => {}
            s => panic!("{what}: unexpected state {s:?}: {e}"),
        }
        assert_raid0(d, &new, &a, off, 64 << 10);
    }
    assert!(mid >= 2, "only {mid} of 5 kills landed inside the reshape");
}

#[test]
fn raid0_refusals_say_why_and_change_no_byte() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let r0 = ["z0", "z1"];
    create_filled(d, &r0, &["--chunk", "64K"]);
    // Two zones: members of different sizes.
    std::fs::write(d.join("y0"), vec![0u8; 16 << 20]).unwrap();
    std::fs::write(d.join("y1"), vec![0u8; 24 << 20]).unwrap();
    ok(d, &["create", "y0", "y1", "--level", "0", "--chunk", "64K"]);
    let old = ["o0", "o1"];
    create_filled(d, &old, &["--metadata", "0.90"]);
    let all = ["z0", "z1", "y0", "y1", "o0", "o1"];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (with("grow", &r0, &["--raid-devices", "3"]), "--add"),
        // Fewer members: md's refusal until the array is truncated.
        (
            with("grow", &r0, &["--raid-devices", "1"]),
            "reduce the size of the array",
        ),
        (
            with("grow", &r0, &["--layout", "left-symmetric"]),
            "no layout",
        ),
        // md's own refusal (the kernel's RAID 6 takes over only a RAID 5),
        // with the way there.
        (
            with("grow", &r0, &["--level", "6", "--add", "n"]),
            "could not set level to raid6",
        ),
        (
            with("grow", &r0, &["--level", "6"]),
            "then `--level 6 --add",
        ),
        (with("grow", &r0, &["--level", "5"]), "one for parity"),
        (
            with(
                "grow",
                &r0,
                &["--level", "5", "--raid-devices", "4", "--add", "n"],
            ),
            "needs 2 device(s), one for parity and the others",
        ),
        (
            with(
                "grow",
                &r0,
                &["--level", "4", "--raid-devices", "2", "--add", "n"],
            ),
            "reduce the size of the array",
        ),
        (with("grow", &r0, &["--chunk", "96K"]), "chunk"),
        (
            with(
                "grow",
                &["y0", "y1"],
                &["--raid-devices", "3", "--add", "n"],
            ),
            "one zone",
        ),
        (
            with("grow", &["y0", "y1"], &["--level", "4", "--add", "n"]),
            "one zone",
        ),
        (
            with("grow", &old, &["--raid-devices", "3", "--add", "n"]),
            "backup file",
        ),
    ];
    assert_refused(d, cases, &all);
}

fn create_raid1(d: &Path, members: &[&str]) -> Vec<u8> {
    create_imported(d, members, "16M", &["--level", "1"])
}

/// Each member's bytes from its data offset on.
fn data_areas(d: &Path, members: &[&str]) -> Vec<Vec<u8>> {
    members
        .iter()
        .map(|m| {
            let off = data_offset(d, m) as usize * 512;
            std::fs::read(d.join(m)).unwrap()[off..].to_vec()
        })
        .collect()
}

#[test]
fn raid1_becomes_raid5_by_takeover_then_grows_onto_more_members() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let two = ["m0", "m1"];
    let a = create_raid1(d, &two);
    let before = data_areas(d, &two);
    let out = ok(d, &with("grow", &two, &["--level", "5"]));
    assert!(out.contains("takeover"), "{out}");
    let v = detail(d, &two);
    assert_eq!(v["level"].as_str(), Some("raid5"), "{v}");
    assert_eq!(v["layout"].as_str(), Some("left-symmetric"), "{v}");
    assert_eq!(v["chunk_bytes"].as_u64(), Some(64 << 10), "{v}");
    assert_eq!(v["array_size_bytes"].as_u64(), Some(a.len() as u64), "{v}");
    assert_eq!(data_areas(d, &two), before, "a takeover moved data");
    assert_eq!(export(d, &two), a);
    check_clean(d, &two);

    let out = ok(
        d,
        &with(
            "grow",
            &two,
            &["--raid-devices", "3", "--add", "m2", "--member-size", "16M"],
        ),
    );
    assert!(out.contains("reshape done"), "{out}");
    let three = ["m0", "m1", "m2"];
    let got = export(d, &three);
    assert_eq!(got.len(), 2 * a.len());
    assert!(got[..a.len()] == a[..], "the data changed");
    assert!(
        got[a.len()..].iter().all(|&b| b == 0),
        "new space not zeros"
    );
    check_clean(d, &three);

    // In one run, as `mdadm --grow --level=5 --raid-devices=4` does.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let a = create_raid1(d, &two);
    let out = ok(
        d,
        &with(
            "grow",
            &two,
            &[
                "--level",
                "5",
                "--raid-devices",
                "4",
                "--add",
                "m2",
                "--add",
                "m3",
                "--member-size",
                "16M",
            ],
        ),
    );
    assert!(out.contains("reshape done"), "{out}");
    let four = ["m0", "m1", "m2", "m3"];
    let v = detail(d, &four);
    assert_eq!(v["level"].as_str(), Some("raid5"), "{v}");
    assert_eq!(v["raid_devices"].as_u64(), Some(4), "{v}");
    let got = export(d, &four);
    assert!(got[..a.len()] == a[..], "the data changed");
    assert!(
        got[a.len()..].iter().all(|&b| b == 0),
        "new space not zeros"
    );
    check_clean(d, &four);
}

#[test]
fn raid1_to_raid5_refusals_say_why_and_change_no_byte() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let two = ["a0", "a1"];
    create_raid1(d, &two);
    let three = ["b0", "b1", "b2"];
    create_raid1(d, &three);
    // 15 MiB - 2 KiB of each member: not a whole number of 4 KiB blocks.
    let odd = ["c0", "c1"];
    create_raid1(d, &odd);
    ok(d, &with("grow", &odd, &["--size", "15358K"]));
    let all = ["a0", "a1", "b0", "b1", "b2", "c0", "c1"];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (with("grow", &three, &["--level", "5"]), "2-device"),
        (
            with("grow", &two, &["--level", "4"]),
            "impossibly level change",
        ),
        (
            with("grow", &two, &["--level", "6"]),
            "impossibly level change",
        ),
        (
            with("grow", &two, &["--level", "10"]),
            "impossibly level change",
        ),
        (with("grow", &odd, &["--level", "5"]), "multiple of 4K"),
        (
            with(
                "grow",
                &two,
                &["--level", "5", "--layout", "right-asymmetric"],
            ),
            "left-symmetric",
        ),
        (
            with("grow", &two, &["--level", "5", "--raid-devices", "3"]),
            "--add",
        ),
        (
            with(
                "grow",
                &two,
                &["--level", "5", "--add", "n", "--member-size", "16M"],
            ),
            "new slot",
        ),
    ];
    assert_refused(d, cases, &all);
}

/// Each of `cases` (arguments, words its error must contain) fails with
/// those words, changes no byte of `all`, and leaves no new file `n`.
fn assert_refused(d: &Path, cases: Vec<(Vec<&str>, &str)>, all: &[&str]) {
    let before = files(d, all);
    for (args, want) in cases {
        let out = run(d, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(
            err.to_lowercase().contains(&want.to_lowercase()),
            "{args:?}: expected {want:?} in: {err}"
        );
        assert_eq!(files(d, all), before, "{args:?} changed a member");
        assert!(!d.join("n").exists(), "{args:?} left a new file behind");
    }
}

#[test]
fn raid0_takes_mirrors_as_raid10_and_gives_them_back() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let r0 = ["m0", "m1", "m2"];
    let a = create_filled(d, &r0, &["--chunk", "64K"]);
    let before = data_areas(d, &r0);
    let out = ok(
        d,
        &with(
            "grow",
            &r0,
            &[
                "--level",
                "10",
                "--add",
                "n0",
                "--add",
                "n1",
                "--add",
                "n2",
                "--member-size",
                "16M",
            ],
        ),
    );
    assert!(out.contains("rebuilt"), "{out}");
    let r10 = ["m0", "m1", "m2", "n0", "n1", "n2"];
    let v = detail(d, &r10);
    assert_eq!(v["level"].as_str(), Some("raid10"), "{v}");
    assert_eq!(v["layout"].as_str(), Some("near=2"), "{v}");
    assert_eq!(v["raid_devices"].as_u64(), Some(6), "{v}");
    assert_eq!(v["state"].as_str(), Some("clean"), "{v}");
    // The old members kept their data where it was, in roles 0, 2, 4.
    assert_eq!(data_areas(d, &r0), before, "a takeover moved data");
    for (m, role) in [("m1", 2), ("n1", 3)] {
        assert_eq!(
            examine(d, m)["device_role"].as_str(),
            Some(format!("Active device {role}").as_str())
        );
    }
    assert_eq!(export(d, &r10), a);
    check_clean(d, &r10);
    // The mirrors alone hold it all.
    assert_eq!(export(d, &["n0", "n1", "n2"]), a);

    let out = ok(d, &with("grow", &r10, &["--level", "0"]));
    assert!(out.contains("one copy of each pair"), "{out}");
    let v = detail(d, &r0);
    assert_eq!(v["level"].as_str(), Some("raid0"), "{v}");
    assert_eq!(v["raid_devices"].as_u64(), Some(3), "{v}");
    assert_eq!(export(d, &r0), a);
    for m in r0 {
        assert_eq!(examine(d, m)["level"].as_str(), Some("raid0"), "{m}");
    }
}

#[test]
fn raid0_and_raid10_takeover_refusals_say_why_and_change_no_byte() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let r0 = ["z0", "z1"];
    create_filled(d, &r0, &["--chunk", "64K"]);
    let odd = ["t0", "t1", "t2"];
    ok(
        d,
        &with("create", &odd, &["--member-size", "16M", "--level", "10"]),
    );
    let far = ["f0", "f1", "f2", "f3"];
    ok(
        d,
        &with(
            "create",
            &far,
            &["--member-size", "16M", "--level", "10", "--layout", "f2"],
        ),
    );
    let bm = ["b0", "b1", "b2", "b3"];
    ok(
        d,
        &with(
            "create",
            &bm,
            &[
                "--member-size",
                "16M",
                "--level",
                "10",
                "--consistency-policy",
                "bitmap",
            ],
        ),
    );
    let all = [
        "z0", "z1", "t0", "t1", "t2", "f0", "f1", "f2", "f3", "b0", "b1", "b2", "b3",
    ];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            with(
                "grow",
                &r0,
                &["--level", "10", "--add", "n", "--member-size", "16M"],
            ),
            "needs 2 device",
        ),
        (
            with("grow", &r0, &["--level", "10", "--raid-devices", "3"]),
            "impossible number",
        ),
        (
            with("grow", &r0, &["--level", "10", "--layout", "f2"]),
            "near=2",
        ),
        (with("grow", &odd, &["--level", "0"]), "even number"),
        (with("grow", &far, &["--level", "0"]), "near=2"),
        (with("grow", &bm, &["--level", "0"]), "bitmap none"),
        (
            with("grow", &bm, &["--level", "0", "--raid-devices", "3"]),
            "becomes a raid 0 of 2",
        ),
    ];
    assert_refused(d, cases, &all);
}

/// An array of `members` (16 MiB each) made with `args`, filled with a
/// pattern: the pattern.
fn create_with(d: &Path, members: &[&str], args: &[&str]) -> Vec<u8> {
    create_imported(d, members, "16M", args)
}

#[test]
fn raid4_and_raid5_become_raid0_when_their_parity_member_leaves() {
    for args in [
        &["--level", "4", "--chunk", "64K"][..],
        &["--level", "5", "--layout", "parity-last", "--chunk", "64K"][..],
        &[
            "--level",
            "5",
            "--layout",
            "left-symmetric",
            "--chunk",
            "64K",
        ][..],
    ] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let m = ["m0", "m1", "m2"];
        let a = create_with(d, &m, args);
        let out = ok(d, &with("grow", &m, &["--level", "0"]));
        assert!(out.contains("is now raid0"), "{args:?}: {out}");
        let v = detail(d, &m);
        assert_eq!(v["level"].as_str(), Some("raid0"), "{args:?}: {v}");
        assert_eq!(v["raid_devices"].as_u64(), Some(2), "{args:?}: {v}");
        assert_eq!(v["array_size_bytes"].as_u64(), Some(a.len() as u64), "{v}");
        let states: Vec<&str> = v["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["state"].as_str().unwrap())
            .collect();
        assert_eq!(states, ["active", "active", "removed"], "{args:?}: {v}");
        assert_eq!(export(d, &["m0", "m1"]), a, "{args:?}");
    }
}

#[test]
fn raid45_to_raid0_refusals_say_why_and_change_no_byte() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let r5 = ["a0", "a1", "a2"];
    create_with(d, &r5, &["--level", "5"]);
    let bm = ["b0", "b1", "b2"];
    create_with(d, &bm, &["--level", "5", "--consistency-policy", "bitmap"]);
    let ppl = ["p0", "p1", "p2"];
    create_with(d, &ppl, &["--level", "5", "--consistency-policy", "ppl"]);
    let r6 = ["s0", "s1", "s2", "s3"];
    create_with(d, &r6, &["--level", "6"]);
    // Degraded in a data role: the second member is gone.
    create_with(d, &["g0", "g1", "g2"], &["--level", "4"]);
    std::fs::remove_file(d.join("g1")).unwrap();
    let deg = ["g0", "g2"];
    let all = [
        "a0", "a1", "a2", "b0", "b1", "b2", "p0", "p1", "p2", "s0", "s1", "s2", "s3", "g0", "g2",
    ];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (with("grow", &bm, &["--level", "0"]), "bitmap none"),
        (
            with("grow", &ppl, &["--level", "0"]),
            "consistency-policy resync",
        ),
        (
            with("grow", &r6, &["--level", "0"]),
            "impossible level change",
        ),
        (with("grow", &deg, &["--level", "0"]), "holds data"),
        (
            with("grow", &r5, &["--level", "0", "--raid-devices", "3"]),
            "becomes a raid 0 of 2",
        ),
        (
            with(
                "grow",
                &r5,
                &["--level", "0", "--add", "n", "--member-size", "16M"],
            ),
            "takes none",
        ),
    ];
    assert_refused(d, cases, &all);
}

#[test]
fn a_raid5_of_two_becomes_raid1_and_md_refused_level_changes_say_md_s_words() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let two = ["m0", "m1"];
    let a = create_raid1(d, &two);
    ok(d, &with("grow", &two, &["--level", "5"]));
    let out = ok(d, &with("grow", &two, &["--level", "1"]));
    assert!(out.contains("is now raid1"), "{out}");
    // The level it has, with a mirror count: a RAID 1's own grow.
    let out = ok(
        d,
        &with(
            "grow",
            &two,
            &[
                "--level",
                "1",
                "--raid-devices",
                "3",
                "--add",
                "m2",
                "--member-size",
                "16M",
            ],
        ),
    );
    assert!(out.contains("raid devices 2 -> 3"), "{out}");
    let two = ["m0", "m1", "m2"];
    let v = detail(d, &two);
    assert_eq!(v["level"].as_str(), Some("raid1"), "{v}");
    assert_eq!(export(d, &two), a);
    check_clean(d, &two);
    assert_eq!(export(d, &["m0"]), a, "the first mirror alone");

    let r6 = ["s0", "s1", "s2", "s3"];
    create_with(d, &r6, &["--level", "6"]);
    let r10 = ["t0", "t1", "t2", "t3"];
    create_with(d, &r10, &["--level", "10"]);
    let r5 = ["u0", "u1", "u2"];
    create_with(d, &r5, &["--level", "5"]);
    let all = [
        "m0", "m1", "s0", "s1", "s2", "s3", "t0", "t1", "t2", "t3", "u0", "u1", "u2",
    ];
    let impossible = "impossible level change requested";
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (with("grow", &r6, &["--level", "0"]), impossible),
        (with("grow", &r6, &["--level", "1"]), impossible),
        (with("grow", &r6, &["--level", "10"]), impossible),
        (with("grow", &r5, &["--level", "10"]), impossible),
        (
            with("grow", &r5, &["--level", "1"]),
            "2-device array to raid1",
        ),
        (
            with("grow", &r10, &["--level", "5"]),
            "can only be changed to raid0",
        ),
        (
            with("grow", &r10, &["--level", "1"]),
            "can only be changed to raid0",
        ),
        (with("grow", &two, &["--level", "0"]), "single mirror"),
    ];
    assert_refused(d, cases, &all);
}
