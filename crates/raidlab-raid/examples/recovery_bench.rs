//! Recovery speed benchmarks for docs/benchmarks.md:
//!
//! 1. rebuild of one member of a 4-member RAID 5 whose members are throttled to a
//!    known bandwidth: the rebuild should run at >= 90% of that bandwidth;
//! 2. the same rebuild with `max_rate` set: it should hold the rate within 10%;
//! 3. random 4 KiB writes at queue depth 1 with and without a write-intent bitmap
//!    (members in memory, throttled to a known IOPS so the cost of the bitmap's
//!    extra writes shows up as it would on a disk).
//!
//! Run: `cargo run --release -p raidlab-raid --example recovery_bench`

use raidlab_core::Volume;
use raidlab_devices::{Limits, MemVolume, ThrottleVolume};
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_raid::assemble::{create, Assembly, CreateSpec, Device, NewMember};
use raidlab_raid::recovery::RunOptions;
use std::sync::Arc;
use std::time::Instant;

const MEMBER: u64 = 160 << 20;

fn devices(n: usize, limits: Limits) -> Vec<Device> {
    (0..n)
        .map(|i| Device {
            path: format!("m{i}"),
            volume: Arc::new(ThrottleVolume::new(MemVolume::new(MEMBER), limits).unwrap()),
        })
        .collect()
}

fn spec(bitmap: bool) -> CreateSpec {
    CreateSpec {
        level: Level::Raid5,
        layout: Layout::Parity(ParityLayout::LeftSymmetric),
        chunk_bytes: 512 << 10,
        spares: 0,
        name: "bench".into(),
        force: false,
        bitmap,
        bitmap_chunk: None,
        ppl: false,
    }
}

fn rebuild(bw: u64, max_rate: Option<u64>) -> f64 {
    let devs = devices(5, Limits::bandwidth(bw));
    let members = devs[..4]
        .iter()
        .map(|d| NewMember {
            device: d.clone(),
            zeroed: true,
        })
        .collect();
    let mut asm = create(&spec(false), members).unwrap();
    asm.fail(1).unwrap();
    asm.add(devs[4].clone(), false).unwrap();
    let t = Instant::now();
    let opts = RunOptions {
        max_rate,
        ..RunOptions::default()
    };
    asm.rebuild(opts, &mut |_| {}).unwrap();
    asm.geometry.member_bytes as f64 / t.elapsed().as_secs_f64()
}

fn random_writes(bitmap: bool, iops: u64, ops: usize) -> f64 {
    let devs = devices(4, Limits::iops(iops));
    let members = devs
        .iter()
        .map(|d| NewMember {
            device: d.clone(),
            zeroed: true,
        })
        .collect();
    let mut asm: Assembly = create(&spec(bitmap), members).unwrap();
    asm.mark_dirty().unwrap();
    let array = asm.array().unwrap();
    let size = array.size();
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let buf = [0x5au8; 4096];
    let t = Instant::now();
    for _ in 0..ops {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let off = (x % (size / 4096)) * 4096;
        array.write_at(&buf, off).unwrap();
    }
    ops as f64 / t.elapsed().as_secs_f64()
}

fn main() {
    println!(
        "machine: {} cores",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    let bw = 200_000_000u64;
    let r = rebuild(bw, None);
    println!(
        "rebuild, members throttled to {} MB/s: {:.1} MB/s = {:.1}% of member bandwidth",
        bw / 1_000_000,
        r / 1e6,
        100.0 * r / bw as f64
    );
    let cap = 50_000_000u64;
    let r = rebuild(bw, Some(cap));
    println!(
        "rebuild with max_rate {} MB/s: {:.1} MB/s = {:.1}% of the limit",
        cap / 1_000_000,
        r / 1e6,
        100.0 * r / cap as f64
    );
    let iops = 2000;
    let without = random_writes(false, iops, 1500);
    let with = random_writes(true, iops, 1500);
    println!(
        "random 4K writes QD1, members throttled to {iops} IOPS: without bitmap {without:.0} IOPS, with bitmap {with:.0} IOPS: bitmap costs {:.1}%",
        100.0 * (1.0 - with / without)
    );
}
