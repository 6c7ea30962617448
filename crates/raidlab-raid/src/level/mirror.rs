//! The mirror family: RAID 1 (every member a whole copy) and RAID 10 (copies
//! of each chunk placed by the near, far or offset layout). Decides only
//! their entries of the rules table; must never hold a plan algorithm.

use super::{BitmapUnit, Family, Plans, Redundancy, Rules};
use raidlab_layout::Level;

/// RAID 1: no chunk; any one member serves everything.
pub(super) static RAID1: Rules = Rules {
    level: Some(Level::Raid1),
    name: "raid1",
    family: Family::Mirror,
    plans: Plans::Copies,
    redundancy: Redundancy::AllButOne,
    lost: "RAID 1 needs at least one member",
    chunked: false,
    ppl: false,
    journal: false,
    trims: true,
    no_trim: "",
    resyncs: true,
    no_scrub: "",
    write_hole: false,
    stripe_cache: false,
    balanced_reads: true,
    heals_listed: false,
    bitmap: BitmapUnit::MemberSectors,
    spares: true,
    sized_per_member: false,
};

/// RAID 10: survives while one copy of every chunk is left; md counts its
/// bitmap in array sectors.
pub(super) static RAID10: Rules = Rules {
    level: Some(Level::Raid10),
    name: "raid10",
    family: Family::Mirror,
    plans: Plans::Copies,
    redundancy: Redundancy::CopyOfEachChunk,
    lost: "RAID 10 needs one copy of every chunk",
    chunked: true,
    ppl: false,
    journal: false,
    trims: true,
    no_trim: "",
    resyncs: true,
    no_scrub: "",
    write_hole: false,
    stripe_cache: false,
    balanced_reads: true,
    heals_listed: false,
    bitmap: BitmapUnit::ArraySectors,
    spares: true,
    sized_per_member: false,
};
