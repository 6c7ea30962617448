//! `raidlab grow` of an array `raidlab serve` serves: the reshape runs in
//! the server while a real NBD client (fio, crc32c verification of every
//! block) writes and reads the array; a kill -9 of the server in the middle
//! of the walk is resumed at the next start, in the background, while the
//! client reads. Every acknowledged byte reads back; parity checks after.

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
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

struct Serve {
    child: Option<Child>,
    socket: PathBuf,
}

impl Serve {
    fn start(dir: &Path, members: &[&str]) -> Serve {
        let socket = dir.join("nbd.sock");
        let _ = std::fs::remove_file(&socket);
        let mut child = raidlab(dir)
            .args(["serve", "-N", "a", "--socket"])
            .arg(&socket)
            .args(members)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start raidlab serve");
        let ctl = dir.join("run").join(format!("serve-{}.ctl", child.id()));
        let t = Instant::now();
        while UnixStream::connect(&socket).is_err() || !ctl.exists() {
            if let Some(st) = child.try_wait().unwrap() {
                let mut err = String::new();
                let _ = child.stderr.take().unwrap().read_to_string(&mut err);
                panic!("raidlab serve exited at start ({st}): {err}");
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "raidlab serve did not listen within 60 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Serve {
            child: Some(child),
            socket,
        }
    }

    fn uri(&self) -> String {
        format!("nbd+unix:///a?socket={}", self.socket.display())
    }

    /// SIGTERM: the walk checkpoints, the server flushes, marks clean and
    /// exits 0. Returns its stderr.
    fn stop(mut self) -> String {
        let mut c = self.child.take().unwrap();
        // SAFETY: kill has no memory-safety preconditions; the pid is our
        // child, not yet reaped, so it cannot name another process.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let mut err = String::new();
        let _ = c.stderr.take().unwrap().read_to_string(&mut err);
        let st = c.wait().unwrap();
        assert!(st.success(), "raidlab serve exited with {st}:\n{err}");
        err
    }

    /// kill -9: nothing flushed, nothing marked, the walk cut where it is.
    fn kill(mut self) {
        let mut c = self.child.take().unwrap();
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// fio through NBD: random 64K writes over `size` bytes from `offset`, each
/// block verified by crc32c (`extra`: `--do_verify=1` after writing, or
/// `--verify_only`).
fn fio(uri: &str, offset: &str, size: &str, seed: &str, extra: &[&str]) -> String {
    let out = Command::new("fio")
        .args([
            "--name=grow",
            "--ioengine=nbd",
            "--rw=randwrite",
            "--bs=64k",
            "--iodepth=8",
            "--verify=crc32c",
            "--verify_fatal=1",
            "--verify_state_save=0",
        ])
        .arg(format!("--offset={offset}"))
        .arg(format!("--size={size}"))
        .arg(format!("--randseed={seed}"))
        .arg(format!("--uri={uri}"))
        .args(extra)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && text.contains("err= 0"),
        "fio:\n{text}"
    );
    assert!(!text.contains("verify:"), "fio verify error:\n{text}");
    text
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

#[test]
fn a_served_raid5_grows_while_fio_writes_and_verifies_and_a_kill_9_mid_reshape_resumes() {
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
        .args(["create", "-l", "5", "--member-size", "32M"])
        .args(m));
    for extra in ["m4", "m5"] {
        std::fs::File::create(dir.join(extra))
            .unwrap()
            .set_len(32 << 20)
            .unwrap();
    }
    let srv = Serve::start(dir, &m);
    let size0 = detail(dir, &m)["array_size_bytes"].as_u64();
    // The grow, paced so that it outlasts fio's writing and verifying.
    let log = || {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("grow.log"))
            .unwrap()
    };
    let mut grow = raidlab(dir)
        .args([
            "grow",
            "--raid-devices",
            "5",
            "--add",
            "m4",
            "--max-rate",
            "3M",
        ])
        .args(m)
        .stdout(log())
        .stderr(log())
        .spawn()
        .unwrap();
    wait_reshape(dir, &m, 1, false, Some(&mut grow));
    fio(&srv.uri(), "0", "24M", "36", &["--do_verify=1"]);
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
    fio(&srv.uri(), "0", "24M", "36", &["--verify_only"]);

    // A second grow, killed -9 in the middle of its walk.
    let mut grow = raidlab(dir)
        .args([
            "grow",
            "--raid-devices",
            "6",
            "--add",
            "m5",
            "--max-rate",
            "2M",
        ])
        .args(five)
        .stdout(log())
        .stderr(log())
        .spawn()
        .unwrap();
    wait_reshape(dir, &five, 1, false, Some(&mut grow));
    fio(&srv.uri(), "32M", "24M", "37", &["--do_verify=1"]);
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
    let srv = Serve::start(dir, &six);
    fio(&srv.uri(), "0", "24M", "36", &["--verify_only"]);
    fio(&srv.uri(), "32M", "24M", "37", &["--verify_only"]);
    let v = wait_reshape(dir, &six, 0, true, None);
    assert_eq!(v["raid_devices"], 6, "{v}");
    fio(&srv.uri(), "0", "24M", "36", &["--verify_only"]);
    fio(&srv.uri(), "32M", "24M", "37", &["--verify_only"]);
    let log = srv.stop();
    assert!(
        log.contains("the reshape resumes in the background"),
        "{log}"
    );
    // Stopped: no reshape recorded, parity checks everywhere.
    let check = run(raidlab(dir).arg("check").args(six));
    assert!(check.contains("mismatch_cnt: 0"), "{check}");
}

/// The changes that move no data, on a served array: `--bitmap internal`
/// and `none`, and RAID 4 to 5 (md's takeover to parity-last) swap the
/// running array while fio's data stays exact; `--size` is refused with what
/// to do, nothing changed.
#[test]
fn a_served_array_takes_a_bitmap_and_a_takeover_and_refuses_size_with_the_reason() {
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
    let srv = Serve::start(dir, &m);
    fio(&srv.uri(), "0", "16M", "38", &["--do_verify=1"]);
    let out = run(raidlab(dir).args(["grow", "--bitmap", "internal"]).args(m));
    assert!(out.contains("internal bitmap added"), "{out}");
    assert_eq!(detail(dir, &m)["consistency_policy"], "bitmap");
    let out = run(raidlab(dir).args(["grow", "--level", "5"]).args(m));
    assert!(out.contains("is now raid5"), "{out}");
    let v = detail(dir, &m);
    assert_eq!(v["level"], "raid5", "{v}");
    assert_eq!(v["layout"], "parity-last", "{v}");
    fio(&srv.uri(), "0", "16M", "38", &["--verify_only"]);
    let out = run(raidlab(dir).args(["grow", "--bitmap", "none"]).args(m));
    assert!(out.contains("bitmap removed"), "{out}");
    let size = raidlab(dir)
        .args(["grow", "--size", "max"])
        .args(m)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&size.stderr);
    assert!(
        !size.status.success() && err.contains("--size of a served array is not built"),
        "{err}"
    );
    fio(&srv.uri(), "0", "16M", "38", &["--verify_only"]);
    srv.stop();
    let v = detail(dir, &m);
    assert_eq!(v["level"], "raid5", "{v}");
    assert_eq!(v["consistency_policy"], "resync", "{v}");
    let check = run(raidlab(dir).arg("check").args(m));
    assert!(check.contains("mismatch_cnt: 0"), "{check}");
}
