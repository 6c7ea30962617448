//! A grow of a metadata 0.90 RAID 4/5/6 to more data members, in place, as
//! mdadm runs it without a backup file: 0.90 has no new data offset, so the
//! new geometry is written over the old one at the same member offsets.
//! Past the critical section (`Reshape::forward_critical_section`) the new
//! stripes are denser than the old ones and trail the old reads, so
//! `super::walk`'s forward walk with a gap of 0 is safe with frequent
//! checkpoints; inside it they overlap old rows of the same data, so mdadm
//! first backs that prefix up on each new member ("Need to backup NNNK of
//! critical section..") and puts it back at assembly after a crash inside
//! it (`Grow_restart`).
//!
//! What it decides:
//! - whether such a grow is one raidlab makes: more data members at the
//!   same level, with the same chunk and layout or a new chunk or layout
//!   in the same reshape (mdadm makes both at once: `analyse_change` and
//!   `reshape_array` ask no backup file when spares take the new roles,
//!   and back up only the critical section, `child_monitor` letting md
//!   walk the rest; given `--backup-file`, that backup goes in the file,
//!   `super::backup_file::grow`); a new chunk or layout over the same members runs
//!   through mdadm's `--backup-file`, `super::backup_file`; a level change
//!   with it is refused with nothing written; and md's conditions of any
//!   restripe;
//! - how much is backed up (mdadm's: a whole number of old and new stripes,
//!   made a whole number of the walk's units, md's resume boundary, and
//!   doubled until it covers the critical section as
//!   `Reshape::forward_critical_section` finds it, which with a smaller
//!   new chunk reaches past mdadm's size: 4 to 5 members, 64 to 32 KiB,
//!   768 KiB against mdadm's 384 KiB) and where (`raidlab_md::grow_backup`:
//!   its place and record on each new member, so that mdadm's
//!   `Grow_restart` finds it and puts back whatever length it names),
//!   written and flushed before any superblock records the reshape;
//! - that the critical section is copied by putting the backup back: at
//!   every start of the walk, while a confirmed backup covers the position
//!   (the first run at position 0, or a resume after a crash inside it),
//!   its bytes are written in the new geometry, the position past it is
//!   committed, and only then is the backup let go (its leading record
//!   rewritten with no length, as mdadm does).
//!
//! Served, the put-back runs while the owner holds the clients' requests
//! (`live::reshape`'s start), and the walk past it goes through the gate
//! as any forward walk's steps do.
//!
//! It must never let a walk start inside the critical section without a
//! backup that covers it, never write the new geometry there before the
//! backup is durable on every new member, and never let a client's
//! request reach the array while the critical section is put back.

use super::backup_file::Saved;
use super::{refused, ReshapePlan, SECTOR};
use crate::assemble::{now_secs, Assembly};
use raidlab_core::{Error, ErrorKind, Op, Result, SliceVolume, Volume};
use raidlab_layout::reshape::Reshape;
use raidlab_layout::Level;
use raidlab_md::grow_backup::{
    mdadm_backup_sectors, uuid_bytes_090, BackupSuper, Placement, LEAD_SECTORS, RECORD_BYTES,
};
use raidlab_md::superblock::{feature, MetadataVersion};
use raidlab_md::Superblock;
use std::ops::Range;
use std::sync::Arc;

/// Array bytes a backup holds, and those bytes.
pub(crate) type BackupSource = (Range<u64>, Arc<dyn Volume>);

impl Assembly {
    /// Whether a 0.90 array may restripe in place to `n` members with
    /// `same_shape` (chunk and layout kept) and no level change: without a
    /// backup file only to more members (with a new chunk or layout too,
    /// as mdadm makes both in one reshape), with one only over the same
    /// members (`super::backup_file`).
    pub(super) fn in_place_allowed(
        &self,
        what: &str,
        n: usize,
        same_shape: bool,
        level_change: bool,
        backup_file: bool,
    ) -> Result<()> {
        let old = self.geometry.raid_disks;
        // Fewer members are `super::shrink`'s; a grow given a backup file
        // backs its critical section up there (`super::backup_file::grow`).
        let with_file = backup_file && n == old && !same_shape;
        if level_change || !(n > old || with_file) {
            let how = if n == old && !level_change {
                "give one: `--backup-file FILE` on a device outside the array (mdadm: \"Cannot grow - need backup-file\")"
            } else if level_change {
                "a level change with a restripe of a 0.90 array is not built"
            } else {
                "raidlab builds it for more members (the critical section backed up on the new members) and, with `--backup-file`, for a new chunk or layout over the same members or fewer members"
            };
            return Err(refused(format!(
                "{what}: metadata 0.90 has no new data offset, so md restripes it in place, and without a backup file only when it gains data members (mdadm backs the first stripes up on the new members); {how}; nothing was changed"
            )));
        }
        self.restripe_conditions(what)
    }

    /// The array sectors raidlab backs up for the in-place grow `plan`
    /// (to more members, with a new chunk or layout or not): mdadm's size
    /// (a whole number of old and new stripes), made a whole number of the
    /// walk's units too (md resumes only on its stripe boundary, and
    /// `Grow_restart` records the position at the backup's end) and
    /// doubled until it covers the critical section. Refused as mdadm
    /// refuses when it is half a member or more.
    pub(super) fn in_place_backup_sectors(&self, plan: &ReshapePlan) -> Result<u64> {
        let r = self.planned(plan)?;
        let mdadm = mdadm_backup_sectors(
            r.old.chunk_bytes,
            r.new.chunk_bytes,
            r.old.data_disks() as u64,
            r.new.data_disks() as u64,
        );
        let unit = r.forward_unit() / SECTOR;
        let mut sectors = mdadm / gcd(mdadm, unit) * unit;
        let critical = r.forward_critical_section().unwrap_or(u64::MAX);
        let component = self.grow_template()?.size;
        while sectors * SECTOR < critical && sectors < component {
            sectors *= 2;
        }
        if sectors >= component / 2 {
            return Err(refused(format!(
                "the critical section's backup ({} KiB) is half a member ({} KiB) or more: mdadm refuses such a grow (\"Something wrong - reshape aborted\"); nothing was changed",
                sectors / 2,
                component / 2
            )));
        }
        Ok(sectors)
    }

    /// The reshape `plan` will record, before it is recorded.
    fn planned(&self, plan: &ReshapePlan) -> Result<Reshape> {
        plan.reshape_at_start(self.grow_template()?.size)
    }

    /// The array's uuid as mdadm copies it into a backup record.
    pub(super) fn backup_uuid(&self) -> Result<[u8; 16]> {
        let u = self.grow_template()?.set_uuid;
        // raidlab keeps a 0.90 uuid's words big-endian (`sb090::write`).
        let word =
            |i: usize| u32::from_be_bytes([u[4 * i], u[4 * i + 1], u[4 * i + 2], u[4 * i + 3]]);
        Ok(uuid_bytes_090([word(0), word(1), word(2), word(3)]))
    }

    /// Back the critical section of `plan` up on the members `news` (the
    /// spares taking the new roles) where mdadm puts it: the data, flushed,
    /// then the two records, flushed.
    pub(super) fn in_place_backup(&self, plan: ReshapePlan, news: &[usize]) -> Result<()> {
        let r = self.planned(&plan)?;
        let sectors = plan.backup_sectors;
        let critical = r.forward_critical_section().unwrap_or(u64::MAX);
        if critical > sectors * SECTOR {
            return Err(Error::invalid(format!(
                "reshape: mdadm's backup ({sectors} sectors) does not cover the critical section ({critical} bytes)"
            )));
        }
        let old = self.reshape_side(&r, false, false)?;
        let mut data = vec![0u8; (sectors * SECTOR) as usize];
        old.read_at(&mut data, 0)?;
        let component = self.grow_template()?.size;
        let uuid = self.backup_uuid()?;
        for &i in news {
            let m = &self.members[i];
            let ctx = |e: Error| e.on_device(m.device.path.clone());
            let place = Placement::on_member(m.sb.data_offset, component, sectors).map_err(ctx)?;
            let vol = &m.device.volume;
            vol.write_at(&data, place.data * SECTOR).map_err(ctx)?;
            vol.flush().map_err(ctx)?;
            let record = BackupSuper {
                two_sections: false,
                set_uuid: uuid,
                mtime: now_secs(),
                devstart: place.data,
                arraystart: 0,
                length: sectors,
                devstart2: sectors,
                arraystart2: 0,
                length2: 0,
            }
            .to_bytes();
            vol.write_at(&record, place.leading * SECTOR).map_err(ctx)?;
            vol.write_at(&record, place.trailing * SECTOR)
                .map_err(ctx)?;
            vol.flush().map_err(ctx)?;
        }
        Ok(())
    }

    /// The confirmed backup a new member of `r` holds that still covers its
    /// position (mdadm's search in `Grow_restart`): the member's index and
    /// the record. Records that are absent, torn, of another array, let go
    /// or behind the position are passed over, as mdadm passes them.
    pub(super) fn find_backup(&self, r: &Reshape) -> Result<Option<(usize, BackupSuper)>> {
        let component = self.grow_template()?.size;
        let uuid = self.backup_uuid()?;
        // Every member not holding an old role (the new ones, whether or
        // not the assembly has placed them in their new roles yet).
        let old_roles: Vec<usize> = self.slots[..r.old.raid_disks.min(self.slots.len())]
            .iter()
            .flatten()
            .copied()
            .collect();
        for (i, m) in self.members.iter().enumerate() {
            if old_roles.contains(&i) || !m.is_live() {
                continue;
            }
            let read = |sector: u64| -> Result<Option<BackupSuper>> {
                let mut b = [0u8; RECORD_BYTES];
                m.device
                    .volume
                    .read_at(&mut b, sector * SECTOR)
                    .map_err(|e| e.on_device(m.device.path.clone()))?;
                Ok(BackupSuper::parse(&b).ok().flatten())
            };
            let Some(end) = (m.sb.data_offset + component).checked_sub(LEAD_SECTORS) else {
                continue;
            };
            let Some(b) = read(end)? else { continue };
            if b.set_uuid != uuid || !b.needed_at(r.position / SECTOR) || b.devstart < LEAD_SECTORS
            {
                continue;
            }
            if read(b.devstart - LEAD_SECTORS)?.is_some_and(|l| b.confirmed_by(&l)) {
                return Ok(Some((i, b)));
            }
        }
        Ok(None)
    }

    /// Whether the reshape `r` the superblocks record is an in-place grow
    /// of a 0.90 array that raidlab walks.
    pub(crate) fn is_in_place(&self, r: &Reshape) -> Result<bool> {
        Ok(recorded_in_place(&self.grow_template()?, r) && in_place_walk_supported(r))
    }

    /// For reading an in-place grow stopped inside its critical section:
    /// the array bytes a confirmed backup holds, and those bytes (a slice
    /// of the new member holding it). `None` when no backup covers the
    /// position.
    pub(crate) fn in_place_backup_source(&self, r: &Reshape) -> Result<Option<BackupSource>> {
        if !self.is_in_place(r)? {
            return Ok(None);
        }
        let Some((i, b)) = self.find_backup(r)? else {
            return Ok(None);
        };
        let start = b.arraystart * SECTOR;
        let end = ((b.arraystart + b.length) * SECTOR).min(r.array_bytes());
        if start >= end {
            return Ok(None);
        }
        let m = &self.members[i];
        let bytes = SliceVolume::new(m.device.volume.clone(), b.devstart * SECTOR, end - start)
            .map_err(|e| e.on_device(m.device.path.clone()))?;
        Ok(Some((start..end, Arc::new(bytes) as Arc<dyn Volume>)))
    }

    /// At the start of an in-place walk: put a backup that covers the
    /// position back in the new geometry, commit the position past it and
    /// let it go; refused when the position is inside the critical section
    /// with no such backup. The reshape to walk, its position updated.
    pub(super) fn in_place_resume(&mut self, r: Reshape) -> Result<Reshape> {
        let critical = r.forward_critical_section().ok_or_else(|| {
            refused("reshape: this 0.90 reshape does not gain data members, so no in-place walk carries it on: finish it with mdadm and its backup file; nothing was changed".into())
        })?;
        let Some((i, b)) = self.find_backup(&r)? else {
            if r.position < critical {
                return Err(refused(format!(
                    "reshape_position {} is inside the critical section (the first {critical} bytes of the array, where the new stripes overlap old ones) and no new member holds a valid backup of it (mdadm's md_backup_data record 4 KiB before the end of each new member's component): those bytes cannot be put back (mdadm: \"Failed to find backup of critical section\"); if the grow was started with --backup-file, run `raidlab grow --continue --backup-file FILE` with that file; nothing was changed",
                    r.position
                )));
            }
            return Ok(r);
        };
        let (start, end) = (b.arraystart * SECTOR, (b.arraystart + b.length) * SECTOR);
        if start > r.position || end > r.new.array_bytes() || end % r.forward_unit() != 0 {
            return Err(Error::new(
                ErrorKind::Invalid,
                Op::Plan,
                format!(
                    "{}: the critical section's backup covers array bytes {start}..{end}, which do not fit this reshape at position {} (stripes of {} bytes); nothing was changed",
                    self.members[i].device.path,
                    r.position,
                    r.forward_unit()
                ),
            ));
        }
        let m = &self.members[i];
        let (vol, name) = (m.device.volume.clone(), m.device.path.clone());
        let saved = [Saved {
            from: &*vol,
            name: &name,
            at: b.devstart * SECTOR,
            array: start..end,
        }];
        // Let go only once the position past it is durable: a crash in
        // between puts the same bytes back again.
        self.put_back(&r, &saved, end, |_| Ok(()), |asm| asm.let_go_backups(&r))?;
        Ok(Reshape { position: end, ..r })
    }

    /// Rewrite the leading record of every new member's backup with no
    /// length, as mdadm's `forget_backup`: the two copies then disagree and
    /// `Grow_restart` passes the backup over.
    fn let_go_backups(&self, r: &Reshape) -> Result<()> {
        let component = self.grow_template()?.size;
        for role in r.old.raid_disks..r.new.raid_disks {
            let Some(i) = self.slots.get(role).copied().flatten() else {
                continue;
            };
            let m = &self.members[i];
            let ctx = |e: Error| e.on_device(m.device.path.clone());
            let vol: &Arc<dyn Volume> = &m.device.volume;
            let mut b = [0u8; RECORD_BYTES];
            let Some(end) = (m.sb.data_offset + component).checked_sub(LEAD_SECTORS) else {
                continue;
            };
            vol.read_at(&mut b, end * SECTOR).map_err(ctx)?;
            let Ok(Some(mut record)) = BackupSuper::parse(&b) else {
                continue;
            };
            if record.devstart < LEAD_SECTORS {
                continue;
            }
            record.length = 0;
            record.mtime = now_secs();
            vol.write_at(
                &record.to_bytes(),
                (record.devstart - LEAD_SECTORS) * SECTOR,
            )
            .map_err(ctx)?;
            vol.flush().map_err(ctx)?;
        }
        Ok(())
    }
}

/// Whether the superblocks (`template`, the newest) record `r` as md's
/// in-place grow: metadata 0.90 (no new data offset), forwards, to more
/// members. Whether raidlab walks it is [`in_place_walk_supported`].
pub(super) fn recorded_in_place(template: &Superblock, r: &Reshape) -> bool {
    template.version() == MetadataVersion::V0_90
        && template.feature_map & feature::NEW_OFFSET == 0
        && !r.backwards
        && r.new.raid_disks > r.old.raid_disks
}

/// Whether raidlab walks the 0.90 reshape `r` in place: a parity level
/// kept, more data members (a new chunk or layout too or not: past the
/// critical section `Reshape::forward_write_limit` keeps the walk's writes
/// behind the old rows still to be read whatever the two chunks).
pub(super) fn in_place_walk_supported(r: &Reshape) -> bool {
    matches!(r.new.level, Level::Raid4 | Level::Raid5 | Level::Raid6)
        && r.old.level == r.new.level
        && r.new.data_disks() > r.old.data_disks()
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.max(1)
}
