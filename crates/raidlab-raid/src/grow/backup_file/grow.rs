//! The backup file's protocol for a 0.90 grow to more members (with a new
//! chunk or layout too, or not), as mdadm runs it given `--backup-file`:
//! the critical section goes in the file instead of on the new members
//! (`reshape_prepare_fdlist` leaves the spares out when a file is given),
//! one section named by the record at byte 0, and the rest of the grow is
//! `super::super::in_place`'s walk, which needs no backup past it. Offline
//! and served the same three steps run
//! ([`Assembly::in_place_walk_with_backup`], the walk, then
//! [`Assembly::in_place_file_done`]); served, the first runs while the
//! clients' requests are held, as mdadm's critical section runs with md's
//! reshape suspended.
//!
//! What it decides: that the critical section's old bytes and the record
//! naming them are durable in the file before any superblock records the
//! reshape; at every run, while that record covers the position, its bytes
//! are put back in the new geometry, the position past them committed,
//! and only then is the section let go (mdadm's `forget_backup`); a record
//! that does not fit is refused before anything is written.
//!
//! It must never let the walk start inside the critical section without
//! having put the file's backup back, and never let the section go before
//! the position past it is durable.

use super::{save, section, set_section, BackupFile, Saved};
use crate::assemble::Assembly;
use crate::grow::{refused, ReshapePlan, ReshapeReport, ReshapeWalk, SECTOR};
use crate::recovery::{Progress, RunOptions};
use raidlab_core::{Error, Op, Result, Volume};
use raidlab_layout::reshape::Reshape;
use raidlab_md::grow_backup::LEAD_SECTORS;

impl Assembly {
    /// Back the critical section of the in-place grow `plan` up in `file`:
    /// the data, flushed, then the record naming it, flushed.
    pub(in crate::grow) fn in_place_backup_to_file(
        &self,
        plan: &ReshapePlan,
        file: &BackupFile,
    ) -> Result<()> {
        let r = plan.reshape_at_start(self.grow_template()?.size)?;
        let sectors = plan.backup_sectors;
        let critical = r.forward_critical_section().unwrap_or(u64::MAX);
        if critical > sectors * SECTOR {
            return Err(Error::invalid(format!(
                "reshape: the backup ({sectors} sectors) does not cover the critical section ({critical} bytes)"
            )));
        }
        self.check_file_size(file, sectors)?;
        let mut bsb = self.fresh_record(sectors)?;
        let old = self.reshape_side(&r, false, false)?;
        save(file, &mut bsb, 0, &old, 0..sectors * SECTOR, sectors)
    }

    /// Carry on the in-place grow the superblocks record, started with
    /// `file`, offline: [`Assembly::in_place_walk_with_backup`], the walk
    /// to the end, then [`Assembly::in_place_file_done`]. The served run
    /// (`super::super::served_walk`) takes the same three steps.
    pub(super) fn in_place_run_with_backup(
        &mut self,
        file: &BackupFile,
        opts: RunOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ReshapeReport> {
        let mut walk = self.in_place_walk_with_backup(file, false)?;
        walk.run(&opts, &|| false, progress, &mut |sectors| {
            self.commit(|sb| sb.reshape_position = sectors)
        })?;
        let report = self.reshape_end(walk)?;
        self.in_place_file_done(file)?;
        Ok(report)
    }

    /// The in-place grow the superblocks record, started with `file`,
    /// ready to walk (`served`: beside the clients, through a gate): the
    /// critical section put back from the file while it covers the
    /// position and the position past it committed
    /// ([`Assembly::in_place_restore_file`]), then `super::super::walk`'s
    /// in-place walk, which needs no backup past it. The one preparation
    /// of the offline and the served run; served, the caller holds the
    /// clients' requests until it returns (the put-back writes the
    /// critical section with no gate).
    pub(in crate::grow) fn in_place_walk_with_backup(
        &mut self,
        file: &BackupFile,
        served: bool,
    ) -> Result<ReshapeWalk> {
        let r = match self.reshape() {
            Some(Ok(r)) if self.is_in_place(&r)? => r,
            _ => {
                return Err(Error::invalid(
                    "reshape: the superblocks record no in-place grow of a metadata 0.90 array",
                ))
            }
        };
        let recorded = r.position;
        self.in_place_restore_file(file, &r)?;
        let mut walk = self.reshape_walk(served)?;
        walk.report.resumed_from = recorded;
        walk.report.resumed = recorded > 0;
        Ok(walk)
    }

    /// After an in-place grow started with `file` has ended: the file's
    /// record names nothing, and the file is removed, as mdadm unlinks it.
    pub(in crate::grow) fn in_place_file_done(&self, file: &BackupFile) -> Result<()> {
        if let Some(mut b) = file.record().ok().flatten() {
            set_section(&mut b, 0, 0..0);
            set_section(&mut b, 1, 0..0);
            file.write_record(&mut b)?;
        }
        if let Some(path) = &file.path {
            std::fs::remove_file(path).map_err(|e| Error::io(Op::Write, &file.name, e))?;
        }
        Ok(())
    }

    /// `Grow_restart` for a grow's file: the section it names put back in
    /// the new geometry when it covers the position, the position past it
    /// committed, the section let go. Refused, with nothing written, when
    /// the position is inside the critical section and the file holds no
    /// backup that fits.
    pub(super) fn in_place_restore_file(&mut self, file: &BackupFile, r: &Reshape) -> Result<()> {
        let critical = r.forward_critical_section().unwrap_or(0);
        let position = r.position;
        let record = file.record()?;
        let Some(mut b) = record.filter(|b| b.needed_at(position / SECTOR)) else {
            if position < critical {
                return Err(refused(format!(
                    "--backup-file {}: it names no backup covering reshape_position {position}, which is inside the critical section (the first {critical} bytes of the array, where the new stripes overlap old ones): those bytes cannot be put back (mdadm: \"Failed to find backup of critical section\"); give the file the reshape was started with; nothing was changed",
                    file.name
                )));
            }
            return Ok(());
        };
        let uuid = self.backup_uuid()?;
        if b.set_uuid != uuid {
            return Err(refused(format!(
                "--backup-file {}: its record belongs to another array (mdadm: \"Wrong uuid on backup-metadata\"): give this array's backup file; nothing was changed",
                file.name
            )));
        }
        let utime = self.grow_template()?.utime;
        if !b.fresh_for(utime as u32) {
            return Err(refused(format!(
                "--backup-file {}: its record was written at {} s, too far from the superblocks' update time {utime} s (mdadm: \"too-old timestamp on backup-metadata\"): it is not this reshape's backup; nothing was changed",
                file.name, b.mtime
            )));
        }
        let s = section(&b, 0);
        let fits = !b.two_sections
            && b.devstart == LEAD_SECTORS
            && s.start == 0
            && s.end >= critical
            && s.end <= r.new.array_bytes()
            && s.end % r.forward_unit() == 0
            && file.volume.size() >= LEAD_SECTORS * SECTOR + s.end;
        if !fits {
            return Err(refused(format!(
                "--backup-file {}: it names array bytes {}..{} at sector {}{}, which is not this grow's critical section (from 0, at least {critical} bytes, whole stripes of {} bytes, one section at 4 KiB in the file): nothing to put back safely; nothing was changed",
                file.name,
                s.start,
                s.end,
                b.devstart,
                if b.two_sections { ", with a second section" } else { "" },
                r.forward_unit()
            )));
        }
        let saved = [Saved {
            from: &*file.volume,
            name: &file.name,
            at: LEAD_SECTORS * SECTOR,
            array: 0..s.end,
        }];
        // Let go only once the position past it is durable: a crash in
        // between puts the same bytes back again.
        self.put_back(
            r,
            &saved,
            s.end,
            |_| Ok(()),
            |_| {
                set_section(&mut b, 0, 0..0);
                file.write_record(&mut b)
            },
        )
    }
}
