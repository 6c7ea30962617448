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
use common::served_grow::{
    assert_exact, grow_done, serve, serve_refused, serve_with, spawn_grow, wait_resumed_end,
    wait_walked, Writer, Writes,
};
use common::verbs::{check_clean, create_imported, detail, examine, export, run, with, MIB};
use std::path::Path;

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
    writes: Writes,
}

fn killed_mid_walk(d: &Path, m: &[&str]) -> Killed {
    let want = create_imported(
        d,
        m,
        "32M",
        &["--level", "5", "--metadata", "0.90", "--chunk", "64K"],
    );
    let srv = serve(d, m);
    let mut grow = spawn_grow(
        d,
        m,
        &["--chunk", "32K", "--backup-file", "bak", "--max-rate", "2M"],
    );
    wait_walked(d, m, 1, &mut grow);
    let writer = Writer::start(srv.export_uri("a"), want.len() as u64);
    wait_walked(d, m, 24 * MIB, &mut grow);
    srv.kill();
    let writes = writer.stop();
    let _ = grow.wait();
    assert!(
        writes.done.len() > 20,
        "the client wrote while the walk ran"
    );
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
    Killed { want, writes }
}

/// The reshape ended: every flushed write exact, the page under way at the
/// kill old or new, parity clean, the new chunk recorded, the file gone.
fn assert_finished_exactly(d: &Path, m: &[&str], k: Killed) {
    assert!(!d.join("bak").exists(), "the backup file is left");
    assert_exact(d, m, k.want, &k.writes);
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
    let srv = serve_with(d, &m, &["--backup-file", "bak"]);
    wait_resumed_end(d, &m);
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
