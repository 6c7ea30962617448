//! Reshapes while clients write, under power cuts and member failures
//! (issue 36): `torture::served_reshape` (see its doc). Every run must keep
//! every write answered before an answered flush through each cut, read
//! each answered write back, end with the shape asked and a check of 0
//! mismatches, or refuse to carry on with a member gone and still read
//! right. No run may fail. More runs: `RAIDLAB_TORTURE_RUNS=K` (or
//! `RAIDLAB_SOAK=M`, M times the 40) `cargo test -p raidlab-sim --test
//! served_reshape`.

use raidlab_sim::torture::served_reshape::{
    level_change_kind, level_change_kinds, served_level_change_run, served_reshape_failing_run,
    served_reshape_raid10_run, served_reshape_run, served_reshape_sweep,
};

fn env(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

/// The sweep's run count as the other torture sweeps take it:
/// `RAIDLAB_TORTURE_RUNS`, or `default` times `RAIDLAB_SOAK`.
fn runs(default: u64) -> u64 {
    env("RAIDLAB_TORTURE_RUNS").unwrap_or_else(|| default * env("RAIDLAB_SOAK").unwrap_or(1).max(1))
}

#[test]
fn served_reshapes_cut_at_random_member_writes_keep_every_answered_write() {
    let n = runs(40);
    let runs = served_reshape_sweep(1, 0, n);
    let failed: Vec<String> = runs
        .iter()
        .filter(|r| r.violation.is_some())
        .map(|r| {
            format!(
                "run {} ({}): {}",
                r.run,
                r.label,
                r.violation.as_deref().unwrap_or("")
            )
        })
        .collect();
    for r in &runs {
        eprintln!(
            "run {} ({}): {} member writes, {} cut(s){}, {} answers ({} writes in the last tenth), waits: clients {}, walk {}",
            r.run,
            r.label,
            r.writes,
            r.cuts,
            if r.member_died { ", a member died" } else { "" },
            r.answered,
            r.end_writes,
            r.client_waits,
            r.walk_waits
        );
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    let cuts: u32 = runs.iter().map(|r| r.cuts).sum();
    assert!(cuts as u64 >= n, "only {cuts} cuts in {n} runs");
    // The clients met the walk: requests waited for its window or a
    // checkpoint, and steps for requests over them.
    let client_waits: u64 = runs.iter().map(|r| r.client_waits).sum();
    let walk_waits: u64 = runs.iter().map(|r| r.walk_waits).sum();
    assert!(
        client_waits > 0 && walk_waits > 0,
        "the walk and the clients never waited for each other: {client_waits} and {walk_waits}"
    );
    let end_writes: u64 = runs.iter().map(|r| r.end_writes).sum();
    let answered: u64 = runs.iter().map(|r| r.answered).sum();
    let layouts: Vec<&str> = runs
        .iter()
        .filter(|r| r.label.contains("layout "))
        .map(|r| r.label.as_str())
        .collect();
    eprintln!(
        "{n} runs, {cuts} cuts, {} with a member dead, {} layout changes ({} to or from a -6 layout), {answered} answers, {end_writes} writes in the last tenth",
        runs.iter().filter(|r| r.member_died).count(),
        layouts.len(),
        layouts.iter().filter(|l| l.contains("-6")).count(),
    );
    // Issue 36's suspicion lies in the array's last stripes: the clients
    // must have written there often.
    assert!(
        end_writes * 10 >= answered,
        "only {end_writes} of {answered} answers wrote the array's last tenth"
    );
    for kind in [
        "raid5", "raid6", "raid10", "(shrink)", "chunk ", "layout ", "-6", "near=2", "offset=2",
        // A metadata 0.90 grow in place, its critical section put back.
        "V0_90",
        // md's internal bitmap kept through the walk (`draw::with_bitmap`).
        ", bitmap",
    ] {
        assert!(
            runs.iter().any(|r| r.label.contains(kind)),
            "no run of {kind}"
        );
    }
    assert!(runs.iter().any(|r| r.member_died), "no member died");
}

/// One run, to look into: `RAIDLAB_TORTURE_RUN=K` (of seed 1, the
/// sweep's) or nothing.
#[test]
fn one_run_asked_for() {
    let Some(k) = env("RAIDLAB_TORTURE_RUN") else {
        return;
    };
    let r = served_reshape_run(1, k);
    eprintln!("{r:?}");
    assert!(
        r.violation.is_none(),
        "run {k} ({}): {:?}",
        r.label,
        r.violation
    );
}

/// One level change run, to look into: `RAIDLAB_LEVEL_RUN=K` (of seed 1)
/// or nothing.
#[test]
fn one_level_run_asked_for() {
    let Some(k) = env("RAIDLAB_LEVEL_RUN") else {
        return;
    };
    let r = served_level_change_run(1, k);
    eprintln!("{r:?}");
    assert!(
        r.violation.is_none(),
        "run {k} ({}): {:?}",
        r.label,
        r.violation
    );
}

#[test]
fn a_run_is_a_function_of_its_seed() {
    let a = served_reshape_run(3, 5);
    let b = served_reshape_run(3, 5);
    assert_eq!(
        (a.label, a.cuts, a.writes, a.answered, a.violation),
        (b.label, b.cuts, b.writes, b.answered, b.violation)
    );
}

/// Served RAID 10 restripes alone, many of them: grown or shrunk by a
/// member, switched between near and offset copies, given another chunk.
/// They lost answered writes until the sides read first copies only after
/// an unclean stop (the copies of a write in flight at a cut may differ,
/// and balanced reads, the walk's among them, answered one, then the other;
/// found 2026-12-05, 7 of the first 30 runs).
#[test]
fn served_raid10_restripes_keep_every_answered_write() {
    let runs: Vec<_> = (0..env("RAIDLAB_TORTURE_RUNS").unwrap_or(60))
        .map(|k| served_reshape_raid10_run(1, k))
        .collect();
    let failed: Vec<String> = runs
        .iter()
        .filter_map(|r| {
            r.violation
                .as_ref()
                .map(|v| format!("run {} ({}): {v}", r.run, r.label))
        })
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    for kind in ["(shrink)", "members;", "layout ", "chunk ", ", bitmap"] {
        let n = runs.iter().filter(|r| r.label.contains(kind)).count();
        eprintln!("{n} runs of {kind}");
        assert!(n > 0, "no RAID 10 run of {kind}");
    }
    let cuts: u32 = runs.iter().map(|r| r.cuts).sum();
    assert!(cuts as usize >= runs.len(), "only {cuts} cuts");
}

/// A member failing while the served walk runs (the power on), besides the
/// power cut: the walk must stop saying so, every client request be
/// answered degraded, and every answer read back. It failed 119 runs of
/// 300 when written (2026-12-05): the stop's checkpoint could not be
/// committed (the member failed while a client's request to it was being
/// handled, so no side had taken it out yet; a shrink's leaving member had
/// no slot to record it in), and reads on stripes an earlier cut left
/// unsynced were held to md's write hole (docs/reliability.md, "A member
/// failing mid-walk").
#[test]
fn a_member_failing_mid_walk_loses_no_answered_write() {
    let runs: Vec<_> = (0..runs(100))
        .map(|k| served_reshape_failing_run(1, k))
        .collect();
    let failed: Vec<String> = runs
        .iter()
        .filter_map(|r| {
            r.violation
                .as_ref()
                .map(|v| format!("run {} ({}): {v}", r.run, r.label))
        })
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    let died = runs.iter().filter(|r| r.member_died).count();
    let cuts: u32 = runs.iter().map(|r| r.cuts).sum();
    let answered: u64 = runs.iter().map(|r| r.answered).sum();
    eprintln!(
        "{} runs, {died} with a member failed or dead, {cuts} cuts, {answered} answers",
        runs.len()
    );
    // The failure is drawn over the member writes of a run without one; it
    // comes before the end in most runs (96 of the first 100).
    assert!(
        died * 3 >= runs.len(),
        "a member failed in only {died} of {} runs",
        runs.len()
    );
}

/// Served level changes and RAID 0 restripes, each kind in turn: a RAID 0
/// grown by a member or given another chunk (md's RAID 4 without parity),
/// a RAID 4 restriped to a RAID 5, and the engine's steps of RAID 5 to 6
/// with a device for Q, RAID 6 to 5, RAID 1 to 5 (of two, or three with a
/// device) and RAID 0 to 4 or 5 (with a device for parity, and one more
/// member): takeovers, rebuilds and restripes walked while clients write,
/// the power cut anywhere in them, each step carried on after a cut as the
/// server and its refusal's "left to do" carry it on. It lost answered
/// writes (seed 1 run 664 of 1,000, a RAID 0 of 2 to a RAID 5 of 4) while
/// it marked the array dirty before the walk resumed, where a spare that
/// missed the restripe's start had not taken its role again yet (the
/// server marks it after; docs/reliability.md says how any other commit
/// first still loses the record).
#[test]
fn served_level_changes_keep_every_answered_write() {
    let n = runs(20 * level_change_kinds());
    let runs: Vec<_> = (0..n).map(|k| served_level_change_run(1, k)).collect();
    let failed: Vec<String> = runs
        .iter()
        .filter_map(|r| {
            r.violation
                .as_ref()
                .map(|v| format!("run {} ({}): {v}", r.run, r.label))
        })
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    // Each kind ran (the run's index picks it), with its figures.
    for k in 0..level_change_kinds() {
        let of: Vec<_> = runs
            .iter()
            .filter(|r| r.run % level_change_kinds() == k)
            .collect();
        eprintln!(
            "{}: {} runs, {} cuts, {} answers, {} spare(s) put into a missing role at a start",
            level_change_kind(k),
            of.len(),
            of.iter().map(|r| r.cuts).sum::<u32>(),
            of.iter().map(|r| r.answered).sum::<u64>(),
            of.iter().map(|r| r.spares_taken).sum::<u64>(),
        );
        assert!(
            of.len() >= 3,
            "{} ran {} times",
            level_change_kind(k),
            of.len()
        );
    }
    let cuts: u32 = runs.iter().map(|r| r.cuts).sum();
    let answered: u64 = runs.iter().map(|r| r.answered).sum();
    let taken: Vec<String> = runs
        .iter()
        .filter(|r| r.spares_taken > 0)
        .map(|r| format!("run {} ({})", r.run, r.label))
        .collect();
    eprintln!(
        "{} runs, {cuts} cuts, {answered} answers; {} run(s) where a start put a hot spare into a missing role and rebuilt it: {}",
        runs.len(),
        taken.len(),
        taken.join(", ")
    );
    assert!(cuts as usize >= runs.len(), "only {cuts} cuts");
    // A cut inside the takeover commit that gives a spare its role comes
    // in about 1 run of 40 (24 of 1,000; runs 6 and 90 of the default
    // 140): the start's spare and its rebuild must have been exercised.
    if runs.len() >= 100 {
        assert!(
            !taken.is_empty(),
            "no start put a spare into a missing role"
        );
    }
    // Clients wrote during the restripes of every kind that has one.
    assert!(answered > 0, "no client was answered");
    // A third of the changes from a level with redundancy keep md's
    // bitmap through them (`draw::level_with_bitmap`).
    let bitmaps = runs.iter().filter(|r| r.label.contains("bitmap")).count();
    eprintln!("{bitmaps} run(s) with a bitmap");
    assert!(bitmaps > 0, "no level change ran with a bitmap");
}

/// The first bitmap run of seed 1 (among `runs` of `run`) that has a cut
/// and passes, but fails with the engine's bitmap mark skipped (the planted
/// `SkipBitmapMark`: a write marks no chunk): its index and the violation.
fn skipped_mark_found(
    runs: u64,
    run: impl Fn(u64) -> raidlab_sim::torture::served_reshape::ServedRun,
) -> (u64, String) {
    use raidlab_raid::planted::{plant, Bug};
    for k in 0..runs {
        let clean = run(k);
        if !clean.label.contains("bitmap") || clean.violation.is_some() || clean.cuts == 0 {
            continue;
        }
        let planted = {
            let _on = plant(Some(Bug::SkipBitmapMark));
            run(k)
        };
        if let Some(v) = planted.violation {
            eprintln!("run {k} ({}): {v}", planted.label);
            return (k, v);
        }
    }
    panic!("no bitmap run of seed 1's first {runs} found the skipped mark");
}

/// The bitmap runs have teeth: with the engine's bitmap mark skipped, a
/// served reshape run with a bitmap cut by the power ends with a mismatch
/// the resync after the cuts did not cover (it resyncs only the chunks
/// marked), while the same run with the bug off passes. The first such run
/// of seed 1 is asserted exactly; draws or engine changes move it (the new
/// figure printed with `--nocapture`).
#[test]
fn a_served_write_that_marks_no_bitmap_chunk_is_found() {
    let (k, v) = skipped_mark_found(60, |k| served_reshape_run(1, k));
    assert!(v.contains("mismatch"), "run {k} found it as {v}");
    assert_eq!(k, FOUND_AT, "the skipped mark found at run {k}");
}

/// The run [`a_served_write_that_marks_no_bitmap_chunk_is_found`] finds it at.
const FOUND_AT: u64 = 0;

/// The same teeth for the level changes with a bitmap (RAID 1 to 5, 4 to
/// 5, 5 to 6, 6 to 5): the bitmap is kept through the takeover, the
/// rebuild and the restripe, and a write that marks nothing is found.
#[test]
fn a_level_change_write_that_marks_no_bitmap_chunk_is_found() {
    let (k, v) = skipped_mark_found(120, |k| served_level_change_run(1, k));
    assert!(v.contains("mismatch"), "run {k} found it as {v}");
    assert_eq!(k, LEVEL_FOUND_AT, "the skipped mark found at run {k}");
}

/// The run [`a_level_change_write_that_marks_no_bitmap_chunk_is_found`]
/// finds it at.
const LEVEL_FOUND_AT: u64 = 2;
