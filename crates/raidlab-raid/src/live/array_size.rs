//! md's `--grow --array-size` of a served array: what the clients may
//! address, cut below what the array holds (the user shrank the file
//! system first) so that a smaller component size or fewer members can
//! follow, or given back whole (`max`, md's "default").
//!
//! What it decides: the size the server exposes from now on, and that no
//! request reaches past it once it is set (the requests under way when it
//! is set finish first; later ones past it fail as a request past the
//! device's end does: `OutOfRange`, NBD's ENOSPC for a write and EINVAL
//! for a read). As md's external size it survives the array being swapped
//! (a grow, a takeover, a reshape's end) and is kept only while the array
//! serves: a stop forgets it, as md forgets it when the array stops.
//!
//! While a reshape walks, the array holds what the smaller of its two
//! geometries holds (md's `raid5_size` then counts the fewer members and
//! both chunks), and `--array-size` is taken as md takes it then
//! (`array_size_store` does not wait for the reshape): checked against
//! that, set at once, and kept through the reshape's end (md's
//! `md_set_array_sectors` leaves an external size alone, so a grow's new
//! space waits for `max`).
//!
//! It must never write to the members (nothing on disk changes), nor let
//! the size exceed what the running array holds (mid-reshape, the smaller
//! geometry).

use super::LiveArray;
use raidlab_core::{Error, ErrorKind, Op, Result};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// No cut: the clients address all the array holds.
const WHOLE: u64 = u64::MAX;

/// What the clients may address of what takes the requests (`Serving`).
pub(super) struct Exposed(AtomicU64);

impl Exposed {
    pub(super) fn new() -> Exposed {
        Exposed(AtomicU64::new(WHOLE))
    }

    /// The cut, when one is set.
    pub(super) fn cut(&self) -> Option<u64> {
        Some(self.0.load(Ordering::Acquire)).filter(|&c| c != WHOLE)
    }

    /// Set (or with `None` drop) the cut. The caller holds the requests
    /// (the route's write side), so none is under way past the new end.
    pub(super) fn set(&self, cut: Option<u64>) {
        self.0.store(cut.unwrap_or(WHOLE), Ordering::Release);
    }

    /// The size the clients see of a volume of `holds` bytes.
    pub(super) fn size(&self, holds: u64) -> u64 {
        holds.min(self.0.load(Ordering::Acquire))
    }

    /// Refuse a request past the cut as a request past the device's end is
    /// refused; one below it goes on to the array's own check.
    pub(super) fn check(
        &self,
        name: impl FnOnce() -> String,
        op: Op,
        offset: u64,
        len: u64,
    ) -> Result<()> {
        match self.cut() {
            None => Ok(()),
            Some(cut) => raidlab_core::volume::check_range_with(
                || format!("{} (array size cut to {cut} bytes by --array-size)", name()),
                op,
                cut,
                offset,
                len,
            ),
        }
    }
}

/// What `--array-size` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArraySizeChange {
    /// What the clients addressed before.
    pub old_exposed_bytes: u64,
    /// What they address from now on.
    pub new_exposed_bytes: u64,
    /// What the array holds (its geometry), all of it with `max`.
    pub holds_bytes: u64,
}

/// md's checks of an array size asked for (`array_size_store`): whole KiB
/// (md counts it so), not zero, and no more than the array holds (E2BIG).
pub(super) fn check_array_size(bytes: u64, holds: u64) -> Result<()> {
    if bytes == 0 || bytes % 1024 != 0 {
        return Err(Error::new(
            ErrorKind::Invalid,
            Op::Plan,
            format!(
                "--array-size {bytes} bytes: md's array size is a whole number of KiB, more than 0 (give e.g. {}K); nothing was changed",
                (bytes / 1024).max(1)
            ),
        ));
    }
    if bytes > holds {
        return Err(Error::new(
            ErrorKind::Refused,
            Op::Plan,
            format!(
                "--array-size {bytes} bytes is larger than the array holds ({holds} bytes, {} KiB): md refuses an array size past what its geometry holds (its array_size_store: E2BIG); give {}K or less, or `max`; nothing was changed",
                holds / 1024,
                holds / 1024
            ),
        ));
    }
    Ok(())
}

impl LiveArray {
    /// What the clients address now (less than the array holds after an
    /// `--array-size`).
    pub fn exposed_bytes(&self) -> u64 {
        self.serving.exposed().size(self.serving.holds())
    }

    /// The `--array-size` cut in force, if one is.
    pub fn array_size_cut(&self) -> Option<u64> {
        self.serving.exposed().cut()
    }

    /// md's `--grow --array-size` of the served array: `Some(bytes)` cuts
    /// what the clients address to `bytes` (whole KiB, no more than the
    /// array holds), `None` (`max`) gives them all it holds; once the
    /// requests under way finish. Nothing is written to the members.
    /// While a reshape walks, what it holds is its smaller geometry's, and
    /// the cut stays after its end (md's external size).
    pub fn set_array_size(self: &Arc<Self>, bytes: Option<u64>) -> Result<ArraySizeChange> {
        self.serving.holding(|holds, exposed| {
            if let Some(b) = bytes {
                check_array_size(b, holds).map_err(|e| {
                    if self.serving.sides().is_none() {
                        return e;
                    }
                    Error::new(
                        e.kind,
                        e.op,
                        format!(
                            "{} (mid-reshape the array holds what the smaller of its two geometries holds, as md counts it then)",
                            e.message
                        ),
                    )
                })?;
            }
            let old = exposed.size(holds);
            // A cut equal to all it holds is still md's external size: a
            // later grow keeps it.
            exposed.set(bytes);
            Ok(ArraySizeChange {
                old_exposed_bytes: old,
                new_exposed_bytes: exposed.size(holds),
                holds_bytes: holds,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_refuses_requests_past_it_and_passes_those_below() {
        let e = Exposed::new();
        assert_eq!(e.size(1 << 20), 1 << 20);
        assert!(e
            .check(|| "a".into(), Op::Write, (1 << 20) - 512, 4096)
            .is_ok());
        e.set(Some(64 << 10));
        assert_eq!(e.size(1 << 20), 64 << 10);
        assert!(e.check(|| "a".into(), Op::Write, 60 << 10, 4096).is_ok());
        let err = e
            .check(|| "a".into(), Op::Write, 61 << 10, 4096)
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::OutOfRange);
        e.set(None);
        assert!(e.check(|| "a".into(), Op::Read, 61 << 10, 4096).is_ok());
    }

    #[test]
    fn md_refuses_sizes_past_what_the_array_holds_or_not_whole_kib() {
        assert!(check_array_size(64 << 10, 64 << 10).is_ok());
        assert_eq!(
            check_array_size((64 << 10) + 1024, 64 << 10)
                .unwrap_err()
                .kind,
            ErrorKind::Refused
        );
        assert_eq!(
            check_array_size(1000, 64 << 10).unwrap_err().kind,
            ErrorKind::Invalid
        );
        assert_eq!(
            check_array_size(0, 64 << 10).unwrap_err().kind,
            ErrorKind::Invalid
        );
    }
}
