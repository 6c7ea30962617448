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
            "1",
            "--member-size",
            "8M",
            "a",
            "b",
        ],
    );
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--metadata 0.90"));
    assert!(!d.join("a").exists(), "a refused create leaves no file");
    let o = run(
        d,
        &[
            "create",
            "--metadata",
            "1.0",
            "--level",
            "1",
            "--member-size",
            "8M",
            "--consistency-policy",
            "bitmap",
            "a",
            "b",
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
    // Adding a new member to a 1.0 array is refused by name (not built).
    let o = run(
        d,
        &[
            "add",
            "a",
            "--new",
            "c",
            "--member-size",
            "8M",
            "--no-rebuild",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("metadata 1.0"), "{err}");
}
