//! RAID 5 to RAID 6 and back (`grow --level 6|5`), as md converts them:
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
        let what = format!("--level {} of a {}", to.name(), g.level.name());
        if self.reshape().is_some() {
            return Err(refused(
                "the array is in the middle of a reshape: finish it with `raidlab grow --continue` (same members) before another change; nothing was changed".into(),
            ));
        }
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
        if !self.in_sync() {
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
            let spares = self
                .members
                .iter()
                .filter(|m| m.state == MemberState::Spare)
                .count();
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
        self.commit(|sb| {
            sb.level = level;
            sb.new_level = level;
            sb.layout = layout;
            sb.new_layout = layout;
            sb.raid_disks = raid_disks;
        })?;
        self.geometry = geometry_of(&self.grow_template()?)?;
        Ok(())
    }
}
