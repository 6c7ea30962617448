//! The cache device's failed state: which errors of the cache device are
//! counted, when they fail it, and what a failed cache does with each
//! request.
//!
//! This module decides when the cache device is failed and what is served
//! from where once it is; where a request goes while the device works is
//! [`crate::volume`]'s decision, and the order of metadata against data is
//! `commit`'s. It must never write to a failed cache device (but the one
//! best-effort superblock saying so), never retry a write the device refused,
//! and never answer a dirty block with the origin's older copy.
//!
//! A cache device that returns I/O errors is failed the way bcache's
//! `io_error_limit` and dm-writecache's error state fail theirs:
//! - every error of the cache device (not of the origin) is counted
//!   (`Stats::io_errors`);
//! - a failed **write or flush** of the cache device fails it at once: what
//!   the device holds after a refused write is unknown, and a write is never
//!   retried on a device that refused it (after a failed write or fsync Linux
//!   may drop both the error and the unwritten pages);
//! - a failed **read** fails it at the [`IO_ERROR_LIMIT`]th error (bcache's
//!   default, 8: a few bad sectors of an SSD should not cost the whole cache,
//!   a dying device should not be retried for long). Below the limit, a read
//!   error on a clean block is served from the origin and the block dropped
//!   from the cache; on a dirty block the request fails, since the cache
//!   holds its only up-to-date copy.
//!
//! A failed cache device is never written again, except one best-effort
//! superblock write saying so (`Superblock::failed`), so the cache is not
//! opened again with contents older than the origin. From then on:
//! - a block with no dirty copy (every block, in write-through and
//!   write-around, or in write-back with nothing dirty) is read from and
//!   written to the origin: pass-through, nothing lost, since the origin is
//!   complete for every such block;
//! - a **dirty** block (write-back) is read from the cache device, and when
//!   the device cannot supply it the read fails: the origin's copy is older
//!   and is never returned in its place. A write or write-zeroes touching a
//!   dirty block is refused: split between the failed device and the origin
//!   the block would have no up-to-date copy anywhere;
//! - dirty blocks are not cleaned (a failed device's data is not trusted to
//!   write back), a flush fails while any is dirty, and every change of the
//!   cache (mode, tunables, reset, detach) is refused.
//!
//! A request during which the device fails is carried out again the failed
//! way, so a write-through cache whose device dies under a request still
//! answers it from the origin.
//!
//! The request paths (`volume`, `zeroes`, `commit`, `clean`) ask this
//! module: every I/O of the cache device goes through `on_cache`, and a
//! failed cache's reads, writes and flushes are `read_failed`,
//! `write_failed` and `flush_failed` here.

use crate::volume::{lock, CachedVolume, State};
use raidlab_core::task::MutexGuard;
use raidlab_core::{Error, ErrorKind, Op, Result, Volume};

/// Read errors of the cache device after which it is failed: bcache's
/// default `io_error_limit` (see the module doc). Write and flush errors
/// fail it at once.
pub const IO_ERROR_LIMIT: u64 = 8;

impl<C: Volume, O: Volume> CachedVolume<C, O> {
    /// Whether the cache device failed (see the module doc).
    pub fn is_failed(&self) -> bool {
        lock(&self.state).failed
    }

    /// The result `r` of an I/O of the cache device: an error is counted,
    /// and fails the device when `fatal` (a write or flush) or at the limit.
    pub(crate) fn on_cache<T>(&self, st: &mut State, fatal: bool, r: Result<T>) -> Result<T> {
        if r.is_err() {
            st.io_errors += 1;
            if fatal || st.io_errors >= IO_ERROR_LIMIT {
                self.fail(st);
            }
        }
        r
    }

    /// Mark the cache device failed: nothing is written to it from now on but
    /// one attempt at a superblock saying so.
    pub(crate) fn fail(&self, st: &mut State) {
        if st.failed {
            return;
        }
        st.failed = true;
        st.sb.failed = true;
        st.sb.clean = false;
        // No mapping sector is written again; reads in flight install nothing.
        st.stale.clear();
        if !st.read_only {
            // Best effort: a device that refuses this says nothing, and is
            // documented as such (docs/reliability.md, "a cache device that fails").
            let _ = self.put_superblock(st);
        }
    }

    pub(crate) fn failed_error(&self, st: &State, op: Op) -> Error {
        Error::new(
            ErrorKind::Io,
            op,
            format!(
                "the cache device failed after {} I/O error(s); {}",
                st.io_errors,
                if st.dirty.is_empty() {
                    "requests pass through to the origin, which is complete, and the cache \
                     is not changed again"
                        .to_string()
                } else {
                    format!(
                        "it holds the only up-to-date copy of {} dirty block(s), which are \
                         served from it while it can read them and never written back",
                        st.dirty.len()
                    )
                }
            ),
        )
        .on_device(self.cache.name())
    }

    /// A read of a failed cache: dirty blocks from the cache device or an
    /// error, everything else from the origin.
    pub(crate) fn read_failed<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        buf: &mut [u8],
        offset: u64,
    ) -> Result<()> {
        let len = buf.len() as u64;
        if len == 0 {
            return Ok(());
        }
        let bs = Self::bs(&st);
        let (first, last) = (offset / bs, (offset + len - 1) / bs);
        if st.dirty.range(first..=last).next().is_none() {
            return self.read_origin(st, buf, offset).1;
        }
        let mut pos = 0u64;
        while pos < len {
            let abs = offset + pos;
            let (b, within) = (abs / bs, abs % bs);
            let n = (bs - within).min(len - pos);
            let piece = &mut buf[pos as usize..(pos + n) as usize];
            pos += n;
            match st.map.get(&b) {
                Some(&slot) if st.dirty.contains(&b) => {
                    let r = self.read_slot(&st, slot, within, piece);
                    self.on_cache(&mut st, false, r)?;
                }
                _ => self.origin.read_at(piece, abs)?,
            }
        }
        Ok(())
    }

    /// A read of slots `slot..slot + k` (blocks `b..b + k`) of the cache
    /// device failed with `e`: counted. Below the limit their clean copies
    /// are dropped and the caller reads the origin instead; a dirty copy is
    /// the only one, so then (or once the device is failed) the error is
    /// returned.
    pub(crate) fn on_slot_read_error(
        &self,
        st: &mut State,
        b: u64,
        slot: u64,
        k: u64,
        e: Error,
    ) -> Result<()> {
        let r = self.on_cache(st, false, Err(e));
        if st.failed || (b..b + k).any(|x| st.dirty.contains(&x)) {
            return r;
        }
        for s in slot..slot + k {
            Self::drop_slot(st, s);
            st.free.push(s);
        }
        Ok(())
    }

    /// The first dirty block of `[offset, offset+len)`, if any.
    fn dirty_in(st: &State, offset: u64, len: u64) -> Option<u64> {
        if len == 0 {
            return None;
        }
        let bs = Self::bs(st);
        st.dirty
            .range(offset / bs..=(offset + len - 1) / bs)
            .next()
            .copied()
    }

    /// Refuse a change of `[offset, offset+len)` of a failed cache that
    /// touches a dirty block (see the module doc).
    pub(crate) fn refuse_dirty_change(&self, st: &State, offset: u64, len: u64) -> Result<()> {
        match Self::dirty_in(st, offset, len) {
            Some(b) => Err(Error::new(
                ErrorKind::Io,
                Op::Write,
                format!(
                    "the cache device failed holding the only up-to-date copy of block {b} \
                     (dirty, write-back): a write there is refused rather than split between \
                     the failed device and the origin"
                ),
            )
            .on_device(self.cache.name())
            .at(offset, len)),
            None => Ok(()),
        }
    }

    /// A write of a failed cache: to the origin, unless it touches a dirty block.
    pub(crate) fn write_failed(
        &self,
        st: &mut State,
        buf: &[u8],
        offset: u64,
        fua: bool,
    ) -> Result<()> {
        self.refuse_dirty_change(st, offset, buf.len() as u64)?;
        self.send_origin(st, buf, offset, fua)
    }

    /// A flush of a failed cache: the origin's, and an error while dirty
    /// blocks are left on the failed device.
    pub(crate) fn flush_failed(&self, st: &mut State) -> Result<()> {
        if st.origin_unflushed {
            self.origin.flush()?;
            st.origin_unflushed = false;
        }
        if !st.dirty.is_empty() {
            return Err(self.failed_error(st, Op::Flush));
        }
        Ok(())
    }
}
