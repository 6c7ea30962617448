//! md's write-back journal against write-through and against the same array
//! without a journal (issue 36), side by side in one run, the order reversed
//! in the second round: RAID 5 of 4 members (64 KiB chunks)
//! whose members are throttled to a disk's request rate, the journal on a
//! device throttled to an SSD's; random 4 KiB writes at QD8 over a region of
//! 128 stripes (24 MiB).
//!
//! Two figures per mode: the rate at which writes are acknowledged (what a
//! client sees while the journal and the stripe cache have room), and the
//! rate counting the time to write everything out to the members afterwards
//! (write-back's drain; write-through has none). Both include a final flush,
//! so at the first figure every write is durable. Write-through runs with the
//! stripe cache `serve` starts (64 stripes, 20 ms), and so does the array
//! without a journal (md's resync policy); write-back's cache holds
//! the whole region with a long hold time, so its stripes leave when full or
//! at the drain.
//!
//! Run: `cargo run --release -p raidlab-raid --example write_back_bench`

use raidlab_core::Volume;
use raidlab_devices::{Limits, MemVolume, ThrottleVolume};
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_raid::assemble::{
    create, create_with_journal, Assembly, CreateSpec, Device, NewMember,
};
use raidlab_raid::journal::JournalMode;
use raidlab_raid::lifecycle::{StartOptions, Started};
use raidlab_raid::stripe_cache::StripeCacheConfig;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
/// A disk's random request rate, per member.
const MEMBER_IOPS: u64 = 400;
/// An SSD's, for the journal device.
const JOURNAL_IOPS: u64 = 40_000;
const CHUNK: u64 = 64 << 10;
/// Stripes the writes land in.
const REGION_STRIPES: u64 = 128;
const WRITES: u64 = 3000;
const QD: usize = 8;

/// What the array keeps: no journal (resync), or md's journal in a mode.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Setup {
    NoJournal,
    Journal(JournalMode),
}

impl Setup {
    fn name(self) -> &'static str {
        match self {
            Setup::NoJournal => "no journal",
            Setup::Journal(m) => m.name(),
        }
    }
}

fn start(setup: Setup) -> Started {
    let mode = match setup {
        Setup::Journal(m) => m,
        Setup::NoJournal => JournalMode::WriteThrough,
    };
    let vol = |size: u64, iops: u64| -> Arc<dyn Volume> {
        Arc::new(ThrottleVolume::new(MemVolume::new(size), Limits::iops(iops)).unwrap())
    };
    let devs: Vec<Device> = (0..5)
        .map(|i| Device {
            path: if i == 4 {
                "journal".into()
            } else {
                format!("m{i}")
            },
            volume: if i == 4 {
                vol(129 * MIB, JOURNAL_IOPS)
            } else {
                vol(33 * MIB, MEMBER_IOPS)
            },
        })
        .collect();
    let spec = CreateSpec {
        level: Level::Raid5,
        layout: Layout::Parity(ParityLayout::LeftSymmetric),
        chunk_bytes: CHUNK,
        spares: 0,
        name: "wb".into(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: false,
    };
    let new = |d: &Device| NewMember {
        device: d.clone(),
        zeroed: true,
    };
    let devs = if setup == Setup::NoJournal {
        create(&spec, devs[..4].iter().map(new).collect()).unwrap();
        devs[..4].to_vec()
    } else {
        create_with_journal(
            &spec,
            devs[..4].iter().map(new).collect(),
            Some(new(&devs[4])),
        )
        .unwrap();
        devs
    };
    Started::start(
        Assembly::assemble(devs).unwrap(),
        StartOptions {
            write: true,
            // Write-through as `serve` runs it (the default cache); write-back
            // with room for the whole region, held until full or drained.
            stripe_cache: Some(match mode {
                JournalMode::WriteThrough => StripeCacheConfig::default(),
                JournalMode::WriteBack => StripeCacheConfig {
                    stripes: 256,
                    hold: Duration::from_secs(3600),
                    ..StripeCacheConfig::default()
                },
            }),
            journal_mode: mode,
            ..StartOptions::default()
        },
    )
    .unwrap()
}

/// (acknowledged writes/s, writes/s counting the write-out to the members).
fn run(setup: Setup) -> (f64, f64) {
    let started = start(setup);
    let array = started.array.clone();
    let blocks = REGION_STRIPES * CHUNK * 3 / 4096;
    let left = Arc::new(AtomicU64::new(WRITES));
    let t = Instant::now();
    std::thread::scope(|s| {
        for q in 0..QD {
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
    let acked = t.elapsed().as_secs_f64();
    array.write_out_held().unwrap();
    array.flush().unwrap();
    let drained = t.elapsed().as_secs_f64();
    drop(array);
    started.stop().unwrap();
    (WRITES as f64 / acked, WRITES as f64 / drained)
}

fn main() {
    println!(
        "write-back journal benchmark: RAID 5, 4 members at {MEMBER_IOPS} IOPS, 64 KiB chunks; journal at {JOURNAL_IOPS} IOPS; {WRITES} random 4 KiB writes at QD{QD} over {REGION_STRIPES} stripes; 2 rounds, the second in reverse order"
    );
    println!();
    println!("| run | array | acknowledged writes/s | writes/s incl. write-out |");
    println!("|---|---|---:|---:|");
    let setups = [
        Setup::NoJournal,
        Setup::Journal(JournalMode::WriteThrough),
        Setup::Journal(JournalMode::WriteBack),
    ];
    let mut best = [(0.0f64, 0.0f64); 3];
    for round in 0..2 {
        let mut order: Vec<usize> = (0..setups.len()).collect();
        if round == 1 {
            order.reverse();
        }
        for k in order {
            let (acked, drained) = run(setups[k]);
            println!(
                "| {} | {} | {acked:.0} | {drained:.0} |",
                round + 1,
                setups[k].name()
            );
            best[k].0 = best[k].0.max(acked);
            best[k].1 = best[k].1.max(drained);
        }
    }
    println!();
    println!(
        "best of 2: write-back / no journal = {:.2}x acknowledged, {:.2}x including the write-out; write-back / write-through = {:.2}x, {:.2}x",
        best[2].0 / best[0].0,
        best[2].1 / best[0].1,
        best[2].0 / best[1].0,
        best[2].1 / best[1].1
    );
}
