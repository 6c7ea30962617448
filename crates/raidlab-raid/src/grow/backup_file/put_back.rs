//! Putting a saved section back: the tail every resume of a metadata 0.90
//! in-place reshape shares (mdadm's `restore_stripes` and the superblock
//! update after it in `Grow_restart`), whether the old bytes were saved in
//! the backup file (`super::restore`, `super::grow`) or on a new member
//! (`super::super::in_place`): each section read from where it was saved,
//! written through the reshape's new geometry and flushed, the position
//! past it committed, and only then the saved copy let go.
//!
//! What it decides: that order, and nothing about which sections are
//! trusted (each caller checks its record first). A crash before the
//! commit finds the copy still naming the same bytes and puts them back
//! again; a crash after it finds the position past them and needs the
//! copy no more.
//!
//! It must never commit a position past bytes not yet flushed in the new
//! geometry, and never let a copy go before that commit is durable.

use crate::assemble::Assembly;
use crate::grow::SECTOR;
use raidlab_core::{Result, Volume};
use raidlab_layout::reshape::Reshape;
use std::ops::Range;

/// A saved section: the array bytes it holds and where they are.
pub(in crate::grow) struct Saved<'a> {
    /// The backup file or the new member holding them, and its name for
    /// errors.
    pub(in crate::grow) from: &'a dyn Volume,
    pub(in crate::grow) name: &'a str,
    /// Their byte offset in `from`.
    pub(in crate::grow) at: u64,
    /// The array bytes they are.
    pub(in crate::grow) array: Range<u64>,
}

impl Assembly {
    /// Put `sections` back in `r`'s new geometry, flushed; then `settle`
    /// (what must be durable before the commit: a record's time brought
    /// level, a backward walk's own record state); then the position `to`
    /// committed; then `let_go` (the saved copy forgotten).
    pub(in crate::grow) fn put_back(
        &mut self,
        r: &Reshape,
        sections: &[Saved<'_>],
        to: u64,
        settle: impl FnOnce(&mut Assembly) -> Result<()>,
        let_go: impl FnOnce(&mut Assembly) -> Result<()>,
    ) -> Result<()> {
        {
            let new = self.reshape_side(r, true, true)?;
            let mut data = Vec::new();
            for s in sections {
                data.clear();
                data.resize((s.array.end - s.array.start) as usize, 0);
                s.from
                    .read_at(&mut data, s.at)
                    .map_err(|e| e.on_device(s.name))?;
                new.write_at(&data, s.array.start)?;
            }
            new.flush()?;
        }
        settle(self)?;
        self.commit(|sb| sb.reshape_position = to / SECTOR)?;
        let_go(self)
    }
}
