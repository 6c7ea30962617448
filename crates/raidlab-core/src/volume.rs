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

    /// Ask the device its size again and answer [`Volume::size`] with it from
    /// now on; returns it. A file enlarged with `truncate` or a block device
    /// grown (`losetup -c`, a LUN resized) while open keeps its old size
    /// otherwise, as `size` is read on every request and must not ask the
    /// kernel each time. Called by whoever is about to decide from a member's
    /// size (md re-reads a device's size for `--grow --size max`), never on
    /// the request path. The default: a volume whose size does not change
    /// underneath it (memory, an array, a slice) says its size.
    fn refresh_size(&self) -> Result<u64> {
        Ok(self.size())
    }

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

    /// Write `buf` at `offset` and return only once it is durable (forced unit
    /// access): what an NBD client's FUA flag or a cache's metadata commit asks
    /// for. The default writes and then flushes the whole volume, which is
    /// always correct; a volume that can make one write durable more cheaply
    /// (its own volatile cache, members of an array) says so by overriding it.
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.write_at(buf, offset)?;
        self.flush()
    }

    /// Make `[offset, offset+len)` read as zeros. The default writes zeros in
    /// pieces of [`ZERO_PIECE`] bytes; a volume that can do better (punch a hole
    /// that reads as zeros, mark a range zero in metadata) overrides it. Unlike
    /// [`Volume::discard`] this is never advisory: when it returns `Ok` the range
    /// reads as zeros.
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        check_range_with(|| self.name(), Op::Write, self.size(), offset, len)?;
        let zeroes = vec![0u8; len.min(ZERO_PIECE) as usize];
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(zeroes.len() as u64) as usize;
            self.write_at(&zeroes[..n], offset + done)?;
            done += n as u64;
        }
        Ok(())
    }

    /// The smallest request size, in bytes, that the volume serves without a
    /// penalty such as read-modify-write (a RAID chunk, a disk's physical
    /// sector); `None` when it has no preference beyond [`Volume::block_size`].
    fn preferred_io_size(&self) -> Option<u64> {
        None
    }

    /// The request size, in bytes, that the volume serves best, with requests
    /// aligned to it (a parity array's whole stripe of data); `None` when
    /// there is none. A writer that can gather its writes (a cache cleaning
    /// dirty blocks) uses it to write whole units.
    fn optimal_io_size(&self) -> Option<u64> {
        None
    }

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

    /// The one open file or block device this volume's reads, writes and
    /// flushes go to unchanged, for a submitter that sends them to the
    /// kernel itself (io_uring) instead of calling [`Volume::read_at`] on a
    /// thread per request. `None` (the default) for every volume that does
    /// anything else with its bytes: memory, arrays, and every wrapper (a
    /// fault injector, a throttle, a recorder must see each request, so
    /// [`crate::Layer`] volumes never pass it on).
    fn raw_file(&self) -> Option<RawFile<'_>> {
        None
    }
}

/// See [`Volume::raw_file`]: where a request to the volume goes in the file,
/// and what the file allows.
#[derive(Debug, Clone, Copy)]
pub struct RawFile<'a> {
    pub fd: BorrowedFd<'a>,
    /// The volume's offset 0 is this offset of the file.
    pub base: u64,
    /// The volume's size: a request past it must go through the volume,
    /// which refuses it with its own error.
    pub size: u64,
    /// Writes and flushes are allowed (the file was opened for writing).
    pub writable: bool,
    /// A block device, not a regular file (io_uring treats the two
    /// differently: see raidlab-raid's `exec::uring`).
    pub block_device: bool,
    /// Opened with `O_DIRECT`: offsets and lengths must then be multiples
    /// of the first, memory addresses of the second.
    pub direct: Option<(u64, usize)>,
    /// Told of each request made straight to the file, as the wrapper that
    /// passed the file on (a member's I/O counters) would have counted it
    /// had the request gone through it; a wrapper that has more to do than
    /// count keeps the file to itself instead.
    pub observer: Option<&'a dyn RawObserver>,
}

/// See [`RawFile::observer`].
pub trait RawObserver: Send + Sync + std::fmt::Debug {
    /// A read, write or flush (`kind`) of `bytes` bytes that started at
    /// `started` has completed, successfully or not.
    fn done(&self, kind: crate::IoKind, bytes: u64, started: std::time::Instant, ok: bool);
}

/// The largest piece the default [`Volume::write_zeroes`] writes at once: large
/// enough to keep a disk streaming, small enough to allocate on every call.
pub const ZERO_PIECE: u64 = 1 << 20;

/// What a [`Mapped`] view is made of: bytes in memory, and a way to say that a
/// reader is done with part of them for now.
pub trait MapBytes: AsRef<[u8]> + Send + Sync {
    /// The reader will not look at `range` again soon: a mapping may drop its
    /// page-table entries there, spreading the cost an unmap would pay at the
    /// end over the readers. Only a hint; the bytes must read the same after it,
    /// so memory that would be lost by dropping it (anything not backed by a
    /// file) keeps this default, which does nothing.
    fn release(&self, range: std::ops::Range<usize>) {
        let _ = range;
    }
}

/// A read-only view of (part of) a volume's bytes in memory.
#[derive(Clone)]
pub struct Mapped {
    bytes: Arc<dyn MapBytes>,
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
    pub fn new(bytes: Arc<dyn MapBytes>) -> Mapped {
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

    /// Say that the reader is done with `[start, start+len)` of this view for
    /// now (see [`MapBytes::release`]); the part outside the view is left alone.
    pub fn release(&self, start: u64, len: u64) {
        let start = usize::try_from(start).unwrap_or(usize::MAX).min(self.len);
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        let end = start.saturating_add(len).min(self.len);
        if start < end {
            self.bytes.release(self.start + start..self.start + end);
        }
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
    fn refresh_size(&self) -> Result<u64> {
        (**self).refresh_size()
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
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> Result<()> {
        (**self).write_at_fua(buf, offset)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        (**self).write_zeroes(offset, len)
    }
    fn preferred_io_size(&self) -> Option<u64> {
        (**self).preferred_io_size()
    }
    fn optimal_io_size(&self) -> Option<u64> {
        (**self).optimal_io_size()
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
    fn raw_file(&self) -> Option<RawFile<'_>> {
        (**self).raw_file()
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
    /// What the window is called when it is not just "part of the inner volume"
    /// (a partition: `disk.img@3`); `None` takes the inner volume's name.
    name: Option<String>,
}

impl<V: Volume> SliceVolume<V> {
    pub fn new(inner: V, start: u64, len: u64) -> Result<Self> {
        check_range(&inner.name(), Op::Open, inner.size(), start, len)?;
        Ok(SliceVolume {
            inner,
            start,
            len,
            name: None,
        })
    }

    /// A window with a name of its own (errors about it and superblock offsets
    /// then read relative to the window, e.g. `disk.img@3: at offset 4096`).
    pub fn named(inner: V, start: u64, len: u64, name: impl Into<String>) -> Result<Self> {
        let mut s = Self::new(inner, start, len)?;
        s.name = Some(name.into());
        Ok(s)
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
        match &self.name {
            Some(n) => n.clone(),
            None => self.inner.name(),
        }
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
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.check(Op::Write, offset, buf.len() as u64)?;
        self.inner.write_at_fua(buf, self.start + offset)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        self.check(Op::Write, offset, len)?;
        self.inner.write_zeroes(self.start + offset, len)
    }
    fn preferred_io_size(&self) -> Option<u64> {
        self.inner.preferred_io_size()
    }
    // The inner volume's optimal unit is aligned to its own start; through a
    // window that starts off that alignment, whole units would straddle two.
    fn optimal_io_size(&self) -> Option<u64> {
        self.inner
            .optimal_io_size()
            .filter(|&unit| unit > 0 && self.start % unit == 0)
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
    fn raw_file(&self) -> Option<RawFile<'_>> {
        let r = self.inner.raw_file()?;
        Some(RawFile {
            base: r.base + self.start,
            size: self.len,
            ..r
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Bytes in memory that count writes and flushes, with only the required
    /// methods, so that the trait's defaults are what runs.
    #[derive(Debug)]
    struct Plain {
        bytes: Mutex<Vec<u8>>,
        writes: Mutex<Vec<(u64, usize)>>,
        flushes: Mutex<u32>,
    }

    impl Plain {
        fn new(size: usize) -> Plain {
            Plain {
                bytes: Mutex::new(vec![0xAA; size]),
                writes: Mutex::new(vec![]),
                flushes: Mutex::new(0),
            }
        }
    }

    impl Volume for Plain {
        fn name(&self) -> String {
            "plain".into()
        }
        fn size(&self) -> u64 {
            self.bytes.lock().unwrap().len() as u64
        }
        fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
            check_range("plain", Op::Read, self.size(), offset, buf.len() as u64)?;
            let b = self.bytes.lock().unwrap();
            buf.copy_from_slice(&b[offset as usize..offset as usize + buf.len()]);
            Ok(())
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
            check_range("plain", Op::Write, self.size(), offset, buf.len() as u64)?;
            let mut b = self.bytes.lock().unwrap();
            b[offset as usize..offset as usize + buf.len()].copy_from_slice(buf);
            self.writes.lock().unwrap().push((offset, buf.len()));
            Ok(())
        }
        fn flush(&self) -> Result<()> {
            *self.flushes.lock().unwrap() += 1;
            Ok(())
        }
    }

    #[test]
    fn default_fua_writes_then_flushes() {
        let v = Plain::new(4096);
        v.write_at_fua(&[1, 2, 3], 10).unwrap();
        assert_eq!(*v.writes.lock().unwrap(), [(10, 3)]);
        assert_eq!(*v.flushes.lock().unwrap(), 1);
        let mut b = [0; 3];
        v.read_at(&mut b, 10).unwrap();
        assert_eq!(b, [1, 2, 3]);
        // A failed write is not followed by a flush that could be taken for success.
        assert!(v.write_at_fua(&[1], 4096).is_err());
        assert_eq!(*v.flushes.lock().unwrap(), 1);
    }

    #[test]
    fn default_write_zeroes_zeroes_exactly_the_range_in_pieces() {
        let size = 3 * ZERO_PIECE as usize;
        let v = Plain::new(size);
        let len = ZERO_PIECE + 1000;
        v.write_zeroes(7, len).unwrap();
        let b = v.bytes.lock().unwrap();
        assert_eq!(b[6], 0xAA);
        assert!(b[7..7 + len as usize].iter().all(|&x| x == 0));
        assert_eq!(b[7 + len as usize], 0xAA);
        drop(b);
        assert_eq!(
            *v.writes.lock().unwrap(),
            [(7, ZERO_PIECE as usize), (7 + ZERO_PIECE, 1000)]
        );
        // Past the end: refused before anything is written.
        let e = v.write_zeroes(size as u64 - 10, 11).unwrap_err();
        assert_eq!(e.kind, ErrorKind::OutOfRange);
        assert_eq!(v.writes.lock().unwrap().len(), 2);
    }

    #[test]
    fn io_sizes_default_to_none_and_pass_through_slices_when_aligned() {
        #[derive(Debug)]
        struct Striped(Plain);
        impl Volume for Striped {
            fn name(&self) -> String {
                self.0.name()
            }
            fn size(&self) -> u64 {
                self.0.size()
            }
            fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
                self.0.read_at(buf, offset)
            }
            fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
                self.0.write_at(buf, offset)
            }
            fn flush(&self) -> Result<()> {
                self.0.flush()
            }
            fn preferred_io_size(&self) -> Option<u64> {
                Some(512)
            }
            fn optimal_io_size(&self) -> Option<u64> {
                Some(1024)
            }
        }
        let plain = Plain::new(4096);
        assert_eq!(
            (plain.preferred_io_size(), plain.optimal_io_size()),
            (None, None)
        );
        let v = Arc::new(Striped(Plain::new(4096)));
        let aligned = SliceVolume::new(v.clone(), 2048, 1024).unwrap();
        assert_eq!(aligned.preferred_io_size(), Some(512));
        assert_eq!(aligned.optimal_io_size(), Some(1024));
        let skewed = SliceVolume::new(v.clone(), 512, 1024).unwrap();
        assert_eq!(skewed.preferred_io_size(), Some(512));
        assert_eq!(skewed.optimal_io_size(), None);
        // FUA and zeroes through a slice land at the slice's offset and no further.
        aligned.write_at_fua(&[9], 0).unwrap();
        assert_eq!(*v.0.flushes.lock().unwrap(), 1);
        aligned.write_zeroes(1, 1023).unwrap();
        assert!(aligned.write_zeroes(1, 1024).is_err());
        let mut b = [0u8; 4];
        v.read_at(&mut b, 2047).unwrap();
        assert_eq!(b, [0xAA, 9, 0, 0]);
        v.read_at(&mut b, 3071).unwrap();
        assert_eq!(b, [0, 0xAA, 0xAA, 0xAA]);
    }

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
