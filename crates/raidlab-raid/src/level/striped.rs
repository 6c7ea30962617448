//! The striped family: RAID 0, data striped over every member with no
//! redundancy. (Linear and multi-zone RAID 0 are run by `zoned.rs`; see the
//! family module's doc.) Decides only RAID 0's entry of the rules table;
//! must never hold a plan algorithm.

use super::{BitmapUnit, Family, Plans, Redundancy, Rules};
use raidlab_layout::Level;

/// RAID 0: nothing to resync, check, rebuild or replace; a trim goes to the
/// one member holding each byte; md sizes it from each member's data size.
pub(super) static RAID0: Rules = Rules {
    level: Level::Raid0,
    family: Family::Striped,
    // One copy of each chunk: the copies builder with a single copy.
    plans: Plans::Copies,
    redundancy: Redundancy::None,
    lost: "RAID 0 has no redundancy",
    chunked: true,
    ppl: false,
    journal: false,
    trims: true,
    resyncs: false,
    write_hole: false,
    stripe_cache: false,
    balanced_reads: false,
    heals_listed: false,
    bitmap: BitmapUnit::None,
    spares: false,
    sized_per_member: true,
};
