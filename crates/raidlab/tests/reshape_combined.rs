//! `raidlab grow --raid-devices N --chunk C` (and `--layout L`) of a RAID
//! 5/6: other members and a new chunk or layout in one reshape, as md makes
//! it (`mdadm --grow --raid-devices 5 --chunk 128K`: one reshape whose
//! superblocks record `delta_disks`, `new_chunk` and `new_layout` at once),
//! walked forwards for a grow and backwards for a shrink, on real member
//! files. The data reads back byte for byte after, `check` finds no
//! mismatch, the superblocks hold the new geometry and no reshape; a run
//! killed (SIGKILL) at random points reads back exactly while stopped
//! (read-only) and after `--continue`; what md refuses, or what raidlab
//! does not build, is refused with nothing written.

mod common;

use common::verbs::*;
use std::path::Path;
use std::time::Duration;

const MIB: u64 = 1 << 20;

/// (level, chunk bytes, layout) as `detail` reports them, and the size.
fn shape(d: &Path, m: &[&str]) -> (String, u64, String, u64) {
    let v = detail(d, m);
    (
        v["level"].as_str().unwrap().to_string(),
        v["chunk_bytes"].as_u64().unwrap(),
        v["layout"].as_str().unwrap().to_string(),
        v["array_size_bytes"].as_u64().unwrap(),
    )
}

fn parity(level: &str) -> u64 {
    if level == "6" {
        2
    } else {
        1
    }
}

/// After the reshape: the new member count, chunk and layout in every
/// superblock with no reshape flag left, `check` clean, and the array's
/// first bytes those of `a` (the rest, a grow's new space, zeros).
fn assert_reshaped(d: &Path, members: &[&str], level: &str, chunk: u64, layout: &str, a: &[u8]) {
    let (l, c, lay, size) = shape(d, members);
    assert_eq!(
        (l.as_str(), c, lay.as_str()),
        (format!("raid{level}").as_str(), chunk, layout)
    );
    let got = export(d, members);
    assert_eq!(got.len() as u64, size);
    let kept = a.len().min(got.len());
    assert!(got[..kept] == a[..kept], "the data changed");
    assert!(
        got[kept..].iter().all(|&b| b == 0),
        "the new space is not zeros"
    );
    check_clean(d, members);
    for m in members {
        let e = examine(d, m);
        if e["role"].as_str() == Some("Spare") {
            continue;
        }
        assert_eq!(e["chunk_size_kib"].as_u64(), Some(chunk >> 10), "{m}: {e}");
        let f = e["feature_map"].as_u64().unwrap();
        assert_eq!(f & (4 | 64 | 128), 0, "{m}: reshape flags left set: {e}");
    }
}

/// A RAID `level` over `members` (16 MiB files) using 12 MiB of each, so
/// that a shrink finds mdadm's move up after the data, filled.
fn create_roomy(d: &Path, members: &[&str], level: &str, chunk: &str, layout: &str) -> Vec<u8> {
    ok(
        d,
        &with(
            "create",
            members,
            &[
                "--member-size",
                "16M",
                "--level",
                level,
                "--chunk",
                chunk,
                "--layout",
                layout,
            ],
        ),
    );
    ok(d, &with("grow", members, &["--size", "12M"]));
    let bytes = detail(d, members)["array_size_bytes"].as_u64().unwrap();
    let a = pattern(bytes as usize, members.len() as u8 * 13 + 5);
    std::fs::write(d.join("a.bin"), &a).unwrap();
    ok(d, &with("import", members, &["--input", "a.bin"]));
    a
}

/// One combined change: create, the grow arguments, what is expected
/// after (chunk bytes, layout).
struct Case {
    level: &'static str,
    old: usize,
    new: usize,
    chunk: &'static str,
    layout: &'static str,
    args: &'static [&'static str],
    after: (u64, &'static str),
}

const NAMES: [&str; 7] = ["m0", "m1", "m2", "m3", "m4", "m5", "m6"];

fn cases() -> Vec<Case> {
    vec![
        // md's example: one member more and a larger chunk.
        Case {
            level: "5",
            old: 4,
            new: 5,
            chunk: "64K",
            layout: "left-symmetric",
            args: &["--chunk", "128K"],
            after: (128 << 10, "left-symmetric"),
        },
        // A smaller chunk and a new layout with two members more.
        Case {
            level: "5",
            old: 3,
            new: 5,
            chunk: "256K",
            layout: "left-symmetric",
            args: &["--chunk", "32K", "--layout", "right-asymmetric"],
            after: (32 << 10, "right-asymmetric"),
        },
        // A new layout alone with one member more.
        Case {
            level: "5",
            old: 3,
            new: 4,
            chunk: "64K",
            layout: "left-asymmetric",
            args: &["--layout", "right-symmetric"],
            after: (64 << 10, "right-symmetric"),
        },
        Case {
            level: "6",
            old: 4,
            new: 5,
            chunk: "512K",
            layout: "left-symmetric",
            args: &["--chunk", "64K"],
            after: (64 << 10, "left-symmetric"),
        },
        // Shrinks: the array truncated to what the new members hold.
        Case {
            level: "5",
            old: 5,
            new: 4,
            chunk: "64K",
            layout: "left-symmetric",
            args: &["--chunk", "256K"],
            after: (256 << 10, "left-symmetric"),
        },
        Case {
            level: "6",
            old: 6,
            new: 5,
            chunk: "512K",
            layout: "left-symmetric",
            args: &["--chunk", "64K", "--layout", "right-asymmetric"],
            after: (64 << 10, "right-asymmetric"),
        },
    ]
}

/// The grow command of case `c` over `members` (new ones added, or the
/// array size a shrink truncates to).
fn command<'a>(c: &'a Case, members: &[&'a str], n: &'a str, size: &'a str) -> Vec<&'a str> {
    let mut v = with("grow", members, &["--raid-devices", n]);
    v.extend_from_slice(c.args);
    if c.new > c.old {
        for m in &NAMES[c.old..c.new] {
            v.extend(["--add", m]);
        }
        v.extend(["--member-size", "16M"]);
    } else {
        v.extend(["--array-size", size]);
    }
    v
}

fn holds(c: &Case) -> u64 {
    (c.new as u64 - parity(c.level)) * 12 * MIB
}

#[test]
fn raid5_and_raid6_change_members_and_chunk_or_layout_in_one_reshape() {
    for c in cases() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let old = &NAMES[..c.old];
        let a = create_roomy(d, old, c.level, c.chunk, c.layout);
        let n = c.new.to_string();
        let size = format!("{}K", holds(&c) / 1024);
        let out = ok(d, &command(&c, old, &n, &size));
        let what = format!("RAID {} {}->{} {:?}", c.level, c.old, c.new, c.args);
        assert!(out.contains("reshape done"), "{what}: {out}");
        let all = &NAMES[..c.old.max(c.new)];
        assert_reshaped(d, all, c.level, c.after.0, c.after.1, &a);
        assert_eq!(shape(d, all).3, holds(&c), "{what}");
        let e = examine(d, "m0");
        assert_eq!(
            e["raid_devices"].as_u64(),
            Some(c.new as u64),
            "{what}: {e}"
        );
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
fn a_combined_reshape_killed_at_random_points_reads_back_exactly_and_continues() {
    // A rate limit makes each run last a few seconds, so the kills land
    // anywhere in it (fixed seed, printed on failure through the delay).
    let mut x: u32 = 0x2545_f491;
    let cases = cases();
    let mut stopped = 0;
    for k in 0..8 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let delay = Duration::from_millis(150 + u64::from(x % 2400));
        // The grow to a larger chunk, the grow with a layout, both shrinks.
        let c = &cases[[0, 1, 4, 5][k % 4]];
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let old = &NAMES[..c.old];
        let a = create_roomy(d, old, c.level, c.chunk, c.layout);
        let n = c.new.to_string();
        let size = format!("{}K", holds(c) / 1024);
        let mut args = command(c, old, &n, &size);
        args.extend(["--max-rate", "6M"]);
        killed_after(d, &args, delay);
        let what = format!(
            "RAID {} {}->{} {:?}, killed after {delay:?}",
            c.level, c.old, c.new, c.args
        );
        let all = &NAMES[..c.old.max(c.new)];
        match state(d) {
            (true, m) if m == c.new as u64 => {
                // Stopped mid-reshape: the array reads (read-only) what it
                // held, as far as the smaller side reaches.
                let got = export(d, all);
                let kept = got.len().min(a.len());
                assert!(got.len() as u64 >= holds(c).min(a.len() as u64), "{what}");
                assert!(
                    got[..kept] == a[..kept],
                    "{what}: the stopped array reads other bytes"
                );
                let out = ok(d, &with("grow", all, &["--continue"]));
                assert!(out.contains("reshape done"), "{what}: {out}");
                stopped += 1;
            }
            (false, m) if m == c.old as u64 => {
                // Killed before the reshape was recorded: the array is as it
                // was; the new members may be spares already. Start over
                // with whatever is there.
                let got = export(d, old);
                assert!(got == a, "{what}: the array changed before its reshape");
                for m in &NAMES[c.old..c.new.max(c.old)] {
                    let spare = run(d, &["examine", m, "--json"]).status.success();
                    if !spare {
                        let _ = std::fs::remove_file(d.join(m));
                    }
                }
                let present: Vec<&str> = all
                    .iter()
                    .copied()
                    .filter(|m| run(d, &["examine", m, "--json"]).status.success())
                    .collect();
                let mut again = with("grow", &present, &["--raid-devices", &n]);
                again.extend_from_slice(c.args);
                let missing: Vec<&str> = all
                    .iter()
                    .copied()
                    .filter(|m| !present.contains(m))
                    .collect();
                for m in &missing {
                    again.extend(["--add", m]);
                }
                if !missing.is_empty() {
                    again.extend(["--member-size", "16M"]);
                }
                if c.new < c.old {
                    again.extend(["--array-size", &size]);
                }
                ok(d, &again);
            }
            (false, m) if m == c.new as u64 => {}
            s => panic!("{what}: unexpected state {s:?}"),
        }
        assert_reshaped(d, all, c.level, c.after.0, c.after.1, &a);
    }
    // The kills must land inside reshapes, or nothing here was resumed.
    assert!(stopped >= 3, "only {stopped} of 8 runs stopped mid-reshape");
}

#[test]
fn what_md_refuses_or_raidlab_does_not_build_is_refused_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let r5 = ["a0", "a1", "a2", "a3"];
    create_roomy(d, &r5, "5", "64K", "left-symmetric");
    let r0 = ["z0", "z1"];
    create_imported(d, &r0, "16M", &["--level", "0", "--chunk", "64K"]);
    let r10 = ["t0", "t1", "t2", "t3"];
    create_imported(d, &r10, "16M", &["--level", "10", "--chunk", "64K"]);
    let all = ["a0", "a1", "a2", "a3", "z0", "z1", "t0", "t1", "t2", "t3"];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        // mdadm: a new chunk must divide the component size (12 MiB).
        (
            with(
                "grow",
                &r5,
                &[
                    "--raid-devices",
                    "3",
                    "--chunk",
                    "8M",
                    "--array-size",
                    "16M",
                ],
            ),
            "evenly divide",
        ),
        // A new chunk that is not a power of two.
        (
            with(
                "grow",
                &r5,
                &[
                    "--raid-devices",
                    "5",
                    "--chunk",
                    "48K",
                    "--add",
                    "new",
                    "--member-size",
                    "16M",
                ],
            ),
            "power of two",
        ),
        // Still a shrink: only with the array size given.
        (
            with("grow", &r5, &["--raid-devices", "3", "--chunk", "128K"]),
            "reduce the size of the array",
        ),
        (
            with("grow", &r5, &["--raid-devices", "5", "--chunk", "128K"]),
            "need 1 spare",
        ),
        // A RAID 10 shrink with a new chunk, to a size that is not whole
        // new chunks (made when it is:
        // `raid10_shrinks_with_a_new_chunk_or_layout_in_one_reshape`).
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
    ];
    for (args, why) in cases {
        let before = files(d, &all);
        let o = run(d, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(err.contains(why), "{args:?}: expected {why:?} in: {err}");
        assert!(files(d, &all) == before, "{args:?} changed a member file");
        assert!(!d.join("new").exists(), "{args:?} left new behind");
    }
}

/// A RAID 10 near or offset onto more members with a new chunk or layout in
/// one reshape (md's `raid10_check_reshape` takes both): the data from
/// before reads back exactly, the new space is zeros, `check` 0, the new
/// chunk and layout recorded, no reshape flag left.
#[test]
fn raid10_grows_with_a_new_chunk_or_layout_in_one_reshape() {
    type Raid10Case<'a> = (&'a str, &'a str, usize, &'a [&'a str], (u64, &'a str));
    let cases: [Raid10Case; 3] = [
        ("n2", "64K", 5, &["--chunk", "128K"], (128 << 10, "near=2")),
        (
            "o2",
            "128K",
            6,
            &["--layout", "n2", "--chunk", "32K"],
            (32 << 10, "near=2"),
        ),
        (
            "n2",
            "128K",
            6,
            &["--layout", "o2"],
            (128 << 10, "offset=2"),
        ),
    ];
    for (layout, chunk, n, args, after) in cases {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let old = &NAMES[..4];
        let a = create_imported(
            d,
            old,
            "16M",
            &["--level", "10", "--layout", layout, "--chunk", chunk],
        );
        let n_s = n.to_string();
        let mut v = with("grow", old, &["--raid-devices", &n_s]);
        v.extend_from_slice(args);
        for m in &NAMES[4..n] {
            v.extend(["--add", m]);
        }
        v.extend(["--member-size", "16M"]);
        let out = ok(d, &v);
        let what = format!("RAID 10 {layout} {chunk} of 4 -> {n} {args:?}");
        assert!(out.contains("reshape done"), "{what}: {out}");
        let all = &NAMES[..n];
        assert_reshaped(d, all, "10", after.0, after.1, &a);
        assert_eq!(
            examine(d, "m0")["raid_devices"].as_u64(),
            Some(n as u64),
            "{what}"
        );
    }
}

/// The RAID 10 grow with a new chunk, killed (SIGKILL) at seeded points:
/// exact while stopped (read-only) and after `--continue`.
#[test]
fn a_raid10_grow_with_a_new_chunk_killed_reads_back_exactly_and_continues() {
    let mut x: u32 = 0x6b43_a9b5;
    let mut stopped = 0;
    for _ in 0..4 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let delay = Duration::from_millis(150 + u64::from(x % 1800));
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let old = &NAMES[..4];
        let a = create_imported(
            d,
            old,
            "16M",
            &["--level", "10", "--layout", "n2", "--chunk", "64K"],
        );
        let args = with(
            "grow",
            old,
            &[
                "--raid-devices",
                "5",
                "--chunk",
                "128K",
                "--add",
                "m4",
                "--member-size",
                "16M",
                "--max-rate",
                "6M",
            ],
        );
        killed_after(d, &args, delay);
        let all = &NAMES[..5];
        let what = format!("RAID 10 4->5, 64K->128K, killed after {delay:?}");
        match state(d) {
            (true, 5) => {
                let got = export(d, all);
                assert!(got == a, "{what}: the stopped array reads other bytes");
                let out = ok(d, &with("grow", all, &["--continue"]));
                assert!(out.contains("reshape done"), "{what}: {out}");
                stopped += 1;
            }
            (false, 4) => {
                assert!(export(d, old) == a, "{what}: changed before its reshape");
                let spare = run(d, &["examine", "m4", "--json"]).status.success();
                let mut again = with(
                    "grow",
                    if spare { all } else { old },
                    &["--raid-devices", "5", "--chunk", "128K"],
                );
                if !spare {
                    let _ = std::fs::remove_file(d.join("m4"));
                    again.extend(["--add", "m4", "--member-size", "16M"]);
                }
                ok(d, &again);
            }
            (false, 5) => {}
            s => panic!("{what}: unexpected state {s:?}"),
        }
        assert_reshaped(d, all, "10", 128 << 10, "near=2", &a);
    }
    assert!(stopped >= 2, "only {stopped} of 4 runs stopped mid-reshape");
}

/// The `--array-size` a RAID 10 shrink to `n` members with `extra` (a new
/// chunk or layout) may take: what mdadm's refusal names, rounded down to
/// whole `chunk`s of the larger chunk (md's `raid10_check_reshape`).
fn raid10_shrink_size(d: &Path, members: &[&str], n: usize, extra: &[&str], chunk: u64) -> u64 {
    let n = n.to_string();
    let mut v = with("grow", members, &["--raid-devices", &n]);
    v.extend_from_slice(extra);
    let o = run(d, &v);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(
        !o.status.success() && err.contains("use --grow --array-size first"),
        "{err}"
    );
    let k = err.rsplit("`--array-size ").next().unwrap();
    let kib: u64 = k[..k.find('K').unwrap()].parse().unwrap();
    kib * 1024 / chunk * chunk
}

/// A RAID 10 near or offset onto fewer members with a new chunk or layout
/// in one reshape (md's backward reshape with `delta_disks` negative and
/// the new chunk and layout recorded together): the array's first bytes,
/// as many as the fewer members hold, read back exactly; `check` 0; the
/// new chunk and layout recorded, no reshape flag left; the members that
/// left are spares.
#[test]
fn raid10_shrinks_with_a_new_chunk_or_layout_in_one_reshape() {
    type Case<'a> = (
        &'a str,
        &'a str,
        usize,
        usize,
        &'a [&'a str],
        (u64, &'a str),
    );
    let cases: [Case; 3] = [
        (
            "n2",
            "64K",
            5,
            4,
            &["--chunk", "128K"],
            (128 << 10, "near=2"),
        ),
        ("o2", "64K", 4, 3, &["--layout", "n2"], (64 << 10, "near=2")),
        (
            "n2",
            "128K",
            5,
            4,
            &["--layout", "o2", "--chunk", "32K"],
            (32 << 10, "offset=2"),
        ),
    ];
    for (layout, chunk, old, new, extra, after) in cases {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let members = &NAMES[..old];
        let a = create_imported(
            d,
            members,
            "16M",
            &["--level", "10", "--layout", layout, "--chunk", chunk],
        );
        let larger = after
            .0
            .max(if chunk == "128K" { 128 << 10 } else { 64 << 10 });
        let size = raid10_shrink_size(d, members, new, extra, larger);
        let n = new.to_string();
        let size_k = format!("{}K", size / 1024);
        let mut v = with(
            "grow",
            members,
            &["--raid-devices", &n, "--array-size", &size_k],
        );
        v.extend_from_slice(extra);
        let out = ok(d, &v);
        let what = format!("RAID 10 {layout} {chunk} {old} -> {new} {extra:?}");
        assert!(out.contains("reshape done"), "{what}: {out}");
        assert_reshaped(d, members, "10", after.0, after.1, &a[..size as usize]);
        assert_eq!(
            examine(d, "m0")["raid_devices"].as_u64(),
            Some(new as u64),
            "{what}"
        );
        for m in &NAMES[new..old] {
            assert_eq!(examine(d, m)["role"].as_str(), Some("Spare"), "{what}: {m}");
        }
    }
}

/// The RAID 10 shrink with a new chunk, killed (SIGKILL) at seeded points:
/// exact while stopped (read-only) and after `--continue`.
#[test]
fn a_raid10_shrink_with_a_new_chunk_killed_reads_back_exactly_and_continues() {
    let mut x: u32 = 0x2c9e_41d7;
    let mut stopped = 0;
    for _ in 0..4 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let delay = Duration::from_millis(150 + u64::from(x % 1800));
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let members = &NAMES[..5];
        let a = create_imported(
            d,
            members,
            "16M",
            &["--level", "10", "--layout", "n2", "--chunk", "64K"],
        );
        let extra = ["--chunk", "128K"];
        let size = raid10_shrink_size(d, members, 4, &extra, 128 << 10);
        let size_k = format!("{}K", size / 1024);
        let args = with(
            "grow",
            members,
            &[
                "--raid-devices",
                "4",
                "--chunk",
                "128K",
                "--array-size",
                &size_k,
                "--max-rate",
                "6M",
            ],
        );
        killed_after(d, &args, delay);
        let what = format!("RAID 10 5->4, 64K->128K, killed after {delay:?}");
        match state(d) {
            (true, 4) => {
                let got = export(d, members);
                assert!(
                    got == a[..size as usize],
                    "{what}: the stopped array reads other bytes"
                );
                let out = ok(d, &with("grow", members, &["--continue"]));
                assert!(out.contains("reshape done"), "{what}: {out}");
                stopped += 1;
            }
            (false, 5) => {
                assert!(
                    export(d, members) == a,
                    "{what}: changed before its reshape"
                );
                ok(d, &args);
            }
            (false, 4) => {}
            s => panic!("{what}: unexpected state {s:?}"),
        }
        assert_reshaped(d, members, "10", 128 << 10, "near=2", &a[..size as usize]);
    }
    assert!(stopped >= 2, "only {stopped} of 4 runs stopped mid-reshape");
}

/// A RAID 0's other members and a new chunk in one reshape, as md makes it
/// through its RAID 4 without parity: grown 3 to 4 members with 64K to
/// 128K, and shrunk 4 to 3 with 64K to 128K (room after the data from
/// larger files, as md's move up needs): exact data, the new member count
/// and chunk in every superblock, no reshape left.
#[test]
fn raid0_grows_and_shrinks_with_a_new_chunk_in_one_reshape() {
    let raid0_shape = |d: &Path, m: &[&str]| {
        let (level, chunk, _, size) = shape(d, m);
        for member in m {
            let e = examine(d, member);
            let f = e["feature_map"].as_u64().unwrap();
            assert_eq!(
                f & (4 | 64 | 128),
                0,
                "{member}: reshape flags left set: {e}"
            );
            assert_eq!(
                e["raid_devices"].as_u64(),
                Some(m.len() as u64),
                "{member}: {e}"
            );
        }
        (level, chunk, size)
    };
    // Grown.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let old = &NAMES[..3];
    let a = create_imported(d, old, "16M", &["--level", "0", "--chunk", "64K"]);
    let out = ok(
        d,
        &with(
            "grow",
            old,
            &[
                "--raid-devices",
                "4",
                "--chunk",
                "128K",
                "--add",
                "m3",
                "--member-size",
                "16M",
            ],
        ),
    );
    assert!(out.contains("reshape done: raid devices 3 -> 4"), "{out}");
    let all = &NAMES[..4];
    let (level, chunk, size) = raid0_shape(d, all);
    assert_eq!((level.as_str(), chunk), ("raid0", 128 << 10));
    assert!(size > a.len() as u64);
    let got = export(d, all);
    assert!(got[..a.len()] == a[..], "the data changed in the grow");
    assert!(
        got[a.len()..].iter().all(|&b| b == 0),
        "the new space is not zeros"
    );

    // Shrunk: 12 MiB of each 16 MiB file in use.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m4 = &NAMES[..4];
    let a = create_imported(d, m4, "12M", &["--level", "0", "--chunk", "64K"]);
    for m in m4 {
        std::fs::OpenOptions::new()
            .write(true)
            .open(d.join(m))
            .unwrap()
            .set_len(16 * MIB)
            .unwrap();
    }
    let per = detail(d, m4)["member_data_bytes"].as_u64().unwrap();
    let keep = (3 * per) / (128 << 10) * (128 << 10);
    let keep_s = format!("{}K", keep >> 10);
    let out = ok(
        d,
        &with(
            "grow",
            m4,
            &[
                "--raid-devices",
                "3",
                "--chunk",
                "128K",
                "--array-size",
                &keep_s,
            ],
        ),
    );
    assert!(out.contains("reshape done: raid devices 4 -> 3"), "{out}");
    let three = &NAMES[..3];
    let (level, chunk, size) = raid0_shape(d, three);
    assert_eq!((level.as_str(), chunk), ("raid0", 128 << 10));
    assert!(size >= keep, "{size} < {keep}");
    let got = export(d, three);
    assert!(
        got[..keep as usize] == a[..keep as usize],
        "the data changed in the shrink"
    );
}
