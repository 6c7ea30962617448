//! Member I/O through io_uring beside the I/O thread pool, side by side in
//! one run: an in-process array (RAID 10 and RAID 5, four members) on
//! member files, 4 KiB random reads and writes at queue depth 1 and 32 (as
//! many client threads, each with one request, as a served array's clients
//! get today: the engine blocks a thread per request while its plan runs).
//! Each cell runs three rounds, io_uring and threads alternating which goes
//! first; the medians and their ratio are printed, with the member requests
//! in flight on average (sampled every 100 µs) at QD 32.
//!
//! Members: files on the disk (direct: every request waits for the device;
//! buffered: the page cache) and files in /dev/shm (memory, buffered).
//!
//! `cargo run --release -p raidlab-raid --example member_io_bench -- [SECONDS] [DISK_DIR] [ONLY]`
//! (ONLY: run only the rows whose "members level test" text contains it).
//! With `MEMBERS=/dev/a,/dev/b,/dev/c,/dev/d` the members are those block
//! devices (direct; their contents are overwritten) instead of files.

use raidlab_core::{SliceVolume, Volume};
use raidlab_devices::uring::in_flight;
use raidlab_devices::{FileVolume, IoMode};
use raidlab_layout::{Geometry, Layout, Level, ParityLayout, Raid10Layout};
use raidlab_raid::exec::{Submission, ThreadPool};
use raidlab_raid::Array;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MEMBER: u64 = 64 << 20;

fn arrays(dir: &std::path::Path, level: Level, io: IoMode) -> (Array, Array) {
    let n = 4;
    let layout = match level {
        Level::Raid10 => Layout::Raid10(Raid10Layout::from_name("n2").unwrap()),
        _ => Layout::Parity(ParityLayout::LeftSymmetric),
    };
    let g = Geometry::new(level, layout, 64 << 10, n, MEMBER).unwrap();
    // Block devices named in MEMBERS (comma-separated) instead of files.
    let given: Vec<String> = std::env::var("MEMBERS")
        .map(|m| m.split(',').map(String::from).collect())
        .unwrap_or_default();
    let vols: Vec<Arc<dyn Volume>> = (0..n)
        .map(|i| {
            if dir.as_os_str() == "MEMBERS" {
                let f = FileVolume::open_io(
                    std::path::Path::new(&given[i]),
                    raidlab_devices::OpenMode::ReadWrite,
                    Some(io),
                )
                .unwrap_or_else(|e| panic!("{e}"));
                return Arc::new(SliceVolume::new(Arc::new(f), 1 << 20, MEMBER).unwrap())
                    as Arc<dyn Volume>;
            }
            let p = dir.join(format!("bench-m{i}"));
            let _ = std::fs::remove_file(&p);
            let f = FileVolume::create_sparse_io(&p, MEMBER + (1 << 20), Some(io))
                .unwrap_or_else(|e| panic!("{e}"));
            Arc::new(SliceVolume::new(Arc::new(f), 1 << 20, MEMBER).unwrap()) as Arc<dyn Volume>
        })
        .collect();
    let with = |s: &Submission| {
        Array::new("bench", g, vols.iter().map(|v| Some(v.clone())).collect())
            .unwrap()
            .with_executor(Arc::new(ThreadPool::with_submission(s)))
    };
    (with(&Submission::uring()), with(&Submission::threads()))
}

/// (IOPS, member requests in flight on average) of `qd` threads doing 4 KiB
/// random `write`s or reads for `secs`.
fn run(a: &Array, qd: usize, write: bool, secs: f64) -> (f64, f64) {
    let stop = AtomicBool::new(false);
    let ops = AtomicU64::new(0);
    let blocks = a.size() / 4096;
    let (mut samples, mut sum) = (0u64, 0i64);
    in_flight::count(true);
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..qd {
            let (stop, ops) = (&stop, &ops);
            s.spawn(move || {
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(t as u64);
                let mut buf = vec![t as u8; 4096];
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let off = rng.gen_range(0..blocks) * 4096;
                    if write {
                        a.write_at(&buf, off).unwrap();
                    } else {
                        a.read_at(&mut buf, off).unwrap();
                    }
                    n += 1;
                }
                ops.fetch_add(n, Ordering::Relaxed);
            });
        }
        let end = start + Duration::from_secs_f64(secs);
        while Instant::now() < end {
            std::thread::sleep(Duration::from_micros(100));
            sum += in_flight::now();
            samples += 1;
        }
        stop.store(true, Ordering::Relaxed);
    });
    let took = start.elapsed().as_secs_f64();
    in_flight::count(false);
    (
        ops.load(Ordering::Relaxed) as f64 / took,
        sum as f64 / samples.max(1) as f64,
    )
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().map_or(2.0, |s| s.parse().expect("SECONDS"));
    let disk = std::path::PathBuf::from(args.next().unwrap_or_else(|| "/var/tmp".into()));
    let only = args.next().unwrap_or_default();
    if let Err(why) = raidlab_devices::uring::probe() {
        eprintln!("io_uring is unavailable here ({why}): nothing to compare");
        std::process::exit(1);
    }
    println!("| members | level | test | io_uring IOPS | threads IOPS | ratio | in flight io_uring / threads |");
    println!("|---|---|---|---:|---:|---:|---|");
    let places = [
        ("disk files, direct", disk.clone(), IoMode::Direct),
        ("disk files, buffered", disk.clone(), IoMode::Buffered),
        ("/dev/shm files", "/dev/shm".into(), IoMode::Buffered),
    ];
    let devices = std::env::var("MEMBERS").is_ok();
    let places: Vec<_> = if devices {
        vec![("block devices, direct", "MEMBERS".into(), IoMode::Direct)]
    } else {
        places.to_vec()
    };
    for (label, dir, io) in places {
        let tmp = (!devices).then(|| tempfile::tempdir_in(&dir).unwrap());
        let dir = tmp.as_ref().map_or(dir.clone(), |t| t.path().to_path_buf());
        for level in [Level::Raid10, Level::Raid5] {
            let (ring, threads) = arrays(&dir, level, io);
            // Every block written once, so reads read stored data.
            let fill = vec![0x5au8; 1 << 20];
            let mut off = 0;
            while off < ring.size() {
                let n = (ring.size() - off).min(fill.len() as u64) as usize;
                ring.write_at(&fill[..n], off).unwrap();
                off += n as u64;
            }
            ring.flush().unwrap();
            for (write, qd) in [(false, 1), (false, 32), (true, 1), (true, 32)] {
                let test = format!("4K rand{} QD{qd}", if write { "write" } else { "read" });
                if !format!("{label} {} {test}", level.name()).contains(&only) {
                    continue;
                }
                let (mut u, mut t, mut uf, mut tf) = (vec![], vec![], vec![], vec![]);
                for round in 0..3 {
                    let order: [bool; 2] = if round % 2 == 0 {
                        [true, false]
                    } else {
                        [false, true]
                    };
                    for uring in order {
                        let a = if uring { &ring } else { &threads };
                        let (iops, fl) = run(a, qd, write, secs);
                        if uring {
                            u.push(iops);
                            uf.push(fl);
                        } else {
                            t.push(iops);
                            tf.push(fl);
                        }
                    }
                }
                let (u, t) = (median(u), median(t));
                println!(
                    "| {label} | {} | {test} | {u:.0} | {t:.0} | {:.2}x | {:.1} / {:.1} |",
                    level.name(),
                    u / t,
                    median(uf),
                    median(tf)
                );
            }
        }
    }
}
