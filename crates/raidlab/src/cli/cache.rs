//! Arguments of the `raidlab cache` verbs.

use super::*;

/// `raidlab cache` verbs. The origin is named as every other verb names an
/// array: its members in any order; with `--plain`, one file or block device.
#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// Write a new cache's metadata on the cache device, bound to the origin.
    Create(CacheCreateArgs),
    /// Show a cache from its device alone: mode, block size, occupancy, dirty bytes.
    Detail(CacheDetailArgs),
    /// The cache's counters (hits, misses, bypasses and why, promotions,
    /// evictions, cleaning) and its occupancy and dirty data now. Counters add
    /// up over every run since create or the last --reset; offline they are as
    /// saved at the cache's last clean stop.
    Stats(CacheStatsArgs),
    /// Write every dirty block back to the origin (with progress).
    Flush(CacheOriginArgs),
    /// Write every dirty block back, then unbind: the origin is complete on its
    /// own and the cache device no longer holds a cache.
    Detach(CacheOriginArgs),
    /// Change the mode or tunables (leaving write-back writes back first).
    Set(CacheSetArgs),
    /// Bind a detached cache to its origin again (the same origin only, by
    /// identity and size). It starts empty: the origin was used on its own.
    Attach(CacheOriginArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CacheMode {
    Writeback,
    Writethrough,
    Writearound,
}

#[derive(Debug, Args)]
pub struct CacheOrigin {
    /// The cache device (a file or block device; create needs it to exist).
    #[arg(long, value_name = "DEV")]
    pub cache: PathBuf,
    /// The origin: an array's members (any order), or with --plain one file or
    /// block device.
    #[arg(required = true, value_name = "ORIGIN")]
    pub origin: Vec<PathBuf>,
    /// The origin is a plain file or block device, not an array.
    #[arg(long)]
    pub plain: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CacheCreateArgs {
    #[command(flatten)]
    pub at: CacheOrigin,
    /// writeback: a write completes on the cache device; writethrough: on both;
    /// writearound: on the origin only (the cached copy is dropped).
    #[arg(long, value_enum, default_value = "writethrough")]
    pub mode: CacheMode,
    /// Cache block: a power of two from 4K to 1G. Small random I/O wants 4K.
    #[arg(long, default_value = "64K", value_parser = size)]
    pub block: u64,
    /// Replacement policy: 2q (the only one; scan-resistant).
    #[arg(long, default_value = "2q", value_parser = ["2q"])]
    pub policy: String,
    /// Sequential runs of this many bytes or more bypass the cache (0: never).
    #[arg(long, default_value = "4M", value_parser = size)]
    pub sequential_cutoff: u64,
    /// Background cleaning starts above this percentage of dirty blocks.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub dirty_target: u8,
    /// Background cleaning rate in bytes per second (0: unlimited).
    #[arg(long, default_value = "0", value_parser = size)]
    pub clean_rate: u64,
    /// Read misses of a block before it is promoted into the cache.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub promote_threshold: u32,
    /// Overwrite a cache already on the device (its dirty blocks are lost).
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct CacheDetailArgs {
    /// The cache device.
    #[arg(long, value_name = "DEV")]
    pub cache: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CacheStatsArgs {
    /// The cache device.
    #[arg(long, value_name = "DEV")]
    pub cache: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Zero the counters after printing them (the occupancy and dirty data are
    /// state, not counters, and stay).
    #[arg(long)]
    pub reset: bool,
}

#[derive(Debug, Args)]
pub struct CacheOriginArgs {
    #[command(flatten)]
    pub at: CacheOrigin,
    /// Start a degraded array that was not stopped cleanly; for detach, also
    /// unbind a write-back cache whose device cannot be read, losing the dirty
    /// blocks only it holds.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct CacheSetArgs {
    #[command(flatten)]
    pub at: CacheOrigin,
    #[arg(long, value_enum)]
    pub mode: Option<CacheMode>,
    #[arg(long, value_parser = size)]
    pub sequential_cutoff: Option<u64>,
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub dirty_target: Option<u8>,
    #[arg(long, value_parser = size)]
    pub clean_rate: Option<u64>,
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub promote_threshold: Option<u32>,
    /// Start a degraded array that was not stopped cleanly.
    #[arg(long)]
    pub force: bool,
}
