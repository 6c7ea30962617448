//! A cache as its owners run it in front of a real origin: opened (for
//! writing or read-only), with a write-back's next read overlapping its write
//! (real devices serve both at once), cleaned in the background while it is
//! writable if the owner asks, and stopped in the one safe order: the
//! cleaner first (no tick may run after the clean stop), then the cache's
//! clean stop (table and superblock current, so the next open needs no
//! recovery and keeps the cache warm). The origin under it is the owner's to
//! stop after, whatever this stop says.
//!
//! `raidlab serve`, the `cache:` benchmark target, the offline `cache` verbs
//! and the simulator open their cache here, so the order is written once.
//! An owner that runs everything itself on its own clock (the simulator: one
//! thread, virtual time) opens it [`RunBy::Owner`]: no thread is started,
//! write-back does not overlap, and the owner runs the cleaner's loop
//! ([`OwnerCleaner`]) where it runs its work. It decides that order and who
//! runs the cleaner, nothing about the cache itself (the rest of this crate
//! does), and it must never stop the origin.

use crate::driver::{BackgroundCleaner, DEFAULT_INTERVAL};
use crate::{CachedVolume, OriginId};
use raidlab_core::{Clock, Result, SharedClock, Volume};
use std::sync::Arc;
use std::time::Duration;

/// How a cache is opened.
#[derive(Debug, Clone, Copy, Default)]
pub struct StackOptions {
    /// Nothing written to the cache device or the origin
    /// ([`CachedVolume::open_read_only`]).
    pub read_only: bool,
    /// Clean dirty blocks in the background while it is open (writable
    /// caches only), as a served cache does.
    pub background_clean: bool,
}

/// Who runs what an open cache does besides its requests: the background
/// cleaner and a write-back's overlapped read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RunBy {
    /// This stack, on threads of its own, in real time: the cleaner (when
    /// [`StackOptions::background_clean`]) on a thread, a write-back's next
    /// read on a scoped one (real devices serve both at once).
    #[default]
    Threads,
    /// The owner, on its own clock: no thread is started and a write-back
    /// reads, then writes (two requests at once would make a single-threaded
    /// owner's order depend on the host's scheduler). The owner runs the
    /// cleaner's loop itself ([`CacheStack::owner_cleaner`]), and ends it
    /// before [`CacheStack::stop`].
    Owner,
}

/// An open cache and its background cleaner.
#[derive(Debug)]
pub struct CacheStack<C: Volume + 'static, O: Volume + 'static> {
    cached: Arc<CachedVolume<C, O>>,
    cleaner: Option<BackgroundCleaner>,
    /// With [`RunBy::Owner`], whether the owner is to clean (writable and
    /// asked to).
    owner_cleans: bool,
}

/// The cleaner of a cache whose owner runs it ([`RunBy::Owner`]): the
/// driver's one loop, at the driver's interval, on the owner's clock.
#[derive(Debug)]
pub struct OwnerCleaner<C: Volume + 'static, O: Volume + 'static> {
    cached: Arc<CachedVolume<C, O>>,
    interval: Duration,
}

impl<C: Volume + 'static, O: Volume + 'static> OwnerCleaner<C, O> {
    /// Run the cleaner's loop ([`crate::driver::run_on_clock`]) with
    /// `clock`'s sleeps as its waits, until a tick fails. Only for a clock
    /// whose sleep gives control back to the owner (a task's on a virtual
    /// clock): the owner ends the loop by dropping what runs it.
    pub fn run_on_clock(&self, clock: &dyn Clock) -> Result<()> {
        crate::driver::run_on_clock(&self.cached, self.interval, clock)
    }
}

/// What a stop found.
#[derive(Debug)]
pub struct StackStop {
    /// The error the background cleaner had stopped on, if it had: dirty
    /// blocks stayed in the cache (recorded), none were lost.
    pub cleaner_error: Option<raidlab_core::Error>,
    /// The clean stop's result: an error means the next open recovers.
    pub shutdown: Result<()>,
}

impl<C: Volume + 'static, O: Volume + 'static> CacheStack<C, O> {
    /// Open the cache on `cache` in front of `origin` (which must be the
    /// origin it was made for, `id`), and start its background cleaner if
    /// asked and writable.
    pub fn open(
        cache: C,
        origin: O,
        id: OriginId,
        clock: SharedClock,
        opts: StackOptions,
    ) -> Result<Self> {
        Self::open_driven(cache, origin, id, clock, opts, RunBy::Threads)
    }

    /// [`CacheStack::open`], with `run_by` saying who runs the cleaner and
    /// whether a write-back overlaps.
    pub fn open_driven(
        cache: C,
        origin: O,
        id: OriginId,
        clock: SharedClock,
        opts: StackOptions,
        run_by: RunBy,
    ) -> Result<Self> {
        let v = if opts.read_only {
            CachedVolume::open_read_only(cache, origin, id, clock)?
        } else {
            CachedVolume::open(cache, origin, id, clock)?
        };
        let cleans = opts.background_clean && !opts.read_only;
        let threads = run_by == RunBy::Threads;
        // Real devices: a write-back's next read overlaps this write.
        v.set_overlapped_writeback(threads);
        let cached = Arc::new(v);
        let cleaner =
            (cleans && threads).then(|| BackgroundCleaner::start(cached.clone(), DEFAULT_INTERVAL));
        Ok(CacheStack {
            cached,
            cleaner,
            owner_cleans: cleans && !threads,
        })
    }

    /// The cached volume, to serve or test through.
    pub fn cached(&self) -> &Arc<CachedVolume<C, O>> {
        &self.cached
    }

    /// The cleaner for the owner to run, if the owner runs it
    /// ([`RunBy::Owner`]) and the cache is to be cleaned (writable, asked
    /// to); `None` otherwise, a cleaner on a thread included.
    pub fn owner_cleaner(&self) -> Option<OwnerCleaner<C, O>> {
        self.owner_cleans.then(|| OwnerCleaner {
            cached: self.cached.clone(),
            interval: DEFAULT_INTERVAL,
        })
    }

    /// Whether a cleaner thread of this stack's own runs.
    pub fn cleans_in_background(&self) -> bool {
        self.cleaner.is_some()
    }

    /// Stop the cleaner, then the cache, cleanly. An owner that runs the
    /// cleaner ends its loop first: the clean stop must be the last thing
    /// the cache does.
    pub fn stop(self) -> StackStop {
        let cleaner_error = self.cleaner.and_then(|c| c.stop().error);
        StackStop {
            cleaner_error,
            shutdown: self.cached.shutdown(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{create, examine, Config, Mode};
    use raidlab_core::task;
    use raidlab_devices::{MemVolume, SystemClock};
    use std::sync::atomic::Ordering;

    const ID: OriginId = OriginId::Signature([9; 32]);

    #[test]
    fn a_stop_leaves_the_cache_clean_and_its_dirty_blocks_kept() {
        let dev = Arc::new(MemVolume::new(16 << 20));
        let origin = Arc::new(MemVolume::new(64 << 20));
        let cfg = Config {
            mode: Mode::WriteBack,
            ..Config::default()
        };
        create(&dev, &origin, ID, "origin", [4; 16], cfg).unwrap();
        let clock: SharedClock = Arc::new(SystemClock::default());
        let opts = StackOptions {
            read_only: false,
            background_clean: true,
        };
        let s = CacheStack::open(dev.clone(), origin.clone(), ID, clock.clone(), opts).unwrap();
        s.cached().write_at(&[7u8; 4096], 1 << 20).unwrap();
        let stop = s.stop();
        assert!(stop.cleaner_error.is_none());
        stop.shutdown.unwrap();
        assert!(
            examine(&dev).unwrap().clean,
            "the superblock records a clean stop"
        );
        // Read-only: opened without recovery, the block still where it was
        // written (the cache or, cleaned, the origin).
        let opts = StackOptions {
            read_only: true,
            background_clean: true,
        };
        let again = CacheStack::open(dev, origin, ID, clock, opts).unwrap();
        let mut b = [0u8; 4096];
        again.cached().read_at(&mut b, 1 << 20).unwrap();
        assert_eq!(b, [7u8; 4096]);
        assert!(
            again.cleaner.is_none(),
            "a read-only cache is never cleaned"
        );
    }

    #[test]
    fn an_owner_run_stack_starts_no_thread_and_hands_its_cleaner_to_the_owner() {
        let dev = Arc::new(MemVolume::new(16 << 20));
        let origin = Arc::new(MemVolume::new(64 << 20));
        let cfg = Config {
            mode: Mode::WriteBack,
            // Everything over the target, cleaned at once: one tick cleans.
            dirty_target_pct: 0,
            clean_rate: 0,
            ..Config::default()
        };
        create(&dev, &origin, ID, "origin", [4; 16], cfg).unwrap();
        let clock: SharedClock = Arc::new(SystemClock::default());
        let opts = StackOptions {
            read_only: false,
            background_clean: true,
        };
        let threads =
            CacheStack::open(dev.clone(), origin.clone(), ID, clock.clone(), opts).unwrap();
        assert!(threads.cleans_in_background());
        assert!(threads.owner_cleaner().is_none(), "the thread cleans");
        assert!(threads.cached().overlap.load(Ordering::Relaxed));
        threads.stop().shutdown.unwrap();

        let s = CacheStack::open_driven(dev.clone(), origin.clone(), ID, clock, opts, RunBy::Owner)
            .unwrap();
        assert!(!s.cleans_in_background(), "no thread of the stack's own");
        assert!(
            !s.cached().overlap.load(Ordering::Relaxed),
            "a write-back reads, then writes"
        );
        s.cached().write_at(&[7u8; 4096], 1 << 20).unwrap();
        assert_eq!(s.cached().stats().dirty_blocks, 1);
        let cleaner = s.owner_cleaner().expect("the owner cleans");
        // As the simulator runs it: the loop in a task whose clock's sleep
        // gives control back; the first tick runs before the first sleep.
        #[derive(Debug)]
        struct Suspends;
        impl Clock for Suspends {
            fn now(&self) -> Duration {
                Duration::ZERO
            }
            fn sleep(&self, d: Duration) {
                assert!(task::suspend(task::Wait::Until(d)), "only in a task");
            }
        }
        let mut stacks = task::Stacks::default();
        let mut t = task::Task::new(&mut stacks, move || cleaner.run_on_clock(&Suspends)).unwrap();
        assert!(
            matches!(t.resume(), task::Step::Waits(task::Wait::Until(_))),
            "the loop sleeps after its tick"
        );
        assert_eq!(
            s.cached().stats().dirty_blocks,
            0,
            "the owner's loop cleans"
        );
        drop(t);
        let stop = s.stop();
        assert!(stop.cleaner_error.is_none());
        stop.shutdown.unwrap();
        assert!(examine(&dev).unwrap().clean);
        let mut b = [0u8; 4096];
        origin.read_at(&mut b, 1 << 20).unwrap();
        assert_eq!(b, [7u8; 4096], "cleaned to the origin");
    }
}
