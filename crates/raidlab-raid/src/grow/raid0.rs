//! RAID 0 restripes and conversions, the way md does them. From a RAID 4 or
//! a RAID 5 in parity-last by md's `raid0_takeover_raid45` (the parity
//! member leaves). To RAID 10 and back by md's takeovers (`raid10_takeover_raid0`, `raid0_takeover_raid10`:
//! a RAID 10 near=2 of 2n keeps each RAID 0 chunk on role 2i and its mirror
//! on 2i+1, same row). Everything else through a RAID 4
//! whose parity member is missing (md's `raid45_takeover_raid0`). A RAID 0
//! of n members places data exactly as a RAID 4 of n+1 with no parity
//! member, so md takes it over as that, runs its ordinary RAID 4 reshape
//! (`--raid-devices`, `--chunk`) with the parity member still missing, and
//! takes the result back as a RAID 0 (`raid0_takeover_raid45`); or, for
//! `--level 4|5`, rebuilds the missing parity member onto a new device.
//! Fewer members (`--raid-devices N --array-size SIZE`) go the same way
//! backwards: md's RAID 4 of n+1 shrinks to N+1 (`super::shrink`'s check
//! and start, `super::walk`'s walk), its new parity role held by the
//! member that was role N, then mdadm's `impose_level` takes it back as a
//! RAID 0 of N, removing that member and the ones past it.
//!
//! What it decides:
//! - whether md would do this to this RAID 0 (one zone: members of one size;
//!   metadata 1.x; room below the data), refused with md's reason and
//!   nothing written;
//! - the state a RAID 0 restripe records while it runs, as md leaves it: a
//!   RAID 4 of n+k+1 with the new members in roles n..n+k-1 (the first one
//!   in the old parity role, as md's `raid5_add_disk` fills the first free
//!   slot) and the new parity role n+k missing; its layout word is the
//!   one md's takeover records, parity-last (5), and the new one too for
//!   more members, but mdadm's 0 for a new chunk (it sets that through
//!   sysfs); a RAID 0 taken over as a RAID 4 by `--level 4` keeps 5 too;
//! - the superblocks md writes when it takes the RAID 4 back as a RAID 0
//!   (written by the reshape's last commit): level 0, one member fewer,
//!   each member's data size the component size;
//! - for fewer members: md's rules (`--array-size` first, as md reshapes
//!   only an array already truncated; the size must fit N members; at least
//!   one member, md's least RAID 4 being two; room after every member's
//!   data for the move up, which on a RAID 0 only a larger device gives,
//!   md refusing `--size` of a RAID 0; else md's backup file, not built),
//!   the state recorded while it runs (a RAID 4 of N+1 reshaping backwards,
//!   parity-last, the old parity role n empty) and how it ends: the walk's
//!   last commit is md's end of a RAID 4 shrink (the members past N+1
//!   spares, the member in role N holding the new parity), then one commit
//!   takes it back as a RAID 0, as mdadm's `impose_level` does: the spares
//!   removed, the parity member failed and removed, their own superblocks
//!   left as that last commit wrote them (md writes none to a device it
//!   removes). They are not spares of the RAID 0 (md's RAID 0 has none,
//!   and refuses to run with one), so they leave the array.
//!
//! That in this state the old parity role holds a new member, not parity,
//! is the assembly's rule (`Assembly::raid0_restripe`), as it reads such an
//! array too. md stopped part-way records that member recovering instead
//! of in sync; the assembly takes it as raidlab's state
//! (`Assembly::adopt_raid0_restripe_member`), so `--continue` finishes md's
//! RAID 0 grow too.
//!
//! The data is moved by [`super::walk`]'s walk and parity is rebuilt by
//! `recovery`; nothing here reads or writes data. It must never make a
//! RAID 0 of an array unless every data member is there and the data sits
//! where the RAID 0 reads it (parity-last, or near=2 pairs), and never
//! shrink one whose truncation the user has not asked for.

use super::convert::Conversion;
use super::reshape::{ReshapePlan, ReshapeRequest};
use super::{refused, SECTOR};
use crate::assemble::{Assembly, MemberState};
use crate::zoned::is_zoned;
use raidlab_core::{Error, Result};
use raidlab_layout::{Geometry, Layout, Level, ParityLayout};
use raidlab_md::superblock::feature;

/// The layout word md records for the RAID 4 (or RAID 5) it takes a RAID 0
/// over as: `raid45_takeover_raid0` sets parity-last (ALGORITHM_PARITY_N)
/// whatever the level, and md's RAID 4 never reads the word, so it stays
/// there until something rewrites it. Writing mdadm's `--create` word (0)
/// instead would make raidlab's superblocks differ from md's for the same
/// grow.
const TAKEOVER_LAYOUT: u32 = ParityLayout::ParityLast as u32;

/// The layout word mdadm asks for when it restripes a RAID 0's chunk: that
/// change goes through md's sysfs `layout` with mdadm's RAID 4 word, 0 (more
/// members go through SET_ARRAY_INFO, which keeps md's takeover word).
const RAID4_LAYOUT: u32 = 0;

impl Assembly {
    /// The component size md gives the RAID 4 it takes a RAID 0 over as:
    /// each member's data, in whole chunks. Refused for a RAID 0 of more than
    /// one zone (members of different sizes), as md refuses to take one over.
    pub(crate) fn raid0_component_sectors(&self, what: &str) -> Result<u64> {
        let template = self.grow_template()?;
        let chunk = u64::from(template.chunksize.max(1));
        let sizes: Vec<u64> = self
            .members
            .iter()
            .filter(|m| m.is_live())
            .map(|m| m.sb.data_size)
            .collect();
        if is_zoned(&template, &sizes) {
            return Err(refused(format!(
                "{what}: the members hold different numbers of chunks (md's multi-zone RAID 0), and md takes a RAID 0 over as a RAID 4 only when they are all the same size (\"cannot takeover raid0 with more than one zone\"); nothing was changed"
            )));
        }
        let least = sizes.iter().copied().min().unwrap_or(0);
        Ok(least / chunk * chunk)
    }

    /// Check `--raid-devices N` (more members, or fewer with `array_bytes`
    /// the size the user accepts) or `--chunk` of a RAID 0 against md's
    /// rules, with `coming` devices about to be added as spares; nothing
    /// written. The plan is md's RAID 4 reshape with the parity member
    /// missing (for fewer members in the RAID 4's counts, checked by
    /// `super::shrink`).
    pub(crate) fn raid0_reshape_check(
        &self,
        req: &ReshapeRequest,
        coming: usize,
        what: &str,
        array_bytes: Option<u64>,
    ) -> Result<ReshapePlan> {
        let g = self.geometry;
        let old = g.raid_disks;
        if req.layout.is_some() {
            return Err(Error::invalid(format!(
                "{what}: a RAID 0 has no layout to change (mdadm: \"layout not meaningful for RAID 0\"); nothing was changed"
            )));
        }
        self.grow_check_no_reshape()?;
        let component = self.raid0_component_sectors(what)?;
        let template = self.grow_template()?;
        let n = req.raid_devices.unwrap_or(old);
        let chunk = template.chunksize;
        let new_chunk = match req.chunk_bytes {
            None => chunk,
            Some(c) if c % SECTOR == 0 && c / SECTOR <= u64::from(u32::MAX) => (c / SECTOR) as u32,
            Some(c) => {
                return Err(Error::invalid(format!(
                    "--chunk {c}: not a whole number of sectors md can record"
                )))
            }
        };
        if n == old && chunk == new_chunk {
            return Err(Error::invalid(format!(
                "{what}: the array already is that: no change requested"
            )));
        }
        if n < old {
            let plan = ReshapePlan {
                // The RAID 4's counts: the shrink runs as md's RAID 4
                // reshape, and `super::shrink` records these. With a new
                // chunk in the same reshape the layout word stays the
                // takeover's too: it is what tells a RAID 0's shrink from a
                // RAID 4 shrink that lost a member
                // (`Assembly::raid0_restripe`).
                old_raid_devices: old + 1,
                new_raid_devices: n + 1,
                gap_sectors: 0,
                level: Level::Raid4.md_level(),
                layout: TAKEOVER_LAYOUT,
                new_layout: TAKEOVER_LAYOUT,
                chunk_sectors: chunk,
                new_chunk_sectors: new_chunk,
                then_level: None,
                backwards: true,
                component_sectors: Some(component),
                backup_sectors: 0,
            };
            return self.shrink_check(req, what, array_bytes, plan, false);
        }
        if n + 1 > usize::from(raidlab_md::ROLE_SPARE) - 3 {
            return Err(Error::invalid(format!(
                "--raid-devices {n} is more than md allows"
            )));
        }
        Geometry::from_md(4, TAKEOVER_LAYOUT, new_chunk, (n + 1) as u32, component)
            .map_err(|e| refused(format!("{what}: {}; nothing was changed", e.message)))?;
        if component % u64::from(new_chunk.max(1)) != 0 {
            return Err(refused(format!(
                "{what}: the new chunk ({} KiB) does not evenly divide the component size ({} KiB), as mdadm requires; nothing was changed",
                new_chunk / 2,
                component / 2
            )));
        }
        self.restripe_allowed(what)?;
        let spares = self.spare_count();
        if spares + coming < n - old {
            return Err(refused(format!(
                "need {} device(s) for the new members and only have {} (mdadm: \"Need {} spares to create working array\"): give them with --add; nothing was changed",
                n - old,
                spares + coming,
                n - old
            )));
        }
        let gap = self.reshape_gap(u64::from(chunk.max(new_chunk)).max(1))?;
        Ok(ReshapePlan {
            old_raid_devices: old,
            new_raid_devices: n,
            gap_sectors: gap,
            level: Level::Raid4.md_level(),
            layout: TAKEOVER_LAYOUT,
            new_layout: if new_chunk == chunk {
                TAKEOVER_LAYOUT
            } else {
                RAID4_LAYOUT
            },
            chunk_sectors: chunk,
            new_chunk_sectors: new_chunk,
            then_level: None,
            backwards: false,
            component_sectors: None,
            backup_sectors: 0,
        })
    }

    /// Check `--level 4|5` of a RAID 0 (md's takeover to one member more, the
    /// new parity member rebuilt, then with `--raid-devices N` beyond that
    /// the reshape onto the other new members, then for a RAID 5 a restripe
    /// from parity-last to `layout`, mdadm's default left-symmetric;
    /// `preserve` keeps parity-last), with `coming` devices about to be
    /// added; nothing written. mdadm does the last two in one reshape;
    /// raidlab one after the other (a level change with a new layout is
    /// not one it makes at once).
    pub(crate) fn raid0_convert_check(
        &self,
        to: Level,
        raid_devices: Option<usize>,
        layout: Option<&str>,
        coming: usize,
    ) -> Result<Conversion> {
        let old = self.geometry.raid_disks;
        let what = format!("--level {} of a raid0", to.name());
        if !matches!(to, Level::Raid4 | Level::Raid5) {
            return Err(super::reshape_not_built(&what));
        }
        self.grow_check_no_reshape()?;
        // mdadm's count: --raid-devices N leaves N-1 data members.
        let n = raid_devices.unwrap_or(old + 1);
        if n < old + 1 {
            return Err(refused(format!(
                "{what} with --raid-devices {n}: a {} of {n} keeps {} data member(s), fewer than the RAID 0's {old}, so the array would shrink (mdadm: \"this change will reduce the size of the array\"); shrink it first (`raidlab grow --raid-devices N --array-size SIZE`, md's backward reshape), then convert; or give --raid-devices {} or more; nothing was changed",
                to.name(),
                n.saturating_sub(1),
                old + 1
            )));
        }
        if n > usize::from(raidlab_md::ROLE_SPARE) - 3 {
            return Err(Error::invalid(format!(
                "--raid-devices {n} is more than md allows"
            )));
        }
        self.raid0_component_sectors(&what)?;
        self.grow_check_idle(&what)?;
        let spares = self.spare_count();
        let need = n - old;
        if spares + coming < need {
            return Err(refused(format!(
                "{what}{} needs {need} device(s), one for parity{} (mdadm: \"Need {need} spare{} to create working array\"), and has {}: give them with --add; nothing was changed",
                raid_devices.map_or(String::new(), |n| format!(" --raid-devices {n}")),
                if need > 1 { " and the others for the new members" } else { "" },
                if need > 1 { "s" } else { "" },
                spares + coming
            )));
        }
        // A RAID 4 places data and parity as a RAID 5 in parity-last.
        let via = ParityLayout::ParityLast;
        let end = match (to, layout) {
            (_, Some("preserve")) | (Level::Raid4, None) => via,
            (Level::Raid4, Some(name)) => {
                Layout::parse(Level::Raid4, Some(name))?;
                via
            }
            (_, name) => match Layout::parse(Level::Raid5, name)? {
                Layout::Parity(p) => p,
                _ => via,
            },
        };
        if end != via || n > old + 1 {
            // The restripes after the takeover (onto more members, to
            // another layout) need what any reshape needs: checked now,
            // before anything is written.
            self.restripe_allowed(&what)?;
            self.reshape_gap(u64::from(self.grow_template()?.chunksize).max(1))?;
        }
        Ok(Conversion {
            to,
            old_raid_devices: old,
            new_raid_devices: n,
            via: if to == Level::Raid4 {
                "raid4".to_string()
            } else {
                via.name().to_string()
            },
            restripe_to: (end != via).then(|| end.name().to_string()),
        })
    }

    /// md's takeover of a RAID 0 as a RAID 4, or a RAID 5 in parity-last (the
    /// same placement), of one member more (`--level 4|5`): the first hot
    /// spare takes the new parity role, to be rebuilt (its parity computed by
    /// the ordinary rebuild), in one commit. Nothing moves on the other
    /// members.
    pub fn raid0_parity_takeover(&mut self, to: Level) -> Result<()> {
        let g = self.geometry;
        if g.level != Level::Raid0 {
            return Err(Error::invalid("parity takeover: the array is not a RAID 0"));
        }
        let what = format!("--level {} of a raid0", to.name());
        let component = self.raid0_component_sectors(&what)?;
        if !matches!(to, Level::Raid4 | Level::Raid5) {
            return Err(super::reshape_not_built(&what));
        }
        let spare = (0..self.members.len())
            .find(|&i| self.members[i].state == MemberState::Spare)
            .ok_or_else(|| {
                refused(format!(
                    "{what} needs a device for parity (mdadm: \"Need 1 spare to create working array\"): give it with --add; nothing was changed"
                ))
            })?;
        let old = g.raid_disks;
        self.slots.push(None);
        self.start_recovery(spare, old);
        let level = to.md_level();
        self.commit_takeover_with(level, TAKEOVER_LAYOUT, (old + 1) as u32, |sb| {
            sb.size = component
        })
    }

    /// Check `--level 10` of a RAID 0 of n (md's `raid10_takeover_raid0`):
    /// a RAID 10 near-2 of 2n, each member keeping its data in role 2i and
    /// a new device rebuilt as its mirror in role 2i+1; `coming` devices
    /// are about to be added for the mirrors. Nothing is written.
    pub(crate) fn raid10_convert_check(
        &self,
        raid_devices: Option<usize>,
        layout: Option<&str>,
        coming: usize,
    ) -> Result<Conversion> {
        let old = self.geometry.raid_disks;
        let what = "--level 10 of a raid0".to_string();
        self.grow_check_no_reshape()?;
        if let Some(n) = raid_devices.filter(|&n| n != 2 * old) {
            return Err(refused(format!(
                "{what} with --raid-devices {n}: md takes a RAID 0 of {old} over as a RAID 10 of {} (two copies of each member; mdadm: \"Impossible number of devices for RAID0->RAID10\"); nothing was changed",
                2 * old
            )));
        }
        if let Some(name) = layout {
            match Layout::parse(Level::Raid10, Some(name))? {
                Layout::Raid10(l) if l.near == 2 && l.far == 1 && !l.offset => {}
                _ => {
                    return Err(refused(format!(
                        "{what} --layout {name}: md takes a RAID 0 over only as a RAID 10 near=2 (n2) (mdadm: \"New layout impossible for RAID0->RAID10\"); nothing was changed"
                    )))
                }
            }
        }
        self.raid0_component_sectors(&what)?;
        self.grow_check_idle(&what)?;
        let have = self.spare_count() + coming;
        if have < old {
            return Err(refused(format!(
                "{what} needs {old} device(s), one mirror for each member, and has {have} (mdadm: \"Need {old} spares to create working array\"): give them with --add; nothing was changed"
            )));
        }
        Ok(Conversion {
            to: Level::Raid10,
            old_raid_devices: old,
            new_raid_devices: 2 * old,
            via: "n2".to_string(),
            restripe_to: None,
        })
    }

    /// md's takeover of a RAID 0 of n as a RAID 10 near-2 of 2n
    /// (`raid10_takeover_raid0`), in one commit: member i moves to role 2i,
    /// where a RAID 10 near-2 keeps the first copy of what it holds, and the
    /// first n hot spares take roles 2i+1, to be rebuilt as their mirrors.
    /// No data moves on the old members.
    pub fn raid10_takeover_raid0(&mut self) -> Result<()> {
        let g = self.geometry;
        if g.level != Level::Raid0 {
            return Err(Error::invalid("raid10 takeover: the array is not a RAID 0"));
        }
        let component = self.raid0_component_sectors("--level 10 of a raid0")?;
        let old = g.raid_disks;
        let spares: Vec<usize> = (0..self.members.len())
            .filter(|&i| self.members[i].state == MemberState::Spare)
            .take(old)
            .collect();
        if spares.len() < old {
            return Err(refused(format!(
                "need {old} hot spares for the mirrors and have {}; nothing was changed",
                spares.len()
            )));
        }
        let mut slots = vec![None; 2 * old];
        for (role, slot) in self.slots.clone().into_iter().enumerate() {
            if let Some(i) = slot {
                let dev = self.members[i].sb.dev_number;
                self.set_role(dev, (2 * role) as u16);
                self.members[i].role = Some(2 * role);
                slots[2 * role] = Some(i);
            }
        }
        self.slots = slots;
        for (k, &s) in spares.iter().enumerate() {
            self.start_recovery(s, 2 * k + 1);
        }
        // md's word for near=2: (1 << 8) | 2.
        let layout = 0x102;
        self.commit_takeover_with(10, layout, (2 * old) as u32, |sb| sb.size = component)
    }

    /// Check `--level 0` of a RAID 10 (md's `raid0_takeover_raid10`, after
    /// mdadm has removed one copy of each pair): near=2 over an even number
    /// of members, one working member in every pair, no bitmap, nothing
    /// rebuilding. Nothing is written.
    pub(crate) fn raid10_to_raid0_check(&self, raid_devices: Option<usize>) -> Result<Conversion> {
        let g = self.geometry;
        let what = "--level 0 of a raid10".to_string();
        self.grow_check_no_reshape()?;
        let template = self.grow_template()?;
        if template.layout != 0x102 || g.raid_disks % 2 != 0 {
            return Err(refused(format!(
                "{what}: md takes a RAID 10 over as a RAID 0 only in near=2 (n2) over an even number of members (this one: {}, {} members; md: \"Raid0 cannot takeover layout\"); nothing was changed",
                g.layout.name(),
                g.raid_disks
            )));
        }
        if let Some(n) = raid_devices.filter(|&n| n != g.raid_disks / 2) {
            return Err(refused(format!(
                "{what} with --raid-devices {n}: a RAID 10 of {} becomes a RAID 0 of {} (one copy of each pair); nothing was changed",
                g.raid_disks,
                g.raid_disks / 2
            )));
        }
        if self.bitmap.is_some() {
            return Err(refused(format!(
                "{what}: a RAID 0 has no bitmap: remove it first (`raidlab grow --bitmap none`); nothing was changed"
            )));
        }
        self.grow_check_idle(&what)?;
        if let Some(pair) = (0..g.raid_disks / 2)
            .find(|&p| self.slots[2 * p].is_none() && self.slots[2 * p + 1].is_none())
        {
            return Err(refused(format!(
                "{what}: roles {} and {} (a pair) both have no working member, so no copy of their data is left; nothing was changed",
                2 * pair,
                2 * pair + 1
            )));
        }
        Ok(Conversion {
            to: Level::Raid0,
            old_raid_devices: g.raid_disks,
            new_raid_devices: g.raid_disks / 2,
            via: "n2".to_string(),
            restripe_to: None,
        })
    }

    /// md's takeover of a RAID 10 near=2 of 2n as a RAID 0 of n, in one
    /// commit: the first working member of each pair (roles 2i, 2i+1) takes
    /// role i, the other leaves the array (listed removed, as mdadm removes
    /// it first; its own superblock is not written again). No data moves.
    pub fn raid0_takeover_raid10(&mut self) -> Result<()> {
        let c = self.raid10_to_raid0_check(None)?;
        let n = c.new_raid_devices;
        let mut slots = Vec::with_capacity(n);
        for p in 0..n {
            let keep = self.slots[2 * p].or(self.slots[2 * p + 1]);
            slots.push(keep);
            for i in [self.slots[2 * p], self.slots[2 * p + 1]]
                .into_iter()
                .flatten()
            {
                if Some(i) != keep {
                    self.members[i].state = MemberState::Removed;
                    self.members[i].role = None;
                }
            }
        }
        for (role, &slot) in slots.iter().enumerate() {
            if let Some(i) = slot {
                let dev = self.members[i].sb.dev_number;
                self.set_role(dev, role as u16);
                self.members[i].role = Some(role);
            }
        }
        self.slots = slots;
        self.commit_takeover(0, 0, n as u32)
    }

    /// Check `--level 0` of a RAID 4 or 5 (mdadm fails and removes the
    /// parity member, then md's `raid0_takeover_raid45`): a RAID 4, or a
    /// RAID 5 in parity-last, is its RAID 0 with parity on the last member;
    /// a RAID 5 in another layout is restriped to parity-last first, as
    /// mdadm does. Every data member must be there; no bitmap, PPL or
    /// journal (a RAID 0 has none). Nothing is written.
    pub(crate) fn raid45_to_raid0_check(&self, raid_devices: Option<usize>) -> Result<Conversion> {
        let g = self.geometry;
        let what = format!("--level 0 of a {}", g.level.name());
        self.grow_check_no_reshape()?;
        let template = self.grow_template()?;
        let n = g.raid_disks - 1;
        if let Some(k) = raid_devices.filter(|&k| k != n) {
            return Err(refused(format!(
                "{what} with --raid-devices {k}: a {} of {} becomes a RAID 0 of {n} (its parity member leaves); change the member count in a run of its own; nothing was changed",
                g.level.name(),
                g.raid_disks
            )));
        }
        if self.bitmap.is_some() || template.feature_map & feature::BITMAP_OFFSET != 0 {
            return Err(refused(format!(
                "{what}: a RAID 0 has no bitmap: remove it first (`raidlab grow --bitmap none`); nothing was changed"
            )));
        }
        if self.has_journal() {
            return Err(refused(format!(
                "{what}: the array has a write journal, which md cannot remove and a RAID 0 cannot have; nothing was changed"
            )));
        }
        if template.feature_map & (feature::PPL | feature::MULTIPLE_PPLS) != 0 {
            return Err(refused(format!(
                "{what}: a RAID 0 has no partial parity log: switch it to resync first (`raidlab grow --consistency-policy resync`); nothing was changed"
            )));
        }
        self.grow_check_idle(&what)?;
        let missing = self.missing();
        if let Some(r) = missing.iter().find(|&&r| r != n) {
            return Err(refused(format!(
                "{what}: role {r} is missing and holds data, which a RAID 0 must have on a member: add and rebuild it first; nothing was changed"
            )));
        }
        let in_parity_last =
            g.level == Level::Raid4 || g.layout == Layout::Parity(ParityLayout::ParityLast);
        if !in_parity_last {
            // The restripe mdadm runs first needs every member and room.
            self.restripe_allowed(&what)?;
            self.reshape_gap(u64::from(template.chunksize).max(1))?;
        }
        Ok(Conversion {
            to: Level::Raid0,
            old_raid_devices: g.raid_disks,
            new_raid_devices: n,
            via: ParityLayout::ParityLast.name().to_string(),
            restripe_to: (!in_parity_last).then(|| ParityLayout::ParityLast.name().to_string()),
        })
    }

    /// The end of a RAID 0's shrink, once the walk's last commit has left
    /// what md's reshape leaves: a RAID 4 of one member more than asked,
    /// complete (the member in the new parity role, which held data before,
    /// now holds the parity the walk computed), the members past it spares
    /// (`released`, in role order), their superblocks written so. mdadm
    /// then takes it back as a RAID 0 (`impose_level`): it removes the
    /// spares, fails and removes the parity member, and sets the level, md's
    /// `raid0_takeover_raid45`. raidlab makes that last step
    /// [`Assembly::raid0_takeover_raid45`]'s one commit, which leaves the
    /// superblocks of the members that go as they were: the spares' say
    /// spare, the parity member's its role in the RAID 4, all at the events
    /// before, as md leaves them. Returns every member that left, in role
    /// order.
    ///
    /// A crash between the two commits leaves that complete RAID 4, which
    /// md assembles too (mdadm's level change back lives only in the
    /// process that runs the reshape): `raidlab grow --level 0` finishes it.
    pub(super) fn raid0_shrink_finish(&mut self, released: Vec<String>) -> Result<Vec<String>> {
        let parity = self.slots.len().checked_sub(1).and_then(|r| self.slots[r]);
        let Some(parity) = parity else {
            return Err(Error::invalid(
                "RAID 0 shrink: the new parity role has no member at the reshape's end",
            ));
        };
        let mut gone = vec![self.members[parity].device.path.clone()];
        gone.extend(released);
        self.raid0_takeover_raid45()?;
        Ok(gone)
    }

    /// md's takeover of a RAID 4, or a RAID 5 in parity-last, as a RAID 0
    /// of its data members (`raid0_takeover_raid45`), in one commit: the
    /// parity member and any hot spare leave the array (listed removed, as
    /// mdadm removes them first; their own superblocks are left as they
    /// were), each data member's data size becomes the component size, and
    /// nothing moves.
    pub fn raid0_takeover_raid45(&mut self) -> Result<()> {
        let c = self.raid45_to_raid0_check(None)?;
        if c.restripe_to.is_some() {
            return Err(refused(
                "the RAID 5 is not in parity-last: restripe it first (`raidlab grow --layout parity-last`); nothing was changed".into(),
            ));
        }
        let parity = c.new_raid_devices;
        for m in self.members.iter_mut() {
            let leaves = m.state == MemberState::Spare
                || (m.state == MemberState::Active && m.role == Some(parity));
            if leaves {
                m.state = MemberState::Removed;
                m.role = None;
            }
        }
        self.slots.truncate(parity);
        self.commit_takeover_with(0, 0, parity as u32, |sb| {
            sb.data_size = sb.size;
            // md makes sure the RAID 0 is not marked dirty.
            sb.resync_offset = u64::MAX;
        })
    }
}
