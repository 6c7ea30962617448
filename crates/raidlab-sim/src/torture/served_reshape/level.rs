//! A served level change's run: the steps the engine plans for it
//! (`grow::conversion_steps`: the devices added, md's takeover, the
//! rebuild of parity, Q or mirrors, a restripe onto more members or to
//! another layout), each made as the server makes it, the restripes walked
//! by the served walk while clients write (`serve_round`), the power cut at
//! a drawn member write anywhere in them. After a cut the array is
//! assembled again and judged; what the server does at its start is done
//! (a recorded restripe carried on in service, a rebuild resumed), then the
//! steps left as the server's refusal tells the user to give them
//! (`served_convert`'s "left to do": the step under way again unless it
//! shows done, then the ones after it).
//!
//! It decides only the order of the run and what must read back; every
//! step's decision (its checks, its commits, the walk) is the engine's. It
//! never changes the plan: the steps are the engine's, run as given.

use super::judge::{judge_cut, judge_exact};
use super::{create, fill, serve_round, tripped_now, Done, Rig, RoundOpts, Setup, MAX_CUTS};
use crate::torture::model::Model;
use raidlab_devices::Tripwire;
use raidlab_raid::assemble::{Assembly, MemberState};
use raidlab_raid::grow::{conversion_steps, step_request, Step};
use raidlab_raid::recovery::RunOptions;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// The end of a run left degraded beside a hot spare after a cut (see
/// [`step`]), for [`shape`]'s place.
pub(super) const DEGRADED: &str = "degraded beside a hot spare";

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

fn opts() -> RunOptions {
    RunOptions {
        use_maps: false,
        read_ahead: false,
        ..RunOptions::default()
    }
}

/// What a level change's attempt counts, over its steps.
#[derive(Default)]
struct Tally {
    answered: u64,
    end_writes: u64,
    waits: (u64, u64),
}

/// Where a run stands between steps.
struct Run<'a> {
    s: &'a Setup,
    rig: &'a Rig,
    model: Model,
    /// Each round's clients, tasks order and data.
    rounds: ChaCha8Rng,
    wire: Option<Arc<Tripwire>>,
    /// The superblocks' dirty mark, if any, is this owner's safe mode's
    /// (no cut since it was made).
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
    let asm = create(s, rig)?;
    let model = fill(&asm, asm.geometry.array_bytes() as usize, seed)?;
    let steps =
        conversion_steps(&asm, &s.req, s.spares).map_err(|e| format!("conversion_steps: {e}"))?;
    let writes_before = rig.writes();
    let mut run = Run {
        s,
        rig,
        model,
        rounds: ChaCha8Rng::seed_from_u64(seed ^ 0x5e7e_d0ff),
        wire: budget.map(Tripwire::new),
        ours: true,
        tally: Tally::default(),
    };
    let mut asm = Some(asm);
    let mut cuts = 0u32;
    let mut i = 0;
    // The array before the step under way: a step whose effect shows after
    // a cut is done; one whose effect does not is given again.
    let mut before = asm.as_ref().map(|a| a.geometry);
    while i < steps.len() {
        let a = match asm.take() {
            Some(a) => a,
            None => {
                cuts += 1;
                run.ours = false;
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
                a
            }
        };
        let shown = before != Some(a.geometry) || a.reshape().is_some();
        match step(&mut run, a, &steps[i], shown)
            .map_err(|e| format!("step {} ({:?}): {e}", i + 1, steps[i]))?
        {
            Outcome::Done(a) => {
                i += 1;
                before = Some(a.geometry);
                asm = Some(a);
            }
            Outcome::Cut => {}
            Outcome::Degraded(a) if cuts > 0 => {
                let when = format!(
                    "left degraded beside a hot spare at step {} ({:?}) after {cuts} cut(s), {} (roles {:?} missing)",
                    i + 1,
                    steps[i],
                    shape(&a),
                    a.missing()
                );
                judge_exact(&a, &run.model, &when)?;
                let writes = run.rig.writes() - writes_before;
                return Ok((
                    Done {
                        cuts,
                        died: false,
                        writes,
                        answered: run.tally.answered,
                        end_writes: run.tally.end_writes,
                        waits: run.tally.waits,
                    },
                    DEGRADED.to_string(),
                ));
            }
            Outcome::Degraded(a) => {
                return Err(format!(
                    "step {}: degraded (roles {:?} missing) with no cut",
                    i + 1,
                    a.missing()
                ))
            }
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
    if !asm.in_sync() {
        if run.ours {
            asm.mark_clean(true)
                .map_err(|e| format!("the clean mark: {e}"))?;
        } else {
            asm.resync(opts(), &mut |_| {})
                .map_err(|e| format!("the resync after the cuts: {e}"))?;
            judge_exact(&asm, &run.model, "after the resync")?;
        }
    }
    if asm.geometry.level != raidlab_layout::Level::Raid0 {
        crate::torture::check_at_end(&mut asm, opts())?;
    }
    Ok((
        Done {
            cuts,
            died: false,
            writes,
            answered: run.tally.answered,
            end_writes: run.tally.end_writes,
            waits: run.tally.waits,
        },
        shape(&asm),
    ))
}

/// Make `step` on `asm`, first carrying on what the array records under
/// way (a restripe, a rebuild: the server does at its start). `shown`: the
/// step's effect already shows (the array changed since it began), so
/// only what is under way is finished. The assembly, or `None` when the
/// power went.
fn step(run: &mut Run, mut asm: Assembly, step: &Step, shown: bool) -> Result<Outcome, String> {
    run.rig.arm(run.wire.as_ref());
    let Some(a) = walk(run, asm)? else {
        return Ok(Outcome::Cut);
    };
    asm = a;
    if left_beside_a_spare(&asm) {
        return Ok(Outcome::Degraded(asm));
    }
    if !asm.rebuilding().is_empty() {
        // The server's rebuild runs on an array stopped uncleanly too (it
        // recomputes the member from the others; a resync at the end makes
        // parity agree with what the clients wrote): `force`, as the
        // offline rebuild's refusal says to give.
        let r = asm.rebuild(
            RunOptions {
                force: true,
                ..opts()
            },
            &mut |_| {},
        );
        if tripped_now(run.wire.as_ref()) {
            return Ok(Outcome::Cut);
        }
        r.map_err(|e| format!("the rebuild: {e}"))?;
    }
    if shown {
        return Ok(Outcome::Done(asm));
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
                    return Ok(Outcome::Cut);
                }
                r.map_err(|e| format!("add {path}: {e}"))?;
            }
        }
        Step::Takeover(t) => {
            if !quiesce(run, &mut asm, "the takeover")? {
                return Ok(Outcome::Cut);
            }
            let r = t.apply(&mut asm);
            if tripped_now(run.wire.as_ref()) {
                return Ok(Outcome::Cut);
            }
            r.map_err(|e| format!("the takeover: {e}"))?;
        }
        Step::Rebuild { .. } => {
            // Rebuilt above, as the takeover left it to be.
        }
        Step::Restripe(_) | Step::Reshape(_) => {
            if !quiesce(run, &mut asm, "the restripe")? {
                return Ok(Outcome::Cut);
            }
            let r = asm
                .reshape_check(&step_request(step), 0)
                .and_then(|plan| asm.reshape_start(plan));
            if tripped_now(run.wire.as_ref()) {
                return Ok(Outcome::Cut);
            }
            r.map_err(|e| format!("the restripe's start: {e}"))?;
            let Some(a) = walk(run, asm)? else {
                return Ok(Outcome::Cut);
            };
            asm = a;
        }
    }
    Ok(Outcome::Done(asm))
}

/// The array made consistent for a takeover or a restripe's start, as the
/// server makes them quiesced: a dirty mark of its own safe mode is a
/// clean array's once every write is flushed (`Assembly::in_service`); one
/// left by a cut is resynced first (md resyncs an unclean array before it
/// reshapes it or takes it over). `false`: the power went.
fn quiesce(run: &mut Run, asm: &mut Assembly, what: &str) -> Result<bool, String> {
    if asm.in_sync() {
        return Ok(true);
    }
    let r = if run.ours {
        asm.mark_clean(true).map(|_| ())
    } else {
        asm.resync(opts(), &mut |_| {}).map(|_| ())
    };
    if tripped_now(run.wire.as_ref()) {
        return Ok(false);
    }
    r.map_err(|e| format!("made consistent before {what}: {e}"))?;
    if !run.ours {
        judge_exact(asm, &run.model, &format!("after the resync before {what}"))?;
    }
    run.ours = true;
    Ok(true)
}

/// Whether a cut inside the commit that gave a spare its role (a
/// takeover's new parity or Q member) left the array degraded beside that
/// spare: its own superblock still says spare, so it is one (the
/// assembly's rule, as md's). md's start would put the spare into the
/// missing role and rebuild it (`remove_and_add_spares`); nothing in
/// raidlab does (a restripe's start does: the walk's `retake_new_roles`),
/// so the run ends there, judged.
fn left_beside_a_spare(asm: &Assembly) -> bool {
    asm.rebuilding().is_empty()
        && !asm.missing().is_empty()
        && asm.members.iter().any(|m| m.state == MemberState::Spare)
}

/// How a step ended.
enum Outcome {
    Done(Assembly),
    /// The power went.
    Cut,
    /// Left degraded beside a hot spare nothing puts in (see [`step`]).
    Degraded(Assembly),
}

/// Walk the restripe `asm` records, if any, round after round of service
/// to its end: the assembly, or `None` when the power went.
fn walk(run: &mut Run, mut asm: Assembly) -> Result<Option<Assembly>, String> {
    while asm.reshape().is_some() {
        // A clean array is marked dirty in the round, once the walk is
        // under way and before the clients write (`RoundOpts::mark_dirty`);
        // the mark is then this owner's safe mode's (a cut may also come
        // between the restripe's start and it, leaving the array clean).
        if asm.in_sync() {
            run.ours = true;
        }
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
        run.tally.answered += round.answered;
        run.tally.end_writes += round.end_writes;
        run.tally.waits.0 += round.waits.0;
        run.tally.waits.1 += round.waits.1;
        match round.asm {
            Some(a) => asm = a,
            None => return Ok(None),
        }
        // The round disarms the wire when it ends with the power on.
        run.rig.arm(run.wire.as_ref());
    }
    Ok(Some(asm))
}
