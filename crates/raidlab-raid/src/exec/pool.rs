//! Where a step's member operations run: grouped by member, each member's in
//! order, the groups in parallel on a shared pool of I/O threads (the calling
//! thread takes the first) or one after another. It decides nothing about the
//! operations themselves and never stops at a failed one: every operation of
//! the step is attempted, so a write step leaves the other members written.

use super::{member, Failed, Members};
use crate::plan::{MemberOp, OpKind};
use raidlab_core::{Error, ErrorKind, Op, Result, Volume};
use std::sync::Arc;

/// Threads that carry out member I/O in parallel, shared by every array of the
/// process. Sized for I/O, not for CPUs: a member operation mostly waits for
/// its device, and a step may touch every member of a wide array. `None` when
/// no thread could be made: members are then worked on in turn.
fn io_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(IO_THREADS)
            .thread_name(|i| format!("raidlab-io-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// Threads of [`io_pool`].
const IO_THREADS: usize = 16;

/// `run(group)`, with a panic (a bug) turned into an error for the group's
/// first member instead of unwinding through the pool into the caller.
fn run_caught<G, F: Fn(G) -> Vec<(usize, Error)>>(run: &F, group: G) -> Vec<(usize, Error)> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(group))).unwrap_or_else(|_| {
        vec![(
            usize::MAX,
            Error::new(ErrorKind::Io, Op::Read, "internal: an I/O task panicked"),
        )]
    })
}

/// Run `work` grouped by member, in parallel (on [`io_pool`]) when asked.
pub(super) fn run_grouped<B: Send>(
    work: Vec<(usize, &MemberOp, B)>,
    distinct: &[usize],
    parallel: bool,
    members: &Members,
    f: impl Fn(&Arc<dyn Volume>, &MemberOp, B) -> Result<()> + Sync,
) -> Result<(), Failed> {
    let kind = work.first().map_or(OpKind::Read, |(_, op, _)| op.kind);
    // Every operation is attempted even after one fails: a write step must leave
    // the other members written so the array can go on without the failed one.
    let run = |group: Vec<(&MemberOp, B)>| -> Vec<(usize, Error)> {
        let mut errs = Vec::new();
        for (op, b) in group {
            if let Err(e) = member(members, op).and_then(|v| f(v, op, b)) {
                errs.push((op.member, e));
            }
        }
        errs
    };
    let mut groups: Vec<Vec<(&MemberOp, B)>> = distinct.iter().map(|_| Vec::new()).collect();
    for (m, op, b) in work {
        let g = distinct.binary_search(&m).unwrap_or(0);
        groups[g].push((op, b));
    }
    let pool = if parallel { io_pool() } else { None };
    let errs: Vec<(usize, Error)> = if let Some(pool) = pool {
        let run = &run;
        let mut results: Vec<Vec<(usize, Error)>> = groups.iter().map(|_| Vec::new()).collect();
        // The calling thread takes the first member's operations itself and the
        // pool the others: no thread is made per request (spawning one per
        // member cost more than a 64K read from memory).
        pool.in_place_scope(|s| {
            let mut work = groups.into_iter().zip(results.iter_mut());
            let first = work.next();
            for (g, out) in work {
                s.spawn(move |_| *out = run_caught(run, g));
            }
            if let Some((g, out)) = first {
                *out = run_caught(run, g);
            }
        });
        results.into_iter().flatten().collect()
    } else {
        groups.into_iter().flat_map(run).collect()
    };
    let mut roles: Vec<usize> = errs
        .iter()
        .map(|(r, _)| *r)
        .filter(|&r| r != usize::MAX)
        .collect();
    roles.sort_unstable();
    roles.dedup();
    match errs.into_iter().next() {
        None => Ok(()),
        Some((_, error)) => Err(Failed {
            members: roles,
            kind,
            error: Box::new(error),
            log: false,
        }),
    }
}
