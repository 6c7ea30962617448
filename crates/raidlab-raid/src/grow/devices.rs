//! The number of mirrors of a RAID 1 (`--raid-devices N`), as md changes it
//! without moving data: growing opens empty slots that hot spares fill at
//! once (each then rebuilt by `recovery`); shrinking packs the members in
//! service into the first slots and drops the rest, refused while more
//! members are in service than slots would be left (md's rule). Other
//! levels restripe and are refused by [`super::reshape_not_built`]. Only
//! superblocks are written here.

use super::refused;
use crate::assemble::{geometry_of, Assembly, MemberState};
use raidlab_core::{Error, Result};
use raidlab_layout::Level;
use raidlab_md::superblock::MetadataVersion;
use serde::Serialize;

/// What a change of the mirror count did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DevicesChange {
    pub old_raid_devices: usize,
    pub new_raid_devices: usize,
    /// Hot spares put into the new slots (paths), each to be rebuilt.
    pub spares_activated: Vec<String>,
    /// Members that moved to a lower slot when the array shrank: (path,
    /// old role, new role).
    pub moved: Vec<(String, usize, usize)>,
}

impl Assembly {
    /// Change a RAID 1's number of mirrors to `n`. Growing needs a hot spare
    /// (or a device the caller adds next, counted in `coming`) for every new
    /// slot, unless `force` (the array then runs degraded, as mdadm
    /// --force allows). Refused while a rebuild is pending.
    pub fn grow_raid_devices(
        &mut self,
        n: usize,
        coming: usize,
        force: bool,
    ) -> Result<DevicesChange> {
        let old = self.geometry.raid_disks;
        if self.geometry.level != Level::Raid1 {
            return Err(super::reshape_not_built(&format!(
                "--raid-devices {n} on {}",
                self.geometry.level.name()
            )));
        }
        if n == 0 {
            return Err(Error::invalid(
                "--raid-devices 0: a RAID 1 needs at least one mirror",
            ));
        }
        if n == old {
            return Err(Error::invalid(format!(
                "the array already has {n} raid devices: no change requested"
            )));
        }
        let template = self.grow_template()?;
        if template.version() == MetadataVersion::V0_90 && n > raidlab_md::sb090::DISKS {
            return Err(Error::invalid(format!(
                "metadata 0.90 records at most {} devices: --raid-devices {n} needs metadata 1.x",
                raidlab_md::sb090::DISKS
            )));
        }
        if n > usize::from(raidlab_md::ROLE_SPARE) - 3 {
            return Err(Error::invalid(format!(
                "--raid-devices {n} is more than md allows"
            )));
        }
        self.grow_check_idle("--raid-devices")?;
        let mut change = DevicesChange {
            old_raid_devices: old,
            new_raid_devices: n,
            spares_activated: Vec::new(),
            moved: Vec::new(),
        };
        if n < old {
            let in_service: Vec<(usize, usize)> = self
                .slots
                .iter()
                .enumerate()
                .filter_map(|(r, s)| s.map(|i| (r, i)))
                .collect();
            if in_service.len() > n {
                return Err(refused(format!(
                    "{} mirrors are in service and the array would keep {n} slots (md refuses: device busy): fail and remove {} of them first (`raidlab fail` then `raidlab remove`); nothing was changed",
                    in_service.len(),
                    in_service.len() - n
                )));
            }
            // md packs the members in service into the first slots.
            let mut slots = vec![None; n];
            for (new_role, &(old_role, i)) in in_service.iter().enumerate() {
                slots[new_role] = Some(i);
                if new_role != old_role {
                    let dev = self.members[i].sb.dev_number;
                    self.set_role(dev, new_role as u16);
                    self.members[i].role = Some(new_role);
                    change
                        .moved
                        .push((self.members[i].device.path.clone(), old_role, new_role));
                }
            }
            // A device the array no longer has (stale, left out) may still
            // be listed in a slot that is gone or now someone else's: md
            // lists every device it does not have as removed.
            for (d, r) in self.live_table().into_iter().enumerate() {
                let listed = usize::from(r);
                if r >= raidlab_md::ROLE_JOURNAL {
                    continue;
                }
                let holder = slots.get(listed).copied().flatten();
                let is_holder = holder.is_some_and(|i| self.members[i].sb.dev_number == d as u32);
                if !is_holder {
                    self.set_role(d as u32, raidlab_md::ROLE_SPARE);
                }
            }
            self.slots = slots;
            self.geometry.raid_disks = n;
        } else {
            let spares: Vec<usize> = (0..self.members.len())
                .filter(|&i| self.members[i].state == MemberState::Spare)
                .collect();
            let need = n - old;
            if spares.len() + coming < need && !force {
                return Err(refused(format!(
                    "need {need} spare(s) to avoid a degraded array, and only have {} (mdadm: \"Need {need} spares to avoid degraded array\"): add members with --add, or --force to grow it degraded; nothing was changed",
                    spares.len() + coming
                )));
            }
            self.slots.resize(n, None);
            self.geometry.raid_disks = n;
            for (k, &s) in spares.iter().take(need).enumerate() {
                self.start_recovery(s, old + k);
                change
                    .spares_activated
                    .push(self.members[s].device.path.clone());
            }
        }
        let raid_disks = n as u32;
        self.commit(|sb| sb.raid_disks = raid_disks)?;
        let newest = self.grow_template()?;
        self.geometry = geometry_of(&newest)?;
        Ok(change)
    }
}
