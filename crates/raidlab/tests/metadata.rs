//! Arrays with md metadata 1.0 (superblock at the end, data from sector 0) and
//! 1.1 (superblock at sector 0), through every verb that reads or writes
//! superblocks. md itself reading and writing them is in `md_compat.rs`.

use assert_cmd::Command;
use std::fs;
use std::path::Path;

fn run(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::cargo_bin("raidlab")
        .unwrap()
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

fn ok(o: &std::process::Output) -> String {
    assert!(
        o.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn pattern(len: usize) -> Vec<u8> {
    let mut x = 0x1234_5678u32;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

fn json(dir: &Path, args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&ok(&run(dir, args))).unwrap()
}

#[test]
fn raid6_with_metadata_10_and_11_through_the_verbs() {
    for (version, sb_at_end) in [("1.0", true), ("1.1", false)] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let m = ["m0", "m1", "m2", "m3", "m4"];
        let mut args = vec![
            "create",
            "--metadata",
            version,
            "--level",
            "6",
            "--chunk",
            "64K",
            "--member-size",
            "12M",
        ];
        args.extend(m);
        ok(&run(d, &args));
        for (i, e) in json(d, &["examine", "--json", "m0", "m1", "m2", "m3", "m4"])
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
        {
            assert_eq!(e["version"], version, "member {i}");
            let so = e["super_offset"].as_u64().unwrap();
            assert_eq!(so > 0, sb_at_end, "{e}");
            assert_eq!(e["data_offset"].as_u64().unwrap() == 0, sb_at_end, "{e}");
        }
        let text = ok(&run(d, &["examine", "m2"]));
        assert!(text.contains(&format!("Version : {version}")), "{text}");
        let size = json(d, &["detail", "--json", "m0", "m1", "m2", "m3", "m4"])["array_size_bytes"]
            .as_u64()
            .unwrap();
        let data = pattern(size as usize);
        fs::write(d.join("in"), &data).unwrap();
        let mut imp = vec!["import"];
        imp.extend(m);
        imp.extend(["--input", "in"]);
        ok(&run(d, &imp));
        // md metadata 1.0 RAID data starts at sector 0 of each member.
        if sb_at_end {
            // (left-symmetric RAID 6 of 5: Q on member 0, chunk 0 on member 1)
            let m1 = fs::read(d.join("m1")).unwrap();
            assert!(
                m1[..65536] == data[..65536],
                "chunk 0 at byte 0 of member 1"
            );
        }
        let o = run(d, &["export", "m0", "missing", "m2", "missing", "m4"]);
        assert!(o.stdout == data, "{version}: degraded export differs");
        // fail + remove + check + repair rewrite superblocks at their place.
        ok(&run(
            d,
            &[
                "fail",
                "m0",
                "m1",
                "m2",
                "m3",
                "m4",
                "--member",
                "m3",
                "--no-rebuild",
            ],
        ));
        ok(&run(
            d,
            &["remove", "m0", "m1", "m2", "m3", "m4", "--member", "m3"],
        ));
        ok(&run(d, &["check", "m0", "m1", "m2", "m4"]));
        let det = json(d, &["detail", "--json", "m0", "m1", "m2", "m3", "m4"]);
        let states: Vec<String> = det["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["state"].as_str().unwrap_or("").to_string())
            .collect();
        assert!(states.iter().any(|s| s == "removed"), "{states:?}");
        let e = &json(d, &["examine", "--json", "m0"])[0];
        assert_eq!(e["version"], version);
        assert!(e["events"].as_u64().unwrap() > 0);
        let o = run(d, &["export", "m0", "m1", "m2", "m4"]);
        assert!(
            o.stdout == data,
            "{version}: export after fail/remove differs"
        );
    }
}

#[test]
fn metadata_choices_and_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = run(
        d,
        &[
            "create",
            "--metadata",
            "0.90",
            "--level",
            "5",
            "--consistency-policy",
            "ppl",
            "--member-size",
            "8M",
            "a",
            "b",
            "c",
        ],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("0.90") && err.contains("partial parity log"),
        "{err}"
    );
    assert!(!d.join("a").exists(), "a refused create leaves no file");
    // A 0.90 bitmap is md's, right after the superblock.
    let o = run(
        d,
        &[
            "create",
            "--metadata",
            "0.90",
            "--level",
            "1",
            "--consistency-policy",
            "bitmap",
            "--member-size",
            "8M",
            "bm0",
            "bm1",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(d, &["examine", "--json", "bm0"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    let bm = &v[0]["bitmap"];
    assert!(
        o.status.success() && bm["Magic"] == "6d746962" && bm["Chunksize"] == "4 KB",
        "{v}"
    );
    let o = run(
        d,
        &[
            "create",
            "--metadata",
            "1.0",
            "--level",
            "5",
            "--member-size",
            "8M",
            "--consistency-policy",
            "ppl",
            "a",
            "b",
            "c",
        ],
    );
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not built yet"));
    // RAID 1 with 1.0: the member is the file system image, from byte 0.
    ok(&run(
        d,
        &[
            "create",
            "-e",
            "1.0",
            "--level",
            "1",
            "--member-size",
            "8M",
            "a",
            "b",
        ],
    ));
    fs::write(d.join("in"), pattern(1 << 20)).unwrap();
    ok(&run(d, &["import", "a", "b", "--input", "in"]));
    let a = fs::read(d.join("a")).unwrap();
    assert!(a[..1 << 20] == pattern(1 << 20)[..]);
    // A new member of a 1.0 array (a bigger device, as replacements are) gets
    // its superblock at its own end and its data from byte 0, then a rebuild.
    ok(&run(d, &["fail", "a", "b", "--member", "b"]));
    ok(&run(d, &["remove", "a", "b", "--member", "b"]));
    ok(&run(d, &["add", "a", "--new", "c", "--member-size", "12M"]));
    let c = fs::read(d.join("c")).unwrap();
    assert!(
        c[..1 << 20] == pattern(1 << 20)[..],
        "c holds the data from byte 0"
    );
    let sb_at = ((c.len() as u64 / 512 - 16) & !7) * 512;
    assert_eq!(
        &c[sb_at as usize..sb_at as usize + 4],
        &0xa92b_4efcu32.to_le_bytes(),
        "c's superblock is at its own end (v1.0)"
    );
    let detail = ok(&run(d, &["detail", "a", "c"]));
    assert!(!detail.contains("degraded"), "{detail}");
    // The rebuilt member alone serves the data.
    let out = run(d, &["export", "missing", "c"]);
    assert!(out.status.success());
    assert!(out.stdout[..1 << 20] == pattern(1 << 20)[..]);
}

/// A metadata 0.90 superblock for member `me` of a clean RAID 5 of `n`
/// (left-symmetric, 64K chunk, `size_kib` per member), as md writes it on a
/// little- or big-endian host.
fn sb090(n: u32, me: u32, size_kib: u32, big_endian: bool) -> Vec<u8> {
    let mut w = vec![0u32; 1024];
    w[0] = 0xa92b_4efc;
    w[2] = 90;
    w[5] = 0x0bad_cafe;
    w[6] = 1_600_000_000;
    w[7] = 5;
    w[8] = size_kib;
    w[9] = n;
    w[10] = n;
    w[13] = 1;
    w[14] = 2;
    w[15] = 3;
    w[32] = 1_600_000_500;
    w[33] = 1; // clean
    w[34] = n;
    w[35] = n;
    w[39] = 7; // events (low word first on a little-endian host)
    w[41] = 7;
    w[64] = 2;
    w[65] = 64 << 10;
    for d in 0..n as usize {
        let at = 128 + 32 * d;
        w[at..at + 5].copy_from_slice(&[d as u32, 8, 16 * d as u32, d as u32, 6]);
    }
    let mine = 128 + 32 * me as usize;
    w.copy_within(mine..mine + 32, 992);
    if big_endian {
        w.swap(39, 40);
        w.swap(41, 42);
    }
    let sum: u64 = w.iter().map(|&x| u64::from(x)).sum();
    w[38] = ((sum & 0xffff_ffff) + (sum >> 32)) as u32;
    w.iter()
        .flat_map(|x| {
            if big_endian {
                x.to_be_bytes()
            } else {
                x.to_le_bytes()
            }
        })
        .collect()
}

#[test]
fn metadata_090_is_read_in_both_byte_orders_and_written_in_the_hosts() {
    use std::os::unix::fs::FileExt;
    for big_endian in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let m = ["m0", "m1", "m2"];
        let mut args = vec!["create", "-e", "1.0", "--level", "5", "--chunk", "64K"];
        args.extend(["--member-size", "8M"]);
        args.extend(m);
        ok(&run(d, &args));
        let size = json(d, &["detail", "--json", "m0", "m1", "m2"])["array_size_bytes"]
            .as_u64()
            .unwrap();
        let data = pattern(size as usize);
        fs::write(d.join("in"), &data).unwrap();
        ok(&run(d, &["import", "m0", "m1", "m2", "--input", "in"]));
        // The same data under 0.90 superblocks: the layout is md's at
        // sector 0 either way; 0.90 keeps 64-128 KiB at the end.
        let dev_sectors = (8u64 << 20) / 512;
        let at = ((dev_sectors & !127) - 128) * 512;
        let size_kib = (at / 1024) / 64 * 64;
        for (i, name) in m.iter().enumerate() {
            let f = fs::OpenOptions::new()
                .write(true)
                .open(d.join(name))
                .unwrap();
            let v1_at = ((dev_sectors - 16) & !7) * 512;
            f.write_all_at(&[0u8; 4096], v1_at).unwrap();
            f.write_all_at(&sb090(3, i as u32, size_kib as u32, big_endian), at)
                .unwrap();
        }
        let text = ok(&run(d, &["examine", "m1"]));
        assert!(text.contains("Version : 0.90.00"), "{text}");
        assert!(
            text.contains("UUID : 0badcafe:00000001:00000002:00000003"),
            "{text}"
        );
        assert!(
            text.contains("this     1       8       16        1      active sync"),
            "{text}"
        );
        let e = &json(d, &["examine", "--json", "m1"])[0];
        assert_eq!(
            e["byte_order"],
            if big_endian {
                "big-endian"
            } else {
                "little-endian"
            }
        );
        assert_eq!(e["events"], 7);
        let det = json(d, &["detail", "--json", "m0", "m1", "m2"]);
        assert_eq!(det["metadata"], "0.90");
        assert_eq!(det["uuid"], "0badcafe:00000001:00000002:00000003");
        let want = &data[..(2 * size_kib * 1024) as usize];
        let o = run(d, &["export", "m0", "m1", "m2"]);
        assert!(o.stdout == want, "complete export differs");
        let o = run(d, &["export", "m2", "missing", "m0"]);
        assert!(o.stdout == want, "degraded export differs");
        // A scrub reads and compares only.
        let o = run(d, &["check", "m0", "m1", "m2"]);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{out} {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(out.contains("mismatch_cnt: 0"), "{out}");
        // Written back as 0.90, in the host's (little-endian) order: new
        // data, a member failed and a new one rebuilt into its slot.
        let data2: Vec<u8> = want.iter().map(|b| !b).collect();
        fs::write(d.join("in2"), &data2).unwrap();
        ok(&run(d, &["import", "m0", "m1", "m2", "--input", "in2"]));
        ok(&run(d, &["fail", "m0", "m1", "m2", "--member", "m1"]));
        let e = &json(d, &["examine", "--json", "m0"])[0];
        assert_eq!(e["version"], "0.90.00");
        assert_eq!(e["byte_order"], "little-endian");
        assert_eq!(e["failed_devices"], 1);
        ok(&run(
            d,
            &["add", "m0", "m2", "--new", "n1", "--member-size", "8M"],
        ));
        let det = json(d, &["detail", "--json", "m0", "n1", "m2"]);
        assert_eq!(det["metadata"], "0.90");
        assert_eq!(det["state"], "clean", "{det}");
        let e = &json(d, &["examine", "--json", "n1"])[0];
        assert_eq!(e["raid_disk"], 1);
        assert_eq!(e["active_devices"], 3);
        let o = run(d, &["export", "n1", "m0", "m2"]);
        assert!(o.stdout == data2, "export after the rebuild differs");
        let o = run(d, &["export", "m0", "n1", "missing"]);
        assert!(
            o.stdout == data2,
            "degraded export after the rebuild differs"
        );
    }
}

#[test]
fn metadata_10_with_an_internal_bitmap_before_the_superblock() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = ["m0", "m1", "m2", "m3"];
    let mut args = vec!["create", "-e", "1.0", "--level", "5", "--chunk", "64K"];
    args.extend(["--member-size", "16M", "--consistency-policy", "bitmap"]);
    args.extend(["--bitmap-chunk", "1M"]);
    args.extend(m);
    ok(&run(d, &args));
    let e = &json(d, &["examine", "--json", "m2"])[0];
    assert_eq!(e["version"], "1.0");
    let text = ok(&run(d, &["examine", "m2"]));
    // mdadm's placement: 4 KiB of bits before the 8-sector bad block log.
    assert!(
        text.contains("Internal Bitmap : -16 sectors from superblock"),
        "{text}"
    );
    let det = json(d, &["detail", "--json", "m0", "m1", "m2", "m3"]);
    assert_eq!(det["consistency_policy"], "bitmap", "{det:#}");
    let size = det["array_size_bytes"].as_u64().unwrap();
    let data = pattern(size as usize);
    fs::write(d.join("in"), &data).unwrap();
    ok(&run(
        d,
        &["import", "m0", "m1", "m2", "m3", "--input", "in"],
    ));
    let det = json(d, &["detail", "--json", "m0", "m1", "m2", "m3"]);
    assert_eq!(det["bitmap_dirty_chunks"], 0, "{det:#}");
    let o = run(d, &["export", "m0", "m1", "missing", "m3"]);
    assert!(o.stdout == data, "degraded export differs");
}
