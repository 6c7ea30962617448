//! The torture harness (`raidlab_sim::torture`) against raidlab's real engine:
//! a CI-sized sweep of random configurations, workloads, faults and power
//! cuts with zero violations; proof that the checker fails when data goes
//! wrong; and proof that a seed replays exactly.
//!
//! Longer sweeps: `raidlab sim torture --seed N --runs K --ops M` (release
//! build), `RAIDLAB_TORTURE_RUNS=K cargo test -p raidlab-sim --test
//! torture ci_sweep -- --nocapture`, or the soak flag `RAIDLAB_SOAK=N` (N
//! times the CI sweep's runs: hours for N in the hundreds).

use raidlab_layout::Level;
use raidlab_sim::torture::{run_one, sweep, sweep_on_threads, Options, Plant, Sweep};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// Simulated member I/Os of this file's sweeps so far, across the test
/// threads.
static SWEPT_IOS: AtomicU64 = AtomicU64::new(0);

/// Adds a sweep's member I/Os to the file's tally and writes both to the
/// process's stderr directly: libtest swallows `println!` of a passing test
/// and the suite (`scripts/test.sh`) runs without `--nocapture`, so this is
/// how the CI log shows what the default suite ran (issue 34 asks for 100
/// million). The last such line gives the file's total.
fn tally(sweep: &str, ios: u64) {
    let all = SWEPT_IOS.fetch_add(ios, Ordering::Relaxed) + ios;
    let _ = writeln!(
        std::io::stderr(),
        "torture sweeps: {sweep} ran {ios} simulated member I/Os; this file's sweeps so far {all}"
    );
}

/// Runs of the CI sweep: enough that the default suite's torture sweeps
/// together run the 100 million simulated member I/Os issue 34 asks of it
/// (this sweep about 93 million of them, the other sweeps of this file
/// about 9 million), on every CPU. About 215 CPU s of the test build
/// (2026-12-04); the wall time it adds is in docs/reliability.md ("Scale").
const CI_RUNS: u64 = 36_000;

/// Runs of the CI sweep that fail on an engine gap found and not fixed yet
/// (docs/reliability.md, "Known open gaps"). Any other
/// failing run fails the test, and so does one of these once it passes (the
/// list must then shrink).
/// (Runs 339 and 1211 left the list: shrunk to 5 and 3 operations by
/// `--shrink`, they showed the model's gap, not the engine's; see
/// tests/regressions/seed-1-run-1211.toml. Runs 321 and 1021 left it when
/// a dirty start learnt to resync before a rebuild resumes; see
/// tests/regressions/seed-1-run-321.toml.) Empty now.
const KNOWN_OPEN: &[u64] = &[];

fn env(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

/// A sweep's run count: `RAIDLAB_TORTURE_RUNS`, or `default` times
/// `RAIDLAB_SOAK`.
fn sweep_runs(default: u64) -> u64 {
    env("RAIDLAB_TORTURE_RUNS").unwrap_or_else(|| default * env("RAIDLAB_SOAK").unwrap_or(1).max(1))
}

#[test]
fn ci_sweep_finds_no_violation() {
    let opts = Options {
        // Member failures, write errors, latent read errors and power cuts
        // (also while a role is troubled) are injected; left out are only
        // faults beyond the level's tolerance, for the gap docs/reliability.md
        // names ("Known open gaps"; the rule: `torture/gaps.rs`).
        // `raidlab sim torture` without --skip-known-gaps runs them.
        skip_known_gaps: true,
        // The fault families have their own sweeps below, so the runs named
        // here keep their draws.
        ..base_opts(1, 0, sweep_runs(CI_RUNS))
    };
    // The suite's longest test: its runs on every CPU, so that it does not
    // end alone on one while the others wait.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let s = sweep_on_threads(&opts, threads, |r| {
        if std::env::var_os("RAIDLAB_TORTURE_VERBOSE").is_some() {
            eprintln!(
                "run {} {} {}",
                r.run,
                r.config.label(),
                r.violation.is_some()
            );
        }
    });
    for (kind, (n, ok, c)) in &s.kinds {
        println!("{kind:<16} runs {n:>4} passed {ok:>4} {c:?}");
    }
    let t = s.total();
    tally("CI sweep", t.member_ios);
    println!(
        "total: {} runs, {} operations, {} simulated member I/Os, {} faults, {} power cuts, {} restarts",
        s.runs(),
        t.ops,
        t.member_ios,
        t.faults,
        t.power_cuts,
        t.restarts
    );
    judge(&s, &opts, KNOWN_OPEN, "KNOWN_OPEN");
}

/// A sweep shared out among threads tallies what the same sweep on one
/// thread does, kind by kind, with the same failures (a planted-free sweep
/// beyond the tolerance, so that runs end in every way they can).
#[test]
fn a_sweep_on_threads_tallies_as_one_thread_does() {
    let opts = Options {
        skip_known_gaps: false,
        ..base_opts(5, 100, 24)
    };
    let one = sweep(&opts, |_| {});
    let three = sweep_on_threads(&opts, 3, |_| {});
    assert_eq!(format!("{:?}", one.kinds), format!("{:?}", three.kinds));
    let runs = |s: &Sweep| {
        s.failures
            .iter()
            .map(|r| (r.run, r.hash))
            .collect::<Vec<_>>()
    };
    assert_eq!(runs(&one), runs(&three));
    assert_eq!(three.runs(), 24);
    assert!(three.kinds.len() > 3, "{:?}", three.kinds.keys());
}

/// Runs of the beyond-tolerance sweep: seed 1 without `--skip-known-gaps`
/// (a quarter of the faults that would take an array past what its level
/// loses go ahead), about 10 s of the test build's CPU.
const BEYOND_RUNS: u64 = 600;

/// Beyond the tolerance the array refuses or reports, and never answers
/// silently wrong data: seed 1's first runs with those faults let through.
/// All 1,500 of seed 1 pass (`raidlab sim torture --seed 1 --runs 1500`);
/// docs/reliability.md lists the runs of other seeds still open.
#[test]
fn beyond_the_tolerance_nothing_reads_silently_wrong() {
    let opts = Options {
        skip_known_gaps: false,
        ..base_opts(1, 0, env("RAIDLAB_TORTURE_RUNS").unwrap_or(BEYOND_RUNS))
    };
    let s = sweep(&opts, |_| {});
    let t = s.total();
    tally("beyond the tolerance", t.member_ios);
    println!(
        "beyond the tolerance: {} runs, {} passed, {} member I/Os, {} beyond it",
        s.runs(),
        s.passed(),
        t.member_ios,
        t.beyond_tolerance
    );
    assert!(
        t.beyond_tolerance > 50,
        "only {} runs went beyond the tolerance",
        t.beyond_tolerance
    );
    judge(&s, &opts, &[], "the beyond-tolerance list");
}

/// Runs `first_run..first_run + runs` of `seed`, 120 operations each, any
/// level, the known gaps left out and no optional fault family: what each
/// sweep below starts from.
fn base_opts(seed: u64, first_run: u64, runs: u64) -> Options {
    Options {
        seed,
        first_run,
        runs,
        ops: 120,
        level: None,
        skip_known_gaps: true,
        stale_members: false,
        cache_tier: false,
        misdirected: false,
        cuts_inside: false,
        queue_depths: false,
    }
}

/// Every failing run of `s` is in `known` (named `list` in the message),
/// and every run of `known` within the sweep still fails (a fixed one must
/// leave the list and docs/reliability.md).
fn judge(s: &Sweep, opts: &Options, known: &[u64], list: &str) {
    let failed: Vec<u64> = s.failures.iter().map(|r| r.run).collect();
    let fixed: Vec<u64> = known
        .iter()
        .copied()
        .filter(|r| *r < opts.first_run + opts.runs && !failed.contains(r))
        .collect();
    assert!(
        fixed.is_empty(),
        "runs {fixed:?} pass now: take them out of {list} and docs/reliability.md"
    );
    let report: Vec<String> = s
        .failures
        .iter()
        .filter(|r| !known.contains(&r.run))
        .map(|r| {
            let v = r.violation.as_ref().expect("a failure has a violation");
            format!(
                "run {} ({}), op {}: {}\n  replay: {}\n  trace:\n    {}",
                r.run,
                r.config.label(),
                v.op,
                v.what,
                r.replay_command(opts.ops),
                v.trace.join("\n    ")
            )
        })
        .collect();
    assert!(report.is_empty(), "{}", report.join("\n\n"));
}

/// Engine bugs the harness found, kept as their runs: each must now pass.
/// Seed 1 run 42 (RAID 6 beyond tolerance): a FUA write after a failed
/// stripe-cache write-out deadlocked (`stripe_cache::write_out_range`).
/// Seed 1 run 72 (RAID 5, PPL, a member failed): a write looped forever
/// flushing the failed member before its log write (`Array::flush_roles`).
#[test]
fn found_bugs_stay_fixed() {
    for run in [42, 72] {
        let r = run_one(1, run, 120, None, None);
        assert!(r.violation.is_none(), "run {run}: {:?}", r.violation);
    }
}

/// A member byte flipped behind the engine's back on RAID 0 (no redundancy
/// to notice it) is reported as wrong data.
#[test]
fn a_flipped_member_byte_is_reported() {
    let r = run_one(7, 0, 40, Some(Level::Raid0), Some(Plant::FlipMemberByte));
    let v = r.violation.expect("the flipped byte must be reported");
    assert!(v.what.contains("wrong data"), "{}", v.what);
    assert_eq!(v.op, 20);
}

/// Flushed writes lost at a power cut (every member's data area zeroed on
/// the medium) are reported as durable data lost.
#[test]
fn lost_flushed_writes_are_reported() {
    let r = run_one(7, 0, 40, Some(Level::Raid1), Some(Plant::LoseFlushedWrites));
    let v = r.violation.expect("the lost writes must be reported");
    assert!(v.what.contains("durable (flushed) data lost"), "{}", v.what);
}

/// The same seed gives the same run, event for event; another seed another.
#[test]
fn a_seed_replays_exactly() {
    for run in 0..6 {
        let a = run_one(3, run, 80, None, None);
        let b = run_one(3, run, 80, None, None);
        assert_eq!(a.hash, b.hash, "run {run}");
        assert_eq!(a.violation.is_some(), b.violation.is_some());
        assert_ne!(a.hash, run_one(4, run, 80, None, None).hash);
    }
}

/// Replaces with a mishap mid-copy (a power cut inside the copy, whose
/// reader threads race the cut; the member being replaced failing or
/// growing latent errors at a step boundary) replay event for event: the
/// first 40 runs of the CI sweep hold several of each.
#[test]
fn replaces_replay_exactly() {
    let mut replaces = 0;
    for run in 0..40 {
        let a = raidlab_sim::torture::run_with(1, run, 120, None, None, true);
        let b = raidlab_sim::torture::run_with(1, run, 120, None, None, true);
        assert_eq!(a.hash, b.hash, "run {run}");
        replaces += a.counts.replaces;
    }
    assert!(replaces >= 10, "only {replaces} replaces in 40 runs");
}

/// A run's member requests are the same on every replay, a copy stopped
/// mid-way included: its readers read no step ahead of its writer (they did,
/// and run 60's RAID 1 copy read one to three member ranges more or fewer
/// from replay to replay, so the sweep's totals changed from one machine,
/// or one moment, to the next).
#[test]
fn member_request_counts_replay_exactly() {
    let first = raidlab_sim::torture::run_with(1, 60, 120, None, None, true);
    assert!(
        first.counts.replaces > 0,
        "run 60 no longer replaces a member"
    );
    for _ in 0..8 {
        let again = raidlab_sim::torture::run_with(1, 60, 120, None, None, true);
        assert_eq!(again.counts.member_ios, first.counts.member_ios);
    }
}

/// Runs of the stale-member sweep (members leave and come back): about 20 s
/// of the test build's CPU.
const STALE_RUNS: u64 = 750;

/// Runs of the stale-member sweep that fail on a known open gap, not on the
/// member that left: none since a dirty start resyncs before a rebuild
/// resumes (641 was the last).
const KNOWN_OPEN_STALE: &[u64] = &[];

/// Members that leave (every I/O fails) and come back with what they held,
/// in a sweep of their own (seed 1, `--stale-members`): no violation but
/// the known ones, and the sweep did what it is for: members came back, the
/// assembly left the out-of-date ones out, and some went back by re-add
/// with only the bitmap's dirty chunks (a sweep that never reached those
/// would pass without proving anything).
#[test]
fn stale_members_sweep_finds_no_violation() {
    let opts = Options {
        stale_members: true,
        ..base_opts(1, 0, sweep_runs(STALE_RUNS))
    };
    let s = sweep(&opts, |_| {});
    let t = s.total();
    tally("stale members", t.member_ios);
    println!(
        "stale members: {} runs, {} passed, {} member I/Os; came back {} times, left out {}, re-added {}",
        s.runs(),
        s.passed(),
        t.member_ios,
        t.returns,
        t.stale_left_out,
        t.re_adds
    );
    judge(&s, &opts, KNOWN_OPEN_STALE, "KNOWN_OPEN_STALE");
    assert!(
        t.returns > 0 && t.stale_left_out > 0 && t.re_adds > 0,
        "the sweep never exercised what it is for: {t:?}"
    );
}

/// Runs of the cache-tier sweep: about 17 s of the test build's CPU here.
const CACHE_RUNS: u64 = 750;

/// Runs of the cache-tier sweep (seed 1, release sweep of 1,500) that fail
/// on a gap found and not fixed yet (docs/reliability.md, "Known open
/// gaps"): none since a dirty start resyncs before a rebuild resumes (736,
/// 1021, 1237 and 1414 were the last); the CI sweep checks those below its
/// run count.
const KNOWN_OPEN_CACHE: &[u64] = &[];

fn cache_opts(runs: u64) -> Options {
    Options {
        cache_tier: true,
        ..base_opts(1, 0, runs)
    }
}

/// The cache tier in front (`--cache-tier`, seed 1): write-back,
/// write-through and write-around over the array or a plain file, through
/// power cuts (the cache's own recovery at its next open), clean stops and
/// write-backs after which the origin alone must read as the model says.
/// No violation but the known ones, and the sweep did what it is for: runs
/// with a cache, opens after a cut, blocks written back.
#[test]
fn cache_tier_sweep_finds_no_violation() {
    let opts = cache_opts(sweep_runs(CACHE_RUNS));
    let s = sweep(&opts, |r| {
        if std::env::var_os("RAIDLAB_TORTURE_VERBOSE").is_some() {
            eprintln!(
                "run {} {} {}",
                r.run,
                r.config.label(),
                r.violation.as_ref().map_or("ok", |v| v.what.as_str())
            );
        }
    });
    let t = s.total();
    tally("cache tier", t.member_ios);
    println!(
        "cache tier: {} runs, {} passed, {} member I/Os; {} with a cache, {} opens after a cut, {} blocks written back",
        s.runs(),
        s.passed(),
        t.member_ios,
        t.cache_runs,
        t.cache_recoveries,
        t.cache_written_back
    );
    judge(&s, &opts, KNOWN_OPEN_CACHE, "KNOWN_OPEN_CACHE");
    assert!(
        t.cache_runs > 0 && t.cache_recoveries > 0 && t.cache_written_back > 0,
        "the sweep never exercised what it is for: {t:?}"
    );
}

/// A cache-tier run replays event for event, and a run that draws no cache
/// is the run without `--cache-tier`.
#[test]
fn a_cache_tier_run_replays_exactly() {
    for run in 0..6 {
        let opts = cache_opts(1);
        let a = raidlab_sim::torture::run_opts(&opts, run, None);
        let b = raidlab_sim::torture::run_opts(&opts, run, None);
        assert_eq!(a.hash, b.hash, "run {run}");
        assert_eq!(a.violation.is_some(), b.violation.is_some());
    }
}

/// The cache device's data area zeroed behind the cache's back (after a
/// flush through it) is reported as wrong data read through the cache: the
/// cache tier's reads are checked, not the origin's.
#[test]
fn a_wiped_cache_device_is_reported() {
    let opts = cache_opts(1);
    let caught = (0..12)
        .map(|run| raidlab_sim::torture::run_opts(&opts, run, Some(Plant::WipeCacheData)))
        .filter(|r| {
            r.violation
                .as_ref()
                .is_some_and(|v| v.what.contains("wrong data") && v.op == 60)
        })
        .count();
    assert!(
        caught > 0,
        "no run with a cache reported the wiped cache device"
    );
}

/// Runs of the misdirected-I/O sweep: about 5 s of the test build's CPU
/// (runs end at their first misdirected write).
const MISDIRECTED_RUNS: u64 = 750;

/// Runs of the misdirected-I/O sweep that fail on a gap found and not
/// fixed yet: none (339, KNOWN_OPEN's until the model learnt that a
/// member taken out in the PPL replay leaves md's degraded write hole, was
/// the last).
const KNOWN_OPEN_MISDIRECTED: &[u64] = &[];

/// Misdirected member I/O (seed 1, `--misdirected`): a member write that
/// lands elsewhere on its member must be reported by the check that
/// follows it on a complete redundant array, and a member read that
/// returns another offset's data must leave nothing behind (the range
/// reads right again, a check finds 0). The sweep must have done each.
#[test]
fn misdirected_io_sweep_finds_no_violation() {
    let opts = Options {
        misdirected: true,
        ..base_opts(1, 0, sweep_runs(MISDIRECTED_RUNS))
    };
    let s = sweep(&opts, |_| {});
    let t = s.total();
    tally("misdirected", t.member_ios);
    println!(
        "misdirected: {} runs, {} passed, {} member I/Os; writes {} (found by the check {}), reads {}",
        s.runs(),
        s.passed(),
        t.member_ios,
        t.misdirected_writes,
        t.misdirected_found,
        t.misdirected_reads
    );
    judge(&s, &opts, KNOWN_OPEN_MISDIRECTED, "KNOWN_OPEN_MISDIRECTED");
    assert!(
        t.misdirected_writes > 0 && t.misdirected_found > 0 && t.misdirected_reads > 0,
        "the sweep never exercised what it is for: {t:?}"
    );
}

/// A misdirected-I/O run replays event for event.
#[test]
fn a_misdirected_run_replays_exactly() {
    for run in 0..8 {
        let opts = Options {
            misdirected: true,
            ..base_opts(1, run, 1)
        };
        let a = raidlab_sim::torture::run_opts(&opts, run, None);
        let b = raidlab_sim::torture::run_opts(&opts, run, None);
        assert_eq!(a.hash, b.hash, "run {run}");
    }
}

/// Runs `first_run..first_run + runs` of `seed` with cuts inside requests.
fn inside_opts(seed: u64, first_run: u64, runs: u64) -> Options {
    Options {
        cuts_inside: true,
        ..base_opts(seed, first_run, runs)
    }
}

/// Runs of the cuts-inside sweep: about 6 s of the test build's CPU here.
const INSIDE_RUNS: u64 = 600;

/// Runs of the cuts-inside sweep (seed 1, release sweep of 1,500) that fail
/// on a gap found and not fixed yet: none (the runs that found the gaps
/// fixed with this family are replayed below).
const KNOWN_OPEN_INSIDE: &[u64] = &[];

/// The power goes inside requests (seed 1, `--cuts-inside`): at a member
/// write of a write, FUA write, write-zeroes, flush or clean stop. No
/// violation but the known ones, and cuts did land inside requests (a sweep
/// where none did would pass without proving anything).
#[test]
fn cuts_inside_requests_sweep_finds_no_violation() {
    let opts = inside_opts(1, 0, sweep_runs(INSIDE_RUNS));
    let s = sweep(&opts, |_| {});
    let t = s.total();
    tally("cuts inside", t.member_ios);
    println!(
        "cuts inside requests: {} runs, {} passed, {} member I/Os; {} cuts inside, {} torn superblocks",
        s.runs(),
        s.passed(),
        t.member_ios,
        t.inside_cuts,
        t.torn_superblocks
    );
    judge(&s, &opts, KNOWN_OPEN_INSIDE, "KNOWN_OPEN_INSIDE");
    assert!(t.inside_cuts > 0, "no cut landed inside a request: {t:?}");
}

/// A run with cuts inside requests replays event for event, member I/O
/// for member I/O.
#[test]
fn a_run_with_cuts_inside_replays_exactly() {
    let opts = inside_opts(1, 17, 1);
    let a = raidlab_sim::torture::run_opts(&opts, 17, None);
    let b = raidlab_sim::torture::run_opts(&opts, 17, None);
    assert!(
        a.counts.inside_cuts > 0,
        "run 17 cut nothing inside: {:?}",
        a.counts
    );
    assert_eq!((a.hash, a.counts.member_ios), (b.hash, b.counts.member_ios));
}

/// Runs of the cuts-inside family that found an engine gap, each fixed
/// (docs/reliability.md, "Power cuts inside a request"), replayed: each
/// must pass, and must still reach what it found.
#[test]
fn cuts_inside_runs_that_found_gaps_pass() {
    let run = |seed: u64, run: u64| {
        let opts = inside_opts(seed, run, 1);
        let r = raidlab_sim::torture::run_opts(&opts, run, None);
        assert!(
            r.violation.is_none(),
            "seed {seed} run {run} ({}): {:?}",
            r.config.label(),
            r.violation.map(|v| (v.op, v.what))
        );
        assert!(
            r.counts.inside_cuts > 0,
            "seed {seed} run {run} cut nothing inside"
        );
        r
    };
    // Metadata 0.90 one event behind after a cut inside a commit (md's
    // margin applies to 0.90 too): RAID 10 and RAID 0.
    for r in [117, 195] {
        run(1, r);
    }
    // A journal device written before the members, members already one
    // event behind: the commit first brings them level.
    for r in [154, 825, 1199] {
        run(1, r);
    }
    // Two of three 0.90 superblocks torn by one cut: left out, and the
    // start refused beyond the tolerance.
    assert!(run(1, 531).counts.torn_superblocks >= 2);
    // A spare that missed the commit starting its rebuild is a spare, not
    // a member in sync.
    for (seed, r) in [(5, 1235), (2, 83), (4, 273)] {
        run(seed, r);
    }
}

/// Runs of each long-run sweep below, 10,000 operations each.
const LONG_RUNS: u64 = 3;

/// Long lives (10,000 operations a run, seed 1, the main family, stale
/// members and cuts inside requests): dozens of failures, spares and
/// rebuilds per array, which the 120-operation sweeps never reach. Their
/// first sweeps found an add refused for good once metadata 0.90's 27
/// device numbers were used (md frees a removed device's number) and a FUA
/// write on a degraded RAID 5 lost at a power cut (seed 2 run 11, kept as
/// a fixed script in `regressions/`). No violation, and the runs did live
/// long: hundreds of power cuts.
#[test]
fn long_runs_find_no_violation() {
    for (family, stale, inside) in [
        ("main", false, false),
        ("stale members", true, false),
        ("cuts inside", false, true),
    ] {
        let opts = Options {
            ops: 10_000,
            stale_members: stale,
            cuts_inside: inside,
            ..base_opts(1, 0, sweep_runs(LONG_RUNS))
        };
        let s = sweep(&opts, |_| {});
        let t = s.total();
        tally(&format!("long runs, {family}"), t.member_ios);
        println!(
            "long runs, {family}: {} runs, {} passed; {} member I/Os, {} faults, {} power cuts, {} restarts, room made {}",
            s.runs(),
            s.passed(),
            t.member_ios,
            t.faults,
            t.power_cuts,
            t.restarts,
            t.room_made
        );
        judge(&s, &opts, &[], "no list (long runs)");
        assert!(
            t.power_cuts >= 100 * s.runs() as u64,
            "the long runs of {family} did not live long: {t:?}"
        );
    }
}

/// Runs whose arrays use up their superblocks' device numbers: seed 1 run
/// 34 of 3,000 operations (RAID 1, 48 rebuilds) and seed 5 run 7 of 6,000
/// (RAID 1, metadata 0.90's 27 numbers, most held by members the assembly
/// found stale: md kicks those and frees their numbers, raidlab kept them
/// taken until this run). The operator removes the faulty members and the
/// add goes through; each run passes.
#[test]
fn a_full_device_table_is_made_room_in() {
    for (seed, run, ops) in [(1, 34, 3_000), (5, 7, 6_000)] {
        let opts = Options {
            ops,
            ..base_opts(seed, run, 1)
        };
        let r = raidlab_sim::torture::run_opts(&opts, run, None);
        assert!(
            r.violation.is_none(),
            "seed {seed} run {run}: {:?}",
            r.violation
        );
        assert!(
            r.counts.room_made > 0,
            "seed {seed} run {run} never ran out of device numbers: {:?}",
            r.counts
        );
    }
}

/// Runs `first_run..first_run + runs` of `seed` with requests in flight
/// together.
fn depth_opts(seed: u64, first_run: u64, runs: u64) -> Options {
    Options {
        queue_depths: true,
        ..base_opts(seed, first_run, runs)
    }
}

/// Runs of the queue-depth sweep: about 3 s of the test build's CPU here.
const DEPTH_RUNS: u64 = 1_000;

/// Requests in flight together (seed 1, `--queue-depths`): batches of 2 to
/// 8 requests interleaved between their plans' steps, member faults and
/// power cuts among them. No violation, and the batches did what they are
/// for: requests ran together, faults struck and the power went while they
/// were under way (a sweep where none did would pass without proving
/// anything).
#[test]
fn queue_depths_sweep_finds_no_violation() {
    let opts = depth_opts(1, 0, sweep_runs(DEPTH_RUNS));
    let s = sweep(&opts, |_| {});
    let t = s.total();
    tally("queue depths", t.member_ios);
    println!(
        "queue depths: {} runs, {} passed, {} member I/Os; {} batches of {} requests, {} faults and {} power cuts among them",
        s.runs(),
        s.passed(),
        t.member_ios,
        t.batches,
        t.batch_requests,
        t.batch_faults,
        t.batch_cuts
    );
    judge(&s, &opts, &[], "no known open queue-depth runs");
    assert!(
        t.batches > 0 && t.batch_requests > 2 * t.batches && t.batch_faults > 0 && t.batch_cuts > 0,
        "the sweep never exercised what it is for: {t:?}"
    );
}

/// A run with requests in flight together replays event for event, member
/// I/O for member I/O: the order the tasks ran in is the seed's alone.
#[test]
fn a_run_with_queue_depths_replays_exactly() {
    for run in [3, 110] {
        let opts = depth_opts(1, run, 1);
        let a = raidlab_sim::torture::run_opts(&opts, run, None);
        let b = raidlab_sim::torture::run_opts(&opts, run, None);
        assert!(a.counts.batches > 0, "run {run} ran no batch");
        assert_eq!((a.hash, a.counts.member_ios), (b.hash, b.counts.member_ios));
    }
}

/// Runs of the queue-depth family that found a gap, each fixed
/// (docs/reliability.md, "Requests in flight together"), replayed: each
/// must pass and still reach what it found.
#[test]
fn queue_depth_runs_that_found_gaps_pass() {
    let run = |opts: Options, run: u64| {
        let r = raidlab_sim::torture::run_opts(&opts, run, None);
        assert!(
            r.violation.is_none(),
            "seed {} run {run} ({}): {:?}",
            opts.seed,
            r.config.label(),
            r.violation.map(|v| (v.op, v.what))
        );
        r
    };
    // A check that began before a write failed a mirror took the failed
    // member's stale copy as the reference and rewrote an unreadable copy
    // from it (RAID 1, faults beyond the tolerance let through).
    let r = run(
        Options {
            skip_known_gaps: false,
            ..depth_opts(9, 173, 1)
        },
        173,
    );
    assert!(
        r.counts.batch_faults > 0 && r.counts.checks > 0,
        "{:?}",
        r.counts
    );
    // Superblocks torn by a cut inside a batch took the array beyond its
    // tolerance: the forced start reads what it can and reports the rest.
    // (Found at seed 5 run 1664 and seed 6 run 194, which no longer tear a
    // superblock since a flush writes its held stripes out together; these
    // runs do.)
    for (seed, n) in [(6, 2587), (7, 873)] {
        let r = run(depth_opts(seed, n, 1), n);
        assert!(
            r.counts.torn_superblocks > 0,
            "seed {seed} run {n}: {:?}",
            r.counts
        );
    }
    // A two-member RAID 10 whose one device left with a superblock was torn
    // by a cut inside a batch: nothing to assemble, and the run ends there.
    let r = run(
        Options {
            cuts_inside: true,
            stale_members: true,
            ..depth_opts(2, 142, 1)
        },
        142,
    );
    assert!(
        r.counts.torn_superblocks > 0 && r.counts.ops < 120,
        "{:?}",
        r.counts
    );
}
