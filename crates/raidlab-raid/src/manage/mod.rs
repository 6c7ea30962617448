//! Changing an array's membership, as mdadm's manage mode does: fail, remove,
//! add (as a spare or straight into a missing slot), replace. Each change checks
//! everything first, then writes the superblocks of the live members once with the
//! event count raised, so that a member left out of the change is seen as stale.
//! Data is moved only by the rebuild in `recovery`.
//!
//! A former member taken back by md's re-add is `re_add`'s; a running
//! array's membership changes, as the superblocks record them, are
//! `running`'s; the hot spares a start puts into missing roles `spares`'.

use crate::assemble::{format_uuid, geometry_of, Assembly, Device, Member, MemberState};
use raidlab_core::{Error, ErrorKind, Op, Result};
use raidlab_md::superblock::{feature, MetadataVersion};
use raidlab_md::{Role, Superblock, ROLE_FAULTY, ROLE_SPARE};

mod re_add;
mod running;
mod spares;

pub use re_add::ReAdd;
pub use running::TakenOut;
pub use spares::{NoSpareTaken, SparesAtStart};

const SECTOR: u64 = 512;

/// What `add` made of the new member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    /// It went straight into this missing slot and must be rebuilt.
    IntoSlot(usize),
    Spare,
}

/// The role a device added now goes into, of an array of `roles` roles of
/// which `open(r)` says whether role `r` has no member and none being
/// rebuilt into it: the first such role (md's rule at --add: a new member
/// fills the lowest missing role; else it is a spare, None). The one rule,
/// for `add` and for whoever predicts what an add would do (the
/// simulator's rebuild estimate).
pub fn role_an_add_fills(roles: usize, open: impl Fn(usize) -> bool) -> Option<usize> {
    (0..roles).find(|&r| open(r))
}

impl Assembly {
    /// The member given by this path.
    pub fn find(&self, path: &str) -> Result<usize> {
        self.members
            .iter()
            .position(|m| m.device.path == path)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "{path} is not among the members given: list it with the array's members"
                ))
            })
    }

    /// Mark an active member faulty. Refused when the array could not serve its
    /// data without it. A replacement of it becomes a rebuild of its slot;
    /// otherwise a hot spare, if any, takes over the slot at once (it then needs a
    /// rebuild); returns that spare's index.
    pub fn fail(&mut self, index: usize) -> Result<Option<usize>> {
        let spare = self.mark_failed(index, false)?;
        self.commit(|_| {})?;
        Ok(spare)
    }

    /// [`Assembly::fail`] for several members at once, in order, with one
    /// superblock commit for all it could fail. Each member's outcome: the
    /// spare (if any) that took its slot, or why it could not be failed (the
    /// array could not serve its data without it; nothing changed for it).
    /// The outer error is the commit's.
    pub fn fail_many(&mut self, indices: &[usize]) -> Result<Vec<Result<Option<usize>>>> {
        self.fail_many_with(indices, false)
    }

    /// [`Assembly::fail_many`]; with `breaking`, a RAID 4/5/6 member whose
    /// loss leaves the array unable to serve its data is recorded faulty all
    /// the same (no spare takes its slot), as md's raid5_error marks it and
    /// the array broken: the array then does not assemble again unforced,
    /// rather than come back with that member's stale blocks in service.
    fn fail_many_with(
        &mut self,
        indices: &[usize],
        breaking: bool,
    ) -> Result<Vec<Result<Option<usize>>>> {
        let outcomes: Vec<Result<Option<usize>>> = indices
            .iter()
            .map(|&i| self.mark_failed(i, breaking && crate::level::of(&self.geometry).write_hole))
            .collect();
        if outcomes.iter().any(|o| o.is_ok()) {
            self.commit(|_| {})?;
        }
        Ok(outcomes)
    }

    /// [`Assembly::fail`] without writing the superblocks: the caller commits
    /// once for all the members it fails (each commit writes every member
    /// still active, so failing them one commit at a time would write a dead
    /// one before its turn, and fail on it).
    fn mark_failed(&mut self, index: usize, breaking: bool) -> Result<Option<usize>> {
        let m = &self.members[index];
        if m.state == MemberState::Spare {
            // md fails a spare as any device (md_error): it is recorded
            // faulty and never taken for a slot.
            let dev = m.sb.dev_number;
            self.set_role(dev, ROLE_FAULTY);
            self.members[index].state = MemberState::Faulty;
            return Ok(None);
        }
        let Some(slot) = m.role.filter(|_| {
            matches!(
                m.state,
                MemberState::Active | MemberState::Rebuilding | MemberState::Replacing
            )
        }) else {
            return Err(Error::invalid(format!(
                "{} is neither an active member nor a spare (it is {:?}): only those can be failed",
                m.device.path, m.state
            )));
        };
        let path = m.device.path.clone();
        let was = m.state;
        let mut broken = false;
        if was == MemberState::Active {
            let mut missing = self.missing();
            missing.push(slot);
            broken = !self.survives(&missing);
            if broken && !breaking {
                return Err(Error::new(
                    ErrorKind::Refused,
                    Op::Write,
                    format!(
                        "failing {path} (role {slot}) would leave {} unable to serve its data (roles {missing:?} missing); nothing was changed",
                        self.geometry.level.name()
                    ),
                ));
            }
        }
        let dev = self.members[index].sb.dev_number;
        self.set_role(dev, ROLE_FAULTY);
        self.members[index].state = MemberState::Faulty;
        // A shrink's leaving member holds a role past the new count, which
        // has no slot (the superblocks' raid_disks is the new count).
        if self.slots.get(slot) == Some(&Some(index)) {
            self.slots[slot] = None;
            // A replacement of this member carries on as a rebuild of the slot
            // from where its copy got to, as md does: everything below its
            // recovery offset was written to it as to the member it replaces.
            if let Some(r) = self
                .members
                .iter_mut()
                .find(|m| m.state == MemberState::Replacing && m.role == Some(slot))
            {
                r.state = MemberState::Rebuilding;
                r.sb.feature_map &= !feature::REPLACEMENT;
            }
        }
        let spare = if !broken
            && self.slots.get(slot) == Some(&None)
            && !self.slot_is_being_rebuilt(slot)
        {
            self.members
                .iter()
                .position(|m| m.state == MemberState::Spare)
        } else {
            None
        };
        if let Some(s) = spare {
            self.start_recovery(s, slot);
        }
        Ok(spare)
    }

    /// Take a faulty, stale or spare member out of the array. A member that
    /// served a slot is recorded as md records a removed device (role 0xffff in
    /// the table of the members in service, its own superblock untouched), so
    /// md and raidlab both see it as removed from then on; a spare is marked
    /// faulty instead, which keeps it from being taken for a spare again. The
    /// removed device itself is never written.
    pub fn remove(&mut self, index: usize) -> Result<()> {
        let m = &self.members[index];
        if m.state == MemberState::Removed {
            return Err(Error::invalid(format!(
                "{} was already removed from the array: nothing to do (`raidlab add` with it as --new takes it back with a rebuild)",
                m.device.path
            )));
        }
        if !matches!(
            m.state,
            MemberState::Faulty | MemberState::Spare | MemberState::Stale
        ) {
            return Err(Error::invalid(format!(
                "{} is {:?}: only faulty, stale or spare members can be removed; fail it first",
                m.device.path, m.state
            )));
        }
        let was_spare = m.state == MemberState::Spare;
        let dev = m.sb.dev_number;
        // md gives a removed device's number to the next device added: when a
        // member in service holds this number now, the table already says
        // what that device is and must not change.
        let number_reused = self
            .members
            .iter()
            .enumerate()
            .any(|(j, o)| j != index && o.is_live() && o.sb.dev_number == dev);
        if !number_reused {
            self.set_role(dev, if was_spare { ROLE_FAULTY } else { ROLE_SPARE });
        }
        self.members[index].state = if was_spare {
            MemberState::Faulty
        } else {
            MemberState::Removed
        };
        self.commit(|_| {})
    }

    /// The superblock of the live member that saw the most events: the array's
    /// settings as they are now, which a member added or taken back adopts.
    fn newest_live_superblock(&self) -> Result<Superblock> {
        self.members
            .iter()
            .filter(|m| m.is_live())
            .max_by_key(|m| m.sb.events)
            .map(|m| m.sb.clone())
            .ok_or_else(|| Error::invalid("no live member to take the array's settings from"))
    }

    /// The entry of `members` that is the device at `path` whose superblock
    /// is `sb`: the entry on that path with its device UUID, else any entry
    /// with its device UUID (two devices share one when an old copy of a
    /// member is assembled beside the member now; see `assemble`).
    fn entry_of(&self, path: &str, sb: &Superblock) -> Option<usize> {
        let same = |m: &Member| m.sb.device_uuid == sb.device_uuid;
        self.members
            .iter()
            .position(|m| same(m) && m.device.path == path)
            .or_else(|| self.members.iter().position(same))
    }

    /// Add a new device: into a missing slot (to be rebuilt) if there is one, else
    /// as a hot spare. The device must be large enough and, unless `force`, carry
    /// no md superblock.
    pub fn add(&mut self, device: Device, force: bool) -> Result<Added> {
        self.add_member(device, force).map(|(added, _)| added)
    }

    /// The device number a device added now would get: the first one no
    /// member in the array uses whose role in the table is free (spare or
    /// faulty), `former` (an entry of `members` being taken back) aside. A
    /// removed device's number is free again, as md frees it at --remove,
    /// and so is a stale one's, whose device md kicks from the array as
    /// non-fresh at assembly. None when every slot of the table is taken.
    pub fn free_device_number(&self, former: Option<usize>) -> Option<u32> {
        let template = self.newest_live_superblock().ok()?;
        let used: Vec<u32> = self
            .members
            .iter()
            .enumerate()
            .filter(|(i, m)| {
                Some(*i) != former && !matches!(m.state, MemberState::Removed | MemberState::Stale)
            })
            .map(|(_, m)| m.sb.dev_number)
            .collect();
        (0..template.max_dev).find(|n| {
            !used.contains(n)
                && template
                    .dev_roles
                    .get(*n as usize)
                    .is_some_and(|&r| r == ROLE_SPARE || r == ROLE_FAULTY)
        })
    }

    /// [`Assembly::add`], also saying which entry of `members` the device is.
    fn add_member(&mut self, device: Device, force: bool) -> Result<(Added, usize)> {
        // A former member of this array (stale, removed or faulty: its data
        // is this array's, out of date) is taken back as mdadm --add takes one
        // back when it cannot re-add it: a new superblock and a full rebuild.
        let mut former: Option<usize> = None;
        if let Ok(Some(sb)) = Superblock::read_from(device.volume.as_ref()) {
            if sb.set_uuid == self.uuid {
                match self.entry_of(&device.path, &sb) {
                    // An older copy of a device number given to a member in
                    // service since it left (0.90 numbers are given again):
                    // a new member, as mdadm adds it.
                    Some(i)
                        if self.members[i].is_live()
                            && self.members[i].device.path != device.path
                            && sb.events < self.members[i].sb.events => {}
                    Some(i) if self.members[i].is_live() => {
                        return Err(Error::invalid(format!(
                            "{} is already a member of this array in service ({:?}): there is nothing to add",
                            device.path, self.members[i].state
                        )));
                    }
                    Some(i) => former = Some(i),
                    None if sb.events >= self.events => {
                        return Err(Error::invalid(format!(
                            "{} is an up-to-date member of this array (events {}): list it with the members instead of adding it",
                            device.path, sb.events
                        )));
                    }
                    None => {}
                }
            } else if !force {
                return Err(Error::invalid(format!(
                    "{} already carries an md superblock (array {}): it may hold someone's data; use --force to overwrite it",
                    device.path,
                    format_uuid(&sb.set_uuid)
                )));
            }
        }
        let template = self.newest_live_superblock()?;
        let need = template.data_offset * SECTOR + self.geometry.member_bytes;
        if device.volume.size() < need {
            return Err(Error::invalid(format!(
                "{} is {} bytes but a member of this array needs {need} (data offset {} + {} of data)",
                device.path,
                device.volume.size(),
                template.data_offset * SECTOR,
                self.geometry.member_bytes
            )));
        }
        if !device.volume.is_writable() {
            return Err(
                Error::new(ErrorKind::ReadOnly, Op::Open, "opened read-only")
                    .on_device(device.path),
            );
        }
        let dev_number = self.free_device_number(former).ok_or_else(|| {
            Error::invalid(format!(
                "the superblocks have room for {} devices and all are taken; remove a faulty member first",
                template.max_dev
            ))
        })?;
        let mut sb = template;
        sb.dev_number = dev_number;
        sb.device_uuid = *uuid::Uuid::new_v4().as_bytes();
        let sectors = device.volume.size() / SECTOR;
        sb.data_size = sectors.saturating_sub(sb.data_offset);
        if sb.version() == MetadataVersion::V0_90 {
            // Its own place near its own end; the data before it.
            let at = MetadataVersion::V0_90
                .super_offset(sectors)
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "{} is too small for a metadata 0.90 superblock",
                        device.path
                    ))
                })?;
            sb.super_offset = at;
            sb.data_size = at;
            sb.device_uuid[12..].copy_from_slice(&dev_number.to_be_bytes());
        } else if sb.version() == MetadataVersion::V1_0 {
            // The superblock sits at this device's own end, and what md keeps
            // before it (an internal bitmap, the bad-block log) comes out of
            // the data area, as mdadm lays out a new 1.0 member.
            let at = MetadataVersion::V1_0.super_offset(sectors).ok_or_else(|| {
                Error::invalid(format!(
                    "{} is too small for a metadata 1.0 superblock",
                    device.path
                ))
            })?;
            let mut end = at;
            if sb.feature_map & feature::BITMAP_OFFSET != 0 && sb.bitmap_offset < 0 {
                end = end.saturating_sub(u64::from(sb.bitmap_offset.unsigned_abs()));
            }
            if sb.bblog_size > 0 && sb.bblog_offset < 0 {
                end = end.min(at.saturating_sub(u64::from(sb.bblog_offset.unsigned_abs())));
            }
            sb.super_offset = at;
            sb.data_size = end.saturating_sub(sb.data_offset);
        }
        sb.feature_map &=
            !(feature::RECOVERY_OFFSET | feature::RECOVERY_BITMAP | feature::REPLACEMENT);
        sb.recovery_offset = 0;
        sb.cnt_corrected_read = 0;
        sb.devflags = 0;
        if crate::level::of(&self.geometry).sized_per_member {
            sb.data_size = self.geometry.member_bytes / SECTOR;
        }
        let member = Member {
            device,
            sb,
            state: MemberState::Spare,
            role: None,
        };
        // A former member given with the array's members takes the place of
        // its old entry: one device, one entry.
        let index = match former {
            Some(i) => {
                self.members[i] = member;
                i
            }
            None => {
                self.members.push(member);
                self.members.len() - 1
            }
        };
        self.set_role(dev_number, ROLE_SPARE);
        let free = role_an_add_fills(self.slots.len(), |r| {
            self.slots[r].is_none() && !self.slot_is_being_rebuilt(r)
        });
        let added = match free {
            Some(slot) => {
                self.start_recovery(index, slot);
                Added::IntoSlot(slot)
            }
            None => Added::Spare,
        };
        self.commit(|_| {})?;
        Ok((added, index))
    }

    /// Start copying active member `old` onto a new device while it keeps serving
    /// (md's replace); `rebuild` does the copy and then swaps them.
    pub fn replace(&mut self, old: usize, device: Device, force: bool) -> Result<()> {
        // Refused before anything is written: accepted, the copy could
        // never finish (it rebuilds the role from the others, and RAID 0
        // has none), and every member's superblock would list a
        // replacement stuck for good. md's raid0 takes no spare either.
        if !crate::level::of(&self.geometry).spares {
            return Err(Error::invalid(
                "RAID 0 has no redundancy to copy a member through: a member cannot be replaced (md's raid0 takes no spare); copy the device whole while the array is stopped",
            ));
        }
        let m = &self.members[old];
        let Some(slot) = m.role.filter(|_| m.state == MemberState::Active) else {
            return Err(Error::invalid(format!(
                "{} is not an active member: only an active member can be replaced (add a member to rebuild a missing one)",
                m.device.path
            )));
        };
        if self
            .members
            .iter()
            .any(|m| m.state == MemberState::Replacing && m.role == Some(slot))
        {
            return Err(Error::invalid(format!(
                "role {slot} is already being replaced: run `raidlab rebuild` to finish it"
            )));
        }
        // Add it as a spare first (all the checks of add), then turn the spare into a
        // replacement of the slot. Both changes land in one superblock write.
        let free_before: Vec<usize> = self.missing();
        if !free_before.is_empty() {
            return Err(Error::invalid(format!(
                "the array is degraded (role(s) {free_before:?} missing): add a member to rebuild those first; replace keeps full redundancy only on a complete array"
            )));
        }
        let (added, index) = self.add_member(device, force)?;
        debug_assert_eq!(added, Added::Spare);
        let dev = self.members[index].sb.dev_number;
        {
            let n = &mut self.members[index];
            n.sb.feature_map |= feature::RECOVERY_OFFSET | feature::REPLACEMENT;
            n.sb.recovery_offset = 0;
            n.state = MemberState::Replacing;
            n.role = Some(slot);
        }
        self.set_role(dev, slot as u16);
        self.commit(|_| {})
    }

    fn slot_is_being_rebuilt(&self, slot: usize) -> bool {
        self.members
            .iter()
            .any(|m| m.state == MemberState::Rebuilding && m.role == Some(slot))
    }

    /// Make member `index` the one being rebuilt into `slot`.
    pub(crate) fn start_recovery(&mut self, index: usize, slot: usize) {
        let dev = self.members[index].sb.dev_number;
        {
            let m = &mut self.members[index];
            m.sb.feature_map |= feature::RECOVERY_OFFSET;
            m.sb.feature_map &= !feature::REPLACEMENT;
            m.sb.recovery_offset = 0;
            m.state = MemberState::Rebuilding;
            m.role = Some(slot);
        }
        // A device that held the slot before and is not here (left out, or set
        // aside as stale) may still be listed in it: md lists a device it does
        // not have as removed (0xffff), and one slot must never be claimed by
        // two device numbers.
        let others: Vec<u32> = self
            .live_table()
            .iter()
            .enumerate()
            .filter(|&(d, &r)| d as u32 != dev && usize::from(r) == slot)
            .map(|(d, _)| d as u32)
            .filter(|d| {
                !self
                    .members
                    .iter()
                    .any(|m| m.is_live() && m.sb.dev_number == *d)
            })
            .collect();
        for d in others {
            self.set_role(d, ROLE_SPARE);
        }
        self.set_role(dev, slot as u16);
    }

    /// The role table the members in service carry (one table: assembly
    /// gives every live member the newest one).
    pub(crate) fn live_table(&self) -> Vec<u16> {
        self.members
            .iter()
            .find(|m| m.is_live())
            .map(|m| m.sb.dev_roles.clone())
            .unwrap_or_default()
    }
}
