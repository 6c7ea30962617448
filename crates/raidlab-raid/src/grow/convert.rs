//! RAID 5 to RAID 6 and back (`grow --level 6|5`), and a RAID 1 of two to
//! a RAID 5 of two (`--level 5`, md's `raid5_takeover_raid1`), as md
//! converts them. Between RAID 5 and 6:
//! through md's conversion layouts, in which a RAID 6 is the RAID 5 on its
//! first n-1 members with Q on the last (left-symmetric-6 and its kin;
//! parity-last is its own twin).
//!
//! What it decides:
//! - whether md would convert this array this way (levels, member count,
//!   a spare for Q, the array's state), refused with the reason and nothing
//!   written;
//! - the takeovers, superblocks only, each one commit: a RAID 5 of n becomes
//!   a RAID 6 of n+1 in the "-6" twin of its layout, a spare taking the new
//!   last slot to be rebuilt (its Q computed by the ordinary rebuild); a
//!   RAID 6 in a "-6" layout or parity-last becomes a RAID 5 of n-1, the
//!   last member (Q) becoming a spare, as md's `raid5_takeover_raid6`
//!   leaves it;
//! - the layout a conversion ends in: to RAID 6, the RAID 6 layout asked
//!   (default: the RAID 5 layout's plain RAID 6 namesake, as `mdadm --grow
//!   --level=6` restripes to; `preserve` keeps the "-6" one); to RAID 5,
//!   the RAID 5 part of the "-6" layout the array is restriped to first.
//!
//! The data is never moved here: the restripes between a "-6" layout and
//! another are [`super::reshape`]'s, the Q rebuild is `recovery`'s. It must
//! never take a RAID 6 over as a RAID 5 unless every stripe's data and P
//! already sit where the RAID 5 reads them (a "-6" layout or parity-last).

use super::refused;
use crate::assemble::{geometry_of, Assembly, MemberState};
use raidlab_core::{Error, Result};
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_md::superblock::feature;

/// A checked conversion between RAID 5 and 6: nothing written yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversion {
    pub to: Level,
    pub old_raid_devices: usize,
    pub new_raid_devices: usize,
    /// The "-6" layout (or parity-last) the takeover runs through, by name.
    pub via: String,
    /// The layout to restripe to after the takeover (to RAID 6) or before
    /// it (to RAID 5), when it differs from `via`.
    pub restripe_to: Option<String>,
}

impl Assembly {
    /// Check `--level 6` of a RAID 5 or `--level 5` of a RAID 6, with
    /// `raid_devices` as asked (md's: one more or one less) and `layout` the
    /// layout asked for at the end (`preserve`: the "-6" one), `coming`
    /// devices about to be added as spares. Nothing is written.
    pub fn convert_check(
        &self,
        to: Level,
        raid_devices: Option<usize>,
        layout: Option<&str>,
        coming: usize,
    ) -> Result<Conversion> {
        let g = self.geometry;
        let old = g.raid_disks;
        if let Some(e) = super::md_refusal(&format!("--level {}", to.name()), g.level, to) {
            return Err(e);
        }
        if g.level == Level::Raid5 && to == Level::Raid1 {
            return self.raid1_convert_check_from_raid5(raid_devices);
        }
        if matches!(g.level, Level::Raid4 | Level::Raid5) && to == Level::Raid0 {
            return self.raid45_to_raid0_check(raid_devices);
        }
        if g.level == Level::Raid10 && to == Level::Raid0 {
            return self.raid10_to_raid0_check(raid_devices);
        }
        if g.level == Level::Raid0 && to == Level::Raid10 {
            return self.raid10_convert_check(raid_devices, layout, coming);
        }
        if g.level == Level::Raid0 {
            return self.raid0_convert_check(to, raid_devices, layout, coming);
        }
        if g.level == Level::Raid1 {
            return self.raid1_convert_check(to, raid_devices, layout, coming);
        }
        let what = format!("--level {} of a {}", to.name(), g.level.name());
        self.grow_check_no_reshape()?;
        let Layout::Parity(current) = g.layout else {
            return Err(super::reshape_not_built(&what));
        };
        let new = match (g.level, to) {
            (Level::Raid5, Level::Raid6) => old + 1,
            (Level::Raid6, Level::Raid5) => old - 1,
            _ => return Err(super::reshape_not_built(&what)),
        };
        if let Some(n) = raid_devices.filter(|&n| n != new) {
            return Err(super::reshape_not_built(&format!(
                "{what} with --raid-devices {n} (md converts to {new}: one member more for Q, or one less; change the member count in a run of its own)"
            )));
        }
        self.grow_check_idle(&what)?;
        if !self.missing().is_empty() {
            return Err(refused(format!(
                "the array is degraded (role(s) {:?} missing): converting a degraded array is not built; add and rebuild the missing member(s) first; nothing was changed",
                self.missing()
            )));
        }
        // A served array's safe-mode dirty mark, its writes done and
        // flushed (`in_service`), is as consistent as a clean one.
        if !self.consistent() {
            return Err(refused(
                "the array has a resync pending: a conversion computes Q from data and P, which must be consistent first; run `raidlab resync`; nothing was changed".into(),
            ));
        }
        let template = self.grow_template()?;
        if template.feature_map & (feature::PPL | feature::MULTIPLE_PPLS) != 0 {
            return Err(refused(format!(
                "{what}: md's partial parity log is for RAID 5 only: switch it to resync first (`raidlab grow --consistency-policy resync`); nothing was changed"
            )));
        }
        let (via, restripe_to) = if to == Level::Raid6 {
            let via = current.raid6_conversion();
            let end = match layout {
                Some("preserve") => via,
                Some(name) => match Layout::parse(Level::Raid6, Some(name))? {
                    Layout::Parity(p) => p,
                    _ => via,
                },
                // mdadm restripes to the plain RAID 6 namesake.
                None => via.raid5_part().unwrap_or(via),
            };
            let spares = self.spare_count();
            if spares + coming == 0 {
                return Err(refused(format!(
                    "{what} needs a device for Q (mdadm: \"Need 1 spare to avoid degraded array\"): give it with --add; nothing was changed"
                )));
            }
            (via, (end != via).then_some(end))
        } else {
            if layout.is_some_and(|l| l != "preserve") {
                let want = match Layout::parse(Level::Raid5, layout)? {
                    Layout::Parity(p) => p,
                    _ => current,
                };
                let from = current.raid5_part().unwrap_or(current);
                if want != from {
                    return Err(super::reshape_not_built(&format!(
                        "{what} to {} (the RAID 5 keeps {}, the layout of its RAID 6's first members; change the layout after, in a run of its own)",
                        want.name(),
                        from.name()
                    )));
                }
            }
            let via = current.raid6_conversion();
            (via, (via != current).then_some(via))
        };
        if restripe_to.is_some() {
            // The restripe md would run needs the room and state of any
            // reshape over the same members: checked now, before the
            // takeover writes anything.
            self.restripe_allowed(&what)?;
            self.reshape_gap(u64::from(template.chunksize).max(1))?;
        }
        Ok(Conversion {
            to,
            old_raid_devices: old,
            new_raid_devices: new,
            via: via.name().to_string(),
            restripe_to: restripe_to.map(|l| l.name().to_string()),
        })
    }

    /// md's takeover of a RAID 5 of n as a RAID 6 of n+1 in the "-6" twin
    /// of its layout: the first hot spare takes the last slot, to be rebuilt
    /// (its Q), in one commit. Nothing moves on the other members.
    pub fn raid6_takeover(&mut self) -> Result<()> {
        let g = self.geometry;
        let Layout::Parity(current) = g.layout else {
            return Err(Error::invalid("raid6 takeover: not a parity layout"));
        };
        if g.level != Level::Raid5 {
            return Err(Error::invalid("raid6 takeover: the array is not a RAID 5"));
        }
        let spare = (0..self.members.len())
            .find(|&i| self.members[i].state == MemberState::Spare)
            .ok_or_else(|| {
                refused("no hot spare to take the slot of Q; nothing was changed".into())
            })?;
        let old = g.raid_disks;
        let layout = current.raid6_conversion().md_value();
        self.slots.push(None);
        self.geometry.raid_disks = old + 1;
        self.start_recovery(spare, old);
        self.commit_takeover(6, layout, (old + 1) as u32)
    }

    /// md's takeover of a RAID 6 of n in a "-6" layout (or parity-last) as
    /// a RAID 5 of n-1: the last member, Q, becomes a hot spare, in one
    /// commit. Refused for any other layout (restripe to the "-6" one first).
    pub fn raid5_takeover(&mut self) -> Result<()> {
        let g = self.geometry;
        let (Level::Raid6, Layout::Parity(current)) = (g.level, g.layout) else {
            return Err(Error::invalid("raid5 takeover: the array is not a RAID 6"));
        };
        let layout = match current.raid5_part() {
            Some(p) => p,
            None if current == ParityLayout::ParityLast => current,
            None => {
                return Err(refused(format!(
                    "a RAID 6 in {} keeps data and P where a RAID 5 does not: restripe it to {} first; nothing was changed",
                    current.name(),
                    current.raid6_conversion().name()
                )))
            }
        };
        self.grow_check_idle("--level 5")?;
        let last = g.raid_disks - 1;
        let Some(Some(q)) = self.slots.get(last).copied() else {
            return Err(refused(
                "the member holding Q is missing: the takeover drops that slot, which md does only with it present; nothing was changed".into(),
            ));
        };
        let dev = self.members[q].sb.dev_number;
        self.set_role(dev, raidlab_md::ROLE_SPARE);
        self.members[q].role = None;
        self.members[q].state = MemberState::Spare;
        self.slots.truncate(last);
        self.geometry.raid_disks = last;
        self.commit_takeover(5, layout.md_value(), last as u32)
    }

    /// What md writes at a takeover, in one commit: the new level and
    /// layout as both the current and the "new" ones (no reshape pending),
    /// and the member count. The slots and members are the caller's.
    pub(crate) fn commit_takeover(
        &mut self,
        level: i32,
        layout: u32,
        raid_disks: u32,
    ) -> Result<()> {
        self.commit_takeover_with(level, layout, raid_disks, |_| {})
    }

    /// [`Assembly::commit_takeover`] with what a takeover also changes in
    /// the same commit (`more`: the chunk, the component size, ...).
    pub(crate) fn commit_takeover_with(
        &mut self,
        level: i32,
        layout: u32,
        raid_disks: u32,
        more: impl Fn(&mut raidlab_md::Superblock),
    ) -> Result<()> {
        self.commit(|sb| {
            sb.level = level;
            sb.new_level = level;
            sb.layout = layout;
            sb.new_layout = layout;
            sb.raid_disks = raid_disks;
            more(sb);
        })?;
        self.geometry = geometry_of(&self.grow_template()?)?;
        Ok(())
    }

    /// Check `--level 5` of a RAID 1 as md converts one
    /// (`raid5_takeover_raid1`): a RAID 1 of exactly two mirrors is a RAID 5
    /// of two in left-symmetric (each stripe's one data block and its parity
    /// are equal, so both members already hold what a RAID 5 of two
    /// does), with md's chunk: 64 KiB, halved until it divides the array.
    /// With `--raid-devices N` (more than 2) a restripe onto the new members
    /// follows, as `mdadm --grow --level=5 --raid-devices=N` does; `coming`
    /// devices are about to be added for it. Nothing is written.
    pub(crate) fn raid1_convert_check(
        &self,
        to: Level,
        raid_devices: Option<usize>,
        layout: Option<&str>,
        coming: usize,
    ) -> Result<Conversion> {
        let g = self.geometry;
        let what = format!("--level {} of a raid1", to.name());
        if to == Level::Raid0 {
            return Err(super::reshape_not_built(&format!(
                "{what} (md's RAID 1 to 0 keeps a single mirror as a RAID 0 of one)"
            )));
        }
        if to != Level::Raid5 {
            return Err(refused(format!(
                "{what}: md converts a RAID 1 only to a RAID 5 (mdadm: \"Impossibly level change request for RAID1\"); nothing was changed"
            )));
        }
        if g.raid_disks != 2 {
            return Err(refused(format!(
                "{what}: the array has {} mirrors, and md converts only a RAID 1 of two to a RAID 5 (mdadm: \"Can only convert a 2-device array to RAID5\"): `raidlab grow --raid-devices 2` first (fail and remove the others); nothing was changed",
                g.raid_disks
            )));
        }
        self.grow_check_no_reshape()?;
        if let Some(name) = layout.filter(|&l| l != "left-symmetric" && l != "ls") {
            return Err(super::reshape_not_built(&format!(
                "{what} with --layout {name} (md takes a RAID 1 over as left-symmetric; change the layout after, in a run of its own)"
            )));
        }
        self.grow_check_idle(&what)?;
        let sectors = self.grow_template()?.size;
        raid1_chunk_sectors(sectors).ok_or_else(|| {
            refused(format!(
                "{what}: the array ({sectors} sectors) is not a whole number of 4 KiB blocks, the smallest chunk md gives the RAID 5 (mdadm: \"Cannot convert RAID1 of this size - reduce size to multiple of 4K first\"): shrink it with `raidlab grow --size`; nothing was changed"
            ))
        })?;
        let n = raid_devices.unwrap_or(2);
        if n < 2 {
            return Err(super::reshape_not_built(&format!(
                "{what} with --raid-devices {n} (a RAID 5 has at least two members)"
            )));
        }
        if n > 2 {
            if !self.missing().is_empty() {
                return Err(refused(format!(
                    "{what} --raid-devices {n}: the array is degraded (role(s) {:?} missing), and the restripe onto more members needs every member; add and rebuild first; nothing was changed",
                    self.missing()
                )));
            }
            let spares = self.spare_count();
            if spares + coming < n - 2 {
                return Err(refused(format!(
                    "{what} --raid-devices {n} needs {} device(s) for the new members and has {} (mdadm: \"Need {} spares to avoid degraded array\"): give them with --add; nothing was changed",
                    n - 2,
                    spares + coming,
                    n - 2
                )));
            }
            // The restripe after the takeover needs what any reshape needs,
            // checked now, before the takeover writes anything.
            self.restripe_allowed(&what)?;
            let chunk = raid1_chunk_sectors(sectors).unwrap_or(8);
            self.reshape_gap(u64::from(chunk))?;
        }
        Ok(Conversion {
            to,
            old_raid_devices: 2,
            new_raid_devices: n,
            via: ParityLayout::LeftSymmetric.name().to_string(),
            restripe_to: None,
        })
    }

    /// md's takeover of a RAID 1 of two as a RAID 5 of two in
    /// left-symmetric with md's chunk, in one commit (checked by
    /// [`Assembly::convert_check`]). Nothing moves.
    pub fn raid5_takeover_raid1(&mut self) -> Result<()> {
        let g = self.geometry;
        if g.level != Level::Raid1 || g.raid_disks != 2 {
            return Err(Error::invalid(
                "raid5 takeover: the array is not a RAID 1 of two",
            ));
        }
        self.grow_check_idle("--level 5")?;
        let sectors = self.grow_template()?.size;
        let chunk = raid1_chunk_sectors(sectors).ok_or_else(|| {
            refused("the array is not a whole number of 4 KiB blocks; nothing was changed".into())
        })?;
        let layout = ParityLayout::LeftSymmetric.md_value();
        self.commit_takeover_with(5, layout, 2, |sb| {
            sb.chunksize = chunk;
            sb.new_chunk = chunk;
        })
    }

    /// Check `--level 1` of a RAID 5 of two (md's `raid1_takeover`): in a
    /// RAID 5 of two each stripe's parity is its one data block, so the two
    /// members hold the same bytes, as mirrors do. No PPL or journal (a RAID
    /// 1 here keeps neither). Nothing is written.
    pub(crate) fn raid1_convert_check_from_raid5(
        &self,
        raid_devices: Option<usize>,
    ) -> Result<Conversion> {
        let g = self.geometry;
        let what = "--level 1 of a raid5";
        self.grow_check_no_reshape()?;
        if g.raid_disks != 2 {
            return Err(refused(format!(
                "{what}: the array has {} members, and md converts only a RAID 5 of two to a RAID 1 (mdadm: \"Can only convert a 2-device array to RAID1\"); nothing was changed",
                g.raid_disks
            )));
        }
        if raid_devices.is_some_and(|n| n != 2) {
            return Err(refused(format!(
                "{what}: mdadm: \"Cannot set raid_disk when converting RAID5->RAID1\": change the mirror count in a run of its own; nothing was changed"
            )));
        }
        let template = self.grow_template()?;
        if self.has_journal() || template.feature_map & (feature::PPL | feature::MULTIPLE_PPLS) != 0
        {
            return Err(refused(format!(
                "{what}: the array keeps a partial parity log or a write journal, which a RAID 1 does not: switch it to resync first (`raidlab grow --consistency-policy resync`; a journal cannot be removed); nothing was changed"
            )));
        }
        self.grow_check_idle(what)?;
        Ok(Conversion {
            to: Level::Raid1,
            old_raid_devices: 2,
            new_raid_devices: 2,
            via: "mirrors".to_string(),
            restripe_to: None,
        })
    }

    /// md's takeover of a RAID 5 of two as a RAID 1 of two (`raid1_takeover`),
    /// in one commit: level 1, no layout, no chunk. Nothing moves.
    pub fn raid1_takeover_raid5(&mut self) -> Result<()> {
        self.raid1_convert_check_from_raid5(None)?;
        self.commit_takeover_with(1, 0, 2, |sb| {
            sb.chunksize = 0;
            sb.new_chunk = 0;
        })
    }
}

/// md's chunk for the RAID 5 a RAID 1 of `sectors` becomes: 64 KiB, halved
/// until it divides the array, never below one 4 KiB stripe unit
/// (`raid5_takeover_raid1`); `None` when even that does not divide it.
fn raid1_chunk_sectors(sectors: u64) -> Option<u32> {
    let mut chunk: u32 = 128;
    while chunk >= 8 && sectors % u64::from(chunk) != 0 {
        chunk >>= 1;
    }
    (chunk >= 8).then_some(chunk)
}
