//! The reshape's walk: the long run that moves the data of a reshape the
//! superblocks record (started by `super::reshape` or `super::shrink`, or
//! stopped by md or by raidlab) from the old geometry to the new one, and
//! the superblocks md writes at its end.
//!
//! What it decides: the order of a step's I/O and when the position is
//! checkpointed, in either direction, and which recorded reshapes raidlab
//! carries on at all.
//!
//! A grow (or a chunk, layout or level restripe, a RAID 10's near/offset
//! switch and new chunk among them, or a parity array's more members and
//! new chunk or layout at once) walks forwards over the
//! new geometry's stripes, in units of the larger chunk (the positions md
//! accepts on a resume; a RAID 10's in chunks, and md's positions inside
//! one are taken back too). A step reads the old geometry's bytes of the
//! array (zeros past the old end, as md fills a parity array's new space;
//! md leaves a RAID 10's as it was and resyncs it after, raidlab zeros it
//! so the copies agree at once), writes them as whole stripes of the new
//! geometry through a running [`Array`] (the planner and parity engine
//! compute P and Q: a full-stripe write reads nothing; a RAID 10 writes
//! every copy), and flushes. The new geometry starts `gap` sectors lower on
//! each member than the old one, so its writes trail the old geometry's
//! reads (a 0.90 grow to more data members: no gap, walked only past its
//! critical section, which `super::in_place` puts back from its backup
//! first). The invariant, md's rule in its reshape loop (the arithmetic is
//! `Reshape::forward_write_limit` in the layout crate): no write may land
//! at or past where the old geometry's row holding the last checkpointed
//! position begins (a stripe; a RAID 10's chunk copies, far rows high in
//! the offset layout), because a resume re-reads from that position. When
//! the next step would, the position reached so far is made durable first
//! (members flushed, then `reshape_position` in every superblock, events
//! raised). A crash therefore at worst redoes the steps after the last
//! checkpoint, reading old-geometry data that nothing has touched.
//!
//! A shrink (fewer members of a RAID 4/5/6, with a new chunk or layout
//! too, or of a RAID 10 in the near or offset layout: md's backward
//! reshape) is the same walk in mirror: from the new geometry's end towards the array's
//! start, the new geometry `gap` sectors higher on each member than the old
//! one, the long run counting the distance from the end, and the limit
//! `Reshape::backward_write_limit`: no write below the top of the old rows
//! a resume from the last checkpoint still reads (a RAID 10's: up to the
//! row of the last copy of the byte below it).
//!
//! A RAID 4/5/6 with an internal bitmap keeps it through the walk as md
//! does: the walk's own writes mark nothing (a resume redoes them from the
//! position); served, the two sides keep one copy of the bits between them,
//! on every member of either geometry, so a client's write marks its
//! stripe's member sectors in the geometry that takes it before it goes
//! out, and every checkpoint and the end's commit write the bits as they
//! are then. The bitmap's size, chunk and `sync_size` do not change (they
//! count member sectors, which a restripe keeps), only its event count. A
//! RAID 10's counts array sectors: a shrink's keeps its size through the
//! walk and is resized down to the new array in the end's commit.
//!
//! Done, every superblock gets what md writes at the end of a reshape: the
//! new member count and geometry, `data_offset + new_offset` as the data
//! offset, the data size changed by the move the other way,
//! RESHAPE_ACTIVE, NEW_OFFSET and RESHAPE_BACKWARDS cleared; a RAID 0's
//! restripe taken back as a RAID 0 (onto fewer members in a commit of its
//! own after that one, as mdadm takes it back after md's reshape ends:
//! `super::raid0`); a shrink's members past the new count as spares
//! (`super::shrink`).
//!
//! It must never write a byte of the new geometry over old-geometry data a
//! resume would still read, never compute parity or place copies itself,
//! and never carry on a reshape it cannot finish exactly (a RAID 10's far
//! layout, a level change other than 4 and 5, a move of the data offset too small for the
//! walk): those are refused, for mdadm to finish.

use super::in_place::{in_place_walk_supported, recorded_in_place};
use super::online::ReshapeGate;
use super::{refused, ReshapeReport, SECTOR};
use crate::array::{Array, Intent};
use crate::assemble::{geometry_of, Assembly};
use crate::long_run::{Driven, Stepped, Steps};
use crate::recovery::{clock_of, schedule, stopped, Progress, RunOptions};
use raidlab_core::{Error, ErrorKind, Op, Result, Volume};
use raidlab_layout::reshape::Reshape;
use raidlab_layout::{Layout, Level};
use raidlab_md::superblock::feature;
use std::ops::Range;
use std::sync::Arc;

/// Data each member gets per step: large steps, few flushes.
const STEP_MEMBER_BYTES: u64 = 4 << 20;

impl Assembly {
    /// Carry the reshape the superblocks record to its end (from its
    /// checkpointed position: a fresh one, or one stopped by a crash or a
    /// stop request). Refused for a reshape of a kind raidlab does not do.
    pub fn reshape_run(
        &mut self,
        opts: RunOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ReshapeReport> {
        let mut walk = self.reshape_walk(false)?;
        walk.run(&opts, &|| false, progress, &mut |sectors| {
            self.commit(|sb| sb.reshape_position = sectors)
        })?;
        self.reshape_end(walk)
    }

    /// The reshape the superblocks record, checked and ready to walk: its
    /// two sides running over the members. `served` (a reshape while
    /// clients use the array, `super::online`): the old side takes writes
    /// too and every step goes through a gate, [`ReshapeWalk::gate`].
    pub(crate) fn reshape_walk(&mut self, served: bool) -> Result<ReshapeWalk> {
        let r = match self.reshape() {
            None => {
                return Err(Error::invalid(
                    "the array is not in the middle of a reshape: nothing to continue",
                ))
            }
            Some(r) => r?,
        };
        let template = self.grow_template()?;
        let gap = i64::from(template.new_offset).unsigned_abs();
        // Forwards with the data moved down, at one level: more members
        // (with a new chunk or layout too, as md makes both at once, the
        // data moved by at least the walk's least move), or a new chunk or
        // layout over the same members with the data moved by at least the
        // larger chunk (md's condition for running such a reshape without a
        // backup).
        let same_members = r.new.raid_disks == r.old.raid_disks;
        let same_shape = r.old.layout == r.new.layout && r.old.chunk_bytes == r.new.chunk_bytes;
        let reshapes = r.new.raid_disks > r.old.raid_disks
            && (same_shape || gap * SECTOR >= r.forward_min_gap())
            || same_members
                && !same_shape
                && gap * SECTOR >= r.old.chunk_bytes.max(r.new.chunk_bytes);
        let walks = match r.new.level {
            Level::Raid4 | Level::Raid5 | Level::Raid6 => reshapes && r.old.level == r.new.level,
            Level::Raid10 => raid10_walk_supported(&r, gap * SECTOR),
            _ => false,
        };
        let backwards = r.backwards;
        let moved = template.feature_map & feature::NEW_OFFSET != 0;
        // A 0.90 grow has no new offset: walked in place past its critical
        // section (`super::in_place`).
        let in_place = recorded_in_place(&template, &r);
        if self.needs_backup_file(&r)? {
            // md restripes such a 0.90 array only through mdadm's backup
            // file (`super::backup_file`).
            return Err(refused(
                "this metadata 0.90 reshape (a new chunk or layout over the same members, or fewer members) runs in place through mdadm's backup file: run `raidlab grow --continue --backup-file FILE` with the file it was started with (mdadm: \"Failed to restore critical section for reshape, sorry. Possibly you needed to specify the --backup-file\"); nothing was changed".into(),
            ));
        }
        let supported = if backwards {
            moved && template.new_offset > 0 && Self::shrink_walk_supported(&r, gap * SECTOR)
        } else if in_place {
            in_place_walk_supported(&r)
        } else {
            walks && moved && template.new_offset < 0
        };
        if !supported {
            return Err(refused(
                "this reshape (a level change, a RAID 10 in the far layout or to another number of copies, a same-members reshape going backwards, or one without a large enough move of the data offset) is not one raidlab carries on: finish it with `mdadm --grow --continue` on Linux; nothing was changed".into(),
            ));
        }
        if let Some(m) = self
            .members
            .iter()
            .find(|m| m.is_live() && m.sb.new_offset != template.new_offset)
        {
            return Err(refused(format!(
                "{}: its new_offset ({}) differs from the others' ({}): raidlab moves every member's data by the same amount; finish it with mdadm; nothing was changed",
                m.device.path, m.sb.new_offset, template.new_offset
            )));
        }
        let raid0 = self.raid0_restripe(&r);
        // A shrink's old geometry also reads the roles past the new count.
        let mut missing = self.missing();
        for role in r.new.raid_disks..r.old.raid_disks {
            if self.reshape_area(role, false, 0)?.is_none() {
                missing.push(role);
            }
        }
        if !missing.is_empty() && !raid0 {
            return Err(refused(format!(
                "role(s) {missing:?} missing: carrying on a degraded reshape is not built; nothing was changed"
            )));
        }
        // Where the superblocks said the run starts (the report's): an
        // in-place walk's critical section is put back before it.
        let recorded = r.position;
        let r = if in_place {
            self.in_place_resume(r)?
        } else {
            r
        };
        let gap_bytes = gap * SECTOR;
        let unit = r.forward_unit();
        // md's RAID 10 walk records positions inside a chunk too, and takes
        // any back; its parity walk only whole stripes.
        if r.new.level != Level::Raid10 && r.position % unit != 0 {
            return Err(refused(format!(
                "reshape_position {} is not on a stripe boundary of the reshape ({unit} bytes): not a position md or raidlab checkpoints; nothing was changed",
                r.position
            )));
        }
        // Every superblock says this reshape and this position before any
        // byte moves. A crash inside a checkpoint's commit leaves members
        // one event behind, at the position before it, and assembly takes
        // them at the freshest in memory only: were the walk to move bytes
        // past that older position and the fresh members then die, the
        // lagging ones would assemble at the older position and read the
        // moved stripes in the old geometry (the served torture's loss,
        // issue 36). One superblock write per walk started. A RAID 10 grow
        // md stopped carries its bitmap at the old array's size (md resizes
        // it in memory only): this commit writes it covering the new array,
        // so that writes to the new space mark bits.
        self.raid10_bitmap_for_recorded_grow()?;
        self.commit(|_| {})?;
        // Served, clients' writes mark the bitmap as md's do during its
        // reshape: one copy of the bits for both sides, on every member of
        // either geometry. Offline only the walk writes, and md's reshape
        // writes mark nothing (the position makes them safe).
        let intent = if served {
            self.reshape_intent(&r)
        } else {
            None
        };
        let old_array = self.reshape_side_keeping(&r, false, served, intent.clone())?;
        let gate = served.then(|| ReshapeGate::new(r));
        let new_array = self.reshape_side_keeping(&r, true, true, intent)?;
        let old_end = r.old.array_bytes();
        let total = r.new.array_bytes();
        let step = (STEP_MEMBER_BYTES * r.new.data_disks() as u64 / unit).max(1) * unit;
        // A RAID 0's count, without the RAID 4's missing parity role.
        let parity_role = usize::from(raid0);
        let walked = |at: u64| if backwards { total - at } else { at };
        let report = ReshapeReport {
            old_raid_devices: r.old.raid_disks - parity_role,
            new_raid_devices: r.new.raid_disks - parity_role,
            old_array_bytes: old_end,
            new_array_bytes: total,
            data_offset_moved_bytes: gap_bytes,
            backwards,
            resumed_from: recorded,
            resumed: walked(recorded) > 0,
            checkpoints: 0,
            spares: Vec::new(),
            removed: Vec::new(),
        };
        Ok(ReshapeWalk {
            checkpointed: r.position,
            r,
            old: Arc::new(old_array),
            new: Arc::new(new_array),
            gap: gap_bytes,
            unit,
            step,
            raid0,
            gate,
            report,
        })
    }

    /// The end of a walk run to its end: the superblocks md writes then (a
    /// shrink's members past the new count as spares, a RAID 0's taken back).
    pub(crate) fn reshape_end(&mut self, walk: ReshapeWalk) -> Result<ReshapeReport> {
        let ReshapeWalk {
            r,
            new,
            raid0,
            mut report,
            ..
        } = walk;
        new.flush()?;
        let backwards = r.backwards;
        // A RAID 10 shrink's bitmap goes down to the new array in the
        // commit that records it (`super::restripe_bitmap`).
        let shrunk = self.raid10_shrunk_bitmap(&r)?;
        if backwards {
            report.spares = self.shrink_release(r.new.raid_disks);
        }
        let kept = shrunk.map(|b| self.bitmap.replace(b));
        // A RAID 0's shrink ends as md's RAID 4 reshape ends, then is taken
        // back as a RAID 0 (`super::raid0`); its grow in the same commit.
        if let Err(e) = self.reshape_finish(raid0 && !backwards) {
            if let Some(kept) = kept {
                self.bitmap = kept;
            }
            return Err(e);
        }
        if raid0 && backwards {
            report.removed = self.raid0_shrink_finish(std::mem::take(&mut report.spares))?;
        }
        Ok(report)
    }

    /// The superblocks of a finished reshape, as md writes them; a RAID 0's
    /// (`raid0`: restriped as a RAID 4 without its parity member) taken
    /// back as a RAID 0 in the same commit, as md's `raid0_takeover_raid45`
    /// writes it: one role fewer, each member's data size the component
    /// size.
    pub(super) fn reshape_finish(&mut self, raid0: bool) -> Result<()> {
        if raid0 {
            self.slots.pop();
        }
        self.commit(|sb| {
            let moved = i64::from(sb.new_offset);
            sb.data_offset = (sb.data_offset as i64 + moved) as u64;
            sb.data_size = (sb.data_size as i64 - moved) as u64;
            sb.new_offset = 0;
            sb.delta_disks = 0;
            sb.reshape_position = 0;
            sb.level = sb.new_level;
            sb.layout = sb.new_layout;
            sb.chunksize = sb.new_chunk;
            sb.feature_map &=
                !(feature::RESHAPE_ACTIVE | feature::NEW_OFFSET | feature::RESHAPE_BACKWARDS);
            if raid0 {
                sb.level = 0;
                sb.new_level = 0;
                sb.layout = 0;
                sb.new_layout = 0;
                sb.raid_disks -= 1;
                sb.data_size = sb.size;
                // md's takeover to RAID 0 sets the array in sync ("make sure
                // it will be not marked as dirty"): a RAID 0 has nothing to
                // resync, and a dirty mark the RAID 4 carried (a walk served,
                // or resumed after a cut) would stay on it for good.
                sb.resync_offset = u64::MAX;
            }
        })?;
        self.geometry = geometry_of(&self.grow_template()?)?;
        Ok(())
    }

    /// One side of the reshape as a running array over the members' data
    /// areas at that side's offset (`writable`: the old one takes writes only
    /// while clients use the array).
    pub(super) fn reshape_side(&self, r: &Reshape, new: bool, writable: bool) -> Result<Array> {
        self.reshape_side_keeping(r, new, writable, None)
    }

    /// [`Assembly::reshape_side`] keeping `intent`, the write-intent
    /// bitmap of a served reshape (shared by both sides).
    pub(super) fn reshape_side_keeping(
        &self,
        r: &Reshape,
        new: bool,
        writable: bool,
        intent: Option<Arc<Intent>>,
    ) -> Result<Array> {
        let g = if new { r.new } else { r.old };
        let vols = (0..g.raid_disks)
            .map(|role| self.reshape_area(role, new, g.member_bytes))
            .collect::<Result<Vec<Option<Arc<dyn Volume>>>>>()?;
        let what = if new { "new geometry" } else { "old geometry" };
        let a = Array::new(format!("reshape ({what})"), g, vols)?
            .with_executor(Arc::clone(self.executor()));
        let a = match intent {
            Some(i) => a.with_shared_intent(i),
            None => a,
        };
        self.first_copy_unless_consistent(&a);
        Ok(if writable { a } else { a.read_only() })
    }

    /// The bitmap a served reshape's sides keep: the assembly's (as the
    /// running array last wrote it, or as assembled), on the member of
    /// every role of either geometry (a grow's new members, a shrink's
    /// leaving ones). md's RAID 4/5/6 bitmap counts member sectors from
    /// the data offset, so a write marks the same bits whichever side
    /// takes it: its stripe's sectors in that side's geometry, as md marks
    /// a stripe of either generation. `None` without a bitmap.
    pub(super) fn reshape_intent(&self, r: &Reshape) -> Option<Arc<Intent>> {
        let bitmap = self.bitmap.clone()?;
        let devices = (0..r.old.raid_disks.max(r.new.raid_disks))
            .filter_map(|role| {
                let i = self.slots.get(role).copied().flatten().or_else(|| {
                    self.members.iter().position(|m| {
                        m.role == Some(role) && m.state == crate::assemble::MemberState::Active
                    })
                })?;
                let m = &self.members[i];
                Some((role, m.device.volume.clone(), m.sb.clone()))
            })
            .collect();
        Some(Arc::new(Intent::new(bitmap, devices)))
    }
}

/// A reshape checked and ready to walk (`Assembly::reshape_walk`): its two
/// sides running, where the last checkpoint is, what the run reports.
pub(crate) struct ReshapeWalk {
    pub(crate) r: Reshape,
    pub(crate) old: Arc<Array>,
    pub(crate) new: Arc<Array>,
    /// How far the data offset moves, in bytes.
    gap: u64,
    /// The walk's unit (`Reshape::forward_unit`) and step, in array bytes.
    unit: u64,
    step: u64,
    /// A RAID 0's restripe through md's RAID 4 without parity.
    raid0: bool,
    /// The window to clients, while the array serves.
    gate: Option<Arc<ReshapeGate>>,
    /// The array byte the superblocks record as the position.
    checkpointed: u64,
    pub(crate) report: ReshapeReport,
}

impl ReshapeWalk {
    /// The window to clients of a walk in service.
    pub(crate) fn gate(&self) -> Option<&Arc<ReshapeGate>> {
        self.gate.as_ref()
    }

    /// The array's bytes in the new geometry's order of walking: the long
    /// run counts upwards, so a backward walk runs over the distance from
    /// the new geometry's end.
    pub(crate) fn walked(&self, at: u64) -> u64 {
        if self.r.backwards {
            self.r.new.array_bytes() - at
        } else {
            at
        }
    }

    /// Walk from the last checkpoint to the end (the long run's driver:
    /// steps, checkpoints every `opts.checkpoint_bytes`, pacing, stop),
    /// `commit` recording a position (in sectors) in every superblock. A
    /// stop asked for (`opts.stop`, or `quit`) checkpoints where the walk is
    /// and returns an `Interrupted` error.
    pub(crate) fn run(
        &mut self,
        opts: &RunOptions,
        quit: &dyn Fn() -> bool,
        progress: &mut dyn FnMut(Progress),
        commit: &mut dyn FnMut(u64) -> Result<()>,
    ) -> Result<()> {
        let total = self.r.new.array_bytes();
        let mut run = schedule(opts, &[(self.walked(self.r.position), total)], self.step);
        let clock = clock_of(opts);
        let mut steps = WalkSteps {
            walk: self,
            commit,
            progress,
            buf: Vec::new(),
        };
        let driven = run.drive(&*clock, &|| stopped(opts) || quit(), &mut steps);
        let WalkSteps { walk, commit, .. } = steps;
        let at = match driven {
            Ok(Driven::Stopped(pos)) => walk.walked(pos),
            Ok(_) => {
                if let Some(g) = walk.gate.clone() {
                    // From here on requests write the new geometry
                    // everywhere without waiting: the superblocks must say
                    // every byte has moved first, or a crash before the
                    // end's commit would resume from the last checkpoint and
                    // copy old bytes over writes already answered (and
                    // flushed). Offline nothing writes in between.
                    if let Err(e) = walk.checkpoint(walk.walked(total), commit) {
                        g.ended(e.to_string());
                        return Err(e);
                    }
                    walk.report.checkpoints += 1;
                    hold_at_the_end(&*clock, quit);
                }
                return Ok(());
            }
            Err(e) => {
                // What moved is kept for the resume, if it can be made
                // durable; requests no longer wait for this walk.
                let _ = walk.checkpoint(walk.gate_position(), commit);
                if let Some(g) = &walk.gate {
                    g.ended(e.to_string());
                }
                return Err(e);
            }
        };
        walk.checkpoint(at, commit)?;
        let here = walk.walked(at);
        if let Some(g) = &walk.gate {
            g.ended("stopped".into());
        }
        Err(Error::new(
            ErrorKind::Interrupted,
            Op::Write,
            format!(
                "reshape stopped at array byte {here} of {total}; run `raidlab grow --continue` with the same members to finish it (the array reads meanwhile, read-only)"
            ),
        ))
    }

    /// Where the walk's copy has reached (the gate's position, or the last
    /// checkpoint offline, where a failed step leaves nothing to keep).
    fn gate_position(&self) -> u64 {
        self.gate
            .as_ref()
            .map_or(self.checkpointed, |g| g.position())
    }

    /// Make everything written up to array byte `at` durable, then record it
    /// as the reshape position in every superblock (events raised).
    fn checkpoint(&mut self, at: u64, commit: &mut dyn FnMut(u64) -> Result<()>) -> Result<()> {
        if at == self.checkpointed {
            return Ok(());
        }
        self.new.flush()?;
        commit(at / SECTOR)?;
        self.checkpointed = at;
        if let Some(g) = &self.gate {
            g.checkpointed(at);
        }
        Ok(())
    }
}

/// Test-only: with `RAIDLAB_TEST_HOLD_RESHAPE_END=<seconds>` in its
/// environment, a served walk waits that long (or until a stop is asked)
/// between its end-position commit and the end's commit, so that
/// md_compat can kill the server in that window and hand Linux md the
/// members as a crash there leaves them (position at the array's end,
/// RESHAPE_ACTIVE still set). Nothing outside the process can stop it
/// there otherwise: the window is one superblock write long. Built only
/// with the `test-hooks` feature.
fn hold_at_the_end(clock: &dyn raidlab_core::Clock, quit: &dyn Fn() -> bool) {
    #[cfg(not(feature = "test-hooks"))]
    let secs: Option<u64> = None;
    #[cfg(feature = "test-hooks")]
    let secs = std::env::var("RAIDLAB_TEST_HOLD_RESHAPE_END")
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    let Some(secs) = secs else {
        return;
    };
    let until = clock.now() + std::time::Duration::from_secs(secs);
    while clock.now() < until && !quit() {
        clock.sleep(std::time::Duration::from_millis(50));
    }
}

/// The walk's steps as the long-run driver runs them.
struct WalkSteps<'a> {
    walk: &'a mut ReshapeWalk,
    commit: &'a mut dyn FnMut(u64) -> Result<()>,
    progress: &'a mut dyn FnMut(Progress),
    buf: Vec<u8>,
}

impl Steps for WalkSteps<'_> {
    fn step(&mut self, s: Range<u64>) -> Result<Stepped> {
        let w = &mut *self.walk;
        let (r, unit, gap) = (w.r, w.unit, w.gap);
        let backwards = r.backwards;
        let total = r.new.array_bytes();
        // The array bytes of this step, and the position reached before
        // it (its start going forwards, its end going backwards).
        let (a, b) = if backwards {
            (total - s.end, total - s.start)
        } else {
            (s.start, s.end)
        };
        let here = w.walked(s.start);
        let limit_at = |checkpoint| {
            if backwards {
                r.backward_write_limit(gap, checkpoint)
            } else {
                r.forward_write_limit(gap, checkpoint)
            }
        };
        let mut limit = limit_at(w.checkpointed);
        // Whether the next unit (a resumed RAID 10 may start inside
        // one) would land where the last checkpoint still reads.
        let blocked = if backwards {
            limit > (b - 1) / unit * unit
        } else {
            limit < ((a / unit + 1) * unit).min(b)
        };
        if blocked {
            // Move the checkpoint to here first.
            w.checkpoint(here, self.commit)?;
            w.report.checkpoints += 1;
            limit = limit_at(w.checkpointed);
        }
        let (a, b) = if backwards {
            (a.max(limit), b)
        } else {
            (a, b.min(limit))
        };
        if b <= a {
            return Err(Error::new(
                ErrorKind::Invalid,
                Op::Plan,
                format!("reshape: no room to write the stripe at array byte {here} (move {gap} bytes): the superblocks' reshape fields are not ones raidlab wrote"),
            ));
        }
        let reached = if backwards { a } else { b };
        if let Some(g) = &w.gate {
            g.begin_step(a..b);
        }
        let copied = copy(w, &mut self.buf, a, b);
        if let Some(g) = &w.gate {
            g.end_step(copied.is_ok(), reached);
        }
        copied?;
        if let Some(g) = w.gate.clone() {
            // A member the sides took out: the superblocks must say so
            // before more is moved (raidlab does not carry on a degraded
            // reshape); the clients go on, degraded.
            let failed: Vec<usize> = w
                .old
                .failed_members()
                .into_iter()
                .chain(w.new.failed_members())
                .collect();
            if !failed.is_empty() {
                return Err(Error::new(
                    ErrorKind::Io,
                    Op::Write,
                    format!("a member (role {failed:?}) failed during the reshape at array byte {reached}: raidlab does not carry on a degraded reshape; the array serves degraded, mid-reshape; replace the member after stopping the server, then `raidlab grow --continue`"),
                ));
            }
            if g.wants_checkpoint() {
                // A write waits for the bytes it reaches to be checkpointed.
                w.checkpoint(reached, self.commit)?;
                w.report.checkpoints += 1;
            }
        }
        Ok(Stepped {
            end: w.walked(reached),
            work: (b - a) / r.new.data_disks() as u64,
        })
    }

    fn checkpoint(&mut self, pos: u64) -> Result<()> {
        let at = self.walk.walked(pos);
        self.walk.checkpoint(at, self.commit)?;
        self.walk.report.checkpoints += 1;
        Ok(())
    }

    fn progress(&mut self, end: u64) {
        (self.progress)(Progress {
            done: end,
            total: self.walk.r.new.array_bytes(),
        });
    }
}

/// One step's copy: array bytes `a..b` read in the old geometry (zeros past
/// its end) and written as whole stripes of the new one.
fn copy(w: &ReshapeWalk, buf: &mut Vec<u8>, a: u64, b: u64) -> Result<()> {
    let old_end = w.r.old.array_bytes();
    buf.clear();
    buf.resize((b - a) as usize, 0);
    if a < old_end {
        let upto = b.min(old_end);
        w.old.read_at(&mut buf[..(upto - a) as usize], a)?;
    }
    w.new.write_unmarked(buf, a)
}

/// Whether raidlab carries on the RAID 10 reshape `r` with the data moved
/// down `gap` bytes: near or offset on both sides with the same copies,
/// and either more members (with a new chunk or layout too, as md makes
/// both at once) or the same members with a new chunk or layout (fewer
/// members with a new chunk or layout raidlab does not start, and leaves
/// such a one to mdadm); and a move the walk never stalls on.
fn raid10_walk_supported(r: &Reshape, gap: u64) -> bool {
    let copies = near_or_offset_copies(r.old.layout);
    let same_shape = r.old.layout == r.new.layout && r.old.chunk_bytes == r.new.chunk_bytes;
    // More members with a new chunk or layout too: md makes both in one
    // reshape, and the row rule holds for it (the layout crate's
    // `raid10_restripe_tests`).
    let shapes = if r.new.raid_disks == r.old.raid_disks {
        !same_shape
    } else {
        r.new.raid_disks > r.old.raid_disks
    };
    r.old.level == Level::Raid10
        && r.new.level == Level::Raid10
        && copies.is_some()
        && near_or_offset_copies(r.new.layout) == copies
        && shapes
        && gap >= r.forward_min_gap()
}

/// A RAID 10 layout's copies where raidlab walks its restripes (near or
/// offset: rows of whole copies; far keeps its copies a member apart and
/// md does not reshape it); `None` for every other layout.
pub(super) fn near_or_offset_copies(l: Layout) -> Option<usize> {
    match l {
        Layout::Raid10(l) => (l.far == 1 || l.offset).then_some(l.copies()),
        _ => None,
    }
}
