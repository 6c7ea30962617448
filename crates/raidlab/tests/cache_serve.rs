//! A cached volume served over NBD, driven by libnbd's nbdcopy and nbdinfo,
//! with the cache verbs acting on the running cache through the control
//! socket: over a plain file (command line) and over a RAID 5 (TOML config,
//! where the array verbs reach the array under the cache). Bad input at start
//! and over the socket is refused with nothing changed on disk.
//!
//! Without the tools and without root a test prints `SKIPPED: <why>`; as root
//! a missing tool is a failure (scripts/test.sh installs libnbd-bin).

mod common;

use common::{ServeOptions, Served};
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_raidlab")
}

fn tools(test: &str) -> bool {
    let missing: Vec<&str> = ["nbdcopy", "nbdinfo"]
        .into_iter()
        .filter(|t| {
            !Command::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .collect();
    if missing.is_empty() {
        return true;
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        !root,
        "{test}: {missing:?} not installed; scripts/test.sh installs libnbd-bin"
    );
    raidlab_core::skip::skip_or_fail(&format!("{test}: {missing:?} not installed"));
    false
}

/// `raidlab` in `dir`, with the run directory (control sockets) of the test.
fn raidlab(dir: &Path) -> Command {
    let mut c = Command::new(bin());
    c.current_dir(dir).env("RAIDLAB_RUN_DIR", dir.join("run"));
    c
}

fn ok(mut c: Command) -> String {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{c:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn fails(mut c: Command, says: &str) -> Output {
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{c:?} succeeded");
    assert!(err.contains(says), "{c:?}: wanted {says:?} in:\n{err}");
    out
}

fn json(c: Command) -> serde_json::Value {
    serde_json::from_str(&ok(c)).unwrap()
}

fn cmd(dir: &Path, args: &[&str]) -> Command {
    let mut c = raidlab(dir);
    c.args(args);
    c
}

/// `raidlab serve --socket dir/nbd.sock ARGS` in `dir`.
fn serve(dir: &Path, args: &[&str]) -> Served {
    Served::start_with(ServeOptions {
        dir: Some(dir),
        socket: dir.join("nbd.sock"),
        args,
        wait_control: false,
    })
}

fn random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn nbdcopy(from: impl AsRef<std::ffi::OsStr>, to: impl AsRef<std::ffi::OsStr>) {
    let mut c = Command::new("nbdcopy");
    c.arg(from).arg(to);
    ok(c);
}

/// A write-back cache of 4K blocks on cache.img in front of origin.img that
/// keeps every write in the cache (no cutoff, 100% dirty target).
fn create_write_back_cache(d: &Path) {
    ok(cmd(
        d,
        &[
            "cache",
            "create",
            "--cache",
            "cache.img",
            "--plain",
            "origin.img",
            "--block",
            "4K",
            "--mode",
            "writeback",
            "--sequential-cutoff",
            "0",
            "--dirty-target",
            "100",
        ],
    ));
}

#[test]
fn a_cache_served_read_only_serves_its_dirty_blocks_and_writes_nothing() {
    if !tools("read-only cache serve") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let old = random(8 << 20, 3);
    std::fs::write(d.join("origin.img"), &old).unwrap();
    std::fs::write(d.join("cache.img"), vec![0u8; 2 << 20]).unwrap();
    create_write_back_cache(d);
    // 512 KiB written back into the cache only (dirty), then a clean stop.
    let data = random(512 << 10, 9);
    std::fs::write(d.join("in.bin"), &data).unwrap();
    let srv = serve(d, &["--cache", "cache.img", "--plain", "origin.img"]);
    nbdcopy(d.join("in.bin"), srv.uri());
    srv.stop();
    let snapshot = || ["origin.img", "cache.img"].map(|f| std::fs::read(d.join(f)).unwrap());
    let before = snapshot();
    assert!(before[0] == old, "write-back reached the origin");

    let srv = serve(
        d,
        &[
            "--cache",
            "cache.img",
            "--plain",
            "origin.img",
            "--read-only",
        ],
    );
    let info = ok({
        let mut c = Command::new("nbdinfo");
        c.arg("--json").arg(srv.uri());
        c
    });
    let info: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(info["exports"][0]["is_read_only"], true, "{info}");
    // Read twice: the dirty blocks come from the cache device, the rest from
    // the origin, and a miss is not promoted (the second read misses again).
    for _ in 0..2 {
        nbdcopy(srv.uri(), d.join("out.bin"));
        let out = std::fs::read(d.join("out.bin")).unwrap();
        assert!(out[..512 << 10] == data[..], "dirty blocks read back wrong");
        assert!(
            out[512 << 10..] == old[512 << 10..],
            "origin blocks read back wrong"
        );
    }
    let s = json(cmd(
        d,
        &["cache", "stats", "--cache", "cache.img", "--json"],
    ));
    assert_eq!(s["dirty_blocks"], 128, "{s}");
    assert_eq!(s["promotions"], 0, "{s}");
    assert!(s["read_hits"].as_u64().unwrap() > 0, "{s}");
    // Writes and changes are refused: by the NBD server, and by the cache
    // through the control socket.
    let mut w = Command::new("nbdcopy");
    w.arg(d.join("in.bin")).arg(srv.uri());
    assert!(
        !w.output().unwrap().status.success(),
        "a write was accepted"
    );
    let on = ["--cache", "cache.img", "--plain", "origin.img"];
    fails(
        cmd(d, &[&["cache", "flush"][..], &on].concat()),
        "read-only",
    );
    let set = [&["cache", "set", "--dirty-target", "5"][..], &on].concat();
    fails(cmd(d, &set), "read-only");
    srv.stop();
    assert!(snapshot() == before, "a read-only serve changed a file");
}

#[test]
fn a_cache_over_a_file_served_and_managed_live_then_detached() {
    if !tools("cache serve over a file") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("origin.img"), vec![0u8; 8 << 20]).unwrap();
    std::fs::write(d.join("cache.img"), vec![0u8; 2 << 20]).unwrap();
    std::fs::write(d.join("other.img"), vec![0u8; 8 << 20]).unwrap();
    create_write_back_cache(d);
    let srv = serve(d, &["--cache", "cache.img", "--plain", "origin.img"]);
    let info = ok({
        let mut c = Command::new("nbdinfo");
        c.arg("--json").arg(srv.uri());
        c
    });
    let info: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(info["exports"][0]["export-size"], 8 << 20);
    assert!(info["exports"][0]["description"]
        .as_str()
        .unwrap()
        .contains("cache cache.img"));

    // 512 KiB of new data: it fits in the cache, and write-back with a 100%
    // dirty target keeps it there, dirty.
    let data = random(512 << 10, 7);
    std::fs::write(d.join("in.bin"), &data).unwrap();
    nbdcopy(d.join("in.bin"), srv.uri());
    let stats = || {
        json(cmd(
            d,
            &["cache", "stats", "--cache", "cache.img", "--json"],
        ))
    };
    let s = stats();
    assert_eq!(s["counters_from"], "live");
    assert!(s["write_requests"].as_u64().unwrap() > 0, "{s}");
    assert_eq!(s["dirty_blocks"], 128, "{s}");
    let origin_now = std::fs::read(d.join("origin.img")).unwrap();
    assert!(
        origin_now[..512 << 10].iter().all(|&b| b == 0),
        "write-back reached the origin"
    );
    // Reads through the served cache see the new data, and count as hits.
    nbdcopy(srv.uri(), d.join("out.bin"));
    assert_eq!(
        std::fs::read(d.join("out.bin")).unwrap()[..512 << 10],
        data[..]
    );
    assert!(stats()["read_hits"].as_u64().unwrap() > 0);
    let j = json(cmd(
        d,
        &["cache", "detail", "--cache", "cache.img", "--json"],
    ));
    assert_eq!(j["served"]["export"], "origin.img");
    assert_eq!(j["dirty_blocks"], 128);

    // Refused over the socket, nothing changed: another origin, nothing to
    // set, attach while served, a cache device nobody serves.
    let before_origin = std::fs::read(d.join("origin.img")).unwrap();
    for verb in ["flush", "detach"] {
        fails(
            cmd(
                d,
                &[
                    "cache",
                    verb,
                    "--cache",
                    "cache.img",
                    "--plain",
                    "other.img",
                ],
            ),
            "served in front of origin.img",
        );
    }
    fails(
        cmd(
            d,
            &[
                "cache",
                "set",
                "--cache",
                "cache.img",
                "--mode",
                "writethrough",
                "m0",
                "m1",
            ],
        ),
        "served in front of origin.img",
    );
    fails(
        cmd(
            d,
            &[
                "cache",
                "attach",
                "--cache",
                "cache.img",
                "--plain",
                "origin.img",
            ],
        ),
        "works offline only",
    );
    assert_eq!(stats()["dirty_blocks"], 128);
    assert_eq!(std::fs::read(d.join("origin.img")).unwrap(), before_origin);

    // set acts on the running cache; stats --reset zeroes its counters.
    ok(cmd(
        d,
        &[
            "cache",
            "set",
            "--cache",
            "cache.img",
            "--plain",
            "origin.img",
            "--dirty-target",
            "90",
        ],
    ));
    let j = json(cmd(
        d,
        &["cache", "detail", "--cache", "cache.img", "--json"],
    ));
    assert_eq!(j["dirty_target_pct"], 90);
    let s = json(cmd(
        d,
        &[
            "cache",
            "stats",
            "--cache",
            "cache.img",
            "--json",
            "--reset",
        ],
    ));
    assert!(s["write_requests"].as_u64().unwrap() > 0 && s["reset"] == true);
    assert_eq!(stats()["write_requests"], 0);

    // Detach while served: every dirty block goes back, the origin is
    // complete, and the export goes on serving the origin itself.
    let out = ok(cmd(
        d,
        &[
            "cache",
            "detach",
            "--cache",
            "cache.img",
            "--plain",
            "origin.img",
        ],
    ));
    assert!(out.contains("wrote back 128 dirty block(s)"), "{out}");
    assert_eq!(
        std::fs::read(d.join("origin.img")).unwrap()[..512 << 10],
        data[..]
    );
    fails(
        cmd(
            d,
            &[
                "cache",
                "flush",
                "--cache",
                "cache.img",
                "--plain",
                "origin.img",
            ],
        ),
        "detached while served",
    );
    let more = random(256 << 10, 9);
    std::fs::write(d.join("more.bin"), &more).unwrap();
    nbdcopy(d.join("more.bin"), srv.uri());
    assert_eq!(
        std::fs::read(d.join("origin.img")).unwrap()[..256 << 10],
        more[..]
    );
    srv.stop();

    // Offline again: detached, and the origin serves alone; attach binds it.
    let j = json(cmd(
        d,
        &["cache", "detail", "--cache", "cache.img", "--json"],
    ));
    assert_eq!(j["state"], "detached");
    ok(cmd(
        d,
        &[
            "cache",
            "attach",
            "--cache",
            "cache.img",
            "--plain",
            "origin.img",
        ],
    ));
    assert_eq!(
        json(cmd(
            d,
            &["cache", "detail", "--cache", "cache.img", "--json"]
        ))["state"],
        "attached"
    );
}

#[test]
fn a_cache_over_a_raid5_from_the_config_file_keeps_counters_across_a_restart() {
    if !tools("cache serve over a RAID 5") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let members = ["m0", "m1", "m2"];
    ok({
        let mut c = cmd(
            d,
            &[
                "create",
                "--level",
                "5",
                "--chunk",
                "16K",
                "--member-size",
                "4M",
            ],
        );
        c.args(members);
        c
    });
    std::fs::write(d.join("cache.img"), vec![0u8; 2 << 20]).unwrap();
    ok({
        let mut c = cmd(
            d,
            &[
                "cache",
                "create",
                "--cache",
                "cache.img",
                "--block",
                "16K",
                "--mode",
                "writeback",
            ],
        );
        c.args(members);
        c
    });
    let m = |p: &str| d.join(p).display().to_string();
    std::fs::write(
        d.join("serve.toml"),
        format!(
            "[[export]]\nname = \"cached\"\nmembers = [{:?}, {:?}, {:?}]\ncache = {:?}\n",
            m("m0"),
            m("m1"),
            m("m2"),
            m("cache.img")
        ),
    )
    .unwrap();
    let srv = serve(d, &["--config", "serve.toml"]);
    let data = random(1 << 20, 3);
    std::fs::write(d.join("in.bin"), &data).unwrap();
    nbdcopy(d.join("in.bin"), srv.export_uri("cached"));
    // The array verbs reach the array under the cache.
    let j = json({
        let mut c = cmd(d, &["detail", "--json"]);
        c.args(members);
        c
    });
    assert_eq!(j["served"]["export"], "cached", "{j}");
    let live = json(cmd(
        d,
        &["cache", "stats", "--cache", "cache.img", "--json"],
    ));
    assert!(live["dirty_blocks"].as_u64().unwrap() > 0, "{live}");
    let err = srv.stop();
    assert!(err.contains("stopping"), "{err}");

    // Stopped cleanly: the counters were saved, the dirty data kept, the
    // array clean; a flush offline makes the array hold the data.
    let saved = json(cmd(
        d,
        &["cache", "stats", "--cache", "cache.img", "--json"],
    ));
    assert_eq!(saved["counters_from"], "saved");
    assert_eq!(saved["stopped_cleanly"], true);
    assert_eq!(saved["write_requests"], live["write_requests"]);
    assert_eq!(saved["dirty_blocks"], live["dirty_blocks"]);
    let j = json({
        let mut c = cmd(d, &["detail", "--json"]);
        c.args(members);
        c
    });
    assert_eq!(j["state"], "clean");
    ok({
        let mut c = cmd(d, &["cache", "flush", "--cache", "cache.img"]);
        c.args(members);
        c
    });
    ok({
        let mut c = cmd(d, &["export", "-o", "out.bin", "--length", "1M"]);
        c.args(members);
        c
    });
    assert_eq!(std::fs::read(d.join("out.bin")).unwrap(), data);
}

#[test]
fn serve_refuses_a_cache_it_cannot_use_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("origin.img"), vec![0x33u8; 8 << 20]).unwrap();
    std::fs::write(d.join("other.img"), vec![0x44u8; 8 << 20]).unwrap();
    std::fs::write(d.join("cache.img"), vec![0u8; 2 << 20]).unwrap();
    std::fs::write(d.join("nocache.img"), vec![0x55u8; 2 << 20]).unwrap();
    ok(cmd(
        d,
        &[
            "cache",
            "create",
            "--cache",
            "cache.img",
            "--plain",
            "origin.img",
            "--block",
            "4K",
        ],
    ));
    let snapshot = || {
        ["origin.img", "other.img", "cache.img", "nocache.img"]
            .map(|f| std::fs::read(d.join(f)).unwrap())
    };
    let before = snapshot();
    let serve = |args: &[&str]| {
        let mut c = cmd(d, &["serve", "--socket"]);
        c.arg(d.join("nbd.sock")).args(args);
        c
    };
    fails(
        serve(&["--cache", "cache.img", "--plain", "other.img"]),
        "belongs to another origin",
    );
    fails(
        serve(&["--cache", "nocache.img", "--plain", "origin.img"]),
        "no usable cache on nocache.img",
    );
    fails(
        serve(&["--cache", "absent.img", "--plain", "origin.img"]),
        "absent.img",
    );
    std::fs::write(
        d.join("bad.toml"),
        "[[export]]\nname = \"x\"\nfile = \"origin.img\"\ncache = 3\n",
    )
    .unwrap();
    fails(serve(&["--config", "bad.toml"]), "bad.toml");
    std::fs::write(
        d.join("good.toml"),
        "[[export]]\nname = \"x\"\nfile = \"origin.img\"\ncache = \"cache.img\"\n",
    )
    .unwrap();
    fails(
        serve(&["--config", "good.toml", "--cache", "cache.img"]),
        "not both",
    );
    assert!(snapshot() == before, "a refused serve changed a file");
    // A cache bound to a file in front of an array: refused before the array
    // is started, so its members are not written either.
    ok(cmd(
        d,
        &[
            "create",
            "--level",
            "5",
            "--chunk",
            "16K",
            "--member-size",
            "4M",
            "m0",
            "m1",
            "m2",
        ],
    ));
    let members = || ["m0", "m1", "m2"].map(|f| std::fs::read(d.join(f)).unwrap());
    let array_before = members();
    fails(
        serve(&["--cache", "cache.img", "m0", "m1", "m2"]),
        "belongs to another origin",
    );
    assert!(
        members() == array_before,
        "a refused serve wrote the array's members"
    );
    // A detached cache is refused too (attach it first).
    ok(cmd(
        d,
        &[
            "cache",
            "detach",
            "--cache",
            "cache.img",
            "--plain",
            "origin.img",
        ],
    ));
    let before = snapshot();
    fails(
        serve(&["--cache", "cache.img", "--plain", "origin.img"]),
        "raidlab cache attach",
    );
    assert!(snapshot() == before);
}
