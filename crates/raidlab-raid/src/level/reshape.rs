//! The reshape family: an array md stopped (or raidlab stopped) in the
//! middle of a reshape, its stripes in the new geometry on one side of the
//! reshape's position and in the old one on the other. Its running array
//! (`assemble/reshape.rs`) reads each byte through the geometry that holds
//! it and is read-only; the walk that finishes the reshape is `grow`'s.
//! Decides only the family's entry of the rules table and how many
//! failures it tolerates; must never hold a plan algorithm.

use super::{of, BitmapUnit, Family, Plans, Redundancy, Rules};
use raidlab_layout::Geometry;

/// Mid-reshape, each fact with md's reason:
/// - no check, repair or resync: a scrub compares one geometry over stripes
///   half in each. md never runs one then: the reshape holds the array's
///   sync thread (`sync_action` answers busy) and a recorded reshape is
///   resumed first when the array starts; only the walk rewrites stripes
///   (it computes each moved stripe's parity afresh).
/// - no spare into a role: md recovers only once the reshape is done
///   (`manage::spares` says so: `NoSpareTaken::Reshaping`).
/// - failures tolerated: the fewer of the two geometries'
///   ([`failures_tolerated_mid_reshape`]), as every member holds bytes of
///   both.
/// - trims ignored: md's RAID 4/5/6 skip a discard while a reshape is
///   under way (`make_discard_request`).
/// - no PPL, journal, bitmap or stripe cache of its own: the array is
///   read-only until the reshape is finished (each side is a full array
///   that reads degraded from redundancy; nothing is written through it).
///
/// The array runs as a pass-through over the volume that splits each
/// request between the sides, whose one request goes through the copies
/// builder with its single copy.
pub static RESHAPE: Rules = Rules {
    level: None,
    name: "reshape",
    family: Family::Reshape,
    plans: Plans::Copies,
    redundancy: Redundancy::FewerOfTwoGeometries,
    lost: "a part of a reshape cannot be read without the members its geometry needs",
    chunked: false,
    ppl: false,
    journal: false,
    trims: false,
    no_trim: "md skips a discard while a reshape is under way",
    resyncs: false,
    no_scrub: "the array is in the middle of a reshape: its stripes are in the new geometry on \
               one side of the reshape's position and in the old one on the other, and a check, \
               repair or resync compares one geometry over the whole array, so it would count \
               mismatches that are not there and a repair would rewrite parity over good data. \
               md never checks, repairs or resyncs an array mid-reshape (the reshape holds its \
               sync thread, and a recorded reshape resumes first when the array starts): finish \
               the reshape with `raidlab grow --continue` and the same members (or serve the \
               array writable: the reshape resumes in the background), then check",
    write_hole: false,
    stripe_cache: false,
    balanced_reads: false,
    heals_listed: false,
    bitmap: BitmapUnit::None,
    spares: false,
    sized_per_member: false,
};

/// Members an array between `old` and `new` can lose, whichever they are,
/// and still serve every byte: the fewer of the two geometries' (a RAID 5
/// becoming a RAID 6 keeps RAID 5's one until the walk is done).
pub fn failures_tolerated_mid_reshape(old: &Geometry, new: &Geometry) -> usize {
    of(old)
        .failures_tolerated(old)
        .min(of(new).failures_tolerated(new))
}
