//! The cache's statistics: what a user reads to see why a workload does or does
//! not benefit. Plain counters; this module decides nothing and does no I/O.

/// Counters since open or the last reset, and the state now.
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
    pub bypass_mode_bytes: u64,
    pub bypass_full_bytes: u64,
    /// Read misses not promoted because the block has not reached the
    /// promotion threshold yet.
    pub not_promoted: u64,
    pub promotions: u64,
    /// Blocks removed to make room for others.
    pub evictions: u64,
    /// Blocks removed because a write-around write made them stale.
    pub invalidations: u64,
    pub cleaned_blocks: u64,
    pub cleaned_bytes: u64,
    /// State now (not reset).
    pub dirty_blocks: u64,
    pub occupied_blocks: u64,
    pub cache_blocks: u64,
    pub block_size: u32,
}

impl Stats {
    pub fn dirty_bytes(&self) -> u64 {
        self.dirty_blocks * u64::from(self.block_size)
    }
}
