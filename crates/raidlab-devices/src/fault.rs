//! A volume that misbehaves on purpose: it wraps any other volume and injects the
//! faults a RAID engine must survive (failing I/O, silently corrupt data, a volatile
//! write cache that loses or tears writes on power loss), for tests and simulators.
//!
//! Faults are switched on and off through `&self`, so a test can change them while an
//! array uses the volume through an `Arc`. Whatever is injected, this wrapper must
//! never touch bytes outside a request (every request is checked with
//! [`check_range`]) except where a misdirection sends it (within the range the
//! caller gave), never change stored data except where a method says so
//! ([`FaultVolume::corrupt_stored`], `FaultVolume::flush`, a power cut, a
//! misdirected write), and never panic.
//!
//! The volatile cache keeps two structures: a log of pending writes in arrival order
//! (what a flush or a power cut applies to the inner volume) and a sector-indexed map
//! of the newest pending bytes (what reads see over the inner volume), both in
//! `overlay`. The map marks which bytes of each sector it holds, so unaligned
//! writes need no read-modify-write of the inner volume and the inner volume is
//! never read behind a reader's back.
//!
//! [`check_range`]: raidlab_core::check_range

use raidlab_core::{check_range_with, Error, ErrorKind, Op, Result, Volume};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

mod overlay;
use overlay::Overlay;

/// Granularity of torn writes and of the read overlay: the atomic unit of a disk.
pub const SECTOR: u64 = 512;

/// Counters for tests. Requests are counted when they pass the range check, whether
/// or not a fault then refuses them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultStats {
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub discards: u64,
    /// Requests refused by an injected fault (including "device lost power").
    pub injected_failures: u64,
    /// Reads returned with at least one byte flipped by [`FaultVolume::corrupt_reads`].
    pub corrupted_reads: u64,
}

/// What happens to writes still in the volatile cache when the power goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerCutPolicy {
    /// Every unflushed write is lost.
    DropAll,
    /// Every unflushed write reaches the medium, in the order it was issued.
    KeepAll,
    /// Each unflushed write is dropped, kept or torn (a subset or a prefix of its
    /// sectors kept), and the surviving sectors reach the medium in a shuffled order,
    /// all chosen by a ChaCha RNG seeded with this value.
    Random(u64),
}

/// What a power cut did to the writes that were in the volatile cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PowerCutReport {
    pub dropped: usize,
    pub kept: usize,
    pub torn: usize,
}

/// Power that goes in the middle of a request: shared by the members of one
/// array ([`FaultVolume::set_tripwire`]), it lets the first `writes - 1`
/// member writes through and loses power at the next one. From then on
/// every write, write-zeroes, discard and flush of those members is
/// accepted and does nothing (the machine is gone: nobody sees the answer),
/// reads see what was written before, and the owner cuts the members'
/// power ([`FaultVolume::power_cut`]) once the request returns. A cut inside
/// a superblock commit, between a data write and its log, or between a
/// member's write and its flush is what it is for.
#[derive(Debug)]
pub struct Tripwire {
    left: AtomicU64,
    tripped: AtomicBool,
}

impl Tripwire {
    /// Power goes at the `writes`-th member write from now (1: the first).
    pub fn new(writes: u64) -> Arc<Tripwire> {
        Arc::new(Tripwire {
            left: AtomicU64::new(writes.max(1)),
            tripped: AtomicBool::new(false),
        })
    }

    /// Whether the power went.
    pub fn tripped(&self) -> bool {
        self.tripped.load(Ordering::SeqCst)
    }

    /// Whether a mutating request may still reach the member; counts it.
    fn pass(&self, counts: bool) -> bool {
        if self.tripped() {
            return false;
        }
        if counts && self.left.fetch_sub(1, Ordering::SeqCst) <= 1 {
            self.tripped.store(true, Ordering::SeqCst);
            return false;
        }
        true
    }
}

/// A wrapper injecting failures, corruption and power loss into `inner`.
#[derive(Debug)]
pub struct FaultVolume<V> {
    inner: V,
    volatile_cache: bool,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    fail_all: bool,
    fail_reads: Vec<Range<u64>>,
    fail_writes: Vec<Range<u64>>,
    corrupt_reads: Vec<Range<u64>>,
    powered_off: bool,
    overlay: Overlay,
    stats: FaultStats,
    misdirect_write: Option<(Range<u64>, u64)>,
    misdirect_read: Option<(Range<u64>, u64)>,
    misdirected: Vec<Misdirected>,
    tripwire: Option<Arc<Tripwire>>,
}

/// A request a misdirection sent elsewhere on the same volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Misdirected {
    pub op: Op,
    /// Where the request asked to go, and where it went instead.
    pub intended: Range<u64>,
    pub landed: Range<u64>,
    /// A write: the intended bytes held something else than the data, so
    /// they are now stale. A read: the landed bytes differ from the
    /// intended ones, so the reader got wrong data.
    pub intended_differs: bool,
    /// A write: the landed bytes held something else, so they are now
    /// overwritten. A read: always false.
    pub landed_differs: bool,
}

fn overlaps(range: &Range<u64>, offset: u64, len: u64) -> bool {
    len > 0 && range.start < range.end && offset < range.end && range.start < offset + len
}

/// Split a write at absolute sector boundaries: the pieces a disk may tear it into.
fn sector_pieces(offset: u64, data: &[u8]) -> Vec<(u64, &[u8])> {
    let mut pieces = Vec::new();
    let mut pos = 0usize;
    while pos < data.len() {
        let abs = offset + pos as u64;
        let n = ((SECTOR - abs % SECTOR) as usize).min(data.len() - pos);
        pieces.push((abs, &data[pos..pos + n]));
        pos += n;
    }
    pieces
}

impl<V: Volume> FaultVolume<V> {
    /// A write-through wrapper: writes reach `inner` before `write_at` returns, so a
    /// power cut loses nothing.
    pub fn new(inner: V) -> Self {
        FaultVolume {
            inner,
            volatile_cache: false,
            state: Mutex::new(State::default()),
        }
    }

    /// A wrapper with a volatile write cache: writes stay in memory until
    /// [`Volume::flush`], and a power cut decides what becomes of them.
    pub fn with_volatile_cache(inner: V) -> Self {
        FaultVolume {
            volatile_cache: true,
            ..Self::new(inner)
        }
    }

    pub fn inner(&self) -> &V {
        &self.inner
    }

    pub fn has_volatile_cache(&self) -> bool {
        self.volatile_cache
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Only an inner volume panicking mid-I/O can poison the lock, and no call
        // into the inner volume happens with the state half-updated: keep using it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Make every read, write, flush and discard fail (or work again).
    pub fn fail_all(&self, on: bool) {
        self.lock().fail_all = on;
    }

    /// Make reads overlapping `range` (bytes) fail. Ranges accumulate.
    pub fn fail_reads(&self, range: Range<u64>) {
        self.lock().fail_reads.push(range);
    }

    /// Make writes and discards overlapping `range` (bytes) fail. Ranges accumulate.
    pub fn fail_writes(&self, range: Range<u64>) {
        self.lock().fail_writes.push(range);
    }

    /// Make reads overlapping `range` return the overlapping bytes inverted (XOR
    /// 0xff) while the stored data stays intact: silent corruption on the way back.
    pub fn corrupt_reads(&self, range: Range<u64>) {
        self.lock().corrupt_reads.push(range);
    }

    /// The next write that falls wholly within `within` lands `delta` bytes
    /// further on (or back, when further would leave `within`; when neither
    /// fits, that write goes where asked and the next one is tried): the
    /// intended bytes keep their old contents, the landed ones are
    /// overwritten. Once only: a disk that misdirects one write, not a
    /// broken one. What it did is kept for [`FaultVolume::misdirected`].
    pub fn misdirect_next_write(&self, within: Range<u64>, delta: u64) {
        self.lock().misdirect_write = Some((within, delta));
    }

    /// The next read that falls wholly within `within` returns the bytes
    /// `delta` further on (or back), as [`FaultVolume::misdirect_next_write`]
    /// places them; nothing stored changes. Once only.
    pub fn misdirect_next_read(&self, within: Range<u64>, delta: u64) {
        self.lock().misdirect_read = Some((within, delta));
    }

    /// The misdirections that struck since the last call (taken).
    pub fn misdirected(&self) -> Vec<Misdirected> {
        std::mem::take(&mut self.lock().misdirected)
    }

    /// Forget a misdirection armed and not struck yet.
    pub fn disarm_misdirection(&self) {
        let mut st = self.lock();
        st.misdirect_write = None;
        st.misdirect_read = None;
    }

    /// Remove every failing and corrupting range and switch `fail_all` off. Power
    /// state and the volatile cache are left alone.
    pub fn clear_faults(&self) {
        let mut st = self.lock();
        st.fail_all = false;
        st.fail_reads.clear();
        st.fail_writes.clear();
        st.corrupt_reads.clear();
    }

    /// Invert `len` bytes at `offset` on the inner volume itself, bypassing faults and
    /// the volatile cache (cached bytes still shadow them until flushed over them).
    pub fn corrupt_stored(&self, offset: u64, len: u64) -> Result<()> {
        self.check(Op::Write, offset, len)?;
        // Hold the lock so a concurrent flush cannot interleave with the rewrite.
        let _st = self.lock();
        // Chunked, so corrupting a large span of a real disk needs no large buffer.
        const CHUNK: u64 = 1 << 20;
        let mut buf = vec![0u8; len.min(CHUNK) as usize];
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(CHUNK) as usize;
            let chunk = &mut buf[..n];
            self.inner.read_at(chunk, offset + done)?;
            chunk.iter_mut().for_each(|b| *b ^= 0xff);
            self.inner.write_at(chunk, offset + done)?;
            done += n as u64;
        }
        Ok(())
    }

    pub fn stats(&self) -> FaultStats {
        self.lock().stats
    }

    pub fn reset_stats(&self) {
        self.lock().stats = FaultStats::default();
    }

    /// Writes held in the volatile cache, not yet on the inner volume.
    pub fn pending_writes(&self) -> usize {
        self.lock().overlay.log.len()
    }

    /// Arm (or with `None` disarm) a power cut at a member write
    /// ([`Tripwire`]); the same tripwire is given to every member.
    pub fn set_tripwire(&self, wire: Option<Arc<Tripwire>>) {
        self.lock().tripwire = wire;
    }

    /// Whether a mutating request is lost to a tripped [`Tripwire`] (and
    /// counted toward it when `counts`).
    fn lost_to_tripwire(st: &State, counts: bool) -> bool {
        st.tripwire.as_ref().is_some_and(|t| !t.pass(counts))
    }

    pub fn is_powered(&self) -> bool {
        !self.lock().powered_off
    }

    /// Lose power: each unflushed write is dropped, kept or torn as chosen by a RNG
    /// seeded with `seed`; afterwards all I/O fails until [`FaultVolume::restart`].
    pub fn power_cut(&self, seed: u64) -> Result<PowerCutReport> {
        self.power_cut_with(PowerCutPolicy::Random(seed))
    }

    /// Lose power, deciding the fate of unflushed writes by `policy`. The device is
    /// off afterwards even if applying surviving writes to the inner volume failed
    /// (that error is returned after every surviving piece has been tried).
    pub fn power_cut_with(&self, policy: PowerCutPolicy) -> Result<PowerCutReport> {
        let mut st = self.lock();
        st.powered_off = true;
        // The cut a tripwire stood for has come: power back means writes land.
        st.tripwire = None;
        let overlay = std::mem::take(&mut st.overlay);
        let log = &overlay.log;
        let mut report = PowerCutReport::default();
        let mut survivors: Vec<(u64, &[u8])> = Vec::new();
        match policy {
            PowerCutPolicy::DropAll => report.dropped = log.len(),
            PowerCutPolicy::KeepAll => {
                report.kept = log.len();
                survivors.extend(log.iter().map(|w| (w.offset, overlay.data(w))));
            }
            PowerCutPolicy::Random(seed) => {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                for w in log {
                    match rng.gen_range(0..3u8) {
                        0 => report.dropped += 1,
                        1 => {
                            report.kept += 1;
                            survivors.extend(sector_pieces(w.offset, overlay.data(w)));
                        }
                        _ => {
                            report.torn += 1;
                            let pieces = sector_pieces(w.offset, overlay.data(w));
                            if rng.gen_bool(0.5) {
                                let keep = rng.gen_range(0..=pieces.len());
                                survivors.extend(pieces.into_iter().take(keep));
                            } else {
                                survivors.extend(pieces.into_iter().filter(|_| rng.gen_bool(0.5)));
                            }
                        }
                    }
                }
                // A disk's cache drains in whatever order suits it, not issue order.
                survivors.shuffle(&mut rng);
            }
        }
        let mut first_error = None;
        for (offset, data) in survivors {
            if let Err(e) = self.inner.write_at(data, offset) {
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(report),
        }
    }

    /// Power back on. Injected faults stay as they were.
    pub fn restart(&self) {
        self.lock().powered_off = false;
    }

    fn injected(&self, op: Op, what: String, range: Option<(u64, u64)>) -> Error {
        let e = Error::new(ErrorKind::Io, op, format!("injected fault: {what}"))
            .on_device(self.inner.name());
        match range {
            Some((offset, len)) => e.at(offset, len),
            None => e,
        }
    }

    /// A discard or write-zeroes: counted and faulted as `op`, then done
    /// below by `f`. With a volatile cache, the cache is drained first:
    /// modelling forgotten or zeroed bytes inside it would depend on what the
    /// inner volume returns for them, and an older cached write must not land
    /// over the range later; draining keeps ordering exact at the price of
    /// making earlier writes durable early (never less safe).
    fn drained(
        &self,
        op: Op,
        offset: u64,
        len: u64,
        f: impl FnOnce(&V) -> Result<()>,
    ) -> Result<()> {
        self.check(op, offset, len)?;
        let mut st = self.lock();
        if op == Op::Discard {
            st.stats.discards = st.stats.discards.saturating_add(1);
        } else {
            st.stats.writes = st.stats.writes.saturating_add(1);
        }
        self.check_faults(&mut st, op, Some((offset, len)))?;
        if Self::lost_to_tripwire(&st, true) {
            return Ok(());
        }
        if self.volatile_cache {
            self.drain(&mut st)?;
        } else {
            drop(st);
        }
        f(&self.inner)
    }

    /// The bytes at `offset` as a reader sees them now (the medium under the
    /// volatile cache).
    fn current(&self, st: &State, buf: &mut [u8], offset: u64) -> Result<()> {
        self.inner.read_at(buf, offset)?;
        if self.volatile_cache {
            st.overlay.overlay(buf, offset);
        }
        Ok(())
    }

    /// Refuse a request outside the volume (the name is made only for the
    /// error).
    fn check(&self, op: Op, offset: u64, len: u64) -> Result<()> {
        check_range_with(|| self.inner.name(), op, self.inner.size(), offset, len)
    }

    /// Refuse the request if a fault covers it, counting the refusal.
    fn check_faults(&self, st: &mut State, op: Op, range: Option<(u64, u64)>) -> Result<()> {
        match refusal(st, op, range) {
            Some(why) => {
                st.stats.injected_failures = st.stats.injected_failures.saturating_add(1);
                Err(self.injected(op, why, range))
            }
            None => Ok(()),
        }
    }

    /// Write the cached writes to the inner volume in issue order. The cache is only
    /// emptied once all of them landed: replaying a prefix again is harmless.
    fn drain(&self, st: &mut State) -> Result<()> {
        for w in &st.overlay.log {
            self.inner.write_at(st.overlay.data(w), w.offset)?;
        }
        st.overlay.clear();
        Ok(())
    }
}

/// Where a request of `len` bytes at `offset` lands under an armed
/// misdirection `(within, delta)`, if it strikes this request.
fn misdirection(armed: &Option<(Range<u64>, u64)>, offset: u64, len: u64) -> Option<u64> {
    let (within, delta) = armed.as_ref()?;
    let end = offset.checked_add(len)?;
    if len == 0 || offset < within.start || end > within.end {
        return None;
    }
    if end + delta <= within.end {
        Some(offset + delta)
    } else if offset >= within.start + delta {
        Some(offset - delta)
    } else {
        None
    }
}

/// Why a fault refuses this request, if one does. Flushes carry no range, so only
/// power loss and `fail_all` refuse them.
fn refusal(st: &State, op: Op, range: Option<(u64, u64)>) -> Option<String> {
    if st.powered_off {
        return Some("device lost power".to_string());
    }
    if st.fail_all {
        return Some("every I/O fails".to_string());
    }
    let (offset, len) = range?;
    let failing = match op {
        Op::Read => &st.fail_reads,
        _ => &st.fail_writes,
    };
    failing
        .iter()
        .find(|r| overlaps(r, offset, len))
        .map(|r| format!("{op} overlaps failing range {}..{}", r.start, r.end))
}

/// Invert every byte of `buf` (which sits at `offset`) covered by one of `ranges`.
fn invert_overlaps(buf: &mut [u8], offset: u64, ranges: &[Range<u64>]) {
    let end = offset + buf.len() as u64;
    let mut spans: Vec<(usize, usize)> = ranges
        .iter()
        .filter(|r| overlaps(r, offset, buf.len() as u64))
        .map(|r| {
            (
                (r.start.max(offset) - offset) as usize,
                (r.end.min(end) - offset) as usize,
            )
        })
        .collect();
    // Merge first: overlapping ranges flipping a byte twice would hide the corruption.
    spans.sort_unstable();
    let mut done = 0usize;
    for (from, to) in spans {
        let from = from.max(done);
        if from < to {
            buf[from..to].iter_mut().for_each(|b| *b ^= 0xff);
            done = to;
        }
    }
}

impl<V: Volume> raidlab_core::Layer for FaultVolume<V> {
    fn below(&self) -> &dyn Volume {
        &self.inner
    }

    // The bytes themselves, handed to a reader, would bypass every fault and
    // the volatile cache: reads must come through `read_at`.
    fn passes_views(&self) -> bool {
        false
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let len = buf.len() as u64;
        self.check(Op::Read, offset, len)?;
        let mut st = self.lock();
        st.stats.reads = st.stats.reads.saturating_add(1);
        self.check_faults(&mut st, Op::Read, Some((offset, len)))?;
        let corrupt: Vec<Range<u64>> = st
            .corrupt_reads
            .iter()
            .filter(|r| overlaps(r, offset, len))
            .cloned()
            .collect();
        if !corrupt.is_empty() {
            st.stats.corrupted_reads = st.stats.corrupted_reads.saturating_add(1);
        }
        if let Some(landed) = misdirection(&st.misdirect_read, offset, len) {
            st.misdirect_read = None;
            let mut want = vec![0u8; buf.len()];
            self.current(&st, &mut want, offset)?;
            self.current(&st, buf, landed)?;
            let differs = want[..] != buf[..];
            st.misdirected.push(Misdirected {
                op: Op::Read,
                intended: offset..offset + len,
                landed: landed..landed + len,
                intended_differs: differs,
                landed_differs: false,
            });
            invert_overlaps(buf, offset, &corrupt);
            return Ok(());
        }
        if self.volatile_cache {
            // The lock stays held so a flush cannot move bytes from the cache to the
            // medium between reading the medium and laying the cache over it.
            self.inner.read_at(buf, offset)?;
            st.overlay.overlay(buf, offset);
        } else {
            drop(st);
            self.inner.read_at(buf, offset)?;
        }
        invert_overlaps(buf, offset, &corrupt);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let len = buf.len() as u64;
        self.check(Op::Write, offset, len)?;
        let mut st = self.lock();
        st.stats.writes = st.stats.writes.saturating_add(1);
        self.check_faults(&mut st, Op::Write, Some((offset, len)))?;
        if Self::lost_to_tripwire(&st, true) {
            return Ok(());
        }
        let offset = match misdirection(&st.misdirect_write, offset, len) {
            Some(landed) => {
                st.misdirect_write = None;
                let mut old = vec![0u8; buf.len()];
                self.current(&st, &mut old, offset)?;
                let intended_differs = old[..] != buf[..];
                self.current(&st, &mut old, landed)?;
                let landed_differs = old[..] != buf[..];
                st.misdirected.push(Misdirected {
                    op: Op::Write,
                    intended: offset..offset + len,
                    landed: landed..landed + len,
                    intended_differs,
                    landed_differs,
                });
                landed
            }
            None => offset,
        };
        if self.volatile_cache {
            st.overlay.record(buf, offset);
            Ok(())
        } else {
            drop(st);
            self.inner.write_at(buf, offset)
        }
    }

    fn flush(&self) -> Result<()> {
        let mut st = self.lock();
        st.stats.flushes = st.stats.flushes.saturating_add(1);
        self.check_faults(&mut st, Op::Flush, None)?;
        if Self::lost_to_tripwire(&st, false) {
            return Ok(());
        }
        if self.volatile_cache {
            // Keep the lock until the inner flush is done: a write arriving meanwhile
            // must not be mistaken for one this flush made durable.
            self.drain(&mut st)?;
            self.inner.flush()
        } else {
            drop(st);
            self.inner.flush()
        }
    }

    /// With a volatile cache: this write alone goes to the medium (as a disk's
    /// FUA write does), and nothing else pending becomes durable; an older
    /// pending write to the same bytes is forgotten, so a power cut cannot
    /// lay it over the newer one. A test can then tell a FUA write from a
    /// write and a flush of everything.
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> Result<()> {
        let len = buf.len() as u64;
        self.check(Op::Write, offset, len)?;
        let mut st = self.lock();
        st.stats.writes = st.stats.writes.saturating_add(1);
        self.check_faults(&mut st, Op::Write, Some((offset, len)))?;
        if Self::lost_to_tripwire(&st, true) {
            return Ok(());
        }
        if self.volatile_cache {
            // Under the lock, so no flush or read sees the range half moved.
            self.inner.write_at_fua(buf, offset)?;
            st.overlay.forget(offset, len);
            Ok(())
        } else {
            drop(st);
            self.inner.write_at_fua(buf, offset)
        }
    }

    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        self.drained(Op::Discard, offset, len, |v| v.discard(offset, len))
    }
    fn discard_zeroes(&self) -> bool {
        // Reads of a discarded range go to the inner volume (the cache is
        // drained first).
        self.inner.discard_zeroes()
    }

    /// A write as far as faults go; passed below as write-zeroes after the
    /// volatile cache is drained, as for a discard.
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        self.drained(Op::Write, offset, len, |v| v.write_zeroes(offset, len))
    }
}

#[cfg(test)]
mod tests;
