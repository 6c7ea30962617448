//! A metadata 0.90 RAID 5 grown from 3 to 4 members through mdadm's
//! backup file on an array `raidlab serve` serves (issue 36): the critical
//! section (the first stripes, where the new stripes overlap old ones)
//! saved in the file and put back in the new geometry while the clients'
//! requests wait, then the in-place walk past it with clients working, as
//! mdadm and md run it. fio writes and verifies through NBD during the
//! grow: 0 errors, parity clean after, every other byte as imported and
//! the new space zeros. A kill -9 of the server inside the critical
//! section (its new stripes written, the position not yet past it: held
//! there by the test hook `RAIDLAB_TEST_HOLD_PUT_BACK`) and one mid-walk
//! past it, each while a client writes and flushes, are resumed served
//! again with the file and offline with it, every flushed write exact.

mod common;

use common::fio::{verify as fio, with_fio};
use common::served_grow::{
    assert_exact, grow_done, serve, serve_refused, serve_with, spawn_grow, wait_resumed_end,
    wait_walked, Writer, Writes,
};
use common::verbs::{check_clean, create_imported, detail, examine, export, run, with, MIB};
use common::{ServeOptions, Served};
use std::path::Path;
use std::time::{Duration, Instant};

const OLD: [&str; 3] = ["m0", "m1", "m2"];
const ALL: [&str; 4] = ["m0", "m1", "m2", "m3"];

/// The grow's arguments: to 4 members, adding `m3`, through the backup
/// file `bak` when `file`.
fn grow_args(file: bool) -> Vec<&'static str> {
    let mut a = vec!["--raid-devices", "4", "--add", "m3"];
    if file {
        a.extend(["--backup-file", "bak"]);
    }
    a
}

/// A 3-member 0.90 RAID 5 of 32 MiB members with a pattern imported, and
/// `m3`, the member to add: the pattern.
fn array(d: &Path) -> Vec<u8> {
    let a = create_imported(
        d,
        &OLD,
        "32M",
        &["--level", "5", "--metadata", "0.90", "--chunk", "64K"],
    );
    let size = std::fs::metadata(d.join("m0")).unwrap().len();
    std::fs::File::create(d.join("m3"))
        .unwrap()
        .set_len(size)
        .unwrap();
    a
}

/// The grow's end as every test checks it: 4 members in every superblock,
/// no reshape, the file gone, parity clean.
fn assert_grown(d: &Path) {
    assert!(!d.join("bak").exists(), "the backup file is left");
    for k in ALL {
        let e = examine(d, k);
        assert_eq!(e["raid_devices"].as_u64(), Some(4), "{k}: {e}");
        assert!(e["reshape"].is_null(), "{k}: {e}");
    }
    check_clean(d, &ALL);
}

/// fio through NBD during a served grow (`file`: through the backup
/// file, else its critical section backed up on the new member), past the
/// critical section, which the export after checks whole.
fn grown_while_fio_verifies(file: bool) {
    let Some(tmp) = with_fio("served 0.90 grow to more members") else {
        return;
    };
    let d = tmp.path();
    let a = array(d);
    let srv = serve(d, &OLD);
    let mut args = grow_args(file);
    args.extend(["--max-rate", "2M"]);
    let mut grow = spawn_grow(d, &OLD, &args);
    wait_walked(d, &OLD, 1, &mut grow);
    fio(&srv.export_uri("a"), "8M", "16M", "92", &["--do_verify=1"]);
    let v = detail(d, &OLD);
    assert!(
        v["served"]["reshape"]["running"] == true,
        "fio wrote and verified while the grow ran: {v}"
    );
    grow_done(d, grow, "reshape done");
    assert_eq!(detail(d, &ALL)["raid_devices"], 4);
    fio(&srv.export_uri("a"), "8M", "16M", "92", &["--verify_only"]);
    srv.stop();
    assert_grown(d);
    let got = export(d, &ALL);
    assert_eq!(got.len(), a.len() / 2 * 3);
    assert!(
        got[..8 << 20] == a[..8 << 20] && got[24 << 20..a.len()] == a[24 << 20..],
        "bytes fio did not write changed"
    );
    assert!(
        got[a.len()..].iter().all(|&b| b == 0),
        "the new space does not read zeros"
    );
}

#[test]
fn a_served_090_raid5_grows_to_4_members_through_a_backup_file_while_fio_verifies() {
    grown_while_fio_verifies(true);
}

#[test]
fn a_served_090_raid5_grows_to_4_members_without_a_file_while_fio_verifies() {
    grown_while_fio_verifies(false);
}

/// A served grow killed (kill -9) while a client writes and flushes
/// pages: what the array must hold after any resume.
struct Killed {
    want: Vec<u8>,
    writes: Writes,
}

/// Where the kill comes.
enum Kill {
    /// The critical section's new stripes written and flushed, the
    /// position not yet past them.
    InsideTheCriticalSection,
    /// The walk past it, 8 MiB of the array walked.
    PastIt,
}

/// A served grow (`file`: through the backup file) killed where `at`
/// says, a client writing meanwhile.
fn killed(d: &Path, at: Kill, file: bool) -> Killed {
    let want = array(d);
    let marker = d.join("held");
    let env: Vec<(&str, &str)> = match at {
        Kill::InsideTheCriticalSection => {
            vec![("RAIDLAB_TEST_HOLD_PUT_BACK", marker.to_str().unwrap())]
        }
        Kill::PastIt => Vec::new(),
    };
    let mut args = vec!["-N", "a"];
    args.extend(OLD);
    let srv = Served::start_env(
        ServeOptions {
            dir: Some(d),
            socket: d.join("nbd.sock"),
            args: &args,
            wait_control: true,
        },
        &env,
    );
    let writer = Writer::start(srv.export_uri("a"), want.len() as u64);
    let mut args = grow_args(file);
    args.extend(["--max-rate", "2M"]);
    let mut grow = spawn_grow(d, &OLD, &args);
    match at {
        Kill::InsideTheCriticalSection => {
            let t = Instant::now();
            while !marker.exists() {
                if let Some(st) = grow.try_wait().unwrap() {
                    let log = std::fs::read_to_string(d.join("grow.log")).unwrap_or_default();
                    panic!("grow exited ({st}) before the put-back: {log}");
                }
                assert!(t.elapsed() < Duration::from_secs(60), "no put-back held");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Kill::PastIt => {
            wait_walked(d, &OLD, 8 * MIB, &mut grow);
        }
    }
    srv.kill();
    let writes = writer.stop();
    let _ = grow.wait();
    assert!(writes.done.len() > 5, "the client wrote before the kill");
    let e = examine(d, "m0");
    assert_eq!(e["raid_devices"].as_u64(), Some(4), "{e}");
    assert!(!e["reshape"].is_null(), "mid-reshape after the kill: {e}");
    assert_eq!(d.join("bak").exists(), file, "the backup file stays");
    if let (Kill::InsideTheCriticalSection, true) = (&at, file) {
        // Only the file holds the critical section whole: not read, not
        // served, without it (md's rule), nothing changed.
        let o = run(d, &with("export", &ALL, &[]));
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && e.contains("critical section"), "{e}");
        let e = serve_refused(d, &ALL, &[]);
        assert!(e.contains("--backup-file"), "{e}");
    }
    Killed { want, writes }
}

/// The grow ended: every flushed write exact, the page under way at the
/// kill old or new, the new space zeros, parity clean, the file gone.
fn assert_finished_exactly(d: &Path, k: Killed) {
    assert_grown(d);
    let Killed { mut want, writes } = k;
    want.resize(want.len() / 2 * 3, 0);
    assert_exact(d, &ALL, want, &writes);
}

/// Served again with its file (`mdadm --assemble --backup-file`): the
/// critical section put back if the file holds it, the walk carried on in
/// the server to its end.
fn resumed_served(d: &Path, k: Killed) {
    let srv = serve_with(d, &ALL, &["--backup-file", "bak"]);
    wait_resumed_end(d, &ALL);
    let said = srv.stop();
    assert!(said.contains("was put back"), "{said}");
    assert_finished_exactly(d, k);
}

/// Finished offline with its file.
fn resumed_offline(d: &Path, k: Killed) {
    let o = run(
        d,
        &with("grow", &ALL, &["--continue", "--backup-file", "bak"]),
    );
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && text.contains("reshape done"),
        "{text}"
    );
    assert_finished_exactly(d, k);
}

#[test]
fn a_kill_9_inside_the_critical_section_resumes_served_again_with_the_file_exactly() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let k = killed(tmp.path(), Kill::InsideTheCriticalSection, true);
    resumed_served(tmp.path(), k);
}

#[test]
fn a_kill_9_inside_the_critical_section_is_finished_offline_from_the_file_exactly() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let k = killed(tmp.path(), Kill::InsideTheCriticalSection, true);
    resumed_offline(tmp.path(), k);
}

#[test]
fn a_kill_9_past_the_critical_section_resumes_served_again_with_the_file_exactly() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let k = killed(tmp.path(), Kill::PastIt, true);
    resumed_served(tmp.path(), k);
}

#[test]
fn a_kill_9_past_the_critical_section_is_finished_offline_from_the_file_exactly() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let k = killed(tmp.path(), Kill::PastIt, true);
    resumed_offline(tmp.path(), k);
}

/// Started without a file, the critical section is backed up on the new
/// member: a kill inside it is served again without one, exactly.
#[test]
fn a_kill_9_inside_the_critical_section_without_a_file_resumes_served_again_exactly() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let d = tmp.path();
    let k = killed(d, Kill::InsideTheCriticalSection, false);
    let srv = serve(d, &ALL);
    wait_resumed_end(d, &ALL);
    srv.stop();
    assert_finished_exactly(d, k);
}
