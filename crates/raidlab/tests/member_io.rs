//! `--member-io`: what `serve` and a served `detail` say about how member I/O
//! is submitted, forced either way, and where the kernel refuses io_uring (a
//! seccomp filter on the server, as a container runtime's default profile
//! sets): auto falls back to threads saying why, and `uring` stops at start.

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_raidlab")
}

fn raidlab(run_dir: &Path) -> Command {
    let mut c = Command::new(bin());
    c.env("RAIDLAB_RUN_DIR", run_dir);
    c
}

fn ok(cmd: &mut Command) -> String {
    let out = cmd.output().expect("raidlab runs");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{cmd:?}: {text}");
    text
}

/// In the child before exec: refuse `io_uring_setup` with ENOSYS.
fn refuse_io_uring() -> std::io::Result<()> {
    let mut filter = [
        libc::sock_filter {
            code: 0x20,
            jt: 0,
            jf: 0,
            k: 0,
        },
        libc::sock_filter {
            code: 0x15,
            jt: 0,
            jf: 1,
            k: libc::SYS_io_uring_setup as u32,
        },
        libc::sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: 0x0005_0000 | libc::ENOSYS as u32,
        },
        libc::sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: 0x7fff_0000,
        },
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_mut_ptr(),
    };
    // SAFETY: prctl reads the program `prog` describes, alive for the call;
    // only async-signal-safe calls are made between fork and exec.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::prctl(
                libc::PR_SET_SECCOMP,
                2,
                &prog as *const _ as libc::c_ulong,
                0,
                0,
            ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// `raidlab serve` on `members` with `flags`, until its NBD and control
/// sockets listen.
fn serve(run_dir: &Path, members: &[String], flags: &[&str], no_uring: bool) -> Child {
    let socket = run_dir.join("s.sock");
    let _ = std::fs::remove_file(&socket);
    let mut c = raidlab(run_dir);
    c.args(flags)
        .arg("serve")
        .arg("--direct")
        .arg("--socket")
        .arg(&socket)
        .args(members);
    c.stdout(Stdio::null()).stderr(Stdio::piped());
    if no_uring {
        // SAFETY: the closure only calls prctl (async-signal-safe).
        unsafe { c.pre_exec(refuse_io_uring) };
    }
    let mut child = c.spawn().expect("serve starts");
    let t = Instant::now();
    // The control socket comes up after the NBD one, and `detail` asks it:
    // wait for both.
    let ctl = run_dir.join(format!("serve-{}.ctl", child.id()));
    while UnixStream::connect(&socket).is_err() || !ctl.exists() {
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            panic!("serve exited at start ({st}): {err}");
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "serve did not listen"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// SIGTERM, wait; its stderr.
fn stop(mut c: Child) -> String {
    // SAFETY: the pid is our unreaped child.
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    let mut err = String::new();
    let _ = c.stderr.take().unwrap().read_to_string(&mut err);
    assert!(c.wait().unwrap().success(), "{err}");
    err
}

fn detail_row(run_dir: &Path, members: &[String]) -> String {
    let text = ok(raidlab(run_dir).arg("detail").args(members));
    text.lines()
        .find(|l| l.trim_start().starts_with("Member I/O :"))
        .unwrap_or_else(|| panic!("no Member I/O row: {text}"))
        .split_once(" : ")
        .unwrap()
        .1
        .to_string()
}

#[test]
fn serve_and_detail_say_how_member_io_is_submitted_forced_or_refused() {
    // /var/tmp: a disk's file system, which takes O_DIRECT (tmpfs may not).
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let d = dir.path();
    let members: Vec<String> = (0..2)
        .map(|i| {
            let p = d.join(format!("m{i}"));
            std::fs::File::create(&p)
                .unwrap()
                .set_len(32 << 20)
                .unwrap();
            p.display().to_string()
        })
        .collect();
    ok(raidlab(d)
        .args(["create", "-l", "1", "--direct"])
        .args(&members));

    // Default (auto) where io_uring works.
    let srv = serve(d, &members, &[], false);
    let row = detail_row(d, &members);
    assert_eq!(
        row,
        "io_uring (direct; writes to regular-file members on threads)"
    );
    let json = ok(raidlab(d).args(["detail", "--json"]).args(&members));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["member_io_submission"], row.as_str(), "{v}");
    let log = stop(srv);
    assert!(log.contains(&format!("member I/O: {row}")), "{log}");

    // Forced to threads.
    let srv = serve(d, &members, &["--member-io", "threads"], false);
    let row = detail_row(d, &members);
    assert_eq!(row, "threads (asked for with --member-io threads) (direct)");
    stop(srv);

    // Refused by the kernel (seccomp): auto falls back and says why...
    let srv = serve(d, &members, &[], true);
    let log = stop(srv);
    assert!(
        log.contains("member I/O: threads (io_uring unavailable: io_uring_setup failed:"),
        "{log}"
    );
    // ...and io_uring asked for outright stops at start, naming the way out.
    let mut c = raidlab(d);
    c.args(["--member-io", "uring", "detail"]).args(&members);
    // SAFETY: as in `serve`.
    unsafe { c.pre_exec(refuse_io_uring) };
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("--member-io threads"), "{err}");

    // A word that is none of the three.
    let out = raidlab(d)
        .args(["--member-io", "sideways", "detail"])
        .args(&members)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"auto\", \"uring\" or \"threads\""));
}
