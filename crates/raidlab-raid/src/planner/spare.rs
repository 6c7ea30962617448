//! Spare vectors for the planner, kept per thread: finished plans given back
//! with [`recycle`] and stripe maps of rows no longer walked are reused by the
//! next plan instead of freed and allocated again. The simulator plans
//! millions of small requests, where these allocations were a fifth of a
//! simulated read's cost.
//!
//! Decides only where a plan's memory comes from. It must never change what
//! a plan contains: everything handed out is empty (lengths 0, `Space` at its
//! default), whatever the caller gave back.

use crate::plan::{Compute, MemberOp, Plan, Step};
use raidlab_layout::StripeMap;
use std::cell::RefCell;

/// Spares of each kind kept per thread: enough for the few plans a request
/// has in flight; more are freed (a burst of large plans must not stay).
const KEEP: usize = 8;

struct Spares {
    plans: Vec<Plan>,
    ops: Vec<Vec<MemberOp>>,
    computes: Vec<Vec<Compute>>,
    maps: Vec<StripeMap>,
}

thread_local! {
    // A constant initialiser: no lazy set-up check on each visit.
    static SPARES: RefCell<Spares> = const {
        RefCell::new(Spares {
            plans: Vec::new(),
            ops: Vec::new(),
            computes: Vec::new(),
            maps: Vec::new(),
        })
    };
}

fn with<T>(f: impl FnOnce(&mut Spares) -> T) -> Option<T> {
    // `try_with`: a thread being torn down has no spares (and needs none).
    SPARES
        .try_with(|s| s.try_borrow_mut().ok().map(|mut s| f(&mut s)))
        .ok()
        .flatten()
}

fn keep<T>(pool: &mut Vec<T>, t: T) {
    if pool.len() < KEEP {
        pool.push(t);
    }
}

/// Give a plan the caller is done with back to this thread's planner: its
/// vectors serve the next plans. Dropping a plan instead is always right,
/// only slower.
pub fn recycle(mut plan: Plan) {
    with(|s| {
        for step in plan.steps.drain(..) {
            match step {
                Step::Io(mut ops) => {
                    ops.clear();
                    keep(&mut s.ops, ops);
                }
                Step::Compute(mut cs) => {
                    cs.clear();
                    keep(&mut s.computes, cs);
                }
                Step::Log(_) | Step::Keep(_) => {}
            }
        }
        plan.scratch.clear();
        plan.locks.clear();
        plan.space = Default::default();
        keep(&mut s.plans, plan);
    });
}

/// An empty plan, two empty vectors of member operations (reads and writes)
/// and one of computations: what a plan builder starts from, taken in one
/// visit to the thread's spares.
pub(super) fn builder_parts() -> (Plan, Vec<MemberOp>, Vec<MemberOp>, Vec<Compute>) {
    with(|s| {
        (
            s.plans.pop().unwrap_or_default(),
            s.ops.pop().unwrap_or_default(),
            s.ops.pop().unwrap_or_default(),
            s.computes.pop().unwrap_or_default(),
        )
    })
    .unwrap_or_default()
}

/// Vectors a finished builder did not put in its plan (empty or not).
pub(super) fn give_unused(ops: [Option<Vec<MemberOp>>; 2], cs: Option<Vec<Compute>>) {
    with(|s| {
        for mut v in ops.into_iter().flatten() {
            v.clear();
            keep(&mut s.ops, v);
        }
        if let Some(mut cs) = cs {
            cs.clear();
            keep(&mut s.computes, cs);
        }
    });
}

/// A stripe map to fill (its contents are stale; `Geometry::stripe_into`
/// overwrites all of it).
pub(super) fn map() -> StripeMap {
    with(|s| s.maps.pop()).flatten().unwrap_or_default()
}

pub(super) fn give_map(map: StripeMap) {
    with(|s| keep(&mut s.maps, map));
}

/// `f` of a spare stripe map (stale contents: the caller fills it with
/// `Geometry::stripe_into`), for callers outside the planner that map
/// stripes one after another.
pub(crate) fn with_map<T>(f: impl FnOnce(&mut StripeMap) -> T) -> T {
    let mut m = map();
    let t = f(&mut m);
    give_map(m);
    t
}
