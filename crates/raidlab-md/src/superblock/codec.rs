//! The superblock's bytes: its checksum, parsing the 256-byte header and the
//! role table, and writing them back (the layout is the module doc's table).

use super::*;

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
}
