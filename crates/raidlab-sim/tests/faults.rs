//! Members fail in simulation: faults at virtual times reach the engine as
//! member errors, and the engine's own failure handling (take the member
//! out, plan degraded, rewrite a bad block, rebuild onto a spare) is what the
//! device models then carry out. Known answers on ideal members (fixed
//! latency and rate), exact because virtual time has no noise. The engine runs
//! live: a fault meets a request when its plan runs, mid-request.

use raidlab_core::IoKind;
use raidlab_layout::{Geometry, Layout, Level};
use raidlab_sim::array::{ArraySpec, FaultSpec, TaskArray, DATA_OFFSET};
use raidlab_sim::config::SimConfig;
use raidlab_sim::device::{Completion, Device, Ns, Request, MS, SEC};
use raidlab_sim::faults::Schedule;
use raidlab_sim::host::HostCost;
use raidlab_sim::ideal::Ideal;
use raidlab_sim::stats::MemberIo;
use raidlab_sim::workload::{run, Job, Pattern};

const MEMBER: u64 = 8 << 20;
const CHUNK: u64 = 64 << 10;

fn ideal() -> Box<dyn Device> {
    Box::new(Ideal::new(DATA_OFFSET + MEMBER, 50.0, 200.0))
}

/// An array of `n` ideal members at `level` with `faults` (`spare=` gets a
/// fresh ideal member).
fn array(level: Level, n: usize, faults: &[&str]) -> TaskArray {
    let g = Geometry::new(level, Layout::parse(level, None).unwrap(), CHUNK, n, MEMBER).unwrap();
    let schedule =
        Schedule::parse(&faults.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let spare = schedule.spare().map(|_| ideal());
    let mut sim = TaskArray::with_faults(
        ArraySpec {
            name: "f".into(),
            geometry: g,
            members: (0..n).map(|_| Some(ideal())).collect(),
            stripe_cache: None,
            host: HostCost::default(),
            rebuild: None,
        },
        Some(FaultSpec {
            schedule,
            spare,
            max_rate: None,
        }),
    )
    .unwrap();
    sim.keep_ops();
    sim
}

/// One request at `at`, waited for: when it completed.
fn one(sim: &mut TaskArray, at: Ns, kind: IoKind, offset: u64, len: u64) -> Ns {
    // Whatever is due before `at` happens first (the Device contract).
    let mut done: Vec<Completion> = Vec::new();
    while let Some(t) = sim.next_event().filter(|&t| t <= at) {
        sim.advance(t, &mut done);
    }
    sim.submit(
        at,
        Request {
            id: 7,
            kind,
            offset,
            len,
            process: 0,
        },
    );
    loop {
        if let Some(c) = done.iter().find(|c| c.id == 7) {
            return c.at;
        }
        let t = sim.next_event().expect("the request completes");
        sim.advance(t, &mut done);
    }
}

fn ops(sim: &TaskArray) -> &[MemberIo] {
    &sim.member_ops().unwrap().ops
}

/// (reads, writes, bytes written) of `member` among `ops`.
fn on(ops: &[MemberIo], member: usize) -> (usize, usize, u64) {
    ops.iter()
        .filter(|o| o.member == member)
        .fold((0, 0, 0), |(r, w, b), o| match o.kind {
            IoKind::Read => (r + 1, w, b),
            IoKind::Write => (r, w + 1, b + o.len),
            _ => (r, w, b),
        })
}

#[test]
fn a_failed_raid5_member_gets_no_io_after_the_first_request_that_meets_it() {
    let mut sim = array(Level::Raid5, 4, &["fail=1@10ms"]);
    // Before the fault: a full-stripe read reads role 1 like the others.
    let mut t = one(&mut sim, 0, IoKind::Read, 0, 3 * CHUNK);
    t = one(&mut sim, t, IoKind::Write, 0, 4096);
    assert!(t < 10 * MS);
    let before = ops(&sim).len();
    assert!(
        on(ops(&sim), 1).0 > 0,
        "role 1 served reads before it failed"
    );
    // After it: the engine meets the dead member, takes it out and reads
    // around it; nothing more reaches the member's device.
    let after = 10 * MS;
    let mut t = after;
    let mut first = None;
    for i in 0..8 {
        t = one(&mut sim, t, IoKind::Read, i * CHUNK, 3 * CHUNK);
        first.get_or_insert(t);
        t = one(&mut sim, t, IoKind::Write, i * 4096, 4096);
    }
    assert_eq!(on(&ops(&sim)[before..], 1), (0, 0, 0));
    assert_eq!(sim.engine().failed_members(), vec![1]);
    let r = sim.fault_report().unwrap();
    // Taken out while the first read after the fault ran: the engine hears
    // of the failure when that read's member operation fails, mid-request.
    assert_eq!(r.taken_out.len(), 1, "{:?}", r.taken_out);
    let (role, at) = r.taken_out[0];
    assert_eq!(role, 1);
    assert!(
        after < at && at <= first.unwrap(),
        "{at} against {after}..{first:?}"
    );
    // The read that met it (role 1's piece), then the engine's rewrite of that
    // piece from redundancy (md's read-error repair), which failed too: two
    // operations errored, and no later plan used the member.
    assert_eq!(r.met.dead_ops, 2);
    assert_eq!(r.host_errors, 0);
    assert!(sim.errors().is_empty(), "{:?}", sim.errors());
}

#[test]
fn a_latent_sector_error_is_repaired_by_a_degraded_read_and_a_rewrite() {
    // Role 2's first 4 KiB of data (array bytes 128K.., its chunk of stripe 0).
    let sector = DATA_OFFSET / 512;
    let mut sim = array(Level::Raid5, 4, &[&format!("lse=2/{sector}+8@1ms")]);
    let t = one(&mut sim, 2 * MS, IoKind::Read, 2 * CHUNK, 4096);
    let all = ops(&sim).to_vec();
    // The read of role 2 failed; the engine read the other three, computed
    // role 2's piece of the stripe (its repair unit, the chunk), wrote it back
    // to role 2 and read it back; then the request's read was planned again
    // and read role 2.
    assert_eq!(on(&all, 2), (3, 1, CHUNK));
    for m in [0, 1, 3] {
        assert_eq!(on(&all, m), (1, 0, 0), "member {m}");
    }
    let r = sim.fault_report().unwrap();
    assert_eq!(r.repaired, vec![0, 0, 1, 0]);
    assert_eq!(r.met.lse_reads, 1);
    assert_eq!(r.met.lse_remapped_bytes, 4096);
    assert!(r.taken_out.is_empty());
    assert_eq!(r.host_errors, 0);
    // Rewritten, the sectors read again: one read, nothing repaired.
    let n = all.len();
    one(&mut sim, t, IoKind::Read, 2 * CHUNK, 4096);
    assert_eq!(on(&ops(&sim)[n..], 2), (1, 0, 0));
    assert_eq!(sim.fault_report().unwrap().repaired, vec![0, 0, 1, 0]);
}

#[test]
fn raid0_with_a_failed_member_returns_errors_and_says_so() {
    let mut sim = array(Level::Raid0, 2, &["fail=1@0"]);
    // Role 0's chunk still reads; role 1's cannot be served.
    let t = one(&mut sim, 0, IoKind::Read, 0, 4096);
    let t = one(&mut sim, t, IoKind::Read, CHUNK, 4096);
    let end = one(&mut sim, t, IoKind::Write, CHUNK, 4096);
    let r = sim.fault_report().unwrap();
    assert_eq!(r.host_errors, 2);
    let first = r.first_host_error.as_deref().unwrap();
    assert!(
        first.contains("read failed on f member 1") && first.contains("cannot serve this range"),
        "{first}"
    );
    // The write took the member out when the engine ran it (after the
    // request's host overhead); the array cannot serve role 1's data.
    assert_eq!(r.taken_out.len(), 1, "{:?}", r.taken_out);
    let (role, at) = r.taken_out[0];
    assert!(
        role == 1 && t < at && at <= end,
        "{:?}, the write {t}..{end}",
        r.taken_out
    );
    assert_eq!(sim.errors().len(), 2);
    assert!(r
        .lines()
        .iter()
        .any(|l| l.starts_with("host requests failed: 2")));
}

#[test]
fn a_spare_at_its_time_is_rebuilt_and_ends_in_service() {
    let mut sim = array(Level::Raid5, 4, &["fail=1@10ms", "spare=20ms"]);
    let mut job = Job::new(Pattern::Random, 4096, true, 1, 1, 3 * MEMBER);
    job.duration = SEC;
    let out = run(&mut sim, &job, 0).unwrap();
    assert!(out.ops > 0);
    let r = sim.fault_report().unwrap();
    // The load met the dead member before the spare came, and the engine
    // took it out then.
    assert_eq!(r.taken_out.len(), 1);
    let (role, at) = r.taken_out[0];
    assert!(
        role == 1 && (10 * MS..20 * MS).contains(&at),
        "{:?}",
        r.taken_out
    );
    let rb = r.rebuild.unwrap();
    assert_eq!((rb.role, rb.started), (1, 20 * MS));
    let finished = rb.finished.expect("the rebuild ends within the run");
    assert!(finished > 20 * MS && finished < SEC);
    assert!(rb.error.is_none());
    // The load ran before, during and after; it is slower while the rebuild
    // reads every other member.
    let (b, d, a) = (
        rb.iops_before.unwrap(),
        rb.iops_during.unwrap(),
        rb.iops_after.unwrap(),
    );
    assert!(d < b && d < a, "{b} {d} {a}");
    // The new member took over the role: every role live, no rebuild left,
    // and it was written exactly once over (the load only reads).
    assert_eq!(sim.engine().live(), vec![true; 4]);
    assert!(sim.engine().recovery().is_none());
    assert_eq!(on(ops(&sim), 1).2, MEMBER);
    assert!(sim.errors().is_empty(), "{:?}", sim.errors());
}

#[test]
fn a_raid6_rebuild_reads_around_a_latent_sector_error_on_a_source() {
    // Role 2 fails, a spare comes, and role 1 cannot read a range near its
    // end (where the load, kept to the first array MiBs, never goes): the
    // rebuild computes that range from the members left, as md's recovery
    // does, instead of failing the new member.
    let faults = ["fail=2@10ms", "lse=1/15000+64@0", "spare=20ms"];
    let mut sim = array(Level::Raid6, 5, &faults);
    let mut job = Job::new(Pattern::Random, 4096, true, 1, 1, MEMBER);
    job.duration = SEC;
    run(&mut sim, &job, 0).unwrap();
    let r = sim.fault_report().unwrap();
    let rb = r.rebuild.unwrap();
    assert!(rb.error.is_none(), "{:?}", rb.error);
    assert!(rb.finished.is_some(), "the rebuild ends within the run");
    assert_eq!(r.met.lse_reads, 1, "the rebuild met the bad range once");
    assert_eq!(r.host_errors, 0);
    assert_eq!(sim.engine().live(), vec![true; 5]);
    assert!(sim.errors().is_empty(), "{:?}", sim.errors());
}

#[test]
fn raid6_with_two_failed_members_still_reads() {
    let mut sim = array(Level::Raid6, 5, &["fail=1@0", "fail=3@0"]);
    let mut job = Job::new(Pattern::Random, 4096, true, 1, 4, 3 * MEMBER);
    job.duration = 200 * MS;
    let out = run(&mut sim, &job, 0).unwrap();
    assert!(out.ops > 100);
    let r = sim.fault_report().unwrap();
    let mut out_roles: Vec<usize> = r.taken_out.iter().map(|&(r, _)| r).collect();
    out_roles.sort_unstable();
    assert_eq!(out_roles, vec![1, 3]);
    assert_eq!(r.host_errors, 0);
    assert_eq!((on(ops(&sim), 1), on(ops(&sim), 3)), ((0, 0, 0), (0, 0, 0)));
    assert!(sim.errors().is_empty(), "{:?}", sim.errors());
}

#[test]
fn a_third_raid6_failure_is_refused_by_the_engine_not_a_panic() {
    let mut sim = array(Level::Raid6, 5, &["fail=0@0", "fail=1@0", "fail=2@0"]);
    let mut job = Job::new(Pattern::Random, 4096, false, 1, 4, 3 * MEMBER);
    job.duration = 50 * MS;
    run(&mut sim, &job, 0).unwrap();
    let r = sim.fault_report().unwrap();
    assert!(r.host_errors > 0);
    let e = r.first_host_error.unwrap();
    assert!(e.contains("it tolerates two missing members"), "{e}");
}

/// A whole run's figures: the workload's outcome, the report and every
/// member operation.
fn figures(spec: &str) -> String {
    let mut dev = SimConfig::short(spec).unwrap().build(&[]).unwrap();
    let mut job = Job::new(Pattern::Random, 4096, true, 2, 8, 128 << 20);
    job.read_percent = 70;
    job.duration = 2 * SEC;
    let out = run(dev.as_mut(), &job, 0).unwrap();
    format!(
        "{out:?} {:?} {:?}",
        dev.fault_report(),
        dev.member_ops()
            .map(|l| (l.reads, l.writes, l.read_bytes, l.write_bytes))
    )
}

#[test]
fn the_same_configuration_twice_gives_identical_figures() {
    let spec = "raid5:4xhdd-7200:member-size=64M:fail=2@300ms:lse=1/4096+64@0:spare=1s";
    let a = figures(spec);
    assert_eq!(a, figures(spec));
    // The faults did something: a member out, a rebuild, a repair.
    assert!(a.contains("taken_out: [(2,"), "{a}");
    assert!(a.contains("rebuild: Some(RebuildPhases { role: 2"), "{a}");
}

#[test]
fn bad_faults_are_errors_naming_their_part() {
    let e = SimConfig::short("raid5:4xhdd-7200:fail=7@1s").unwrap_err();
    assert!(
        e.to_string().contains("fail=7@1s") && e.to_string().contains("role 7"),
        "{e}"
    );
    let e = SimConfig::short("raid5:4xhdd-7200:spare=1s").unwrap_err();
    assert!(e.to_string().contains("no member has failed"), "{e}");
    let e = SimConfig::short("raid5:4xhdd-7200:fail=1@1s:spare=2s:rebuild=0").unwrap_err();
    assert!(e.to_string().contains("one member at a time"), "{e}");
    let e = SimConfig::short("raid6:5xhdd-7200:rebuild=1:fail=1@1s").unwrap_err();
    assert!(
        e.to_string().contains("fail=1@1s") && e.to_string().contains("no device of its own"),
        "{e}"
    );
    let e = SimConfig::short("raid5:4xhdd-7200:fail=1@1y").unwrap_err();
    assert!(e.to_string().contains("unknown time unit"), "{e}");
    let e = SimConfig::short("raid5:4xhdd-7200:lse=1/0+8").unwrap_err();
    assert!(e.to_string().contains("@TIME"), "{e}");
    let cfg = SimConfig::short("raid5:4xhdd-7200:member-size=64M:lse=1/999999999999+8@1s").unwrap();
    let e = cfg.build(&[]).unwrap_err();
    assert!(e.to_string().contains("past member 1"), "{e}");
    // More failures than the level tolerates are allowed: the engine refuses
    // the requests, in the run's result.
    SimConfig::short("raid0:2xhdd-7200:fail=0@1s:fail=1@1s")
        .unwrap()
        .build(&[])
        .unwrap();
    // A spare's rebuild takes the rebuild's rate.
    SimConfig::short("raid5:4xhdd-7200:fail=1@1s:spare=2s:rebuild-rate=50M")
        .unwrap()
        .build(&[])
        .unwrap();
}

#[test]
fn a_spare_the_engine_cannot_rebuild_is_reported_with_its_refusal() {
    // RAID 0 has nothing to rebuild from: the engine refuses to take the
    // failed member out for the spare, and the report says why.
    let mut sim = array(Level::Raid0, 2, &["fail=1@1ms", "spare=2ms"]);
    let mut done = Vec::new();
    while let Some(t) = sim.next_event() {
        sim.advance(t, &mut done);
    }
    let r = sim.fault_report().unwrap();
    assert!(r.rebuild.is_none());
    let e = r.spare_error.unwrap();
    assert!(
        e.contains("failing role 1 for the spare") && e.contains("unable to serve"),
        "{e}"
    );
    assert!(sim.rebuild_progress().is_none());
}

#[test]
fn a_slow_member_slows_the_array_from_its_time_only() {
    let iops = |spec: &str| {
        let mut dev = SimConfig::short(spec).unwrap().build(&[]).unwrap();
        let mut job = Job::new(Pattern::Random, 4096, true, 1, 1, 128 << 20);
        job.duration = 2 * SEC;
        run(dev.as_mut(), &job, 0).unwrap()
    };
    let base = iops("raid0:2xhdd-7200:member-size=64M");
    // Slow from after the run's end: the wrapped model is untouched.
    assert_eq!(iops("raid0:2xhdd-7200:member-size=64M:slow=1*4@10s"), base);
    // Slow from the start: role 1's reads take four times as long.
    let slow = iops("raid0:2xhdd-7200:member-size=64M:slow=1*4@0");
    assert!(
        slow.iops < base.iops * 0.6,
        "{} against {}",
        slow.iops,
        base.iops
    );
    assert!(
        slow.iops > base.iops * 0.25,
        "{} against {}",
        slow.iops,
        base.iops
    );
}
