//! raidlab-core: the vocabulary every other raidlab crate speaks.
//!
//! - [`Volume`]: one small trait for anything that stores blocks (a file, a block
//!   device, memory, an array, later a cache or a simulated disk), so that volumes
//!   stack: an array is a volume made of volumes.
//! - [`Layer`]: a volume wrapped around one other, passing through all it does
//!   not change.
//! - [`IoKind`]: what one I/O asks for (read, write, flush, trim, write-zeroes),
//!   the one name the engine's plans, the simulator and trace replay share.
//! - [`Error`]: errors that carry what failed, where (device, offset, length) and why.
//! - `planted`: the switch behind the test-only planted bugs (feature
//!   `planted-bugs`).
//! - [`task`]: requests run as coroutines that suspend where a thread would
//!   block (a member I/O, a stripe lock, a sleep), so that a simulator can
//!   drive the engine in virtual time; and the lock that knows of them.
//! - [`size`]: human sizes (`4K`, `512M`, `2T`) parsed and printed as powers of 1024.
//!
//! This crate must never do I/O of its own and never depend on another raidlab crate.

pub mod clock;
pub mod error;
pub mod io_kind;
pub mod layer;
#[cfg(feature = "planted-bugs")]
pub mod planted;
pub mod size;
pub mod skip;
pub mod task;
pub mod volume;

pub use clock::{Clock, ManualClock, SharedClock, SystemClock};
pub use error::{Error, ErrorKind, Op, Result};
pub use io_kind::IoKind;
pub use layer::Layer;
pub use volume::{
    check_range, check_range_with, MapBytes, Mapped, RawFile, RawObserver, SliceVolume, StoredSink,
    Volume, ZERO_PIECE,
};
