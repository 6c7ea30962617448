//! A hardware RAID card in virtual time: a battery- or flash-backed write-back
//! cache that acknowledges writes and destages them (gathering whole stripes),
//! sequential read-ahead, a per-command latency and the host link's bandwidth, in
//! front of an array the card builds from its disks; and the card's pass-through
//! mode, where each disk is its own device with the card's latency added.
//!
//! Decides: what the card's cache holds, when it acknowledges, what it destages and
//! in which order. It must never decide how a stripe is written: the array behind
//! the cache is raidlab's own engine (an [`ArrayModel`], replayed or live, whose "host" is the card's
//! parity engine), so the card's read-modify-write and full-stripe costs come from
//! the same planner as software RAID's. Real firmware differs in its details; the
//! tables say the card is modelled this way.

use crate::array::ArrayModel;
use crate::device::{hand_out, Completion, Device, ModelInfo, Ns, Param, Request, US};
use raidlab_core::IoKind;
mod params;
mod read_path;
mod write_back;

pub use params::CardParams;
use std::collections::{BTreeMap, VecDeque};
use write_back::Dirty;

/// What one of the card's own requests to its array is for.
#[derive(Debug, Clone, Copy)]
enum Inner {
    /// A host request passed to the array (reads that miss; writes in
    /// write-through mode), completing host request `id`. A read carries the
    /// byte range it fetches (with any read-ahead): what the cache holds once its
    /// data has arrived.
    Host {
        id: u64,
        kind: IoKind,
        len: u64,
        span: (u64, u64),
    },
    /// A destage of `len` bytes.
    Destage { len: u64 },
}

/// A RAID card with its array.
#[derive(Debug)]
pub struct RaidCard {
    params: CardParams,
    array: Box<dyn ArrayModel>,
    stripe: u64,
    dirty: BTreeMap<u64, Dirty>,
    /// Bytes dirty or being destaged: what occupies the cache.
    held: u64,
    destaging: u32,
    /// Ascending destage cursor (a stripe index): the card sweeps like an elevator.
    cursor: u64,
    /// Read data kept for a parity array: disjoint byte ranges (start -> end),
    /// and their total. Never more than `parity_read_cache_bytes`.
    kept: BTreeMap<u64, u64>,
    kept_bytes: u64,
    parity: bool,
    /// Clean stripes read ahead, oldest first, and their set.
    clean: VecDeque<u64>,
    clean_set: BTreeMap<u64, ()>,
    /// Stripes being read ahead: stripe -> the fetch (inner id) bringing it.
    fetching: BTreeMap<u64, u64>,
    /// Host reads waiting for a fetch in flight: inner id -> (host id, bytes).
    waiters: BTreeMap<u64, Vec<(u64, u64)>>,
    last_read_end: Option<u64>,
    inner: BTreeMap<u64, Inner>,
    next_inner: u64,
    /// Host writes waiting for cache space, in arrival order.
    waiting: VecDeque<(Ns, Request)>,
    link_free: Ns,
    /// Host completions not yet handed out.
    pending: Vec<Completion>,
    /// A destage check once the oldest partial stripe's hold has passed.
    wake: Option<Ns>,
    /// Requests to the array that start later (after the card's command
    /// overhead or a host-link transfer): (time, id) -> what.
    later: BTreeMap<(Ns, u64), (Inner, IoKind, u64, u64)>,
}

impl RaidCard {
    /// `array` is the card's array over its disks; its host cost should be the
    /// card's parity engine with no per-request cost (the card adds its own).
    pub fn new(params: CardParams, array: impl ArrayModel + 'static) -> Result<RaidCard, String> {
        RaidCard::new_boxed(params, Box::new(array))
    }

    /// [`RaidCard::new`] for an array already boxed.
    pub fn new_boxed(params: CardParams, array: Box<dyn ArrayModel>) -> Result<RaidCard, String> {
        params.check()?;
        let g = *array.engine().geometry();
        // The card's unit of caching and read-ahead: a full stripe of data;
        // RAID 1 has no chunk, so a 64 KiB line (assumed, a common cache line
        // of such cards) stands in for it.
        let stripe = g.chunk_bytes.max(64 << 10) * g.data_disks().max(1) as u64;
        if g.raid_disks > params.ports as usize {
            return Err(format!(
                "the card has {} ports but the array has {} disks",
                params.ports, g.raid_disks
            ));
        }
        Ok(RaidCard {
            params,
            array,
            stripe,
            dirty: BTreeMap::new(),
            kept: BTreeMap::new(),
            kept_bytes: 0,
            parity: g.is_parity(),
            held: 0,
            destaging: 0,
            cursor: 0,
            clean: VecDeque::new(),
            clean_set: BTreeMap::new(),
            fetching: BTreeMap::new(),
            waiters: BTreeMap::new(),
            last_read_end: None,
            inner: BTreeMap::new(),
            next_inner: 0,
            waiting: VecDeque::new(),
            link_free: 0,
            pending: Vec::new(),
            wake: None,
            later: BTreeMap::new(),
        })
    }

    /// The array behind the card (member operation counts, the engine).
    pub fn array(&self) -> &dyn ArrayModel {
        self.array.as_ref()
    }

    /// Time at which a transfer of `len` bytes over the host link that may start
    /// at `now` ends.
    fn link(&mut self, now: Ns, len: u64) -> Ns {
        let start = now.max(self.link_free);
        let t = (len as f64 / (self.params.host_link_mb_per_s * 1e6) * 1e9).round() as Ns;
        self.link_free = start + t;
        self.link_free
    }

    /// Send a request to the array at `at` (now, or later once the card's own
    /// time for it has passed: the array never sees a submission from its future).
    fn send_down(
        &mut self,
        now: Ns,
        at: Ns,
        what: Inner,
        kind: IoKind,
        offset: u64,
        len: u64,
    ) -> u64 {
        let id = self.next_inner;
        self.next_inner += 1;
        if at > now {
            self.later.insert((at, id), (what, kind, offset, len));
            return id;
        }
        self.inner.insert(id, what);
        self.array.submit(
            now,
            Request {
                id,
                kind,
                offset,
                len,
                process: 0,
            },
        );
        id
    }
}

impl Device for RaidCard {
    fn capacity(&self) -> u64 {
        self.array.capacity()
    }

    fn submit(&mut self, now: Ns, req: Request) {
        if matches!(req.kind, IoKind::Write | IoKind::Zero | IoKind::Trim) {
            self.forget(req.offset, req.offset + req.len);
        }
        match req.kind {
            IoKind::Read => self.read(now, req),
            // A write larger than the whole cache could never fit: it goes
            // through, as a card bypasses its cache for it.
            // The card has no write-zeroes command of its own: zeros are
            // written like any data.
            IoKind::Write | IoKind::Zero
                if self.params.write_back && req.len <= self.params.cache_bytes =>
            {
                if !self.waiting.is_empty() || !self.absorb(now, req) {
                    self.waiting.push_back((now, req));
                }
                self.destage(now);
            }
            // The cache is non-volatile, so a flush has nothing to wait for;
            // without a write-back cache nothing is held either.
            IoKind::Flush | IoKind::Trim => {
                self.pending.push(Completion {
                    id: req.id,
                    at: now + self.params.overhead(),
                });
            }
            IoKind::Write | IoKind::Zero => {
                let at = self.link(now + self.params.overhead(), req.len);
                self.send_down(
                    now,
                    at,
                    Inner::Host {
                        id: req.id,
                        kind: IoKind::Write,
                        len: req.len,
                        span: (req.offset, req.offset + req.len),
                    },
                    IoKind::Write,
                    req.offset,
                    req.len,
                );
            }
        }
    }

    fn next_event(&self) -> Option<Ns> {
        [
            self.array.next_event(),
            self.pending.iter().map(|c| c.at).min(),
            self.wake,
            self.later.keys().next().map(|&(t, _)| t),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn advance(&mut self, now: Ns, done: &mut Vec<Completion>) {
        let mut inner_done = Vec::new();
        if self.array.next_event().is_some_and(|t| t <= now) {
            self.array.advance(now, &mut inner_done);
        }
        while let Some((&(t, id), _)) = self.later.first_key_value() {
            if t > now {
                break;
            }
            let (what, kind, offset, len) = self.later.remove(&(t, id)).expect("first");
            self.inner.insert(id, what);
            self.array.submit(
                now,
                Request {
                    id,
                    kind,
                    offset,
                    len,
                    process: 0,
                },
            );
        }
        for c in inner_done {
            match self.inner.remove(&c.id) {
                Some(Inner::Host {
                    id,
                    kind,
                    len,
                    span,
                }) => {
                    let at = if kind == IoKind::Read {
                        self.arrived(c.id, span);
                        for (wid, wlen) in self.waiters.remove(&c.id).unwrap_or_default() {
                            let at = self.link(c.at, wlen);
                            self.pending.push(Completion { id: wid, at });
                        }
                        self.link(c.at, len)
                    } else {
                        c.at
                    };
                    self.pending.push(Completion { id, at });
                }
                Some(Inner::Destage { len }) => {
                    self.destaging -= 1;
                    self.held -= len.min(self.held);
                }
                None => {}
            }
        }
        // Writes that waited for room, in order, as far as room allows.
        while let Some(&(_, req)) = self.waiting.front() {
            if !self.absorb(now, req) {
                break;
            }
            self.waiting.pop_front();
        }
        if self.wake.is_some_and(|t| t <= now) || self.destaging < self.params.destage_depth {
            self.destage(now);
        }
        hand_out(&mut self.pending, now, done);
    }

    fn info(&self) -> ModelInfo {
        ModelInfo {
            model: "raid-card".into(),
            name: self.params.description.clone(),
            params: self.params.params(),
            sources: self.params.sources.clone(),
            parts: vec![self.array.info()],
        }
    }

    fn member_ops(&self) -> Option<&crate::stats::OpLog> {
        self.array.member_ops()
    }

    fn rebuild_progress(&self) -> Option<crate::array::RebuildProgress> {
        self.array.rebuild_progress()
    }
    fn fault_report(&self) -> Option<crate::faults::report::FaultReport> {
        self.array.fault_report()
    }

    fn scrub_progress(&self) -> Option<crate::scrub::ScrubProgress> {
        self.array.scrub_progress()
    }
}

/// The card's host link (PCIe) as its pass-through disks share it: one
/// transfer at a time at `host_link_mb_per_s`. Shared by the disks of one card
/// (a simulated device tree runs on one thread, so the order of use is the
/// order of events, the same on every run).
#[derive(Debug, Clone)]
pub struct HostBus {
    ns_per_byte: f64,
    free: std::sync::Arc<std::sync::Mutex<Ns>>,
}

impl HostBus {
    /// A link of `mb_per_s` decimal MB/s (infinite: no limit).
    pub fn new(mb_per_s: f64) -> HostBus {
        HostBus {
            ns_per_byte: 1e3 / mb_per_s,
            free: Default::default(),
        }
    }

    /// Carry `len` bytes whose disk-side transfer (on a port of
    /// `port_ns_per_byte`) would start at `at`: the time the disk-side
    /// transfer can start so that the host link, taken in turn, has carried
    /// them by its end. The card streams (DMA runs while the port transfers),
    /// so a link that is free for its share of the window delays nothing; a
    /// saturated one holds the transfer back until its share fits.
    fn carry(&self, at: Ns, len: u64, port_ns_per_byte: f64) -> Ns {
        let window = (len as f64 * port_ns_per_byte).round() as Ns;
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        let end = at.max(*free) + (len as f64 * self.ns_per_byte).round() as Ns;
        *free = end;
        at.max(end.saturating_sub(window))
    }
}

/// A disk behind a card in pass-through (JBOD) mode: the disk as it is (on
/// the card's port: its link is built at the port's rate), each command
/// delayed by the card's firmware, and its data over the card's host link,
/// shared with the card's other disks: a write reaches the disk when the link
/// starts carrying it, a read completes once the link has carried it
/// (streamed beside the disk's own transfer, which ends when the disk
/// completes).
#[derive(Debug)]
pub struct PassThrough {
    disk: Box<dyn Device>,
    overhead: Ns,
    bus: HostBus,
    /// The card's port rate, ns per byte.
    port_ns_per_byte: f64,
    /// Writes crossing the host link: (time they reach the card, id) -> request.
    later: BTreeMap<(Ns, u64), Request>,
    /// Reads the disk finished, by id: their length, for the transfer up.
    reads: BTreeMap<u64, u64>,
    pending: Vec<Completion>,
    name: String,
}

impl PassThrough {
    pub fn new(disk: Box<dyn Device>, card: &CardParams, bus: HostBus) -> PassThrough {
        PassThrough {
            disk,
            overhead: card.overhead(),
            bus,
            port_ns_per_byte: 1e3 / card.port_mb_per_s,
            later: BTreeMap::new(),
            reads: BTreeMap::new(),
            pending: Vec::new(),
            name: card.description.clone(),
        }
    }
}

impl Device for PassThrough {
    fn capacity(&self) -> u64 {
        self.disk.capacity()
    }
    fn submit(&mut self, now: Ns, req: Request) {
        match req.kind {
            IoKind::Write | IoKind::Zero => {
                let at = self.bus.carry(now, req.len, self.port_ns_per_byte);
                if at > now {
                    self.later.insert((at, req.id), req);
                    return;
                }
            }
            IoKind::Read => {
                self.reads.insert(req.id, req.len);
            }
            IoKind::Flush | IoKind::Trim => {}
        }
        self.disk.submit(now, req);
    }
    fn next_event(&self) -> Option<Ns> {
        [
            self.disk.next_event(),
            self.pending.iter().map(|c| c.at).min(),
            self.later.keys().next().map(|&(t, _)| t),
        ]
        .into_iter()
        .flatten()
        .min()
    }
    fn advance(&mut self, now: Ns, done: &mut Vec<Completion>) {
        while let Some((&(t, id), _)) = self.later.first_key_value() {
            if t > now {
                break;
            }
            let req = self.later.remove(&(t, id)).expect("first");
            self.disk.submit(now, req);
        }
        let mut from_disk = Vec::new();
        if self.disk.next_event().is_some_and(|t| t <= now) {
            self.disk.advance(now, &mut from_disk);
        }
        for c in from_disk {
            let mut at = c.at;
            if let Some(len) = self.reads.remove(&c.id) {
                // The disk's transfer of it ended at c.at.
                let window = (len as f64 * self.port_ns_per_byte).round() as Ns;
                let start = c.at.saturating_sub(window);
                at = self.bus.carry(start, len, self.port_ns_per_byte) + window;
            }
            self.pending.push(Completion {
                id: c.id,
                at: at + self.overhead,
            });
        }
        hand_out(&mut self.pending, now, done);
    }
    fn info(&self) -> ModelInfo {
        ModelInfo {
            model: "pass-through".into(),
            name: format!("{} (pass-through)", self.name),
            params: vec![Param {
                name: "command_overhead_us".into(),
                value: self.overhead as f64 / US as f64,
                unit: "µs".into(),
            }],
            sources: Vec::new(),
            parts: vec![self.disk.info()],
        }
    }
}
