//! A served level change's run: the steps the engine plans for it
//! (`grow::conversion_steps`: the devices added, md's takeover, the
//! rebuild of parity, Q or mirrors, a restripe onto more members or to
//! another layout), each made as the server makes it, the restripes walked
//! by the served walk while clients write (`serve_round`), the power cut at
//! a drawn member write anywhere in them. After a cut the array is
//! assembled again and judged; what the server does at its start is done
//! (a recorded restripe carried on in service, a degraded array's hot spare
//! put into the missing role, a rebuild resumed), then the steps left as
//! the server's refusal tells the user to give them (`served_convert`'s
//! "left to do": the step under way again unless it shows done, then the
//! ones after it).
//!
//! It decides only the order of the run and what must read back; every
//! step's decision is the engine's: its checks, its commits, the walk,
//! whose dirty mark it is (`Assembly::in_sync` at a start) and whether
//! parity and copies are trusted by a rebuild, a spare taken or a change
//! (`Assembly::trusts_redundancy`, the server's rule), the spares a start
//! takes (`Assembly::spares_into_missing_roles`), the end's stop and start
//! (`attempt::stop_and_start`). It holds only the facts a simulator holds
//! (that it restarted after a cut). It never changes the plan: the steps
//! are the engine's, run as given.

use super::attempt::{run_opts, stop_and_start, Done, Tally};
use super::judge::{judge_cut, judge_exact};
use super::round::{serve_round, tripped_now, RoundOpts};
use super::setup::{create, fill};
use super::{Rig, Setup, MAX_CUTS};
use crate::torture::model::Model;
use raidlab_devices::Tripwire;
use raidlab_raid::assemble::Assembly;
use raidlab_raid::grow::{conversion_steps, step_request, Step};
use raidlab_raid::recovery::RunOptions;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// Level, members, chunk and layout: what a run ends as, compared between
/// the run without a cut and the run with them.
pub(super) fn shape(asm: &Assembly) -> String {
    let g = asm.geometry;
    format!(
        "{} of {}, {}K, {}",
        g.level.name(),
        g.raid_disks,
        g.chunk_bytes >> 10,
        g.layout.name()
    )
}

/// Where a run stands between steps.
struct Run<'a> {
    s: &'a Setup,
    rig: &'a Rig,
    model: Model,
    /// Each round's clients, tasks order and data.
    rounds: ChaCha8Rng,
    wire: Option<Arc<Tripwire>>,
    /// The superblocks' dirty mark, if any, is this owner's safe mode's:
    /// asked of the engine at the start and at each restart after a cut
    /// (`Assembly::in_sync` then), and after a resync.
    ours: bool,
    tally: Tally,
}

/// Create and fill the array, then run the level change's steps with the
/// power going at `budget`'s member write (and after each cut, up to
/// [`MAX_CUTS`], at another drawn from `rng` up to `writes`, the member
/// writes of the run without a cut).
pub(super) fn attempt_level(
    s: &Setup,
    seed: u64,
    budget: Option<u64>,
    writes: u64,
    rng: &mut ChaCha8Rng,
) -> Result<(Done, String), String> {
    let rig = &mut Rig::new(s.members + s.spares);
    let mut asm = create(s, rig)?;
    let size = asm.geometry.array_bytes() as usize;
    let model = fill(&mut asm, size, seed)?;
    let steps =
        conversion_steps(&asm, &s.req, s.spares).map_err(|e| format!("conversion_steps: {e}"))?;
    let writes_before = rig.writes();
    let mut run = Run {
        s,
        rig,
        model,
        rounds: ChaCha8Rng::seed_from_u64(seed ^ 0x5e7e_d0ff),
        wire: budget.map(Tripwire::new),
        ours: asm.in_sync(),
        tally: Tally::default(),
    };
    let mut asm = Some(asm);
    let mut cuts = 0u32;
    let mut i = 0;
    // The array before the step under way: a step whose effect shows after
    // a cut is done; one whose effect does not is given again.
    let mut before = asm.as_ref().map(|a| a.geometry);
    while i < steps.len() {
        // The server started again after a cut (what it does at a start
        // is done before the step).
        let restarted = asm.is_none();
        let a = match asm.take() {
            Some(a) => a,
            None => {
                cuts += 1;
                run.rig.cut(seed ^ u64::from(cuts));
                run.wire =
                    (cuts < MAX_CUTS).then(|| Tripwire::new(rng.gen_range(1..=writes.max(1))));
                let a = run.rig.assemble()?;
                judge_cut(
                    &a,
                    &mut run.model,
                    None,
                    &format!("after cut {cuts} (step {}, {:?})", i + 1, steps[i]),
                )?;
                // The server starts again: the mark it finds is not its own.
                run.ours = a.in_sync();
                a
            }
        };
        let shown = before != Some(a.geometry) || a.reshape().is_some();
        // `None`: the power went; the step is given again after the cut.
        if let Some(a) = step(&mut run, a, &steps[i], shown, restarted)
            .map_err(|e| format!("step {} ({:?}): {e}", i + 1, steps[i]))?
        {
            i += 1;
            before = Some(a.geometry);
            asm = Some(a);
        }
    }
    let writes = run.rig.writes() - writes_before;
    run.rig.arm(None);
    drop(asm);
    // A clean restart: the members as they are, the superblocks read again.
    let mut asm = run.rig.assemble()?;
    if asm.reshape().is_some() {
        return Err("a reshape is still recorded after the last step".into());
    }
    judge_exact(&asm, &run.model, "at the end")?;
    stop_and_start(&mut asm, &run.model, run.ours)?;
    let done = Done {
        cuts,
        died: false,
        writes,
        tally: run.tally,
    };
    Ok((done, shape(&asm)))
}

/// Make `step` on `asm`, first carrying on what the array records under
/// way and what the server does at its start (a restripe walked; a
/// degraded array's hot spares put into the missing roles, as md's start
/// puts them, when `restarted`; a rebuild). `shown`: the step's effect
/// already shows (the array changed since it began), so only what is under
/// way is finished. The assembly, or `None` when the power went.
fn step(
    run: &mut Run,
    mut asm: Assembly,
    step: &Step,
    shown: bool,
    restarted: bool,
) -> Result<Option<Assembly>, String> {
    run.rig.arm(run.wire.as_ref());
    let Some(a) = walk(run, asm)? else {
        return Ok(None);
    };
    asm = a;
    if restarted && !spares_at_start(run, &mut asm)? {
        return Ok(None);
    }
    if !asm.rebuilding().is_empty() {
        // Whether the server would run this rebuild is the engine's rule
        // (`trusts_redundancy`: in sync, or dirty only by this owner's
        // safe mode); the offline rebuild's own check knows only the
        // superblocks' mark, so the rule's answer is its `force`, and a
        // rebuild the server would not run is refused as the offline one
        // refuses it.
        let r = asm.rebuild(
            RunOptions {
                force: asm.trusts_redundancy(run.ours),
                ..run_opts()
            },
            &mut |_| {},
        );
        if tripped_now(run.wire.as_ref()) {
            return Ok(None);
        }
        r.map_err(|e| format!("the rebuild: {e}"))?;
    }
    if shown {
        return Ok(Some(asm));
    }
    match step {
        Step::Add { .. } => {
            for k in run.s.members..run.s.members + run.s.spares {
                let path = run.rig.device(k).path;
                if asm.members.iter().any(|m| m.device.path == path) {
                    continue;
                }
                let r = asm.add(run.rig.device(k), false);
                if tripped_now(run.wire.as_ref()) {
                    return Ok(None);
                }
                r.map_err(|e| format!("add {path}: {e}"))?;
            }
        }
        Step::Takeover(t) => {
            if !consistent_for(run, &mut asm, "the takeover")? {
                return Ok(None);
            }
            let r = asm.in_service(run.ours, |a| t.apply(a));
            if tripped_now(run.wire.as_ref()) {
                return Ok(None);
            }
            r.map_err(|e| format!("the takeover: {e}"))?;
        }
        Step::Rebuild { .. } => {
            // Rebuilt above, as the takeover left it to be.
        }
        Step::Restripe(_) | Step::Reshape(_) => {
            if !consistent_for(run, &mut asm, "the restripe")? {
                return Ok(None);
            }
            let r = asm.in_service(run.ours, |a| {
                a.reshape_check(&step_request(step), 0)
                    .and_then(|plan| a.reshape_start(plan))
            });
            if tripped_now(run.wire.as_ref()) {
                return Ok(None);
            }
            r.map_err(|e| format!("the restripe's start: {e}"))?;
            let Some(a) = walk(run, asm)? else {
                return Ok(None);
            };
            asm = a;
        }
    }
    Ok(Some(asm))
}

/// What the server's start does with a degraded array's hot spares
/// (`StartedParts::take_spares`: md's start puts them into the missing
/// roles, to be rebuilt), once the restripe it resumes is walked. A cut
/// inside the commit that gave a spare its role (a takeover's new parity
/// or Q member) leaves it a spare beside the missing role. The start's
/// facts: writable, and the redundancy trusted as the engine's rule says
/// (`Assembly::trusts_redundancy`). `false`: the power went.
fn spares_at_start(run: &mut Run, asm: &mut Assembly) -> Result<bool, String> {
    let trusted = asm.trusts_redundancy(run.ours);
    let taken = asm.spares_into_missing_roles(true, trusted);
    if tripped_now(run.wire.as_ref()) {
        return Ok(false);
    }
    let taken = taken.map_err(|e| format!("the spares at start: {e}"))?;
    run.tally.spares_taken += taken.taken.len() as u64;
    if let Some(why) = taken.waits {
        return Err(format!(
            "roles {:?} missing beside a hot spare, and it waits: {why}",
            asm.missing()
        ));
    }
    Ok(true)
}

/// Before a takeover or a restripe's start, as the engine's rule says
/// (`Assembly::trusts_redundancy`): a dirty mark of this owner's safe mode
/// lets the change run as the server runs it (`in_service`); one left by a
/// cut has the change refused until a resync, which the user runs
/// (`raidlab resync`, or a restart's), judged. `false`: the power went.
fn consistent_for(run: &mut Run, asm: &mut Assembly, what: &str) -> Result<bool, String> {
    if asm.trusts_redundancy(run.ours) {
        return Ok(true);
    }
    let r = asm.resync(run_opts(), &mut |_| {});
    if tripped_now(run.wire.as_ref()) {
        return Ok(false);
    }
    r.map_err(|e| format!("the resync before {what}: {e}"))?;
    judge_exact(asm, &run.model, &format!("after the resync before {what}"))?;
    run.ours = asm.in_sync();
    Ok(true)
}

/// Walk the restripe `asm` records, if any, round after round of service
/// to its end: the assembly, or `None` when the power went.
fn walk(run: &mut Run, mut asm: Assembly) -> Result<Option<Assembly>, String> {
    while asm.reshape().is_some() {
        // A clean array is marked dirty in the round, once the walk is
        // under way and before the clients write (`RoundOpts::mark_dirty`),
        // as the server's safe mode marks it at the first write.
        let round = serve_round(
            run.s,
            run.rig,
            asm,
            &mut run.model,
            run.wire.as_ref(),
            &mut run.rounds,
            RoundOpts {
                safe_mode_mark: run.ours,
                fail: None,
                suspect: &[],
                mark_dirty: true,
            },
        )?;
        run.tally.count(&round);
        match round.asm {
            Some(a) => asm = a,
            None => return Ok(None),
        }
        // The round disarms the wire when it ends with the power on.
        run.rig.arm(run.wire.as_ref());
    }
    Ok(Some(asm))
}
