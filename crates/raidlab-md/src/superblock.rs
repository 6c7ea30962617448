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
    /// md's `calc_sb_1_csum` over `bytes` (the superblock from its first byte): the
    /// 32-bit little-endian words of the first `256 + 2 * max_dev` bytes, `sb_csum`
    /// counted as zero, summed in 64 bits and folded once. `max_dev` is read from
    /// `bytes` and clamped so the sum never reads past the slice (or past 4 KiB).
    pub fn checksum(bytes: &[u8]) -> u32 {
        let max_dev = u32_at(bytes, off::MAX_DEV).min(MAX_DEV_LIMIT) as usize;
        let len = (HEADER_LEN + 2 * max_dev).min(bytes.len());
        let mut sum: u64 = 0;
        let mut i = 0;
        while i + 4 <= len {
            if i != off::SB_CSUM {
                sum += u64::from(u32_at(bytes, i));
            }
            i += 4;
        }
        if len - i >= 2 {
            sum += u64::from(u16_at(bytes, i));
        }
        ((sum & 0xffff_ffff) + (sum >> 32)) as u32
    }

    /// Whether the stored `sb_csum` matches [`Superblock::checksum`].
    pub fn checksum_ok(bytes: &[u8]) -> bool {
        bytes.len() >= HEADER_LEN && u32_at(bytes, off::SB_CSUM) == Self::checksum(bytes)
    }

    /// Decode and validate a v1.2 superblock. `bytes` starts at the superblock (byte
    /// [`SB_OFFSET`] of the member) and holds at least `256 + 2 * max_dev` bytes
    /// (normally the whole 4 KiB). Every failure names the field, the value found and
    /// what was expected. Never panics.
    pub fn parse(bytes: &[u8]) -> Result<Superblock, Error> {
        if bytes.len() < HEADER_LEN {
            return Err(invalid(
                "(length)",
                format!("{} bytes", bytes.len()),
                format!("at least {HEADER_LEN} bytes"),
            ));
        }
        let magic = u32_at(bytes, off::MAGIC);
        if magic != MD_SB_MAGIC {
            return Err(invalid(
                "magic",
                format!("{magic:#010x}"),
                format!("{MD_SB_MAGIC:#010x} (not an md v1 superblock)"),
            ));
        }
        let major = u32_at(bytes, off::MAJOR_VERSION);
        if major != 1 {
            return Err(invalid("major_version", major, 1));
        }
        let max_dev = u32_at(bytes, off::MAX_DEV);
        if max_dev > MAX_DEV_LIMIT {
            return Err(invalid(
                "max_dev",
                max_dev,
                format!("at most {MAX_DEV_LIMIT} (the roles must fit in 4 KiB)"),
            ));
        }
        let need = HEADER_LEN + 2 * max_dev as usize;
        if bytes.len() < need {
            return Err(invalid(
                "(length)",
                format!("{} bytes", bytes.len()),
                format!("at least {need} bytes for max_dev {max_dev}"),
            ));
        }
        let found = u32_at(bytes, off::SB_CSUM);
        let expected = Self::checksum(bytes);
        if found != expected {
            return Err(invalid(
                "sb_csum",
                format!("{found:#010x}"),
                format!("{expected:#010x} (checksum mismatch: the superblock is corrupt)"),
            ));
        }
        let pad0 = u32_at(bytes, off::PAD0);
        if pad0 != 0 {
            return Err(invalid("pad0", pad0, 0));
        }
        if let Some(i) = bytes[off::PAD3..off::DEV_ROLES]
            .iter()
            .position(|&b| b != 0)
        {
            return Err(invalid(
                &format!("pad3 (byte {})", off::PAD3 + i),
                bytes[off::PAD3 + i],
                0,
            ));
        }
        let name_raw = &bytes[off::SET_NAME..off::SET_NAME + 32];
        let name_len = name_raw.iter().position(|&b| b == 0).unwrap_or(32);
        let sb = Superblock {
            feature_map: u32_at(bytes, off::FEATURE_MAP),
            set_uuid: rd(bytes, off::SET_UUID),
            set_name: String::from_utf8_lossy(&name_raw[..name_len]).into_owned(),
            ctime: u64_at(bytes, off::CTIME),
            level: u32_at(bytes, off::LEVEL) as i32,
            layout: u32_at(bytes, off::LAYOUT),
            size: u64_at(bytes, off::SIZE),
            chunksize: u32_at(bytes, off::CHUNKSIZE),
            raid_disks: u32_at(bytes, off::RAID_DISKS),
            bitmap_offset: u32_at(bytes, off::BITMAP_OFFSET) as i32,
            new_level: u32_at(bytes, off::NEW_LEVEL) as i32,
            reshape_position: u64_at(bytes, off::RESHAPE_POSITION),
            delta_disks: u32_at(bytes, off::DELTA_DISKS) as i32,
            new_layout: u32_at(bytes, off::NEW_LAYOUT),
            new_chunk: u32_at(bytes, off::NEW_CHUNK),
            new_offset: u32_at(bytes, off::NEW_OFFSET) as i32,
            data_offset: u64_at(bytes, off::DATA_OFFSET),
            data_size: u64_at(bytes, off::DATA_SIZE),
            super_offset: u64_at(bytes, off::SUPER_OFFSET),
            recovery_offset: u64_at(bytes, off::RECOVERY_OFFSET),
            dev_number: u32_at(bytes, off::DEV_NUMBER),
            cnt_corrected_read: u32_at(bytes, off::CNT_CORRECTED_READ),
            device_uuid: rd(bytes, off::DEVICE_UUID),
            devflags: bytes[off::DEVFLAGS],
            bblog_shift: bytes[off::BBLOG_SHIFT],
            bblog_size: u16_at(bytes, off::BBLOG_SIZE),
            bblog_offset: u32_at(bytes, off::BBLOG_OFFSET) as i32,
            utime: u64_at(bytes, off::UTIME),
            events: u64_at(bytes, off::EVENTS),
            resync_offset: u64_at(bytes, off::RESYNC_OFFSET),
            max_dev,
            dev_roles: (0..max_dev as usize)
                .map(|i| u16_at(bytes, off::DEV_ROLES + 2 * i))
                .collect(),
            v0_90: None,
        };
        sb.validate()?;
        Ok(sb)
    }

    /// Range-check every field (what [`Superblock::parse`] runs after decoding; also
    /// useful before writing a hand-edited superblock).
    pub fn validate(&self) -> Result<(), Error> {
        if self.max_dev > MAX_DEV_LIMIT {
            return Err(invalid(
                "max_dev",
                self.max_dev,
                format!("at most {MAX_DEV_LIMIT}"),
            ));
        }
        if self.dev_roles.len() != self.max_dev as usize {
            return Err(invalid(
                "dev_roles",
                format!("{} entries", self.dev_roles.len()),
                format!("max_dev = {} entries", self.max_dev),
            ));
        }
        if self.set_name.len() > 32 {
            return Err(invalid(
                "set_name",
                format!("{} bytes long", self.set_name.len()),
                "at most 32 bytes",
            ));
        }
        let unknown = self.feature_map & !feature::ALL;
        if unknown != 0 {
            return Err(invalid(
                "feature_map",
                format!("{:#x} (unknown bits {unknown:#x})", self.feature_map),
                format!("only bits in {:#x}", feature::ALL),
            ));
        }
        if self.data_offset.checked_add(self.data_size).is_none() {
            return Err(invalid(
                "data_size",
                format!("{} sectors", self.data_size),
                format!("a size that fits after data_offset {}", self.data_offset),
            ));
        }
        // Metadata before the data (1.1, 1.2) or after it (1.0).
        let meta_after = matches!(
            self.version(),
            MetadataVersion::V1_0 | MetadataVersion::V0_90
        );
        if meta_after {
            if self.super_offset % 8 != 0 || self.super_offset < 16 {
                return Err(invalid(
                    "super_offset",
                    format!("{} sectors", self.super_offset),
                    "0 (v1.1), 8 (v1.2) or a multiple of 8 near the end of the device (v1.0)",
                ));
            }
            if self.data_offset + self.data_size > self.super_offset {
                return Err(invalid(
                    "data_size",
                    format!(
                        "{} sectors from data_offset {}",
                        self.data_size, self.data_offset
                    ),
                    format!(
                        "a data area ending at or before the v1.0 superblock at sector {}",
                        self.super_offset
                    ),
                ));
            }
        } else {
            let sb_end = self.super_offset + (SB_AREA as u64 / 512);
            if self.data_offset < sb_end {
                return Err(invalid(
                    "data_offset",
                    format!("{} sectors", self.data_offset),
                    format!("at least {sb_end} sectors (data must start after the superblock)"),
                ));
            }
        }
        // A journal device holds the log, not array data: md sizes it by its own
        // data_size (a journal is often a small SSD in front of large disks).
        let journal = self.feature_map & feature::JOURNAL != 0
            && self.dev_roles.get(self.dev_number as usize) == Some(&ROLE_JOURNAL);
        if self.size > self.data_size && !journal {
            return Err(invalid(
                "size",
                format!("{} sectors", self.size),
                format!("at most data_size ({} sectors)", self.data_size),
            ));
        }
        if self.raid_disks == 0 || self.raid_disks > self.max_dev {
            return Err(invalid(
                "raid_disks",
                self.raid_disks,
                format!("1..={} (max_dev)", self.max_dev),
            ));
        }
        if self.dev_number >= self.max_dev {
            return Err(invalid(
                "dev_number",
                self.dev_number,
                format!("less than max_dev ({})", self.max_dev),
            ));
        }
        if level_is_striped(self.level) && self.chunksize == 0 {
            return Err(invalid(
                "chunksize",
                0,
                format!("a non-zero chunk size for level {}", self.level),
            ));
        }
        if self.level == 10 {
            let near = self.layout & 0xff;
            let far = (self.layout >> 8) & 0xff;
            let copies = near * far;
            if copies == 0 || copies > self.raid_disks || self.layout & !0x1ffff != 0 {
                return Err(invalid(
                    "layout",
                    format!("{:#x} (raid10 near={near} far={far})", self.layout),
                    format!(
                        "near and far copies >= 1 with near*far <= raid_disks ({})",
                        self.raid_disks
                    ),
                ));
            }
        }
        if self.bblog_size != 0 {
            let start = i128::from(self.super_offset) + i128::from(self.bblog_offset);
            let end = start + i128::from(self.bblog_size);
            // Between the superblock and the data (1.1, 1.2), or between the
            // end of the data and the superblock (1.0).
            let (lo, hi, between) = if meta_after {
                (
                    i128::from(self.data_offset) + i128::from(self.data_size),
                    i128::from(self.super_offset),
                    "the end of the data and the v1.0 superblock",
                )
            } else {
                (
                    i128::from(self.super_offset) + 8,
                    i128::from(self.data_offset),
                    "the superblock and data_offset",
                )
            };
            if self.bblog_offset == 0 || start < lo || end > hi {
                return Err(invalid(
                    "bblog_offset",
                    format!("{} (log of {} sectors)", self.bblog_offset, self.bblog_size),
                    format!("a log between {between} (sectors {lo}..{hi})"),
                ));
            }
        }
        if self.bblog_shift > 32 {
            return Err(invalid("bblog_shift", self.bblog_shift, "at most 32"));
        }
        // Slots a device may hold: raid_disks, or more while a shrinking reshape runs.
        let mut slots = u64::from(self.raid_disks);
        if self.feature_map & feature::RESHAPE_ACTIVE != 0 && self.delta_disks < 0 {
            slots += u64::from(self.delta_disks.unsigned_abs());
        }
        let mut holders = vec![0u8; slots.min(0x1_0000) as usize];
        for (i, &r) in self.dev_roles.iter().enumerate() {
            if r >= ROLE_JOURNAL {
                continue;
            }
            if u64::from(r) >= slots {
                return Err(invalid(
                    &format!("dev_roles[{i}]"),
                    r,
                    format!(
                        "a slot below raid_disks ({slots}), or 0xffff spare, 0xfffe faulty, 0xfffd journal"
                    ),
                ));
            }
            let h = &mut holders[r as usize];
            *h += 1;
            if *h > 2 {
                return Err(invalid(
                    &format!("dev_roles[{i}]"),
                    format!("slot {r}, held by more than two devices"),
                    "each slot held by one device (two while replacing)",
                ));
            }
        }
        Ok(())
    }

    /// The 4 KiB superblock area: header, `max_dev` roles, the rest of the area
    /// filled with 0xff as mdadm does, and a freshly computed `sb_csum`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; SB_AREA];
        put(&mut b, off::MAGIC, &MD_SB_MAGIC.to_le_bytes());
        put(&mut b, off::MAJOR_VERSION, &1u32.to_le_bytes());
        put(&mut b, off::FEATURE_MAP, &self.feature_map.to_le_bytes());
        put(&mut b, off::SET_UUID, &self.set_uuid);
        let name = self.set_name.as_bytes();
        let n = name.len().min(32);
        put(&mut b, off::SET_NAME, &name[..n]);
        put(&mut b, off::CTIME, &self.ctime.to_le_bytes());
        put(&mut b, off::LEVEL, &self.level.to_le_bytes());
        put(&mut b, off::LAYOUT, &self.layout.to_le_bytes());
        put(&mut b, off::SIZE, &self.size.to_le_bytes());
        put(&mut b, off::CHUNKSIZE, &self.chunksize.to_le_bytes());
        put(&mut b, off::RAID_DISKS, &self.raid_disks.to_le_bytes());
        put(
            &mut b,
            off::BITMAP_OFFSET,
            &self.bitmap_offset.to_le_bytes(),
        );
        put(&mut b, off::NEW_LEVEL, &self.new_level.to_le_bytes());
        put(
            &mut b,
            off::RESHAPE_POSITION,
            &self.reshape_position.to_le_bytes(),
        );
        put(&mut b, off::DELTA_DISKS, &self.delta_disks.to_le_bytes());
        put(&mut b, off::NEW_LAYOUT, &self.new_layout.to_le_bytes());
        put(&mut b, off::NEW_CHUNK, &self.new_chunk.to_le_bytes());
        put(&mut b, off::NEW_OFFSET, &self.new_offset.to_le_bytes());
        put(&mut b, off::DATA_OFFSET, &self.data_offset.to_le_bytes());
        put(&mut b, off::DATA_SIZE, &self.data_size.to_le_bytes());
        put(&mut b, off::SUPER_OFFSET, &self.super_offset.to_le_bytes());
        put(
            &mut b,
            off::RECOVERY_OFFSET,
            &self.recovery_offset.to_le_bytes(),
        );
        put(&mut b, off::DEV_NUMBER, &self.dev_number.to_le_bytes());
        put(
            &mut b,
            off::CNT_CORRECTED_READ,
            &self.cnt_corrected_read.to_le_bytes(),
        );
        put(&mut b, off::DEVICE_UUID, &self.device_uuid);
        b[off::DEVFLAGS] = self.devflags;
        b[off::BBLOG_SHIFT] = self.bblog_shift;
        put(&mut b, off::BBLOG_SIZE, &self.bblog_size.to_le_bytes());
        put(&mut b, off::BBLOG_OFFSET, &self.bblog_offset.to_le_bytes());
        put(&mut b, off::UTIME, &self.utime.to_le_bytes());
        put(&mut b, off::EVENTS, &self.events.to_le_bytes());
        put(
            &mut b,
            off::RESYNC_OFFSET,
            &self.resync_offset.to_le_bytes(),
        );
        let max_dev = self.max_dev.min(MAX_DEV_LIMIT);
        put(&mut b, off::MAX_DEV, &max_dev.to_le_bytes());
        for slot in b[off::DEV_ROLES..].chunks_exact_mut(2) {
            slot.copy_from_slice(&ROLE_SPARE.to_le_bytes());
        }
        for (i, r) in self.dev_roles.iter().take(max_dev as usize).enumerate() {
            put(&mut b, off::DEV_ROLES + 2 * i, &r.to_le_bytes());
        }
        let csum = Self::checksum(&b);
        put(&mut b, off::SB_CSUM, &csum.to_le_bytes());
        b
    }

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

/// mdadm's `choose_bm_space`: sectors reserved after the superblock for a bitmap,
/// reserved even when no bitmap is created (so one can be added later).
fn choose_bm_space(dev_sectors: u64) -> u64 {
    if dev_sectors < 128 {
        0
    } else if dev_sectors - 128 >= 200 * 1024 * 1024 * 2 {
        256
    } else if dev_sectors - 8 > 8 * 1024 * 1024 * 2 {
        128
    } else {
        8
    }
}

/// The data offset (bytes) mdadm 4.x chooses for a v1.2 member of `member_bytes`
/// with no explicit `--data-offset`, for a given chunk size in KiB (0 for raid1,
/// which has no chunk; mdadm's default chunk is 512).
///
/// The rule, in 512-byte sectors, with `dev` the member size:
/// 1. `bm` = bitmap space: 0 below 64 KiB, 8 (4 KiB) up to 8 GiB, 128 (64 KiB) up to
///    200 GiB, 256 (128 KiB) above;
/// 2. `headroom` (room to reshape) starts at 128 MiB (262144 sectors) and is halved
///    while `headroom * 1024 > dev` (aiming at ~0.1% of the device), but for chunked
///    levels never below `4 * chunk` (it stops halving once `headroom / 2 <
///    4 * chunk_kib` sectors);
/// 3. `data_offset = round_up(24 + bm + headroom, 2048)`, a multiple of 1 MiB.
///
/// So big members (> 128 GiB) get 264192 sectors (129 MiB); a 64 MiB member with a
/// 512K chunk gets 2 MiB; with a 64K chunk 1 MiB. Source: mdadm `super1.c`,
/// `validate_geometry1` and `choose_bm_space`. mdadm takes the offset from the first
/// member listed and uses it for all members. The result may not fit a tiny member;
/// callers check.
pub fn mdadm_data_offset(member_bytes: u64, chunk_kib: u32) -> u64 {
    let dev = member_bytes / 512;
    let bm = choose_bm_space(dev);
    let mut headroom: u64 = 128 * 1024 * 2;
    while (headroom << 10) > dev && (chunk_kib == 0 || headroom / 2 >= u64::from(chunk_kib) * 4) {
        headroom >>= 1;
    }
    let sectors = (24 + bm + headroom).div_ceil(2048) * 2048;
    sectors * 512
}

/// [`mdadm_data_offset`] with mdadm's default chunk (512 KiB) — what `mdadm --create`
/// picks for raid0/4/5/6/10 with no `--chunk` and no `--data-offset`. For raid1 use
/// `mdadm_data_offset(bytes, 0)`; with an explicit chunk, pass it.
pub fn default_data_offset(member_bytes: u64) -> u64 {
    mdadm_data_offset(member_bytes, 512)
}

/// [`mdadm_data_offset`] for a metadata version: 0 for 1.0 (the data starts at
/// the start of the member), mdadm's rule for 1.1 and 1.2 (the same for both:
/// room for the superblock, the bitmap and reshape headroom, rounded to 1 MiB).
pub fn mdadm_data_offset_for(version: MetadataVersion, member_bytes: u64, chunk_kib: u32) -> u64 {
    match version {
        MetadataVersion::V1_0 | MetadataVersion::V0_90 => 0,
        MetadataVersion::V1_1 | MetadataVersion::V1_2 => mdadm_data_offset(member_bytes, chunk_kib),
    }
}

/// [`default_member_sectors`] for a metadata version. For 1.0 (mdadm's
/// `validate_geometry1`): the device rounded down to 4 KiB less 8 KiB for the
/// superblock, 4 KiB for the bad block log and the bitmap space, then rounded
/// as for 1.2.
pub fn default_member_sectors_for(
    version: MetadataVersion,
    device_bytes: u64,
    data_offset_bytes: u64,
    level: i32,
    chunk_sectors: u32,
) -> u64 {
    match version {
        MetadataVersion::V0_90 => {
            // mdadm's avail_size0: everything before the superblock.
            let avail = crate::sb090::super_offset(device_bytes / 512).unwrap_or(0);
            default_member_sectors(avail * 512, 0, level, chunk_sectors)
        }
        MetadataVersion::V1_0 => {
            let dev = device_bytes / 512;
            let overhead = 16 + 8 + choose_bm_space(dev);
            let free = (dev & !7).saturating_sub(overhead);
            default_member_sectors(free * 512, 0, level, chunk_sectors)
        }
        MetadataVersion::V1_1 | MetadataVersion::V1_2 => {
            default_member_sectors(device_bytes, data_offset_bytes, level, chunk_sectors)
        }
    }
}

/// The per-member `size` (sectors) mdadm chooses when no `--size` is given: the
/// space after the data offset, in whole KiB, rounded down to a whole chunk (or to
/// 64 KiB for raid1). Use the smallest member.
pub fn default_member_sectors(
    device_bytes: u64,
    data_offset_bytes: u64,
    level: i32,
    chunk_sectors: u32,
) -> u64 {
    let free_kib = (device_bytes / 512).saturating_sub(data_offset_bytes / 512) / 2;
    let chunk_kib = u64::from(chunk_sectors / 2);
    let mut kib = if level_is_striped(level) && chunk_kib > 0 {
        free_kib - free_kib % chunk_kib
    } else {
        free_kib
    };
    if level == 1 {
        kib &= !63;
    }
    kib * 2
}

/// What `mdadm --create` is told about the array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewArray {
    pub uuid: [u8; 16],
    /// Array name; stored truncated to 31 bytes as mdadm does (e.g. `host:name`).
    pub name: String,
    pub level: i32,
    pub layout: u32,
    pub chunk_sectors: u32,
    pub raid_disks: u32,
    /// Sectors of each member used by the array (`size`).
    pub member_sectors: u64,
    /// Sectors from the start of each member to its data.
    pub data_offset_sectors: u64,
    /// Devices including spares: the roles table covers at least this many.
    pub total_devices: u32,
    /// Created clean (`--assume-clean`): `resync_offset` = MaxSector, else 0.
    pub clean: bool,
}

/// The superblock `mdadm --create` writes for one member. `role` is a slot number
/// or [`ROLE_SPARE`]; `dev_roles` holds slot `n` for device `n < raid_disks` and
/// spare for the rest (mdadm numbers devices in slot order, spares after), with
/// this member's own entry set to `role`.
///
/// As mdadm: `events` 0 (the kernel bumps it when it first starts the array),
/// `ctime` = `utime` = `now_secs`, `feature_map` 0, no bitmap, `max_dev` =
/// `(round_up(256 + 2 * total_devices, 512) - 256) / 2` (128 for up to 128 devices),
/// `data_size` = `device_sectors - data_offset`, and mdadm's default bad block log:
/// 8 sectors (512 entries) right after the space reserved for a bitmap (offset
/// `8 + bm_space` sectors from the superblock, see [`mdadm_data_offset`]) when it fits
/// before the data, else the 8 sectors just before the data. The log area itself is
/// not written: md reads it only once `feature::BAD_BLOCKS` is set, which it sets
/// itself after writing the log.
pub fn new_member(
    array: &NewArray,
    dev_number: u32,
    role: u16,
    device_uuid: [u8; 16],
    device_sectors: u64,
    now_secs: u64,
) -> Superblock {
    new_member_at(
        array,
        MetadataVersion::V1_2,
        dev_number,
        role,
        device_uuid,
        device_sectors,
        now_secs,
    )
}

/// [`new_member`] for any of metadata 1.0, 1.1 and 1.2, placed as mdadm's
/// `write_init_super1` places it:
/// - 1.1 and 1.2: the superblock at sector 0 or 8, `data_size` =
///   `device_sectors` less `data_offset`, the bad block log after the bitmap
///   space (or just before the data);
/// - 1.0: the superblock at `(device_sectors - 16) & !7`, data from sector 0
///   (`array.data_offset_sectors` should be 0), and before the superblock the
///   bitmap space (`choose_bm_space(size)`) plus an 8-sector bad block log at
///   -8, taken from the room left after `size` when there is less;
///   `data_size` is what remains before them;
/// - 0.90: the superblock 64 KiB aligned 64 to 128 KiB from the end, data
///   from sector 0 up to it, 27 device slots, no bad-block log; written as
///   0.90 by [`Superblock::write_to`].
pub fn new_member_at(
    array: &NewArray,
    version: MetadataVersion,
    dev_number: u32,
    role: u16,
    device_uuid: [u8; 16],
    device_sectors: u64,
    now_secs: u64,
) -> Superblock {
    let total = array
        .total_devices
        .max(array.raid_disks)
        .max(dev_number.saturating_add(1))
        .min(MAX_DEV_LIMIT);
    let sb_bytes = (HEADER_LEN as u64 + 2 * u64::from(total)).div_ceil(512) * 512;
    let max_dev = (((sb_bytes - HEADER_LEN as u64) / 2) as u32).min(MAX_DEV_LIMIT);
    let mut dev_roles: Vec<u16> = (0..max_dev)
        .map(|i| {
            if i < array.raid_disks {
                i as u16
            } else {
                ROLE_SPARE
            }
        })
        .collect();
    if let Some(r) = dev_roles.get_mut(dev_number as usize) {
        *r = role;
    }
    let mut name = array.name.clone();
    while name.len() > 31 {
        name.pop();
    }
    let data_offset = array.data_offset_sectors;
    let bm_space = choose_bm_space(array.member_sectors);
    let (super_offset, data_size, bblog_size, bblog_offset) = match version {
        MetadataVersion::V0_90 => {
            // Data from sector 0 up to the superblock, no bad-block log.
            let sb = crate::sb090::super_offset(device_sectors).unwrap_or(0);
            (sb, sb, 0, 0)
        }
        MetadataVersion::V1_0 => {
            let version = MetadataVersion::V1_0;
            let sb = version.super_offset(device_sectors).unwrap_or(0);
            let mut room = bm_space + 8;
            if sb < array.member_sectors.saturating_add(room) {
                room = sb.saturating_sub(array.member_sectors);
            }
            let data_size = sb.saturating_sub(room).saturating_sub(data_offset);
            let (bbs, bbo) = if room >= 8 { (8, -8) } else { (0, 0) };
            (sb, data_size, bbs, bbo)
        }
        MetadataVersion::V1_1 | MetadataVersion::V1_2 => {
            let sbo = version.super_offset(device_sectors).unwrap_or(0);
            let (bbs, bbo) = if data_offset >= sbo + 8 + bm_space + 8 {
                (8, (8 + bm_space) as i32)
            } else if data_offset >= sbo + 16 {
                (8, (data_offset - 8 - sbo) as i32)
            } else {
                (0, 0)
            };
            (sbo, device_sectors.saturating_sub(data_offset), bbs, bbo)
        }
    };
    let v0_90 = (version == MetadataVersion::V0_90).then(|| Box::new(crate::sb090::Sb090::blank()));
    let (max_dev, device_uuid) = if v0_90.is_some() {
        // 0.90 has 27 descriptors and no device UUID: it is the array's
        // with the device number last, as reading one gives it.
        let mut u = array.uuid;
        u[12..].copy_from_slice(&dev_number.to_be_bytes());
        dev_roles.resize(crate::sb090::DISKS, ROLE_SPARE);
        (crate::sb090::DISKS as u32, u)
    } else {
        (max_dev, device_uuid)
    };
    Superblock {
        feature_map: 0,
        set_uuid: array.uuid,
        set_name: name,
        ctime: now_secs & 0xff_ffff_ffff,
        level: array.level,
        layout: array.layout,
        size: array.member_sectors,
        chunksize: array.chunk_sectors,
        raid_disks: array.raid_disks,
        bitmap_offset: 0,
        new_level: 0,
        reshape_position: 0,
        delta_disks: 0,
        new_layout: 0,
        new_chunk: 0,
        new_offset: 0,
        data_offset,
        data_size,
        super_offset,
        recovery_offset: 0,
        dev_number,
        cnt_corrected_read: 0,
        device_uuid,
        devflags: 0,
        bblog_shift: 0,
        bblog_size,
        bblog_offset,
        utime: now_secs & 0xff_ffff_ffff,
        events: 0,
        resync_offset: if array.clean { MAX_SECTOR } else { 0 },
        max_dev,
        dev_roles,
        v0_90,
    }
}

fn invalid(field: &str, found: impl std::fmt::Display, expected: impl std::fmt::Display) -> Error {
    crate::le::invalid("superblock", field, found, expected)
}

#[cfg(test)]
mod tests;
