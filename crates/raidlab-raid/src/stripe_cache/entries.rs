//! What the stripe cache holds: one entry per stripe with the bytes its
//! writes left there (runs, merged as later writes come), and the map of
//! entries by stripe and by age.
//!
//! It decides how a held write merges with what is held, whether a stripe is
//! whole, and which entry is the oldest, or the oldest one free to write
//! out. It must never write anything out or wait for an entry's lock (the
//! cache does both, in `super`).

use super::spare::Spare;
use super::Below;
use raidlab_core::task;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// One stripe's held data. Locked while it is written out, so a later write to
/// the stripe waits and can never reach the members before it.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) stripe: u64,
    /// When the first write was held (the cache's clock). Outside the lock:
    /// choosing the oldest must not wait for a stripe being written out.
    pub(super) since: Duration,
    /// Held across the write-out's member I/O: a task-aware lock, so that a
    /// simulated request finding it held suspends (`raidlab_core::task`).
    pub(super) state: task::Mutex<Held>,
    /// Its write-out has begun (set under `state`'s lock, never cleared):
    /// from then on the lock is held or the entry is gone, so the search
    /// for the oldest free entry may pass it by without trying the lock (an
    /// atomic exchange per entry passed, while every writer in flight
    /// writes one out). Not set: try the lock, which decides.
    pub(super) out: AtomicBool,
}

#[derive(Debug)]
pub(super) struct Held {
    /// The held bytes as sorted, disjoint, non-adjacent runs (offset in the
    /// stripe, bytes): only what was written is kept, so a 4 KiB write costs
    /// 4 KiB of memory, not a stripe's.
    pub(super) runs: Vec<(usize, Vec<u8>)>,
    /// The stripe's length in bytes.
    pub(super) len: usize,
    /// Member reads the held writes would have cost one by one.
    pub(super) reads_alone: u64,
    /// The first write held, whose reads are not in `reads_alone` yet: (array
    /// offset, length, [`Below::members_now`] when it was held). Counted when
    /// the stripe is written out or a second write comes: a write held alone
    /// and written out as it came is counted from its own write's plan.
    pub(super) uncounted: Option<(u64, u64, u64)>,
    /// Written out and out of the map: whoever waited for it starts over.
    pub(super) gone: bool,
}

impl Held {
    /// Hold `bytes` at `at`, over whatever was held there, merging runs that
    /// overlap or touch it. A new run's bytes go in a buffer from `spare`.
    pub(super) fn add(&mut self, at: usize, bytes: &[u8], spare: &Spare) {
        let end = at + bytes.len();
        let first = self.runs.partition_point(|(a, d)| a + d.len() < at);
        let last = self.runs.partition_point(|(a, _)| *a <= end);
        if first == last {
            let mut run = spare.take();
            run.extend_from_slice(bytes);
            self.runs.insert(first, (at, run));
            return;
        }
        if last == first + 1 && self.runs[first].0 <= at {
            // One run, and the write starts inside it or at its end (a
            // sequential stream): change it in place, growing its tail, so a
            // stripe filled piece by piece is copied once, not once a piece.
            let (start, run) = &mut self.runs[first];
            let off = at - *start;
            if end <= *start + run.len() {
                run[off..off + bytes.len()].copy_from_slice(bytes);
            } else {
                run.truncate(off);
                run.extend_from_slice(bytes);
            }
            return;
        }
        let start = at.min(self.runs[first].0);
        let stop = end.max(self.runs[last - 1].0 + self.runs[last - 1].1.len());
        let mut merged = vec![0u8; stop - start];
        for (a, d) in self.runs.drain(first..last) {
            merged[a - start..a - start + d.len()].copy_from_slice(&d);
        }
        merged[at - start..end - start].copy_from_slice(bytes);
        self.runs.insert(first, (start, merged));
    }
    /// Put the first write's reads in `reads_alone`, if not yet there.
    pub(super) fn count_uncounted(&mut self, below: &dyn Below) {
        if let Some((offset, len, members)) = self.uncounted.take() {
            self.reads_alone += below.reads_for_then(offset, len, members);
        }
    }
    pub(super) fn whole(&self) -> bool {
        self.runs.len() == 1 && self.runs[0].0 == 0 && self.runs[0].1.len() == self.len
    }
    pub(super) fn covers(&self, start: usize, end: usize) -> bool {
        self.runs
            .iter()
            .any(|(a, d)| *a <= start && end <= a + d.len())
    }
}

/// The held stripes, by stripe and by age (least `since`, then stripe: the
/// order a write-out of the oldest takes them in), under one lock.
#[derive(Debug, Default)]
pub(super) struct Entries {
    pub(super) by_stripe: BTreeMap<u64, Arc<Entry>>,
    /// The same entries by age: trim walks them in this order, and a
    /// look-up by stripe for each one it passes was most of its time.
    pub(super) by_age: BTreeMap<(Duration, u64), Arc<Entry>>,
}

impl std::ops::Deref for Entries {
    type Target = BTreeMap<u64, Arc<Entry>>;
    fn deref(&self) -> &Self::Target {
        &self.by_stripe
    }
}

impl Entries {
    /// The entry of `stripe`, made (held since `now`) if there is none.
    pub(super) fn get_or_insert(&mut self, stripe: u64, now: Duration, len: usize) -> Arc<Entry> {
        if let Some(e) = self.by_stripe.get(&stripe) {
            return e.clone();
        }
        let e = Arc::new(Entry {
            stripe,
            since: now,
            state: task::Mutex::new(Held {
                runs: Vec::new(),
                len,
                reads_alone: 0,
                uncounted: None,
                gone: false,
            }),
            out: AtomicBool::new(false),
        });
        self.by_age.insert((now, stripe), e.clone());
        self.by_stripe.insert(stripe, e.clone());
        e
    }

    /// Forget `e` if it is still its stripe's entry.
    pub(super) fn remove(&mut self, e: &Entry) {
        if self
            .by_stripe
            .get(&e.stripe)
            .is_some_and(|m| std::ptr::eq(Arc::as_ptr(m), e))
        {
            self.by_stripe.remove(&e.stripe);
            self.by_age.remove(&(e.since, e.stripe));
        }
    }

    pub(super) fn oldest(&self) -> Option<Arc<Entry>> {
        self.by_age.first_key_value().map(|(_, e)| e.clone())
    }

    /// The oldest entry whose lock is free and that is not gone, as of now.
    /// Only tries locks (never waits), so it may be called under the map's
    /// lock although a write-out takes the map's lock under an entry's.
    pub(super) fn oldest_free(&self) -> Option<Arc<Entry>> {
        self.by_age.values().find_map(|e| {
            let free =
                !e.out.load(Ordering::Relaxed) && e.state.try_lock().is_some_and(|held| !held.gone);
            free.then(|| e.clone())
        })
    }
}
