//! The member reads of the last plain write plan this thread made
//! ([`plan_write`](super::plan_write)), kept so that the stripe cache's
//! question "how many member reads would this write need" costs no second
//! plan when it is asked about a write the write path has just planned (each
//! held write was planned three times: once to count its reads when held,
//! once more when written out, then for the write itself).
//!
//! Decides nothing. It must never answer anything but what a fresh plan would:
//! the count is kept with every input of the plan (geometry, members present,
//! range) and given back only for the same inputs, and `plan_write` is pure,
//! so the same inputs always make the same plan.

use raidlab_layout::Geometry;
use std::cell::RefCell;

struct Last {
    geo: Geometry,
    present: Vec<bool>,
    offset: u64,
    len: u64,
    reads: u64,
}

thread_local! {
    static LAST: RefCell<Option<Last>> = const { RefCell::new(None) };
}

/// Keep `reads`, the member reads of `plan_write(geo, present, offset, len)`.
pub(super) fn remember(geo: &Geometry, present: &[bool], offset: u64, len: u64, reads: u64) {
    // `try_with`: a thread being torn down keeps nothing (and needs nothing).
    let _ = LAST.try_with(|last| {
        let Ok(mut last) = last.try_borrow_mut() else {
            return;
        };
        match last.as_mut() {
            Some(l) => {
                l.geo = *geo;
                l.present.clear();
                l.present.extend_from_slice(present);
                l.offset = offset;
                l.len = len;
                l.reads = reads;
            }
            None => {
                *last = Some(Last {
                    geo: *geo,
                    present: present.to_vec(),
                    offset,
                    len,
                    reads,
                })
            }
        }
    });
}

/// The member reads of `plan_write(geo, present, offset, len)` if it was the
/// last plain write plan this thread made.
pub(super) fn recall(geo: &Geometry, present: &[bool], offset: u64, len: u64) -> Option<u64> {
    LAST.try_with(|last| {
        let last = last.try_borrow().ok()?;
        let l = last.as_ref()?;
        (l.offset == offset && l.len == len && l.geo == *geo && l.present == present)
            .then_some(l.reads)
    })
    .ok()
    .flatten()
}
