//! `raidlab grow --level` of a served array: md's takeovers with the add,
//! rebuild and restripe each needs, made in the server while fio writes and
//! verifies through NBD; a server stopped in the middle, served again.

use super::*;

/// Wait until the served array runs a long job of `kind` ("rebuild" or
/// "reshape"), or `grow`, the level change that starts it, has ended (it
/// must have succeeded then).
fn wait_running(dir: &Path, members: &[&str], kind: &str, grow: &mut Child) -> serde_json::Value {
    let t = Instant::now();
    loop {
        let v = detail(dir, members);
        if v["served"][kind]["running"] == true {
            return v;
        }
        if let Some(st) = grow.try_wait().unwrap() {
            let log = std::fs::read_to_string(dir.join("grow.log")).unwrap_or_default();
            assert!(st.success(), "grow exited with {st}: {log}");
            return v;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no {kind} in 60 s: {v}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A level change of a served array, `args` to `grow`, paced, logged to
/// grow.log.
fn spawn_grow(dir: &Path, args: &[&str], members: &[&str]) -> Child {
    let log = || {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("grow.log"))
            .unwrap()
    };
    raidlab(dir)
        .arg("grow")
        .args(args)
        .args(members)
        .stdout(log())
        .stderr(log())
        .spawn()
        .unwrap()
}

/// md's RAID 5 to 6 on a served array, the whole sequence offline makes:
/// Q's device added as a spare, the takeover to left-symmetric-6, the live
/// rebuild of Q, then the restripe to left-symmetric; and back, the
/// restripe to left-symmetric-6 then the takeover to RAID 5 (Q's member a
/// spare). fio writes and verifies through NBD during each (0 errors),
/// everything written reads back after, and parity checks.
#[test]
fn a_served_raid5_becomes_raid6_and_back_while_fio_writes_and_verifies() {
    if !have("fio") {
        raidlab_core::skip::skip_or_fail(
            "served grow: fio not installed (scripts/test.sh installs it)",
        );
        return;
    }
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = tmp.path();
    let m = ["m0", "m1", "m2", "m3"];
    run(raidlab(dir)
        .args(["create", "-l", "5", "--member-size", "16M"])
        .args(m));
    // md computes Q from data and P: the initial resync first.
    run(raidlab(dir).arg("resync").args(m));
    std::fs::File::create(dir.join("m4"))
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    let srv = serve(dir, &m);
    let size0 = detail(dir, &m)["array_size_bytes"].as_u64().unwrap();
    fio(&srv.export_uri("a"), "0", "12M", "50", &["--do_verify=1"]);
    // Refused as offline refuses them, nothing changed.
    for (args, why) in [
        (
            &["--level", "0", "--add", "m4"][..],
            "--add goes with a level that takes new members",
        ),
        (
            &["--level", "6", "--add", "m4", "--no-sync"][..],
            "--no-sync of a served array is not built",
        ),
    ] {
        let out = raidlab(dir)
            .arg("grow")
            .args(args)
            .args(m)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(why),
            "{args:?}: {err}"
        );
        let v = detail(dir, &m);
        assert_eq!(
            (v["level"].as_str(), v["raid_devices"].as_u64()),
            (Some("raid5"), Some(4)),
            "{v}"
        );
    }
    let mut grow = spawn_grow(
        dir,
        &["--level", "6", "--add", "m4", "--max-rate", "4M"],
        &m,
    );
    let v = wait_running(dir, &m, "rebuild", &mut grow);
    assert_eq!(v["level"], "raid6", "the takeover came first: {v}");
    fio(&srv.export_uri("a"), "16M", "8M", "51", &["--do_verify=1"]);
    wait_running(dir, &m, "reshape", &mut grow);
    fio(&srv.export_uri("a"), "28M", "8M", "52", &["--do_verify=1"]);
    let st = grow.wait().unwrap();
    let text = std::fs::read_to_string(dir.join("grow.log")).unwrap();
    assert!(st.success(), "grow failed: {text}");
    for said in [
        "m4 added as a spare for Q",
        "is now raid6 of 5 members, 512K chunk, left-symmetric-6 (md's takeover: Q on the new member(s), to be rebuilt)",
        "m4 into role 4",
        "reshape done: over the same 5 members; the array is raid6 of 5 members, 512K chunk, left-symmetric,",
    ] {
        assert!(text.contains(said), "{said:?} in:\n{text}");
    }
    let five = ["m0", "m1", "m2", "m3", "m4"];
    let v = detail(dir, &five);
    assert_eq!(v["level"], "raid6", "{v}");
    assert_eq!(v["layout"], "left-symmetric", "{v}");
    assert_eq!(v["array_size_bytes"].as_u64(), Some(size0), "{v}");
    for (off, size, seed) in [("0", "12M", "50"), ("16M", "8M", "51"), ("28M", "8M", "52")] {
        fio(&srv.export_uri("a"), off, size, seed, &["--verify_only"]);
    }

    // And back to RAID 5, fio writing meanwhile.
    std::fs::remove_file(dir.join("grow.log")).unwrap();
    let mut grow = spawn_grow(dir, &["--level", "5", "--max-rate", "4M"], &five);
    wait_running(dir, &five, "reshape", &mut grow);
    fio(&srv.export_uri("a"), "36M", "6M", "53", &["--do_verify=1"]);
    let st = grow.wait().unwrap();
    let text = std::fs::read_to_string(dir.join("grow.log")).unwrap();
    assert!(st.success(), "grow failed: {text}");
    for said in [
        "the array is raid6 of 5 members, 512K chunk, left-symmetric-6,",
        "the array is now raid5 of 4 members, 512K chunk, left-symmetric (md's takeover); the member that held Q is a hot spare",
    ] {
        assert!(text.contains(said), "{said:?} in:\n{text}");
    }
    let v = detail(dir, &five);
    assert_eq!(v["level"], "raid5", "{v}");
    assert_eq!(v["raid_devices"], 4, "{v}");
    for (off, size, seed) in [
        ("0", "12M", "50"),
        ("16M", "8M", "51"),
        ("28M", "8M", "52"),
        ("36M", "6M", "53"),
    ] {
        fio(&srv.export_uri("a"), off, size, seed, &["--verify_only"]);
    }
    srv.stop();
    let check = run(raidlab(dir).arg("check").args(five));
    assert!(check.contains("mismatch_cnt: 0"), "{check}");
}

/// RAID 0 to RAID 5 (parity's device added, the takeover to parity-last,
/// the live rebuild of parity, the restripe to left-symmetric), RAID 0 to
/// RAID 10 (two mirrors added and rebuilt one after the other) and RAID 1
/// of two to RAID 5 of three (the takeover, the device added, the restripe
/// onto it) on served arrays: what fio wrote before reads back through NBD
/// after, and parity or mirrors check.
#[test]
fn served_raid0_and_raid1_become_raid5_or_raid10_with_what_they_held() {
    if !have("fio") {
        raidlab_core::skip::skip_or_fail(
            "served grow: fio not installed (scripts/test.sh installs it)",
        );
        return;
    }
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let before = ["m0", "m1"];
    for (name, level, args, after, now) in [
        (
            "raid0-5",
            "0",
            &["--level", "5", "--add", "m2"][..],
            &["m0", "m1", "m2"][..],
            ("raid5", "left-symmetric"),
        ),
        (
            "raid0-10",
            "0",
            &["--level", "10", "--add", "m2", "--add", "m3"][..],
            &["m0", "m1", "m2", "m3"][..],
            ("raid10", "near=2"),
        ),
        (
            "raid1-5",
            "1",
            &["--level", "5", "--raid-devices", "3", "--add", "m2"][..],
            &["m0", "m1", "m2"][..],
            ("raid5", "left-symmetric"),
        ),
    ] {
        let dir = &tmp.path().join(name);
        std::fs::create_dir(dir).unwrap();
        run(raidlab(dir)
            .args(["create", "-l", level, "--member-size", "16M"])
            .args(before));
        for new in &after[2..] {
            std::fs::File::create(dir.join(new))
                .unwrap()
                .set_len(16 << 20)
                .unwrap();
        }
        let srv = serve(dir, &before);
        fio(&srv.export_uri("a"), "0", "12M", "54", &["--do_verify=1"]);
        let out = run(raidlab(dir).arg("grow").args(args).args(before));
        assert!(out.contains("m2 added as a spare for"), "{name}: {out}");
        assert!(out.contains(&format!("is now {}", now.0)), "{name}: {out}");
        let v = detail(dir, after);
        assert_eq!(v["level"], now.0, "{name}: {v}");
        assert_eq!(v["raid_devices"], after.len(), "{name}: {v}");
        assert_eq!(v["layout"], now.1, "{name}: {v}");
        // Done when grow returned (a RAID 1's takeover rebuilds nothing).
        assert_ne!(v["served"]["rebuild"]["running"], true, "{name}: {v}");
        assert!(!v.to_string().contains("rebuilding"), "{name}: {v}");
        fio(&srv.export_uri("a"), "0", "12M", "54", &["--verify_only"]);
        srv.stop();
        let check = run(raidlab(dir).arg("check").args(after));
        assert!(check.contains("mismatch_cnt: 0"), "{name}: {check}");
    }
}

/// A server stopped (SIGTERM) in the middle of a served RAID 5 to 6 leaves
/// the array as md would: the takeover recorded, Q's rebuild at its saved
/// position; served again, the rebuild resumes in the background, and the
/// restripe that was left is asked for by hand, as the failed grow said.
/// What fio wrote before reads back, and parity checks.
#[test]
fn a_served_raid5_to_raid6_stopped_mid_rebuild_resumes_when_served_again() {
    if !have("fio") {
        raidlab_core::skip::skip_or_fail(
            "served grow: fio not installed (scripts/test.sh installs it)",
        );
        return;
    }
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = tmp.path();
    let m = ["m0", "m1", "m2"];
    run(raidlab(dir)
        .args(["create", "-l", "5", "--member-size", "16M"])
        .args(m));
    run(raidlab(dir).arg("resync").args(m));
    std::fs::File::create(dir.join("m3"))
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    let srv = serve(dir, &m);
    fio(&srv.export_uri("a"), "0", "20M", "55", &["--do_verify=1"]);
    let mut grow = spawn_grow(
        dir,
        &["--level", "6", "--add", "m3", "--max-rate", "2M"],
        &m,
    );
    let t = Instant::now();
    loop {
        let v = detail(dir, &m);
        let r = &v["served"]["rebuild"];
        if r["running"] == true && r["done"].as_u64().unwrap() >= 2 << 20 {
            break;
        }
        assert!(grow.try_wait().unwrap().is_none(), "grow ended: {v}");
        assert!(t.elapsed() < Duration::from_secs(60), "no rebuild: {v}");
        std::thread::sleep(Duration::from_millis(50));
    }
    srv.stop();
    let st = grow.wait().unwrap();
    let text = std::fs::read_to_string(dir.join("grow.log")).unwrap();
    // The server may go before it answers; when it answers, it says what is
    // left.
    assert!(
        !st.success() && (text.contains("left to do") || text.contains("did it stop")),
        "the grow did not finish: {text}"
    );
    let four = ["m0", "m1", "m2", "m3"];
    let offline = detail(dir, &four);
    assert_eq!(offline["level"], "raid6", "{offline}");
    assert_eq!(offline["layout"], "left-symmetric-6", "{offline}");
    let rebuilding = offline.to_string();
    assert!(rebuilding.contains("rebuilding"), "{rebuilding}");
    // Served again: the rebuild goes on from where it stopped.
    let srv = serve(dir, &four);
    let t = Instant::now();
    loop {
        let v = detail(dir, &four);
        if v["served"]["rebuild"]["running"] == false && !v.to_string().contains("rebuilding") {
            assert!(v["served"]["rebuild"]["error"].is_null(), "{v}");
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "no rebuild: {v}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = run(raidlab(dir)
        .args(["grow", "--layout", "left-symmetric"])
        .args(four));
    assert!(out.contains("reshape done"), "{out}");
    fio(&srv.export_uri("a"), "0", "20M", "55", &["--verify_only"]);
    let log = srv.stop();
    assert!(
        log.contains("the rebuild continues in the background"),
        "{log}"
    );
    let check = run(raidlab(dir).arg("check").args(four));
    assert!(check.contains("mismatch_cnt: 0"), "{check}");
}
