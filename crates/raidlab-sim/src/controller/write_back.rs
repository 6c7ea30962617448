//! The card's write-back cache: which host writes it absorbs (and which wait for
//! room), the dirty ranges per stripe, and what it destages when (full stripes
//! at once, partial ones after their hold or under pressure, in an elevator
//! sweep, `destage_depth` at a time).
//!
//! Decides: only the write side of the cache. It must never serve a read (the
//! read path in `read_path.rs` asks it whether data is dirty) and never decide
//! how a stripe is written (the array behind the card does).

use super::{Inner, RaidCard};
use crate::device::{Completion, Ns, Request, MS};
use raidlab_core::IoKind;

/// Dirty bytes of one stripe: disjoint sorted ranges and when the first arrived.
#[derive(Debug, Clone)]
pub(super) struct Dirty {
    pub(super) ranges: Vec<(u64, u64)>,
    pub(super) since: Ns,
}

impl Dirty {
    fn bytes(&self) -> u64 {
        self.ranges.iter().map(|(s, e)| e - s).sum()
    }
    /// Add [s, e), merging; returns the bytes newly dirtied.
    fn add(&mut self, s: u64, e: u64) -> u64 {
        let before = self.bytes();
        self.ranges.push((s, e));
        self.ranges.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(self.ranges.len());
        for &(s, e) in &self.ranges {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        self.ranges = merged;
        self.bytes() - before
    }
    pub(super) fn covers(&self, s: u64, e: u64) -> bool {
        self.ranges.iter().any(|&(a, b)| a <= s && e <= b)
    }
}

impl RaidCard {
    pub(super) fn cache_limit(&self) -> u64 {
        self.params.cache_bytes
    }

    /// Take a host write into the cache if it fits; false if it must wait.
    pub(super) fn absorb(&mut self, now: Ns, req: Request) -> bool {
        let new_bytes = self.uncached_bytes(req.offset, req.len);
        if self.held + new_bytes > self.cache_limit() {
            return false;
        }
        let (mut s, e) = (req.offset, req.offset + req.len);
        while s < e {
            let stripe = s / self.stripe;
            let end = ((stripe + 1) * self.stripe).min(e);
            let d = self.dirty.entry(stripe).or_insert(Dirty {
                ranges: Vec::new(),
                since: now,
            });
            self.held += d.add(s, end);
            if self.clean_set.remove(&stripe).is_some() {
                self.clean.retain(|&c| c != stripe);
            }
            s = end;
        }
        let at = self.link(now + self.params.overhead(), req.len);
        self.pending.push(Completion { id: req.id, at });
        true
    }

    pub(super) fn uncached_bytes(&self, offset: u64, len: u64) -> u64 {
        let (mut s, e) = (offset, offset + len);
        let mut n = 0;
        while s < e {
            let stripe = s / self.stripe;
            let end = ((stripe + 1) * self.stripe).min(e);
            let already = self.dirty.get(&stripe).map_or(0, |d| {
                d.ranges
                    .iter()
                    .map(|&(a, b)| b.min(end).saturating_sub(a.max(s)))
                    .sum()
            });
            n += (end - s) - already;
            s = end;
        }
        n
    }

    /// Destage what is due, keeping `destage_depth` writes in flight.
    pub(super) fn destage(&mut self, now: Ns) {
        let hold = (self.params.stripe_hold_ms * MS as f64).round() as Ns;
        let pressed = (self.held as f64) > self.params.high_watermark * self.cache_limit() as f64
            || !self.waiting.is_empty();
        self.wake = None;
        while self.destaging < self.params.destage_depth {
            // The next due stripe at or after the cursor, wrapping once.
            let due = |(&k, d): (&u64, &Dirty)| {
                let full =
                    d.ranges.len() == 1 && d.ranges[0] == (k * self.stripe, (k + 1) * self.stripe);
                (full || pressed || now >= d.since + hold).then_some(k)
            };
            let pick = self
                .dirty
                .range(self.cursor..)
                .find_map(due)
                .or_else(|| self.dirty.range(..self.cursor).find_map(due));
            let Some(k) = pick else { break };
            let d = self.dirty.remove(&k).expect("picked");
            self.cursor = k + 1;
            for (s, e) in d.ranges {
                self.destaging += 1;
                self.send_down(
                    now,
                    now,
                    Inner::Destage { len: e - s },
                    IoKind::Write,
                    s,
                    e - s,
                );
            }
        }
        // Wake when the oldest partial stripe's hold runs out.
        if let Some(t) = self.dirty.values().map(|d| d.since + hold).min() {
            if t > now {
                self.wake = Some(t);
            }
        }
    }
}
