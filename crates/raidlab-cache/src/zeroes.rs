//! Write-zeroes through the cache: what a zeroed range does to the cached
//! copies of its blocks, and in what order against the origin's zeroing.
//!
//! Whole cache blocks inside the range are never cached as zeros, in any
//! mode: their cached copies (clean or dirty) are dropped, and the origin
//! zeroes the blocks with its own write-zeroes (a hole punched in a file,
//! member write-zeroes in an array), so a `mkfs` that zeroes a volume does
//! not fill the cache device with blocks of zeros and push the working set
//! out. In write-back that costs an origin request at once instead of a
//! dirty block, and an origin flush when the range covered dirty blocks.
//! The parts of cache blocks at either end of the range go through the
//! ordinary write path as buffers of zeros (they share their block with
//! data that stays).
//!
//! Order (the commit protocol's rules, [`crate::commit`]):
//! - a clean copy is unmapped durably before the origin is zeroed under it
//!   (rule 2);
//! - a dirty copy is the only copy of its data: it is unmapped only once the
//!   origin's zeros are durable (an origin flush), so a power cut between
//!   the two never brings back the origin's older data; and it is unmapped
//!   durably at once, so the block never has two entries in the table.
//!
//! This module must never write zeros into a cache slot for a whole block,
//! and never forget a dirty copy before the origin holds the zeros durably.

use crate::format::Entry;
use crate::volume::{CachedVolume, State};
use raidlab_core::{Result, Volume, ZERO_PIECE};

impl<C: Volume, O: Volume> CachedVolume<C, O> {
    /// Make `[offset, offset+len)` read as zeros (checked by the caller).
    pub(crate) fn zero_inner(&self, st: &mut State, offset: u64, len: u64) -> Result<()> {
        if st.detached {
            self.origin.write_zeroes(offset, len)?;
            st.origin_unflushed = true;
            return Ok(());
        }
        if st.failed {
            // [`crate::failure`]: to the origin unless a dirty block is touched.
            self.refuse_dirty_change(st, offset, len)?;
            self.origin.write_zeroes(offset, len)?;
            st.origin_unflushed = true;
            return Ok(());
        }
        self.begin_change(st)?;
        let bs = Self::bs(st);
        let end = offset + len;
        // The whole blocks of the range that the cache may hold.
        let first = offset.div_ceil(bs);
        let last = (end / bs).min(st.sb.origin_blocks());
        if first >= last {
            return self.write_zero_buffers(st, offset, len);
        }
        self.write_zero_buffers(st, offset, first * bs - offset)?;
        self.zero_blocks(st, first, last)?;
        self.write_zero_buffers(st, last * bs, end - last * bs)
    }

    /// Zeros written through the ordinary write path, a piece at a time.
    fn write_zero_buffers(&self, st: &mut State, offset: u64, len: u64) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let zeros = vec![0u8; len.min(ZERO_PIECE) as usize];
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(zeros.len() as u64);
            self.write_inner(st, &zeros[..n as usize], offset + done, false)?;
            done += n;
        }
        Ok(())
    }

    /// Zero the whole blocks `[first, last)` at the origin, dropping their
    /// cached copies in the order the module doc gives.
    fn zero_blocks(&self, st: &mut State, first: u64, last: u64) -> Result<()> {
        let bs = Self::bs(st);
        // A read of one of them in flight at the origin must not install
        // what it read (it may predate the zeros).
        for (_, r) in st
            .reading
            .iter_mut()
            .filter(|(b, _)| (first..last).contains(*b))
        {
            r.note_write();
        }
        // Walk whichever is smaller: the range or the map.
        let mut mapped: Vec<(u64, u64)> = if last - first <= st.map.len() as u64 {
            (first..last)
                .filter_map(|b| st.map.get(&b).map(|&slot| (b, slot)))
                .collect()
        } else {
            st.map
                .iter()
                .filter(|(b, _)| (first..last).contains(*b))
                .map(|(&b, &slot)| (b, slot))
                .collect()
        };
        mapped.sort_unstable();
        let (dirty, clean): (Vec<u64>, Vec<u64>) = mapped
            .iter()
            .map(|&(_, slot)| slot)
            .partition(|&slot| matches!(st.entries[slot as usize], Entry::Dirty(_)));
        self.forget_slots(st, &clean)?;
        self.origin.write_zeroes(first * bs, (last - first) * bs)?;
        st.origin_unflushed = true;
        if !dirty.is_empty() {
            self.origin.flush()?;
            st.origin_unflushed = false;
            self.forget_slots(st, &dirty)?;
        }
        Ok(())
    }

    /// Drop `slots` from the cache and make the device's table say so.
    fn forget_slots(&self, st: &mut State, slots: &[u64]) -> Result<()> {
        let mut named = false;
        for &slot in slots {
            named |= st.persisted[slot as usize] != Entry::Free;
            Self::drop_slot(st, slot);
            st.free.push(slot);
            st.stats.invalidations += 1;
        }
        if named {
            self.commit_stale(st)?;
        }
        Ok(())
    }
}
