//! Reshape: more members for a RAID 4, 5 or 6 (`--raid-devices N` up), a
//! new chunk size or layout over the same members (`--chunk`, `--layout`),
//! and RAID 4 to 5 and back (`--level`), offline, the way md does it for
//! metadata 1.1/1.2 without a backup file; and the walk of a RAID 0's and a
//! RAID 10's more members (checked by `super::raid0`, `super::raid10`).
//!
//! What it decides:
//! - whether md would reshape this array this way at all (level, metadata,
//!   consistency policy, state), refusing with the reason and nothing written;
//! - what md records while the reshape runs: a RAID 4 becoming a RAID 5 is
//!   taken over as a RAID 5 in parity-last first (md's `raid5_takeover`, the
//!   same placement), a RAID 5 becoming a RAID 4 is restriped to parity-last
//!   and then taken over ([`Assembly::takeover`]: superblocks only);
//! - how far the data offset moves down (`new_offset`): half the room every
//!   member has between its metadata and its data (so that a later reshape
//!   finds room too), in whole units of the larger chunk, at least one unit
//!   (md runs a reshape over the same members without a backup only when
//!   the data moved at least the larger chunk), at most
//!   [`MAX_MOVE_SECTORS`]; with less room the reshape needs md's backup
//!   file, which is not built, and is refused;
//! - the order of a step's I/O and when the position is checkpointed.
//!
//! The walk goes forwards over the new geometry's stripes, in units of the
//! larger chunk (the positions md accepts on a resume; a RAID 10's in
//! chunks, and md's positions inside one are taken back too). A step reads
//! the old geometry's bytes of the array (zeros past the old end, as md
//! fills a parity array's new space; md leaves a RAID 10's as it was and
//! resyncs it after, raidlab zeros it so the copies agree at once), writes them as whole stripes of the new geometry
//! through a running [`Array`] (the planner and parity engine compute P and
//! Q: a full-stripe write reads nothing; a RAID 10 writes every copy), and
//! flushes. The new geometry starts
//! `gap` sectors lower on each member than the old one, so its writes trail
//! the old geometry's reads. The invariant, md's rule in its reshape loop
//! (the arithmetic is `Reshape::forward_write_limit` in the layout crate):
//! no write may land at or past where the old geometry's row holding the
//! last checkpointed position begins (a stripe; a RAID 10's chunk copies,
//! far rows high in the offset layout), because a resume re-reads from that
//! position. When the next step would, the position reached so far is made
//! durable first (members flushed, then `reshape_position` in every
//! superblock, events raised). A crash therefore at worst redoes the steps
//! after the last checkpoint, reading old-geometry data that nothing has
//! touched.
//!
//! Done, every superblock gets what md writes at the end of a reshape: the
//! new member count and geometry, `data_offset + new_offset` as the data
//! offset, the data size grown by the move, RESHAPE_ACTIVE and NEW_OFFSET
//! cleared.
//!
//! A RAID 0 is restriped as md does it, as a RAID 4 whose parity member is
//! missing (`super::raid0` checks it and says what md records); the walk is
//! the same, and the last commit takes it back as a RAID 0.
//!
//! It must never write a byte of the new geometry over old-geometry data a
//! resume would still read, never compute parity or place copies itself,
//! and never reshape backwards, to fewer members, a RAID 10's chunk or
//! layout, or across levels other than 4 and 5 (those stay
//! [`super::reshape_not_built`]).

use super::{refused, SECTOR};
use crate::array::Array;
use crate::assemble::{geometry_of, Assembly, MemberState};
use crate::recovery::{clock_of, schedule, stopped, Progress, RunOptions};
use raidlab_core::{Error, ErrorKind, Op, Result, Volume};
use raidlab_layout::reshape::Reshape;
use raidlab_layout::{Geometry, Layout, Level, ParityLayout};
use raidlab_md::superblock::{feature, MetadataVersion};
use serde::Serialize;
use std::sync::Arc;

/// The most a reshape moves the data offset down (32 MiB): raidlab's cap, so
/// that a later reshape still finds room; more only makes the first steps
/// longer.
pub const MAX_MOVE_SECTORS: u64 = 65536;

/// md keeps a new data offset clear of the first 36 KiB from a 1.1/1.2
/// superblock (the superblock and room for a bitmap).
const SUPER_KEEP_SECTORS: u64 = 72;

/// Data each member gets per step: large steps, few flushes.
const STEP_MEMBER_BYTES: u64 = 4 << 20;

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
    /// `gap_sectors` (`super::shrink`).
    pub backwards: bool,
}

impl ReshapePlan {
    /// Whether data moves (a restripe), or only the superblocks change (a
    /// takeover between RAID 4 and a RAID 5 in parity-last).
    pub fn restripes(&self) -> bool {
        self.gap_sectors > 0
    }
}

/// md's layout word of parity-last, the RAID 5 layout that places data and
/// parity exactly as a RAID 4 does.
const PARITY_LAST: u32 = ParityLayout::ParityLast as u32;

impl Assembly {
    /// Check a restripe (more members of a RAID 4/5/6, a new chunk or
    /// layout, RAID 4 to 5 and back) against md's rules, with `coming`
    /// devices about to be added as spares: nothing is written. One kind of
    /// change at a time: more members, or a chunk/layout/level change over
    /// the same members.
    pub fn reshape_check(&self, req: &ReshapeRequest, coming: usize) -> Result<ReshapePlan> {
        self.reshape_check_sized(req, coming, None)
    }

    /// [`Assembly::reshape_check`] with the array size the user accepts
    /// (`--array-size`, bytes): fewer members of a RAID 4/5/6 are checked
    /// only with one (`super::shrink`), as md reshapes only an array
    /// already truncated to what the new members hold.
    pub fn reshape_check_sized(
        &self,
        req: &ReshapeRequest,
        coming: usize,
        array_bytes: Option<u64>,
    ) -> Result<ReshapePlan> {
        let g = self.geometry;
        let old = g.raid_disks;
        let what = req.describe(g.level);
        if array_bytes.is_some() && req.raid_devices.is_none_or(|n| n >= old) {
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
            return self.raid0_reshape_check(req, coming, &what);
        }
        if g.level == Level::Raid10 && matches!(req.level, None | Some(Level::Raid10)) {
            return self.raid10_reshape_check(req, coming, &what);
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
        let new_chunk = match req.chunk_bytes {
            None => chunk,
            Some(c) => {
                if c % SECTOR != 0 || c / SECTOR > u64::from(u32::MAX) {
                    return Err(Error::invalid(format!(
                        "--chunk {c}: not a whole number of sectors md can record"
                    )));
                }
                (c / SECTOR) as u32
            }
        };
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
            return self.shrink_check(req, &what, array_bytes, plan(0));
        }
        if n != old && !same_shape {
            return Err(super::reshape_not_built(&format!(
                "{what} (more members and a new chunk or layout in one reshape; md does both at once, raidlab one after the other: grow --raid-devices first, then the chunk or layout)"
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
        self.restripe_allowed(&what)?;
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
        // moved at least that far (less, and old and new stripes overlap).
        let gap = self.reshape_gap(u64::from(chunk.max(new_chunk)).max(1))?;
        Ok(plan(gap))
    }

    /// md's conditions for restriping this array in place without a backup
    /// file, checked before anything is written: metadata 1.x, no bitmap,
    /// journal or PPL to carry through, nothing rebuilding, every member
    /// there, parity consistent.
    pub(crate) fn restripe_allowed(&self, what: &str) -> Result<()> {
        let template = self.grow_template()?;
        match template.version() {
            MetadataVersion::V0_90 => {
                return Err(refused(
                    "metadata 0.90 has no new data offset, so md reshapes it only through a backup file (mdadm --backup-file), which raidlab does not build; nothing was changed".into(),
                ))
            }
            MetadataVersion::V1_0 => {
                // 1.0 keeps its superblock at the end: md could move the
                // data offset down only if the data does not start at 0.
            }
            _ => {}
        }
        if self.bitmap.is_some() || template.feature_map & feature::BITMAP_OFFSET != 0 {
            return Err(refused(
                "the array has an internal bitmap, which a reshape must resize with it; raidlab does not build that yet: remove it (`raidlab grow --bitmap none`), grow, then add it back; nothing was changed".into(),
            ));
        }
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
        if !self.in_sync() {
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
            let room = room_below_data(&m.sb);
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
        if plan.backwards {
            return self.shrink_start(plan);
        }
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
        for (k, &s) in spares.iter().enumerate() {
            let role = old + k;
            let dev = self.members[s].sb.dev_number;
            self.set_role(dev, role as u16);
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
        self.commit(|sb| {
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
        })?;
        self.geometry = geometry_of(&self.grow_template()?)?;
        Ok(())
    }

    /// Carry the reshape the superblocks record to its end (from its
    /// checkpointed position: a fresh one, or one stopped by a crash or a
    /// stop request). Refused for a reshape of a kind raidlab does not do.
    pub fn reshape_run(
        &mut self,
        opts: RunOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ReshapeReport> {
        let r = match self.reshape() {
            None => {
                return Err(Error::invalid(
                    "the array is not in the middle of a reshape: nothing to continue",
                ))
            }
            Some(r) => r?,
        };
        let template = self.grow_template()?;
        let gap = i64::from(template.new_offset).unsigned_abs();
        // Forwards with the data moved down, at one level: more members,
        // or a new chunk or layout over the same members with the data
        // moved by at least the larger chunk (md's condition for running
        // such a reshape without a backup).
        let same_members = r.new.raid_disks == r.old.raid_disks;
        let reshapes = r.new.raid_disks > r.old.raid_disks
            && r.old.layout == r.new.layout
            && r.old.chunk_bytes == r.new.chunk_bytes
            || same_members
                && (r.old.layout != r.new.layout || r.old.chunk_bytes != r.new.chunk_bytes)
                && gap * SECTOR >= r.old.chunk_bytes.max(r.new.chunk_bytes);
        let walks = match r.new.level {
            Level::Raid4 | Level::Raid5 | Level::Raid6 => reshapes && r.old.level == r.new.level,
            Level::Raid10 => raid10_walk_supported(&r, gap * SECTOR),
            _ => false,
        };
        let backwards = r.backwards;
        let moved = template.feature_map & feature::NEW_OFFSET != 0;
        let supported = if backwards {
            moved && template.new_offset > 0 && Self::shrink_walk_supported(&r, gap * SECTOR)
        } else {
            walks && moved && template.new_offset < 0
        };
        if !supported {
            return Err(refused(
                "this reshape (a level change, more members with a new chunk or layout, a RAID 10 new chunk or layout, a RAID 0 or 10 or a same-members reshape going backwards, or one without a large enough move of the data offset) is not one raidlab carries on: finish it with `mdadm --grow --continue` on Linux; nothing was changed".into(),
            ));
        }
        if let Some(m) = self
            .members
            .iter()
            .find(|m| m.is_live() && m.sb.new_offset != template.new_offset)
        {
            return Err(refused(format!(
                "{}: its new_offset ({}) differs from the others' ({}): raidlab moves every member's data by the same amount; finish it with mdadm; nothing was changed",
                m.device.path, m.sb.new_offset, template.new_offset
            )));
        }
        let raid0 = self.raid0_restripe(&r);
        // A shrink's old geometry also reads the roles past the new count.
        let mut missing = self.missing();
        for role in r.new.raid_disks..r.old.raid_disks {
            if self.reshape_area(role, false, 0)?.is_none() {
                missing.push(role);
            }
        }
        if !missing.is_empty() && !raid0 {
            return Err(refused(format!(
                "role(s) {missing:?} missing: carrying on a degraded reshape is not built; nothing was changed"
            )));
        }
        let gap_bytes = gap * SECTOR;
        let unit = r.forward_unit();
        // md's RAID 10 walk records positions inside a chunk too, and takes
        // any back; its parity walk only whole stripes.
        if r.new.level != Level::Raid10 && r.position % unit != 0 {
            return Err(refused(format!(
                "reshape_position {} is not on a stripe boundary of the reshape ({unit} bytes): not a position md or raidlab checkpoints; nothing was changed",
                r.position
            )));
        }
        let old_array = self.reshape_side(&r, false)?;
        let new_array = self.reshape_side(&r, true)?;
        let old_end = r.old.array_bytes();
        let total = r.new.array_bytes();
        let step = (STEP_MEMBER_BYTES * r.new.data_disks() as u64 / unit).max(1) * unit;
        // The long run counts upwards: a backward walk runs over the
        // distance from the new geometry's end (`total - array byte`).
        let walked = |at: u64| if backwards { total - at } else { at };
        let mut run = schedule(&opts, &[(walked(r.position), total)], step);
        let clock = clock_of(&opts);
        // A RAID 0's count, without the RAID 4's missing parity role.
        let parity_role = usize::from(raid0);
        let mut report = ReshapeReport {
            old_raid_devices: r.old.raid_disks - parity_role,
            new_raid_devices: r.new.raid_disks - parity_role,
            old_array_bytes: old_end,
            new_array_bytes: total,
            data_offset_moved_bytes: gap_bytes,
            backwards,
            resumed_from: r.position,
            resumed: walked(r.position) > 0,
            checkpoints: 0,
            spares: Vec::new(),
        };
        let mut checkpointed = r.position;
        let mut buf = Vec::new();
        while let Some(s) = run.peek() {
            // The array bytes of this step, and the position reached before
            // it (its start going forwards, its end going backwards).
            let (a, b) = if backwards {
                (total - s.end, total - s.start)
            } else {
                (s.start, s.end)
            };
            let here = walked(s.start);
            if stopped(&opts) {
                self.reshape_checkpoint(&new_array, here, &mut checkpointed)?;
                return Err(Error::new(
                    ErrorKind::Interrupted,
                    Op::Write,
                    format!(
                        "reshape stopped at array byte {here} of {total}; run `raidlab grow --continue` with the same members to finish it (the array reads meanwhile, read-only)"
                    ),
                ));
            }
            let limit_at = |checkpoint| {
                if backwards {
                    r.backward_write_limit(gap_bytes, checkpoint)
                } else {
                    r.forward_write_limit(gap_bytes, checkpoint)
                }
            };
            let mut limit = limit_at(checkpointed);
            // Whether the next unit (a resumed RAID 10 may start inside
            // one) would land where the last checkpoint still reads.
            let blocked = if backwards {
                limit > (b - 1) / unit * unit
            } else {
                limit < ((a / unit + 1) * unit).min(b)
            };
            if blocked {
                // Move the checkpoint to here first.
                self.reshape_checkpoint(&new_array, here, &mut checkpointed)?;
                report.checkpoints += 1;
                limit = limit_at(checkpointed);
            }
            let (a, b) = if backwards {
                (a.max(limit), b)
            } else {
                (a, b.min(limit))
            };
            if b <= a {
                return Err(Error::new(
                    ErrorKind::Invalid,
                    Op::Plan,
                    format!("reshape: no room to write the stripe at array byte {here} (move {gap_bytes} bytes): the superblocks' reshape fields are not ones raidlab wrote"),
                ));
            }
            buf.clear();
            buf.resize((b - a) as usize, 0);
            if a < old_end {
                let upto = b.min(old_end);
                old_array.read_at(&mut buf[..(upto - a) as usize], a)?;
            }
            new_array.write_at(&buf, a)?;
            let reached = if backwards { a } else { b };
            if run.advance(walked(reached), (b - a) / r.new.data_disks() as u64) {
                self.reshape_checkpoint(&new_array, reached, &mut checkpointed)?;
                report.checkpoints += 1;
            }
            progress(Progress {
                done: walked(reached),
                total,
            });
            run.wait(&*clock, &|| stopped(&opts));
        }
        new_array.flush()?;
        if backwards {
            report.spares = self.shrink_release(r.new.raid_disks);
        }
        self.reshape_finish(raid0)?;
        Ok(report)
    }

    /// Make everything written up to array byte `at` durable, then record it
    /// as the reshape position in every superblock (events raised).
    fn reshape_checkpoint(&mut self, new: &Array, at: u64, done: &mut u64) -> Result<()> {
        if at == *done {
            return Ok(());
        }
        new.flush()?;
        let sectors = at / SECTOR;
        self.commit(|sb| sb.reshape_position = sectors)?;
        *done = at;
        Ok(())
    }

    /// The superblocks of a finished reshape, as md writes them; a RAID 0's
    /// (`raid0`: restriped as a RAID 4 without its parity member) taken
    /// back as a RAID 0 in the same commit, as md's `raid0_takeover_raid45`
    /// writes it: one role fewer, each member's data size the component
    /// size.
    fn reshape_finish(&mut self, raid0: bool) -> Result<()> {
        if raid0 {
            self.slots.pop();
        }
        self.commit(|sb| {
            let moved = i64::from(sb.new_offset);
            sb.data_offset = (sb.data_offset as i64 + moved) as u64;
            sb.data_size = (sb.data_size as i64 - moved) as u64;
            sb.new_offset = 0;
            sb.delta_disks = 0;
            sb.reshape_position = 0;
            sb.level = sb.new_level;
            sb.layout = sb.new_layout;
            sb.chunksize = sb.new_chunk;
            sb.feature_map &=
                !(feature::RESHAPE_ACTIVE | feature::NEW_OFFSET | feature::RESHAPE_BACKWARDS);
            if raid0 {
                sb.level = 0;
                sb.new_level = 0;
                sb.layout = 0;
                sb.new_layout = 0;
                sb.raid_disks -= 1;
                sb.data_size = sb.size;
            }
        })?;
        self.geometry = geometry_of(&self.grow_template()?)?;
        Ok(())
    }

    /// One side of the reshape as a running array over the members' data
    /// areas at that side's offset: the old one read-only.
    fn reshape_side(&self, r: &Reshape, new: bool) -> Result<Array> {
        let g = if new { r.new } else { r.old };
        let vols = (0..g.raid_disks)
            .map(|role| self.reshape_area(role, new, g.member_bytes))
            .collect::<Result<Vec<Option<Arc<dyn Volume>>>>>()?;
        let what = if new { "new geometry" } else { "old geometry" };
        let a = Array::new(format!("reshape ({what})"), g, vols)?
            .with_executor(Arc::clone(self.executor()));
        Ok(if new { a } else { a.read_only() })
    }
}

/// Whether raidlab carries on the RAID 10 reshape `r` with the data moved
/// down `gap` bytes: more members, the same chunk and layout, near or
/// offset, and a move the walk never stalls on.
fn raid10_walk_supported(r: &Reshape, gap: u64) -> bool {
    let near_or_offset = match r.new.layout {
        Layout::Raid10(l) => l.far == 1 || l.offset,
        _ => false,
    };
    r.old.level == Level::Raid10
        && r.new.level == Level::Raid10
        && near_or_offset
        && r.old.layout == r.new.layout
        && r.old.chunk_bytes == r.new.chunk_bytes
        && r.new.raid_disks > r.old.raid_disks
        && gap >= r.forward_min_gap()
}

/// Sectors free below a member's data for the data to move into, by md's
/// rule for a new offset: clear of the superblock's first 36 KiB and of the
/// bad block log (metadata 1.0 keeps its metadata at the end: everything
/// below the data is free).
pub(super) fn room_below_data(sb: &raidlab_md::Superblock) -> u64 {
    if sb.super_offset >= sb.data_offset {
        return sb.data_offset;
    }
    let mut floor = sb.super_offset + SUPER_KEEP_SECTORS;
    if sb.bblog_size != 0 && sb.bblog_offset > 0 {
        floor = floor.max(sb.super_offset + sb.bblog_offset as u64 + u64::from(sb.bblog_size));
    }
    sb.data_offset.saturating_sub(floor)
}
