//! Memory members' speed with the process's default executor, for a
//! before/after comparison of a change to the executor: RAID 10 and RAID 5
//! on four /dev/shm files, 4 KiB random reads and writes at QD 1 and 32,
//! IOPS over SECONDS per cell, one line per cell.
//!
//! `cargo run --release -p raidlab-raid --example shm_speed -- [SECONDS]`

use raidlab_core::{SliceVolume, Volume};
use raidlab_devices::FileVolume;
use raidlab_layout::{Geometry, Layout, Level, ParityLayout, Raid10Layout};
use raidlab_raid::Array;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MEMBER: u64 = 64 << 20;

fn main() {
    let secs: f64 = std::env::args().nth(1).map_or(2.0, |s| s.parse().unwrap());
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    for level in [Level::Raid10, Level::Raid5] {
        let layout = match level {
            Level::Raid10 => Layout::Raid10(Raid10Layout::from_name("n2").unwrap()),
            _ => Layout::Parity(ParityLayout::LeftSymmetric),
        };
        let g = Geometry::new(level, layout, 64 << 10, 4, MEMBER).unwrap();
        let members = (0..4)
            .map(|i| {
                let p = dir.path().join(format!("{}-{i}", level.name()));
                let f = FileVolume::create_sparse(&p, MEMBER + (1 << 20)).unwrap();
                Some(
                    Arc::new(SliceVolume::new(Arc::new(f), 1 << 20, MEMBER).unwrap())
                        as Arc<dyn Volume>,
                )
            })
            .collect();
        let a = Array::new("shm", g, members).unwrap();
        let fill = vec![0x5au8; 1 << 20];
        let mut off = 0;
        while off < a.size() {
            a.write_at(&fill, off).unwrap();
            off += 1 << 20;
        }
        for (write, qd) in [(false, 1usize), (false, 32), (true, 1), (true, 32)] {
            let stop = AtomicBool::new(false);
            let ops = AtomicU64::new(0);
            let blocks = a.size() / 4096;
            let start = Instant::now();
            std::thread::scope(|s| {
                for t in 0..qd {
                    let (stop, ops, a) = (&stop, &ops, &a);
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
                std::thread::sleep(Duration::from_secs_f64(secs));
                stop.store(true, Ordering::Relaxed);
            });
            let iops = ops.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64();
            println!(
                "{} 4K rand{} QD{qd} {iops:.0}",
                level.name(),
                if write { "write" } else { "read" }
            );
        }
    }
}
