//! A restripe of a metadata 0.90 RAID 4/5/6 through mdadm's
//! `--backup-file`, offline or while the array serves (the same walk,
//! `walk`; served, each window closed to clients while it is saved and
//! moved, as md suspends it for mdadm): a new chunk or layout over the same members
//! (`restripe`, forwards) or fewer members (a shrink, checked by
//! `super::shrink`, walked backwards by `shrink`). 0.90 has no data offset
//! to move, so the new geometry is written over the old one at the same
//! member offsets, one window at a time; a crash in the middle of a window
//! can leave it neither old nor new, so a window whose old bytes a cut
//! could lose is in the file first, as mdadm's `child_monitor` keeps it.
//! The two protocols differ in which windows need that and when a window
//! is saved (each module's doc says); this module holds what they share.
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
//! - which protocol walks a recorded reshape (the same members forwards,
//!   fewer backwards), and that every window's new stripes are written
//!   only after the old bytes a cut could lose are durable in the file
//!   and the record names them (data flushed first, then the record);
//! - a resume: the sections the record names put back in the new geometry
//!   and the position past them (below them, going backwards) committed,
//!   as `Grow_restart` does, before the walk goes on (`put_back` is that
//!   step, shared with the in-place grow's resume from a new member);
//! - that a stopped reshape of this kind is not read without its file,
//!   and is read after a put-back from it (`read`: md's rule, `export
//!   --backup-file`);
//! - at a shrink's end, the members past the new count left spares, as md
//!   leaves them (`Assembly::shrink_release`);
//! - which backup files are refused (on a member, existing when one is to
//!   be made, missing, too small, torn, of another array, older than the
//!   superblocks by mdadm's window: `restore` checks a record), each
//!   before anything is written.
//!
//! The run is paced by `--max-rate` (member bytes a second) and stops
//! between windows when asked, as the other long runs.
//!
//! It must never write a window whose old bytes a cut could lose before
//! those bytes and the record naming them are durable in the file, never
//! forget the section covering the recorded position, and never put a
//! file's sections back twice over a walk's writes (a start's put-back is
//! taken by the walk that follows it only when no commit came between).

use super::online::ReshapeGate;
use super::{refused, ReshapeReport, SECTOR};
use crate::assemble::{now_secs, Assembly};
use crate::recovery::{Progress, RunOptions};
use raidlab_core::{Error, Op, Result, Volume};
use raidlab_devices::file::{FileVolume, OpenMode};
use raidlab_layout::reshape::Reshape;
use raidlab_layout::Level;
use raidlab_md::grow_backup::{mdadm_backup_sectors, BackupSuper, LEAD_SECTORS, RECORD_BYTES};
use raidlab_md::superblock::{feature, MetadataVersion};
use std::ops::Range;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod grow;
mod put_back;
mod read;
mod restore;
mod restripe;
mod shrink;
mod walk;

pub(in crate::grow) use put_back::Saved;
use shrink::needs_backup;
use walk::Hooks;
pub(in crate::grow) use walk::Walk;

/// mdadm's largest window for a restripe over the same data members.
const MAX_WINDOW_SECTORS: u64 = 16 * 1024 * 2;

/// An open backup file (or, in tests, any volume standing for one).
#[derive(Clone)]
pub struct BackupFile {
    name: String,
    volume: Arc<dyn Volume>,
    /// The file on disk, removed once the reshape has ended (as mdadm
    /// unlinks it).
    path: Option<PathBuf>,
    /// The superblocks' event count right after a start put this file's
    /// sections back (`Assembly::reshape_put_back`): the walk that follows
    /// with no commit between finds the members as the put-back left them
    /// and the record as the walk's own resume would leave it, so it puts
    /// nothing back again. Taken by that walk, whatever it finds.
    put_back_at: Arc<std::sync::Mutex<Option<u64>>>,
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
            put_back_at: Default::default(),
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
            put_back_at: Default::default(),
        })
    }

    /// A volume standing for the file (tests: one a power cut reaches).
    pub fn on_volume(name: &str, volume: Arc<dyn Volume>) -> BackupFile {
        BackupFile {
            name: name.into(),
            volume,
            path: None,
            put_back_at: Default::default(),
        }
    }

    fn put_back_slot(&self) -> std::sync::MutexGuard<'_, Option<u64>> {
        self.put_back_at.lock().unwrap_or_else(|p| p.into_inner())
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
    /// backwards, when it needs them: `needs_backup`) saved and named in
    /// the record before any superblock records the reshape.
    pub fn reshape_start_with_backup(
        &mut self,
        plan: super::ReshapePlan,
        file: &BackupFile,
    ) -> Result<()> {
        if plan.new_raid_devices > plan.old_raid_devices && !plan.backwards {
            // A grow by members: only its critical section goes in the file
            // (`grow`), the rest is the in-place walk.
            return self.reshape_start_backed(plan, Some(file));
        }
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
            shrink::first_window(total, window * SECTOR)
        } else {
            restripe::first_window(total, window * SECTOR)
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

    /// The window of the recorded restripe `r` through `file` (sectors)
    /// and its unit (mdadm's least backup, bytes), the file checked large
    /// enough for two windows.
    fn walk_window(&self, file: &BackupFile, r: &Reshape) -> Result<(u64, u64)> {
        let window = window_sectors(r, self.grow_template()?.size);
        let unit = mdadm_backup_sectors(
            r.old.chunk_bytes,
            r.new.chunk_bytes,
            r.old.data_disks() as u64,
            r.new.data_disks() as u64,
        ) * SECTOR;
        self.check_file_size(file, window)?;
        Ok((window, unit))
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
        if let Some(Ok(r)) = self.reshape() {
            if self.is_in_place(&r)? {
                return self.in_place_run_with_backup(file, opts, progress);
            }
        }
        let mut walk = self.backup_walk(file, false)?;
        walk.run(&opts, &|| false, progress, &mut |sectors| {
            self.commit(|sb| sb.reshape_position = sectors)
        })?;
        self.backup_walk_end(walk)
    }

    /// The recorded same-members restripe or shrink through `file`, checked,
    /// what the file holds put back (`Grow_restart`), and its two sides
    /// running: ready to walk, offline or (`served`: the old side takes
    /// writes too, and a gate closes each window to the clients) while
    /// the array serves. The one preparation of both runs.
    pub(in crate::grow) fn backup_walk(&mut self, file: &BackupFile, served: bool) -> Result<Walk> {
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
                "--backup-file {}: this reshape does not use one (raidlab runs a backup file only for a metadata 0.90 RAID 4/5/6's restripe: more members, a new chunk or layout over the same members, or fewer members): run `raidlab grow --continue` without it; nothing was changed",
                file.name
            )));
        }
        if !self.missing().is_empty() {
            return Err(refused(format!(
                "role(s) {:?} missing: carrying on a degraded reshape is not built; nothing was changed",
                self.missing()
            )));
        }
        let (window, unit) = self.walk_window(file, &r)?;
        let (wbytes, total) = (window * SECTOR, r.new.array_bytes());
        let back = r.backwards;
        let recorded = r.position;
        // After a start's put-back from this file with no commit since
        // (`serve --backup-file`), the members and the record are as this
        // restore would leave them: a second put-back would only write the
        // same bytes again (or, were the file changed meanwhile, others).
        let put_back = file.put_back_slot().take();
        let events = self.grow_template()?.events;
        let bsb = match file.record()? {
            Some(b) if put_back == Some(events) => b,
            _ => self.restore_from(file, &r, window, unit)?,
        };
        let p = self
            .reshape()
            .and_then(|r| r.ok())
            .map_or(if back { 0 } else { total }, |r| r.position);
        let now = Reshape { position: p, ..r };
        // Served, clients' writes mark the bitmap as the other served
        // reshapes' do (one copy of the bits for both sides).
        let intent = if served {
            self.reshape_intent(&now)
        } else {
            None
        };
        let old = self.reshape_side_keeping(&now, false, served, intent.clone())?;
        let new = self.reshape_side_keeping(&now, true, true, intent)?;
        let gate = served.then(|| {
            let g = ReshapeGate::new(now);
            // The first window is closed before any client reaches the
            // sides: a forward walk's is in the file already.
            if let Some(w) = first_window_at(p, wbytes, total, back) {
                g.begin_step(w);
            }
            g
        });
        Ok(Walk {
            file: file.clone(),
            bsb,
            r: now,
            recorded,
            old: Arc::new(old),
            new: Arc::new(new),
            wbytes,
            window,
            total,
            p,
            buf: Vec::new(),
            gate,
            checkpoints: 0,
        })
    }

    /// The end of a walk through the file run to its end: the superblocks
    /// md writes then (a shrink's leaving members as spares), the file let
    /// go and removed; a served walk's last window opened only then (a
    /// resume before this commit would put its saved copy back).
    pub(in crate::grow) fn backup_walk_end(&mut self, walk: Walk) -> Result<ReshapeReport> {
        let Walk {
            mut bsb,
            new,
            file,
            r,
            recorded,
            gate,
            checkpoints,
            total,
            ..
        } = walk;
        let back = r.backwards;
        let ended = (|| {
            new.flush()?;
            // A shrink's leaving members become spares in the finishing
            // commit, as md leaves them.
            let spares = if back {
                self.shrink_release(r.new.raid_disks)
            } else {
                Vec::new()
            };
            self.reshape_finish(false)?;
            Ok(spares)
        })();
        let spares = match ended {
            Ok(s) => s,
            Err(e) => {
                if let Some(g) = &gate {
                    g.ended_closed(format!("its end failed: {e}"));
                }
                return Err(e);
            }
        };
        if let Some(g) = &gate {
            g.advance(if back { 0 } else { total }, None);
            g.ended("done".into());
        }
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
}

/// The window a walk at array byte `p` takes next, if any.
fn first_window_at(p: u64, wbytes: u64, total: u64, back: bool) -> Option<Range<u64>> {
    if back {
        (p > 0).then(|| shrink::window_below(p, wbytes)..p)
    } else {
        (p < total).then(|| p..(p + wbytes).min(total))
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
