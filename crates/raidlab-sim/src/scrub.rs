//! A scrub (md's `check`, `repair`) of a simulated array, as a configuration
//! asks for it and as far as it got. The scrub itself is the engine's
//! (`raidlab_raid::recovery::scrub_array`: its steps, stripe locks, pacing,
//! comparisons and rewrites), run live as a task
//! (`crate::array::TaskArray`). A simulated member holds no data (zeros,
//! consistent), except where a configuration's mismatch ranges say copies
//! differ (`crate::contents`).

use crate::device::Ns;

/// Bytes of member area a raidlab scrub reads per step (`RunOptions`'
/// default step).
pub const SCRUB_STEP: u64 = 2 << 20;

/// A scrub of the whole array from the start of the run.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScrubSpec {
    /// Upper bound on member bytes checked per second (`None`: as fast as the
    /// members allow, raidlab's default).
    pub max_rate: Option<u64>,
    /// Bytes of each member's data area already checked (a resumed check).
    pub from: u64,
    /// Rewrite what differs (md's `repair`); else only count it (`check`).
    pub repair: bool,
}

/// How far a simulated scrub got, in bytes of each member's data area.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScrubProgress {
    pub done: u64,
    pub total: u64,
    /// Virtual time it completed, if it has.
    pub finished: Option<Ns>,
    /// md's mismatch count: 512-byte sectors of mismatched pages, as the
    /// engine's scrub reports it when it ends (0 until then).
    pub mismatch_sectors: u64,
    /// Member writes a repair issued (the engine's rewrites) and their bytes.
    pub rewrites: u64,
    pub rewritten_bytes: u64,
}
