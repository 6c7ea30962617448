//! A RAID 10 restriped onto more members (`--raid-devices N` up), as md
//! (3.5 and later) reshapes one: in the near and offset layouts only, the
//! data offset moved down on every member and the walk going forwards, with
//! no backup file.
//!
//! What it decides: whether md would reshape this RAID 10 this way at all,
//! refusing with md's reason (mdadm's `analyse_change`, the kernel's
//! `raid10_check_reshape`: never the far layout, never to it, never another
//! number of copies; the data offset must move by at least the taller row
//! of the two geometries, `raid10_start_reshape`) or with raidlab's (fewer
//! members, a new chunk or layout: not built), and nothing written; and
//! what md records while it runs (the same level, layout and chunk,
//! `delta_disks` the members added). How far the data offset moves is
//! [`Assembly::reshape_gap`]'s rule, never below the layout crate's
//! `Reshape::forward_min_gap` for this reshape.
//!
//! The walk (and which RAID 10 reshapes it carries on), its checkpoints and
//! its last commit are `super::reshape`'s: a running array of the new
//! geometry writes every copy of what it reads from the old one. Nothing
//! here reads or writes data.

use super::reshape::{room_below_data, ReshapePlan, ReshapeRequest};
use super::{refused, SECTOR};
use crate::assemble::Assembly;
use raidlab_core::{Error, ErrorKind, Op, Result};
use raidlab_layout::reshape::{MdReshape, Reshape};
use raidlab_layout::{Geometry, Layout, Level, Raid10Layout};
use raidlab_md::superblock::MetadataVersion;

impl Assembly {
    /// Check `--raid-devices N` (and any `--layout`/`--chunk`) of a RAID 10
    /// against md's rules, with `coming` devices about to be added as
    /// spares; nothing is written.
    pub(crate) fn raid10_reshape_check(
        &self,
        req: &ReshapeRequest,
        coming: usize,
        what: &str,
    ) -> Result<ReshapePlan> {
        let g = self.geometry;
        let old = g.raid_disks;
        self.grow_check_no_reshape()?;
        let template = self.grow_template()?;
        let layout = Raid10Layout::from_md(template.layout)?;
        if layout.far > 1 && !layout.offset {
            return Err(refused(format!(
                "{what}: md does not reshape a RAID 10 in the far layout ({}; mdadm: \"Cannot reshape RAID10 in far-mode\"): its far copies lie a fixed fraction of each member apart, and that fraction moves with every member added; make a new array in the near or offset layout and copy the data over; nothing was changed",
                layout.name()
            )));
        }
        if let Some(name) = &req.layout {
            let Layout::Raid10(to) = Layout::parse(Level::Raid10, Some(name))? else {
                return Err(Error::invalid(format!(
                    "{what}: {name} is not a RAID 10 layout"
                )));
            };
            if to.far > 1 && !to.offset {
                return Err(refused(format!(
                    "{what}: md does not reshape a RAID 10 into the far layout (mdadm: \"Cannot reshape RAID10 to far-mode\"); nothing was changed"
                )));
            }
            if to.copies() != layout.copies() {
                return Err(refused(format!(
                    "{what}: {} keeps {} copies of each chunk and {} keeps {}, and md never changes the number of copies (mdadm: \"Cannot change number of copies when reshaping RAID10\"); nothing was changed",
                    layout.name(),
                    layout.copies(),
                    to.name(),
                    to.copies()
                )));
            }
            if to != layout {
                return Err(super::reshape_not_built(&format!(
                    "{what} (md switches a RAID 10 between the near and offset layouts; raidlab does not yet)"
                )));
            }
        }
        let chunk = template.chunksize;
        if let Some(c) = req.chunk_bytes.filter(|&c| c != u64::from(chunk) * SECTOR) {
            return Err(super::reshape_not_built(&format!(
                "{what} (a new chunk of {} KiB: md changes a RAID 10's chunk in a reshape; raidlab does not yet)",
                c / 1024
            )));
        }
        let n = req.raid_devices.unwrap_or(old);
        if n == old {
            return Err(Error::invalid(format!(
                "{what}: the array already is that: no change requested"
            )));
        }
        if n < old {
            return Err(super::reshape_not_built(&format!(
                "{what} (fewer members: md moves a RAID 10's data offset up and reshapes it backwards, shrinking the array first)"
            )));
        }
        if n > usize::from(raidlab_md::ROLE_SPARE) - 3 {
            return Err(Error::invalid(format!(
                "--raid-devices {n} is more than md allows"
            )));
        }
        Geometry::from_md(10, template.layout, chunk, n as u32, template.size)
            .map_err(|e| refused(format!("{what}: {}; nothing was changed", e.message)))?;
        if template.version() == MetadataVersion::V0_90 {
            return Err(refused(format!(
                "{what}: metadata 0.90 has no new data offset, and md reshapes a RAID 10 only by moving it (mdadm: \"Metadata version doesn't support data_offset changes\"); nothing was changed"
            )));
        }
        self.restripe_allowed(what)?;
        let spares = self.spare_count();
        let need = n - old;
        if spares + coming < need {
            return Err(refused(format!(
                "need {need} spare(s) for the new member slots and only have {} (mdadm: \"Need {need} spares to avoid degraded array\"): give the new members with --add; nothing was changed",
                spares + coming
            )));
        }
        // The least move of the data offset: md's (one row) or, where the
        // walk's row rule needs it, two.
        let probe = Reshape::from_md(&MdReshape {
            level: 10,
            layout: template.layout,
            chunk_sectors: chunk,
            raid_disks: n as u32,
            new_level: 10,
            new_layout: template.layout,
            new_chunk_sectors: chunk,
            delta_disks: need as i32,
            position_sectors: 0,
            backwards: false,
            member_sectors: template.size,
        })?;
        let least = probe.forward_min_gap() / SECTOR;
        for m in self.members.iter().filter(|m| m.is_live()) {
            let room = room_below_data(&m.sb);
            if room < least {
                return Err(Error::new(
                    ErrorKind::Refused,
                    Op::Plan,
                    format!(
                        "{}: {} KiB free below the data (data offset {} sectors), and a RAID 10 reshape onto more members moves the data offset down by at least {} KiB (mdadm: \"Insufficient head-space for reshape\"); md has no backup-file way for RAID 10; nothing was changed",
                        m.device.path,
                        room / 2,
                        m.sb.data_offset,
                        least / 2
                    ),
                ));
            }
        }
        let gap = self.reshape_gap(least)?;
        Ok(ReshapePlan {
            old_raid_devices: old,
            new_raid_devices: n,
            gap_sectors: gap,
            level: 10,
            layout: template.layout,
            new_layout: template.layout,
            chunk_sectors: chunk,
            new_chunk_sectors: chunk,
            then_level: None,
            backwards: false,
        })
    }
}
