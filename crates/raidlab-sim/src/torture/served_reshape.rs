//! Reshapes while clients write (issue 36), from a seed: a RAID 5 or 6
//! grown by one member, a RAID 5 or 6 given another chunk, a RAID 5
//! made one member smaller (md's backward reshape), or a RAID 5 or 6
//! given another layout (a RAID 6 to its "-6" twin and back among them,
//! md's first step of a RAID 6 to 5), or a RAID 10 of two near or offset
//! copies grown or shrunk by one member, switched to the other layout or
//! given another chunk, walked by the engine's
//! own served walk (`grow::ServedWalk`: the steps, checkpoints and gate the
//! server runs) as one task, while a few client tasks write, read and flush
//! seeded data through the real `ReshapingVolume`; the executor gives
//! control back before every member I/O step (`exec::Interleaved`) and the
//! seed draws which task goes on, so a write meets the walk's window, a
//! checkpoint it waits for, or a step waiting for it, in an order that
//! replays exactly. The power goes after a random number of member writes
//! (each member's unflushed writes kept, dropped or torn); the members are
//! assembled again from their superblocks, what the array reads is judged,
//! and the reshape carried on in service with new clients, up to three cuts
//! a run. After a cut a member may die: the engine must then refuse to
//! carry the reshape on, and the array must still read right. Level
//! changes and RAID 0 restripes have a draw and a run of their own
//! (`level.rs`: the engine's steps of a level change, cut anywhere in
//! them); the array is created and filled in `setup.rs`.
//!
//! It decides the array, the change, the clients' requests, the order tasks
//! go on, when the power goes and which member dies, and what the array
//! must read: the model (`model.rs`) of what was answered (every write
//! answered before a flush that was answered is there after a cut, nothing
//! else changed; reads answered as the answers before them wrote), zeros
//! in a grow's new space, and a check with no mismatch at the end. It
//! never decides anything of the reshape: `reshape_check`, `reshape_start`,
//! the walk, the gate and `Assembly::assemble` are the engine's. A run is
//! a pure function of (seed, run index).

mod clients;
mod draw;
mod judge;
mod level;
mod setup;
mod tasks;

use super::model::Model;
use super::run_seed;
use clients::Answers;
use draw::{draw, draw_level_change, draw_raid10, LevelChange, Raid10Change, Setup};
use judge::{judge_cut, judge_exact, refuses_degraded};
use raidlab_core::task::{Stacks, Task};
use raidlab_core::Volume;
use raidlab_devices::{FaultVolume, MemVolume, Tripwire};
use raidlab_layout::Level;
use raidlab_raid::assemble::{Assembly, Device};
use raidlab_raid::exec::{Executor, Interleaved};
use raidlab_raid::grow::ServedWalk;
use raidlab_raid::recovery::RunOptions;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use setup::{create, fill, prepare};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use tasks::drive;

/// Each member's size: metadata 1.1/1.2 put the data 1 MiB in, leaving
/// about 1 MiB of data and room below it for the walk to move into.
const MEMBER_BYTES: u64 = 2 << 20;
/// At most this many power cuts in one run.
const MAX_CUTS: u32 = 3;

type Member = Arc<FaultVolume<MemVolume>>;

/// What one served reshape run did.
#[derive(Debug, Clone)]
pub struct ServedRun {
    pub run: u64,
    /// The array, the change and the clients.
    pub label: String,
    pub cuts: u32,
    /// A member died after a cut (the reshape then stays stopped).
    pub member_died: bool,
    /// A level change left degraded beside a hot spare by a cut inside the
    /// commit that gave the spare its role (`level.rs`: md's start would
    /// rebuild onto it, raidlab's does not); the run ends there, judged.
    pub left_degraded: bool,
    /// Member writes of the run without a cut (the budget's range).
    pub writes: u64,
    /// Client requests answered and seen, over every round.
    pub answered: u64,
    /// Of them, writes reaching the array's last tenth.
    pub end_writes: u64,
    /// Times a client's request suspended on a lock or the gate (the
    /// walk's window, a checkpoint), and times the walk suspended on one
    /// (its step waiting for requests over it), over every round.
    pub client_waits: u64,
    pub walk_waits: u64,
    pub violation: Option<String>,
}

/// The members of one run and what is known of them.
struct Rig {
    members: Vec<Member>,
    dead: Vec<bool>,
    exec: Arc<dyn Executor>,
}

impl Rig {
    fn new(n: usize) -> Rig {
        Rig {
            members: (0..n)
                .map(|_| {
                    Arc::new(FaultVolume::with_volatile_cache(MemVolume::new(
                        MEMBER_BYTES,
                    )))
                })
                .collect(),
            dead: vec![false; n],
            exec: Arc::new(Interleaved),
        }
    }

    fn device(&self, i: usize) -> Device {
        Device {
            path: format!("mem{i}"),
            volume: self.members[i].clone(),
        }
    }

    fn assemble(&self) -> Result<Assembly, String> {
        // The devices carrying a superblock, as a user names an array's
        // members: a level change's device not yet added has none.
        let devs = (0..self.members.len())
            .filter(|&i| !self.dead[i])
            .filter(|&i| {
                !matches!(
                    raidlab_md::Superblock::read_from(self.members[i].as_ref()),
                    Ok(None)
                )
            })
            .map(|i| self.device(i))
            .collect();
        let mut asm = Assembly::assemble(devs).map_err(|e| format!("assemble: {e}"))?;
        asm.set_executor(self.exec.clone());
        Ok(asm)
    }

    fn arm(&self, wire: Option<&Arc<Tripwire>>) {
        for m in &self.members {
            m.set_tripwire(wire.cloned());
        }
    }

    /// The power goes: each member's unflushed writes kept, dropped or torn.
    fn cut(&self, seed: u64) {
        self.arm(None);
        for (k, m) in self.members.iter().enumerate() {
            let _ = m.power_cut(seed ^ (k as u64).wrapping_mul(0x9e37_79b9));
            m.restart();
        }
    }

    fn writes(&self) -> u64 {
        self.members.iter().map(|m| m.stats().writes).sum()
    }
}

/// One served reshape run: `(seed, run)` decides everything.
pub fn served_reshape_run(seed: u64, run: u64) -> ServedRun {
    let s0 = run_seed(seed, run);
    let mut rng = ChaCha8Rng::seed_from_u64(s0);
    let s = draw(&mut rng);
    run_drawn(s0, run, rng, s, false)
}

/// One run of the sweep's draw where, besides the power cut, a member
/// fails (every I/O to it an error) while the walk runs, at a member write
/// drawn over the run's range, the power still on: the walk must stop for
/// it, every client request must still be answered (degraded), everything
/// answered must read back, and carrying the reshape on must be refused.
/// Not in the default sweep: it finds losses not yet fixed (see
/// docs/reliability.md, "A member failing mid-walk").
pub fn served_reshape_failing_run(seed: u64, run: u64) -> ServedRun {
    let s0 = run_seed(seed, run);
    let mut rng = ChaCha8Rng::seed_from_u64(s0);
    let s = draw(&mut rng);
    run_drawn(s0, run, rng, s, true)
}

/// One run of a RAID 10 grown by a member or switched between near and
/// offset copies (the sweep draws them too, a seventh of its runs; this
/// runs them alone, many more of them).
pub fn served_reshape_raid10_run(seed: u64, run: u64) -> ServedRun {
    let s0 = run_seed(seed, run);
    let mut rng = ChaCha8Rng::seed_from_u64(s0);
    let change = Raid10Change::draw(&mut rng);
    let s = draw_raid10(&mut rng, change);
    run_drawn(s0, run, rng, s, false)
}

/// One run of a served level change or RAID 0 restripe, the kind the
/// run's index picks in turn (`level_change_kinds` names them): a RAID 0
/// grown by a member or given another chunk, a RAID 4 restriped to a
/// RAID 5, RAID 5 to 6 with a device for Q, RAID 6 to 5, RAID 1 to 5 (of
/// two or three), RAID 0 to 4 or 5 (and a member more). Not in the sweep:
/// its draw is its own, the sweep's figures stay comparable.
pub fn served_level_change_run(seed: u64, run: u64) -> ServedRun {
    let s0 = run_seed(seed, run);
    let mut rng = ChaCha8Rng::seed_from_u64(s0);
    let kinds = LevelChange::ALL;
    let s = draw_level_change(&mut rng, kinds[(run % kinds.len() as u64) as usize]);
    run_drawn(s0, run, rng, s, false)
}

/// How many kinds [`served_level_change_run`] takes in turn.
pub fn level_change_kinds() -> u64 {
    LevelChange::ALL.len() as u64
}

/// The kind [`served_level_change_run`] runs for `run`, named.
pub fn level_change_kind(run: u64) -> String {
    let kinds = LevelChange::ALL;
    format!("{:?}", kinds[(run % kinds.len() as u64) as usize])
}

/// A run of `s`; `failing`: a member also fails mid-walk
/// ([`served_reshape_failing_run`]).
fn run_drawn(s0: u64, run: u64, mut rng: ChaCha8Rng, s: Setup, failing: bool) -> ServedRun {
    let mut out = ServedRun {
        run,
        label: s.label(),
        cuts: 0,
        member_died: false,
        left_degraded: false,
        writes: 0,
        answered: 0,
        end_writes: 0,
        client_waits: 0,
        walk_waits: 0,
        violation: None,
    };
    // A run without a cut counts the member writes, so that the cut can
    // land anywhere in them; the run with the cut then makes the same
    // writes in the same order up to it (everything is drawn from seeds
    // and runs on this thread).
    let first = match s.conversion {
        true => level::attempt_level(&s, s0, None, 0, &mut ChaCha8Rng::seed_from_u64(0)),
        false => attempt(&s, s0, None, 0, &mut ChaCha8Rng::seed_from_u64(0), false)
            .map(|d| (d, String::new())),
    };
    let end = match first {
        Ok((done, end)) => {
            out.writes = done.writes;
            end
        }
        Err(e) => {
            out.violation = Some(format!("without a cut: {e}"));
            return out;
        }
    };
    let budget = rng.gen_range(1..=out.writes.max(1));
    let second = match s.conversion {
        true => level::attempt_level(&s, s0, Some(budget), out.writes, &mut rng).and_then(
            |(done, shape)| {
                // The level asked, and the same end with the cuts as
                // without them.
                let asked = s.req.level.map(|l| l.name()).unwrap_or_default();
                if shape == level::DEGRADED {
                    return Ok((done, true));
                }
                if !end.starts_with(&format!("{asked} ")) || shape != end {
                    return Err(format!(
                        "at the end: {shape} with the cuts, {end} without them; asked {:?}",
                        s.req
                    ));
                }
                Ok((done, false))
            },
        ),
        false => attempt(&s, s0, Some(budget), out.writes, &mut rng, failing).map(|d| (d, false)),
    };
    match second {
        Ok((done, degraded)) => {
            out.left_degraded = degraded;
            out.cuts = done.cuts;
            out.member_died = done.died;
            out.answered = done.answered;
            out.end_writes = done.end_writes;
            out.client_waits = done.waits.0;
            out.walk_waits = done.waits.1;
        }
        Err(e) => out.violation = Some(e),
    }
    out
}

/// Runs `first..first + runs` of `seed`.
pub fn served_reshape_sweep(seed: u64, first: u64, runs: u64) -> Vec<ServedRun> {
    (first..first + runs)
        .map(|r| served_reshape_run(seed, r))
        .collect()
}

/// What an attempt did.
struct Done {
    cuts: u32,
    died: bool,
    writes: u64,
    answered: u64,
    end_writes: u64,
    /// Clients' and the walk's suspensions on a key.
    waits: (u64, u64),
}

/// Create and fill the array, start the reshape, and carry it on in service
/// round after round; with `budget`, the power goes at that member write of
/// the reshape, and after each cut (up to [`MAX_CUTS`]) at another drawn
/// from `rng`, up to `writes` (the member writes of the run without a cut).
fn attempt(
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
    let mut answered = 0u64;
    let mut end_writes = 0u64;
    let mut waits = (0u64, 0u64);
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
    while asm.reshape().is_some() {
        let wire = budget.map(Tripwire::new);
        // Until the first cut the superblocks' dirty mark is the one this
        // owner made as a server's safe mode makes it (`prepare`); after a
        // cut it is an unclean stop's, and the copies may differ.
        let safe_mode_mark = cuts == 0;
        let round = serve_round(
            s,
            rig,
            asm,
            &mut model,
            wire.as_ref(),
            &mut rounds,
            RoundOpts {
                safe_mode_mark,
                fail,
                suspect: &suspect,
                mark_dirty: false,
            },
        )?;
        if round.failed.is_some() {
            fail = None;
        }
        answered += round.answered;
        end_writes += round.end_writes;
        waits.0 += round.waits.0;
        waits.1 += round.waits.1;
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
            asm = rig.assemble()?;
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
    if member_gone {
        refuses_degraded(rig, asm, &model)?;
        return Ok(Done {
            cuts,
            died: true,
            writes: rig.writes() - writes_before,
            answered,
            end_writes,
            waits,
        });
    }
    let writes = rig.writes() - writes_before;
    // A clean restart: the members as they are, the superblocks read again.
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
    judge_exact(&asm, &model, "at the end")?;
    let opts = RunOptions {
        use_maps: false,
        read_ahead: false,
        ..RunOptions::default()
    };
    if cuts > 0 && (asm.in_sync() || g.level == Level::Raid0) {
        // A RAID 0's restripe ends in a RAID 0: nothing to resync (the
        // RAID 4 it ran as was marked dirty, and its last commit keeps it).
    } else if cuts > 0 {
        // Stripes the clients were writing when the power went may hold
        // parity behind their data (md's write hole): the array was stopped
        // uncleanly, and md resyncs it (parity from the data).
        asm.resync(opts.clone(), &mut |_| {})
            .map_err(|e| format!("the resync after the cuts: {e}"))?;
        judge_exact(&asm, &model, "after the resync")?;
    } else {
        // Everything written is flushed: the clean stop the server records.
        asm.mark_clean(true)
            .map_err(|e| format!("the clean mark: {e}"))?;
    }
    if g.level != Level::Raid0 {
        super::check_at_end(&mut asm, opts)?;
    }
    Ok(Done {
        cuts,
        died: false,
        writes,
        answered,
        end_writes,
        waits,
    })
}

/// The walk's task, ended: the walk (for its end), the assembly it
/// checkpointed in, and how it ended.
type Walked = (ServedWalk, Assembly, raidlab_core::Result<()>);

/// How a round ended.
struct Round {
    /// The assembly, unless the power went.
    asm: Option<Assembly>,
    answered: u64,
    end_writes: u64,
    /// Clients' and the walk's suspensions on a key.
    waits: (u64, u64),
    /// The member failed while the walk ran, if one was.
    failed: Option<usize>,
}

/// What a round is told besides its clients.
struct RoundOpts<'a> {
    /// The superblocks' dirty mark is this owner's safe mode's, not an
    /// unclean stop's (`ServedWalk`'s `safe_mode_mark`).
    safe_mode_mark: bool,
    /// A member to fail, once the members have taken this many writes,
    /// while the walk runs.
    fail: Option<(u64, usize)>,
    /// Sectors written but not flushed at an earlier cut, not resynced
    /// since (the reshape defers the resync to its end, as md's does).
    suspect: &'a [usize],
    /// A clean array is marked dirty once the walk is under way, before the
    /// clients write, as a server's safe mode marks it at the first write
    /// after it resumed the reshape (a level change's restripe, whose start
    /// a cut may follow with the array still clean).
    mark_dirty: bool,
}

/// One round of service: the recorded reshape walked as a task beside
/// `s.clients` client tasks until the walk and the clients are done, or
/// the power goes (`wire`). Done, the reshape's end is committed and the
/// answers are in `model`; with the power gone, the answers are in it as a
/// cut leaves them and the tasks are dropped where they were.
fn serve_round(
    s: &Setup,
    rig: &Rig,
    mut asm: Assembly,
    model: &mut Model,
    wire: Option<&Arc<Tripwire>>,
    rng: &mut ChaCha8Rng,
    opts: RoundOpts,
) -> Result<Round, String> {
    let RoundOpts {
        safe_mode_mark,
        fail,
        suspect,
        mark_dirty,
    } = opts;
    // Once a member fails, md's write hole opens on the stripes an earlier
    // cut left suspect: reads there may give anything, as md's do.
    let hole = match fail {
        Some(_) => judge::write_hole(&asm, model.size(), suspect),
        None => Vec::new(),
    };
    let walk = asm
        .reshape_served(safe_mode_mark)
        .map_err(|e| format!("the served walk: {e}"))?;
    if mark_dirty && asm.in_sync() {
        // After the walk's start (which may commit: a new member a cut
        // left a spare takes its role again), before any write.
        rig.arm(wire);
        let marked = asm.mark_dirty();
        if tripped_now(wire) {
            return Ok(Round {
                asm: None,
                answered: 0,
                end_writes: 0,
                waits: (0, 0),
                failed: None,
            });
        }
        marked.map_err(|e| format!("the dirty mark: {e}"))?;
    }
    let volume: Arc<dyn Volume> = Arc::new(walk.volume("served".into()));
    // A level change's later restripe runs on an array grown by an earlier
    // one, whose new space the clients leave alone (it must read zeros).
    let size = volume.size() as usize;
    if size < model.size() || (size != model.size() && !s.conversion) {
        return Err(format!(
            "the array mid-reshape is {} bytes, {} before",
            volume.size(),
            model.size()
        ));
    }
    let asks = clients::draw(rng, model.size(), s.clients, s.per);
    let answers = Rc::new(RefCell::new(Answers {
        done: Vec::new(),
        under_way: vec![None; s.clients],
    }));
    let walked: Rc<RefCell<Option<Walked>>> = Rc::new(RefCell::new(None));
    rig.arm(wire);
    let mut stacks = Stacks::default();
    let mut tasks: Vec<Option<Task<()>>> = Vec::new();
    {
        let out = walked.clone();
        let opts = RunOptions {
            use_maps: false,
            read_ahead: false,
            ..RunOptions::default()
        };
        let mut walk = walk;
        let t = Task::new(&mut stacks, move || {
            let r = walk.run(&mut asm, &opts, &|| false);
            *out.borrow_mut() = Some((walk, asm, r));
        });
        tasks.push(Some(t.map_err(|e| format!("internal: a task: {e}"))?));
    }
    for (c, a) in asks.into_iter().enumerate() {
        let t = clients::spawn(
            &mut stacks,
            c,
            a,
            volume.clone(),
            answers.clone(),
            wire.cloned(),
        );
        tasks.push(Some(t.map_err(|e| format!("internal: a task: {e}"))?));
    }
    let mut waits = (0, 0);
    // A member fails (every I/O to it an error from then on) once the
    // members have taken `fail`'s count of writes, while the walk runs.
    let mut failed = None;
    // The number of answers given when the member failed.
    let mut failed_after = None;
    let ran = drive(&mut tasks, rng, wire, &mut waits, &mut |walking| {
        if let Some((at, k)) = fail {
            if failed.is_none() && walking && rig.writes() >= at {
                rig.members[k].fail_all(true);
                failed = Some(k);
                failed_after = Some(answers.borrow().done.len());
            }
        }
    });
    // Tasks cut short by the power unwind here, letting go of the gate.
    drop(tasks);
    let tripped = wire.is_some_and(|w| w.tripped());
    let answers = std::mem::take(&mut *answers.borrow_mut());
    let answered = answers.done.iter().filter(|a| a.seen).count() as u64;
    let end_writes = answers
        .done
        .iter()
        .filter(|a| a.seen && a.ask.writes_near_end(model.size()))
        .count() as u64;
    let cut = Round {
        asm: None,
        answered,
        end_writes,
        waits,
        failed,
    };
    if tripped {
        clients::apply(model, &answers, false, failed_after.map(|n| (n, &hole[..])))?;
        return Ok(cut);
    }
    ran?;
    // Strict: with one member failed the array is degraded, never out of
    // service; every request must have been answered.
    clients::apply(model, &answers, true, failed_after.map(|n| (n, &hole[..])))?;
    let (walk, mut asm, walked) = walked
        .borrow_mut()
        .take()
        .ok_or("internal: the walk never ended")?;
    if failed.is_some() {
        // The walk must have stopped for it (unless it had already moved
        // its last step), saying so; what the clients wrote is flushed on
        // the members left, and the array serves degraded mid-reshape.
        if let Err(e) = &walked {
            if !e.to_string().contains("failed during the reshape") {
                return Err(format!(
                    "the served walk stopped for a failed member without saying so: {e}"
                ));
            }
        }
        let flushed = volume.flush();
        if tripped_now(wire) {
            return Ok(cut);
        }
        flushed.map_err(|e| format!("flush with a member failed: {e}"))?;
        model.flush();
        drop((volume, walk));
        rig.arm(None);
        return Ok(Round {
            asm: Some(asm),
            ..cut
        });
    }
    walked.map_err(|e| format!("the served walk (power on): {e}"))?;
    // What the clients wrote last reaches the members, as the server's
    // switch to the new geometry flushes it; then the end's commit. The
    // power may go in either.
    let flushed = volume.flush();
    if tripped_now(wire) {
        return Ok(cut);
    }
    flushed.map_err(|e| format!("flush at the walk's end: {e}"))?;
    model.flush();
    drop(volume);
    let ended = walk.end(&mut asm);
    if tripped_now(wire) {
        return Ok(cut);
    }
    ended.map_err(|e| format!("the reshape's end: {e}"))?;
    rig.arm(None);
    Ok(Round {
        asm: Some(asm),
        ..cut
    })
}

fn tripped_now(wire: Option<&Arc<Tripwire>>) -> bool {
    wire.is_some_and(|w| w.tripped())
}

#[cfg(test)]
mod tests {
    use super::*;
    use raidlab_layout::{Layout, ParityLayout};
    use raidlab_md::MetadataVersion;
    use raidlab_raid::grow::ReshapeRequest;

    /// A planted loss is caught: a byte of a member's data corrupted
    /// after a cut reads back wrong, and the judgement says where.
    #[test]
    fn a_member_byte_changed_after_a_cut_is_caught() {
        let s = Setup {
            level: Level::Raid5,
            layout: Layout::Parity(ParityLayout::LeftSymmetric),
            members: 3,
            chunk: 16 << 10,
            metadata: MetadataVersion::V1_2,
            req: ReshapeRequest {
                raid_devices: Some(4),
                ..ReshapeRequest::default()
            },
            new_layout: None,
            shrink: false,
            spares: 1,
            conversion: false,
            may_die: true,
            clients: 2,
            per: 20,
        };
        let rig = Rig::new(4);
        let (asm, mut model) = prepare(&s, &rig, 7).unwrap();
        drop(asm);
        let mut asm = rig.assemble().unwrap();
        judge_cut(&asm, &mut model, None, "untouched").unwrap();
        // Array byte 0 lies in member 0's first chunk in either geometry
        // (left-symmetric puts the first data chunk on member 0): flip it
        // behind the array's back.
        rig.members[0]
            .corrupt_stored(first_data_byte(&asm), 1)
            .unwrap();
        asm = rig.assemble().unwrap();
        let e = judge_cut(&asm, &mut model, None, "planted").unwrap_err();
        assert!(e.contains("durable (flushed) data lost"), "{e}");
    }

    /// Member 0's byte holding array byte 0: its data offset, read from its
    /// superblock.
    fn first_data_byte(asm: &Assembly) -> u64 {
        asm.members[0].sb.data_offset * 512
    }
}
