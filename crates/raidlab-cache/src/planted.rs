//! Planted bugs in the cache tier: a test-only switch that makes one of its
//! decisions wrong on purpose, so the torture harness (`raidlab-sim`) can
//! prove it finds that kind of bug. Built only with the `planted-bugs`
//! feature, which only `raidlab-sim`'s tests enable; without it the plant
//! point is the literal `false` (the `planted!` macro in `lib.rs`).
//!
//! It decides which of the cache's decisions can be made wrong; the switch
//! (which one is on, for which thread) is `raidlab_core::planted`, shared
//! with the engine's list, since this crate never depends on the engine.

/// One decision of the cache made wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bug {
    /// The cleaner drops the dirty bit of a batch's last block without
    /// writing that block to the origin (`clean.rs`, `clean_locked`).
    CleanSkipsLastBlock,
}

impl Bug {
    pub const ALL: [Bug; 1] = [Bug::CleanSkipsLastBlock];
}

impl raidlab_core::planted::Bug for Bug {
    fn index(self) -> u8 {
        self as u8
    }
}

/// Whether `bug` is planted on this thread.
pub fn on(bug: Bug) -> bool {
    raidlab_core::planted::on(bug)
}

/// `bug` planted on this thread until the guard is dropped; planting it
/// takes off any engine bug (one switch, `raidlab_core::planted`).
pub fn plant(bug: Option<Bug>) -> raidlab_core::planted::Planted {
    raidlab_core::planted::plant(bug)
}
