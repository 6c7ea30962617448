//! A volume that writes down every read and write reaching it (kind, offset,
//! length), then passes it on unchanged. Flushes and forced-unit-access
//! writes are counted beside the list (a FUA write is listed as a write too),
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
}

impl Recorded {
    pub fn new(inner: Arc<dyn Volume>) -> Recorded {
        Recorded {
            inner,
            seen: Mutex::new(Vec::new()),
            flushes: AtomicU64::new(0),
            fua_writes: AtomicU64::new(0),
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

impl Volume for Recorded {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn block_size(&self) -> u32 {
        self.inner.block_size()
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
    // What the inner volume tells its users about itself passes through
    // unchanged: a recording must not change how it is used.
    fn preferred_io_size(&self) -> Option<u64> {
        self.inner.preferred_io_size()
    }
    fn optimal_io_size(&self) -> Option<u64> {
        self.inner.optimal_io_size()
    }
    fn is_writable(&self) -> bool {
        self.inner.is_writable()
    }
}
