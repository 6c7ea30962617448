//! A served array made smaller as md makes a running one smaller:
//! `raidlab grow MEMBERS --array-size SIZE` cuts what the server exposes
//! (nothing written; connected clients get NBD's ENOSPC/EINVAL past the
//! cut, new ones see the cut size at the handshake), then `--size SMALLER`
//! shrinks the component size while a client keeps writing and reading
//! below the new end; or both in one command while fio writes and
//! verifies through NBD. After a stop the superblocks say the new size,
//! `check` finds nothing and every byte below the new end is as written.
//! Every refusal leaves the member files as they were.

mod common;

use common::verbs::{check_clean, create_imported, detail, examine, export, files, run, with, MIB};
use common::Served;
use raidlab_core::Volume;
use raidlab_nbd::client::NbdVolume;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// `raidlab ARGS`, which must fail with `why` in its message and leave
/// every file in `all` as it was.
fn refused(d: &Path, args: &[&str], why: &str, all: &[&str]) {
    let before = files(d, all);
    let o = run(d, args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{args:?} succeeded");
    assert!(err.contains(why), "{args:?}: expected {why:?} in: {err}");
    assert!(
        err.contains("nothing was changed"),
        "{args:?} says what it left: {err}"
    );
    assert!(files(d, all) == before, "{args:?} changed a member file");
}

/// Wait until the server has written what it writes after its start
/// (safe mode's clean mark), so a refusal's "nothing changed" is what the
/// member files show.
fn settled(d: &Path, all: &[&str]) {
    let mut last = files(d, all);
    for _ in 0..40 {
        std::thread::sleep(std::time::Duration::from_millis(250));
        let now = files(d, all);
        if now == last {
            return;
        }
        last = now;
    }
    panic!("the served members kept changing with no client writing");
}

fn ok_text(d: &Path, args: &[&str]) -> String {
    let o = run(d, args);
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{args:?} failed: {text}");
    text
}

/// Every member's superblock says this component size (sectors).
fn sb_sizes(d: &Path, members: &[&str]) -> Vec<u64> {
    members
        .iter()
        .map(|m| examine(d, m)["used_dev_size"].as_u64().unwrap())
        .collect()
}

#[test]
fn a_served_raid5_is_cut_by_array_size_then_shrunk_by_size_while_a_client_works() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let m = ["m0", "m1", "m2"];
    let mut want = create_imported(d, &m, "16M", &["--level", "5"]);
    let size0 = want.len() as u64;
    assert_eq!(size0, 28 * MIB, "two data members of 14 MiB");
    let srv = Served::start(d, &m);
    let early = NbdVolume::connect(&srv.uri()).expect("NBD connect");
    assert_eq!(early.size(), size0);
    settled(d, &m);

    // Nothing cut yet: a smaller size would cut what the clients address.
    refused(
        d,
        &with("grow", &m, &["--size", "8M"]),
        "use --grow --array-size first",
        &m,
    );
    // md's own refusals of an array size: larger than the array holds,
    // not a whole number of KiB.
    refused(
        d,
        &with("grow", &m, &["--array-size", "29M"]),
        "larger than the array holds",
        &m,
    );
    refused(
        d,
        &with("grow", &m, &["--array-size", "1000"]),
        "whole number of KiB",
        &m,
    );
    // With --size in one command: the cut is checked with it, neither
    // made when either is refused.
    refused(
        d,
        &with("grow", &m, &["--array-size", "17M", "--size", "8M"]),
        "use --grow --array-size first",
        &m,
    );
    assert_eq!(NbdVolume::connect(&srv.uri()).unwrap().size(), size0);

    // The cut: nothing written to the members.
    let before = files(d, &m);
    let out = ok_text(d, &with("grow", &m, &["--array-size", "16M"]));
    assert!(out.contains("forgotten when it stops"), "{out}");
    assert!(files(d, &m) == before, "--array-size wrote to a member");
    let cut = 16 * MIB;
    // A client connected before keeps its size but cannot reach past the
    // cut (ENOSPC for a write, EINVAL for a read); below it works.
    let page = vec![0x5au8; 4096];
    let e = early.write_at(&page, cut).unwrap_err();
    eprintln!("a write past the cut: {e}");
    assert!(early.read_at(&mut vec![0u8; 4096], cut + 4096).is_err());
    // Refused before safe mode's gate: not even a dirty mark written.
    assert!(files(d, &m) == before, "a write past the cut wrote");
    early.write_at(&page, cut - 4096).unwrap();
    early.flush().unwrap();
    want[(cut - 4096) as usize..cut as usize].copy_from_slice(&page);
    // A new connection sees the cut at the handshake; detail shows it.
    assert_eq!(NbdVolume::connect(&srv.uri()).unwrap().size(), cut);
    let v = detail(d, &m);
    assert_eq!(
        v["served"]["array_size_cut_bytes"].as_u64(),
        Some(cut),
        "{v}"
    );
    let text = ok_text(d, &with("detail", &m, &[]));
    assert!(text.contains("Exposed Size"), "{text}");

    // The shrink, while a client writes and reads back below the new end.
    let stop = Arc::new(AtomicBool::new(false));
    let uri = srv.uri();
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let nbd = NbdVolume::connect(&uri).expect("NBD connect");
            let mut wrote: Vec<(u64, Vec<u8>)> = Vec::new();
            let mut i = 0u64;
            while !stop.load(Ordering::Acquire) || i < 16 {
                let at = (i * 7919 % 255) * 64 * 1024;
                let data: Vec<u8> = (0..64 * 1024u32)
                    .map(|j| (j * 31 + i as u32 * 17 + j / 4093) as u8)
                    .collect();
                nbd.write_at(&data, at).expect("a write below the new end");
                let mut back = vec![0u8; data.len()];
                nbd.read_at(&mut back, at)
                    .expect("a read below the new end");
                assert!(back == data, "read back at {at} after write {i}");
                wrote.push((at, data));
                i += 1;
            }
            nbd.flush().unwrap();
            wrote
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = ok_text(d, &with("grow", &m, &["--size", "8M"]));
    std::thread::sleep(std::time::Duration::from_millis(300));
    stop.store(true, Ordering::Release);
    for (at, data) in writer.join().expect("the client's writes and reads") {
        want[at as usize..at as usize + data.len()].copy_from_slice(&data);
    }
    let v = detail(d, &m);
    assert_eq!(v["member_data_bytes"].as_u64(), Some(8 * MIB), "{out}\n{v}");
    assert_eq!(v["array_size_bytes"].as_u64(), Some(cut), "{v}");
    let nbd = NbdVolume::connect(&srv.uri()).unwrap();
    assert_eq!(nbd.size(), cut);
    let mut back = vec![0u8; cut as usize];
    nbd.read_at(&mut back, 0).unwrap();
    assert!(
        back[..] == want[..cut as usize],
        "served contents below the new end"
    );
    drop(nbd);
    drop(early);
    srv.stop();

    // Offline: the superblocks say the new size, parity checks, every byte
    // below the new end as written.
    assert_eq!(sb_sizes(d, &m), vec![8 * MIB / 512; 3]);
    assert_eq!(detail(d, &m)["array_size_bytes"].as_u64(), Some(cut));
    check_clean(d, &m);
    let got = export(d, &m);
    assert_eq!(got.len() as u64, cut);
    assert!(
        got[..] == want[..cut as usize],
        "every byte below the new end"
    );

    // Offline an --array-size alone would change nothing (md forgets it
    // at stop): refused.
    refused(
        d,
        &with("grow", &m, &["--array-size", "8M"]),
        "only while the array runs",
        &m,
    );
}

/// `--array-size max` gives the clients back what the array holds, and a
/// cut is forgotten when the server stops.
#[test]
fn array_size_max_gives_the_whole_array_back_and_a_stop_forgets_the_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let m = ["m0", "m1", "m2"];
    let want = create_imported(d, &m, "16M", &["--level", "5"]);
    let size0 = want.len() as u64;
    let srv = Served::start(d, &m);
    ok_text(d, &with("grow", &m, &["--array-size", "12M"]));
    assert_eq!(NbdVolume::connect(&srv.uri()).unwrap().size(), 12 * MIB);
    let out = ok_text(d, &with("grow", &m, &["--array-size", "max"]));
    assert!(out.contains(&format!("-> {size0} bytes")), "{out}");
    let nbd = NbdVolume::connect(&srv.uri()).unwrap();
    assert_eq!(nbd.size(), size0);
    let mut back = vec![0u8; size0 as usize];
    nbd.read_at(&mut back, 0).unwrap();
    assert!(back == want);
    drop(nbd);
    ok_text(d, &with("grow", &m, &["--array-size", "12M"]));
    srv.stop();
    let srv = Served::start(d, &m);
    assert_eq!(
        NbdVolume::connect(&srv.uri()).unwrap().size(),
        size0,
        "the cut is forgotten at stop, as md forgets it"
    );
    srv.stop();
    assert!(export(d, &m) == want);
}

fn have(tool: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// fio through NBD: random 64K writes over `size` bytes from 0, each block
/// verified by crc32c (`extra`: `--do_verify=1` or `--verify_only`), as
/// `grow_served.rs` runs it.
fn fio(uri: &str, size: &str, extra: &[&str]) -> std::process::Child {
    std::process::Command::new("fio")
        .args([
            "--name=shrink",
            "--ioengine=nbd",
            "--rw=randwrite",
            "--bs=64k",
            "--iodepth=8",
            "--verify=crc32c",
            "--verify_fatal=1",
            "--verify_state_save=0",
            "--randseed=63",
            "--loops=4",
        ])
        .arg(format!("--size={size}"))
        .arg(format!("--uri={uri}"))
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

fn fio_ok(child: std::process::Child) {
    let out = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && text.contains("err= 0"),
        "fio:\n{text}"
    );
    assert!(!text.contains("verify:"), "fio verify error:\n{text}");
}

/// `--array-size` and a smaller `--size` in one command on a served RAID 6
/// with an internal bitmap, while fio writes and verifies below the new
/// end through NBD: 0 errors; the bitmap shrinks with the members.
#[test]
fn a_served_raid6_with_a_bitmap_shrinks_in_one_command_while_fio_verifies() {
    if !have("fio") {
        eprintln!("served shrink: fio not installed (scripts/test.sh installs it)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let m = ["m0", "m1", "m2", "m3"];
    let want = create_imported(
        d,
        &m,
        "16M",
        &[
            "--level",
            "6",
            "--consistency-policy",
            "bitmap",
            "--bitmap-chunk",
            "1M",
        ],
    );
    let member0 = detail(d, &m)["member_data_bytes"].as_u64().unwrap();
    let bitmap0 = examine(d, "m0")["bitmap"].clone();
    assert!(bitmap0.is_object(), "an internal bitmap: {bitmap0}");
    let srv = Served::start(d, &m);
    let verify = fio(&srv.uri(), "8M", &["--do_verify=1"]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let out = ok_text(
        d,
        &with("grow", &m, &["--array-size", "12M", "--size", "6M"]),
    );
    assert!(out.contains("forgotten when it stops"), "{out}");
    fio_ok(verify);
    let v = detail(d, &m);
    assert_eq!(v["member_data_bytes"].as_u64(), Some(6 * MIB), "{out}\n{v}");
    assert!(member0 > 6 * MIB);
    assert_eq!(NbdVolume::connect(&srv.uri()).unwrap().size(), 12 * MIB);
    fio_ok(fio(&srv.uri(), "8M", &["--verify_only"]));
    srv.stop();
    assert_eq!(sb_sizes(d, &m), vec![6 * MIB / 512; 4]);
    let bitmap = examine(d, "m0")["bitmap"].clone();
    // md's bitmap counts KiB of each member, one bit per 1 MiB chunk.
    assert!(
        bitmap["Sync Size"].as_str().unwrap().starts_with("6144 (")
            && bitmap["Bitmap"].as_str().unwrap().starts_with("6 bits"),
        "{bitmap}"
    );
    check_clean(d, &m);
    let got = export(d, &m);
    assert_eq!(got.len() as u64, 12 * MIB);
    // fio wrote [0, 8M); the rest below the new end is the imported data.
    assert!(got[8 * MIB as usize..] == want[8 * MIB as usize..12 * MIB as usize]);
}

/// md's order for fewer members of a running array: `--array-size` first,
/// then `--raid-devices` alone, which takes the cut in force as the size it
/// truncates to (md's external size); without the cut it is refused.
#[test]
fn a_served_raid5_cut_first_then_shrinks_by_a_member_without_array_size() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let m = ["m0", "m1", "m2", "m3"];
    common::verbs::ok(
        d,
        &with(
            "create",
            &m,
            &["--member-size", "16M", "--level", "5", "--chunk", "64K"],
        ),
    );
    // Room after each member's data for md's move of the data offset up.
    common::verbs::ok(d, &with("grow", &m, &["--size", "14M"]));
    let bytes = detail(d, &m)["array_size_bytes"].as_u64().unwrap();
    let want = common::verbs::pattern(bytes as usize, 91);
    std::fs::write(d.join("a.bin"), &want).unwrap();
    common::verbs::ok(d, &with("import", &m, &["--input", "a.bin"]));
    let srv = Served::start(d, &m);
    settled(d, &m);
    refused(
        d,
        &with("grow", &m, &["--raid-devices", "3"]),
        "use --grow --array-size first",
        &m,
    );
    ok_text(d, &with("grow", &m, &["--array-size", "28M"]));
    let out = ok_text(d, &with("grow", &m, &["--raid-devices", "3"]));
    assert!(out.contains("reshape done"), "{out}");
    assert_eq!(NbdVolume::connect(&srv.uri()).unwrap().size(), 28 * MIB);
    srv.stop();
    let v = detail(d, &m);
    assert_eq!(v["raid_devices"].as_u64(), Some(3), "{v}");
    assert_eq!(v["array_size_bytes"].as_u64(), Some(28 * MIB), "{v}");
    check_clean(d, &m);
    assert!(export(d, &m)[..] == want[..28 * MIB as usize]);
}
