//! The reshapes of `grow`'s table ([`super::cases`]) that raidlab stops
//! part-way where the offline kill and Ctrl-C cases do not reach (issue 36):
//! a reshape walked by `raidlab serve` (asked for by `raidlab grow` over the
//! control socket) whose server is killed -9 or stopped cleanly (SIGTERM)
//! mid-walk, and a reshape of more members and a new chunk at once killed
//! part-way. md must carry each on from the superblocks raidlab left, as it
//! does for the offline cases, and read what raidlab's own `--continue` on
//! a copy reads.
//!
//! * `r5-3to4-served-killed`: a served RAID 5 of 3, 64 KiB chunk,
//!   `--raid-devices 4 --add` at `--max-rate 2M`; an NBD client (qemu-io)
//!   writes 3 MiB at 320 KiB while the walk runs (across its position), then
//!   the server is killed -9; read whole and without member 0;
//! * `r6-4to5-served-stopped`: a served RAID 6 of 4, 64 KiB chunk,
//!   `--raid-devices 5 --add`, the same write, then the server stopped by
//!   SIGTERM (it checkpoints the walk and marks the array clean); read whole
//!   and without members 1 and 4;
//! * `r5-4to5-chunk-killed`: a RAID 5 of 4, 64 KiB chunk, `--raid-devices 5
//!   --add --chunk 128K` offline, killed part-way (SIGKILL); read whole and
//!   without member 2;
//! * `r5-4to5-chunk-served-killed`: the same combined reshape walked by a
//!   server, the same write, the server killed -9; read whole and without
//!   member 3;
//! * `r5-3to4-served-end-killed`, `r6-4to5-served-end-killed`: a served
//!   RAID 5 of 3 onto a fourth member and a RAID 6 of 4 onto a fifth, the
//!   walk run at full speed and held (`RAIDLAB_TEST_HOLD_RESHAPE_END`, a
//!   test-only hook of the walk) between its commit of the array's end as
//!   the position and the end's commit; the same write then (it goes to
//!   the new geometry everywhere, waiting for nothing), and the server
//!   killed -9 there: the members record the reshape with
//!   `reshape_position` at the new geometry's end (nothing left to walk),
//!   which md must finish (read whole and without member 1; without 0 and
//!   4);
//! * `r10-n2-to-o2-served-killed`: a served RAID 10 near=2 of 4, 64 KiB
//!   chunk, `--layout o2` (md's RAID 10 reshape over the same members, the
//!   data offset moved down), the same write, the server killed -9 mid-walk
//!   (read whole and without roles 0 and 2); `r10-n2-4to5-served-end-killed`:
//!   a served near=2 of 4 onto a fifth member held at its end and killed
//!   there (read whole and without role 1); `r5-5to4-served-shrink-killed`:
//!   a served RAID 5 of 5 (room after the data made offline, `--size 6M`)
//!   shrunk by a member, `--raid-devices 4 --array-size 18M` in one served
//!   grow (md's backward reshape, the data offset moved up), the same write
//!   below the new end, the server killed -9 mid-walk: md is given all five,
//!   carries the backward reshape on and leaves the fifth a spare (read
//!   whole and without member 1). Served RAID 10 restripes were
//!   refused until the sides read first copies only after an unclean stop
//!   (the deterministic fault simulation's loss, mended 2026-12-05).
//!
//! Decides how a served reshape is stopped for md: the server is started
//! with `common::Served` on the case's members (its sockets in a short
//! temporary directory: a socket's path must fit in SUN_LEN), the grow
//! asked of it through that run directory, the client's write made once
//! the walk has moved, and the stop made while the walk still runs (the
//! detail must then say "interrupted reshape", or the case fails rather
//! than testing a finished grow; held at its end, it must say the array's
//! end as the position). It must never let a server outlive its
//! case (dropping `Served` kills it) nor leave the written bytes out of
//! what md must read.

use super::*;
use crate::common::{ServeOptions, Served};
use std::time::{Duration, Instant};

pub(super) fn cases() -> Vec<Grown> {
    vec![
        Grown {
            name: "r5-3to4-served-killed",
            level: 5,
            devices: 3,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--raid-devices", "4", "--add", "NEW"],
            sets: vec![vec![0]],
            interrupt: Some("SERVED-KILL"),
        },
        Grown {
            name: "r6-4to5-served-stopped",
            level: 6,
            devices: 4,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--raid-devices", "5", "--add", "NEW"],
            sets: vec![vec![1, 4]],
            interrupt: Some("SERVED-TERM"),
        },
        // md's one reshape of both (`delta_disks` 1 with `new_chunk`): the
        // position raidlab leaves must be one md takes for the two chunks.
        Grown {
            name: "r5-4to5-chunk-killed",
            level: 5,
            devices: 4,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--raid-devices", "5", "--add", "NEW", "--chunk", "128K"],
            sets: vec![vec![2]],
            interrupt: Some("KILL"),
        },
        Grown {
            name: "r5-4to5-chunk-served-killed",
            level: 5,
            devices: 4,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--raid-devices", "5", "--add", "NEW", "--chunk", "128K"],
            sets: vec![vec![3]],
            interrupt: Some("SERVED-KILL"),
        },
        Grown {
            name: "r5-3to4-served-end-killed",
            level: 5,
            devices: 3,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--raid-devices", "4", "--add", "NEW"],
            sets: vec![vec![1]],
            interrupt: Some("SERVED-END-KILL"),
        },
        Grown {
            name: "r6-4to5-served-end-killed",
            level: 6,
            devices: 4,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &["--raid-devices", "5", "--add", "NEW"],
            sets: vec![vec![0, 4]],
            interrupt: Some("SERVED-END-KILL"),
        },
        Grown {
            name: "r10-n2-to-o2-served-killed",
            level: 10,
            devices: 4,
            create: &["--chunk", "64K", "--layout", "n2"],
            grow_files: false,
            grow: &["--layout", "o2"],
            sets: vec![vec![0, 2]],
            interrupt: Some("SERVED-KILL"),
        },
        Grown {
            name: "r10-n2-4to5-served-end-killed",
            level: 10,
            devices: 4,
            create: &["--chunk", "64K", "--layout", "n2"],
            grow_files: false,
            grow: &["--raid-devices", "5", "--add", "NEW"],
            sets: vec![vec![1]],
            interrupt: Some("SERVED-END-KILL"),
        },
        // md's backward reshape walked by a server: room after the data
        // made offline first (`--size 6M`), then the cut and the count in
        // one served grow.
        Grown {
            name: "r5-5to4-served-shrink-killed",
            level: 5,
            devices: 5,
            create: &["--chunk", "64K"],
            grow_files: false,
            grow: &[
                "--size",
                "6M",
                "THEN",
                "--raid-devices",
                "4",
                "--array-size",
                "18M",
            ],
            sets: vec![vec![1]],
            interrupt: Some("SERVED-KILL"),
        },
    ]
}

/// Where the client writes while the walk runs, and how much: past the
/// first chunk and over the 1 MiB the walk has moved by then, so that the
/// write lands on both sides of the position (a stripe of the new geometry
/// and one of the old) unless the walk outran it.
const WRITE_AT: u64 = 320 * 1024;
const WRITE_LEN: usize = 3 * MIB as usize;
/// How far the walk must have moved before the write: one MiB of the array.
const MOVED: u64 = MIB;

/// `raidlab ARGS` with the case's run directory, where the server's
/// control socket is (md_compat's `raidlab` uses the default one).
fn raidlab_at(run: &Path, args: &[&str]) -> Output {
    Command::new(RAIDLAB)
        .env("RAIDLAB_RUN_DIR", run)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {RAIDLAB}: {e}"))
}

/// A served grow's words: the members of `a` (`grow`, the members, the
/// options, as the offline cases give it), the grow to ask of the server
/// (a new member made as a file of the members' size: the offline grow's
/// `--member-size`, which makes it, is not one a served grow takes), and
/// the members' directory.
fn served_grow<'a>(a: &[&'a str]) -> Result<(Vec<&'a str>, Vec<&'a str>, PathBuf), String> {
    let members: Vec<&str> = a
        .iter()
        .skip(1)
        .take_while(|w| !w.starts_with("--"))
        .copied()
        .collect();
    let dir = Path::new(members[0])
        .parent()
        .ok_or("a member with no directory")?
        .to_path_buf();
    let mut grow: Vec<&str> = Vec::new();
    let mut words = a.iter().copied();
    while let Some(w) = words.next() {
        match w {
            "--member-size" => {
                words.next();
            }
            "--add" => {
                let new = words.next().ok_or("--add with no device")?;
                let f = fs::File::create(new).map_err(|e| format!("{new}: create: {e}"))?;
                f.set_len(SMALL)
                    .map_err(|e| format!("{new}: set_len: {e}"))?;
                grow.extend(["--add", new]);
            }
            w => grow.push(w),
        }
    }
    Ok((members, grow, dir))
}

/// A short directory for a server's sockets: a Unix socket's path must fit
/// in SUN_LEN (108 bytes), which the case's work directory under the
/// repository does not.
fn socket_dir() -> Result<tempfile::TempDir, String> {
    tempfile::Builder::new()
        .prefix("rl-md-")
        .tempdir()
        .map_err(|e| format!("a directory for the server's sockets: {e}"))
}

/// `raidlab` running `grow` against the server of run directory `run`, its
/// output in `log`.
fn spawn_grow(run: &Path, grow: &[&str], log: &Path) -> Result<std::process::Child, String> {
    let out = fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    Command::new(RAIDLAB)
        .env("RAIDLAB_RUN_DIR", run)
        .args(grow)
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .map_err(|e| format!("raidlab grow: {e}"))
}

/// The client's write: [`WRITE_LEN`] bytes (a stretch of `pat` from far
/// past the array, so they differ from what was there) at [`WRITE_AT`]
/// through the NBD socket in `sockets`, then a flush, by qemu-io. Returns
/// where and what it wrote.
fn client_write(sockets: &Path, dir: &Path, pat: &[u8]) -> Result<(u64, Vec<u8>), String> {
    let src = dir.join("client.bin");
    let from = pat.len() - WRITE_LEN;
    let bytes = pat[from..].to_vec();
    fs::write(&src, &bytes).unwrap();
    let uri = format!("nbd+unix:///?socket={}", sockets.join("nbd.sock").display());
    let cmd = format!("write -q -s {} {WRITE_AT} {WRITE_LEN}", src.display());
    let o = Command::new("qemu-io")
        .args(["-f", "raw", "-c", &cmd, "-c", "flush", &uri])
        .output()
        .map_err(|e| format!("qemu-io (qemu-utils) as the NBD client: {e}"))?;
    if !o.status.success() || !o.stderr.is_empty() {
        return Err(format!(
            "qemu-io {cmd} {uri}: exited {}: {}{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    fs::remove_file(&src).ok();
    Ok((WRITE_AT, bytes))
}

/// The grow `a` asked of a server serving the members, at `--max-rate 2M`;
/// once the walk has moved [`MOVED`] a client writes ([`client_write`]);
/// then the server is `how` (`KILL`: kill -9; `TERM`: SIGTERM, a clean
/// stop) while the walk still runs (`END-KILL`: [`killed_at_the_end`]).
/// Requires that the members record an interrupted reshape after it, and
/// returns what the client wrote and where.
pub(super) fn stopped_while_served(
    a: &[&str],
    how: &str,
    pat: &[u8],
) -> Result<(u64, Vec<u8>), String> {
    if how == "END-KILL" {
        return killed_at_the_end(a, pat);
    }
    let (members, mut grow, dir) = served_grow(a)?;
    let short = socket_dir()?;
    let run = short.path().join("run");
    grow.extend(["--max-rate", "2M"]);
    let srv = Served::start(short.path(), &members);
    let log = dir.join("grow.log");
    let mut client = spawn_grow(&run, &grow, &log)?;
    let mut moved = |least: u64| -> Result<u64, String> {
        let t = Instant::now();
        let mut d = vec!["detail", "--json"];
        d.extend(&members);
        loop {
            if let Ok(Some(st)) = client.try_wait() {
                return Err(format!(
                    "the served grow ended ({st}) before the stop: {}",
                    fs::read_to_string(&log).unwrap_or_default()
                ));
            }
            let o = raidlab_at(&run, &d);
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
            let r = &v["served"]["reshape"];
            if !r["error"].is_null() {
                return Err(format!("the served reshape stopped: {r}"));
            }
            if r["running"] == true && r["done"].as_u64().is_some_and(|d| d >= least) {
                return Ok(r["done"].as_u64().unwrap_or(0));
            }
            if t.elapsed() > Duration::from_secs(120) {
                return Err(format!(
                    "the served reshape did not move {least} bytes in 120 s: {}",
                    describe(&d, &o)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let before = moved(MOVED)?;
    let written = client_write(short.path(), &dir, pat)?;
    // Still walking after the write: the stop cuts the walk, not its end.
    let at = moved(0)?;
    match how {
        "KILL" => srv.kill(),
        // A clean stop exits 0 (`Served::stop` asserts it).
        "TERM" => {
            srv.stop();
        }
        other => return Err(format!("no way to stop a server called {other}")),
    }
    let _ = client.wait();
    let text = stopped_detail(&run, &members, &grow)?;
    if !text.contains("interrupted reshape") {
        return Err(format!(
            "the served grow was not stopped part-way by SIG{how} at {at} bytes: {text}"
        ));
    }
    loud(&format!(
        "md_compat: grow: {}: the client wrote {WRITE_LEN} bytes at {WRITE_AT} with the server's walk at {before} array bytes; SIG{how} at {at} or past it: {}",
        dir.file_name().unwrap_or_default().to_string_lossy(),
        reshape_line(&text)
    ));
    Ok(written)
}

/// `raidlab detail` of the members and the grow's new one, from their
/// superblocks (the server is gone).
fn stopped_detail(run: &Path, members: &[&str], grow: &[&str]) -> Result<String, String> {
    let mut d = vec!["detail"];
    d.extend(members);
    if let Some(i) = grow.iter().position(|w| *w == "--add") {
        d.push(grow[i + 1]);
    }
    let o = raidlab_at(run, &d);
    if !o.status.success() {
        return Err(describe(&d, &o));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// The `Reshape` row of a detail's text.
fn reshape_line(text: &str) -> &str {
    text.lines()
        .find(|l| l.trim_start().starts_with("Reshape"))
        .unwrap_or("")
        .trim()
}

/// How long the walk is held at its end: longer than the case needs to
/// see it there, write and kill, so that an end committed meanwhile means
/// the case went wrong (and fails), not that it was slow.
const HOLD_SECS: &str = "120";

/// The grow `a` asked of a server whose walk runs at full speed and is
/// held at its end ([`HOLD_SECS`], the walk's test-only hook): once the
/// server says every byte has moved and its superblocks record the new
/// geometry's end as the position, a client writes ([`client_write`]: the
/// new geometry everywhere by then), the walk still held, and the server
/// is killed -9. Requires that the members then record the reshape with
/// that position, and returns what the client wrote and where.
fn killed_at_the_end(a: &[&str], pat: &[u8]) -> Result<(u64, Vec<u8>), String> {
    let (members, grow, dir) = served_grow(a)?;
    let short = socket_dir()?;
    let run = short.path().join("run");
    let srv = Served::start_env(
        ServeOptions {
            dir: Some(short.path()),
            socket: short.path().join("nbd.sock"),
            args: &members,
            wait_control: true,
        },
        &[("RAIDLAB_TEST_HOLD_RESHAPE_END", HOLD_SECS)],
    );
    let log = dir.join("grow.log");
    let mut client = spawn_grow(&run, &grow, &log)?;
    // Held at the end: the walk done and still running, the server's
    // superblocks at the end (the detail's Reshape row says their
    // position).
    let mut json = vec!["detail", "--json"];
    json.extend(&members);
    let mut plain = vec!["detail"];
    plain.extend(&members);
    let mut held = || -> Result<u64, String> {
        let t = Instant::now();
        loop {
            if let Ok(Some(st)) = client.try_wait() {
                return Err(format!(
                    "the served grow ended ({st}) before the kill: {}",
                    fs::read_to_string(&log).unwrap_or_default()
                ));
            }
            let o = raidlab_at(&run, &json);
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
            let r = &v["served"]["reshape"];
            if !r["error"].is_null() || r["running"] == false {
                return Err(format!("the served reshape is not held at its end: {r}"));
            }
            if let (Some(done), Some(total)) = (r["done"].as_u64(), r["total"].as_u64()) {
                let text = String::from_utf8_lossy(&raidlab_at(&run, &plain).stdout).into_owned();
                if done == total && text.contains(&format!("stopped at byte {total} (")) {
                    return Ok(total);
                }
            }
            if t.elapsed() > Duration::from_secs(60) {
                return Err(format!(
                    "the served reshape did not reach its end in 60 s: {}",
                    describe(&json, &o)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let end = held()?;
    let written = client_write(short.path(), &dir, pat)?;
    // The write went in inside the window, not after the end's commit.
    held()?;
    srv.kill();
    let _ = client.wait();
    let text = stopped_detail(&run, &members, &grow)?;
    if !text.contains("interrupted reshape") || !text.contains(&format!("stopped at byte {end} ("))
    {
        return Err(format!(
            "the members do not record the reshape at its end ({end} bytes) after the kill: {text}"
        ));
    }
    loud(&format!(
        "md_compat: grow: {}: the client wrote {WRITE_LEN} bytes at {WRITE_AT} with the server's walk held at its end; SIGKILL there: {}",
        dir.file_name().unwrap_or_default().to_string_lossy(),
        reshape_line(&text)
    ));
    Ok(written)
}
