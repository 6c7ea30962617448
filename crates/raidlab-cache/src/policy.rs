//! Which blocks the cache keeps: admission (promotion threshold, sequential
//! bypass) and replacement (2Q).
//!
//! Replacement is 2Q (Johnson and Shasha, 1994): a block enters a probationary
//! FIFO (`a1in`, a quarter of the slots); a block evicted from there leaves its
//! number in a ghost list (`a1out`, half as many entries as slots, no data); a
//! block missed again while its ghost is remembered enters the main LRU (`am`).
//! A scan therefore cycles through the probationary quarter and never pushes
//! the re-used set out of `am`, which plain LRU does. It was chosen over an
//! SMQ-like multiqueue because it gives the scan resistance with two ordered
//! maps and a bounded ghost list, state that is cheap to rebuild after a
//! restart (it is not persistent; dm-cache and OCF lose theirs too).
//!
//! This module holds no data and does no I/O; it must never decide anything about
//! durability, and never evict a block the caller says is dirty.

use std::collections::{BTreeMap, HashMap, VecDeque};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Queue {
    A1in,
    Am,
}

/// 2Q over cache slots, plus the promotion threshold's miss counts.
#[derive(Debug)]
pub struct TwoQ {
    slots: u64,
    tick: u64,
    /// Per slot: the queue it is in and its position (tick) there.
    place: HashMap<u64, (Queue, u64)>,
    a1in: BTreeMap<u64, u64>,
    am: BTreeMap<u64, u64>,
    /// Ghosts in eviction order, each with the tick it was made at; a block
    /// can be in the queue more than once, and only the entry whose tick
    /// `ghost_set` holds is live.
    ghosts: VecDeque<(u64, u64)>,
    ghost_set: HashMap<u64, u64>,
    misses: HashMap<u64, u32>,
    promote_threshold: u32,
}

impl TwoQ {
    pub fn new(slots: u64, promote_threshold: u32) -> TwoQ {
        TwoQ {
            slots,
            tick: 0,
            place: HashMap::new(),
            a1in: BTreeMap::new(),
            am: BTreeMap::new(),
            ghosts: VecDeque::new(),
            ghost_set: HashMap::new(),
            misses: HashMap::new(),
            promote_threshold: promote_threshold.max(1),
        }
    }

    pub fn set_promote_threshold(&mut self, n: u32) {
        self.promote_threshold = n.max(1);
    }

    fn kin(&self) -> usize {
        (self.slots / 4).max(1) as usize
    }

    fn kout(&self) -> usize {
        (self.slots / 2).max(1) as usize
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// A read miss on origin block `block`: whether to promote it now. Counts
    /// misses per block until the threshold; the count table is bounded by the
    /// number of slots (cleared when it outgrows them: a block that missed once
    /// long ago starts again from zero).
    pub fn admit(&mut self, block: u64) -> bool {
        if self.promote_threshold <= 1 || self.is_ghost(block) {
            return true;
        }
        if self.misses.len() as u64 >= self.slots.max(1) {
            self.misses.clear();
        }
        let n = self.misses.entry(block).or_insert(0);
        *n += 1;
        if *n >= self.promote_threshold {
            self.misses.remove(&block);
            true
        } else {
            false
        }
    }

    /// Whether `block` was evicted from probation recently enough to be
    /// remembered. Ask before choosing a victim for it: that eviction may push
    /// its own ghost out.
    pub fn is_ghost(&self, block: u64) -> bool {
        self.ghost_set.contains_key(&block)
    }

    /// Slot `slot` now holds origin block `block`; `was_ghost` is what
    /// [`TwoQ::is_ghost`] said before the slot was found.
    pub fn insert(&mut self, slot: u64, block: u64, was_ghost: bool) {
        self.remove(slot);
        self.ghost_set.remove(&block);
        let t = self.next_tick();
        let q = if was_ghost {
            self.am.insert(t, slot);
            Queue::Am
        } else {
            self.a1in.insert(t, slot);
            Queue::A1in
        };
        self.place.insert(slot, (q, t));
    }

    /// A hit on slot `slot`: in `am` it moves to the most recent end; in
    /// `a1in` it stays (2Q treats re-references while on probation as one).
    pub fn touch(&mut self, slot: u64) {
        if let Some(&(Queue::Am, t)) = self.place.get(&slot) {
            self.am.remove(&t);
            let t = self.next_tick();
            self.am.insert(t, slot);
            self.place.insert(slot, (Queue::Am, t));
        }
    }

    /// Slot `slot` no longer holds anything (invalidated, or chosen as a victim).
    pub fn remove(&mut self, slot: u64) {
        if let Some((q, t)) = self.place.remove(&slot) {
            match q {
                Queue::A1in => self.a1in.remove(&t),
                Queue::Am => self.am.remove(&t),
            };
        }
    }

    /// The slot to evict, skipping those `dirty` says are dirty; `None` when
    /// every occupied slot is dirty. `block_of` names the block a slot holds,
    /// for the ghost list. The victim is removed from the policy.
    pub fn victim(
        &mut self,
        dirty: impl Fn(u64) -> bool,
        block_of: impl Fn(u64) -> Option<u64>,
    ) -> Option<u64> {
        let from_a1in = self.a1in.len() >= self.kin() || self.am.is_empty();
        let pick = |m: &BTreeMap<u64, u64>| m.values().copied().find(|&s| !dirty(s));
        let (slot, was_a1in) = if from_a1in {
            pick(&self.a1in)
                .map(|s| (s, true))
                .or_else(|| pick(&self.am).map(|s| (s, false)))?
        } else {
            pick(&self.am)
                .map(|s| (s, false))
                .or_else(|| pick(&self.a1in).map(|s| (s, true)))?
        };
        self.remove(slot);
        if was_a1in {
            if let Some(b) = block_of(slot) {
                let t = self.next_tick();
                self.ghost_set.insert(b, t);
                self.ghosts.push_back((b, t));
                while self.ghost_set.len() > self.kout() {
                    let Some((old, t)) = self.ghosts.pop_front() else {
                        break;
                    };
                    if self.ghost_set.get(&old) == Some(&t) {
                        self.ghost_set.remove(&old);
                    }
                }
                // Dead entries (ghosts since reused) must not pile up.
                if self.ghosts.len() > 2 * self.kout() {
                    let live = &self.ghost_set;
                    self.ghosts.retain(|(b, t)| live.get(b) == Some(t));
                }
            }
        }
        Some(slot)
    }
}

/// Detects sequential streams: consecutive requests that each start where the
/// previous one ended. Once a run reaches the cutoff, the rest of it bypasses.
#[derive(Debug, Default)]
pub struct Sequential {
    next: u64,
    run: u64,
}

impl Sequential {
    /// Note a request; whether it is part of a sequential run of at least
    /// `cutoff` bytes (0: never).
    pub fn note(&mut self, offset: u64, len: u64, cutoff: u64) -> bool {
        if offset == self.next && self.run > 0 {
            self.run = self.run.saturating_add(len);
        } else {
            self.run = len;
        }
        self.next = offset.saturating_add(len);
        cutoff > 0 && self.run >= cutoff
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_does_not_push_out_the_reused_set() {
        // 8 slots: blocks 0..4 are used twice (they reach `am`), then a long
        // scan of fresh blocks passes through.
        let mut q = TwoQ::new(8, 1);
        let mut holds: HashMap<u64, u64> = HashMap::new();
        let mut free: Vec<u64> = (0..8).rev().collect();
        let mut access = |q: &mut TwoQ, holds: &mut HashMap<u64, u64>, b: u64| {
            if let Some((&s, _)) = holds.iter().find(|(_, &x)| x == b) {
                q.touch(s);
                return;
            }
            let ghost = q.is_ghost(b);
            let s = free.pop().unwrap_or_else(|| {
                let h = holds.clone();
                q.victim(|_| false, |s| h.get(&s).copied()).unwrap()
            });
            holds.insert(s, b);
            q.insert(s, b, ghost);
        };
        for b in 0..4 {
            access(&mut q, &mut holds, b);
        }
        // Push 0..4 out of probation into the ghosts, then back in: into `am`.
        for b in 100..108 {
            access(&mut q, &mut holds, b);
        }
        for b in 0..4 {
            access(&mut q, &mut holds, b);
        }
        for b in 1000..1100 {
            access(&mut q, &mut holds, b);
        }
        let mut kept: Vec<u64> = holds.values().copied().filter(|&b| b < 4).collect();
        kept.sort();
        assert_eq!(kept, [0, 1, 2, 3]);
    }

    #[test]
    fn victims_skip_dirty_slots_and_none_when_all_dirty() {
        let mut q = TwoQ::new(4, 1);
        for s in 0..4 {
            q.insert(s, s + 10, false);
        }
        assert_eq!(q.victim(|s| s == 0, |s| Some(s + 10)), Some(1));
        assert_eq!(q.victim(|_| true, |s| Some(s + 10)), None);
    }

    #[test]
    fn promotion_threshold_counts_misses() {
        let mut q = TwoQ::new(4, 3);
        assert!(!q.admit(7));
        assert!(!q.admit(7));
        assert!(q.admit(7));
        assert!(!q.admit(7));
        let mut once = TwoQ::new(4, 1);
        assert!(once.admit(7));
    }

    #[test]
    fn sequential_runs_reach_the_cutoff_and_random_ones_do_not() {
        let mut s = Sequential::default();
        assert!(!s.note(0, 1 << 20, 4 << 20));
        assert!(!s.note(1 << 20, 2 << 20, 4 << 20));
        assert!(s.note(3 << 20, 1 << 20, 4 << 20));
        assert!(!s.note(0, 4096, 4 << 20));
        assert!(!s.note(1 << 30, 4 << 20, 0));
    }
}
