//! Members named as partitions of whole-disk images (`disk.img@N`), MBR with
//! logical partitions and GPT, read and written without root or loop devices.
//! The tables are written by hand here (byte for byte as sfdisk lays them out);
//! the real md driver on partitions Linux itself found is in `md_compat.rs`.

use assert_cmd::Command;
use std::fs;
use std::os::unix::fs::FileExt;
use std::path::Path;

const MIB: u64 = 1 << 20;

fn raidlab() -> Command {
    Command::cargo_bin("raidlab").unwrap()
}

fn mbr_entry(b: &mut [u8], slot: usize, kind: u8, start: u32, sectors: u32) {
    let at = 446 + 16 * slot;
    b[at + 4] = kind;
    b[at + 8..at + 12].copy_from_slice(&start.to_le_bytes());
    b[at + 12..at + 16].copy_from_slice(&sectors.to_le_bytes());
    b[510] = 0x55;
    b[511] = 0xaa;
}

/// A 40 MiB image: primary 1 (1 MiB, type 0x83), extended 2 holding logical
/// 5 and 6 (16 MiB each, type 0xfd), as `sfdisk` lays them out.
fn mbr_image(path: &Path) -> Vec<(u64, u64)> {
    let f = fs::File::create(path).unwrap();
    f.set_len(40 * MIB).unwrap();
    let mut mbr = [0u8; 512];
    mbr_entry(&mut mbr, 0, 0x83, 2048, 2048);
    mbr_entry(&mut mbr, 1, 0x05, 4096, 36 * 2048);
    f.write_all_at(&mbr, 0).unwrap();
    let mut ebr1 = [0u8; 512];
    mbr_entry(&mut ebr1, 0, 0xfd, 2048, 16 * 2048);
    mbr_entry(&mut ebr1, 1, 0x05, 17 * 2048, 18 * 2048);
    f.write_all_at(&ebr1, 4096 * 512).unwrap();
    let mut ebr2 = [0u8; 512];
    mbr_entry(&mut ebr2, 0, 0xfd, 2048, 16 * 2048);
    f.write_all_at(&ebr2, (4096 + 17 * 2048) * 512).unwrap();
    // (byte offset, length) of partitions 5 and 6
    vec![
        ((4096 + 2048) * 512, 16 * MIB),
        ((4096 + 17 * 2048 + 2048) * 512, 16 * MIB),
    ]
}

fn pattern(len: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9u32;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

fn run(dir: &Path, args: &[&str]) -> std::process::Output {
    raidlab().current_dir(dir).args(args).output().unwrap()
}

fn ok(o: &std::process::Output) -> String {
    assert!(
        o.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn raid5_on_logical_partitions_of_one_image_and_a_second_image() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let parts = mbr_image(&d.join("a.img"));
    mbr_image(&d.join("b.img"));
    // Two logical partitions of one image and one of another: one image open
    // once (one lock) for two members.
    ok(&run(
        d,
        &[
            "create", "--level", "5", "--chunk", "64K", "a.img@5", "a.img@6", "b.img@5",
        ],
    ));
    let detail: serde_json::Value = serde_json::from_str(&ok(&run(
        d,
        &["detail", "--json", "a.img@5", "a.img@6", "b.img@5"],
    )))
    .unwrap();
    let size = detail["array_size_bytes"].as_u64().unwrap();
    let data = pattern(size as usize);
    fs::write(d.join("in.bin"), &data).unwrap();
    ok(&run(
        d,
        &[
            "import", "a.img@5", "a.img@6", "b.img@5", "--input", "in.bin",
        ],
    ));
    // A resync through partitions, then a degraded export reads the pattern.
    ok(&run(d, &["resync", "a.img@5", "a.img@6", "b.img@5"]));
    let o = run(d, &["export", "a.img@5", "missing", "b.img@5"]);
    assert!(
        o.stdout == data,
        "degraded export differs: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // The superblock is 4 KiB into partition 5, nowhere else.
    let img = fs::read(d.join("a.img")).unwrap();
    let sb = parts[0].0 as usize + 4096;
    assert_eq!(img[sb..sb + 4], [0xfc, 0x4e, 0x2b, 0xa9]);
    // Partition 1 and the EBRs are untouched.
    assert!(img[MIB as usize..2 * MIB as usize].iter().all(|&b| b == 0));
    assert_eq!(img[4096 * 512 + 510..4096 * 512 + 512], [0x55, 0xaa]);
    let text = ok(&run(d, &["examine", "a.img@6"]));
    assert!(text.contains("a.img@6"), "{text}");
    assert!(text.contains("Raid Level : raid5"), "{text}");
    // A check through partitions finds nothing to fix.
    ok(&run(d, &["check", "a.img@5", "a.img@6", "b.img@5"]));
}

#[test]
fn partition_errors_read_well() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    mbr_image(&d.join("a.img"));
    let err = |args: &[&str]| {
        let o = run(d, args);
        assert!(!o.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let e = err(&["examine", "a.img@3"]);
    assert!(
        e.contains("has no partition 3") && e.contains("1, 5, 6"),
        "{e}"
    );
    let e = err(&["examine", "a.img@2"]);
    assert!(e.contains("extended partition"), "{e}");
    let e = err(&["detail", "a.img@5", "a.img@5"]);
    assert!(e.contains("same device"), "{e}");
    // A partition running past the end of a truncated image.
    let f = fs::OpenOptions::new()
        .write(true)
        .open(d.join("a.img"))
        .unwrap();
    f.set_len(30 * MIB).unwrap();
    let e = err(&["examine", "a.img@6"]);
    assert!(e.contains("past the end of the image"), "{e}");
    // A blank image has no table.
    fs::write(d.join("blank.img"), vec![0u8; 1 << 16]).unwrap();
    let e = err(&["examine", "blank.img@1"]);
    assert!(e.contains("no partition table"), "{e}");
    // create never makes a file called `a.img@7`.
    let e = err(&[
        "create",
        "--level",
        "1",
        "--member-size",
        "8M",
        "a.img@7",
        "x.img",
    ]);
    assert!(e.contains("has no partition 7"), "{e}");
    assert!(!d.join("a.img@7").exists());
}

#[test]
fn a_file_whose_name_has_an_at_sign_is_that_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    mbr_image(&d.join("a.img"));
    // `a.img@5` exists as a file of its own: it is that file, not partition 5.
    fs::File::create(d.join("a.img@5"))
        .unwrap()
        .set_len(8 * MIB)
        .unwrap();
    ok(&run(
        d,
        &[
            "create",
            "--level",
            "1",
            "--member-size",
            "8M",
            "a.img@5",
            "m1.img",
        ],
    ));
    assert_eq!(fs::metadata(d.join("a.img@5")).unwrap().len(), 8 * MIB);
    let img = fs::read(d.join("a.img")).unwrap();
    assert!(img[(4096 + 2048) * 512..][..8192].iter().all(|&b| b == 0));
    ok(&run(d, &["detail", "a.img@5", "m1.img"]));
}

/// Four GPT disk images made by the real `sfdisk`, partition 3 of each an md
/// member (as a NAS or an installer lays disks out), then every verb given
/// the whole disks: the error names the partitions that hold members, and the
/// command it prints (the same verb with `IMAGE@3` in place of each disk)
/// works as printed.
#[test]
fn whole_disks_named_where_their_partitions_hold_the_members() {
    let have = std::process::Command::new("sfdisk")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        raidlab_core::skip::skip_or_fail("sfdisk (fdisk package) is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let disks = ["disk0.img", "disk1.img", "disk2.img", "disk3.img"];
    for disk in disks {
        let f = fs::File::create(d.join(disk)).unwrap();
        f.set_len(40 * MIB).unwrap();
        let o = std::process::Command::new("sfdisk")
            .args(["--quiet", "--no-reread", "--no-tell-kernel"])
            .arg(d.join(disk))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(
                    b"label: gpt\n\
                      size=8MiB, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B\n\
                      size=8MiB, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4\n\
                      type=A19D880F-05FC-4D3B-A006-743F0F84911E\n",
                )?;
                c.wait_with_output()
            })
            .unwrap();
        assert!(o.status.success(), "sfdisk {disk}: {o:?}");
    }
    let parts: Vec<String> = disks.iter().map(|x| format!("{x}@3")).collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    ok(&run(
        d,
        &[
            &["create", "--level", "5", "--chunk", "64K", "--name", "nas"][..],
            &parts,
        ]
        .concat(),
    ));
    let array_uuid = {
        let j: serde_json::Value =
            serde_json::from_str(&ok(&run(d, &[&["detail", "--json"][..], &parts].concat())))
                .unwrap();
        j["uuid"].as_str().unwrap().to_string()
    };
    for verb in [
        &["export", "--output", "out.img"][..],
        &["detail"],
        &["detail", "--json"],
        &["check"],
        &["examine"],
    ] {
        let o = run(d, &[verb, &disks[..]].concat());
        assert!(!o.status.success(), "{verb:?} on whole disks succeeded");
        let err = String::from_utf8_lossy(&o.stderr);
        for (i, p) in parts.iter().enumerate() {
            let said = format!("{p} holds member {i} of array \"nas\" UUID {array_uuid}");
            assert!(err.contains(&said), "{verb:?}: no {said:?} in:\n{err}");
        }
        // The command to use: the same verb, the partitions in place.
        let want = format!("raidlab {} {}", verb.join(" "), parts.join(" "));
        let line = err
            .lines()
            .map(str::trim)
            .find(|l| *l == want)
            .unwrap_or_else(|| panic!("{verb:?}: no line {want:?} in:\n{err}"));
        let args: Vec<&str> = line.split_whitespace().skip(1).collect();
        let o = run(d, &args);
        assert!(
            o.status.success(),
            "{line}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // Nothing was written by the refused verbs: the first 8 MiB partition
    // (never touched) still reads as zeros after the GPT.
    let img = fs::read(d.join("disk0.img")).unwrap();
    assert!(img[MIB as usize..9 * MIB as usize].iter().all(|&b| b == 0));
}
