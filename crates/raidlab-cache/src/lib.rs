//! raidlab-cache: an SSD cache tier in front of any volume (issue 18).
//!
//! - [`format`]: the cache device's metadata as bytes (superblock copies, the
//!   mapping table), documented in docs/cache-format.md.
//!
//! This crate must never depend on the RAID engine (`raidlab-raid`): a cache
//! sits in front of any [`raidlab_core::Volume`], an array being just one.

pub mod format;
