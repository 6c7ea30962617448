//! The parity family: RAID 4 (parity on the last member), RAID 5 (rotating
//! parity) and RAID 6 (P and Q). Decides only their entries of the rules
//! table; must never hold a plan algorithm.

use super::{BitmapUnit, Family, Plans, Redundancy, Rules};
use raidlab_layout::Level;

/// The facts RAID 4, 5 and 6 share; each entry changes what differs.
const PARITY: Rules = Rules {
    level: Some(Level::Raid5),
    name: "raid5",
    family: Family::Parity,
    plans: Plans::ParityRows,
    redundancy: Redundancy::Parity(1),
    lost: "it tolerates one missing member",
    chunked: true,
    ppl: false,
    journal: true,
    // Ignored, as md does by default.
    trims: false,
    no_trim: "md's default: parity over trimmed blocks could not be trusted",
    resyncs: true,
    no_scrub: "",
    write_hole: true,
    stripe_cache: true,
    balanced_reads: false,
    heals_listed: true,
    bitmap: BitmapUnit::MemberSectors,
    spares: true,
    sized_per_member: false,
};

pub(super) static RAID4: Rules = Rules {
    level: Some(Level::Raid4),
    name: "raid4",
    ..PARITY
};

/// RAID 5: the one level md keeps a partial parity log for.
pub(super) static RAID5: Rules = Rules {
    level: Some(Level::Raid5),
    name: "raid5",
    ppl: true,
    ..PARITY
};

pub(super) static RAID6: Rules = Rules {
    level: Some(Level::Raid6),
    name: "raid6",
    redundancy: Redundancy::Parity(2),
    lost: "it tolerates two missing members",
    ..PARITY
};
