//! Files and block devices as volumes, with positional I/O and an advisory lock so
//! that two raidlab processes never write one member at the same time.
//!
//! Writers take an exclusive `flock`, readers a shared one; a refused lock names the
//! process holding it when /proc/locks tells us (see `crate::lock`). Block devices are also opened with
//! `O_EXCL` when written, so Linux refuses them while mounted or claimed by md.
//!
//! Each volume moves its bytes in one [`IoMode`]: direct (`O_DIRECT`, aligned
//! through [`crate::direct`]) or buffered (the page cache). Block devices are
//! direct unless told otherwise, regular files buffered; see
//! [`IoMode::default_for`] for why.

use crate::direct::{Direct, IoMode};
use crate::lock::lock;
use raidlab_core::{check_range_with, Error, ErrorKind, Mapped, Op, Result, StoredSink, Volume};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// How to open a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    ReadOnly,
    ReadWrite,
}

/// A regular file or a block device.
#[derive(Debug)]
pub struct FileVolume {
    file: File,
    path: PathBuf,
    /// Bytes, as found at open or by the last [`Volume::refresh_size`]: read
    /// on every request, so asked of the kernel only when told to.
    size: AtomicU64,
    writable: bool,
    block_device: bool,
    /// The file mapped read-only, made on first use by [`Volume::mapped`],
    /// with the size it was made for: made again once the size changed.
    map: Mutex<Option<(u64, Option<Mapped>)>>,
    /// Set when `file` was opened with `O_DIRECT`: its alignment and the
    /// locks of edge blocks under read-modify-write. Every read, write and
    /// flush then goes through it; the page cache holds none of the
    /// member's data.
    direct: Option<Direct>,
}

impl FileVolume {
    /// Open an existing file or block device and lock it (shared for reading,
    /// exclusive for writing).
    pub fn open(path: &Path, mode: OpenMode) -> Result<Self> {
        Self::open_io(path, mode, None)
    }

    /// [`FileVolume::open`] with the I/O mode chosen: `None` takes the
    /// default for the kind of member ([`IoMode::default_for`]). Direct I/O
    /// asked for on a file or device that refuses it (a file on tmpfs, a
    /// file whose size is not a whole number of the device's blocks) is an
    /// error naming the path and `--buffered`; by default a block device that
    /// refuses it is used buffered.
    pub fn open_io(path: &Path, mode: OpenMode, io: Option<IoMode>) -> Result<Self> {
        let name = path.display().to_string();
        let meta = std::fs::metadata(path).map_err(|e| open_error(&name, e))?;
        let block_device = meta.file_type().is_block_device();
        if !block_device && !meta.is_file() {
            return Err(Error::new(
                ErrorKind::Invalid,
                Op::Open,
                "not a regular file or a block device",
            )
            .on_device(name));
        }
        let writable = mode == OpenMode::ReadWrite;
        let asked = io;
        let io = io.unwrap_or(IoMode::default_for(block_device));
        let open = |direct: bool| {
            let mut flags = 0;
            if block_device && writable {
                flags |= libc::O_EXCL;
            }
            if direct {
                flags |= libc::O_DIRECT;
            }
            OpenOptions::new()
                .read(true)
                .write(writable)
                .custom_flags(flags)
                .open(path)
        };
        let (file, io) = match open(io == IoMode::Direct) {
            Ok(f) => (f, io),
            Err(e) if io == IoMode::Direct && e.raw_os_error() == Some(libc::EINVAL) => {
                if asked.is_some() {
                    return Err(refuses_direct(&name, e));
                }
                // The default only: a device without direct I/O still works.
                (
                    open(false).map_err(|e| open_error(&name, e))?,
                    IoMode::Buffered,
                )
            }
            Err(e) => return Err(open_error(&name, e)),
        };
        lock(&file, &name, writable, &meta)?;
        let size = if block_device {
            block_device_size(&file, &name)?
        } else {
            meta.len()
        };
        Self::finish(file, path, size, writable, block_device, io)
    }

    /// The volume over an open, locked `file`, with direct I/O set up when
    /// `io` says so.
    fn finish(
        file: File,
        path: &Path,
        size: u64,
        writable: bool,
        block_device: bool,
        io: IoMode,
    ) -> Result<Self> {
        use std::os::fd::AsRawFd;
        let direct = (io == IoMode::Direct).then(|| {
            let (block, mem) = crate::direct::alignment(file.as_raw_fd(), block_device);
            Direct::new(block, mem)
        });
        if let Some(d) = &direct {
            // Direct I/O moves whole blocks; a file ending inside one would
            // have its last block read short and written past its end.
            if size % d.block() != 0 {
                return Err(Error::new(
                    ErrorKind::Invalid,
                    Op::Open,
                    format!(
                        "its size ({size} bytes) is not a multiple of its direct-I/O block ({} bytes), so it cannot be used with direct I/O: use --buffered (or io = \"buffered\" in the configuration file)",
                        d.block()
                    ),
                )
                .on_device(path.display().to_string()));
            }
        }
        Ok(FileVolume {
            file,
            path: path.to_path_buf(),
            size: AtomicU64::new(size),
            writable,
            block_device,
            map: Mutex::new(None),
            direct,
        })
    }

    /// Create a new sparse file of `size` bytes (refusing to replace an existing one)
    /// and open it for writing.
    pub fn create_sparse(path: &Path, size: u64) -> Result<Self> {
        Self::create_sparse_io(path, size, None)
    }

    /// [`FileVolume::create_sparse`] with the I/O mode chosen (`None`:
    /// buffered, a file's default). A file system that refuses direct I/O
    /// is found before the file is made, so a refusal leaves nothing behind.
    pub fn create_sparse_io(path: &Path, size: u64, io: Option<IoMode>) -> Result<Self> {
        let name = path.display().to_string();
        let io = io.unwrap_or(IoMode::default_for(false));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .custom_flags(if io == IoMode::Direct {
                libc::O_DIRECT
            } else {
                0
            })
            .open(path)
            .map_err(|e| match e.raw_os_error() {
                // open(2) creates the file before O_DIRECT is refused; the
                // file is new and ours, so take it away again.
                Some(libc::EINVAL) if io == IoMode::Direct => {
                    let _ = std::fs::remove_file(path);
                    refuses_direct(&name, e)
                }
                _ => open_error(&name, e),
            })?;
        let made = (|| {
            file.set_len(size)
                .map_err(|e| Error::io(Op::Write, &name, e).at(0, size))?;
            let meta = file.metadata().map_err(|e| open_error(&name, e))?;
            lock(&file, &name, true, &meta)?;
            Self::finish(file, path, size, true, false, io)
        })();
        if made.is_err() {
            let _ = std::fs::remove_file(path);
        }
        made
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn is_block_device(&self) -> bool {
        self.block_device
    }

    /// How this volume's bytes move: direct or through the page cache.
    pub fn io_mode(&self) -> IoMode {
        if self.direct.is_some() {
            IoMode::Direct
        } else {
            IoMode::Buffered
        }
    }

    /// Whether every byte of `[offset, offset+len)` is a hole (reads as zero without
    /// being stored). Used to tell a freshly created sparse member from one that may
    /// hold old data. Block devices are never known to be holes.
    pub fn is_hole(&self, offset: u64, len: u64) -> bool {
        use std::os::fd::AsRawFd;
        if self.block_device || len == 0 {
            return !self.block_device;
        }
        // SEEK_DATA from `offset` finds the next byte that is stored; if that lies at
        // or past the end of the range (or there is none), the range is a hole.
        // SAFETY: lseek on a file descriptor we own; no memory is touched.
        let next = unsafe { libc::lseek(self.file.as_raw_fd(), offset as i64, libc::SEEK_DATA) };
        if next < 0 {
            // ENXIO: no data after offset at all.
            return std::io::Error::last_os_error().raw_os_error() == Some(libc::ENXIO);
        }
        next as u64 >= offset.saturating_add(len)
    }
}

fn open_error(name: &str, e: std::io::Error) -> Error {
    let hint = match e.kind() {
        std::io::ErrorKind::NotFound => " (check the path)",
        std::io::ErrorKind::PermissionDenied => " (run with permission to read and write it)",
        _ if e.raw_os_error() == Some(libc::EBUSY) => {
            " (the device is in use: mounted, or part of a running md array)"
        }
        _ => "",
    };
    let mut err = Error::io(Op::Open, name, e);
    err.message.push_str(hint);
    err
}

/// Direct I/O was asked for where the file system or device refuses it.
fn refuses_direct(name: &str, e: std::io::Error) -> Error {
    let mut err = Error::io(Op::Open, name, e);
    err.message.push_str(
        " (direct I/O was asked for, and its file system or device refuses O_DIRECT, as tmpfs does: use --buffered, or io = \"buffered\" in the configuration file)",
    );
    err
}

fn block_device_size(file: &File, name: &str) -> Result<u64> {
    use std::io::{Seek, SeekFrom};
    let mut f = file;
    f.seek(SeekFrom::End(0))
        .map_err(|e| Error::io(Op::Open, name, e))
}

/// A read-only mapping of a member file, as the bytes of a [`Mapped`] view.
struct FileMap(memmap2::Mmap);

impl AsRef<[u8]> for FileMap {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl raidlab_core::MapBytes for FileMap {
    fn release(&self, range: std::ops::Range<usize>) {
        // Whole pages inside the range only: a page shared with a neighbouring
        // range may still be in use there (dropping it would only cost a
        // refault, but there is no reason to).
        const PAGE: usize = 4096;
        let start = range.start.div_ceil(PAGE) * PAGE;
        let end = range.end / PAGE * PAGE;
        if start >= end || end > self.0.len() {
            return;
        }
        // SAFETY: the mapping is a shared, read-only mapping of a file (see
        // `map_file`). Dropping its page-table entries there loses nothing: the
        // next access reads the same bytes again from the file's page cache (the
        // hazard `DontNeed` carries, zero-filled pages, applies to private and
        // anonymous mappings only). The range lies inside the mapping.
        let _ = unsafe {
            self.0
                .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
        };
    }
}

impl FileVolume {
    /// Refuse a request outside the file (the name is made only for the error).
    fn check(&self, op: Op, offset: u64, len: u64) -> Result<()> {
        check_range_with(|| self.name(), op, self.size(), offset, len)
    }

    /// Refuse a change to a volume opened read-only.
    fn refuse_read_only(&self, op: Op, offset: u64, len: u64) -> Result<()> {
        if self.writable {
            return Ok(());
        }
        Err(Error::new(ErrorKind::ReadOnly, op, "opened read-only")
            .on_device(self.name())
            .at(offset, len))
    }

    /// Whether the file lives in memory (tmpfs, ramfs): there a bulk reader is
    /// bound by copying, and no I/O error can reach a mapping (on a disk, a read
    /// error through a mapping would be a SIGBUS instead of an error to report).
    fn in_memory(&self) -> bool {
        const TMPFS_MAGIC: i64 = 0x0102_1994;
        const RAMFS_MAGIC: i64 = 0x8584_58f6;
        use std::os::fd::AsRawFd;
        let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
        // SAFETY: fstatfs writes a `statfs` into the buffer we pass, which is
        // valid and large enough; the descriptor is this volume's open file.
        let rc = unsafe { libc::fstatfs(self.file.as_raw_fd(), st.as_mut_ptr()) };
        if rc != 0 {
            return false;
        }
        // SAFETY: fstatfs returned 0, so it filled the structure (and it was
        // zeroed before, so every field is initialised either way).
        let st = unsafe { st.assume_init() };
        // f_type's integer type differs between architectures.
        #[allow(clippy::unnecessary_cast)]
        let kind = st.f_type as i64;
        kind == TMPFS_MAGIC || kind == RAMFS_MAGIC
    }

    fn map_file(&self, size: u64) -> Option<Mapped> {
        // Regular files in memory only (see `in_memory`); block devices and files
        // on disks are read through `read_at`.
        if self.block_device || size == 0 || !self.in_memory() {
            return None;
        }
        // SAFETY: the mapping is read-only and private to this process's view of a
        // file this volume holds a flock on (shared for readers, exclusive for
        // writers), so no cooperating process changes it underneath; raidlab's
        // own writes through `write_at` go through the page cache the mapping
        // shares, which is what a reader of the file would see anyway. A process
        // that ignores the lock and truncates the file could make accesses fault
        // (SIGBUS): the same hazard any mmap-based reader accepts. The mapping is
        // only used by bulk readers (a rebuild) whose results are also available
        // through `read_at`, against which the tests compare them.
        let map = unsafe {
            memmap2::MmapOptions::new()
                .len(size as usize)
                .map(&self.file)
        };
        let map = map.ok()?;
        // A bulk reader passes over each page once. Saying so spares the unmap
        // (at the rebuild's end, in one thread) from marking every page of every
        // member recently used, one LRU lock round per page: measured at a fifth
        // of a RAID 6 rebuild's CPU time on tmpfs. Advice is only a hint; a
        // kernel that refuses it leaves the mapping as good as before.
        let _ = map.advise(memmap2::Advice::Sequential);
        Some(Mapped::new(std::sync::Arc::new(FileMap(map))))
    }
}

impl Volume for FileVolume {
    fn name(&self) -> String {
        self.path.display().to_string()
    }
    fn size(&self) -> u64 {
        // Relaxed: the size is one value on its own, ordered with nothing
        // else; a request racing a refresh sees the old size or the new.
        self.size.load(Ordering::Relaxed)
    }
    /// A regular file's length (`fstat`) or a block device's size (its end,
    /// as BLKGETSIZE64 says it). A size that direct I/O cannot use whole is
    /// refused, keeping the old one.
    fn refresh_size(&self) -> Result<u64> {
        let name = self.name();
        let size = if self.block_device {
            block_device_size(&self.file, &name)?
        } else {
            self.file
                .metadata()
                .map_err(|e| Error::io(Op::Open, name.clone(), e))?
                .len()
        };
        if let Some(d) = &self.direct {
            if size % d.block() != 0 {
                return Err(Error::new(
                    ErrorKind::Invalid,
                    Op::Open,
                    format!(
                        "its size is now {size} bytes, not a multiple of its direct-I/O block ({} bytes): it is still used as {} bytes; make its size a whole number of blocks",
                        d.block(),
                        self.size()
                    ),
                )
                .on_device(name));
            }
        }
        self.size.store(size, Ordering::Relaxed);
        Ok(size)
    }
    fn is_writable(&self) -> bool {
        self.writable
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        use std::os::fd::AsRawFd;
        self.check(Op::Read, offset, buf.len() as u64)?;
        let len = buf.len() as u64;
        let fail = |e| Error::io(Op::Read, self.name(), e).at(offset, len);
        match &self.direct {
            Some(d) => d.read(self.file.as_raw_fd(), buf, offset).map_err(fail),
            None => self.file.read_exact_at(buf, offset).map_err(fail),
        }
    }
    /// With direct I/O a device's write error comes back here, at the write
    /// that failed, for the array to act on at once.
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        use std::os::fd::AsRawFd;
        self.check(Op::Write, offset, buf.len() as u64)?;
        self.refuse_read_only(Op::Write, offset, buf.len() as u64)?;
        let fail = |e| Error::io(Op::Write, self.name(), e).at(offset, buf.len() as u64);
        match &self.direct {
            Some(d) => d.write(self.file.as_raw_fd(), buf, offset, 0).map_err(fail),
            None => self.file.write_all_at(buf, offset).map_err(fail),
        }
    }
    /// This write alone made durable: `pwritev2` with `RWF_DSYNC`, which the
    /// kernel turns into a FUA write on a device that has one, and into a sync
    /// of just this range's data on a file. An `fdatasync` would also wait
    /// for every other unflushed write to the file. Kernels or file systems
    /// without the flag get the write followed by `fdatasync`. On a direct
    /// member the same flag goes with the direct write, so the FUA reaches
    /// the device, not a cache in front of it.
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> Result<()> {
        use std::os::fd::AsRawFd;
        let len = buf.len() as u64;
        self.check(Op::Write, offset, len)?;
        self.refuse_read_only(Op::Write, offset, len)?;
        let fail = |e| Error::io(Op::Write, self.name(), e).at(offset, len);
        if let Some(d) = &self.direct {
            return d
                .write(self.file.as_raw_fd(), buf, offset, libc::RWF_DSYNC)
                .map_err(fail);
        }
        let mut done = 0usize;
        while done < buf.len() {
            let rest = &buf[done..];
            let iov = libc::iovec {
                iov_base: rest.as_ptr() as *mut libc::c_void,
                iov_len: rest.len(),
            };
            let at = libc::off_t::try_from(offset + done as u64).map_err(|_| {
                Error::new(ErrorKind::OutOfRange, Op::Write, "offset too large")
                    .on_device(self.name())
                    .at(offset, len)
            })?;
            // SAFETY: `iov` points into `buf`, alive and unchanged for the
            // call; the descriptor is this volume's open file.
            let rc = unsafe { libc::pwritev2(self.file.as_raw_fd(), &iov, 1, at, libc::RWF_DSYNC) };
            if rc > 0 {
                done += rc as usize;
                continue;
            }
            let e = if rc == 0 {
                std::io::Error::from(std::io::ErrorKind::WriteZero)
            } else {
                std::io::Error::last_os_error()
            };
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EOPNOTSUPP | libc::ENOSYS) => {
                    self.file
                        .write_all_at(rest, offset + done as u64)
                        .map_err(fail)?;
                    return self.file.sync_data().map_err(fail);
                }
                _ => return Err(fail(e)),
            }
        }
        Ok(())
    }
    /// Punches a hole (`fallocate`, keeping the size): a file gives the
    /// blocks back to its file system, a block device discards or zeroes them;
    /// either way the range then reads as zeros.
    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        self.check(Op::Discard, offset, len)?;
        self.refuse_read_only(Op::Discard, offset, len)?;
        if len == 0 {
            return Ok(());
        }
        let (Ok(off), Ok(n)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
            return Err(
                Error::new(ErrorKind::OutOfRange, Op::Discard, "range too large")
                    .on_device(self.name())
                    .at(offset, len),
            );
        };
        use std::os::fd::AsRawFd;
        // SAFETY: fallocate takes no pointers; the descriptor is this volume's
        // open file, and the range was checked against its size.
        let rc = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                off,
                n,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
            return Err(Error::new(
                ErrorKind::Unsupported,
                Op::Discard,
                "its file system or device cannot punch holes",
            )
            .on_device(self.name())
            .at(offset, len));
        }
        Err(Error::io(Op::Discard, self.name(), e).at(offset, len))
    }
    fn discard_zeroes(&self) -> bool {
        true
    }
    fn mapped(&self) -> Option<Mapped> {
        let size = self.size();
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        match &*map {
            Some((made_for, m)) if *made_for == size => m.clone(),
            _ => {
                let m = self.map_file(size);
                *map = Some((size, m.clone()));
                m
            }
        }
    }
    fn read_stored(&self, offset: u64, len: u64, sink: &mut StoredSink<'_>) -> Result<bool> {
        use std::os::fd::AsFd;
        self.check(Op::Read, offset, len)?;
        let n = usize::try_from(len).map_err(|_| {
            Error::new(
                ErrorKind::Invalid,
                Op::Read,
                "range too long for this machine",
            )
            .on_device(self.name())
            .at(offset, len)
        })?;
        // A direct descriptor reads whole blocks into the pipe's pages
        // (page-aligned); a range that starts or ends inside a block is left
        // to `read_at`, which reads its edge blocks through a bounce buffer,
        // so no member data enters the page cache.
        if let Some(d) = &self.direct {
            if offset % d.block() != 0 || len % d.block() != 0 {
                return Ok(false);
            }
        }
        sink(self.file.as_fd(), offset, n)
            .map_err(|e| Error::io(Op::Read, self.name(), e).at(offset, len))?;
        Ok(true)
    }

    /// The descriptor itself, for io_uring: a read, write or flush of this
    /// volume is that request on the file at the same offset, nothing more
    /// (range and read-only checks are the submitter's, which sends a request
    /// that fails them here instead, for the error).
    fn raw_file(&self) -> Option<raidlab_core::RawFile<'_>> {
        use std::os::fd::AsFd;
        Some(raidlab_core::RawFile {
            fd: self.file.as_fd(),
            base: 0,
            size: self.size(),
            writable: self.writable,
            block_device: self.block_device,
            direct: self.direct.as_ref().map(|d| (d.block(), d.mem_align())),
            observer: None,
        })
    }

    /// `fdatasync`: on a direct block device the device's cache flush (the
    /// data itself is already there); on a buffered member also the writing
    /// back of its dirty pages.
    fn flush(&self) -> Result<()> {
        if !self.writable {
            return Ok(());
        }
        self.file
            .sync_data()
            .map_err(|e| Error::io(Op::Flush, self.name(), e))
    }
}

#[cfg(test)]
mod tests;
