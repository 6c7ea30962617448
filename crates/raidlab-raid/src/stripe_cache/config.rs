//! The stripe cache's tunables and the counts it reports: what a user sets
//! and reads. Decides the defaults and their reasons; never how the cache
//! uses them.

use serde::Serialize;
use std::time::Duration;

/// The stripe cache's tunables (md: `stripe_cache_size`; a card: its write
/// cache size and flush interval).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StripeCacheConfig {
    /// Stripes held at most; a write that would hold more first writes out the
    /// oldest. 0 turns the cache off (every write goes straight down).
    pub stripes: usize,
    /// How long a partial stripe may wait for the rest of it before it is
    /// written as it is.
    #[serde(serialize_with = "millis")]
    pub hold: Duration,
    /// Rows (one 4 KiB page of every member) a write leaves up to date in
    /// memory, for a later write of the row to read instead of the members
    /// (`crate::kept_rows`). 0 keeps none.
    pub kept_rows: usize,
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}

impl Default for StripeCacheConfig {
    /// 64 stripes: enough for 8 requests in flight from each of several
    /// streams to find their stripe still open, at a memory cost of 64 x the
    /// stripe's data (96 MiB for a 4-member RAID 5 with 512 KiB chunks; md's
    /// default of 256 x 4 KiB pages per member is smaller but md also merges
    /// in its block layer first). 20 ms: far longer than the gap between the
    /// requests of one stream (tens of microseconds in-process, well under a
    /// millisecond over NBD), far shorter than anything a person would notice
    /// as data sitting in memory.
    ///
    /// 256 kept rows: md's default `stripe_cache_size` (stripe heads of one
    /// page a member, `drivers/md/raid5.c`, `NR_STRIPES`), which md keeps up
    /// to date until it reuses them: 4 MiB for a 4-member array, so that a
    /// write of a row written recently reads as md's does.
    fn default() -> Self {
        StripeCacheConfig {
            stripes: 64,
            hold: Duration::from_millis(20),
            kept_rows: crate::kept_rows::MD_ROWS,
        }
    }
}

/// What the stripe cache did, since the array started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StripeCacheStats {
    /// Write requests (or pieces of them) held to be merged.
    pub writes_held: u64,
    /// Whole stripes written with no member reads (formed in the cache, or
    /// written whole by one request).
    pub full_stripes: u64,
    /// Stripes written out while still partial (by age, size, flush or FUA).
    pub partial_stripes: u64,
    /// Of those, written out because the hold time passed / the cache was full /
    /// a flush or FUA write asked.
    pub expired: u64,
    pub evicted: u64,
    pub flushed: u64,
    /// Member reads the held writes would have needed had each gone down on
    /// its own, less those their write-outs needed: what merging saved.
    pub reads_avoided: u64,
    /// Reads served wholly from held data / partly (the rest from members).
    pub read_hits: u64,
    pub read_partial_hits: u64,
    /// Stripes held now.
    pub held_now: u64,
}
