//! The recording executor: keeps each plan it is given (a copy, or the plan
//! itself when the caller hands it over) and does none of its I/O or parity
//! work (what `raidlab explain` shows, what the simulator schedules on device
//! models, what tests count). It decides nothing and must never touch a
//! member.

use super::{Executor, Failed, Hooks, Members, UserBuf};
use crate::plan::Plan;
use raidlab_parity::Engine;

/// Records the plans it is given and does none of their I/O or parity work: what
/// `raidlab explain` shows and what the simulator schedules on device models.
/// Reads leave the caller's buffer as it was.
#[derive(Debug, Default)]
pub struct Recording(std::sync::Mutex<Recorded>);

#[derive(Debug, Default)]
struct Recorded {
    plans: Vec<Plan>,
    /// Finished plans handed back ([`Recording::recycle`]): the next copies
    /// are made into their vectors instead of new ones.
    spare: Vec<Plan>,
}

/// Spare plans kept here at most, for copies; more go back to the planner's
/// spares (plans run by [`Executor::run_owned`] are kept, not copied, and came
/// from there).
const SPARE_PLANS: usize = 64;

impl Recording {
    fn recorded(&self) -> std::sync::MutexGuard<'_, Recorded> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The plans run since the last call, in the order they ran.
    pub fn take(&self) -> Vec<Plan> {
        std::mem::take(&mut self.recorded().plans)
    }

    /// Move the plans run since the last call, in the order they ran, to the
    /// end of `out` (no new vector per call, unlike [`Recording::take`]).
    pub fn drain_into(&self, out: &mut impl Extend<Plan>) {
        out.extend(self.recorded().plans.drain(..));
    }

    /// Give back a plan its user is done with, so that a later copy reuses
    /// its vectors.
    pub fn recycle(&self, plan: Plan) {
        let mut r = self.recorded();
        if r.spare.len() < SPARE_PLANS {
            r.spare.push(plan);
        } else {
            drop(r);
            crate::planner::recycle(plan);
        }
    }
}

impl Executor for Recording {
    fn run(
        &self,
        plan: &Plan,
        _: &Members,
        _: &dyn Engine,
        _: UserBuf<'_>,
        hooks: Hooks<'_>,
    ) -> Result<(), Failed> {
        keep_unmodelled(plan, hooks);
        let mut r = self.recorded();
        let copy = match r.spare.pop() {
            Some(mut spare) => {
                spare.clone_from(plan);
                spare
            }
            None => plan.clone(),
        };
        r.plans.push(copy);
        Ok(())
    }

    fn run_owned(
        &self,
        plan: Plan,
        _: &Members,
        _: &dyn Engine,
        _: UserBuf<'_>,
        hooks: Hooks<'_>,
    ) -> Result<(), Failed> {
        keep_unmodelled(&plan, hooks);
        self.recorded().plans.push(plan);
        Ok(())
    }
}

/// The rows `plan` leaves known, as known ([`Hooks::keep_unmodelled`]).
fn keep_unmodelled(plan: &Plan, hooks: Hooks<'_>) {
    for step in &plan.steps {
        if let crate::plan::Step::Keep(rows) = step {
            hooks.keep_unmodelled(rows);
        }
    }
}
