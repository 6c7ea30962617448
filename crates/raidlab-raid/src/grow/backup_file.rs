//! A restripe of a metadata 0.90 RAID 4/5/6 over the same members (a new
//! chunk or layout), or onto fewer members (a shrink, checked by
//! `super::shrink`), with mdadm's `--backup-file`, offline. 0.90 has no
//! data offset to move, so the new geometry is written over the old one at
//! the same member offsets; a window of the array that is a whole number of
//! old and new stripes occupies the same member bytes in both geometries
//! (over the same members), so restriping one window touches nothing
//! outside it, but a crash in the middle of it leaves it neither old nor
//! new. Its old bytes are therefore in the backup file first, as mdadm's
//! `child_monitor` keeps them.
//!
//! A shrink walks backwards (md's direction for `delta_disks < 0`), from
//! the end of the new geometry to its start: window `[a, p)` lands on the
//! member bytes from `a / new data members` on, which in the old geometry
//! hold array bytes from `a * old / new` >= `a` on: the window itself
//! (saved in the file) or bytes already restriped and committed, never a
//! byte still to be read. So a cut mid-window leaves the window's old
//! bytes whole, except near the array's start, where the window's new rows
//! reach down into its old ones (mdadm's critical section): only those
//! windows are saved in the file first ([`needs_backup`]). The others are
//! named in no section while they are walked: md's `Grow_restart` moves the
//! position down to any section below it and puts the section back in what
//! mdadm 4.2 takes for the shrink's geometry but is the old one (super0's
//! getinfo counts a shrink's raid_disks as the old count), so a section
//! named below the position of a window not fully walked is one md would
//! then read as walked. Inside the critical section md's resume of a cut
//! window is wrong for that reason whatever the file says (its own shrinks
//! too); raidlab's own resume puts the section back in the new geometry.
//!
//! The file is mdadm's (`Grow.c`: `reshape_open_backup_file`, `grow_backup`,
//! `forget_backup`, `Grow_restart`): one `md_backup_data-1/-2` record at
//! byte 0 (in a file the leading and trailing copies are the same sector),
//! the first section at 4 KiB, the second `devstart2` sectors after it;
//! each section holds one window, and they alternate.
//!
//! What it decides:
//! - the window (mdadm's: the least whole number of old and new stripes,
//!   doubled towards 16 MiB while under a 32nd of a member);
//! - the order of one window's work, so that at every instant the record
//!   holds a section covering the position the superblocks record (what
//!   `Grow_restart` needs for a reshape that gains no data members):
//!   restripe the window whose old bytes a section holds, forget the
//!   other section, save the next window's old bytes in it (data flushed
//!   before the record names it), commit the position past the window; a
//!   shrink saves a window that needs it at the start of its round, after
//!   the position is committed above it;
//! - a resume: the sections the record names put back in the new geometry
//!   and the position past them (below them, going backwards) committed,
//!   as `Grow_restart` does, before the walk goes on;
//! - at a shrink's end, the members past the new count left spares, as md
//!   leaves them (`Assembly::shrink_release`);
//! - which backup files are refused (on a member, existing when one is to
//!   be made, missing, too small, torn, of another array, older than the
//!   superblocks by mdadm's window), each before anything is written.
//!
//! The run is paced by `--max-rate` (member bytes a second) and stops
//! between windows when asked, as the other long runs.
//!
//! It must never write a window in the new geometry before its old bytes
//! and the record naming them are durable in the file, never forget the
//! section covering the recorded position, and never run while the array
//! serves (the served path refuses 0.90 restripes).

use super::{refused, ReshapeReport, SECTOR};
use crate::assemble::{now_secs, Assembly};
use crate::recovery::{clock_of, stopped, Progress, RunOptions};
use raidlab_core::{Error, ErrorKind, Op, Result, Volume};
use raidlab_devices::file::{FileVolume, OpenMode};
use raidlab_layout::reshape::Reshape;
use raidlab_layout::Level;
use raidlab_md::grow_backup::{mdadm_backup_sectors, BackupSuper, LEAD_SECTORS, RECORD_BYTES};
use raidlab_md::superblock::{feature, MetadataVersion};
use std::ops::Range;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// mdadm's largest window for a restripe over the same data members.
const MAX_WINDOW_SECTORS: u64 = 16 * 1024 * 2;

/// An open backup file (or, in tests, any volume standing for one).
pub struct BackupFile {
    name: String,
    volume: Arc<dyn Volume>,
    /// The file on disk, removed once the reshape has ended (as mdadm
    /// unlinks it).
    path: Option<PathBuf>,
}

impl std::fmt::Debug for BackupFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BackupFile({})", self.name)
    }
}

impl BackupFile {
    /// Make a new backup file of `sectors` (refused when it exists, as
    /// mdadm opens it with O_EXCL), every byte written so that the space is
    /// there before the reshape starts.
    pub fn create(path: &Path, sectors: u64) -> Result<BackupFile> {
        if path.exists() {
            return Err(exists(path));
        }
        let vol = FileVolume::create_sparse(path, sectors * SECTOR)?;
        let zeros = vec![0u8; 1 << 20];
        let filled = (|| {
            let mut at = 0;
            while at < sectors * SECTOR {
                let n = (sectors * SECTOR - at).min(zeros.len() as u64) as usize;
                vol.write_at(&zeros[..n], at)?;
                at += n as u64;
            }
            vol.flush()
        })();
        if let Err(e) = filled {
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
        Ok(BackupFile {
            name: path.display().to_string(),
            volume: Arc::new(vol),
            path: Some(path.to_path_buf()),
        })
    }

    /// Open the backup file of a reshape already recorded.
    pub fn open(path: &Path) -> Result<BackupFile> {
        if !path.exists() {
            return Err(refused(format!(
                "--backup-file {}: no such file (mdadm: \"Can't open backup file\"): give the file the reshape was started with; nothing was changed",
                path.display()
            )));
        }
        Ok(BackupFile {
            name: path.display().to_string(),
            volume: Arc::new(FileVolume::open(path, OpenMode::ReadWrite)?),
            path: Some(path.to_path_buf()),
        })
    }

    /// A volume standing for the file (tests: one a power cut reaches).
    pub fn on_volume(name: &str, volume: Arc<dyn Volume>) -> BackupFile {
        BackupFile {
            name: name.into(),
            volume,
            path: None,
        }
    }

    fn ctx(&self, e: Error) -> Error {
        e.on_device(self.name.clone())
    }

    fn record(&self) -> Result<Option<BackupSuper>> {
        let mut b = [0u8; RECORD_BYTES];
        self.volume.read_at(&mut b, 0).map_err(|e| self.ctx(e))?;
        BackupSuper::parse(&b).map_err(|e| {
            refused(format!(
                "--backup-file {}: its record is torn ({}): it holds no backup mdadm or raidlab would trust; nothing was changed",
                self.name, e.message
            ))
        })
    }

    fn write_record(&self, bsb: &mut BackupSuper) -> Result<()> {
        bsb.mtime = now_secs();
        self.volume
            .write_at(&bsb.to_bytes(), 0)
            .and_then(|()| self.volume.flush())
            .map_err(|e| self.ctx(e))
    }
}

fn exists(path: &Path) -> Error {
    refused(format!(
        "--backup-file {}: the file exists (mdadm: \"cannot create backup file ... File exists\"): a new reshape makes its own; give a new name, or remove the file if it is left from a finished reshape (`raidlab grow --continue --backup-file` resumes one that is not); nothing was changed",
        path.display()
    ))
}

/// The window of a restripe through the file, in sectors: mdadm's.
fn window_sectors(r: &Reshape, component_sectors: u64) -> u64 {
    plan_window(
        r.old.chunk_bytes,
        r.new.chunk_bytes,
        r.old.data_disks() as u64,
        r.new.data_disks() as u64,
        component_sectors,
    )
}

/// Sectors the file holds: the record's 4 KiB and two sections.
fn file_sectors(window: u64) -> u64 {
    LEAD_SECTORS + 2 * window
}

/// Whether raidlab walks `r` with a backup file: a 0.90 RAID 4/5/6 at one
/// level over the same members, with a new chunk or layout, forwards; or
/// onto fewer members, backwards (a shrink).
pub(crate) fn backup_file_walk(r: &Reshape) -> bool {
    let same = r.old.raid_disks == r.new.raid_disks
        && (r.old.chunk_bytes != r.new.chunk_bytes || r.old.layout != r.new.layout)
        && !r.backwards;
    let shrink = r.new.raid_disks < r.old.raid_disks && r.backwards;
    matches!(r.new.level, Level::Raid4 | Level::Raid5 | Level::Raid6)
        && r.old.level == r.new.level
        && (same || shrink)
}

/// Whether window `w` of `r`'s walk needs its old bytes in the file before
/// it is written in the new geometry: always over the same members (a
/// window's new stripes are its old member bytes); for a shrink only while
/// the window's new member rows reach down into its old ones, which near
/// the array's start they do (mdadm's critical section), and which a cut
/// mid-window would leave neither old nor new. Above that a shrink's new
/// rows lie wholly above the window's old rows and every row still to be
/// read, so a cut leaves the window's old bytes to be read again.
fn needs_backup(r: &Reshape, w: &Range<u64>) -> bool {
    if !r.backwards {
        return true;
    }
    let (od, nd) = (r.old.data_disks() as u64, r.new.data_disks() as u64);
    let (oc, nc) = (r.old.chunk_bytes, r.new.chunk_bytes);
    // Member bytes: where the window's new rows begin, where its old rows
    // end (whole chunk rows each way).
    let new_from = w.start / (nd * nc) * nc;
    let old_to = w.end.div_ceil(od * oc) * oc;
    new_from < old_to
}

/// The window below array byte `p` of a backward walk: windows lie at
/// whole multiples of `wbytes` from the array's start, the last one cut at
/// the array's end.
fn window_below(p: u64, wbytes: u64) -> u64 {
    (p - 1) / wbytes * wbytes
}

/// The section a record names: its array bytes (empty when let go).
fn section(b: &BackupSuper, part: usize) -> Range<u64> {
    let (start, len) = if part == 0 {
        (b.arraystart, b.length)
    } else if b.two_sections {
        (b.arraystart2, b.length2)
    } else {
        (0, 0)
    };
    // A record's fields come from a file: out-of-range values saturate and
    // are refused by the caller's checks, never overflow.
    start.saturating_mul(SECTOR)..start.saturating_add(len).saturating_mul(SECTOR)
}

fn set_section(b: &mut BackupSuper, part: usize, r: Range<u64>) {
    let (start, len) = (r.start / SECTOR, (r.end - r.start) / SECTOR);
    if part == 0 {
        (b.arraystart, b.length) = (start, len);
    } else {
        // mdadm marks the record `-2` from the first use of the second
        // section on.
        b.two_sections = true;
        (b.arraystart2, b.length2) = (start, len);
    }
}

impl Assembly {
    /// Whether the superblocks record a 0.90 reshape that only a backup
    /// file carries on.
    pub(crate) fn needs_backup_file(&self, r: &Reshape) -> Result<bool> {
        let t = self.grow_template()?;
        Ok(t.version() == MetadataVersion::V0_90
            && t.feature_map & feature::NEW_OFFSET == 0
            && backup_file_walk(r))
    }

    /// Refuse a backup file path mdadm would refuse: one that is (or lives
    /// on) a member of this array; `creating`: one that exists already.
    pub fn backup_file_path_check(&self, path: &Path, creating: bool) -> Result<()> {
        let canonical = |p: &Path| std::fs::canonicalize(p).ok();
        // The file's own identity, or where it would be made.
        let file_meta = std::fs::metadata(path).ok();
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let holder_dev = file_meta
            .as_ref()
            .map(|m| m.dev())
            .or_else(|| std::fs::metadata(dir).ok().map(|m| m.dev()));
        for m in &self.members {
            let member = Path::new(&m.device.path);
            let Ok(mm) = std::fs::metadata(member) else {
                continue;
            };
            let same_file = file_meta
                .as_ref()
                .is_some_and(|f| f.dev() == mm.dev() && f.ino() == mm.ino())
                || canonical(path).is_some_and(|c| Some(c) == canonical(member));
            let on_member = mm.rdev() != 0 && holder_dev == Some(mm.rdev());
            if same_file || on_member {
                return Err(refused(format!(
                    "--backup-file {}: it is on {}, a member of the array being reshaped (mdadm: \"backup file must NOT be on the array being reshaped\"): put it on a device outside the array; nothing was changed",
                    path.display(),
                    m.device.path
                )));
            }
        }
        if creating && path.exists() {
            return Err(exists(path));
        }
        Ok(())
    }

    /// The backup file's size for the restripe `plan` would record, in
    /// sectors (what [`BackupFile::create`] is given).
    pub fn backup_file_sectors(plan: &super::ReshapePlan) -> u64 {
        file_sectors(plan.backup_sectors)
    }

    /// Start the same-members restripe or the shrink `plan` (from
    /// [`Assembly::reshape_check_with_backup`]) with `file` made for it:
    /// the first window's old bytes (the last window of the array, going
    /// backwards, when it needs them: [`needs_backup`]) saved and named in
    /// the record before any superblock records the reshape.
    pub fn reshape_start_with_backup(
        &mut self,
        plan: super::ReshapePlan,
        file: &BackupFile,
    ) -> Result<()> {
        let shrink = plan.backwards && plan.new_raid_devices < plan.old_raid_devices;
        if !(shrink || plan.new_raid_devices == plan.old_raid_devices) || plan.backup_sectors == 0 {
            return Err(Error::invalid(
                "reshape: only a 0.90 restripe over the same members or onto fewer members starts with a backup file",
            ));
        }
        let r = plan.reshape_at_start(self.grow_template()?.size)?;
        let window = plan.backup_sectors;
        self.check_file_size(file, window)?;
        let mut bsb = self.fresh_record(window)?;
        let old = self.reshape_side(&r, false, false)?;
        let total = r.new.array_bytes();
        let first = if shrink {
            window_below(total, window * SECTOR)..total
        } else {
            0..(window * SECTOR).min(total)
        };
        if needs_backup(&r, &first) {
            save(file, &mut bsb, 0, &old, first, window)?;
        } else {
            // A shrink's last window needs none (its new rows lie above
            // its old ones): the record names no section, which is what
            // md's Grow_restart reads as nothing to put back.
            file.write_record(&mut bsb)?;
        }
        let delta = plan.new_raid_devices as i32 - plan.old_raid_devices as i32;
        self.commit(|sb| {
            sb.raid_disks = plan.new_raid_devices as u32;
            sb.new_level = plan.level;
            sb.new_layout = plan.new_layout;
            sb.new_chunk = plan.new_chunk_sectors;
            // A shrink is md's backward walk by `delta_disks < 0` alone,
            // starting at the new geometry's end; the leaving members keep
            // their roles (the old geometry reads them) until it ends.
            sb.delta_disks = delta;
            sb.reshape_position = if shrink { total / SECTOR } else { 0 };
            sb.new_offset = 0;
            sb.feature_map |= feature::RESHAPE_ACTIVE;
            sb.feature_map &= !(feature::NEW_OFFSET | feature::RESHAPE_BACKWARDS);
        })?;
        self.geometry = crate::assemble::geometry_of(&self.grow_template()?)?;
        Ok(())
    }

    fn fresh_record(&self, window: u64) -> Result<BackupSuper> {
        Ok(BackupSuper {
            two_sections: false,
            set_uuid: self.backup_uuid()?,
            mtime: now_secs(),
            devstart: LEAD_SECTORS,
            arraystart: 0,
            length: 0,
            devstart2: window,
            arraystart2: 0,
            length2: 0,
        })
    }

    fn check_file_size(&self, file: &BackupFile, window: u64) -> Result<()> {
        let need = file_sectors(window) * SECTOR;
        let have = file.volume.size();
        if have < need {
            return Err(refused(format!(
                "--backup-file {}: {have} bytes, too small for this reshape's two {} KiB sections and its record ({need} bytes): give the file the reshape was started with; nothing was changed",
                file.name,
                window / 2
            )));
        }
        Ok(())
    }

    /// Carry the 0.90 same-members restripe or shrink the superblocks
    /// record to its end with `file`: what it holds put back first
    /// (`Grow_restart`), then window by window (from the end, for a
    /// shrink). A stop asked for (`opts.stop`) ends after a window's commit
    /// with an `Interrupted` error.
    pub fn reshape_run_with_backup(
        &mut self,
        file: &BackupFile,
        opts: RunOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ReshapeReport> {
        let r = match self.reshape() {
            None => {
                return Err(Error::invalid(
                    "the array is not in the middle of a reshape: nothing to continue",
                ))
            }
            Some(r) => r?,
        };
        if !self.needs_backup_file(&r)? {
            return Err(refused(format!(
                "--backup-file {}: this reshape does not use one (raidlab walks a backup file only for a metadata 0.90 RAID 4/5/6 with a new chunk or layout over the same members, or fewer members): run `raidlab grow --continue` without it; nothing was changed",
                file.name
            )));
        }
        if !self.missing().is_empty() {
            return Err(refused(format!(
                "role(s) {:?} missing: carrying on a degraded reshape is not built; nothing was changed",
                self.missing()
            )));
        }
        let window = window_sectors(&r, self.grow_template()?.size);
        let (wbytes, total, unit) = (
            window * SECTOR,
            r.new.array_bytes(),
            mdadm_backup_sectors(
                r.old.chunk_bytes,
                r.new.chunk_bytes,
                r.old.data_disks() as u64,
                r.new.data_disks() as u64,
            ) * SECTOR,
        );
        self.check_file_size(file, window)?;
        let recorded = r.position;
        let back = r.backwards;
        let mut bsb = self.restore_from(file, &r, window, unit)?;
        let mut p = self
            .reshape()
            .and_then(|r| r.ok())
            .map_or(if back { 0 } else { total }, |r| r.position);
        let old = self.reshape_side(&r, false, false)?;
        let new = self.reshape_side(&r, true, true)?;
        let mut buf = Vec::new();
        let mut checkpoints: u64 = 0;
        // Pacing as the other long runs: member bytes per second.
        let clock = clock_of(&opts);
        let (started, from) = (clock.now(), p);
        let data_disks = r.new.data_disks() as u64;
        // The window at `p` in the walk's direction, and the walk's end.
        let next = |p: u64| {
            if back {
                window_below(p, wbytes)..p
            } else {
                p..(p + wbytes).min(total)
            }
        };
        let done = |p: u64| if back { p == 0 } else { p >= total };
        while !done(p) {
            let w = next(p);
            let cur = match (0..2).find(|&k| section(&bsb, k) == w) {
                Some(k) => Some(k),
                // A shrink's window whose new stripes miss its old ones
                // (and so every byte still to be read): a cut leaves its
                // old bytes whole, to be read again; no section names it.
                None if !needs_backup(&r, &w) => None,
                None => {
                    // The section covering the position stays (the window
                    // just walked, above it going backwards); the other
                    // one takes this window.
                    let stays = |k: usize| {
                        let s = section(&bsb, k);
                        !s.is_empty() && if back { s.start == p } else { s.end == p }
                    };
                    let k = if stays(0) { 1 } else { 0 };
                    if !section(&bsb, k).is_empty() {
                        set_section(&mut bsb, k, 0..0);
                        file.write_record(&mut bsb)?;
                    }
                    save(file, &mut bsb, k, &old, w.clone(), window)?;
                    Some(k)
                }
            };
            buf.clear();
            buf.resize((w.end - w.start) as usize, 0);
            old.read_at(&mut buf, w.start)?;
            new.write_at(&buf, w.start)?;
            new.flush()?;
            let others: Vec<usize> = (0..2)
                .filter(|&k| Some(k) != cur && !section(&bsb, k).is_empty())
                .collect();
            for &k in &others {
                set_section(&mut bsb, k, 0..0);
            }
            if !others.is_empty() {
                file.write_record(&mut bsb)?;
            }
            let to = if back { w.start } else { w.end };
            if !done(to) && !back {
                // Over the same members every window's new stripes are its
                // old ones: the next window is saved before the position
                // passes this one, so that a section always covers the
                // recorded position (mdadm's rule when no data member is
                // gained). A shrink saves the window below at the next
                // round, after the commit: a section below the recorded
                // position is one md's Grow_restart moves the position
                // down to, and it must not name a window not yet walked
                // while the walk is elsewhere.
                let other = (0..2).find(|&k| Some(k) != cur).unwrap_or(0);
                save(file, &mut bsb, other, &old, next(to), window)?;
            }
            self.commit(|sb| sb.reshape_position = to / SECTOR)?;
            p = to;
            let walked = from.abs_diff(p);
            progress(Progress {
                done: if back { total - p } else { p },
                total,
            });
            if let Some(rate) = opts.max_rate.filter(|&r| r > 0) {
                let due =
                    std::time::Duration::from_secs_f64((walked / data_disks) as f64 / rate as f64);
                let spent = clock.now().saturating_sub(started);
                if due > spent {
                    clock.sleep(due - spent);
                }
            }
            if !done(p) && stopped(&opts) {
                return Err(Error::new(
                    ErrorKind::Interrupted,
                    Op::Write,
                    format!(
                        "reshape stopped at array byte {p} of {total}{}; run `raidlab grow --continue --backup-file {}` with the same members to finish it",
                        if back { " (walking down from the end)" } else { "" },
                        file.name
                    ),
                ));
            }
            checkpoints += 1;
        }
        new.flush()?;
        // A shrink's leaving members become spares in the finishing
        // commit, as md leaves them.
        let spares = if back {
            self.shrink_release(r.new.raid_disks)
        } else {
            Vec::new()
        };
        self.reshape_finish(false)?;
        // Done: nothing in the file is needed any more; mdadm removes it.
        set_section(&mut bsb, 0, 0..0);
        set_section(&mut bsb, 1, 0..0);
        file.write_record(&mut bsb)?;
        if let Some(path) = &file.path {
            std::fs::remove_file(path).map_err(|e| Error::io(Op::Write, &file.name, e))?;
        }
        Ok(ReshapeReport {
            old_raid_devices: r.old.raid_disks,
            new_raid_devices: r.new.raid_disks,
            old_array_bytes: r.old.array_bytes(),
            new_array_bytes: total,
            data_offset_moved_bytes: 0,
            backwards: back,
            resumed_from: recorded,
            resumed: if back { recorded < total } else { recorded > 0 },
            checkpoints: checkpoints.saturating_sub(1),
            spares,
            removed: Vec::new(),
        })
    }

    /// `Grow_restart` for a backup file: the record checked (uuid, time,
    /// covering the position), its sections written in the new geometry,
    /// the position past them committed. Refused with nothing written
    /// when the file holds no backup mdadm would restore.
    fn restore_from(
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
        let new = self.reshape_side(r, true, true)?;
        for (k, s) in &parts {
            let mut data = vec![0u8; (s.end - s.start) as usize];
            let at = (LEAD_SECTORS + *k as u64 * window) * SECTOR;
            file.volume
                .read_at(&mut data, at)
                .map_err(|e| file.ctx(e))?;
            new.write_at(&data, s.start)?;
        }
        new.flush()?;
        // The record's time brought level with the commit that follows:
        // a crash right after it must not leave a record mdadm's time
        // window refuses against the new update time.
        let mut b_rec = b;
        file.write_record(&mut b_rec)?;
        if r.backwards && lo > 0 {
            // Going backwards the position drops below every section put
            // back, which then no longer counts for it (mdadm's rule). So
            // the record is brought to the walk's own state first: the
            // position at the upper section's start, that section let go,
            // the window below saved in its place; each step leaves a
            // record naming a section below the position, that fits it.
            if let [(_, a), (_, b)] = parts.as_slice() {
                let (upper, m) = if a.start > b.start {
                    (parts[0].0, a.start)
                } else {
                    (parts[1].0, b.start)
                };
                if position > m {
                    self.commit(|sb| sb.reshape_position = m / SECTOR)?;
                }
                set_section(&mut b_rec, upper, 0..0);
                file.write_record(&mut b_rec)?;
            }
            let free = if section(&b_rec, 0).is_empty() { 0 } else { 1 };
            let old = self.reshape_side(r, false, false)?;
            let below = window_below(lo, window * SECTOR)..lo;
            save(file, &mut b_rec, free, &old, below, window)?;
        }
        let to = if r.backwards { lo } else { hi };
        self.commit(|sb| sb.reshape_position = to / SECTOR)?;
        Ok(b_rec)
    }
}

/// Save array bytes `range` (old geometry) in section `part`: the data,
/// flushed, then the record naming it, flushed.
fn save(
    file: &BackupFile,
    bsb: &mut BackupSuper,
    part: usize,
    old: &crate::array::Array,
    range: Range<u64>,
    window: u64,
) -> Result<()> {
    let mut data = vec![0u8; (range.end - range.start) as usize];
    old.read_at(&mut data, range.start)?;
    let at = (LEAD_SECTORS + part as u64 * window) * SECTOR;
    file.volume
        .write_at(&data, at)
        .and_then(|()| file.volume.flush())
        .map_err(|e| file.ctx(e))?;
    set_section(bsb, part, range);
    file.write_record(bsb)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The window mdadm would take for a restripe of `plan`'s shape (`old`
/// data members to `new`) over members of `component_sectors`.
pub(super) fn plan_window(
    old_chunk: u64,
    new_chunk: u64,
    old: u64,
    new: u64,
    component_sectors: u64,
) -> u64 {
    let mut w = mdadm_backup_sectors(old_chunk, new_chunk, old, new);
    while w * 32 < component_sectors && w < MAX_WINDOW_SECTORS {
        w *= 2;
    }
    w
}
