//! A walk through mdadm's backup file under way, offline or while the
//! array serves: the steps a window's protocol (`restripe`, `shrink`)
//! orders, each the same in both runs: a window saved, restriped, a
//! section let go, the position committed, and, served, the window closed
//! to clients from before its old bytes are saved until no section a
//! resume would put back names it (md's `suspend_lo`/`suspend_hi` while
//! mdadm's `child_monitor` backs a window up).
//!
//! What it decides: when a served window opens (after the commit past it
//! and, going forwards, after its own section is let go; the last one
//! only at the end's commit), and what a run's stop, pacing and progress
//! are.
//!
//! It must never open a window to clients while the file's copy of it
//! could still be put back by a resume, and never let a request reach a
//! window being saved or moved.

use super::{save, section, set_section, BackupFile};
use crate::array::Array;
use crate::grow::online::ReshapeGate;
use crate::grow::SECTOR;
use crate::recovery::{clock_of, stopped, Progress, RunOptions};
use raidlab_core::{Error, ErrorKind, Op, Result, Volume};
use raidlab_layout::reshape::Reshape;
use raidlab_md::grow_backup::BackupSuper;
use std::ops::Range;
use std::sync::Arc;

/// A walk through the file, prepared (`Assembly::backup_walk`): the file
/// and its record as last written, the two sides, the window, where the
/// walk is, and, served, the gate that closes each window to clients.
pub(in crate::grow) struct Walk {
    pub(super) file: BackupFile,
    pub(super) bsb: BackupSuper,
    /// The reshape, its position where this run starts.
    pub(in crate::grow) r: Reshape,
    /// The position the superblocks recorded before the put-back.
    pub(super) recorded: u64,
    pub(in crate::grow) old: Arc<Array>,
    pub(in crate::grow) new: Arc<Array>,
    /// The window in array bytes, and in sectors (a section's size).
    pub(super) wbytes: u64,
    pub(super) window: u64,
    /// The new geometry's array bytes.
    pub(super) total: u64,
    /// The position the superblocks record.
    pub(super) p: u64,
    pub(super) buf: Vec<u8>,
    /// The window to clients, while the array serves.
    pub(in crate::grow) gate: Option<Arc<ReshapeGate>>,
    /// Windows committed in this run.
    pub(super) checkpoints: u64,
}

/// What a run is given: how a position is recorded, when to stop, where
/// progress goes, and its pacing.
pub(super) struct Hooks<'a> {
    commit: &'a mut dyn FnMut(u64) -> Result<()>,
    quit: &'a dyn Fn() -> bool,
    progress: &'a mut dyn FnMut(Progress),
    pace: Pace,
}

impl Walk {
    /// The position, counted as the long run counts it (from the new
    /// geometry's end going backwards).
    pub(in crate::grow) fn walked(&self) -> u64 {
        if self.r.backwards {
            self.total - self.p
        } else {
            self.p
        }
    }

    /// Walk from the recorded position to the end (down to the array's
    /// start, for a shrink), `commit` recording a position (sectors) in
    /// every superblock. A stop asked for (`opts.stop`, `quit`) ends after
    /// a window's commit with an `Interrupted` error; served, an error
    /// leaves the window closed (`ReshapeGate::ended_closed`).
    pub(in crate::grow) fn run(
        &mut self,
        opts: &RunOptions,
        quit: &dyn Fn() -> bool,
        progress: &mut dyn FnMut(Progress),
        commit: &mut dyn FnMut(u64) -> Result<()>,
    ) -> Result<()> {
        let clock = clock_of(opts);
        let mut h = Hooks {
            commit,
            quit,
            progress,
            pace: Pace {
                started: clock.now(),
                clock,
                from: self.p,
                data_disks: self.r.new.data_disks() as u64,
                opts: opts.clone(),
            },
        };
        let out = if self.r.backwards {
            super::shrink::walk(self, &mut h)
        } else {
            super::restripe::walk(self, &mut h)
        };
        if let (Err(e), Some(g)) = (&out, &self.gate) {
            g.ended_closed(e.to_string());
        }
        out
    }

    /// Let go of the section naming window `w`, if one does.
    pub(super) fn let_go(&mut self, w: &Range<u64>) -> Result<()> {
        if let Some(k) = self.section_of(w) {
            set_section(&mut self.bsb, k, 0..0);
            self.file.write_record(&mut self.bsb)?;
        }
        Ok(())
    }

    /// Served: the position `to` is recorded and no section a resume
    /// would put back names a window below it (above it, going
    /// backwards): the window walked opens, and a forward walk's next one,
    /// saved already, stays closed. At the end nothing opens here.
    pub(super) fn open(&self, to: u64) {
        let Some(g) = &self.gate else {
            return;
        };
        let back = self.r.backwards;
        if (back && to == 0) || (!back && to >= self.total) {
            return;
        }
        let next = (!back).then(|| to..(to + self.wbytes).min(self.total));
        g.advance(to, next);
    }

    /// Served: close `w` to clients (those over it finish first).
    pub(super) fn close(&self, w: Range<u64>) {
        if let Some(g) = &self.gate {
            g.begin_step(w);
        }
    }

    /// The section holding window `w`'s old bytes, if one does.
    pub(super) fn section_of(&self, w: &Range<u64>) -> Option<usize> {
        (0..2).find(|&k| section(&self.bsb, k) == *w)
    }

    /// Save window `w` in the section that does not cover the recorded
    /// position (the one that does stays: a cut must still find it), that
    /// section let go first when it names another window. The section.
    pub(super) fn claim(&mut self, w: Range<u64>, back: bool) -> Result<usize> {
        let p = self.p;
        let stays = |k: usize| {
            let s = section(&self.bsb, k);
            !s.is_empty() && if back { s.start == p } else { s.end == p }
        };
        let k = if stays(0) { 1 } else { 0 };
        if !section(&self.bsb, k).is_empty() {
            set_section(&mut self.bsb, k, 0..0);
            self.file.write_record(&mut self.bsb)?;
        }
        save(&self.file, &mut self.bsb, k, &self.old, w, self.window)?;
        Ok(k)
    }

    /// Window `w` read in the old geometry and written, flushed, in the
    /// new; then every section but `keep` let go (the window's own stays
    /// until the position passes it).
    pub(super) fn restripe(&mut self, w: &Range<u64>, keep: Option<usize>) -> Result<()> {
        self.buf.clear();
        self.buf.resize((w.end - w.start) as usize, 0);
        self.old.read_at(&mut self.buf, w.start)?;
        // md's reshape writes mark no bitmap bit (the position makes them
        // safe); offline there is no bitmap shared to mark.
        self.new.write_unmarked(&self.buf, w.start)?;
        self.new.flush()?;
        let others: Vec<usize> = (0..2)
            .filter(|&k| Some(k) != keep && !section(&self.bsb, k).is_empty())
            .collect();
        for &k in &others {
            set_section(&mut self.bsb, k, 0..0);
        }
        if !others.is_empty() {
            self.file.write_record(&mut self.bsb)?;
        }
        Ok(())
    }

    /// Window `walked` done: the position `to` committed and reported
    /// (served, the last window kept closed until the end's commit). The
    /// walk opens the window after (`Walk::open`), then paces
    /// (`Walk::paced`).
    pub(super) fn committed(
        &mut self,
        h: &mut Hooks<'_>,
        walked: Range<u64>,
        to: u64,
    ) -> Result<()> {
        let back = self.r.backwards;
        (h.commit)(to / SECTOR)?;
        self.p = to;
        let total = self.total;
        let done = if back { to == 0 } else { to >= total };
        if done {
            // The last window stays closed until the end's commit: a
            // resume before it would put its saved copy back.
            if let Some(g) = &self.gate {
                g.advance(to, Some(walked));
            }
        }
        (h.progress)(Progress {
            done: if back { total - to } else { to },
            total,
        });
        Ok(())
    }

    /// After window `..to`'s commit (and, served, its opening): pacing; a
    /// stop asked for ends the walk here with an `Interrupted` error.
    pub(super) fn paced(&mut self, h: &mut Hooks<'_>, to: u64) -> Result<()> {
        let (back, total) = (self.r.backwards, self.total);
        let done = if back { to == 0 } else { to >= total };
        let pace = &mut h.pace;
        // Pacing as the other long runs: member bytes per second.
        if let Some(rate) = pace.opts.max_rate.filter(|&r| r > 0) {
            let walked = pace.from.abs_diff(to);
            let due =
                std::time::Duration::from_secs_f64((walked / pace.data_disks) as f64 / rate as f64);
            let spent = pace.clock.now().saturating_sub(pace.started);
            if due > spent {
                pace.clock.sleep(due - spent);
            }
        }
        if !done && (stopped(&pace.opts) || (h.quit)()) {
            return Err(Error::new(
                ErrorKind::Interrupted,
                Op::Write,
                format!(
                    "reshape stopped at array byte {to} of {total}{}; run `raidlab grow --continue --backup-file {}` with the same members to finish it",
                    if back { " (walking down from the end)" } else { "" },
                    self.file.name
                ),
            ));
        }
        self.checkpoints += 1;
        Ok(())
    }
}

/// A walk's pacing (`--max-rate`, member bytes a second) and stop.
pub(super) struct Pace {
    clock: raidlab_core::SharedClock,
    started: std::time::Duration,
    /// Where this run started.
    from: u64,
    data_disks: u64,
    opts: RunOptions,
}
