//! Reshape speed against what the members allow (issue 36), for
//! docs/benchmarks.md.
//!
//! Each member is throttled to one bandwidth that its reads and writes share
//! (`ThrottleVolume`: one budget, like one disk's head and link). A reshape
//! reads the old geometry and writes the new one on the same members, so the
//! fastest it can go is set by the busiest member: the bytes that member
//! moved (read plus written, counted by its throttle) over its bandwidth.
//! The figure is that bound over the time the reshape took: 1.0 means the
//! members never waited on raidlab. The target is 0.8 or more.
//!
//! Cases: RAID 5 of 4 grown to 5 members, a RAID 5 chunk change 64K to 256K
//! over the same 4 members, a RAID 6 of 6 from left-symmetric to
//! right-asymmetric; and shrinks (md's backward reshape): RAID 5 of 5 to 4,
//! RAID 6 of 6 to 5, RAID 10 near=2 of 5 to 4. A RAID 5/6 shrink needs room
//! after the data for md's move of the data offset up, so its component
//! size is first cut by a chunk per member (`grow --size`, as a user must);
//! a RAID 10's move comes out of the component size, as mdadm does it. Each
//! shrink accepts the largest array size the fewer members hold (the one
//! the engine's refusal without `--array-size` names). Also (2026-12-05):
//! more members with a new chunk in one reshape (RAID 5; RAID 10 with the
//! offset layout too, and a RAID 10 shrink with a new chunk), a RAID 10's
//! grow and chunk change, and a RAID 0 grown through md's RAID 4. Each runs
//! three times; the median and the spread are printed.
//!
//! Run: `cargo run --release -p raidlab-raid --example reshape_bench [MiB per member] [MB/s per member] [only cases whose name holds this]`

mod common;

use raidlab_devices::Limits;
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_raid::grow::{ReshapeRequest, SizeRequest};
use raidlab_raid::recovery::RunOptions;
use std::time::Instant;

struct Case {
    name: &'static str,
    level: Level,
    layout: Layout,
    members: usize,
    chunk: u64,
    req: ReshapeRequest,
}

/// CPU seconds this process has used (user and system, every thread; the
/// kernel's clock ticks, taken as 100 a second): a slow run that used no
/// more CPU than a fast one waited, on the members or on a CPU other
/// processes held. 0 where /proc is not there.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // The fields after the command name (which may hold spaces), from the
    // third: utime and stime are the 14th and 15th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let ticks: u64 = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|t| t.parse::<u64>().ok())
        .sum();
    ticks as f64 / 100.0
}

/// One run: (the members' bound in seconds, the reshape's seconds, the CPU
/// seconds it used).
fn run(c: &Case, member: u64, bw: u64) -> (f64, f64, f64) {
    let n = c.members
        + c.req
            .raid_devices
            .map_or(0, |r| r.saturating_sub(c.members));
    let shrink = c.req.raid_devices.is_some_and(|r| r < c.members);
    let (vols, devs) = common::members(n, member);
    let mut asm = common::create_on(&devs[..c.members], c.level, c.layout, c.chunk);
    if shrink && c.level != Level::Raid10 {
        let size = asm.geometry.member_bytes - c.chunk * c.members as u64;
        asm.grow_size(SizeRequest::Bytes(size), true).unwrap();
    }
    // Data everywhere, written before the members are throttled.
    common::fill(&asm.array().unwrap());
    let array_bytes = shrink.then(|| holds(&asm, &c.req));
    let plan = asm
        .reshape_check_sized(&c.req, n - c.members, array_bytes)
        .unwrap();
    for d in &devs[c.members..] {
        asm.add(d.clone(), false).unwrap();
    }
    for v in &vols {
        v.set_limits(Limits::bandwidth(bw)).unwrap();
    }
    let before: Vec<u64> = vols.iter().map(|v| v.stats().bytes).collect();
    let cpu = cpu_seconds();
    let t = Instant::now();
    asm.reshape_start(plan).unwrap();
    asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
    let took = t.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu;
    let busiest = vols
        .iter()
        .zip(&before)
        .map(|(v, b)| v.stats().bytes - b)
        .max()
        .unwrap_or(0);
    (busiest as f64 / bw as f64, took, cpu)
}

/// The most a shrink's fewer members hold, as a user learns it: the
/// `--array-size` the engine's refusal without one names.
fn holds(asm: &raidlab_raid::assemble::Assembly, req: &ReshapeRequest) -> u64 {
    let e = asm.reshape_check(req, 0).unwrap_err().to_string();
    let k = e
        .rsplit_once("`--array-size ")
        .and_then(|(_, k)| k.split_once('K'))
        .and_then(|(k, _)| k.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no --array-size named: {e}"));
    k * 1024
}

fn main() {
    let all: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<u64> = all
        .iter()
        .take(2)
        .map(|a| {
            a.parse()
                .expect("arguments: MiB per member, MB/s per member, a part of a case's name")
        })
        .collect();
    let only = all.get(2).cloned().unwrap_or_default();
    let member = args.first().copied().unwrap_or(128) << 20;
    let bw = args.get(1).copied().unwrap_or(200) * 1_000_000;
    println!(
        "machine: {} cores; members {} MiB, each throttled to {} MB/s shared by its reads and writes",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        member >> 20,
        bw / 1_000_000
    );
    let cases = [
        Case {
            name: "RAID 5, 4 -> 5 members (64K)",
            level: Level::Raid5,
            layout: Layout::Parity(ParityLayout::LeftSymmetric),
            members: 4,
            chunk: 64 << 10,
            req: ReshapeRequest {
                raid_devices: Some(5),
                ..ReshapeRequest::default()
            },
        },
        Case {
            name: "RAID 5 of 4, chunk 64K -> 256K",
            level: Level::Raid5,
            layout: Layout::Parity(ParityLayout::LeftSymmetric),
            members: 4,
            chunk: 64 << 10,
            req: ReshapeRequest {
                chunk_bytes: Some(256 << 10),
                ..ReshapeRequest::default()
            },
        },
        Case {
            name: "RAID 6 of 6, left-symmetric -> right-asymmetric (128K)",
            level: Level::Raid6,
            layout: Layout::Parity(ParityLayout::LeftSymmetric),
            members: 6,
            chunk: 128 << 10,
            req: ReshapeRequest {
                layout: Some("right-asymmetric".into()),
                ..ReshapeRequest::default()
            },
        },
        Case {
            name: "RAID 5, 5 -> 4 members (64K, shrink)",
            level: Level::Raid5,
            layout: Layout::Parity(ParityLayout::LeftSymmetric),
            members: 5,
            chunk: 64 << 10,
            req: ReshapeRequest {
                raid_devices: Some(4),
                ..ReshapeRequest::default()
            },
        },
        Case {
            name: "RAID 6, 6 -> 5 members (128K, shrink)",
            level: Level::Raid6,
            layout: Layout::Parity(ParityLayout::LeftSymmetric),
            members: 6,
            chunk: 128 << 10,
            req: ReshapeRequest {
                raid_devices: Some(5),
                ..ReshapeRequest::default()
            },
        },
        Case {
            name: "RAID 10 near=2, 5 -> 4 members (64K, shrink)",
            level: Level::Raid10,
            layout: Layout::parse(Level::Raid10, Some("n2")).expect("near=2"),
            members: 5,
            chunk: 64 << 10,
            req: ReshapeRequest {
                raid_devices: Some(4),
                ..ReshapeRequest::default()
            },
        },
        Case {
            name: "RAID 5, 4 -> 5 members and chunk 64K -> 128K (one reshape)",
            level: Level::Raid5,
            layout: Layout::Parity(ParityLayout::LeftSymmetric),
            members: 4,
            chunk: 64 << 10,
            req: ReshapeRequest {
                raid_devices: Some(5),
                chunk_bytes: Some(128 << 10),
                ..ReshapeRequest::default()
            },
        },
        Case {
            name: "RAID 10 near=2, 4 -> 5 members (64K)",
            level: Level::Raid10,
            layout: Layout::parse(Level::Raid10, Some("n2")).expect("near=2"),
            members: 4,
            chunk: 64 << 10,
            req: ReshapeRequest {
                raid_devices: Some(5),
                ..ReshapeRequest::default()
            },
        },
        Case {
            name: "RAID 10 near=2 of 4, chunk 64K -> 256K",
            level: Level::Raid10,
            layout: Layout::parse(Level::Raid10, Some("n2")).expect("near=2"),
            members: 4,
            chunk: 64 << 10,
            req: ReshapeRequest {
                chunk_bytes: Some(256 << 10),
                ..ReshapeRequest::default()
            },
        },
        Case {
            name: "RAID 10, 4 -> 6 members, n2 -> o2, chunk 64K -> 128K (one reshape)",
            level: Level::Raid10,
            layout: Layout::parse(Level::Raid10, Some("n2")).expect("near=2"),
            members: 4,
            chunk: 64 << 10,
            req: ReshapeRequest {
                raid_devices: Some(6),
                chunk_bytes: Some(128 << 10),
                layout: Some("o2".into()),
                ..ReshapeRequest::default()
            },
        },
        Case {
            name: "RAID 10 near=2, 5 -> 4 members and chunk 64K -> 128K (one reshape, shrink)",
            level: Level::Raid10,
            layout: Layout::parse(Level::Raid10, Some("n2")).expect("near=2"),
            members: 5,
            chunk: 64 << 10,
            req: ReshapeRequest {
                raid_devices: Some(4),
                chunk_bytes: Some(128 << 10),
                ..ReshapeRequest::default()
            },
        },
        Case {
            name: "RAID 0, 3 -> 4 members (64K, through RAID 4)",
            level: Level::Raid0,
            layout: Layout::parse(Level::Raid0, None).expect("raid0"),
            members: 3,
            chunk: 64 << 10,
            req: ReshapeRequest {
                raid_devices: Some(4),
                ..ReshapeRequest::default()
            },
        },
    ];
    println!("| reshape | busiest member moved | bound | took | bound / took (3 runs) | median | CPU (3 runs) |");
    println!("|---|---|---|---|---|---|---|");
    for c in cases.iter().filter(|c| c.name.contains(only.as_str())) {
        let mut ratios = Vec::new();
        let mut cpus = Vec::new();
        let mut last = (0.0, 0.0);
        for _ in 0..3 {
            let (bound, took, cpu) = run(c, member, bw);
            ratios.push(bound / took);
            cpus.push(format!("{cpu:.2} s"));
            last = (bound, took);
        }
        let mut sorted = ratios.clone();
        sorted.sort_by(f64::total_cmp);
        println!(
            "| {} | {:.0} MB | {:.2} s | {:.2} s | {} | **{:.2}** | {} |",
            c.name,
            last.0 * bw as f64 / 1e6,
            last.0,
            last.1,
            ratios
                .iter()
                .map(|r| format!("{r:.2}"))
                .collect::<Vec<_>>()
                .join(", "),
            sorted[1],
            cpus.join(", ")
        );
    }
}
