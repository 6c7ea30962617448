//! The executor a simulated array with faults runs its plans through: the
//! recording executor (or the live array's), told what each member
//! operation meets at the current virtual time.
//!
//! A plan whose I/O step touches a failed member (or reads a latent sector
//! error) comes back as `exec::Failed` with those members, the step's kind
//! and the first error, exactly as the real executor reports a member error:
//! every operation of the failing step was attempted and no later step ran.
//! What is recorded for the device models is the plan up to that step, less
//! the failed members' operations (a dead disk errors at once, taking no
//! device time); a latent sector error's read is kept (the disk spends a read
//! on it). The engine's failure stage then takes the member out, re-plans
//! degraded or rewrites the bad blocks, and those plans are recorded too.
//!
//! Decides only whether an operation errors; never what the array does about
//! it, and never any timing (the device models take the time).

use super::{Fault, Schedule};
use crate::array::DATA_OFFSET;
use crate::device::{Ns, VirtualClock};
use raidlab_core::{Error, ErrorKind, IoKind, Op, Volume};
use raidlab_parity::Engine;
use raidlab_raid::exec::{Executor, Failed, Hooks, Members, Recording, UserBuf};
use raidlab_raid::plan::Space;
use raidlab_raid::{Plan, Step};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A member volume the faults can reach: its role, and since when it serves
/// it (a fault names the device in the role at the fault's time).
#[derive(Debug, Clone, Copy)]
struct Known {
    ptr: usize,
    role: usize,
    since: Ns,
}

/// A latent sector error still unwritten: device bytes `[from, to)` of the
/// device in `role` at time `at`, reading badly from then on.
#[derive(Debug, Clone, Copy)]
struct Lse {
    role: usize,
    from: u64,
    to: u64,
    at: Ns,
}

/// What the faults did to member operations, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Met {
    /// Plans that came back failed to the engine.
    pub failed_plans: u64,
    /// Member operations that errored because their member had failed.
    pub dead_ops: u64,
    /// Member reads that errored on a latent sector error.
    pub lse_reads: u64,
    /// Member writes that remapped latent sector errors (bytes).
    pub lse_remapped_bytes: u64,
}

#[derive(Debug, Default)]
struct State {
    known: Vec<Known>,
    /// (role, since the device in that role, fails at).
    fails: Vec<(usize, Ns)>,
    lse: Vec<Lse>,
    met: Met,
}

/// An executor behind a fault schedule: the recording one (plans replayed
/// later) or the live array's (steps issued to device models as they run).
#[derive(Debug)]
pub struct FaultExec {
    inner: Arc<dyn Executor>,
    /// The inner executor when it is the recording one, to give finished
    /// plans back to.
    recording: Option<Arc<Recording>>,
    clock: Arc<VirtualClock>,
    /// Before this time no member fault is in effect: plans go straight to the
    /// recording (the run before a fault costs what a run without faults does).
    first: Ns,
    state: Mutex<State>,
    /// A plan failed since [`FaultExec::take_noticed`] was last asked.
    noticed: AtomicBool,
}

fn ptr_of(v: &Arc<dyn Volume>) -> usize {
    Arc::as_ptr(v) as *const () as usize
}

impl FaultExec {
    pub fn new(recording: Arc<Recording>, clock: Arc<VirtualClock>, s: &Schedule) -> FaultExec {
        let mut f = FaultExec::over(recording.clone(), clock, s);
        f.recording = Some(recording);
        f
    }

    /// Faults in front of any executor.
    pub fn over(inner: Arc<dyn Executor>, clock: Arc<VirtualClock>, s: &Schedule) -> FaultExec {
        let mut st = State::default();
        for t in &s.faults {
            match t.fault {
                Fault::Fail { role } => st.fails.push((role, t.at)),
                Fault::Lse {
                    role,
                    sector,
                    count,
                } => st.lse.push(Lse {
                    role,
                    from: sector * 512,
                    to: (sector + count) * 512,
                    at: t.at,
                }),
                // A slow member is its device's clock (`super::slow`), built
                // with the members; a spare is the array's.
                Fault::Spare | Fault::Slow { .. } => {}
            }
        }
        let first = st
            .fails
            .iter()
            .map(|f| f.1)
            .chain(st.lse.iter().map(|l| l.at))
            .min()
            .unwrap_or(Ns::MAX);
        FaultExec {
            inner,
            recording: None,
            clock,
            first,
            state: Mutex::new(st),
            noticed: AtomicBool::new(false),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `vol` serves `role` from virtual time `since` on.
    pub fn know(&self, vol: &Arc<dyn Volume>, role: usize, since: Ns) {
        self.state().known.push(Known {
            ptr: ptr_of(vol),
            role,
            since,
        });
    }

    /// What the faults did so far.
    pub fn met(&self) -> Met {
        self.state().met
    }

    /// Whether a plan failed since the last call.
    pub fn take_noticed(&self) -> bool {
        self.noticed.swap(false, Ordering::Relaxed)
    }

    fn now(&self) -> Ns {
        raidlab_core::Clock::now(self.clock.as_ref()).as_nanos() as Ns
    }

    /// Apply the faults to `plan` at `now`: `None` if it runs whole, else the
    /// plan as far as it got (for the device models) and the failure.
    fn meet(&self, plan: &Plan, members: &Members, now: Ns) -> Option<(Plan, Failed)> {
        let mut st = self.state();
        let State {
            known,
            fails,
            lse,
            met,
        } = &mut *st;
        let base = match plan.space {
            Space::Data => DATA_OFFSET,
            Space::Device => 0,
        };
        for (i, step) in plan.steps.iter().enumerate() {
            let Step::Io(ops) = step else { continue };
            let mut dead = Vec::new();
            let mut failed_roles = Vec::new();
            let mut first_error = None;
            for (j, op) in ops.iter().enumerate() {
                let Some(vol) = members.get(op.member).and_then(Option::as_ref) else {
                    continue;
                };
                let p = ptr_of(vol);
                let Some(k) = known.iter().find(|k| k.ptr == p) else {
                    continue;
                };
                let (from, to) = (base + op.offset, base + op.offset + op.length);
                let is_dead = fails
                    .iter()
                    .any(|&(r, at)| r == k.role && at <= now && at >= k.since);
                let why = if is_dead {
                    dead.push(j);
                    met.dead_ops += 1;
                    Some("member failed")
                } else if op.kind == IoKind::Read
                    && lse.iter().any(|l| {
                        l.role == k.role
                            && l.at <= now
                            && l.at >= k.since
                            && l.from < to
                            && from < l.to
                    })
                {
                    met.lse_reads += 1;
                    Some("latent sector error")
                } else {
                    if matches!(op.kind, IoKind::Write | IoKind::Zero) {
                        met.lse_remapped_bytes += remap(lse, k, now, from, to);
                    }
                    None
                };
                if let Some(why) = why {
                    failed_roles.push(op.member);
                    if first_error.is_none() {
                        first_error = Some(
                            Error::new(
                                ErrorKind::Io,
                                if op.kind == IoKind::Read {
                                    Op::Read
                                } else {
                                    Op::Write
                                },
                                format!(
                                    "simulated {why} ({:?} of member role {})",
                                    op.kind, k.role
                                ),
                            )
                            .on_device(vol.name())
                            .at(from, op.length),
                        );
                    }
                }
            }
            let Some(error) = first_error else { continue };
            met.failed_plans += 1;
            failed_roles.sort_unstable();
            failed_roles.dedup();
            let mut ran = plan.clone();
            ran.steps.truncate(i + 1);
            if let Some(Step::Io(ops)) = ran.steps.last_mut() {
                let mut j = 0;
                ops.retain(|_| {
                    let keep = !dead.contains(&j);
                    j += 1;
                    keep
                });
            }
            return Some((
                ran,
                Failed {
                    members: failed_roles,
                    kind: ops.first().map_or(IoKind::Read, |o| o.kind),
                    error: Box::new(error),
                    log: false,
                },
            ));
        }
        None
    }
}

/// A write of device bytes `[from, to)` on `k`'s device remaps the latent
/// sector errors it covers (in effect by `now`): they read again. Bytes
/// remapped.
fn remap(lse: &mut Vec<Lse>, k: &Known, now: Ns, from: u64, to: u64) -> u64 {
    let mut remapped = 0;
    let mut i = 0;
    while i < lse.len() {
        let l = lse[i];
        if l.role != k.role || l.at > now || l.at < k.since || l.to <= from || to <= l.from {
            i += 1;
            continue;
        }
        remapped += l.to.min(to) - l.from.max(from);
        lse.swap_remove(i);
        // What the write did not cover stays bad.
        for (a, b) in [(l.from, from), (to, l.to)] {
            if a < b {
                lse.push(Lse {
                    from: a,
                    to: b,
                    ..l
                });
            }
        }
    }
    remapped
}

impl Executor for FaultExec {
    fn run(
        &self,
        plan: &Plan,
        members: &Members,
        engine: &dyn Engine,
        user: UserBuf<'_>,
        hooks: Hooks<'_>,
    ) -> Result<(), Failed> {
        let now = self.now();
        if now >= self.first {
            if let Some((ran, failed)) = self.meet(plan, members, now) {
                self.noticed.store(true, Ordering::Relaxed);
                self.inner.run_owned(ran, members, engine, user, hooks)?;
                return Err(failed);
            }
        }
        self.inner.run(plan, members, engine, user, hooks)
    }

    fn run_owned(
        &self,
        plan: Plan,
        members: &Members,
        engine: &dyn Engine,
        user: UserBuf<'_>,
        hooks: Hooks<'_>,
    ) -> Result<(), Failed> {
        let now = self.now();
        if now >= self.first {
            if let Some((ran, failed)) = self.meet(&plan, members, now) {
                self.noticed.store(true, Ordering::Relaxed);
                match &self.recording {
                    Some(r) => r.recycle(plan),
                    None => raidlab_raid::planner::recycle(plan),
                }
                self.inner.run_owned(ran, members, engine, user, hooks)?;
                return Err(failed);
            }
        }
        self.inner.run_owned(plan, members, engine, user, hooks)
    }
}
