//! A file system and the kernel's page cache between a program and a
//! simulated volume (`fs=ext3|ext3-writeback|xfs|xfs-noalign` after
//! `host=NAME`): the program's read()/write() calls on one file are the
//! requests this device takes; what reaches the volume is what Linux of that
//! era would send it.
//!
//! Decides: when a call completes (its CPU time on the caller's core; a write
//! into memory unless dirty pages are at the dirty limit, then when writeback
//! frees room; a read from memory or when its pages arrive), which writeback
//! requests go to the volume and when (background writeback past the
//! background limit, in file order, in requests no larger than the block
//! layer's and md's limits, at most the queue's requests in flight),
//! read-ahead (a window per reading process, ramping up, the next window read
//! when the reader enters the last), and the journal's or log's writes. It must
//! never change the volume beneath (an array, a card, a disk: they decide how
//! long their I/O takes), never read the wall clock, and never hold a
//! parameter without a source (`presets/kernels.toml`).
//!
//! Approximations, stated: one file (Bonnie++'s) starting where `layout.rs`
//! says; an flush (fsync) writes every dirty page and commits the journal, no
//! cache flush goes to the volume (barriers off, as the articles mounted);
//! per-call CPU is the copy alone (no source for the rest); atime updates,
//! kupdate's 30 s expiry and XFS's metadata home writes are not modelled.
//!
//! The per-file lock the file system takes around each call, between callers
//! (`file-locks=`), is `locks.rs`, in front of this layer or alone.

pub mod journal;
pub mod kernel;
pub mod layout;
pub mod locks;
pub mod pages;

use crate::config::{CardMode, SimConfig};
use crate::device::{hand_out, Completion, Device, ModelInfo, Ns, Param, Request};
use journal::Journal;
use kernel::{Kernel, PAGE};
use layout::{FsKind, Layout, Stripe};
use pages::{Pages, State};
use raidlab_core::IoKind;
use std::collections::{HashMap, VecDeque};

/// The process writeback I/O is issued as (pdflush, or a throttled writer's
/// own writeback: asynchronous either way).
const PDFLUSH: u32 = u32::MAX - 1;
/// The process journal I/O is issued as (kjournald, xfslogd).
const KJOURNALD: u32 = u32::MAX - 2;

/// What an I/O sent to the volume was for.
#[derive(Debug, Clone, Copy)]
enum Purpose {
    Writeback {
        first: u64,
        n: u64,
    },
    Read {
        first: u64,
        n: u64,
    },
    Log,
    CommitBlock,
    Home,
    /// A request passed through unchanged (trim, write-zeroes): the caller's id.
    Pass(u64),
}

/// Read-ahead state of one reading process (mm/readahead.c's file_ra_state).
#[derive(Debug, Clone, Copy, Default)]
struct Stream {
    /// The page after the previous read.
    next: u64,
    /// The last window: first page and size in pages.
    start: u64,
    size: u64,
    /// The page whose read starts the next window (PG_readahead).
    mark: u64,
}

/// A caller's read waiting for its pages.
#[derive(Debug, Clone, Copy)]
struct Waiting {
    req: Request,
    first: u64,
    end: u64,
    ready_at: Ns,
}

/// Where a commit is: waiting for ordered data, for its journal writes, or
/// for its commit block.
#[derive(Debug, Default)]
struct Committing {
    data: bool,
    log_left: usize,
    commit_block: Option<u64>,
    home: Vec<u64>,
    block_in_flight: bool,
}

#[derive(Debug)]
pub struct FsDevice {
    inner: Box<dyn Device>,
    k: Kernel,
    kind: FsKind,
    layout: Layout,
    /// md keeps a bio within one chunk: requests are cut at chunk boundaries.
    md_chunk: Option<u64>,
    readahead_pages: u64,
    pages: Pages,
    /// File pages with blocks allocated on the volume.
    allocated: u64,
    cursor: u64,
    inflight: HashMap<u64, Purpose>,
    writebacks: usize,
    next_id: u64,
    cpu_free: HashMap<u32, Ns>,
    ready: Vec<Completion>,
    blocked: VecDeque<Request>,
    streams: HashMap<u32, Stream>,
    waiting: Vec<Waiting>,
    flushes: Vec<Request>,
    journal: Journal,
    committing: Option<Committing>,
    capacity: u64,
    scratch: Vec<u64>,
    /// The latest virtual time seen: a commit that fell due while another
    /// ran is reported from here, never in the past.
    clock: Ns,
}

/// The stripe a software or card array presents, and whether md runs it.
fn geometry(cfg: &SimConfig) -> (Option<Stripe>, bool, Option<&str>) {
    let Some(a) = &cfg.array else {
        return (None, false, None);
    };
    let md = !matches!(&cfg.card, Some(c) if c.mode == CardMode::Raid);
    let chunk = a
        .chunk
        .as_deref()
        .and_then(|c| raidlab_core::size::parse_size(c).ok())
        .unwrap_or(512 << 10);
    let n = a.members as u64;
    let width = match a.level.as_str() {
        "raid5" | "raid4" => n.saturating_sub(1),
        "raid6" => n.saturating_sub(2),
        "raid10" => n / 2,
        "raid0" => n,
        _ => 0,
    };
    let stripe = (width > 0).then_some(Stripe { unit: chunk, width });
    (stripe, md, Some(a.level.as_str()))
}

/// Put the file system `cfg` names (`host.fs`) and its per-file locks
/// (`host.file_locks`, outermost: they are taken before a call reaches the
/// page cache) in front of `dev`, or return `dev` as it is when it names
/// neither.
pub fn mount(cfg: &SimConfig, dev: Box<dyn Device>) -> Result<Box<dyn Device>, String> {
    let Some(host) = &cfg.host else {
        return Ok(dev);
    };
    let dev = match &host.fs {
        Some(name) => {
            let kind = FsKind::parse(name)?;
            let Some(md) = &host.md else {
                return Err(format!(
                    "`fs={name}` needs the kernel of an era: give `host=NAME` (e.g. host=linux-2.6.2x-md)"
                ));
            };
            let k = kernel::preset(&md.name)?;
            let (stripe, is_md, level) = geometry(cfg);
            Box::new(FsDevice::new(dev, k, kind, stripe, is_md, level))
        }
        None => dev,
    };
    match &host.file_locks {
        Some(rules) => {
            let k = match &host.md {
                Some(md) => Some(kernel::preset(&md.name)?),
                None => None,
            };
            locks::attach(rules, host.fs.as_deref(), k, dev)
        }
        None => Ok(dev),
    }
}

impl FsDevice {
    pub fn new(
        inner: Box<dyn Device>,
        k: Kernel,
        kind: FsKind,
        stripe: Option<Stripe>,
        md: bool,
        level: Option<&str>,
    ) -> FsDevice {
        let cap = inner.capacity();
        let layout = Layout::new(kind, &k, cap, stripe);
        // md RAID 5/6/10 raise their read-ahead to two stripes of data.
        let md_ra = match (md, level, stripe) {
            (true, Some("raid5" | "raid6" | "raid4" | "raid10"), Some(s)) => 2 * s.unit * s.width,
            _ => 0,
        };
        let readahead = k.default_readahead_bytes.max(md_ra);
        let journal = Journal::new(kind, &k, layout.log_area);
        let capacity = layout.max_file.min(cap) / PAGE * PAGE;
        FsDevice {
            md_chunk: if md { stripe.map(|s| s.unit) } else { None },
            readahead_pages: readahead / PAGE,
            pages: Pages::new(k.cache_pages()),
            allocated: 0,
            cursor: 0,
            inflight: HashMap::new(),
            writebacks: 0,
            next_id: 0,
            cpu_free: HashMap::new(),
            ready: Vec::new(),
            blocked: VecDeque::new(),
            streams: HashMap::new(),
            waiting: Vec::new(),
            flushes: Vec::new(),
            journal,
            committing: None,
            capacity,
            scratch: Vec::new(),
            clock: 0,
            inner,
            k,
            kind,
            layout,
        }
    }

    fn send(&mut self, now: Ns, kind: IoKind, offset: u64, len: u64, process: u32, p: Purpose) {
        let id = self.next_id;
        self.next_id += 1;
        self.inflight.insert(id, p);
        self.inner.submit(
            now,
            Request {
                id,
                kind,
                offset,
                len,
                process,
            },
        );
    }

    /// Bytes from file page `p` that one request may cover on the volume.
    fn extent(&self, p: u64, pages: u64) -> (u64, u64) {
        let (addr, contiguous) = self.layout.map(p * PAGE);
        let mut len = contiguous.min(pages * PAGE).min(self.k.max_request_bytes);
        if let Some(c) = self.md_chunk {
            len = len.min(c - addr % c);
        }
        (addr, (len / PAGE).max(1))
    }

    fn cpu(&mut self, now: Ns, process: u32, len: u64) -> Ns {
        let free = self.cpu_free.entry(process).or_insert(0);
        let end = (*free).max(now) + self.k.call_ns(len);
        *free = end;
        end
    }

    fn page_range(req: &Request) -> (u64, u64) {
        (req.offset / PAGE, (req.offset + req.len).div_ceil(PAGE))
    }

    /// A write() call: into memory, or wait for room under the dirty limit.
    fn write(&mut self, now: Ns, req: Request) -> bool {
        let (first, end) = Self::page_range(&req);
        let new = (first..end)
            .filter(|&p| !matches!(self.pages.get(p), State::Dirty | State::WritebackDirty))
            .count() as u64;
        let held = self.pages.dirty.len() as u64 + self.pages.writeback;
        if new > 0 && held + new > self.k.dirty_limit_pages() {
            return false;
        }
        for p in first..end {
            self.pages.write(p);
        }
        if self.journal.is_ext3() {
            // ext3 allocates at write() time and journals the mapping; every
            // write() also journals the inode (its mtime).
            let mut meta = std::mem::take(&mut self.scratch);
            meta.clear();
            meta.push(self.layout.inode_block());
            if end > self.allocated {
                self.layout
                    .alloc_metadata(self.allocated.max(first), end, &mut meta);
                self.allocated = end;
            }
            self.journal.dirty_blocks(now, &meta);
            self.scratch = meta;
        }
        self.pages.evict();
        let at = self.cpu(now, req.process, req.len);
        self.ready.push(Completion { id: req.id, at });
        true
    }

    /// Send reads for the absent pages of `first..end`.
    fn fetch(&mut self, now: Ns, first: u64, end: u64, process: u32) {
        let mut p = first;
        while p < end {
            if self.pages.get(p) != State::Absent {
                p += 1;
                continue;
            }
            let mut q = p + 1;
            while q < end && self.pages.get(q) == State::Absent {
                q += 1;
            }
            let (addr, n) = self.extent(p, q - p);
            for i in p..p + n {
                self.pages.start_read(i);
            }
            self.send(
                now,
                IoKind::Read,
                addr,
                n * PAGE,
                process,
                Purpose::Read { first: p, n },
            );
            p += n;
        }
        self.pages.evict();
    }

    /// A read() call: read-ahead as mm/readahead.c of 2.6.23+ (an initial
    /// window at the start of the file, the next window when the reader
    /// reaches the first page of the last one, a read elsewhere reads only its
    /// own pages), then serve it from memory or wait for its pages.
    fn read(&mut self, now: Ns, req: Request) {
        let (first, end) = Self::page_range(&req);
        let max = self.readahead_pages.max(1);
        let mut st = self.streams.get(&req.process).copied().unwrap_or_default();
        if st.size > 0 && first == st.next {
            if first <= st.mark && st.mark < end {
                // get_next_ra_size(): 4x while small, then 2x, up to the maximum.
                let size = if st.size < max / 16 {
                    st.size * 4
                } else {
                    st.size * 2
                }
                .min(max);
                st.start += st.size;
                st.size = size;
                st.mark = st.start;
                self.fetch(now, st.start, st.start + size, req.process);
            }
            self.fetch(now, first, end, req.process);
        } else if first == 0 {
            // get_init_ra_size(): 4x or 2x the request, or the maximum.
            let want = (end - first).next_power_of_two();
            let size = if want <= max / 32 {
                want * 4
            } else if want <= max / 4 {
                want * 2
            } else {
                max
            }
            .max(end - first);
            st = Stream {
                next: end,
                start: first,
                size,
                mark: end.min(first + size - 1),
            };
            self.fetch(now, first, first + size, req.process);
        } else {
            st = Stream::default();
            self.fetch(now, first, end, req.process);
        }
        st.next = end;
        self.streams.insert(req.process, st);
        for p in first..end {
            self.pages.used(p);
        }
        let w = Waiting {
            req,
            first,
            end,
            ready_at: now,
        };
        if !self.serve(w) {
            self.waiting.push(w);
        }
    }

    /// Complete a read whose pages are all in memory.
    fn serve(&mut self, w: Waiting) -> bool {
        if !(w.first..w.end).all(|p| self.pages.present(p)) {
            return false;
        }
        let at = self.cpu(w.ready_at, w.req.process, w.req.len);
        self.ready.push(Completion { id: w.req.id, at });
        true
    }

    fn data_wanted(&self) -> bool {
        let d = self.pages.dirty.len() as u64;
        !self.blocked.is_empty()
            || !self.flushes.is_empty()
            || self.pages.commit_left > 0
            || d > self.k.background_pages()
    }

    /// Background and throttled writeback: dirty pages in file order from
    /// where the last pass stopped, while something wants them written.
    fn pump(&mut self, now: Ns) {
        while self.writebacks < self.k.queue_requests && self.data_wanted() {
            let p = match self.pages.dirty.range(self.cursor..).next() {
                Some(&p) => p,
                None => match self.pages.dirty.iter().next() {
                    Some(&p) => p,
                    None => break,
                },
            };
            if self.pages.get(p) != State::Dirty {
                // Still under its previous writeback: try the next one.
                self.cursor = p + 1;
                if self.pages.dirty.range(self.cursor..).next().is_none()
                    && self
                        .pages
                        .dirty
                        .iter()
                        .all(|&q| self.pages.get(q) != State::Dirty)
                {
                    break;
                }
                continue;
            }
            let mut q = p + 1;
            let limit = p + self.k.max_request_bytes / PAGE;
            while q < limit && self.pages.get(q) == State::Dirty {
                q += 1;
            }
            let (addr, n) = self.extent(p, q - p);
            for i in p..p + n {
                self.pages.start_writeback(i);
            }
            if !self.journal.is_ext3() && p + n > self.allocated {
                // XFS allocates delayed blocks as writeback reaches them.
                self.allocated = p + n;
                if let Some((at, len)) = self.journal.log(now, self.k.xfs_log_bytes_per_alloc) {
                    self.send(now, IoKind::Write, at, len, KJOURNALD, Purpose::Log);
                }
            }
            self.writebacks += 1;
            self.send(
                now,
                IoKind::Write,
                addr,
                n * PAGE,
                PDFLUSH,
                Purpose::Writeback { first: p, n },
            );
            self.cursor = p + n;
        }
    }

    /// Start a commit of the running transaction (ext3: ordered data first).
    fn start_commit(&mut self, now: Ns) {
        if self.committing.is_some() {
            return;
        }
        let ordered = matches!(self.kind, FsKind::Ext3 { ordered: true });
        if ordered {
            let wb: Vec<u64> = self
                .inflight
                .values()
                .filter_map(|p| match p {
                    Purpose::Writeback { first, n } => Some(*first..*first + *n),
                    _ => None,
                })
                .flatten()
                .collect();
            self.pages.mark_commit(wb.into_iter());
        }
        let c = self.journal.commit(self.k.max_request_bytes);
        self.committing = Some(Committing {
            data: ordered,
            log_left: c.log.len(),
            commit_block: c.commit_block,
            home: c.home,
            block_in_flight: false,
        });
        for (at, len) in c.log {
            self.send(now, IoKind::Write, at, len, KJOURNALD, Purpose::Log);
        }
        self.pump(now);
        self.progress(now);
    }

    /// Move a commit on, and finish flushes that have nothing left to wait for.
    fn progress(&mut self, now: Ns) {
        if let Some(c) = &mut self.committing {
            if c.data && self.pages.commit_left == 0 {
                c.data = false;
            }
            if !c.data && c.log_left == 0 && !c.block_in_flight {
                if let Some(at) = c.commit_block.take() {
                    c.block_in_flight = true;
                    self.send(
                        now,
                        IoKind::Write,
                        at,
                        PAGE,
                        KJOURNALD,
                        Purpose::CommitBlock,
                    );
                } else {
                    let home = std::mem::take(&mut c.home);
                    self.committing = None;
                    for at in home {
                        self.send(now, IoKind::Write, at, PAGE, PDFLUSH, Purpose::Home);
                    }
                }
            }
        }
        if self.flushes.is_empty() || !self.pages.dirty.is_empty() || self.pages.writeback > 0 {
            return;
        }
        if self.committing.is_none() && self.journal.pending() {
            self.start_commit(now);
            return;
        }
        if self.committing.is_none() {
            for f in std::mem::take(&mut self.flushes) {
                self.ready.push(Completion { id: f.id, at: now });
            }
        }
    }

    fn retry_blocked(&mut self, now: Ns) {
        while let Some(req) = self.blocked.front().copied() {
            if !self.write(now, req) {
                break;
            }
            self.blocked.pop_front();
        }
    }

    fn on_inner(&mut self, c: Completion) {
        let now = c.at;
        let Some(p) = self.inflight.remove(&c.id) else {
            return;
        };
        match p {
            Purpose::Writeback { first, n } => {
                self.writebacks -= 1;
                for i in first..first + n {
                    self.pages.writeback_done(i);
                }
                self.pages.evict();
                self.retry_blocked(now);
            }
            Purpose::Read { first, n } => {
                for i in first..first + n {
                    self.pages.read_done(i);
                }
                let waiting = std::mem::take(&mut self.waiting);
                for mut w in waiting {
                    w.ready_at = w.ready_at.max(now);
                    if !self.serve(w) {
                        self.waiting.push(w);
                    }
                }
                self.pages.evict();
            }
            Purpose::Log => {
                if let Some(c) = &mut self.committing {
                    c.log_left = c.log_left.saturating_sub(1);
                }
            }
            Purpose::CommitBlock => {
                if let Some(c) = &mut self.committing {
                    c.block_in_flight = false;
                }
            }
            Purpose::Home => {}
            Purpose::Pass(id) => self.ready.push(Completion { id, at: now }),
        }
        self.pump(now);
        self.progress(now);
    }
}

impl Device for FsDevice {
    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn submit(&mut self, now: Ns, req: Request) {
        self.clock = self.clock.max(now);
        match req.kind {
            IoKind::Write => {
                if !self.blocked.is_empty() || !self.write(now, req) {
                    self.blocked.push_back(req);
                }
            }
            IoKind::Read => self.read(now, req),
            IoKind::Flush => self.flushes.push(req),
            _ => {
                let (addr, _) = self.layout.map(req.offset / PAGE * PAGE);
                self.send(
                    now,
                    req.kind,
                    addr,
                    req.len,
                    req.process,
                    Purpose::Pass(req.id),
                );
            }
        }
        self.pump(now);
        self.progress(now);
    }

    fn next_event(&self) -> Option<Ns> {
        let ready = self.ready.iter().map(|c| c.at).min();
        let due = self
            .journal
            .due
            .filter(|_| self.committing.is_none())
            .map(|d| d.max(self.clock));
        [self.inner.next_event(), ready, due]
            .into_iter()
            .flatten()
            .min()
    }

    fn advance(&mut self, now: Ns, done: &mut Vec<Completion>) {
        // The time already reached: a commit due earlier starts from here.
        let mut last = self.clock;
        self.clock = self.clock.max(now);
        let mut buf = Vec::new();
        loop {
            let inner = self.inner.next_event().filter(|&t| t <= now);
            let due = self
                .journal
                .due
                .filter(|&t| t <= now && self.committing.is_none());
            match (inner, due) {
                (Some(t), d) if d.map_or(true, |d| t <= d) => {
                    last = last.max(t);
                    self.inner.advance(t, &mut buf);
                    for c in buf.drain(..) {
                        self.on_inner(c);
                    }
                }
                (_, Some(d)) => {
                    last = last.max(d);
                    self.start_commit(last);
                }
                _ => break,
            }
        }
        hand_out(&mut self.ready, now, done);
    }

    fn info(&self) -> ModelInfo {
        let mut params = self.k.params();
        params.push(Param::new(
            "readahead_bytes",
            (self.readahead_pages * PAGE) as f64,
            "bytes",
        ));
        ModelInfo {
            model: "file system".into(),
            name: format!(
                "{} on Linux {} ({})",
                self.kind.name(),
                self.k.name,
                self.k.description
            ),
            params,
            sources: self.k.sources.clone(),
            parts: vec![self.inner.info()],
        }
    }

    fn member_ops(&self) -> Option<&crate::stats::OpLog> {
        self.inner.member_ops()
    }
    fn rebuild_progress(&self) -> Option<crate::array::RebuildProgress> {
        self.inner.rebuild_progress()
    }
    fn scrub_progress(&self) -> Option<crate::scrub::ScrubProgress> {
        self.inner.scrub_progress()
    }
}
