//! Where a member's internal bitmap lives and how large mdadm makes it:
//! the area after the superblock (v1.x: before the data or the bad block
//! log; 1.0: before the superblock), the check that a bitmap read belongs
//! to its array, the room and chunk mdadm chooses at create, and a new
//! bitmap's header.
//!
//! It decides placement and sizes only; it must never read or write a
//! device (the callers in `super` and `grow` do), and never place a bitmap
//! over the data, the bad block log or a partial parity log.

use super::{invalid, new_internal_090, placement_v090, uuid_090_host};
use super::{Bitmap, BitmapSuper, BITMAP_MAJOR_HI, BITMAP_SB_LEN};
use super::{DEFAULT_CHUNK, DEFAULT_DAEMON_SLEEP, MAX_DEFAULT_ROOM_SECTORS};
use crate::superblock::{feature, Superblock, HEADER_LEN, SB_AREA};
use raidlab_core::Error;

/// Where a v1.2 member's bitmap area starts (byte offset on the member) and how many
/// bytes it may use before the data area or the bad block log that follows it.
/// `min_offset` is the smallest `bitmap_offset` accepted, in sectors.
pub(super) fn placement(sb: &Superblock, min_offset: i64) -> Result<(u64, u64), Error> {
    if sb.feature_map & (feature::PPL | feature::MULTIPLE_PPLS) != 0 {
        return Err(invalid(
            "feature_map",
            format!("{:#x} (bitmap and PPL both set)", sb.feature_map),
            "a bitmap or a partial parity log, not both",
        ));
    }
    let off = i64::from(sb.bitmap_offset);
    if sb.v0_90.is_some() {
        return placement_v090(sb, off);
    }
    let sb_bytes = (HEADER_LEN as u64 + 2 * u64::from(sb.max_dev)).div_ceil(512) as i64;
    if sb.data_offset < sb.super_offset {
        return placement_v10(sb, off, sb_bytes);
    }
    let min = min_offset.max(sb_bytes);
    if off < min {
        return Err(Error::invalid(format!(
            "md superblock field bitmap_offset is {off} sectors, expected at least {min} \
             (a v1.2 bitmap sits after the superblock{})",
            if min_offset >= 8 {
                " and its 4 KiB area"
            } else {
                ""
            }
        )));
    }
    let start_sector = sb.super_offset.saturating_add(off as u64);
    let mut end_sector = sb.data_offset;
    if sb.bblog_size != 0 {
        let bb = i128::from(sb.super_offset) + i128::from(sb.bblog_offset);
        let bb_end = bb + i128::from(sb.bblog_size);
        if bb >= i128::from(start_sector) {
            end_sector = end_sector.min(bb as u64);
        } else if bb_end > i128::from(start_sector) {
            return Err(Error::invalid(format!(
                "md bitmap at sector {start_sector} starts inside the bad block log (sectors {bb}..{bb_end})"
            )));
        }
    }
    if start_sector >= end_sector {
        return Err(Error::invalid(format!(
            "md superblock field bitmap_offset is {off} sectors, expected an area before \
             sector {end_sector} (data_offset {} / bad block log)",
            sb.data_offset
        )));
    }
    Ok((start_sector * 512, (end_sector - start_sector) * 512))
}

/// [`placement`] for metadata 1.0, whose superblock follows the data: mdadm
/// puts the bitmap before it (a negative `bitmap_offset`, on a 4 KiB boundary,
/// up to the bad block log at -8) when it creates the array, or inside the
/// superblock's 4 KiB area (a small positive offset) when it adds one later.
fn placement_v10(sb: &Superblock, off: i64, sb_bytes: i64) -> Result<(u64, u64), Error> {
    let so = i128::from(sb.super_offset);
    let start = so + i128::from(off);
    let data_end = i128::from(sb.data_offset) + i128::from(sb.data_size);
    let end = if off < 0 {
        let mut e = so;
        if sb.bblog_size != 0 {
            let bb = so + i128::from(sb.bblog_offset);
            if bb >= start && bb < e {
                e = bb;
            } else if bb < start && bb + i128::from(sb.bblog_size) > start {
                return Err(Error::invalid(format!(
                    "md bitmap at sector {start} starts inside the bad block log (sectors {bb}..{})",
                    bb + i128::from(sb.bblog_size)
                )));
            }
        }
        e
    } else if off >= sb_bytes {
        so + (SB_AREA / 512) as i128
    } else {
        return Err(Error::invalid(format!(
            "md superblock field bitmap_offset is {off} sectors, expected at least {sb_bytes} \
             (past the superblock's roles) or a bitmap before a v1.0 superblock"
        )));
    };
    if start < data_end {
        return Err(Error::invalid(format!(
            "md superblock field bitmap_offset is {off} sectors: the bitmap would start at \
             sector {start}, inside the data (which ends at sector {data_end})"
        )));
    }
    if start >= end {
        return Err(Error::invalid(format!(
            "md superblock field bitmap_offset is {off} sectors, expected room before \
             sector {end} (the bad block log or the superblock)"
        )));
    }
    Ok(((start * 512) as u64, ((end - start) * 512) as u64))
}

pub(super) fn check_against(bsb: &BitmapSuper, sb: &Superblock) -> Result<(), Error> {
    // A 0.90 bitmap holds the uuid words in the byte order of the host that
    // wrote it: this host's, or (an array from a big-endian NAS) big-endian.
    let same_090 = sb.v0_90.is_some() && bsb.uuid == uuid_090_host(&sb.set_uuid);
    if bsb.uuid != sb.set_uuid && !same_090 {
        return Err(invalid(
            "uuid",
            crate::superblock::format_uuid(&bsb.uuid),
            format!(
                "the array uuid {}",
                crate::superblock::format_uuid(&sb.set_uuid)
            ),
        ));
    }
    if matches!(sb.level, 1 | 4 | 5 | 6) && bsb.sync_size != sb.size {
        return Err(invalid(
            "sync_size",
            format!("{} sectors", bsb.sync_size),
            format!("the member size {} sectors (level {})", sb.size, sb.level),
        ));
    }
    Ok(())
}

/// mdadm's `choose_bm_space` (as in [`crate::mdadm_data_offset`]): sectors reserved
/// after the superblock for a bitmap, by member size in sectors.
pub fn choose_bm_space(member_sectors: u64) -> u64 {
    if member_sectors < 128 {
        0
    } else if member_sectors - 128 >= 200 * 1024 * 1024 * 2 {
        256
    } else if member_sectors - 8 > 8 * 1024 * 1024 * 2 {
        128
    } else {
        8
    }
}

/// The room (sectors) `mdadm --create --bitmap=internal` gives a v1.2 bitmap, by
/// member size: [`choose_bm_space`] (8, 128 or 256 sectors; capped at 128 KiB
/// when no chunk is given, which it never exceeds).
pub fn mdadm_bitmap_room(member_sectors: u64) -> u64 {
    choose_bm_space(member_sectors).min(MAX_DEFAULT_ROOM_SECTORS)
}

/// The bitmap chunk (bytes) mdadm picks when no `--bitmap-chunk` is given, for a
/// bitmap covering `sync_sectors` in `room_sectors` of space: the smallest power of
/// two from 4 KiB whose bits (`sync * 512 / chunk + 1`, as mdadm counts) fit in
/// the room after the 256-byte header, but at least 64 MiB ([`DEFAULT_CHUNK`]).
/// `None` when there is no room (at most one sector) or the chunk would not fit
/// in 32 bits.
pub fn choose_chunk(sync_sectors: u64, room_sectors: u64) -> Option<u32> {
    let chunk = min_chunk(sync_sectors, room_sectors)?.max(u64::from(DEFAULT_CHUNK));
    u32::try_from(chunk).ok()
}

/// mdadm's smallest workable chunk for `sync_sectors` in `room_sectors`.
pub(super) fn min_chunk(sync_sectors: u64, room_sectors: u64) -> Option<u64> {
    if room_sectors <= 1 {
        return None;
    }
    let max_bits = (room_sectors.checked_mul(512)? - BITMAP_SB_LEN as u64) * 8;
    let mut chunk: u64 = 4096;
    let mut bits = sync_sectors.checked_mul(512)? / chunk + 1;
    while bits > max_bits {
        chunk *= 2;
        bits = bits.div_ceil(2);
    }
    Some(chunk)
}

/// The sectors md's bitmap covers, as `mdadm --create` records it: the member
/// size, except for raid10 where it is the array size (`size * raid_disks /
/// copies`, computed in KiB as mdadm does).
pub fn mdadm_sync_size(sb: &Superblock) -> u64 {
    if sb.level == 10 {
        let copies = u64::from((sb.layout & 0xff) * ((sb.layout >> 8) & 0xff)).max(1);
        (sb.size / 2) * u64::from(sb.raid_disks) / copies * 2
    } else {
        sb.size
    }
}

/// Add an internal bitmap to a new v1 member as `mdadm --create
/// --bitmap=internal` does, returning the bitmap to write with
/// [`Bitmap::write_to`]: `sb.feature_map |= BITMAP_OFFSET`, `sb.bitmap_offset =
/// 8` (right after the 4 KiB superblock; for metadata 1.0, before the
/// superblock and its bad block log: minus the 4 KiB blocks the bits need and
/// 8), and a header with version 4, the array
/// uuid, events and events_cleared 0, state 0, the chunk from [`choose_chunk`] in
/// [`mdadm_bitmap_room`] (or `chunk` when given: a power of two, large enough),
/// daemon_sleep 5, write_behind 0, sync_size from [`mdadm_sync_size`], and every
/// byte after the header 0xff: mdadm marks all chunks dirty whether or not the
/// array is created clean; md clears them on first start.
pub fn new_internal(sb: &mut Superblock, chunk: Option<u32>) -> Result<Bitmap, Error> {
    if sb.level < 1 {
        return Err(invalid(
            "level",
            sb.level,
            "1, 4, 5, 6 or 10 (bitmaps are not meaningful without redundancy)",
        ));
    }
    if sb.feature_map & (feature::PPL | feature::MULTIPLE_PPLS | feature::JOURNAL) != 0 {
        return Err(invalid(
            "feature_map",
            format!("{:#x}", sb.feature_map),
            "no PPL or journal (md allows one consistency policy)",
        ));
    }
    let sync = mdadm_sync_size(sb);
    if sb.v0_90.is_some() {
        return new_internal_090(sb, sync, chunk);
    }
    let room = mdadm_bitmap_room(sb.size);
    let min = min_chunk(sync, room);
    let chunk = match (chunk, min) {
        (_, None) => {
            return Err(Error::invalid(format!(
                "no room for an md bitmap: {room} sectors reserved for a {} sector member",
                sb.size
            )))
        }
        (None, Some(_)) => choose_chunk(sync, room).ok_or_else(|| {
            Error::invalid(format!(
                "md bitmap chunk for {sync} sectors in {room} sectors overflows 32 bits"
            ))
        })?,
        (Some(c), Some(m)) => {
            if !c.is_power_of_two() || u64::from(c) < m {
                return Err(Error::invalid(format!(
                    "md bitmap chunk {c} bytes: expected a power of two of at least {m} bytes \
                     (so {sync} sectors fit in {room} sectors of bitmap)"
                )));
            }
            c
        }
    };
    let bm = Bitmap::new(fresh_header(sb.set_uuid, sync, chunk), true)?;
    let mut new_sb = sb.clone();
    new_sb.feature_map |= feature::BITMAP_OFFSET;
    new_sb.bitmap_offset = if sb.data_offset < sb.super_offset {
        // Metadata 1.0: before the superblock and its 8-sector bad block
        // log, on a 4 KiB boundary, as large as the bits need (mdadm's
        // add_internal_bitmap1 when creating).
        let bits = sb.size * 512 / u64::from(chunk) + 1;
        let room = (bits.div_ceil(8) + BITMAP_SB_LEN as u64).div_ceil(4096) * 8;
        -(i32::try_from(room + 8).unwrap_or(i32::MAX))
    } else {
        (SB_AREA / 512) as i32
    };
    let (_, space) = placement(&new_sb, (SB_AREA / 512) as i64)?;
    if bm.sb.area_bytes() > space {
        return Err(Error::invalid(format!(
            "md bitmap of {} bytes does not fit the {space} bytes between the superblock \
             and the data or bad block log",
            bm.sb.area_bytes()
        )));
    }
    *sb = new_sb;
    Ok(bm)
}

/// The header mdadm writes for a new internal bitmap: version 4, events 0,
/// state 0, daemon_sleep 5, no write-behind.
pub(super) fn fresh_header(uuid: [u8; 16], sync: u64, chunk: u32) -> BitmapSuper {
    BitmapSuper {
        version: BITMAP_MAJOR_HI,
        uuid,
        events: 0,
        events_cleared: 0,
        sync_size: sync,
        state: 0,
        chunksize: chunk,
        daemon_sleep: DEFAULT_DAEMON_SLEEP,
        write_behind: 0,
        sectors_reserved: 0,
        nodes: 0,
        cluster_name: Vec::new(),
    }
}

/// Byte offset on the member of the bitmap area of `sb` (`(super_offset +
/// bitmap_offset) * 512`), when it has one.
pub fn bitmap_byte_offset(sb: &Superblock) -> Option<u64> {
    if sb.feature_map & feature::BITMAP_OFFSET == 0 {
        return None;
    }
    let s = i128::from(sb.super_offset) + i128::from(sb.bitmap_offset);
    u64::try_from(s * 512).ok()
}
