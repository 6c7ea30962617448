//! Direct (`O_DIRECT`) I/O on a member descriptor: which mode a member uses,
//! the alignment its device asks for, aligned bounce buffers, and
//! read-modify-write of partly written edge blocks.
//!
//! With `O_DIRECT` the kernel moves bytes between the caller's memory and the
//! device without the page cache, so a write error comes back from that
//! `pwrite` (not from a later `fsync`, after the page cache may already have
//! dropped the pages: PostgreSQL's "fsyncgate") and member data is not cached a
//! second time behind the NBD client's own cache. The price: the memory
//! address, the file offset and the length of every request must be multiples
//! of the device's alignment. This module meets that for any request:
//!
//! ```text
//!  caller's range        |----#########################----|
//!  device blocks      [ head ][      whole blocks      ][ tail ]
//!                       RMW       straight (or bounced)     RMW
//! ```
//!
//! An aligned request in aligned memory goes straight to the kernel; one in
//! unaligned memory is copied through an aligned bounce buffer (at most
//! [`BOUNCE`] bytes at a time, so memory stays bounded); a request that starts
//! or ends inside a block reads that edge block, puts the caller's bytes in,
//! and writes it back, holding a lock for that block so two unaligned writes
//! to different bytes of one block cannot lose each other's bytes.

use std::alloc::Layout;
use std::os::fd::RawFd;
use std::sync::{Mutex, MutexGuard};

/// How a member's bytes move: straight between memory and device, or through
/// the kernel's page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoMode {
    /// `O_DIRECT`: errors at the write that failed, no page cache.
    Direct,
    /// Through the page cache: writes are durable at the next flush.
    Buffered,
}

impl IoMode {
    /// The mode a member gets when the user chose none.
    ///
    /// Block devices are direct: that is where the page cache costs
    /// correctness (a member write error reported only at a later fsync,
    /// after the failed pages may be gone) and memory (member data cached
    /// twice, dirty pages flushed in storms). Regular files are buffered:
    /// they are images and test files, tmpfs (where most tests and
    /// memory-speed benchmarks keep them) refuses `O_DIRECT`, and whether a
    /// file system caches the files under it is the user's choice.
    pub fn default_for(block_device: bool) -> IoMode {
        if block_device {
            IoMode::Direct
        } else {
            IoMode::Buffered
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            IoMode::Direct => "direct",
            IoMode::Buffered => "buffered",
        }
    }
}

impl std::fmt::Display for IoMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for IoMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "direct" => Ok(IoMode::Direct),
            "buffered" => Ok(IoMode::Buffered),
            _ => Err(format!(
                "unknown I/O mode {s:?}: say \"direct\" or \"buffered\""
            )),
        }
    }
}

/// The largest bounce buffer one request uses; longer requests go through it
/// in pieces, so a server's memory does not grow with its clients' requests.
pub const BOUNCE: usize = 1 << 20;

/// Locks for edge blocks under read-modify-write, chosen by block number.
/// Two blocks may share a lock (that only serialises them); one block
/// always maps to the same lock.
const EDGE_LOCKS: usize = 64;

thread_local! {
    /// Each thread's bounce buffer between requests (see
    /// [`Direct::with_bounce`]).
    static BOUNCE_BUF: std::cell::Cell<Option<AlignedBuf>> = const { std::cell::Cell::new(None) };
}

/// A zeroed heap buffer whose start is aligned to a given power of two.
pub struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
    layout: Layout,
}

// SAFETY: the buffer owns its allocation outright (no aliasing pointer is
// kept anywhere else); it is plain bytes, like a `Vec<u8>`.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out `&[u8]`, as `Vec<u8>` does.
unsafe impl Sync for AlignedBuf {}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .field("align", &self.layout.align())
            .finish()
    }
}

impl AlignedBuf {
    /// `len` zero bytes starting at a multiple of `align` (a power of two).
    pub fn new(len: usize, align: usize) -> AlignedBuf {
        // A zero-sized allocation is not allowed; one byte more costs nothing.
        let layout = Layout::from_size_align(len.max(1), align)
            .expect("alignment is a power of two and the length fits in isize");
        // SAFETY: the layout has a non-zero size (see above).
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let Some(ptr) = std::ptr::NonNull::new(raw) else {
            std::alloc::handle_alloc_error(layout)
        };
        AlignedBuf { ptr, len, layout }
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` points to at least `len` bytes we allocated, zeroed
        // at allocation (so initialised), alive until `drop`; the borrow of
        // `self` keeps them from being freed or written meanwhile.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and the `&mut self` borrow makes this the
        // only access to the bytes while the slice lives.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `alloc_zeroed` with exactly this layout and
        // is freed only here, once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// What direct I/O on one descriptor needs: the device's alignment and the
/// locks for edge blocks under read-modify-write.
#[derive(Debug)]
pub struct Direct {
    /// Offsets and lengths reach the kernel in multiples of this.
    block: u64,
    /// Memory handed to the kernel starts at a multiple of this.
    mem_align: usize,
    locks: Vec<Mutex<()>>,
}

impl Direct {
    /// For a descriptor whose device takes offsets in multiples of `block`
    /// and memory aligned to `mem_align` (both powers of two).
    pub fn new(block: u32, mem_align: u32) -> Direct {
        assert!(block.is_power_of_two() && mem_align.is_power_of_two());
        Direct {
            block: u64::from(block),
            mem_align: mem_align as usize,
            locks: (0..EDGE_LOCKS).map(|_| Mutex::new(())).collect(),
        }
    }

    /// The alignment of offsets and lengths.
    pub fn block(&self) -> u64 {
        self.block
    }

    /// The alignment of memory handed to the kernel.
    pub fn mem_align(&self) -> usize {
        self.mem_align
    }

    /// Whether `[offset, offset+len)` can go to the kernel as it is, with
    /// memory at `ptr`.
    pub fn aligned(&self, ptr: *const u8, offset: u64, len: usize) -> bool {
        offset % self.block == 0
            && len as u64 % self.block == 0
            && (ptr as usize) % self.mem_align == 0
    }

    /// Run `f` with this thread's bounce buffer for a request spanning
    /// `span` bytes of whole blocks: a power of two of at least a block and
    /// at most [`BOUNCE`] (so pieces of it are whole blocks), aligned for
    /// this device, kept for the thread's next request and grown only when
    /// a request needs more. One allocation per request let a served
    /// array's heap grow to 200-250 MiB under nbdcopy (freed buffers stay
    /// in the allocator's per-thread arenas); kept per thread, the memory
    /// is bounded by the threads doing member I/O times their largest
    /// request (capped at `BOUNCE`).
    fn with_bounce<R>(&self, span: u64, f: impl FnOnce(&mut AlignedBuf) -> R) -> R {
        // Page alignment satisfies every device's memory alignment too.
        let align = self.mem_align.max(self.block as usize).max(4096);
        let block = self.block as usize;
        let want = (span.min(BOUNCE as u64) as usize)
            .next_power_of_two()
            .max(block);
        // Taken out while in use, so a nested call (none today) would make
        // its own rather than share it.
        let mut buf = BOUNCE_BUF
            .with(|c| c.take())
            .filter(|b| b.layout.align() >= align && b.len >= want)
            .unwrap_or_else(|| AlignedBuf::new(want, align));
        let r = f(&mut buf);
        BOUNCE_BUF.with(|c| c.set(Some(buf)));
        r
    }

    /// Read `buf.len()` bytes at `offset` from `fd` (opened `O_DIRECT`).
    /// The whole blocks around the range must lie inside the file.
    pub fn read(&self, fd: RawFd, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        if self.aligned(buf.as_ptr(), offset, buf.len()) {
            return pread_full(fd, buf, offset);
        }
        let start = offset / self.block * self.block;
        let end = (offset + buf.len() as u64).div_ceil(self.block) * self.block;
        self.with_bounce(end - start, |bounce| {
            let mut pos = start;
            while pos < end {
                let n = (end - pos).min(bounce.len() as u64) as usize;
                pread_full(fd, &mut bounce[..n], pos)?;
                // The part of this piece the caller asked for.
                let from = pos.max(offset);
                let to = (pos + n as u64).min(offset + buf.len() as u64);
                buf[(from - offset) as usize..(to - offset) as usize]
                    .copy_from_slice(&bounce[(from - pos) as usize..(to - pos) as usize]);
                pos += n as u64;
            }
            Ok(())
        })
    }

    /// Write `buf` at `offset` to `fd` (opened `O_DIRECT`), each piece with
    /// `pwritev2` flags `flags` (`RWF_DSYNC` for a FUA write). The whole
    /// blocks around the range must lie inside the file.
    pub fn write(&self, fd: RawFd, buf: &[u8], offset: u64, flags: i32) -> std::io::Result<()> {
        if self.aligned(buf.as_ptr(), offset, buf.len()) {
            return pwrite_full(fd, buf, offset, flags);
        }
        let len = buf.len() as u64;
        let start = offset / self.block * self.block;
        let end = (offset + len).div_ceil(self.block) * self.block;
        let head = (offset > start).then_some(start);
        let tail = (offset + len < end).then_some(end - self.block);
        // Hold the edge blocks' locks for the whole write: another writer
        // of other bytes of those blocks waits for our read-modify-write to
        // be on the device, then reads what we wrote.
        let _guards = self.lock_edges(head, tail);
        self.with_bounce(end - start, |bounce| {
            let mut pos = start;
            while pos < end {
                let n = (end - pos).min(bounce.len() as u64) as usize;
                let piece_end = pos + n as u64;
                let b = self.block as usize;
                // Every byte of the piece is then the caller's or the edge
                // block's read: nothing left from an earlier request.
                if head.is_some_and(|h| h >= pos && h < piece_end) {
                    pread_full(fd, &mut bounce[..b], pos)?;
                }
                if let Some(t) = tail.filter(|&t| t >= pos && t < piece_end) {
                    let at = (t - pos) as usize;
                    pread_full(fd, &mut bounce[at..at + b], t)?;
                }
                let from = pos.max(offset);
                let to = piece_end.min(offset + len);
                bounce[(from - pos) as usize..(to - pos) as usize]
                    .copy_from_slice(&buf[(from - offset) as usize..(to - offset) as usize]);
                pwrite_full(fd, &bounce[..n], pos, flags)?;
                pos = piece_end;
            }
            Ok(())
        })
    }

    /// The locks of the edge blocks at `head` and `tail` (byte offsets),
    /// taken in a fixed order so two writers never wait for each other.
    fn lock_edges(&self, head: Option<u64>, tail: Option<u64>) -> Vec<MutexGuard<'_, ()>> {
        let mut idx: Vec<usize> = [head, tail]
            .into_iter()
            .flatten()
            .map(|o| ((o / self.block) % EDGE_LOCKS as u64) as usize)
            .collect();
        idx.sort_unstable();
        idx.dedup();
        idx.into_iter()
            // A writer that panicked left whole blocks on the device; the
            // lock guards no data in memory, so a poisoned one is still good.
            .map(|i| self.locks[i].lock().unwrap_or_else(|p| p.into_inner()))
            .collect()
    }
}

/// `pread` until `buf` is full; the end of the file there is an error.
pub(crate) fn pread_full(fd: RawFd, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let at = off_t(offset + done as u64)?;
        let rest = &mut buf[done..];
        // SAFETY: `rest` is valid for writes of `rest.len()` bytes and is not
        // otherwise touched during the call; `fd` is an open descriptor the
        // caller owns.
        let rc = unsafe { libc::pread(fd, rest.as_mut_ptr().cast(), rest.len(), at) };
        match rc {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n if n > 0 => done += n as usize,
            _ => {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINTR) {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

/// `pwritev2` with `flags` until all of `buf` is written. Where the kernel
/// or file system has no `pwritev2` flags, a plain `pwrite` followed (for
/// `RWF_DSYNC`) by `fdatasync`.
pub fn pwrite_full(fd: RawFd, buf: &[u8], offset: u64, flags: i32) -> std::io::Result<()> {
    let mut done = 0;
    let mut flags = flags;
    let mut sync_after = false;
    while done < buf.len() {
        let at = off_t(offset + done as u64)?;
        let rest = &buf[done..];
        let rc = if flags == 0 {
            // SAFETY: `rest` is valid for reads of `rest.len()` bytes for the
            // call; `fd` is an open descriptor the caller owns.
            unsafe { libc::pwrite(fd, rest.as_ptr().cast(), rest.len(), at) }
        } else {
            let iov = libc::iovec {
                iov_base: rest.as_ptr() as *mut libc::c_void,
                iov_len: rest.len(),
            };
            // SAFETY: `iov` describes `rest`, valid for reads for the call
            // (the kernel only reads through it); `fd` is the caller's.
            unsafe { libc::pwritev2(fd, &iov, 1, at, flags) }
        };
        match rc {
            0 => return Err(std::io::ErrorKind::WriteZero.into()),
            n if n > 0 => done += n as usize,
            _ => {
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => {}
                    Some(libc::EOPNOTSUPP | libc::ENOSYS) if flags != 0 => {
                        sync_after = flags & libc::RWF_DSYNC != 0;
                        flags = 0;
                    }
                    _ => return Err(e),
                }
            }
        }
    }
    if sync_after {
        // SAFETY: fdatasync takes no pointers; `fd` is the caller's.
        if unsafe { libc::fdatasync(fd) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

fn off_t(offset: u64) -> std::io::Result<libc::off_t> {
    libc::off_t::try_from(offset)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "offset too large"))
}

/// The alignment direct I/O on `fd` needs: (offset and length, memory).
/// A block device's logical block size (`BLKSSZGET`), for both; a file's
/// from `statx`'s `STATX_DIOALIGN` (Linux 6.1 and later), else 4096, a
/// multiple of every file system's block size that Linux pages allow.
pub fn alignment(fd: RawFd, block_device: bool) -> (u32, u32) {
    const FALLBACK: u32 = 4096;
    if block_device {
        let mut lbs: libc::c_int = 0;
        // SAFETY: BLKSSZGET writes one int through the pointer, which points
        // to a live `c_int`; `fd` is an open block device.
        let rc = unsafe { libc::ioctl(fd, libc::BLKSSZGET, &mut lbs) };
        if rc == 0 && lbs > 0 && (lbs as u32).is_power_of_two() {
            return (lbs as u32, lbs as u32);
        }
        return (FALLBACK, FALLBACK);
    }
    let mut st = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: statx writes a `statx` into the buffer, which is valid and
    // large enough; the path is an empty C string with AT_EMPTY_PATH, so
    // the call looks at `fd` itself.
    let rc = unsafe {
        libc::statx(
            fd,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            st.as_mut_ptr(),
        )
    };
    if rc == 0 {
        // SAFETY: statx returned 0, so it filled the structure (zeroed
        // before, so every field is initialised either way).
        let st = unsafe { st.assume_init() };
        let (off, mem) = (st.stx_dio_offset_align, st.stx_dio_mem_align);
        if st.stx_mask & libc::STATX_DIOALIGN != 0 && off.is_power_of_two() && mem.is_power_of_two()
        {
            return (off, mem);
        }
    }
    (FALLBACK, FALLBACK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buffers_are_aligned_zeroed_and_writable() {
        for (len, align) in [(0, 512), (1, 4096), (4096, 4096), (BOUNCE, 4096), (100, 64)] {
            let mut b = AlignedBuf::new(len, align);
            assert_eq!(b.as_ptr() as usize % align, 0);
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|&x| x == 0));
            b.iter_mut().enumerate().for_each(|(i, x)| *x = i as u8);
            assert!(b.iter().enumerate().all(|(i, &x)| x == i as u8));
        }
    }

    #[test]
    fn io_mode_words_round_trip() {
        for m in [IoMode::Direct, IoMode::Buffered] {
            assert_eq!(m.as_str().parse::<IoMode>(), Ok(m));
        }
        assert!("odirect".parse::<IoMode>().unwrap_err().contains("direct"));
        assert_eq!(IoMode::default_for(true), IoMode::Direct);
        assert_eq!(IoMode::default_for(false), IoMode::Buffered);
    }
}
