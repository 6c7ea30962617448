//! Fewer members of a RAID 4, 5 or 6 (`--raid-devices N` down), as md does
//! it without a backup file: the array is first truncated to what N members
//! hold (mdadm's `--array-size`), then reshaped backwards, from the end of
//! the array towards its start, with each member's data offset moved up.
//! A RAID 0's fewer members are the same shrink of the RAID 4 md takes it
//! over as (`super::raid0` plans it, in the RAID 4's counts, and ends it).
//!
//! What it decides:
//! - whether md would make this shrink: with a new chunk or layout in the
//!   same reshape if asked (md's `delta_disks` with `new_chunk` and
//!   `new_layout`; a new chunk must divide the component size, as mdadm
//!   requires; a level change and a RAID 0's new chunk are not built with
//!   it), md's least member count for the level, and a size
//!   the user has accepted that fits the new geometry; without that size
//!   the refusal is mdadm's ("this change will reduce the size of the
//!   array"), as md reshapes only an array already truncated;
//! - how far the data offset moves up: mdadm's least move for a shrink
//!   (`Reshape::backward_gap`), which every member must have room for
//!   after its data (the component size plus the move); with less room md
//!   needs a backup file, which raidlab does not build, and says so;
//! - what md records while the walk runs (`delta_disks` negative, which is
//!   md's backward direction for a shrink: it writes no RESHAPE_BACKWARDS
//!   flag then; the position starting at the end of the new geometry; the
//!   data size raised to the room when the move needs it, as mdadm's retry
//!   of `new_offset` after setting the size to `max` does), and at its end:
//!   the members past the new count become spares, as md leaves them (they
//!   are taken out with `raidlab remove --member`).
//!
//! A metadata 0.90 RAID 4/5/6 has no data offset to move: its shrink is
//! checked here up to the size, then planned as md walks it, backwards in
//! place through mdadm's `--backup-file` (refused without one, as mdadm
//! refuses), and started, walked and ended by `super::backup_file`.
//!
//! A RAID 10's shrink is checked by `super::raid10` (md's rules differ:
//! one row of move, taken out of the component size when a member lacks
//! the room after its data) and started, walked and ended with this one's
//! machinery. The walk itself is `super::walk`'s. It must never shrink an
//! array whose truncation the user has not asked for, and never move data
//! when a member lacks the room (a RAID 0's refusal says only a larger
//! device gives it: md refuses `--size` of a RAID 0).

use super::reshape::{ReshapePlan, ReshapeRequest};
use super::walk::near_or_offset_copies;
use super::{refused, SECTOR};
use crate::assemble::{Assembly, MemberState};
use raidlab_core::{Error, ErrorKind, Op, Result};
use raidlab_layout::reshape::Reshape;
use raidlab_layout::Level;
use raidlab_md::superblock::{feature, MetadataVersion};

/// The least members md runs each parity level with; a RAID 0 shrinks as
/// a RAID 4 of one member more, so the least RAID 4 (two) leaves one.
fn least_members(level: Level) -> usize {
    match level {
        Level::Raid6 => 4,
        Level::Raid0 => 1,
        _ => 2,
    }
}

impl Assembly {
    /// Check a shrink from `old` to `req`'s member count of this RAID 4/5/6
    /// (level, layout and chunk as the caller found them, unchanged), or of
    /// a RAID 0 as `super::raid0` plans it (a RAID 4 of one member more,
    /// the parity role empty, the counts in `plan` the RAID 4's), with
    /// `array_bytes` the truncated size the user accepts: nothing written.
    pub(super) fn shrink_check(
        &self,
        req: &ReshapeRequest,
        what: &str,
        array_bytes: Option<u64>,
        plan: ReshapePlan,
        backup_file: bool,
    ) -> Result<ReshapePlan> {
        let g = self.geometry;
        let raid0 = g.level == Level::Raid0;
        // The member count the user asked for (a RAID 0's, without the
        // RAID 4's parity role).
        let n = plan.new_raid_devices - usize::from(raid0);
        let least = least_members(g.level);
        if n < least {
            let how = if raid0 {
                " (md shrinks a RAID 0 as a RAID 4 of one member more, and runs a RAID 4 with no fewer than 2)"
            } else {
                " (the kernel refuses the new member count)"
            };
            return Err(refused(format!(
                "{what}: md runs a {} with no fewer than {least} {}{how}; nothing was changed",
                g.level.name(),
                if least == 1 { "member" } else { "members" }
            )));
        }
        if req.level.is_some_and(|l| l != g.level) {
            return Err(super::reshape_not_built(&format!(
                "{what} (fewer members and a new level in one reshape: shrink first, then change the level)"
            )));
        }
        let component = plan.component_sectors.unwrap_or(self.grow_template()?.size);
        if component % u64::from(plan.new_chunk_sectors.max(1)) != 0 {
            return Err(refused(format!(
                "{what}: the new chunk ({} KiB) does not evenly divide the component size ({} KiB), as mdadm requires (mdadm: \"New chunk size does not evenly divide device size\"); shrink the array first to a multiple of it (`raidlab grow --size {}K`, after shrinking any file system); nothing was changed",
                plan.new_chunk_sectors / 2,
                component / 2,
                component / u64::from(plan.new_chunk_sectors) * u64::from(plan.new_chunk_sectors) / 2
            )));
        }
        let r = self.shrink_geometry(&plan)?;
        let fits = r.new.array_bytes();
        let exposed = g.array_bytes();
        let Some(size) = array_bytes else {
            return Err(refused(format!(
                "{what}: this change will reduce the size of the array from {exposed} to {fits} bytes (mdadm: \"this change will reduce the size of the array. use --grow --array-size first to truncate array\"): shrink what the array holds (the file system) to {} KiB or less, then give `--array-size {}K` with --raid-devices {n}; nothing was changed",
                fits / 1024,
                fits / 1024
            )));
        };
        if size > fits {
            return Err(refused(format!(
                "{what}: --array-size {size} bytes does not fit in {n} members ({fits} bytes at most; mdadm: \"this change will reduce the size of the array\"); give --array-size {}K or less; nothing was changed",
                fits / 1024
            )));
        }
        if size == 0 || size % 1024 != 0 {
            return Err(Error::invalid(format!(
                "--array-size {size}: give a whole number of KiB, more than 0 (md counts the array size in KiB)"
            )));
        }
        let template = self.grow_template()?;
        if template.version() == MetadataVersion::V0_90 && !raid0 {
            // No data offset to move up: md walks it backwards over the
            // same member bytes, through mdadm's backup file.
            if !backup_file {
                return Err(refused(format!(
                    "{what}: metadata 0.90 has no data offset to move, so md shrinks it in place, backing up each step it overwrites in a file (mdadm: \"Cannot grow - need backup-file\"): give `--backup-file FILE` on a device outside the array, with the array stopped (raidlab walks a 0.90 restripe offline only); nothing was changed"
                )));
            }
            self.restripe_conditions(what)?;
            let window = super::backup_file::plan_window(
                r.old.chunk_bytes,
                r.new.chunk_bytes,
                r.old.data_disks() as u64,
                r.new.data_disks() as u64,
                plan.component_sectors.unwrap_or(template.size),
            );
            return Ok(ReshapePlan {
                backwards: true,
                backup_sectors: window,
                ..plan
            });
        }
        self.restripe_allowed(what)?;
        let gap = r.backward_gap() / SECTOR;
        let chunk = u64::from(plan.chunk_sectors.max(1));
        for m in self.members.iter().filter(|m| m.is_live()) {
            let room = super::data_room_sectors(&m.sb, m.device.volume.size())?;
            let used = plan.component_sectors.unwrap_or(m.sb.size);
            let free = room.saturating_sub(used);
            if free < gap && raid0 {
                // md refuses `--size` of a RAID 0: the room can only come
                // from a larger device (md keeps a RAID 0 member's data size).
                return Err(refused(format!(
                    "{}: {} KiB free after the data (the RAID 0 uses {} KiB of it), less than the {} KiB md moves the data offset up for this shrink: without that room md needs a backup file (mdadm --backup-file), which raidlab does not build; md cannot use less of a RAID 0 member (mdadm: \"Component size change is not supported for RAID0\"), so give every member at least {} KiB more room (a larger device or partition; the array keeps its size); nothing was changed",
                    m.device.path,
                    free / 2,
                    used / 2,
                    gap / 2,
                    (gap - free) / 2
                )));
            }
            if free < gap {
                return Err(refused(format!(
                    "{}: {} KiB free after the data (component size {} KiB), less than the {} KiB md moves the data offset up for this shrink: without that room md needs a backup file (mdadm --backup-file), which raidlab does not build; make room first by using less of each member (`raidlab grow --size {}K` or less, after shrinking what the array holds to fit); nothing was changed",
                    m.device.path,
                    free / 2,
                    used / 2,
                    gap / 2,
                    room.saturating_sub(gap) / chunk * chunk / 2
                )));
            }
        }
        Ok(ReshapePlan {
            gap_sectors: gap,
            backwards: true,
            ..plan
        })
    }

    /// Both geometries of the shrink `plan`, as md will read them (with the
    /// component size the plan sets, if it sets one).
    pub(super) fn shrink_geometry(&self, plan: &ReshapePlan) -> Result<Reshape> {
        // Backwards whatever the plan says yet (`shrink_check` asks before
        // it sets it): md walks every shrink from the end.
        ReshapePlan {
            backwards: true,
            ..*plan
        }
        .reshape_at_start(self.grow_template()?.size)
    }

    /// Record the shrink `plan` in every superblock, in one commit: the new
    /// count, `delta_disks` negative, the data offset to move up by the
    /// plan's gap, the walk starting at the new geometry's end, backwards;
    /// a RAID 10's smaller component size when the plan takes the move out
    /// of it.
    /// The members past the new count keep their roles (the old geometry
    /// still reads them) until the walk ends.
    pub(super) fn shrink_start(&mut self, plan: ReshapePlan) -> Result<()> {
        let r = self.shrink_geometry(&plan)?;
        let gap = plan.gap_sectors;
        // The checks and the walk must agree: a shrink recorded here that
        // the walk then refused would leave the array mid-reshape after an
        // error that says nothing changed.
        if !Self::shrink_walk_supported(&r, gap * SECTOR) {
            return Err(Error::new(
                ErrorKind::Refused,
                Op::Plan,
                "internal: this shrink passed its checks but is not one raidlab's walk carries; nothing was changed (please report it)",
            ));
        }
        let new_offset = i32::try_from(gap)
            .map_err(|_| Error::invalid("reshape: the data offset move does not fit md's field"))?;
        // md accepts a move up only within the member's data size; mdadm
        // raises it to all the room first when it must.
        for i in 0..self.members.len() {
            if !self.members[i].is_live() {
                continue;
            }
            let m = &self.members[i];
            let room = super::data_room_sectors(&m.sb, m.device.volume.size())?;
            let size = plan.component_sectors.unwrap_or(m.sb.size);
            if m.sb.data_size < size + gap {
                self.members[i].sb.data_size = room;
            }
        }
        let position = r.new.array_bytes() / SECTOR;
        let delta = plan.new_raid_devices as i32 - plan.old_raid_devices as i32;
        self.commit(|sb| {
            if let Some(size) = plan.component_sectors {
                sb.size = size;
            }
            // The level md reshapes at: a RAID 0 is taken over as a RAID 4
            // (parity-last, its parity role empty) in this same commit, as
            // md's takeover comes before the reshape; any other level keeps
            // its own.
            sb.level = plan.level;
            sb.layout = plan.layout;
            sb.raid_disks = plan.new_raid_devices as u32;
            sb.delta_disks = delta;
            sb.new_level = plan.level;
            sb.new_layout = plan.new_layout;
            sb.new_chunk = plan.new_chunk_sectors;
            sb.reshape_position = position;
            sb.new_offset = new_offset;
            // md writes RESHAPE_BACKWARDS only for a reshape over the same
            // members: a shrink goes backwards by delta_disks < 0 alone.
            sb.feature_map |= feature::RESHAPE_ACTIVE | feature::NEW_OFFSET;
            sb.feature_map &= !feature::RESHAPE_BACKWARDS;
        })?;
        self.geometry = crate::assemble::geometry_of(&self.grow_template()?)?;
        Ok(())
    }

    /// Whether raidlab walks the backward reshape `r` with the data moved
    /// up `gap` bytes: fewer members of one parity level, or of a RAID 10
    /// in the near or offset layout keeping its number of copies (a new
    /// chunk or layout with them too, as md makes both in one reshape), and
    /// at least the move the walk never stalls with (mdadm's for parity,
    /// one row or two for RAID 10: `Reshape::backward_min_gap`).
    pub(super) fn shrink_walk_supported(r: &Reshape, gap: u64) -> bool {
        let walks = match r.new.level {
            Level::Raid4 | Level::Raid5 | Level::Raid6 => true,
            Level::Raid10 => {
                let copies = near_or_offset_copies(r.old.layout);
                copies.is_some() && near_or_offset_copies(r.new.layout) == copies
            }
            _ => false,
        };
        walks
            && r.old.level == r.new.level
            && r.new.raid_disks < r.old.raid_disks
            && gap >= r.backward_min_gap()
    }

    /// At the end of a shrink, as md leaves them: the members past the new
    /// count become spares (in every superblock of the commit that follows).
    /// Their paths, in role order.
    pub(super) fn shrink_release(&mut self, new_raid_disks: usize) -> Vec<String> {
        let mut gone: Vec<(usize, usize)> = self
            .members
            .iter()
            .enumerate()
            .filter(|(_, m)| m.state == MemberState::Active)
            .filter_map(|(i, m)| m.role.filter(|&r| r >= new_raid_disks).map(|r| (r, i)))
            .collect();
        gone.sort();
        let mut paths = Vec::new();
        for (_, i) in gone {
            let dev = self.members[i].sb.dev_number;
            self.set_role(dev, raidlab_md::ROLE_SPARE);
            self.members[i].role = None;
            self.members[i].state = MemberState::Spare;
            paths.push(self.members[i].device.path.clone());
        }
        self.slots.truncate(new_raid_disks);
        paths
    }
}
