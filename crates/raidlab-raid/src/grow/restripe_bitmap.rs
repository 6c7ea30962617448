//! A restripe of an array with an internal write-intent bitmap, and the
//! metadata a moved data offset must stay clear of.
//!
//! What it decides: whether raidlab carries this array's bitmap through a
//! restripe, and what the bitmap becomes when one starts. md's RAID 4/5/6
//! bitmap counts member sectors from the data offset and so stays as it
//! is, as does a RAID 1's taken over as a RAID 5 (`mdadm --grow --level=5`,
//! with or without `--raid-devices`: the mirrors' member sectors are the
//! RAID 5's). A RAID 10's counts array sectors: over the same members (a
//! new chunk or layout) the array keeps its size and the bitmap stays; onto
//! more members md resizes it to the new array size at the reshape's start
//! (`raid10_start_reshape`), its chunk kept where the bits fit, the old
//! bits kept (they name the same array sectors) and the new space's marked
//! to be resynced; a metadata 0.90 RAID 4/5/6 restriped in place keeps its
//! bitmap as a 1.x one; onto fewer members a RAID 10's is kept while the
//! walk runs (it covers more than the truncated array) and resized down to
//! the new array in the end's commit. It also says how much room
//! a member has below its data for the data to move into (md's
//! `super_1_allow_new_offset`: clear of the superblock's first 36 KiB, the
//! bitmap's pages and the bad block log). How the bits are kept while the
//! data moves is `super::walk`'s (offline, served).
//!
//! It must never write anything itself, nor change the bitmap of a
//! restripe md leaves it alone in (only its event count moves).

use super::refused;
use crate::assemble::Assembly;
use raidlab_core::Result;
use raidlab_layout::{Geometry, Level};
use raidlab_md::superblock::feature;

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
    /// the bits of its stripe in whichever geometry holds it. A RAID 1 of
    /// two taken over as a RAID 5 (then restriped onto more members) keeps
    /// it the same way: md ran both with the bitmap in the VM, its
    /// `sync_size` the member size throughout. A RAID 10's counts array
    /// sectors: kept over the same members, resized at the start of a
    /// reshape onto more ([`Assembly::raid10_reshape_bitmap`]) and at the
    /// end of one onto fewer ([`Assembly::raid10_shrunk_bitmap`]). A metadata
    /// 0.90 RAID 4/5/6 restriped in place (more members, or through a
    /// backup file) keeps it the same way: its bitmap sits after the
    /// superblock at the member's end, clear of the data and of the
    /// critical section's backup, and md took one raidlab grew in the VM.
    /// A RAID 0 has no bitmap.
    pub(super) fn bitmap_restripe_allowed(&self, template: &raidlab_md::Superblock) -> Result<()> {
        let recorded = template.feature_map & feature::BITMAP_OFFSET != 0;
        if self.bitmap.is_none() && !recorded {
            return Ok(());
        }
        if self.bitmap.is_none() {
            return bitmap_unbuilt("it could not be read to carry it through the reshape");
        }
        match self.geometry.level {
            Level::Raid1 | Level::Raid4 | Level::Raid5 | Level::Raid6 | Level::Raid10 => Ok(()),
            other => bitmap_unbuilt(&format!(
                "raidlab carries a bitmap through the restripes of a RAID 1 (to 5), 4, 5, 6 or 10 only, not of a {}",
                other.name()
            )),
        }
    }

    /// The bitmap a RAID 10 reshape onto more members starts with, as md's
    /// `raid10_start_reshape` resizes it: `sync_size` the new geometry's
    /// array sectors, the chunk kept unless the bits would not fit the room
    /// the bitmap has (then doubled until they do, md's rule), a chunk
    /// dirty where an old one covering it was, and every chunk past the old
    /// array's end dirty (md marks the new space to be resynced; raidlab's
    /// walk also writes every copy of it). The room counts the data offset
    /// as the reshape moves it (down by `gap` sectors). The reshape is
    /// md's `level` from `old` members to `new` in `new_layout` and
    /// `new_chunk` (sectors). `None` when the bitmap stays as it is: no
    /// bitmap, another level, or the same number of members (md resizes
    /// only when `delta_disks` is not 0), or fewer members (a shrink keeps
    /// it as it is until its end: [`Assembly::raid10_shrunk_bitmap`]).
    /// Nothing is written.
    pub(super) fn raid10_reshape_bitmap(
        &self,
        level: i32,
        (old, new): (usize, usize),
        new_layout: u32,
        new_chunk: u32,
        gap: u64,
    ) -> Result<Option<raidlab_md::bitmap::Bitmap>> {
        let Some(bitmap) = self.bitmap.as_ref() else {
            return Ok(None);
        };
        if level != 10 || new <= old {
            return Ok(None);
        }
        let template = self.grow_template()?;
        let grown = Geometry::from_md(10, new_layout, new_chunk, new as u32, template.size)?;
        let sync = grown.array_bytes() / super::SECTOR;
        let room = self.bitmap_room(gap)?;
        let mut bm = raidlab_md::bitmap::resized_to(bitmap, sync, room, true).map_err(|e| {
            refused(format!(
                "the array's bitmap resized to the reshaped RAID 10's {sync} sectors, as md resizes it: {e}; remove it (`raidlab grow --bitmap none`), reshape, then add it back; nothing was changed"
            ))
        })?;
        bm.sb.events_cleared = bitmap.sb.events_cleared;
        Ok(Some(bm))
    }
}

impl Assembly {
    /// The bitmap of a RAID 10 grow the superblocks record, made to cover
    /// the new array where it does not: md writes its bitmap with the old
    /// `sync_size` while its reshape runs (it resizes it only in memory),
    /// so a grow md stopped carries a bitmap too small for the array it
    /// ends in, and writes to the new space would mark no bit. Resized as
    /// `Assembly::raid10_reshape_bitmap` resizes it at a start, in memory
    /// only (the caller's next commit writes it). Returns whether it
    /// changed it. Called at the walk's start (`super::walk`), before its
    /// first commit.
    pub fn raid10_bitmap_for_recorded_grow(&mut self) -> Result<bool> {
        let Some(Ok(r)) = self.reshape() else {
            return Ok(false);
        };
        let template = self.grow_template()?;
        let want = r.new.array_bytes() / super::SECTOR;
        let small = self.bitmap.as_ref().is_some_and(|b| b.sb.sync_size < want);
        if r.new.level != Level::Raid10 || r.new.raid_disks <= r.old.raid_disks || !small {
            return Ok(false);
        }
        let gap = i64::from(template.new_offset).unsigned_abs();
        let members = (r.old.raid_disks, r.new.raid_disks);
        let (layout, chunk) = (template.new_layout, template.new_chunk);
        match self.raid10_reshape_bitmap(10, members, layout, chunk, gap)? {
            Some(b) => {
                self.bitmap = Some(b);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

impl Assembly {
    /// The bitmap a RAID 10 shrink `r` ends with: resized down to the fewer
    /// members' array, as md resizes it to the new geometry's size
    /// (`raid10_start_reshape` does it at the start, in memory). raidlab
    /// keeps the larger bitmap on disk while the walk runs and writes the
    /// smaller one only in the end's commit, beside the superblocks that
    /// record the new geometry: a cut before that commit leaves a bitmap
    /// that covers more than the array, never less (the array md or
    /// raidlab assembles mid-shrink is the truncated one, its writes all
    /// inside the new geometry's size), and a cut inside it leaves either
    /// size beside either superblock, both covering the array. The chunk
    /// stays (fewer bits always fit), the bits of the array that remains
    /// are kept, those past its end dropped. `None` when it stays as it is:
    /// no bitmap, not a RAID 10 shrink, or already that size. Nothing is
    /// written.
    pub(super) fn raid10_shrunk_bitmap(
        &self,
        r: &raidlab_layout::reshape::Reshape,
    ) -> Result<Option<raidlab_md::bitmap::Bitmap>> {
        let Some(bitmap) = self.bitmap.as_ref() else {
            return Ok(None);
        };
        let sync = r.new.array_bytes() / super::SECTOR;
        let shrink = r.new.level == Level::Raid10 && r.new.raid_disks < r.old.raid_disks;
        if !shrink || bitmap.sb.sync_size <= sync {
            return Ok(None);
        }
        let mut bm = raidlab_md::bitmap::resized_to(bitmap, sync, bitmap.sb.area_bytes(), false)
            .map_err(|e| {
                refused(format!(
                    "the array's bitmap resized to the shrunk RAID 10's {sync} sectors: {e}; the reshape is not ended (run it again, or remove the bitmap with `raidlab grow --bitmap none` first)"
                ))
            })?;
        bm.sb.events_cleared = bitmap.sb.events_cleared;
        Ok(Some(bm))
    }

    /// A RAID 10 bitmap of another size than the array, no reshape
    /// recorded, made to fit it in memory (the next commit writes it), as
    /// md's bitmap load sizes the bitmap to the array it runs whatever the
    /// header says. Larger: what a cut inside raidlab's shrink end leaves
    /// on a member whose superblock took the end and whose bitmap did not
    /// (that copy is also out of date: every bit set); resized down, only
    /// when larger than what mdadm creates for this geometry too (its
    /// `sync_size` is not rounded to chunks, md's array is), so a bitmap md
    /// or mdadm wrote stays as it is. Smaller: what a cut inside md's
    /// shrink start leaves (md writes the resized bitmap before the
    /// superblocks that record the shrink: seen in the VM, its bitmap
    /// mid-shrink has the fewer members' size); raidlab marks a write's
    /// bits only inside `sync_size`, so it is resized up, the chunks it
    /// did not cover marked dirty (a write there since may have marked
    /// nothing). Called at assembly.
    pub(crate) fn raid10_bitmap_fitted(&mut self) -> Result<()> {
        if self.geometry.level != Level::Raid10 || self.reshape().is_some() {
            return Ok(());
        }
        let Some(bitmap) = self.bitmap.as_ref() else {
            return Ok(());
        };
        let array = self.geometry.array_bytes() / super::SECTOR;
        let created = raidlab_md::bitmap::mdadm_sync_size(&self.grow_template()?);
        let sync = bitmap.sb.sync_size;
        if sync >= array && sync <= array.max(created) {
            return Ok(());
        }
        let bm = raidlab_md::bitmap::resized_to(bitmap, array, self.bitmap_room(0)?, true)?;
        self.bitmap = Some(bm);
        Ok(())
    }
}

impl Assembly {
    /// The bytes the bitmap may take where it sits, the least over the
    /// members in service, with the data offset moved down by `gap`
    /// sectors (a reshape's move; 0 where the data stays).
    fn bitmap_room(&self, gap: u64) -> Result<u64> {
        let mut room = u64::MAX;
        for m in self.members.iter().filter(|m| m.is_live()) {
            let sb = &m.sb;
            let mut r = raidlab_md::bitmap::room_bytes(sb)
                .map_err(|e| e.on_device(m.device.path.clone()))?;
            if sb.super_offset < sb.data_offset && sb.bitmap_offset > 0 {
                let start = sb.super_offset + sb.bitmap_offset as u64;
                let below = sb.data_offset.saturating_sub(gap);
                r = r.min(below.saturating_sub(start) * super::SECTOR);
            }
            room = room.min(r);
        }
        Ok(room)
    }
}

/// The refusal of a restripe whose bitmap raidlab does not carry, `why`.
pub(super) fn bitmap_unbuilt(why: &str) -> Result<()> {
    Err(refused(format!(
        "the array has an internal bitmap, and {why}; raidlab does not build that yet: remove it (`raidlab grow --bitmap none`), reshape, then add it back (`--bitmap internal`), or reshape with mdadm --grow; nothing was changed"
    )))
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
