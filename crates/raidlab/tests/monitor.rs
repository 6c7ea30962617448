//! `raidlab monitor` against a real `raidlab serve` and real programs: a
//! recording `--program` script sees mdadm's events in order when a member of
//! a served RAID 5 fails and its hot spare takes over, and DeviceDisappeared
//! when the server stops; `--test --oneshot` names every array, served or
//! assembled read-only (its members unchanged); mail goes through msmtp to an
//! SMTP server the test runs on 127.0.0.1; syslog datagrams reach a socket
//! standing in for /dev/log; a served cache written far past its dirty
//! target is reported with its device; a served cache whose device (a file
//! on a tmpfs the test fills) starts failing is reported as
//! CacheDeviceFailed, passed by, and shown failed in `cache stats` and the
//! metrics; bad input is refused with nothing changed.
//!
//! Without msmtp (or nbdcopy) the mail (cache) test prints `SKIPPED: <why>`;
//! under CI=true that is a failure (scripts/test.sh installs msmtp, libnbd-bin).
//! The cache failure test needs root to mount its tmpfs; likewise.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixDatagram, UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_raidlab")
}

/// `raidlab` in `dir`, with the run directory (control sockets) of the test.
fn raidlab(dir: &Path) -> Command {
    let mut c = Command::new(bin());
    c.current_dir(dir).env("RAIDLAB_RUN_DIR", dir.join("run"));
    c
}

fn cmd(dir: &Path, args: &[&str]) -> Command {
    let mut c = raidlab(dir);
    c.args(args);
    c
}

fn ok(mut c: Command) -> Output {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{c:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn fails(mut c: Command, says: &str) -> String {
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{c:?} succeeded");
    assert!(err.contains(says), "{c:?}: wanted {says:?} in:\n{err}");
    err
}

/// A RAID 5 of three 4 MiB files and one hot spare, named r5.
fn create_r5(d: &Path) {
    ok(cmd(
        d,
        &[
            "create",
            "m0",
            "m1",
            "m2",
            "m3",
            "--level",
            "5",
            "--spares",
            "1",
            "--chunk",
            "64K",
            "--member-size",
            "4M",
            "--name",
            "r5",
        ],
    ));
}

/// A RAID 1 of two files whose second member is failed (offline): degraded.
fn create_degraded_mirror(d: &Path) {
    ok(cmd(
        d,
        &[
            "create",
            "m4",
            "m5",
            "--level",
            "1",
            "--member-size",
            "4M",
            "--name",
            "mirror",
        ],
    ));
    ok(cmd(d, &["fail", "m4", "m5", "--member", "m5"]));
}

/// A script that appends its arguments, `|`-separated, one call a line.
fn recorder(d: &Path) -> PathBuf {
    let p = d.join("record.sh");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\nprintf '%s|' \"$@\" >> {}\necho >> {}\n",
            d.join("events.log").display(),
            d.join("events.log").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn recorded(d: &Path) -> Vec<String> {
    std::fs::read_to_string(d.join("events.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Wait until the recorder has a line starting with `prefix`.
fn wait_for(d: &Path, prefix: &str, within: Duration) -> Vec<String> {
    let t = Instant::now();
    loop {
        let got = recorded(d);
        if got.iter().any(|l| l.starts_with(prefix)) {
            return got;
        }
        assert!(
            t.elapsed() < within,
            "no {prefix:?} recorded within {within:?}; recorded:\n{}",
            got.join("\n")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct Running(Option<Child>);

impl Running {
    fn pid(&self) -> i32 {
        self.0.as_ref().unwrap().id() as i32
    }

    /// SIGTERM, then its exit status and stderr.
    fn term(mut self) -> (std::process::ExitStatus, String) {
        let mut c = self.0.take().unwrap();
        // SAFETY: kill has no memory-safety preconditions; the pid is our
        // child, not yet reaped.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let mut err = String::new();
        let _ = c.stderr.take().unwrap().read_to_string(&mut err);
        (c.wait().unwrap(), err)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `raidlab serve` of m0..m3 on a socket of the test, listening.
fn serve(d: &Path) -> Running {
    let socket = d.join("nbd.sock");
    let child = raidlab(d)
        .args(["serve", "--socket"])
        .arg(&socket)
        .args(["m0", "m1", "m2", "m3"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut s = Running(Some(child));
    let t = Instant::now();
    // The control socket comes up after the NBD one; wait for both.
    while UnixStream::connect(&socket).is_err()
        || !d
            .join("run")
            .join(format!("serve-{}.ctl", s.pid()))
            .exists()
    {
        if let Some(st) = s.0.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
            let mut err = String::new();
            let _ = s.0.take().unwrap().stderr.unwrap().read_to_string(&mut err);
            panic!("raidlab serve exited at start ({st}): {err}");
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "serve did not listen"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    s
}

fn abs(d: &Path, f: &str) -> String {
    std::fs::canonicalize(d.join(f))
        .unwrap()
        .display()
        .to_string()
}

fn position(lines: &[String], want: &str) -> usize {
    lines
        .iter()
        .position(|l| l == want)
        .unwrap_or_else(|| panic!("{want:?} not recorded; recorded:\n{}", lines.join("\n")))
}

#[test]
fn a_failed_member_and_its_spare_takeover_reach_the_program_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    create_r5(d);
    let server = serve(d);
    let rec = recorder(d);
    let monitor = Running(Some(
        raidlab(d)
            .args(["monitor", "--delay", "0.2", "--program"])
            .arg(&rec)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    // Found by scanning: a NewArray at the first poll, and nothing else yet.
    let first = wait_for(d, "NewArray|r5|", Duration::from_secs(10));
    assert_eq!(
        first,
        ["NewArray|r5|"],
        "an optimal array has nothing else to say"
    );
    // A slow rebuild (1 MiB/s of a 4 MiB member), so polls see it run.
    ok(cmd(
        d,
        &[
            "fail",
            "m0",
            "m1",
            "m2",
            "m3",
            "--member",
            "m0",
            "--max-rate",
            "1M",
        ],
    ));
    let got = wait_for(d, "SpareActive|", Duration::from_secs(15));
    let fail = position(&got, &format!("Fail|r5|{}|", abs(d, "m0")));
    let degraded = position(&got, "DegradedArray|r5|");
    let started = position(&got, "RebuildStarted|r5|");
    let finished = position(&got, "RebuildFinished|r5|");
    let active = position(&got, &format!("SpareActive|r5|{}|", abs(d, "m3")));
    assert!(
        degraded < started && fail < started && started < finished && finished < active,
        "out of order:\n{}",
        got.join("\n")
    );
    let steps: Vec<&String> = got[started..finished]
        .iter()
        .filter(|l| l.starts_with("Rebuild") && l.len() == "RebuildNN|r5|".len())
        .collect();
    assert!(
        !steps.is_empty()
            && steps
                .iter()
                .all(|l| ["Rebuild20|", "Rebuild40|", "Rebuild60|", "Rebuild80|"]
                    .iter()
                    .any(|p| l.starts_with(p))),
        "a 4-second rebuild polled every 0.2 s passes some 20 % steps:\n{}",
        got.join("\n")
    );
    assert!(
        !got.iter()
            .any(|l| l.starts_with("FailSpare") || (l.starts_with("NewArray|r5|") && l != &got[0])),
        "{}",
        got.join("\n")
    );
    // The server goes away: said once.
    let (st, err) = server.term();
    assert!(st.success(), "serve: {err}");
    let got = wait_for(d, "DeviceDisappeared|r5|", Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(600));
    let again = recorded(d);
    assert_eq!(
        again
            .iter()
            .filter(|l| l.starts_with("DeviceDisappeared"))
            .count(),
        1,
        "{}",
        again.join("\n")
    );
    assert_eq!(got.last().unwrap(), "DeviceDisappeared|r5|");
    let (_, err) = monitor.term();
    assert!(!err.contains("panick"), "{err}");
}

#[test]
fn test_oneshot_names_every_array_and_reads_unserved_ones_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    create_r5(d);
    create_degraded_mirror(d);
    let _server = serve(d);
    // A control socket nobody listens on any more: warned about, kept.
    let stale = d.join("run").join("serve-1.ctl");
    drop(UnixListener::bind(&stale).unwrap());
    std::fs::write(
        d.join("monitor.toml"),
        "scan = true\n\n[[array]]\nname = \"mirror\"\nmembers = [\"m4\", \"m5\"]\nspares = 1\n",
    )
    .unwrap();
    let before = [
        std::fs::read(d.join("m4")).unwrap(),
        std::fs::read(d.join("m5")).unwrap(),
    ];
    let rec = recorder(d);
    let mut c = cmd(
        d,
        &[
            "monitor",
            "--config",
            "monitor.toml",
            "--test",
            "--oneshot",
            "--program",
        ],
    );
    c.arg(&rec);
    let out = ok(c);
    let mut got = recorded(d);
    got.sort();
    assert_eq!(
        got,
        [
            "DegradedArray|mirror|",
            "NewArray|r5|",
            "SparesMissing|mirror|",
            "TestMessage|mirror|",
            "TestMessage|r5|",
        ]
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout
            .lines()
            .any(|l| l.ends_with("TestMessage on array r5") && l.starts_with("20")),
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "nobody listens on the control socket {}",
            stale.display()
        )),
        "{stderr}"
    );
    assert!(stale.exists(), "the monitor removed a socket file");
    let after = [
        std::fs::read(d.join("m4")).unwrap(),
        std::fs::read(d.join("m5")).unwrap(),
    ];
    assert!(before == after, "reading the mirror changed its members");
}

#[test]
fn bad_input_is_refused_clearly_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("run")).unwrap();
    std::fs::write(d.join("empty.toml"), "# nothing\n").unwrap();
    fails(
        cmd(d, &["monitor", "--config", "empty.toml"]),
        "empty.toml names nothing to watch",
    );
    std::fs::write(
        d.join("nomembers.toml"),
        "[[array]]\nname = \"x\"\nmembers = []\n",
    )
    .unwrap();
    fails(
        cmd(d, &["monitor", "--config", "nomembers.toml"]),
        "(\"x\") has no members",
    );
    std::fs::write(d.join("typo.toml"), "[[arrays]]\nmembers = [\"a\"]\n").unwrap();
    fails(
        cmd(d, &["monitor", "--config", "typo.toml"]),
        "typo.toml is not valid",
    );
    fails(
        cmd(d, &["monitor", "--config", "absent.toml"]),
        "cannot read the monitor configuration absent.toml",
    );
    // Nothing named and nothing served (a stale socket does not count).
    drop(UnixListener::bind(d.join("run").join("serve-1.ctl")).unwrap());
    let err = fails(cmd(d, &["monitor", "--oneshot"]), "nothing to monitor");
    assert!(err.contains("nobody listens"), "{err}");
    fails(cmd(d, &["monitor", "--delay", "0", "x"]), "above 0");
    fails(
        cmd(d, &["monitor", "--program", "absent.sh", "x"]),
        "the --program absent.sh",
    );
    fails(
        cmd(
            d,
            &[
                "monitor",
                "--mail",
                "root@localhost",
                "--sendmail",
                "absent",
                "x",
            ],
        ),
        "sendmail (for --mail) absent",
    );
    let mut names: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["empty.toml", "nomembers.toml", "run", "typo.toml"]);
    assert_eq!(std::fs::read_dir(d.join("run")).unwrap().count(), 1);
}

/// One SMTP session on `listener`, as a server answers it; returns what the
/// client sent (commands and the message).
fn smtp_sink(listener: TcpListener) -> String {
    let (s, _) = listener.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    let mut seen = String::new();
    w.write_all(b"220 sink.test ESMTP\r\n").unwrap();
    let mut in_data = false;
    loop {
        let mut l = String::new();
        if r.read_line(&mut l).unwrap() == 0 {
            return seen;
        }
        seen += &l;
        if in_data {
            if l == ".\r\n" {
                in_data = false;
                w.write_all(b"250 queued\r\n").unwrap();
            }
            continue;
        }
        let verb = l.get(..4).unwrap_or("").to_ascii_uppercase();
        let reply: &[u8] = match verb.as_str() {
            "EHLO" => b"250-sink.test\r\n250 8BITMIME\r\n",
            "HELO" | "MAIL" | "RCPT" | "RSET" | "NOOP" => b"250 ok\r\n",
            "DATA" => {
                in_data = true;
                b"354 go on\r\n"
            }
            "QUIT" => {
                w.write_all(b"221 bye\r\n").unwrap();
                return seen;
            }
            _ => b"502 not here\r\n",
        };
        w.write_all(reply).unwrap();
    }
}

fn msmtp() -> Option<PathBuf> {
    let out = Command::new("sh")
        .args(["-c", "command -v msmtp"])
        .output()
        .ok()?;
    let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !p.is_empty()).then(|| PathBuf::from(p))
}

#[test]
fn mail_goes_through_msmtp_to_an_smtp_server() {
    let Some(msmtp) = msmtp() else {
        raidlab_core::skip::skip_or_fail(
            "monitor mail: msmtp not installed (Debian package msmtp)",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    create_degraded_mirror(d);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let sink = std::thread::spawn(move || {
        (
            smtp_sink(listener.try_clone().unwrap()),
            smtp_sink(listener),
        )
    });
    // msmtp reads $HOME/.msmtprc, which must be private.
    let home = d.join("home");
    std::fs::create_dir(&home).unwrap();
    let rc = home.join(".msmtprc");
    std::fs::write(
        &rc,
        format!(
            "defaults\nauth off\ntls off\n\naccount sink\nhost 127.0.0.1\nport {port}\nfrom monitor@localhost\n\naccount default : sink\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&rc, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut c = cmd(
        d,
        &[
            "monitor",
            "m4",
            "m5",
            "--test",
            "--oneshot",
            "--mail",
            "admin@localhost",
            "--sendmail",
        ],
    );
    c.arg(&msmtp).env("HOME", &home);
    let out = ok(c);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("cannot mail"), "{stderr}");
    let (test, degraded) = sink.join().unwrap();
    let uuid = {
        let v: serde_json::Value =
            serde_json::from_slice(&ok(cmd(d, &["detail", "--json", "m4", "m5"])).stdout).unwrap();
        v["uuid"].as_str().unwrap().to_string()
    };
    for (mail, event) in [(&test, "TestMessage"), (&degraded, "DegradedArray")] {
        assert!(mail.contains("RCPT TO:<admin@localhost>"), "{mail}");
        assert!(
            mail.contains(&format!("Subject: {event} event on {uuid}:")),
            "{mail}"
        );
        assert!(
            mail.contains(&format!("a {event} event on array {uuid}")),
            "{mail}"
        );
        assert!(
            mail.contains(&format!("faulty     {}", abs(d, "m5"))),
            "{mail}"
        );
    }
}

#[test]
fn syslog_gets_one_datagram_per_event_with_its_priority() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    create_degraded_mirror(d);
    let sock = d.join("log.sock");
    let log = UnixDatagram::bind(&sock).unwrap();
    log.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut c = cmd(
        d,
        &["monitor", "m4", "m5", "--test", "--oneshot", "--syslog"],
    );
    c.env("RAIDLAB_SYSLOG_SOCKET", &sock);
    ok(c);
    let mut buf = [0u8; 2048];
    let mut got = vec![];
    for _ in 0..2 {
        let n = log.recv(&mut buf).unwrap();
        got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    // daemon.notice (3*8+5) for the test, daemon.crit (3*8+2) for degraded.
    assert!(
        got[0].starts_with("<29>") && got[0].contains(" raidlab-monitor["),
        "{got:?}"
    );
    assert!(got[0].contains("]: TestMessage on array "), "{got:?}");
    assert!(
        got[1].starts_with("<26>") && got[1].contains("]: DegradedArray on array "),
        "{got:?}"
    );
    log.set_nonblocking(true).unwrap();
    assert!(
        log.recv(&mut buf).is_err(),
        "more than one datagram per event"
    );
}

fn has(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn a_served_cache_above_its_dirty_target_is_reported_with_its_device() {
    if !has("nbdcopy") {
        raidlab_core::skip::skip_or_fail(
            "monitor cache: nbdcopy not installed (Debian package libnbd-bin)",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    create_r5(d);
    std::fs::write(d.join("cache.img"), vec![0u8; 8 << 20]).unwrap();
    // Write-back, every write kept, a 10 % target and a cleaner held to
    // 4 KiB/s: what the client writes stays dirty, far above the target.
    ok(cmd(
        d,
        &[
            "cache",
            "create",
            "--cache",
            "cache.img",
            "m0",
            "m1",
            "m2",
            "m3",
            "--block",
            "4K",
            "--mode",
            "writeback",
            "--sequential-cutoff",
            "0",
            "--dirty-target",
            "10",
            "--clean-rate",
            "4K",
        ],
    ));
    let socket = d.join("nbd.sock");
    let server = Running(Some(
        raidlab(d)
            .args(["serve", "--cache", "cache.img", "--socket"])
            .arg(&socket)
            .args(["m0", "m1", "m2", "m3"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let t = Instant::now();
    while UnixStream::connect(&socket).is_err()
        || !d
            .join("run")
            .join(format!("serve-{}.ctl", server.pid()))
            .exists()
    {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "serve did not listen"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let rec = recorder(d);
    let oneshot = || {
        let mut c = cmd(d, &["monitor", "--oneshot", "--program"]);
        c.arg(&rec);
        ok(c);
    };
    oneshot();
    assert_eq!(
        recorded(d),
        ["NewArray|r5|"],
        "a clean cache is below its target"
    );
    std::fs::write(d.join("data"), vec![0x5au8; 3 << 20]).unwrap();
    let mut c = Command::new("nbdcopy");
    c.arg(d.join("data"))
        .arg(format!("nbd+unix:///?socket={}", socket.display()));
    ok(c);
    oneshot();
    assert_eq!(
        recorded(d),
        [
            "NewArray|r5|".to_string(),
            "NewArray|r5|".to_string(),
            format!("CacheDirtyAboveTarget|r5|{}|", abs(d, "cache.img")),
        ]
    );
    let (st, err) = server.term();
    assert!(st.success(), "serve: {err}");
}

/// A tmpfs mounted for one test, unmounted when dropped.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn nbd_uri(socket: &Path) -> String {
    format!("nbd+unix:///?socket={}", socket.display())
}

/// The whole export, read through NBD.
fn read_export(d: &Path, socket: &Path, name: &str) -> Vec<u8> {
    let out = d.join(name);
    let mut c = Command::new("nbdcopy");
    c.arg(nbd_uri(socket)).arg(&out);
    ok(c);
    std::fs::read(out).unwrap()
}

/// A real cache device that starts failing while served: the cache file is
/// sparse on a small tmpfs, and the test fills the tmpfs, so the next
/// promotion's write into a hole of the file gets ENOSPC from the kernel.
/// The write-through cache fails its device, requests pass through (the
/// bytes read and written through NBD stay right), the monitor's program
/// gets CacheDeviceFailed once with the cache device, `cache stats --json`
/// says failed, and the failed flag is on the device after the server stops.
#[test]
fn a_cache_device_that_fails_while_served_is_reported_and_passed_by() {
    if !has("nbdcopy") {
        raidlab_core::skip::skip_or_fail(
            "monitor cache failure: nbdcopy not installed (Debian package libnbd-bin)",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ssd = d.join("ssd");
    std::fs::create_dir(&ssd).unwrap();
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let mounted = root
        && Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=16m", "tmpfs"])
            .arg(&ssd)
            .status()
            .is_ok_and(|s| s.success());
    if !mounted {
        raidlab_core::skip::skip_or_fail(
            "monitor cache failure: mounting a tmpfs (the failing cache device) needs root",
        );
        return;
    }
    let _mount = Mounted(ssd.clone());
    create_r5(d);
    std::fs::File::create(ssd.join("cache.img"))
        .unwrap()
        .set_len(8 << 20)
        .unwrap();
    ok(cmd(
        d,
        &[
            "cache",
            "create",
            "--cache",
            "ssd/cache.img",
            "m0",
            "m1",
            "m2",
            "m3",
            "--block",
            "4K",
            "--mode",
            "writethrough",
            "--sequential-cutoff",
            "0",
        ],
    ));
    let socket = d.join("nbd.sock");
    let metrics = format!(
        "127.0.0.1:{}",
        TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port()
    );
    // The failed gauge of this cache, as the metrics endpoint says it.
    let gauge = |d: &Path| -> String {
        let mut s = std::net::TcpStream::connect(&metrics).unwrap();
        write!(s, "GET /metrics HTTP/1.0\r\nHost: {metrics}\r\n\r\n").unwrap();
        let mut all = String::new();
        s.read_to_string(&mut all).unwrap();
        let want = format!(
            "raidlab_cache_device_failed{{device=\"r5\",cache=\"{}\"}} ",
            abs(d, "ssd/cache.img")
        );
        all.lines()
            .find_map(|l| l.strip_prefix(&want))
            .unwrap_or_else(|| panic!("no {want:?} in:\n{all}"))
            .to_string()
    };
    let server = Running(Some(
        raidlab(d)
            .args(["serve", "-N", "r5", "--metrics", &metrics])
            .args(["--cache", "ssd/cache.img", "--socket"])
            .arg(&socket)
            .args(["m0", "m1", "m2", "m3"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let t = Instant::now();
    while UnixStream::connect(&socket).is_err()
        || !d
            .join("run")
            .join(format!("serve-{}.ctl", server.pid()))
            .exists()
    {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "serve did not listen"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let rec = recorder(d);
    let oneshot = || {
        let mut c = cmd(d, &["monitor", "--oneshot", "--program"]);
        c.arg(&rec);
        ok(c);
    };
    let stats = || -> serde_json::Value {
        let out = ok(cmd(
            d,
            &["cache", "stats", "--cache", "ssd/cache.img", "--json"],
        ));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    oneshot();
    assert_eq!(recorded(d), ["NewArray|r5|"]);
    assert_eq!(stats()["state"], "attached");
    assert_eq!(gauge(d), "0");

    // Written through to the array (write misses do not fill the cache).
    let a: Vec<u8> = (0..3u32 << 20)
        .map(|i| (i / 4096 * 7 + i % 251) as u8)
        .collect();
    std::fs::write(d.join("a"), &a).unwrap();
    let mut c = Command::new("nbdcopy");
    c.arg(d.join("a")).arg(nbd_uri(&socket));
    ok(c);

    // The cache device's file system fills up: the file's holes can no
    // longer be written.
    {
        let mut f = std::fs::File::create(ssd.join("filler")).unwrap();
        let chunk = vec![0xeeu8; 64 << 10];
        while f.write_all(&chunk).is_ok() {}
    }

    // Reads promote into holes: the cache device refuses, fails, and the
    // reads are answered from the array.
    let got = read_export(d, &socket, "out1");
    assert_eq!(&got[..a.len()], &a[..], "the bytes read through NBD");
    let s = stats();
    assert_eq!(s["state"], "failed", "{s}");
    assert!(s["io_errors"].as_u64().unwrap() >= 1, "{s}");
    assert_eq!(gauge(d), "1");

    // Writes and reads go on, passing the failed device by.
    let b = vec![0xb7u8; 1 << 20];
    std::fs::write(d.join("b"), &b).unwrap();
    let mut c = Command::new("nbdcopy");
    c.arg(d.join("b")).arg(nbd_uri(&socket));
    ok(c);
    let got = read_export(d, &socket, "out2");
    assert_eq!(&got[..b.len()], &b[..]);
    assert_eq!(&got[b.len()..a.len()], &a[b.len()..]);

    oneshot();
    let cache_dev = abs(d, "ssd/cache.img");
    let failed_line = format!("CacheDeviceFailed|r5|{cache_dev}|");
    assert_eq!(
        recorded(d),
        [
            "NewArray|r5|".to_string(),
            "NewArray|r5|".to_string(),
            failed_line.clone(),
        ]
    );
    let text =
        String::from_utf8(ok(cmd(d, &["cache", "stats", "--cache", "ssd/cache.img"])).stdout)
            .unwrap();
    assert!(
        text.contains("failed: the cache device returned I/O errors"),
        "{text}"
    );

    let (st, err) = server.term();
    assert!(st.success(), "serve: {err}");
    // The failing device still took the superblock saying so (its pages
    // were allocated): offline it reads as failed, and serving it again is
    // refused.
    std::fs::remove_file(ssd.join("filler")).unwrap();
    let out = ok(cmd(
        d,
        &["cache", "detail", "--cache", "ssd/cache.img", "--json"],
    ));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["state"], "failed", "{v}");
    fails(
        cmd(
            d,
            &[
                "serve",
                "--cache",
                "ssd/cache.img",
                "--socket",
                "again.sock",
                "m0",
                "m1",
                "m2",
                "m3",
            ],
        ),
        "failed while in front of",
    );
}
