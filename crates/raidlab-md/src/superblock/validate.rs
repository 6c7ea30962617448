//! What a parsed superblock must hold before anything trusts it: every field
//! checked against md's limits and against the others, with the field named.

use super::*;

impl Superblock {
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
}
