//! raidlab-raid: the array engine.
//!
//! ```text
//!   request ──> planner (pure: geometry + which members are present)
//!                  │  Plan = steps of member I/Os and parity work
//!                  ▼
//!   stripe locks ──> executor ──> member volumes (data areas)
//!                        └──────> parity engine
//! ```
//! Layout math lives in raidlab-layout, parity math in raidlab-parity, md's on-disk
//! formats in raidlab-md; this crate decides and does. It must never place data by
//! any rule other than raidlab-layout's, never compute parity by hand, and never
//! write a byte outside a member's data area except through raidlab-md.

/// `planted!(Name)`: whether the test-only bug `Bug::Name` is planted on
/// this thread (`planted.rs`). Without the `planted-bugs` feature it is the
/// literal `false`, so release builds carry no plant code.
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

pub mod array;
pub mod assemble;
pub mod badblocks;
pub mod balance;
pub mod bitmap_daemon;
pub mod exec;
pub mod grow;
pub mod journal;
pub mod kept_rows;
pub mod level;
pub mod lifecycle;
pub mod live;
pub mod locks;
pub mod long_run;
pub mod manage;
pub mod metadata_plan;
pub mod plan;
pub mod planner;
#[cfg(feature = "planted-bugs")]
pub mod planted;
pub mod ppl;
pub mod reconstruct;
pub mod recovery;
pub mod recovery_plan;
pub mod replay;
pub mod stripe_cache;
pub mod zoned;

pub use array::Array;
pub use plan::{MemberOp, Plan, Step};
