//! The per-file lock a file system of the articles' era takes around a
//! program's read() and write() calls (`file-locks=ext3|xfs` after `host=`):
//! when several processes read and rewrite the same file (Bonnie++'s
//! seekers), whether a read has to wait for a write, and a write for reads.
//!
//! Decides: when a caller's request is passed to the device below, and at
//! block level when a write's data goes down (as the kernel's writeback, in
//! requests of its own). It must never change a read or drop written data,
//! never look inside the device below, and never read the wall clock.
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
//! At block level (no `fs=` below) a write() call's data lands in the page
//! cache of the host's kernel (`host=`, `presets/kernels.toml`), as the real
//! call's does: the call takes the copy's time (`call_ns`: 1.5 µs for 8 KiB at
//! `copy_mb_per_s`), holding XFS's iolock exclusive for it, and returns; the
//! data goes down later, as the kernel writes it back: ext3's data=ordered
//! commit `ext3_commit_s` after the transaction's first write (fs/jbd of
//! 2.6.2x), XFS's by pdflush's kupdate, which wakes every `dirty_writeback_s`
//! and writes the inodes first dirtied `dirty_expire_s` before
//! (mm/page-writeback.c, fs/fs-writeback.c); a flush writes it all first. A
//! write that would take the dirty data past the background limit
//! (`dirty_background_ratio_pct` of the page cache) goes down at once as a
//! block-level write does, standing for the throttled writer's steady state
//! (balance_dirty_pages), with no lock held; `fs=` models that stream itself.
//! With `fs=` below, writes pass down to its page cache and hold no lock.
//!
//! Approximations, stated: the volume's offsets are the program's file
//! offsets, cut into Bonnie++'s files of [`FILE_BYTES`] (its only user here is
//! Bonnie++ at block level); a request belongs to the file its first byte is
//! in. Reads go down as at block level: whether they would find their pages
//! in the page cache depends on the machine's memory, which the articles do
//! not give (docs/seeds.md); a write needs no read first (Bonnie++'s writes are
//! whole pages, and its seek test rewrites the chunk it has just read). ext3's
//! `i_mutex` between two writers' copies, its journal blocks and inode
//! updates are not modelled.

use super::kernel::Kernel;
use crate::device::{Completion, Device, ModelInfo, Ns, Param, Request, SEC};
use raidlab_core::IoKind;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The size of each of Bonnie++'s test files, in bytes: `IOFileSize 1024`
/// ("1024M per file for IO", bonnie.h of Bonnie++ 1.9x; the same split into
/// 1 GiB files in the 1.03 the articles ran).
pub const FILE_BYTES: u64 = 1 << 30;

/// Ids of this layer's own writeback requests, far above any caller's.
const WRITEBACK_IDS: u64 = 1 << 62;

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
/// system `fs=` puts in front of it, if any. Without `fs=` the writes land in
/// the page cache of `kernel` (the host's), which must then be given.
pub fn attach(
    rules: &str,
    fs: Option<&str>,
    kernel: Option<Kernel>,
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
        return Ok(Box::new(FileLocks::new(dev, rules)));
    }
    let Some(k) = kernel else {
        return Err(format!(
            "`file-locks={}` at block level needs the kernel whose page cache its writes land in: give `host=NAME` (e.g. host=linux-2.6.2x-md)",
            rules.name()
        ));
    };
    Ok(Box::new(FileLocks::with_page_cache(dev, rules, k)))
}

/// One file's iolock: reads holding it, a write in its copy holding it
/// exclusive, and callers waiting in arrival order.
#[derive(Debug, Default)]
struct IoLock {
    readers: u32,
    writer: bool,
    waiting: VecDeque<Request>,
}

/// The page cache a write() call's data lands in at block level.
#[derive(Debug)]
struct Memory {
    kernel: Kernel,
    background_bytes: u64,
    /// Dirty ranges: offset -> length.
    dirty: BTreeMap<u64, u64>,
    dirty_bytes: u64,
    /// When the dirty data goes down (None: nothing dirty).
    due: Option<Ns>,
    /// Writes in their copy: (the copy's end, the call).
    copying: Vec<(Ns, Request)>,
    /// This layer's writeback requests below, by id.
    writeback: BTreeSet<u64>,
    next_id: u64,
    /// Flushes waiting for the writeback sent before them.
    flushes: Vec<Request>,
}

impl Memory {
    fn new(kernel: Kernel) -> Memory {
        Memory {
            background_bytes: kernel.background_pages() * super::kernel::PAGE,
            kernel,
            dirty: BTreeMap::new(),
            dirty_bytes: 0,
            due: None,
            copying: Vec::new(),
            writeback: BTreeSet::new(),
            next_id: WRITEBACK_IDS,
            flushes: Vec::new(),
        }
    }

    /// Whether `len` more bytes, with those dirty and those being copied,
    /// stay within the background limit.
    fn has_room(&self, len: u64) -> bool {
        let copying: u64 = self.copying.iter().map(|c| c.1.len).sum();
        self.dirty_bytes + copying + len <= self.background_bytes
    }

    /// The copy of `req` ended at `now`: its pages are dirty.
    fn dirtied(&mut self, now: Ns, rules: LockRules, req: &Request) {
        let old = self.dirty.entry(req.offset).or_insert(0);
        if req.len > *old {
            self.dirty_bytes += req.len - *old;
            *old = req.len;
        }
        if self.due.is_none() {
            let k = &self.kernel;
            self.due = Some(match rules {
                // The running transaction's commit timer starts with its first
                // handle (JBD's start_this_handle); ext3_write_begin starts one.
                LockRules::Ext3 => now + (k.ext3_commit_s * SEC as f64) as Ns,
                // kupdate's first wake after the inode has been dirty for
                // dirty_expire_s.
                LockRules::Xfs => {
                    let every = (k.dirty_writeback_s * SEC as f64) as Ns;
                    let old_enough = now + (k.dirty_expire_s * SEC as f64) as Ns;
                    old_enough.div_ceil(every) * every
                }
            });
        }
    }

    /// Send every dirty range down, in offset order, adjacent ranges merged up
    /// to the largest request (pdflush and the commit write in index order).
    fn write_back(&mut self, now: Ns, dev: &mut dyn Device) {
        let max = self.kernel.max_request_bytes;
        let mut run: Option<(u64, u64)> = None;
        let mut out = Vec::new();
        for (&off, &len) in &self.dirty {
            run = match run {
                Some((o, l)) if o + l == off && l + len <= max => Some((o, l + len)),
                Some(r) => {
                    out.push(r);
                    Some((off, len))
                }
                None => Some((off, len)),
            };
        }
        out.extend(run);
        for (offset, len) in out {
            let id = self.next_id;
            self.next_id += 1;
            self.writeback.insert(id);
            dev.submit(
                now,
                Request {
                    id,
                    kind: IoKind::Write,
                    offset,
                    len,
                    process: super::PDFLUSH,
                },
            );
        }
        self.dirty.clear();
        self.dirty_bytes = 0;
        self.due = None;
    }
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
    /// At block level, the page cache the writes land in.
    memory: Option<Memory>,
    below: Vec<Completion>,
}

impl FileLocks {
    /// The locks in front of a page cache below (`fs=`): writes pass down.
    pub fn new(dev: Box<dyn Device>, rules: LockRules) -> FileLocks {
        FileLocks {
            dev,
            rules,
            locks: BTreeMap::new(),
            held: BTreeMap::new(),
            waited: (0, 0),
            memory: None,
            below: Vec::new(),
        }
    }

    /// The locks at block level: writes land in `kernel`'s page cache.
    pub fn with_page_cache(dev: Box<dyn Device>, rules: LockRules, kernel: Kernel) -> FileLocks {
        FileLocks {
            memory: Some(Memory::new(kernel)),
            ..FileLocks::new(dev, rules)
        }
    }

    /// Reads and writes that had to wait for their file's lock so far.
    pub fn waited(&self) -> (u64, u64) {
        self.waited
    }

    /// Bytes written into the page cache and not yet sent down.
    pub fn dirty_bytes(&self) -> u64 {
        self.memory.as_ref().map_or(0, |m| m.dirty_bytes)
    }

    /// A write granted its lock (if its file system takes one): into the page
    /// cache for the copy's time, or down when the cache has no room for it.
    /// True when it is copying (and so holds an XFS iolock).
    fn start_write(&mut self, now: Ns, req: Request) -> bool {
        match &mut self.memory {
            Some(m) if m.has_room(req.len) => {
                let end = now + m.kernel.call_ns(req.len);
                m.copying.push((end, req));
                true
            }
            _ => {
                self.dev.submit(now, req);
                false
            }
        }
    }

    /// Grant the lock of `file` to its waiters in order, as `up_read` and
    /// `up_write` wake them: a write once no read holds the lock (it holds it
    /// alone for its copy; a write going straight down holds it for no time),
    /// reads while no write is ahead of them.
    fn wake(&mut self, now: Ns, file: u64) {
        loop {
            let Some(lock) = self.locks.get_mut(&file) else {
                return;
            };
            if lock.writer {
                return;
            }
            let Some(front) = lock.waiting.front() else {
                return;
            };
            if front.kind == IoKind::Read {
                lock.readers += 1;
                self.held.insert(front.id, file);
                let req = lock.waiting.pop_front().expect("front exists");
                self.dev.submit(now, req);
                continue;
            }
            if lock.readers > 0 {
                return;
            }
            let req = lock.waiting.pop_front().expect("front exists");
            if self.start_write(now, req) {
                self.locks.get_mut(&file).expect("exists").writer = true;
                return;
            }
        }
    }
}

impl Device for FileLocks {
    fn capacity(&self) -> u64 {
        self.dev.capacity()
    }

    fn submit(&mut self, now: Ns, req: Request) {
        if let Some(m) = &mut self.memory {
            if req.kind == IoKind::Flush {
                // fsync: the dirty data goes first, the cache flush after it.
                m.write_back(now, self.dev.as_mut());
                if m.writeback.is_empty() {
                    self.dev.submit(now, req);
                } else {
                    m.flushes.push(req);
                }
                return;
            }
        }
        let write = match (self.rules, req.kind) {
            (LockRules::Xfs, IoKind::Read) => false,
            (LockRules::Xfs, IoKind::Write) => true,
            // ext3's reads take no lock a write holds: its writes only copy.
            (LockRules::Ext3, IoKind::Write) => {
                self.start_write(now, req);
                return;
            }
            // flushes, trims and the rest are not read() or write() calls.
            _ => {
                self.dev.submit(now, req);
                return;
            }
        };
        let file = req.offset / FILE_BYTES;
        let lock = self.locks.entry(file).or_default();
        let free = lock.waiting.is_empty() && !lock.writer && (!write || lock.readers == 0);
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
            self.dev.submit(now, req);
        } else if self.start_write(now, req) {
            self.locks.get_mut(&file).expect("exists").writer = true;
        }
    }

    fn next_event(&self) -> Option<Ns> {
        let mine = self.memory.as_ref().and_then(|m| {
            let copy = m.copying.iter().map(|c| c.0).min();
            [copy, m.due].into_iter().flatten().min()
        });
        [self.dev.next_event(), mine].into_iter().flatten().min()
    }

    fn advance(&mut self, now: Ns, done: &mut Vec<Completion>) {
        if self.dev.next_event().is_some_and(|t| t <= now) {
            self.dev.advance(now, &mut self.below);
        }
        let mut freed = Vec::new();
        for c in self.below.drain(..) {
            if let Some(m) = &mut self.memory {
                if m.writeback.remove(&c.id) {
                    continue;
                }
            }
            if let Some(file) = self.held.remove(&c.id) {
                let lock = self.locks.get_mut(&file).expect("a held lock exists");
                lock.readers -= 1;
                if lock.readers == 0 {
                    freed.push(file);
                }
            }
            done.push(c);
        }
        if let Some(m) = &mut self.memory {
            let mut copied: Vec<(Ns, Request)> = Vec::new();
            m.copying.retain(|&(end, req)| {
                let over = end <= now;
                if over {
                    copied.push((end, req));
                }
                !over
            });
            copied.sort_by_key(|&(end, req)| (end, req.id));
            for (end, req) in copied {
                m.dirtied(end, self.rules, &req);
                done.push(Completion {
                    id: req.id,
                    at: end,
                });
                if self.rules == LockRules::Xfs {
                    let file = req.offset / FILE_BYTES;
                    self.locks
                        .get_mut(&file)
                        .expect("a held lock exists")
                        .writer = false;
                    freed.push(file);
                }
            }
            if m.due.is_some_and(|t| t <= now) {
                m.write_back(now, self.dev.as_mut());
            }
            if m.writeback.is_empty() {
                for f in m.flushes.drain(..) {
                    self.dev.submit(now, f);
                }
            }
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
        let mut sources = sources;
        let mut params = vec![Param::new("file_bytes", FILE_BYTES as f64, "bytes")];
        if let Some(m) = &self.memory {
            // The page cache the writes land in: its kernel's own parameters
            // and sources (presets/kernels.toml).
            params.extend(m.kernel.params());
            sources.extend(m.kernel.sources.iter().cloned());
        }
        ModelInfo {
            model: "file locks".into(),
            name: format!("{} per-file locks (Linux 2.6.2x)", self.rules.name()),
            params,
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
