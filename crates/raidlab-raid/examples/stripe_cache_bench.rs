//! Stripe cache benchmarks for docs/benchmarks.md (issue 13), side by side in
//! one run, the cache on and off alternating:
//!
//! 1. sequential 1 MiB writes, one stream with 8 requests in flight (QD8) and
//!    with one (QD1, what `import` does), to RAID 5 of 4 and RAID 6 of 6
//!    members (512 KiB chunks) whose members are throttled to a known
//!    bandwidth: MB/s against the limit (members - parity) x one member, and
//!    member bytes read per byte written;
//! 2. random 4 KiB writes at QD8 with members throttled to a known IOPS:
//!    IOPS against the limit (members x member IOPS / md's cost: 4 for RAID 5,
//!    6 for RAID 6);
//! 3. the same sequential QD8 writes unthrottled (members in memory): the cache
//!    must not make the fast case slower.
//!
//! Run: `cargo run --release -p raidlab-raid --example stripe_cache_bench`

use raidlab_core::{Result, Volume};
use raidlab_devices::{Limits, MemVolume, ThrottleVolume};
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_raid::assemble::{create, CreateSpec, Device, NewMember};
use raidlab_raid::lifecycle::{StartOptions, Started};
use raidlab_raid::stripe_cache::StripeCacheConfig;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

const MIB: u64 = 1 << 20;
/// Member bandwidth for the sequential tests (bytes/s).
const MEMBER_BW: u64 = 40 * MIB;
/// Member IOPS for the random test.
const MEMBER_IOPS: u64 = 400;

/// Counts the bytes read from and written to a member.
#[derive(Debug)]
struct Counted<V> {
    inner: V,
    read: AtomicU64,
    written: AtomicU64,
}

impl<V: Volume> Volume for Counted<V> {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn block_size(&self) -> u32 {
        self.inner.block_size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.read.fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.written.fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
}

type Member = Counted<ThrottleVolume<MemVolume>>;

struct Run {
    members: Vec<Arc<Member>>,
    started: Started,
}

fn start(level: Level, n: usize, member: u64, limits: Limits, cache: bool) -> Run {
    let members: Vec<Arc<Member>> = (0..n)
        .map(|_| {
            Arc::new(Counted {
                inner: ThrottleVolume::new(MemVolume::new(member), limits).unwrap(),
                read: AtomicU64::new(0),
                written: AtomicU64::new(0),
            })
        })
        .collect();
    let devs: Vec<NewMember> = members
        .iter()
        .enumerate()
        .map(|(i, m)| NewMember {
            device: Device {
                path: format!("m{i}"),
                volume: m.clone(),
            },
            zeroed: true,
        })
        .collect();
    let spec = CreateSpec {
        level,
        layout: Layout::Parity(ParityLayout::LeftSymmetric),
        chunk_bytes: 512 << 10,
        spares: 0,
        name: "bench".into(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: false,
    };
    let asm = create(&spec, devs).unwrap();
    let started = Started::start(
        asm,
        StartOptions {
            write: true,
            stripe_cache: Some(if cache {
                StripeCacheConfig::default()
            } else {
                StripeCacheConfig {
                    stripes: 0,
                    ..StripeCacheConfig::default()
                }
            }),
            ..StartOptions::default()
        },
    )
    .unwrap();
    for m in &members {
        m.read.store(0, Ordering::Relaxed);
        m.written.store(0, Ordering::Relaxed);
    }
    Run { members, started }
}

/// Sequential `req`-byte writes of `total` bytes, `qd` in flight; (MB/s,
/// member bytes read per byte written).
fn sequential(run: &Run, total: u64, req: u64, qd: usize) -> (f64, f64) {
    let array = run.started.array.clone();
    let next = Arc::new(AtomicU64::new(0));
    let t = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..qd {
            let (array, next) = (array.clone(), next.clone());
            s.spawn(move || {
                let buf = vec![0x5au8; req as usize];
                loop {
                    let at = next.fetch_add(req, Ordering::Relaxed);
                    if at + req > total {
                        return;
                    }
                    array.write_at(&buf, at).unwrap();
                }
            });
        }
    });
    array.flush().unwrap();
    let secs = t.elapsed().as_secs_f64();
    let read: u64 = run
        .members
        .iter()
        .map(|m| m.read.load(Ordering::Relaxed))
        .sum();
    (total as f64 / secs / 1e6, read as f64 / total as f64)
}

/// Random 4 KiB writes, `count` of them, `qd` in flight: IOPS.
fn random(run: &Run, count: u64, qd: usize) -> f64 {
    let array = run.started.array.clone();
    let blocks = array.size() / 4096;
    let left = Arc::new(AtomicU64::new(count));
    let t = Instant::now();
    std::thread::scope(|s| {
        for q in 0..qd {
            let (array, left) = (array.clone(), left.clone());
            s.spawn(move || {
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(q as u64);
                let buf = vec![0xa5u8; 4096];
                while left
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                    .is_ok()
                {
                    let b = rng.gen_range(0..blocks);
                    array.write_at(&buf, b * 4096).unwrap();
                }
            });
        }
    });
    array.flush().unwrap();
    count as f64 / t.elapsed().as_secs_f64()
}

fn main() {
    println!("stripe cache benchmark: 512 KiB chunks, left-symmetric; best of 2 per cell, cache on/off alternating");
    println!();
    println!(
        "Sequential 1 MiB writes, members throttled to {} MiB/s each:",
        MEMBER_BW / MIB
    );
    println!("| array | QD | limit MB/s | cache on MB/s (x limit) | reads/byte | cache off MB/s (x limit) | reads/byte |");
    println!("|---|---|---|---|---|---|---|");
    for (level, n, parity) in [(Level::Raid5, 4usize, 1usize), (Level::Raid6, 6, 2)] {
        let data = (n - parity) as u64;
        let limit = (data * MEMBER_BW) as f64 / 1e6;
        for qd in [8usize, 1] {
            // About 2.5 s at the limit.
            let total = (data * MEMBER_BW * 5 / 2) / (data * (512 << 10)) * (data * (512 << 10));
            let member = total / data + 8 * MIB;
            let mut best = [(0.0f64, 0.0f64); 2];
            for round in 0..2 {
                for pass in 0..2 {
                    let cache = (round + pass) % 2 == 0;
                    let run = start(level, n, member, Limits::bandwidth(MEMBER_BW), cache);
                    let r = sequential(&run, total, MIB, qd);
                    let i = usize::from(!cache);
                    if r.0 > best[i].0 {
                        best[i] = r;
                    }
                    run.started.stop().unwrap();
                }
            }
            println!(
                "| {} of {n} | {qd} | {limit:.0} | {:.1} ({:.2}x) | {:.3} | {:.1} ({:.2}x) | {:.3} |",
                level.name(),
                best[0].0,
                best[0].0 / limit,
                best[0].1,
                best[1].0,
                best[1].0 / limit,
                best[1].1
            );
        }
    }
    println!();
    println!("Random 4 KiB writes at QD8, members throttled to {MEMBER_IOPS} IOPS each:");
    println!(
        "| array | md's cost | limit IOPS | cache on IOPS (x limit) | cache off IOPS (x limit) |"
    );
    println!("|---|---|---|---|---|");
    for (level, n, cost) in [(Level::Raid5, 4usize, 4u64), (Level::Raid6, 6, 6)] {
        let limit = (n as u64 * MEMBER_IOPS) as f64 / cost as f64;
        let count = (limit * 4.0) as u64;
        let mut best = [0.0f64; 2];
        for round in 0..2 {
            for pass in 0..2 {
                let cache = (round + pass) % 2 == 0;
                let run = start(level, n, 64 * MIB, Limits::iops(MEMBER_IOPS), cache);
                let r = random(&run, count, 8);
                let i = usize::from(!cache);
                best[i] = best[i].max(r);
                run.started.stop().unwrap();
            }
        }
        println!(
            "| {} of {n} | {cost} | {limit:.0} | {:.0} ({:.2}x) | {:.0} ({:.2}x) |",
            level.name(),
            best[0],
            best[0] / limit,
            best[1],
            best[1] / limit
        );
    }
    println!();
    println!("Sequential 1 MiB writes at QD8, unthrottled (members in memory), 768 MiB:");
    println!("| array | cache on MB/s | cache off MB/s | on/off |");
    println!("|---|---|---|---|");
    for (level, n, parity) in [(Level::Raid5, 4usize, 1usize), (Level::Raid6, 6, 2)] {
        let data = (n - parity) as u64;
        let total = 768 * MIB / (data * (512 << 10)) * (data * (512 << 10));
        let member = total / data + 8 * MIB;
        let mut best = [0.0f64; 2];
        for round in 0..3 {
            for pass in 0..2 {
                let cache = (round + pass) % 2 == 0;
                let run = start(level, n, member, Limits::unlimited(), cache);
                let r = sequential(&run, total, MIB, 8);
                let i = usize::from(!cache);
                best[i] = best[i].max(r.0);
                run.started.stop().unwrap();
            }
        }
        println!(
            "| {} of {n} | {:.0} | {:.0} | {:.2} |",
            level.name(),
            best[0],
            best[1],
            best[0] / best[1]
        );
    }
}
