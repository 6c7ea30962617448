//! Planted bugs in md's on-disk formats: a test-only switch that makes one
//! of this crate's checks wrong on purpose, so the torture harness
//! (`raidlab-sim`) can prove it finds that kind of bug. Built only with the
//! `planted-bugs` feature, which only `raidlab-sim`'s tests enable; without
//! it the plant point is the literal `false` (the `planted!` macro in
//! `lib.rs`).
//!
//! It decides which of the format checks can be made wrong; the switch
//! (which one is on, for which thread) is `raidlab_core::planted`, shared
//! with the engine's and the cache tier's lists (this crate sits below
//! both). The assembly reads superblocks on its calling thread, where the
//! harness sets the switch.

/// One check of an on-disk format made wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bug {
    /// The metadata 0.90 reader takes a superblock whose checksum fails, so
    /// one torn by a power cut (some of its eight sectors from the commit
    /// being written, the rest from the one before) counts as valid
    /// (`Sb090::parse`; md's `super_90_load` refuses it).
    TornSuperblockTrusted,
}

impl Bug {
    pub const ALL: [Bug; 1] = [Bug::TornSuperblockTrusted];
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
/// takes off any engine or cache bug (one switch, `raidlab_core::planted`).
pub fn plant(bug: Option<Bug>) -> raidlab_core::planted::Planted {
    raidlab_core::planted::plant(bug)
}
