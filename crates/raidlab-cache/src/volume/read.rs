//! A read's way through the cache: which of its pieces a cached slot serves
//! (a run of blocks in consecutive slots in one device read), which go to the
//! origin, and whether a missed block is promoted into the cache.
//!
//! A miss waits for the origin without the volume's lock (why: the volume's
//! module doc); the block is marked as being read ([`Reading`]) meanwhile.
//! It must never install a copy that a write begun during its read has made
//! older, and never wait for the origin holding the lock.

use super::{lock, Aligned, Bypassed, CachedVolume, State};
use raidlab_core::task::MutexGuard;
use raidlab_core::{Op, Result, Volume};

/// Reads of one block in flight at the origin, and the writes to it since
/// the first of them began.
#[derive(Debug, Default)]
pub(crate) struct Reading {
    readers: u32,
    writes: u64,
}

impl Reading {
    /// A write to the block began while it was being read.
    pub(crate) fn note_write(&mut self) {
        self.writes += 1;
    }
}

impl<C: Volume, O: Volume> CachedVolume<C, O> {
    /// Read `buf` at `offset` of the origin without the lock (reads of the
    /// origin change nothing the lock protects).
    pub(crate) fn read_origin<'a>(
        &'a self,
        st: MutexGuard<'a, State>,
        buf: &mut [u8],
        offset: u64,
    ) -> (MutexGuard<'a, State>, Result<()>) {
        drop(st);
        let r = self.origin.read_at(buf, offset);
        (lock(&self.state), r)
    }

    pub(super) fn read_inner<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        buf: &mut [u8],
        offset: u64,
    ) -> Result<()> {
        let len = buf.len() as u64;
        if st.detached {
            return self.read_origin(st, buf, offset).1;
        }
        let cutoff = st.sb.sequential_cutoff;
        let seq = st.seq.note(offset, len, cutoff);
        if seq {
            st.stats.bypass_sequential_requests += 1;
        }
        let bs = Self::bs(&st);
        let origin_blocks = st.sb.origin_blocks();
        let (mut hits, mut misses) = (0u32, 0u32);
        let mut why = Bypassed::default();
        let mut pos = 0u64;
        while pos < len {
            if st.failed {
                // Failed by another request while this one waited for the
                // origin: a clean copy may be older than the origin now
                // (writes pass the failed device by). `read_at` carries the
                // request out again the failed way.
                return Err(self.failed_error(&st, Op::Read));
            }
            let abs = offset + pos;
            let b = abs / bs;
            let within = abs % bs;
            let n = (bs - within).min(len - pos);
            if b < origin_blocks {
                if let Some(&slot) = st.map.get(&b) {
                    // The blocks that follow in the request and sit in the
                    // following slots come with the same cache read: a
                    // sequential hit is one device request, not one a block.
                    let (mut run, mut k) = (n, 1);
                    while pos + run < len
                        && b + k < origin_blocks
                        && st.map.get(&(b + k)) == Some(&(slot + k))
                    {
                        run += bs.min(len - pos - run);
                        k += 1;
                    }
                    let piece = &mut buf[pos as usize..(pos + run) as usize];
                    if let Err(e) = self.read_slot(&st, slot, within, piece) {
                        // Counted; below the limit a clean copy is dropped
                        // and read from the origin ([`crate::failure`]).
                        self.on_slot_read_error(&mut st, b, slot, k, e)?;
                        let (again, r) = self.read_origin(st, piece, abs);
                        st = again;
                        r?;
                        pos += run;
                        misses += 1;
                        continue;
                    }
                    for s in slot..slot + k {
                        st.policy.touch(s);
                    }
                    pos += run;
                    hits += 1;
                    continue;
                }
            }
            let piece = &mut buf[pos as usize..(pos + n) as usize];
            pos += n;
            misses += 1;
            if b >= origin_blocks || seq || st.read_only || !st.policy.admit(b) {
                if b >= origin_blocks {
                    st.stats.bypass_tail_bytes += n;
                    why.tail = true;
                } else if seq {
                    st.stats.bypass_sequential_bytes += n;
                } else {
                    st.stats.not_promoted += 1;
                }
                let (again, r) = self.read_origin(st, piece, abs);
                st = again;
                r?;
                continue;
            }
            let mut whole = Aligned::zeroed(bs as usize);
            let seen = {
                let r = st.reading.entry(b).or_default();
                r.readers += 1;
                r.writes
            };
            let (again, r) = self.read_origin(st, whole.as_mut_slice(), b * bs);
            st = again;
            let written = match st.reading.get_mut(&b) {
                Some(rd) => {
                    rd.readers -= 1;
                    let written = rd.writes != seen;
                    if rd.readers == 0 {
                        st.reading.remove(&b);
                    }
                    written
                }
                None => true,
            };
            r?;
            piece.copy_from_slice(&whole.as_slice()[within as usize..(within + n) as usize]);
            // Written meanwhile, promoted by another read, or detached: what
            // was read may be older than the block is now; keep it out.
            if written || st.map.contains_key(&b) || st.detached || st.failed {
                st.stats.not_promoted += 1;
                continue;
            }
            // The request has its bytes: a cache device that refuses the
            // promotion (counted, and then failed) does not fail the read.
            let promoted = self
                .begin_change(&mut st)
                .and_then(|()| self.install(&mut st, b, whole.as_slice(), false));
            match promoted {
                Ok(true) => st.stats.promotions += 1,
                Ok(false) => {
                    st.stats.bypass_full_bytes += n;
                    why.full = true;
                }
                Err(_) if st.failed => st.stats.not_promoted += 1,
                Err(e) => return Err(e),
            }
        }
        why.count(&mut st.stats);
        match (hits, misses) {
            (_, 0) => st.stats.read_hits += 1,
            (0, _) => st.stats.read_misses += 1,
            _ => st.stats.read_partial_hits += 1,
        }
        Ok(())
    }
}
