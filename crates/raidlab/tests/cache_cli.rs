//! `raidlab cache`, offline on files, run as a user would: create, detail, set,
//! flush, detach on a plain file and on a RAID 5; the refusals, which must leave
//! the devices as they were; and a write-back cache whose device is lost.

use assert_cmd::Command;
use predicates::prelude::*;
use raidlab_cache::{examine, CachedVolume};
use raidlab_core::Volume;
use raidlab_devices::{FileVolume, OpenMode, SystemClock};
use std::path::Path;
use std::sync::Arc;

fn raidlab(dir: &Path) -> Command {
    let mut c = Command::cargo_bin("raidlab").unwrap();
    c.current_dir(dir);
    c
}

fn files(dir: &Path) -> (Vec<u8>, Vec<u8>) {
    (
        std::fs::read(dir.join("cache.img")).unwrap_or_default(),
        std::fs::read(dir.join("origin.img")).unwrap(),
    )
}

fn setup(mode: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("origin.img"), vec![0x11u8; 8 << 20]).unwrap();
    std::fs::write(d.join("cache.img"), vec![0u8; 2 << 20]).unwrap();
    raidlab(d)
        .args([
            "cache",
            "create",
            "--cache",
            "cache.img",
            "--plain",
            "origin.img",
        ])
        .args(["--block", "4K", "--mode", mode])
        .assert()
        .success()
        .stdout(predicate::str::contains("created a ").and(predicate::str::contains(mode)));
    dir
}

fn detail(dir: &Path) -> serde_json::Value {
    let out = raidlab(dir)
        .args(["cache", "detail", "--cache", "cache.img", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Write `blocks` 4 KiB blocks of 0xd0.. through the cache with the library,
/// as a server would, and stop cleanly.
fn write_dirty(dir: &Path, blocks: &[u64]) {
    let cache = FileVolume::open(&dir.join("cache.img"), OpenMode::ReadWrite).unwrap();
    let origin = FileVolume::open(&dir.join("origin.img"), OpenMode::ReadWrite).unwrap();
    let id = examine(&cache).unwrap().origin_id;
    let v = CachedVolume::open(cache, origin, id, Arc::new(SystemClock::default())).unwrap();
    for &b in blocks {
        v.write_at(&[0xd0 + b as u8; 4096], b * 4096).unwrap();
    }
    v.flush().unwrap();
    v.shutdown().unwrap();
}

#[test]
fn create_detail_set_flush_detach_on_a_file() {
    let dir = setup("writeback");
    let d = dir.path();
    let j = detail(d);
    assert_eq!(j["mode"], "writeback");
    assert_eq!(j["block_size"], 4096);
    assert_eq!(j["cache_blocks"], 256);
    assert_eq!(j["stopped_cleanly"], true);
    write_dirty(d, &[3, 4, 9]);
    let j = detail(d);
    assert_eq!(
        (j["dirty_blocks"].as_u64(), j["occupied_blocks"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(j["dirty_bytes"], 3 * 4096);
    raidlab(d)
        .args(["cache", "detail", "--cache", "cache.img"])
        .assert()
        .success()
        .stdout(predicate::str::contains("dirty : 3 blocks"));
    // The origin does not have the data until it is written back.
    assert_eq!(files(d).1[3 * 4096], 0x11);
    raidlab(d)
        .args([
            "cache",
            "flush",
            "--cache",
            "cache.img",
            "--plain",
            "origin.img",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("wrote 3 dirty block(s)"));
    let origin = files(d).1;
    assert!(origin[3 * 4096..4 * 4096].iter().all(|&b| b == 0xd3));
    assert!(origin[9 * 4096..10 * 4096].iter().all(|&b| b == 0xd9));
    assert_eq!(detail(d)["dirty_blocks"], 0);
    raidlab(d)
        .args([
            "cache",
            "set",
            "--cache",
            "cache.img",
            "--plain",
            "origin.img",
        ])
        .args(["--mode", "writearound", "--dirty-target", "30", "--json"])
        .assert()
        .success();
    let j = detail(d);
    assert_eq!(
        (j["mode"].as_str(), j["dirty_target_pct"].as_u64()),
        (Some("writearound"), Some(30))
    );
    raidlab(d)
        .args([
            "cache",
            "detach",
            "--cache",
            "cache.img",
            "--plain",
            "origin.img",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("complete on its own"));
    let j = detail(d);
    assert_eq!(
        (j["state"].as_str(), j["occupied_blocks"].as_u64()),
        (Some("detached"), Some(0))
    );
}

fn stats(dir: &Path, extra: &[&str]) -> serde_json::Value {
    let out = raidlab(dir)
        .args(["cache", "stats", "--cache", "cache.img", "--json"])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn stats_add_up_over_runs_until_reset() {
    let dir = setup("writeback");
    let d = dir.path();
    let j = stats(d, &[]);
    assert_eq!(
        (j["write_requests"].as_u64(), j["read_requests"].as_u64()),
        (Some(0), Some(0))
    );
    write_dirty(d, &[0, 1]);
    let j = stats(d, &[]);
    assert_eq!(j["write_misses"], 2);
    assert_eq!(j["dirty_blocks"], 2);
    assert_eq!(j["dirty_bytes"], 8192);
    assert_eq!(j["occupied_blocks"], 2);
    assert_eq!(j["counters_from"], "saved");
    // A second run: block 1 is a hit now, block 2 a miss; the counters add up.
    write_dirty(d, &[1, 2]);
    let j = stats(d, &[]);
    assert_eq!(
        (j["write_misses"].as_u64(), j["write_hits"].as_u64()),
        (Some(3), Some(1))
    );
    assert_eq!(j["write_requests"], 4);
    raidlab(d)
        .args(["cache", "stats", "--cache", "cache.img"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("writes : 4 request(s): 1 hit (25.0%), 0 partial hit, 3 miss")
                .and(predicate::str::contains("3 dirty now")),
        );
    // The reset prints the counters it zeroes, and changes only the superblock.
    let (cache_before, origin_before) = files(d);
    let j = stats(d, &["--reset"]);
    assert_eq!(
        (j["write_misses"].as_u64(), j["reset"].as_bool()),
        (Some(3), Some(true))
    );
    let (cache_after, origin_after) = files(d);
    assert_eq!(origin_after, origin_before);
    assert_eq!(cache_after[8192..], cache_before[8192..]);
    assert_ne!(cache_after[..8192], cache_before[..8192]);
    let j = stats(d, &[]);
    assert_eq!(
        (j["write_requests"].as_u64(), j["dirty_blocks"].as_u64()),
        (Some(0), Some(3))
    );
    // Flush cleans through the cache: counted as cleaning.
    raidlab(d)
        .args([
            "cache",
            "flush",
            "--cache",
            "cache.img",
            "--plain",
            "origin.img",
        ])
        .assert()
        .success();
    let j = stats(d, &[]);
    assert_eq!(
        (j["cleaned_blocks"].as_u64(), j["dirty_blocks"].as_u64()),
        (Some(3), Some(0))
    );
}

#[test]
fn attach_binds_the_detached_cache_to_its_own_origin_only() {
    let dir = setup("writeback");
    let d = dir.path();
    write_dirty(d, &[4]);
    std::fs::write(d.join("other.img"), vec![0u8; 8 << 20]).unwrap();
    let at = |what: &str, origin: &str| -> Vec<String> {
        ["cache", what, "--cache", "cache.img", "--plain", origin]
            .map(String::from)
            .to_vec()
    };
    // Attached already: to its origin, nothing to do; to another, refused.
    raidlab(d)
        .args(at("attach", "origin.img"))
        .assert()
        .success()
        .stdout(predicate::str::contains("attached to origin.img already"));
    let before = files(d);
    raidlab(d)
        .args(at("attach", "other.img"))
        .assert()
        .failure()
        .stderr(predicate::str::contains("belongs to another origin"));
    assert!(files(d) == before);
    raidlab(d)
        .args(at("detach", "origin.img"))
        .assert()
        .success()
        .stdout(predicate::str::contains("wrote back 1 dirty block(s)"));
    // Detached twice: nothing changes.
    let before = files(d);
    raidlab(d)
        .args(at("detach", "origin.img"))
        .assert()
        .success()
        .stdout(predicate::str::contains("detached from origin.img already"));
    assert!(files(d) == before);
    // A detached cache is not used, by any verb that would use it.
    for verb in ["flush", "set"] {
        let mut args = at(verb, "origin.img");
        if verb == "set" {
            args.extend(["--mode", "writethrough"].map(String::from));
        }
        raidlab(d)
            .args(args)
            .assert()
            .failure()
            .stderr(predicate::str::contains("raidlab cache attach"));
        assert!(files(d) == before, "{verb} changed a device");
    }
    // The origin is used on its own meanwhile.
    let mut origin = before.1.clone();
    origin[4 * 4096..5 * 4096].fill(0x77);
    std::fs::write(d.join("origin.img"), &origin).unwrap();
    let before = files(d);
    // Another origin, a resized origin, something that holds no cache: refused,
    // nothing written.
    raidlab(d)
        .args(at("attach", "other.img"))
        .assert()
        .failure()
        .stderr(
            predicate::str::contains("stays detached")
                .and(predicate::str::contains("belongs to another origin")),
        );
    assert!(files(d) == before);
    std::fs::copy(d.join("origin.img"), d.join("copy.img")).unwrap();
    raidlab(d)
        .args(at("attach", "copy.img"))
        .assert()
        .failure()
        .stderr(predicate::str::contains("another origin"));
    assert!(files(d) == before);
    raidlab(d)
        .args([
            "cache",
            "attach",
            "--cache",
            "other.img",
            "--plain",
            "origin.img",
        ])
        .assert()
        .failure()
        .stderr(predicate::str::contains("nothing to attach on other.img"));
    assert!(files(d) == before);
    assert!(std::fs::read(d.join("other.img"))
        .unwrap()
        .iter()
        .all(|&b| b == 0));
    let f = std::fs::OpenOptions::new()
        .append(true)
        .open(d.join("origin.img"))
        .unwrap();
    f.set_len((8 << 20) + 4096).unwrap();
    let grown = files(d);
    raidlab(d)
        .args(at("attach", "origin.img"))
        .assert()
        .failure()
        .stderr(predicate::str::contains("recorded 8388608"));
    assert!(files(d) == grown);
    f.set_len(8 << 20).unwrap();

    raidlab(d)
        .args(at("attach", "origin.img"))
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "attached the cache on cache.img to origin.img again",
        ));
    let j = detail(d);
    assert_eq!(
        (j["state"].as_str(), j["mode"].as_str()),
        (Some("attached"), Some("writeback"))
    );
    assert_eq!(
        (j["occupied_blocks"].as_u64(), j["dirty_blocks"].as_u64()),
        (Some(0), Some(0))
    );
    // Counters of before the detach are kept until reset.
    assert_eq!(stats(d, &[])["write_misses"], 1);
    // What reads through the cache now is the origin's newer data.
    let cache = FileVolume::open(&d.join("cache.img"), OpenMode::ReadWrite).unwrap();
    let origin = FileVolume::open(&d.join("origin.img"), OpenMode::ReadWrite).unwrap();
    let id = examine(&cache).unwrap().origin_id;
    let v = CachedVolume::open(cache, origin, id, Arc::new(SystemClock::default())).unwrap();
    let mut buf = vec![0u8; 4096];
    v.read_at(&mut buf, 4 * 4096).unwrap();
    assert!(buf.iter().all(|&b| b == 0x77));
}

#[test]
fn stats_of_something_that_is_no_cache_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("cache.img"), vec![0x42u8; 2 << 20]).unwrap();
    for extra in [&[][..], &["--reset"][..]] {
        raidlab(d)
            .args(["cache", "stats", "--cache", "cache.img"])
            .args(extra)
            .assert()
            .failure()
            .stderr(predicate::str::contains("no raidlab cache superblock"));
    }
    assert!(std::fs::read(d.join("cache.img"))
        .unwrap()
        .iter()
        .all(|&b| b == 0x42));
    raidlab(d)
        .args(["cache", "stats", "--cache", "absent.img"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("absent.img"));
}

#[test]
fn detach_writes_back_first() {
    let dir = setup("writeback");
    let d = dir.path();
    write_dirty(d, &[0, 1]);
    raidlab(d)
        .args([
            "cache",
            "detach",
            "--cache",
            "cache.img",
            "--plain",
            "origin.img",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("wrote back 2 dirty block(s)"));
    assert!(files(d).1[..4096].iter().all(|&b| b == 0xd0));
}

#[test]
fn refusals_change_nothing() {
    let dir = setup("writeback");
    let d = dir.path();
    write_dirty(d, &[5]);
    std::fs::write(d.join("other.img"), vec![0u8; 8 << 20]).unwrap();
    let before = files(d);
    let refuse = |args: &[&str], says: &str| {
        raidlab(d)
            .args(args)
            .assert()
            .failure()
            .stderr(predicate::str::contains(says));
        assert!(files(d) == before, "{args:?} changed a device");
    };
    refuse(
        &[
            "cache",
            "create",
            "--cache",
            "cache.img",
            "--plain",
            "origin.img",
        ],
        "1 dirty block(s)",
    );
    refuse(
        &[
            "cache",
            "flush",
            "--cache",
            "cache.img",
            "--plain",
            "other.img",
        ],
        "belongs to another origin",
    );
    refuse(
        &[
            "cache",
            "create",
            "--cache",
            "other.img",
            "--plain",
            "origin.img",
            "--block",
            "3K",
        ],
        "not a power of two",
    );
    refuse(
        &[
            "cache",
            "set",
            "--cache",
            "cache.img",
            "--plain",
            "origin.img",
        ],
        "nothing to set",
    );
    std::fs::write(d.join("small.img"), vec![0u8; 1 << 20]).unwrap();
    refuse(
        &[
            "cache",
            "create",
            "--cache",
            "small.img",
            "--plain",
            "origin.img",
        ],
        "too small",
    );
    assert!(std::fs::read(d.join("small.img"))
        .unwrap()
        .iter()
        .all(|&b| b == 0));
    // A grown origin is not the one the cache recorded.
    let f = std::fs::OpenOptions::new()
        .append(true)
        .open(d.join("origin.img"))
        .unwrap();
    f.set_len((8 << 20) + 4096).unwrap();
    let grown = files(d);
    raidlab(d)
        .args([
            "cache",
            "flush",
            "--cache",
            "cache.img",
            "--plain",
            "origin.img",
        ])
        .assert()
        .failure()
        .stderr(predicate::str::contains("recorded 8388608"));
    assert!(files(d) == grown);
}

#[test]
fn a_lost_write_back_cache_device_is_refused_unless_forced() {
    // The table unreadable, the superblock still says how much was dirty.
    let dir = setup("writeback");
    let d = dir.path();
    write_dirty(d, &[1, 2, 3]);
    let mut cache = std::fs::read(d.join("cache.img")).unwrap();
    cache[8192 + 40] ^= 0xff;
    std::fs::write(d.join("cache.img"), &cache).unwrap();
    let detach = [
        "cache",
        "detach",
        "--cache",
        "cache.img",
        "--plain",
        "origin.img",
    ];
    raidlab(d)
        .args(detach)
        .assert()
        .failure()
        .stderr(predicate::str::contains("recorded 3 dirty block(s) (12K)"));
    assert_eq!(std::fs::read(d.join("cache.img")).unwrap(), cache);
    raidlab(d)
        .args(detach)
        .arg("--force")
        .assert()
        .success()
        .stderr(predicate::str::contains("lost"));
    assert!(examine(&FileVolume::open(&d.join("cache.img"), OpenMode::ReadOnly).unwrap()).is_err());

    // The device gone altogether: how much was dirty is unknown.
    let dir = setup("writeback");
    let d = dir.path();
    std::fs::remove_file(d.join("cache.img")).unwrap();
    raidlab(d)
        .args(detach)
        .assert()
        .failure()
        .stderr(predicate::str::contains("cannot be read"));
    raidlab(d).args(detach).arg("--force").assert().success();

    // Write-through: the origin is complete; no force needed.
    let dir = setup("writethrough");
    let d = dir.path();
    let mut cache = std::fs::read(d.join("cache.img")).unwrap();
    cache[8192 + 40] ^= 0xff;
    std::fs::write(d.join("cache.img"), &cache).unwrap();
    raidlab(d).args(detach).assert().success();
}

#[test]
fn a_cache_in_front_of_a_raid5_named_by_its_members() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let members = ["m0", "m1", "m2"];
    raidlab(d)
        .args([
            "create",
            "--level",
            "5",
            "--chunk",
            "16K",
            "--member-size",
            "4M",
        ])
        .args(members)
        .assert()
        .success();
    std::fs::write(d.join("cache.img"), vec![0u8; 2 << 20]).unwrap();
    raidlab(d)
        .args([
            "cache",
            "create",
            "--cache",
            "cache.img",
            "--block",
            "16K",
            "--mode",
            "writeback",
        ])
        .args(members)
        .assert()
        .success()
        .stdout(predicate::str::contains("for array "));
    let j = detail(d);
    assert!(
        j["origin_identity"].as_str().unwrap().starts_with("array "),
        "{j}"
    );
    // A different array is another origin.
    let others = ["o0", "o1", "o2"];
    raidlab(d)
        .args([
            "create",
            "--level",
            "5",
            "--chunk",
            "16K",
            "--member-size",
            "4M",
        ])
        .args(others)
        .assert()
        .success();
    raidlab(d)
        .args(["cache", "flush", "--cache", "cache.img"])
        .args(others)
        .assert()
        .failure()
        .stderr(predicate::str::contains("another origin"));
    raidlab(d)
        .args(["cache", "detach", "--cache", "cache.img"])
        .args(members)
        .assert()
        .success();
    // The array is left clean and complete.
    let out = raidlab(d)
        .args(["detail", "--json"])
        .args(members)
        .output()
        .unwrap();
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["state"], "clean");
}

/// A cache verb killed while it writes back into an array resyncs only the
/// chunks it was writing, not the whole array: the verbs start and stop the
/// origin through the one lifecycle, which writes the dirty mark before the
/// array takes its copy of the bitmap. (They built the array first: its
/// bitmap copy carried the old event count onto the disk with its first
/// write, and after a crash the bitmap looked stale, so every chunk was
/// owed a resync.)
#[test]
fn a_cache_flush_killed_mid_way_leaves_the_origins_bitmap_usable() {
    use raidlab_raid::assemble::{Assembly, Device};
    use raidlab_raid::lifecycle::{StartOptions, Started};
    use std::io::Read;

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let members = ["m0", "m1"];
    raidlab(d)
        .args(["create", "--level", "1", "--member-size", "160M"])
        .args(["--consistency-policy", "bitmap", "--bitmap-chunk", "1M"])
        .args(members)
        .assert()
        .success();
    let chunks = |d: &Path| -> (u64, u64) {
        let out = raidlab(d)
            .args(["detail", "--json"])
            .args(members)
            .output()
            .unwrap();
        let j: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        let size = j["array_size_bytes"].as_u64().unwrap_or(0);
        (j["bitmap_dirty_chunks"].as_u64().unwrap_or(u64::MAX), size)
    };
    std::fs::write(d.join("cache.img"), vec![0u8; 160 << 20]).unwrap();
    raidlab(d)
        .args(["cache", "create", "--cache", "cache.img", "--block", "64K"])
        .args(["--mode", "writeback", "--dirty-target", "100"])
        .args(["--sequential-cutoff", "0"])
        .args(members)
        .assert()
        .success();

    // 128 MiB made dirty in the cache with the library, as a server would,
    // and a clean stop of the array and the cache.
    let devices: Vec<Device> = members
        .iter()
        .map(|m| Device {
            path: m.to_string(),
            volume: Arc::new(FileVolume::open(&d.join(m), OpenMode::ReadWrite).unwrap()),
        })
        .collect();
    let started = Started::start(
        Assembly::assemble(devices).unwrap(),
        StartOptions {
            write: true,
            ..StartOptions::default()
        },
    )
    .unwrap();
    let cache = FileVolume::open(&d.join("cache.img"), OpenMode::ReadWrite).unwrap();
    let id = examine(&cache).unwrap().origin_id;
    let v = CachedVolume::open(
        cache,
        started.array.clone(),
        id,
        Arc::new(SystemClock::default()),
    )
    .unwrap();
    for i in 0..32u64 {
        v.write_at(&vec![i as u8 + 1; 4 << 20], i * (4 << 20))
            .unwrap();
    }
    v.flush().unwrap();
    v.shutdown().unwrap();
    drop(v);
    started.stop().unwrap();
    assert_eq!(chunks(d).0, 0, "the array is clean before the flush");

    // Kill the flush once it has written some blocks back, not all.
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("raidlab"))
        .current_dir(d)
        .args(["cache", "flush", "--cache", "cache.img"])
        .args(members)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 256];
    let killed_at = loop {
        let n = err.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "the flush ended before it wrote anything back: {seen}"
        );
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        let progress = seen.rsplit('\r').find_map(|l| {
            let (done, total) = l.strip_prefix("raidlab: writing back ")?.split_once('/')?;
            let total = total.split_whitespace().next()?;
            Some((done.parse::<u64>().ok()?, total.parse::<u64>().ok()?))
        });
        if let Some((done, total)) = progress.filter(|&(done, _)| done > 0) {
            // SAFETY: none needed; kill(2) on our own child's pid.
            unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
            break (done, total);
        }
    };
    let status = child.wait().unwrap();
    assert!(
        !status.success(),
        "the flush finished before it was killed (at {killed_at:?}); the test needs a larger dirty set"
    );
    let (dirty, size) = chunks(d);
    let all = size.div_ceil(1 << 20);
    // One-MiB chunks; the flush had written at most 128 MiB's worth of them.
    assert!(
        all > 128 && dirty > 0 && dirty <= 128,
        "after the kill at {killed_at:?} blocks, {dirty} bitmap chunk(s) of {all} are owed a resync; \
         a stale bitmap owes them all"
    );
    eprintln!("killed at {killed_at:?} blocks: {dirty} of {all} bitmap chunks owed a resync");
}
