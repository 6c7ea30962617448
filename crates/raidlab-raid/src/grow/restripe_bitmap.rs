//! A restripe of an array with an internal write-intent bitmap, and the
//! metadata a moved data offset must stay clear of.
//!
//! What it decides: whether raidlab carries this array's bitmap through a
//! restripe (md's RAID 4/5/6 one, which counts member sectors from the data
//! offset and so stays as it is; a RAID 10's, which md resizes, and a
//! metadata 0.90 array's are refused as not built), and how much room a
//! member has below its data for the data to move into (md's
//! `super_1_allow_new_offset`: clear of the superblock's first 36 KiB, the
//! bitmap's pages and the bad block log). How the bits are kept while the
//! data moves is `super::walk`'s (offline, served).
//!
//! It must never write anything, nor change the bitmap: a restripe leaves
//! md's bitmap superblock as it was but for its event count.

use super::refused;
use crate::assemble::Assembly;
use raidlab_core::Result;
use raidlab_layout::Level;
use raidlab_md::superblock::{feature, MetadataVersion};

/// md keeps a new data offset clear of the first 36 KiB from a 1.1/1.2
/// superblock (the superblock and room for a bitmap).
const SUPER_KEEP_SECTORS: u64 = 72;

impl Assembly {
    /// Whether the internal bitmap, if the array has one, stays true through
    /// a restripe as raidlab carries it. md restripes a RAID 4/5/6 with its
    /// bitmap in place (its `check_reshape` and `raid5_start_reshape` ask
    /// nothing of it, and mdadm removes none): that bitmap counts each
    /// member's sectors from the data offset, which a restripe keeps, so
    /// its size, chunk and `sync_size` stay as they are, and a write marks
    /// the bits of its stripe in whichever geometry holds it. A RAID 10's
    /// counts array sectors, which md resizes at the reshape's start
    /// (`raid10_start_reshape`); raidlab does not build that yet, nor a
    /// metadata 0.90 restripe with a bitmap (in place or through a backup
    /// file). A RAID 0 has no bitmap.
    pub(super) fn bitmap_restripe_allowed(&self, template: &raidlab_md::Superblock) -> Result<()> {
        let recorded = template.feature_map & feature::BITMAP_OFFSET != 0;
        if self.bitmap.is_none() && !recorded {
            return Ok(());
        }
        let unbuilt = |why: &str| {
            Err(refused(format!(
                "the array has an internal bitmap, and {why}; raidlab does not build that yet: remove it (`raidlab grow --bitmap none`), reshape, then add it back (`--bitmap internal`), or reshape with mdadm --grow; nothing was changed"
            )))
        };
        if self.bitmap.is_none() {
            return unbuilt("it could not be read to carry it through the reshape");
        }
        if template.version() == MetadataVersion::V0_90 {
            return unbuilt(
                "its metadata is 0.90, whose in-place restripes raidlab runs without a bitmap only",
            );
        }
        match self.geometry.level {
            Level::Raid4 | Level::Raid5 | Level::Raid6 => Ok(()),
            Level::Raid10 => unbuilt(
                "a RAID 10's bitmap counts array sectors, which md resizes at the start of a reshape",
            ),
            other => unbuilt(&format!(
                "raidlab carries a bitmap through the restripes of a RAID 4, 5 or 6 only, not of a {}",
                other.name()
            )),
        }
    }
}

/// Sectors free below a member's data for the data to move into, by md's
/// rule for a new offset (`super_1_allow_new_offset`): clear of the
/// superblock's first 36 KiB, of the internal bitmap `bitmap` (the pages it
/// takes after its offset) and of the bad block log (metadata 1.0 keeps its
/// metadata at the end: everything below the data is free).
pub(super) fn room_below_data(
    sb: &raidlab_md::Superblock,
    bitmap: Option<&raidlab_md::bitmap::Bitmap>,
) -> u64 {
    if sb.super_offset >= sb.data_offset {
        return sb.data_offset;
    }
    let mut floor = sb.super_offset + SUPER_KEEP_SECTORS;
    if let Some(b) = bitmap.filter(|_| sb.feature_map & feature::BITMAP_OFFSET != 0) {
        if sb.bitmap_offset > 0 {
            let pages = b.sb.area_bytes().div_ceil(4096);
            floor = floor.max(sb.super_offset + sb.bitmap_offset as u64 + pages * 8);
        }
    }
    if sb.bblog_size != 0 && sb.bblog_offset > 0 {
        floor = floor.max(sb.super_offset + sb.bblog_offset as u64 + u64::from(sb.bblog_size));
    }
    sb.data_offset.saturating_sub(floor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assemble::{create, CreateSpec, Device, NewMember};
    use raidlab_layout::Layout;
    use std::sync::Arc;

    /// md moves a 1.2 member's data no lower than the end of its bitmap's
    /// pages (`super_1_allow_new_offset`): a large bitmap takes room from
    /// the move.
    #[test]
    fn the_data_moves_no_lower_than_the_bitmaps_end() {
        let members = (0..3)
            .map(|i| NewMember {
                device: Device {
                    path: format!("m{i}"),
                    volume: Arc::new(raidlab_devices::MemVolume::new(16 << 20)),
                },
                zeroed: true,
            })
            .collect();
        let spec = CreateSpec {
            level: Level::Raid5,
            layout: Layout::parse(Level::Raid5, None).unwrap(),
            chunk_bytes: 64 << 10,
            spares: 0,
            name: "room".into(),
            force: false,
            bitmap: true,
            bitmap_chunk: None,
            ppl: false,
        };
        let asm = create(&spec, members).unwrap();
        let sb = asm.members[0].sb.clone();
        let mut bm = asm.bitmap.clone().unwrap();
        let plain = room_below_data(&sb, None);
        assert_eq!(room_below_data(&sb, Some(&bm)), plain, "one page fits");
        // 40 pages of bits: 512-byte chunks over 1.3 million sectors.
        bm.sb.chunksize = 512;
        bm.sb.sync_size = 1_300_000;
        let pages = bm.sb.area_bytes() / 4096;
        assert_eq!(pages, 40);
        let end = sb.super_offset + sb.bitmap_offset as u64 + pages * 8;
        assert!(end < sb.data_offset, "{end} {}", sb.data_offset);
        let room = room_below_data(&sb, Some(&bm));
        assert_eq!(room, sb.data_offset - end);
        assert!(room < plain);
    }
}
