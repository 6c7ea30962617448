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

mod parity;
mod raid10;
pub mod reshape;
mod validate;
pub mod zones;
pub use parity::ParityLayout;
use parity::{PARITY_LAYOUT_NAMES, RAID6_LAYOUT_NAMES};
use raid10::RAID10_LAYOUT_NAMES;
pub use zones::{ZoneMap, ZonedKind};

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
    /// RAID 0 and RAID 1. md layout word 0 for RAID 1; for RAID 0 raidlab writes 1
    /// (md's "original", mdadm's default) and accepts 0/1/2, which place data
    /// identically when all members are the same size.
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
    /// superblock `size`), already rounded down to a whole chunk (RAID 1: a whole
    /// sector; RAID 10: further to the size md's `calc_sectors` derives, which md
    /// writes back to the superblock).
    pub member_bytes: u64,
}

/// A place on one member: role number (0..raid_disks) and byte offset in its data area.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct Location {
    pub member: usize,
    pub offset: u64,
}

/// One stripe of a parity level: which member holds each data chunk, in *logical*
/// order (`data[i]` holds logical chunk `stripe * data_disks + i`), where P and Q sit,
/// and the RAID 6 syndrome slot md gives each logical data index (Q = sum over i of
/// `g^slot[i] * D_i`). For RAID 4/5, `q` is None and `slot` is the identity.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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

/// Bytes per md sector.
const SECTOR: u64 = 512;
/// md's "original" RAID 0 layout number (`RAID0_ORIG_LAYOUT`), which current mdadm
/// writes by default. With equal-size members (one zone) every RAID 0 layout number
/// maps data identically.
const RAID0_ORIG_LAYOUT: u32 = 1;

const LEVEL_NAMES: &str = "0/raid0/stripe, 1/raid1/mirror, 4/raid4, 5/raid5, 6/raid6, 10/raid10";

impl Level {
    /// All supported levels.
    pub const ALL: [Level; 6] = [
        Level::Raid0,
        Level::Raid1,
        Level::Raid4,
        Level::Raid5,
        Level::Raid6,
        Level::Raid10,
    ];

    /// The level number md stores in the superblock.
    pub fn md_level(self) -> i32 {
        match self {
            Level::Raid0 => 0,
            Level::Raid1 => 1,
            Level::Raid4 => 4,
            Level::Raid5 => 5,
            Level::Raid6 => 6,
            Level::Raid10 => 10,
        }
    }

    /// Decode md's level number.
    pub fn from_md(level: i32) -> Result<Level> {
        Level::ALL
            .into_iter()
            .find(|l| l.md_level() == level)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "md RAID level {level} is not supported (supported levels: 0, 1, 4, 5, 6, 10)"
                ))
            })
    }

    /// Parse a level name as mdadm's `--level` accepts it ("5", "raid5", "mirror", ...).
    pub fn from_name(s: &str) -> Result<Level> {
        let lower = s.trim().to_ascii_lowercase();
        let level = match lower.as_str() {
            "0" | "raid0" | "stripe" => Level::Raid0,
            "1" | "raid1" | "mirror" => Level::Raid1,
            "4" | "raid4" => Level::Raid4,
            "5" | "raid5" => Level::Raid5,
            "6" | "raid6" => Level::Raid6,
            "10" | "raid10" => Level::Raid10,
            _ => {
                return Err(Error::invalid(format!(
                    "unknown RAID level '{s}'; valid levels: {LEVEL_NAMES}"
                )))
            }
        };
        Ok(level)
    }

    /// The name mdadm prints ("raid5").
    pub fn name(self) -> &'static str {
        match self {
            Level::Raid0 => "raid0",
            Level::Raid1 => "raid1",
            Level::Raid4 => "raid4",
            Level::Raid5 => "raid5",
            Level::Raid6 => "raid6",
            Level::Raid10 => "raid10",
        }
    }

    /// The fewest members mdadm creates this level with (without `--force`):
    /// 4 for RAID 6, 2 for everything else.
    pub fn min_members(self) -> usize {
        match self {
            Level::Raid6 => 4,
            _ => 2,
        }
    }

    fn parity_count(self) -> usize {
        match self {
            Level::Raid4 | Level::Raid5 => 1,
            Level::Raid6 => 2,
            _ => 0,
        }
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Layout {
    /// Parse a layout name for `level`; `None` gives mdadm's default (left-symmetric
    /// for RAID 5/6, parity-last for RAID 4, n2 for RAID 10, Plain for RAID 0/1).
    pub fn parse(level: Level, name: Option<&str>) -> Result<Layout> {
        let name = name.map(str::trim);
        let lower = name.map(str::to_ascii_lowercase);
        match level {
            Level::Raid0 | Level::Raid1 => match lower.as_deref() {
                None | Some("none") => Ok(Layout::Plain),
                Some("original" | "alternate" | "1" | "2") if level == Level::Raid0 => {
                    // With equal-size members these all place data identically.
                    Ok(Layout::Plain)
                }
                Some(_) => Err(wrong_layout(
                    level,
                    name.unwrap_or_default(),
                    if level == Level::Raid0 {
                        "none, original, alternate (all equivalent with equal-size members)"
                    } else {
                        "none (RAID 1 has no layout)"
                    },
                )),
            },
            Level::Raid4 => match lower.as_deref() {
                None | Some("parity-last" | "parity-n") => {
                    Ok(Layout::Parity(ParityLayout::ParityLast))
                }
                Some(_) => Err(wrong_layout(
                    level,
                    name.unwrap_or_default(),
                    "parity-last (md's RAID 4 always keeps parity on the last member)",
                )),
            },
            Level::Raid5 | Level::Raid6 => match name {
                None => Ok(Layout::Parity(ParityLayout::LeftSymmetric)),
                Some(n) => match ParityLayout::from_name(n) {
                    Ok(p) if level == Level::Raid6 || !p.raid6_only() => Ok(Layout::Parity(p)),
                    _ => Err(wrong_layout(level, n, level_parity_names(level))),
                },
            },
            Level::Raid10 => match name {
                None => Ok(Layout::Raid10(Raid10Layout {
                    near: 2,
                    far: 1,
                    offset: false,
                })),
                Some(n) => Raid10Layout::from_name(n).map(Layout::Raid10).map_err(|e| {
                    if Raid10Layout::from_name(n).is_err() && ParityLayout::from_name(n).is_ok() {
                        wrong_layout(level, n, RAID10_LAYOUT_NAMES)
                    } else {
                        e
                    }
                }),
            },
        }
    }

    /// The layout's display name: the mdadm name for parity and RAID 10 layouts,
    /// "none" for Plain.
    pub fn name(&self) -> String {
        match self {
            Layout::Plain => "none".to_string(),
            Layout::Parity(p) => p.name().to_string(),
            Layout::Raid10(r) => r.name(),
        }
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// The parity layout names `level` accepts (the "-6" ones only at RAID 6).
fn level_parity_names(level: Level) -> &'static str {
    if level == Level::Raid6 {
        RAID6_LAYOUT_NAMES
    } else {
        PARITY_LAYOUT_NAMES
    }
}

fn wrong_layout(level: Level, name: &str, valid: &str) -> Error {
    let belongs = if ParityLayout::from_name(name).is_ok_and(|p| p.raid6_only()) {
        " (that is a RAID 6 layout: md's RAID 5 to 6 conversion, Q on the last member)"
    } else if ParityLayout::from_name(name).is_ok() {
        " (that is a RAID 4/5/6 layout)"
    } else if Raid10Layout::from_name(name).is_ok() {
        " (that is a RAID 10 layout)"
    } else {
        ""
    };
    Error::invalid(format!(
        "layout '{name}' does not apply to {level}{belongs}; valid {level} layouts: {valid}"
    ))
}

impl Geometry {
    /// The layout word md stores in the superblock: the algorithm for RAID 5/6, 0
    /// for RAID 4 (what md itself sets; md ignores it), the near/far/offset word for
    /// RAID 10, 0 for RAID 1, and 1 (`RAID0_ORIG_LAYOUT`, mdadm's default) for RAID 0.
    pub fn md_layout(&self) -> u32 {
        match (self.level, self.layout) {
            (Level::Raid0, _) => RAID0_ORIG_LAYOUT,
            (Level::Raid4, _) => 0,
            (_, Layout::Plain) => 0,
            (_, Layout::Parity(p)) => p.md_value(),
            (_, Layout::Raid10(r)) => r.md_layout(),
        }
    }

    /// Chunk size in sectors as md stores it (0 for RAID 1).
    pub fn md_chunk_sectors(&self) -> u32 {
        (self.chunk_bytes / SECTOR) as u32
    }

    /// Per-member data size in sectors (md's component size, superblock `size`).
    pub fn md_member_sectors(&self) -> u64 {
        self.member_bytes / SECTOR
    }

    /// The array's size in bytes, exactly as md computes it for these members.
    pub fn array_bytes(&self) -> u64 {
        let n = self.raid_disks as u64;
        match self.level {
            Level::Raid0 => n * self.member_bytes,
            Level::Raid1 => self.member_bytes,
            Level::Raid4 | Level::Raid5 | Level::Raid6 => {
                (n - self.parity_count() as u64) * self.member_bytes
            }
            Level::Raid10 => self.r10().map_or(0, |r| r.array_chunks * self.chunk_bytes),
        }
    }

    /// Members' worth of data per stripe: RAID 0 n, RAID 1 1, RAID 4/5 n-1, RAID 6
    /// n-2, RAID 10 n / copies rounded down (as mdadm's `get_data_disks`; only
    /// meaningful as stripe-width advice when copies divide n).
    pub fn data_disks(&self) -> usize {
        match (self.level, self.layout) {
            (Level::Raid0, _) => self.raid_disks,
            (Level::Raid1, _) => 1,
            (Level::Raid10, Layout::Raid10(r)) => (self.raid_disks / r.copies()).max(1),
            _ => self.raid_disks - self.parity_count(),
        }
    }

    /// RAID 4/5/6.
    pub fn is_parity(&self) -> bool {
        self.parity_count() > 0
    }

    /// Parity blocks per stripe: 0, 1 (RAID 4/5) or 2 (RAID 6).
    pub fn parity_count(&self) -> usize {
        self.level.parity_count()
    }

    /// RAID 0/1/10: `[offset, offset + len)` cut into runs that stay contiguous on
    /// every copy, as `(array offset, length, copies)`: the walk every caller of
    /// [`Geometry::mirror_map`] over a range needs. Stops early (never loops) if the
    /// range runs past the array.
    pub fn mirror_runs(
        &self,
        offset: u64,
        len: u64,
    ) -> impl Iterator<Item = (u64, u64, Vec<Location>)> + '_ {
        let end = offset.saturating_add(len);
        let mut pos = offset;
        std::iter::from_fn(move || {
            if pos >= end {
                return None;
            }
            let (locs, run) = self.mirror_map(pos);
            let n = run.min(end - pos);
            if n == 0 {
                return None;
            }
            let at = pos;
            pos += n;
            Some((at, n, locs))
        })
    }

    /// RAID 0/1/10: the member locations of every copy of logical byte `logical` (in
    /// md's copy order), and how many bytes from `logical` stay contiguous on every
    /// copy (up to the next chunk boundary, or end of array). RAID 1: every member,
    /// offset = logical, run = to end of array. For RAID 4/5/6 this returns the one
    /// data location (run to the chunk boundary). Out of range: empty, 0.
    pub fn mirror_map(&self, logical: u64) -> (Vec<Location>, u64) {
        let size = self.array_bytes();
        debug_assert!(logical < size, "logical {logical} beyond array size {size}");
        if logical >= size {
            return (Vec::new(), 0);
        }
        let cb = self.chunk_bytes;
        match self.level {
            Level::Raid1 => (
                (0..self.raid_disks)
                    .map(|member| Location {
                        member,
                        offset: logical,
                    })
                    .collect(),
                size - logical,
            ),
            Level::Raid0 => {
                let chunk = logical / cb;
                let n = self.raid_disks as u64;
                let within = logical % cb;
                (
                    vec![Location {
                        member: (chunk % n) as usize,
                        offset: chunk / n * cb + within,
                    }],
                    (cb - within).min(size - logical),
                )
            }
            Level::Raid4 | Level::Raid5 | Level::Raid6 => {
                let (loc, run) = self.parity_locate(logical);
                (vec![loc], run)
            }
            Level::Raid10 => match self.r10() {
                Some(r) => self.raid10_map(r, logical),
                None => (Vec::new(), 0),
            },
        }
    }

    /// Inverse: what member `member` holds at `offset` of its data area.
    pub fn content_at(&self, member: usize, offset: u64) -> Content {
        if member >= self.raid_disks || offset >= self.member_bytes {
            return Content::Unused;
        }
        let cb = self.chunk_bytes;
        match self.level {
            Level::Raid1 => Content::Data(offset),
            Level::Raid0 => {
                let n = self.raid_disks as u64;
                Content::Data((offset / cb * n + member as u64) * cb + offset % cb)
            }
            Level::Raid4 | Level::Raid5 | Level::Raid6 => {
                let stripe = offset / cb;
                let map = self.stripe(stripe);
                if member == map.p {
                    return Content::P(stripe);
                }
                if map.q == Some(member) {
                    return Content::Q(stripe);
                }
                match map.data.iter().position(|&d| d == member) {
                    Some(i) => Content::Data(
                        (stripe * self.data_disks() as u64 + i as u64) * cb + offset % cb,
                    ),
                    None => Content::Unused,
                }
            }
            Level::Raid10 => match self.r10() {
                Some(r) => self.raid10_content_at(r, member, offset),
                None => Content::Unused,
            },
        }
    }

    /// Whether the array can serve all data with these member roles missing (raid5:
    /// <=1, raid6: <=2, raid1: < n, raid10: at least one copy of every chunk
    /// survives, computed from the layout; raid0: none). Duplicates are counted once;
    /// roles outside 0..raid_disks are ignored.
    pub fn survives(&self, missing: &[usize]) -> bool {
        let mut gone = vec![false; self.raid_disks];
        for &m in missing {
            debug_assert!(m < self.raid_disks, "member {m} out of range");
            if let Some(g) = gone.get_mut(m) {
                *g = true;
            }
        }
        let count = gone.iter().filter(|&&g| g).count();
        match self.level {
            Level::Raid0 => count == 0,
            Level::Raid1 => count < self.raid_disks,
            Level::Raid4 | Level::Raid5 | Level::Raid6 => count <= self.parity_count(),
            Level::Raid10 => count == 0 || self.raid10_survives(&gone),
        }
    }
}

#[cfg(test)]
mod tests;
