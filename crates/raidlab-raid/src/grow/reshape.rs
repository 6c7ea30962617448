//! Reshape: more members for a RAID 4, 5 or 6 (`--raid-devices N` up), a
//! new chunk size or layout over the same members (`--chunk`, `--layout`),
//! both in one reshape (`--raid-devices N --chunk C`, as md records
//! `delta_disks` with `new_chunk` and `new_layout`), and RAID 4 to 5 and
//! back (`--level`), offline, the way md does it for
//! metadata 1.1/1.2 without a backup file; and the walk of a RAID 0's and a
//! RAID 10's more members (checked by `super::raid0`, `super::raid10`).
//!
//! What it decides:
//! - whether md would reshape this array this way at all (level, metadata,
//!   consistency policy, state), refusing with the reason and nothing written;
//!   an internal bitmap where `super::restripe_bitmap` says raidlab carries
//!   it (a RAID 4/5/6's, unchanged, as md's);
//! - what md records while the reshape runs: a RAID 4 becoming a RAID 5 is
//!   taken over as a RAID 5 in parity-last first (md's `raid5_takeover`, the
//!   same placement), a RAID 5 becoming a RAID 4 is restriped to parity-last
//!   and then taken over ([`Assembly::takeover`]: superblocks only);
//! - how far the data offset moves down (`new_offset`): half the room every
//!   member has between its metadata (bitmap included) and its data (so that a later reshape
//!   finds room too), in whole units of the larger chunk, at least one unit
//!   (md runs a reshape over the same members without a backup only when
//!   the data moved at least the larger chunk), at most
//!   [`MAX_MOVE_SECTORS`]; with less room the reshape needs md's backup
//!   file, which is not built, and is refused;
//!
//! The walk that moves the data, and the superblocks written at its end,
//! are `super::walk`'s; fewer members (a backward reshape) are checked and
//! started by `super::shrink` (a RAID 10's checked by `super::raid10`).
//!
//! A RAID 0 is restriped as md does it, as a RAID 4 whose parity member is
//! missing (`super::raid0` checks it and says what md records).
//!
//! It must never write data, and never start a reshape across levels other
//! than 4 and 5 (those stay [`super::reshape_not_built`]); a RAID 10's
//! chunk and layout are `super::raid10`'s.

use super::restripe_bitmap::room_below_data;
use super::{refused, SECTOR};
use crate::assemble::{geometry_of, Assembly, MemberState};
use raidlab_core::{Error, ErrorKind, Op, Result};
use raidlab_layout::{Geometry, Layout, Level, ParityLayout};
use raidlab_md::superblock::{feature, MetadataVersion};
use serde::Serialize;

/// The most a reshape moves the data offset down (32 MiB): raidlab's cap, so
/// that a later reshape still finds room; more only makes the first steps
/// longer.
pub const MAX_MOVE_SECTORS: u64 = 65536;

/// What a reshape did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReshapeReport {
    pub old_raid_devices: usize,
    pub new_raid_devices: usize,
    pub old_array_bytes: u64,
    pub new_array_bytes: u64,
    /// How far the data offset moved on every member, in bytes: down, or
    /// up for a backward reshape (fewer members).
    pub data_offset_moved_bytes: u64,
    /// md's RESHAPE_BACKWARDS: the walk went from the end of the array to
    /// its start.
    pub backwards: bool,
    /// Array byte the run started at (the walk's start: 0, or the end going
    /// backwards; or where an interrupted one stopped).
    pub resumed_from: u64,
    /// Whether the run carried on an interrupted reshape.
    pub resumed: bool,
    /// Checkpoints of the position written during the run (the start and
    /// the end not counted).
    pub checkpoints: u64,
    /// The members that left the array's roles (fewer members), now spares
    /// as md leaves them, in role order.
    pub spares: Vec<String>,
    /// The members that left the array altogether (fewer members of a RAID
    /// 0, which has no spares: md's takeover back removes them), in role
    /// order.
    pub removed: Vec<String>,
}

/// What a restripe asks for (`grow --raid-devices`, `--chunk`, `--layout`,
/// `--level`); `None` keeps what the array has.
#[derive(Debug, Clone, Default)]
pub struct ReshapeRequest {
    pub raid_devices: Option<usize>,
    pub level: Option<Level>,
    pub chunk_bytes: Option<u64>,
    /// A layout name as mdadm takes it (`--layout`), for the level asked.
    pub layout: Option<String>,
}

impl ReshapeRequest {
    /// The request as the user gave it, for messages.
    fn describe(&self, level: Level) -> String {
        let mut parts = Vec::new();
        if let Some(n) = self.raid_devices {
            parts.push(format!("--raid-devices {n}"));
        }
        if let Some(l) = self.level {
            parts.push(format!("--level {}", l.name()));
        }
        if let Some(c) = self.chunk_bytes {
            parts.push(format!("--chunk {}K", c / 1024));
        }
        if let Some(l) = &self.layout {
            parts.push(format!("--layout {l}"));
        }
        format!("{} on {}", parts.join(" "), level.name())
    }

    /// The chunk asked for, in sectors as md records it; `current` when the
    /// request names none.
    pub(super) fn chunk_sectors(&self, current: u32) -> Result<u32> {
        match self.chunk_bytes {
            None => Ok(current),
            Some(c) if c % SECTOR != 0 || c / SECTOR > u64::from(u32::MAX) => Err(Error::invalid(
                format!("--chunk {c}: not a whole number of sectors md can record"),
            )),
            Some(c) => Ok((c / SECTOR) as u32),
        }
    }
}

/// What the members of a grow would be: checked, nothing written.
#[derive(Debug, Clone, Copy)]
pub struct ReshapePlan {
    pub old_raid_devices: usize,
    pub new_raid_devices: usize,
    /// Sectors the data offset moves down (0: nothing restripes).
    pub gap_sectors: u64,
    /// md's level, layout and chunk while the reshape runs. A RAID 4 asked
    /// to become a RAID 5 is first taken over as a RAID 5 in parity-last
    /// (the same placement, md's `raid5_takeover`), so the old geometry is
    /// that.
    pub level: i32,
    pub layout: u32,
    pub new_layout: u32,
    pub chunk_sectors: u32,
    pub new_chunk_sectors: u32,
    /// The level md's takeover gives the array once no data is left to
    /// move: RAID 4 from a RAID 5 in parity-last. `None`: the reshape's own.
    pub then_level: Option<Level>,
    /// Fewer members: md's backward reshape, the data offset moving up by
    /// `gap_sectors` (`super::shrink`). A RAID 0's shrink is planned as
    /// the RAID 4 md runs it at: its member counts are the RAID 4's, one
    /// more than the RAID 0's (a RAID 0's grow counts its own members).
    pub backwards: bool,
    /// The component size (sectors) md sets before the walk starts, when it
    /// changes: a RAID 10 shrink with less room after the data than the
    /// move up, which mdadm takes out of each member's used space.
    pub component_sectors: Option<u64>,
    /// A grow of a metadata 0.90 array to more data members, in place (no
    /// new data offset): the array sectors mdadm backs up on the new
    /// members before the walk (`super::in_place`); 0 otherwise.
    pub backup_sectors: u64,
}

impl ReshapePlan {
    /// Whether data moves (a restripe), or only the superblocks change (a
    /// takeover between RAID 4 and a RAID 5 in parity-last).
    pub fn restripes(&self) -> bool {
        self.gap_sectors > 0 || self.backup_sectors > 0
    }

    /// Both geometries of this plan as md will read them at position 0,
    /// with members of `member_sectors` each (the component size the plan
    /// sets, if it sets one): what the in-place grow, the backup file's
    /// restripe and the shrink check before anything is recorded.
    pub(super) fn reshape_at_start(
        &self,
        member_sectors: u64,
    ) -> Result<raidlab_layout::reshape::Reshape> {
        raidlab_layout::reshape::Reshape::from_md(&raidlab_layout::reshape::MdReshape {
            level: self.level,
            layout: self.layout,
            chunk_sectors: self.chunk_sectors,
            raid_disks: self.new_raid_devices as u32,
            new_level: self.level,
            new_layout: self.new_layout,
            new_chunk_sectors: self.new_chunk_sectors,
            delta_disks: self.new_raid_devices as i32 - self.old_raid_devices as i32,
            position_sectors: 0,
            backwards: self.backwards,
            member_sectors: self.component_sectors.unwrap_or(member_sectors),
        })
    }
}

/// md's layout word of parity-last, the RAID 5 layout that places data and
/// parity exactly as a RAID 4 does.
const PARITY_LAST: u32 = ParityLayout::ParityLast as u32;

impl Assembly {
    /// Check a restripe (more members of a RAID 4/5/6, a new chunk or
    /// layout, RAID 4 to 5 and back) against md's rules, with `coming`
    /// devices about to be added as spares: nothing is written. Other
    /// members and a new chunk or layout go in one reshape, as md makes
    /// them; a level change goes alone or with more members.
    pub fn reshape_check(&self, req: &ReshapeRequest, coming: usize) -> Result<ReshapePlan> {
        self.reshape_check_sized(req, coming, None)
    }

    /// [`Assembly::reshape_check`] with the array size the user accepts
    /// (`--array-size`, bytes): fewer members of a RAID 0/4/5/6 or 10 are checked
    /// only with one (`super::shrink`), as md reshapes only an array
    /// already truncated to what the new members hold.
    pub fn reshape_check_sized(
        &self,
        req: &ReshapeRequest,
        coming: usize,
        array_bytes: Option<u64>,
    ) -> Result<ReshapePlan> {
        self.reshape_check_inner(req, coming, array_bytes, false)
    }

    /// [`Assembly::reshape_check`] of a restripe run with mdadm's
    /// `--backup-file` at `backup` (to be made): a metadata 0.90 RAID
    /// 4/5/6's new chunk or layout over the same members
    /// (`super::backup_file`); the plan's `backup_sectors` is the window.
    pub fn reshape_check_with_backup(
        &self,
        req: &ReshapeRequest,
        backup: &std::path::Path,
    ) -> Result<ReshapePlan> {
        self.reshape_check_sized_with_backup(req, backup, None)
    }

    /// [`Assembly::reshape_check_with_backup`] with the array size the user
    /// accepts (`--array-size`, bytes): a metadata 0.90 RAID 4/5/6's fewer
    /// members too, walked backwards through the file (`super::shrink`).
    pub fn reshape_check_sized_with_backup(
        &self,
        req: &ReshapeRequest,
        backup: &std::path::Path,
        array_bytes: Option<u64>,
    ) -> Result<ReshapePlan> {
        self.reshape_check_adding_with_backup(req, 0, backup, array_bytes)
    }

    /// [`Assembly::reshape_check_sized_with_backup`] with `coming` devices
    /// about to be added as spares: a metadata 0.90 RAID 4/5/6's grow to
    /// more members too (with a new chunk or layout or not), its critical
    /// section backed up in the file instead of on the new members, as
    /// mdadm does when given one (`super::backup_file::grow`).
    pub fn reshape_check_adding_with_backup(
        &self,
        req: &ReshapeRequest,
        coming: usize,
        backup: &std::path::Path,
        array_bytes: Option<u64>,
    ) -> Result<ReshapePlan> {
        let plan = self.reshape_check_inner(req, coming, array_bytes, true)?;
        let (old, new) = (plan.old_raid_devices, plan.new_raid_devices);
        let shrink = plan.backwards && new < old;
        let grow = !plan.backwards && new > old;
        // Only a 0.90 restripe carries a backup (its size); a 1.x array
        // moves its data offset and takes no file.
        if !(shrink || grow || new == old) || plan.backup_sectors == 0 {
            return Err(refused(format!(
                "--backup-file {}: raidlab runs a backup file only for a metadata 0.90 RAID 4/5/6's restripe (more members, a new chunk or layout, fewer members); this array moves its data offset instead (metadata 1.x) or is not such a restripe: leave --backup-file out; nothing was changed",
                backup.display()
            )));
        }
        self.backup_file_path_check(backup, true)?;
        Ok(plan)
    }

    fn reshape_check_inner(
        &self,
        req: &ReshapeRequest,
        coming: usize,
        array_bytes: Option<u64>,
        backup_file: bool,
    ) -> Result<ReshapePlan> {
        let g = self.geometry;
        let old = g.raid_disks;
        let what = req.describe(g.level);
        if array_bytes.is_some() && !req.raid_devices.is_some_and(|n| n < old) {
            return Err(Error::invalid(format!(
                "{what}: --array-size goes with fewer --raid-devices (a shrink); this change keeps every byte of the array; nothing was changed"
            )));
        }
        if let Some(e) = req
            .level
            .and_then(|to| super::md_refusal(&what, g.level, to))
        {
            return Err(e);
        }
        if g.level == Level::Raid0 && matches!(req.level, None | Some(Level::Raid0)) {
            return self.raid0_reshape_check(req, coming, &what, array_bytes);
        }
        if g.level == Level::Raid10 && matches!(req.level, None | Some(Level::Raid10)) {
            return self.raid10_reshape_check(req, coming, &what, array_bytes);
        }
        if !matches!(g.level, Level::Raid4 | Level::Raid5 | Level::Raid6) {
            return Err(super::reshape_not_built(&what));
        }
        self.grow_check_no_reshape()?;
        let template = self.grow_template()?;
        let n = req.raid_devices.unwrap_or(old);
        // The level md runs the reshape at, and the layout it starts from.
        let (level, layout, then_level) = match (g.level, req.level) {
            (l, None) => (l, template.layout, None),
            (l, Some(same)) if same == l => (l, template.layout, None),
            // md takes a RAID 4 over as a RAID 5 in parity-last.
            (Level::Raid4, Some(Level::Raid5)) => (Level::Raid5, PARITY_LAST, None),
            // md restripes a RAID 5 to parity-last, then takes it over as a
            // RAID 4.
            (Level::Raid5, Some(Level::Raid4)) => {
                if template.feature_map & (feature::PPL | feature::MULTIPLE_PPLS) != 0 {
                    return Err(refused(format!(
                        "{what}: md's partial parity log is for RAID 5 only: switch it to resync first (`raidlab grow --consistency-policy resync`); nothing was changed"
                    )));
                }
                (Level::Raid5, template.layout, Some(Level::Raid4))
            }
            (_, Some(_)) => return Err(super::reshape_not_built(&what)),
        };
        let new_layout = match (
            &req.layout,
            then_level.unwrap_or(req.level.unwrap_or(level)),
        ) {
            (None, Level::Raid4) if level == Level::Raid5 => PARITY_LAST,
            (None, _) => layout,
            (Some(name), Level::Raid4) => {
                Layout::parse(Level::Raid4, Some(name))?;
                if level == Level::Raid5 {
                    PARITY_LAST
                } else {
                    layout
                }
            }
            (Some(name), l) => match Layout::parse(l, Some(name))? {
                Layout::Parity(p) => p.md_value(),
                _ => layout,
            },
        };
        let chunk = template.chunksize;
        let new_chunk = req.chunk_sectors(chunk)?;
        let same_shape = layout == new_layout && chunk == new_chunk;
        let plan = |gap_sectors| ReshapePlan {
            old_raid_devices: old,
            new_raid_devices: n,
            gap_sectors,
            level: level.md_level(),
            layout,
            new_layout,
            chunk_sectors: chunk,
            new_chunk_sectors: new_chunk,
            then_level,
            backwards: false,
            component_sectors: None,
            backup_sectors: 0,
        };
        if n == old && same_shape {
            if level.md_level() != template.level || then_level.is_some() {
                // A takeover: the superblocks change, no data moves.
                return Ok(plan(0));
            }
            return Err(Error::invalid(format!(
                "{what}: the array already is that: no change requested"
            )));
        }
        if n < old {
            self.grow_check_no_reshape()?;
            return self.shrink_check(req, &what, array_bytes, plan(0), backup_file);
        }
        if n != old && !same_shape && level.md_level() != template.level {
            // md takes a RAID 4 over as a RAID 5 first (a level change), and
            // mdadm refuses a level change with a new chunk in one go; a
            // RAID 4 grown with a new layout and level at once is not built.
            return Err(super::reshape_not_built(&format!(
                "{what} (a level change with other members and a new chunk or layout in one reshape: change the level first, then grow)"
            )));
        }
        if n > usize::from(raidlab_md::ROLE_SPARE) - 3 {
            return Err(Error::invalid(format!(
                "--raid-devices {n} is more than md allows"
            )));
        }
        Geometry::from_md(
            level.md_level(),
            new_layout,
            new_chunk,
            n as u32,
            template.size,
        )
        .map_err(|e| refused(format!("{what}: {}; nothing was changed", e.message)))?;
        if template.size % u64::from(new_chunk) != 0 {
            return Err(refused(format!(
                "{what}: the new chunk ({} KiB) does not evenly divide the component size ({} KiB), as mdadm requires; shrink the array first to a multiple of it (`raidlab grow --size {}K`, after shrinking any file system); nothing was changed",
                new_chunk / 2,
                template.size / 2,
                template.size / u64::from(new_chunk) * u64::from(new_chunk) / 2
            )));
        }
        let in_place = template.version() == MetadataVersion::V0_90;
        if in_place {
            self.in_place_allowed(
                &what,
                n,
                same_shape,
                level.md_level() != template.level,
                backup_file,
            )?;
        } else {
            self.restripe_allowed(&what)?;
        }
        let spares = self.spare_count();
        let need = n - old;
        if spares + coming < need {
            return Err(refused(format!(
                "need {need} spare(s) for the new member slots and only have {} (mdadm: \"Need {need} spares to avoid degraded array\"): give the new members with --add; nothing was changed",
                spares + coming
            )));
        }
        // The data moves down by whole units of the larger chunk: md runs a
        // reshape over the same members without a backup only when the data
        // moved at least that far (less, and old and new stripes overlap);
        // with more members and a new chunk at once, the walk needs as much
        // (`Reshape::forward_min_gap`) and the steps are stripes of it.
        if in_place && n == old {
            // With a backup file: the window it holds twice.
            return Ok(ReshapePlan {
                backup_sectors: super::backup_file::plan_window(
                    u64::from(chunk) * SECTOR,
                    u64::from(new_chunk) * SECTOR,
                    g.data_disks() as u64,
                    g.data_disks() as u64,
                    template.size,
                ),
                ..plan(0)
            });
        }
        if in_place {
            return Ok(ReshapePlan {
                backup_sectors: self.in_place_backup_sectors(&plan(0))?,
                ..plan(0)
            });
        }
        let gap = self.reshape_gap(u64::from(chunk.max(new_chunk)).max(1))?;
        Ok(plan(gap))
    }

    /// md's conditions for restriping this array in place without a backup
    /// file, checked before anything is written: metadata 1.x, no journal
    /// or PPL to carry through, a bitmap only where raidlab carries it
    /// ([`Assembly::bitmap_restripe_allowed`]), nothing rebuilding, every
    /// member there, parity consistent.
    pub(crate) fn restripe_allowed(&self, what: &str) -> Result<()> {
        let template = self.grow_template()?;
        match template.version() {
            MetadataVersion::V0_90 => {
                return Err(refused(
                    "metadata 0.90 has no new data offset, so md reshapes it only in place, through a backup file (mdadm --backup-file) or a backup on the new members; raidlab runs those for a RAID 4/5/6 (more or fewer members, a new chunk or layout), not for this change: use mdadm --grow; nothing was changed".into(),
                ))
            }
            MetadataVersion::V1_0 => {
                // 1.0 keeps its superblock at the end: md could move the
                // data offset down only if the data does not start at 0.
            }
            _ => {}
        }
        self.restripe_conditions(what)
    }

    /// [`Assembly::restripe_allowed`] past the metadata: what md needs of
    /// any restripe (no journal or PPL to carry, a bitmap raidlab carries,
    /// idle, whole, consistent).
    pub(crate) fn restripe_conditions(&self, what: &str) -> Result<()> {
        let template = self.grow_template()?;
        self.bitmap_restripe_allowed(&template)?;
        if self.has_journal() || template.feature_map & (feature::PPL | feature::MULTIPLE_PPLS) != 0
        {
            return Err(refused(
                "the array keeps a write journal or a partial parity log, which md does not carry through a reshape: switch it to resync first (`raidlab grow --consistency-policy resync`; a journal cannot be removed); nothing was changed".into(),
            ));
        }
        self.grow_check_idle(what)?;
        if !self.missing().is_empty() {
            return Err(refused(format!(
                "the array is degraded (role(s) {:?} missing): reshaping a degraded array is not built; add and rebuild the missing member(s) first; nothing was changed",
                self.missing()
            )));
        }
        if !self.consistent() {
            let why = if self.geometry.level == Level::Raid10 {
                "a reshape copies one mirror's data to every new copy, so the mirrors must agree first"
            } else {
                "a reshape computes parity from the data, which must be consistent first"
            };
            return Err(refused(format!(
                "the array has a resync pending (not stopped cleanly, or a resync interrupted): {why}; run `raidlab resync`; nothing was changed"
            )));
        }
        Ok(())
    }

    /// How far the data moves down for a reshape that needs `unit` sectors
    /// at least (one chunk, or the larger of two): half the room every
    /// member in service has below its data, in whole units, never below
    /// one unit, within [`MAX_MOVE_SECTORS`]; refused with md's reason
    /// (a backup file, not built) when a member has less than one unit.
    pub(crate) fn reshape_gap(&self, unit: u64) -> Result<u64> {
        let mut least = u64::MAX;
        for m in self.members.iter().filter(|m| m.is_live()) {
            let room = room_below_data(&m.sb, self.bitmap.as_ref());
            if room < unit {
                return Err(Error::new(
                    ErrorKind::Refused,
                    Op::Plan,
                    format!(
                        "{}: {} KiB free below the data (data offset {} sectors), less than one {} KiB chunk: md would move the data offset to reshape without a backup file, and with no room it needs a backup file (mdadm --backup-file), which raidlab does not build; nothing was changed",
                        m.device.path,
                        room / 2,
                        m.sb.data_offset,
                        unit / 2
                    ),
                ));
            }
            least = least.min(room);
        }
        Ok((least.min(MAX_MOVE_SECTORS * 2) / 2 / unit).max(1) * unit)
    }

    /// md's takeover between RAID 4 and a RAID 5 in parity-last (the same
    /// placement): only the superblocks change, in one commit. Any other
    /// level change is a restripe, [`Assembly::reshape_start`].
    pub fn takeover(&mut self, to: Level) -> Result<()> {
        let g = self.geometry;
        let (level, layout) = match (g.level, to, self.grow_template()?.layout) {
            (Level::Raid4, Level::Raid5, _) => (5, PARITY_LAST),
            (Level::Raid5, Level::Raid4, PARITY_LAST) => (4, 0),
            (from, to, _) => {
                return Err(refused(format!(
                    "{} to {}: not a takeover (md takes over only RAID 4 and RAID 5 in parity-last, which place data alike); nothing was changed",
                    from.name(),
                    to.name()
                )))
            }
        };
        self.grow_check_idle(&format!("--level {}", to.name()))?;
        self.commit_takeover(level, layout, g.raid_disks as u32)
    }

    /// Start the reshape `plan` (from [`Assembly::reshape_check`], with the
    /// new members already added as spares): spares take the new roles and
    /// every superblock records the reshape at position 0, in one commit.
    /// No data moves until [`Assembly::reshape_run`].
    pub fn reshape_start(&mut self, plan: ReshapePlan) -> Result<()> {
        if plan.backup_sectors > 0
            && (plan.new_raid_devices == plan.old_raid_devices || plan.backwards)
        {
            return Err(refused(
                "reshape: a 0.90 restripe over the same members or onto fewer members starts with its backup file (Assembly::reshape_start_with_backup); nothing was changed".into(),
            ));
        }
        if plan.backwards {
            return self.shrink_start(plan);
        }
        self.reshape_start_backed(plan, None)
    }

    /// [`Assembly::reshape_start`] of a forward reshape to more members,
    /// a 0.90 grow's critical section backed up in `file` when one is
    /// given (mdadm's `--backup-file`), else on the new members.
    pub(super) fn reshape_start_backed(
        &mut self,
        plan: ReshapePlan,
        file: Option<&super::BackupFile>,
    ) -> Result<()> {
        let old = plan.old_raid_devices;
        let n = plan.new_raid_devices;
        // A RAID 0 restripes as md's RAID 4 with its parity role (the last)
        // missing: the new members fill roles n.. from the old parity role
        // on, and the new parity role stays empty.
        let raid0 = self.geometry.level == Level::Raid0;
        let component = if raid0 {
            Some(self.raid0_component_sectors("the reshape")?)
        } else {
            None
        };
        let spares: Vec<usize> = (0..self.members.len())
            .filter(|&i| self.members[i].state == MemberState::Spare)
            .take(n - old)
            .collect();
        if spares.len() < n - old {
            return Err(refused(format!(
                "need {} spare(s) for the new member slots and only have {}; nothing was changed",
                n - old,
                spares.len()
            )));
        }
        // A RAID 10's bitmap counts array sectors: md resizes it to the new
        // array at the start (`super::restripe_bitmap`). It goes to every
        // member in a commit of its own before any superblock records the
        // reshape, so that a cut anywhere leaves no recorded reshape beside
        // a bitmap of the old size (a resume walks on with the bitmap it
        // finds); a cut inside that commit leaves the array as it was, its
        // bitmap covering more than it, which the next start resizes again.
        let members = (plan.old_raid_devices, plan.new_raid_devices);
        let (layout, chunk) = (plan.new_layout, plan.new_chunk_sectors);
        if let Some(b) =
            self.raid10_reshape_bitmap(plan.level, members, layout, chunk, plan.gap_sectors)?
        {
            let kept = self.bitmap.replace(b);
            if let Err(e) = self.commit(|_| {}) {
                self.bitmap = kept;
                return Err(e);
            }
        }
        // The new roles go into the role tables in the commit below, not
        // before it: a member a cut left one event behind is first written
        // level with the rest as it stands (`Assembly::commit`), and a role
        // table naming role n with `raid_disks` still n is no superblock.
        let mut roles = Vec::new();
        for (k, &s) in spares.iter().enumerate() {
            let role = old + k;
            roles.push((self.members[s].sb.dev_number as usize, role as u16));
            self.members[s].role = Some(role);
            self.members[s].state = MemberState::Active;
            self.slots.push(Some(s));
        }
        let raid_disks = if raid0 {
            self.slots.push(None);
            n + 1
        } else {
            n
        };
        let delta = (n - old) as i32;
        let gap = i32::try_from(plan.gap_sectors)
            .map_err(|_| Error::invalid("reshape: the data offset move does not fit md's field"))?;
        if !plan.restripes() {
            return Err(Error::invalid(
                "reshape: this change moves no data (a takeover): use Assembly::takeover",
            ));
        }
        if plan.backup_sectors > 0 {
            // Before any superblock says a reshape runs: a resume at
            // position 0 then always finds the backup it starts from.
            match file {
                Some(f) => self.in_place_backup_to_file(&plan, f)?,
                None => self.in_place_backup(plan, &spares)?,
            }
        }
        self.commit(|sb| {
            for &(dev, role) in &roles {
                if let Some(r) = sb.dev_roles.get_mut(dev) {
                    *r = role;
                }
            }
            sb.raid_disks = raid_disks as u32;
            sb.delta_disks = delta;
            if let Some(size) = component {
                sb.size = size;
            }
            // A RAID 4 becoming a RAID 5 is taken over as one in the same
            // commit: md's level and layout while the reshape runs.
            sb.level = plan.level;
            sb.layout = plan.layout;
            sb.new_level = plan.level;
            sb.new_layout = plan.new_layout;
            sb.new_chunk = plan.new_chunk_sectors;
            sb.reshape_position = 0;
            sb.new_offset = -gap;
            sb.feature_map |= feature::RESHAPE_ACTIVE | feature::NEW_OFFSET;
            sb.feature_map &= !feature::RESHAPE_BACKWARDS;
            if gap == 0 {
                // In place (0.90): no new offset to record.
                sb.feature_map &= !feature::NEW_OFFSET;
            }
        })?;
        self.geometry = geometry_of(&self.grow_template()?)?;
        Ok(())
    }
}
