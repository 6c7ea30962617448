//! What safe mode's gate costs a write, in process: the same 4K random writes
//! to a RAID 5 of four members in memory, straight to the array and through
//! `LiveArray::volume` (the gate every served write passes), alternated.
//! A measurement, not a check: timings on a shared VM swing by tens of
//! percent, so run it under `valgrind --tool=callgrind` with `N=20000
//! ROUNDS=1` for instruction counts that do not (docs/benchmarks.md).
//!
//! `cargo run --release -p raidlab-raid --example gate_cost` (env N, ROUNDS).

use raidlab_core::Volume;
use raidlab_devices::MemVolume;
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_raid::assemble::{create, CreateSpec, Device, NewMember};
use raidlab_raid::live::LiveArray;
use std::sync::Arc;

fn main() -> raidlab_core::Result<()> {
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let (n, rounds) = (env("N", 200_000), env("ROUNDS", 3));
    let members = (0..4)
        .map(|i| NewMember {
            device: Device {
                path: format!("mem{i}"),
                volume: Arc::new(MemVolume::new(64 << 20)),
            },
            zeroed: true,
        })
        .collect();
    let spec = CreateSpec {
        level: Level::Raid5,
        layout: Layout::Parity(ParityLayout::LeftSymmetric),
        chunk_bytes: 64 << 10,
        spares: 0,
        name: "gate".into(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: false,
    };
    let mut asm = create(&spec, members)?;
    // As `serve` starts it: dirty, then running, then safe mode.
    let was_clean = asm.mark_dirty()?;
    let array = Arc::new(asm.array()?);
    let live = LiveArray::new(asm, array);
    live.start_safe_mode(was_clean);
    let direct: Arc<dyn Volume> = live.array().clone();
    let gated = live.volume();
    let buf = vec![7u8; 4096];
    let blocks = direct.size() / 4096;
    for round in 0..rounds {
        for (name, v) in [("direct", &direct), ("gated", &gated)] {
            let mut x = 12345u64;
            let t = std::time::Instant::now();
            for _ in 0..n {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                v.write_at(&buf, (x >> 20) % blocks * 4096)?;
            }
            let ns = t.elapsed().as_nanos() as f64 / n as f64;
            println!("round {round} {name}: {ns:.0} ns per 4K write");
        }
    }
    Ok(())
}
