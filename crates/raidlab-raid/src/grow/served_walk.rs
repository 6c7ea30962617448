//! A reshape walked while clients use the array: which walk runs (a moved
//! data offset's, a metadata 0.90 grow's in place past its critical
//! section, or a 0.90 restripe's through mdadm's backup file), its two sides (running arrays of the old and new geometry) and
//! how its owner drives it beside the clients, through the gate of
//! `online` (where a request goes and when it waits).
//!
//! Decides only how the served run is put together from the walks offline
//! runs too; never where a request goes (`online`), the walk's order
//! (`walk`, `backup_file`) or placement. Its own file so that the gate,
//! which every walk uses, imports no walk.

use super::online::{ReshapeGate, ReshapingVolume};
use raidlab_core::Result;
use std::sync::Arc;

/// A reshape walked while clients use the array: the walk, its gate and
/// its two sides, for an owner that drives the walk and the clients. The
/// server runs it on a thread (`live::reshape`, recording each checkpoint
/// under its lock of the assembly), the simulator as one task beside a
/// task per client on one thread (`ServedWalk::run`, holding the assembly
/// for the walk's length). The walk, its steps, how a checkpoint is
/// recorded and the gate are the same; only who calls them differs. The
/// walk is the one of a moved data offset (`super::walk`, which also walks
/// a metadata 0.90 grow to more members in place once its critical section
/// is put back, `super::in_place`, `super::backup_file::grow`), or a 0.90
/// restripe's through mdadm's backup file (`super::backup_file`), each the
/// same one offline runs.
pub struct ServedWalk {
    walk: Walked,
    /// An in-place grow's backup file, let go and removed at the end, as
    /// the offline run does (`Assembly::in_place_file_done`).
    file_done: Option<super::BackupFile>,
}

/// Which walk a served reshape runs.
enum Walked {
    Moved(super::ReshapeWalk),
    Backup(super::backup_file::Walk),
}

/// A served reshape's two running arrays: (old geometry, new geometry).
pub(crate) type Sides = (Arc<crate::array::Array>, Arc<crate::array::Array>);

impl std::fmt::Debug for ServedWalk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = match &self.walk {
            Walked::Moved(w) => &w.r,
            Walked::Backup(w) => &w.r,
        };
        f.debug_struct("ServedWalk")
            .field("reshape", r)
            .finish_non_exhaustive()
    }
}

impl crate::assemble::Assembly {
    /// The reshape the superblocks record, ready to walk in service (both
    /// sides writable, every step through a gate). Refused as
    /// `grow --continue` refuses it (a kind raidlab does not walk, a
    /// member missing, a 0.90 one that needs its backup file:
    /// [`Assembly::reshape_served_with_backup`]). `safe_mode_mark`: the
    /// superblocks' dirty mark, if they carry one, is the owner's safe
    /// mode's (writes recent, the copies agree), not an unclean stop's;
    /// after one, a mirrored side reads each block from its first copy
    /// only, as a start does.
    ///
    /// [`Assembly::reshape_served_with_backup`]: crate::assemble::Assembly::reshape_served_with_backup
    pub fn reshape_served(&mut self, safe_mode_mark: bool) -> Result<ServedWalk> {
        Ok(ServedWalk {
            walk: Walked::Moved(self.in_service(safe_mode_mark, |asm| asm.reshape_walk(true))?),
            file_done: None,
        })
    }

    /// [`Assembly::reshape_served`] of a metadata 0.90 reshape through
    /// mdadm's backup file `file`, as mdadm runs one on a running array.
    /// A restripe over the same members or onto fewer members: what the
    /// file holds put back first (`Grow_restart`), then each window closed
    /// to the clients from before its save until the position has passed
    /// it (md's `suspend_lo`/`suspend_hi`). A grow to more members: the
    /// critical section put back from the file and the position past it
    /// committed, then the in-place walk past it, which needs no backup,
    /// its steps through the gate as a moved walk's; the file let go and
    /// removed at the end ([`ServedWalk::end`]). The owner holds the
    /// clients' requests until this returns. Refused, with nothing
    /// written, for a reshape that takes no file, and as the offline run
    /// refuses a file.
    ///
    /// [`Assembly::reshape_served`]: crate::assemble::Assembly::reshape_served
    pub fn reshape_served_with_backup(
        &mut self,
        safe_mode_mark: bool,
        file: &super::BackupFile,
    ) -> Result<ServedWalk> {
        if let Some(Ok(r)) = self.reshape() {
            if self.is_in_place(&r)? {
                let walk = self.in_service(safe_mode_mark, |asm| {
                    asm.in_place_walk_with_backup(file, true)
                })?;
                return Ok(ServedWalk {
                    walk: Walked::Moved(walk),
                    file_done: Some(file.clone()),
                });
            }
        }
        let walk = self.in_service(safe_mode_mark, |asm| asm.backup_walk(file, true))?;
        Ok(ServedWalk {
            walk: Walked::Backup(walk),
            file_done: None,
        })
    }
}

impl ServedWalk {
    /// The gate between the walk and the clients (where the walk is).
    pub fn gate(&self) -> &Arc<ReshapeGate> {
        let g = match &self.walk {
            Walked::Moved(w) => w.gate(),
            Walked::Backup(w) => w.gate.as_ref(),
        };
        g.expect("a served walk has a gate")
    }

    /// The array's bytes through the walk's gate: what the clients use.
    pub fn volume(&self, name: String) -> ReshapingVolume {
        let (old, new) = self.sides();
        ReshapingVolume::new(name, self.gate().clone(), old, new)
    }

    /// The two geometries' running arrays (old, new).
    pub(crate) fn sides(&self) -> Sides {
        match &self.walk {
            Walked::Moved(w) => (w.old.clone(), w.new.clone()),
            Walked::Backup(w) => (w.old.clone(), w.new.clone()),
        }
    }

    /// Where the walk is, counted as the long run counts it, and its end.
    pub(crate) fn progress_now(&self) -> (u64, u64) {
        match &self.walk {
            Walked::Moved(w) => (w.walked(w.r.position), w.r.new.array_bytes()),
            Walked::Backup(w) => (w.walked(), w.r.new.array_bytes()),
        }
    }

    /// Walk from the last checkpoint to the end, recording each checkpoint
    /// in `asm`'s superblocks (`ServedWalk::record`). A stop asked
    /// (`opts.stop`, `quit`) checkpoints where the walk is and returns an
    /// `Interrupted` error; requests through the gate then no longer wait
    /// for it (a backup-file walk's window stays closed: its bytes are
    /// whole only in the file until the reshape resumes).
    pub fn run(
        &mut self,
        asm: &mut crate::assemble::Assembly,
        opts: &crate::recovery::RunOptions,
        quit: &dyn Fn() -> bool,
    ) -> Result<()> {
        self.run_lending(opts, quit, &mut |_| {}, &mut |sides, sectors| {
            Self::record(asm, sides, sectors)
        })
    }

    /// [`ServedWalk::run`] for an owner that lends the assembly only for
    /// each checkpoint (`record` calls [`ServedWalk::record`] under its
    /// lock), with the long run's progress.
    pub(crate) fn run_lending(
        &mut self,
        opts: &crate::recovery::RunOptions,
        quit: &dyn Fn() -> bool,
        progress: &mut dyn FnMut(crate::recovery::Progress),
        record: &mut dyn FnMut(&Sides, u64) -> Result<()>,
    ) -> Result<()> {
        let sides = self.sides();
        let mut commit = |sectors| record(&sides, sectors);
        match &mut self.walk {
            Walked::Moved(w) => w.run(opts, quit, progress, &mut commit),
            Walked::Backup(w) => w.run(opts, quit, progress, &mut commit),
        }
    }

    /// Record a checkpoint (`sectors`, the reshape position) in the
    /// superblocks while the array serves: the members either side took
    /// out recorded faulty first (a walk stopping for a failed member
    /// checkpoints where it is, and a commit to that member would fail and
    /// leave the bytes moved since the last checkpoint unwritable), then
    /// the position in every member left, with the old side's bitmap held,
    /// as any change of a running array's superblocks.
    ///
    /// A member whose superblock cannot be written (it failed while a
    /// client's request to it was still being handled, so neither side has
    /// taken it out yet) is taken out of both sides and recorded, and the
    /// position written again on the rest, as md fails a device whose
    /// superblock write fails and rewrites the others (md_update_sb).
    pub(crate) fn record(
        asm: &mut crate::assemble::Assembly,
        sides: &Sides,
        sectors: u64,
    ) -> Result<()> {
        asm.commit_running(&[&sides.0, &sides.1], |asm| {
            for side in [&sides.0, &sides.1] {
                asm.record_taken_out(side)?;
            }
            asm.change_running(&sides.0, |a| a.commit(|sb| sb.reshape_position = sectors))
        })
    }

    /// A walk run to its end: the superblocks md writes then, with the
    /// sides' bitmap held (the bits the clients' writes set since the last
    /// checkpoint go into that commit, and no write sets one meanwhile).
    pub fn end(self, asm: &mut crate::assemble::Assembly) -> Result<super::ReshapeReport> {
        let old = self.sides().0;
        let report = match self.walk {
            Walked::Moved(w) => asm.change_running(&old, |asm| asm.reshape_end(w)),
            Walked::Backup(w) => asm.change_running(&old, |asm| asm.backup_walk_end(w)),
        }?;
        if let Some(file) = &self.file_done {
            asm.in_place_file_done(file)?;
        }
        Ok(report)
    }

    /// Let `running`, the array this reshape's sides took the requests
    /// from (or the read-only one of an array started mid-reshape), keep
    /// the sides' bitmap from now on: whatever still writes superblocks or
    /// runs md's bitmap daemon through it then writes the bits the sides
    /// set, never its own older copy, which would clear them on the
    /// members. Call it before the sides take a write.
    pub fn share_bitmap_with(&self, running: &crate::array::Array) {
        if let Some(intent) = self.sides().1.shared_intent() {
            running.use_intent(intent);
        }
    }
}
