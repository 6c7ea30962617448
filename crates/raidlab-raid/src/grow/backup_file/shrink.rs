//! The backup file's protocol for a 0.90 shrink (fewer members), walked
//! backwards (md's direction for `delta_disks < 0`), from the end of the
//! new geometry to its start: window `[a, p)` lands on the member bytes
//! from `a / new data members` on, which in the old geometry hold array
//! bytes from `a * old / new` >= `a` on: the window itself or bytes already
//! restriped and committed, never a byte still to be read. So a cut
//! mid-window leaves the window's old bytes whole, except near the array's
//! start, where the window's new rows reach down into its old ones
//! (mdadm's critical section): only those windows are saved in the file
//! first ([`needs_backup`]).
//!
//! What it decides: which windows are saved (those [`needs_backup`]
//! names), and when: at the start of the window's round, after the
//! position is committed above it, never before. The others are walked
//! with no section naming them: md's `Grow_restart` moves the position
//! down to any section below it and puts the section back in what mdadm
//! 4.2 takes for the shrink's geometry but is the old one (super0's
//! getinfo counts a shrink's raid_disks as the old count), so a section
//! named below the position of a window not fully walked is one md would
//! then read as walked. Inside the critical section md's resume of a cut
//! window is wrong for that reason whatever the file says (its own shrinks
//! too); raidlab's own resume puts the section back in the new geometry.
//!
//! It must never name in the record a window below the recorded position
//! that is not the one being walked, and never write a window that needs
//! a backup before its old bytes and the record are durable in the file.

use super::{Hooks, Walk};
use raidlab_core::Result;
use raidlab_layout::reshape::Reshape;
use std::ops::Range;

/// The first window (the array's last), saved before the start's commit
/// when it needs it.
pub(super) fn first_window(total: u64, wbytes: u64) -> Range<u64> {
    window_below(total, wbytes)..total
}

/// Whether window `w` of `r`'s walk needs its old bytes in the file before
/// it is written in the new geometry: always over the same members (a
/// window's new stripes are its old member bytes); for a shrink only while
/// the window's new member rows reach down into its old ones, which near
/// the array's start they do (mdadm's critical section), and which a cut
/// mid-window would leave neither old nor new. Above that a shrink's new
/// rows lie wholly above the window's old rows and every row still to be
/// read, so a cut leaves the window's old bytes to be read again.
pub(super) fn needs_backup(r: &Reshape, w: &Range<u64>) -> bool {
    if !r.backwards {
        return true;
    }
    let (od, nd) = (r.old.data_disks() as u64, r.new.data_disks() as u64);
    let (oc, nc) = (r.old.chunk_bytes, r.new.chunk_bytes);
    // Member bytes: where the window's new rows begin, where its old rows
    // end (whole chunk rows each way).
    let new_from = w.start / (nd * nc) * nc;
    let old_to = w.end.div_ceil(od * oc) * oc;
    new_from < old_to
}

/// The window below array byte `p` of a backward walk: windows lie at
/// whole multiples of `wbytes` from the array's start, the last one cut at
/// the array's end.
pub(super) fn window_below(p: u64, wbytes: u64) -> u64 {
    (p - 1) / wbytes * wbytes
}

/// Walk from the recorded position down to the array's start.
pub(super) fn walk(w: &mut Walk, h: &mut Hooks<'_>) -> Result<()> {
    let r = w.r;
    while w.p > 0 {
        let this = window_below(w.p, w.wbytes)..w.p;
        // Served: no client reaches the window from its save (or its first
        // write) until the position has passed it.
        w.close(this.clone());
        let cur = match w.section_of(&this) {
            Some(k) => Some(k),
            // A cut leaves its old bytes whole, to be read again: no
            // section names it.
            None if !needs_backup(&r, &this) => None,
            // Saved now, the position committed above it: the section
            // covering the position (the window just walked) stays.
            None => Some(w.claim(this.clone(), true)?),
        };
        w.restripe(&this, cur)?;
        let to = this.start;
        w.committed(h, this, to)?;
        // A section starting at the position is not put back by a resume
        // (mdadm's rule going backwards): the window opens as it is.
        w.open(to);
        w.paced(h, to)?;
    }
    Ok(())
}
