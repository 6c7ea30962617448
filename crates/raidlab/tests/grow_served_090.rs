//! A metadata 0.90 restripe through mdadm's backup file on an array
//! `raidlab serve` serves (issue 36): a new chunk over the same members and
//! a shrink by one member run in the server, each window closed to the
//! clients while it is saved in the file and moved (md's
//! `suspend_lo`/`suspend_hi`), while fio writes and verifies through NBD:
//! 0 errors, parity clean after, every byte outside fio's area as imported.
//! A kill -9 of the server mid-walk, while a client writes and flushes, is
//! refused without the file and finished offline with it, every flushed
//! write exact.

mod common;

use common::fio::{verify as fio, with_fio};
use common::verbs::{check_clean, create_imported, detail, examine, export, run, with, MIB};
use common::{ServeOptions, Served};
use raidlab_core::Volume;
use raidlab_nbd::client::NbdVolume;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// `raidlab grow MEMBERS ARGS` started in the background, its output in
/// `grow.log`.
fn spawn_grow(dir: &Path, members: &[&str], args: &[&str]) -> Child {
    let log = || {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("grow.log"))
            .unwrap()
    };
    Command::new(env!("CARGO_BIN_EXE_raidlab"))
        .current_dir(dir)
        .env("RAIDLAB_RUN_DIR", dir.join("run"))
        .arg("grow")
        .args(members)
        .args(args)
        .stdout(log())
        .stderr(log())
        .spawn()
        .unwrap()
}

/// Wait until the served reshape has walked at least `bytes` and still
/// runs; the grow that asked for it must not have failed meanwhile.
fn wait_walked(dir: &Path, members: &[&str], bytes: u64, grow: &mut Child) -> serde_json::Value {
    let t = Instant::now();
    loop {
        if let Some(st) = grow.try_wait().unwrap() {
            let log = std::fs::read_to_string(dir.join("grow.log")).unwrap_or_default();
            panic!("grow exited ({st}) before the walk got to {bytes}: {log}");
        }
        let v = detail(dir, members);
        if let Some(r) = v["served"].get("reshape").filter(|r| !r.is_null()) {
            assert!(r["error"].is_null(), "the reshape stopped: {v}");
            if r["running"] == true && r["done"].as_u64().unwrap() >= bytes {
                return v;
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "the reshape did not get to {bytes} in 120 s: {v}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The grow's end: it succeeded and said `want`.
fn grow_done(dir: &Path, mut grow: Child, want: &str) {
    let st = grow.wait().unwrap();
    let log = std::fs::read_to_string(dir.join("grow.log")).unwrap();
    assert!(st.success(), "grow failed: {log}");
    assert!(log.contains(want), "{log}");
}

#[test]
fn a_served_090_raid5_changes_its_chunk_through_a_backup_file_while_fio_verifies() {
    let Some(tmp) = with_fio("served 0.90 restripe") else {
        return;
    };
    let d = tmp.path();
    let m = ["m0", "m1", "m2", "m3"];
    let a = create_imported(
        d,
        &m,
        "32M",
        &["--level", "5", "--metadata", "0.90", "--chunk", "64K"],
    );
    let srv = serve(d, &m);
    // Without the file: md's refusal, as offline.
    let o = run(d, &with("grow", &m, &["--chunk", "32K"]));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("backup"), "{e}");
    // The file on a member: refused, nothing made.
    let o = run(
        d,
        &with("grow", &m, &["--chunk", "32K", "--backup-file", "m2"]),
    );
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && e.contains("must NOT be on the array"),
        "{e}"
    );
    assert!(detail(d, &m)["served"]["reshape"].is_null());

    let mut grow = spawn_grow(
        d,
        &m,
        &["--chunk", "32K", "--backup-file", "bak", "--max-rate", "3M"],
    );
    wait_walked(d, &m, 1, &mut grow);
    assert!(d.join("bak").exists(), "the server made the backup file");
    fio(&srv.export_uri("a"), "0", "24M", "90", &["--do_verify=1"]);
    let v = detail(d, &m);
    assert!(
        v["served"]["reshape"]["running"] == true,
        "fio wrote and verified while the restripe ran: {v}"
    );
    grow_done(d, grow, "reshape done: over the same 4 members");
    assert!(!d.join("bak").exists(), "the backup file is left");
    assert_eq!(detail(d, &m)["chunk_bytes"], 32 << 10);
    fio(&srv.export_uri("a"), "0", "24M", "90", &["--verify_only"]);
    srv.stop();
    check_clean(d, &m);
    assert!(examine(d, "m0")["reshape"].is_null());
    let got = export(d, &m);
    assert_eq!(got.len(), a.len());
    assert!(
        got[24 << 20..] == a[24 << 20..],
        "bytes fio did not write changed"
    );
}

#[test]
fn a_served_090_raid5_sheds_a_member_through_a_backup_file_while_fio_verifies() {
    let Some(tmp) = with_fio("served 0.90 shrink") else {
        return;
    };
    let d = tmp.path();
    let m = ["m0", "m1", "m2", "m3", "m4"];
    let a = create_imported(
        d,
        &m,
        "32M",
        &["--level", "5", "--metadata", "0.90", "--chunk", "64K"],
    );
    let member = detail(d, &m)["member_data_bytes"].as_u64().unwrap() as usize;
    let holds = 3 * member;
    let srv = serve(d, &m);
    // md's order: the array size first (what 4 members hold), then the
    // shrink with its file.
    let size = format!("{}K", holds / 1024);
    let o = run(d, &with("grow", &m, &["--array-size", &size]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut grow = spawn_grow(
        d,
        &m,
        &[
            "--raid-devices",
            "4",
            "--backup-file",
            "bak",
            "--max-rate",
            "3M",
        ],
    );
    wait_walked(d, &m, 1, &mut grow);
    fio(&srv.export_uri("a"), "0", "24M", "91", &["--do_verify=1"]);
    grow_done(d, grow, "spare(s) now");
    assert!(!d.join("bak").exists(), "the backup file is left");
    fio(&srv.export_uri("a"), "0", "24M", "91", &["--verify_only"]);
    srv.stop();
    let four = &m[..4];
    check_clean(d, four);
    let got = export(d, four);
    assert_eq!(got.len(), holds);
    assert!(
        got[24 << 20..] == a[24 << 20..holds],
        "bytes fio did not write changed"
    );
    for k in four {
        let e = examine(d, k);
        assert_eq!(e["raid_devices"].as_u64(), Some(4), "{e}");
        assert!(e["reshape"].is_null(), "{k}: {e}");
    }
}

/// A served 0.90 chunk change killed (kill -9) mid-walk while a client
/// writes and flushes pages: what the array must hold after any resume.
struct Killed {
    want: Vec<u8>,
    /// Every write whose flush was answered, in order.
    done: Vec<(u64, Vec<u8>)>,
    /// The write under way at the kill, which may read either way.
    uncertain: Option<(u64, Vec<u8>)>,
}

fn killed_mid_walk(d: &Path, m: &[&str]) -> Killed {
    let want = create_imported(
        d,
        m,
        "32M",
        &["--level", "5", "--metadata", "0.90", "--chunk", "64K"],
    );
    let size = want.len() as u64;
    let srv = serve(d, m);
    let mut grow = spawn_grow(
        d,
        m,
        &["--chunk", "32K", "--backup-file", "bak", "--max-rate", "2M"],
    );
    wait_walked(d, m, 1, &mut grow);
    let stop = Arc::new(AtomicBool::new(false));
    let uri = srv.export_uri("a");
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let nbd = NbdVolume::connect(&uri).expect("NBD connect");
            let mut done: Vec<(u64, Vec<u8>)> = Vec::new();
            let mut i = 0u64;
            while !stop.load(Ordering::Acquire) {
                let at = (i * 7919 % (size / 4096)) * 4096;
                let page = vec![(i % 251) as u8 + 1; 4096];
                let ok = nbd.write_at(&page, at).and_then(|()| nbd.flush());
                if ok.is_err() {
                    return (done, Some((at, page)));
                }
                done.push((at, page));
                i += 1;
            }
            (done, None)
        })
    };
    wait_walked(d, m, 24 * MIB, &mut grow);
    srv.kill();
    stop.store(true, Ordering::Release);
    let (done, uncertain) = writer.join().unwrap();
    let _ = grow.wait();
    assert!(done.len() > 20, "the client wrote while the walk ran");
    assert!(
        !examine(d, m[0])["reshape"].is_null(),
        "mid-reshape after the kill"
    );
    assert!(d.join("bak").exists(), "the backup file stays");
    // Not read without the file (md's rule), nothing changed.
    let o = run(d, &with("export", m, &[]));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && e.contains("--backup-file FILE"),
        "{e}"
    );
    Killed {
        want,
        done,
        uncertain,
    }
}

/// The reshape ended: every flushed write exact, the page under way at the
/// kill old or new, parity clean, the new chunk recorded, the file gone.
fn assert_finished_exactly(d: &Path, m: &[&str], k: Killed) {
    let Killed {
        mut want,
        done,
        uncertain,
    } = k;
    assert!(!d.join("bak").exists(), "the backup file is left");
    for (at, page) in &done {
        want[*at as usize..*at as usize + 4096].copy_from_slice(page);
    }
    let got = export(d, m);
    assert_eq!(got.len(), want.len());
    if let Some((at, page)) = &uncertain {
        let r = *at as usize..*at as usize + 4096;
        assert!(
            got[r.clone()] == want[r.clone()] || got[r.clone()] == page[..],
            "the page written at the kill is neither old nor new"
        );
        want[r.clone()].copy_from_slice(&got[r]);
    }
    let first_bad =
        (0..want.len() / 4096).find(|&p| got[p * 4096..][..4096] != want[p * 4096..][..4096]);
    assert!(
        first_bad.is_none(),
        "page {first_bad:?} differs after the resume ({} flushed writes)",
        done.len()
    );
    check_clean(d, m);
    assert_eq!(detail(d, m)["chunk_bytes"], 32 << 10);
}

#[test]
fn a_kill_9_mid_served_090_restripe_is_finished_offline_from_the_file_exactly() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (d, m) = (tmp.path(), ["m0", "m1", "m2", "m3"]);
    let k = killed_mid_walk(d, &m);
    let o = run(
        d,
        &with("grow", &m, &["--continue", "--backup-file", "bak"]),
    );
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && text.contains("reshape done"),
        "{text}"
    );
    assert_finished_exactly(d, &m, k);
}

/// As `mdadm --assemble --backup-file`: served again with its file, the
/// window is put back and the walk carries on in the server to its end;
/// served without it, refused with nothing written.
#[test]
fn a_kill_9_mid_served_090_restripe_resumes_when_served_again_with_its_file() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (d, m) = (tmp.path(), ["m0", "m1", "m2", "m3"]);
    let k = killed_mid_walk(d, &m);
    let e = serve_refused(d, &m, &[]);
    assert!(e.contains("--backup-file"), "{e}");
    // Served with it: put back, walked to the end in the server.
    let mut args = vec!["-N", "a", "--backup-file", "bak"];
    args.extend(m);
    let srv = Served::start_with(ServeOptions {
        dir: Some(d),
        socket: d.join("nbd.sock"),
        args: &args,
        wait_control: true,
    });
    let t = Instant::now();
    loop {
        let v = detail(d, &m);
        let r = &v["served"]["reshape"];
        assert!(
            r.is_null() || r["error"].is_null(),
            "the resumed walk failed: {v}"
        );
        if r.is_null() || r["running"] == false {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "the resumed walk did not end in 120 s: {v}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let said = srv.stop();
    assert!(
        examine(d, "m0")["reshape"].is_null(),
        "still mid-reshape after the walk: {said}"
    );
    assert!(said.contains("was put back"), "{said}");
    assert_finished_exactly(d, &m, k);
    // Once it ended, the file is needed no more: given, it is refused.
    let e = serve_refused(d, &m, &["--backup-file", "bak"]);
    assert!(e.contains("nothing to put back"), "{e}");
}

/// `raidlab serve` of `m` with `extra`, which must exit with an error
/// within 60 s and change no member: its stderr.
fn serve_refused(d: &Path, m: &[&str], extra: &[&str]) -> String {
    let before = common::verbs::files(d, m);
    let mut child = Command::new(env!("CARGO_BIN_EXE_raidlab"))
        .current_dir(d)
        .env("RAIDLAB_RUN_DIR", d.join("run"))
        .args(["serve", "-N", "a", "--socket", "refused.sock"])
        .args(extra)
        .args(m)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let st = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("serve {extra:?} did not refuse within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut e = String::new();
    use std::io::Read;
    child.stderr.take().unwrap().read_to_string(&mut e).unwrap();
    assert!(!st.success(), "serve {extra:?} was not refused: {e}");
    assert!(
        common::verbs::files(d, m) == before,
        "a refused serve {extra:?} changed a member"
    );
    e
}
