//! Which geometries raidlab accepts, and how much of each member they use.
//!
//! [`Geometry::new`] applies mdadm's create rules (what a user may ask for);
//! [`Geometry::from_md`] applies md's looser run rules to superblock fields
//! (one-member RAID 0/1, the RAID 4 and RAID 0 layout words md ignores). Both
//! end in one check, so that the mapping functions can trust what they are
//! given, and both round the member size down exactly as md does, since that
//! size decides the array's size and where the last stripe ends.
//!
//! It must never let through a geometry whose data md would place elsewhere
//! than this crate's mapping does: such a geometry is refused, with a message
//! saying what to change, rather than guessed at. It never places data.

use super::{level_parity_names, Geometry, Layout, Level, ParityLayout, Raid10Layout, SECTOR};
use crate::raid10::{R10, RAID10_LAYOUT_NAMES};
use raidlab_core::{Error, Result};

/// md's smallest chunk (one page; md refuses chunks below PAGE_SIZE).
const MIN_CHUNK: u64 = 4096;
/// mdadm refuses RAID 6 arrays with more members than this.
const MAX_RAID6_DISKS: usize = 256;
/// md's `RAID0_ALT_MULTIZONE_LAYOUT`.
const RAID0_ALT_MULTIZONE_LAYOUT: u32 = 2;

impl Level {
    /// The fewest members md itself will run: a one-member RAID 0 or RAID 1 (which
    /// `mdadm --force` can create) is accepted when read from a superblock.
    fn md_min_members(self) -> usize {
        match self {
            Level::Raid0 | Level::Raid1 => 1,
            other => other.min_members(),
        }
    }
}

impl Geometry {
    /// Build and validate a geometry. Refuses (with a message saying what to change)
    /// too few members for the level, a chunk that is not a power of two of at least
    /// 4 KiB (except RAID 1, chunk 0), a layout that does not belong to the level,
    /// RAID 10 copy counts larger than the member count, a member size too small to
    /// hold one chunk per member.
    ///
    /// `member_bytes` is rounded down the way md does: to whole sectors for RAID 1,
    /// to whole chunks otherwise, and for RAID 10 further to the per-member size md's
    /// `calc_sectors` derives (which md writes back as the superblock size).
    pub fn new(
        level: Level,
        layout: Layout,
        chunk_bytes: u64,
        raid_disks: usize,
        member_bytes: u64,
    ) -> Result<Geometry> {
        Self::build(
            level,
            layout,
            chunk_bytes,
            raid_disks,
            member_bytes,
            level.min_members(),
        )
    }

    /// Build a geometry from md superblock fields: level, layout word, chunk size in
    /// sectors, raid_disks and the per-member data size in sectors (the superblock
    /// `size` field; for RAID 0, which md sizes from each member, pass the member's
    /// usable data size). Accepts what mdadm writes: RAID 4 layout 0 (md ignores the
    /// RAID 4 layout word), RAID 0 layouts 0/1/2, RAID 1 with any chunk/layout (both
    /// ignored by md), one-member RAID 0/1.
    pub fn from_md(
        level: i32,
        layout: u32,
        chunk_sectors: u32,
        raid_disks: u32,
        member_sectors: u64,
    ) -> Result<Geometry> {
        let level = Level::from_md(level)?;
        let layout = match level {
            Level::Raid0 => {
                if layout > RAID0_ALT_MULTIZONE_LAYOUT {
                    return Err(Error::invalid(format!(
                        "RAID 0 layout {layout} is unknown to md (expected 0, 1 or 2)"
                    )));
                }
                Layout::Plain
            }
            Level::Raid1 => Layout::Plain,
            Level::Raid4 => Layout::Parity(ParityLayout::ParityLast),
            Level::Raid5 | Level::Raid6 => Layout::Parity(ParityLayout::from_md(layout)?),
            Level::Raid10 => Layout::Raid10(Raid10Layout::from_md(layout)?),
        };
        let chunk_bytes = if level == Level::Raid1 {
            0
        } else {
            u64::from(chunk_sectors) * SECTOR
        };
        let member_bytes = member_sectors.checked_mul(SECTOR).ok_or_else(|| {
            Error::invalid(format!(
                "member size of {member_sectors} sectors is too large"
            ))
        })?;
        Self::build(
            level,
            layout,
            chunk_bytes,
            raid_disks as usize,
            member_bytes,
            level.md_min_members(),
        )
    }

    fn build(
        level: Level,
        layout: Layout,
        chunk_bytes: u64,
        raid_disks: usize,
        member_bytes: u64,
        min_members: usize,
    ) -> Result<Geometry> {
        // Layout belongs to level?
        let layout_ok = match (level, layout) {
            (Level::Raid0 | Level::Raid1, Layout::Plain) => true,
            (Level::Raid4, Layout::Parity(p)) => p == ParityLayout::ParityLast,
            (Level::Raid5, Layout::Parity(p)) => !p.raid6_only(),
            (Level::Raid6, Layout::Parity(_)) => true,
            (Level::Raid10, Layout::Raid10(_)) => true,
            _ => false,
        };
        if !layout_ok {
            let valid = match level {
                Level::Raid0 | Level::Raid1 => "Plain",
                Level::Raid4 => "parity-last",
                Level::Raid5 | Level::Raid6 => level_parity_names(level),
                Level::Raid10 => RAID10_LAYOUT_NAMES,
            };
            return Err(Error::invalid(format!(
                "layout {} does not apply to {level}; valid: {valid}",
                layout.name()
            )));
        }
        if raid_disks < min_members {
            return Err(Error::invalid(format!(
                "{level} needs at least {min_members} members, got {raid_disks}"
            )));
        }
        if level == Level::Raid6 && raid_disks > MAX_RAID6_DISKS {
            return Err(Error::invalid(format!(
                "raid6 supports at most {MAX_RAID6_DISKS} members, got {raid_disks}"
            )));
        }
        if level == Level::Raid1 {
            if chunk_bytes != 0 {
                return Err(Error::invalid(format!(
                    "raid1 has no chunk size; pass 0 instead of {chunk_bytes}"
                )));
            }
        } else if chunk_bytes < MIN_CHUNK
            || !chunk_bytes.is_power_of_two()
            || chunk_bytes / SECTOR > u64::from(u32::MAX)
        {
            return Err(Error::invalid(format!(
                "{level} chunk size must be a power of two of at least 4 KiB, got {chunk_bytes} bytes"
            )));
        }
        if let Layout::Raid10(r) = layout {
            if r.near == 0 || r.far == 0 || r.near > 255 || r.far > 255 {
                return Err(Error::invalid(format!(
                    "raid10 near and far copies must be 1..=255, got near={} far={}",
                    r.near, r.far
                )));
            }
            if r.copies() < 2 {
                return Err(Error::invalid(
                    "raid10 needs at least 2 copies of each chunk (e.g. layout n2)",
                ));
            }
            if r.copies() > raid_disks {
                return Err(Error::invalid(format!(
                    "raid10 layout {} keeps {} copies but the array has only {raid_disks} \
                     members; use fewer copies or more members",
                    r.name(),
                    r.copies()
                )));
            }
            if r.offset && r.near > 1 && r.far > 1 && raid_disks % r.near as usize != 0 {
                // md moves a wrapped near copy down by one chunk, which in offset
                // layouts is where another chunk's offset copy lives: md maps two
                // chunks onto one member block. Refuse rather than corrupt.
                return Err(Error::invalid(format!(
                    "raid10 layout {} with {raid_disks} members: combining near and offset \
                     copies needs a member count that is a multiple of the near copies ({})",
                    r.name(),
                    r.near
                )));
            }
        }

        let member_bytes = match (level, layout) {
            (Level::Raid1, _) => member_bytes / SECTOR * SECTOR,
            (Level::Raid10, Layout::Raid10(r)) => {
                R10::new(r, raid_disks, member_bytes / chunk_bytes).dev_chunks * chunk_bytes
            }
            _ => member_bytes / chunk_bytes * chunk_bytes,
        };
        let geometry = Geometry {
            level,
            layout,
            chunk_bytes,
            raid_disks,
            member_bytes,
        };
        let min_member = match level {
            Level::Raid1 => SECTOR,
            _ => chunk_bytes,
        };
        if member_bytes < min_member || geometry.array_bytes() == 0 {
            return Err(Error::invalid(format!(
                "members are too small for {level} with {} chunks: each member needs at \
                 least {} bytes",
                if level == Level::Raid1 {
                    "no".to_string()
                } else {
                    format!("{chunk_bytes}-byte")
                },
                match layout {
                    Layout::Raid10(r) => u64::from(r.far).max(1) * chunk_bytes,
                    _ => min_member,
                }
            )));
        }
        if geometry
            .member_bytes
            .checked_mul(raid_disks as u64)
            .is_none()
        {
            return Err(Error::invalid("array size overflows 64 bits"));
        }
        Ok(geometry)
    }
}
