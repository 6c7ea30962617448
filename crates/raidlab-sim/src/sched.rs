//! The host's I/O scheduler in front of a device the host sees (a disk, a disk
//! behind a card in pass-through, a card's logical drive): which of the host's
//! requests reach the device, and when.
//!
//! Decides: only the order and the time at which requests are passed down, by
//! the scheduler the host runs ([`Scheduler`]). It must never change a request
//! (kind, offset, length, id) or drop one, never look inside the device below,
//! and never read the wall clock: the same submissions give the same dispatches.
//!
//! `cfq` is Linux's CFQ as the articles' 2008 kernels (2.6.18 to 2.6.26, where
//! it was the default scheduler) ran it, reduced to what decides how many
//! synchronous reads are in flight:
//! - each process's reads wait in its own queue; one process at a time is
//!   active and has up to `quantum` reads dispatched;
//! - when the active process has nothing queued, CFQ keeps the disk for it (its
//!   reads in flight, then an idle wait of `slice_idle` for its next read, or
//!   of `CFQ_MIN_TT` for a process whose mean seek distance says it seeks)
//!   while the process's mean think time is within `slice_idle`; a process that
//!   thinks longer loses its idle window and the next process is served at once;
//! - a process keeps the disk for at most `slice_sync` while others wait.
//!
//! Writes, flushes and trims pass straight down: CFQ puts writes of the page
//! cache in an async queue that a sync reader preempts, which is not modelled
//! (the seeds' writes are sparse). `deadline` and `none` pass everything down
//! as it comes: deadline limits nothing in flight, and its sector order is what
//! the drives' own queues (NCQ) do in the models.

use crate::device::{Completion, Device, ModelInfo, Ns, Param, Request, MS};
use raidlab_core::IoKind;
use std::collections::{BTreeMap, VecDeque};

/// The host's I/O scheduler for the devices it sees.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheduler {
    /// Requests go down as they come (also what a card's disks get: nothing
    /// schedules by process behind a card).
    #[default]
    None,
    /// Linux's deadline scheduler: in this model the same as `none`.
    Deadline,
    /// Linux's CFQ with the 2.6.18-2.6.26 defaults ([`CFQ_QUANTUM`],
    /// [`CFQ_SLICE_SYNC`], [`CFQ_SLICE_IDLE`]).
    Cfq,
}

impl Scheduler {
    pub fn parse(s: &str) -> Result<Scheduler, String> {
        match s {
            "none" => Ok(Scheduler::None),
            "deadline" => Ok(Scheduler::Deadline),
            "cfq" => Ok(Scheduler::Cfq),
            _ => Err(format!(
                "unknown I/O scheduler `{s}` (known: none, deadline, cfq)"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Scheduler::None => "none",
            Scheduler::Deadline => "deadline",
            Scheduler::Cfq => "cfq",
        }
    }

    /// `dev` as the host sees it through this scheduler.
    pub fn attach(self, dev: Box<dyn Device>) -> Box<dyn Device> {
        match self {
            Scheduler::None | Scheduler::Deadline => dev,
            Scheduler::Cfq => Box::new(Cfq::new(dev)),
        }
    }
}

/// Reads one process may have dispatched at once: `cfq_quantum = 4` in
/// block/cfq-iosched.c of Linux 2.6.18 to 2.6.32 (8 from 2.6.33).
pub const CFQ_QUANTUM: u32 = 4;
/// How long one process may keep the disk while others wait, in ns:
/// `cfq_slice_sync = HZ / 10`, 100 ms (block/cfq-iosched.c;
/// Documentation/block/cfq-iosched.txt, `slice_sync`).
pub const CFQ_SLICE_SYNC: Ns = 100 * MS;
/// How long CFQ idles for the active process's next read, in ns:
/// `cfq_slice_idle = HZ / 125`, 8 ms (block/cfq-iosched.c;
/// Documentation/block/cfq-iosched.txt, `slice_idle`).
pub const CFQ_SLICE_IDLE: Ns = 8 * MS;
/// How long CFQ idles instead for a process that seeks, in ns: `CFQ_MIN_TT`,
/// 2 ms (`cfq_arm_slice_timer`, block/cfq-iosched.c of 2.6.2x: "we don't
/// want to idle for seeks ... allow a little bit of time for him to submit a
/// new rq"; the timer is set in whole jiffies, so at HZ=250 it fires at the
/// next tick, 0 to 4 ms on).
pub const CFQ_MIN_TT: Ns = 2 * MS;
/// The mean seek distance past which CFQ counts a process as seeking, in
/// 512-byte sectors: `CIC_SEEKY`, `seek_mean > 8 * 1024` (4 MiB), in
/// block/cfq-iosched.c of 2.6.22 to 2.6.2x (128 * 1024 before).
pub const CFQ_SEEKY_SECTORS: u64 = 8 * 1024;

/// One process's state on one device.
#[derive(Debug, Default)]
struct Proc {
    queue: VecDeque<Request>,
    dispatched: u32,
    /// When its last read on this device completed.
    last_end: Option<Ns>,
    /// The kernel's think-time average (`cfq_update_io_thinktime`): weighted
    /// sample count and total, in its fixed point (256 per sample).
    samples: u64,
    total: u64,
    /// Waiting in the round-robin list.
    listed: bool,
    /// The sector after its last request, and the kernel's seek-distance
    /// average (`cfq_update_io_seektime`), weighted as the think time.
    last_pos: Option<u64>,
    seek_samples: u64,
    seek_total: u64,
}

impl Proc {
    /// Think time is the gap from the process's last completion here to its
    /// next request, capped at twice `slice_idle`, averaged as the kernel does.
    fn think(&mut self, now: Ns) {
        if let Some(end) = self.last_end {
            let t = now.saturating_sub(end).min(2 * CFQ_SLICE_IDLE);
            self.samples = (7 * self.samples + 256) / 8;
            self.total = (7 * self.total + 256 * t) / 8;
        }
    }

    /// The seek distance from its last request to `req`, averaged as the
    /// kernel does, outliers capped as it caps them.
    fn seek(&mut self, req: &Request) {
        let sector = req.offset / 512;
        if let Some(last) = self.last_pos {
            let mean = self.seek_mean();
            let cap = if self.seek_samples <= 60 {
                mean * 4 + 2 * 1024 * 1024
            } else {
                mean * 4 + 2 * 1024 * 64
            };
            let d = sector.abs_diff(last).min(cap);
            self.seek_samples = (7 * self.seek_samples + 256) / 8;
            self.seek_total = (7 * self.seek_total + 256 * d) / 8;
        }
        self.last_pos = Some((req.offset + req.len) / 512);
    }

    fn seek_mean(&self) -> u64 {
        (self.seek_total + self.seek_samples / 2)
            .checked_div(self.seek_samples)
            .unwrap_or(0)
    }

    /// How long CFQ idles for its next read: `slice_idle`, or `CFQ_MIN_TT`
    /// once enough samples say it seeks (`CIC_SEEKY`).
    fn idle_wait(&self) -> Ns {
        if self.seek_samples > 80 && self.seek_mean() > CFQ_SEEKY_SECTORS {
            CFQ_SLICE_IDLE.min(CFQ_MIN_TT)
        } else {
            CFQ_SLICE_IDLE
        }
    }

    /// CFQ idles for a process until enough samples say it thinks longer than
    /// `slice_idle` (`cfq_update_idle_window`: valid once the weighted count
    /// passes 80).
    fn idle_window(&self) -> bool {
        self.samples <= 80 || (self.total + 128) / self.samples <= CFQ_SLICE_IDLE
    }
}

#[derive(Debug, Clone, Copy)]
struct Active {
    process: u32,
    slice_end: Ns,
}

/// CFQ in front of one device.
#[derive(Debug)]
pub struct Cfq {
    dev: Box<dyn Device>,
    procs: BTreeMap<u32, Proc>,
    /// Processes with reads queued and not active, in the order they came.
    waiting: VecDeque<u32>,
    active: Option<Active>,
    /// Reads on the device: id -> process.
    flight: BTreeMap<u64, u32>,
    /// The idle wait for the active process ends.
    timer: Option<Ns>,
    below: Vec<Completion>,
}

impl Cfq {
    pub fn new(dev: Box<dyn Device>) -> Cfq {
        Cfq {
            dev,
            procs: BTreeMap::new(),
            waiting: VecDeque::new(),
            active: None,
            flight: BTreeMap::new(),
            timer: None,
            below: Vec::new(),
        }
    }

    fn dispatch(&mut self, now: Ns) {
        loop {
            let Some(a) = self.active else {
                let Some(p) = self.waiting.pop_front() else {
                    return;
                };
                self.procs.entry(p).or_default().listed = false;
                self.active = Some(Active {
                    process: p,
                    slice_end: now + CFQ_SLICE_SYNC,
                });
                self.timer = None;
                continue;
            };
            let pr = self.procs.entry(a.process).or_default();
            if !pr.queue.is_empty() {
                if now >= a.slice_end && !self.waiting.is_empty() {
                    // Its slice is used up and others wait: to the back.
                    pr.listed = true;
                    self.waiting.push_back(a.process);
                    self.active = None;
                    continue;
                }
                self.timer = None;
                while pr.dispatched < CFQ_QUANTUM {
                    let Some(req) = pr.queue.pop_front() else {
                        break;
                    };
                    pr.dispatched += 1;
                    self.flight.insert(req.id, a.process);
                    self.dev.submit(now, req);
                }
                return;
            }
            if pr.idle_window() && now < a.slice_end {
                if pr.dispatched > 0 {
                    // Its reads in flight: wait for them.
                    return;
                }
                match self.timer {
                    None => {
                        self.timer = Some(now + pr.idle_wait());
                        return;
                    }
                    Some(t) if t > now => return,
                    Some(_) => {}
                }
            }
            // Idle wait over, no idle window, or the slice is used up.
            self.timer = None;
            self.active = None;
            if self.waiting.is_empty() {
                return;
            }
        }
    }
}

impl Device for Cfq {
    fn capacity(&self) -> u64 {
        self.dev.capacity()
    }

    fn max_request_bytes(&self) -> u64 {
        self.dev.max_request_bytes()
    }

    fn submit(&mut self, now: Ns, req: Request) {
        if req.kind != IoKind::Read {
            self.dev.submit(now, req);
            return;
        }
        let pr = self.procs.entry(req.process).or_default();
        pr.think(now);
        pr.seek(&req);
        pr.queue.push_back(req);
        let active = self.active.is_some_and(|a| a.process == req.process);
        if !active && !pr.listed {
            pr.listed = true;
            self.waiting.push_back(req.process);
        }
        self.dispatch(now);
    }

    fn next_event(&self) -> Option<Ns> {
        [self.dev.next_event(), self.timer]
            .into_iter()
            .flatten()
            .min()
    }

    fn advance(&mut self, now: Ns, done: &mut Vec<Completion>) {
        if self.dev.next_event().is_some_and(|t| t <= now) {
            self.dev.advance(now, &mut self.below);
        }
        for c in self.below.drain(..) {
            if let Some(p) = self.flight.remove(&c.id) {
                let pr = self.procs.entry(p).or_default();
                pr.dispatched -= 1;
                pr.last_end = Some(c.at);
            }
            done.push(c);
        }
        self.dispatch(now);
    }

    fn info(&self) -> ModelInfo {
        ModelInfo {
            model: "host I/O scheduler".into(),
            name: "cfq (Linux 2.6.18-2.6.26 defaults)".into(),
            params: vec![
                Param::new("quantum", f64::from(CFQ_QUANTUM), "requests"),
                Param::new("slice_sync", (CFQ_SLICE_SYNC / MS) as f64, "ms"),
                Param::new("slice_idle", (CFQ_SLICE_IDLE / MS) as f64, "ms"),
                Param::new("min_tt", (CFQ_MIN_TT / MS) as f64, "ms"),
                Param::new("seeky_sectors", CFQ_SEEKY_SECTORS as f64, "sectors"),
            ],
            sources: vec![
                "quantum, slice_sync, slice_idle: block/cfq-iosched.c of Linux 2.6.18-2.6.26 (cfq_quantum = 4, cfq_slice_sync = HZ / 10, cfq_slice_idle = HZ / 125) and Documentation/block/cfq-iosched.txt".into(),
                "idle window: cfq_update_idle_window, a process whose mean think time exceeds slice_idle is not waited for".into(),
                "min_tt, seeky_sectors: block/cfq-iosched.c of 2.6.22-2.6.2x, cfq_arm_slice_timer idles min(slice_idle, CFQ_MIN_TT = 2 ms) for a process with CIC_SEEKY (seek_mean > 8 * 1024 sectors, averaged by cfq_update_io_seektime)".into(),
            ],
            parts: vec![self.dev.info()],
        }
    }

    fn member_ops(&self) -> Option<&crate::stats::OpLog> {
        self.dev.member_ops()
    }

    fn rebuild_progress(&self) -> Option<crate::array::RebuildProgress> {
        self.dev.rebuild_progress()
    }
    fn fault_report(&self) -> Option<crate::faults::report::FaultReport> {
        self.dev.fault_report()
    }
}
