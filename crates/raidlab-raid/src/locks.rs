//! Stripe locks: a request holds every stripe it writes (or rebuilds from) for the
//! whole of its plan, so two writes to one stripe never interleave and a degraded
//! read never sees half of a write. A request takes all its keys at once, so two
//! requests can never each hold a key the other waits for.
//!
//! A request that runs as a task (the simulator's) suspends while a key it
//! needs is held, instead of waiting in the kernel, and is woken when keys
//! are let go (`raidlab_core::task`).

use raidlab_core::task::{self, Wait};
use rustc_hash::FxHashSet;
use std::sync::{Condvar, Mutex};

#[derive(Debug, Default)]
pub struct StripeLocks {
    held: Mutex<Held>,
    released: Condvar,
}

#[derive(Debug, Default)]
struct Held {
    /// Stripe numbers: not chosen by anyone who gains from collisions, so a
    /// fast hasher (rustc-hash's) instead of SipHash, on every locked request.
    keys: FxHashSet<u64>,
    /// Requests waiting for a key: a release wakes them only when there are
    /// some, so the common uncontended release costs no futex system call.
    waiters: usize,
}

/// Held stripe keys; released on drop.
#[derive(Debug)]
pub struct StripeGuard<'a> {
    locks: &'a StripeLocks,
    keys: Vec<u64>,
}

impl StripeLocks {
    /// Wait until none of `keys` is held, then hold them all.
    pub fn lock(&self, keys: &[u64]) -> StripeGuard<'_> {
        if !keys.is_empty() {
            let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
            while keys.iter().any(|k| held.keys.contains(k)) {
                if task::in_task() {
                    drop(held);
                    task::suspend(Wait::Key(self.key()));
                    held = self.held.lock().unwrap_or_else(|p| p.into_inner());
                    continue;
                }
                held.waiters += 1;
                held = self.released.wait(held).unwrap_or_else(|p| p.into_inner());
                held.waiters -= 1;
            }
            held.keys.extend(keys.iter().copied());
        }
        StripeGuard {
            locks: self,
            keys: keys.to_vec(),
        }
    }

    /// What a task waiting here is woken by.
    fn key(&self) -> usize {
        self as *const Self as usize
    }
}

impl Drop for StripeGuard<'_> {
    fn drop(&mut self) {
        if self.keys.is_empty() {
            return;
        }
        let mut held = self.locks.held.lock().unwrap_or_else(|p| p.into_inner());
        for k in &self.keys {
            held.keys.remove(k);
        }
        let waiting = held.waiters > 0;
        drop(held);
        task::wake(self.locks.key());
        if waiting {
            self.locks.released.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn overlapping_holders_never_run_together() {
        let locks = Arc::new(StripeLocks::default());
        let inside = Arc::new(AtomicUsize::new(0));
        let max_seen = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let (locks, inside, max_seen) = (locks.clone(), inside.clone(), max_seen.clone());
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        // Every thread's key set contains stripe 7.
                        let _g = locks.lock(&[t as u64 * 100, 7]);
                        let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        max_seen.fetch_max(n, Ordering::SeqCst);
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(max_seen.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn disjoint_holders_do_not_block() {
        let locks = StripeLocks::default();
        let a = locks.lock(&[1, 2]);
        let b = locks.lock(&[3]);
        drop(a);
        let _c = locks.lock(&[1]);
        drop(b);
    }
}
