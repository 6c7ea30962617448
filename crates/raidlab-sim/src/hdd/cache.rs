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
/// in it: `first`, then those in `WriteCache::rests[rest]` (`NONE`: none,
/// as for nearly every run under random writes). Small, so the thousands of
/// runs of each of six disks stay in the host's cache.
#[derive(Debug)]
struct Run {
    start: u64,
    end: u64,
    first: u64,
    rest: u32,
    /// The next run ending at the same byte (`NONE` for the last).
    next_same_end: u32,
}

/// The numbers of the writes not yet on the media. They are numbered in
/// arrival order, so a window from the oldest of them holds them, a bit
/// each: what a set ordered by number did (a flush needs the oldest), for a
/// push, a bit and a pop instead of a tree's insert and remove per write.
/// Bits, not a `bool` each: the elevator leaves a write behind the head for
/// a whole sweep, so the window spans tens of thousands of writes, and a
/// destage clears bits at random places in it.
#[derive(Debug, Default)]
struct Undurable {
    /// The number of bit 0 of `words[0]`.
    base: u64,
    /// Bit `i % 64` of word `i / 64` for write `base + i`; the front word is
    /// not zero while any bit is set.
    words: VecDeque<u64>,
    /// Bits in the window (set or not): the next number is `base + len`.
    len: u64,
    count: usize,
}

impl Undurable {
    /// Write `seq`, the next number, is not yet durable.
    fn push(&mut self, seq: u64) {
        if self.count == 0 {
            self.words.clear();
            self.base = seq;
            self.len = 0;
        }
        debug_assert_eq!(seq, self.base + self.len);
        if self.len % 64 == 0 {
            self.words.push_back(0);
        }
        if let Some(w) = self.words.back_mut() {
            *w |= 1 << (self.len % 64);
        }
        self.len += 1;
        self.count += 1;
    }

    /// Write `seq` is on the media.
    fn remove(&mut self, seq: u64) {
        let Some(i) = seq.checked_sub(self.base).filter(|&i| i < self.len) else {
            return;
        };
        if let Some(w) = self.words.get_mut((i / 64) as usize) {
            let bit = 1 << (i % 64);
            if *w & bit != 0 {
                *w &= !bit;
                self.count -= 1;
            }
        }
        // With a bit still set further on, a zero front word is never the
        // last (partly filled) one.
        while self.count > 0 && self.words.front() == Some(&0) {
            self.words.pop_front();
            self.base += 64;
            self.len -= 64;
        }
    }

    fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The oldest write not yet durable.
    fn first(&self) -> Option<u64> {
        let w = self.words.front().filter(|_| self.count > 0)?;
        Some(self.base + u64::from(w.trailing_zeros()))
    }
}

/// A run's place in the elevator's order, (start, first write's number),
/// as one integer: ordered as the pair is.
fn start_key(start: u64, first: u64) -> u128 {
    (u128::from(start) << 64) | u128::from(first)
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
    /// The later writes of runs of more than one, by `Run::rest`; emptied
    /// lists are reused (`free_rests`).
    rests: Vec<Vec<u64>>,
    free_rests: Vec<u32>,
    /// The slots by (start, first write's number), the elevator's order. A
    /// slot number, not the run, in the tree: small nodes to search and
    /// shift (this tree was most of the HDD model's time with random writes).
    /// Keys are [`start_key`]s: one integer compare per node entry where a
    /// pair took two.
    by_start: BTreeMap<u128, u32>,
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
            rests: Vec::new(),
            free_rests: Vec::new(),
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
                if r.rest == NONE {
                    r.rest = match self.free_rests.pop() {
                        Some(k) => k,
                        None => {
                            self.rests.push(Vec::new());
                            (self.rests.len() - 1) as u32
                        }
                    };
                }
                self.rests[r.rest as usize].push(seq);
                self.link_end(i);
            }
            None => {
                let run = Run {
                    start,
                    end,
                    first: seq,
                    rest: NONE,
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
                self.by_start.insert(start_key(start, seq), i);
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
        self.unlink_end_of(i, end, next);
    }

    /// [`WriteCache::unlink_end`] with run `i`'s end and next in its chain
    /// already read.
    fn unlink_end_of(&mut self, i: u32, end: u64, next: u32) {
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
            .range(start_key(head, 0)..)
            .next()
            .or_else(|| self.by_start.iter().next())?;
        // The run is read before the tree is changed: it is a slot anywhere
        // in memory (a miss in the host's cache, under random writes), and
        // its load then overlaps the removal, which does not need it.
        let (start, end, first, rest, next) = {
            let r = &self.runs[i as usize];
            (r.start, r.end, r.first, r.rest, r.next_same_end)
        };
        self.by_start.remove(&key);
        self.unlink_end_of(i, end, next);
        self.free.push(i);
        self.destaging.clear();
        self.destaging.push(first);
        if rest != NONE {
            self.destaging.append(&mut self.rests[rest as usize]);
            self.free_rests.push(rest);
        }
        Some(Dirty { start, end })
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use std::collections::{BTreeMap, BTreeSet};

    /// The write cache as it was with two B-trees (runs by start with their
    /// writes, and by end) and a set of undurable writes: the reference the
    /// slot-and-hash cache must match choice for choice.
    #[derive(Default)]
    struct Reference {
        max_run: u64,
        dirty: BTreeMap<(u64, u64), (u64, Vec<u64>)>,
        ends: BTreeSet<(u64, u64, u64)>,
        next_seq: u64,
        undurable: BTreeSet<u64>,
        destaging: Vec<u64>,
        flushes: Vec<(u64, u64)>,
    }

    impl Reference {
        fn insert(&mut self, start: u64, end: u64) {
            let seq = self.next_seq;
            self.next_seq += 1;
            self.undurable.insert(seq);
            let continued = self
                .ends
                .range((start, 0, 0)..(start + 1, 0, 0))
                .find(|&&(_, s, _)| end - s <= self.max_run)
                .copied();
            match continued {
                Some((old_end, s, first)) => {
                    self.ends.remove(&(old_end, s, first));
                    self.ends.insert((end, s, first));
                    let d = self.dirty.get_mut(&(s, first)).expect("run");
                    d.0 = end;
                    d.1.push(seq);
                }
                None => {
                    self.ends.insert((end, start, seq));
                    self.dirty.insert((start, seq), (end, vec![seq]));
                }
            }
        }

        fn start_destage(&mut self, head: u64) -> Option<(u64, u64)> {
            let key = self
                .dirty
                .range((head, 0)..)
                .next()
                .or_else(|| self.dirty.iter().next())
                .map(|(&k, _)| k)?;
            let (end, seqs) = self.dirty.remove(&key)?;
            self.ends.remove(&(end, key.0, key.1));
            self.destaging = seqs;
            Some((key.0, end))
        }

        fn finish_destage(&mut self) -> Vec<u64> {
            for s in std::mem::take(&mut self.destaging) {
                self.undurable.remove(&s);
            }
            let oldest = self.undurable.first().copied().unwrap_or(u64::MAX);
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

    #[test]
    fn runs_destages_and_flushes_match_the_two_tree_cache() {
        // Small regions, so writes continue and repeat one another (runs
        // sharing an end, chains, runs cut at max_run), and long gaps
        // between destages, so the undurable window spans many words.
        for seed in 0..40u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let blocks = [8u64, 64, 4096][seed as usize % 3];
            let max_run = 4096 * rng.gen_range(1..6u64);
            let mut new = WriteCache::new(u64::MAX, max_run);
            let mut old = Reference {
                max_run,
                ..Reference::default()
            };
            let (mut head, mut flush_id) = (0u64, 0u64);
            for step in 0..3000 {
                let r = rng.gen_range(0..100u32);
                if r < 60 {
                    let start = 4096 * rng.gen_range(0..blocks);
                    let end = start + 4096 * rng.gen_range(1..3u64);
                    new.insert(start, end);
                    old.insert(start, end);
                } else if r < 65 {
                    flush_id += 1;
                    assert_eq!(
                        new.flush(flush_id),
                        old.undurable.is_empty(),
                        "seed {seed} step {step}"
                    );
                    if !old.undurable.is_empty() {
                        old.flushes.push((flush_id, old.next_seq));
                    }
                } else if r < 70 || step % 97 == 0 {
                    // A sweep that continues from the last destage or jumps.
                    if rng.gen_range(0..4u32) == 0 {
                        head = 4096 * rng.gen_range(0..blocks);
                    }
                    let d = new.start_destage(head).map(|d| (d.start, d.end));
                    assert_eq!(d, old.start_destage(head), "seed {seed} step {step}");
                    if let Some((start, end)) = d {
                        head = end;
                        assert_eq!(
                            new.finish_destage(end - start),
                            old.finish_destage(),
                            "seed {seed} step {step}"
                        );
                    }
                }
                assert_eq!(new.flush_waiting(), !old.flushes.is_empty());
                assert_eq!(
                    new.undurable.first(),
                    old.undurable.first().copied(),
                    "seed {seed} step {step}"
                );
            }
        }
    }
}
