//! The torture harness's shrinker (`raidlab_sim::torture::shrink`): recording
//! changes no draw, a replay of every operation is the run itself, a planted
//! bug shrinks to a handful of operations that still fail the same way, and
//! every saved shrunk run (`tests/regressions/*.toml`) still answers as its
//! status says: an open gap still fails the same way, a fixed one passes.

use raidlab_layout::Level;
use raidlab_sim::torture::shrink::{kind_of, record, replay, shrink, Saved, Status};
use raidlab_sim::torture::{run_opts, Options, Plant};
use std::path::PathBuf;

fn opts(stale: bool, cache: bool, misdirected: bool) -> Options {
    Options {
        seed: 7,
        first_run: 0,
        runs: 1,
        ops: 120,
        level: None,
        skip_known_gaps: true,
        stale_members: stale,
        cache_tier: cache,
        misdirected,
        cuts_inside: false,
        queue_depths: false,
    }
}

/// Recording where each operation begins draws nothing: the run's hash is
/// the plain run's.
#[test]
fn recording_changes_no_draw() {
    for (o, run) in [
        (opts(false, false, false), 3),
        (opts(true, false, false), 4),
    ] {
        let plain = run_opts(&o, run, None);
        let (recorded, marks) = record(&o, run, None);
        assert_eq!(plain.hash, recorded.hash, "run {run}");
        assert_eq!(
            marks.len() as u64,
            recorded.counts.ops,
            "one mark per operation"
        );
    }
}

/// Replaying every operation from its recorded start is the full run, hash
/// for hash, in every stream a run can have (stale members, a cache tier,
/// misdirection); leaving one out makes another run.
#[test]
fn a_replay_of_every_operation_is_the_run() {
    let mut streams = 0;
    for (o, run) in [
        (opts(false, false, false), 1),
        (opts(true, false, false), 2),
        (opts(false, true, false), 5),
        (opts(false, false, true), 6),
    ] {
        let (full, marks) = record(&o, run, None);
        assert!(full.violation.is_none(), "run {run} of {o:?} passes");
        streams += usize::from(
            marks
                .iter()
                .any(|m| m.stale.is_some() || m.tier.is_some() || m.misdirect.is_some()),
        );
        let again = replay(&o, run, None, &marks);
        assert_eq!(
            full.hash, again.hash,
            "run {run}: replay of every operation"
        );
        let fewer = replay(&o, run, None, &marks[1..]);
        assert_ne!(
            full.hash, fewer.hash,
            "run {run}: its first operation left out"
        );
    }
    assert_eq!(streams, 3, "the runs with a second stream seek it too");
}

/// A planted bug (a member byte flipped halfway, then the array read) is
/// found, and the shrinker keeps only what makes it fail.
#[test]
fn a_planted_bug_shrinks_to_a_few_operations() {
    let o = Options {
        level: Some(Level::Raid0),
        ..opts(false, false, false)
    };
    let s = shrink(&o, 0, Some(Plant::FlipMemberByte), 3000).expect("the planted run fails");
    let v = s.result.violation.as_ref().expect("the shrunk run fails");
    assert_eq!(kind_of(&v.what), s.kind);
    assert!(
        s.kept.len() <= 2 && s.kept.len() * 10 < s.original_ops,
        "kept {} of {} operations: {:?}",
        s.kept.len(),
        s.original_ops,
        v.trace
    );
    assert!(
        s.kept.iter().any(|m| m.op == o.ops / 2),
        "the planted operation is kept"
    );
    assert!(
        s.trials < 3000,
        "it ended by itself, in {} replays",
        s.trials
    );
}

#[test]
fn a_passing_run_is_not_shrunk() {
    assert!(shrink(&opts(false, false, false), 1, None, 10).is_none());
}

#[test]
fn kinds_ignore_numbers_and_details() {
    assert_eq!(
        kind_of("read 0+1048576 returned wrong data at array byte 156672 (got 0x5a, want 0x00)"),
        "read #+# returned wrong data at array byte #"
    );
    assert_eq!(
        kind_of("after a power cut: 11 sector(s) hold a value"),
        "after a power cut"
    );
}

/// Every saved shrunk run answers as its status says.
#[test]
fn saved_runs_answer_as_their_status_says() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/regressions");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/regressions")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "the saved runs are there: {files:?}");
    for f in &files {
        let saved = Saved::load(f).unwrap_or_else(|e| panic!("{e}"));
        let r = saved.replay().unwrap_or_else(|e| panic!("{e}"));
        match saved.status {
            Status::Open => {
                let v = r.violation.unwrap_or_else(|| {
                    panic!(
                        "{}: passes now: the gap is fixed? set status = \"fixed\", say how in its note, and leave it in the KNOWN_OPEN lists no more",
                        f.display()
                    )
                });
                assert_eq!(
                    kind_of(&v.what),
                    saved.violation,
                    "{}: {}",
                    f.display(),
                    v.what
                );
            }
            Status::Fixed => assert!(
                r.violation.is_none(),
                "{}: fails again: {:?}",
                f.display(),
                r.violation
            ),
        }
    }
}
