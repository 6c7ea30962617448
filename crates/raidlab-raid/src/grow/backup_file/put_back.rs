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
            for (k, s) in sections.iter().enumerate() {
                data.clear();
                data.resize((s.array.end - s.array.start) as usize, 0);
                s.from
                    .read_at(&mut data, s.at)
                    .map_err(|e| e.on_device(s.name))?;
                if k == 0 {
                    hold_half_way(&new, r, &data, s.array.start)?;
                }
                new.write_at(&data, s.array.start)?;
            }
            new.flush()?;
        }
        settle(self)?;
        self.commit(|sb| sb.reshape_position = to / SECTOR)?;
        let_go(self)
    }
}

/// Test-only: with `RAIDLAB_TEST_HOLD_PUT_BACK=<marker path>` in its
/// environment, a put-back writes the first half (whole stripes) of its
/// first section in the new geometry, flushes it, makes that file and
/// waits there (two minutes at most), so that a test can kill the process
/// where a crash leaves the members half reshaped and only the saved copy
/// whole (a served 0.90 grow killed inside its critical section). Nothing
/// outside the process can stop it there otherwise: the put-back is a few
/// writes long. Built only with the `test-hooks` feature.
fn hold_half_way(new: &crate::array::Array, r: &Reshape, data: &[u8], at: u64) -> Result<()> {
    #[cfg(not(feature = "test-hooks"))]
    let marker: Option<std::ffi::OsString> = None;
    #[cfg(feature = "test-hooks")]
    let marker = std::env::var_os("RAIDLAB_TEST_HOLD_PUT_BACK");
    let Some(marker) = marker else {
        return Ok(());
    };
    let unit = r.forward_unit().max(1);
    let half = (data.len() as u64 / 2 / unit * unit) as usize;
    new.write_at(&data[..half], at)?;
    new.flush()?;
    if std::fs::write(&marker, b"held\n").is_ok() {
        std::thread::sleep(std::time::Duration::from_secs(120));
    }
    Ok(())
}
