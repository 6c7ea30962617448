//! A raidlab array over simulated members: the real engine decides, device models
//! take the time.
//!
//! Every request goes through the real `raidlab_raid::Array` (planner, stripe
//! cache, degraded strategies, mirror choice) over size-only members, whose
//! executor records each plan instead of running it. This module then schedules
//! the recorded plans in virtual time: a plan's stripe locks are taken (a plan
//! waits while another holds one of its keys, first come first served), each I/O
//! step's member operations go to the member devices at once, the next step starts
//! when the last of them completes, compute steps cost host parity time, log steps
//! write the log on their member.
//!
//! Decides: only *when* things happen. It must never decide *what* member I/O a
//! request needs (that is the engine's, so nothing about RAID levels is written
//! twice) and never read the wall clock: the stripe cache runs on a virtual clock
//! that this module moves, and its expiry is checked at virtual ticks, as the real
//! cache's thread does in real time.

use crate::bitmap::SimBitmap;
use crate::contents::{check_mismatches, Contents, MismatchRange};
use crate::device::{Completion, Device, ModelInfo, Ns, Param, Request, VirtualClock, MD_THREAD};
use crate::host::HostCost;
use crate::md_host::MdThread;
use crate::scrub::{Scrub, ScrubProgress, ScrubSpec};
use crate::stats::{MemberIo, OpLog};
use raidlab_core::IoKind;
use raidlab_core::Volume;
use raidlab_devices::SizeOnly;
use raidlab_layout::Geometry;
use raidlab_raid::array::Recovery;
use raidlab_raid::exec::Recording;
use raidlab_raid::live::rebuild_schedule;
use raidlab_raid::long_run::{LongRun, Next};
use raidlab_raid::stripe_cache::StripeCacheConfig;
use raidlab_raid::{Array, Plan, Step};
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

mod common;
mod faults;
mod run;
mod tasks;
pub use faults::FaultSpec;
use run::{Active, Slab};
pub(crate) use tasks::sleep_in_task;
pub use tasks::TaskArray;

/// Where md 1.2 starts the data on a member (its default data offset for members
/// under a few GiB is 1 MiB; larger ones get more, which moves nothing here but the
/// first megabytes of each member).
pub const DATA_OFFSET: u64 = 1 << 20;
/// Where a member's partial parity log or journal area is written: between the
/// superblock and the data, as md 1.2 keeps it.
const LOG_OFFSET: u64 = 8 << 10;

/// A member's next event when it has none: later than any virtual time a
/// run reaches (584 years).
const IDLE: Ns = Ns::MAX;

/// A simulated raidlab array, whichever way its engine runs (recorded plans
/// replayed, [`SimArray`], or requests run live, [`TaskArray`]).
pub trait ArrayModel: Device {
    /// The real engine's array.
    fn engine(&self) -> &Array;
    /// This array as the device it is (no trait upcasting before Rust 1.86).
    fn into_device(self: Box<Self>) -> Box<dyn Device>;
}

impl ArrayModel for SimArray {
    fn engine(&self) -> &Array {
        &self.array
    }
    fn into_device(self: Box<Self>) -> Box<dyn Device> {
        self
    }
}

impl ArrayModel for TaskArray {
    fn engine(&self) -> &Array {
        TaskArray::engine(self)
    }
    fn into_device(self: Box<Self>) -> Box<dyn Device> {
        self
    }
}

/// How to build a simulated raidlab array.
#[derive(Debug)]
pub struct ArraySpec {
    pub name: String,
    pub geometry: Geometry,
    /// Member devices by role; `None` for a failed (missing) member.
    pub members: Vec<Option<Box<dyn Device>>>,
    /// The stripe cache's size and hold time; `None` to run without it.
    pub stripe_cache: Option<StripeCacheConfig>,
    pub host: HostCost,
    /// A rebuild running from the start of the run.
    pub rebuild: Option<RebuildSpec>,
}

/// A failed role being rebuilt onto a new device while the array serves: the
/// engine's own live rebuild (`Array::begin_recovery`, then one
/// `recovery_step` of `raidlab_raid::live::REBUILD_STEP` bytes at a time, each
/// under its stripe locks), paced as `raidlab serve`'s rebuild is.
#[derive(Debug)]
pub struct RebuildSpec {
    /// The role: a failed member of the spec.
    pub role: usize,
    /// The new member.
    pub device: Box<dyn Device>,
    /// Upper bound on member bytes rebuilt per second (`None`: as fast as the
    /// members allow, raidlab's default).
    pub max_rate: Option<u64>,
    /// Bytes of the member's data area already rebuilt (a resumed rebuild;
    /// rounded down to a chunk, as the engine resumes).
    pub from: u64,
}

/// A rebuild under way in virtual time.
#[derive(Debug)]
struct Rebuild {
    rec: Arc<Recovery>,
    role: usize,
    /// Its steps and their pacing: the engine's schedule of a live rebuild.
    run: LongRun,
    /// When the next step starts (`None` while one is under way or when done).
    next: Option<Ns>,
    /// Virtual time the last step completed, once the rebuild is complete.
    finished: Option<Ns>,
    scratch: Vec<Vec<u8>>,
}

impl Rebuild {
    /// The engine's rebuild `rec` of `role`, begun at `now`, paced to
    /// `max_rate` as `raidlab serve` paces one.
    fn new(
        rec: Arc<Recovery>,
        role: usize,
        geo: &Geometry,
        max_rate: Option<u64>,
        now: Ns,
    ) -> Self {
        let run = rebuild_schedule(geo, rec.done(), max_rate, Duration::from_nanos(now));
        Rebuild {
            rec,
            role,
            run,
            next: Some(now),
            finished: None,
            scratch: Vec::new(),
        }
    }
}

/// How far a simulated rebuild got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RebuildProgress {
    pub role: usize,
    /// Bytes of the member's data area rebuilt.
    pub done: u64,
    pub total: u64,
    /// Virtual time it completed, if it has.
    pub finished: Option<Ns>,
}

/// A raidlab array on simulated members.
#[derive(Debug)]
pub struct SimArray {
    name: String,
    array: Arc<Array>,
    recording: Arc<Recording>,
    clock: Arc<VirtualClock>,
    members: Vec<Option<Box<dyn Device>>>,
    /// Each member's `next_event()` as of its last submit or advance: asked for
    /// once per change, not on every look (the question is asked millions of
    /// times a run). [`IDLE`] for none (and for a missing member), so the
    /// earliest is a plain minimum.
    member_next: Vec<Ns>,
    host: HostCost,
    /// `host.request_ns()`, asked once per host request (it rounds a float).
    request_ns: Ns,
    /// md's raid5d, when the host models it: compute steps take turns on it.
    md_thread: MdThread,
    /// Requests under way, by slot (their `seq`).
    active: Slab<Active>,
    /// Member operation id -> the request (seq) it belongs to.
    member_ops: Slab<u64>,
    /// Stripe lock key -> holder (seq). Looked up, never walked, so a hash
    /// map's order changes nothing; stripe numbers are nobody's attack, so
    /// rustc-hash's hasher rather than SipHash.
    locks: FxHashMap<u64, u64>,
    /// Requests waiting for a lock key, by key, in arrival order.
    waiting: FxHashMap<u64, VecDeque<u64>>,
    /// What the members hold where copies differ (zeros elsewhere).
    contents: Contents,
    /// Plan queues of finished requests, reused by the next (one allocation
    /// fewer per request).
    spare_queues: Vec<VecDeque<Plan>>,
    /// (time, seq): a compute step or a request's overhead ends. Taken in
    /// (time, seq) order; a request has at most one at a time, so no two are
    /// equal. A heap: pushed and popped once per request, where a sorted set
    /// cost three times as much.
    timers: BinaryHeap<Reverse<(Ns, u64)>>,
    ready: VecDeque<u64>,
    /// Completions produced while submitting, handed out at the next advance.
    finished: Vec<Completion>,
    /// Next check of the stripe cache's held stripes.
    tick: Option<Ns>,
    /// An expired stripe's write-out is under way (the next follows it).
    expiring: bool,
    tick_every: Ns,
    capacity: u64,
    log: OpLog,
    errors: Vec<String>,
    /// Host requests in the order the engine saw them, when kept.
    requests: Option<Vec<(Ns, IoKind, u64, u64)>>,
    buf: Vec<u8>,
    spec_info: Vec<Param>,
    rebuild: Option<Rebuild>,
    scrub: Option<Scrub>,
    /// Members' completions, reused by every advance (not allocated per call).
    member_done: Vec<Completion>,
    /// A write may have left stripes held in the stripe cache since it was
    /// last found empty (only writes hold stripes: reads need not ask).
    maybe_held: bool,
    /// md's write-intent bitmap, when the array keeps one.
    bitmap: Option<SimBitmap>,
    /// Faults at virtual times, when the configuration has some.
    faults: Option<Box<faults::Faults>>,
}

impl SimArray {
    pub fn new(spec: ArraySpec) -> Result<SimArray, String> {
        let g = spec.geometry;
        let mut spec = spec;
        let rebuild = spec.rebuild.take();
        common::check_spec(&spec, rebuild.as_ref())?;
        let volumes = common::size_only_members(&spec);
        let recording = Arc::new(Recording::default());
        let array = Array::new(spec.name.clone(), g, volumes)
            .map_err(|e| e.to_string())?
            .with_executor(recording.clone());
        let clock = Arc::new(VirtualClock::default());
        let mut tick_every = 0;
        if let Some(cfg) = spec.stripe_cache {
            array
                .start_stripe_cache_driven(cfg, clock.clone())
                .map_err(|e| e.to_string())?;
            // What the real cache's thread sleeps between checks.
            tick_every = (cfg.hold / 2)
                .clamp(Duration::from_millis(1), Duration::from_millis(100))
                .as_nanos() as Ns;
        }
        let capacity = g.array_bytes();
        let mut spec_info = common::array_params(&g, spec.stripe_cache);
        spec_info.extend(spec.host.params());
        let mut members = spec.members;
        let rebuild = match rebuild {
            Some(r) => {
                let target = Arc::new(SizeOnly::new(
                    format!("{} new member {}", spec.name, r.role),
                    g.member_bytes,
                ));
                let rec = array
                    .begin_recovery(r.role, target, r.from, false)
                    .map_err(|e| e.to_string())?;
                if let Some(rate) = r.max_rate {
                    spec_info.push(Param {
                        name: "rebuild_max_rate".into(),
                        value: rate as f64 / 1e6,
                        unit: "MB/s".into(),
                    });
                }
                members[r.role] = Some(r.device);
                Some(Rebuild::new(rec, r.role, &g, r.max_rate, 0))
            }
            None => None,
        };
        Ok(SimArray {
            name: spec.name,
            array: Arc::new(array),
            recording,
            clock,
            member_next: vec![IDLE; members.len()],
            members,
            request_ns: spec.host.request_ns(),
            host: spec.host,
            md_thread: MdThread::default(),
            active: Slab::default(),
            member_ops: Slab::default(),
            locks: FxHashMap::default(),
            waiting: FxHashMap::default(),
            spare_queues: Vec::new(),
            contents: Contents::default(),
            timers: BinaryHeap::new(),
            ready: VecDeque::new(),
            finished: Vec::new(),
            tick: None,
            expiring: false,
            tick_every,
            capacity,
            log: OpLog::default(),
            errors: Vec::new(),
            requests: None,
            buf: Vec::new(),
            spec_info,
            rebuild,
            scrub: None,
            member_done: Vec::new(),
            maybe_held: false,
            bitmap: None,
            faults: None,
        })
    }

    /// Run a scrub (md's check) of the whole array from now on, beside
    /// whatever else the array serves: the engine's own scrub plans, step by
    /// step, each under its stripe locks. Refused where raidlab's scrub
    /// refuses: no redundancy to check.
    pub fn start_scrub(&mut self, spec: ScrubSpec) -> Result<(), String> {
        let g = *self.array.geometry();
        let present: Vec<bool> = self.members.iter().map(Option::is_some).collect();
        let missing: Vec<usize> = (0..present.len()).filter(|&r| !present[r]).collect();
        if !raidlab_raid::recovery_plan::scrub_can_compare(&g, &missing) {
            return Err(format!(
                "{}: a {} array with role(s) {missing:?} missing has no redundancy left to check",
                self.name,
                g.level.name()
            ));
        }
        if let Some(rate) = spec.max_rate {
            self.spec_info.push(Param {
                name: "check_max_rate".into(),
                value: rate as f64 / 1e6,
                unit: "MB/s".into(),
            });
        }
        self.scrub = Some(Scrub::new(g, present, spec));
        Ok(())
    }

    /// Let role `r` hold other bytes than the rest of its stripe says in
    /// each range (`crate::contents`), for a scrub to find. Levels with
    /// parity or copies; ranges on members in service, inside the data area.
    pub fn set_mismatches(&mut self, ranges: &[MismatchRange]) -> Result<(), String> {
        let g = *self.array.geometry();
        let failed: Vec<usize> = (0..self.members.len())
            .filter(|&r| self.members[r].is_none())
            .collect();
        check_mismatches(&g, &failed, ranges).map_err(|m| format!("{}: {m}", self.name))?;
        self.contents = Contents::new(ranges);
        Ok(())
    }

    /// The scrub step under way has read its range: the engine compares
    /// what the members hold there and, with repair, says what to rewrite
    /// (the member writes, as the engine plans them).
    fn compare_scrub_step(&mut self) -> Option<Vec<raidlab_raid::MemberOp>> {
        let s = self.scrub.as_mut()?;
        if self.contents.is_empty() {
            return None;
        }
        let (from, to, present) = s.step_range();
        let found = self
            .contents
            .compare(s.geometry(), present, from, to, s.repair);
        s.count(found.mismatch_sectors, &found.rewrites);
        let writes: Vec<_> = found
            .rewrites
            .iter()
            .map(|&(role, at, len)| (role, at, 0, len))
            .collect();
        let plan = raidlab_raid::recovery_plan::plan_rewrites(&writes, Vec::new());
        plan.steps.into_iter().find_map(|s| match s {
            Step::Io(ops) => Some(ops),
            _ => None,
        })
    }

    /// Start the scrub's next step now.
    fn scrub_step(&mut self, now: Ns) {
        let Some(s) = self.scrub.as_mut() else {
            return;
        };
        let plan = match s.step() {
            Ok(p) => p,
            Err(e) => {
                self.errors.push(e);
                return;
            }
        };
        let mut plans = self.spare_queues.pop().unwrap_or_default();
        plans.push_back(plan);
        // md's sync thread, as a rebuild's steps.
        let seq = self.active.insert(Active {
            scrub_step: true,
            ..Active::md(plans, now)
        });
        self.ready.push_back(seq);
    }

    /// Start the rebuild's next step now: the engine plans it (and moves its
    /// checkpoint), this module schedules the plan like any request's.
    fn rebuild_step(&mut self, now: Ns) {
        let Some(r) = self.rebuild.as_mut() else {
            return;
        };
        r.next = None;
        self.clock.set(now);
        let want = r.run.peek().map_or(0, |s| s.end - s.start);
        if let Err(e) = self.array.recovery_step(&r.rec, want, &mut r.scratch) {
            let e = format!("rebuild step: {e}");
            self.faults_rebuild_error(&e);
            self.errors.push(e);
            // What the step ran before it failed still takes device time.
            let plans = self.recorded_plans();
            if plans.is_empty() {
                self.spare_queues.push(plans);
            } else {
                let seq = self.active.insert(Active::md(plans, now));
                self.ready.push_back(seq);
            }
            self.faults_notice(now);
            return;
        }
        self.faults_notice(now);
        let plans = self.recorded_plans();
        let seq = self.active.insert(Active {
            rebuild_step: true,
            ..Active::md(plans, now)
        });
        self.ready.push_back(seq);
    }

    /// A rebuild step completed at `now`: take over the role when that was the
    /// last, else say when the next starts (at once, or when the rate allows).
    fn rebuild_step_done(&mut self, now: Ns) {
        let total = self.array.geometry().member_bytes;
        let Some(r) = self.rebuild.as_mut() else {
            return;
        };
        let done = r.rec.done();
        let work = done.saturating_sub(r.run.position());
        r.run.advance(done, work);
        r.next = match r.run.next(Duration::from_nanos(now)) {
            Next::Done => None,
            Next::Step(_) => Some(now),
            Next::Wait(due) => Some(due.as_nanos() as Ns),
        };
        if done >= total {
            r.next = None;
            r.finished = Some(now);
            if let Err(e) = self.array.finish_recovery(&r.rec) {
                self.errors.push(format!("rebuild finish: {e}"));
            }
            self.faults_rebuild_done(now);
        }
    }

    /// Keep md's internal write-intent bitmap with `chunk`-byte chunks
    /// (`None`: mdadm's choice for the member size) on every member in
    /// service: the engine marks chunks dirty and writes the bitmap before a
    /// write to a clean chunk (`crate::bitmap`), and md's daemon clears the
    /// bits later. Not with a rebuild (the new member's copy is not kept).
    pub fn with_bitmap(mut self, chunk: Option<u64>) -> Result<SimArray, String> {
        if self.rebuild.is_some() {
            return Err(format!(
                "{}: a bitmap and a rebuild together are not simulated (the new member's bitmap copy is not kept)",
                self.name
            ));
        }
        let g = *self.array.geometry();
        let caps: Vec<Option<u64>> = self
            .members
            .iter()
            .map(|m| m.as_ref().map(|d| d.capacity()))
            .collect();
        let (bm, devices, sim) = SimBitmap::build(&self.name, &g, &caps, chunk)
            .map_err(|m| format!("{}: {m}", self.name))?;
        let array = Arc::try_unwrap(self.array)
            .map_err(|_| "internal: the array is shared before it is built".to_string())?;
        self.array = Arc::new(array.with_intent(bm, devices));
        self.spec_info.push(Param {
            name: "bitmap_chunk".into(),
            value: sim.chunk_bytes() as f64,
            unit: "bytes".into(),
        });
        self.bitmap = Some(sim);
        Ok(self)
    }

    /// How many bitmap bits md's daemon has cleared (`None` without a bitmap).
    pub fn bitmap_cleared(&self) -> Option<u64> {
        self.bitmap.as_ref().map(|b| b.cleared)
    }

    /// A pass of md's bitmap daemon now; what it writes, if anything, is
    /// scheduled as md's thread's.
    fn bitmap_pass(&mut self, now: Ns) {
        let Some(b) = self.bitmap.as_mut() else {
            return;
        };
        if let Err(e) = b.pass(now, &self.array) {
            self.errors.push(e);
        }
        let plans = self.recorded_plans();
        if plans.is_empty() {
            self.spare_queues.push(plans);
            return;
        }
        let seq = self.active.insert(Active::md(plans, now));
        self.ready.push_back(seq);
    }

    /// Keep every member operation, in issue order, in [`Device::member_ops`].
    pub fn keep_ops(&mut self) {
        self.log.keep = true;
    }

    /// Keep the host requests in the order the engine ran them, so a test can
    /// replay them on a real array ([`SimArray::requests`]).
    pub fn keep_requests(&mut self) {
        self.requests = Some(Vec::new());
    }

    /// The host requests kept by [`SimArray::keep_requests`]: (virtual time the
    /// engine ran it, kind, offset, length).
    pub fn requests(&self) -> &[(Ns, IoKind, u64, u64)] {
        self.requests.as_deref().unwrap_or(&[])
    }

    /// Errors the engine returned. Without faults a simulated member never
    /// fails, so any is a bug somewhere (tests assert there are none); with
    /// faults, the first of the host's failed requests and anything the
    /// engine refused ([`SimArray::fault_report`] counts them all).
    pub fn errors(&self) -> &[String] {
        &self.errors
    }

    /// The real engine's array: its geometry, stripe cache counters, plans.
    pub fn engine(&self) -> &Array {
        &self.array
    }
}
