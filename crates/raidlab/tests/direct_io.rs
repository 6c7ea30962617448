//! Members with direct I/O end to end: a member whose device fails its
//! writes (a loop device over a sparse file on a small tmpfs that fills up)
//! is failed at the write that failed, the array's writes complete on the
//! other member under fio's verification, `detail` shows the member failed,
//! its error counted and each member's I/O mode, and after a clean restart
//! every byte fio wrote reads back. The I/O mode is chosen by `--direct`,
//! `--buffered` and the configuration file's `io` key, and a file system
//! that refuses direct I/O stops `serve` with the member named and nothing
//! written.
//!
//! Needs root (mounts and loop devices) and fio; without them a test says
//! `SKIPPED: why`, and under CI (CI=true) that is a failure.

mod common;

use common::{ServeOptions, Served};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_raidlab")
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether root and the tools are there; if not, SKIPPED (or a failure
/// under CI, or as root with a tool missing).
fn ready(test: &str, tools: &[&str]) -> bool {
    if !is_root() {
        raidlab_core::skip::skip_or_fail(&format!("{test}: needs root (mounts and loop devices)"));
        return false;
    }
    let missing: Vec<&str> = tools.iter().copied().filter(|t| !have(t)).collect();
    assert!(
        missing.is_empty(),
        "{test}: {missing:?} not installed; scripts/test.sh installs them (fio, util-linux)"
    );
    true
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

/// A directory on the disk the build uses (it takes O_DIRECT; /tmp may be a
/// tmpfs).
fn disk_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// A file system mounted for one test, unmounted when dropped.
struct Mounted(PathBuf);

impl Mounted {
    fn new(at: &Path, fstype: &str, options: &[&str]) -> Mounted {
        std::fs::create_dir_all(at).unwrap();
        run(Command::new("mount")
            .args(["-t", fstype])
            .args(options)
            .arg(fstype)
            .arg(at));
        Mounted(at.to_path_buf())
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// A loop device over a file, detached when dropped.
struct Loop(String);

impl Loop {
    fn new(backing: &Path) -> Loop {
        let dev = run(Command::new("losetup").args(["-f", "--show"]).arg(backing));
        Loop(dev.trim().to_string())
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.0).status();
    }
}

/// `raidlab serve --socket SOCKET ARGS`, in the test's own directory and
/// the default run directory (the verbs here run without one of their own).
fn serve(socket: &Path, args: &[&str]) -> Served {
    Served::start_with(ServeOptions {
        dir: None,
        socket: socket.to_path_buf(),
        args,
        wait_control: false,
    })
}

/// fio through NBD with crc32c verification of every block it wrote.
fn fio(uri: &str, extra: &[&str]) -> String {
    let out = Command::new("fio")
        .args([
            "--name=direct",
            "--ioengine=nbd",
            "--size=24M",
            "--rw=randwrite",
            "--bs=64k",
            "--iodepth=8",
            "--verify=crc32c",
            "--verify_fatal=1",
            "--verify_state_save=0",
            "--randseed=35",
        ])
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

fn detail_json(members: &[String]) -> serde_json::Value {
    let out = run(Command::new(bin()).args(["detail", "--json"]).args(members));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The member named `path` in `detail --json`.
fn member<'a>(v: &'a serde_json::Value, path: &str) -> &'a serde_json::Value {
    v["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["device"] == path)
        .unwrap_or_else(|| panic!("{path} not among the members: {v}"))
}

/// RAID 1 over a loop device (direct, its default) whose backing file is
/// sparse on a 16 MiB tmpfs, and a file: fio writes 24 MiB, so the loop
/// device's writes start failing (ENOSPC under it, EIO at our pwrite) part
/// way. The member is failed at that write and every write completes on the
/// file: 0 verify errors. `detail` says faulty, counts the error and shows
/// the I/O modes; after a clean stop and a restart fio verifies everything
/// it wrote again.
#[test]
fn a_member_whose_writes_fail_is_failed_at_the_write_and_nothing_acknowledged_is_lost() {
    if !ready("failing direct member", &["fio", "losetup"]) {
        return;
    }
    let dir = disk_dir();
    let d = dir.path();
    let _small = Mounted::new(&d.join("small"), "tmpfs", &["-o", "size=16m"]);
    let backing = d.join("small/lo.img");
    std::fs::File::create(&backing)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let lo = Loop::new(&backing);
    let file = d.join("m1").display().to_string();
    let members = vec![lo.0.clone(), file.clone()];
    run(Command::new(bin())
        .args(["create", "-l", "1", "--member-size", "64M"])
        .args(&members));
    let sock = d.join("s.sock");
    let mut args = vec!["-N", "a"];
    args.extend(members.iter().map(String::as_str));
    let srv = serve(&sock, &args);
    fio(&srv.export_uri("a"), &["--do_verify=1"]);
    let v = detail_json(&members);
    let loop_member = member(&v, &lo.0);
    assert_eq!(loop_member["state"], "faulty", "{v}");
    assert_eq!(loop_member["io"], "direct", "{v}");
    assert_eq!(member(&v, &file)["io"], "buffered", "{v}");
    assert_eq!(member(&v, &file)["state"], "active", "{v}");
    // The error was seen at a write (counted there), not at a later flush.
    let io = v["served"]["member_io"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["device"] == lo.0.as_str())
        .unwrap_or_else(|| panic!("no I/O counters for {}: {v}", lo.0));
    assert!(io["io"]["errors"].as_u64().unwrap() >= 1, "{io}");
    let text = run(Command::new(bin()).arg("detail").args(&members));
    assert!(text.contains("degraded"), "{text}");
    let row = text
        .lines()
        .find(|l| l.ends_with(&lo.0))
        .unwrap_or_else(|| panic!("no row for {}: {text}", lo.0));
    assert!(row.contains("faulty") && row.contains("direct"), "{row}");
    let log = srv.stop();
    assert!(
        log.contains(&format!("member {}: direct I/O", lo.0)),
        "{log}"
    );
    // A clean restart (the loop member stays out: it is recorded faulty)
    // reads back every block fio wrote and acknowledged.
    let srv = serve(&sock, &args);
    fio(&srv.export_uri("a"), &["--verify_only"]);
    let v = detail_json(&members);
    assert_eq!(member(&v, &file)["state"], "active", "{v}");
    srv.stop();
}

/// The I/O mode on the command line and in the configuration file: files
/// default to buffered, `--direct` opens them direct, a config's `io` key
/// wins for its export, a misspelt mode stops `serve` before anything is
/// opened, and direct I/O on a file system that refuses it (ramfs) stops it
/// naming the member and `--buffered`, with nothing written.
#[test]
fn the_io_mode_comes_from_flags_and_the_config_and_a_refusal_says_what_to_do() {
    if !ready("member I/O modes", &[]) {
        return;
    }
    let dir = disk_dir();
    let d = dir.path();
    let members: Vec<String> = ["m0", "m1"]
        .iter()
        .map(|m| d.join(m).display().to_string())
        .collect();
    run(Command::new(bin())
        .args(["create", "-l", "1", "--member-size", "16M"])
        .args(&members));
    let sock = d.join("s.sock");
    let modes = |v: &serde_json::Value| -> Vec<String> {
        v["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["io"].as_str().unwrap_or("none").to_string())
            .collect()
    };
    for (flags, want) in [(&[][..], "buffered"), (&["--direct"][..], "direct")] {
        let mut args = vec!["-N", "a"];
        args.extend(flags);
        args.extend(members.iter().map(String::as_str));
        let srv = serve(&sock, &args);
        assert_eq!(modes(&detail_json(&members)), vec![want; 2], "{flags:?}");
        srv.stop();
    }
    // The config's key wins over the flag for its export.
    let config = d.join("serve.toml");
    let write_config = |io: &str| {
        std::fs::write(
            &config,
            format!(
                "[[export]]\nname = \"a\"\nmembers = [{:?}, {:?}]\nio = \"{io}\"\n",
                members[0], members[1]
            ),
        )
        .unwrap()
    };
    write_config("direct");
    let cfg = config.display().to_string();
    let srv = serve(&sock, &["--buffered", "-C", &cfg]);
    assert_eq!(modes(&detail_json(&members)), vec!["direct"; 2]);
    srv.stop();
    write_config("sideways");
    let out = Command::new(bin())
        .args(["serve", "--socket"])
        .arg(&sock)
        .args(["-C", &cfg])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("\"a\"") && err.contains("sideways"), "{err}");
    // A file system without O_DIRECT: refused, named, nothing written.
    let _ram = Mounted::new(&d.join("ram"), "ramfs", &[]);
    let ram: Vec<String> = ["r0", "r1"]
        .iter()
        .map(|m| d.join("ram").join(m).display().to_string())
        .collect();
    run(Command::new(bin())
        .args(["create", "-l", "1", "--member-size", "16M"])
        .args(&ram));
    let before: Vec<Vec<u8>> = ram.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let out = Command::new(bin())
        .args(["serve", "--direct", "--socket"])
        .arg(&sock)
        .args(&ram)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains(&ram[0]) && err.contains("--buffered"), "{err}");
    let after: Vec<Vec<u8>> = ram.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert!(before == after, "a refused serve changed a member");
    // `create --direct` there is refused too, leaving no member file.
    let new = d.join("ram/n0");
    let out = Command::new(bin())
        .args(["create", "-l", "1", "--direct", "--member-size", "16M"])
        .arg(&new)
        .arg(d.join("ram/n1"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--buffered"), "{err}");
    assert!(!new.exists(), "a refused create left {}", new.display());
}
