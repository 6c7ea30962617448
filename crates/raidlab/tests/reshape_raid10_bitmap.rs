//! `raidlab grow` of a RAID 10 with an internal bitmap on real member
//! files, where md runs the reshape with it (issue 36): onto more members
//! the bitmap is resized to the new array (md's `raid10_start_reshape`),
//! over the same members (a new chunk, n2 to o2) it is kept, and RAID 1 of
//! two to RAID 5 of three keeps it; the data exact and the copies or parity
//! checked clean each time.

mod common;

use common::verbs::*;
use std::path::Path;

/// The bitmap's sync size in KiB as `examine --json` gives it (mdadm's
/// "N (x MiB y MB)").
fn sync_kib(d: &Path, m: &str) -> u64 {
    let e = examine(d, m);
    let s = e["bitmap"]["Sync Size"]
        .as_str()
        .unwrap_or_else(|| panic!("{m}: {e}"));
    s.split_whitespace().next().unwrap().parse().unwrap()
}

/// Every member's bitmap: `sync` KiB, the chunk and state of `before`, its
/// event count the superblock's.
fn assert_bitmap(d: &Path, members: &[&str], before: &serde_json::Value, sync: u64) {
    for m in members {
        let e = examine(d, m);
        let b = &e["bitmap"];
        for k in ["Version", "UUID", "Chunksize", "State"] {
            assert_eq!(b[k], before[k], "{m}: {k}: {e}");
        }
        assert_eq!(sync_kib(d, m), sync, "{m}: {e}");
        let events: u64 = b["Events"].as_str().unwrap().parse().unwrap();
        assert_eq!(Some(events), e["events"].as_u64(), "{m}: {e}");
    }
}

const BITMAP_RAID10: &[&str] = &[
    "--level",
    "10",
    "--chunk",
    "64K",
    "--consistency-policy",
    "bitmap",
    "--bitmap-chunk",
    "64K",
];

#[test]
fn a_raid10_with_a_bitmap_grows_by_a_member_and_its_bitmap_is_resized_as_mds() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let old = ["m0", "m1", "m2", "m3"];
    let a = create_imported(d, &old, "16M", BITMAP_RAID10);
    let before = examine(d, "m0")["bitmap"].clone();
    assert_eq!(sync_kib(d, "m0") * 1024, a.len() as u64, "array sectors");
    ok(
        d,
        &with(
            "grow",
            &old,
            &["--raid-devices", "5", "--add", "m4", "--member-size", "16M"],
        ),
    );
    let new = ["m0", "m1", "m2", "m3", "m4"];
    let size = detail(d, &new)["array_size_bytes"].as_u64().unwrap();
    assert_eq!(size, a.len() as u64 / 4 * 5);
    let got = export(d, &new);
    assert!(got[..a.len()] == a[..], "the data changed");
    check_clean(d, &new);
    assert_bitmap(d, &new, &before, size / 1024);
}

#[test]
fn a_raid10_with_a_bitmap_takes_a_new_chunk_and_layout_and_keeps_its_bitmap() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["m0", "m1", "m2", "m3"];
    let a = create_imported(d, &m, "16M", BITMAP_RAID10);
    let before = examine(d, "m0")["bitmap"].clone();
    let sync = sync_kib(d, "m0");
    ok(d, &with("grow", &m, &["--chunk", "128K"]));
    ok(d, &with("grow", &m, &["--layout", "o2"]));
    assert_eq!(detail(d, &m)["layout"].as_str(), Some("offset=2"));
    assert!(export(d, &m) == a, "the data changed");
    check_clean(d, &m);
    assert_bitmap(d, &m, &before, sync);
}

#[test]
fn a_raid1_with_a_bitmap_becomes_a_raid5_of_three_and_keeps_its_bitmap() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["m0", "m1"];
    let a = create_imported(
        d,
        &m,
        "16M",
        &[
            "--level",
            "1",
            "--consistency-policy",
            "bitmap",
            "--bitmap-chunk",
            "64K",
        ],
    );
    let before = examine(d, "m0")["bitmap"].clone();
    let sync = sync_kib(d, "m0");
    ok(
        d,
        &with(
            "grow",
            &m,
            &[
                "--level",
                "5",
                "--raid-devices",
                "3",
                "--add",
                "m2",
                "--member-size",
                "16M",
            ],
        ),
    );
    let new = ["m0", "m1", "m2"];
    assert_eq!(detail(d, &new)["level"].as_str(), Some("raid5"));
    let got = export(d, &new);
    assert!(got[..a.len()] == a[..], "the data changed");
    check_clean(d, &new);
    assert_bitmap(d, &new, &before, sync);
}
