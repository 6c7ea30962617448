//! `check`, `repair` and `resync` of an array stopped in the middle of a
//! reshape (a RAID 5 and a RAID 6 grow stopped mid-walk), offline and
//! against a server: refused with the reshape as the reason and what to do
//! (`grow --continue`), no member byte changed; after `--continue` the
//! array checks clean and holds exactly its data. A scrub of one geometry
//! over an array whose stripes are half in each counted mismatches that
//! were not there, and a RAID 6 repair rewrote good data from them.

mod common;

use common::verbs::*;
use common::{ServeOptions, Served};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Where m0's superblock says the reshape stopped (sectors), if it records
/// one.
fn reshape_position(d: &Path) -> Option<u64> {
    let e = examine(d, "m0");
    if e["feature_map"].as_u64().unwrap() & 4 == 0 {
        return None;
    }
    e["reshape"]["position_sectors"].as_u64()
}

/// A grow of `old` by one member (`new` adds it), rate-limited and stopped
/// by SIGINT part-way (the run checkpoints and records where it stopped).
/// Returns the data imported before, or `None` when the stop did not land
/// inside the walk (then the caller tries another delay).
fn stopped_mid_walk(
    d: &Path,
    old: &[&str],
    new: &[&str],
    level: &str,
    delay: u64,
) -> Option<Vec<u8>> {
    for f in new {
        let _ = std::fs::remove_file(d.join(f));
    }
    let a = create_imported(d, old, "16M", &["--level", level, "--chunk", "64K"]);
    let n = new.len().to_string();
    let added = new[new.len() - 1];
    let args = with(
        "grow",
        old,
        &[
            "--raid-devices",
            &n,
            "--add",
            added,
            "--member-size",
            "16M",
            "--max-rate",
            "4M",
        ],
    );
    let child = Command::new(env!("CARGO_BIN_EXE_raidlab"))
        .current_dir(d)
        .env("RAIDLAB_RUN_DIR", d.join("run"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(delay));
    let s = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(s.success());
    let _ = child.wait_with_output();
    reshape_position(d).is_some_and(|p| p > 0).then_some(a)
}

/// The RAID `level` array of `old` grown onto `new`, stopped mid-walk.
fn stopped(d: &Path, old: &[&str], new: &[&str], level: &str) -> Vec<u8> {
    for delay in [1500, 800, 2500, 400] {
        if let Some(a) = stopped_mid_walk(d, old, new, level, delay) {
            return a;
        }
        eprintln!("RAID {level}: a stop after {delay} ms was not mid-walk; trying another");
    }
    panic!("RAID {level}: no stop landed inside the reshape's walk");
}

/// `verb` of the members fails, says the reshape is why and what to do,
/// and changes no byte of any member.
fn refused(d: &Path, members: &[&str], verb: &str) {
    let before = files(d, members);
    let o = run(d, &with(verb, members, &[]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success(),
        "{verb} of a mid-reshape array was not refused: {}{err}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(err.contains("middle of a reshape"), "{verb}: {err}");
    assert!(err.contains("grow --continue"), "{verb}: {err}");
    assert!(err.contains("nothing was written"), "{verb}: {err}");
    assert!(
        files(d, members) == before,
        "{verb} refused but a member changed"
    );
}

#[test]
fn check_repair_and_resync_of_a_stopped_raid5_and_raid6_reshape_are_refused() {
    for (level, old, new) in [
        ("5", &["m0", "m1", "m2"][..], &["m0", "m1", "m2", "m3"][..]),
        (
            "6",
            &["m0", "m1", "m2", "m3"][..],
            &["m0", "m1", "m2", "m3", "m4"][..],
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let a = stopped(d, old, new, level);
        for verb in ["check", "repair", "resync"] {
            refused(d, new, verb);
        }
        assert!(export(d, new) == a, "RAID {level}: the data changed");
        let out = ok(d, &with("grow", new, &["--continue"]));
        assert!(out.contains("reshape resumed"), "{out}");
        check_clean(d, new);
        let got = export(d, new);
        assert!(got[..a.len()] == *a, "RAID {level}: the data changed");
    }
}

#[test]
fn a_served_check_of_a_stopped_reshape_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (old, new) = (["m0", "m1", "m2", "m3"], ["m0", "m1", "m2", "m3", "m4"]);
    let a = stopped(d, &old, &new, "6");
    // Served read-only, the reshape is recorded but does not run: nothing
    // else stops a check there.
    let mut args = vec!["--read-only"];
    args.extend(new);
    let served = Served::start_with(ServeOptions {
        dir: Some(d),
        socket: d.join("nbd.sock"),
        args: &args,
        wait_control: true,
    });
    refused(d, &new, "check");
    served.stop();
    assert!(export(d, &new) == a, "the data changed");
}
