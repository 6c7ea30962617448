//! Cleaning: writing dirty blocks back to the origin, in ascending origin order
//! with neighbours merged into one write, at a pace the owner drives.
//!
//! This module decides which dirty blocks go next and how many a call may
//! write. It must never sleep or read the wall clock (the pace comes from the
//! volume's [`raidlab_devices::Clock`] and from how often the owner calls
//! [`CachedVolume::clean_tick`]), and never mark a block clean before the
//! origin has it durably (the commit protocol's rule 3).

use crate::format::{Entry, Mode};
use crate::volume::{lock, Aligned, CachedVolume, State};
use raidlab_core::{Op, Result, Volume};
use std::time::Duration;

impl<C: Volume, O: Volume> CachedVolume<C, O> {
    /// Write back up to `max_blocks` dirty blocks, in ascending origin order from
    /// where the last call stopped, merging neighbours into one origin write.
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
        let picked: Vec<u64> = st
            .dirty
            .range(st.clean_cursor..)
            .chain(st.dirty.range(..st.clean_cursor))
            .copied()
            .take(want as usize)
            .collect();
        let bs = Self::bs(st);
        let mut i = 0;
        while i < picked.len() {
            let mut j = i + 1;
            while j < picked.len() && picked[j] == picked[j - 1] + 1 && (j - i) < 256 {
                j += 1;
            }
            let mut buf = Aligned::zeroed((j - i) * bs as usize);
            for (k, &b) in picked[i..j].iter().enumerate() {
                let slot = st.map[&b];
                let piece = &mut buf.as_mut_slice()[k * bs as usize..(k + 1) * bs as usize];
                self.read_slot(st, slot, 0, piece)?;
            }
            self.write_origin(st, buf.as_slice(), picked[i] * bs)?;
            i = j;
        }
        // Rule 3: clean only once the origin has it durably.
        self.origin.flush()?;
        st.origin_unflushed = false;
        for &b in &picked {
            let slot = st.map[&b];
            Self::set_entry(st, slot, Entry::Clean(b));
            st.dirty.remove(&b);
        }
        st.clean_cursor = picked.last().map_or(0, |&b| b + 1);
        st.stats.cleaned_blocks += picked.len() as u64;
        st.stats.cleaned_bytes += picked.len() as u64 * bs;
        Ok(picked.len() as u64)
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
            // turn into a burst that starves foreground I/O.
            let earned = (elapsed.as_nanos() * u128::from(rate) / 1_000_000_000) as u64;
            st.clean_credit = st.clean_credit.saturating_add(earned).min(rate.max(bs));
            st.clean_credit / bs
        };
        let cleaned = self.clean_locked(&mut st, blocks, true)?;
        if rate != 0 {
            st.clean_credit -= cleaned * bs;
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
            let n = self.clean_locked(&mut st, 64, false)?;
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
