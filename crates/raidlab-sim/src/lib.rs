//! raidlab-sim: simulated disks, SSDs and RAID cards in virtual time, under
//! raidlab's own array engine.
//!
//! Every simulated thing is a [`device::Device`]: a model of one disk or SSD, a
//! RAID card in front of disks, or a raidlab array whose member I/O is what the
//! real engine planned, scheduled on simulated members; or raidlab's SSD cache tier
//! ([`cache`]) in front of any of these. A [`workload`] drives any of them.
//! Nothing here reads the wall clock or an unseeded random source, so a run is
//! the same on every machine.

pub mod array;
pub mod bitmap;
pub mod cache;
mod cache_config;
pub mod cache_io;
pub mod config;
pub mod contents;
pub mod controller;
pub mod device;
pub mod faults;
pub mod fixed;
pub mod fs;
pub mod hdd;
pub mod host;
pub mod ideal;
pub mod md_host;
pub mod mixed;
pub mod presets;
pub mod sched;
pub mod scrub;
mod serial;
pub mod ssd;
pub mod stats;
pub mod summary;
pub mod torture;
pub mod workload;
