//! The engine run live in virtual time (`TaskArray`: each request a task of
//! the real `Array`, its stripe locks, log locks and the stripe cache's thread
//! the engine's own): where requests meet, the engine's locks serialise them;
//! a rebuild is the engine's own loop, a failing member meets the engine's
//! failure handling, a spare is rebuilt under load. (That one request at a
//! time it issues the real engine's member I/O, with and without the stripe
//! cache, is `equivalence.rs`.)

use raidlab_layout::{Geometry, Layout, Level};
use raidlab_raid::stripe_cache::StripeCacheConfig;
use raidlab_sim::array::{ArraySpec, TaskArray, DATA_OFFSET};
use raidlab_sim::device::{Device, Ns, Request, MS, SEC};
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

/// (ops, member reads, member writes, mean latency in ns) of `job`.
fn live(level: Level, n: usize, cache: Option<StripeCacheConfig>, j: &Job) -> (u64, u64, u64, f64) {
    let mut live = TaskArray::new(spec(level, n, cache, 100.0)).unwrap();
    let b = run(&mut live, j, 0).unwrap();
    assert!(live.errors().is_empty(), "{:?}", live.errors());
    let lb = live.member_ops().unwrap();
    (b.ops, lb.reads, lb.writes, b.mean_latency_ns)
}

#[test]
fn requests_that_meet_on_a_stripe_wait_for_the_engines_lock() {
    // 32 writes at once within 8 stripes: they meet on stripe locks all the
    // time. Every write is a read-modify-write of 4 member I/Os (a read and a
    // write of its data and of parity): the acknowledged writes account for
    // all of them, but for the (at most 32) still in flight at the end.
    let region = 8 * 3 * (64 << 10);
    let b = live(
        Level::Raid5,
        4,
        None,
        &job(Pattern::Random, 4096, false, 32, region),
    );
    assert!(b.0 > 100, "{b:?}");
    assert_eq!(
        b.1, b.2,
        "a read and a write of each of data and parity: {b:?}"
    );
    assert!(
        (4 * b.0..=4 * (b.0 + 32)).contains(&(b.1 + b.2)),
        "4 member I/Os a write: {b:?}"
    );
    // Serialised on their locks, they take longer each than writes that
    // never meet (spread over the whole array).
    let apart = live(
        Level::Raid5,
        4,
        None,
        &job(Pattern::Random, 4096, false, 32, 1 << 30),
    );
    assert!(b.3 > apart.3, "met {b:?} against apart {apart:?}");
}

/// A RAID 5 of 4 members (64 MiB each) with role 1 rebuilt from the start,
/// at `rate` bytes a second at most.
/// Submit reads of `len` bytes at `offsets` at `now`, all at once, and run
/// until every one has completed; the time then.
fn reads_at_once(a: &mut TaskArray, now: Ns, first_id: u64, offsets: &[u64], len: u64) -> Ns {
    for (i, &offset) in offsets.iter().enumerate() {
        a.submit(
            now,
            Request {
                id: first_id + i as u64,
                kind: raidlab_core::IoKind::Read,
                offset,
                len,
                process: 1,
            },
        );
    }
    let (mut t, mut done) = (now, Vec::new());
    while done.len() < offsets.len() {
        t = a.next_event().expect("reads in flight have a next event");
        a.advance(t, &mut done);
    }
    t
}

#[test]
fn requests_that_arrive_together_reach_the_members_in_arrival_order() {
    // A read-ahead window is many chunk reads submitted at one instant, and
    // the block layer passes them on in that order. The simulator must not
    // reorder them: a disk handed a later chunk first leaves the earlier one
    // behind its head, a revolution away. Eight reads finish first so that
    // their task slots are free (and reused last-freed-first), then eight
    // more arrive at once: RAID 0 of two members, so each member's reads are
    // every other chunk, in ascending order as they arrived.
    let mut a = TaskArray::new(spec(Level::Raid0, 2, None, 100.0)).unwrap();
    a.keep_ops();
    let chunk = 64u64 << 10;
    let warm: Vec<u64> = (0..8).map(|k| (100 + k) * chunk).collect();
    let t = reads_at_once(&mut a, 0, 0, &warm, chunk);
    let before = a.member_ops().unwrap().ops.len();
    let window: Vec<u64> = (0..8).map(|k| k * chunk).collect();
    reads_at_once(&mut a, t, 8, &window, chunk);
    let ops = &a.member_ops().unwrap().ops[before..];
    assert_eq!(ops.len(), 8, "{ops:?}");
    for member in 0..2 {
        let offsets: Vec<u64> = ops
            .iter()
            .filter(|o| o.member == member)
            .map(|o| o.offset)
            .collect();
        let expected: Vec<u64> = (0..4).map(|k| DATA_OFFSET + k * chunk).collect();
        assert_eq!(offsets, expected, "member {member}, in issue order");
    }
}

#[test]
fn a_request_across_a_piece_boundary_is_carried_out_in_one_round() {
    // The engine cuts requests larger than 16 MiB into pieces it carries
    // out one after another. One smaller than that which happens to cross a
    // multiple of the piece size must not be cut: its halves would take two
    // member round trips. RAID 0 of five members, 64 KiB chunks: a piece is
    // 51 stripes of 320 KiB; a 640 KiB read across it takes as long as one
    // that crosses nothing.
    let mut a = TaskArray::new(spec(Level::Raid0, 5, None, 100.0)).unwrap();
    let piece = 51 * 5 * (64u64 << 10);
    let len = 640 << 10;
    let t0 = reads_at_once(&mut a, 0, 0, &[0], len);
    let t1 = reads_at_once(&mut a, t0, 1, &[piece - (64 << 10)], len);
    let t2 = reads_at_once(&mut a, t1, 2, &[piece - 2 * len], len);
    assert_eq!(t1 - t0, t0, "across the boundary, as long as at the start");
    assert_eq!(t2 - t1, t0, "just short of it, as long as at the start");
}

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
    // Alone, the rebuild runs at the members' speed.
    let mut idle = TaskArray::new(rebuilding(None)).unwrap();
    let mut done = Vec::new();
    while let Some(t) = idle.next_event() {
        idle.advance(t, &mut done);
    }
    let alone = idle.rebuild_progress().unwrap().finished.unwrap() as f64;
    let mut got = Vec::new();
    for rate in [None, Some(20 << 20)] {
        let mut live = TaskArray::new(rebuilding(rate)).unwrap();
        let b = rebuild_under_load(&mut live, rate);
        assert!(live.errors().is_empty(), "{:?}", live.errors());
        let tb = b.2.unwrap() as f64;
        // The load's reads take turns with its steps at the members.
        assert!(tb > alone, "rate {rate:?}: {tb} ns against {alone} alone");
        if let Some(r) = rate {
            // Paced: 64 MiB at 20 MiB/s takes at least 3.2 s, waiting before
            // each step and never after the last (md's rule).
            assert!(tb >= (64 << 20) as f64 / r as f64 * 1e9 * 0.95, "{tb}");
        }
        got.push(b);
    }
    // Unpaced, it ends sooner than paced, and the load gets on meanwhile.
    assert!(got[0].2 < got[1].2 && got[0].0 > 0, "{got:?}");
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

#[test]
fn a_member_that_fails_mid_run_is_taken_out_by_the_engine_and_the_load_goes_on() {
    let mut whole = live_with(&[]);
    let mut live = live_with(&["fail=2@500ms"]);
    let j = {
        let mut j = Job::new(Pattern::Random, 4096, false, 1, 4, 1 << 30);
        j.duration = 2 * SEC;
        j
    };
    let a = run(&mut whole, &j, 0).unwrap();
    let b = run(&mut live, &j, 0).unwrap();
    assert!(live.errors().is_empty(), "{:?}", live.errors());
    assert_eq!(live.out_of_service(), vec![2]);
    let met = live.faults_met().unwrap();
    assert!(met.dead_ops >= 1 && met.failed_plans >= 1, "{met:?}");
    // The load goes on degraded: a RAID 5 write with a member gone costs
    // about what it did (a read-modify-write, a reconstruct-write, or the
    // data alone when parity's member is the one gone), so the 1.5 s after
    // the failure do about as much as before it.
    assert!(
        b.ops as f64 > 0.8 * a.ops as f64,
        "{} writes with a member failing at 0.5 s, {} without",
        b.ops,
        a.ops
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
fn a_check_that_meets_a_latent_sector_error_rebuilds_and_rewrites_it() {
    // The engine's own scrub, live: a step's read of member 1 fails on
    // sectors 2048..2056 of its data area; the scrub reads the page again,
    // rebuilds it from the others and writes it back (md's read-error
    // repair during a sync), and the check goes on to the end.
    let sector = DATA_OFFSET / 512 + 2048;
    let mut live = TaskArray::with_faults(
        spec(Level::Raid5, 4, None, 100.0),
        Some(fault_spec(&[&format!("lse=1/{sector}+8@0")])),
    )
    .unwrap();
    live.start_scrub(raidlab_sim::scrub::ScrubSpec::default())
        .unwrap();
    let mut done = Vec::new();
    while let Some(t) = live.next_event() {
        live.advance(t, &mut done);
    }
    assert!(live.errors().is_empty(), "{:?}", live.errors());
    let p = live.scrub_progress().unwrap();
    assert!(p.finished.is_some() && p.done == p.total, "{p:?}");
    assert_eq!(p.mismatch_sectors, 0);
    assert!(live.out_of_service().is_empty());
    let met = live.faults_met().unwrap();
    assert!(met.lse_reads >= 1, "{met:?}");
    assert_eq!(met.lse_remapped_bytes, 8 * 512, "{met:?}");
    // The rewrite is the check's one member write: the page.
    assert_eq!((p.rewrites, p.rewritten_bytes), (1, 4096), "{p:?}");
}

#[test]
fn sim_show_estimates_a_live_arrays_rebuild_and_check_live() {
    use raidlab_sim::config::SimConfig;
    let cfg = SimConfig::short("raid5:4xhdd-7200:member-size=4G").unwrap();
    let live = raidlab_sim::summary::summarise(&cfg, &[]).unwrap();
    // Both the engine's own loops, as tasks: no faster than a member's own
    // sequential speed, and within a few percent of it on an idle array of
    // identical disks (each step reads or writes 4G of every member).
    let own = live.rebuild_seconds.unwrap();
    for (what, s) in [
        ("check", live.engine_check_seconds.unwrap()),
        ("rebuild", live.engine_rebuild_seconds.unwrap()),
    ] {
        assert!(
            s >= own * 0.99 && s < own * 1.10,
            "{what}: {s} s against {own} s"
        );
    }
}

#[test]
fn a_full_stripe_cache_counts_stripes_going_down_as_gone_rather_than_take_down_one_still_filling() {
    // Seed C's software RAID 5 through XFS: the page cache's writeback has
    // many 8K-ish writes in flight over a few streams and fills the stripe
    // cache. Live, the
    // oldest stripe is still going down when the next writer finds the cache
    // full. The engine used to take the next-oldest partial stripe down then
    // (a read-modify-write of a stripe a stream was filling): live, block
    // output fell to half here and to a tenth in seed C. A stripe whose
    // write-out has begun now counts as gone.
    use raidlab_sim::config::SimConfig;
    let base = "raid5:6xsamsung-hd753lj:chunk=64K:member-size=100G:scheduler=cfq:host=linux-2.6.2x-md:fs=xfs";
    let mut dev = SimConfig::short(base).unwrap().build(&[]).unwrap();
    let mut j = Job::new(Pattern::Sequential, 8192, false, 1, 1, 1 << 30);
    j.duration = SEC;
    let out = run(dev.as_mut(), &j, 0).unwrap();
    let l = dev.member_ops().unwrap();
    let got = (out.mb_per_s, l.reads, l.writes);
    eprintln!("MB/s, member reads, member writes: {got:?}");
    // Whole stripes go down without reading. Block output through the page
    // cache is 836 MB/s here since the fix; the old rule gave about half
    // (and 56 MB/s in seed C), with reads beside the stripes it took down.
    assert!(got.0 >= 700.0, "{got:?}");
    assert!(
        got.1 * 100 <= got.2,
        "a read for every 100 writes at most: {got:?}"
    );
}

#[test]
fn a_spare_is_rebuilt_live_under_load_and_reported() {
    // A member dies at 100 ms, a spare comes at 200 ms: the engine takes the
    // member out when the load meets it, and its own rebuild loop (a task)
    // rebuilds onto the spare while the load goes on.
    use raidlab_sim::config::SimConfig;
    let base = "raid5:4xhdd-7200:member-size=256M:fail=1@100ms:spare=200ms";
    {
        let engine = "live";
        let mut dev = SimConfig::short(base).unwrap().build(&[]).unwrap();
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
        // 256 MiB of each member at about 100 MB/s, sharing them with
        // the load: more than 2.7 s, and within the 6 s run.
        assert!(finished > rb.started + 2_700 * MS, "{engine}: {rb:?}");
    }
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
