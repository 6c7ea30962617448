//! A raidlab array whose requests run the real engine *live* in virtual time:
//! each host request is a task (`raidlab_core::task`) that calls the real
//! `Array` (stripe cache, stripe locks, logs, flushes, the stripe cache's own
//! thread), and the engine's executor here is a thin outbox: a plan's I/O step
//! goes to the member device models and the task suspends until the last of
//! its operations completes; a compute step suspends for its host time; a
//! stripe lock or a log lock another request holds suspends it until let go.
//!
//! Decides only *when*: which member operations a request needs, when it
//! waits for a lock, when held stripes go down and what a log writes are the
//! engine's, run as they run on threads. It must never read the wall clock
//! nor keep a second copy of an engine decision (no lock table, no log
//! model, no rebuild or scrub driver).
//!
//! A rebuild runs as a task of the engine's own rebuild loop
//! (`Array::drive_recovery`, paced by `raidlab serve`'s schedule).
//!
//! Faults (`fail=`, `lse=`, `slow=`) meet a request when its plan runs, not
//! when it arrives: the engine's failure handling runs mid-request.
//!
//! md's write-intent bitmap is the engine's too (`Array::with_intent`): a
//! write marks its chunks and writes the bitmap before its data, and the
//! engine's daemon loop (`Array::bitmap_daemon_thread`) runs as a task that
//! sleeps `daemon_sleep` on the virtual clock.
//!
//! Faults (`fail=`, `lse=`, `slow=`, `spare=`) and what they did
//! ([`super::faults::Faults`]): a spare
//! goes in through the engine's `begin_recovery` and its rebuild loop.
//!
//! A check or repair is the engine's scrub of the running array, run as a
//! task (`check.rs`); where a configuration says copies differ, that task's
//! reads and writes carry what the members hold.

use super::{ArraySpec, FaultSpec, DATA_OFFSET, IDLE};
use crate::device::{Completion, Device, ModelInfo, Ns, Param, Request, VirtualClock, MD_THREAD};
use crate::faults::exec::FaultExec;
use crate::host::HostCost;
use crate::md_host::MdThread;
use crate::stats::{MemberIo, OpLog};
use raidlab_core::task::{self, Runner, Stacks, Step as TaskStep, Task, Wait};
use raidlab_core::{Error, ErrorKind, IoKind, Op, Volume};
use raidlab_parity::Engine;
use raidlab_raid::exec::{Executor, Failed, Hooks, Members, UserBuf};
use raidlab_raid::plan::{LogEntry, Space};
use raidlab_raid::{Array, Plan, Step};
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod check;
mod outbox;
mod setup;

use outbox::{Ended, MemberOp, Out, Outbox};

/// A request under way.
#[derive(Debug)]
struct Req {
    task: Task<Ended>,
    /// The submitter's id; `None` for the stripe cache's thread.
    host_id: Option<u64>,
    process: u32,
    /// Member operations of the current step not yet complete.
    outstanding: usize,
}

/// A raidlab array on simulated members, its requests run live as tasks.
#[derive(Debug)]
pub struct TaskArray {
    name: String,
    array: Arc<Array>,
    /// The started stack the array came from: its assembly records the
    /// members the engine takes out (`Started`'s recorder).
    started: raidlab_raid::lifecycle::Started,
    outbox: Arc<Outbox>,
    clock: Arc<VirtualClock>,
    members: Vec<Option<Box<dyn Device>>>,
    member_next: Vec<Ns>,
    host: HostCost,
    request_ns: Ns,
    md_thread: MdThread,
    reqs: super::Slab<Req>,
    member_ops: super::Slab<u64>,
    ready: VecDeque<u64>,
    /// Tasks suspended on a key (a lock), in the order they suspended.
    key_waiters: FxHashMap<usize, Vec<u64>>,
    /// (time, order, seq): a compute step, a request's overhead or a sleep
    /// ends. Timers due at the same instant fire in the order they were set
    /// (`timer_order`), not by slot number: slots are reused, so a request
    /// that arrived later may hold a lower one, and the block layer submits
    /// what arrives together in arrival order. Firing a read-ahead window's
    /// chunk reads by slot sent a member a later chunk before an earlier one
    /// (the earlier then waited a revolution behind the head).
    timers: BinaryHeap<Reverse<(Ns, u64, u64)>>,
    /// The next timer's place among those due at the same instant.
    timer_order: u64,
    /// The engine's own threads (the stripe cache's, the bitmap daemon),
    /// and when each one's sleep ends.
    daemons: Vec<Daemon>,
    stacks: Stacks,
    /// Request buffers of finished tasks, for the next ones. What they hold
    /// is never looked at (the members are sizes only); it is zeros, as
    /// every write the simulator makes is.
    bufs: Vec<Vec<u8>>,
    /// The room of the last step's member operations, for the next step.
    ops: Vec<MemberOp>,
    finished: Vec<Completion>,
    member_done: Vec<Completion>,
    woken: Vec<usize>,
    log: OpLog,
    errors: Vec<String>,
    capacity: u64,
    spec_info: Vec<Param>,
    rebuild: Option<Rebuild>,
    /// A check or repair under way (`check.rs`).
    check: Option<check::Check>,
    /// Host requests as the engine began them, when kept.
    requests: Option<Vec<(Ns, IoKind, u64, u64)>>,
    faults: Option<Box<super::faults::Faults>>,
}

/// One of the engine's threads, run as a task.
#[derive(Debug)]
struct Daemon {
    seq: u64,
    kind: DaemonKind,
    /// When its sleep ends; `None` while it runs or waits on anything else.
    due: Option<Ns>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DaemonKind {
    StripeCache,
    Bitmap,
}

/// The engine's rebuild, run as a task by its own loop
/// (`Array::drive_recovery`).
#[derive(Debug)]
struct Rebuild {
    seq: u64,
    rec: Arc<raidlab_raid::array::Recovery>,
    role: usize,
    finished: Option<Ns>,
}

impl TaskArray {
    /// Wake task `seq` at `at`, after the timers already set for that time.
    fn set_timer(&mut self, at: Ns, seq: u64) {
        self.timers.push(Reverse((at, self.timer_order, seq)));
        self.timer_order += 1;
    }

    fn run_ready(&mut self, now: Ns) {
        while let Some(seq) = self.ready.pop_front() {
            self.resume(now, seq);
        }
    }

    /// Run task `seq` until it suspends or ends, and act on why.
    fn resume(&mut self, now: Ns, seq: u64) {
        self.clock.set(now);
        let carry = self.carries(seq);
        self.outbox
            .data
            .carry
            .store(carry, std::sync::atomic::Ordering::Relaxed);
        let Some(r) = self.reqs.get_mut(seq) else {
            return;
        };
        let runner = Runner::enter();
        let step = r.task.resume();
        runner.woken(&mut self.woken);
        drop(runner);
        if let Some(f) = self.faults.as_mut() {
            f.notice(now, &self.array);
        }
        for k in self.woken.drain(..) {
            if let Some(w) = self.key_waiters.remove(&k) {
                self.ready.extend(w);
            }
        }
        match step {
            TaskStep::Done((result, buf)) => {
                let r = self.reqs.remove(seq).expect("present");
                r.task.finish(&mut self.stacks);
                if buf.capacity() > 0 {
                    self.bufs.push(buf);
                }
                let rebuild = self.rebuild.as_mut().filter(|rb| rb.seq == seq);
                let is_rebuild = rebuild.is_some();
                if let Some(rb) = rebuild {
                    rb.finished = Some(now);
                }
                if let Some(c) = self.check.as_mut().filter(|c| c.seq == seq) {
                    c.finished = Some(now);
                }
                if let Some(f) = self.faults.as_mut() {
                    if let Err(e) = &result {
                        if r.host_id.is_some() {
                            f.host_error(&e.to_string());
                        } else if is_rebuild {
                            f.rebuild_error(e.to_string());
                        }
                    }
                    if r.host_id.is_some() {
                        f.completed(now);
                    }
                    if is_rebuild {
                        f.rebuild_done(now);
                    }
                }
                if let Err(e) = result {
                    // With faults a broken array fails every request: the
                    // first few are kept word for word, the rest counted.
                    if self.faults.is_none() || self.errors.len() < super::faults::KEPT_ERRORS {
                        self.errors.push(e.to_string());
                    }
                }
                if let Some(id) = r.host_id {
                    self.finished.push(Completion { id, at: now });
                }
            }
            TaskStep::Waits(Wait::Key(k)) => self.key_waiters.entry(k).or_default().push(seq),
            TaskStep::Waits(Wait::Until(t)) => {
                let t = t.as_nanos() as Ns;
                match self.daemons.iter_mut().find(|d| d.seq == seq) {
                    Some(d) => d.due = Some(t.max(now)),
                    None => self.set_timer(t.max(now), seq),
                }
            }
            TaskStep::Waits(Wait::Runner(_)) => {
                let (mut ops, compute) = {
                    let mut out = self.outbox.queue();
                    let room = std::mem::take(&mut self.ops);
                    (std::mem::replace(&mut out.ops, room), out.compute.take())
                };
                let process = self.reqs.get(seq).map_or(MD_THREAD, |r| r.process);
                let mut issued = 0;
                if let Some(c) = self.check.as_mut().filter(|c| c.seq == seq) {
                    for &(kind, _, _, len) in &ops {
                        if kind == IoKind::Write {
                            c.rewrites += 1;
                            c.rewritten_bytes += len;
                        }
                    }
                }
                let members = &self.members;
                self.host.plug_merge(&mut ops, |m| {
                    members
                        .get(m)
                        .and_then(Option::as_ref)
                        .map_or(0, |d| d.max_request_bytes())
                });
                for &(kind, member, offset, len) in &ops {
                    issued += self.submit_member(now, seq, process, kind, member, offset, len);
                }
                ops.clear();
                self.ops = ops;
                if let Some(cost) = compute {
                    let end = if self.host.md.is_some() {
                        self.md_thread.run(now, cost)
                    } else {
                        now + cost
                    };
                    self.set_timer(end, seq);
                    return;
                }
                if issued == 0 {
                    self.ready.push_back(seq);
                } else if let Some(r) = self.reqs.get_mut(seq) {
                    r.outstanding += issued;
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn submit_member(
        &mut self,
        now: Ns,
        seq: u64,
        process: u32,
        kind: IoKind,
        member: usize,
        offset: u64,
        len: u64,
    ) -> usize {
        let id = self.member_ops.insert(seq);
        self.log.record(MemberIo {
            kind,
            member,
            offset,
            len,
        });
        match self.members.get_mut(member).and_then(Option::as_mut) {
            Some(dev) => {
                dev.submit(
                    now,
                    Request {
                        id,
                        kind,
                        offset,
                        len,
                        process,
                    },
                );
                self.member_next[member] = dev.next_event().unwrap_or(IDLE);
                1
            }
            None => {
                self.errors.push(format!(
                    "a plan used missing member {member} ({kind:?} at {offset})"
                ));
                self.member_ops.remove(id);
                0
            }
        }
    }

    /// Whether a daemon's wake-up can change anything: the stripe cache's
    /// ticks matter only while it holds stripes, the bitmap daemon's passes
    /// only while they could clear bits (the engine's rule). Otherwise the
    /// run may end, or time may jump, past its sleep.
    fn daemon_has_work(&self, kind: DaemonKind) -> bool {
        match kind {
            DaemonKind::StripeCache => self
                .array
                .stripe_cache_stats()
                .0
                .is_some_and(|(_, s)| s.held_now > 0),
            DaemonKind::Bitmap => self.array.bitmap_daemon_has_work(),
        }
    }
}

impl Device for TaskArray {
    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn submit(&mut self, now: Ns, req: Request) {
        let Request {
            id,
            kind,
            offset,
            len,
            process,
        } = req;
        if let Some(f) = self.faults.as_mut() {
            f.arrived(now);
        }
        let array = self.array.clone();
        // The request's buffer: a finished request's, not a new one each
        // time (an allocation and a page of zeros a request).
        let mut buf = Vec::new();
        if matches!(kind, IoKind::Read | IoKind::Write) {
            buf = self.bufs.pop().unwrap_or_default();
            buf.resize(len as usize, 0);
        }
        let spawned = self.spawn_with(
            Some(id),
            if kind == IoKind::Read {
                process
            } else {
                MD_THREAD
            },
            move || {
                let result = match kind {
                    IoKind::Read => array.read_at(&mut buf, offset),
                    IoKind::Write => array.write_at(&buf, offset),
                    IoKind::Zero => array.write_zeroes(offset, len),
                    IoKind::Flush => array.flush(),
                    IoKind::Trim => array.discard(offset, len),
                };
                (result, buf)
            },
        );
        match spawned {
            Ok(seq) => {
                if let Some(r) = self.requests.as_mut() {
                    r.push((now + self.request_ns, kind, offset, len));
                }
                self.set_timer(now + self.request_ns, seq);
            }
            Err(e) => {
                self.errors.push(e);
                self.finished.push(Completion { id, at: now });
            }
        }
        // Due now (no overhead): run it at once.
        self.advance_to(now);
    }

    fn next_event(&self) -> Option<Ns> {
        let mut next = IDLE;
        if !self.ready.is_empty() {
            // A task started and not yet run (a rebuild, a check).
            next = raidlab_devices::Clock::now(&*self.clock).as_nanos() as Ns;
        }
        for &t in &self.member_next {
            next = next.min(t);
        }
        for c in &self.finished {
            next = next.min(c.at);
        }
        if let Some(&Reverse((t, _, _))) = self.timers.peek() {
            next = next.min(t);
        }
        if let Some(t) = self.faults.as_ref().and_then(|f| f.spare_due()) {
            next = next.min(t);
        }
        for d in &self.daemons {
            if let Some(t) = d.due {
                if t < next && self.daemon_has_work(d.kind) {
                    next = t;
                }
            }
        }
        (next != IDLE).then_some(next)
    }

    fn advance(&mut self, now: Ns, done: &mut Vec<Completion>) {
        self.advance_to(now);
        done.append(&mut self.finished);
    }

    fn info(&self) -> ModelInfo {
        let mut sources = self.host.all_sources();
        sources.push(
            "the engine run live: each request a task of raidlab's engine in virtual time (docs/simulation.md)"
                .into(),
        );
        super::common::array_info(
            "raidlab array",
            &self.name,
            self.array.geometry(),
            self.spec_info.clone(),
            sources,
            &self.members,
        )
    }

    fn member_ops(&self) -> Option<&OpLog> {
        Some(&self.log)
    }

    fn fault_report(&self) -> Option<crate::faults::report::FaultReport> {
        TaskArray::fault_report(self)
    }

    fn scrub_progress(&self) -> Option<crate::scrub::ScrubProgress> {
        TaskArray::scrub_progress(self)
    }

    fn rebuild_progress(&self) -> Option<super::RebuildProgress> {
        self.rebuild.as_ref().map(|r| super::RebuildProgress {
            role: r.role,
            done: r.rec.done(),
            total: self.array.geometry().member_bytes,
            finished: r.finished,
        })
    }
}

impl TaskArray {
    /// Everything due at or before `now`, in rounds: member completions,
    /// timers, the cache's thread, then the tasks they made ready.
    fn advance_to(&mut self, now: Ns) {
        self.clock.set(now);
        let mut member_done = std::mem::take(&mut self.member_done);
        loop {
            let mut any = super::common::advance_members(
                &mut self.members,
                &mut self.member_next,
                now,
                &mut member_done,
            );
            for c in member_done.drain(..) {
                if let Some(seq) = self.member_ops.remove(c.id) {
                    if let Some(r) = self.reqs.get_mut(seq) {
                        r.outstanding -= 1;
                        if r.outstanding == 0 {
                            self.ready.push_back(seq);
                        }
                    }
                }
            }
            any |= super::common::due_timers(&mut self.timers, now, &mut self.ready);
            if self
                .faults
                .as_ref()
                .and_then(|f| f.spare_due())
                .is_some_and(|t| t <= now)
            {
                self.add_spare(now);
                any = true;
            }
            for d in &mut self.daemons {
                if d.due.is_some_and(|t| t <= now) {
                    d.due = None;
                    self.ready.push_back(d.seq);
                    any = true;
                }
            }
            if !any && self.ready.is_empty() {
                break;
            }
            self.run_ready(now);
        }
        self.member_done = member_done;
    }
}

/// A sleep on the simulator's clock from inside a task.
pub(crate) fn sleep_in_task(clock: &VirtualClock, d: Duration) -> bool {
    let now = raidlab_devices::Clock::now(clock);
    task::suspend(Wait::Until(now + d))
}
