//! raidlab's SSD cache tier on simulated devices: the real cache decides, device
//! models take the time.
//!
//! A [`SimCache`] holds the real `raidlab_cache::CachedVolume` over two
//! recording volumes, one for the cache device and one for the origin. A
//! request at virtual time t runs through the real `read_at`/`write_at`/`flush`
//! there, so the real code makes every decision: hit or miss, promotion by the
//! 2Q policy and its threshold, the sequential cutoff, write-back, -through or
//! -around, the metadata commits, and (at the virtual ticks a background
//! cleaner thread would use) what the cleaner writes back and in which order.
//! The recording volumes keep each operation in the order the cache issued it;
//! this module then schedules them on the simulated cache device and origin.
//!
//! How the real code runs them, and so how they are scheduled here:
//! - one operation after another: the cache waits for each before the next;
//! - under the cache's one lock, taken in arrival order, except a read's origin
//!   reads (misses and bypassed reads), which the cache does without it
//!   (`raidlab_cache::volume`'s module doc); every other operation, a write's
//!   origin reads included, holds it;
//! - the background cleaner is one thread that ticks every
//!   [`raidlab_cache::driver::DEFAULT_INTERVAL`] after its previous tick ended;
//!   a tick here happens only while the dirty share is over the target (a tick
//!   under it does nothing, and the rate's credit is capped the same way).
//!
//! Decides: only *when* things happen. It must never decide *what* a request
//! does to the cache device or the origin (that is raidlab-cache's, so no cache
//! rule is written twice) and never read the wall clock.
//!
//! What is approximated: the real cache decides a request when it takes the
//! lock; here it decides at arrival, in arrival order (the lock is first come
//! first served, so the order is the same; a write that arrives while a read
//! miss is at the origin counts against that read's promotion in the real
//! cache, not here). The cache's own CPU time is not charged. Data is not
//! simulated: the cache device keeps only its metadata area's bytes (the cache
//! reads its table back), data blocks read as zeros.

use crate::device::{Completion, Device, ModelInfo, Ns, Param, Request, VirtualClock};
use raidlab_cache::format::Layout;
use raidlab_cache::{CachedVolume, Config, Mode, OriginId, Stats};
use raidlab_core::IoKind;
use raidlab_core::{Op, Result, Volume};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// Which device an operation of the cache goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    Cache,
    Origin,
}

/// One operation the cache issued to its cache device or its origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CacheOp {
    pub side: Side,
    pub kind: IoKind,
    pub offset: u64,
    pub len: u64,
}

/// What happened at a virtual time, for a test to replay on a real cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A host request ran through the cache.
    Request { kind: IoKind, offset: u64, len: u64 },
    /// The background cleaner ticked.
    CleanTick,
}

/// A volume that writes down every operation it receives and does none: the
/// cache device's or the origin's stand-in under the real cache. The cache
/// device keeps the bytes written below `keep_below` (its metadata), so the
/// cache reads back the table it wrote; everything else reads as zeros.
#[derive(Debug)]
pub struct Recorder {
    name: String,
    size: u64,
    side: Side,
    optimal: Option<u64>,
    ops: Arc<Mutex<Vec<CacheOp>>>,
    kept: Mutex<Kept>,
}

const PAGE: u64 = 4096;

/// The bytes a recorder keeps: below this offset, by 4 KiB page.
type Kept = (u64, HashMap<u64, Box<[u8]>>);

impl Recorder {
    fn note(&self, kind: IoKind, offset: u64, len: u64) {
        self.ops
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(CacheOp {
                side: self.side,
                kind,
                offset,
                len,
            });
    }

    fn check(&self, op: Op, offset: u64, len: u64) -> Result<()> {
        raidlab_core::check_range(&self.name, op, self.size, offset, len)
    }

    /// Keep from now on only the bytes below `limit` (0: none).
    fn keep_below(&self, limit: u64) {
        let mut k = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        k.0 = limit;
        k.1.retain(|&page, _| page * PAGE < limit);
    }
}

impl Volume for Recorder {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.check(Op::Read, offset, buf.len() as u64)?;
        self.note(IoKind::Read, offset, buf.len() as u64);
        buf.fill(0);
        let k = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let end = offset + buf.len() as u64;
        if offset >= k.0 {
            return Ok(());
        }
        for page in offset / PAGE..end.div_ceil(PAGE) {
            if let Some(bytes) = k.1.get(&page) {
                let (from, to) = ((page * PAGE).max(offset), ((page + 1) * PAGE).min(end));
                buf[(from - offset) as usize..(to - offset) as usize].copy_from_slice(
                    &bytes[(from - page * PAGE) as usize..(to - page * PAGE) as usize],
                );
            }
        }
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.check(Op::Write, offset, buf.len() as u64)?;
        self.note(IoKind::Write, offset, buf.len() as u64);
        let mut k = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let end = (offset + buf.len() as u64).min(k.0);
        if offset >= end {
            return Ok(());
        }
        for page in offset / PAGE..end.div_ceil(PAGE) {
            let (from, to) = ((page * PAGE).max(offset), ((page + 1) * PAGE).min(end));
            let bytes =
                k.1.entry(page)
                    .or_insert_with(|| vec![0u8; PAGE as usize].into_boxed_slice());
            bytes[(from - page * PAGE) as usize..(to - page * PAGE) as usize]
                .copy_from_slice(&buf[(from - offset) as usize..(to - offset) as usize]);
        }
        Ok(())
    }
    fn flush(&self) -> Result<()> {
        self.note(IoKind::Flush, 0, 0);
        Ok(())
    }
    // A FUA write is what the trait's default makes of it, a write and a flush:
    // the simulated devices have no FUA of their own.
    fn optimal_io_size(&self) -> Option<u64> {
        self.optimal
    }
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

/// A request or a cleaner tick on its way through the operations it caused.
#[derive(Debug)]
struct Chain {
    /// The submitter's id; `None` for the cleaner's.
    host_id: Option<u64>,
    ops: Vec<CacheOp>,
    /// Host reads do their origin reads without the lock.
    read: bool,
    next: usize,
    holds: bool,
    /// The lock was taken once (every request takes it on entry).
    entered: bool,
}

type Cached = CachedVolume<Recorder, Recorder>;

/// The real cache tier over a simulated cache device and origin.
#[derive(Debug)]
pub struct SimCache {
    name: String,
    volume: Arc<Cached>,
    clock: Arc<VirtualClock>,
    ops: Arc<Mutex<Vec<CacheOp>>>,
    cache: Box<dyn Device>,
    origin: Box<dyn Device>,
    cache_next: Option<Ns>,
    origin_next: Option<Ns>,
    chains: HashMap<u64, Chain>,
    next_chain: u64,
    /// Device request id -> chain.
    in_flight: HashMap<u64, u64>,
    next_op: u64,
    holder: Option<u64>,
    waiting: VecDeque<u64>,
    ready: VecDeque<u64>,
    finished: Vec<Completion>,
    /// The cleaner's next tick, and whether a tick's work is under way.
    tick: Option<Ns>,
    cleaning: bool,
    interval: Ns,
    buf: Vec<u8>,
    errors: Vec<String>,
    events: Option<Vec<(Ns, Event)>>,
    /// Every operation issued to the devices, by side, when kept.
    issued: Option<Vec<CacheOp>>,
    spec_info: Vec<Param>,
}

/// The signature a simulated origin is bound by (it has no file to sign).
const SIM_ORIGIN: OriginId = OriginId::Signature(*b"raidlab simulated origin\0\0\0\0\0\0\0\0");

impl SimCache {
    /// Create the cache (its metadata written on the recording cache device;
    /// that takes no virtual time) and open it, empty, at virtual time 0.
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
        let ops = Arc::new(Mutex::new(Vec::new()));
        let cache = Recorder {
            name: cache_name,
            size: cache_bytes,
            side: Side::Cache,
            optimal: None,
            ops: ops.clone(),
            kept: Mutex::new((u64::MAX, HashMap::new())),
        };
        let origin = Recorder {
            name: format!("{} (simulated origin)", spec.origin.info().name),
            size: spec.origin.capacity(),
            side: Side::Origin,
            optimal: spec.origin_optimal_io,
            ops: ops.clone(),
            kept: Mutex::new((0, HashMap::new())),
        };
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
        let volume = CachedVolume::open(cache, origin, SIM_ORIGIN, clock.clone())
            .map_err(|e| e.to_string())?;
        // Creating and opening is set-up, not part of any run.
        ops.lock().unwrap_or_else(|p| p.into_inner()).clear();
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
        Ok(SimCache {
            name: spec.name,
            volume: Arc::new(volume),
            clock,
            ops,
            cache_next: spec.cache.next_event(),
            origin_next: spec.origin.next_event(),
            cache: spec.cache,
            origin: spec.origin,
            chains: HashMap::new(),
            next_chain: 0,
            in_flight: HashMap::new(),
            next_op: 0,
            holder: None,
            waiting: VecDeque::new(),
            ready: VecDeque::new(),
            finished: Vec::new(),
            tick: None,
            cleaning: false,
            interval: raidlab_cache::driver::DEFAULT_INTERVAL.as_nanos() as Ns,
            buf: Vec::new(),
            errors: Vec::new(),
            events: None,
            issued: None,
            spec_info,
        })
    }

    /// The real cache: its statistics, superblock and tunables.
    pub fn volume(&self) -> &Arc<CachedVolume<Recorder, Recorder>> {
        &self.volume
    }

    /// The cache's statistics now.
    pub fn stats(&self) -> Stats {
        self.volume.stats()
    }

    /// Keep every host request and cleaner tick with its virtual time
    /// ([`SimCache::events`]), so a test can replay them on a real cache.
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

    fn take_ops(&self) -> Vec<CacheOp> {
        std::mem::take(&mut *self.ops.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn over_target(&self) -> bool {
        let s = self.volume.stats();
        let sb = self.volume.superblock();
        s.dirty_blocks > s.cache_blocks * u64::from(sb.dirty_target_pct) / 100
    }

    /// Run a host request through the real cache now and start its operations.
    fn start(&mut self, now: Ns, req: Request) {
        self.clock.set(now);
        if let Some(e) = self.events.as_mut() {
            e.push((
                now,
                Event::Request {
                    kind: req.kind,
                    offset: req.offset,
                    len: req.len,
                },
            ));
        }
        let len = req.len as usize;
        let r = match req.kind {
            IoKind::Read => {
                self.buf.resize(len, 0);
                self.volume.read_at(&mut self.buf[..len], req.offset)
            }
            IoKind::Write => {
                self.buf.resize(len, 0);
                self.volume.write_at(&self.buf[..len], req.offset)
            }
            IoKind::Zero => self.volume.write_zeroes(req.offset, req.len),
            IoKind::Flush => self.volume.flush(),
            // The cache passes no discard on (raidlab-cache has none yet).
            IoKind::Trim => Ok(()),
        };
        if let Err(e) = r {
            self.errors.push(format!(
                "{:?} of {} bytes at {}: {}",
                req.kind, req.len, req.offset, e
            ));
        }
        let ops = self.take_ops();
        self.add_chain(Some(req.id), ops, req.kind == IoKind::Read);
        if matches!(req.kind, IoKind::Write | IoKind::Zero)
            && self.tick.is_none()
            && !self.cleaning
            && self.over_target()
        {
            self.tick = Some(now + self.interval);
        }
    }

    fn add_chain(&mut self, host_id: Option<u64>, ops: Vec<CacheOp>, read: bool) {
        let seq = self.next_chain;
        self.next_chain += 1;
        self.chains.insert(
            seq,
            Chain {
                host_id,
                ops,
                read,
                next: 0,
                holds: false,
                entered: false,
            },
        );
        self.ready.push_back(seq);
    }

    fn clean_tick(&mut self, now: Ns) {
        self.clock.set(now);
        if let Some(e) = self.events.as_mut() {
            e.push((now, Event::CleanTick));
        }
        if let Err(e) = self.volume.clean_tick() {
            self.errors.push(format!("cleaner tick: {e}"));
        }
        let ops = self.take_ops();
        if ops.is_empty() {
            if self.over_target() {
                self.tick = Some(now + self.interval);
            }
            return;
        }
        self.cleaning = true;
        self.add_chain(None, ops, false);
    }

    fn release(&mut self, seq: u64) {
        if self.holder == Some(seq) {
            self.holder = None;
            if let Some(w) = self.waiting.pop_front() {
                self.holder = Some(w);
                if let Some(c) = self.chains.get_mut(&w) {
                    c.holds = true;
                    c.entered = true;
                }
                self.ready.push_back(w);
            }
        }
        if let Some(c) = self.chains.get_mut(&seq) {
            c.holds = false;
        }
    }

    /// Take the lock for `seq`, or queue it behind the holder: whether it holds it.
    fn take_lock(&mut self, seq: u64) -> bool {
        match self.holder {
            Some(h) if h == seq => true,
            Some(_) => {
                self.waiting.push_back(seq);
                false
            }
            None => {
                self.holder = Some(seq);
                if let Some(c) = self.chains.get_mut(&seq) {
                    c.holds = true;
                    c.entered = true;
                }
                true
            }
        }
    }

    /// Move a chain on as far as it goes now: take or give back the lock,
    /// issue its next operation, or finish it.
    fn proceed(&mut self, now: Ns, seq: u64) {
        let Some(c) = self.chains.get(&seq) else {
            return;
        };
        // Every request and tick takes the lock on entry, as `read_at`,
        // `write_at`, `flush` and `clean_tick` do, even when what it then does
        // first is an origin read without it.
        if !c.entered && !self.take_lock(seq) {
            return;
        }
        let Some(c) = self.chains.get(&seq) else {
            return;
        };
        let Some(op) = c.ops.get(c.next).copied() else {
            self.release(seq);
            if let Some(c) = self.chains.remove(&seq) {
                match c.host_id {
                    Some(id) => self.finished.push(Completion { id, at: now }),
                    None => {
                        self.cleaning = false;
                        if self.over_target() {
                            self.tick = Some(now + self.interval);
                        }
                    }
                }
            }
            return;
        };
        let unlocked = c.read && op.side == Side::Origin && op.kind == IoKind::Read;
        if unlocked {
            self.release(seq);
        } else if !c.holds && !self.take_lock(seq) {
            return;
        }
        if let Some(c) = self.chains.get_mut(&seq) {
            c.next += 1;
        }
        let id = self.next_op;
        self.next_op += 1;
        self.in_flight.insert(id, seq);
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

    fn run_ready(&mut self, now: Ns) {
        while let Some(seq) = self.ready.pop_front() {
            self.proceed(now, seq);
        }
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
        self.start(now, req);
        self.run_ready(now);
    }

    fn next_event(&self) -> Option<Ns> {
        [
            self.cache_next,
            self.origin_next,
            self.tick,
            self.finished.iter().map(|c| c.at).min(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn advance(&mut self, now: Ns, done: &mut Vec<Completion>) {
        self.clock.set(now);
        let mut dev_done = Vec::new();
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
                if let Some(seq) = self.in_flight.remove(&c.id) {
                    self.ready.push_back(seq);
                }
            }
            if self.tick.is_some_and(|t| t <= now) {
                self.tick = None;
                self.clean_tick(now);
                any = true;
            }
            if !any && self.ready.is_empty() {
                break;
            }
            self.run_ready(now);
        }
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
