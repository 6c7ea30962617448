//! Metadata 0.90's internal bitmap: where md keeps it (no offset field: right
//! after the 4 KiB superblock, in the 60 KiB left of the 64 KiB reserved at
//! the end of the member), how mdadm sizes a new one, and the byte order of
//! the uuid it holds.
//!
//! It decides only these 0.90 specifics; the header, the bits and their I/O
//! are the parent module's. It must never place a 0.90 bitmap anywhere else.

use super::{fresh_header, Bitmap};
use crate::sb090;
use crate::superblock::{feature, Superblock};
use raidlab_core::Error;

/// [`placement`] for metadata 0.90: md keeps the bitmap at a fixed place,
/// right after the 4 KiB superblock, in the rest of the 64 KiB reserved at the
/// end of the member (60 KiB).
pub(super) fn placement_v090(sb: &Superblock, off: i64) -> Result<(u64, u64), Error> {
    if off != i64::from(sb090::BITMAP_OFFSET_SECTORS) {
        return Err(Error::invalid(format!(
            "md superblock field bitmap_offset is {off} sectors; metadata 0.90 keeps its \
             bitmap at {} sectors, right after the superblock",
            sb090::BITMAP_OFFSET_SECTORS
        )));
    }
    let start = sb.super_offset + sb090::BITMAP_OFFSET_SECTORS as u64;
    Ok((start * 512, sb090::BITMAP_ROOM_SECTORS * 512))
}

/// [`new_internal`] for metadata 0.90, as mdadm's `add_internal_bitmap0`
/// sizes it: the smallest chunk (from 4 KiB, doubling) whose bits fit the 60
/// KiB after the superblock, or `chunk` when given and at least that.
pub(super) fn new_internal_090(
    sb: &mut Superblock,
    sync: u64,
    chunk: Option<u32>,
) -> Result<Bitmap, Error> {
    let max_bits = (sb090::BITMAP_ROOM_SECTORS * 512) * 8;
    let mut min = 4096u64;
    let mut bits = sync * 512 / min + 1;
    while bits > max_bits {
        min *= 2;
        bits = bits.div_ceil(2);
    }
    let chunk = match chunk {
        None => u32::try_from(min).map_err(|_| {
            Error::invalid(format!(
                "md bitmap chunk for {sync} sectors in 60 KiB overflows 32 bits"
            ))
        })?,
        Some(c) if c.is_power_of_two() && u64::from(c) >= min => c,
        Some(c) => {
            return Err(Error::invalid(format!(
                "md bitmap chunk {c} bytes: expected a power of two of at least {min} bytes \
                 (so {sync} sectors fit the 60 KiB a 0.90 bitmap has)"
            )))
        }
    };
    let bm = Bitmap::new(fresh_header(uuid_090_host(&sb.set_uuid), sync, chunk), true)?;
    let mut new_sb = sb.clone();
    new_sb.feature_map |= feature::BITMAP_OFFSET;
    new_sb.bitmap_offset = sb090::BITMAP_OFFSET_SECTORS;
    let (_, space) = super::placement(&new_sb, 0)?;
    if bm.sb.area_bytes() > space {
        return Err(Error::invalid(format!(
            "md bitmap of {} bytes does not fit the {space} bytes after a 0.90 superblock",
            bm.sb.area_bytes()
        )));
    }
    *sb = new_sb;
    Ok(bm)
}

/// The uuid md writes into a 0.90 bitmap: the superblock's four uuid words as
/// they lie in memory on the host (md copies them raw), where raidlab's
/// `set_uuid` has each word big-endian as mdadm prints it.
pub(super) fn uuid_090_host(set_uuid: &[u8; 16]) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (o, w) in out.chunks_exact_mut(4).zip(set_uuid.chunks_exact(4)) {
        o.copy_from_slice(&u32::from_be_bytes([w[0], w[1], w[2], w[3]]).to_ne_bytes());
    }
    out
}
