//! Speed of a served reshape (issue 36): a RAID 5 of 4 grown to 5 members
//! while a client writes through the served volume, on members throttled as
//! in `reshape_bench` (each member's bandwidth one budget that its reads and
//! writes share, the reshape's and the client's alike).
//!
//! The bound is the busiest member's bytes (the walk's reads and writes and
//! the client's, all counted by its throttle) over its bandwidth: the
//! fastest the reshape could have ended had the members never waited on
//! raidlab. The figure is that bound over the time the reshape took, as for
//! the offline reshape (target 0.8 or more). Also printed: the client's
//! writes a second during the reshape and the share of the busiest member's
//! bytes that were the client's, and the same reshape with no client, for
//! comparison in the same run.
//!
//! The client is one thread of 4 KiB random writes at queue depth 1, each
//! read back (the reads count too), as fast as they complete: a client that
//! takes what the walk leaves. A rate limit on the reshape (`--max-rate`) is
//! what a user sets to leave more to clients; none is set here, so this
//! measures whether the walk and the requests together keep the members
//! busy.
//!
//! Run: `cargo run --release -p raidlab-raid --example reshape_served_bench [MiB per member] [MB/s per member]`

mod common;

use raidlab_core::Volume;
use raidlab_devices::Limits;
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_raid::grow::ReshapeRequest;
use raidlab_raid::live::LiveArray;
use raidlab_raid::recovery::RunOptions;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

const BLOCK: u64 = 4096;

/// One run's figures.
struct Ran {
    /// The busiest member's bytes over its bandwidth, seconds.
    bound: f64,
    /// The reshape's seconds.
    took: f64,
    /// Client writes completed during the reshape.
    writes: u64,
    /// The client's share of the busiest member's bytes (set by `main`
    /// from a run without a client).
    client_share: f64,
}

/// Grow a RAID 5 of 4 to 5 while served; `client`: with a writer.
fn run(member: u64, bw: u64, client: bool) -> Ran {
    let (vols, devs) = common::members(5, member);
    let mut asm = common::create_on(
        &devs[..4],
        Level::Raid5,
        Layout::Parity(ParityLayout::LeftSymmetric),
        64 << 10,
    );
    let size = asm.geometry.array_bytes();
    // Data to move: the array filled before it is served.
    common::fill(&asm.array().unwrap());
    // Served as `raidlab serve` starts it: marked active, then the running
    // array, safe mode on.
    asm.mark_dirty().unwrap();
    let array = Arc::new(asm.array().unwrap());
    let live = LiveArray::new(asm, array);
    live.start_safe_mode(true);
    let volume = live.volume();
    for v in &vols {
        v.set_limits(Limits::bandwidth(bw)).unwrap();
    }
    let done = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));
    let writer = client.then(|| {
        let (volume, done, writes) = (volume.clone(), done.clone(), writes.clone());
        std::thread::spawn(move || {
            let blocks = size / BLOCK;
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            let data = vec![0xa5u8; BLOCK as usize];
            let mut back = vec![0u8; BLOCK as usize];
            while !done.load(Ordering::Acquire) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = (x % blocks) * BLOCK;
                volume.write_at(&data, at).unwrap();
                volume.read_at(&mut back, at).unwrap();
                writes.fetch_add(1, Ordering::Relaxed);
            }
        })
    });
    // The client under way before the reshape is asked for. Its share of
    // the members' bytes is what a run with it moved beyond a run without
    // (the walk moves the same data in both), worked out in `main`.
    if client {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let before: Vec<u64> = vols.iter().map(|v| v.stats().bytes).collect();
    let w0 = writes.load(Ordering::Relaxed);
    let t = Instant::now();
    let new = devs[4].clone();
    live.reshape(
        |asm| {
            let req = ReshapeRequest {
                raid_devices: Some(5),
                ..ReshapeRequest::default()
            };
            let plan = asm.reshape_check_sized(&req, 1, None)?;
            asm.add(new, false)?;
            asm.reshape_start(plan)
        },
        RunOptions::default(),
        &mut |_| {},
    )
    .unwrap();
    let took = t.elapsed().as_secs_f64();
    let during = writes.load(Ordering::Relaxed) - w0;
    let moved: Vec<u64> = vols
        .iter()
        .zip(&before)
        .map(|(v, b)| v.stats().bytes - b)
        .collect();
    done.store(true, Ordering::Release);
    if let Some(w) = writer {
        w.join().unwrap();
    }
    live.shutdown();
    let busiest = moved.iter().copied().max().unwrap_or(0);
    Ran {
        bound: busiest as f64 / bw as f64,
        took,
        writes: during,
        client_share: 0.0,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .take(2)
        .map(|a| {
            a.parse()
                .expect("arguments: MiB per member, MB/s per member")
        })
        .collect();
    let member = args.first().copied().unwrap_or(64) << 20;
    let bw = args.get(1).copied().unwrap_or(200) * 1_000_000;
    println!(
        "machine: {} cores; RAID 5 of 4 (64K) grown to 5 while served; members {} MiB, each throttled to {} MB/s shared by its reads and writes",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        member >> 20,
        bw / 1_000_000
    );
    println!("| run | client | busiest member moved | bound | took | bound / took | client writes/s during | client's share of the busiest member |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut alone_bytes = Vec::new();
    let (mut with, mut without) = (Vec::new(), Vec::new());
    // Alternated: without, with, with, without, without, with.
    for (i, client) in [false, true, true, false, false, true]
        .into_iter()
        .enumerate()
    {
        let mut r = run(member, bw, client);
        if !client {
            alone_bytes.push(r.bound * bw as f64);
        } else if let Some(&alone) = alone_bytes.last() {
            r.client_share = (1.0 - alone / (r.bound * bw as f64)).max(0.0);
        }
        let ratio = r.bound / r.took;
        if client {
            with.push(ratio);
        } else {
            without.push(ratio);
        }
        println!(
            "| {} | {} | {:.0} MB | {:.2} s | {:.2} s | {:.2} | {} | {} |",
            i + 1,
            if client {
                "4K random writes, QD1"
            } else {
                "none"
            },
            r.bound * bw as f64 / 1e6,
            r.bound,
            r.took,
            ratio,
            if client {
                format!("{:.0}", r.writes as f64 / r.took)
            } else {
                "-".into()
            },
            if client {
                format!("{:.0}%", r.client_share * 100.0)
            } else {
                "-".into()
            }
        );
    }
    println!(
        "medians of bound / took: served with a client {:.2}, served alone {:.2}",
        median(with),
        median(without)
    );
}
