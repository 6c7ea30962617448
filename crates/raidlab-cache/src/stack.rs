//! A cache as its owners run it in front of a real origin: opened (for
//! writing or read-only), with a write-back's next read overlapping its write
//! (real devices serve both at once), cleaned in the background while it is
//! writable if the owner asks, and stopped in the one safe order: the
//! cleaner first (no tick may run after the clean stop), then the cache's
//! clean stop (table and superblock current, so the next open needs no
//! recovery and keeps the cache warm). The origin under it is the owner's to
//! stop after, whatever this stop says.
//!
//! `raidlab serve`, the `cache:` benchmark target and the offline `cache`
//! verbs open their cache here, so the order is written once. It decides
//! that order and nothing about the cache itself (the rest of this crate
//! does), and it must never stop the origin.

use crate::driver::{BackgroundCleaner, DEFAULT_INTERVAL};
use crate::{CachedVolume, OriginId};
use raidlab_core::{Result, SharedClock, Volume};
use std::sync::Arc;

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

/// An open cache and its background cleaner.
#[derive(Debug)]
pub struct CacheStack<C: Volume + 'static, O: Volume + 'static> {
    cached: Arc<CachedVolume<C, O>>,
    cleaner: Option<BackgroundCleaner>,
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
        let v = if opts.read_only {
            CachedVolume::open_read_only(cache, origin, id, clock)?
        } else {
            CachedVolume::open(cache, origin, id, clock)?
        };
        // Real devices: a write-back's next read overlaps this write.
        v.set_overlapped_writeback(true);
        let cached = Arc::new(v);
        let cleaner = (opts.background_clean && !opts.read_only)
            .then(|| BackgroundCleaner::start(cached.clone(), DEFAULT_INTERVAL));
        Ok(CacheStack { cached, cleaner })
    }

    /// The cached volume, to serve or test through.
    pub fn cached(&self) -> &Arc<CachedVolume<C, O>> {
        &self.cached
    }

    /// Stop the cleaner, then the cache, cleanly.
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
    use raidlab_devices::{MemVolume, SystemClock};

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
}
