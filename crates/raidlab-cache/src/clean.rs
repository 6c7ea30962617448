//! Cleaning: writing dirty blocks back to the origin, in ascending origin order
//! with neighbours merged into one write, in whole units of the origin's
//! optimal I/O size where the dirty data covers them, at a pace the owner
//! drives.
//!
//! This module decides which dirty blocks go next and how they are grouped
//! into origin writes. It must never sleep or read the wall clock (the pace
//! comes from the volume's [`raidlab_core::Clock`] and from how often the
//! owner calls [`CachedVolume::clean_tick`]), never mark a block clean before
//! the origin has it durably (the commit protocol's rule 3), and never read the
//! origin: a parity array reads what a partial-stripe write needs itself, and
//! a cache that read it first would only add a read.
//!
//! Overlap: a flush reads each run from the cache device, then writes it to
//! the origin. One after the other, the cache device's read time adds to the
//! origin's write time (0.74x the origin's sequential write speed with an
//! SSD-like cache in front of HDD-like members, docs/benchmarks.md). When the
//! owner allows it ([`CachedVolume::set_overlapped_writeback`]), a batch is
//! cut into pieces of [`OVERLAP_PIECE_BYTES`] and the next piece is read on a
//! scoped thread while the current one is written, so the origin is kept busy;
//! the thread ends before the batch does. It is off by default: a simulator
//! drives the devices in virtual time from one thread, and two requests at
//! once would make its order depend on the host's scheduler.
//!
//! Why units: a parity array (`Volume::optimal_io_size`, a RAID 5's stripe of
//! data) writes a whole aligned stripe without reading anything, while a write
//! of part of a stripe reads old data or parity first. So a batch never stops
//! in the middle of a unit (the rest of the unit's dirty blocks join it, or
//! two batches would each write half a stripe and both read), a batch starts
//! at the beginning of the unit holding the cursor, and a long run is cut
//! only at unit edges.

use crate::format::{Entry, Mode};
use crate::volume::{lock, Aligned, CachedVolume, State};
use raidlab_core::{Error, ErrorKind, Op, Result, Volume};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The largest origin write a run of dirty blocks becomes (at least one whole
/// unit of the origin's optimal size): long enough for a disk to stream, and
/// the buffer it takes is held only while the run is written.
const MAX_RUN_BYTES: u64 = 16 << 20;

/// How much one batch of a flush or detach writes before letting foreground
/// I/O in (at least 64 blocks): each batch ends with an origin flush (rule 3),
/// so small batches would make a flush of many small blocks a series of
/// flushes; large ones would keep foreground requests waiting.
const FLUSH_BATCH_BYTES: u64 = 4 << 20;

/// With overlapped write-back, the size of each origin write (rounded up to
/// whole units of the origin's optimal size): a disk streams 1 MiB requests
/// at nearly its full speed, and a batch of `FLUSH_BATCH_BYTES` then has
/// four pieces, so only the first piece's cache read is not hidden behind an
/// origin write.
pub const OVERLAP_PIECE_BYTES: u64 = 1 << 20;

/// Cache-device reads that fill one origin write: (cache offset, start in
/// the buffer, length), one per run of adjacent slots.
type SlotReads = Vec<(u64, usize, usize)>;

impl<C: Volume, O: Volume> CachedVolume<C, O> {
    /// Write back up to `max_blocks` dirty blocks, in ascending origin order from
    /// where the last call stopped, merging neighbours into one origin write.
    /// When the origin has an optimal I/O size (a parity array's stripe), the
    /// remaining dirty blocks of the last unit touched are written too, so
    /// the call may clean up to one unit more than `max_blocks`.
    /// With `over_target_only`, does nothing while the dirty share is within the
    /// target. Returns the blocks cleaned.
    pub fn clean_step(&self, max_blocks: u64, over_target_only: bool) -> Result<u64> {
        let mut st = lock(&self.state);
        self.clean_locked(&mut st, max_blocks, over_target_only)
    }

    fn over_target(st: &State) -> u64 {
        let allowed = st.sb.layout.cache_blocks * u64::from(st.sb.dirty_target_pct) / 100;
        (st.dirty.len() as u64).saturating_sub(allowed)
    }

    /// The origin's unit of whole writes, in bytes, if it has one worth
    /// aligning to (more than one block).
    fn write_unit(&self, bs: u64) -> Option<u64> {
        self.origin.optimal_io_size().filter(|&u| u > bs)
    }

    /// The dirty blocks the next batch writes, in the order picked: up to
    /// `want` from the start of the unit holding the cursor, wrapping around,
    /// then the rest of the last unit touched.
    fn pick(st: &State, want: u64, bs: u64, unit: Option<u64>) -> Vec<u64> {
        let start = match unit {
            Some(u) => (st.clean_cursor.saturating_mul(bs) / u).saturating_mul(u) / bs,
            None => st.clean_cursor,
        };
        let mut picked: Vec<u64> = st
            .dirty
            .range(start..)
            .chain(st.dirty.range(..start))
            .copied()
            .take(usize::try_from(want).unwrap_or(usize::MAX))
            .collect();
        let (Some(u), Some(&first), Some(&last)) = (unit, picked.first(), picked.last()) else {
            return picked;
        };
        if picked.len() == st.dirty.len() {
            return picked;
        }
        let unit_end = last
            .saturating_add(1)
            .saturating_mul(bs)
            .div_ceil(u)
            .saturating_mul(u)
            .div_ceil(bs);
        // After a wrap, blocks from `first` on were picked already.
        let wrapped = last < first;
        let rest: Vec<u64> = st
            .dirty
            .range(last + 1..unit_end)
            .copied()
            .take_while(|&b| !wrapped || b < first)
            .collect();
        picked.extend(rest);
        picked
    }

    /// Split the ascending run `[first, end)` into origin writes of at most
    /// `cap` blocks, cut only at unit edges where there is a unit.
    fn cut_run(first: u64, end: u64, cap: u64, bs: u64, unit: Option<u64>) -> Vec<(u64, u64)> {
        let mut pieces = Vec::new();
        let mut at = first;
        while at < end {
            let mut stop = end.min(at.saturating_add(cap));
            if let (Some(u), true) = (unit, stop < end) {
                let edge = stop.saturating_mul(bs) / u * u / bs;
                if edge > at {
                    stop = edge;
                }
            }
            pieces.push((at, stop));
            at = stop;
        }
        pieces
    }

    /// The cache-device reads that gather blocks `[first, end)` (all dirty)
    /// into one buffer: one read per run of adjacent slots.
    fn slot_reads(st: &State, first: u64, end: u64) -> SlotReads {
        let bs = Self::bs(st);
        let slots: Vec<u64> = (first..end).map(|b| st.map[&b]).collect();
        let mut reads = Vec::new();
        let mut k = 0;
        while k < slots.len() {
            let mut j = k + 1;
            while j < slots.len() && slots[j] == slots[j - 1] + 1 {
                j += 1;
            }
            let at = Self::slot_offset(st, slots[k]);
            reads.push((at, k * bs as usize, (j - k) * bs as usize));
            k = j;
        }
        reads
    }

    /// Carry out `reads` into a new buffer of `len` bytes. Takes only the
    /// cache device, so a scoped thread can run it while the origin is
    /// written under the volume's lock.
    fn gather(cache: &C, reads: &[(u64, usize, usize)], len: usize) -> Result<Aligned> {
        let mut buf = Aligned::zeroed(len);
        for &(at, start, n) in reads {
            cache.read_at(&mut buf.as_mut_slice()[start..start + n], at)?;
        }
        Ok(buf)
    }

    /// Write each of `pieces` (ascending runs of dirty blocks) to the origin
    /// in one write, read from the cache device first; with overlap allowed,
    /// the next piece is read while this one is written (see the module doc).
    fn write_back(&self, st: &mut State, pieces: &[(u64, u64)]) -> Result<()> {
        let bs = Self::bs(st);
        let plans: Vec<(u64, usize, SlotReads)> = pieces
            .iter()
            .map(|&(first, end)| {
                let len = ((end - first) * bs) as usize;
                (first * bs, len, Self::slot_reads(st, first, end))
            })
            .collect();
        if !self.overlap.load(Ordering::Relaxed) || plans.len() < 2 {
            for (at, len, reads) in &plans {
                let buf = Self::gather(&self.cache, reads, *len);
                let buf = self.on_cache(st, false, buf)?;
                self.write_origin(st, buf.as_slice(), *at)?;
            }
            return Ok(());
        }
        let cache = &self.cache;
        std::thread::scope(|s| {
            let (_, len, reads) = &plans[0];
            let first = Self::gather(cache, reads, *len);
            let mut current = self.on_cache(st, false, first)?;
            for (i, (at, _, _)) in plans.iter().enumerate() {
                let next = plans
                    .get(i + 1)
                    .map(|(_, len, reads)| s.spawn(move || Self::gather(cache, reads, *len)));
                let written = self.write_origin(st, current.as_slice(), *at);
                // Joined before anything returns, so no read outlives the batch.
                let read = next.map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::new(
                            ErrorKind::Io,
                            Op::Read,
                            "the write-back's read of the cache device panicked",
                        )
                        .on_device(cache.name()))
                    })
                });
                written?;
                if let Some(read) = read {
                    current = self.on_cache(st, false, read)?;
                }
            }
            Ok(())
        })
    }

    /// Allow (or stop) reading the next piece of a write-back from the cache
    /// device while the origin writes the current one, on a scoped thread
    /// (see the module doc). Off by default; owners on real devices (`raidlab
    /// serve`, the cache verbs, benchmarks) turn it on, a simulator leaves it
    /// off.
    pub fn set_overlapped_writeback(&self, on: bool) {
        self.overlap.store(on, Ordering::Relaxed);
    }

    pub(crate) fn clean_locked(
        &self,
        st: &mut State,
        max_blocks: u64,
        over_target_only: bool,
    ) -> Result<u64> {
        let mut want = max_blocks.min(st.dirty.len() as u64);
        if over_target_only {
            want = want.min(Self::over_target(st));
        }
        if want == 0 || st.detached {
            return Ok(0);
        }
        if st.failed {
            // A failed device's dirty data is not written back
            // ([`crate::failure`]); background cleaning has nothing to do.
            return match over_target_only {
                true => Ok(0),
                false => Err(self.failed_error(st, Op::Write)),
            };
        }
        if st.read_only {
            // Background cleaning has nothing to do; a flush must not say done.
            return match over_target_only {
                true => Ok(0),
                false => Err(Self::read_only_error(&self.cache, Op::Write)),
            };
        }
        let bs = Self::bs(st);
        let unit = self.write_unit(bs);
        let picked = Self::pick(st, want, bs, unit);
        let next_cursor = picked.last().map_or(0, |&b| b + 1);
        let mut sorted = picked;
        sorted.sort_unstable();
        let run_bytes = if self.overlap.load(Ordering::Relaxed) {
            OVERLAP_PIECE_BYTES
        } else {
            MAX_RUN_BYTES
        };
        let cap_bytes = match unit {
            Some(u) => (run_bytes / u).max(1) * u,
            None => run_bytes,
        };
        let cap = (cap_bytes / bs).max(1);
        // PLANTED BUG (tests only, `planted.rs`): the batch's last block is
        // marked clean below without being written.
        let skip = usize::from(planted!(CleanSkipsLastBlock));
        let written = &sorted[..sorted.len() - skip];
        let mut pieces = Vec::new();
        let mut i = 0;
        while i < written.len() {
            let mut j = i + 1;
            while j < written.len() && written[j] == written[j - 1] + 1 {
                j += 1;
            }
            pieces.extend(Self::cut_run(written[i], written[j - 1] + 1, cap, bs, unit));
            i = j;
        }
        self.write_back(st, &pieces)?;
        // Rule 3: clean only once the origin has it durably.
        self.origin.flush()?;
        st.origin_unflushed = false;
        for &b in &sorted {
            let slot = st.map[&b];
            Self::set_entry(st, slot, Entry::Clean(b));
            st.dirty.remove(&b);
        }
        st.clean_cursor = next_cursor;
        st.stats.cleaned_blocks += sorted.len() as u64;
        st.stats.cleaned_bytes += sorted.len() as u64 * bs;
        Ok(sorted.len() as u64)
    }

    /// Whether a background tick could clean anything now: the dirty share is
    /// over the target and the cache is neither failed, detached nor read-only
    /// (the conditions [`CachedVolume::clean_tick`] stops at). For an owner
    /// that lets an idle cleaner's wake-ups go by (a simulator, so that a run
    /// can end). While another holds the lock it cannot tell, and says true.
    pub fn cleaner_has_work(&self) -> bool {
        let Some(st) = self.state.try_lock() else {
            return true;
        };
        Self::over_target(&st) > 0 && !st.detached && !st.failed && !st.read_only
    }

    /// Background cleaning, paced by the clock: cleans what the configured rate
    /// allows since the last call, while the dirty share is over the target.
    /// The owner calls it as often as it likes (a thread with a real clock, or a
    /// simulator's event loop); it never sleeps.
    pub fn clean_tick(&self) -> Result<u64> {
        let now = self.clock.now();
        let mut st = lock(&self.state);
        let bs = Self::bs(&st);
        let rate = st.sb.clean_rate;
        let elapsed = st
            .last_tick
            .map_or(Duration::ZERO, |t| now.saturating_sub(t));
        st.last_tick = Some(now);
        let blocks = if rate == 0 {
            64
        } else {
            // Credit is capped at one second's worth, so an idle spell does not
            // turn into a burst that starves foreground I/O. It goes below
            // zero when a batch finished a unit beyond it: that debt is paid
            // before the next batch, so the rate holds on average.
            let earned = elapsed.as_nanos().saturating_mul(u128::from(rate)) / 1_000_000_000;
            let cap = i128::from(rate.max(bs));
            st.clean_credit = (st.clean_credit + i128::try_from(earned).unwrap_or(cap)).min(cap);
            u64::try_from(st.clean_credit).unwrap_or(0) / bs
        };
        let cleaned = self.clean_locked(&mut st, blocks, true)?;
        if rate != 0 {
            st.clean_credit -= i128::from(cleaned) * i128::from(bs);
        }
        Ok(cleaned)
    }

    /// Write every dirty block back and flush, calling `progress(done, total)`
    /// between batches. Foreground I/O goes on between batches, so the total
    /// may grow; the loop ends when nothing is dirty.
    pub fn flush_dirty(&self, mut progress: impl FnMut(u64, u64)) -> Result<u64> {
        let mut done = 0;
        loop {
            let mut st = lock(&self.state);
            let total = done + st.dirty.len() as u64;
            let batch = (FLUSH_BATCH_BYTES / Self::bs(&st)).max(64);
            let n = self.clean_locked(&mut st, batch, false)?;
            done += n;
            progress(done, total);
            if n == 0 {
                self.flush_inner(&mut st)?;
                return Ok(done);
            }
        }
    }

    /// Change the mode; leaving write-back writes every dirty block back first.
    pub fn set_mode(&self, mode: Mode) -> Result<()> {
        if mode != Mode::WriteBack {
            self.flush_dirty(|_, _| {})?;
        }
        let mut st = lock(&self.state);
        if st.detached {
            return Err(Self::detached_error(&self.cache, Op::Write));
        }
        if mode != Mode::WriteBack {
            // What writes made dirty since the last batch, under the lock, so
            // that constant writes cannot keep the mode from changing.
            self.clean_locked(&mut st, u64::MAX, false)?;
            self.flush_inner(&mut st)?;
        }
        st.sb.mode = mode;
        self.write_superblock(&mut st)
    }
}
