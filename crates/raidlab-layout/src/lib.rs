//! raidlab-layout: where Linux md puts every byte, as pure functions.
//!
//! Given a [`Geometry`] (level, layout, chunk, member count, member data size) this
//! crate maps a logical array byte to the member(s) and member offset(s) that hold
//! it, says where parity lives in each stripe and in which order md feeds data blocks
//! to the RAID 6 syndrome, and maps member locations back to logical ones.
//!
//! It must never do I/O, allocate per byte, or depend on anything but raidlab-core.
//! Offsets here are bytes relative to each member's *data area* (after md's
//! data_offset), exactly as md's `raid5_compute_sector` / raid10 `find_phys` compute
//! sectors relative to `rdev->data_offset`.

use raidlab_core::{Error, Result};

/// md's RAID level numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Level {
    Raid0,
    Raid1,
    Raid4,
    Raid5,
    Raid6,
    Raid10,
}

/// RAID 4/5/6 parity placement, with md's numeric layout values
/// (`ALGORITHM_LEFT_ASYMMETRIC` = 0 ... `ALGORITHM_PARITY_N` = 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum ParityLayout {
    LeftAsymmetric = 0,
    RightAsymmetric = 1,
    LeftSymmetric = 2,
    RightSymmetric = 3,
    ParityFirst = 4,
    ParityLast = 5,
}

/// RAID 10 copy arrangement as md encodes it in the layout word:
/// bits 0-7 near copies, bits 8-15 far copies, bit 16 "offset".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Raid10Layout {
    pub near: u32,
    pub far: u32,
    pub offset: bool,
}

/// The layout of an array, per level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Layout {
    /// RAID 0 and RAID 1 (md layout word 0).
    Plain,
    /// RAID 4 (always parity-last in md), 5 and 6.
    Parity(ParityLayout),
    Raid10(Raid10Layout),
}

/// Everything needed to place data: the same facts md reads from the superblock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Geometry {
    pub level: Level,
    pub layout: Layout,
    /// Chunk size in bytes; 0 for RAID 1.
    pub chunk_bytes: u64,
    /// Number of active member slots (md's raid_disks), spares not counted.
    pub raid_disks: usize,
    /// Bytes of each member's data area used by the array (md's component size,
    /// superblock `size`), already rounded down to a whole chunk.
    pub member_bytes: u64,
}

/// A place on one member: role number (0..raid_disks) and byte offset in its data area.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct Location {
    pub member: usize,
    pub offset: u64,
}

/// One stripe of a parity level: which member holds each data chunk, in *logical*
/// order (data[i] holds logical chunk `stripe * data_disks + i`), where P and Q sit,
/// and the RAID 6 syndrome slot md gives each logical data index (Q = sum over i of
/// g^slot[i] * D_i). For RAID 4/5, `q` is None and `slot` is the identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StripeMap {
    pub data: Vec<usize>,
    pub p: usize,
    pub q: Option<usize>,
    pub slot: Vec<usize>,
}

/// What a member location holds, for the inverse mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Content {
    /// Logical array byte offset.
    Data(u64),
    /// Parity P of stripe n.
    P(u64),
    /// Syndrome Q of stripe n.
    Q(u64),
    /// Space md leaves unused (e.g. the tail of a member in RAID 10 far layouts).
    Unused,
}

impl Geometry {
    /// Build and validate a geometry. Refuses (with a message saying what to change)
    /// too few members for the level, a chunk that is not a power of two of at least
    /// 4 KiB (except RAID 1, chunk 0), a layout that does not belong to the level,
    /// RAID 10 copy counts larger than the member count, a member size too small to
    /// hold one chunk per member.
    pub fn new(
        level: Level,
        layout: Layout,
        chunk_bytes: u64,
        raid_disks: usize,
        member_bytes: u64,
    ) -> Result<Geometry> {
        let _ = (level, layout, chunk_bytes, raid_disks, member_bytes);
        Err(Error::invalid("layout math not written yet"))
    }
}
