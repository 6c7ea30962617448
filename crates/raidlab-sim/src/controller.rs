//! A hardware RAID card in virtual time: a battery- or flash-backed write-back
//! cache that acknowledges writes and destages them (gathering whole stripes),
//! sequential read-ahead, a per-command latency and the host link's bandwidth, in
//! front of an array the card builds from its disks; and the card's pass-through
//! mode, where each disk is its own device with the card's latency added.
//!
//! Decides: what the card's cache holds, when it acknowledges, what it destages and
//! in which order. It must never decide how a stripe is written: the array behind
//! the cache is raidlab's own engine (a [`SimArray`] whose "host" is the card's
//! parity engine), so the card's read-modify-write and full-stripe costs come from
//! the same planner as software RAID's. Real firmware differs in its details; the
//! tables say the card is modelled this way.

use crate::array::SimArray;
use crate::device::{hand_out, Completion, Device, Kind, ModelInfo, Ns, Param, Request, MS, US};
use std::collections::{BTreeMap, VecDeque};

/// A card's parameters, each with its unit in its name.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CardParams {
    pub description: String,
    /// Write cache in bytes (battery- or flash-backed, so a flush need not wait
    /// for it); 0 for none.
    pub cache_bytes: u64,
    /// Acknowledge writes from the cache (write-back) or only once on disk.
    pub write_back: bool,
    /// Dirty fraction of the cache above which partial stripes are destaged at
    /// once, not only when they have waited `stripe_hold_ms`.
    pub high_watermark: f64,
    /// How long a partial stripe waits in the cache for the rest of it, in ms.
    pub stripe_hold_ms: f64,
    /// Destage writes the card keeps in flight to its array.
    pub destage_depth: u32,
    /// Stripes read ahead when the card sees a sequential read stream (0: off).
    pub read_ahead_stripes: u32,
    /// The card's parity engine (XOR and RAID 6 P+Q), decimal MB/s.
    pub parity_mb_per_s: f64,
    /// Firmware time per host command, in µs.
    pub command_overhead_us: f64,
    /// The host link (PCIe), decimal MB/s, shared by all transfers.
    pub host_link_mb_per_s: f64,
    /// Disk ports.
    pub ports: u32,
    /// Read data of a parity array (RAID 5/6) the card keeps in its cache, in
    /// bytes (0: none). Parity arrays' reads go through the card's cache, whose
    /// stripe buffers the parity engine needs; what is read first stays until a
    /// write changes it (no replacement). RAID 0/1/10 reads bypass the cache, as
    /// MegaRAID's Direct I/O does.
    #[serde(default)]
    pub parity_read_cache_bytes: u64,
    #[serde(default)]
    pub sources: Vec<String>,
}

impl CardParams {
    pub fn check(&self) -> Result<(), String> {
        let positive = [
            ("parity_mb_per_s", self.parity_mb_per_s),
            ("host_link_mb_per_s", self.host_link_mb_per_s),
        ];
        for (k, v) in positive {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("{k} must be a positive number (got {v})"));
            }
        }
        for (k, v) in [
            ("command_overhead_us", self.command_overhead_us),
            ("stripe_hold_ms", self.stripe_hold_ms),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{k} cannot be negative (got {v})"));
            }
        }
        if !(0.0..=1.0).contains(&self.high_watermark) {
            return Err(format!(
                "high_watermark is a fraction of the cache between 0 and 1 (got {})",
                self.high_watermark
            ));
        }
        if self.parity_read_cache_bytes > self.cache_bytes {
            return Err(format!(
                "parity_read_cache_bytes ({}) cannot exceed cache_bytes ({})",
                self.parity_read_cache_bytes, self.cache_bytes
            ));
        }
        if self.ports == 0 {
            return Err("a card needs at least one port".into());
        }
        if self.destage_depth == 0 {
            return Err("destage_depth must be at least 1".into());
        }
        Ok(())
    }

    pub fn params(&self) -> Vec<Param> {
        let p = |name: &str, value: f64, unit: &str| Param {
            name: name.into(),
            value,
            unit: unit.into(),
        };
        vec![
            p("cache_bytes", self.cache_bytes as f64, "bytes"),
            p("write_back", f64::from(u8::from(self.write_back)), "bool"),
            p("high_watermark", self.high_watermark, "fraction"),
            p("stripe_hold_ms", self.stripe_hold_ms, "ms"),
            p("destage_depth", f64::from(self.destage_depth), "requests"),
            p(
                "read_ahead_stripes",
                f64::from(self.read_ahead_stripes),
                "stripes",
            ),
            p("parity_mb_per_s", self.parity_mb_per_s, "MB/s"),
            p("command_overhead_us", self.command_overhead_us, "µs"),
            p("host_link_mb_per_s", self.host_link_mb_per_s, "MB/s"),
            p("ports", f64::from(self.ports), "ports"),
            p(
                "parity_read_cache_bytes",
                self.parity_read_cache_bytes as f64,
                "bytes",
            ),
        ]
    }

    fn overhead(&self) -> Ns {
        (self.command_overhead_us * US as f64).round() as Ns
    }
}

/// Dirty bytes of one stripe: disjoint sorted ranges and when the first arrived.
#[derive(Debug, Clone)]
struct Dirty {
    ranges: Vec<(u64, u64)>,
    since: Ns,
}

impl Dirty {
    fn bytes(&self) -> u64 {
        self.ranges.iter().map(|(s, e)| e - s).sum()
    }
    /// Add [s, e), merging; returns the bytes newly dirtied.
    fn add(&mut self, s: u64, e: u64) -> u64 {
        let before = self.bytes();
        self.ranges.push((s, e));
        self.ranges.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(self.ranges.len());
        for &(s, e) in &self.ranges {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        self.ranges = merged;
        self.bytes() - before
    }
    fn covers(&self, s: u64, e: u64) -> bool {
        self.ranges.iter().any(|&(a, b)| a <= s && e <= b)
    }
}

/// What one of the card's own requests to its array is for.
#[derive(Debug, Clone, Copy)]
enum Inner {
    /// A host request passed to the array (reads that miss; writes in
    /// write-through mode), completing host request `id`. A read carries the
    /// byte range it fetches (with any read-ahead): what the cache holds once its
    /// data has arrived.
    Host {
        id: u64,
        kind: Kind,
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
    array: SimArray,
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
    later: BTreeMap<(Ns, u64), (Inner, Kind, u64, u64)>,
}

impl RaidCard {
    /// `array` is the card's array over its disks; its host cost should be the
    /// card's parity engine with no per-request cost (the card adds its own).
    pub fn new(params: CardParams, array: SimArray) -> Result<RaidCard, String> {
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
    pub fn array(&self) -> &SimArray {
        &self.array
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
        kind: Kind,
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
            },
        );
        id
    }

    fn cache_limit(&self) -> u64 {
        self.params.cache_bytes
    }

    /// Take a host write into the cache if it fits; false if it must wait.
    fn absorb(&mut self, now: Ns, req: Request) -> bool {
        let new_bytes = self.uncached_bytes(req.offset, req.len);
        if self.held + new_bytes > self.cache_limit() {
            return false;
        }
        let (mut s, e) = (req.offset, req.offset + req.len);
        while s < e {
            let stripe = s / self.stripe;
            let end = ((stripe + 1) * self.stripe).min(e);
            let d = self.dirty.entry(stripe).or_insert(Dirty {
                ranges: Vec::new(),
                since: now,
            });
            self.held += d.add(s, end);
            if self.clean_set.remove(&stripe).is_some() {
                self.clean.retain(|&c| c != stripe);
            }
            s = end;
        }
        let at = self.link(now + self.params.overhead(), req.len);
        self.pending.push(Completion { id: req.id, at });
        true
    }

    fn uncached_bytes(&self, offset: u64, len: u64) -> u64 {
        let (mut s, e) = (offset, offset + len);
        let mut n = 0;
        while s < e {
            let stripe = s / self.stripe;
            let end = ((stripe + 1) * self.stripe).min(e);
            let already = self.dirty.get(&stripe).map_or(0, |d| {
                d.ranges
                    .iter()
                    .map(|&(a, b)| b.min(end).saturating_sub(a.max(s)))
                    .sum()
            });
            n += (end - s) - already;
            s = end;
        }
        n
    }

    fn cached(&self, offset: u64, len: u64) -> bool {
        let (mut s, e) = (offset, offset + len);
        while s < e {
            let stripe = s / self.stripe;
            let end = ((stripe + 1) * self.stripe).min(e);
            let dirty = self.dirty.get(&stripe).is_some_and(|d| d.covers(s, end));
            if !dirty && !self.clean_set.contains_key(&stripe) {
                return false;
            }
            s = end;
        }
        true
    }

    /// Destage what is due, keeping `destage_depth` writes in flight.
    fn destage(&mut self, now: Ns) {
        let hold = (self.params.stripe_hold_ms * MS as f64).round() as Ns;
        let pressed = (self.held as f64) > self.params.high_watermark * self.cache_limit() as f64
            || !self.waiting.is_empty();
        self.wake = None;
        while self.destaging < self.params.destage_depth {
            // The next due stripe at or after the cursor, wrapping once.
            let due = |(&k, d): (&u64, &Dirty)| {
                let full =
                    d.ranges.len() == 1 && d.ranges[0] == (k * self.stripe, (k + 1) * self.stripe);
                (full || pressed || now >= d.since + hold).then_some(k)
            };
            let pick = self
                .dirty
                .range(self.cursor..)
                .find_map(due)
                .or_else(|| self.dirty.range(..self.cursor).find_map(due));
            let Some(k) = pick else { break };
            let d = self.dirty.remove(&k).expect("picked");
            self.cursor = k + 1;
            for (s, e) in d.ranges {
                self.destaging += 1;
                self.send_down(
                    now,
                    now,
                    Inner::Destage { len: e - s },
                    Kind::Write,
                    s,
                    e - s,
                );
            }
        }
        // Wake when the oldest partial stripe's hold runs out.
        if let Some(t) = self.dirty.values().map(|d| d.since + hold).min() {
            if t > now {
                self.wake = Some(t);
            }
        }
    }

    /// Is [s, e) all in the kept read data?
    fn kept_covers(&self, s: u64, e: u64) -> bool {
        self.kept
            .range(..=s)
            .next_back()
            .is_some_and(|(_, &end)| end >= e)
    }

    /// Keep [s, e) as far as room allows (first come, first kept).
    fn keep(&mut self, s: u64, e: u64) {
        let room = self
            .params
            .parity_read_cache_bytes
            .saturating_sub(self.kept_bytes);
        if !self.parity || room == 0 {
            return;
        }
        let (mut s, mut e) = (s, e);
        // What is already kept inside [s, e) costs no room: drop the overlaps and
        // re-add the merged range.
        let overlapping: Vec<(u64, u64)> = self
            .kept
            .range(..e)
            .filter(|(_, &end)| end >= s)
            .map(|(&a, &b)| (a, b))
            .collect();
        let already: u64 = overlapping
            .iter()
            .map(|&(a, b)| b.min(e).saturating_sub(a.max(s)))
            .sum();
        let new = (e - s) - already;
        if new > room {
            if already > 0 {
                return;
            }
            // Only the first `room` bytes fit: keep that prefix.
            e = s + room;
        }
        for (a, b) in overlapping {
            self.kept.remove(&a);
            self.kept_bytes -= b - a;
            s = s.min(a);
            e = e.max(b);
        }
        self.kept.insert(s, e);
        self.kept_bytes += e - s;
    }

    /// A write changes [s, e): the kept copy of it is dropped.
    fn forget(&mut self, s: u64, e: u64) {
        let overlapping: Vec<(u64, u64)> = self
            .kept
            .range(..e)
            .filter(|(_, &end)| end > s)
            .map(|(&a, &b)| (a, b))
            .collect();
        for (a, b) in overlapping {
            self.kept.remove(&a);
            self.kept_bytes -= b - a;
            if a < s {
                self.kept.insert(a, s);
                self.kept_bytes += s - a;
            }
            if b > e {
                self.kept.insert(e, b);
                self.kept_bytes += b - e;
            }
        }
    }

    fn read(&mut self, now: Ns, req: Request) {
        let sequential = self.last_read_end == Some(req.offset);
        self.last_read_end = Some(req.offset + req.len);
        if self.cached(req.offset, req.len) || self.kept_covers(req.offset, req.offset + req.len) {
            let at = self.link(now + self.params.overhead(), req.len);
            self.pending.push(Completion { id: req.id, at });
            return;
        }
        // Covered by stripes still being read ahead: wait for the latest of
        // those fetches instead of reading the disks again.
        if let Some(fetch) = self.fetch_covering(req.offset, req.len) {
            self.waiters
                .entry(fetch)
                .or_default()
                .push((req.id, req.len));
            return;
        }
        let mut len = req.len;
        let mut ahead = None;
        if sequential && self.params.read_ahead_stripes > 0 && self.params.cache_bytes > 0 {
            // Read on to the end of the stripes ahead; they join the cache when
            // their data has arrived.
            // From the request's first stripe to `read_ahead_stripes` past its
            // last: never less than the request itself.
            let first = req.offset / self.stripe;
            let last = (req.offset + req.len - 1) / self.stripe
                + u64::from(self.params.read_ahead_stripes);
            let end = ((last + 1) * self.stripe).min(self.array.capacity());
            len = end.max(req.offset + req.len) - req.offset;
            ahead = Some((first, last));
        }
        let id = self.send_down(
            now,
            now + self.params.overhead(),
            Inner::Host {
                id: req.id,
                kind: Kind::Read,
                len: req.len,
                span: (req.offset, req.offset + len),
            },
            Kind::Read,
            req.offset,
            len,
        );
        if let Some((first, last)) = ahead {
            for s in first..=last {
                if !self.clean_set.contains_key(&s) {
                    self.fetching.insert(s, id);
                }
            }
        }
    }

    /// The fetch in flight that, with the clean stripes, covers a read, if the
    /// read is covered and some of it is still arriving.
    fn fetch_covering(&self, offset: u64, len: u64) -> Option<u64> {
        let (first, last) = (offset / self.stripe, (offset + len - 1) / self.stripe);
        let mut latest = None;
        for s in first..=last {
            match self.fetching.get(&s) {
                Some(&id) => latest = latest.max(Some(id)),
                None if self.clean_set.contains_key(&s) => {}
                None => return None,
            }
        }
        latest
    }

    /// A read's data has arrived: its read-ahead stripes are clean in the cache
    /// and parity arrays keep what was read.
    fn arrived(&mut self, inner: u64, span: (u64, u64)) {
        let (first, last) = (span.0 / self.stripe, (span.1 - 1) / self.stripe);
        for s in first..=last {
            if self.fetching.get(&s) == Some(&inner) {
                self.fetching.remove(&s);
                if self.clean_set.insert(s, ()).is_none() {
                    self.clean.push_back(s);
                }
            }
        }
        // The read-ahead buffer holds a stream's window (twice it, so the window
        // being consumed and the next fit), not the whole cache: a prefetch is
        // not a read cache.
        let window = 2 * (u64::from(self.params.read_ahead_stripes) + 1);
        let room = (self.cache_limit().saturating_sub(self.held) / self.stripe.max(1)).min(window);
        while self.clean.len() as u64 > room {
            if let Some(old) = self.clean.pop_front() {
                self.clean_set.remove(&old);
            }
        }
        self.keep(span.0, span.1);
    }
}

impl Device for RaidCard {
    fn capacity(&self) -> u64 {
        self.array.capacity()
    }

    fn submit(&mut self, now: Ns, req: Request) {
        if req.kind == Kind::Write || req.kind == Kind::Trim {
            self.forget(req.offset, req.offset + req.len);
        }
        match req.kind {
            Kind::Read => self.read(now, req),
            // A write larger than the whole cache could never fit: it goes
            // through, as a card bypasses its cache for it.
            Kind::Write if self.params.write_back && req.len <= self.params.cache_bytes => {
                if !self.waiting.is_empty() || !self.absorb(now, req) {
                    self.waiting.push_back((now, req));
                }
                self.destage(now);
            }
            // The cache is non-volatile, so a flush has nothing to wait for;
            // without a write-back cache nothing is held either.
            Kind::Flush | Kind::Trim => {
                self.pending.push(Completion {
                    id: req.id,
                    at: now + self.params.overhead(),
                });
            }
            Kind::Write => {
                let at = self.link(now + self.params.overhead(), req.len);
                self.send_down(
                    now,
                    at,
                    Inner::Host {
                        id: req.id,
                        kind: Kind::Write,
                        len: req.len,
                        span: (req.offset, req.offset + req.len),
                    },
                    Kind::Write,
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
                    let at = if kind == Kind::Read {
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
}

/// A disk behind a card in pass-through (JBOD) mode: the disk as it is, each
/// command delayed by the card's firmware.
#[derive(Debug)]
pub struct PassThrough {
    disk: Box<dyn Device>,
    overhead: Ns,
    pending: Vec<Completion>,
    name: String,
}

impl PassThrough {
    pub fn new(disk: Box<dyn Device>, card: &CardParams) -> PassThrough {
        PassThrough {
            disk,
            overhead: card.overhead(),
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
        self.disk.submit(now, req);
    }
    fn next_event(&self) -> Option<Ns> {
        [
            self.disk.next_event(),
            self.pending.iter().map(|c| c.at).min(),
        ]
        .into_iter()
        .flatten()
        .min()
    }
    fn advance(&mut self, now: Ns, done: &mut Vec<Completion>) {
        let mut from_disk = Vec::new();
        if self.disk.next_event().is_some_and(|t| t <= now) {
            self.disk.advance(now, &mut from_disk);
        }
        for c in from_disk {
            self.pending.push(Completion {
                id: c.id,
                at: c.at + self.overhead,
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
