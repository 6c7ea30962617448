//! The one trait every block store implements.
//!
//! Methods take `&self` so that one volume can serve many requests at once from many
//! threads; an implementation does its own locking where it needs any. Offsets and
//! lengths are bytes; every implementation checks them with [`check_range`] and
//! returns [`ErrorKind::OutOfRange`] rather than touching anything outside itself.

use crate::error::{Error, ErrorKind, Op, Result};
use std::os::fd::BorrowedFd;
use std::sync::Arc;

/// Receives the stored places of a range, in order: `len` bytes at `offset` of the
/// open file `fd`. See [`Volume::read_stored`].
pub type StoredSink<'a> = dyn FnMut(BorrowedFd<'_>, u64, usize) -> std::io::Result<()> + 'a;

/// A block device with a size: a file, a disk, memory, an array of other volumes.
pub trait Volume: Send + Sync {
    /// A short name for messages: a path, `array md0`, `memory#3`.
    fn name(&self) -> String;

    /// Size in bytes.
    fn size(&self) -> u64;

    /// The smallest unit of I/O the volume handles without read-modify-write.
    fn block_size(&self) -> u32 {
        512
    }

    /// Fill `buf` from `offset`. The whole range must lie inside the volume.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;

    /// Write `buf` at `offset`. The whole range must lie inside the volume.
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()>;

    /// Make every completed write durable.
    fn flush(&self) -> Result<()>;

    /// Whether [`Volume::write_at`] can succeed at all.
    fn is_writable(&self) -> bool {
        true
    }

    /// The volume's bytes mapped into memory, for bulk readers (a rebuild) that
    /// would otherwise copy everything through [`Volume::read_at`]. `None` where
    /// there is no such view (most volumes); callers must always be able to do
    /// without it.
    fn mapped(&self) -> Option<Mapped> {
        None
    }

    /// Hand `sink` the places where the bytes of `[offset, offset+len)` are
    /// stored, in order, as ranges of open files, so that a reader can move them
    /// without copying them (splice into a socket). Returns `Ok(false)` where the
    /// bytes are not simply stored (memory, a throttle, a degraded array whose
    /// data must be computed): the caller then uses [`Volume::read_at`]. After
    /// `Ok(false)` or an error, whatever the sink received must be thrown away
    /// (a volume may find out half way), and `read_at` is the way to learn what
    /// went wrong: it is the path that reports and repairs errors.
    fn read_stored(&self, offset: u64, len: u64, sink: &mut StoredSink<'_>) -> Result<bool> {
        let _ = (offset, len, sink);
        Ok(false)
    }

    /// Forget the contents of a range (TRIM). Volumes that cannot say so; callers
    /// treat that as "nothing done", never as data loss.
    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        Err(Error::new(
            ErrorKind::Unsupported,
            Op::Discard,
            "this volume does not support discard",
        )
        .on_device(self.name())
        .at(offset, len))
    }

    /// Whether a successful [`Volume::discard`] leaves the range reading as
    /// zeros (memory cleared, a hole punched in a file). Redundant arrays trim
    /// only members that do, so that the copies of a block stay equal.
    fn discard_zeroes(&self) -> bool {
        false
    }
}

/// A read-only view of (part of) a volume's bytes in memory.
#[derive(Clone)]
pub struct Mapped {
    bytes: Arc<dyn AsRef<[u8]> + Send + Sync>,
    start: usize,
    len: usize,
}

impl std::fmt::Debug for Mapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapped")
            .field("start", &self.start)
            .field("len", &self.len)
            .finish()
    }
}

impl Mapped {
    /// A view of all of `bytes`.
    pub fn new(bytes: Arc<dyn AsRef<[u8]> + Send + Sync>) -> Mapped {
        let len = (*bytes).as_ref().len();
        Mapped {
            bytes,
            start: 0,
            len,
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        &(*self.bytes).as_ref()[self.start..self.start + self.len]
    }

    /// The part `[start, start+len)` of this view; `None` if it lies outside.
    pub fn narrow(&self, start: u64, len: u64) -> Option<Mapped> {
        let start = usize::try_from(start).ok()?;
        let len = usize::try_from(len).ok()?;
        (start.checked_add(len)? <= self.len).then(|| Mapped {
            bytes: self.bytes.clone(),
            start: self.start + start,
            len,
        })
    }
}

impl<T: Volume + ?Sized> Volume for Arc<T> {
    fn name(&self) -> String {
        (**self).name()
    }
    fn size(&self) -> u64 {
        (**self).size()
    }
    fn block_size(&self) -> u32 {
        (**self).block_size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        (**self).read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        (**self).write_at(buf, offset)
    }
    fn flush(&self) -> Result<()> {
        (**self).flush()
    }
    fn is_writable(&self) -> bool {
        (**self).is_writable()
    }
    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        (**self).discard(offset, len)
    }
    fn discard_zeroes(&self) -> bool {
        (**self).discard_zeroes()
    }
    fn mapped(&self) -> Option<Mapped> {
        (**self).mapped()
    }
    fn read_stored(&self, offset: u64, len: u64, sink: &mut StoredSink<'_>) -> Result<bool> {
        (**self).read_stored(offset, len, sink)
    }
}

/// Refuse a request that does not lie entirely inside a volume of `size` bytes.
pub fn check_range(name: &str, op: Op, size: u64, offset: u64, len: u64) -> Result<()> {
    check_range_with(|| name.to_string(), op, size, offset, len)
}

/// [`check_range`] with the volume's name made only for the error: on the path
/// of every read and write, a name made each time (a path turned into text) was
/// a measurable part of a 4 KiB read from memory.
pub fn check_range_with(
    name: impl FnOnce() -> String,
    op: Op,
    size: u64,
    offset: u64,
    len: u64,
) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(Error::new(
            ErrorKind::OutOfRange,
            op,
            format!("request ends past the end of the device ({size} bytes)"),
        )
        .on_device(name())
        .at(offset, len)),
    }
}

/// A window `[start, start + len)` of another volume, seen as a volume of its own.
/// Arrays use it for each member's data area (after the superblock and data offset),
/// so the engine can never write into metadata.
#[derive(Debug, Clone)]
pub struct SliceVolume<V> {
    inner: V,
    start: u64,
    len: u64,
}

impl<V: Volume> SliceVolume<V> {
    pub fn new(inner: V, start: u64, len: u64) -> Result<Self> {
        check_range(&inner.name(), Op::Open, inner.size(), start, len)?;
        Ok(SliceVolume { inner, start, len })
    }

    pub fn inner(&self) -> &V {
        &self.inner
    }

    pub fn start(&self) -> u64 {
        self.start
    }

    /// Refuse a request outside the window (the name is made only for the error).
    fn check(&self, op: Op, offset: u64, len: u64) -> Result<()> {
        check_range_with(|| self.name(), op, self.len, offset, len)
    }
}

impl<V: Volume> Volume for SliceVolume<V> {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn size(&self) -> u64 {
        self.len
    }
    fn block_size(&self) -> u32 {
        self.inner.block_size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.check(Op::Read, offset, buf.len() as u64)?;
        self.inner.read_at(buf, self.start + offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.check(Op::Write, offset, buf.len() as u64)?;
        self.inner.write_at(buf, self.start + offset)
    }
    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
    fn is_writable(&self) -> bool {
        self.inner.is_writable()
    }
    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        self.check(Op::Discard, offset, len)?;
        self.inner.discard(self.start + offset, len)
    }
    fn discard_zeroes(&self) -> bool {
        self.inner.discard_zeroes()
    }
    fn mapped(&self) -> Option<Mapped> {
        self.inner.mapped()?.narrow(self.start, self.len)
    }
    fn read_stored(&self, offset: u64, len: u64, sink: &mut StoredSink<'_>) -> Result<bool> {
        self.check(Op::Read, offset, len)?;
        self.inner.read_stored(self.start + offset, len, sink)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_range_refuses_overflow_and_past_end() {
        assert!(check_range("d", Op::Read, 100, 0, 100).is_ok());
        assert!(check_range("d", Op::Read, 100, 100, 0).is_ok());
        let e = check_range("d", Op::Read, 100, 99, 2).unwrap_err();
        assert_eq!(e.kind, ErrorKind::OutOfRange);
        let e = check_range("d", Op::Write, 100, u64::MAX, 2).unwrap_err();
        assert_eq!(e.kind, ErrorKind::OutOfRange);
    }
}
