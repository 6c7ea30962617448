//! The card's read path: what a host read is served from (the write cache's
//! dirty data, stripes read ahead, a parity array's kept reads), when it waits
//! for a fetch already in flight, and how far it reads ahead on a stream.
//!
//! Decides: only reads and the read data the card keeps. It must never absorb
//! or destage a write (`write_back.rs` does) and never count read-ahead data as
//! cached before it has arrived from the disks.

use super::{Inner, RaidCard};
use crate::device::{Completion, Ns, Request};
use raidlab_core::IoKind;

impl RaidCard {
    pub(super) fn cached(&self, offset: u64, len: u64) -> bool {
        let (mut s, e) = (offset, offset + len);
        while s < e {
            let stripe = s / self.stripe;
            let end = ((stripe + 1) * self.stripe).min(e);
            let dirty = self.dirty.get(&stripe).is_some_and(|d| d.covers(s, end));
            if !dirty && !self.clean_set.contains_key(&stripe) {
                return false;
            }
            s = end;
        }
        true
    }

    /// Is [s, e) all in the kept read data?
    pub(super) fn kept_covers(&self, s: u64, e: u64) -> bool {
        self.kept
            .range(..=s)
            .next_back()
            .is_some_and(|(_, &end)| end >= e)
    }

    /// Keep [s, e) as far as room allows (first come, first kept).
    pub(super) fn keep(&mut self, s: u64, e: u64) {
        let room = self
            .params
            .parity_read_cache_bytes
            .saturating_sub(self.kept_bytes);
        if !self.parity || room == 0 {
            return;
        }
        let (mut s, mut e) = (s, e);
        // What is already kept inside [s, e) costs no room: drop the overlaps and
        // re-add the merged range.
        let overlapping: Vec<(u64, u64)> = self
            .kept
            .range(..e)
            .filter(|(_, &end)| end >= s)
            .map(|(&a, &b)| (a, b))
            .collect();
        let already: u64 = overlapping
            .iter()
            .map(|&(a, b)| b.min(e).saturating_sub(a.max(s)))
            .sum();
        let new = (e - s) - already;
        if new > room {
            if already > 0 {
                return;
            }
            // Only the first `room` bytes fit: keep that prefix.
            e = s + room;
        }
        for (a, b) in overlapping {
            self.kept.remove(&a);
            self.kept_bytes -= b - a;
            s = s.min(a);
            e = e.max(b);
        }
        self.kept.insert(s, e);
        self.kept_bytes += e - s;
    }

    /// A write changes [s, e): the kept copy of it is dropped.
    pub(super) fn forget(&mut self, s: u64, e: u64) {
        let overlapping: Vec<(u64, u64)> = self
            .kept
            .range(..e)
            .filter(|(_, &end)| end > s)
            .map(|(&a, &b)| (a, b))
            .collect();
        for (a, b) in overlapping {
            self.kept.remove(&a);
            self.kept_bytes -= b - a;
            if a < s {
                self.kept.insert(a, s);
                self.kept_bytes += s - a;
            }
            if b > e {
                self.kept.insert(e, b);
                self.kept_bytes += b - e;
            }
        }
    }

    pub(super) fn read(&mut self, now: Ns, req: Request) {
        let sequential = self.last_read_end == Some(req.offset);
        self.last_read_end = Some(req.offset + req.len);
        if self.cached(req.offset, req.len) || self.kept_covers(req.offset, req.offset + req.len) {
            let at = self.link(now + self.params.overhead(), req.len);
            self.pending.push(Completion { id: req.id, at });
            return;
        }
        // Covered by stripes still being read ahead: wait for the latest of
        // those fetches instead of reading the disks again.
        if let Some(fetch) = self.fetch_covering(req.offset, req.len) {
            self.waiters
                .entry(fetch)
                .or_default()
                .push((req.id, req.len));
            return;
        }
        let mut len = req.len;
        let mut ahead = None;
        if sequential && self.params.read_ahead_stripes > 0 && self.params.cache_bytes > 0 {
            // Read on to the end of the stripes ahead; they join the cache when
            // their data has arrived.
            // From the request's first stripe to `read_ahead_stripes` past its
            // last: never less than the request itself.
            let first = req.offset / self.stripe;
            let last = (req.offset + req.len - 1) / self.stripe
                + u64::from(self.params.read_ahead_stripes);
            let end = ((last + 1) * self.stripe).min(self.array.capacity());
            len = end.max(req.offset + req.len) - req.offset;
            ahead = Some((first, last));
        }
        let id = self.send_down(
            now,
            now + self.params.overhead(),
            Inner::Host {
                id: req.id,
                kind: IoKind::Read,
                len: req.len,
                span: (req.offset, req.offset + len),
            },
            IoKind::Read,
            req.offset,
            len,
        );
        if let Some((first, last)) = ahead {
            for s in first..=last {
                if !self.clean_set.contains_key(&s) {
                    self.fetching.insert(s, id);
                }
            }
        }
    }

    /// The fetch in flight that, with the clean stripes, covers a read, if the
    /// read is covered and some of it is still arriving.
    pub(super) fn fetch_covering(&self, offset: u64, len: u64) -> Option<u64> {
        let (first, last) = (offset / self.stripe, (offset + len - 1) / self.stripe);
        let mut latest = None;
        for s in first..=last {
            match self.fetching.get(&s) {
                Some(&id) => latest = latest.max(Some(id)),
                None if self.clean_set.contains_key(&s) => {}
                None => return None,
            }
        }
        latest
    }

    /// A read's data has arrived: its read-ahead stripes are clean in the cache
    /// and parity arrays keep what was read.
    pub(super) fn arrived(&mut self, inner: u64, span: (u64, u64)) {
        let (first, last) = (span.0 / self.stripe, (span.1 - 1) / self.stripe);
        for s in first..=last {
            if self.fetching.get(&s) == Some(&inner) {
                self.fetching.remove(&s);
                if self.clean_set.insert(s, ()).is_none() {
                    self.clean.push_back(s);
                }
            }
        }
        // The read-ahead buffer holds a stream's window (twice it, so the window
        // being consumed and the next fit), not the whole cache: a prefetch is
        // not a read cache.
        let window = 2 * (u64::from(self.params.read_ahead_stripes) + 1);
        let room = (self.cache_limit().saturating_sub(self.held) / self.stripe.max(1)).min(window);
        while self.clean.len() as u64 > room {
            if let Some(old) = self.clean.pop_front() {
                self.clean_set.remove(&old);
            }
        }
        self.keep(span.0, span.1);
    }
}
