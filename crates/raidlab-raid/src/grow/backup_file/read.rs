//! Reading a stopped metadata 0.90 in-place reshape: md's rule. While a
//! window is rewritten in place its old bytes are whole only in a backup
//! (mdadm's backup file; for a grow to more members without one, its new
//! members), and the superblocks record the position below the window. Read
//! through the old geometry, a window cut part-way answers half-written
//! bytes with no error. So md refuses to assemble such an array without its
//! backup, read-only included (mdadm's `Assemble`: "Need a backup file to
//! complete reshape of this array"; `Grow_restart`: "Failed to restore
//! critical section for reshape, sorry."), and given the file puts the
//! window back before the array runs.
//!
//! What it decides:
//! - which recorded reshapes no read may see without their backup: a 0.90
//!   restripe over the same members or onto fewer members, always (md's:
//!   the superblocks cannot bound the window, whose size is the file's, and
//!   md refuses even at the walk's last position); a 0.90 grow to more
//!   members while its position is inside the critical section and no new
//!   member holds a backup covering it (`Grow_restart` for `delta_disks >
//!   0`), past it never (md's too: its walk there needs no backup);
//! - a read given the file: the file checked (this array's, whole, fresh,
//!   covering the position) and what it holds put back in the new geometry,
//!   the position past it committed, as `mdadm --assemble --backup-file`
//!   does; this writes the members. The assembly then reads
//!   ([`Assembly::array`]) as its superblocks now record the reshape.
//!
//! It must never let such an array be read before the put-back, never
//! write a member from a file it has not checked, and never change
//! anything when it refuses.

use super::BackupFile;
use crate::assemble::{ArrayState, Assembly};
use crate::grow::in_place::{in_place_walk_supported, recorded_in_place};
use crate::grow::refused;
use raidlab_core::{Error, ErrorKind, Op, Result};
use raidlab_layout::reshape::Reshape;
use raidlab_md::superblock::{feature, MetadataVersion};

impl Assembly {
    /// Refuse a read (any: read-only, `export`, a served read-only array)
    /// of the reshape `r` that md would not assemble without its backup,
    /// unless this assembly has put the backup back
    /// ([`Assembly::reshape_put_back`]). `label` names the array.
    pub(crate) fn refuse_read_without_backup(&self, r: &Reshape, label: &str) -> Result<()> {
        if self.backup_put_back {
            return Ok(());
        }
        let t = self.grow_template()?;
        if t.version() != MetadataVersion::V0_90 || t.feature_map & feature::NEW_OFFSET != 0 {
            return Ok(());
        }
        let p = r.position;
        let how = "read it with `raidlab export MEMBER... --backup-file FILE`, given the file the reshape was started with (the window is put back first, which writes the members, as `mdadm --assemble --backup-file` does), serve it with `raidlab serve MEMBER... --backup-file FILE` (the same put-back, then the reshape carries on in the server), or finish the reshape with `raidlab grow --continue --backup-file FILE`";
        let why = if r.backwards || r.new.raid_disks <= r.old.raid_disks {
            let what = if r.new.raid_disks < r.old.raid_disks {
                "shrink onto fewer members (walked down from the array's end)"
            } else {
                "restripe over the same members (a new chunk or layout)"
            };
            format!(
                "its superblocks record a metadata 0.90 {what} stopped at array byte {p}, which runs in place through mdadm's backup file: the window being rewritten when it stopped may be whole only in that file, and the superblocks do not say where that window is, so the array is not read without the file (md: \"Need a backup file to complete reshape of this array\", \"Failed to restore critical section for reshape, sorry.\"): {how}"
            )
        } else if !recorded_in_place(&t, r) {
            return Ok(());
        } else if !in_place_walk_supported(r) {
            // No critical section raidlab can bound (the level changes, or
            // no data member is gained): md's backup of every window.
            format!(
                "its superblocks record a metadata 0.90 reshape to more members stopped at array byte {p} that raidlab does not walk (a level change, or no data member gained): md keeps its windows in a backup file raidlab does not put back, so it is not read here; assemble it with `mdadm --assemble --backup-file FILE` on Linux"
            )
        } else {
            let critical = r.forward_critical_section().unwrap_or(u64::MAX);
            if p >= critical || self.find_backup(r)?.is_some() {
                return Ok(());
            }
            format!(
                "its superblocks record a metadata 0.90 grow to more members stopped at array byte {p}, inside its critical section (the first {critical} bytes of the array, where the new stripes overlap old ones), and no new member holds a backup of it: it was started with a backup file, which alone holds those bytes whole (md: \"Failed to find backup of critical section\", \"Failed to restore critical section for reshape, sorry.\"): {how}"
            )
        };
        Err(Error::new(
            ErrorKind::Refused,
            Op::Open,
            format!("{label}: {why}; nothing was changed"),
        ))
    }

    /// Whether the reshape these superblocks record is read only with its
    /// backup file put back first (md's rule,
    /// `Assembly::refuse_read_without_backup`'s refusal): what `scan`
    /// tells `export` to be given.
    pub fn read_needs_backup_file(&self) -> bool {
        match self.reshape() {
            Some(Ok(r)) => self
                .refuse_read_without_backup(&r, "")
                .is_err_and(|e| e.kind == ErrorKind::Refused),
            _ => false,
        }
    }

    /// Whether a start may be given a backup file for the reshape these
    /// superblocks record: one it must be read with
    /// ([`Assembly::read_needs_backup_file`]), or a 0.90 grow to more
    /// members past its critical section, whose file holds nothing to put
    /// back any more but is the one the walk lets go and removes at its end
    /// (mdadm's `--assemble --backup-file` takes it there too).
    pub fn reshape_takes_backup_file(&self) -> bool {
        self.read_needs_backup_file()
            || matches!(self.reshape(), Some(Ok(r)) if self.is_in_place(&r).unwrap_or(false))
    }

    /// `mdadm --assemble --backup-file FILE` for a stopped 0.90 in-place
    /// reshape: `file` checked, what it holds for the recorded position put
    /// back in the new geometry, and the position past it committed (its
    /// sections stay named, as the walk's own resume leaves them; a grow's
    /// critical section is let go once put back). The assembly then reads
    /// ([`Assembly::array`]). This writes the members and the file's
    /// record. Refused with nothing written when the array records no such
    /// reshape, when too many members are missing to read it, and when the
    /// file is torn, another array's, too old, too small, or names no
    /// backup covering the position that needs one.
    pub fn reshape_put_back(&mut self, file: &BackupFile) -> Result<()> {
        let r = match self.reshape() {
            None => {
                return Err(refused(format!(
                    "--backup-file {}: the array is not in the middle of a reshape: there is nothing to put back, and it reads without the file; nothing was changed",
                    file.name
                )))
            }
            Some(r) => r?,
        };
        if self.state() == ArrayState::Failed {
            return Err(refused(format!(
                "--backup-file {}: role(s) {:?} missing, more than the array can be read without: nothing is put back; give the missing members; nothing was changed",
                file.name,
                self.missing()
            )));
        }
        // Another array's file is refused whatever it names: mdadm passes
        // it over, then finds no backup.
        if let Some(b) = file.record()? {
            if b.set_uuid != self.backup_uuid()? {
                return Err(refused(format!(
                    "--backup-file {}: its record belongs to another array (mdadm: \"Wrong uuid on backup-metadata\"): give this array's backup file; nothing was changed",
                    file.name
                )));
            }
        }
        if self.is_in_place(&r)? {
            if self.find_backup(&r)?.is_some() {
                return Err(refused(format!(
                    "--backup-file {}: this grow's critical section is backed up on its new members (it was started without a backup file), and it reads without one: leave --backup-file out; nothing was changed",
                    file.name
                )));
            }
            self.in_place_restore_file(file, &r)?;
        } else if self.needs_backup_file(&r)? {
            let (window, unit) = self.walk_window(file, &r)?;
            self.restore_from(file, &r, window, unit)?;
            *file.put_back_slot() = Some(self.grow_template()?.events);
        } else {
            return Err(refused(format!(
                "--backup-file {}: this reshape does not run through a backup file raidlab puts back (raidlab does so for a metadata 0.90 RAID 4/5/6's new chunk or layout over the same members, its fewer members, and its more members started with one): read it without --backup-file; nothing was changed",
                file.name
            )));
        }
        self.backup_put_back = true;
        Ok(())
    }
}
