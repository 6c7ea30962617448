//! The backup file's protocol for a 0.90 restripe over the same members (a
//! new chunk or layout), walked forwards. A window that is a whole number
//! of old and new stripes occupies the same member bytes in both
//! geometries, so restriping it touches nothing outside it, but its new
//! stripes are its own old bytes: every window is in the file before any
//! of it is written.
//!
//! What it decides: the order of one window's work, so that at every
//! instant the record holds a section covering the position the
//! superblocks record (what `Grow_restart` needs for a reshape that gains
//! no data members): restripe the window whose old bytes a section holds,
//! let the other section go, save the next window's old bytes in it, and
//! only then commit the position past the window; then let the window's
//! own section go, and only then (served) open it to clients, the next
//! window staying closed from before its save until the position passes
//! it.
//!
//! It must never write a window before its old bytes and the record naming
//! them are durable in the file, and never let go of the section covering
//! the recorded position.

use super::{Hooks, Walk};
use raidlab_core::Result;
use std::ops::Range;

/// The first window, saved before the start's commit.
pub(super) fn first_window(total: u64, wbytes: u64) -> Range<u64> {
    0..wbytes.min(total)
}

/// Walk from the recorded position to the array's end.
pub(super) fn walk(w: &mut Walk, h: &mut Hooks<'_>) -> Result<()> {
    let (wbytes, total) = (w.wbytes, w.total);
    let window = |p: u64| p..(p + wbytes).min(total);
    while w.p < w.total {
        let this = window(w.p);
        // Served: closed already (at the start, or as the next window
        // before its save); closing again waits for nothing.
        w.close(this.clone());
        let cur = match w.section_of(&this) {
            Some(k) => k,
            // After a resume: the put-back sections lie below the position.
            None => w.claim(this.clone(), false)?,
        };
        w.restripe(&this, Some(cur))?;
        let to = this.end;
        if to < w.total {
            // The next window is saved before the position passes this
            // one: its new stripes are its old bytes, and a section must
            // cover the position the superblocks will record. Served, it
            // is closed to clients first: a write after its save would
            // leave the file's copy stale for a resume to put back.
            let next = window(to);
            w.close(this.start..next.end);
            super::save(&w.file, &mut w.bsb, 1 - cur, &w.old, next, w.window)?;
        }
        w.committed(h, this.clone(), to)?;
        if to < w.total {
            // Past the position, the window's own section would be put
            // back by a resume (mdadm restores a section ending at the
            // position) over what clients write there from now on: let go
            // before the window opens.
            w.let_go(&this)?;
        }
        w.open(to);
        w.paced(h, to)?;
    }
    Ok(())
}
