//! Planted bugs in the cache tier: a test-only switch that makes one of its
//! decisions wrong on purpose, so the torture harness (`raidlab-sim`) can
//! prove it finds that kind of bug. Built only with the `planted-bugs`
//! feature, which only `raidlab-sim`'s tests enable; without it the plant
//! point is the literal `false` (the `planted!` macro in `lib.rs`).
//!
//! It decides which bug is on, for which thread (thread-local, as the
//! engine's `raidlab_raid::planted`, whose reasons hold here too). It must
//! never be on unless a test asked for it. It is the cache's own switch,
//! not the engine's, because this crate never depends on the engine.

use std::cell::Cell;

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

thread_local! {
    static ON: Cell<Option<Bug>> = const { Cell::new(None) };
}

/// Whether `bug` is planted on this thread.
pub fn on(bug: Bug) -> bool {
    ON.with(|c| c.get() == Some(bug))
}

/// `bug` planted on this thread until the guard is dropped.
#[must_use = "the bug is planted only while the guard lives"]
pub fn plant(bug: Option<Bug>) -> Planted {
    Planted(ON.with(|c| c.replace(bug)))
}

/// Keeps a bug planted (see [`plant`]).
#[derive(Debug)]
pub struct Planted(Option<Bug>);

impl Drop for Planted {
    fn drop(&mut self) {
        ON.with(|c| c.set(self.0));
    }
}
