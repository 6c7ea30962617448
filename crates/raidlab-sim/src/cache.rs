//! raidlab's SSD cache tier on simulated devices, run live: the real cache
//! decides and waits, device models take the time.
//!
//! A [`SimCache`] holds the real `raidlab_cache::CachedVolume` over two
//! stand-in volumes ([`crate::cache_io`]), one for the cache device and one
//! for the origin, opened and stopped through `raidlab_cache::CacheStack` as
//! `raidlab serve` and the `cache:` benchmark open theirs, with one
//! difference the stack offers every owner that runs on its own clock
//! (`RunBy::Owner`): no thread is started and a write-back reads, then
//! writes. Each host request is a task (`raidlab_core::task`) that
//! runs the real `read_at`/`write_at`/`write_zeroes`/`flush`; each operation
//! the cache issues suspends the task until the device model completes it
//! in virtual time (an SSD model for the cache device; for the origin any
//! simulated device, a simulated raidlab array included). So the real code
//! makes every decision, and makes it when it runs: hit or miss, promotion by
//! the 2Q policy and its threshold, the sequential cutoff, write-back,
//! -through or -around, the metadata commits, what the cleaner writes back
//! and in which order. The cache's one lock is task-aware: a request that
//! finds it held suspends until it is let go, and a read's origin reads run
//! without it, as on threads. The background cleaner is the one the stack
//! hands its owner (`CacheStack::owner_cleaner`: `raidlab_cache::driver`'s
//! loop), run as a task whose waits are sleeps of the virtual clock.
//!
//! Decides only *when*: it resumes tasks when their operations complete or
//! their lock is let go. It must never decide *what* a request does to the
//! cache device or the origin, keep a lock or cleaner schedule of its own
//! (those are raidlab-cache's), nor read the wall clock.
//!
//! What the simulator adds: the cleaner's wake-ups while it has nothing to
//! do (`CachedVolume::cleaner_has_work`: under the dirty target) are not
//! events, so a run can end and idle time costs nothing; it then wakes at the
//! next event after its sleep ended and ticks from there (a thread's phase is
//! arbitrary too). Trims complete at once without reaching the cache
//! (raidlab-cache passes no discard on). The cache's own CPU time is not
//! charged. Creating and opening the cache take no virtual time. A run does
//! not stop the cache (its figures end with the workload); an owner that
//! wants the clean stop calls [`SimCache::stop`], which takes no virtual time
//! either. Data is not simulated ([`crate::cache_io`]).

use crate::array::Slab;
use crate::cache_io::Outbox;
pub use crate::cache_io::{CacheOp, DeviceVolume, Side};
use crate::device::{Completion, Device, ModelInfo, Ns, Param, Request, VirtualClock};
use raidlab_cache::format::Layout;
use raidlab_cache::{
    CacheStack, CachedVolume, Config, Mode, OriginId, RunBy, StackOptions, StackStop, Stats,
};
use raidlab_core::task::{Runner, Stacks, Step, Task, Wait};
use raidlab_core::IoKind;
use raidlab_core::{Result, Volume};
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::{Arc, Mutex};

/// What happened at a virtual time, for a test to replay on a real cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A host request began in the cache: its first step that did not wait
    /// for the cache's lock.
    Request { kind: IoKind, offset: u64, len: u64 },
    /// The background cleaner began a tick (likewise).
    CleanTick,
}

/// How to build a simulated cache.
#[derive(Debug)]
pub struct CacheSpec {
    pub name: String,
    /// The cache device (an SSD model).
    pub cache: Box<dyn Device>,
    /// Bytes of the cache device the cache uses, from its start (`None`: all).
    pub cache_bytes: Option<u64>,
    pub origin: Box<dyn Device>,
    /// What the origin says its best write is (a parity array's stripe of
    /// data: `Volume::optimal_io_size` of the real array), which the cleaner
    /// writes whole.
    pub origin_optimal_io: Option<u64>,
    pub config: Config,
}

type Cached = CachedVolume<DeviceVolume, DeviceVolume>;

/// The simulated cache's stack, as `raidlab serve` holds its own.
pub type SimCacheStack = CacheStack<DeviceVolume, DeviceVolume>;

/// What a task gives back: its result, and the buffer it was lent (empty
/// for the cleaner and requests without data).
type Ended = (Result<()>, Vec<u8>);

/// A host request or the cleaner, as a task.
#[derive(Debug)]
struct Req {
    task: Task<Ended>,
    /// The submitter's id; `None` for the cleaner.
    host_id: Option<u64>,
    /// What it is, for [`Event`]s and error messages.
    event: Event,
    /// Whether it has begun (see [`Event`]); the cleaner's is reset at each
    /// sleep, a tick being a new beginning.
    began: bool,
    /// Its operations not yet complete.
    outstanding: usize,
    /// Its place among the lock's waiters, kept from its first wait until
    /// it gets past the lock.
    ticket: Option<u64>,
}

/// The cleaner's task and when its sleep ends.
#[derive(Debug)]
struct Cleaner {
    seq: u64,
    due: Option<Ns>,
}

/// The real cache tier over a simulated cache device and origin, run live.
pub struct SimCache {
    name: String,
    stack: SimCacheStack,
    /// The stack's cached volume, which every task runs on.
    volume: Arc<Cached>,
    clock: Arc<VirtualClock>,
    outbox: Outbox,
    cache: Box<dyn Device>,
    origin: Box<dyn Device>,
    cache_next: Option<Ns>,
    origin_next: Option<Ns>,
    reqs: Slab<Req>,
    /// Device request id -> task.
    in_flight: Slab<u64>,
    ready: VecDeque<u64>,
    /// Tasks suspended on a key (the cache's lock): (ticket, task), in the
    /// order they first waited. A let-go wakes the first only, as a futex
    /// wakes one waiter of a mutex: waking all of them had each retry at
    /// every let-go (the time went to that at queue depth 32).
    key_waiters: FxHashMap<usize, VecDeque<(u64, u64)>>,
    next_ticket: u64,
    woken: Vec<usize>,
    /// (time, task): sleeps of tasks other than the cleaner's (the cache has
    /// none today; kept so that one would not be lost).
    timers: BinaryHeap<Reverse<(Ns, u64)>>,
    cleaner: Option<Cleaner>,
    stacks: Stacks,
    /// Buffers of finished requests, for the next ones (what they hold is
    /// never looked at: data is not simulated).
    bufs: Vec<Vec<u8>>,
    finished: Vec<Completion>,
    dev_done: Vec<Completion>,
    /// The statistics as last seen with the lock free ([`SimCache::stats`]).
    seen: Stats,
    errors: Vec<String>,
    events: Option<Vec<(Ns, Event)>>,
    /// Every operation issued to the devices, by side, when kept.
    issued: Option<Vec<CacheOp>>,
    spec_info: Vec<Param>,
}

impl std::fmt::Debug for SimCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimCache")
            .field("name", &self.name)
            .field("cache", &self.cache)
            .field("origin", &self.origin)
            .field("ready", &self.ready.len())
            .finish()
    }
}

/// The signature a simulated origin is bound by (it has no file to sign).
const SIM_ORIGIN: OriginId = OriginId::Signature(*b"raidlab simulated origin\0\0\0\0\0\0\0\0");

impl SimCache {
    /// Create the cache (its metadata written on the stand-in cache device;
    /// that takes no virtual time), open it, empty, at virtual time 0 and
    /// start its cleaner.
    pub fn new(spec: CacheSpec) -> std::result::Result<SimCache, String> {
        let device_bytes = spec.cache.capacity();
        let cache_bytes = spec.cache_bytes.unwrap_or(device_bytes);
        if cache_bytes > device_bytes {
            return Err(format!(
                "the cache is to use {cache_bytes} bytes of a {device_bytes}-byte cache device"
            ));
        }
        let cache_name = format!("{} (simulated cache device)", spec.cache.info().name);
        let layout = Layout::plan(&cache_name, cache_bytes, spec.config.block_size)
            .map_err(|e| e.to_string())?;
        let outbox: Outbox = Arc::new(Mutex::new(Vec::new()));
        let cache = DeviceVolume::new(
            cache_name,
            cache_bytes,
            Side::Cache,
            None,
            outbox.clone(),
            u64::MAX,
        );
        let origin = DeviceVolume::new(
            format!("{} (simulated origin)", spec.origin.info().name),
            spec.origin.capacity(),
            Side::Origin,
            spec.origin_optimal_io,
            outbox.clone(),
            0,
        );
        raidlab_cache::create(
            &cache,
            &origin,
            SIM_ORIGIN,
            &spec.name,
            [0x5a; 16],
            spec.config,
        )
        .map_err(|e| e.to_string())?;
        cache.keep_below(layout.data_offset);
        let clock = Arc::new(VirtualClock::default());
        let opts = StackOptions {
            read_only: false,
            background_clean: true,
        };
        let stack =
            CacheStack::open_driven(cache, origin, SIM_ORIGIN, clock.clone(), opts, RunBy::Owner)
                .map_err(|e| e.to_string())?;
        let volume = stack.cached().clone();
        let cleaner = stack
            .owner_cleaner()
            .ok_or("internal: a writable simulated cache's stack gave no cleaner to run")?;
        let c = spec.config;
        let spec_info = vec![
            Param::new("block_size", f64::from(c.block_size), "bytes"),
            Param::new(
                "cache_blocks",
                layout.cache_blocks as f64,
                "blocks of the cache device",
            ),
            Param::new(
                "mode",
                match c.mode {
                    Mode::WriteBack => 0.0,
                    Mode::WriteThrough => 1.0,
                    Mode::WriteAround => 2.0,
                },
                "code: 0 write-back, 1 write-through, 2 write-around",
            ),
            Param::new(
                "sequential_cutoff",
                c.sequential_cutoff as f64,
                "bytes (0: never)",
            ),
            Param::new(
                "dirty_target",
                f64::from(c.dirty_target_pct),
                "% of cache blocks",
            ),
            Param::new("clean_rate", c.clean_rate as f64, "bytes/s (0: unlimited)"),
            Param::new(
                "promote_threshold",
                f64::from(c.promote_threshold),
                "read misses",
            ),
        ];
        let mut sim = SimCache {
            name: spec.name,
            seen: volume.stats(),
            stack,
            volume,
            clock,
            outbox,
            cache_next: spec.cache.next_event(),
            origin_next: spec.origin.next_event(),
            cache: spec.cache,
            origin: spec.origin,
            reqs: Slab::default(),
            in_flight: Slab::default(),
            ready: VecDeque::new(),
            key_waiters: FxHashMap::default(),
            next_ticket: 0,
            woken: Vec::new(),
            timers: BinaryHeap::new(),
            cleaner: None,
            stacks: Stacks::default(),
            bufs: Vec::new(),
            finished: Vec::new(),
            dev_done: Vec::new(),
            errors: Vec::new(),
            events: None,
            issued: None,
            spec_info,
        };
        // The cleaner, started with the cache as `raidlab serve`'s stack
        // starts its thread: the driver's own loop, its waits sleeps of the
        // virtual clock.
        let clock = sim.clock.clone();
        let task = Task::new(&mut sim.stacks, move || {
            (cleaner.run_on_clock(&*clock), Vec::new())
        })
        .map_err(|e| format!("starting the cache's cleaner task: {e}"))?;
        let seq = sim.reqs.insert(Req {
            task,
            host_id: None,
            event: Event::CleanTick,
            began: false,
            outstanding: 0,
            ticket: None,
        });
        sim.cleaner = Some(Cleaner { seq, due: None });
        sim.ready.push_back(seq);
        Ok(sim)
    }

    /// The stack the cache was opened through.
    pub fn stack(&self) -> &SimCacheStack {
        &self.stack
    }

    /// Stop the cache as its stack stops every cache: the cleaner first (its
    /// task ended while it sleeps), then the clean stop (table and
    /// superblock written, on the stand-in devices at no virtual time: a
    /// run's figures never include it). Refused while a request is under
    /// way or the cleaner is mid-tick: either may hold the cache's lock.
    pub fn stop(mut self) -> std::result::Result<StackStop, String> {
        let busy = self.reqs.len() - usize::from(self.cleaner.is_some());
        let ticking = self.cleaner.as_ref().is_some_and(|c| c.due.is_none());
        if busy > 0 || ticking || !self.ready.is_empty() {
            return Err(format!(
                "{}: the cache is stopped only when idle ({busy} request(s) under way{})",
                self.name,
                if ticking {
                    ", the cleaner mid-tick"
                } else {
                    ""
                }
            ));
        }
        if let Some(c) = self.cleaner.take() {
            // Dropped suspended in its sleep, on this thread: unwound.
            drop(self.reqs.remove(c.seq));
        }
        Ok(self.stack.stop())
    }

    /// The real cache: its superblock and tunables. Its methods take the
    /// cache's lock: call them only while no request is under way (a task
    /// suspended holding the lock would make them wait for ever).
    pub fn volume(&self) -> &Arc<Cached> {
        &self.volume
    }

    /// The cache's statistics: now, or, while a task holds the cache's lock
    /// (the cleaner mid-batch), as they were when it was last free.
    pub fn stats(&self) -> Stats {
        self.volume.try_stats().unwrap_or(self.seen)
    }

    /// Keep every host request and cleaner tick with the virtual time it
    /// began ([`SimCache::events`]), so a test can replay them on a real cache.
    pub fn keep_events(&mut self) {
        self.events = Some(Vec::new());
    }

    pub fn events(&self) -> &[(Ns, Event)] {
        self.events.as_deref().unwrap_or(&[])
    }

    /// Keep every operation as it is submitted to the cache device or the
    /// origin ([`SimCache::issued`]).
    pub fn keep_issued(&mut self) {
        self.issued = Some(Vec::new());
    }

    pub fn issued(&self) -> &[CacheOp] {
        self.issued.as_deref().unwrap_or(&[])
    }

    /// Errors the real cache returned (none is expected: the simulated devices
    /// never fail; tests assert there are none).
    pub fn errors(&self) -> &[String] {
        &self.errors
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
        for k in self.woken.drain(..) {
            if let Some(q) = self.key_waiters.get_mut(&k) {
                if let Some((_, w)) = q.pop_front() {
                    self.ready.push_back(w);
                }
                if q.is_empty() {
                    self.key_waiters.remove(&k);
                }
            }
        }
        if !matches!(step, Step::Waits(Wait::Key(_))) {
            if let Some(r) = self.reqs.get_mut(seq) {
                r.ticket = None;
                if !r.began {
                    r.began = true;
                    if let Some(e) = self.events.as_mut() {
                        e.push((now, r.event));
                    }
                }
            }
        }
        let is_cleaner = self.cleaner.as_ref().is_some_and(|c| c.seq == seq);
        match step {
            Step::Done((result, buf)) => {
                let r = self.reqs.remove(seq).expect("present");
                r.task.finish(&mut self.stacks);
                if buf.capacity() > 0 {
                    self.bufs.push(buf);
                }
                if let Err(e) = result {
                    self.errors.push(match r.event {
                        Event::Request { kind, offset, len } => {
                            format!("{kind:?} of {len} bytes at {offset}: {e}")
                        }
                        Event::CleanTick => format!("the cleaner stopped: {e}"),
                    });
                }
                if is_cleaner {
                    self.cleaner = None;
                }
                if let Some(id) = r.host_id {
                    self.finished.push(Completion { id, at: now });
                }
                self.note_stats();
            }
            Step::Waits(Wait::Key(k)) => {
                let Some(r) = self.reqs.get_mut(seq) else {
                    return;
                };
                let ticket = *r.ticket.get_or_insert_with(|| {
                    self.next_ticket += 1;
                    self.next_ticket
                });
                // A waiter woken and beaten to the lock keeps its place.
                let q = self.key_waiters.entry(k).or_default();
                let at = q.partition_point(|&(t, _)| t < ticket);
                q.insert(at, (ticket, seq));
            }
            Step::Waits(Wait::Until(t)) => {
                let t = (t.as_nanos() as Ns).max(now);
                match self.cleaner.as_mut().filter(|_| is_cleaner) {
                    Some(c) => {
                        c.due = Some(t);
                        if let Some(r) = self.reqs.get_mut(seq) {
                            r.began = false;
                        }
                        self.note_stats();
                    }
                    None => self.timers.push(Reverse((t, seq))),
                }
            }
            Step::Waits(Wait::Runner(_)) => {
                let ops =
                    std::mem::take(&mut *self.outbox.lock().unwrap_or_else(|p| p.into_inner()));
                for op in &ops {
                    self.submit_op(now, seq, *op);
                }
                match self.reqs.get_mut(seq) {
                    Some(r) if !ops.is_empty() => r.outstanding += ops.len(),
                    _ => self.ready.push_back(seq),
                }
            }
        }
    }

    fn submit_op(&mut self, now: Ns, seq: u64, op: CacheOp) {
        let id = self.in_flight.insert(seq);
        if let Some(i) = self.issued.as_mut() {
            i.push(op);
        }
        let req = Request {
            id,
            kind: op.kind,
            offset: op.offset,
            len: op.len,
            process: 0,
        };
        match op.side {
            Side::Cache => {
                self.cache.submit(now, req);
                self.cache_next = self.cache.next_event();
            }
            Side::Origin => {
                self.origin.submit(now, req);
                self.origin_next = self.origin.next_event();
            }
        }
    }

    /// Keep the statistics while the lock is free, for [`SimCache::stats`].
    fn note_stats(&mut self) {
        if let Some(s) = self.volume.try_stats() {
            self.seen = s;
        }
    }

    /// Everything due at or before `now`, in rounds: device completions, the
    /// cleaner's wake-up, then the tasks they made ready.
    fn advance_to(&mut self, now: Ns) {
        self.clock.set(now);
        let mut dev_done = std::mem::take(&mut self.dev_done);
        loop {
            let mut any = false;
            if self.cache_next.is_some_and(|t| t <= now) {
                self.cache.advance(now, &mut dev_done);
                self.cache_next = self.cache.next_event();
                any = true;
            }
            if self.origin_next.is_some_and(|t| t <= now) {
                self.origin.advance(now, &mut dev_done);
                self.origin_next = self.origin.next_event();
                any = true;
            }
            for c in dev_done.drain(..) {
                if let Some(seq) = self.in_flight.remove(c.id) {
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
            if let Some(c) = self.cleaner.as_mut() {
                if c.due.is_some_and(|t| t <= now) {
                    c.due = None;
                    self.ready.push_back(c.seq);
                    any = true;
                }
            }
            if !any && self.ready.is_empty() {
                break;
            }
            self.run_ready(now);
        }
        self.dev_done = dev_done;
    }

    /// Idle virtual time for the cleaner: run until `until`, or until nothing is
    /// left to do, whichever comes first (for owners that wait between tests).
    /// Completions of requests still in flight are dropped: call it when none is.
    pub fn settle(&mut self, until: Ns) {
        let mut done = Vec::new();
        while let Some(t) = self.next_event().filter(|&t| t <= until) {
            self.advance(t, &mut done);
        }
    }
}

impl Device for SimCache {
    fn capacity(&self) -> u64 {
        self.origin.capacity()
    }

    fn submit(&mut self, now: Ns, req: Request) {
        let Request {
            id,
            kind,
            offset,
            len,
            ..
        } = req;
        self.clock.set(now);
        if kind == IoKind::Trim {
            // raidlab-cache passes no discard on: nothing to run.
            self.finished.push(Completion { id, at: now });
            return;
        }
        let mut buf = Vec::new();
        if matches!(kind, IoKind::Read | IoKind::Write) {
            buf = self.bufs.pop().unwrap_or_default();
            buf.resize(len as usize, 0);
        }
        let v = self.volume.clone();
        let task = Task::new(&mut self.stacks, move || {
            let r = match kind {
                IoKind::Read => v.read_at(&mut buf, offset),
                IoKind::Write => v.write_at(&buf, offset),
                IoKind::Zero => v.write_zeroes(offset, len),
                IoKind::Flush | IoKind::Trim => v.flush(),
            };
            (r, buf)
        });
        match task {
            Ok(task) => {
                let seq = self.reqs.insert(Req {
                    task,
                    host_id: Some(id),
                    event: Event::Request { kind, offset, len },
                    began: false,
                    outstanding: 0,
                    ticket: None,
                });
                self.ready.push_back(seq);
            }
            Err(e) => {
                self.errors
                    .push(format!("{kind:?} of {len} bytes at {offset}: no task: {e}"));
                self.finished.push(Completion { id, at: now });
            }
        }
        self.advance_to(now);
    }

    fn next_event(&self) -> Option<Ns> {
        let now = raidlab_devices::Clock::now(&*self.clock).as_nanos() as Ns;
        let mut next = [
            self.cache_next,
            self.origin_next,
            self.finished.iter().map(|c| c.at).min(),
            self.timers.peek().map(|&Reverse((t, _))| t),
            (!self.ready.is_empty()).then_some(now),
        ]
        .into_iter()
        .flatten()
        .min();
        if let Some(t) = self.cleaner.as_ref().and_then(|c| c.due) {
            let t = t.max(now);
            if next.map_or(true, |n| t < n) && self.volume.cleaner_has_work() {
                next = Some(t);
            }
        }
        next
    }

    fn advance(&mut self, now: Ns, done: &mut Vec<Completion>) {
        self.advance_to(now);
        done.append(&mut self.finished);
    }

    fn info(&self) -> ModelInfo {
        ModelInfo {
            model: "raidlab cache".into(),
            name: self.name.clone(),
            params: self.spec_info.clone(),
            sources: vec![
                "raidlab-cache: the real cache tier's decisions; its tunables as configured (defaults and their reasons: raidlab_cache::Config; docs/simulation.md)".into(),
            ],
            parts: vec![self.cache.info(), self.origin.info()],
        }
    }

    fn member_ops(&self) -> Option<&crate::stats::OpLog> {
        self.origin.member_ops()
    }
}
