//! Proof that the torture harness finds bugs in the engine: each of the
//! engine's planted bugs (`raidlab_raid::planted`, built only for tests) is
//! switched on for one run at a time, and the sweep (seed 1, runs 0 upward)
//! must find it at exactly the run stated here. A run counts as finding the
//! bug only if the same run passes with the bug off: runs that fail anyway
//! (the engine's open gaps, docs/reliability.md) prove nothing and are
//! skipped. The runs are deterministic, so the run each bug needs is exact;
//! a change to the harness's draws or to the engine moves them, and the
//! new figures (printed with `--nocapture`) go here and in docs/reliability.md.

use raidlab_cache::planted as cache_planted;
use raidlab_layout::Level;
use raidlab_md::planted as md_planted;
use raidlab_raid::planted::{plant, Bug};
use raidlab_sim::torture::{run_opts, Options};

const SEED: u64 = 1;
const OPS: usize = 120;

/// Which list a hunt's bug is from: the engine's, the cache tier's or md's
/// formats' (a crate that never depends on the engine has its own list; one
/// switch).
#[derive(Debug, Clone, Copy)]
enum Planted {
    Engine(Bug),
    Cache(cache_planted::Bug),
    Md(md_planted::Bug),
}

/// The sweep's optional fault families a hunt turns on, beyond the default
/// workload runs.
#[derive(Debug, Clone, Copy, Default)]
struct Extra {
    stale_members: bool,
    cache_tier: bool,
    cuts_inside: bool,
    queue_depths: bool,
}

/// What a plant is hunted with: the level (the configuration family that
/// reaches the plant point), whether the faults that hit known gaps are
/// left out, and the runs tried before giving up.
struct Hunt {
    bug: Planted,
    level: Option<Level>,
    skip_known_gaps: bool,
    extra: Extra,
    /// The run at which the sweep finds it (asserted exactly).
    found_at: u64,
    /// A piece of the violation it must be found as.
    seen_as: &'static str,
}

fn options(h: &Hunt, run: u64) -> Options {
    Options {
        seed: SEED,
        first_run: run,
        runs: 1,
        ops: OPS,
        level: h.level,
        skip_known_gaps: h.skip_known_gaps,
        stale_members: h.extra.stale_members,
        cache_tier: h.extra.cache_tier,
        misdirected: false,
        cuts_inside: h.extra.cuts_inside,
        queue_depths: h.extra.queue_depths,
    }
}

/// The first run, from 0, that passes without `h.bug` and fails with it:
/// (run, runs that passed unplanted up to it, the violation).
fn hunt(h: &Hunt, limit: u64) -> Option<(u64, u64, String)> {
    let mut clean = 0;
    for run in 0..limit {
        let opts = options(h, run);
        let without = run_opts(&opts, run, None);
        if without.violation.is_some() {
            continue;
        }
        clean += 1;
        let with = {
            // One switch: planting either list's bug takes any other off.
            let _planted = match h.bug {
                Planted::Engine(b) => plant(Some(b)),
                Planted::Cache(b) => cache_planted::plant(Some(b)),
                Planted::Md(b) => md_planted::plant(Some(b)),
            };
            run_opts(&opts, run, None)
        };
        if let Some(v) = with.violation {
            return Some((run, clean, format!("op {}: {}", v.op, v.what)));
        }
    }
    None
}

fn check(h: Hunt) {
    let limit = h.found_at + 1;
    let got = hunt(&h, limit);
    println!("{:?} ({:?}, {:?}): {:?}", h.bug, h.level, h.extra, got);
    let (run, clean, what) = got.unwrap_or_else(|| {
        panic!(
            "{:?} was not found in runs 0..{limit} of seed {SEED} ({:?})",
            h.bug, h.level
        )
    });
    assert_eq!(
        run, h.found_at,
        "{:?} found at run {run} ({clean} clean runs), not {}: {what}",
        h.bug, h.found_at
    );
    assert!(
        what.contains(h.seen_as),
        "{:?} found as {what:?}, not as {:?}",
        h.bug,
        h.seen_as
    );
}

const LOST: &str = "durable (flushed) data lost";
const MISMATCH: &str = "mismatched sectors on a complete array";
const WRONG: &str = "returned wrong data";
const NEVER_ALLOWED: &str = "hold a value never allowed there";

#[test]
fn a_flush_acknowledged_before_the_members_flush_is_found() {
    check(Hunt {
        bug: Planted::Engine(Bug::AckFlushEarly),
        level: None,
        skip_known_gaps: true,
        extra: Extra::default(),
        found_at: 2,
        seen_as: LOST,
    });
}

#[test]
fn a_fua_write_without_a_flush_is_found() {
    check(Hunt {
        bug: Planted::Engine(Bug::FuaWithoutFlush),
        level: None,
        skip_known_gaps: true,
        extra: Extra::default(),
        found_at: 5,
        seen_as: LOST,
    });
}

#[test]
fn a_write_without_its_bitmap_mark_is_found() {
    check(Hunt {
        bug: Planted::Engine(Bug::SkipBitmapMark),
        level: Some(Level::Raid1),
        skip_known_gaps: true,
        extra: Extra::default(),
        found_at: 4,
        seen_as: MISMATCH,
    });
}

#[test]
fn a_stripe_written_without_its_partial_parity_log_is_found() {
    check(Hunt {
        bug: Planted::Engine(Bug::SkipPplFirstStripe),
        level: Some(Level::Raid5),
        skip_known_gaps: true,
        extra: Extra::default(),
        found_at: 81,
        seen_as: LOST,
    });
}

#[test]
fn a_read_that_misses_held_stripes_is_found() {
    check(Hunt {
        bug: Planted::Engine(Bug::ReadMissesHeldStripes),
        level: Some(Level::Raid5),
        skip_known_gaps: true,
        extra: Extra::default(),
        found_at: 1,
        seen_as: WRONG,
    });
}

#[test]
fn a_stop_that_forgets_held_stripes_is_found() {
    check(Hunt {
        bug: Planted::Engine(Bug::StopForgetsHeldStripes),
        level: Some(Level::Raid5),
        skip_known_gaps: true,
        extra: Extra::default(),
        found_at: 0,
        seen_as: LOST,
    });
}

#[test]
fn a_start_without_the_dirty_mark_is_found() {
    check(Hunt {
        bug: Planted::Engine(Bug::NoDirtyMark),
        level: Some(Level::Raid1),
        skip_known_gaps: true,
        extra: Extra::default(),
        found_at: 4,
        seen_as: MISMATCH,
    });
}

#[test]
fn a_bitmap_resync_that_skips_a_chunk_is_found() {
    check(Hunt {
        bug: Planted::Engine(Bug::BitmapResyncSkipsFirstChunk),
        level: Some(Level::Raid1),
        skip_known_gaps: true,
        extra: Extra::default(),
        found_at: 77,
        seen_as: MISMATCH,
    });
}

#[test]
fn a_journal_replay_that_drops_a_stripe_is_found() {
    check(Hunt {
        bug: Planted::Engine(Bug::JournalReplayDropsLastStripe),
        level: Some(Level::Raid4),
        skip_known_gaps: true,
        extra: Extra::default(),
        found_at: 4,
        seen_as: NEVER_ALLOWED,
    });
}

#[test]
fn a_trim_that_misses_a_member_is_found() {
    check(Hunt {
        bug: Planted::Engine(Bug::TrimSkipsLastMember),
        level: Some(Level::Raid1),
        skip_known_gaps: true,
        extra: Extra::default(),
        found_at: 0,
        seen_as: "trim ",
    });
}

#[test]
fn a_stale_member_trusted_by_the_assembly_is_found() {
    check(Hunt {
        bug: Planted::Engine(Bug::StaleMemberTrusted),
        level: None,
        skip_known_gaps: true,
        extra: Extra {
            stale_members: true,
            ..Extra::default()
        },
        found_at: 0,
        seen_as: WRONG,
    });
}

#[test]
fn a_rebuild_from_the_wrong_member_is_found() {
    check(Hunt {
        bug: Planted::Engine(Bug::RebuildFirstChunkFromWrongMember),
        level: Some(Level::Raid5),
        skip_known_gaps: true,
        extra: Extra::default(),
        found_at: 0,
        seen_as: WRONG,
    });
}

#[test]
fn a_cache_block_cleaned_without_its_write_back_is_found() {
    check(Hunt {
        bug: Planted::Cache(cache_planted::Bug::CleanSkipsLastBlock),
        level: None,
        skip_known_gaps: true,
        extra: Extra {
            cache_tier: true,
            ..Extra::default()
        },
        found_at: 5,
        seen_as: "the origin alone holds wrong data",
    });
}

/// A 0.90 superblock torn by a power cut inside a commit (its eight
/// sectors from two commits) read as valid: only cuts inside a request land
/// between the members' superblock writes of one commit, so the hunt runs
/// that family.
#[test]
fn a_torn_superblock_counted_as_valid_is_found() {
    check(Hunt {
        bug: Planted::Md(md_planted::Bug::TornSuperblockTrusted),
        level: None,
        skip_known_gaps: true,
        extra: Extra {
            cuts_inside: true,
            ..Extra::default()
        },
        found_at: 531,
        seen_as: "with a superblock md would not load",
    });
}

/// Every planted bug has its hunt above: a new one must get one.
#[test]
fn every_planted_bug_is_hunted() {
    let src = include_str!("planted.rs");
    for bug in Bug::ALL {
        let name = format!("bug: Planted::Engine(Bug::{bug:?}),");
        assert!(
            src.contains(&name),
            "{bug:?} has no hunt in tests/planted.rs"
        );
    }
    for bug in cache_planted::Bug::ALL {
        let name = format!("bug: Planted::Cache(cache_planted::Bug::{bug:?}),");
        assert!(
            src.contains(&name),
            "{bug:?} has no hunt in tests/planted.rs"
        );
    }
    for bug in md_planted::Bug::ALL {
        let name = format!("bug: Planted::Md(md_planted::Bug::{bug:?}),");
        assert!(
            src.contains(&name),
            "{bug:?} has no hunt in tests/planted.rs"
        );
    }
}

/// Off unless planted, and only on the thread that planted it: the other
/// tests of this binary run beside these on other threads.
#[test]
fn a_planted_bug_stays_on_its_thread() {
    assert!(Bug::ALL.iter().all(|&b| !raidlab_raid::planted::on(b)));
    let _planted = plant(Some(Bug::NoDirtyMark));
    assert!(raidlab_raid::planted::on(Bug::NoDirtyMark));
    let elsewhere = std::thread::spawn(|| raidlab_raid::planted::on(Bug::NoDirtyMark))
        .join()
        .expect("the probe thread does not panic");
    assert!(!elsewhere);
    drop(_planted);
    assert!(!raidlab_raid::planted::on(Bug::NoDirtyMark));
}

/// A request that waited for its stripe locks while another request took a
/// member out runs the plan it made before (the bug the queue depths found
/// first, planted back): only requests in flight together reach it, so the
/// hunt runs that family.
#[test]
fn a_plan_run_after_its_member_was_taken_out_is_found() {
    let hunt_with = |queue_depths: bool| Hunt {
        bug: Planted::Engine(Bug::PlanNotRecheckedAfterTakeOut),
        level: None,
        skip_known_gaps: true,
        extra: Extra {
            queue_depths,
            ..Extra::default()
        },
        found_at: 240,
        seen_as: WRONG,
    };
    // One request at a time never meets it: a request that fails a member
    // has ended before the next plans.
    let alone = hunt_with(false);
    assert_eq!(hunt(&alone, alone.found_at + 1), None);
    check(hunt_with(true));
}

/// A check of a running array that compares its stripes without their
/// stripe locks: only a check beside requests in flight can see a write
/// between a stripe's data and its parity, so the hunt runs that family,
/// and one request at a time never finds it.
#[test]
fn a_check_without_stripe_locks_is_found() {
    let hunt_with = |queue_depths: bool| Hunt {
        bug: Planted::Engine(Bug::ScrubWithoutStripeLocks),
        level: None,
        skip_known_gaps: true,
        extra: Extra {
            queue_depths,
            ..Extra::default()
        },
        found_at: 46,
        seen_as: "a check beside requests in flight found",
    };
    let alone = hunt_with(false);
    assert_eq!(hunt(&alone, alone.found_at + 1), None);
    check(hunt_with(true));
}

#[test]
fn a_kept_row_not_forgotten_after_a_write_is_found() {
    // Found where requests run together: a write of a page that does not
    // keep it (a partial page) beside writes of the same row. Since a flush
    // writes its held stripes out together (stop 69), found at run 10 by a
    // check's parity mismatch (at run 30, as a wrong read, before).
    check(Hunt {
        bug: Planted::Engine(Bug::KeptRowNotForgotten),
        level: Some(Level::Raid5),
        skip_known_gaps: true,
        extra: Extra {
            queue_depths: true,
            ..Extra::default()
        },
        found_at: 10,
        seen_as: MISMATCH,
    });
}
