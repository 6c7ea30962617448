//! Where a step's member operations run: grouped by member, each member's in
//! order, the groups in parallel on a shared pool of I/O threads (the calling
//! thread takes the first) or one after another; and what an executor learns
//! of its members' pace to choose between the two for small steps. It decides
//! nothing about the operations themselves and never stops at a failed one:
//! every operation of the step is attempted, so a write step leaves the other
//! members written.

use super::{member, Failed, Members};
use crate::plan::MemberOp;
use raidlab_core::IoKind;
use raidlab_core::{Error, ErrorKind, Op, Result, Volume};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

/// How long one member operation of a small step has taken of late, reads
/// and the rest apart (a member's writes may land in a cache its reads
/// miss), as an executor learns it from the steps it runs.
///
/// A small step is handed to the pool only when its operations wait for a
/// device long enough to pay for it. From memory or the page cache a 4 KiB
/// operation takes a microsecond or two, far less than handing it to another
/// thread costs, so such steps run in turn on the caller's thread. From a
/// disk that seeks it takes milliseconds: a RAID 5 4 KiB write's two reads
/// (old data, old parity) then took twice as long in turn as together, a
/// RAID 6 write's three reads three times, where md sends them to the
/// members at once.
#[derive(Debug, Default)]
pub struct Pace {
    /// Nanoseconds an operation, a moving average: [reads, everything else].
    ns: [AtomicU64; 2],
}

/// A small operation that takes at least this long, on average, waited for a
/// device, and handing the others of its step to pool threads is cheaper
/// than waiting for them in turn. The hand-off (a pool thread woken, the
/// caller waiting for it) took 7-27 µs back to back and 25-106 µs after a
/// 200 µs idle gap on this project's 2-CPU test machine, where two 4 KiB
/// copies in turn took 54-65 ns (`cargo run --release -p raidlab-raid
/// --example handoff`, which does what `run_grouped` does). So the line is
/// above the worst hand-off seen: a page-cache hit (1-2 µs) and an SSD's
/// 4 KiB read (tens of µs; about the hand-off at 100 µs) stay in turn, a disk
/// that seeks (milliseconds) goes together.
const DEVICE_NS: u64 = 200_000;

fn slot(kind: IoKind) -> usize {
    usize::from(kind != IoKind::Read)
}

impl Pace {
    /// Whether small steps of `kind` go to the pool.
    pub(super) fn waits_for_device(&self, kind: IoKind) -> bool {
        self.ns[slot(kind)].load(Relaxed) >= DEVICE_NS
    }

    /// What the caller's thread took for `ops` operations of `kind`.
    fn learn(&self, kind: IoKind, took_ns: u64, ops: usize) {
        let Some(per_op) = took_ns.checked_div(ops as u64) else {
            return;
        };
        // A disk's 5 ms and 400 µs mean the same here, and a thread
        // preempted for a few milliseconds during a page-cache copy must not
        // send the next steps to the pool: no one step counts for more than
        // twice the line.
        let per_op = per_op.min(2 * DEVICE_NS);
        let a = &self.ns[slot(kind)];
        // About the last eight steps, so one page-cache hit among device
        // reads (or one miss among hits) does not flip the choice: from
        // either side it takes five or six in a row. Threads racing here
        // lose an update, which only delays the average.
        let old = a.load(Relaxed);
        a.store(old - old / 8 + per_op / 8, Relaxed);
    }
}

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

/// Whether this thread's step of `kind` is one of the 1 in [`SAMPLE_EVERY`]
/// that teach the pace: two clock reads a step were 3% of a 4 KiB write to
/// an in-process array on tmpfs. Counted per kind, so that a write's read
/// step and write step, which alternate, are both sampled.
fn sample(kind: IoKind) -> bool {
    thread_local! {
        static STEPS: [std::cell::Cell<u32>; 2] = const {
            [std::cell::Cell::new(0), std::cell::Cell::new(0)]
        };
    }
    STEPS.with(|n| {
        let n = &n[slot(kind)];
        let k = n.get().wrapping_add(1);
        n.set(k);
        k % SAMPLE_EVERY == 0
    })
}

/// See [`sample`]. A disk's pace is then learnt in about 25 small steps.
const SAMPLE_EVERY: u32 = 4;

/// Run `work` grouped by member, in parallel (on [`io_pool`]) when asked or
/// when `pace`, if given, says its members wait for a device; teach `pace`
/// what the caller's thread took per operation.
pub(super) fn run_grouped<B: Send>(
    work: Vec<(usize, &MemberOp, B)>,
    distinct: &[usize],
    (parallel, yields): (bool, bool),
    pace: Option<&Pace>,
    members: &Members,
    f: impl Fn(&Arc<dyn Volume>, &MemberOp, B) -> Result<()> + Sync,
) -> Result<(), Failed> {
    let kind = work.first().map_or(IoKind::Read, |(_, op, _)| op.kind);
    // Every operation is attempted even after one fails: a write step must leave
    // the other members written so the array can go on without the failed one.
    let run = |group: Vec<(&MemberOp, B)>| -> Vec<(usize, Error)> {
        let mut errs = Vec::new();
        for (i, (op, b)) in group.into_iter().enumerate() {
            if yields && i > 0 {
                // Between one member operation and the next (Interleaved).
                super::yield_to_runner();
            }
            raidlab_devices::uring::in_flight::add(1);
            let r = member(members, op).and_then(|v| f(v, op, b));
            raidlab_devices::uring::in_flight::add(-1);
            if let Err(e) = r {
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
    let parallel =
        parallel || (distinct.len() > 1 && pace.is_some_and(|p| p.waits_for_device(kind)));
    let pool = if parallel { io_pool() } else { None };
    let pace = pace.filter(|_| sample(kind));
    // The caller's share of the step, timed when it teaches the pace; with
    // `caught`, a panic in it becomes an error, as on the pool's threads.
    let timed = |group: Vec<(&MemberOp, B)>, caught: bool| -> Vec<(usize, Error)> {
        let go = |g| if caught { run_caught(&run, g) } else { run(g) };
        let Some(pace) = pace else {
            return go(group);
        };
        let n = group.len();
        let start = Instant::now();
        let errs = go(group);
        pace.learn(kind, start.elapsed().as_nanos() as u64, n);
        errs
    };
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
                *out = timed(g, true);
            }
        });
        results.into_iter().flatten().collect()
    } else {
        groups
            .into_iter()
            .enumerate()
            .flat_map(|(i, g)| {
                if yields && i > 0 {
                    // Between one member's operations and the next's; the
                    // step's first waited before the step.
                    super::yield_to_runner();
                }
                timed(g, false)
            })
            .collect()
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
