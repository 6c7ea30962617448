//! A rotating disk's buffer: the write-back cache (dirty runs, what a flush
//! waits for, which run goes down next) and the read segments it keeps.
//!
//! Decides: which writes the cache holds and how they coalesce into runs, the
//! order runs are written back (an elevator sweep from the head), when a flush
//! is satisfied, and which read data stays cached. It must never decide when
//! anything happens (the mechanics in `hdd/mod.rs` do, with the times) and never
//! acknowledge a flush while a write acknowledged before it is not on the media.

use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, VecDeque};

/// A run of dirty data the write cache hands to a destage: its bytes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Dirty {
    pub start: u64,
    pub end: u64,
}

/// No run: the end of a chain of runs ending at one byte.
const NONE: u32 = u32::MAX;

/// A run of dirty data in the write cache and the writes (by arrival number)
/// in it: `first`, then `rest` (empty, so no allocation, for a run of one
/// write, as nearly every run is under random writes).
#[derive(Debug)]
struct Run {
    start: u64,
    end: u64,
    first: u64,
    rest: Vec<u64>,
    /// The next run ending at the same byte (`NONE` for the last).
    next_same_end: u32,
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
    /// Dirty runs, in slots reused once written back (`free`): a drive's
    /// cache holds thousands of small runs under random writes.
    runs: Vec<Run>,
    free: Vec<u32>,
    /// The slots by (start, first write's number), the elevator's order. A
    /// slot number, not the run, in the tree: small nodes to search and
    /// shift (this tree was most of the HDD model's time with random writes).
    by_start: BTreeMap<(u64, u64), u32>,
    /// The first of the runs ending at a byte (the others chained by
    /// `next_same_end`), to find the run a write continues by its end: a
    /// lookup instead of a range search in a second tree.
    by_end: FxHashMap<u64, u32>,
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
            runs: Vec::new(),
            free: Vec::new(),
            by_start: BTreeMap::new(),
            by_end: FxHashMap::default(),
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
    /// slightly out of order), while the run stays within `max_run`; of
    /// several it could continue, the one lowest by (start, first write).
    pub fn insert(&mut self, start: u64, end: u64) {
        self.bytes += end - start;
        let seq = self.next_seq;
        self.next_seq += 1;
        self.undurable.push(seq);
        let mut continued: Option<u32> = None;
        let mut i = self.by_end.get(&start).copied().unwrap_or(NONE);
        while i != NONE {
            let r = &self.runs[i as usize];
            let lower = match continued {
                None => true,
                Some(c) => {
                    let c = &self.runs[c as usize];
                    (r.start, r.first) < (c.start, c.first)
                }
            };
            if end - r.start <= self.max_run && lower {
                continued = Some(i);
            }
            i = r.next_same_end;
        }
        match continued {
            Some(i) => {
                self.unlink_end(i);
                let r = &mut self.runs[i as usize];
                r.end = end;
                r.rest.push(seq);
                self.link_end(i);
            }
            None => {
                let run = Run {
                    start,
                    end,
                    first: seq,
                    rest: Vec::new(),
                    next_same_end: NONE,
                };
                let i = match self.free.pop() {
                    Some(i) => {
                        self.runs[i as usize] = run;
                        i
                    }
                    None => {
                        self.runs.push(run);
                        (self.runs.len() - 1) as u32
                    }
                };
                self.by_start.insert((start, seq), i);
                self.link_end(i);
            }
        }
    }

    /// Put run `i` first in the chain of runs ending where it ends.
    fn link_end(&mut self, i: u32) {
        let end = self.runs[i as usize].end;
        let next = self.by_end.insert(end, i).unwrap_or(NONE);
        self.runs[i as usize].next_same_end = next;
    }

    /// Take run `i` out of the chain of runs ending where it ends.
    fn unlink_end(&mut self, i: u32) {
        let (end, next) = {
            let r = &self.runs[i as usize];
            (r.end, r.next_same_end)
        };
        let Some(&head) = self.by_end.get(&end) else {
            return;
        };
        if head == i {
            if next == NONE {
                self.by_end.remove(&end);
            } else {
                self.by_end.insert(end, next);
            }
            return;
        }
        let mut p = head;
        while p != NONE {
            let after = self.runs[p as usize].next_same_end;
            if after == i {
                self.runs[p as usize].next_same_end = next;
                return;
            }
            p = after;
        }
    }

    /// Take the run to write next: the first at or after `head`, else the
    /// lowest (an elevator sweep, as drives order their write-back), so runs
    /// that arrived out of order still go down in one pass.
    pub fn start_destage(&mut self, head: u64) -> Option<Dirty> {
        let (&key, &i) = self
            .by_start
            .range((head, 0)..)
            .next()
            .or_else(|| self.by_start.iter().next())?;
        self.by_start.remove(&key);
        self.unlink_end(i);
        self.free.push(i);
        let r = &mut self.runs[i as usize];
        self.destaging.clear();
        self.destaging.push(r.first);
        self.destaging.append(&mut r.rest);
        Some(Dirty {
            start: r.start,
            end: r.end,
        })
    }

    /// The destage of `len` bytes is on the media: returns the ids of the
    /// flushes that are now satisfied.
    pub fn finish_destage(&mut self, len: u64) -> Vec<u64> {
        self.bytes -= len;
        for &s in &self.destaging {
            self.undurable.remove(s);
        }
        self.destaging.clear();
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
