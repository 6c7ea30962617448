//! A rotating disk's buffer: the write-back cache (dirty runs, what a flush
//! waits for, which run goes down next) and the read segments it keeps.
//!
//! Decides: which writes the cache holds and how they coalesce into runs, the
//! order runs are written back (an elevator sweep from the head), when a flush
//! is satisfied, and which read data stays cached. It must never decide when
//! anything happens (the mechanics in `hdd/mod.rs` do, with the times) and never
//! acknowledge a flush while a write acknowledged before it is not on the media.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A run of dirty data in the write cache and the writes (by arrival number) in it.
#[derive(Debug, Clone)]
pub(super) struct Dirty {
    pub start: u64,
    pub end: u64,
    seqs: Vec<u64>,
}

/// The numbers of the writes not yet on the media. They are numbered in
/// arrival order, so a window from the oldest of them holds them, a flag
/// each: what a set ordered by number did (a flush needs the oldest), for a
/// push, a flag and a pop instead of a tree's insert and remove per write.
#[derive(Debug, Default)]
struct Undurable {
    /// The number of `flags[0]`; the front flag is set, when any is.
    base: u64,
    flags: VecDeque<bool>,
    count: usize,
}

impl Undurable {
    /// Write `seq`, the next number, is not yet durable.
    fn push(&mut self, seq: u64) {
        debug_assert_eq!(seq, self.base + self.flags.len() as u64);
        if self.flags.is_empty() {
            self.base = seq;
        }
        self.flags.push_back(true);
        self.count += 1;
    }

    /// Write `seq` is on the media.
    fn remove(&mut self, seq: u64) {
        let Some(i) = seq.checked_sub(self.base) else {
            return;
        };
        if let Some(f) = self.flags.get_mut(i as usize) {
            if *f {
                *f = false;
                self.count -= 1;
            }
        }
        while self.flags.front() == Some(&false) {
            self.flags.pop_front();
            self.base += 1;
        }
    }

    fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The oldest write not yet durable.
    fn first(&self) -> Option<u64> {
        (self.count > 0).then_some(self.base)
    }
}

/// The write-back half of the buffer.
#[derive(Debug)]
pub(super) struct WriteCache {
    /// Dirty bytes the cache may hold (assumed: half the buffer).
    limit: u64,
    /// The longest run one destage writes (a read segment's size), so one
    /// destage never holds the mechanism for long.
    max_run: u64,
    /// Dirty runs by (start, first write's number), and the same runs by
    /// (end, start, first write's number) to find the one a write continues:
    /// a drive's cache holds thousands of small runs under random writes.
    dirty: BTreeMap<(u64, u64), Dirty>,
    ends: BTreeSet<(u64, u64, u64)>,
    bytes: u64,
    next_seq: u64,
    /// Writes acknowledged from the cache and not yet on the media.
    undurable: Undurable,
    /// The writes of the destage in progress.
    destaging: Vec<u64>,
    /// Flushes waiting: (request id, writes numbered below this must be durable).
    flushes: Vec<(u64, u64)>,
}

impl WriteCache {
    pub fn new(limit: u64, max_run: u64) -> WriteCache {
        WriteCache {
            limit,
            max_run,
            dirty: BTreeMap::new(),
            ends: BTreeSet::new(),
            bytes: 0,
            next_seq: 0,
            undurable: Undurable::default(),
            destaging: Vec::new(),
            flushes: Vec::new(),
        }
    }

    /// Whether a write of `len` bytes can ever go through the cache.
    pub fn takes(&self, len: u64) -> bool {
        len <= self.limit
    }

    /// Whether a write of `len` bytes fits now.
    pub fn fits(&self, len: u64) -> bool {
        self.bytes + len <= self.limit
    }

    /// Three-quarters full of dirty data: write-back may not wait any more.
    pub fn pressed(&self) -> bool {
        self.bytes * 4 > self.limit * 3
    }

    pub fn flush_waiting(&self) -> bool {
        !self.flushes.is_empty()
    }

    /// A flush arrives: true when nothing is waiting to go down (it completes
    /// now), else it waits for every write acknowledged before it.
    pub fn flush(&mut self, id: u64) -> bool {
        if self.undurable.is_empty() {
            true
        } else {
            self.flushes.push((id, self.next_seq));
            false
        }
    }

    /// Hold an acknowledged write of `start..end`. It coalesces with the run it
    /// continues, whenever that arrived (a RAID's member sees a stream's writes
    /// slightly out of order), while the run stays within `max_run`.
    pub fn insert(&mut self, start: u64, end: u64) {
        self.bytes += end - start;
        let seq = self.next_seq;
        self.next_seq += 1;
        self.undurable.push(seq);
        let max_run = self.max_run;
        let continued = self
            .ends
            .range((start, 0, 0)..(start + 1, 0, 0))
            .find(|&&(_, s, _)| end - s <= max_run)
            .copied();
        match continued {
            Some((old_end, s, first)) => {
                self.ends.remove(&(old_end, s, first));
                self.ends.insert((end, s, first));
                if let Some(d) = self.dirty.get_mut(&(s, first)) {
                    d.end = end;
                    d.seqs.push(seq);
                }
            }
            None => {
                self.ends.insert((end, start, seq));
                self.dirty.insert(
                    (start, seq),
                    Dirty {
                        start,
                        end,
                        seqs: vec![seq],
                    },
                );
            }
        }
    }

    /// Take the run to write next: the first at or after `head`, else the
    /// lowest (an elevator sweep, as drives order their write-back), so runs
    /// that arrived out of order still go down in one pass.
    pub fn start_destage(&mut self, head: u64) -> Option<Dirty> {
        let key = self
            .dirty
            .range((head, 0)..)
            .next()
            .or_else(|| self.dirty.iter().next())
            .map(|(&k, _)| k)?;
        let mut d = self.dirty.remove(&key)?;
        self.ends.remove(&(d.end, d.start, d.seqs[0]));
        self.destaging = std::mem::take(&mut d.seqs);
        Some(d)
    }

    /// The destage of `len` bytes is on the media: returns the ids of the
    /// flushes that are now satisfied.
    pub fn finish_destage(&mut self, len: u64) -> Vec<u64> {
        self.bytes -= len;
        for s in std::mem::take(&mut self.destaging) {
            self.undurable.remove(s);
        }
        let oldest = self.undurable.first().unwrap_or(u64::MAX);
        let mut done = Vec::new();
        self.flushes.retain(|&(id, need)| {
            let keep = oldest < need;
            if !keep {
                done.push(id);
            }
            keep
        });
        done
    }
}

/// Read cache segments kept besides the one being read ahead (assumed: the buffer
/// is split into half for dirty data and two read segments of a quarter each).
const READ_SEGMENTS: usize = 2;

/// The read segments: byte ranges the buffer holds from earlier reads.
#[derive(Debug)]
pub(super) struct ReadSegments {
    size: u64,
    kept: VecDeque<(u64, u64)>,
}

impl ReadSegments {
    pub fn new(size: u64) -> ReadSegments {
        ReadSegments {
            size,
            kept: VecDeque::new(),
        }
    }

    /// Keep the last segment's worth of `start..end`, dropping the oldest.
    pub fn keep(&mut self, start: u64, end: u64) {
        if end > start {
            self.kept
                .push_back((start.max(end.saturating_sub(self.size)), end));
            while self.kept.len() > READ_SEGMENTS {
                self.kept.pop_front();
            }
        }
    }

    pub fn covers(&self, a: u64, b: u64) -> bool {
        self.kept.iter().any(|&(s, e)| s <= a && b <= e)
    }

    /// A write of `a..b`: cached data it overlaps is stale.
    pub fn overwrite(&mut self, a: u64, b: u64) {
        self.kept.retain(|&(s, e)| e <= a || b <= s);
    }
}
