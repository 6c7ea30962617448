//! An internal bitmap for an array that already exists (`mdadm --grow
//! --bitmap=internal`) and a bitmap carried over a change of the member size
//! (md's bitmap resize).
//!
//! It decides where a bitmap added later goes and how large its chunk is,
//! by the room mdadm finds on a member already in use (which is not the room
//! it reserves at create), and how the bits of a resized bitmap map onto the
//! old ones. It must never place a bitmap over the data, the bad block log or
//! a partial parity log, and never writes anything itself.

use super::{fresh_header, min_chunk, new_internal_090, placement, Bitmap};
use super::{BITMAP_SB_LEN, DEFAULT_CHUNK, MAX_DEFAULT_ROOM_SECTORS};
use crate::superblock::{feature, Superblock, SB_AREA};
use raidlab_core::Error;

/// The sectors mdadm leaves for a bad block log on a metadata 1.0 member
/// when it finds none recorded (8: 4 KiB).
const BBL_SECTORS: i64 = 8;

/// Add an internal bitmap to the member `sb` describes, as `mdadm --grow
/// --bitmap=internal` does on a kernel that lets it choose the offset:
///
/// * metadata 1.1/1.2: after the 4 KiB superblock area (offset 8), in the
///   room up to the bad block log (or the data when there is none, less the
///   8 sectors mdadm keeps for a log);
/// * metadata 1.0: before the superblock and its bad block log, in the room
///   between the end of the data and the superblock; when that room is
///   smaller than 3 KiB mdadm puts the bitmap inside the superblock's 4 KiB,
///   which raidlab does not write yet (refused);
/// * metadata 0.90: where md always keeps it (60 KiB after the superblock).
///
/// Without `chunk` the room counts at most 128 KiB and the chunk is at
/// least 64 MiB, as mdadm picks it. `dirty`: every bit set (the whole array
/// must be resynced), else every bit clear. Refused with the reason when
/// there is no room or the level has no redundancy; `sb` is changed only on
/// success.
pub fn grow_internal(
    sb: &mut Superblock,
    chunk: Option<u32>,
    dirty: bool,
) -> Result<Bitmap, Error> {
    if sb.level < 1 {
        return Err(Error::invalid(format!(
            "a write-intent bitmap is not meaningful for level {} (no redundancy to resync)",
            sb.level
        )));
    }
    if sb.feature_map & (feature::PPL | feature::MULTIPLE_PPLS | feature::JOURNAL) != 0 {
        return Err(Error::invalid(
            "the array keeps a partial parity log or a write journal: md allows one consistency policy",
        ));
    }
    let sync = super::mdadm_sync_size(sb);
    if sb.v0_90.is_some() {
        let mut bm = new_internal_090(sb, sync, chunk)?;
        if !dirty {
            bm.clear_all();
        }
        return Ok(bm);
    }
    let area = (SB_AREA / 512) as i64;
    let (offset, mut room): (Option<i64>, i64) = if sb.data_offset > sb.super_offset {
        let room = if sb.bblog_size != 0 {
            i64::from(sb.bblog_offset) - area
        } else {
            sb.data_offset as i64 - sb.super_offset as i64 - area - BBL_SECTORS
        };
        (Some(area), room)
    } else {
        let gap = sb.super_offset as i64 - sb.data_offset as i64 - sb.data_size as i64;
        let bbl = BBL_SECTORS
            .max(i64::from(sb.bblog_size))
            .max(-i64::from(sb.bblog_offset));
        if gap < 6 {
            return Err(Error::invalid(format!(
                "no room for a bitmap between the end of the data and the metadata 1.0 superblock ({gap} sectors); md would put it inside the superblock's 4 KiB, which raidlab does not write yet: use mdadm --grow --bitmap=internal"
            )));
        }
        (None, gap - bbl)
    };
    if chunk.is_none() {
        room = room.min(MAX_DEFAULT_ROOM_SECTORS as i64);
    }
    let no_room = || {
        Error::invalid(format!(
            "no room for an md bitmap on this member: {} sectors free before the {} (mdadm: \"failed to create internal bitmap\")",
            room.max(0),
            if sb.data_offset > sb.super_offset { "bad block log or data" } else { "superblock" }
        ))
    };
    if room <= 1 {
        return Err(no_room());
    }
    let min = min_chunk(sync, room as u64).ok_or_else(no_room)?;
    let chunk = match chunk {
        None => u32::try_from(min.max(u64::from(DEFAULT_CHUNK))).map_err(|_| {
            Error::invalid(format!(
                "md bitmap chunk for {sync} sectors overflows 32 bits"
            ))
        })?,
        Some(c) if c.is_power_of_two() && u64::from(c) >= min => c,
        Some(c) => {
            return Err(Error::invalid(format!(
                "bitmap chunk {c} bytes: expected a power of two of at least {min} bytes, so the bits of {sync} sectors fit the {room} sectors free on the member"
            )))
        }
    };
    let mut bm = Bitmap::new(fresh_header(sb.set_uuid, sync, chunk), dirty)?;
    let mut new_sb = sb.clone();
    new_sb.feature_map |= feature::BITMAP_OFFSET;
    new_sb.bitmap_offset = match offset {
        Some(o) => o as i32,
        None => {
            let bbl = BBL_SECTORS
                .max(i64::from(sb.bblog_size))
                .max(-i64::from(sb.bblog_offset));
            let blocks = (bm.sb.bits_bytes() + BITMAP_SB_LEN as u64).div_ceil(4096) as i64;
            -(i32::try_from(blocks * 8 + bbl).map_err(|_| no_room())?)
        }
    };
    let (_, space) = placement(&new_sb, 2)?;
    if bm.sb.area_bytes() > space {
        return Err(no_room());
    }
    if !dirty {
        bm.clear_all();
    }
    *sb = new_sb;
    Ok(bm)
}

/// The bytes the bitmap of `sb` may use where it sits: up to the data, the
/// bad block log or the superblock, whichever comes first.
pub fn room_bytes(sb: &Superblock) -> Result<u64, Error> {
    placement(sb, 2).map(|(_, room)| room)
}

/// The bitmap `old` carried over to `sb`'s new member size, as md resizes
/// its bitmap when the component size changes: the chunk stays when the bits
/// still fit `room_bytes` (the bitmap's place on the member), else it doubles
/// until they do; a new chunk is dirty where any old chunk it covers was;
/// with `mark_new`, every chunk past the old size is dirty too (md resyncs
/// the new space).
pub fn resized(
    old: &Bitmap,
    sb: &Superblock,
    room_bytes: u64,
    mark_new: bool,
) -> Result<Bitmap, Error> {
    resized_to(old, super::mdadm_sync_size(sb), room_bytes, mark_new)
}

/// [`resized`] to `sync` sectors given outright: a RAID 10's bitmap counts
/// array sectors, which a reshape onto more or fewer members changes while
/// the component size stays (md's `raid10_start_reshape` resizes it to the
/// new geometry's array size, its chunk kept where the bits fit).
pub fn resized_to(
    old: &Bitmap,
    sync: u64,
    room_bytes: u64,
    mark_new: bool,
) -> Result<Bitmap, Error> {
    let mut header = old.sb.clone();
    header.sync_size = sync;
    while header.area_bytes() > room_bytes {
        header.chunksize = header.chunksize.checked_mul(2).ok_or_else(|| {
            Error::invalid(format!(
                "the bitmap of {sync} sectors does not fit its {room_bytes} bytes with any chunk"
            ))
        })?;
    }
    let mut bm = Bitmap::new(header, false)?;
    let old_cs = old.sb.chunk_sectors();
    for c in 0..old.chunks() {
        if old.is_dirty(c) {
            let start = c * old_cs;
            if start < sync {
                let len = old_cs.min(sync - start);
                bm.set_sectors(start, len)?;
            }
        }
    }
    let old_sync = old.sb.sync_size;
    if mark_new && sync > old_sync {
        bm.set_sectors(old_sync, sync - old_sync)?;
    }
    Ok(bm)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(size: u64) -> Superblock {
        let array = crate::NewArray {
            uuid: [3; 16],
            name: "g".into(),
            level: 1,
            layout: 0,
            chunk_sectors: 0,
            raid_disks: 2,
            member_sectors: size,
            data_offset_sectors: 2048,
            total_devices: 2,
            clean: true,
        };
        crate::new_member_at(
            &array,
            crate::MetadataVersion::V1_2,
            0,
            0,
            [4; 16],
            size + 2048,
            0,
        )
    }

    #[test]
    fn grown_bitmap_sits_after_the_superblock_and_before_the_bad_block_log() {
        let mut sb = member(64 << 11);
        let bm = grow_internal(&mut sb, Some(64 << 10), false).unwrap();
        assert_eq!(sb.bitmap_offset, 8);
        assert!(sb.feature_map & feature::BITMAP_OFFSET != 0);
        assert_eq!(bm.sb.sync_size, sb.size);
        assert_eq!(bm.dirty_count(), 0);
        let (_, room) = placement(&sb, 8).unwrap();
        assert!(bm.sb.area_bytes() <= room);
        let again = grow_internal(&mut sb.clone(), Some(512), false);
        assert!(again.is_err(), "a chunk too small for the room is refused");
    }

    #[test]
    fn resize_keeps_dirty_bits_and_marks_the_new_space() {
        let mut sb = member(64 << 11);
        let mut bm = grow_internal(&mut sb, Some(1 << 20), false).unwrap();
        bm.set(3).unwrap();
        let mut bigger = sb.clone();
        bigger.size = 128 << 11;
        let r = resized(&bm, &bigger, 4096, true).unwrap();
        assert_eq!(r.sb.chunksize, 1 << 20);
        assert!(r.is_dirty(3));
        assert!(!r.is_dirty(4));
        assert_eq!(r.dirty_count(), 1 + 64);
        // No room for more bits: the chunk doubles, dirty bits follow.
        let mut huge = sb.clone();
        huge.size = (4096 - 256) * 8 * 2048 * 2;
        let r2 = resized(&bm, &huge, 4096, false).unwrap();
        assert_eq!(r2.sb.chunksize, 2 << 20);
        assert!(r2.is_dirty(1));
        assert_eq!(r2.dirty_count(), 1);
    }
}
