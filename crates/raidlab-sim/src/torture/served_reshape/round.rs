//! One round of service of a served reshape: the engine's served walk run
//! as one task beside the client tasks on one thread (`exec::Interleaved`
//! gives control back before every member I/O step, the seed draws which
//! task goes on), until both are done or the power goes; then the flush
//! and the reshape's end commit as the server makes them. A member may be
//! failed while the walk runs.
//!
//! It decides the order the tasks go on, when the power goes and which
//! member fails, and takes the answers into the model; the walk, its gate,
//! the end's commit and the dirty mark's rules are the engine's. It never
//! writes to a member but through the engine.

use super::clients::{self, Answers};
use super::judge;
use super::tasks::drive;
use super::{Rig, Setup};
use crate::torture::model::Model;
use raidlab_core::task::{Stacks, Task};
use raidlab_core::Volume;
use raidlab_devices::Tripwire;
use raidlab_raid::assemble::Assembly;
use raidlab_raid::grow::ServedWalk;
use raidlab_raid::recovery::RunOptions;
use rand_chacha::ChaCha8Rng;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// The walk's task, ended: the walk (for its end), the assembly it
/// checkpointed in, and how it ended.
pub(super) type Walked = (ServedWalk, Assembly, raidlab_core::Result<()>);

/// How a round ended.
pub(super) struct Round {
    /// The assembly, unless the power went.
    pub(super) asm: Option<Assembly>,
    pub(super) answered: u64,
    pub(super) end_writes: u64,
    /// Clients' and the walk's suspensions on a key.
    pub(super) waits: (u64, u64),
    /// The member failed while the walk ran, if one was.
    pub(super) failed: Option<usize>,
}

/// What a round is told besides its clients.
pub(super) struct RoundOpts<'a> {
    /// The superblocks' dirty mark is this owner's safe mode's, not an
    /// unclean stop's (`ServedWalk`'s `safe_mode_mark`).
    pub(super) safe_mode_mark: bool,
    /// A member to fail, once the members have taken this many writes,
    /// while the walk runs.
    pub(super) fail: Option<(u64, usize)>,
    /// Sectors written but not flushed at an earlier cut, not resynced
    /// since (the reshape defers the resync to its end, as md's does).
    pub(super) suspect: &'a [usize],
    /// A clean array is marked dirty once the walk is under way, before the
    /// clients write, as a server's safe mode marks it at the first write
    /// after it resumed the reshape (a level change's restripe, whose start
    /// a cut may follow with the array still clean).
    pub(super) mark_dirty: bool,
}

/// One round of service: the recorded reshape walked as a task beside
/// `s.clients` client tasks until the walk and the clients are done, or
/// the power goes (`wire`). Done, the reshape's end is committed and the
/// answers are in `model`; with the power gone, the answers are in it as a
/// cut leaves them and the tasks are dropped where they were.
pub(super) fn serve_round(
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

pub(super) fn tripped_now(wire: Option<&Arc<Tripwire>>) -> bool {
    wire.is_some_and(|w| w.tripped())
}
