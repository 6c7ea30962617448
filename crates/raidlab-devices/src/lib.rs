//! raidlab-devices: volumes backed by real storage (files, block devices) and by
//! memory, plus wrappers that stack on any volume.
//!
//! Must never contain RAID or cache logic; it only moves bytes to and from one
//! device and says clearly which device failed and where. The one format it
//! reads is a disk image's partition table ([`partition`]), to open a partition
//! (`disk.img@3`) as a window over the image.

pub mod direct;
pub mod fault;
pub mod file;
pub mod lock;
pub mod memory;
pub mod partition;
pub mod recorded;
pub mod sector_mask;
pub mod size_only;
pub mod sparse;
pub mod throttle;
pub mod uring;

pub use direct::IoMode;
pub use fault::{FaultStats, FaultVolume, Misdirected, PowerCutPolicy, PowerCutReport, Tripwire};
pub use file::{FileVolume, OpenMode};
pub use memory::MemVolume;
pub use partition::{MemberOpener, MemberPath, Partition, PartitionTable, Scheme};
pub use recorded::{Access, Accessed, Recorded};
pub use sector_mask::SectorMask;
pub use size_only::SizeOnly;
pub use sparse::SparseMemVolume;
pub use throttle::{Clock, Limits, SharedClock, SystemClock, ThrottleStats, ThrottleVolume};
