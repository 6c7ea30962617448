//! A rebuild running in the simulator is the engine's own live rebuild: its
//! steps are the engine's rebuild plans, scheduled in virtual time beside the
//! workload. Known answers on ideal members (fixed latency and rate), exact
//! because virtual time has no noise.

use raidlab_core::IoKind;
use raidlab_layout::{Geometry, Layout, Level};
use raidlab_sim::array::{ArraySpec, RebuildSpec, TaskArray, DATA_OFFSET};
use raidlab_sim::config::SimConfig;
use raidlab_sim::device::{Device, Ns};
use raidlab_sim::host::HostCost;
use raidlab_sim::ideal::Ideal;
use raidlab_sim::workload::{run, Job, Pattern};

const MEMBER: u64 = 8 << 20;
const STEP: u64 = raidlab_raid::live::REBUILD_STEP;
const LATENCY_US: f64 = 50.0;
const MB_PER_S: f64 = 200.0;

fn ideal() -> Box<dyn Device> {
    Box::new(Ideal::new(DATA_OFFSET + MEMBER, LATENCY_US, MB_PER_S))
}

/// A RAID 5 of `n` ideal members with role 1 being rebuilt.
fn rebuilding(n: usize, max_rate: Option<u64>) -> TaskArray {
    let level = Level::Raid5;
    let g = Geometry::new(
        level,
        Layout::parse(level, None).unwrap(),
        64 << 10,
        n,
        MEMBER,
    )
    .unwrap();
    let mut sim = TaskArray::new(ArraySpec {
        name: "r".into(),
        geometry: g,
        members: (0..n).map(|r| (r != 1).then(ideal)).collect(),
        stripe_cache: None,
        host: HostCost::default(),
        rebuild: Some(RebuildSpec {
            role: 1,
            device: ideal(),
            max_rate,
            from: 0,
        }),
    })
    .unwrap();
    sim.keep_ops();
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

#[test]
fn an_idle_rebuild_reads_every_other_member_once_and_writes_the_new_one() {
    let mut sim = rebuilding(4, None);
    idle(&mut sim);
    let p = sim.rebuild_progress().unwrap();
    assert_eq!((p.role, p.done, p.total), (1, MEMBER, MEMBER));
    // Each step: the three other members read at once, the lost one
    // recomputed from their 3 MiB at the host's parity rate, the new member
    // written; one step at a time.
    let parity = HostCost::default().parity_mb_per_s;
    let compute = (3.0 * STEP as f64 / (parity * 1e6) * 1e9).round() as Ns;
    let per_step = service(STEP) + compute + service(STEP);
    // Then the engine's loop flushes the new member at its last checkpoint
    // before the member takes over the role (an ideal member's flush: its
    // latency).
    assert_eq!(p.finished, Some(MEMBER / STEP * per_step + service(0)));
    let ops = sim.member_ops().unwrap();
    for m in 0..4 {
        let (reads, writes): (u64, u64) =
            ops.ops
                .iter()
                .filter(|o| o.member == m)
                .fold((0, 0), |(r, w), o| match o.kind {
                    IoKind::Read => (r + o.len, w),
                    IoKind::Write => (r, w + o.len),
                    _ => (r, w),
                });
        let want = if m == 1 { (0, MEMBER) } else { (MEMBER, 0) };
        assert_eq!((reads, writes), want, "member {m}");
    }
    assert!(sim.errors().is_empty(), "{:?}", sim.errors());
    // The new member has taken over the role: the engine serves from it.
    assert!(sim.engine().recovery().is_none());
    assert_eq!(sim.engine().live(), vec![true; 4]);
}

#[test]
fn a_rate_limited_rebuild_takes_as_long_as_its_rate_says() {
    let rate = 20_000_000; // 20 MB/s: far below what the members can do
    let mut sim = rebuilding(4, Some(rate));
    idle(&mut sim);
    let p = sim.rebuild_progress().unwrap();
    assert_eq!(p.done, MEMBER);
    // The last step starts when the rate allows it, and takes one step's time.
    let last_start = (MEMBER - STEP) as u128 * 1_000_000_000 / rate as u128;
    let parity = HostCost::default().parity_mb_per_s;
    let compute = (3.0 * STEP as f64 / (parity * 1e6) * 1e9).round() as Ns;
    // And the last checkpoint's flush of the new member.
    assert_eq!(
        p.finished,
        Some(last_start as Ns + service(STEP) + compute + service(STEP) + service(0))
    );
}

#[test]
fn foreground_reads_slow_down_while_a_rebuild_runs() {
    let job = |region| {
        let mut j = Job::new(Pattern::Random, 4096, true, 1, 4, region);
        j.duration = 200_000_000; // 0.2 s
        j
    };
    let cfg = |spec: &str| SimConfig::short(spec).unwrap().build(&[]).unwrap();
    let spec = "raid5:4xsata-ssd-1tb-2021:member-size=64M";
    let mut quiet = cfg(spec);
    let region = quiet.capacity();
    let alone = run(quiet.as_mut(), &job(region), 0).unwrap();
    let mut busy = cfg(&format!("{spec}:rebuild=2"));
    let with = run(busy.as_mut(), &job(region), 0).unwrap();
    assert!(
        with.ops < alone.ops,
        "reads beside a rebuild: {} against {} alone",
        with.ops,
        alone.ops
    );
    let described = SimConfig::short(&format!("{spec}:rebuild=2:rebuild-rate=10M"))
        .unwrap()
        .describe();
    assert!(
        described.contains("rebuilding role 2 at most 10M/s"),
        "{described}"
    );
}

#[test]
fn a_rebuild_that_cannot_be_done_is_refused_before_anything_runs() {
    let e = |spec: &str| match SimConfig::short(spec).and_then(|c| c.build(&[])) {
        Ok(_) => panic!("{spec} was accepted"),
        Err(e) => e.to_string(),
    };
    let m = e("raid5:4xhdd-7200:member-size=64M:failed=0:rebuild=2");
    assert!(m.contains("nothing to rebuild role 2 from"), "{m}");
    let m = e("raid5:4xhdd-7200:rebuild=4");
    assert!(m.contains("role 4 does not exist"), "{m}");
    let m = e("raid5:4xhdd-7200:rebuild-rate=10M");
    assert!(m.contains("needs a rebuild"), "{m}");
    let m = e("raid5:4xhdd-7200:rebuild=1:rebuild-rate=0");
    assert!(m.contains("more than 0"), "{m}");
}

#[test]
fn sim_show_s_sampled_engine_rebuild_time_matches_a_whole_simulated_rebuild() {
    let spec = "raid5:4xsata-ssd-1tb-2021:member-size=256M";
    let cfg = SimConfig::short(spec).unwrap();
    let s = raidlab_sim::summary::summarise(&cfg, &[]).unwrap();
    assert_eq!(s.rebuild_role, Some(0));
    let sampled = s.engine_rebuild_seconds.expect("an engine rebuild time");
    // The whole rebuild of role 0, start to end, in one run.
    let mut dev = SimConfig::short(&format!("{spec}:rebuild=0"))
        .unwrap()
        .build(&[])
        .unwrap();
    let mut done = Vec::new();
    while let Some(t) = dev.next_event() {
        dev.advance(t, &mut done);
    }
    let p = dev.rebuild_progress().unwrap();
    assert_eq!(p.done, p.total);
    let whole = p.finished.unwrap() as f64 / 1e9;
    assert!(
        (sampled / whole - 1.0).abs() < 0.02,
        "sampled {sampled:.3} s against a whole rebuild of {whole:.3} s"
    );
    // Virtual time: the same figure on every run.
    let again = raidlab_sim::summary::summarise(&cfg, &[]).unwrap();
    assert_eq!(again.engine_rebuild_seconds, Some(sampled));
    // The quiet sequential estimate covers the 256 MiB used of each device,
    // not the whole 1 TB device: never more than the engine's own rebuild,
    // which reads and writes the same bytes one step at a time.
    let quiet = s.rebuild_seconds.unwrap();
    assert!(quiet > 0.0 && quiet <= whole, "{quiet} s against {whole} s");
}
