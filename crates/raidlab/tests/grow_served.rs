//! `raidlab grow` of an array `raidlab serve` serves: the reshape runs in
//! the server while a real NBD client (fio, crc32c verification of every
//! block) writes and reads the array; a kill -9 of the server in the middle
//! of the walk is resumed at the next start, in the background, while the
//! client reads. Every acknowledged byte reads back; parity checks after.
//! The level changes (md's takeovers with their rebuilds and restripes)
//! are in `grow_served/levels.rs`.

mod common;
#[path = "grow_served/levels.rs"]
mod levels;

use common::fio::{verify as fio, with_fio};
use common::{ServeOptions, Served};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_raidlab")
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A raidlab command with the test's run directory (where the server's
/// control socket is found).
fn raidlab(dir: &Path) -> Command {
    let mut c = Command::new(bin());
    c.current_dir(dir).env("RAIDLAB_RUN_DIR", dir.join("run"));
    c
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("cannot start a command");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{text}",
        out.status
    );
    text
}

/// Serve `members` as export `a`, its control socket up.
fn serve(dir: &Path, members: &[&str]) -> Served {
    let mut args = vec!["-N", "a"];
    args.extend(members);
    Served::start_with(ServeOptions {
        dir: Some(dir),
        socket: dir.join("nbd.sock"),
        args: &args,
        wait_control: true,
    })
}

fn detail(dir: &Path, members: &[&str]) -> serde_json::Value {
    let out = run(raidlab(dir).args(["detail", "--json"]).args(members));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The served reshape's status in `detail --json`, when there is one.
fn reshape_status(v: &serde_json::Value) -> Option<&serde_json::Value> {
    v["served"].get("reshape").filter(|r| !r.is_null())
}

/// Wait until the served reshape has moved at least `bytes` (and still
/// runs), or has finished (`done`); `grow`, the command that asked for it,
/// must not have failed meanwhile.
fn wait_reshape(
    dir: &Path,
    members: &[&str],
    bytes: u64,
    done: bool,
    mut grow: Option<&mut Child>,
) -> serde_json::Value {
    let t = Instant::now();
    loop {
        if let Some(c) = grow.as_deref_mut() {
            if let Some(st) = c.try_wait().unwrap() {
                let log = std::fs::read_to_string(dir.join("grow.log")).unwrap_or_default();
                assert!(st.success(), "grow exited with {st}: {log}");
            }
        }
        let v = detail(dir, members);
        if let Some(r) = reshape_status(&v) {
            assert!(r["error"].is_null(), "the reshape stopped: {v}");
            let running = r["running"].as_bool().unwrap();
            if done && !running || !done && running && r["done"].as_u64().unwrap() >= bytes {
                return v;
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "the reshape did not get there in 120 s: {v}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `raidlab grow ARGS MEMBERS` started in the background, its output
/// appended to `grow.log` (which `wait_reshape` shows if it fails).
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

/// Stop a server that resumed a reshape at its start (its log says so),
/// then check the parity of the stopped array: 0 mismatches.
fn stop_resumed_and_check(srv: Served, dir: &Path, members: &[&str]) {
    let log = srv.stop();
    assert!(
        log.contains("the reshape resumes in the background"),
        "{log}"
    );
    let check = run(raidlab(dir).arg("check").args(members));
    assert!(check.contains("mismatch_cnt: 0"), "{check}");
}

#[test]
fn a_served_raid5_grows_while_fio_writes_and_verifies_and_a_kill_9_mid_reshape_resumes() {
    let Some(tmp) = with_fio("served grow") else {
        return;
    };
    let dir = tmp.path();
    let m = ["m0", "m1", "m2", "m3"];
    run(raidlab(dir)
        .args(["create", "-l", "5", "--member-size", "32M"])
        .args(m));
    for extra in ["m4", "m5"] {
        std::fs::File::create(dir.join(extra))
            .unwrap()
            .set_len(32 << 20)
            .unwrap();
    }
    let srv = serve(dir, &m);
    let size0 = detail(dir, &m)["array_size_bytes"].as_u64();
    // The grow, paced so that it outlasts fio's writing and verifying.
    let mut grow = spawn_grow(
        dir,
        &["--raid-devices", "5", "--add", "m4", "--max-rate", "3M"],
        &m,
    );
    wait_reshape(dir, &m, 1, false, Some(&mut grow));
    fio(&srv.export_uri("a"), "0", "24M", "36", &["--do_verify=1"]);
    let v = detail(dir, &m);
    assert!(
        reshape_status(&v).is_some_and(|r| r["running"] == true),
        "fio wrote and verified while the reshape ran: {v}"
    );
    let st = grow.wait().unwrap();
    let text = std::fs::read_to_string(dir.join("grow.log")).unwrap();
    assert!(st.success(), "grow failed: {text}");
    assert!(text.contains("reshape done: raid devices 4 -> 5"), "{text}");
    let five = ["m0", "m1", "m2", "m3", "m4"];
    let v = detail(dir, &five);
    assert_eq!(v["raid_devices"], 5, "{v}");
    assert!(
        v["array_size_bytes"].as_u64() > size0,
        "the array grew: {v}"
    );
    // Read back in the new geometry.
    fio(&srv.export_uri("a"), "0", "24M", "36", &["--verify_only"]);

    // A second grow, killed -9 in the middle of its walk.
    let mut grow = spawn_grow(
        dir,
        &["--raid-devices", "6", "--add", "m5", "--max-rate", "2M"],
        &five,
    );
    wait_reshape(dir, &five, 1, false, Some(&mut grow));
    fio(&srv.export_uri("a"), "32M", "24M", "37", &["--do_verify=1"]);
    let v = wait_reshape(dir, &five, 8 << 20, false, Some(&mut grow));
    srv.kill();
    let _ = grow.wait();
    let six = ["m0", "m1", "m2", "m3", "m4", "m5"];
    // Offline, the superblocks say where it stopped.
    let offline = run(raidlab(dir).arg("detail").args(six));
    assert!(
        offline.contains("eshape"),
        "mid-reshape after the kill: {offline}\n(before: {v})"
    );
    // Served again: the walk resumes in the background while fio reads.
    let srv = serve(dir, &six);
    fio(&srv.export_uri("a"), "0", "24M", "36", &["--verify_only"]);
    fio(&srv.export_uri("a"), "32M", "24M", "37", &["--verify_only"]);
    let v = wait_reshape(dir, &six, 0, true, None);
    assert_eq!(v["raid_devices"], 6, "{v}");
    fio(&srv.export_uri("a"), "0", "24M", "36", &["--verify_only"]);
    fio(&srv.export_uri("a"), "32M", "24M", "37", &["--verify_only"]);
    // Stopped: no reshape recorded, parity checks everywhere.
    stop_resumed_and_check(srv, dir, &six);
}

/// The changes that move no data, on a served array: `--bitmap internal`
/// and `none`, and RAID 4 to 5 (md's takeover to parity-last) swap the
/// running array while fio's data stays exact; `--consistency-policy` is
/// checked as offline (md's reasons for a PPL without room, a journal, the
/// policy it has), and a smaller `--size` is refused with the reason,
/// nothing changed.
#[test]
fn a_served_array_takes_a_bitmap_and_a_takeover_and_refuses_a_journal_and_a_shrink() {
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
        .args(["create", "-l", "4", "--member-size", "24M"])
        .args(m));
    let srv = serve(dir, &m);
    fio(&srv.export_uri("a"), "0", "16M", "38", &["--do_verify=1"]);
    let out = run(raidlab(dir).args(["grow", "--bitmap", "internal"]).args(m));
    assert!(out.contains("internal bitmap added"), "{out}");
    assert_eq!(detail(dir, &m)["consistency_policy"], "bitmap");
    let out = run(raidlab(dir).args(["grow", "--level", "5"]).args(m));
    assert!(out.contains("is now raid5"), "{out}");
    let v = detail(dir, &m);
    assert_eq!(v["level"], "raid5", "{v}");
    assert_eq!(v["layout"], "parity-last", "{v}");
    fio(&srv.export_uri("a"), "0", "16M", "38", &["--verify_only"]);
    let out = run(raidlab(dir).args(["grow", "--bitmap", "none"]).args(m));
    assert!(out.contains("bitmap removed"), "{out}");
    // RAID 5's partial parity log: md's refusal where the member has no
    // room for it (as here: 4 KiB before the bad block log), and a journal
    // is not something grow adds; nothing changed either time.
    let ppl = raidlab(dir)
        .args(["grow", "--consistency-policy", "ppl"])
        .args(m)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&ppl.stderr);
    assert!(
        !ppl.status.success() && err.contains("Not enough space to add ppl"),
        "{err}"
    );
    assert_eq!(detail(dir, &m)["consistency_policy"], "resync");
    let journal = raidlab(dir)
        .args(["grow", "--consistency-policy", "journal"])
        .args(m)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&journal.stderr);
    assert!(
        !journal.status.success()
            && err.contains("Operation not supported for consistency policy journal"),
        "{err}"
    );
    let out = raidlab(dir)
        .args(["grow", "--consistency-policy", "resync"])
        .args(m)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("Consistency policy is already resync"),
        "{err}"
    );
    // A smaller size would cut what the clients address (no --array-size
    // cut it first): refused with mdadm's words, nothing changed.
    let size = raidlab(dir)
        .args(["grow", "--size", "8M"])
        .args(m)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&size.stderr);
    assert!(
        !size.status.success()
            && err.contains("use --grow --array-size first")
            && err.contains("nothing was changed"),
        "{err}"
    );
    fio(&srv.export_uri("a"), "0", "16M", "38", &["--verify_only"]);
    srv.stop();
    let v = detail(dir, &m);
    assert_eq!(v["level"], "raid5", "{v}");
    assert_eq!(v["consistency_policy"], "resync", "{v}");
    let check = run(raidlab(dir).arg("check").args(m));
    assert!(check.contains("mismatch_cnt: 0"), "{check}");
}

/// `--size max` of a served RAID 5 whose members are larger than it uses
/// (grown before the server opened them): the array of the new
/// size serves at once (a new connection writes past the old end) while
/// the new space, full of stale bytes, is resynced in the server; fio
/// writes and verifies across the old end meanwhile, every byte reads back
/// after, and a check finds no mismatch (without the resync, the stale
/// bytes fio did not overwrite leave parity wrong).
#[test]
fn a_served_raid5_uses_its_grown_members_while_fio_writes_across_the_old_end() {
    let Some(tmp) = with_fio("served grow") else {
        return;
    };
    let dir = tmp.path();
    let m = ["m0", "m1", "m2"];
    run(raidlab(dir)
        .args(["create", "-l", "5", "--member-size", "16M"])
        .args(m));
    // The disks were swapped for bigger ones: 16 MiB more of each, holding
    // what an earlier use left (not zeroes, which would agree with any
    // parity).
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for name in m {
        let mut stale = vec![0u8; 16 << 20];
        for b in stale.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b.copy_from_slice(&x.to_le_bytes());
        }
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join(name))
            .unwrap();
        f.write_all(&stale).unwrap();
    }
    let srv = serve(dir, &m);
    let size0 = detail(dir, &m)["array_size_bytes"].as_u64().unwrap();
    fio(&srv.export_uri("a"), "0", "16M", "40", &["--do_verify=1"]);
    let log = || {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("grow.log"))
            .unwrap()
    };
    let mut grow = raidlab(dir)
        .args(["grow", "--size", "max", "--max-rate", "4M"])
        .args(m)
        .stdout(log())
        .stderr(log())
        .spawn()
        .unwrap();
    // The new size serves as soon as the resync runs.
    let t = Instant::now();
    let v = loop {
        let v = detail(dir, &m);
        let scrub = &v["served"]["scrub"];
        if scrub["kind"] == "resync" && scrub["running"] == true {
            break v;
        }
        if let Some(st) = grow.try_wait().unwrap() {
            let text = std::fs::read_to_string(dir.join("grow.log")).unwrap_or_default();
            panic!("grow ended ({st}) before its resync was seen running: {text}\n{v}");
        }
        assert!(t.elapsed() < Duration::from_secs(60), "no resync: {v}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let size1 = v["array_size_bytes"].as_u64().unwrap();
    assert!(size1 >= size0 + (30 << 20), "{size0} -> {size1}: {v}");
    // Across the old end, through a new connection.
    let from = size0 - (8 << 20);
    fio(
        &srv.export_uri("a"),
        &from.to_string(),
        "16M",
        "41",
        &["--do_verify=1"],
    );
    let v = detail(dir, &m);
    assert!(
        v["served"]["scrub"]["running"] == true,
        "fio wrote and verified while the resync ran: {v}"
    );
    let st = grow.wait().unwrap();
    let text = std::fs::read_to_string(dir.join("grow.log")).unwrap();
    assert!(st.success(), "grow failed: {text}");
    assert!(text.contains("the new space is resynced"), "{text}");
    let v = detail(dir, &m);
    assert!(v["served"]["scrub"]["error"].is_null(), "{v}");
    fio(&srv.export_uri("a"), "0", "16M", "40", &["--verify_only"]);
    fio(
        &srv.export_uri("a"),
        &from.to_string(),
        "16M",
        "41",
        &["--verify_only"],
    );
    srv.stop();
    let v = detail(dir, &m);
    assert_eq!(v["array_size_bytes"].as_u64(), Some(size1), "{v}");
    let check = run(raidlab(dir).arg("check").args(m));
    assert!(check.contains("mismatch_cnt: 0"), "{check}");
}

/// A served RAID 10 switched from near to offset copies while fio writes
/// and verifies, the server killed -9 in the middle of the walk, served
/// again: the walk resumes after that unclean stop, its sides reading first
/// copies only (the copies of a write in flight at a kill may differ; the
/// fault simulation lost answered writes before they did), and every
/// acknowledged block reads back; the copies agree after.
#[test]
fn a_served_raid10_changes_layout_while_fio_writes_and_a_kill_9_mid_reshape_resumes() {
    let Some(tmp) = with_fio("served RAID 10 restripe") else {
        return;
    };
    let dir = tmp.path();
    let m = ["m0", "m1", "m2", "m3"];
    run(raidlab(dir)
        .args(["create", "-l", "10", "--layout", "n2", "--chunk", "64K"])
        .args(["--member-size", "32M"])
        .args(m));
    let srv = serve(dir, &m);
    fio(&srv.export_uri("a"), "0", "24M", "41", &["--do_verify=1"]);
    let mut grow = spawn_grow(dir, &["--layout", "o2", "--max-rate", "2M"], &m);
    wait_reshape(dir, &m, 1, false, Some(&mut grow));
    fio(&srv.export_uri("a"), "32M", "24M", "42", &["--do_verify=1"]);
    fio(&srv.export_uri("a"), "0", "24M", "41", &["--verify_only"]);
    let v = wait_reshape(dir, &m, 4 << 20, false, Some(&mut grow));
    srv.kill();
    let _ = grow.wait();
    let offline = run(raidlab(dir).arg("detail").args(m));
    assert!(
        offline.contains("eshape"),
        "mid-reshape after the kill: {offline}\n(before: {v})"
    );
    let srv = serve(dir, &m);
    fio(&srv.export_uri("a"), "0", "24M", "41", &["--verify_only"]);
    fio(&srv.export_uri("a"), "32M", "24M", "42", &["--verify_only"]);
    let v = wait_reshape(dir, &m, 0, true, None);
    assert_eq!(v["layout"], "offset=2", "{v}");
    fio(&srv.export_uri("a"), "0", "24M", "41", &["--verify_only"]);
    fio(&srv.export_uri("a"), "32M", "24M", "42", &["--verify_only"]);
    stop_resumed_and_check(srv, dir, &m);
}

/// A served grow killed -9 between the walk's commit of the array's end as
/// the position and the end's commit (held there by the walk's test-only
/// hook, `RAIDLAB_TEST_HOLD_RESHAPE_END`), fio writing in that window (to
/// the new geometry everywhere: nothing waits for the walk any more). The
/// members then record the reshape at its end; served again, the resume
/// walks nothing and commits the end, and every block fio wrote reads
/// back; parity checks after. Linux md finishes the same state in
/// md_compat (`r5-3to4-served-end-killed`).
#[test]
fn a_served_grow_killed_at_its_end_resumes_with_the_writes_made_there() {
    let Some(tmp) = with_fio("served grow") else {
        return;
    };
    let dir = tmp.path();
    let m = ["m0", "m1", "m2"];
    run(raidlab(dir)
        .args(["create", "-l", "5", "--member-size", "16M"])
        .args(m));
    std::fs::File::create(dir.join("m3"))
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    let mut args = vec!["-N", "a"];
    args.extend(m);
    let srv = Served::start_env(
        ServeOptions {
            dir: Some(dir),
            socket: dir.join("nbd.sock"),
            args: &args,
            wait_control: true,
        },
        &[("RAIDLAB_TEST_HOLD_RESHAPE_END", "120")],
    );
    let mut grow = spawn_grow(dir, &["--raid-devices", "4", "--add", "m3"], &m);
    // Held: every byte moved, the walk still running, and the server's
    // superblocks at the new geometry's end.
    let held = |grow: &mut Child| -> u64 {
        let t = Instant::now();
        loop {
            let v = wait_reshape(dir, &m, 0, false, Some(&mut *grow));
            let r = reshape_status(&v).unwrap();
            let (done, total) = (r["done"].as_u64().unwrap(), r["total"].as_u64().unwrap());
            let text = run(raidlab(dir).arg("detail").args(m));
            if done == total && text.contains(&format!("stopped at byte {total} (")) {
                return total;
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "the walk was not held at its end in 60 s: {v}\n{text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let end = held(&mut grow);
    fio(&srv.export_uri("a"), "0", "8M", "41", &["--do_verify=1"]);
    // Still held: fio's writes came before the end's commit.
    assert_eq!(held(&mut grow), end);
    srv.kill();
    let _ = grow.wait();
    let four = ["m0", "m1", "m2", "m3"];
    let offline = run(raidlab(dir).arg("detail").args(four));
    assert!(
        offline.contains(&format!("stopped at byte {end} (")),
        "the reshape recorded at its end ({end}) after the kill: {offline}"
    );
    let srv = serve(dir, &four);
    let v = wait_reshape(dir, &four, 0, true, None);
    assert_eq!(v["raid_devices"], 4, "{v}");
    assert_eq!(v["array_size_bytes"].as_u64(), Some(end), "{v}");
    fio(&srv.export_uri("a"), "0", "8M", "41", &["--verify_only"]);
    stop_resumed_and_check(srv, dir, &four);
    let offline = run(raidlab(dir).arg("detail").args(four));
    assert!(!offline.contains("eshape"), "no reshape left: {offline}");
}
