//! `raidlab add --re-add` (mdadm's meaning) as users meet it: a member that
//! left (failed and removed, or left out of a start) goes back into its old
//! role and only the chunks the write-intent bitmap marked while it was away
//! are resynced; plain `add` does the same when it can, as mdadm --add does;
//! when md would refuse, `--re-add` refuses and no member file changes.

mod common;

use common::verbs::*;
use std::path::Path;

fn size(d: &Path, members: &[&str]) -> usize {
    let v: serde_json::Value =
        serde_json::from_str(&ok(d, &with("detail", members, &["--json"]))).unwrap();
    v["array_size_bytes"].as_u64().unwrap() as usize
}

/// Create with a 1 MiB-chunk internal bitmap (or none) and fill with data A.
fn create_filled(d: &Path, level: &str, members: &[&str], bitmap: bool) -> Vec<u8> {
    let policy = if bitmap { "bitmap" } else { "resync" };
    let mut extra = vec![
        "--level",
        level,
        "--chunk",
        "64K",
        "--member-size",
        "16M",
        "--consistency-policy",
        policy,
    ];
    if bitmap {
        extra.extend(["--bitmap-chunk", "1M"]);
    }
    ok(d, &with("create", members, &extra));
    let a = pattern(size(d, members), 1);
    std::fs::write(d.join("a.bin"), &a).unwrap();
    ok(d, &with("import", members, &["--input", "a.bin"]));
    a
}

/// Write data B (1.5 MiB at array byte 2 MiB) through `members`; returns
/// what the array holds after it.
fn write_b(d: &Path, members: &[&str], mut data: Vec<u8>) -> Vec<u8> {
    let b = pattern(3 * MIB as usize / 2, 2);
    std::fs::write(d.join("b.bin"), &b).unwrap();
    ok(
        d,
        &with("import", members, &["--input", "b.bin", "--offset", "2M"]),
    );
    data[2 * MIB as usize..2 * MIB as usize + b.len()].copy_from_slice(&b);
    data
}

/// The two figures of "resynced X bytes of Y" and the dirty chunk count of
/// the re-add line.
fn figures(out: &str) -> (u64, u64, u64) {
    let num = |after: &str, text: &str| -> u64 {
        let i = text
            .find(after)
            .unwrap_or_else(|| panic!("{after:?} not in {out}"))
            + after.len();
        text[i..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let resynced = num("resynced ", out);
    let member = num(&format!("resynced {resynced} bytes of "), out);
    let chunks_at = out.find(" dirty chunk").expect(out);
    let dirty: u64 = out[..chunks_at]
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap();
    (resynced, member, dirty)
}

#[test]
fn raid5_re_add_after_fail_and_remove_resyncs_only_the_dirty_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["m0", "m1", "m2", "m3"];
    let a = create_filled(d, "5", &m, true);
    ok(d, &with("fail", &m, &["--member", "m3"]));
    ok(d, &with("remove", &m, &["--member", "m3"]));
    let expected = write_b(d, &m, a);

    let out = ok(d, &with("add", &m, &["--new", "m3", "--re-add"]));
    assert!(out.contains("re-added into its role 3"), "{out}");
    let (resynced, member, dirty) = figures(&out);
    // B's 1.5 MiB of array is 0.5 MiB of each member's area, within two
    // 1 MiB bitmap chunks at most: far less than the 15+ MiB member.
    assert!((1..=2).contains(&dirty), "{out}");
    assert_eq!(resynced, dirty * MIB, "{out}");
    assert!(resynced * 4 < member, "{out}");
    assert!(member >= 15 * MIB, "{out}");

    let check = ok(d, &with("check", &m, &[]));
    assert!(check.contains("mismatch_cnt: 0"), "{check}");
    assert_eq!(export(d, &m), expected);
    // Without m0, m0's chunks are computed from the others, m3's included:
    // they come out right only if m3 got B.
    assert_eq!(export(d, &["missing", "m1", "m2", "m3"]), expected);
}

#[test]
fn raid5_re_add_to_a_served_array_resyncs_only_the_dirty_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["m0", "m1", "m2", "m3"];
    let a = create_filled(d, "5", &m, true);
    ok(d, &with("fail", &m, &["--member", "m3"]));
    ok(d, &with("remove", &m, &["--member", "m3"]));
    let expected = write_b(d, &m, a);

    let served = common::Served::start(d, &m[..3]);
    // Sent to the server: the array is served, so the verb goes there.
    let out = ok(d, &with("add", &m[..3], &["--new", "m3", "--re-add"]));
    assert!(out.contains("re-added into its role 3"), "{out}");
    assert!(
        out.contains("re-add of role 3"),
        "waits for the resync: {out}"
    );
    let (resynced, member, dirty) = figures(&out);
    assert!((1..=2).contains(&dirty), "{out}");
    assert_eq!(
        resynced,
        dirty * MIB,
        "one 1 MiB step per dirty chunk: {out}"
    );
    assert!(member >= 15 * MIB, "{out}");
    // A blank file is refused with md's reason, and left as it was.
    std::fs::write(d.join("blank"), vec![0u8; 16 * MIB as usize]).unwrap();
    let o = run(d, &with("add", &m[..3], &["--new", "blank", "--re-add"]));
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("not possible") && err.contains("nothing was changed"),
        "{err}"
    );
    assert!(std::fs::read(d.join("blank"))
        .unwrap()
        .iter()
        .all(|&b| b == 0));
    served.stop();

    let check = ok(d, &with("check", &m, &[]));
    assert!(check.contains("mismatch_cnt: 0"), "{check}");
    assert_eq!(export(d, &m), expected);
    assert_eq!(export(d, &["missing", "m1", "m2", "m3"]), expected);
}

#[test]
fn raid1_plain_add_re_adds_a_member_left_out_of_a_start() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let r = ["r0", "r1"];
    let a = create_filled(d, "1", &r, true);
    // r1 is simply not given: the array runs degraded, r1 goes stale.
    let expected = write_b(d, &["r0"], a);

    // Plain add: a re-add where one is possible, as mdadm --add.
    let out = ok(d, &with("add", &["r0"], &["--new", "r1"]));
    assert!(out.contains("re-added into its role 1"), "{out}");
    let (resynced, member, dirty) = figures(&out);
    assert_eq!(dirty, 2, "B covers member bytes 2..3.5 MiB: chunks 2 and 3");
    assert_eq!(resynced, 2 * MIB, "{out}");
    assert!(resynced * 4 < member, "{out}");
    let check = ok(d, &with("check", &r, &[]));
    assert!(check.contains("mismatch_cnt: 0"), "{check}");
    // The re-added copy alone.
    assert_eq!(export(d, &["missing", "r1"]), expected);
}

#[test]
fn re_add_without_a_bitmap_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["n0", "n1", "n2", "n3"];
    let a = create_filled(d, "5", &m, false);
    ok(d, &with("fail", &m, &["--member", "n3"]));
    ok(d, &with("remove", &m, &["--member", "n3"]));
    write_b(d, &m, a);
    let before = files(d, &m);
    let o = run(d, &with("add", &m, &["--new", "n3", "--re-add"]));
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no write-intent bitmap"), "{err}");
    assert!(files(d, &m) == before, "a refused re-add changed a member");
}

#[test]
fn re_add_of_a_member_older_than_the_bitmap_is_refused_and_add_rebuilds_it_whole() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["o0", "o1", "o2", "o3"];
    let a = create_filled(d, "5", &m, true);
    ok(d, &with("fail", &m, &["--member", "o3"]));
    ok(d, &with("remove", &m, &["--member", "o3"]));
    let data = write_b(d, &m, a);
    // A new member takes role 3 (a full rebuild); complete again, the next
    // clean stop clears the bitmap past o3's events; then the new one leaves.
    let k = ["o0", "o1", "o2", "k3"];
    let out = ok(
        d,
        &with("add", &m[..3], &["--new", "k3", "--member-size", "16M"]),
    );
    assert!(out.contains("added into missing role 3"), "{out}");
    let data = write_b(d, &k, data);
    ok(d, &with("fail", &k, &["--member", "k3"]));
    ok(d, &with("remove", &k, &["--member", "k3"]));

    let before = files(d, &m);
    let o = run(d, &with("add", &m[..3], &["--new", "o3", "--re-add"]));
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("older than the bitmap"), "{err}");
    assert!(files(d, &m) == before, "a refused re-add changed a member");

    // Plain add says why it cannot re-add, then rebuilds it whole.
    let out = ok(d, &with("add", &m[..3], &["--new", "o3"]));
    assert!(out.contains("not possible"), "{out}");
    assert!(out.contains("added into missing role 3"), "{out}");
    assert!(out.contains("rebuilt o3 into role 3"), "{out}");
    assert_eq!(export(d, &["missing", "o1", "o2", "o3"]), data);
}
