//! [`CachedVolume`]: a volume made of a cache device in front of an origin.
//!
//! This module decides where each request goes (cache, origin, both) in each
//! mode, a read's pieces in `volume/read.rs`, and holds the state the other
//! cache modules share. When the mapping table is written against the data
//! is [`crate::commit`]'s decision; cleaning is [`crate::clean`]'s; which
//! blocks to keep is [`crate::policy`]'s; the bytes of the metadata are
//! [`crate::format`]'s; when the cache device is failed and what a failed
//! cache serves from where is [`crate::failure`]'s. It must never read the
//! wall clock and never start a thread, so the same code runs in virtual
//! time.
//!
//! Every request holds one lock, except while a read waits for the origin:
//! a miss on an HDD-like origin takes milliseconds, and holding the lock then
//! made a cached RAID 5 serve misses one at a time (0.82x the array alone at
//! QD32, docs/benchmarks.md). A miss that will be promoted marks its block as
//! being read (`State::reading`); a write to the block meanwhile counts there,
//! and the read then installs nothing, so a copy older than the write is
//! never served. Everything else, the cache device's I/O included, happens
//! under the lock. The lock is `raidlab_core::task::Mutex`: a plain mutex on
//! threads; a request run as a task (the simulator runs the cache live in
//! virtual time) that finds it held suspends until it is let go.

use crate::format::{Entry, Mode, Policy, Superblock};
use crate::policy::{Sequential, TwoQ};
use crate::stats::Stats;
use raidlab_core::task::{Mutex, MutexGuard};
use raidlab_core::SharedClock;
use raidlab_core::{check_range_with, Op, Result, Volume};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

mod read;
pub(crate) use read::Reading;

/// What a user chooses at create (and may change with `set`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Default write-through (bcache's default): the origin is complete at all
    /// times, so losing the cache device loses nothing.
    pub mode: Mode,
    /// Power of two, 4 KiB to 1 GiB. Default 64 KiB: the in-memory table costs
    /// tens of bytes per block, so 1 TiB of cache is 16 Mi entries, while a
    /// miss moves little more than a disk's positioning time is worth. Use 4K
    /// for small random I/O (a partial-block write to an uncached block in
    /// write-back reads the rest of the block from the origin).
    pub block_size: u32,
    pub policy: Policy,
    /// Sequential runs of at least this many bytes bypass the cache; 0: never.
    /// Default 4 MiB, bcache's: streams that long gain nothing from an SSD in
    /// front of a disk that streams well, and would push out the random set.
    pub sequential_cutoff: u64,
    /// Background cleaning starts above this share of dirty blocks. Default 10%.
    pub dirty_target_pct: u8,
    /// Background cleaning rate, bytes per second; 0: as fast as the origin
    /// takes it. Default 0.
    pub clean_rate: u64,
    /// Read misses of a block before it is promoted. Default 1 (every miss).
    pub promote_threshold: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            mode: Mode::WriteThrough,
            block_size: 64 << 10,
            policy: Policy::TwoQ,
            sequential_cutoff: 4 << 20,
            dirty_target_pct: 10,
            clean_rate: 0,
            promote_threshold: 1,
        }
    }
}

/// A zeroed buffer whose start is aligned to 4 KiB: the cache's own reads and
/// writes of whole blocks may go to files opened with O_DIRECT, which refuse
/// buffers at other addresses.
pub(crate) struct Aligned {
    buf: Vec<u8>,
    start: usize,
    len: usize,
}

const ALIGN: usize = 4096;

impl Aligned {
    pub(crate) fn zeroed(len: usize) -> Aligned {
        let buf = vec![0u8; len + ALIGN];
        let start = buf.as_ptr().align_offset(ALIGN).min(ALIGN);
        Aligned { buf, start, len }
    }
    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + self.len]
    }
}

/// Which reasons sent some bytes of one request around the cache, so each
/// request is counted once per reason.
#[derive(Default)]
struct Bypassed {
    tail: bool,
    mode: bool,
    full: bool,
}

impl Bypassed {
    fn count(&self, s: &mut Stats) {
        s.bypass_tail_requests += u64::from(self.tail);
        s.bypass_mode_requests += u64::from(self.mode);
        s.bypass_full_requests += u64::from(self.full);
    }
}

/// A cache device in front of an origin, seen as one volume of the origin's size.
#[derive(Debug)]
pub struct CachedVolume<C, O> {
    pub(crate) cache: C,
    pub(crate) origin: O,
    pub(crate) clock: SharedClock,
    pub(crate) state: Mutex<State>,
    /// Whether a write-back may read the next piece while the origin writes
    /// this one ([`CachedVolume::set_overlapped_writeback`]).
    pub(crate) overlap: AtomicBool,
}

#[derive(Debug)]
pub(crate) struct State {
    pub(crate) sb: Superblock,
    /// Which superblock copy holds `sb` as last written.
    pub(crate) sb_copy: usize,
    pub(crate) entries: Vec<Entry>,
    /// What the mapping table on the device says, slot by slot.
    pub(crate) persisted: Vec<Entry>,
    pub(crate) map: HashMap<u64, u64>,
    pub(crate) dirty: BTreeSet<u64>,
    pub(crate) free: Vec<u64>,
    /// Mapping sectors whose in-memory entries differ from the device.
    pub(crate) stale: BTreeSet<u64>,
    pub(crate) policy: TwoQ,
    pub(crate) seq: Sequential,
    pub(crate) stats: Stats,
    pub(crate) clean_cursor: u64,
    /// Bytes the pace allows now; negative after a batch that finished a
    /// unit beyond it.
    pub(crate) clean_credit: i128,
    pub(crate) last_tick: Option<Duration>,
    pub(crate) cache_unflushed: bool,
    pub(crate) origin_unflushed: bool,
    pub(crate) detached: bool,
    /// Opened with [`CachedVolume::open_read_only`]: nothing is written.
    pub(crate) read_only: bool,
    /// Blocks a read miss is fetching from the origin without the lock.
    pub(crate) reading: HashMap<u64, Reading>,
    /// Errors of the cache device since open (see [`crate::failure`]).
    pub(crate) io_errors: u64,
    /// The cache device failed: see [`crate::failure`].
    pub(crate) failed: bool,
}

/// The cache's one lock. Task-aware (`raidlab_core::task::Mutex`), as it is
/// held across the cache device's and the origin's I/O: on threads it is a
/// plain mutex; a request run as a task (the simulator) that finds it held
/// suspends until it is let go. A panic while holding it is a bug already
/// reported; the state is still the one the protocol left, so it is not
/// poisoned for every later caller.
pub(crate) fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock()
}

impl<C: Volume, O: Volume> CachedVolume<C, O> {
    pub fn cache_device(&self) -> &C {
        &self.cache
    }

    pub fn origin(&self) -> &O {
        &self.origin
    }

    pub fn superblock(&self) -> Superblock {
        lock(&self.state).sb.clone()
    }

    pub fn stats(&self) -> Stats {
        Self::stats_of(&lock(&self.state))
    }

    /// [`CachedVolume::stats`] if nobody holds the lock now: for an owner
    /// that must not wait for it (a simulator between resumes of the tasks,
    /// one of which may hold it across a suspended operation).
    pub fn try_stats(&self) -> Option<Stats> {
        self.state.try_lock().map(|st| Self::stats_of(&st))
    }

    fn stats_of(st: &State) -> Stats {
        let mut s = st.stats;
        s.dirty_blocks = st.dirty.len() as u64;
        s.occupied_blocks = st.map.len() as u64;
        s.cache_blocks = st.sb.layout.cache_blocks;
        s.block_size = st.sb.block_size;
        s.io_errors = st.io_errors;
        s.failed = st.failed;
        s
    }

    /// Zero the counters, durably (the superblock keeps them). A detached
    /// cache has none to reset.
    pub fn reset_stats(&self) -> Result<()> {
        let mut st = lock(&self.state);
        if st.detached {
            return Err(Self::detached_error(&self.cache, Op::Write));
        }
        let kept = st.stats;
        st.stats = Stats::default();
        if let Err(e) = self.write_superblock(&mut st) {
            st.stats = kept;
            return Err(e);
        }
        Ok(())
    }

    pub(crate) fn bs(st: &State) -> u64 {
        u64::from(st.sb.block_size)
    }

    pub(crate) fn slot_offset(st: &State, slot: u64) -> u64 {
        st.sb.layout.data_offset + slot * Self::bs(st)
    }

    /// Read `[pos, pos+buf.len())` of block `b`'s slot.
    pub(crate) fn read_slot(
        &self,
        st: &State,
        slot: u64,
        within: u64,
        buf: &mut [u8],
    ) -> Result<()> {
        self.cache
            .read_at(buf, Self::slot_offset(st, slot) + within)
    }

    pub(crate) fn write_origin(&self, st: &mut State, data: &[u8], offset: u64) -> Result<()> {
        self.origin.write_at(data, offset)?;
        st.origin_unflushed = true;
        Ok(())
    }

    /// A write of a request to the origin: with FUA, durable there when it
    /// returns (and nothing else of the origin's is waited for).
    pub(crate) fn send_origin(
        &self,
        st: &mut State,
        data: &[u8],
        offset: u64,
        fua: bool,
    ) -> Result<()> {
        if fua {
            self.origin.write_at_fua(data, offset)
        } else {
            self.write_origin(st, data, offset)
        }
    }

    /// A write request. With `fua`, each piece is made durable where it
    /// lands and no further: a piece sent to the origin is a FUA write there
    /// (the origin is not flushed); a piece that leaves a block dirty in the
    /// cache is durable on the cache device together with the mapping entry
    /// that names it (a FUA write into a slot the device's table already
    /// names dirty, else a commit of the table, which flushes the data
    /// first); a piece that only updates a clean copy (write-through) gets no
    /// durability on the cache device at all, because an unclean open drops
    /// every clean entry and reads the origin, which has the piece durably.
    pub(crate) fn write_inner(
        &self,
        st: &mut State,
        buf: &[u8],
        offset: u64,
        fua: bool,
    ) -> Result<()> {
        let len = buf.len() as u64;
        if st.detached {
            return self.send_origin(st, buf, offset, fua);
        }
        // Set when a FUA piece left a block dirty whose entry the device's
        // table does not show yet.
        let mut commit = false;
        self.begin_change(st)?;
        let seq = st.seq.note(offset, len, st.sb.sequential_cutoff);
        if seq {
            st.stats.bypass_sequential_requests += 1;
        }
        let bs = Self::bs(st);
        let origin_blocks = st.sb.origin_blocks();
        let mode = st.sb.mode;
        let (mut hits, mut misses) = (0u32, 0u32);
        let mut why = Bypassed::default();
        let mut pos = 0u64;
        while pos < len {
            let abs = offset + pos;
            let b = abs / bs;
            let within = abs % bs;
            let n = (bs - within).min(len - pos);
            let piece = &buf[pos as usize..(pos + n) as usize];
            pos += n;
            if let Some(r) = st.reading.get_mut(&b) {
                r.note_write();
            }
            if b >= origin_blocks {
                st.stats.bypass_tail_bytes += n;
                why.tail = true;
                self.send_origin(st, piece, abs, fua)?;
                misses += 1;
                continue;
            }
            if let Some(&slot) = st.map.get(&b) {
                let is_dirty = matches!(st.entries[slot as usize], Entry::Dirty(_));
                if mode == Mode::WriteAround && !is_dirty {
                    // Rule 2: the cached copy goes, durably, before the origin
                    // changes under it.
                    Self::drop_slot(st, slot);
                    st.free.push(slot);
                    self.unmap_durably(st, slot)?;
                    st.stats.invalidations += 1;
                    st.stats.bypass_mode_bytes += n;
                    why.mode = true;
                    self.send_origin(st, piece, abs, fua)?;
                    misses += 1;
                    continue;
                }
                if mode == Mode::WriteThrough && !is_dirty {
                    self.send_origin(st, piece, abs, fua)?;
                }
                let at = Self::slot_offset(st, slot) + within;
                let stays_dirty = is_dirty || mode == Mode::WriteBack;
                if fua && stays_dirty && st.persisted[slot as usize] == Entry::Dirty(b) {
                    let r = self.cache.write_at_fua(piece, at);
                    self.on_cache(st, true, r)?;
                } else {
                    let r = self.cache.write_at(piece, at);
                    self.on_cache(st, true, r)?;
                    st.cache_unflushed = true;
                    commit |= fua && stays_dirty;
                }
                if mode == Mode::WriteBack && !is_dirty {
                    Self::set_entry(st, slot, Entry::Dirty(b));
                    st.dirty.insert(b);
                }
                st.policy.touch(slot);
                hits += 1;
                continue;
            }
            misses += 1;
            if mode != Mode::WriteBack {
                if mode == Mode::WriteAround {
                    st.stats.bypass_mode_bytes += n;
                    why.mode = true;
                }
                self.send_origin(st, piece, abs, fua)?;
                continue;
            }
            if seq {
                st.stats.bypass_sequential_bytes += n;
                self.send_origin(st, piece, abs, fua)?;
                continue;
            }
            let mut whole = Aligned::zeroed(bs as usize);
            if n < bs {
                self.origin.read_at(whole.as_mut_slice(), b * bs)?;
            }
            whole.as_mut_slice()[within as usize..(within + n) as usize].copy_from_slice(piece);
            if self.install(st, b, whole.as_slice(), true)? {
                commit |= fua;
            } else {
                st.stats.bypass_full_bytes += n;
                why.full = true;
                self.send_origin(st, piece, abs, fua)?;
            }
        }
        why.count(&mut st.stats);
        match (hits, misses) {
            (_, 0) => st.stats.write_hits += 1,
            (0, _) => st.stats.write_misses += 1,
            _ => st.stats.write_partial_hits += 1,
        }
        if commit {
            // Data before mapping (rule 1): the commit flushes the cache
            // device before it writes the table.
            if st.stale.is_empty() {
                let r = self.cache.flush();
                self.on_cache(st, true, r)?;
                st.cache_unflushed = false;
            } else {
                self.commit_stale(st)?;
            }
        }
        Ok(())
    }

    pub(crate) fn flush_inner(&self, st: &mut State) -> Result<()> {
        if st.failed {
            return self.flush_failed(st);
        }
        if !st.stale.is_empty() {
            self.commit_stale(st)?;
        } else if st.cache_unflushed {
            let r = self.cache.flush();
            self.on_cache(st, true, r)?;
            st.cache_unflushed = false;
        }
        if st.origin_unflushed {
            self.origin.flush()?;
            st.origin_unflushed = false;
        }
        Ok(())
    }

    fn write_request(&self, buf: &[u8], offset: u64, fua: bool) -> Result<()> {
        check_range_with(
            || self.name(),
            Op::Write,
            self.size(),
            offset,
            buf.len() as u64,
        )?;
        let mut st = lock(&self.state);
        if st.read_only {
            return Err(Self::read_only_error(&self.cache, Op::Write).at(offset, buf.len() as u64));
        }
        if st.failed || st.detached {
            if st.failed {
                return self.write_failed(&mut st, buf, offset, fua);
            }
            return self.write_inner(&mut st, buf, offset, fua);
        }
        match self.write_inner(&mut st, buf, offset, fua) {
            // The device failed under this request: carried out again the
            // failed way ([`crate::failure`]).
            Err(_) if st.failed => self.write_failed(&mut st, buf, offset, fua),
            r => r,
        }
    }

    /// Change the tunables (not the mode or block size).
    pub fn set_tunables(
        &self,
        sequential_cutoff: u64,
        dirty_target_pct: u8,
        clean_rate: u64,
        promote_threshold: u32,
    ) -> Result<()> {
        let mut st = lock(&self.state);
        if st.detached {
            return Err(Self::detached_error(&self.cache, Op::Write));
        }
        if st.read_only {
            return Err(Self::read_only_error(&self.cache, Op::Write));
        }
        let mut sb = st.sb.clone();
        sb.sequential_cutoff = sequential_cutoff;
        sb.dirty_target_pct = dirty_target_pct;
        sb.clean_rate = clean_rate;
        sb.promote_threshold = promote_threshold;
        sb.check().map_err(|e| e.on_device(self.cache.name()))?;
        st.sb = sb;
        st.policy.set_promote_threshold(promote_threshold);
        self.write_superblock(&mut st)
    }
}

impl<C: Volume, O: Volume> Volume for CachedVolume<C, O> {
    fn name(&self) -> String {
        format!("cache {} over {}", self.cache.name(), self.origin.name())
    }
    fn size(&self) -> u64 {
        self.origin.size()
    }
    fn block_size(&self) -> u32 {
        self.origin.block_size()
    }
    fn is_writable(&self) -> bool {
        !lock(&self.state).read_only && self.origin.is_writable() && self.cache.is_writable()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        check_range_with(
            || self.name(),
            Op::Read,
            self.size(),
            offset,
            buf.len() as u64,
        )?;
        let st = lock(&self.state);
        if st.failed {
            return self.read_failed(st, buf, offset);
        }
        let r = self.read_inner(st, buf, offset);
        if r.is_err() {
            let st = lock(&self.state);
            if st.failed {
                return self.read_failed(st, buf, offset);
            }
        }
        r
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.write_request(buf, offset, false)
    }
    /// Durable when it returns, at the cost each mode needs and no more (see
    /// `write_inner`): write-back puts the data and its mapping on the cache
    /// device only; write-through and write-around make the origin's copy
    /// durable with a FUA write there. Neither device is flushed as a whole
    /// unless the piece needs a mapping commit.
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.write_request(buf, offset, true)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        check_range_with(|| self.name(), Op::Write, self.size(), offset, len)?;
        let mut st = lock(&self.state);
        if st.read_only {
            return Err(Self::read_only_error(&self.cache, Op::Write).at(offset, len));
        }
        let failed = st.failed;
        match self.zero_inner(&mut st, offset, len) {
            Err(_) if st.failed && !failed => self.zero_inner(&mut st, offset, len),
            r => r,
        }
    }
    fn flush(&self) -> Result<()> {
        let mut st = lock(&self.state);
        let failed = st.failed;
        match self.flush_inner(&mut st) {
            // Failed by this flush: the failed way flushes the origin, and
            // says whether dirty blocks are left on the failed device.
            Err(_) if st.failed && !failed => self.flush_inner(&mut st),
            r => r,
        }
    }
    fn preferred_io_size(&self) -> Option<u64> {
        self.origin.preferred_io_size()
    }
}
