//! A scrub (md's check) running in the simulator is raidlab's own: its steps
//! are the engine's scrub plans, scheduled in virtual time beside the
//! workload. Known answers on ideal members (fixed latency and rate), exact
//! because virtual time has no noise. The engine runs live: its own scrub is
//! a task.

use raidlab_core::IoKind;
use raidlab_layout::{Geometry, Layout, Level};
use raidlab_sim::array::DATA_OFFSET;
use raidlab_sim::array::{ArraySpec, TaskArray};
use raidlab_sim::config::SimConfig;
use raidlab_sim::device::{Device, Ns};
use raidlab_sim::host::HostCost;
use raidlab_sim::ideal::Ideal;
use raidlab_sim::scrub::{ScrubSpec, SCRUB_STEP};
use raidlab_sim::workload::{run, Job, Pattern};

const MEMBER: u64 = 8 << 20;
const LATENCY_US: f64 = 50.0;
const MB_PER_S: f64 = 200.0;

fn ideal() -> Box<dyn Device> {
    Box::new(Ideal::new(DATA_OFFSET + MEMBER, LATENCY_US, MB_PER_S))
}

/// An array of `n` ideal members (`failed` missing) with a scrub running.
fn checking(level: Level, n: usize, failed: &[usize], spec: ScrubSpec) -> TaskArray {
    let chunk = if level == Level::Raid1 { 0 } else { 64 << 10 };
    let g = Geometry::new(level, Layout::parse(level, None).unwrap(), chunk, n, MEMBER).unwrap();
    let members = (0..n).map(|r| (!failed.contains(&r)).then(ideal)).collect();
    let mut sim = TaskArray::new(ArraySpec {
        name: "c".into(),
        geometry: g,
        members,
        stripe_cache: None,
        host: HostCost::default(),
        rebuild: None,
    })
    .unwrap();
    sim.keep_ops();
    sim.start_scrub(spec).unwrap();
    sim
}

/// Advance an idle array until nothing more happens.
fn idle(sim: &mut TaskArray) {
    let mut done = Vec::new();
    while let Some(t) = sim.next_event() {
        sim.advance(t, &mut done);
    }
    assert!(done.is_empty(), "no host request was made");
}

/// One ideal member's time for `bytes`, as `Ideal` computes it.
fn service(bytes: u64) -> Ns {
    (LATENCY_US * 1e3).round() as Ns + (bytes as f64 / (MB_PER_S * 1e6) * 1e9).round() as Ns
}

/// Bytes read and written on each member.
fn traffic(sim: &TaskArray, n: usize) -> Vec<(u64, u64)> {
    let ops = sim.member_ops().unwrap();
    (0..n)
        .map(|m| {
            ops.ops
                .iter()
                .filter(|o| o.member == m)
                .fold((0, 0), |(r, w), o| match o.kind {
                    IoKind::Read => (r + o.len, w),
                    IoKind::Write => (r, w + o.len),
                    _ => (r, w),
                })
        })
        .collect()
}

#[test]
fn an_idle_check_reads_every_member_once_and_writes_nothing() {
    for (level, n, failed) in [
        (Level::Raid5, 4, vec![]),
        (Level::Raid6, 5, vec![]),
        (Level::Raid6, 5, vec![3]),
        (Level::Raid1, 3, vec![]),
        (Level::Raid10, 4, vec![]),
    ] {
        {
            let label = format!("{} x{n} failed {failed:?}", level.name());
            let mut sim = checking(level, n, &failed, ScrubSpec::default());
            idle(&mut sim);
            let p = sim.scrub_progress().unwrap();
            assert_eq!((p.done, p.total), (MEMBER, MEMBER), "{label}");
            let want: Vec<(u64, u64)> = (0..n)
                .map(|m| (if failed.contains(&m) { 0 } else { MEMBER }, 0))
                .collect();
            assert_eq!(traffic(&sim, n), want, "{label}");
            assert!(sim.errors().is_empty(), "{label}: {:?}", sim.errors());
            if level == Level::Raid5 {
                // Each step reads the same 2 MiB of every member at once; one
                // step at a time, nothing to compute on consistent data.
                assert_eq!(
                    p.finished,
                    Some(MEMBER / SCRUB_STEP * service(SCRUB_STEP)),
                    "{label}"
                );
            }
        }
    }
}

#[test]
fn a_rate_limited_check_takes_as_long_as_its_rate_says() {
    let rate = 20_000_000; // 20 MB/s of each member: far below what they can do
    let spec = ScrubSpec {
        max_rate: Some(rate),
        from: 0,
        ..ScrubSpec::default()
    };
    {
        let mut sim = checking(Level::Raid5, 4, &[], spec);
        idle(&mut sim);
        let p = sim.scrub_progress().unwrap();
        let last_start = (MEMBER - SCRUB_STEP) as u128 * 1_000_000_000 / rate as u128;
        assert_eq!(p.finished, Some(last_start as Ns + service(SCRUB_STEP)),);
    }
}

#[test]
fn a_resumed_check_reads_only_the_rest() {
    let spec = ScrubSpec {
        max_rate: None,
        from: 6 << 20,
        ..ScrubSpec::default()
    };
    {
        let mut sim = checking(Level::Raid5, 4, &[], spec);
        idle(&mut sim);
        assert_eq!(traffic(&sim, 4), vec![(2 << 20, 0); 4]);
    }
}

#[test]
fn foreground_reads_slow_down_while_a_check_runs() {
    let job = |region| {
        let mut j = Job::new(Pattern::Random, 4096, true, 1, 4, region);
        j.duration = 200_000_000; // 0.2 s
        j
    };
    let cfg = |spec: &str| SimConfig::short(spec).unwrap().build(&[]).unwrap();
    let spec = "raid6:5xhdd-7200:member-size=64M";
    let mut quiet = cfg(spec);
    let region = quiet.capacity();
    let alone = run(quiet.as_mut(), &job(region), 0).unwrap();
    let mut busy = cfg(&format!("{spec}:check=yes"));
    let with = run(busy.as_mut(), &job(region), 0).unwrap();
    assert!(
        with.ops < alone.ops,
        "reads beside a check: {} against {} alone",
        with.ops,
        alone.ops
    );
    let described = SimConfig::short(&format!("{spec}:check=yes:check-rate=10M"))
        .unwrap()
        .describe();
    assert!(described.contains("checking at most 10M/s"), "{described}");
}

#[test]
fn a_check_with_nothing_to_compare_is_refused_before_anything_runs() {
    let e = |spec: &str| match SimConfig::short(spec).and_then(|c| c.build(&[])) {
        Ok(_) => panic!("{spec} was accepted"),
        Err(e) => e.to_string(),
    };
    let m = e("raid5:4xhdd-7200:member-size=64M:failed=0:check=yes");
    assert!(m.contains("no redundancy left to check"), "{m}");
    let m = e("raid0:2xhdd-7200:member-size=64M:check=yes");
    assert!(m.contains("no redundancy left to check"), "{m}");
    let m = e("raid5:4xhdd-7200:check-rate=10M");
    assert!(m.contains("needs a check"), "{m}");
    let m = e("raid5:4xhdd-7200:check=maybe");
    assert!(m.contains("check=yes"), "{m}");
    let m = e("raid5:4xhdd-7200:rebuild=1:check=yes");
    assert!(m.contains("one sync action at a time"), "{m}");
}

#[test]
fn sim_show_s_sampled_check_time_matches_a_whole_simulated_check() {
    let spec = "raid6:5xsata-ssd-1tb-2021:member-size=256M";
    let cfg = SimConfig::short(spec).unwrap();
    let s = raidlab_sim::summary::summarise(&cfg, &[]).unwrap();
    let sampled = s.engine_check_seconds.expect("an engine check time");
    let mut dev = SimConfig::short(&format!("{spec}:check=yes"))
        .unwrap()
        .build(&[])
        .unwrap();
    let mut done = Vec::new();
    while let Some(t) = dev.next_event() {
        dev.advance(t, &mut done);
    }
    let p = dev.scrub_progress().unwrap();
    assert_eq!(p.done, p.total);
    let whole = p.finished.unwrap() as f64 / 1e9;
    assert!(
        (sampled / whole - 1.0).abs() < 0.02,
        "sampled {sampled:.3} s against a whole check of {whole:.3} s"
    );
    let again = raidlab_sim::summary::summarise(&cfg, &[]).unwrap();
    assert_eq!(again.engine_check_seconds, Some(sampled));
    // A degraded RAID 5 has nothing to compare: no figure rather than a refusal.
    let degraded = SimConfig::short("raid5:4xhdd-7200:member-size=64M:failed=1").unwrap();
    let s = raidlab_sim::summary::summarise(&degraded, &[]).unwrap();
    assert_eq!(s.engine_check_seconds, None);
}
