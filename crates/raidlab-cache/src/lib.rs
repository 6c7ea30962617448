//! raidlab-cache: an SSD cache tier in front of any volume.
//!
//! - [`format`](mod@format): the cache device's metadata as bytes (superblock copies, the
//!   mapping table), documented in docs/cache-format.md.
//! - [`policy`]: which blocks to keep (2Q replacement, promotion threshold,
//!   sequential bypass).
//! - [`volume`]: [`CachedVolume`], the volume over a cache device and an
//!   origin: where each request goes in each mode.
//! - [`commit`]: the commit protocol that makes it crash-safe (create, open,
//!   stop, detach, and the order of metadata against data).
//! - [`failure`]: the cache device's failed state: which errors fail it, and
//!   what a failed cache serves from where.
//! - [`clean`]: writing dirty blocks back, in order, at a set pace.
//! - [`stats`]: the counters.
//! - [`driver`]: the cleaner's loop, and an optional thread that runs it in
//!   real time.
//! - [`stack`]: a cache as its owners run it on real devices: opened, cleaned
//!   in the background, stopped in order.
//! - [`identity`]: how a file or device origin is told from another.
//! - [`zeroes`]: write-zeroes, passed to the origin, never cached as zeros.
//!
//! This crate must never depend on the RAID engine (`raidlab-raid`): a cache
//! sits in front of any [`raidlab_core::Volume`], an array being just one. It
//! never reads the wall clock and starts no thread of its own (only the
//! optional [`driver`] does, when its owner asks), so that the same code runs in
//! a simulator's virtual time.

/// `planted!(Name)`: whether the test-only bug `planted::Bug::Name` is on for
/// this thread; the literal `false` without the `planted-bugs` feature.
#[cfg(feature = "planted-bugs")]
macro_rules! planted {
    ($bug:ident) => {
        $crate::planted::on($crate::planted::Bug::$bug)
    };
}
#[cfg(not(feature = "planted-bugs"))]
macro_rules! planted {
    ($bug:ident) => {
        false
    };
}

pub mod clean;
pub mod commit;
pub mod driver;
pub mod failure;
pub mod format;
pub mod identity;
#[cfg(feature = "planted-bugs")]
pub mod planted;
pub mod policy;
pub mod stack;
pub mod stats;
pub mod volume;
pub mod zeroes;

pub use commit::{attach, create, examine, examine_table, reset_counters, TableSummary};
pub use driver::BackgroundCleaner;
pub use format::{Mode, OriginId, Policy, Superblock};
pub use identity::path_identity;
pub use stack::{CacheStack, OwnerCleaner, RunBy, StackOptions, StackStop};
pub use stats::Stats;
pub use volume::{CachedVolume, Config};
