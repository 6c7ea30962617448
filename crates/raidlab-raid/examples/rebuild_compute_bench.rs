//! What a parity rebuild costs the host when the members cost nothing: an
//! offline rebuild of one role on memory members, unthrottled, so the
//! figure is the engine's reads, its parity arithmetic and its writes
//! (`recovery_bench` throttles its members, and its rebuild runs at their
//! bandwidth whatever the arithmetic costs). RAID 5 with one role lost, RAID
//! 6 with one, and RAID 6 with two (one rebuilt, the other still missing:
//! every data row a two-chunk recovery).
//!
//! Run: `cargo run --release -p raidlab-raid --example rebuild_compute_bench [ROUNDS]`;
//! prints the median MB/s of each (member bytes written per second).

use raidlab_devices::MemVolume;
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_raid::assemble::{create, CreateSpec, Device, NewMember};
use raidlab_raid::recovery::RunOptions;
use std::sync::Arc;
use std::time::Instant;

const MEMBER: u64 = 128 << 20;

fn rebuild(level: Level, members: usize, lost: &[usize]) -> f64 {
    let devs: Vec<Device> = (0..=members)
        .map(|i| Device {
            path: format!("m{i}"),
            volume: Arc::new(MemVolume::new(MEMBER)),
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
    let new = devs[..members]
        .iter()
        .map(|d| NewMember {
            device: d.clone(),
            zeroed: true,
        })
        .collect();
    let mut asm = create(&spec, new).unwrap();
    for &r in lost {
        asm.fail(r).unwrap();
    }
    asm.add(devs[members].clone(), false).unwrap();
    let t = Instant::now();
    asm.rebuild(RunOptions::default(), &mut |_| {}).unwrap();
    asm.geometry.member_bytes as f64 / t.elapsed().as_secs_f64()
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5);
    for (name, level, n, lost) in [
        ("raid5 x4, one lost", Level::Raid5, 4, &[1][..]),
        ("raid6 x6, one lost", Level::Raid6, 6, &[1][..]),
        ("raid6 x6, two lost", Level::Raid6, 6, &[1, 4][..]),
    ] {
        let mut v: Vec<f64> = (0..rounds).map(|_| rebuild(level, n, lost)).collect();
        v.sort_by(f64::total_cmp);
        println!("{name}: median {:.0} MB/s", v[v.len() / 2] / 1e6);
    }
}
