//! The cache's statistics: what a user reads to see why a workload does or does
//! not benefit. Plain counters; this module decides nothing and does no I/O.
//!
//! The counters are saved in the superblock at every superblock write (a clean
//! stop, a change of mode or tunables, the first write after a start, a reset),
//! so they add up over every run of the cache until reset. After a crash they
//! read as at the last superblock write before it.

/// How many counters the superblock keeps (see [`Stats::counters`]).
pub const COUNTERS: usize = 20;

/// Counters since the cache was created or last reset, and the state now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests wholly served by the cache.
    pub read_hits: u64,
    /// Requests that found none of their blocks in the cache.
    pub read_misses: u64,
    /// Requests that found some of their blocks in the cache.
    pub read_partial_hits: u64,
    pub write_hits: u64,
    pub write_misses: u64,
    pub write_partial_hits: u64,
    /// Bytes sent to the origin without the cache, by reason: part of a
    /// sequential run over the cutoff; past the origin's last whole block;
    /// write-around mode; no clean block to evict (all dirty).
    pub bypass_sequential_bytes: u64,
    /// Requests seen as part of a sequential run at or over the cutoff (their
    /// cached blocks are still served by the cache; the rest bypass it).
    pub bypass_sequential_requests: u64,
    pub bypass_tail_bytes: u64,
    /// Requests with some bytes past the origin's last whole block.
    pub bypass_tail_requests: u64,
    pub bypass_mode_bytes: u64,
    /// Requests with some bytes sent around the cache by write-around mode.
    pub bypass_mode_requests: u64,
    pub bypass_full_bytes: u64,
    /// Requests with some bytes that found no clean block to evict.
    pub bypass_full_requests: u64,
    /// Read misses not promoted because the block has not reached the
    /// promotion threshold yet.
    pub not_promoted: u64,
    pub promotions: u64,
    /// Blocks removed to make room for others (dm-cache calls these
    /// demotions; 2Q has no other way out of the cache).
    pub evictions: u64,
    /// Blocks removed because a write-around write made them stale, or a
    /// write-zeroes covered them whole.
    pub invalidations: u64,
    pub cleaned_blocks: u64,
    pub cleaned_bytes: u64,
    /// State now (not reset).
    pub dirty_blocks: u64,
    pub occupied_blocks: u64,
    pub cache_blocks: u64,
    pub block_size: u32,
    /// Errors of the cache device since the cache was opened (not saved).
    pub io_errors: u64,
    /// The cache device failed (see [`crate::failure`]).
    pub failed: bool,
}

impl Stats {
    pub fn dirty_bytes(&self) -> u64 {
        self.dirty_blocks * u64::from(self.block_size)
    }

    pub fn occupied_bytes(&self) -> u64 {
        self.occupied_blocks * u64::from(self.block_size)
    }

    /// The counters (not the state) in the order the superblock keeps them
    /// (docs/cache-format.md lists it; never reorder, only append).
    pub fn counters(&self) -> [u64; COUNTERS] {
        [
            self.read_hits,
            self.read_partial_hits,
            self.read_misses,
            self.write_hits,
            self.write_partial_hits,
            self.write_misses,
            self.bypass_sequential_requests,
            self.bypass_sequential_bytes,
            self.bypass_mode_requests,
            self.bypass_mode_bytes,
            self.bypass_full_requests,
            self.bypass_full_bytes,
            self.bypass_tail_requests,
            self.bypass_tail_bytes,
            self.not_promoted,
            self.promotions,
            self.evictions,
            self.invalidations,
            self.cleaned_blocks,
            self.cleaned_bytes,
        ]
    }

    /// Counters as [`Stats::counters`] gives them; the state fields zero.
    pub fn from_counters(c: [u64; COUNTERS]) -> Stats {
        let [read_hits, read_partial_hits, read_misses, write_hits, write_partial_hits, write_misses, bypass_sequential_requests, bypass_sequential_bytes, bypass_mode_requests, bypass_mode_bytes, bypass_full_requests, bypass_full_bytes, bypass_tail_requests, bypass_tail_bytes, not_promoted, promotions, evictions, invalidations, cleaned_blocks, cleaned_bytes] =
            c;
        Stats {
            read_hits,
            read_misses,
            read_partial_hits,
            write_hits,
            write_misses,
            write_partial_hits,
            bypass_sequential_bytes,
            bypass_sequential_requests,
            bypass_tail_bytes,
            bypass_tail_requests,
            bypass_mode_bytes,
            bypass_mode_requests,
            bypass_full_bytes,
            bypass_full_requests,
            not_promoted,
            promotions,
            evictions,
            invalidations,
            cleaned_blocks,
            cleaned_bytes,
            ..Stats::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_round_trip_each_in_its_own_place() {
        let c: [u64; COUNTERS] = std::array::from_fn(|i| 100 + i as u64);
        let s = Stats::from_counters(c);
        assert_eq!(s.counters(), c);
        assert_eq!(s.read_hits, 100);
        assert_eq!(s.cleaned_bytes, 119);
        assert_eq!(s.dirty_blocks, 0);
    }
}
