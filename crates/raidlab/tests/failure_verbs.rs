//! The failure verbs as users meet them: a removed or stale member is reported
//! and taken back only by `add`; on an array that was not stopped cleanly every
//! refusal names a next step that works; refusals read as refusals; exit codes
//! say whether the array ends consistent.

use assert_cmd::Command;
use std::path::Path;

fn raidlab() -> Command {
    Command::cargo_bin("raidlab").unwrap()
}

fn run(dir: &Path, args: &[&str]) -> std::process::Output {
    raidlab().current_dir(dir).args(args).output().unwrap()
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let o = run(dir, args);
    assert!(
        o.status.success(),
        "raidlab {args:?} exited {}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn detail(dir: &Path, members: &[&str]) -> serde_json::Value {
    let mut a = vec!["detail", "--json"];
    a.extend(members);
    serde_json::from_str(&ok(dir, &a)).unwrap()
}

fn state(v: &serde_json::Value, device: &str) -> String {
    v["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["device"] == device)
        .map(|m| m["state"].as_str().unwrap().to_string())
        .unwrap_or_else(|| panic!("{device} not in {v}"))
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    let mut x = seed as u32 | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

const M: [&str; 4] = ["m0", "m1", "m2", "m3"];

fn with(verb: &str, members: &[&str], extra: &[&str]) -> Vec<String> {
    std::iter::once(verb)
        .chain(members.iter().copied())
        .chain(extra.iter().copied())
        .map(str::to_string)
        .collect()
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `raidlab create` of a RAID 5 of 4 MiB files, 64 KiB chunks, with `extra`.
fn create5(d: &Path, members: &[&str], extra: &[&str]) {
    let mut opts = vec!["--level", "5", "--chunk", "64K", "--member-size", "4M"];
    opts.extend(extra);
    ok(d, &args(&with("create", members, &opts)));
}

/// A clean RAID 5 of four 4 MiB files holding `data`.
fn filled(d: &Path) -> Vec<u8> {
    create5(d, &M, &[]);
    let size = detail(d, &M)["array_size_bytes"].as_u64().unwrap() as usize;
    let data = pattern(size, 7);
    std::fs::write(d.join("in.bin"), &data).unwrap();
    ok(d, &args(&with("import", &M, &["--input", "in.bin"])));
    data
}

fn export(d: &Path, members: &[&str]) -> Vec<u8> {
    let o = run(d, &args(&with("export", members, &[])));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o.stdout
}

#[test]
fn a_removed_member_is_reported_left_alone_and_taken_back_by_add() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    filled(d);
    ok(d, &args(&with("fail", &M, &["--member", "m1"])));
    // Failing it again succeeds and changes nothing, as mdadm --fail of a
    // faulty device does.
    let members = || M.map(|m| std::fs::read(d.join(m)).unwrap());
    let was = members();
    let again = ok(d, &args(&with("fail", &M, &["--member", "m1"])));
    assert!(again.contains("already faulty"), "{again}");
    assert!(was == members(), "failing a faulty member changed a member");
    ok(d, &args(&with("remove", &M, &["--member", "m1"])));
    // Written while m1 is out: m1 is now out of date everywhere.
    let size = detail(d, &M)["array_size_bytes"].as_u64().unwrap() as usize;
    let newer = pattern(size, 9);
    std::fs::write(d.join("in.bin"), &newer).unwrap();
    ok(d, &args(&with("import", &M, &["--input", "in.bin"])));
    let before = std::fs::read(d.join("m1")).unwrap();

    let v = detail(d, &M);
    assert_eq!(state(&v, "m1"), "removed");
    assert_eq!(v["removed"], serde_json::json!(["m1"]));
    assert_eq!(v["missing_roles"], serde_json::json!([1]));
    let text = ok(d, &args(&with("detail", &M, &[])));
    assert!(text.contains("Removed members"), "{text}");
    assert!(text.contains("raidlab add"), "{text}");
    assert_eq!(export(d, &M), newer);
    // Removing it again changes nothing and says why.
    let o = run(d, &args(&with("remove", &M, &["--member", "m1"])));
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("already removed"));
    assert_eq!(std::fs::read(d.join("m1")).unwrap(), before);

    // `add` takes it back, listed among the members or not.
    let out = ok(d, &args(&with("add", &M, &["--new", "m1"])));
    assert!(out.contains("added into missing role 1"), "{out}");
    let v = detail(d, &M);
    assert!(
        v["members"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["state"] == "active"),
        "{v}"
    );
    // The rebuilt member holds the newer data: read without m0.
    assert_eq!(export(d, &["missing", "m1", "m2", "m3"]), newer);
}

#[test]
fn an_unclean_degraded_array_names_next_steps_that_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for f in ["u0", "u1", "u2"] {
        std::fs::write(d.join(f), pattern(4 << 20, 5)).unwrap();
    }
    // Members that held data: not in sync, as after an unclean stop.
    let u = ["u0", "u1", "u2"];
    ok(
        d,
        &args(&with("create", &u, &["--level", "5", "--chunk", "64K"])),
    );
    let v = detail(d, &u);
    assert!(v["state"].as_str().unwrap().starts_with("dirty"), "{v}");
    assert_eq!(v["resync_pending"], true);

    // Failing a member of an unsynced array warns and says what follows.
    let o = run(d, &args(&with("fail", &u, &["--member", "u2"])));
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("warning") && err.contains("--force"), "{err}");

    // The start refusal names the member it has as out of date, and --force.
    let o = run(d, &args(&with("export", &u, &[])));
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--force starts it anyway"), "{err}");
    assert!(
        !err.contains("write failed") && !err.contains("read failed"),
        "{err}"
    );

    // add: the member goes in; the rebuild it cannot do is named, with the
    // command that does it.
    let o = run(
        d,
        &args(&with(
            "add",
            &["u0", "u1"],
            &["--new", "n2", "--member-size", "4M"],
        )),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("not rebuilt yet") && out.contains("rebuild --force"),
        "{out}"
    );
    let n = ["u0", "u1", "n2"];
    // rebuild without --force: refused (not "write failed"), naming --force.
    let o = run(d, &args(&with("rebuild", &n, &[])));
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("refus") && err.contains("rebuild --force"),
        "{err}"
    );
    // ... and the step it names works.
    ok(d, &args(&with("rebuild", &n, &["--force"])));
    ok(d, &args(&with("resync", &n, &[])));
    let v = detail(d, &n);
    assert_eq!(v["state"], "clean", "{v}");
    // A clean array needs no resync: exit 0, not a failure.
    let out = ok(d, &args(&with("resync", &n, &[])));
    assert!(out.contains("already in sync"), "{out}");
}

#[test]
fn repair_waits_for_a_resync_after_an_unclean_stop_and_exits_0_when_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for f in ["u0", "u1", "u2", "u3"] {
        std::fs::write(d.join(f), pattern(4 << 20, 3)).unwrap();
    }
    let u = ["u0", "u1", "u2", "u3"];
    ok(
        d,
        &args(&with("create", &u, &["--level", "6", "--chunk", "64K"])),
    );
    let before: Vec<Vec<u8>> = u
        .iter()
        .map(|f| std::fs::read(d.join(f)).unwrap())
        .collect();
    // check reports, and says the mismatches are expected until a resync.
    let o = run(d, &args(&with("check", &u, &[])));
    assert_eq!(o.status.code(), Some(3));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("has not been resynced"), "{out}");
    // repair is refused and writes nothing.
    let o = run(d, &args(&with("repair", &u, &[])));
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("refused") && err.contains("raidlab resync"),
        "{err}"
    );
    let after: Vec<Vec<u8>> = u
        .iter()
        .map(|f| std::fs::read(d.join(f)).unwrap())
        .collect();
    assert!(before == after, "a refused repair wrote");
    ok(d, &args(&with("resync", &u, &[])));
    // Corrupt a data block; repair fixes it and exits 0: the array ends
    // consistent. check then finds nothing.
    let mut b = std::fs::read(d.join("u1")).unwrap();
    let at = (1 << 20) + 4096;
    b[at] ^= 0x5a;
    std::fs::write(d.join("u1"), &b).unwrap();
    assert_eq!(
        run(d, &args(&with("check", &u, &[]))).status.code(),
        Some(3)
    );
    let out = ok(d, &args(&with("repair", &u, &[])));
    assert!(out.contains("all rewritten"), "{out}");
    let out = ok(d, &args(&with("check", &u, &[])));
    assert!(out.contains("mismatch_cnt: 0"), "{out}");
}

/// md runs an array whose write journal is missing only read-only: the verbs
/// that write data (add, replace, rebuild, resync, repair, grow) are refused
/// without the journal, naming it, with nothing written; recording a failure
/// (membership, not data) still works, as `mdadm --fail` does.
#[test]
fn data_writing_verbs_refuse_an_array_whose_journal_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    create5(d, &M, &["--write-journal", "jdev"]);
    let mut with_j = M.to_vec();
    with_j.push("jdev");
    let size = detail(d, &with_j)["array_size_bytes"].as_u64().unwrap() as usize;
    std::fs::write(d.join("in.bin"), pattern(size, 3)).unwrap();
    ok(d, &args(&with("import", &with_j, &["--input", "in.bin"])));
    std::fs::write(d.join("spare"), vec![0u8; 4 << 20]).unwrap();
    let files = ["m0", "m1", "m2", "m3", "jdev", "spare"];
    let bytes = || files.map(|f| std::fs::read(d.join(f)).unwrap());
    let was = bytes();
    for (verb, extra) in [
        ("add", &["--new", "spare"][..]),
        ("replace", &["--old", "m1", "--with", "spare"][..]),
        ("rebuild", &["--force"][..]),
        ("resync", &[][..]),
        ("repair", &[][..]),
        ("grow", &["--raid-devices", "5", "--add", "spare"][..]),
    ] {
        let o = run(d, &args(&with(verb, &M, extra)));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{verb} ran without the journal");
        assert!(err.contains("journal device is missing"), "{verb}: {err}");
        assert!(err.contains("nothing was written"), "{verb}: {err}");
        assert!(was == bytes(), "{verb} without the journal changed a file");
    }
    // Recording a failure is membership, not data: it still works.
    ok(d, &args(&with("fail", &M, &["--member", "m1"])));
    assert_eq!(state(&detail(d, &with_j), "m1"), "faulty");
}

/// A hot spare can be failed, as `mdadm --fail` fails any device: it is
/// recorded faulty and no longer steps in for a member that fails later.
#[test]
fn a_failed_spare_is_recorded_faulty_and_does_not_step_in() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let all = ["m0", "m1", "m2", "m3", "s0"];
    create5(d, &all, &["--spares", "1"]);
    assert_eq!(state(&detail(d, &all), "s0"), "spare");
    let said = ok(d, &args(&with("fail", &all, &["--member", "s0"])));
    assert!(said.contains("s0 marked faulty"), "{said}");
    assert_eq!(state(&detail(d, &all), "s0"), "faulty");
    let said = ok(d, &args(&with("fail", &all, &["--member", "m2"])));
    assert!(
        !said.contains("hot spare"),
        "a faulty spare stepped in: {said}"
    );
    let v = detail(d, &all);
    assert_eq!(v["missing_roles"], serde_json::json!([2]), "{v}");
    assert_eq!(state(&v, "s0"), "faulty");
}
