//! The striped family: no redundancy. RAID 0 over members of equal size
//! (striped by the geometry), and the two arrays md places by zones
//! (`zoned.rs`): linear (one member after the other) and RAID 0 over
//! members of different sizes (multi-zone). Decides only their entries of
//! the rules table; must never hold a plan algorithm.

use super::{BitmapUnit, Family, Plans, Redundancy, Rules};
use raidlab_layout::Level;

/// RAID 0: nothing to resync, check, rebuild or replace; a trim goes to the
/// one member holding each byte; md sizes it from each member's data size.
pub(super) static RAID0: Rules = Rules {
    level: Some(Level::Raid0),
    name: "raid0",
    family: Family::Striped,
    // One copy of each chunk: the copies builder with a single copy.
    plans: Plans::Copies,
    redundancy: Redundancy::None,
    lost: "RAID 0 has no redundancy",
    chunked: true,
    ppl: false,
    journal: false,
    trims: true,
    no_trim: "",
    resyncs: false,
    no_scrub: "RAID 0 has no redundancy to check",
    write_hole: false,
    stripe_cache: false,
    balanced_reads: false,
    heals_listed: false,
    bitmap: BitmapUnit::None,
    spares: false,
    sized_per_member: true,
};

/// md's linear: each member's data area after the previous one's, nothing
/// kept twice. md's linear takes no spare and has no sync action; it passes
/// a discard to the member each piece lies on (`ZonedVolume::discard`).
/// Its chunk only rounds each member's size down. It runs as a
/// pass-through over the zoned volume, whose one request goes through the
/// copies builder with its single copy.
pub static LINEAR: Rules = ZONED;

/// The facts both zoned arrays share (linear's); multi-zone RAID 0 changes
/// what differs.
const ZONED: Rules = Rules {
    level: None,
    name: "linear",
    family: Family::Striped,
    plans: Plans::Copies,
    redundancy: Redundancy::None,
    lost: "a linear array keeps each byte on one member only",
    chunked: false,
    ppl: false,
    journal: false,
    trims: true,
    no_trim: "",
    resyncs: false,
    no_scrub: "a linear array keeps each byte on one member only, so there is nothing to \
               compare it with: there is no redundancy to check (md's linear has no check \
               either)",
    write_hole: false,
    stripe_cache: false,
    balanced_reads: false,
    heals_listed: false,
    bitmap: BitmapUnit::None,
    spares: false,
    sized_per_member: true,
};

/// RAID 0 over members of different sizes: md's zones (striped over every
/// member as far as the smallest goes, then over those with room left),
/// otherwise RAID 0's facts, chunk included.
pub static MULTI_ZONE_RAID0: Rules = Rules {
    level: Some(Level::Raid0),
    name: "raid0",
    lost: "RAID 0 has no redundancy",
    chunked: true,
    no_scrub: "RAID 0 has no redundancy to check",
    ..ZONED
};
