//! Running `raidlab` verbs on member files in a test's directory, and the
//! data pattern the verb tests write: what the grow, reshape and re-add tests
//! share. Each run sets `RAIDLAB_RUN_DIR` inside the directory, so a server
//! one test starts is seen by that test alone.

use assert_cmd::Command;
use std::path::Path;

pub const MIB: u64 = 1 << 20;

/// `raidlab ARGS` in `dir`, as it exited.
pub fn run(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::cargo_bin("raidlab")
        .unwrap()
        .current_dir(dir)
        .env("RAIDLAB_RUN_DIR", dir.join("run"))
        .args(args)
        .output()
        .unwrap()
}

/// Create an array of `members` (`size` each, with `extra`), import a
/// pattern over all of it, and return the pattern.
pub fn create_imported(d: &Path, members: &[&str], size: &str, extra: &[&str]) -> Vec<u8> {
    let mut args = vec!["--member-size", size];
    args.extend_from_slice(extra);
    ok(d, &with("create", members, &args));
    let bytes = detail(d, members)["array_size_bytes"].as_u64().unwrap();
    let a = pattern(bytes as usize, members.len() as u8 * 31 + 7);
    std::fs::write(d.join("a.bin"), &a).unwrap();
    ok(d, &with("import", members, &["--input", "a.bin"]));
    a
}

/// `raidlab ARGS` in `dir`, killed (SIGKILL: a crash) after `delay`,
/// whether it was done by then or not.
pub fn killed_after(dir: &Path, args: &[&str], delay: std::time::Duration) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_raidlab"))
        .current_dir(dir)
        .env("RAIDLAB_RUN_DIR", dir.join("run"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(delay);
    let _ = child.kill();
    let _ = child.wait();
}

/// `raidlab ARGS` in `dir`, which must succeed; its standard output.
pub fn ok(dir: &Path, args: &[&str]) -> String {
    let o = run(dir, args);
    assert!(
        o.status.success(),
        "raidlab {args:?} exited {}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `verb`, the members, then `extra`.
pub fn with<'a>(verb: &'a str, members: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    std::iter::once(verb)
        .chain(members.iter().copied())
        .chain(extra.iter().copied())
        .collect()
}

/// `len` bytes of xorshift from `seed`: no two pages alike, so a page read
/// from the wrong place shows.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
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

pub fn detail(d: &Path, members: &[&str]) -> serde_json::Value {
    serde_json::from_str(&ok(d, &with("detail", members, &["--json"]))).unwrap()
}

pub fn examine(d: &Path, member: &str) -> serde_json::Value {
    let v: serde_json::Value =
        serde_json::from_str(&ok(d, &["examine", member, "--json"])).unwrap();
    v[0].clone()
}

/// The array's contents, read by `raidlab export`.
pub fn export(d: &Path, members: &[&str]) -> Vec<u8> {
    let o = run(d, &with("export", members, &[]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o.stdout
}

/// `raidlab check` must find no mismatch.
pub fn check_clean(d: &Path, members: &[&str]) {
    let out = ok(d, &with("check", members, &[]));
    assert!(out.contains("mismatch_cnt: 0"), "check: {out}");
}

/// Every named file's bytes, to show a refusal changed none.
pub fn files(d: &Path, names: &[&str]) -> Vec<Vec<u8>> {
    names
        .iter()
        .map(|n| std::fs::read(d.join(n)).unwrap())
        .collect()
}
