//! A RAID 10 restriped as md (3.5 and later) reshapes one: onto more
//! members (`--raid-devices N` up), onto fewer (with `--array-size`), or
//! over the same members to a new chunk (`--chunk`) or between the near
//! and offset layouts with the same copies (`--layout`); in the near and
//! offset layouts only, with no backup file.
//!
//! What it decides: whether md would reshape this RAID 10 this way at all,
//! refusing with md's reason (mdadm's `analyse_change`, the kernel's
//! `raid10_check_reshape`: never the far layout, never to it, never another
//! number of copies, a new chunk only when the array is a whole number of
//! them; the data offset must move by at least the taller row of the two
//! geometries, `raid10_start_reshape`), and nothing written; more or fewer
//! members with a new chunk or layout go in one reshape, as md makes them
//! (a shrink's array size whole chunks of the larger chunk); and what md
//! records while it runs (the level, the old layout and chunk beside the
//! new ones, `delta_disks` the members added or taken away). Onto more
//! members, how far the data offset moves down is
//! [`Assembly::reshape_gap`]'s rule, never below the layout crate's
//! `Reshape::forward_min_gap` for this reshape. Over the same members the
//! same, forwards: md moves the data offset whichever way the members have
//! more room (mdadm's `set_new_data_offset`), which is down on what mdadm
//! and raidlab create, and raidlab always down, as its RAID 5/6 restripes
//! do; the new geometry must hold all of the array, which md keeps at its
//! size. Onto fewer, as md
//! shrinks a RAID 10 (Linux 3.5 and later, mdadm's `raid10_reshape`): the
//! array must already be truncated to what the fewer members hold (the
//! size the user accepts, `--array-size`, in whole chunks); the data offset
//! moves up by md's least move, one row (`Reshape::backward_min_gap`, two
//! rows where raidlab's walk needs them), taken out of the component size
//! when a member has less room than that after its data, as mdadm does;
//! and the walk goes backwards from the end, with `super::shrink`'s start
//! and end (the members past the new count left as spares).
//!
//! The walk (and which RAID 10 reshapes it carries on), its checkpoints and
//! its last commit are `super::walk`'s: a running array of the new
//! geometry writes every copy of what it reads from the old one.
//!
//! Also what md allows of a RAID 10's component size (`--size`, the
//! kernel's `raid10_resize`): never in the far layout, never mid-reshape,
//! and its least size (a row); the size md keeps of what was asked is the
//! geometry's rounding (md's `calc_sectors`, `raidlab_layout`), the rest of
//! `--size` is `super`'s, the same for every level. Nothing here reads or
//! writes data.

use super::reshape::{ReshapePlan, ReshapeRequest};
use super::restripe_bitmap::room_below_data;
use super::{refused, SECTOR};
use crate::assemble::Assembly;
use raidlab_core::{Error, ErrorKind, Op, Result};
use raidlab_layout::reshape::{MdReshape, Reshape};
use raidlab_layout::{Geometry, Layout, Level, Raid10Layout};
use raidlab_md::superblock::MetadataVersion;
use raidlab_md::Superblock;

impl Assembly {
    /// Check `--raid-devices N` (and any `--layout`/`--chunk`) of a RAID 10
    /// against md's rules, with `coming` devices about to be added as
    /// spares and, for fewer members, `array_bytes` the size the user
    /// accepts (`--array-size`); nothing is written.
    pub(crate) fn raid10_reshape_check(
        &self,
        req: &ReshapeRequest,
        coming: usize,
        what: &str,
        array_bytes: Option<u64>,
    ) -> Result<ReshapePlan> {
        let g = self.geometry;
        let old = g.raid_disks;
        self.grow_check_no_reshape()?;
        let template = self.grow_template()?;
        let layout = Raid10Layout::from_md(template.layout)?;
        if let Some(why) = raid10_shapes_refusal(layout, layout) {
            return Err(refused(format!("{what}: {why}; nothing was changed")));
        }
        let (new_layout, new_chunk) = self.raid10_new_shape(req, what)?;
        let chunk = template.chunksize;
        let restripe = new_layout != template.layout || new_chunk != chunk;
        let n = req.raid_devices.unwrap_or(old);
        if n == old && !restripe {
            return Err(Error::invalid(format!(
                "{what}: the array already is that: no change requested"
            )));
        }
        if n > usize::from(raidlab_md::ROLE_SPARE) - 3 {
            return Err(Error::invalid(format!(
                "--raid-devices {n} is more than md allows"
            )));
        }
        Geometry::from_md(10, new_layout, new_chunk, n as u32, template.size)
            .map_err(|e| refused(format!("{what}: {}; nothing was changed", e.message)))?;
        if template.version() == MetadataVersion::V0_90 {
            return Err(refused(format!(
                "{what}: metadata 0.90 has no new data offset, and md reshapes a RAID 10 only by moving it (mdadm: \"Metadata version doesn't support data_offset changes\"); nothing was changed"
            )));
        }
        self.restripe_allowed(what)?;
        if restripe && n == old {
            return self.raid10_restripe_check(what, new_layout, new_chunk);
        }
        if n < old {
            return self.raid10_shrink_check(what, n, new_layout, new_chunk, array_bytes);
        }
        let spares = self.spare_count();
        let need = n - old;
        if spares + coming < need {
            return Err(refused(format!(
                "need {need} spare(s) for the new member slots and only have {} (mdadm: \"Need {need} spares to avoid degraded array\"): give the new members with --add; nothing was changed",
                spares + coming
            )));
        }
        // The least move of the data offset: md's (one row) or, where the
        // walk's row rule needs it, two. With a new chunk or layout too (md
        // makes both in one reshape), the rows of both sides count.
        let probe = Reshape::from_md(&MdReshape {
            level: 10,
            layout: template.layout,
            chunk_sectors: chunk,
            raid_disks: n as u32,
            new_level: 10,
            new_layout,
            new_chunk_sectors: new_chunk,
            delta_disks: need as i32,
            position_sectors: 0,
            backwards: false,
            member_sectors: template.size,
        })?;
        if restripe {
            // The kernel's raid10_check_reshape: the array a whole number of
            // new chunks; and the new geometry must hold all of it (md grows
            // the array only once the reshape ends).
            let chunk_bytes = u64::from(new_chunk) * SECTOR;
            if probe.old.array_bytes() % chunk_bytes != 0 {
                return Err(refused(format!(
                    "{what}: the array ({} KiB) is not a whole number of the new {} KiB chunks, and md restripes a RAID 10 only then (the kernel's raid10_check_reshape refuses it); nothing was changed",
                    probe.old.array_bytes() / 1024,
                    chunk_bytes / 1024
                )));
            }
            if probe.new.array_bytes() < probe.old.array_bytes() {
                return Err(refused(format!(
                    "{what}: the new geometry holds {} KiB of the members, less than the array's {} KiB; nothing was changed",
                    probe.new.array_bytes() / 1024,
                    probe.old.array_bytes() / 1024
                )));
            }
        }
        let least = probe.forward_min_gap() / SECTOR;
        self.raid10_head_room(
            least,
            "a RAID 10 reshape onto more members moves the data offset down by at least",
            " (mdadm: \"Insufficient head-space for reshape\"); md has no backup-file way for RAID 10",
        )?;
        let gap = self.reshape_gap(least)?;
        let plan = ReshapePlan {
            old_raid_devices: old,
            new_raid_devices: n,
            gap_sectors: gap,
            level: 10,
            layout: template.layout,
            new_layout,
            chunk_sectors: chunk,
            new_chunk_sectors: new_chunk,
            then_level: None,
            backwards: false,
            component_sectors: None,
            backup_sectors: 0,
        };
        // The bitmap md resizes at the start must fit its room: refused now,
        // before anything is written, if it cannot.
        self.raid10_reshape_bitmap(10, (old, n), new_layout, new_chunk, gap)?;
        Ok(plan)
    }

    /// Refuse unless every member in service has `least` sectors free below
    /// its data for the data offset to move down into: `moves` says what
    /// moves it, `md` what md says of it.
    fn raid10_head_room(&self, least: u64, moves: &str, md: &str) -> Result<()> {
        for m in self.members.iter().filter(|m| m.is_live()) {
            let room = room_below_data(&m.sb, self.bitmap.as_ref());
            if room < least {
                return Err(Error::new(
                    ErrorKind::Refused,
                    Op::Plan,
                    format!(
                        "{}: {} KiB free below the data (data offset {} sectors), and {moves} {} KiB{md}; nothing was changed",
                        m.device.path,
                        room / 2,
                        m.sb.data_offset,
                        least / 2
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A new chunk or a switch between the near and offset layouts over the
    /// same members (the same copies, never far: checked by the caller), as
    /// md restripes a RAID 10 (the kernel's `raid10_check_reshape`, mdadm's
    /// `raid10_reshape` with no change of members). The array must be a
    /// whole number of new chunks (md's rule) and the new geometry must
    /// hold all of it (raidlab's: md keeps the array size through such a
    /// reshape, and a smaller new geometry would lose its end); the data
    /// offset moves down and the walk goes forwards. md moves it whichever
    /// way the members have more room (mdadm's `set_new_data_offset`),
    /// which is down on what mdadm and raidlab create; raidlab moves it
    /// down only, as for its RAID 5/6 restripes, by at least md's least
    /// move, one row of the taller side (`raid10_start_reshape`), or two
    /// where the walk's row rule needs them (`Reshape::forward_min_gap`),
    /// then [`Assembly::reshape_gap`]'s share of the room. Nothing is
    /// written.
    fn raid10_restripe_check(
        &self,
        what: &str,
        new_layout: u32,
        new_chunk: u32,
    ) -> Result<ReshapePlan> {
        let template = self.grow_template()?;
        let n = self.geometry.raid_disks;
        let chunk = template.chunksize;
        let probe = |size: u64| {
            Reshape::from_md(&MdReshape {
                level: 10,
                layout: template.layout,
                chunk_sectors: template.chunksize,
                raid_disks: n as u32,
                new_level: 10,
                new_layout,
                new_chunk_sectors: new_chunk,
                delta_disks: 0,
                position_sectors: 0,
                backwards: false,
                member_sectors: size,
            })
        };
        let chunk_bytes = u64::from(new_chunk) * SECTOR;
        let fits = |r: &Reshape| {
            r.old.array_bytes() % chunk_bytes == 0 && r.new.array_bytes() >= r.old.array_bytes()
        };
        let r = probe(template.size)?;
        if !fits(&r) {
            let (old_end, new_end) = (r.old.array_bytes(), r.new.array_bytes());
            let why = if old_end % chunk_bytes != 0 {
                format!(
                    "the array ({} KiB) is not a whole number of the new {} KiB chunks, and md restripes a RAID 10 only then (the kernel's raid10_check_reshape refuses it)",
                    old_end / 1024,
                    chunk_bytes / 1024
                )
            } else {
                format!(
                    "the new geometry holds {} KiB of the members, less than the array's {} KiB, and md keeps the array's size through the reshape",
                    new_end / 1024,
                    old_end / 1024
                )
            };
            // The largest component size at which both hold, in whole
            // chunks of the smaller: one always does at a multiple of the
            // larger chunk times the copies (both sides then hold the
            // component size times the members over the copies), so the
            // search ends there at the latest.
            let copies = Raid10Layout::from_md(template.layout)?.copies() as u64;
            let whole = u64::from(chunk.max(new_chunk)) * copies;
            let step = u64::from(chunk.min(new_chunk)).max(1);
            let floor = template.size / whole * whole;
            let hint = (floor / step..=template.size / step)
                .rev()
                .map(|k| k * step)
                .find(|&s| s > 0 && probe(s).is_ok_and(|p| fits(&p)));
            return Err(refused(match hint.and_then(|s| probe(s).ok().map(|p| (s, p))) {
                Some((s, p)) => format!(
                    "{what}: {why}; shrink the array first: any file system to {} KiB or less, then `raidlab grow --size {}K`; nothing was changed",
                    p.old.array_bytes() / 1024,
                    s / 2
                ),
                None => format!(
                    "{what}: {why}, and the members are too small for any component size where it would be; nothing was changed"
                ),
            }));
        }
        let least = r.forward_min_gap() / SECTOR;
        self.raid10_head_room(
            least,
            "raidlab restripes a RAID 10 over the same members by moving the data offset down by at least",
            " (a row of the taller geometry, md's least, or two where raidlab's walk needs them; md would move it up instead into room after the data when there is more of that, which raidlab does not build); make room below the data or use mdadm --grow",
        )?;
        let gap = self.reshape_gap(least)?;
        Ok(ReshapePlan {
            old_raid_devices: n,
            new_raid_devices: n,
            gap_sectors: gap,
            level: 10,
            layout: template.layout,
            new_layout,
            chunk_sectors: template.chunksize,
            new_chunk_sectors: new_chunk,
            then_level: None,
            backwards: false,
            component_sectors: None,
            backup_sectors: 0,
        })
    }

    /// The bytes a RAID 10 (near or offset) holds on `n` members, fewer than
    /// it has, as md shrinks it (the move of the data offset taken out of
    /// the component size where a member has no room for it): the most
    /// `--array-size` may be for `--raid-devices n`. Nothing is written.
    /// `req`'s member count must be fewer; its chunk or layout, if any, is
    /// made in the same reshape, and the most is then in whole chunks of
    /// the larger chunk (md's `raid10_check_reshape`).
    pub fn raid10_shrink_holds(&self, req: &ReshapeRequest) -> Result<u64> {
        let what = "--raid-devices";
        let n = req
            .raid_devices
            .ok_or_else(|| Error::invalid("a RAID 10 shrink needs --raid-devices"))?;
        let (new_layout, new_chunk) = self.raid10_new_shape(req, what)?;
        Ok(self.raid10_shrink_fit(what, n, new_layout, new_chunk)?.1)
    }

    /// The md layout word and chunk (sectors) `req` asks of this RAID 10:
    /// its own where `req` names none; refused with md's words for the far
    /// layout and another number of copies.
    fn raid10_new_shape(&self, req: &ReshapeRequest, what: &str) -> Result<(u32, u32)> {
        let template = self.grow_template()?;
        let layout = Raid10Layout::from_md(template.layout)?;
        let new_layout = match &req.layout {
            None => template.layout,
            Some(name) => {
                let Layout::Raid10(to) = Layout::parse(Level::Raid10, Some(name))? else {
                    return Err(Error::invalid(format!(
                        "{what}: {name} is not a RAID 10 layout"
                    )));
                };
                if let Some(why) = raid10_shapes_refusal(layout, to) {
                    return Err(refused(format!("{what}: {why}; nothing was changed")));
                }
                to.md_layout()
            }
        };
        let chunk = template.chunksize;
        let new_chunk = req.chunk_sectors(chunk)?;
        Ok((new_layout, new_chunk))
    }

    /// [`Assembly::raid10_shrink_holds`] with the plan it rests on (its
    /// gap the move of the data offset) and what mdadm's message says of
    /// a move taken out of the component size.
    fn raid10_shrink_fit(
        &self,
        what: &str,
        n: usize,
        new_layout: u32,
        new_chunk: u32,
    ) -> Result<(ReshapePlan, u64, String)> {
        let g = self.geometry;
        let template = self.grow_template()?;
        let chunk = template.chunksize;
        let layout = Raid10Layout::from_md(template.layout)?;
        let to = Raid10Layout::from_md(new_layout)?;
        let mut plan = ReshapePlan {
            old_raid_devices: g.raid_disks,
            new_raid_devices: n,
            gap_sectors: 0,
            level: 10,
            layout: template.layout,
            new_layout,
            chunk_sectors: chunk,
            new_chunk_sectors: new_chunk,
            then_level: None,
            backwards: true,
            component_sectors: None,
            backup_sectors: 0,
        };
        let gap = self.shrink_geometry(&plan)?.backward_min_gap() / SECTOR;
        // mdadm's test is the least room after the data of any member.
        let mut after = u64::MAX;
        for m in self.members.iter().filter(|m| m.is_live()) {
            let room = super::data_room_sectors(&m.sb, m.device.volume.size())?;
            after = after.min(room.saturating_sub(m.sb.size));
        }
        if after < gap {
            // md keeps a RAID 10's component size in whole rows (its
            // `calc_sectors`): a chunk, or a chunk per far copy (offset),
            // of both geometries when the chunk or layout changes too.
            let rows = |chunk: u32, l: Raid10Layout| {
                u64::from(chunk) * u64::from(if l.offset { l.far } else { 1 })
            };
            let row = rows(chunk, layout).max(rows(new_chunk, to));
            let size = template.size.saturating_sub(gap) / row * row;
            if size == 0 {
                return Err(refused(format!(
                    "{what}: the members hold too little ({} KiB each) to move the data offset up by {} KiB as md does for a RAID 10 shrink; nothing was changed",
                    template.size / 2,
                    gap / 2
                )));
            }
            plan.component_sectors = Some(size);
        }
        // What the fewer members hold, in whole chunks of the larger chunk
        // (md restripes only an array of whole new chunks).
        let larger = u64::from(chunk.max(new_chunk)) * SECTOR;
        let fits = self.shrink_geometry(&plan)?.new.array_bytes() / larger * larger;
        let taken = match plan.component_sectors {
            Some(s) => format!(
                " (mdadm takes the {} KiB move of the data offset out of each member's used space, {} KiB left after the data, so each member then holds {} KiB)",
                gap / 2,
                after / 2,
                s / 2
            ),
            None => String::new(),
        };
        plan.gap_sectors = gap;
        Ok((plan, fits, taken))
    }

    /// Fewer members of this RAID 10 (near or offset, checked above), as
    /// md shrinks one: the data offset moves up by md's least move (one
    /// row: the chunk times the far copies; two where raidlab's walk needs
    /// them), taken out of the component size when a member has less room
    /// than that after its data (mdadm's `raid10_reshape`), and the array
    /// must already be truncated to what `n` members then hold
    /// (`array_bytes`, whole chunks: `raid10_check_reshape`,
    /// `raid10_start_reshape`). Nothing is written.
    fn raid10_shrink_check(
        &self,
        what: &str,
        n: usize,
        new_layout: u32,
        new_chunk: u32,
        array_bytes: Option<u64>,
    ) -> Result<ReshapePlan> {
        let (plan, fits, taken) = self.raid10_shrink_fit(what, n, new_layout, new_chunk)?;
        // Whole chunks of both geometries (powers of two: the larger).
        let chunk = plan.chunk_sectors.max(plan.new_chunk_sectors);
        let exposed = self.geometry.array_bytes();
        let Some(size) = array_bytes else {
            return Err(refused(format!(
                "{what}: this change will reduce the size of the array from {exposed} to {fits} bytes{taken} (mdadm: \"this change will reduce the size of the array. use --grow --array-size first to truncate array\"): shrink what the array holds (the file system) to {} KiB or less, then give `--array-size {}K` with --raid-devices {n}; nothing was changed",
                fits / 1024,
                fits / 1024
            )));
        };
        if size > fits {
            return Err(refused(format!(
                "{what}: --array-size {size} bytes does not fit in {n} members ({fits} bytes at most{taken}; md/raid10: \"array size must be reduce before number of disks\"); give --array-size {}K or less; nothing was changed",
                fits / 1024
            )));
        }
        let chunk_bytes = u64::from(chunk) * SECTOR;
        if size == 0 || size % chunk_bytes != 0 {
            return Err(refused(format!(
                "{what}: --array-size {size} bytes is not a whole number of {} KiB chunks, and md reshapes a RAID 10 only then (the kernel's raid10_check_reshape refuses it); give --array-size {}K; nothing was changed",
                chunk_bytes / 1024,
                size / chunk_bytes * chunk_bytes / 1024
            )));
        }
        Ok(plan)
    }
}

impl Assembly {
    /// Refuse `--size` of this RAID 10 where md refuses it
    /// (`raid10_resize`): mid-reshape (EBUSY) and in the far layout
    /// (EINVAL, which mdadm reports as "Cannot set device size").
    pub(super) fn raid10_resize_check(&self) -> Result<()> {
        self.grow_check_no_reshape()?;
        let layout = Raid10Layout::from_md(self.grow_template()?.layout)?;
        if layout.far > 1 && !layout.offset {
            return Err(refused(format!(
                "--size: md does not change the component size of a RAID 10 in the far layout ({}; the kernel's raid10_resize refuses it and mdadm says \"Cannot set device size ...: Invalid argument\"): each far copy starts a fixed fraction of the used part of every member, so a new size would move every far copy; make a new array in the near or offset layout, copy the data over, and grow that; nothing was changed",
                layout.name()
            )));
        }
        Ok(())
    }
}

/// The least component size md keeps of this RAID 10 (near or offset): a
/// chunk, or a chunk per far copy in the offset layout.
/// md's rules on the shapes of a RAID 10 reshape from layout `from` to
/// `to` (`raid10_check_reshape`, mdadm's `Grow.c`): never in the far
/// layout, never into it, never to another number of copies. Why not, in
/// mdadm's words, or `None` where md runs it. Also what `explain
/// --position` asks before it shows a RAID 10 mid-reshape.
pub fn raid10_shapes_refusal(from: Raid10Layout, to: Raid10Layout) -> Option<String> {
    let far = |l: Raid10Layout| l.far > 1 && !l.offset;
    if far(from) {
        return Some(format!(
            "md does not reshape a RAID 10 in the far layout ({}; mdadm: \"Cannot reshape RAID10 in far-mode\"): its far copies lie a fixed fraction of each member apart, and that fraction moves with every member, chunk or layout changed; make a new array in the near or offset layout and copy the data over",
            from.name()
        ));
    }
    if far(to) {
        return Some(
            "md does not reshape a RAID 10 into the far layout (mdadm: \"Cannot reshape RAID10 to far-mode\")".into(),
        );
    }
    if to.copies() != from.copies() {
        return Some(format!(
            "{} keeps {} copies of each chunk and {} keeps {}, and md never changes the number of copies (mdadm: \"Cannot change number of copies when reshaping RAID10\")",
            from.name(),
            from.copies(),
            to.name(),
            to.copies()
        ));
    }
    None
}

pub(super) fn raid10_row_sectors(sb: &Superblock) -> Result<u64> {
    let layout = Raid10Layout::from_md(sb.layout)?;
    let far = if layout.offset { layout.far.max(1) } else { 1 };
    Ok(u64::from(sb.chunksize) * u64::from(far))
}
