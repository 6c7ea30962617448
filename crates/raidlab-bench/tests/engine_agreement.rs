//! The engines agree on a buffered file (issue 21): io_uring and the blocking
//! workers run the same jobs on the same page-cache file and must do the same
//! I/O. What is exact is asserted exactly: requests and bytes counted, every
//! request's latency recorded, and for writes which offsets were written, read
//! back from the file itself: each 512-byte block carries the offset and the
//! write serial the engine stamped into it (fio's `scramble_buffers`), so
//! every block must name its own offset and every request one serial of its
//! own (one pass: each block written exactly once, none skipped, none twice).
//!
//! Timing is not asserted in the default suite (it would depend on the load
//! of the machine): the ignored test `default_engine_is_not_the_outlier...`
//! compares throughput and is run by hand on a quiet machine.

use raidlab_bench::target::OpenOptions;
use raidlab_bench::{
    engine, Access, Control, DataFill, Dir, EngineKind, Limit, Measured, Rewrite, Target, Workload,
};
use std::collections::BTreeMap;
use std::path::Path;

const SIZE: u64 = 4 << 20;

fn open_buffered(path: &Path, size: u64) -> Target {
    std::fs::write(path, vec![0u8; size as usize]).unwrap();
    let t = Target::open(
        path.to_str().unwrap(),
        OpenOptions {
            size,
            direct: false,
            writes: true,
            allow_device_writes: false,
        },
    )
    .unwrap();
    assert!(!t.direct, "the file must go through the page cache");
    t
}

fn job(
    access: Access,
    dir: Dir,
    bs: usize,
    threads: usize,
    qd: usize,
    engine: EngineKind,
) -> Workload {
    Workload {
        access,
        dir,
        bs,
        offset: 0,
        size: SIZE,
        threads,
        qd,
        // One pass over the region.
        limit: Limit {
            time: None,
            bytes: Some(SIZE),
        },
        data: DataFill::Zero,
        rewrite: Rewrite::Scramble,
        // Random offsets visit each block once per pass.
        random_map: true,
        seed: 21,
        split: true,
        engine,
    }
}

fn word(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// The write requests the file shows, as serial -> request offsets: each
/// `bs`-aligned request's blocks must all carry one serial and, at the line
/// that serial and the request's offset choose, their own offset.
fn written(data: &[u8], bs: usize) -> Result<BTreeMap<u64, Vec<u64>>, String> {
    let mut out: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (r, req) in data.chunks_exact(bs).enumerate() {
        let at = (r * bs) as u64;
        let serial = word(req, 56);
        let line = ((serial ^ (at >> 9)) & 7) as usize * 64;
        for (i, block) in req.chunks_exact(512).enumerate() {
            let off = at + i as u64 * 512;
            if word(block, 56) != serial {
                return Err(format!(
                    "block at {off} carries serial {} inside a request with serial {serial}",
                    word(block, 56)
                ));
            }
            if word(block, line) != off {
                return Err(format!(
                    "block at {off} says it was written at {} (never written, or written by another request)",
                    word(block, line)
                ));
            }
        }
        out.entry(serial).or_default().push(at);
    }
    Ok(out)
}

/// What a run did that must not depend on the engine.
#[derive(Debug, PartialEq, Eq)]
struct Did {
    read: (u64, u64),
    write: (u64, u64),
    requests_on_disk: Option<usize>,
}

fn did(m: &Measured) -> Did {
    assert_eq!(m.read.hist.len(), m.read.ios, "a latency per read");
    assert_eq!(m.write.hist.len(), m.write.ios, "a latency per write");
    Did {
        read: (m.read.ios, m.read.bytes),
        write: (m.write.ios, m.write.bytes),
        requests_on_disk: None,
    }
}

fn engines() -> Vec<EngineKind> {
    // A kernel or sandbox without io_uring can only run the fallback; CI's
    // machines have io_uring, so there its absence is a failure.
    match io_uring::IoUring::new(2) {
        Ok(_) => vec![EngineKind::Uring, EngineKind::Threads, EngineKind::Auto],
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!(
                "SKIPPED: io_uring is not available here ({e}): only the blocking workers run"
            );
            vec![EngineKind::Threads, EngineKind::Auto]
        }
        Err(e) => panic!("io_uring is not available on this CI machine: {e}"),
    }
}

#[test]
fn engines_do_the_same_io_on_a_buffered_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    // (access, dir, bs, threads, qd)
    let jobs = [
        (Access::Seq, Dir::Write, 64 << 10, 2, 4),
        (Access::Rand, Dir::Write, 4096, 1, 8),
        (Access::Seq, Dir::Read, 64 << 10, 2, 4),
        (Access::Rand, Dir::Read, 4096, 1, 8),
        (Access::Rand, Dir::Read, 4096, 2, 1),
    ];
    let mut by_job: Vec<Vec<(EngineKind, &'static str, Did)>> = Vec::new();
    for &(access, d, bs, threads, qd) in &jobs {
        let mut row = Vec::new();
        for engine in engines() {
            let t = open_buffered(&path, SIZE);
            let w = job(access, d, bs, threads, qd, engine);
            let m = engine::run(&t, &w, &Control::new())
                .unwrap_or_else(|e| panic!("{engine:?} {access:?} {d:?}: {e}"));
            t.volume.flush().unwrap();
            let mut got = did(&m);
            let requests = SIZE / bs as u64;
            let (ios, bytes) = if d == Dir::Write { got.write } else { got.read };
            assert_eq!(
                (ios, bytes),
                (requests, SIZE),
                "{engine:?} {access:?} {d:?} bs {bs} T{threads} Q{qd}: one pass is {requests} requests"
            );
            if d == Dir::Write {
                drop(t);
                let data = std::fs::read(&path).unwrap();
                let reqs = written(&data, bs)
                    .unwrap_or_else(|e| panic!("{engine:?} {access:?} write: {e}"));
                // One serial per request: no request wrote two places, none
                // was written twice.
                assert!(
                    reqs.values().all(|offs| offs.len() == 1),
                    "{engine:?} {access:?}: a serial covers several requests"
                );
                got.requests_on_disk = Some(reqs.len());
                assert_eq!(reqs.len() as u64, ios, "{engine:?} {access:?}");
            }
            row.push((engine, m.engine, got));
        }
        by_job.push(row);
    }
    for (row, &(access, d, bs, threads, qd)) in by_job.iter().zip(&jobs) {
        let (first_engine, _, first) = &row[0];
        for (engine, _, got) in &row[1..] {
            assert_eq!(
                got, first,
                "{access:?} {d:?} bs {bs} T{threads} Q{qd}: {engine:?} against {first_engine:?}"
            );
        }
        // The default on a buffered file is the blocking workers.
        let auto = row.iter().find(|r| r.0 == EngineKind::Auto).unwrap();
        assert_eq!(auto.1, "threads");
        if let Some(u) = row.iter().find(|r| r.0 == EngineKind::Uring) {
            assert_eq!(u.1, "io_uring");
        }
    }
}

/// Throughput of each engine on a buffered file, alternated, median of five:
/// the default engine must be within 15% of the fastest (issue 21: the default
/// must never be the outlier). Timed, so not in the default suite: run it on
/// a quiet machine with
/// `cargo test --release -p raidlab-bench --test engine_agreement -- --ignored --nocapture`.
#[test]
#[ignore = "timed: compares throughput, run by hand on a quiet machine"]
fn default_engine_is_not_the_outlier_on_a_buffered_file() {
    let dir = tempfile::tempdir_in(
        std::env::var("RAIDLAB_BENCH_DIR").unwrap_or_else(|_| "/dev/shm".into()),
    )
    .unwrap();
    let path = dir.path().join("f");
    let size: u64 = 256 << 20;
    let jobs = [
        ("SEQ1M Q8T1 read", Access::Seq, Dir::Read, 1 << 20, 1, 8),
        ("SEQ1M Q1T1 write", Access::Seq, Dir::Write, 1 << 20, 1, 1),
        ("RND4K Q32T1 read", Access::Rand, Dir::Read, 4096, 1, 32),
        ("RND4K Q1T1 read", Access::Rand, Dir::Read, 4096, 1, 1),
    ];
    let t = open_buffered(&path, size);
    let mut failures = Vec::new();
    for (name, access, d, bs, threads, qd) in jobs {
        let mut runs: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for round in 0..5 {
            let mut order = engines();
            if round % 2 == 1 {
                order.reverse();
            }
            for engine in order {
                let mut w = job(access, d, bs, threads, qd, engine);
                w.size = size;
                w.limit = Limit {
                    time: Some(std::time::Duration::from_secs(1)),
                    bytes: None,
                };
                w.random_map = false;
                let m = engine::run(&t, &w, &Control::new()).unwrap();
                let key = match engine {
                    EngineKind::Auto => "default",
                    EngineKind::Uring => "io_uring",
                    EngineKind::Threads => "threads",
                };
                runs.entry(key).or_default().push(m.main().mb_s(m.elapsed));
            }
        }
        let median = |v: &Vec<f64>| {
            let mut v = v.clone();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let best = runs.values().map(median).fold(0.0, f64::max);
        let default = median(&runs["default"]);
        let line: Vec<String> = runs
            .iter()
            .map(|(k, v)| format!("{k} {:.1} MB/s", median(v)))
            .collect();
        println!(
            "{name}: {} -> default/best {:.3}",
            line.join(", "),
            default / best
        );
        if default < 0.85 * best {
            failures.push(format!(
                "{name}: default {default:.1} MB/s against the best {best:.1}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "the default engine is the outlier: {failures:?}"
    );
}
