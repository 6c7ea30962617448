//! The consistency policy of an existing array: add or remove the internal
//! write-intent bitmap (`--bitmap internal|none`) and switch RAID 5 between
//! resync and the partial parity log (`--consistency-policy resync|ppl`),
//! with md's and mdadm's restrictions: one policy at a time, PPL for RAID 5
//! only, a bitmap only where there is redundancy, and only where the member
//! has room for it. It writes metadata only (superblocks, the new bitmap, an
//! empty PPL area), never data.

use super::{refused, SECTOR};
use crate::assemble::Assembly;
use raidlab_core::{Error, ErrorKind, Op, Result, Volume};
use raidlab_layout::Level;
use raidlab_md::superblock::{feature, MetadataVersion};
use serde::Serialize;
use std::sync::Arc;

/// A consistency policy as `--consistency-policy` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    Resync,
    Bitmap,
    Ppl,
    Journal,
}

impl Policy {
    pub fn name(self) -> &'static str {
        match self {
            Policy::Resync => "resync",
            Policy::Bitmap => "bitmap",
            Policy::Ppl => "ppl",
            Policy::Journal => "journal",
        }
    }
}

/// Sectors of an empty PPL header (4 KiB).
const PPL_HEADER_SECTORS: i64 = (raidlab_md::ppl::PPL_HEADER_SIZE / 512) as i64;

impl Assembly {
    /// The array's consistency policy now, from its superblocks.
    pub fn consistency_policy(&self) -> Policy {
        if self.has_journal() {
            Policy::Journal
        } else if self.has_ppl() {
            Policy::Ppl
        } else if self.bitmap.is_some() {
            Policy::Bitmap
        } else {
            Policy::Resync
        }
    }

    /// Add (`add`) or remove md's internal write-intent bitmap, as `mdadm
    /// --grow --bitmap=internal|none` does. A new bitmap goes where mdadm
    /// puts one on a member in use (raidlab-md's `grow_internal`), with
    /// `chunk` bytes per bit or mdadm's choice; it starts clean on an array in
    /// sync, all dirty on one with a resync pending. Refused with mdadm's
    /// reason: a bitmap already there or none to remove, a level without
    /// redundancy, a partial parity log or a write journal in use, no room
    /// on a member; and while a rebuild is pending.
    pub fn grow_bitmap(&mut self, add: bool, chunk: Option<u32>) -> Result<()> {
        let has = self.bitmap.is_some()
            || self
                .members
                .iter()
                .any(|m| m.is_live() && m.sb.feature_map & feature::BITMAP_OFFSET != 0);
        if !add {
            if !has {
                return Err(Error::invalid(
                    "no bitmap found on the array (mdadm: \"no bitmap found\"): nothing to remove",
                ));
            }
            self.grow_check_idle("removing the bitmap")?;
            self.bitmap = None;
            return self.commit(|sb| sb.feature_map &= !feature::BITMAP_OFFSET);
        }
        if has {
            return Err(Error::invalid(
                "the array already has an internal bitmap (mdadm: \"bitmap already present\"): nothing to add; --bitmap none removes it",
            ));
        }
        if self.geometry.level == Level::Raid0 {
            return Err(Error::invalid(format!(
                "a write-intent bitmap is not meaningful for {}: it has no redundancy to resync (mdadm: \"Bitmaps not meaningful with level\"); nothing was changed",
                self.geometry.level.name()
            )));
        }
        match self.consistency_policy() {
            Policy::Ppl => {
                return Err(refused(
                    "the array keeps a partial parity log (mdadm: \"Cannot add bitmap to array with PPL\"): switch it to resync first (`raidlab grow --consistency-policy resync`); nothing was changed".into(),
                ))
            }
            Policy::Journal => {
                return Err(refused(
                    "the array has a write journal: md allows one consistency policy, and a journaled array takes no bitmap; nothing was changed".into(),
                ))
            }
            _ => {}
        }
        self.grow_check_idle("adding a bitmap")?;
        let dirty = !self.consistent();
        let mut chunk = chunk;
        let mut first = None;
        let mut new_sbs = Vec::new();
        for (i, m) in self.members.iter().enumerate().filter(|(_, m)| m.is_live()) {
            let mut sb = m.sb.clone();
            let bm = raidlab_md::bitmap::grow_internal(&mut sb, chunk, dirty).map_err(|e| {
                Error::new(
                    ErrorKind::Refused,
                    Op::Plan,
                    format!("{}; nothing was changed", e.message),
                )
                .on_device(m.device.path.clone())
            })?;
            // One chunk for the array: the first member's, as mdadm does.
            chunk = Some(bm.sb.chunksize);
            first.get_or_insert(bm);
            new_sbs.push((i, sb));
        }
        let Some(mut bm) = first else {
            return Err(Error::invalid("no member in service"));
        };
        for (i, sb) in new_sbs {
            self.members[i].sb = sb;
        }
        bm.sb.events_cleared = self.events + 1;
        self.bitmap = Some(bm);
        self.commit(|_| {})
    }

    /// Switch the consistency policy (`mdadm --grow --consistency-policy`):
    /// resync <-> ppl on RAID 5. `bitmap` is refused with the way md takes
    /// it (`--bitmap internal`), `journal` as not something grow adds.
    pub fn grow_policy(&mut self, to: Policy) -> Result<()> {
        match to {
            Policy::Bitmap => {
                return Err(Error::invalid(
                    "--consistency-policy bitmap is not how md adds a bitmap (mdadm: \"Operation not supported for consistency policy bitmap\"): use --bitmap internal",
                ))
            }
            Policy::Journal => {
                return Err(Error::invalid(
                    "--consistency-policy journal cannot be set by grow (mdadm: \"Operation not supported for consistency policy journal\"): md adds a journal with --add-journal, which raidlab does not do yet",
                ))
            }
            _ => {}
        }
        let template = self.grow_template()?;
        if to == Policy::Ppl && template.version() == MetadataVersion::V0_90 {
            return Err(Error::invalid(
                "metadata 0.90 has no partial parity log (mdadm: \"0.90 metadata does not support PPL\")",
            ));
        }
        if self.geometry.level != Level::Raid5 {
            return Err(Error::invalid(format!(
                "the consistency policy of {} cannot be changed: resync and ppl are RAID 5's choice (mdadm: \"Operation not supported for array level {}\")",
                self.geometry.level.name(),
                self.geometry.level.md_level()
            )));
        }
        let now = self.consistency_policy();
        if now == to {
            return Err(Error::invalid(format!(
                "the consistency policy is already {} (mdadm: \"Consistency policy is already {}\"): nothing to do",
                to.name(),
                to.name()
            )));
        }
        if matches!(now, Policy::Bitmap | Policy::Journal) {
            return Err(refused(format!(
                "the consistency policy is {}, which cannot change to {} (mdadm: \"Current consistency policy is {}, cannot change to {}\"){}; nothing was changed",
                now.name(),
                to.name(),
                now.name(),
                to.name(),
                if now == Policy::Bitmap {
                    ": remove the bitmap first with --bitmap none"
                } else {
                    ""
                }
            )));
        }
        if to == Policy::Resync {
            return self.commit(|sb| sb.feature_map &= !(feature::PPL | feature::MULTIPLE_PPLS));
        }
        if template.version() == MetadataVersion::V1_0 {
            return Err(Error::new(
                ErrorKind::Refused,
                Op::Plan,
                "a partial parity log on metadata 1.0 is not built yet (md keeps it before the superblock at the member's end): use mdadm --grow --consistency-policy=ppl; nothing was changed",
            ));
        }
        if self.geometry.chunk_bytes > raidlab_md::ppl::MULTIPLE_PPL_AREA_SIZE_SUPER1 - 4096 {
            return Err(Error::invalid(format!(
                "chunk {} KiB is too large for a partial parity log: one stripe's partial parity must fit md's 1 MiB log area",
                self.geometry.chunk_bytes / 1024
            )));
        }
        // Every member's log area first, all checked before anything is
        // written.
        let mut writes = crate::metadata_plan::DeviceWrites::default();
        let mut table: Vec<Option<Arc<dyn Volume>>> = Vec::new();
        let mut new_sbs = Vec::new();
        for (i, m) in self.members.iter().enumerate().filter(|(_, m)| m.is_live()) {
            let sb = with_ppl(&m.sb).map_err(|e| e.on_device(m.device.path.clone()))?;
            writes
                .push_empty_ppl(table.len(), &sb)
                .map_err(|e| e.on_device(m.device.path.clone()))?;
            table.push(Some(Arc::clone(&m.device.volume)));
            new_sbs.push((i, sb));
        }
        writes.run(self.executor().as_ref(), &table)?;
        for (i, sb) in new_sbs {
            self.members[i].sb = sb;
        }
        self.commit(|_| {})
    }
}

/// `sb` with a partial parity log where mdadm puts one on a member in use
/// (metadata 1.1/1.2): right after the 4 KiB superblock area, up to the bad
/// block log (or the data), at most 1 MiB, and no more than one stripe's
/// worth (a header and one chunk, at least 128 KiB) when the room is below
/// 1 MiB; refused when fewer than 8 KiB are free.
fn with_ppl(sb: &raidlab_md::Superblock) -> Result<raidlab_md::Superblock> {
    let area = 8i64;
    let space = if sb.bblog_offset != 0 {
        i64::from(sb.bblog_offset) - area
    } else {
        sb.data_offset as i64 - sb.super_offset as i64 - area
    };
    if space < PPL_HEADER_SECTORS + 8 {
        return Err(refused(format!(
            "not enough space for a partial parity log: {} KiB between the superblock and the {} (mdadm: \"Not enough space to add ppl\"); nothing was changed",
            space.max(0) / 2,
            if sb.bblog_offset != 0 { "bad block log" } else { "data" }
        )));
    }
    let full = (raidlab_md::ppl::MULTIPLE_PPL_AREA_SIZE_SUPER1 / SECTOR) as i64;
    let space = if space >= full {
        full
    } else {
        let chunk = i64::from(sb.chunksize);
        space.min(PPL_HEADER_SECTORS + chunk.max(256))
    };
    let mut new = sb.clone();
    new.feature_map |= feature::PPL;
    new.bitmap_offset = ((space as u32) << 16 | (area as u32 & 0xffff)) as i32;
    raidlab_md::ppl::ppl_area(&new)?;
    Ok(new)
}
