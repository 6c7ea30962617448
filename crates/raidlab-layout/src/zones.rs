//! md's layouts over members of different sizes: linear (members concatenated in
//! role order) and multi-zone RAID 0 (striping over every member while all have
//! room, then over the ones that are left), with both ways md has numbered the
//! chunks of the later zones: the "original" layout (the member of a chunk is
//! chosen by its chunk number in the whole array) and the "alternate" one (by its
//! chunk number inside its zone), as the superblock's layout field records them.
//!
//! It decides where each array byte lives and how big the array is, from the
//! sizes md itself uses (each member's data size rounded down to the chunk, or to
//! the linear "rounding"). It must never do I/O, and never guess a layout the
//! superblock does not record when the two layouts would place data differently.

use crate::Location;
use raidlab_core::{Error, Result};

/// md's `RAID0_ORIG_LAYOUT`.
pub const RAID0_ORIGINAL: u32 = 1;
/// md's `RAID0_ALT_MULTIZONE_LAYOUT`.
pub const RAID0_ALTERNATE: u32 = 2;

/// md's level number for linear arrays.
pub const MD_LEVEL_LINEAR: i32 = -1;

const SECTOR: u64 = 512;
const MIN_CHUNK: u64 = 4096;

/// Which concatenating layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum ZonedKind {
    /// md's linear: member after member, in role order. `rounding_bytes` is the
    /// superblock's chunk size, to which md rounds each member down (0: none).
    Linear { rounding_bytes: u64 },
    /// RAID 0 over members of any size. `alternate` is md's layout 2; false is
    /// layout 1 (the two agree when the second zone, if any, has one member).
    Raid0 { chunk_bytes: u64, alternate: bool },
}

/// A stretch of the array striped (RAID 0) or laid (linear, one member) over the
/// same members, each from `dev_start` on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Zone {
    /// First array byte of the zone.
    pub start: u64,
    /// Bytes of array data in the zone.
    pub len: u64,
    /// Where the zone begins in each of its members' data areas.
    pub dev_start: u64,
    /// The members (roles) the zone uses, in role order.
    pub members: Vec<usize>,
}

/// A piece of a request that lies on one member, contiguously.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// Offset of the piece in the request (0 for the first piece).
    pub at: u64,
    pub location: Location,
    pub len: u64,
}

/// Where every byte of a linear or multi-zone RAID 0 array lives.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ZoneMap {
    pub kind: ZonedKind,
    /// Bytes of each member's data area the array uses (rounded as md rounds).
    pub member_bytes: Vec<u64>,
    pub zones: Vec<Zone>,
}

impl ZoneMap {
    /// The map of an md array from its superblock fields: `level` -1 (linear) or 0,
    /// the layout word, the chunk size in sectors, and each role's data size in
    /// sectors (md's rdev->sectors: the v1 superblock's data_size).
    pub fn from_md(
        level: i32,
        layout: u32,
        chunk_sectors: u32,
        member_sectors: &[u64],
    ) -> Result<ZoneMap> {
        let bytes: Vec<u64> = member_sectors
            .iter()
            .map(|s| s.saturating_mul(SECTOR))
            .collect();
        let chunk = u64::from(chunk_sectors) * SECTOR;
        match level {
            MD_LEVEL_LINEAR => ZoneMap::linear(&bytes, chunk),
            0 => ZoneMap::raid0(&bytes, chunk, layout),
            other => Err(Error::invalid(format!(
                "md level {other} is neither linear (-1) nor RAID 0: it has no zones"
            ))),
        }
    }

    /// A linear array over members of `member_bytes` (in role order), each
    /// rounded down to `rounding_bytes` when that is not 0.
    pub fn linear(member_bytes: &[u64], rounding_bytes: u64) -> Result<ZoneMap> {
        if member_bytes.is_empty() {
            return Err(Error::invalid("a linear array needs at least one member"));
        }
        if rounding_bytes != 0 && rounding_bytes % SECTOR != 0 {
            return Err(Error::invalid(format!(
                "linear rounding of {rounding_bytes} bytes is not a whole number of 512-byte sectors"
            )));
        }
        let unit = if rounding_bytes == 0 {
            SECTOR
        } else {
            rounding_bytes
        };
        let mut zones = Vec::with_capacity(member_bytes.len());
        let mut used = Vec::with_capacity(member_bytes.len());
        let mut start = 0u64;
        for (role, &b) in member_bytes.iter().enumerate() {
            let len = b / unit * unit;
            if len == 0 {
                return Err(Error::invalid(format!(
                    "linear member {role} holds no data ({b} bytes, rounding {unit}): \
                     it is too small to be part of the array"
                )));
            }
            used.push(len);
            zones.push(Zone {
                start,
                len,
                dev_start: 0,
                members: vec![role],
            });
            start = start.checked_add(len).ok_or_else(too_big)?;
        }
        Ok(ZoneMap {
            kind: ZonedKind::Linear { rounding_bytes },
            member_bytes: used,
            zones,
        })
    }

    /// A RAID 0 array over members of `member_bytes` (in role order, any sizes),
    /// `chunk_bytes` a power of two of at least 4 KiB, md layout word `md_layout`
    /// (1 original, 2 alternate; 0 "not recorded" is accepted only where the
    /// layouts agree: one zone, or a second zone of one member, as md does).
    pub fn raid0(member_bytes: &[u64], chunk_bytes: u64, md_layout: u32) -> Result<ZoneMap> {
        if member_bytes.is_empty() {
            return Err(Error::invalid("a RAID 0 array needs at least one member"));
        }
        if chunk_bytes < MIN_CHUNK || !chunk_bytes.is_power_of_two() {
            return Err(Error::invalid(format!(
                "RAID 0 chunk of {chunk_bytes} bytes: md needs a power of two of at least 4 KiB"
            )));
        }
        let used: Vec<u64> = member_bytes
            .iter()
            .map(|b| b / chunk_bytes * chunk_bytes)
            .collect();
        if let Some(role) = used.iter().position(|&b| b == 0) {
            return Err(Error::invalid(format!(
                "RAID 0 member {role} is smaller than one chunk ({} bytes, chunk {chunk_bytes}): \
                 it holds no data",
                member_bytes[role]
            )));
        }
        let mut zones = Vec::new();
        let mut dev_start = 0u64;
        let mut start = 0u64;
        loop {
            let members: Vec<usize> = (0..used.len()).filter(|&r| used[r] > dev_start).collect();
            let Some(smallest) = members.iter().map(|&r| used[r]).min() else {
                break;
            };
            let per_member = smallest - dev_start;
            let len = per_member
                .checked_mul(members.len() as u64)
                .ok_or_else(too_big)?;
            zones.push(Zone {
                start,
                len,
                dev_start,
                members,
            });
            start = start.checked_add(len).ok_or_else(too_big)?;
            dev_start = smallest;
        }
        // md: the layouts differ only when a later zone stripes over 2+ members.
        let layouts_agree = zones.len() == 1 || zones[1].members.len() == 1;
        let alternate = match md_layout {
            _ if layouts_agree => false,
            RAID0_ORIGINAL => false,
            RAID0_ALTERNATE => true,
            0 => {
                return Err(Error::invalid(
                    "this RAID 0 array has members of different sizes (several zones) but its \
                     superblock records no layout (layout 0, written by mdadm/Linux before 5.4), \
                     and the two layouts md has used place the later zones differently; Linux \
                     refuses it too until raid0.default_layout is set. Set the layout in the \
                     superblock the way mdadm --update=layout-original (or layout-alternate) does \
                     once you know which kernel wrote the array",
                ))
            }
            other => {
                return Err(Error::invalid(format!(
                    "RAID 0 layout {other} is unknown (md knows 1 original and 2 alternate)"
                )))
            }
        };
        Ok(ZoneMap {
            kind: ZonedKind::Raid0 {
                chunk_bytes,
                alternate,
            },
            member_bytes: used,
            zones,
        })
    }

    /// Bytes of array data.
    pub fn array_bytes(&self) -> u64 {
        self.zones.last().map_or(0, |z| z.start + z.len)
    }

    /// Whether the array has more than one zone (its members differ in size).
    pub fn is_multi_zone(&self) -> bool {
        matches!(self.kind, ZonedKind::Raid0 { .. }) && self.zones.len() > 1
    }

    fn zone_of(&self, offset: u64) -> &Zone {
        let i = self.zones.partition_point(|z| z.start + z.len <= offset);
        &self.zones[i.min(self.zones.len() - 1)]
    }

    /// Where array byte `offset` lives, and how many bytes from there on lie on
    /// the same member contiguously (to the end of the chunk or the member).
    /// `offset` must be below [`ZoneMap::array_bytes`].
    pub fn locate(&self, offset: u64) -> Result<(Location, u64)> {
        if offset >= self.array_bytes() {
            return Err(Error::invalid(format!(
                "array byte {offset} is past the end of the array ({} bytes)",
                self.array_bytes()
            )));
        }
        let zone = self.zone_of(offset);
        let in_zone = offset - zone.start;
        Ok(match self.kind {
            ZonedKind::Linear { .. } => (
                Location {
                    member: zone.members[0],
                    offset: zone.dev_start + in_zone,
                },
                zone.len - in_zone,
            ),
            ZonedKind::Raid0 {
                chunk_bytes,
                alternate,
            } => {
                let nb = zone.members.len() as u64;
                let in_chunk = in_zone % chunk_bytes;
                let chooser = if alternate { in_zone } else { offset } / chunk_bytes;
                let row = in_zone / (chunk_bytes * nb);
                (
                    Location {
                        member: zone.members[(chooser % nb) as usize],
                        offset: zone.dev_start + row * chunk_bytes + in_chunk,
                    },
                    chunk_bytes - in_chunk,
                )
            }
        })
    }

    /// The pieces of the request `[offset, offset + len)`, in order, each on one
    /// member and contiguous there.
    pub fn extents(&self, offset: u64, len: u64) -> Result<Vec<Extent>> {
        let end = offset.checked_add(len).filter(|&e| e <= self.array_bytes());
        if end.is_none() {
            return Err(Error::invalid(format!(
                "request of {len} bytes at {offset} goes past the end of the array ({} bytes)",
                self.array_bytes()
            )));
        }
        let mut out = Vec::new();
        let mut at = 0;
        while at < len {
            let (location, run) = self.locate(offset + at)?;
            let piece = run.min(len - at);
            out.push(Extent {
                at,
                location,
                len: piece,
            });
            at += piece;
        }
        Ok(out)
    }

    /// The array byte a member byte holds, or None for bytes the array does not
    /// use (past the rounded member size).
    pub fn to_array(&self, loc: Location) -> Option<u64> {
        let zone = self.zones.iter().find(|z| {
            let per = z.len / z.members.len() as u64;
            z.members.contains(&loc.member)
                && loc.offset >= z.dev_start
                && loc.offset < z.dev_start + per
        })?;
        let idx = zone.members.iter().position(|&m| m == loc.member)? as u64;
        let in_dev = loc.offset - zone.dev_start;
        match self.kind {
            ZonedKind::Linear { .. } => Some(zone.start + in_dev),
            ZonedKind::Raid0 {
                chunk_bytes,
                alternate,
            } => {
                let nb = zone.members.len() as u64;
                let (row, in_chunk) = (in_dev / chunk_bytes, in_dev % chunk_bytes);
                let first = if alternate {
                    0
                } else {
                    (zone.start / chunk_bytes) % nb
                };
                let k = row * nb + (idx + nb - first) % nb;
                Some(zone.start + k * chunk_bytes + in_chunk)
            }
        }
    }
}

fn too_big() -> Error {
    Error::invalid("the members' sizes add up to more than 2^64 bytes")
}

#[cfg(test)]
#[path = "zones_tests.rs"]
mod tests;
