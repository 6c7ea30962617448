//! ext3's journal (JBD) and XFS's log as the file-system layer runs them:
//! what a commit writes, where, and when the next one is due.
//!
//! Decides: the running transaction's metadata blocks (ext3) or log bytes
//! (XFS), when a commit is due (ext3 every `ext3_commit_s`, XFS when a log
//! buffer fills and every `xfs_sync_s`), and the journal or log writes of a
//! commit at the log area's next position (circular). It must never issue I/O
//! or decide data writeback: the device (`mod.rs`) does, in the order this
//! returns.
//!
//! Approximations: ext3's descriptor block per 512 tags and revoke records are
//! one block per commit; a committed metadata block is written home right after
//! its commit (JBD checkpoints when the journal fills, pdflush writes the block
//! device's dirty buffers earlier); XFS's own metadata buffers are not written
//! home (a few blocks per allocation).

use super::kernel::{Kernel, PAGE};
use super::layout::FsKind;
use crate::device::{Ns, SEC};
use std::collections::BTreeSet;

#[derive(Debug)]
pub struct Journal {
    kind: FsKind,
    /// ext3: metadata blocks (volume offsets) dirtied in the running transaction.
    pub running: BTreeSet<u64>,
    /// XFS: log bytes of the running transactions not yet in a written buffer.
    pub log_bytes: u64,
    /// When the running transaction must commit.
    pub due: Option<Ns>,
    area: (u64, u64),
    pos: u64,
    commit_ns: Ns,
    logbuf: u64,
}

/// What a commit writes.
#[derive(Debug, Default, PartialEq)]
pub struct Commit {
    /// Journal or log writes (offset, length), written before `commit_block`.
    pub log: Vec<(u64, u64)>,
    /// ext3's commit block, written after `log` completes.
    pub commit_block: Option<u64>,
    /// Metadata to write home afterwards (ext3 checkpoint).
    pub home: Vec<u64>,
}

impl Journal {
    pub fn new(kind: FsKind, k: &Kernel, area: (u64, u64)) -> Journal {
        let secs = match kind {
            FsKind::Ext3 { .. } => k.ext3_commit_s,
            FsKind::Xfs { .. } => k.xfs_sync_s,
        };
        Journal {
            kind,
            running: BTreeSet::new(),
            log_bytes: 0,
            due: None,
            area,
            pos: 0,
            commit_ns: (secs * SEC as f64) as Ns,
            logbuf: k.xfs_logbuf_bytes,
        }
    }

    pub fn is_ext3(&self) -> bool {
        matches!(self.kind, FsKind::Ext3 { .. })
    }

    /// Whether anything waits to be committed.
    pub fn pending(&self) -> bool {
        !self.running.is_empty() || self.log_bytes > 0
    }

    /// ext3: metadata blocks dirtied at `now` join the running transaction.
    pub fn dirty_blocks(&mut self, now: Ns, blocks: &[u64]) {
        if blocks.is_empty() {
            return;
        }
        self.running.extend(blocks.iter().copied());
        self.due.get_or_insert(now + self.commit_ns);
    }

    /// XFS: an allocation transaction's log bytes; a full log buffer is
    /// returned to be written now.
    pub fn log(&mut self, now: Ns, bytes: u64) -> Option<(u64, u64)> {
        self.log_bytes += bytes;
        self.due.get_or_insert(now + self.commit_ns);
        (self.log_bytes >= self.logbuf).then(|| {
            self.log_bytes -= self.logbuf;
            self.place(self.logbuf)
        })
    }

    /// The next `len` bytes of the circular log area.
    fn place(&mut self, len: u64) -> (u64, u64) {
        if self.pos + len > self.area.1 {
            self.pos = 0;
        }
        let at = self.area.0 + self.pos;
        self.pos += len;
        (at, len)
    }

    /// Commit the running transaction: what to write.
    pub fn commit(&mut self, max_request: u64) -> Commit {
        self.due = None;
        if self.is_ext3() {
            let home: Vec<u64> = std::mem::take(&mut self.running).into_iter().collect();
            if home.is_empty() {
                return Commit::default();
            }
            // A descriptor block, then each metadata block's copy.
            let mut left = (home.len() as u64 + 1) * PAGE;
            let mut log = Vec::new();
            while left > 0 {
                let n = left.min(max_request);
                log.push(self.place(n));
                left -= n;
            }
            let commit_block = Some(self.place(PAGE).0);
            Commit {
                log,
                commit_block,
                home,
            }
        } else {
            let left = std::mem::take(&mut self.log_bytes);
            if left == 0 {
                return Commit::default();
            }
            // The log is written in whole 512-byte sectors, here whole pages.
            Commit {
                log: vec![self.place(left.div_ceil(PAGE) * PAGE)],
                commit_block: None,
                home: Vec::new(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k() -> Kernel {
        super::super::kernel::preset("linux-2.6.2x-md").unwrap()
    }

    #[test]
    fn an_ext3_commit_journals_each_block_then_a_commit_block_then_writes_home() {
        let mut j = Journal::new(FsKind::Ext3 { ordered: true }, &k(), (1 << 20, 128 << 20));
        j.dirty_blocks(7, &[40960, 8192, 40960]);
        assert_eq!(j.due, Some(7 + 5 * SEC));
        let c = j.commit(512 << 10);
        assert_eq!(c.log, vec![(1 << 20, 3 * PAGE)]);
        assert_eq!(c.commit_block, Some((1 << 20) + 3 * PAGE));
        assert_eq!(c.home, vec![8192, 40960]);
        assert!(!j.pending() && j.due.is_none());
    }

    #[test]
    fn xfs_writes_a_log_buffer_when_it_fills() {
        let mut j = Journal::new(FsKind::Xfs { aligned: true }, &k(), (1 << 30, 128 << 20));
        for _ in 0..31 {
            assert_eq!(j.log(0, 1024), None);
        }
        assert_eq!(j.log(0, 1024), Some((1 << 30, 32768)));
        assert_eq!(j.due, Some(30 * SEC));
        j.log(0, 100);
        assert_eq!(j.commit(512 << 10).log, vec![((1 << 30) + 32768, PAGE)]);
    }
}
