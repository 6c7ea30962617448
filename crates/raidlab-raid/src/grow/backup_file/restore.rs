//! The resume of a 0.90 restripe through mdadm's backup file, as mdadm's
//! `Grow_restart` makes it: the record checked (this array's uuid, a time
//! near the superblocks', sections where this reshape's windows go, and
//! covering the position), the sections it names put back in the new
//! geometry, and the position past them (below them, going backwards)
//! committed before the walk goes on.
//!
//! What it decides: which files are trusted (refused otherwise, each
//! before anything is written); for a shrink, how a record naming two
//! sections is brought to the walk's own state (the upper one let go, the
//! window below saved only when [`needs_backup`] says a cut in it could
//! lose its old bytes, as the walk saves it).
//!
//! It must never write the array from a record it has not checked, and
//! never leave a record naming a section below the position that is not
//! the window the walk takes next.

use super::shrink::{needs_backup, window_below};
use super::{hex, save, section, set_section, BackupFile, Saved};
use crate::assemble::Assembly;
use crate::grow::{refused, SECTOR};
use raidlab_core::Result;
use raidlab_layout::reshape::Reshape;
use raidlab_md::grow_backup::{BackupSuper, LEAD_SECTORS};
use std::ops::Range;

impl Assembly {
    /// `Grow_restart` for a backup file: the record checked (uuid, time,
    /// covering the position), its sections written in the new geometry,
    /// the position past them committed. Refused with nothing written
    /// when the file holds no backup mdadm would restore.
    pub(super) fn restore_from(
        &mut self,
        file: &BackupFile,
        r: &Reshape,
        window: u64,
        unit: u64,
    ) -> Result<BackupSuper> {
        let position = r.position;
        let missing = |why: &str| {
            refused(format!(
                "--backup-file {}: {why}; reshape_position {position} is inside a window the walk may have half restriped, and only a backup covering it can put it back (mdadm: \"Failed to find backup of critical section\", \"Failed to restore critical section for reshape, sorry.\"); give the file the reshape was started with; nothing was changed",
                file.name
            ))
        };
        let Some(b) = file.record()? else {
            return Err(missing("it holds no md_backup_data record"));
        };
        let uuid = self.backup_uuid()?;
        if b.set_uuid != uuid {
            return Err(refused(format!(
                "--backup-file {}: its record belongs to another array (uuid {}, this array's {}) (mdadm: \"Wrong uuid on backup-metadata\"): give this array's backup file; nothing was changed",
                file.name,
                hex(&b.set_uuid),
                hex(&uuid)
            )));
        }
        let utime = self.grow_template()?.utime;
        if !b.fresh_for(utime as u32) {
            return Err(refused(format!(
                "--backup-file {}: its record was written at {} s, too far from the superblocks' update time {utime} s (mdadm accepts two hours older, ten minutes newer: \"too-old timestamp on backup-metadata\"): it is not this reshape's latest backup; give the right file (mdadm's MDADM_GROW_ALLOW_OLD override is not taken); nothing was changed",
                file.name, b.mtime
            )));
        }
        if b.devstart != LEAD_SECTORS || (b.two_sections && b.devstart2 != window) {
            return Err(refused(format!(
                "--backup-file {}: its sections are at sectors {} and +{}, not where this reshape's windows ({window} sectors) go: not a file raidlab or mdadm made for it; nothing was changed",
                file.name, b.devstart, b.devstart2
            )));
        }
        let needed = if r.backwards {
            b.needed_below(position / SECTOR)
        } else {
            b.needed_at(position / SECTOR)
        };
        if r.backwards && position == 0 {
            // Every window is restriped and committed: nothing can be
            // half written, and only the end's superblocks are left.
            return Ok(b);
        }
        if !needed && r.backwards {
            // A shrink saves a window that needs it before writing any of
            // it, and names none below the position otherwise: with no
            // section below the position, the window below holds its old
            // bytes whole (not begun, or begun without needing a backup),
            // and the walk reads them again.
            return Ok(b);
        }
        if !needed {
            return Err(missing("its record names no section reaching the position"));
        }
        let total = r.new.array_bytes();
        let parts: Vec<(usize, Range<u64>)> = (0..2)
            .filter(|&k| {
                if k == 0 {
                    b.length != 0
                } else {
                    b.two_sections && b.length2 != 0
                }
            })
            .map(|k| (k, section(&b, k)))
            .collect();
        let lo = parts.iter().map(|(_, s)| s.start).min().unwrap_or(0);
        let hi = parts.iter().map(|(_, s)| s.end).max().unwrap_or(0);
        let covered = parts
            .iter()
            .fold(0u64, |c, (_, s)| c.saturating_add(s.end - s.start));
        let fits = parts.iter().all(|(_, s)| {
            s.start % unit == 0
                && (s.end % unit == 0 || s.end == total)
                && s.end <= total
                && s.end - s.start <= window * SECTOR
        });
        if parts.is_empty() || !fits || lo > position || hi < position || covered != hi - lo {
            return Err(refused(format!(
                "--backup-file {}: its sections ({parts:?}) do not fit this reshape at position {position} (windows of {unit} bytes, whole, touching, from at or before the position): nothing to put back safely; nothing was changed",
                file.name
            )));
        }
        let saved: Vec<Saved<'_>> = parts
            .iter()
            .map(|(k, s)| Saved {
                from: &*file.volume,
                name: &file.name,
                at: (LEAD_SECTORS + *k as u64 * window) * SECTOR,
                array: s.clone(),
            })
            .collect();
        let mut b_rec = b;
        let to = if r.backwards { lo } else { hi };
        // The sections stay named: the walk lets each go once the position
        // has passed it (`Walk::restripe`).
        self.put_back(
            r,
            &saved,
            to,
            |asm| asm.settle_record(file, r, &parts, &mut b_rec, window),
            |_| Ok(()),
        )?;
        Ok(b_rec)
    }

    /// Between a put-back and its commit: the record's time brought level
    /// with the commit that follows (a crash right after it must not leave
    /// a record mdadm's time window refuses against the new update time);
    /// going backwards, the record brought to the walk's own state.
    fn settle_record(
        &mut self,
        file: &BackupFile,
        r: &Reshape,
        parts: &[(usize, Range<u64>)],
        b_rec: &mut BackupSuper,
        window: u64,
    ) -> Result<()> {
        file.write_record(b_rec)?;
        let lo = parts.iter().map(|(_, s)| s.start).min().unwrap_or(0);
        if !r.backwards || lo == 0 {
            return Ok(());
        }
        // Going backwards the position drops below every section put
        // back, which then no longer counts for it (mdadm's rule). So the
        // record is brought to the walk's own state first: the position at
        // the upper section's start, that section let go, the window below
        // saved in its place; each step leaves a record naming a section
        // below the position, that fits it.
        if let [(_, a), (_, b)] = parts {
            let (upper, m) = if a.start > b.start {
                (parts[0].0, a.start)
            } else {
                (parts[1].0, b.start)
            };
            if r.position > m {
                self.commit(|sb| sb.reshape_position = m / SECTOR)?;
            }
            set_section(b_rec, upper, 0..0);
            file.write_record(b_rec)?;
        }
        // The window below is saved as the walk saves it: only when a cut
        // in it could lose its old bytes (`needs_backup`); else no section
        // names it, and a cut leaves it to be read again.
        let below = window_below(lo, window * SECTOR)..lo;
        if needs_backup(r, &below) {
            let free = if section(b_rec, 0).is_empty() { 0 } else { 1 };
            let old = self.reshape_side(r, false, false)?;
            save(file, b_rec, free, &old, below, window)?;
        }
        Ok(())
    }
}
