//! `raidlab scan`: md members found in files, in the partitions of whole-disk
//! images and in directories, grouped into arrays with the command that
//! exports each; nothing is written.

use assert_cmd::Command;
use std::fs;
use std::os::unix::fs::FileExt;
use std::path::Path;

const MIB: u64 = 1 << 20;

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

/// A 24 MiB image with a GPT-less MBR: partition 1 (8 MiB at 1 MiB) and 2
/// (8 MiB at 9 MiB), both type 0xfd, ending before the end of the image.
fn mbr_image(path: &Path) {
    let f = fs::File::create(path).unwrap();
    f.set_len(24 * MIB).unwrap();
    let mut mbr = [0u8; 512];
    for (slot, start) in [(0usize, 2048u32), (1, 9 * 2048)] {
        let at = 446 + 16 * slot;
        mbr[at + 4] = 0xfd;
        mbr[at + 8..at + 12].copy_from_slice(&start.to_le_bytes());
        mbr[at + 12..at + 16].copy_from_slice(&(8u32 * 2048).to_le_bytes());
    }
    mbr[510] = 0x55;
    mbr[511] = 0xaa;
    f.write_all_at(&mbr, 0).unwrap();
}

#[test]
fn scan_finds_arrays_in_files_partitions_and_directories() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::create_dir(d.join("disks")).unwrap();
    // A RAID 1 with metadata 1.0 on partition 1 of two images (a NAS system
    // array) and a RAID 5 with 1.2 on partition 2 of both plus a plain file.
    mbr_image(&d.join("disks/a.img"));
    mbr_image(&d.join("disks/b.img"));
    ok(&run(
        d,
        &[
            "create",
            "-e",
            "1.0",
            "--level",
            "1",
            "--name",
            "sys",
            "disks/a.img@1",
            "disks/b.img@1",
        ],
    ));
    ok(&run(
        d,
        &[
            "create",
            "--level",
            "5",
            "--chunk",
            "64K",
            "--name",
            "data",
            "--member-size",
            "8M",
            "disks/a.img@2",
            "disks/b.img@2",
            "disks/c.img",
        ],
    ));
    fs::write(d.join("disks/notes.txt"), b"not a member").unwrap();
    let before: Vec<Vec<u8>> = ["a.img", "b.img", "c.img"]
        .iter()
        .map(|n| fs::read(d.join("disks").join(n)).unwrap())
        .collect();
    let v: serde_json::Value =
        serde_json::from_str(&ok(&run(d, &["scan", "--json", "disks"]))).unwrap();
    let arrays = v["arrays"].as_array().unwrap();
    assert_eq!(arrays.len(), 2, "{v:#}");
    let by_name = |n: &str| {
        arrays
            .iter()
            .find(|a| a["name"].as_str().unwrap().ends_with(n))
            .unwrap()
    };
    let sys = by_name("sys");
    assert_eq!(sys["metadata"], "1.0");
    assert_eq!(sys["level"], "raid1");
    assert_eq!(sys["state"], "clean");
    let data = by_name("data");
    assert_eq!(data["metadata"], "1.2");
    assert_eq!(data["level"], "raid5");
    assert_eq!(data["members"].as_array().unwrap().len(), 3);
    // The printed command exports the array.
    let cmd: Vec<String> = data["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    assert_eq!(&cmd[..2], &["raidlab", "export"]);
    ok(&run(
        d,
        &cmd[1..].iter().map(String::as_str).collect::<Vec<_>>(),
    ));
    assert!(d.join("ARRAY.img").exists());
    // Degraded: one member image left out of the scan.
    let v: serde_json::Value = serde_json::from_str(&ok(&run(
        d,
        &["scan", "--json", "disks/a.img", "disks/c.img"],
    )))
    .unwrap();
    let data = v["arrays"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["level"] == "raid5")
        .unwrap()
        .clone();
    assert!(
        data["state"].as_str().unwrap().contains("degraded"),
        "{data:#}"
    );
    // Text form: one ARRAY line per array and the export command.
    let text = ok(&run(d, &["scan", "disks"]));
    assert_eq!(text.matches("ARRAY ").count(), 2, "{text}");
    assert!(
        text.contains("raidlab export disks/a.img@1 disks/b.img@1"),
        "{text}"
    );
    let after: Vec<Vec<u8>> = ["a.img", "b.img", "c.img"]
        .iter()
        .map(|n| fs::read(d.join("disks").join(n)).unwrap())
        .collect();
    assert!(before == after, "scan wrote to a member");
}

/// A metadata 0.90 restripe through a backup file, stopped (recorded, not
/// walked): scan says it is read only with its backup file and suggests
/// `export --backup-file FILE`, which md's rule requires (a plain export is
/// refused); the suggestion with the file given works. Scan writes nothing.
#[test]
fn scan_suggests_the_backup_file_for_a_stopped_090_restripe() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let m = ["m0", "m1", "m2", "m3"];
    let mut args = vec!["create", "--level", "5", "--metadata", "0.90"];
    args.extend(["--member-size", "16M"]);
    args.extend(m);
    ok(&run(d, &args));
    let scan = |d: &Path| -> serde_json::Value {
        let mut args = vec!["scan", "--json"];
        args.extend(m);
        serde_json::from_str(&ok(&run(d, &args))).unwrap()
    };
    let plain = scan(d);
    let cmd = plain["arrays"][0]["command"].to_string();
    assert!(!cmd.contains("--backup-file"), "{plain}");
    let mut args = vec!["grow"];
    args.extend(m);
    args.extend(["--chunk", "32K", "--backup-file", "bak", "--no-sync"]);
    ok(&run(d, &args));
    let before: Vec<Vec<u8>> = m.iter().map(|f| fs::read(d.join(f)).unwrap()).collect();
    let v = scan(d);
    let a = &v["arrays"][0];
    let words: Vec<&str> = a["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    let at = words.iter().position(|w| *w == "--backup-file");
    assert!(
        at.is_some_and(|i| words[i + 1] == "FILE" && words[i + 2] == "--output"),
        "{v}"
    );
    let state = a["state"].as_str().unwrap();
    assert!(
        state.contains("interrupted reshape") && state.contains("backup file"),
        "{v}"
    );
    let text = ok(&run(d, &["scan", "m0", "m1", "m2", "m3"]));
    assert!(text.contains("--backup-file FILE"), "{text}");
    let after: Vec<Vec<u8>> = m.iter().map(|f| fs::read(d.join(f)).unwrap()).collect();
    assert!(before == after, "scan wrote to a member");
    // The plain export is refused (md's rule); the suggestion, with the
    // file, reads.
    let mut plain_export = vec!["export"];
    plain_export.extend(m);
    plain_export.extend(["--output", "a.img"]);
    let o = run(d, &plain_export);
    assert!(!o.status.success(), "a plain export read it");
    let given: Vec<&str> = words[1..]
        .iter()
        .map(|w| match *w {
            "FILE" => "bak",
            "ARRAY.img" => "a.img",
            w => w,
        })
        .collect();
    ok(&run(d, &given));
    assert!(d.join("a.img").exists());
}
