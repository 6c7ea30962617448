//! Reading an array md stopped in the middle of a reshape: the newest
//! superblock's reshape fields give both geometries (`raidlab_layout::reshape`),
//! and the running array reads each byte through the one that holds it, each
//! a full `Array` over the same members (at the old data offset, or at the
//! new one when md moved the data), so a degraded array is read from
//! redundancy on both sides of the position.
//!
//! It decides nothing about placement (that is the layout crate's) and must
//! never write: carrying on with the reshape, or writing into an array whose
//! stripes are half in one geometry and half in the other, is not built; the
//! array is read-only. It must never read a metadata 0.90 reshape whose
//! window may be whole only in its backup before the backup is put back
//! (`grow::backup_file::read` says which: md's rule).

use super::{format_uuid, Assembly, Member, MemberState};
use crate::array::Array;
use raidlab_core::{check_range, Error, Op, Result, SliceVolume, Volume};
use raidlab_layout::reshape::{MdReshape, Reshape};
use raidlab_md::superblock::feature;
use std::sync::Arc;

const SECTOR: u64 = 512;

impl Assembly {
    /// The interrupted reshape the newest superblock records; `None` when
    /// there is none.
    pub fn reshape(&self) -> Option<Result<Reshape>> {
        let sb = self.newest();
        if sb.feature_map & feature::RESHAPE_ACTIVE == 0 {
            return None;
        }
        // As md decides when it loads the superblock: a shrink always goes
        // backwards (from the end of the array towards its start), whatever
        // the metadata; a reshape over the same members does when the v1
        // flag says so (mdadm moved the data offset up); a grow never does.
        let backwards = sb.delta_disks < 0
            || (sb.delta_disks == 0 && sb.feature_map & feature::RESHAPE_BACKWARDS != 0);
        Some(Reshape::from_md(&MdReshape {
            level: sb.level,
            layout: sb.layout,
            chunk_sectors: sb.chunksize,
            raid_disks: sb.raid_disks,
            new_level: sb.new_level,
            new_layout: sb.new_layout,
            new_chunk_sectors: sb.new_chunk,
            delta_disks: sb.delta_disks,
            position_sectors: sb.reshape_position,
            backwards,
            member_sectors: sb.size,
        }))
    }

    /// Whether the reshape `r` is md's restripe of a RAID 0 (grow's `raid0`):
    /// a RAID 4 reshape whose one missing role is the new geometry's parity.
    /// No other array reaches that state (a degraded RAID 4 is never
    /// reshaped, by md's rules and raidlab's), and in it the old geometry's
    /// parity role holds a new member (md's `raid5_add_disk` fills the first
    /// free role), not parity: the old geometry is read without it.
    ///
    /// Onto fewer members (a backward RAID 4 reshape) the missing role is
    /// the old geometry's parity, past the new member count, while the new
    /// parity role is held by a member that held data (it gets the new
    /// parity, which md's takeover back to RAID 0 then drops). That is taken
    /// as a RAID 0's only with md's takeover word, parity-last, recorded on
    /// both sides (`raid45_takeover_raid0` writes it; mdadm's own RAID 4
    /// has 0): a RAID 4 that lost its parity member mid-shrink otherwise
    /// looks the same, and finishing it as a RAID 0 would drop its parity.
    pub fn raid0_restripe(&self, r: &Reshape) -> bool {
        let raid4 = raidlab_layout::Level::Raid4;
        if r.old.level != raid4 || r.new.level != raid4 {
            return false;
        }
        if r.new.raid_disks >= r.old.raid_disks {
            return self.missing() == [r.new.raid_disks - 1];
        }
        let sb = self.newest();
        let takeover_word = raidlab_layout::ParityLayout::ParityLast as u32;
        let old_parity = r.old.raid_disks - 1;
        let held = |role: usize| {
            self.members
                .iter()
                .any(|m| m.role == Some(role) && m.state == MemberState::Active)
        };
        sb.layout == takeover_word
            && sb.new_layout == takeover_word
            && self.missing().is_empty()
            && !held(old_parity)
            && (0..old_parity).all(held)
    }

    /// md's own RAID 0 restripe, stopped part-way, as raidlab's: md records
    /// the new member that took the old parity role (a device added below
    /// the old member count, `raid5_start_reshape`) as recovering, its
    /// recovery offset raised with the reshape position, where raidlab's
    /// restripe records it in sync. Below the position its blocks are the
    /// new geometry's, which md's reshape wrote to it like to every member;
    /// the old geometry never reads that role (it never held parity). So
    /// the member is taken as in sync, in memory (the next commit writes it
    /// so, as md's last one would), and the array reads and carries on as
    /// one raidlab stopped.
    ///
    /// Only that state is taken: a RAID 4 reshape onto more members whose
    /// empty roles are exactly the old and the new parity, one member
    /// recovering in the old parity role, and its recovery offset at or past
    /// the position (md raises both in one superblock write; behind it, its
    /// blocks there may never have been written, and the array stays
    /// refused as degraded).
    pub(crate) fn adopt_raid0_restripe_member(&mut self) {
        let Some(Ok(r)) = self.reshape() else {
            return;
        };
        let old_parity = r.old.raid_disks - 1;
        let new_parity = r.new.raid_disks - 1;
        let raid4 = raidlab_layout::Level::Raid4;
        if r.old.level != raid4
            || r.new.level != raid4
            || r.backwards
            || new_parity <= old_parity
            || self.missing() != [old_parity, new_parity]
        {
            return;
        }
        let mut held = self
            .members
            .iter()
            .enumerate()
            .filter(|(_, m)| m.role == Some(old_parity) && m.state == MemberState::Rebuilding);
        let (Some((i, _)), None) = (held.next(), held.next()) else {
            return;
        };
        let m = &mut self.members[i];
        let recovered =
            m.sb.recovery_offset
                .saturating_mul(SECTOR)
                .saturating_mul(r.new.data_disks() as u64);
        if recovered < r.position {
            return;
        }
        m.state = MemberState::Active;
        m.sb.feature_map &= !feature::RECOVERY_OFFSET;
        m.sb.recovery_offset = 0;
        self.slots[old_parity] = Some(i);
    }

    /// A grow's start commit cut short by a crash: the members it reached
    /// record the reshape and give a new member its role, but that device's
    /// own superblock, which the commit did not reach, still says spare
    /// (`missed`: member index and the role the newest table gives it, from
    /// [`super::member_state::missed_grow_start`]). Nothing has moved yet
    /// (the reshape is forward, at position 0), so the new role holds no
    /// data and that very device takes it back, in memory: the next commit
    /// writes it so (it is caught up, and written first at the count it
    /// has, as a member one event behind is). md would run the reshape
    /// with the role missing and rebuild the spare into it after; taking
    /// the device the start chose, rather than any spare, keeps what the
    /// start put on it (a 0.90 grow's critical-section backup lives on the
    /// new members, `grow::in_place`).
    ///
    /// Only a grow's new roles are taken so: a role below the old member
    /// count given to a spare is a rebuild's start, whose progress is in
    /// the device's own superblock (it stays a spare, `member_state`). When
    /// a RAID 4's old parity role is empty too, that is a RAID 0's restripe
    /// (a RAID 4 whose parity role is empty by design, its new members
    /// taking the roles from the old parity role on, the new parity role
    /// left empty) if the layout word is md's takeover's, parity-last, on
    /// both sides (as [`Assembly::raid0_restripe`] tells a RAID 0's
    /// shrink); with mdadm's own RAID 4 word it is a RAID 4 grow that lost
    /// its parity member, which stays refused, as md refuses to start it.
    /// Past position 0 a new role holds data: nothing is taken, and a
    /// missing role is refused as any missing member is.
    pub(crate) fn adopt_roles_missed_at_start(&mut self, missed: &[(usize, usize)]) {
        if missed.is_empty() {
            return;
        }
        let Some(Ok(r)) = self.reshape() else {
            return;
        };
        if r.backwards || r.position != 0 || r.new.raid_disks <= r.old.raid_disks {
            return;
        }
        let empty_role = |role: usize| self.slots.get(role).is_some_and(|s| s.is_none());
        let sb = self.newest();
        let takeover_word = raidlab_layout::ParityLayout::ParityLast as u32;
        let new_roles =
            if r.old.level == raidlab_layout::Level::Raid4 && empty_role(r.old.raid_disks - 1) {
                // With a new chunk too, the new layout word is mdadm's RAID 4
                // one (`grow::raid0`); the old one is still the takeover's.
                let chunk_too = sb.new_chunk != sb.chunksize && sb.new_layout == 0;
                if sb.layout != takeover_word || (sb.new_layout != takeover_word && !chunk_too) {
                    return;
                }
                r.old.raid_disks - 1..r.new.raid_disks - 1
            } else {
                r.old.raid_disks..r.new.raid_disks
            };
        let taken: Vec<(usize, usize)> = missed
            .iter()
            .copied()
            .filter(|&(i, role)| {
                new_roles.contains(&role)
                    && empty_role(role)
                    && self.members[i].state == MemberState::Spare
            })
            .collect();
        for (i, role) in taken {
            let dev = self.members[i].sb.dev_number;
            self.set_role(dev, role as u16);
            let m = &mut self.members[i];
            m.role = Some(role);
            m.state = MemberState::Active;
            self.slots[role] = Some(i);
        }
    }

    /// A side of the reshape reads each mirrored block from its first copy
    /// only unless the copies are known to agree ([`Assembly::consistent`]):
    /// after an unclean stop they may differ where writes were in flight,
    /// and the sides are never resynced before the reshape ends (md reads
    /// the first copy where its resync has not been, `read_balance`), so
    /// balanced reads would answer one copy, then the other, and the walk
    /// would copy either. The served fault simulation lost answered writes
    /// that way (issue 36).
    pub(crate) fn first_copy_unless_consistent(&self, side: &Array) {
        if !self.consistent() {
            side.read_first_copy_only(true);
        }
    }

    /// The data area of the member in `role` for one side of the reshape.
    pub(crate) fn reshape_area(
        &self,
        role: usize,
        new: bool,
        bytes: u64,
    ) -> Result<Option<Arc<dyn Volume>>> {
        // A shrink's members past the new count have no slot (the array
        // has `raid_disks` of them) but still hold the old geometry's roles.
        let beyond = || {
            let active = |m: &Member| m.role == Some(role) && m.state == MemberState::Active;
            self.members.iter().position(active)
        };
        if !new {
            if let Some(Ok(r)) = self.reshape() {
                if role + 1 == r.old.raid_disks && self.raid0_restripe(&r) {
                    return Ok(None);
                }
            }
        }
        let slot = self.slots.get(role).copied();
        let Some(i) = slot.unwrap_or_else(beyond) else {
            return Ok(None);
        };
        let m = &self.members[i];
        let mut offset = i128::from(m.sb.data_offset);
        if new && m.sb.feature_map & feature::NEW_OFFSET != 0 {
            offset += i128::from(m.sb.new_offset);
        }
        let ctx = |e: Error| e.on_device(m.device.path.clone());
        let offset = u64::try_from(offset).map_err(|_| {
            ctx(Error::invalid(format!(
                "reshape: data_offset {} + new_offset {} is before the start of the member",
                m.sb.data_offset, m.sb.new_offset
            )))
        })?;
        let area =
            SliceVolume::new(m.device.volume.clone(), offset * SECTOR, bytes).map_err(ctx)?;
        Ok(Some(Arc::new(area)))
    }

    /// The running (read-only) array of an assembly stopped mid-reshape.
    pub(crate) fn reshape_array(&self, r: Reshape) -> Result<Array> {
        let label = if self.name.is_empty() {
            format!("array {}", format_uuid(&self.uuid))
        } else {
            format!("array {}", self.name)
        };
        // md's rule: a 0.90 reshape stopped inside a window only its backup
        // holds whole is not read without that backup put back.
        self.refuse_read_without_backup(&r, &label)?;
        let side = |new: bool| -> Result<Arc<Array>> {
            let g = if new { r.new } else { r.old };
            let vols = (0..g.raid_disks)
                .map(|role| self.reshape_area(role, new, g.member_bytes))
                .collect::<Result<Vec<_>>>()?;
            let what = if new {
                "reshaped part"
            } else {
                "part not yet reshaped"
            };
            let a = Array::new(format!("{label} ({what})"), g, vols)?
                .with_executor(Arc::clone(&self.executor));
            self.first_copy_unless_consistent(&a);
            Ok(Arc::new(a.with_bad_blocks(self.bad_blocks()?).read_only()))
        };
        // A side that holds none of the array's bytes (the new one before
        // anything moved) is not built: its members are not needed, so a
        // role a crash left empty there does not stop the array being read.
        let holds = |new: bool| {
            r.split(0, r.array_bytes())
                .iter()
                .any(|&(n, _, len)| n == new && len > 0)
        };
        let volume = ReshapeVolume {
            name: label.clone(),
            reshape: r,
            backup: self.in_place_backup_source(&r)?,
            old: holds(false).then(|| side(false)).transpose()?,
            new: holds(true).then(|| side(true)).transpose()?,
        };
        // Every request goes straight to the volume; the array answers with
        // the reshape family's rules (no check, no spare, trims ignored).
        Ok(Array::pass_through(label, Arc::new(volume), &crate::level::RESHAPE)?.read_only())
    }
}

/// The array's bytes, each read through the geometry that holds it.
struct ReshapeVolume {
    name: String,
    reshape: Reshape,
    /// Each side, when it holds any of the array's bytes.
    old: Option<Arc<Array>>,
    new: Option<Arc<Array>>,
    /// An in-place 0.90 grow stopped inside its critical section: those
    /// array bytes are whole only in mdadm's backup on a new member until
    /// the walk puts them back (`grow::in_place`), so they are read there:
    /// the array bytes the backup holds, and the volume holding them.
    backup: Option<(std::ops::Range<u64>, Arc<dyn Volume>)>,
}

impl ReshapeVolume {
    /// `buf` from array byte `offset`, each piece through its geometry.
    fn read_sides(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let mut done = 0usize;
        for (new, at, len) in self.reshape.split(offset, buf.len() as u64) {
            let side = if new { &self.new } else { &self.old };
            let Some(side) = side else {
                return Err(Error::new(
                    raidlab_core::ErrorKind::Io,
                    Op::Read,
                    format!(
                        "internal: {}: a read reached a side of the reshape that holds nothing",
                        self.name
                    ),
                ));
            };
            side.read_at(&mut buf[done..done + len as usize], at)?;
            done += len as usize;
        }
        Ok(())
    }
}

impl Volume for ReshapeVolume {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn size(&self) -> u64 {
        self.reshape.array_bytes()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        check_range(&self.name, Op::Read, self.size(), offset, buf.len() as u64)?;
        if let Some((range, backup)) = &self.backup {
            let end = offset + buf.len() as u64;
            let (a, b) = (offset.max(range.start), end.min(range.end));
            if a < b {
                let (x, y) = ((a - offset) as usize, (b - offset) as usize);
                self.read_sides(&mut buf[..x], offset)?;
                backup.read_at(&mut buf[x..y], a - range.start)?;
                return self.read_sides(&mut buf[y..], b);
            }
        }
        self.read_sides(buf, offset)
    }

    fn write_at(&self, _buf: &[u8], offset: u64) -> Result<()> {
        Err(Error::new(
            raidlab_core::ErrorKind::ReadOnly,
            Op::Write,
            format!(
                "{}: md stopped this array in the middle of a reshape; raidlab reads it but does not write it (finish the reshape with mdadm --grow --continue)",
                self.name
            ),
        )
        .at(offset, 0))
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn is_writable(&self) -> bool {
        false
    }
}
