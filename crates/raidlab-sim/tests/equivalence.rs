//! The simulator runs the engine's own decisions: for seeded workloads on every
//! level, complete and degraded, the member operations a simulated array issues
//! (its engine run live, one request at a time) are exactly (as a multiset)
//! those the real engine issues for the same requests on memory members.

use raidlab_core::IoKind;
use raidlab_core::Volume;
use raidlab_devices::{Access, MemVolume, Recorded};
use raidlab_layout::{Geometry, Layout, Level};
use raidlab_raid::stripe_cache::StripeCacheConfig;
use raidlab_raid::Array;
use raidlab_sim::array::{ArraySpec, TaskArray, DATA_OFFSET};
use raidlab_sim::device::{Device, VirtualClock, SEC};
use raidlab_sim::host::HostCost;
use raidlab_sim::ideal::Ideal;
use raidlab_sim::workload::{run, Job, Pattern};
use std::sync::Arc;
use std::time::Duration;

const MEMBER: u64 = 8 << 20;

/// (kind, member, offset in the data area, length), sorted.
type Ops = Vec<(IoKind, usize, u64, u64)>;

fn simulate(
    g: &Geometry,
    missing: &[usize],
    cache: Option<StripeCacheConfig>,
) -> (Ops, Vec<(u64, IoKind, u64, u64)>) {
    let members = (0..g.raid_disks)
        .map(|r| {
            (!missing.contains(&r))
                .then(|| Box::new(Ideal::new(DATA_OFFSET + MEMBER, 50.0, 200.0)) as Box<dyn Device>)
        })
        .collect();
    let mut sim = TaskArray::new(ArraySpec {
        name: "sim".into(),
        geometry: *g,
        members,
        stripe_cache: cache,
        // The engine's own requests, as the real one hands them to its
        // members: the block layer's merging of a step's contiguous ones
        // (the host's plug, `host.rs`, tested there) comes after.
        host: HostCost {
            plug_merge_bytes: 0,
            ..HostCost::default()
        },
        rebuild: None,
    })
    .expect("simulated array");
    sim.keep_ops();
    sim.keep_requests();
    let cap = sim.capacity();
    let mut t = 0;
    let jobs = [
        (Pattern::Random, 4096, 50, 11),
        (Pattern::Random, 12288, 30, 12),
        (Pattern::Random, 65536, 0, 13),
        (Pattern::Sequential, 1 << 20, 0, 14),
        (Pattern::Sequential, 192 << 10, 100, 15),
    ];
    // One request at a time: the engine run live then takes its decisions
    // in the order a real array given the same requests one by one does.
    // With more in flight, which request reaches a stripe first is the
    // devices' timing, which the real run here does not have.
    for (pattern, block, read_percent, seed) in jobs {
        let job = Job {
            pattern,
            block,
            read_percent,
            threads: 1,
            queue_depth: 1,
            region: (0, cap),
            duration: SEC,
            max_ops: 300,
            seed,
        };
        let out = run(&mut sim, &job, t).expect("job runs");
        assert!(out.ops > 0);
        t = out.end;
    }
    // What the cache still holds goes down with a flush, on both sides.
    let mut done = Vec::new();
    sim.submit(
        t,
        raidlab_sim::device::Request {
            id: 0,
            kind: IoKind::Flush,
            offset: 0,
            len: 0,
            process: 0,
        },
    );
    while let Some(at) = sim.next_event() {
        sim.advance(at, &mut done);
    }
    assert_eq!(done.len(), 1, "the flush completes");
    assert!(sim.errors().is_empty(), "{:?}", sim.errors());
    let mut ops: Ops = sim
        .member_ops()
        .expect("an array logs member ops")
        .ops
        .iter()
        .filter(|io| matches!(io.kind, IoKind::Read | IoKind::Write))
        .map(|io| (io.kind, io.member, io.offset - DATA_OFFSET, io.len))
        .collect();
    ops.sort_unstable();
    (ops, sim.requests().to_vec())
}

fn replay(
    g: &Geometry,
    missing: &[usize],
    cache: Option<StripeCacheConfig>,
    requests: &[(u64, IoKind, u64, u64)],
) -> Ops {
    let recorded: Vec<Option<Arc<Recorded>>> = (0..g.raid_disks)
        .map(|r| {
            (!missing.contains(&r))
                .then(|| Arc::new(Recorded::new(Arc::new(MemVolume::new(MEMBER)))))
        })
        .collect();
    let members = recorded
        .iter()
        .map(|m| m.clone().map(|m| m as Arc<dyn Volume>))
        .collect();
    let array = Array::new("real", *g, members).expect("real array");
    let clock = Arc::new(VirtualClock::default());
    if let Some(cfg) = cache {
        array
            .start_stripe_cache_driven(cfg, clock.clone())
            .expect("cache");
    }
    for &(at, kind, offset, len) in requests {
        clock.set(at);
        match kind {
            IoKind::Read => array
                .read_at(&mut vec![0; len as usize], offset)
                .expect("read"),
            IoKind::Write => array
                .write_at(&vec![0; len as usize], offset)
                .expect("write"),
            IoKind::Zero => array.write_zeroes(offset, len).expect("write-zeroes"),
            IoKind::Flush => array.flush().expect("flush"),
            IoKind::Trim => {}
        }
    }
    array.flush().expect("final flush");
    let mut ops: Ops = Vec::new();
    for (role, m) in recorded.iter().enumerate() {
        if let Some(m) = m {
            for a in m.take() {
                let kind = match a.access {
                    Access::Read => IoKind::Read,
                    Access::Write => IoKind::Write,
                };
                ops.push((kind, role, a.offset, a.len));
            }
        }
    }
    ops.sort_unstable();
    ops
}

fn check(level: Level, n: usize, missing: &[usize], cache: Option<StripeCacheConfig>) {
    let chunk = if level == Level::Raid1 { 0 } else { 64 << 10 };
    let g = Geometry::new(level, Layout::parse(level, None).unwrap(), chunk, n, MEMBER).unwrap();
    let (sim, requests) = simulate(&g, missing, cache);
    assert!(
        requests.len() > 1000,
        "the workload ran ({} requests)",
        requests.len()
    );
    let real = replay(&g, missing, cache, &requests);
    assert!(!real.is_empty());
    assert_eq!(
        sim.len(),
        real.len(),
        "{} of {n} missing {missing:?}: member op counts differ",
        level.name()
    );
    assert!(
        sim == real,
        "{} of {n} missing {missing:?}: member ops differ",
        level.name()
    );
}

#[test]
fn every_level_complete_and_degraded_issues_the_real_engines_member_ops() {
    for (level, n, missing) in [
        (Level::Raid0, 3, vec![]),
        (Level::Raid1, 2, vec![]),
        (Level::Raid1, 3, vec![1]),
        (Level::Raid4, 4, vec![]),
        (Level::Raid4, 4, vec![3]),
        (Level::Raid5, 4, vec![]),
        (Level::Raid5, 4, vec![2]),
        (Level::Raid6, 5, vec![]),
        (Level::Raid6, 5, vec![0]),
        (Level::Raid6, 6, vec![1, 4]),
        (Level::Raid10, 4, vec![]),
        (Level::Raid10, 4, vec![1]),
    ] {
        check(level, n, &missing, None);
    }
}

#[test]
fn with_the_stripe_cache_too() {
    let cfg = StripeCacheConfig {
        stripes: 16,
        hold: Duration::from_secs(3600),
        ..StripeCacheConfig::default()
    };
    for (level, n, missing) in [
        (Level::Raid5, 4, vec![]),
        (Level::Raid5, 5, vec![4]),
        (Level::Raid6, 6, vec![]),
        (Level::Raid6, 6, vec![2]),
    ] {
        check(level, n, &missing, Some(cfg));
    }
}
