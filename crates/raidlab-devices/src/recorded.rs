//! A volume that writes down every read and write reaching it (kind, offset,
//! length), then passes it on unchanged. Flushes, forced-unit-access writes
//! and discards are counted beside the list (a FUA write is listed as a write
//! too, and so is a write-zeroes),
//! so that a test can tell a member was made durable without the list, which
//! the simulator's equivalence proof compares, changing shape.
//!
//! Decides nothing and changes nothing: tests compare what an engine asked of its
//! members (the simulator's equivalence proof), benchmarks count member traffic.

use raidlab_core::{Result, Volume};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Whether an operation read or wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Access {
    Read,
    Write,
}

/// One operation that reached the inner volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Accessed {
    pub access: Access,
    pub offset: u64,
    pub len: u64,
}

/// `inner`, with every read and write it receives recorded in order.
pub struct Recorded {
    inner: Arc<dyn Volume>,
    seen: Mutex<Vec<Accessed>>,
    flushes: AtomicU64,
    fua_writes: AtomicU64,
    discards: AtomicU64,
}

impl Recorded {
    pub fn new(inner: Arc<dyn Volume>) -> Recorded {
        Recorded {
            inner,
            seen: Mutex::new(Vec::new()),
            flushes: AtomicU64::new(0),
            fua_writes: AtomicU64::new(0),
            discards: AtomicU64::new(0),
        }
    }

    /// Flushes received since the volume was made.
    pub fn flushes(&self) -> u64 {
        self.flushes.load(Ordering::Relaxed)
    }

    /// FUA writes received since the volume was made (each also listed as a
    /// write by [`Recorded::take`]).
    pub fn fua_writes(&self) -> u64 {
        self.fua_writes.load(Ordering::Relaxed)
    }

    /// Discards (trims) received since the volume was made; they change no
    /// listed bytes, so they are counted beside the list.
    pub fn discards(&self) -> u64 {
        self.discards.load(Ordering::Relaxed)
    }

    /// The operations since the last call, in the order they arrived.
    pub fn take(&self) -> Vec<Accessed> {
        std::mem::take(&mut *self.seen.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn note(&self, access: Access, offset: u64, len: usize) {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Accessed {
                access,
                offset,
                len: len as u64,
            });
    }
}

impl std::fmt::Debug for Recorded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorded")
            .field("inner", &self.inner.name())
            .finish()
    }
}

impl raidlab_core::Layer for Recorded {
    fn below(&self) -> &dyn Volume {
        &*self.inner
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.note(Access::Read, offset, buf.len());
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.note(Access::Write, offset, buf.len());
        self.inner.write_at(buf, offset)
    }
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.note(Access::Write, offset, buf.len());
        self.fua_writes.fetch_add(1, Ordering::Relaxed);
        self.inner.write_at_fua(buf, offset)
    }
    fn flush(&self) -> Result<()> {
        self.flushes.fetch_add(1, Ordering::Relaxed);
        self.inner.flush()
    }
    /// Listed as one write of the range (it changes those bytes), and passed
    /// below as write-zeroes.
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        self.note(Access::Write, offset, len as usize);
        self.inner.write_zeroes(offset, len)
    }
    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        self.discards.fetch_add(1, Ordering::Relaxed);
        self.inner.discard(offset, len)
    }
    // A reader handed the bytes themselves (a rebuild reading a mapped view,
    // a server splicing stored ranges) would read without a request reaching
    // the list: every read must be written down.
    fn passes_views(&self) -> bool {
        false
    }
}
