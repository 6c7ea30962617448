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
//! nor keep a second copy of an engine decision (no lock table, no log model:
//! those are what [`super::SimArray`] still replays recorded plans with).
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
//! ([`super::faults::Faults`], the same bookkeeping as the replay's): a spare
//! goes in through the engine's `begin_recovery` and its rebuild loop.
//!
//! Not yet here (refused at build): a scrub and its mismatches.

use super::{ArraySpec, FaultSpec, DATA_OFFSET, IDLE};
use crate::device::{Completion, Device, ModelInfo, Ns, Param, Request, VirtualClock, MD_THREAD};
use crate::faults::exec::FaultExec;
use crate::host::HostCost;
use crate::md_host::MdThread;
use crate::stats::{MemberIo, OpLog};
use raidlab_core::task::{self, Runner, Stacks, Step as TaskStep, Task, Wait};
use raidlab_core::{Error, ErrorKind, IoKind, Op, Volume};
use raidlab_devices::SizeOnly;
use raidlab_parity::Engine;
use raidlab_raid::exec::{Executor, Failed, LogWriter, Members, UserBuf};
use raidlab_raid::plan::{LogEntry, Space};
use raidlab_raid::{Array, Plan, Step};
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A member operation a task asks for: (kind, role, device offset, length).
type MemberOp = (IoKind, usize, u64, u64);

/// What a task asked of the runner before it suspended: the member
/// operations of one I/O step, all issued at once, or a compute step's host
/// time. One step at a time; the runner takes it and leaves the vector's
/// room behind, so a step costs no allocation.
#[derive(Debug, Default)]
struct Out {
    ops: Vec<MemberOp>,
    compute: Option<Ns>,
}

/// What a task gives back when it ends: its result, and the buffer it was
/// lent (empty for the engine's own threads and requests without data).
type Ended = (raidlab_core::Result<()>, Vec<u8>);

/// The engine's executor under the simulator: hands each step to the runner
/// and suspends the request's task until the runner resumes it.
struct Outbox {
    /// Member volumes by role, to tell which role a metadata plan's member
    /// table names.
    roles: Vec<Option<Arc<dyn Volume>>>,
    host: HostCost,
    queue: Mutex<Out>,
    /// A rebuild's new member and its role: the engine names it as the
    /// member after the roles in data plans, and by its volume in a flush.
    /// Set once: at the start, or when a spare arrives (one rebuild a run).
    target: std::sync::OnceLock<(Arc<dyn Volume>, usize)>,
    /// Further volumes that stand for a role in metadata plans: the whole
    /// members the bitmap is written to (the engine's intent devices).
    aliases: Vec<(Arc<dyn Volume>, usize)>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("roles", &self.roles.len())
            .finish()
    }
}

fn same(a: &Arc<dyn Volume>, b: &Arc<dyn Volume>) -> bool {
    std::ptr::eq(Arc::as_ptr(a) as *const (), Arc::as_ptr(b) as *const ())
}

impl Outbox {
    fn queue(&self) -> std::sync::MutexGuard<'_, Out> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait(&self) -> Result<(), Failed> {
        if task::suspend(Wait::Runner(0)) {
            Ok(())
        } else {
            Err(Failed::from(Error::new(
                ErrorKind::Io,
                Op::Write,
                "internal: the simulator's executor ran outside a task",
            )))
        }
    }

    fn role(&self, plan: &Plan, members: &Members, member: usize) -> Result<usize, Failed> {
        let v = members.get(member).and_then(Option::as_ref);
        if plan.space == Space::Data {
            // The array's own table: positions are roles, the rebuild's new
            // member after them. Another table (a flush of the rebuild's
            // target alone, whose position 0 is not role 0) is looked up by
            // its volumes, as a metadata plan's.
            let own = match (v, self.roles.get(member)) {
                (Some(v), Some(Some(r))) => same(v, r),
                (None, Some(_)) => true,
                _ => false,
            };
            if own {
                return Ok(member);
            }
            if let Some((t, role)) = self.target.get() {
                if member == self.roles.len() || v.is_some_and(|v| same(v, t)) {
                    return Ok(*role);
                }
            }
        }
        v.and_then(|v| {
            self.roles
                .iter()
                .position(|r| r.as_ref().is_some_and(|r| same(r, v)))
                .or_else(|| {
                    self.target
                        .get()
                        .into_iter()
                        .chain(&self.aliases)
                        .find(|(t, _)| same(t, v))
                        .map(|&(_, role)| role)
                })
        })
        .ok_or_else(|| {
            Failed::from(Error::new(
                ErrorKind::Io,
                Op::Write,
                format!("internal: a metadata plan names member {member}, which is no role of the array"),
            ))
        })
    }
}

impl Executor for Outbox {
    fn run(
        &self,
        plan: &Plan,
        members: &Members,
        _: &dyn Engine,
        _: UserBuf<'_>,
        log: Option<LogWriter<'_>>,
    ) -> Result<(), Failed> {
        for step in &plan.steps {
            match step {
                Step::Io(ops) => {
                    let mut queue = self.queue();
                    let out = &mut queue.ops;
                    let before = out.len();
                    for op in ops {
                        let role = match self.role(plan, members, op.member) {
                            Ok(role) => role,
                            Err(e) => {
                                out.truncate(before);
                                return Err(e);
                            }
                        };
                        let offset = match plan.space {
                            Space::Data => DATA_OFFSET + op.offset,
                            Space::Device => op.offset,
                        };
                        // No modelled disk has a cheaper write-zeroes.
                        let kind = match op.kind {
                            IoKind::Zero => IoKind::Write,
                            k => k,
                        };
                        out.push((kind, role, offset, op.length));
                    }
                    drop(queue);
                    self.wait()?;
                }
                Step::Compute(cs) => {
                    self.queue().compute = Some(self.host.compute_ns(cs, &plan.scratch));
                    self.wait()?;
                }
                Step::Log(entries) => {
                    // The engine's own log writer: its header, ring position,
                    // reclaim and flushes come back here as plans. The partial
                    // parity's bytes are not modelled, only their length.
                    if let Some(write) = log {
                        let most = entries
                            .iter()
                            .filter_map(|e| e.pp.as_ref().map(|s| s.len))
                            .max()
                            .unwrap_or(0);
                        let zeros = vec![0u8; most];
                        let with: Vec<(LogEntry, &[u8])> = entries
                            .iter()
                            .map(|e| {
                                let n = e.pp.as_ref().map_or(0, |s| s.len);
                                (*e, &zeros[..n])
                            })
                            .collect();
                        write(&with)?;
                    }
                }
            }
        }
        Ok(())
    }
}

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
    /// (time, seq): a compute step, a request's overhead or a sleep ends.
    timers: BinaryHeap<Reverse<(Ns, u64)>>,
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
    /// Begin the engine's rebuild of `r.role` onto `volume` (the model
    /// `r.device`) and start its loop as a task, paced as `raidlab serve`'s.
    fn start_rebuild(
        &mut self,
        now: Ns,
        r: super::RebuildSpec,
        volume: Arc<dyn Volume>,
        spec_info: &mut Vec<Param>,
    ) -> Result<(), String> {
        let g = *self.array.geometry();
        let rec = self
            .array
            .begin_recovery(r.role, volume, r.from, false)
            .map_err(|e| e.to_string())?;
        if let Some(rate) = r.max_rate {
            spec_info.push(Param {
                name: "rebuild_max_rate".into(),
                value: rate as f64 / 1e6,
                unit: "MB/s".into(),
            });
        }
        self.members[r.role] = Some(r.device);
        self.member_next[r.role] = IDLE;
        let mut run =
            raidlab_raid::live::rebuild_schedule(&g, rec.done(), r.max_rate, Duration::ZERO);
        let (array, clock, task_rec) = (self.array.clone(), self.clock.clone(), rec.clone());
        let seq = self.spawn(None, MD_THREAD, move || {
            let complete = array.drive_recovery(
                &task_rec,
                &mut run,
                &*clock,
                &|| false,
                &mut |_| {},
                &mut |_| Ok(()),
            )?;
            if complete {
                array.finish_recovery(&task_rec)?;
            }
            Ok(())
        })?;
        self.rebuild = Some(Rebuild {
            seq,
            rec,
            role: r.role,
            finished: None,
        });
        self.ready.push_back(seq);
        self.run_ready(now);
        Ok(())
    }

    pub fn new(spec: ArraySpec) -> Result<TaskArray, String> {
        TaskArray::with_faults(spec, None)
    }

    /// [`TaskArray::new`] with members failing and reading badly at virtual
    /// times and a spare arriving (`faults`' schedule): the engine's own
    /// failure handling (a member taken out, degraded plans, bad blocks
    /// rewritten, a rebuild onto the spare under the load) runs when a
    /// request meets the fault, mid-request.
    pub fn with_faults(spec: ArraySpec, faults: Option<FaultSpec>) -> Result<TaskArray, String> {
        TaskArray::build(spec, faults, None)
    }

    /// [`TaskArray::with_faults`], and with `bitmap` `Some(chunk)` md's
    /// internal write-intent bitmap with `chunk`-byte chunks (`None`:
    /// mdadm's choice for the member size) on every member in service, as
    /// `SimArray::with_bitmap` lays it out; the engine marks and writes it,
    /// and its daemon clears idle bits. Not with a rebuild, as there.
    pub fn build(
        spec: ArraySpec,
        faults: Option<FaultSpec>,
        bitmap: Option<Option<u64>>,
    ) -> Result<TaskArray, String> {
        let g = spec.geometry;
        let mut spec = spec;
        let rebuild = spec.rebuild.take();
        super::common::check_spec(&spec, rebuild.as_ref())?;
        let roles = super::common::size_only_members(&spec);
        let mut bitmap_info = None;
        let intent = match bitmap {
            None => None,
            Some(_) if rebuild.is_some() => {
                return Err(format!(
                    "{}: a bitmap and a rebuild together are not simulated (the new member's bitmap copy is not kept)",
                    spec.name
                ))
            }
            Some(chunk) => {
                let caps: Vec<Option<u64>> = spec
                    .members
                    .iter()
                    .map(|m| m.as_ref().map(|d| d.capacity()))
                    .collect();
                let (bm, devices, sim) = crate::bitmap::SimBitmap::build(&spec.name, &g, &caps, chunk)
                    .map_err(|m| format!("{}: {m}", spec.name))?;
                bitmap_info = Some(sim.chunk_bytes());
                Some((bm, devices))
            }
        };
        let aliases: Vec<(Arc<dyn Volume>, usize)> = intent
            .iter()
            .flat_map(|(_, devices)| devices.iter().map(|(role, v, _)| (v.clone(), *role)))
            .collect();
        let target = rebuild.as_ref().map(|r| {
            let v: Arc<dyn Volume> = Arc::new(SizeOnly::new(
                format!("{} new member {}", spec.name, r.role),
                g.member_bytes,
            ));
            (v, r.role)
        });
        let outbox = Arc::new(Outbox {
            roles: roles.clone(),
            host: spec.host.clone(),
            queue: Mutex::new(Out::default()),
            target: std::sync::OnceLock::new(),
            aliases: aliases.clone(),
        });
        if let Some(t) = &target {
            let _ = outbox.target.set(t.clone());
        }
        let clock = Arc::new(VirtualClock::default());
        let mut exec: Arc<dyn Executor> = outbox.clone();
        let mut fault_state = None;
        if let Some(f) = faults.filter(|f| !f.schedule.is_empty()) {
            f.check(
                &spec.name,
                &spec.members,
                rebuild.as_ref().map(|b| b.role),
                bitmap_info.is_some(),
            )?;
            let fe = Arc::new(FaultExec::over(outbox.clone(), clock.clone(), &f.schedule));
            for (role, v) in roles.iter().enumerate() {
                if let Some(v) = v {
                    fe.know(v, role, 0);
                }
            }
            for (v, role) in &aliases {
                fe.know(v, *role, 0);
            }
            exec = fe.clone();
            fault_state = Some(Box::new(super::faults::Faults::new(fe, f)));
        }
        let mut array = Array::new(spec.name.clone(), g, roles)
            .map_err(|e| e.to_string())?
            .with_executor(exec);
        if let Some((bm, devices)) = intent {
            array = array.with_intent(bm, devices);
        }
        let array = Arc::new(array);
        let mut spec_info = super::common::array_params(&g, spec.stripe_cache);
        if let Some(chunk) = bitmap_info {
            spec_info.push(Param {
                name: "bitmap_chunk".into(),
                value: chunk as f64,
                unit: "bytes".into(),
            });
        }
        let mut a = TaskArray {
            name: spec.name,
            array,
            outbox,
            clock,
            member_next: vec![IDLE; spec.members.len()],
            members: spec.members,
            request_ns: spec.host.request_ns(),
            md_thread: MdThread::default(),
            reqs: super::Slab::default(),
            member_ops: super::Slab::default(),
            ready: VecDeque::new(),
            key_waiters: FxHashMap::default(),
            timers: BinaryHeap::new(),
            daemons: Vec::new(),
            stacks: Stacks::default(),
            bufs: Vec::new(),
            ops: Vec::new(),
            finished: Vec::new(),
            member_done: Vec::new(),
            woken: Vec::new(),
            log: OpLog::default(),
            errors: Vec::new(),
            capacity: g.array_bytes(),
            spec_info: Vec::new(),
            host: spec.host,
            rebuild: None,
            faults: fault_state,
        };
        if let (Some(r), Some((volume, _))) = (rebuild, target) {
            a.start_rebuild(0, r, volume, &mut spec_info)?;
        }
        if let Some(cfg) = spec.stripe_cache {
            a.array
                .start_stripe_cache_driven(cfg, a.clock.clone())
                .map_err(|e| e.to_string())?;
            if a.array.stripe_cache_stats().0.is_some() {
                // The cache's own thread, as `start_stripe_cache` runs it,
                // sleeping on the virtual clock.
                let weak = Arc::downgrade(&a.array);
                let clock: raidlab_core::SharedClock = a.clock.clone();
                a.start_daemon(DaemonKind::StripeCache, move || {
                    Array::stripe_cache_thread(weak, clock, cfg.hold)
                })?;
            }
        }
        if bitmap_info.is_some() {
            let weak = Arc::downgrade(&a.array);
            let clock: raidlab_core::SharedClock = a.clock.clone();
            a.start_daemon(DaemonKind::Bitmap, move || {
                Array::bitmap_daemon_thread(weak, clock)
            })?;
        }
        spec_info.extend(a.host.params());
        a.spec_info = spec_info;
        Ok(a)
    }

    /// The spare arrives at `now`: the engine's rebuild begins into the role
    /// it goes to (`Faults::spare_for`), once that role's old device has
    /// nothing in flight, and runs as a task of the engine's own loop.
    fn add_spare(&mut self, now: Ns) {
        let Some(f) = self.faults.as_mut() else {
            return;
        };
        let Some((role, device)) = f.spare_ready(now, &self.array, &self.member_next) else {
            return;
        };
        let max_rate = f.max_rate();
        let target: Arc<dyn Volume> = Arc::new(SizeOnly::new(
            format!("{} spare for role {role}", self.name),
            self.array.geometry().member_bytes,
        ));
        if self.outbox.target.set((target.clone(), role)).is_err() {
            f.rebuild_error("a second rebuild in one run is not simulated".into());
            return;
        }
        self.clock.set(now);
        let spec = super::RebuildSpec {
            role,
            device,
            max_rate,
            from: 0,
        };
        let mut info = std::mem::take(&mut self.spec_info);
        let started = self.start_rebuild(now, spec, target.clone(), &mut info);
        self.spec_info = info;
        let Some(f) = self.faults.as_mut() else {
            return;
        };
        match started {
            Ok(()) => f.rebuild_started(&target, role, now),
            Err(e) => f.rebuild_error(format!(
                "adding the spare at {}: {e}",
                crate::faults::format_time(now)
            )),
        }
    }

    /// What the faults did, when the array has any.
    pub fn fault_report(&self) -> Option<crate::faults::report::FaultReport> {
        let finished = self.rebuild.as_ref().and_then(|r| r.finished);
        Some(self.faults.as_ref()?.report(&self.array, finished))
    }

    /// Run one of the engine's threads as a task, from virtual time 0.
    fn start_daemon(&mut self, kind: DaemonKind, f: impl FnOnce() + 'static) -> Result<(), String> {
        let seq = self.spawn(None, MD_THREAD, move || {
            f();
            Ok(())
        })?;
        self.daemons.push(Daemon {
            seq,
            kind,
            due: None,
        });
        self.ready.push_back(seq);
        self.run_ready(0);
        Ok(())
    }

    /// How many bits md's bitmap daemon has cleared (`None` without a
    /// bitmap): the engine's count.
    pub fn bitmap_cleared(&self) -> Option<u64> {
        self.array.bitmap_bits_cleared()
    }

    fn spawn(
        &mut self,
        host_id: Option<u64>,
        process: u32,
        f: impl FnOnce() -> raidlab_core::Result<()> + 'static,
    ) -> Result<u64, String> {
        self.spawn_with(host_id, process, move || (f(), Vec::new()))
    }

    /// [`TaskArray::spawn`] for a task that gives back a buffer it was lent.
    fn spawn_with(
        &mut self,
        host_id: Option<u64>,
        process: u32,
        f: impl FnOnce() -> Ended + 'static,
    ) -> Result<u64, String> {
        let task = Task::new(&mut self.stacks, f)
            .map_err(|e| format!("{}: cannot map a task's stack: {e}", self.name))?;
        Ok(self.reqs.insert(Req {
            task,
            host_id,
            process,
            outstanding: 0,
        }))
    }

    /// Keep every member operation, in issue order, in [`Device::member_ops`].
    pub fn keep_ops(&mut self) {
        self.log.keep = true;
    }

    /// What the faults did to member operations (`None` without faults).
    pub fn faults_met(&self) -> Option<crate::faults::exec::Met> {
        self.faults.as_ref().map(|f| f.exec().met())
    }

    /// Roles the engine has taken out of service.
    pub fn out_of_service(&self) -> Vec<usize> {
        (0..self.members.len())
            .filter(|&r| self.array.member(r).is_none())
            .collect()
    }

    /// Errors the engine returned (without faults, any is a bug).
    pub fn errors(&self) -> &[String] {
        &self.errors
    }

    /// The real engine's array.
    pub fn engine(&self) -> &Array {
        &self.array
    }

    fn run_ready(&mut self, now: Ns) {
        while let Some(seq) = self.ready.pop_front() {
            self.resume(now, seq);
        }
    }

    /// Run task `seq` until it suspends or ends, and act on why.
    fn resume(&mut self, now: Ns, seq: u64) {
        self.clock.set(now);
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
                    None => self.timers.push(Reverse((t.max(now), seq))),
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
                    self.timers.push(Reverse((end, seq)));
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
                self.timers.push(Reverse((now + self.request_ns, seq)));
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
        for &t in &self.member_next {
            next = next.min(t);
        }
        for c in &self.finished {
            next = next.min(c.at);
        }
        if let Some(&Reverse((t, _))) = self.timers.peek() {
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
            while let Some(&Reverse((t, seq))) = self.timers.peek() {
                if t > now {
                    break;
                }
                self.timers.pop();
                self.ready.push_back(seq);
                any = true;
            }
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
