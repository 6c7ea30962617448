//! The md version-1 superblock, at any of its three places (mdadm's metadata
//! 1.0, 1.1 and 1.2, see [`MetadataVersion`]): one format, found at the end of
//! the member (1.0: sector `(size - 16) & !7`, data from sector 0), at its start
//! (1.1) or 4 KiB from its start (1.2). `super_offset` records where it is, and
//! [`Superblock::write_to`] writes it back there.
//!
//! On disk (all integers little-endian), at the superblock's place:
//!
//! | offset | field | | offset | field |
//! |---|---|---|---|---|
//! | 0 | magic u32 = 0xa92b4efc | | 128 | data_offset u64 (sectors) |
//! | 4 | major_version u32 = 1 | | 136 | data_size u64 (sectors) |
//! | 8 | feature_map u32 | | 144 | super_offset u64 (sectors, 8 for v1.2) |
//! | 12 | pad0 u32 (zero) | | 152 | recovery_offset / journal_tail u64 |
//! | 16 | set_uuid \[16\] | | 160 | dev_number u32 |
//! | 32 | set_name \[32\] NUL-padded | | 164 | cnt_corrected_read u32 |
//! | 64 | ctime u64 (low 40 bits: seconds) | | 168 | device_uuid \[16\] |
//! | 72 | level i32 | | 184 | devflags u8 |
//! | 76 | layout u32 | | 185 | bblog_shift u8 |
//! | 80 | size u64 (sectors used per member) | | 186 | bblog_size u16 (sectors) |
//! | 88 | chunksize u32 (sectors) | | 188 | bblog_offset i32 (sectors from sb) |
//! | 92 | raid_disks u32 | | 192 | utime u64 |
//! | 96 | bitmap_offset i32 / ppl {offset i16, size u16} | | 200 | events u64 |
//! | 100 | new_level i32 | | 208 | resync_offset u64 |
//! | 104 | reshape_position u64 | | 216 | sb_csum u32 |
//! | 112 | delta_disks i32 | | 220 | max_dev u32 |
//! | 116 | new_layout u32 | | 224 | pad3 \[32\] (zero) |
//! | 120 | new_chunk u32 | | 256 | dev_roles \[max_dev\] u16 |
//! | 124 | new_offset i32 | | | |
//!
//! The checksum ([`Superblock::checksum`]) covers the first `256 + 2 * max_dev`
//! bytes with the `sb_csum` field taken as zero: the sum of all little-endian 32-bit
//! words (plus a trailing 16-bit word when `max_dev` is odd) in 64 bits, folded to 32
//! bits by adding the high half to the low half once.

use crate::le::{put, rd, u16_at, u32_at, u64_at};
use raidlab_core::{Error, ErrorKind, Op, Volume};
use serde::Serialize;

pub(crate) mod examine;
pub use examine::{format_uuid, layout_name};

// The bytes (codec), the checks on them (validate), a new member's (create).
mod codec;
mod create;
mod validate;

pub use create::{
    default_data_offset, default_member_sectors, default_member_sectors_for, mdadm_data_offset,
    mdadm_data_offset_for, new_member, new_member_at, NewArray,
};

/// Byte offset of the v1.2 superblock on a member: 8 sectors from the start.
pub const SB_OFFSET: u64 = 4096;
/// `super_offset` (in sectors) every v1.2 superblock records.
pub const SB_OFFSET_SECTORS: u64 = SB_OFFSET / 512;
/// Size of the superblock area md reserves (and raidlab reads and writes).
pub const SB_AREA: usize = 4096;
/// Size of the fixed header before `dev_roles`.
pub const HEADER_LEN: usize = 256;
/// `magic`.
pub const MD_SB_MAGIC: u32 = 0xa92b_4efc;
/// Most `dev_roles` entries that fit in 4 KiB: (4096 - 256) / 2.
pub const MAX_DEV_LIMIT: u32 = ((SB_AREA - HEADER_LEN) / 2) as u32;
/// `resync_offset` / `recovery_offset` meaning "complete" (md's MaxSector).
pub const MAX_SECTOR: u64 = u64::MAX;

/// Where on a member a v1 superblock lives: mdadm's `--metadata` 1.0, 1.1, 1.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum MetadataVersion {
    /// At the end: sector `(device_sectors - 16) & !7` (4 KiB aligned, 8 to 12
    /// KiB from the end); the data starts at sector 0, so a RAID 1 member reads
    /// as a plain file system.
    #[serde(rename = "1.0")]
    V1_0,
    /// At sector 0.
    #[serde(rename = "1.1")]
    V1_1,
    /// 4 KiB (8 sectors) from the start: mdadm's default.
    #[serde(rename = "1.2")]
    V1_2,
    /// The old 0.90 format (its own layout, [`crate::sb090`]) at sector
    /// `(device_sectors & !127) - 128`.
    #[serde(rename = "0.90")]
    V0_90,
}

impl MetadataVersion {
    /// All three, in mdadm's probing order.
    pub const ALL: [MetadataVersion; 3] = [
        MetadataVersion::V1_0,
        MetadataVersion::V1_1,
        MetadataVersion::V1_2,
    ];

    /// `1.0`, `1.1`, `1.2`.
    pub fn name(self) -> &'static str {
        match self {
            MetadataVersion::V1_0 => "1.0",
            MetadataVersion::V1_1 => "1.1",
            MetadataVersion::V1_2 => "1.2",
            MetadataVersion::V0_90 => "0.90",
        }
    }

    /// From mdadm's spellings: `0.90`, `0`, `1.0`, `1`, `1.1`, `1.2`, `default`.
    pub fn parse(s: &str) -> Option<MetadataVersion> {
        Some(match s {
            "0.90" | "0.9" | "0" | "00.90" => MetadataVersion::V0_90,
            "1.0" | "1" | "1.00" => MetadataVersion::V1_0,
            "1.1" | "1.01" => MetadataVersion::V1_1,
            "1.2" | "1.02" | "default" => MetadataVersion::V1_2,
            _ => return None,
        })
    }

    /// The sector of the superblock on a device of `device_sectors`; `None`
    /// below mdadm's minimum of 24 sectors.
    pub fn super_offset(self, device_sectors: u64) -> Option<u64> {
        if device_sectors < 24 {
            return None;
        }
        Some(match self {
            MetadataVersion::V1_0 => (device_sectors - 16) & !7,
            MetadataVersion::V1_1 => 0,
            MetadataVersion::V1_2 => SB_OFFSET_SECTORS,
            MetadataVersion::V0_90 => return crate::sb090::super_offset(device_sectors),
        })
    }

    /// Which v1 version a superblock's own `super_offset` says it is.
    pub fn of_super_offset(super_offset: u64) -> MetadataVersion {
        match super_offset {
            0 => MetadataVersion::V1_1,
            SB_OFFSET_SECTORS => MetadataVersion::V1_2,
            _ => MetadataVersion::V1_0,
        }
    }
}

impl std::fmt::Display for MetadataVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `dev_roles` value: a spare (not in any slot).
pub const ROLE_SPARE: u16 = 0xffff;
/// `dev_roles` value: failed.
pub const ROLE_FAULTY: u16 = 0xfffe;
/// `dev_roles` value: the raid4/5/6 write journal.
pub const ROLE_JOURNAL: u16 = 0xfffd;

/// `feature_map` bits (md_p.h).
pub mod feature {
    pub const BITMAP_OFFSET: u32 = 1;
    pub const RECOVERY_OFFSET: u32 = 2;
    pub const RESHAPE_ACTIVE: u32 = 4;
    pub const BAD_BLOCKS: u32 = 8;
    pub const REPLACEMENT: u32 = 16;
    pub const RESHAPE_BACKWARDS: u32 = 32;
    pub const NEW_OFFSET: u32 = 64;
    pub const RECOVERY_BITMAP: u32 = 128;
    pub const CLUSTERED: u32 = 256;
    pub const JOURNAL: u32 = 512;
    pub const PPL: u32 = 1024;
    pub const MULTIPLE_PPLS: u32 = 2048;
    pub const RAID0_LAYOUT: u32 = 4096;
    /// Every bit this crate (and current md) knows; others are refused on read.
    pub const ALL: u32 = 0x1fff;
}

/// `devflags` bits.
pub mod devflag {
    pub const WRITE_MOSTLY: u8 = 1;
    pub const FAIL_FAST: u8 = 2;
}

/// Byte offsets of every field in `struct mdp_superblock_1`.
pub mod off {
    pub const MAGIC: usize = 0;
    pub const MAJOR_VERSION: usize = 4;
    pub const FEATURE_MAP: usize = 8;
    pub const PAD0: usize = 12;
    pub const SET_UUID: usize = 16;
    pub const SET_NAME: usize = 32;
    pub const CTIME: usize = 64;
    pub const LEVEL: usize = 72;
    pub const LAYOUT: usize = 76;
    pub const SIZE: usize = 80;
    pub const CHUNKSIZE: usize = 88;
    pub const RAID_DISKS: usize = 92;
    pub const BITMAP_OFFSET: usize = 96;
    pub const NEW_LEVEL: usize = 100;
    pub const RESHAPE_POSITION: usize = 104;
    pub const DELTA_DISKS: usize = 112;
    pub const NEW_LAYOUT: usize = 116;
    pub const NEW_CHUNK: usize = 120;
    pub const NEW_OFFSET: usize = 124;
    pub const DATA_OFFSET: usize = 128;
    pub const DATA_SIZE: usize = 136;
    pub const SUPER_OFFSET: usize = 144;
    pub const RECOVERY_OFFSET: usize = 152;
    pub const DEV_NUMBER: usize = 160;
    pub const CNT_CORRECTED_READ: usize = 164;
    pub const DEVICE_UUID: usize = 168;
    pub const DEVFLAGS: usize = 184;
    pub const BBLOG_SHIFT: usize = 185;
    pub const BBLOG_SIZE: usize = 186;
    pub const BBLOG_OFFSET: usize = 188;
    pub const UTIME: usize = 192;
    pub const EVENTS: usize = 200;
    pub const RESYNC_OFFSET: usize = 208;
    pub const SB_CSUM: usize = 216;
    pub const MAX_DEV: usize = 220;
    pub const PAD3: usize = 224;
    pub const DEV_ROLES: usize = 256;
}

/// One member's md v1.2 superblock, field for field (md's names), decoded.
///
/// Not stored: `magic`, `major_version` (always 0xa92b4efc and 1), `pad0`/`pad3`
/// (always zero: [`Superblock::parse`] refuses anything else) and `sb_csum`
/// (recomputed by [`Superblock::to_bytes`]; [`Superblock::parse`] verifies it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Superblock {
    pub feature_map: u32,
    pub set_uuid: [u8; 16],
    /// Up to 32 bytes, NUL-padded on disk. Non-UTF-8 bytes are replaced (lossy).
    pub set_name: String,
    /// Creation time: low 40 bits seconds since the epoch, high 24 bits microseconds.
    pub ctime: u64,
    pub level: i32,
    pub layout: u32,
    /// Sectors of each member used by the array.
    pub size: u64,
    /// Chunk size in sectors.
    pub chunksize: u32,
    pub raid_disks: u32,
    /// Sectors from the superblock to the bitmap (signed); when a PPL feature bit is
    /// set the same 4 bytes hold `ppl.offset` (i16) and `ppl.size` (u16): see
    /// [`Superblock::ppl_offset`] and [`Superblock::ppl_size`].
    pub bitmap_offset: i32,
    /// Reshape fields, kept raw; meaningful only with `feature::RESHAPE_ACTIVE`.
    pub new_level: i32,
    pub reshape_position: u64,
    pub delta_disks: i32,
    pub new_layout: u32,
    pub new_chunk: u32,
    /// Signed sectors relative to `data_offset` (with `feature::NEW_OFFSET`).
    pub new_offset: i32,
    /// Sectors from the start of the member to the data.
    pub data_offset: u64,
    /// Sectors available for data on this member.
    pub data_size: u64,
    /// Sectors from the start of the member to this superblock (8 for v1.2).
    pub super_offset: u64,
    /// Recovery position (with `feature::RECOVERY_OFFSET`); `journal_tail` on a
    /// journal device.
    pub recovery_offset: u64,
    /// This device's index into `dev_roles`.
    pub dev_number: u32,
    pub cnt_corrected_read: u32,
    pub device_uuid: [u8; 16],
    pub devflags: u8,
    pub bblog_shift: u8,
    /// Sectors reserved for the bad block log (0: none).
    pub bblog_size: u16,
    /// Signed sectors from the superblock to the bad block log.
    pub bblog_offset: i32,
    pub utime: u64,
    pub events: u64,
    /// Sectors known in sync; [`MAX_SECTOR`] when clean.
    pub resync_offset: u64,
    pub max_dev: u32,
    /// The role of every device (slot number, [`ROLE_SPARE`], [`ROLE_FAULTY`] or
    /// [`ROLE_JOURNAL`]); always exactly `max_dev` entries.
    pub dev_roles: Vec<u16>,
    /// Set for metadata 0.90: the superblock read (for examine, and for what
    /// only 0.90 records) or a blank one for a new member; [`Superblock::write_to`]
    /// then writes 0.90 (see [`crate::sb090`]).
    #[serde(skip)]
    pub v0_90: Option<Box<crate::sb090::Sb090>>,
}

/// What a device is in the array, from `dev_roles[dev_number]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Role {
    /// In slot `n` and in sync (or recovering, see `recovery_offset`).
    Active(u16),
    /// Rebuilding a copy of slot `n` while the old device still serves it
    /// (`feature::REPLACEMENT`).
    Replacement(u16),
    Spare,
    Faulty,
    Journal,
    /// `dev_number` does not index `dev_roles`.
    Unknown,
}

/// Levels md knows: -5 faulty, -4 multipath, -1 linear, 0, 1, 4, 5, 6, 10.
pub fn level_is_known(level: i32) -> bool {
    matches!(level, -5 | -4 | -1 | 0 | 1 | 4 | 5 | 6 | 10)
}

fn level_is_striped(level: i32) -> bool {
    matches!(level, 0 | 4 | 5 | 6 | 10)
}

impl Superblock {
    /// Which of mdadm's metadata versions this is (from `super_offset`).
    pub fn version(&self) -> MetadataVersion {
        if self.v0_90.is_some() {
            return MetadataVersion::V0_90;
        }
        MetadataVersion::of_super_offset(self.super_offset)
    }

    /// Read the md superblock of `vol`, looking where each of metadata 1.0,
    /// 1.1 and 1.2 keeps it, and for a 0.90 one (returned as its v1
    /// equivalent, see [`crate::sb090`]). `Ok(None)` when no place holds the magic (not an
    /// md v1 member, or too small to be one); `Err` when a place holds the
    /// magic but what is there is invalid or does not fit the device. When
    /// more than one place holds a valid superblock (a device reused across
    /// versions), the one with the latest creation time wins, as mdadm
    /// decides (ties: 1.0, then 1.1, then 1.2).
    pub fn read_from(vol: &dyn Volume) -> Result<Option<Superblock>, Error> {
        let mut best: Option<Superblock> = None;
        let mut first_err = None;
        for v in MetadataVersion::ALL {
            match Self::read_version(vol, v) {
                Ok(Some(sb)) => {
                    if best.as_ref().map_or(true, |b| sb.ctime > b.ctime) {
                        best = Some(sb);
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    if first_err.is_none() {
                        first_err = Some(e);
                    }
                }
            }
        }
        match crate::sb090::read_from(vol) {
            Ok(Some(sb)) => {
                if best.as_ref().map_or(true, |b| sb.ctime > b.ctime) {
                    best = Some(sb);
                }
            }
            Ok(None) => {}
            Err(e) => {
                if first_err.is_none() {
                    first_err = Some(e);
                }
            }
        }
        match (best, first_err) {
            (Some(sb), _) => Ok(Some(sb)),
            (None, Some(e)) => Err(e),
            (None, None) => Ok(None),
        }
    }

    /// Read the superblock where metadata `version` keeps it. `Ok(None)` when
    /// the magic is not there.
    pub fn read_version(
        vol: &dyn Volume,
        version: MetadataVersion,
    ) -> Result<Option<Superblock>, Error> {
        let name = vol.name();
        let dev_sectors = vol.size() / 512;
        let Some(at_sector) = version.super_offset(dev_sectors) else {
            return Ok(None);
        };
        let at = at_sector * 512;
        if at + SB_AREA as u64 > vol.size() {
            return Ok(None);
        }
        let mut buf = vec![0u8; SB_AREA];
        vol.read_at(&mut buf, at)?;
        if u32_at(&buf, off::MAGIC) != MD_SB_MAGIC {
            return Ok(None);
        }
        let ctx = |e: Error| e.on_device(name.clone()).at(at, SB_AREA as u64);
        let sb = Self::parse(&buf).map_err(ctx)?;
        if sb.super_offset != at_sector {
            return Err(ctx(invalid(
                "super_offset",
                format!("{} sectors", sb.super_offset),
                format!(
                    "{at_sector}, where this v{version} superblock was found (a copy of another device's superblock, or the device changed size)"
                ),
            )));
        }
        let end = sb.data_offset + sb.data_size;
        if end > dev_sectors {
            return Err(ctx(invalid(
                "data_size",
                format!(
                    "{} sectors from data_offset {}",
                    sb.data_size, sb.data_offset
                ),
                format!("an area ending inside the device ({dev_sectors} sectors)"),
            )));
        }
        Ok(Some(sb))
    }

    /// Write this superblock (with a fresh checksum) at its place on `vol`
    /// (`super_offset`) and flush. Refuses an invalid superblock, one whose
    /// data area does not fit, and one whose place is not where its version
    /// puts it on this device (a v1.0 superblock made for a device of another
    /// size).
    pub fn write_to(&self, vol: &dyn Volume) -> Result<(), Error> {
        let (at, bytes) = self
            .placed(vol.size())
            .map_err(|e| e.on_device(vol.name()))?;
        vol.write_at(&bytes, at)?;
        vol.flush()
    }

    /// What [`Superblock::write_to`] writes on a device of `dev_bytes` bytes,
    /// and where (byte offset), after the same checks. For callers that do
    /// the write themselves (the engine, as a step of a plan).
    pub fn placed(&self, dev_bytes: u64) -> Result<(u64, Vec<u8>), Error> {
        let at = self.super_offset.saturating_mul(512);
        let ctx = |e: Error| e.at(at, SB_AREA as u64);
        if self.v0_90.is_some() {
            return self.placed_090(dev_bytes).map_err(ctx);
        }
        if self.feature_map & feature::BITMAP_OFFSET != 0
            && (0..(SB_AREA / 512) as i32).contains(&self.bitmap_offset)
        {
            // raidlab writes the superblock's whole 4 KiB area (the rest as
            // 0xff, as mdadm does): a bitmap inside it would be overwritten.
            return Err(ctx(Error::new(
                ErrorKind::Unsupported,
                Op::Write,
                format!(
                    "the internal bitmap starts {} sectors after the superblock, inside the 4 KiB superblock area raidlab rewrites: writing this member is not supported (read it; md can move the bitmap with `mdadm --grow --bitmap=none` then `--bitmap=internal`)",
                    self.bitmap_offset
                ),
            )));
        }
        let dev_sectors = dev_bytes / 512;
        let version = self.version();
        if version == MetadataVersion::V1_0
            && self.data_offset.saturating_add(self.data_size) > self.super_offset
        {
            // A data area sized as if the metadata came first: writing it
            // would put the superblock inside the member's data.
            return Err(ctx(Error::new(
                ErrorKind::Invalid,
                Op::Write,
                format!(
                    "this v1.0 superblock's data area ({} + {} sectors) runs into the superblock itself at sector {}: it does not fit this device; nothing was written",
                    self.data_offset, self.data_size, self.super_offset
                ),
            )));
        }
        self.validate().map_err(ctx)?;
        if version.super_offset(dev_sectors) != Some(self.super_offset) {
            return Err(ctx(Error::new(
                ErrorKind::Invalid,
                Op::Write,
                format!(
                    "a v{version} superblock with super_offset {} does not belong on this device of {dev_sectors} sectors (v{version} keeps it at sector {})",
                    self.super_offset,
                    version
                        .super_offset(dev_sectors)
                        .map_or("none: the device is too small".to_string(), |s| s.to_string())
                ),
            )));
        }
        if self.data_offset + self.data_size > dev_sectors {
            return Err(ctx(Error::new(
                ErrorKind::Invalid,
                Op::Write,
                format!(
                    "md superblock data area ({} + {} sectors) ends past the device ({dev_sectors} sectors)",
                    self.data_offset, self.data_size
                ),
            )));
        }
        Ok((at, self.to_bytes()))
    }

    /// [`Superblock::placed`] for metadata 0.90: checked against the
    /// device (place, sizes), then encoded as md's `mdp_super_t`.
    fn placed_090(&self, dev_bytes: u64) -> Result<(u64, Vec<u8>), Error> {
        let dev_sectors = dev_bytes / 512;
        let place = crate::sb090::super_offset(dev_sectors);
        if place != Some(self.super_offset) {
            return Err(Error::new(
                ErrorKind::Invalid,
                Op::Write,
                format!(
                    "a 0.90 superblock with super_offset {} does not belong on this device of {dev_sectors} sectors (0.90 keeps it at sector {}); nothing was written",
                    self.super_offset,
                    place.map_or("none: the device is smaller than 64 KiB".to_string(), |s| s.to_string())
                ),
            ));
        }
        if self.data_offset != 0 || self.size > self.super_offset {
            return Err(Error::new(
                ErrorKind::Invalid,
                Op::Write,
                format!(
                    "a 0.90 member's data starts at sector 0 and ends before its superblock at sector {}; this one says data offset {} and {} sectors: nothing was written",
                    self.super_offset, self.data_offset, self.size
                ),
            ));
        }
        self.validate()?;
        let sb = crate::sb090::Sb090::from_v1(self)?;
        Ok((self.super_offset * 512, sb.to_bytes()))
    }

    /// This device's role, from `dev_roles[dev_number]`.
    pub fn role(&self) -> Role {
        match self.dev_roles.get(self.dev_number as usize) {
            None => Role::Unknown,
            Some(&ROLE_SPARE) => Role::Spare,
            Some(&ROLE_FAULTY) => Role::Faulty,
            Some(&ROLE_JOURNAL) => Role::Journal,
            Some(&n) if self.feature_map & feature::REPLACEMENT != 0 => Role::Replacement(n),
            Some(&n) => Role::Active(n),
        }
    }

    /// Whether the array was shut down cleanly (`resync_offset` is MaxSector).
    pub fn is_clean(&self) -> bool {
        self.resync_offset == MAX_SECTOR
    }

    /// Whether `level` is one md knows (unknown levels parse but cannot be run).
    pub fn level_known(&self) -> bool {
        level_is_known(self.level)
    }

    /// `ppl.offset` (signed sectors from the superblock) when a PPL bit is set.
    pub fn ppl_offset(&self) -> i16 {
        (self.bitmap_offset as u32 & 0xffff) as u16 as i16
    }

    /// `ppl.size` in sectors when a PPL bit is set.
    pub fn ppl_size(&self) -> u16 {
        (self.bitmap_offset as u32 >> 16) as u16
    }

    /// One character per raid slot as `mdadm --examine` prints it: `A` one device
    /// holds the slot, `R` two (replacing), `.` none (while a shrinking reshape runs,
    /// the slots being removed are included, as mdadm does).
    pub fn array_state_string(&self) -> String {
        let mut slots = self.raid_disks as usize;
        if self.feature_map & feature::RESHAPE_ACTIVE != 0 && self.delta_disks < 0 {
            slots += self.delta_disks.unsigned_abs() as usize;
        }
        let slots = slots.min(MAX_DEV_LIMIT as usize);
        (0..slots)
            .map(
                |d| match self.dev_roles.iter().filter(|&&r| r as usize == d).count() {
                    0 => '.',
                    1 => 'A',
                    2 => 'R',
                    _ => '?',
                },
            )
            .collect()
    }
}

// ---------------------------------------------------------------------------------
// Choices mdadm makes at create time.
// ---------------------------------------------------------------------------------

fn invalid(field: &str, found: impl std::fmt::Display, expected: impl std::fmt::Display) -> Error {
    crate::le::invalid("superblock", field, found, expected)
}

#[cfg(test)]
mod tests;
