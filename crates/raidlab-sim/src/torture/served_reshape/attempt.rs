//! A served restripe's run (the sweep's kinds: members, chunk, layout,
//! shrink, RAID 10's), cut and carried on: the array prepared
//! (`setup.rs`), the recorded reshape served round after round
//! (`round.rs`) with the power going at drawn member writes (up to
//! [`MAX_CUTS`]) and, when drawn, a member dying at a cut or failing
//! mid-walk; after each cut the members assembled again and judged; at the
//! end the shape asked, every answer read back, the server's clean stop
//! and next start ([`stop_and_start`], the level changes' end too) and a
//! check of 0 mismatches.
//!
//! It decides when the power goes, which member dies and what must read
//! back, and holds only the facts a simulator holds (that it restarted
//! after a cut). Whose the dirty mark is after a restart is the engine's
//! answer (`Assembly::in_sync` at the start), and what the stop and the
//! next start do about it is the engine's stop and start
//! (`lifecycle::stop_records`, `lifecycle::start_resync`); the checks, the
//! walk and the commits too.

use super::judge::{judge_cut, judge_exact, refuses_degraded};
use super::round::{serve_round, Round, RoundOpts};
use super::setup::prepare;
use super::{Rig, Setup, MAX_CUTS};
use crate::torture::model::Model;
use raidlab_devices::Tripwire;
use raidlab_layout::Level;
use raidlab_raid::assemble::Assembly;
use raidlab_raid::lifecycle;
use raidlab_raid::recovery::RunOptions;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// What an attempt did.
pub(super) struct Done {
    pub(super) cuts: u32,
    pub(super) died: bool,
    pub(super) writes: u64,
    pub(super) tally: Tally,
}

/// What an attempt's rounds (and a level change's starts) count.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) answered: u64,
    pub(super) end_writes: u64,
    /// Clients' and the walk's suspensions on a key.
    pub(super) waits: (u64, u64),
    /// Hot spares a start put into a missing role (`level.rs`).
    pub(super) spares_taken: u64,
}

impl Tally {
    /// Count a round's answers and waits, whether or not the power went.
    pub(super) fn count(&mut self, round: &Round) {
        self.answered += round.answered;
        self.end_writes += round.end_writes;
        self.waits.0 += round.waits.0;
        self.waits.1 += round.waits.1;
    }
}

/// How the simulation runs the engine's long runs (resync, check): no
/// read-ahead threads, no mappings, so the member requests of a run do not
/// depend on thread timing.
pub(super) fn run_opts() -> RunOptions {
    RunOptions {
        use_maps: false,
        read_ahead: false,
        ..RunOptions::default()
    }
}

/// A run's end, the power on and the members assembled again as they are
/// (`asm`, judged): the server's clean stop and its next writable start,
/// the engine's own steps (`lifecycle::stop_records` marks the array clean
/// when the dirty mark is this owner's safe mode's, `ours`;
/// `lifecycle::start_resync` resyncs what an unclean stop left, judged
/// after it), then a check of 0 mismatches (a RAID 0, a restripe's RAID 4
/// ended in one among them, has none to check).
pub(super) fn stop_and_start(asm: &mut Assembly, model: &Model, ours: bool) -> Result<(), String> {
    let array = asm
        .array()
        .map_err(|e| format!("the array at the end: {e}"))?;
    lifecycle::stop_records(asm, &array, ours).map_err(|e| format!("the clean stop: {e}"))?;
    drop(array);
    let resynced = lifecycle::start_resync(asm, run_opts())
        .map_err(|e| format!("the resync after the cuts: {e}"))?;
    if resynced.is_some() {
        judge_exact(asm, model, "after the resync")?;
    }
    if asm.geometry.level != Level::Raid0 {
        crate::torture::check_at_end(asm, run_opts())?;
    }
    Ok(())
}

/// Create and fill the array, start the reshape, and carry it on in service
/// round after round; with `budget`, the power goes at that member write of
/// the reshape, and after each cut (up to [`MAX_CUTS`]) at another drawn
/// from `rng`, up to `writes` (the member writes of the run without a cut).
pub(super) fn attempt(
    s: &Setup,
    seed: u64,
    budget: Option<u64>,
    writes: u64,
    rng: &mut ChaCha8Rng,
    failing: bool,
) -> Result<Done, String> {
    let rig = &mut Rig::new(s.members + s.spares);
    let (mut asm, mut model) = prepare(s, rig, seed)?;
    let writes_before = rig.writes();
    let mut cuts = 0u32;
    let mut tally = Tally::default();
    let mut suspect: Vec<usize> = Vec::new();
    let mut budget = budget;
    // `failing`: besides the power cut at `budget`, a member fails while
    // the walk runs, at a member write drawn over the same range
    // (whichever comes first).
    let mut fail = failing.then(|| {
        (
            writes_before + rng.gen_range(1..=writes.max(1)),
            rng.gen_range(0..s.members),
        )
    });
    // Each round's clients, tasks order and data from their own stream.
    let mut rounds = ChaCha8Rng::seed_from_u64(seed ^ 0x5e7e_d0ff);
    // A member gone (died with a cut, or failed mid-walk with the power
    // on): carrying the reshape on must be refused, and the run ends there.
    let mut member_gone = false;
    // (A cut after the end's commit leaves nothing to carry on.)
    // The superblocks' dirty mark is the one this owner made as a server's
    // safe mode makes it (`prepare`); after a cut, the engine says whose
    // the mark found at the restart is (an unclean stop's: the copies may
    // differ).
    let mut ours = true;
    while asm.reshape().is_some() {
        let wire = budget.map(Tripwire::new);
        let round = serve_round(
            s,
            rig,
            asm,
            &mut model,
            wire.as_ref(),
            &mut rounds,
            RoundOpts {
                safe_mode_mark: ours,
                fail,
                suspect: &suspect,
                mark_dirty: false,
            },
        )?;
        if round.failed.is_some() {
            fail = None;
        }
        tally.count(&round);
        let Some(left) = round.asm else {
            // The power went.
            cuts += 1;
            rig.cut(seed ^ u64::from(cuts));
            budget = (cuts < MAX_CUTS).then(|| rng.gen_range(1..=writes.max(1)));
            // A member failed mid-walk before the power went stays gone.
            let died = round.failed.is_some() || (s.may_die && rng.gen_ratio(1, 6));
            if let Some(k) = round.failed {
                rig.dead[k] = true;
            } else if died {
                rig.dead[rng.gen_range(0..s.members)] = true;
            }
            // A 0.90 superblock torn by the cut (one checksum over 4 KiB)
            // does not load: md's `super_90_load` rejects it and mdadm
            // assembles without that member, as if it died.
            let torn = rig.drop_torn_090(s.metadata);
            let died = died || torn;
            asm = rig.assemble()?;
            ours = asm.in_sync();
            // Stripes a cut may have left with parity behind their data:
            // no resync runs until the reshape is done.
            suspect.extend(model.pending_sectors());
            let degraded = died.then_some(&suspect[..]);
            judge_cut(&asm, &mut model, degraded, &format!("after cut {cuts}"))?;
            if died {
                member_gone = true;
                break;
            }
            continue;
        };
        if let Some(k) = round.failed {
            // The power stayed on: the walk stopped for the failed member,
            // every client was answered (degraded) and it was all flushed.
            // The member is gone now; carrying the reshape on is refused,
            // and the array reads what was answered.
            drop(left);
            rig.dead[k] = true;
            asm = rig.assemble()?;
            judge_cut(
                &asm,
                &mut model,
                Some(&suspect),
                "after a member failed mid-walk",
            )?;
            member_gone = true;
            break;
        }
        asm = left;
    }
    let writes = if member_gone {
        refuses_degraded(rig, asm, &model)?;
        rig.writes() - writes_before
    } else {
        let writes = rig.writes() - writes_before;
        finish(s, rig, &model, ours)?;
        writes
    };
    Ok(Done {
        cuts,
        died: member_gone,
        writes,
        tally,
    })
}

/// The reshape done, the power on: a clean restart (the members as they
/// are, the superblocks read again), the shape asked, every answer read
/// back, then the server's stop and start ([`stop_and_start`]).
fn finish(s: &Setup, rig: &Rig, model: &Model, ours: bool) -> Result<(), String> {
    let mut asm = rig.assemble()?;
    if asm.reshape().is_some() {
        return Err("the reshape is still recorded after it finished".into());
    }
    let g = asm.geometry;
    let asked = s.req.raid_devices.map_or(true, |n| g.raid_disks == n)
        && s.req.level.map_or(true, |l| g.level == l)
        && s.req.chunk_bytes.map_or(true, |c| g.chunk_bytes == c)
        && s.new_layout.map_or(true, |l| g.layout == l);
    if !asked {
        return Err(format!(
            "at the end: {} members, chunk {}K, layout {}; asked {:?}",
            g.raid_disks,
            g.chunk_bytes >> 10,
            g.layout.name(),
            s.req
        ));
    }
    judge_exact(&asm, model, "at the end")?;
    stop_and_start(&mut asm, model, ours)
}
