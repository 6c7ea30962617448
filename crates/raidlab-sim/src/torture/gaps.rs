//! What `--skip-known-gaps` (the CI sweep) leaves out: only the faults that
//! hit the engine's known open gaps (docs/reliability.md, "Known open
//! gaps"), each named here with the gap it avoids. Member failures, write
//! errors, latent read errors and power cuts (also while a role is missing,
//! taken out, or on a device with a fault injected) are all injected; what
//! is left out is a fault that takes the array beyond its level's
//! tolerance. Sweeps without the flag let a quarter of those through, and
//! CI runs one (`tests/torture.rs`); docs/reliability.md lists the runs of
//! them still open.
//!
//! It decides only whether a fault goes ahead; it never changes what a
//! fault does or what the engine must answer.

use super::run::Rig;
use rand::Rng;

impl Rig {
    /// Whether a fault that the level would not tolerate is left out: always
    /// under `--skip-known-gaps`, otherwise three in four.
    pub(super) fn gap_holds_beyond(&mut self) -> bool {
        self.known_gaps || !self.rng.gen_ratio(1, 4)
    }
}
