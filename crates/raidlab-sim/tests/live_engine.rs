//! The engine run live in virtual time (`TaskArray`: each request a task of
//! the real `Array`, its stripe locks, log locks and the stripe cache's thread
//! the engine's own) against the recorded-plan replay (`SimArray`, with the
//! simulator's own lock table): where no two requests meet, both must give
//! the same member I/O and the same figures to the nanosecond; where they
//! meet, the engine's locks must serialise them; a rebuild is the engine's
//! own loop, and a failing member meets the engine's failure handling.

use raidlab_layout::{Geometry, Layout, Level};
use raidlab_raid::stripe_cache::StripeCacheConfig;
use raidlab_sim::array::{ArraySpec, SimArray, TaskArray, DATA_OFFSET};
use raidlab_sim::device::{Device, MS, SEC};
use raidlab_sim::host::HostCost;
use raidlab_sim::ideal::Ideal;
use raidlab_sim::workload::{run, Job, Pattern};

const MEMBER: u64 = 1 << 30;

fn spec(level: Level, n: usize, cache: Option<StripeCacheConfig>, lat_us: f64) -> ArraySpec {
    let chunk = if level == Level::Raid1 { 0 } else { 64 << 10 };
    let g = Geometry::new(level, Layout::parse(level, None).unwrap(), chunk, n, MEMBER).unwrap();
    ArraySpec {
        name: "t".into(),
        geometry: g,
        members: (0..n)
            .map(|_| {
                Some(Box::new(Ideal::new(DATA_OFFSET + MEMBER, lat_us, 100.0)) as Box<dyn Device>)
            })
            .collect(),
        stripe_cache: cache,
        host: HostCost::default(),
        rebuild: None,
    }
}

fn job(pattern: Pattern, block: u64, read: bool, qd: u32, region: u64) -> Job {
    let mut j = Job::new(pattern, block, read, 1, qd, region);
    j.duration = SEC;
    j
}

/// (ops, member reads, member writes, mean latency in ns) of `job` on both.
fn both(
    level: Level,
    n: usize,
    cache: Option<StripeCacheConfig>,
    j: &Job,
) -> [(u64, u64, u64, f64); 2] {
    let mut replay = SimArray::new(spec(level, n, cache, 100.0)).unwrap();
    let mut live = TaskArray::new(spec(level, n, cache, 100.0)).unwrap();
    let a = run(&mut replay, j, 0).unwrap();
    let b = run(&mut live, j, 0).unwrap();
    assert!(replay.errors().is_empty(), "{:?}", replay.errors());
    assert!(live.errors().is_empty(), "{:?}", live.errors());
    let (la, lb) = (replay.member_ops().unwrap(), live.member_ops().unwrap());
    [
        (a.ops, la.reads, la.writes, a.mean_latency_ns),
        (b.ops, lb.reads, lb.writes, b.mean_latency_ns),
    ]
}

#[test]
fn one_request_at_a_time_the_live_engine_matches_the_replay_exactly() {
    for (level, n) in [
        (Level::Raid0, 4),
        (Level::Raid1, 2),
        (Level::Raid10, 4),
        (Level::Raid5, 4),
        (Level::Raid6, 6),
    ] {
        for (pattern, block, read) in [
            (Pattern::Random, 4096, true),
            (Pattern::Random, 4096, false),
            (Pattern::Sequential, 1 << 20, false),
        ] {
            let [a, b] = both(level, n, None, &job(pattern, block, read, 1, 1 << 30));
            assert!(a.0 > 50, "{level:?} ran {} requests", a.0);
            assert_eq!(a, b, "{level:?} {pattern:?} {block} read={read}");
        }
    }
}

#[test]
fn with_the_stripe_cache_and_its_thread_the_live_engine_matches_the_replay() {
    // Sequential 4K writes fill stripes in the cache; random ones wait for
    // its thread's hold time: the live run has the engine's own thread.
    let cache = Some(StripeCacheConfig::default());
    for (pattern, region) in [(Pattern::Sequential, 1 << 30), (Pattern::Random, 1 << 30)] {
        let [a, b] = both(
            Level::Raid5,
            4,
            cache,
            &job(pattern, 4096, false, 1, region),
        );
        assert!(a.0 > 100);
        assert_eq!(a, b, "{pattern:?}");
    }
}

#[test]
fn requests_that_meet_on_a_stripe_wait_for_the_engines_lock() {
    // 32 writes at once within 8 stripes: they meet on stripe locks all the
    // time. The replay's lock table and the engine's locks take the same
    // rule (all keys at once, first come first served), so the counts of
    // member I/O agree; nothing ran two writes to one stripe together, or a
    // read-modify-write would have read parity another write had not
    // finished, which the member I/O counts would not show but the
    // acknowledged count would (every write still costs 4 member I/Os).
    let region = 8 * 3 * (64 << 10);
    let [a, b] = both(
        Level::Raid5,
        4,
        None,
        &job(Pattern::Random, 4096, false, 32, region),
    );
    eprintln!("replay {a:?} live {b:?}");
    assert!(b.0 > 100, "{b:?}");
    assert_eq!(
        b.1, b.2,
        "a read and a write of each of data and parity: {b:?}"
    );
    let within = |x: f64, y: f64| (x / y - 1.0).abs() <= 0.01;
    assert!(within(a.0 as f64, b.0 as f64), "replay {a:?} live {b:?}");
}

/// A RAID 5 of 4 members (64 MiB each) with role 1 rebuilt from the start,
/// at `rate` bytes a second at most.
fn rebuilding(rate: Option<u64>) -> ArraySpec {
    let member = 64 << 20;
    let disk = || Box::new(Ideal::new(DATA_OFFSET + member, 50.0, 200.0)) as Box<dyn Device>;
    let g = Geometry::new(
        Level::Raid5,
        Layout::parse(Level::Raid5, None).unwrap(),
        64 << 10,
        4,
        member,
    )
    .unwrap();
    ArraySpec {
        name: "r".into(),
        geometry: g,
        members: (0..4).map(|r| (r != 1).then(disk)).collect(),
        stripe_cache: None,
        host: HostCost::default(),
        rebuild: Some(raidlab_sim::array::RebuildSpec {
            role: 1,
            device: disk(),
            max_rate: rate,
            from: 0,
        }),
    }
}

fn rebuild_under_load(dev: &mut dyn Device, rate: Option<u64>) -> (u64, u64, Option<u64>) {
    let mut j = Job::new(Pattern::Random, 4096, true, 1, 4, 64 << 20);
    j.duration = 2 * SEC;
    let out = run(dev, &j, 0).unwrap();
    // Then idle until the rebuild is over.
    let mut done = Vec::new();
    while let Some(t) = dev.next_event() {
        dev.advance(t, &mut done);
    }
    let p = dev.rebuild_progress().unwrap();
    assert_eq!(p.done, p.total, "rate {rate:?}");
    (out.ops, p.done, p.finished)
}

#[test]
fn the_engines_own_rebuild_loop_runs_under_load_in_virtual_time() {
    for rate in [None, Some(20 << 20)] {
        let mut replay = SimArray::new(rebuilding(rate)).unwrap();
        let mut live = TaskArray::new(rebuilding(rate)).unwrap();
        let a = rebuild_under_load(&mut replay, rate);
        let b = rebuild_under_load(&mut live, rate);
        assert!(live.errors().is_empty(), "{:?}", live.errors());
        eprintln!("rate {rate:?}: replay {a:?} live {b:?}");
        let (ta, tb) = (a.2.unwrap() as f64, b.2.unwrap() as f64);
        // The live loop also flushes the new member at every checkpoint
        // (every 64 MiB, as `raidlab serve`'s does); the replay does not.
        assert!((tb / ta - 1.0).abs() < 0.02, "rate {rate:?}: {a:?} {b:?}");
        assert!((b.0 as f64 / a.0 as f64 - 1.0).abs() < 0.02, "{a:?} {b:?}");
        if let Some(r) = rate {
            // Paced: 64 MiB at 20 MiB/s takes at least 3.2 s, waiting before
            // each step and never after the last (md's rule).
            assert!(tb >= (64 << 20) as f64 / r as f64 * 1e9 * 0.95, "{tb}");
        }
    }
}

fn fault_spec(items: &[&str]) -> raidlab_sim::array::FaultSpec {
    let items: Vec<String> = items.iter().map(|s| s.to_string()).collect();
    raidlab_sim::array::FaultSpec {
        schedule: raidlab_sim::faults::Schedule::parse(&items).unwrap(),
        spare: None,
        max_rate: None,
    }
}

fn live_with(items: &[&str]) -> TaskArray {
    TaskArray::with_faults(spec(Level::Raid5, 4, None, 100.0), Some(fault_spec(items))).unwrap()
}

fn replay_with(items: &[&str]) -> SimArray {
    SimArray::new(spec(Level::Raid5, 4, None, 100.0))
        .unwrap()
        .with_faults(fault_spec(items))
        .unwrap()
}

#[test]
fn a_member_that_fails_mid_run_is_taken_out_by_the_engine_and_the_load_goes_on() {
    let mut replay = replay_with(&["fail=2@500ms"]);
    let mut live = live_with(&["fail=2@500ms"]);
    let j = {
        let mut j = Job::new(Pattern::Random, 4096, false, 1, 4, 1 << 30);
        j.duration = 2 * SEC;
        j
    };
    let a = run(&mut replay, &j, 0).unwrap();
    let b = run(&mut live, &j, 0).unwrap();
    assert!(live.errors().is_empty(), "{:?}", live.errors());
    assert_eq!(live.out_of_service(), vec![2]);
    let met = live.faults_met().unwrap();
    assert!(met.dead_ops >= 1 && met.failed_plans >= 1, "{met:?}");
    // Degraded writes cost what the replay's cost: the same engine decides.
    eprintln!("replay {} live {} ops; {met:?}", a.ops, b.ops);
    assert!(
        (b.ops as f64 / a.ops as f64 - 1.0).abs() < 0.02,
        "{} {}",
        a.ops,
        b.ops
    );
}

#[test]
fn a_latent_sector_error_is_read_around_and_rewritten_by_the_engine() {
    // Member 1's sectors 2048..2056 of its data area (device bytes from
    // DATA_OFFSET) read badly from the start; a sequential read of the
    // array's start meets them.
    let sector = DATA_OFFSET / 512 + 2048;
    let mut live = live_with(&[&format!("lse=1/{sector}+8@0")]);
    let mut j = Job::new(Pattern::Sequential, 64 << 10, true, 1, 1, 16 << 20);
    j.duration = SEC / 10;
    run(&mut live, &j, 0).unwrap();
    assert!(live.errors().is_empty(), "{:?}", live.errors());
    assert!(
        live.out_of_service().is_empty(),
        "one bad block takes no member out"
    );
    let met = live.faults_met().unwrap();
    assert!(met.lse_reads >= 1, "{met:?}");
    assert_eq!(met.lse_remapped_bytes, 8 * 512, "{met:?}");
}

#[test]
fn sim_show_estimates_a_live_arrays_rebuild_and_check_live() {
    use raidlab_sim::config::SimConfig;
    let at = |engine: &str| {
        let cfg = SimConfig::short(&format!("raid5:4xhdd-7200:member-size=4G{engine}")).unwrap();
        raidlab_sim::summary::summarise(&cfg, &[]).unwrap()
    };
    let (replay, live) = (at(":engine=replay"), at(""));
    // The check is the engine's own scrub as a task; on an idle array its
    // steps take what the replay schedules, to the nanosecond.
    assert_eq!(live.engine_check_seconds, replay.engine_check_seconds);
    assert!(live.engine_check_seconds.is_some());
    // The live rebuild loop also flushes the new member at each checkpoint.
    let (r, l) = (
        replay.engine_rebuild_seconds.unwrap(),
        live.engine_rebuild_seconds.unwrap(),
    );
    assert!(l > r && l < r * 1.05, "replay {r} s, live {l} s");
}

#[test]
fn a_full_stripe_cache_counts_stripes_going_down_as_gone_rather_than_take_down_one_still_filling() {
    // Seed C's software RAID 5 through XFS: the page cache's writeback has
    // many 8K-ish writes in flight over a few streams and fills the stripe
    // cache. With the replay every write-out is over at once; live, the
    // oldest stripe is still going down when the next writer finds the cache
    // full. The engine used to take the next-oldest partial stripe down then
    // (a read-modify-write of a stripe a stream was filling): live, block
    // output fell to half here and to a tenth in seed C. A stripe whose
    // write-out has begun now counts as gone.
    use raidlab_sim::config::SimConfig;
    let base = "raid5:6xsamsung-hd753lj:chunk=64K:member-size=100G:scheduler=cfq:host=linux-2.6.2x-md:fs=xfs";
    let mut got = Vec::new();
    for engine in ["replay", "live"] {
        let mut dev = SimConfig::short(&format!("{base}:engine={engine}"))
            .unwrap()
            .build(&[])
            .unwrap();
        let mut j = Job::new(Pattern::Sequential, 8192, false, 1, 1, 1 << 30);
        j.duration = SEC;
        let out = run(dev.as_mut(), &j, 0).unwrap();
        let l = dev.member_ops().unwrap();
        got.push((out.mb_per_s, l.reads, l.writes));
    }
    let [(replay_mb, replay_reads, _), (live_mb, live_reads, _)] = got[..] else {
        unreachable!()
    };
    assert!(live_mb >= replay_mb * 0.9, "{got:?}");
    assert!(live_reads <= replay_reads.max(10) * 3, "{got:?}");
}

#[test]
fn a_spare_is_rebuilt_live_under_load_and_reported_as_the_replay_reports_it() {
    // A member dies at 100 ms, a spare comes at 200 ms: the engine takes the
    // member out when the load meets it, and its own rebuild loop (a task)
    // rebuilds onto the spare while the load goes on.
    use raidlab_sim::config::SimConfig;
    let base = "raid5:4xhdd-7200:member-size=256M:fail=1@100ms:spare=200ms";
    let mut got = Vec::new();
    for engine in ["replay", "live"] {
        let mut dev = SimConfig::short(&format!("{base}:engine={engine}"))
            .unwrap()
            .build(&[])
            .unwrap();
        let mut j = Job::new(Pattern::Random, 4096, true, 1, 4, 768 << 20);
        j.duration = 6 * SEC;
        run(dev.as_mut(), &j, 0).unwrap();
        let r = dev.fault_report().expect("faults are reported both ways");
        assert_eq!(r.host_errors, 0, "{engine}: {r:?}");
        assert_eq!(r.taken_out.len(), 1, "{engine}: {r:?}");
        let (role, at) = r.taken_out[0];
        assert!(
            role == 1 && (100 * MS..200 * MS).contains(&at),
            "{engine}: {r:?}"
        );
        let rb = r.rebuild.expect("the spare's rebuild");
        // At 200 ms, or once the dead member's last operation in flight
        // has come back.
        assert!(
            rb.role == 1 && (200 * MS..250 * MS).contains(&rb.started),
            "{engine}: {rb:?}"
        );
        assert!(rb.error.is_none(), "{engine}: {:?}", rb.error);
        let finished = rb.finished.expect("the rebuild ends within the run");
        let (b, d, a) = (
            rb.iops_before.unwrap(),
            rb.iops_during.unwrap(),
            rb.iops_after.unwrap(),
        );
        assert!(d < b && d < a, "{engine}: {b} {d} {a}");
        let p = dev.rebuild_progress().unwrap();
        assert_eq!(p.done, p.total, "{engine}");
        got.push((finished, d));
    }
    eprintln!(
        "replay (finished ns, IOPS during) {:?}, live {:?}",
        got[0], got[1]
    );
    let (replay, live) = (got[0], got[1]);
    // The live loop also flushes the new member at each checkpoint.
    assert!(
        (live.0 as f64 / replay.0 as f64 - 1.0).abs() < 0.05,
        "{got:?}"
    );
    assert!((live.1 / replay.1 - 1.0).abs() < 0.05, "{got:?}");
}

#[test]
fn a_live_rebuild_under_random_writes_gets_past_its_checkpoints() {
    // The rebuild loop flushes its new member at every checkpoint (64 MiB).
    // That flush once went to role 0 (the executor read a one-volume table's
    // position as a role), which under a steady write load never drained:
    // the rebuild stopped at 64 MiB for good.
    use raidlab_sim::config::SimConfig;
    let mut dev = SimConfig::short("raid6:6xhdd-7200:member-size=256M:fail=2@100ms:spare=200ms")
        .unwrap()
        .build(&[])
        .unwrap();
    let mut j = Job::new(Pattern::Random, 4096, false, 1, 32, 1 << 30);
    // The copy is over in under a minute; the last flush of the new member
    // (which takes the load's writes below the rebuild's position too) waits
    // for its write cache to drain under the load: about 30 s more.
    j.duration = 150 * SEC;
    run(dev.as_mut(), &j, 0).unwrap();
    let p = dev.rebuild_progress().expect("a spare's rebuild");
    assert_eq!(p.done, p.total, "{p:?}");
    let r = dev.fault_report().unwrap();
    assert_eq!(r.host_errors, 0, "{r:?}");
    assert!(r.rebuild.unwrap().finished.is_some());
}
