//! The real executor: carries a [`Plan`] out against member volumes.
//!
//! Each I/O step's operations are submitted one of two ways, chosen once per
//! process ([`submit`]) and, with io_uring chosen, by what the step touches:
//! a step on direct members (except one writing a direct regular file) has
//! its requests sent together from the caller's thread and reaped there
//! (`uring` says why only those); every other step goes through threads,
//! in parallel, one member's on the caller's thread and the others' on a
//! shared pool of I/O threads, when the step is large enough for that to pay
//! or its members are slow enough (`pool::Pace`), small steps on fast
//! members in order on the caller's thread.
//! Compute steps run the arithmetic each names (raidlab-parity's XOR, P+Q,
//! update, recovery) on the buffers it names; which arithmetic a row needs
//! (a degraded read's, a lost member's) is the plan's, never chosen here.
//! A `Compute::Kept` fill and a `Step::Keep` reach the array's kept rows
//! through [`Hooks`], as a log step reaches its log writer.
//! The executor makes no decisions: if a member fails, the error goes back
//! to the caller with the member's name and range.

use crate::kept_rows::KeptRows;
use crate::plan::{Buf, Compute, LogEntry, MemberOp, Plan, Slice, Step};
use raidlab_core::IoKind;
use raidlab_core::{Error, ErrorKind, Op, Result, Volume};
use raidlab_parity::Engine;
use std::sync::Arc;

mod compute;
mod pool;
mod recording;
mod scratch;
pub mod submit;
mod uring;
use compute::run_compute;
pub use compute::{compute_into, Input};
use pool::{run_grouped, Pace};
pub use recording::Recording;
use scratch::{give_back_scratch, take_scratch};
pub use submit::{MemberIo, Submission};
pub use uring::in_submission_order;

/// Why a plan did not complete: the member roles whose operations failed (empty
/// for a failure that is not a member's, e.g. a malformed plan), whether they were
/// reads or writes, and the first error. Every operation of the failing step was
/// still attempted, so a write step leaves all the other members written.
#[derive(Debug)]
pub struct Failed {
    pub members: Vec<usize>,
    pub kind: IoKind,
    /// Boxed: the error path should not make every successful return large.
    pub error: Box<Error>,
    /// The failure was writing the partial parity log: no data or parity was
    /// written yet.
    pub log: bool,
}

impl From<Error> for Failed {
    fn from(error: Error) -> Self {
        Failed {
            members: Vec::new(),
            kind: IoKind::Read,
            error: Box::new(error),
            log: false,
        }
    }
}

/// Writes a plan's partial parity log entries, each with its partial parity
/// (empty for an entry without), durably, before the plan's writes go out.
pub type LogWriter<'a> = &'a dyn Fn(&[(LogEntry, &[u8])]) -> Result<(), Failed>;

/// What a plan may hand back to the array that runs it: its log step's
/// entries to a log writer, and its kept rows ([`Step::Keep`]) to the
/// array's [`KeptRows`], which its `Compute::Kept` fills come from.
#[derive(Clone, Copy, Default)]
pub struct Hooks<'a> {
    pub log: Option<LogWriter<'a>>,
    pub kept: Option<&'a KeptRows>,
}

impl<'a> Hooks<'a> {
    /// Neither a log nor kept rows.
    pub const NONE: Hooks<'static> = Hooks {
        log: None,
        kept: None,
    };

    /// A log writer alone.
    pub fn log(log: LogWriter<'a>) -> Hooks<'a> {
        Hooks {
            log: Some(log),
            kept: None,
        }
    }
}

impl Hooks<'_> {
    /// For an executor that moves no parity bytes (the simulator's, the
    /// recording one): the pages `rows` leave known count as known, with
    /// no bytes, so that the plans after them choose as the array's would
    /// on real members (`KeptRows::keep_unmodelled`).
    pub fn keep_unmodelled(&self, rows: &[crate::plan::KeptRow]) {
        if let Some(kept) = self.kept {
            for row in rows {
                kept.keep_unmodelled(row.offset, row.len, crate::kept_rows::given(&row.pages));
            }
        }
    }
}

impl std::fmt::Debug for Hooks<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("log", &self.log.is_some())
            .field("kept", &self.kept.is_some())
            .finish()
    }
}

impl From<Failed> for Error {
    fn from(f: Failed) -> Self {
        *f.error
    }
}

/// Steps moving at least this many bytes over two or more members run in parallel.
const PARALLEL_BYTES: u64 = 128 << 10;

/// The caller's buffer: filled by a read, drained by a write.
#[derive(Debug)]
pub enum UserBuf<'a> {
    Read(&'a mut [u8]),
    Write(&'a [u8]),
}

impl UserBuf<'_> {
    fn get(&self) -> &[u8] {
        match self {
            UserBuf::Read(b) => b,
            UserBuf::Write(b) => b,
        }
    }
}

/// Member volumes by role; `None` for a missing member.
pub type Members = [Option<Arc<dyn Volume>>];

/// What carries plans out: the seam between the engine, which decides (plans,
/// stripe locks, logs, failure handling), and whatever does the member I/O of
/// each step and the parity work. [`ThreadPool`] is the real one; a simulator
/// runs the same plans on device models in virtual time, and tests record the
/// member operations instead of doing them. An executor decides nothing: it
/// runs every step in order and says which members failed.
pub trait Executor: Send + Sync + std::fmt::Debug {
    /// Run `plan` with `user` as the request buffer, handing its log step
    /// (if any) to `log`.
    fn run(
        &self,
        plan: &Plan,
        members: &Members,
        engine: &dyn Engine,
        user: UserBuf<'_>,
        hooks: Hooks<'_>,
    ) -> Result<(), Failed>;

    /// [`Executor::run`] for a plan its caller has no use for once it ran:
    /// an executor that keeps plans (the recording one) keeps this one
    /// instead of a copy. By default: run it, then give it back to the
    /// planner's spares.
    fn run_owned(
        &self,
        plan: Plan,
        members: &Members,
        engine: &dyn Engine,
        user: UserBuf<'_>,
        hooks: Hooks<'_>,
    ) -> Result<(), Failed> {
        let result = self.run(&plan, members, engine, user, hooks);
        crate::planner::recycle(plan);
        result
    }
}

/// The real executor: a step's requests to direct members through io_uring
/// when the process chose it ([`submit::current`]; see `uring` for which
/// steps); otherwise in parallel on a shared pool of I/O
/// threads when the step is large or its members wait for a device, in order
/// on the caller's thread otherwise. It learns its members' pace from the
/// steps it runs, so one executor serves one array.
#[derive(Debug)]
pub struct ThreadPool {
    pace: Pace,
    uring: bool,
}

impl Default for ThreadPool {
    /// With the process's choice of submission.
    fn default() -> Self {
        ThreadPool::with_submission(submit::current())
    }
}

impl ThreadPool {
    /// With a submission of its own (a benchmark comparing the two, a test
    /// of each).
    pub fn with_submission(s: &Submission) -> ThreadPool {
        ThreadPool {
            pace: Pace::default(),
            uring: s.uring,
        }
    }

    /// Whether direct members' steps go through io_uring.
    pub fn uses_uring(&self) -> bool {
        self.uring
    }
}

impl Executor for ThreadPool {
    fn run(
        &self,
        plan: &Plan,
        members: &Members,
        engine: &dyn Engine,
        user: UserBuf<'_>,
        hooks: Hooks<'_>,
    ) -> Result<(), Failed> {
        execute(
            plan,
            members,
            engine,
            user,
            hooks,
            How {
                pace: Some(&self.pace),
                uring: self.uring,
                parallel: true,
                yields: false,
            },
        )
    }
}

/// An executor that runs every operation of every step in order on the
/// calling thread, never on the I/O pool: a run's member I/O then happens in
/// one order that depends on nothing but the plans (the torture harness,
/// whose runs must replay exactly from a seed). Slower than [`ThreadPool`] on
/// devices that wait; otherwise the same work.
#[derive(Debug, Default)]
pub struct InOrder;

impl Executor for InOrder {
    fn run(
        &self,
        plan: &Plan,
        members: &Members,
        engine: &dyn Engine,
        user: UserBuf<'_>,
        hooks: Hooks<'_>,
    ) -> Result<(), Failed> {
        execute(plan, members, engine, user, hooks, How::in_order(false))
    }
}

/// [`InOrder`], except that inside a task ([`raidlab_core::task`]) a plan
/// gives control back to the task's runner before each of its I/O steps and
/// between the member operations of one (as a step's member requests
/// complete one by one on real disks). The runner then chooses which request
/// goes on, so requests in flight together interleave inside their plans (a
/// read-modify-write between its reads and its writes, between its data and
/// its parity, a log entry and the write it covers) in an order the runner
/// draws: the torture harness's queue depths, whose
/// races must replay exactly from a seed. Outside a task it is [`InOrder`]
/// to the operation.
#[derive(Debug, Default)]
pub struct Interleaved;

impl Executor for Interleaved {
    fn run(
        &self,
        plan: &Plan,
        members: &Members,
        engine: &dyn Engine,
        user: UserBuf<'_>,
        hooks: Hooks<'_>,
    ) -> Result<(), Failed> {
        execute(plan, members, engine, user, hooks, How::in_order(true))
    }
}

/// Run `plan`, handing its log step (if any) to `log`; small steps' choice
/// made and taught by `how.pace` if given (by size alone otherwise); file
/// members' requests through io_uring if `how.uring`; every operation in
/// turn on this thread unless `how.parallel`.
fn execute(
    plan: &Plan,
    members: &Members,
    engine: &dyn Engine,
    mut user: UserBuf<'_>,
    hooks: Hooks<'_>,
    how: How<'_>,
) -> Result<(), Failed> {
    let mut scratch = take_scratch(&plan.scratch);
    let result = run_steps(plan, members, engine, &mut user, &mut scratch, hooks, how);
    give_back_scratch(scratch);
    result
}

/// Inside a task, give control back to its runner ([`Interleaved`]);
/// outside one, nothing.
pub(super) fn yield_to_runner() {
    raidlab_core::task::suspend(raidlab_core::task::Wait::Runner(0));
}

/// How a step's member operations are submitted.
#[derive(Clone, Copy)]
struct How<'p> {
    pace: Option<&'p Pace>,
    uring: bool,
    /// Whether a step's groups may go to the I/O pool at all (not for an
    /// executor whose runs must happen in one order).
    parallel: bool,
    /// Whether a task gives control back to its runner before each I/O
    /// step and between the member operations of one ([`Interleaved`]).
    yields: bool,
}

impl How<'_> {
    /// Every operation in turn on the calling thread ([`InOrder`],
    /// [`Interleaved`] when `yields`).
    fn in_order(yields: bool) -> How<'static> {
        How {
            pace: None,
            uring: false,
            parallel: false,
            yields,
        }
    }
}

fn run_steps(
    plan: &Plan,
    members: &Members,
    engine: &dyn Engine,
    user: &mut UserBuf<'_>,
    scratch: &mut [Vec<u8>],
    hooks: Hooks<'_>,
    how: How<'_>,
) -> Result<(), Failed> {
    for step in &plan.steps {
        match step {
            Step::Io(ops) => {
                if how.yields {
                    // Outside a task this does nothing and the step runs
                    // at once, as InOrder's.
                    yield_to_runner();
                }
                run_io(ops, members, user, scratch, how)?
            }
            Step::Compute(cs) => {
                for c in cs {
                    match c {
                        Compute::Kept {
                            member,
                            offset,
                            dst,
                        } => fill_kept(hooks.kept, *member, *offset, *dst, scratch)?,
                        c => run_compute(c, engine, user, scratch)?,
                    }
                }
            }
            Step::Keep(rows) => {
                if let Some(kept) = hooks.kept {
                    for row in rows {
                        let pages = row
                            .pages
                            .iter()
                            .map(|s| s.map(|s| slice_of(user.get(), scratch, s)).transpose())
                            .collect::<Result<Vec<_>>>()?;
                        kept.keep(row.offset, row.len, &pages);
                    }
                }
            }
            Step::Log(entries) => {
                let Some(log) = hooks.log else {
                    return Err(Error::new(
                        ErrorKind::Invalid,
                        Op::Plan,
                        "internal: a plan with a partial parity log step ran without a log",
                    )
                    .into());
                };
                let with_pp = entries
                    .iter()
                    .map(|e| {
                        let pp = match e.pp {
                            Some(s) => slice_of(user.get(), scratch, s)?,
                            None => &[][..],
                        };
                        Ok((*e, pp))
                    })
                    .collect::<Result<Vec<_>>>()?;
                log(&with_pp)?;
            }
        }
    }
    Ok(())
}

/// Fill scratch buffer `dst` with member `member`'s kept bytes at `offset`.
/// The write path pinned the rows before the plan ran, so a row missing is
/// a plan run without them: an internal error, never a guess.
fn fill_kept(
    kept: Option<&KeptRows>,
    member: usize,
    offset: u64,
    dst: usize,
    scratch: &mut [Vec<u8>],
) -> Result<()> {
    let buf = scratch.get_mut(dst).ok_or_else(|| {
        Error::new(
            ErrorKind::Invalid,
            Op::Plan,
            format!("internal: a kept row's fill names scratch buffer {dst}, which the plan lacks"),
        )
    })?;
    if kept.is_some_and(|k| k.fill(member, offset, buf)) {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::Invalid,
        Op::Plan,
        format!(
            "internal: a plan fills member {member}'s bytes at {offset} from the rows kept in memory, but they are not kept"
        ),
    ))
}

fn member<'m>(members: &'m Members, op: &MemberOp) -> Result<&'m Arc<dyn Volume>> {
    members
        .get(op.member)
        .and_then(|m| m.as_ref())
        .ok_or_else(|| {
            Error::new(
                ErrorKind::Invalid,
                Op::Plan,
                format!(
                    "internal: plan uses member {} which is not present",
                    op.member
                ),
            )
        })
}

fn do_op(
    vol: &Arc<dyn Volume>,
    op: &MemberOp,
    read_into: Option<&mut [u8]>,
    write_from: Option<&[u8]>,
) -> Result<()> {
    match (op.kind, read_into, write_from) {
        (IoKind::Read, Some(buf), _) => vol.read_at(buf, op.offset),
        (IoKind::Write, _, Some(buf)) => vol.write_at(buf, op.offset),
        (IoKind::Trim, _, _) => vol.discard(op.offset, op.length),
        (IoKind::Flush, _, _) => vol.flush(),
        (IoKind::Zero, _, _) => vol.write_zeroes(op.offset, op.length),
        _ => Err(Error::new(
            ErrorKind::Invalid,
            Op::Plan,
            "internal: operation without a buffer",
        )),
    }
}

fn run_io(
    ops: &[MemberOp],
    members: &Members,
    user: &mut UserBuf<'_>,
    scratch: &mut [Vec<u8>],
    how: How<'_>,
) -> Result<(), Failed> {
    let pace = how.pace;
    let all_writes = ops.iter().all(|o| o.kind == IoKind::Write);
    let all_reads = ops.iter().all(|o| o.kind == IoKind::Read);
    // Trims, write-zeroes and flushes carry no buffer.
    let all_unbuffered = ops
        .iter()
        .all(|o| matches!(o.kind, IoKind::Trim | IoKind::Zero | IoKind::Flush));
    let bytes: u64 = ops.iter().map(|o| o.length).sum();
    let mut distinct: Vec<usize> = ops.iter().map(|o| o.member).collect();
    distinct.sort_unstable();
    distinct.dedup();
    // A flush waits for the device's cache: flushes of several members
    // overlap however few bytes the step moves.
    let flush = ops.iter().any(|o| o.kind == IoKind::Flush);
    let small = bytes < PARALLEL_BYTES && !flush;
    let parallel = how.parallel && distinct.len() > 1 && !small;
    // A small step's choice is the pace's, and only small steps teach it.
    let pace = pace.filter(|_| small);

    if all_writes {
        let sources: Vec<&[u8]> = ops
            .iter()
            .map(|o| slice_of(user.get(), scratch, o.buf))
            .collect::<Result<_>>()?;
        if how.uring && uring::pays(ops, members) {
            let work = ops
                .iter()
                .zip(sources)
                .map(|(o, s)| (o, uring::Data::Write(s)));
            return uring::run(work.collect(), members);
        }
        let work: Vec<(usize, &MemberOp, &[u8])> = ops
            .iter()
            .zip(sources)
            .map(|(o, s)| (o.member, o, s))
            .collect();
        return run_grouped(
            work,
            &distinct,
            (parallel, how.yields),
            pace,
            members,
            |vol, op, buf| do_op(vol, op, None, Some(buf)),
        );
    }
    if all_unbuffered {
        if how.uring && uring::pays(ops, members) {
            return uring::run(
                ops.iter().map(|o| (o, uring::Data::Bare)).collect(),
                members,
            );
        }
        let work: Vec<(usize, &MemberOp, ())> = ops.iter().map(|o| (o.member, o, ())).collect();
        return run_grouped(
            work,
            &distinct,
            (parallel, how.yields),
            pace,
            members,
            |vol, op, ()| do_op(vol, op, None, None),
        );
    }
    if all_reads {
        let user_buf: &mut [u8] = match user {
            UserBuf::Read(b) => b,
            UserBuf::Write(_) => &mut [],
        };
        let targets = carve(user_buf, scratch, ops.len(), |i| ops[i].buf)?;
        if how.uring && uring::pays(ops, members) {
            let work = ops
                .iter()
                .zip(targets)
                .map(|(o, t)| (o, uring::Data::Read(t)));
            return uring::run(work.collect(), members);
        }
        let work: Vec<(usize, &MemberOp, &mut [u8])> = ops
            .iter()
            .zip(targets)
            .map(|(o, t)| (o.member, o, t))
            .collect();
        return run_grouped(
            work,
            &distinct,
            (parallel, how.yields),
            pace,
            members,
            |vol, op, buf| do_op(vol, op, Some(buf), None),
        );
    }
    // Mixed steps are not produced by the planner; run them in order, safely.
    for op in ops {
        let vol = member(members, op)?;
        match op.kind {
            IoKind::Write => do_op(vol, op, None, Some(slice_of(user.get(), scratch, op.buf)?))?,
            IoKind::Trim | IoKind::Zero | IoKind::Flush => do_op(vol, op, None, None)?,
            IoKind::Read => {
                let target = match (op.buf.buf, &mut *user) {
                    (Buf::User, UserBuf::Read(b)) => b
                        .get_mut(op.buf.offset..op.buf.offset + op.buf.len)
                        .ok_or_else(|| bad_slice(op.buf))?,
                    (Buf::Scratch(id), _) => scratch
                        .get_mut(id)
                        .and_then(|s| s.get_mut(op.buf.offset..op.buf.offset + op.buf.len))
                        .ok_or_else(|| bad_slice(op.buf))?,
                    _ => return Err(bad_slice(op.buf).into()),
                };
                do_op(vol, op, Some(target), None)?
            }
        }
    }
    Ok(())
}

/// Split the user buffer and scratch buffers into the disjoint mutable slices
/// `slice(0..n)` (the slices a step's reads fill, or a computation's outputs),
/// returned in that order.
pub(super) fn carve<'a>(
    user: &'a mut [u8],
    scratch: &'a mut [Vec<u8>],
    n: usize,
    slice: impl Fn(usize) -> Slice,
) -> Result<Vec<&'a mut [u8]>> {
    let mut order: Vec<usize> = (0..n).collect();
    let key = |s: Slice| match s.buf {
        Buf::User => (0usize, s.offset),
        Buf::Scratch(id) => (id + 1, s.offset),
    };
    order.sort_by_key(|&i| key(slice(i)));
    // Remaining unsplit tail of each buffer and the offset it starts at.
    let mut rest: Vec<Option<(&'a mut [u8], usize)>> = std::iter::once(Some((user, 0)))
        .chain(scratch.iter_mut().map(|s| Some((s.as_mut_slice(), 0))))
        .collect();
    let mut out: Vec<Option<&'a mut [u8]>> = (0..n).map(|_| None).collect();
    for i in order {
        let s = slice(i);
        let (b, _) = key(s);
        let (buf, base) = rest
            .get_mut(b)
            .and_then(Option::take)
            .ok_or_else(|| bad_slice(s))?;
        if s.offset < base || s.offset - base + s.len > buf.len() {
            return Err(bad_slice(s));
        }
        let (_, tail) = buf.split_at_mut(s.offset - base);
        let (target, tail) = tail.split_at_mut(s.len);
        rest[b] = Some((tail, s.offset + s.len));
        out[i] = Some(target);
    }
    out.into_iter()
        .map(|t| {
            t.ok_or_else(|| Error::new(ErrorKind::Invalid, Op::Plan, "internal: unfilled target"))
        })
        .collect()
}

fn bad_slice(s: Slice) -> Error {
    Error::new(
        ErrorKind::Invalid,
        Op::Plan,
        format!("internal: plan buffer slice {s:?} overlaps another or lies outside its buffer"),
    )
}

pub(super) fn slice_of<'a>(user: &'a [u8], scratch: &'a [Vec<u8>], s: Slice) -> Result<&'a [u8]> {
    let buf: &[u8] = match s.buf {
        Buf::User => user,
        Buf::Scratch(id) => scratch.get(id).ok_or_else(|| bad_slice(s))?,
    };
    buf.get(s.offset..s.offset + s.len)
        .ok_or_else(|| bad_slice(s))
}
