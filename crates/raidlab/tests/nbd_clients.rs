//! `raidlab serve` against real NBD clients: libnbd's nbdinfo and nbdcopy,
//! qemu-img, fio's nbd engine with verification on RAID 5, 6 and 10, a kill -9
//! in the middle of flushed writes followed by a restart, and ext4 and XFS made
//! with the alignment `detail` prints on a loop device over nbdfuse (mounted,
//! filled, remounted, fsck'd, bonnie++ on ext4).
//!
//! The clients come from Debian packages that scripts/test.sh installs when run
//! as root. Without root and without the tools a test prints
//! `SKIPPED: <why>` and passes; as root a missing tool is a failure.

use std::io::{Read, Write};
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

/// Whether the tools are there; prints SKIPPED (not root) or panics (root).
fn tools(test: &str, needed: &[&str]) -> bool {
    let missing: Vec<&str> = needed.iter().copied().filter(|t| !have(t)).collect();
    if missing.is_empty() {
        return true;
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        !root,
        "{test}: {missing:?} not installed; scripts/test.sh installs them (libnbd-bin, fio, qemu-utils, fuse3, xfsprogs, e2fsprogs, bonnie++)"
    );
    raidlab_core::skip::skip_or_fail(&format!(
        "{test}: {missing:?} not installed and not root to install them (run scripts/test.sh as root)"
    ));
    false
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("cannot start a command");
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn create(dir: &Path, level: &str, members: &[&str], size: &str) -> Vec<PathBuf> {
    let paths: Vec<PathBuf> = members.iter().map(|m| dir.join(m)).collect();
    run(Command::new(bin())
        .args(["create", "-l", level, "-c", "64K", "--member-size", size])
        .args(&paths));
    paths
}

/// A running `raidlab serve`; killed if the test ends without stopping it.
struct Serve {
    child: Option<Child>,
    socket: PathBuf,
}

impl Serve {
    fn start(socket: &Path, args: &[&str], members: &[PathBuf]) -> Serve {
        let mut s = Serve::spawn(socket, args, members);
        s.wait_listening();
        s
    }

    /// Started, without waiting for it to listen.
    fn spawn(socket: &Path, args: &[&str], members: &[PathBuf]) -> Serve {
        let child = Command::new(bin())
            .arg("serve")
            .arg("--socket")
            .arg(socket)
            .args(args)
            .args(members)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start raidlab serve");
        Serve {
            child: Some(child),
            socket: socket.to_path_buf(),
        }
    }

    /// Wait until its NBD socket takes connections; panics with its error
    /// output if it exits first.
    fn wait_listening(&mut self) {
        let t = Instant::now();
        while UnixStream::connect(&self.socket).is_err() {
            if let Some(st) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                let mut err = String::new();
                let _ = self
                    .child
                    .take()
                    .and_then(|mut c| c.stderr.take())
                    .map(|mut e| e.read_to_string(&mut err));
                panic!("raidlab serve exited at start ({st}): {err}");
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "raidlab serve did not listen within 60 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn uri(&self, export: &str) -> String {
        format!("nbd+unix:///{export}?socket={}", self.socket.display())
    }

    fn signal(&mut self, sig: i32) -> (std::process::ExitStatus, String) {
        let mut c = self.child.take().expect("server already stopped");
        // SAFETY: kill has no memory-safety preconditions; the pid is our child,
        // not yet reaped, so it cannot name another process.
        unsafe { libc::kill(c.id() as i32, sig) };
        let mut err = String::new();
        if let Some(mut e) = c.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        (c.wait().expect("wait for raidlab serve"), err)
    }

    /// SIGTERM: drain, flush, mark clean; must exit 0.
    fn stop(mut self) -> String {
        let (st, err) = self.signal(libc::SIGTERM);
        assert!(
            st.success(),
            "raidlab serve exited with {st} on SIGTERM:\n{err}"
        );
        assert!(err.contains("stopping"), "{err}");
        err
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

fn check_clean(members: &[PathBuf]) {
    let out = run(Command::new(bin()).arg("check").args(members));
    assert!(
        out.contains("mismatch_cnt: 0"),
        "check found mismatches: {out}"
    );
    let d = run(Command::new(bin())
        .arg("detail")
        .arg("--json")
        .args(members));
    let v: serde_json::Value = serde_json::from_str(&d).unwrap();
    assert_eq!(v["state"], "clean", "{d}");
}

fn random_file(path: &Path, len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let data: Vec<u8> = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(path, &data).unwrap();
    data
}

#[test]
fn nbdinfo_nbdcopy_and_qemu_img_agree_with_export() {
    if !tools("nbd clients", &["nbdinfo", "nbdcopy", "qemu-img"]) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let members = create(d.path(), "5", &["m0", "m1", "m2", "m3"], "24M");
    let plain = d.path().join("plain.img");
    std::fs::write(&plain, vec![0u8; 4 << 20]).unwrap();
    let list = |v: &[PathBuf]| {
        v.iter()
            .map(|p| format!("{:?}", p.display().to_string()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let config = d.path().join("serve.toml");
    std::fs::write(
        &config,
        format!(
            "[[export]]\nname = \"r5\"\nmembers = [{}]\n\n[[export]]\nname = \"plain\"\nfile = {:?}\nread_only = true\n",
            list(&members),
            plain.display().to_string()
        ),
    )
    .unwrap();
    let sock = d.path().join("s.sock");
    let srv = Serve::start(&sock, &["--config", config.to_str().unwrap()], &[]);

    // nbdinfo: size and block sizes of each export; the list names both.
    let info = |name: &str| -> serde_json::Value {
        let out = run(Command::new("nbdinfo").arg("--json").arg(srv.uri(name)));
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["exports"][0].clone()
    };
    let r5 = info("r5");
    assert_eq!(r5["export-size"], 3 * (24 << 20) - 3 * (1 << 20), "{r5}");
    assert_eq!(r5["block_size_minimum"], 1);
    // Full stripe 3 x 64K is no power of two: the hint is the chunk.
    assert_eq!(r5["block_size_preferred"], 64 << 10);
    assert_eq!(r5["block_size_maximum"], 32 << 20);
    assert_eq!(r5["is_read_only"], false);
    assert_eq!(r5["can_multi_conn"], true);
    let p = info("plain");
    assert_eq!(p["export-size"], 4 << 20);
    assert_eq!(p["is_read_only"], true);
    let listed = run(Command::new("nbdinfo").arg("--list").arg(srv.uri("")));
    assert!(
        listed.contains("r5") && listed.contains("plain"),
        "{listed}"
    );

    // nbdcopy round trip, at an offset-free whole-file copy.
    let input = d.path().join("in.bin");
    let data = random_file(&input, 20 << 20, 1);
    run(Command::new("nbdcopy").arg(&input).arg(srv.uri("r5")));
    let back = d.path().join("back.bin");
    run(Command::new("nbdcopy").arg(srv.uri("r5")).arg(&back));
    let back_data = std::fs::read(&back).unwrap();
    assert_eq!(
        &back_data[..data.len()],
        &data[..],
        "nbdcopy round trip differs"
    );
    // The read-only export refuses writes.
    let out = Command::new("nbdcopy")
        .arg(&input)
        .arg(srv.uri("plain"))
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "nbdcopy into a read-only export succeeded"
    );

    // qemu-img reads what nbdcopy reads.
    let q = d.path().join("qemu.raw");
    run(Command::new("qemu-img")
        .args(["convert", "-f", "raw", "-O", "raw"])
        .arg(srv.uri("r5"))
        .arg(&q));
    srv.stop();
    let exported = d.path().join("export.raw");
    run(Command::new(bin())
        .arg("export")
        .arg("-o")
        .arg(&exported)
        .args(&members));
    run(Command::new("qemu-img")
        .args(["compare", "-f", "raw", "-F", "raw"])
        .arg(&q)
        .arg(&exported));
    assert_eq!(std::fs::read(&exported).unwrap(), back_data);
    check_clean(&members);
}

#[test]
fn fio_verify_over_raid_5_6_10() {
    if !tools("fio over nbd", &["fio"]) {
        return;
    }
    for level in ["5", "6", "10"] {
        let d = tempfile::tempdir().unwrap();
        let members = create(
            d.path(),
            level,
            &["m0", "m1", "m2", "m3", "m4"][..if level == "6" { 5 } else { 4 }],
            "20M",
        );
        let sock = d.path().join("s.sock");
        let srv = Serve::start(&sock, &["-N", "a"], &members);
        for (rw, bs, qd) in [
            ("randwrite", "4k", "1"),
            ("randwrite", "4k", "32"),
            ("write", "1m", "8"),
            ("randwrite", "64k", "8"),
        ] {
            let out = Command::new("fio")
                .args([
                    "--name=v",
                    "--ioengine=nbd",
                    "--size=12M",
                    "--verify=crc32c",
                    "--do_verify=1",
                    "--verify_fatal=1",
                    // No verify state file left in the package directory.
                    "--verify_state_save=0",
                ])
                .arg(format!("--uri={}", srv.uri("a")))
                .arg(format!("--rw={rw}"))
                .arg(format!("--bs={bs}"))
                .arg(format!("--iodepth={qd}"))
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success(),
                "RAID {level} {rw} bs={bs} QD{qd}: fio failed:\n{text}"
            );
            assert!(
                text.contains("err= 0"),
                "RAID {level} {rw} bs={bs} QD{qd}:\n{text}"
            );
            // The verify pass reads everything back: fio reports it as reads.
            assert!(
                text.contains("read: IOPS="),
                "RAID {level} {rw} bs={bs} QD{qd}: no verify pass:\n{text}"
            );
            assert!(
                !text.contains("verify:"),
                "RAID {level} {rw} bs={bs} QD{qd}: verify error:\n{text}"
            );
        }
        srv.stop();
        check_clean(&members);
    }
}

/// A minimal NBD client (simple replies) for the crash test: writes need
/// precise knowledge of which flush was acknowledged before the kill.
struct Raw(UnixStream);

impl Raw {
    fn connect(sock: &Path, name: &str) -> std::io::Result<Raw> {
        let mut s = UnixStream::connect(sock)?;
        let mut g = [0u8; 18];
        s.read_exact(&mut g)?;
        s.write_all(&3u32.to_be_bytes())?;
        let mut data = (name.len() as u32).to_be_bytes().to_vec();
        data.extend_from_slice(name.as_bytes());
        data.extend_from_slice(&0u16.to_be_bytes());
        let mut opt = 0x4948_4156_454f_5054u64.to_be_bytes().to_vec();
        opt.extend_from_slice(&7u32.to_be_bytes());
        opt.extend_from_slice(&(data.len() as u32).to_be_bytes());
        opt.extend_from_slice(&data);
        s.write_all(&opt)?;
        loop {
            let mut h = [0u8; 20];
            s.read_exact(&mut h)?;
            let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
            let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
            let mut d = vec![0; len as usize];
            s.read_exact(&mut d)?;
            match kind {
                1 => return Ok(Raw(s)),
                3 => {}
                k => return Err(std::io::Error::other(format!("GO refused: {k:#x}"))),
            }
        }
    }
    fn request(
        &mut self,
        kind: u16,
        cookie: u64,
        offset: u64,
        data: &[u8],
        len: u32,
    ) -> std::io::Result<()> {
        let mut b = 0x2560_9513u32.to_be_bytes().to_vec();
        b.extend_from_slice(&0u16.to_be_bytes());
        b.extend_from_slice(&kind.to_be_bytes());
        b.extend_from_slice(&cookie.to_be_bytes());
        b.extend_from_slice(&offset.to_be_bytes());
        b.extend_from_slice(&len.to_be_bytes());
        self.0.write_all(&b)?;
        self.0.write_all(data)
    }
    fn reply(&mut self, read_len: usize) -> std::io::Result<(u64, Vec<u8>)> {
        let mut h = [0u8; 16];
        self.0.read_exact(&mut h)?;
        let err = u32::from_be_bytes(h[4..8].try_into().unwrap());
        if err != 0 {
            return Err(std::io::Error::other(format!("server error {err}")));
        }
        let mut d = vec![0; read_len];
        self.0.read_exact(&mut d)?;
        Ok((u64::from_be_bytes(h[8..16].try_into().unwrap()), d))
    }
}

fn block(batch: u64, i: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|k| (batch * 131 + i * 31 + k) as u8)
        .collect()
}

/// `detail` of a served array, text and JSON: the text's `State :` value and
/// the JSON's `state`.
fn served_state(members: &[PathBuf]) -> (String, String) {
    let text = run(Command::new(bin()).arg("detail").args(members));
    let line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("State :"))
        .unwrap_or_else(|| panic!("no State line in {text}"))
        .trim()
        .to_string();
    let j = run(Command::new(bin())
        .arg("detail")
        .arg("--json")
        .args(members));
    let v: serde_json::Value = serde_json::from_str(&j).unwrap();
    (line, v["state"].as_str().unwrap_or_default().to_string())
}

/// Ask `detail` until text and JSON both say `want` (true), or 10 s pass.
fn served_state_becomes(members: &[PathBuf], want: &str) -> bool {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(10) {
        let (text, json) = served_state(members);
        if text == want && json == want {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// `raidlab serve` locks and starts its arrays before its control socket
/// answers; a verb run in that window must reach the server once it answers
/// (or read the array before the server locked it), never fail because the
/// members are locked. Tried at staggered delays after the spawn, on a RAID 6
/// whose start writes every superblock.
#[test]
fn a_verb_run_while_serve_starts_reaches_the_server_not_the_locks() {
    let d = tempfile::tempdir().unwrap();
    let members = create(d.path(), "6", &["m0", "m1", "m2", "m3", "m4"], "16M");
    for (i, delay_ms) in [0u64, 5, 10, 20, 40, 80].into_iter().enumerate() {
        let sock = d.path().join(format!("s{i}.sock"));
        let mut srv = Serve::spawn(&sock, &["-N", "a"], &members);
        std::thread::sleep(Duration::from_millis(delay_ms));
        let out = Command::new(bin())
            .args(["detail", "--json"])
            .args(&members)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "detail {delay_ms} ms after serve started: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The server must be up before it is stopped cleanly.
        srv.wait_listening();
        assert!(served_state_becomes(&members, "clean"));
        let (st, err) = srv.signal(libc::SIGTERM);
        assert!(st.success(), "serve after {delay_ms} ms: {st}: {err}");
    }
}

/// md's rule for a running array's state, through `raidlab detail` of a
/// served RAID 5: `clean` when idle (a fresh array, and 200 ms after the last
/// write), `active` while writes come, the same word in text and JSON; and a
/// kill -9 while it sits idle needs no resync at the next start, while one
/// during writes does.
#[test]
fn a_served_array_says_clean_when_idle_and_active_while_it_writes() {
    let d = tempfile::tempdir().unwrap();
    let members = create(d.path(), "5", &["m0", "m1", "m2", "m3"], "16M");
    let sock = d.path().join("s.sock");
    let mut srv = Serve::start(&sock, &["-N", "a"], &members);
    assert!(
        served_state_becomes(&members, "clean"),
        "an idle served array: {:?}",
        served_state(&members)
    );

    let writing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let w = writing.clone();
    let mut c = Raw::connect(&sock, "a").unwrap();
    let writer = std::thread::spawn(move || {
        let mut n = 0u64;
        while w.load(std::sync::atomic::Ordering::Relaxed) {
            let off = (n % 256) * (64 << 10);
            c.request(1, n, off, &block(n, 0, 64 << 10), 64 << 10)
                .unwrap();
            c.reply(0).unwrap();
            n += 1;
        }
        c
    });
    assert!(
        served_state_becomes(&members, "active"),
        "a served array being written: {:?}",
        served_state(&members)
    );
    writing.store(false, std::sync::atomic::Ordering::Relaxed);
    let _c = writer.join().unwrap();
    assert!(
        served_state_becomes(&members, "clean"),
        "writes stopped: {:?}",
        served_state(&members)
    );
    // Idle and marked clean: a crash now owes no resync.
    let (st, _) = srv.signal(libc::SIGKILL);
    assert!(!st.success());
    drop(_c);
    let srv = Serve::start(&sock, &["-N", "a"], &members);
    let err = srv.stop();
    assert!(!err.contains("resync"), "{err}");
    check_clean(&members);
}

/// Blocks a file holds on disk (st_blocks, 512-byte units).
fn allocated(p: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).unwrap().blocks()
}

/// NBD_CMD_TRIM gives space back: on a plain file export the file gets a hole,
/// on a RAID 10 export every copy on the member files does; the range then reads
/// as zeros, the rest is untouched, and a check of the array stays clean. On a
/// RAID 5 export the trim is accepted and changes nothing (md's default).
#[test]
fn trim_punches_holes_in_files_and_every_mirror_copy() {
    const CMD_TRIM: u16 = 4;
    const MIB: u64 = 1 << 20;
    let d = tempfile::tempdir().unwrap();
    let sock = d.path().join("s.sock");
    let plain = d.path().join("plain");
    std::fs::write(&plain, vec![0x77u8; 8 << 20]).unwrap();
    let r10 = create(d.path(), "10", &["a0", "a1", "a2", "a3"], "16M");
    let r5 = create(d.path(), "5", &["b0", "b1", "b2"], "16M");
    for (label, members, trims) in [
        ("plain", vec![plain.clone()], true),
        ("raid10", r10.clone(), true),
        ("raid5", r5.clone(), false),
    ] {
        let args: Vec<&str> = if label == "plain" {
            vec!["-N", "x", "--plain"]
        } else {
            vec!["-N", "x"]
        };
        let srv = Serve::start(&sock, &args, &members);
        let mut c = Raw::connect(&sock, "x").unwrap();
        // Fill 6 MiB (the plain file is full already), then trim 1-3 MiB.
        if label != "plain" {
            for i in 0..6 {
                c.request(1, i, i * MIB, &vec![0x77u8; MIB as usize], MIB as u32)
                    .unwrap();
                c.reply(0).unwrap();
            }
            c.request(3, 9, 0, &[], 0).unwrap();
            c.reply(0).unwrap();
        }
        let before: u64 = members.iter().map(|m| allocated(m)).sum();
        c.request(CMD_TRIM, 10, MIB, &[], 2 * MIB as u32).unwrap();
        c.reply(0).unwrap();
        c.request(0, 11, 0, &[], 4 * MIB as u32).unwrap();
        let (_, got) = c.reply(4 * MIB as usize).unwrap();
        let after: u64 = members.iter().map(|m| allocated(m)).sum();
        // Write zeroes without NO_HOLE may punch a hole too, where a trim can.
        const CMD_WRITE_ZEROES: u16 = 6;
        c.request(CMD_WRITE_ZEROES, 12, 5 * MIB, &[], MIB as u32)
            .unwrap();
        c.reply(0).unwrap();
        c.request(0, 13, 5 * MIB, &[], MIB as u32).unwrap();
        let (_, zeroed) = c.reply(MIB as usize).unwrap();
        assert!(zeroed.iter().all(|&b| b == 0), "{label}: write zeroes");
        let punched: u64 = members.iter().map(|m| allocated(m)).sum();
        if trims {
            assert!(punched < after, "{label}: write zeroes allocated space");
        }
        drop(c);
        srv.stop();
        let (head, rest) = got.split_at(MIB as usize);
        let (mid, tail) = rest.split_at(2 * MIB as usize);
        assert!(head.iter().all(|&b| b == 0x77), "{label}: before the trim");
        assert!(tail.iter().all(|&b| b == 0x77), "{label}: after the trim");
        if trims {
            assert!(mid.iter().all(|&b| b == 0), "{label}: the trimmed range");
            // 2 MiB given back per copy: 4096 sectors, twice on RAID 10.
            let copies = if label == "raid10" { 2 } else { 1 };
            assert!(
                before - after >= copies * 4096,
                "{label}: {before} -> {after} sectors allocated"
            );
        } else {
            assert!(mid.iter().all(|&b| b == 0x77), "{label}: kept its data");
            assert_eq!(before, after, "{label}: nothing given back");
        }
        if label != "plain" {
            check_clean(&members);
        }
    }
}

/// How an array keeps parity consistent across a crash, and what the next start
/// must say about it.
#[derive(Debug, Clone, Copy)]
enum Policy {
    /// A full resync.
    Resync,
    /// md's partial parity log: replayed, no resync.
    Ppl,
    /// md's write journal: replayed; the array stays clean while it runs.
    Journal,
    /// The journal in md's write-back mode: a write is acknowledged once its
    /// data is in the journal, so every acknowledged write survives, flushed
    /// or not.
    JournalWriteBack,
}

#[test]
fn kill_9_during_flushed_writes_then_restart_keeps_flushed_data() {
    // Needs no external tools: the client is ours. Members through the page
    // cache (which a killed process leaves to the kernel) and with O_DIRECT
    // (where an acknowledged flush must be on the member itself).
    for io in ["--buffered", "--direct"] {
        for policy in [
            Policy::Resync,
            Policy::Ppl,
            Policy::Journal,
            Policy::JournalWriteBack,
        ] {
            kill_9_case(policy, io);
        }
    }
}

fn kill_9_case(policy: Policy, io: &str) {
    let d = tempfile::tempdir().unwrap();
    let mut members: Vec<PathBuf> = ["m0", "m1", "m2", "m3"]
        .iter()
        .map(|m| d.path().join(m))
        .collect();
    let mut create = Command::new(bin());
    create.args(["create", "-l", "5", "-c", "64K", "--member-size", "16M"]);
    match policy {
        Policy::Resync => {}
        Policy::Ppl => {
            create.args(["--consistency-policy", "ppl"]);
        }
        Policy::Journal | Policy::JournalWriteBack => {
            let j = d.path().join("journal");
            std::fs::write(&j, vec![0u8; 16 << 20]).unwrap();
            create.arg("--write-journal").arg(&j);
            members.push(j);
        }
    }
    run(create.args(&members[..4]));
    let sock = d.path().join("s.sock");
    let mut args = vec!["-N", "a", io];
    if matches!(policy, Policy::JournalWriteBack) {
        args.extend(["--journal-mode", "write-back"]);
    }
    let mut srv = Serve::start(&sock, &args, &members);
    const BS: usize = 64 << 10;
    const PER_BATCH: u64 = 8;
    let batches = (3 * (15 << 20) / (BS as u64 * PER_BATCH)) - 1;
    let mut c = Raw::connect(&sock, "a").unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let writer = std::thread::spawn(move || {
        // Batch b: PER_BATCH writes in flight at once, then a flush. Report each
        // batch whose flush was acknowledged.
        for b in 0..batches {
            for i in 0..PER_BATCH {
                let off = (b * PER_BATCH + i) * BS as u64;
                if c.request(1, i, off, &block(b, i, BS), BS as u32).is_err() {
                    return;
                }
            }
            for _ in 0..PER_BATCH {
                if c.reply(0).is_err() {
                    return;
                }
            }
            // Write-back: acknowledged is durable, before any flush.
            if matches!(policy, Policy::JournalWriteBack) && tx.send(b).is_err() {
                return;
            }
            if c.request(3, 99, 0, &[], 0).is_err() || c.reply(0).is_err() {
                return;
            }
            if !matches!(policy, Policy::JournalWriteBack) && tx.send(b).is_err() {
                return;
            }
        }
    });
    // Let some batches be flushed, then kill while more are being written.
    let mut flushed = vec![];
    while flushed.len() < 5 {
        flushed.push(
            rx.recv_timeout(Duration::from_secs(30))
                .expect("no flush acknowledged"),
        );
    }
    let (st, _) = srv.signal(libc::SIGKILL);
    assert!(!st.success());
    let _ = writer.join();
    flushed.extend(rx.try_iter());
    let last = *flushed.last().unwrap();

    // The next start sees the unclean stop and resyncs before serving (a
    // write-back journal is replayed by a start in md's default mode).
    let srv = Serve::start(&sock, &["-N", "a", io], &members);
    let mut c = Raw::connect(&sock, "a").unwrap();
    for b in 0..=last {
        for i in 0..PER_BATCH {
            let off = (b * PER_BATCH + i) * BS as u64;
            c.request(0, i, off, &[], BS as u32).unwrap();
            let (_, got) = c.reply(BS).unwrap();
            assert!(
                got == block(b, i, BS),
                "{policy:?} {io}: batch {b} write {i} (acknowledged durable before the kill) lost"
            );
        }
    }
    drop(c);
    let err = srv.stop();
    match policy {
        Policy::Resync => assert!(err.contains("not stopped cleanly; resyncing"), "{err}"),
        // The log, not a resync, makes parity consistent again (md's way).
        Policy::Ppl => assert!(
            err.contains("partial parity log") && !err.contains("resyncing"),
            "{policy:?} {io}: {err}"
        ),
        // Clean while running: no resync at all; the journal replays whatever
        // was logged and not yet on the members.
        Policy::Journal | Policy::JournalWriteBack => {
            assert!(!err.contains("resyncing"), "{policy:?} {io}: {err}")
        }
    }
    check_clean(&members);
}

/// Undoes, in reverse order, what the file system test set up (mounts, loop
/// devices, FUSE mounts), even when an assertion fails half-way.
#[derive(Default)]
struct Teardown(Vec<Vec<String>>);

impl Teardown {
    fn push(&mut self, cmd: &[&str]) {
        self.0.push(cmd.iter().map(|s| s.to_string()).collect());
    }
    fn pop_run(&mut self) {
        if let Some(c) = self.0.pop() {
            run(Command::new(&c[0]).args(&c[1..]));
        }
    }
}

impl Drop for Teardown {
    fn drop(&mut self) {
        while let Some(c) = self.0.pop() {
            let _ = Command::new(&c[0]).args(&c[1..]).status();
        }
    }
}

fn write_tree(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = vec![];
    for d in 0..8 {
        let dir = root.join(format!("dir{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..25u64 {
            let p = dir.join(format!("file{f}"));
            let len = 1 + ((d * 25 + f) * 7919 % 200_000) as usize;
            let data = random_file(&p, len, d * 100 + f);
            files.push((p, data));
        }
    }
    let big = root.join("big.bin");
    let data = random_file(&big, 24 << 20, 4242);
    files.push((big, data));
    files
}

#[test]
fn ext4_and_xfs_on_nbdfuse_loop_device_aligned_as_detail_says() {
    if !tools(
        "file systems over nbdfuse",
        &[
            "nbdfuse",
            "fusermount3",
            "losetup",
            "mkfs.ext4",
            "mkfs.xfs",
            "e2fsck",
            "xfs_repair",
            "bonnie++",
        ],
    ) {
        return;
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        raidlab_core::skip::skip_or_fail(
            "file systems over nbdfuse: loop devices and mount need root",
        );
        return;
    }
    if !Path::new("/dev/fuse").exists() || !Path::new("/dev/loop-control").exists() {
        raidlab_core::skip::skip_or_fail(
            "file systems over nbdfuse: this machine has no /dev/fuse or /dev/loop-control",
        );
        return;
    }
    let d = tempfile::tempdir().unwrap();
    // xfsprogs 6 wants at least 300 MiB and a 64 MiB log inside one allocation
    // group: about 600 MiB (sparse member files).
    let members = create(d.path(), "5", &["m0", "m1", "m2", "m3"], "200M");
    let detail: serde_json::Value = serde_json::from_str(&run(Command::new(bin())
        .args(["detail", "--json"])
        .args(&members)))
    .unwrap();
    let ext4 = detail["mkfs"]["ext4"].as_str().unwrap().to_string();
    let xfs = detail["mkfs"]["xfs"].as_str().unwrap().to_string();
    assert_eq!(ext4, "mkfs.ext4 -b 4096 -E stride=16,stripe-width=48");
    assert_eq!(xfs, "mkfs.xfs -d su=64k,sw=3");
    let sock = d.path().join("s.sock");
    let srv = Serve::start(&sock, &["-N", "fs"], &members);
    let fuse = d.path().join("fuse");
    let mnt = d.path().join("mnt");
    std::fs::create_dir_all(&fuse).unwrap();
    std::fs::create_dir_all(&mnt).unwrap();
    let fuse_s = fuse.to_str().unwrap().to_string();
    let mnt_s = mnt.to_str().unwrap().to_string();
    let mut td = Teardown::default();
    let mut nbdfuse = Command::new("nbdfuse")
        .arg(fuse.join("nbd"))
        .arg(srv.uri("fs"))
        .spawn()
        .unwrap();
    td.push(&["fusermount3", "-u", &fuse_s]);
    let t = Instant::now();
    while std::fs::metadata(fuse.join("nbd"))
        .map(|m| m.len())
        .unwrap_or(0)
        == 0
    {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "nbdfuse did not expose the export"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let lo = run(Command::new("losetup")
        .args(["-f", "--show"])
        .arg(fuse.join("nbd")))
    .trim()
    .to_string();
    td.push(&["losetup", "-d", &lo]);

    for (fs, mkfs) in [("ext4", &ext4), ("xfs", &xfs)] {
        let mut args: Vec<&str> = mkfs.split(' ').collect();
        if fs == "ext4" {
            args.push("-F");
        } else {
            // xfsprogs 6 wants a 64 MiB log, more than it picks for so small a
            // file system.
            args.extend(["-f", "-l", "size=64m"]);
        }
        args.push("-q");
        args.push(&lo);
        run(Command::new(args[0]).args(&args[1..]));
        run(Command::new("mount").arg(&lo).arg(&mnt));
        td.push(&["umount", &mnt_s]);
        let files = write_tree(&mnt);
        if fs == "ext4" {
            run(Command::new("bonnie++")
                .args(["-u", "root", "-s", "64", "-r", "32", "-n", "1", "-q", "-d"])
                .arg(&mnt));
        }
        td.pop_run();
        run(Command::new("mount").arg(&lo).arg(&mnt));
        td.push(&["umount", &mnt_s]);
        for (p, data) in &files {
            assert!(
                std::fs::read(p).unwrap() == *data,
                "{fs}: {} differs after remount",
                p.display()
            );
        }
        td.pop_run();
        if fs == "ext4" {
            run(Command::new("e2fsck").args(["-f", "-n"]).arg(&lo));
        } else {
            run(Command::new("xfs_repair").arg("-n").arg(&lo));
        }
    }
    td.pop_run(); // losetup -d
    td.pop_run(); // fusermount3 -u
    let _ = nbdfuse.wait();
    srv.stop();
    check_clean(&members);
}

/// A test CA, a server certificate for localhost and a client certificate,
/// made with openssl; returns the directory. `client/` holds what libnbd wants
/// (ca-cert.pem, client-cert.pem, client-key.pem), `nocert/` only the CA.
fn make_pki(dir: &Path) -> PathBuf {
    let pki = dir.join("pki");
    std::fs::create_dir_all(pki.join("client")).unwrap();
    std::fs::create_dir_all(pki.join("nocert")).unwrap();
    let sh = |script: &str| run(Command::new("sh").arg("-ec").arg(script).current_dir(&pki));
    sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout ca-key.pem -out ca-cert.pem -days 2 \
        -subj '/CN=raidlab test CA' -addext basicConstraints=critical,CA:TRUE \
        -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
        openssl req -newkey rsa:2048 -nodes -keyout server-key.pem -out server.csr -subj /CN=localhost 2>/dev/null
        printf 'subjectAltName=DNS:localhost\\nextendedKeyUsage=serverAuth\\nbasicConstraints=CA:FALSE\\n' > server.ext
        openssl x509 -req -in server.csr -CA ca-cert.pem -CAkey ca-key.pem -CAcreateserial \
            -out server-cert.pem -days 2 -extfile server.ext 2>/dev/null
        openssl req -newkey rsa:2048 -nodes -keyout client/client-key.pem -out client.csr -subj /CN=client 2>/dev/null
        printf 'extendedKeyUsage=clientAuth\\nbasicConstraints=CA:FALSE\\n' > client.ext
        openssl x509 -req -in client.csr -CA ca-cert.pem -CAkey ca-key.pem -CAcreateserial \
            -out client/client-cert.pem -days 2 -extfile client.ext 2>/dev/null
        cp ca-cert.pem client/ && cp ca-cert.pem nocert/");
    pki
}

#[test]
fn starttls_required_with_client_certificates() {
    if !tools("NBD over TLS", &["openssl", "nbdinfo", "nbdcopy"]) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let pki = make_pki(d.path());
    let members = create(d.path(), "6", &["m0", "m1", "m2", "m3", "m4"], "16M");
    let sock = d.path().join("s.sock");
    let p = |f: &str| pki.join(f).to_str().unwrap().to_string();
    let srv = Serve::start(
        &sock,
        &[
            "-N",
            "t",
            "--tls-cert",
            &p("server-cert.pem"),
            "--tls-key",
            &p("server-key.pem"),
            "--tls-client-ca",
            &p("ca-cert.pem"),
            "--tls-require",
        ],
        &members,
    );
    let tls_uri = |certs: &str| {
        format!(
            "nbds+unix:///t?socket={}&tls-certificates={}",
            sock.display(),
            pki.join(certs).display()
        )
    };
    let info = run(Command::new("nbdinfo").arg(tls_uri("client")));
    assert!(info.contains("with TLS"), "{info}");
    assert!(
        info.contains(&format!("export-size: {}", 3 * (15 << 20))),
        "{info}"
    );
    // Many requests in flight through the one TLS session, both directions.
    let input = d.path().join("in.bin");
    let data = random_file(&input, 12 << 20, 7);
    run(Command::new("nbdcopy").arg(&input).arg(tls_uri("client")));
    let back = d.path().join("back.bin");
    run(Command::new("nbdcopy").arg(tls_uri("client")).arg(&back));
    assert!(
        std::fs::read(&back).unwrap()[..data.len()] == data[..],
        "TLS round trip differs"
    );
    // Refused: a client that does not upgrade, and one without a certificate.
    let plain = Command::new("nbdinfo").arg(srv.uri("t")).output().unwrap();
    assert!(!plain.status.success(), "a plaintext client was served");
    let nocert = Command::new("nbdinfo")
        .arg(tls_uri("nocert"))
        .output()
        .unwrap();
    assert!(
        !nocert.status.success(),
        "a client without a certificate was served"
    );
    let err = srv.stop();
    assert!(err.contains("TLS handshake failed"), "{err}");
    check_clean(&members);
}

/// Run `raidlab ARGS...`, returning (success, stdout + stderr).
fn raidlab(args: &[&str], members: &[PathBuf]) -> (bool, String) {
    let out = Command::new(bin())
        .args(args)
        .args(members)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// fio's nbd engine writing with crc32c verification blocks while members of
/// the served array are failed, spares added and rebuilt (the management verbs
/// reach the server over its control socket): no verify error, a second pass
/// verifies everything again on the rebuilt array, and `check` is clean.
#[test]
fn live_failure_and_rebuild_under_fio_verify() {
    if !tools("live failure under fio", &["fio"]) {
        return;
    }
    for (level, n, victims) in [("5", 4, &["m1"][..]), ("6", 5, &["m1", "m3"][..])] {
        let d = tempfile::tempdir().unwrap();
        let names = ["m0", "m1", "m2", "m3", "m4"];
        let members = create(d.path(), level, &names[..n], "40M");
        let sock = d.path().join("s.sock");
        let srv = Serve::start(&sock, &["-N", "a"], &members);
        let fio = |extra: &[&str]| {
            let mut c = Command::new("fio");
            c.args([
                "--name=live",
                "--ioengine=nbd",
                "--size=24M",
                "--rw=randwrite",
                "--bs=16k",
                "--iodepth=16",
                "--verify=crc32c",
                "--verify_fatal=1",
                "--verify_state_save=0",
                "--randseed=7",
            ])
            .arg(format!("--uri={}", srv.uri("a")))
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
            c
        };
        // Writes paced to last about four seconds, then the verify pass.
        let allocated = || -> u64 {
            use std::os::unix::fs::MetadataExt;
            members
                .iter()
                .map(|m| std::fs::metadata(m).map(|md| md.blocks()).unwrap_or(0))
                .sum()
        };
        let before = allocated();
        let writer = fio(&["--do_verify=1", "--rate=6m"]).spawn().unwrap();
        // The members fail while fio writes: wait until its writes reach the
        // (sparse) members, not for a guessed time.
        let t = Instant::now();
        while allocated() == before {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "fio's writes never reached the members"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let label = format!("RAID {level}");
        for v in victims {
            let (ok, out) = raidlab(
                &["fail", "--member", &d.path().join(v).display().to_string()],
                &members,
            );
            assert!(ok, "{label}: fail {v}: {out}");
            assert!(out.contains("marked faulty"), "{label}: {out}");
        }
        // One member more than the level survives is refused, changing nothing.
        let last = names[..n].iter().find(|m| !victims.contains(m)).unwrap();
        let (ok, out) = raidlab(
            &[
                "fail",
                "--member",
                &d.path().join(last).display().to_string(),
            ],
            &members,
        );
        assert!(!ok && out.contains("unable to serve"), "{label}: {out}");
        let (_, detail) = raidlab(&["detail"], &members);
        assert!(
            detail.contains("degraded") && detail.contains("Served By"),
            "{label}: {detail}"
        );
        // fio's 16K writes went through the stripe cache (held, merged or
        // written out by age) while members failed under them.
        let cache = detail
            .lines()
            .find(|l| l.contains("Stripe Cache"))
            .unwrap_or_else(|| panic!("{label}: no stripe cache in detail: {detail}"));
        assert!(cache.contains("64 stripes, hold 20 ms"), "{label}: {cache}");
        assert!(!cache.contains(" 0 partial (0 by age"), "{label}: {cache}");
        // A spare per failed member, each rebuilt while fio writes/verifies.
        for (k, _) in victims.iter().enumerate() {
            let spare = d.path().join(format!("spare{k}"));
            let add = Command::new(bin())
                .args(["add", "--member-size", "40M", "--max-rate", "12M", "--new"])
                .arg(&spare)
                .args(&members)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            // `detail` shows the rebuild's progress meanwhile.
            let t = Instant::now();
            let mut seen = false;
            while t.elapsed() < Duration::from_secs(20) && !seen {
                let (_, out) = raidlab(&["detail"], &members);
                seen = out.contains("Rebuild Status") && out.contains("% complete");
                std::thread::sleep(Duration::from_millis(100));
            }
            let out = add.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{label}: add: {text}");
            assert!(text.contains("complete"), "{label}: {text}");
            assert!(seen, "{label}: detail never showed the rebuild");
        }
        let out = writer.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && text.contains("err= 0"),
            "{label}: fio:\n{text}"
        );
        assert!(!text.contains("verify:"), "{label}: verify error:\n{text}");
        // Everything again, now that every role is back in service.
        let out = fio(&["--verify_only"]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && text.contains("err= 0"),
            "{label}: verify_only:\n{text}"
        );
        assert!(!text.contains("verify:"), "{label}: verify error:\n{text}");
        let (_, detail) = raidlab(&["detail", "--json"], &members);
        let v: serde_json::Value = serde_json::from_str(&detail).unwrap();
        assert_eq!(
            v["missing_roles"],
            serde_json::json!([]),
            "{label}: {detail}"
        );
        // Checked live, then stopped with `raidlab stop` and checked offline.
        let (ok, out) = raidlab(&["check"], &members);
        assert!(ok && out.contains("mismatch_cnt: 0"), "{label}: {out}");
        let (ok, out) = raidlab(&["stop"], &members);
        assert!(ok, "{label}: stop: {out}");
        let mut all = members.clone();
        all.extend((0..victims.len()).map(|k| d.path().join(format!("spare{k}"))));
        drop(srv);
        check_clean(&all);
    }
}

/// An NBD port in use stops `serve` before any array is started: nothing on
/// the members changes (it used to start every array, mark it dirty, fail
/// to listen, and stop it again, moving the superblocks' event counts).
#[test]
fn an_nbd_port_in_use_stops_serve_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let members = create(dir.path(), "5", &["m0", "m1", "m2"], "8M");
    let before: Vec<Vec<u8>> = members.iter().map(|m| std::fs::read(m).unwrap()).collect();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = Command::new(bin())
        .args(["serve", "--tcp", "--port", &port])
        .args(&members)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "serve on a port in use succeeded: {err}"
    );
    assert!(err.contains("cannot listen on 127.0.0.1:"), "{err}");
    for (m, b) in members.iter().zip(&before) {
        assert!(
            std::fs::read(m).unwrap() == *b,
            "{} changed although serve could not listen: {err}",
            m.display()
        );
    }
}

/// SIGTERM sent the moment the socket appears (as a test harness, a client
/// or systemd may) is a clean stop: serve exits 0 and the array is clean.
/// The socket is bound before the arrays start; the handler used to be
/// installed after them, so such a signal killed serve with the array dirty.
#[test]
fn sigterm_as_soon_as_the_socket_appears_is_a_clean_stop() {
    let dir = tempfile::tempdir().unwrap();
    let members = create(dir.path(), "5", &["m0", "m1", "m2", "m3"], "16M");
    for round in 0..3 {
        let sock = dir.path().join(format!("s{round}.sock"));
        let mut child = Command::new(bin())
            .arg("serve")
            .arg("--socket")
            .arg(&sock)
            .args(&members)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start raidlab serve");
        let t = Instant::now();
        while !sock.exists() {
            assert!(
                child.try_wait().unwrap().is_none(),
                "serve exited before binding its socket"
            );
            assert!(t.elapsed() < Duration::from_secs(60), "no socket in 60 s");
            std::thread::sleep(Duration::from_micros(200));
        }
        // SAFETY: kill has no memory-safety preconditions; the pid is our
        // child, not yet reaped, so it cannot name another process.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let st = child.wait().unwrap();
        assert!(
            st.success(),
            "round {round}: serve exited {st} on an early SIGTERM:\n{err}"
        );
        check_clean(&members);
    }
}

/// A mistake in a later export stops `serve` before any export is started:
/// the first export's members are unchanged byte for byte (it used to be
/// started, marked dirty, and dropped, owing a resync at its next start).
#[test]
fn a_bad_second_export_stops_serve_before_the_first_is_started() {
    let dir = tempfile::tempdir().unwrap();
    let members = create(dir.path(), "5", &["m0", "m1", "m2"], "8M");
    let other = create(dir.path(), "1", &["o0", "o1"], "8M");
    let before: Vec<Vec<u8>> = members.iter().map(|m| std::fs::read(m).unwrap()).collect();
    let list = |ms: &[PathBuf]| {
        ms.iter()
            .map(|m| format!("{:?}", m.display().to_string()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let cases = [
        (
            format!(
                "members = [{}, \"{}/gone.img\"]",
                list(&other[..1]),
                dir.path().display()
            ),
            "gone.img",
        ),
        (
            format!("members = [{}]", list(&members[..1])),
            "used by export",
        ),
        (
            format!(
                "file = {:?}",
                dir.path().join("nope.img").display().to_string()
            ),
            "nope.img",
        ),
    ];
    for (second, says) in cases {
        let config = dir.path().join("serve.toml");
        std::fs::write(
            &config,
            format!(
                "[[export]]\nname = \"a\"\nmembers = [{}]\n\n[[export]]\nname = \"b\"\n{second}\n",
                list(&members)
            ),
        )
        .unwrap();
        let out = Command::new(bin())
            .args(["serve", "--socket"])
            .arg(dir.path().join("s.sock"))
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "serve with a bad export succeeded: {err}"
        );
        for (m, b) in members.iter().zip(&before) {
            assert!(
                std::fs::read(m).unwrap() == *b,
                "{} changed although serve refused export b ({second}): {err}",
                m.display()
            );
        }
        assert!(err.contains(says), "{second}: {err}");
        assert!(err.contains("nothing was started"), "{second}: {err}");
        assert!(!err.contains("listening on"), "{second}: {err}");
    }
}
