//! raidlab-devices: volumes backed by real storage (files, block devices) and by
//! memory, plus wrappers that stack on any volume.
//!
//! Must never contain RAID or cache logic; it only moves bytes to and from one
//! device and says clearly which device failed and where.

pub mod fault;
pub mod file;
pub mod memory;
pub mod throttle;

pub use fault::{FaultStats, FaultVolume, PowerCutPolicy, PowerCutReport};
pub use file::{FileVolume, OpenMode};
pub use memory::MemVolume;
pub use throttle::{Clock, Limits, SystemClock, ThrottleStats, ThrottleVolume};
