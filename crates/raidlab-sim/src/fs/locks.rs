//! The per-file lock a file system of the articles' era takes around a
//! program's read() and write() calls (`file-locks=ext3|xfs` after `host=`):
//! when several processes read and rewrite the same file (Bonnie++'s
//! seekers), whether a read has to wait for a write, and a write for reads.
//!
//! Decides: only when a caller's request is passed to the device below. It
//! must never change a request or drop one, never look inside the device
//! below, and never read the wall clock.
//!
//! `xfs` (Linux 2.6.x, fs/xfs/linux-2.6/xfs_lrw.c): `xfs_read` holds the
//! inode's iolock shared across `generic_file_aio_read`, so for the whole time
//! the read waits for its pages; a buffered `xfs_write` takes the iolock
//! exclusive. The iolock is an `rw_semaphore` (fs/xfs/linux-2.6/mrlock.h,
//! `mrlock_t`), whose rules (lib/rwsem-spinlock.c of 2.6: `__down_read`
//! grants only while no one waits; `__rwsem_do_wake` wakes a writer at the
//! head of the queue alone, else every reader up to the first writer) make a
//! write wait for the reads in flight on its file, and every later read of
//! that file wait behind the write.
//!
//! `ext3` (mm/filemap.c of 2.6.x: ext3's `aio_read` is
//! `generic_file_aio_read`, which takes no inode lock; its `aio_write`,
//! `ext3_file_write`, goes through `generic_file_aio_write`, which takes
//! `i_mutex`, a lock only writers take): a read never waits for a write.
//! Writes exclude each other only for their copy into the page cache, which
//! this model leaves out (below), so `ext3` passes everything straight down.
//!
//! Approximations, stated: the volume's offsets are the program's file
//! offsets, cut into Bonnie++'s files of [`FILE_BYTES`] (its only user here is
//! Bonnie++'s seek test at block level); a request belongs to the file its
//! first byte is in. A write holds the lock for no time: it is the copy into
//! the page cache (1.5 µs for 8 KiB at the copy rate of
//! `presets/kernels.toml`), and the request then goes down as a block-level
//! write does, standing for its later writeback.

use crate::device::{Completion, Device, ModelInfo, Ns, Param, Request};
use raidlab_core::IoKind;
use std::collections::{BTreeMap, VecDeque};

/// The size of each of Bonnie++'s test files, in bytes: `IOFileSize 1024`
/// ("1024M per file for IO", bonnie.h of Bonnie++ 1.9x; the same split into
/// 1 GiB files in the 1.03 the articles ran).
pub const FILE_BYTES: u64 = 1 << 30;

/// Which file system's locking rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockRules {
    Ext3,
    Xfs,
}

impl LockRules {
    pub fn parse(s: &str) -> Result<LockRules, String> {
        match s {
            "ext3" => Ok(LockRules::Ext3),
            "xfs" => Ok(LockRules::Xfs),
            _ => Err(format!(
                "unknown file locking `{s}` (known: ext3, xfs: the file system whose per-file lock the callers share)"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            LockRules::Ext3 => "ext3",
            LockRules::Xfs => "xfs",
        }
    }
}

/// `dev` behind the locks `rules` names, which must be those of the file
/// system `fs=` puts in front of it, if any.
pub fn attach(
    rules: &str,
    fs: Option<&str>,
    dev: Box<dyn Device>,
) -> Result<Box<dyn Device>, String> {
    let rules = LockRules::parse(rules)?;
    if let Some(name) = fs {
        if !name.starts_with(rules.name()) {
            return Err(format!(
                "`file-locks={}` are another file system's than `fs={name}`",
                rules.name()
            ));
        }
    }
    Ok(Box::new(FileLocks::new(dev, rules)))
}

/// One file's iolock: reads holding it, and callers waiting in arrival order.
#[derive(Debug, Default)]
struct IoLock {
    readers: u32,
    waiting: VecDeque<Request>,
}

/// A device whose callers share per-file locks by `rules`.
#[derive(Debug)]
pub struct FileLocks {
    dev: Box<dyn Device>,
    rules: LockRules,
    locks: BTreeMap<u64, IoLock>,
    /// Reads passed down holding a shared lock: id -> file.
    held: BTreeMap<u64, u64>,
    /// Requests that had to wait for the lock, by kind (reads, writes).
    waited: (u64, u64),
    below: Vec<Completion>,
}

impl FileLocks {
    pub fn new(dev: Box<dyn Device>, rules: LockRules) -> FileLocks {
        FileLocks {
            dev,
            rules,
            locks: BTreeMap::new(),
            held: BTreeMap::new(),
            waited: (0, 0),
            below: Vec::new(),
        }
    }

    /// Reads and writes that had to wait for their file's lock so far.
    pub fn waited(&self) -> (u64, u64) {
        self.waited
    }

    /// Grant the lock of `file` to its waiters in order, as `up_read` and
    /// `up_write` wake them: a write once no read holds the lock (and, holding
    /// it for no time, it lets the next ones in), reads while no write is
    /// ahead of them.
    fn wake(&mut self, now: Ns, file: u64) {
        let Some(lock) = self.locks.get_mut(&file) else {
            return;
        };
        while let Some(front) = lock.waiting.front() {
            if front.kind == IoKind::Read {
                lock.readers += 1;
                self.held.insert(front.id, file);
            } else if lock.readers > 0 {
                return;
            }
            let req = lock.waiting.pop_front().expect("front exists");
            self.dev.submit(now, req);
        }
    }
}

impl Device for FileLocks {
    fn capacity(&self) -> u64 {
        self.dev.capacity()
    }

    fn submit(&mut self, now: Ns, req: Request) {
        let write = match (self.rules, req.kind) {
            (LockRules::Xfs, IoKind::Read) => false,
            (LockRules::Xfs, IoKind::Write) => true,
            // ext3's reads take no lock a write holds; flushes, trims and
            // the rest are not read() or write() calls.
            _ => {
                self.dev.submit(now, req);
                return;
            }
        };
        let file = req.offset / FILE_BYTES;
        let lock = self.locks.entry(file).or_default();
        let free = lock.waiting.is_empty() && (!write || lock.readers == 0);
        if !free {
            if write {
                self.waited.1 += 1;
            } else {
                self.waited.0 += 1;
            }
            lock.waiting.push_back(req);
            return;
        }
        if !write {
            lock.readers += 1;
            self.held.insert(req.id, file);
        }
        self.dev.submit(now, req);
    }

    fn next_event(&self) -> Option<Ns> {
        self.dev.next_event()
    }

    fn advance(&mut self, now: Ns, done: &mut Vec<Completion>) {
        if self.dev.next_event().is_some_and(|t| t <= now) {
            self.dev.advance(now, &mut self.below);
        }
        let mut freed = Vec::new();
        for c in self.below.drain(..) {
            if let Some(file) = self.held.remove(&c.id) {
                let lock = self.locks.get_mut(&file).expect("a held lock exists");
                lock.readers -= 1;
                if lock.readers == 0 {
                    freed.push(file);
                }
            }
            done.push(c);
        }
        for file in freed {
            self.wake(now, file);
        }
    }

    fn info(&self) -> ModelInfo {
        let sources = match self.rules {
            LockRules::Xfs => vec![
                "iolock: fs/xfs/linux-2.6/xfs_lrw.c of Linux 2.6.x, xfs_read() holds XFS_IOLOCK_SHARED across generic_file_aio_read, a buffered xfs_write() takes XFS_IOLOCK_EXCL".into(),
                "lock order: fs/xfs/linux-2.6/mrlock.h (mrlock_t is an rw_semaphore) and lib/rwsem-spinlock.c (readers queue behind a waiting writer; a woken writer runs alone)".into(),
                "file_bytes: bonnie.h, IOFileSize 1024 (MiB per test file)".into(),
            ],
            LockRules::Ext3 => vec![
                "mm/filemap.c of Linux 2.6.x: generic_file_aio_read takes no inode lock; generic_file_aio_write takes i_mutex, which only writers take".into(),
            ],
        };
        ModelInfo {
            model: "file locks".into(),
            name: format!("{} per-file locks (Linux 2.6.2x)", self.rules.name()),
            params: vec![Param::new("file_bytes", FILE_BYTES as f64, "bytes")],
            sources,
            parts: vec![self.dev.info()],
        }
    }

    fn member_ops(&self) -> Option<&crate::stats::OpLog> {
        self.dev.member_ops()
    }
    fn rebuild_progress(&self) -> Option<crate::array::RebuildProgress> {
        self.dev.rebuild_progress()
    }
    fn fault_report(&self) -> Option<crate::faults::report::FaultReport> {
        self.dev.fault_report()
    }
    fn scrub_progress(&self) -> Option<crate::scrub::ScrubProgress> {
        self.dev.scrub_progress()
    }
}
