//! The one interface for "make this write safe, run it, release it": what an
//! array keeps so that a crash in the middle of a write can be made good,
//! chosen at assembly (md allows one consistency policy per array):
//! - nothing but a resync of the whole array after an unclean stop;
//! - the write-intent bitmap: the chunks the plan writes are marked dirty on
//!   every member before it runs, and held while it runs; md's bitmap daemon
//!   clears them once idle, a clean stop clears the rest;
//! - the partial parity log (RAID 5): the plan carries a log step, written
//!   durably on each parity member before the data, and released once the
//!   members' writes are flushed by a later log write;
//! - the write journal (RAID 4/5/6): the plan's log step puts every new block
//!   in the journal first; the journal's space is reclaimed only after the
//!   members hold what it covers.
//!
//! It decides which plan a write gets (the planner offers one entry point per
//! log step) and what is made durable before and after it. It never decides
//! how a request becomes member I/O, and never writes data to a member itself
//! (the executor does, from the plan).

use super::*;
use crate::exec::{Hooks, LogWriter};
use crate::journal::JournalMode;
use crate::kept_rows::KeptRows;
use crate::metadata_plan::DeviceWrites;

/// What makes a write safe on this array.
#[derive(Clone, Copy)]
pub(super) enum WriteLog<'a> {
    /// Nothing before the write: an unclean stop means a full resync.
    Resync,
    /// md's write-intent bitmap.
    Bitmap,
    /// md's partial parity log.
    Ppl(&'a PartialParityLog),
    /// md's write journal.
    Journal(&'a Journal),
}

impl WriteLog<'_> {
    /// The plan for writing `[pos, pos+n)` with the members `live` says are in
    /// service: with the log step this log needs, if any; parity from data
    /// past `unsynced` (a resync owed from there while the array serves),
    /// except in the journal's plans (md's journal is not resynced).
    pub(super) fn plan(
        &self,
        geo: &Geometry,
        live: &[bool],
        pos: u64,
        n: u64,
        unsynced: Option<u64>,
        kept: Option<&KeptRows>,
    ) -> Result<Plan> {
        match self {
            // PLANTED BUG (tests only, `planted.rs`): no log entry for stripe 0.
            WriteLog::Ppl(_)
                if planted!(SkipPplFirstStripe)
                    && pos < geo.chunk_bytes * geo.data_disks() as u64 =>
            {
                plan_write(geo, live, pos, n)
            }
            WriteLog::Ppl(_) => match unsynced {
                Some(from) => plan_write_unsynced(geo, live, pos, n, from, true),
                None => plan_write_logged(geo, live, pos, n),
            },
            WriteLog::Journal(_) => plan_write_journaled(geo, live, pos, n),
            WriteLog::Resync | WriteLog::Bitmap => match (unsynced, kept) {
                (Some(from), _) => plan_write_unsynced(geo, live, pos, n, from, false),
                (None, Some(kept)) => plan_write_kept(geo, live, pos, n, kept),
                (None, None) => plan_write(geo, live, pos, n),
            },
        }
    }

    /// What must be durable before `plan` (writing array range `[pos,
    /// pos+n)`) may take its stripe locks: the bitmap's dirty bits, held
    /// until the returned value is dropped (when the write has ended). The
    /// logs are written by the plan's own log step, under the locks.
    pub(super) fn make_safe<'a>(
        &self,
        array: &'a Array,
        plan: &Plan,
        pos: u64,
        n: u64,
    ) -> Result<BitsHeld<'a>> {
        let chunks = match self {
            WriteLog::Bitmap => array.note_intent(plan, pos, n)?,
            WriteLog::Resync | WriteLog::Ppl(_) | WriteLog::Journal(_) => Vec::new(),
        };
        Ok(BitsHeld { array, chunks })
    }

    /// Run `plan` (its stripe locks held) with this log writing its log step,
    /// and release what the log held for it once the plan is done.
    pub(super) fn run(
        &self,
        array: &Array,
        plan: &Plan,
        members: &Members,
        piece: &[u8],
        kept: Option<&KeptRows>,
    ) -> Result<(), Failed> {
        let run = |log: Option<LogWriter<'_>>| {
            array.executor.run(
                plan,
                members,
                array.engine,
                UserBuf::Write(piece),
                Hooks { log, kept },
            )
        };
        match self {
            WriteLog::Journal(journal) => {
                // A reclaim inside this write lets go of journal space: the
                // members taken out are recorded first (`record_take_outs`).
                // Before the journal is held, as the superblock commit reads
                // the journal's tail; journaled writes go one at a time, so
                // only a read's take-out can come between.
                array.record_take_outs().map_err(Failed::from)?;
                // Held until the member writes are done: a reclaim (inside a
                // later journal write) must not move the tail past this one.
                let state = std::cell::RefCell::new(journal.writer());
                let flush = || array.flush_members();
                let device_run =
                    |w: &DeviceWrites, table: &Members| array.run_device_writes(w, table);
                let writer = |entries: &[(LogEntry, &[u8])]| {
                    journal.write(&mut state.borrow_mut(), entries, &flush, &device_run)
                };
                run(Some(&writer))
            }
            WriteLog::Ppl(log) => {
                let written: Vec<usize> = write_roles(plan);
                let guards = std::cell::RefCell::new(log.lock(plan));
                // Flushed before a member's log is overwritten, which lets go
                // of the entries it held: the members taken out are recorded
                // first (`record_take_outs`).
                let flush = |roles: &[usize]| {
                    array.record_take_outs().map_err(Failed::from)?;
                    array.flush_roles(roles)
                };
                let device_run =
                    |w: &DeviceWrites, table: &Members| array.run_device_writes(w, table);
                let writer = |entries: &[(LogEntry, &[u8])]| {
                    log.write(
                        &mut guards.borrow_mut(),
                        entries,
                        &written,
                        &flush,
                        &device_run,
                    )
                };
                run(Some(&writer))
            }
            WriteLog::Resync | WriteLog::Bitmap => run(None),
        }
    }
}

/// The bitmap chunks a write holds while it runs: md's daemon leaves their
/// bits set until the write has ended, however it ends.
pub(super) struct BitsHeld<'a> {
    array: &'a Array,
    chunks: Vec<u64>,
}

impl Drop for BitsHeld<'_> {
    fn drop(&mut self) {
        if !self.chunks.is_empty() {
            self.array.intent_done(&self.chunks);
        }
    }
}

impl Array {
    /// Write as a reshape's walk writes the new geometry: through the
    /// array's log, but marking no bitmap bit (md's reshape writes mark
    /// none: a resume redoes every one past the last checkpoint from the
    /// old geometry, and those below it were flushed before it). Whole
    /// stripes straight to the members: no stripe cache.
    pub(crate) fn write_unmarked(&self, buf: &[u8], offset: u64) -> Result<()> {
        check_range(&self.name, Op::Write, self.size(), offset, buf.len() as u64)?;
        self.refuse_read_only(Op::Write, offset, buf.len() as u64)?;
        if !matches!(self.write_log(), WriteLog::Bitmap) {
            return self.write_at(buf, offset);
        }
        self.refuse_when_failed(Op::Write, offset, buf.len() as u64)?;
        for (pos, n) in self.pieces(offset, buf.len() as u64) {
            let start = (pos - offset) as usize;
            self.write_piece(&buf[start..start + n as usize], pos, WriteLog::Resync)?;
        }
        Ok(())
    }

    /// The log this array's writes go through, as assembly chose it.
    pub(super) fn write_log(&self) -> WriteLog<'_> {
        if let Some(log) = &self.ppl {
            WriteLog::Ppl(log)
        } else if let Some(journal) = &self.journal {
            WriteLog::Journal(journal)
        } else if self.intent().is_some() {
            WriteLog::Bitmap
        } else {
            WriteLog::Resync
        }
    }
}

/// md's write-back journal: how the array reaches it (the journal decides
/// its room and pins, `crate::journal`; the stripe cache when stripes go down).
impl Array {
    /// Switch between md's journal modes. Write-back needs the array's write
    /// journal and its stripe cache (started for writing); leaving it writes
    /// out every held stripe first. Meant for a start, before requests come:
    /// a write racing the switch may take either path.
    pub fn set_journal_mode(&self, mode: JournalMode) -> Result<()> {
        let Some(journal) = &self.journal else {
            if mode == JournalMode::WriteThrough {
                return Ok(());
            }
            return Err(Error::invalid(format!(
                "write-back needs a write journal, and this {} has none: create the array with --write-journal DEV (RAID 4, 5 or 6)",
                self.geometry.level.name()
            ))
            .on_device(&self.name));
        };
        let Some(cache) = self.stripe_cache.get() else {
            if mode == JournalMode::WriteThrough {
                return Ok(());
            }
            return Err(Error::invalid(
                "write-back holds stripes in the stripe cache, which runs only on an array started for writing",
            )
            .on_device(&self.name));
        };
        let stripe = self.geometry.chunk_bytes * self.geometry.data_disks() as u64;
        match mode {
            JournalMode::WriteBack => {
                journal.set_mode(mode, stripe)?;
                cache.set_write_back(true);
            }
            JournalMode::WriteThrough => {
                cache.write_out_range(None, self)?;
                cache.set_write_back(false);
                journal.set_mode(mode, stripe)?;
            }
        }
        Ok(())
    }

    /// The journal's mode, when the array has a journal.
    pub fn journal_mode(&self) -> Option<JournalMode> {
        self.journal.as_ref().map(|j| j.mode())
    }

    /// Write every stripe held back to the members (a clean stop in
    /// write-back: the journal can then be emptied, as md leaves it).
    pub fn write_out_held(&self) -> Result<()> {
        match self.stripe_cache.get() {
            Some(cache) => cache.write_out_range(None, self),
            None => Ok(()),
        }
    }

    /// A write in write-back mode: whole pages (a partial page is merged with
    /// what the array holds, through the cache) handed to the stripe cache,
    /// which logs them before it holds them.
    pub(super) fn write_back(&self, cache: &StripeCache, buf: &[u8], offset: u64) -> Result<()> {
        let end = offset + buf.len() as u64;
        let (a, b) = (offset / 4096 * 4096, end.div_ceil(4096) * 4096);
        if (a, b) == (offset, end) {
            let _shared = self.page_merge.read();
            return cache.write(buf, offset, self);
        }
        let _alone = self.page_merge.write();
        let mut merged = vec![0u8; (b - a) as usize];
        cache.read(&mut merged[..4096], a, self)?;
        let tail = merged.len() - 4096;
        cache.read(&mut merged[tail..], b - 4096, self)?;
        merged[(offset - a) as usize..(end - a) as usize].copy_from_slice(buf);
        cache.write(&merged, a, self)
    }

    /// Log held pages as data-only journal payloads (see
    /// `stripe_cache::Below::log_held`).
    pub(super) fn log_held(&self, stripe: u64, offset: u64, bytes: &[u8]) -> Result<bool> {
        let Some(journal) = &self.journal else {
            return Ok(true);
        };
        // As a journaled write does (`WriteLog::run`): recorded before the
        // journal is held.
        self.record_take_outs()?;
        let flush = || self.flush_members();
        let device_run = |w: &DeviceWrites, table: &Members| self.run_device_writes(w, table);
        journal
            .log_data(stripe, offset, bytes, &flush, &device_run)
            .map_err(|f| {
                let mut e = *f.error;
                e.message = format!(
                    "{} (writing a write-back write to the journal; it was not acknowledged)",
                    e.message
                );
                e.at(offset, bytes.len() as u64)
            })
    }

    /// A held stripe reached the members: its journal blocks may go.
    pub(super) fn written_out(&self, stripe: u64) {
        if let Some(journal) = &self.journal {
            journal.release(stripe);
        }
    }
}
