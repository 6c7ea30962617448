//! The page cache's pages of one file: which are absent, being read, clean,
//! dirty or under writeback, and which clean page goes first when memory runs
//! out (least recently used).
//!
//! Decides: each page's state and the counts the writeback limits are taken
//! against; eviction of clean pages past the cache's size. It must never evict
//! a dirty, under-writeback or in-flight page, never do I/O and never keep
//! time.

use std::collections::{BTreeSet, VecDeque};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Absent,
    Reading,
    Clean,
    Dirty,
    /// Being written back.
    Writeback,
    /// Being written back and written to again meanwhile: dirty afterwards.
    WritebackDirty,
}

/// A page's flag: its data belongs to the ext3 transaction being committed
/// (data=ordered writes it before the commit block).
const IN_COMMIT: u8 = 1;

#[derive(Debug)]
pub struct Pages {
    state: Vec<State>,
    flags: Vec<u8>,
    stamp: Vec<u32>,
    lru: VecDeque<(u64, u32)>,
    /// Dirty pages (Dirty or WritebackDirty), in file order for writeback.
    pub dirty: BTreeSet<u64>,
    /// Pages under writeback.
    pub writeback: u64,
    /// Pages held (every state but Absent).
    pub held: u64,
    /// Pages of the committing transaction not yet written.
    pub commit_left: u64,
    capacity: u64,
}

impl Pages {
    pub fn new(capacity: u64) -> Pages {
        Pages {
            state: Vec::new(),
            flags: Vec::new(),
            stamp: Vec::new(),
            lru: VecDeque::new(),
            dirty: BTreeSet::new(),
            writeback: 0,
            held: 0,
            commit_left: 0,
            capacity,
        }
    }

    fn grow(&mut self, p: u64) {
        let n = p as usize + 1;
        if self.state.len() < n {
            self.state.resize(n, State::Absent);
            self.flags.resize(n, 0);
            self.stamp.resize(n, 0);
        }
    }

    pub fn get(&self, p: u64) -> State {
        self.state.get(p as usize).copied().unwrap_or(State::Absent)
    }

    /// Whether the page's data is in memory (a read of it needs no I/O).
    pub fn present(&self, p: u64) -> bool {
        !matches!(self.get(p), State::Absent | State::Reading)
    }

    fn touch(&mut self, p: u64) {
        let s = &mut self.stamp[p as usize];
        *s = s.wrapping_add(1);
        self.lru.push_back((p, *s));
    }

    fn set(&mut self, p: u64, to: State) {
        self.grow(p);
        let from = self.state[p as usize];
        if from == State::Absent && to != State::Absent {
            self.held += 1;
        }
        if from != State::Absent && to == State::Absent {
            self.held -= 1;
        }
        let was_dirty = matches!(from, State::Dirty | State::WritebackDirty);
        let is_dirty = matches!(to, State::Dirty | State::WritebackDirty);
        if was_dirty && !is_dirty {
            self.dirty.remove(&p);
        }
        if is_dirty && !was_dirty {
            self.dirty.insert(p);
        }
        let was_wb = matches!(from, State::Writeback | State::WritebackDirty);
        let is_wb = matches!(to, State::Writeback | State::WritebackDirty);
        if was_wb && !is_wb {
            self.writeback -= 1;
        }
        if is_wb && !was_wb {
            self.writeback += 1;
        }
        self.state[p as usize] = to;
    }

    /// A write() of page `p`; true when it newly dirtied it.
    pub fn write(&mut self, p: u64) -> bool {
        let to = match self.get(p) {
            State::Dirty | State::WritebackDirty => return false,
            State::Writeback => State::WritebackDirty,
            _ => State::Dirty,
        };
        self.set(p, to);
        self.touch(p);
        true
    }

    /// A read of `p` is sent to the volume.
    pub fn start_read(&mut self, p: u64) {
        self.set(p, State::Reading);
    }

    /// A read of `p` arrived (unless a write replaced the page meanwhile).
    pub fn read_done(&mut self, p: u64) {
        if self.get(p) == State::Reading {
            self.set(p, State::Clean);
            self.touch(p);
        }
    }

    /// A read() served `p` from memory: it becomes the most recently used.
    pub fn used(&mut self, p: u64) {
        if self.present(p) {
            self.touch(p);
        }
    }

    /// Writeback takes dirty page `p`.
    pub fn start_writeback(&mut self, p: u64) {
        debug_assert_eq!(self.get(p), State::Dirty);
        self.set(p, State::Writeback);
    }

    /// `p`'s writeback finished.
    pub fn writeback_done(&mut self, p: u64) {
        let to = match self.get(p) {
            State::WritebackDirty => State::Dirty,
            _ => State::Clean,
        };
        self.set(p, to);
        if self.flags[p as usize] & IN_COMMIT != 0 {
            self.flags[p as usize] &= !IN_COMMIT;
            self.commit_left -= 1;
        }
    }

    /// A commit starts: every dirty or under-writeback page must be written
    /// before its commit block (ext3 data=ordered); `wb` lists the pages
    /// under writeback.
    pub fn mark_commit(&mut self, wb: impl Iterator<Item = u64>) {
        let dirty: Vec<u64> = self.dirty.iter().copied().collect();
        for p in dirty.into_iter().chain(wb) {
            if self.flags[p as usize] & IN_COMMIT == 0 {
                self.flags[p as usize] |= IN_COMMIT;
                self.commit_left += 1;
            }
        }
    }

    /// Evict least recently used clean pages until the cache fits.
    pub fn evict(&mut self) {
        while self.held > self.capacity {
            let Some((p, s)) = self.lru.pop_front() else {
                return;
            };
            if self.stamp[p as usize] != s {
                continue; // used again since: a later entry stands for it
            }
            match self.get(p) {
                State::Clean => self.set(p, State::Absent),
                // Pinned: back of the queue.
                State::Dirty | State::Writeback | State::WritebackDirty | State::Reading => {
                    self.touch(p)
                }
                State::Absent => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_clean_pages_are_evicted_oldest_first() {
        let mut p = Pages::new(3);
        for i in 0..3 {
            p.start_read(i);
            p.read_done(i);
        }
        p.write(3); // dirty: pinned
        p.used(0); // 0 is now newer than 1 and 2
        p.evict();
        assert_eq!(p.held, 3);
        assert_eq!(p.get(1), State::Absent);
        assert!(p.present(0) && p.present(2) && p.present(3));
        assert_eq!(p.dirty.len(), 1);
    }

    #[test]
    fn a_page_written_during_its_writeback_stays_dirty() {
        let mut p = Pages::new(10);
        p.write(5);
        p.start_writeback(5);
        assert_eq!((p.writeback, p.dirty.len()), (1, 0));
        p.write(5);
        p.writeback_done(5);
        assert_eq!(p.get(5), State::Dirty);
        assert_eq!((p.writeback, p.dirty.len()), (0, 1));
    }

    #[test]
    fn a_commit_waits_for_the_pages_dirty_when_it_started() {
        let mut p = Pages::new(10);
        p.write(1);
        p.write(2);
        p.start_writeback(2);
        p.mark_commit([2].into_iter());
        assert_eq!(p.commit_left, 2);
        p.write(3); // the next transaction's
        p.writeback_done(2);
        p.start_writeback(1);
        p.writeback_done(1);
        assert_eq!(p.commit_left, 0);
        assert_eq!(p.dirty.len(), 1);
    }
}
