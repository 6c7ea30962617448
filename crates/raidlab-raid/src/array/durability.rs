//! Durability bookkeeping, the stage between planning a write and carrying it
//! out: md's write-intent bitmap (the chunks a write touches are marked dirty
//! on every member before it goes out), the partial parity log (RAID 5) and the
//! write journal (RAID 4/5/6), which make a plan safe to write after a crash.
//! It decides what must be durable before a member is written and when a log
//! may be reclaimed; it never decides how a request is split into member I/O
//! (the planner does) and never writes data to members itself.

use super::*;

impl Array {
    /// Keep `bitmap` up to date on `devices` (role, whole device, superblock)
    /// before every write.
    pub fn with_intent(
        self,
        bitmap: raidlab_md::bitmap::Bitmap,
        devices: Vec<(usize, Arc<dyn Volume>, raidlab_md::Superblock)>,
    ) -> Array {
        self.with_shared_intent(Arc::new(Intent::new(bitmap, devices)))
    }

    /// Keep the bitmap `intent` holds, with every other array holding it
    /// (the running arrays of one served reshape: one copy of the bits).
    pub(crate) fn with_shared_intent(self, intent: Arc<Intent>) -> Array {
        *self.intent.write().unwrap_or_else(|p| p.into_inner()) = Some(intent);
        self
    }

    /// The bitmap this array keeps, to be shared ([`Array::use_intent`]).
    pub(crate) fn shared_intent(&self) -> Option<Arc<Intent>> {
        self.intent()
    }

    /// From now on keep `intent` instead of this array's own bitmap: the
    /// array a served reshape replaced takes its sides' bitmap, so that
    /// whatever writes superblocks through it (safe mode, failure
    /// recording) or runs md's bitmap daemon on it writes the bits the
    /// sides set, never its older copy. Only with no write under way.
    pub(crate) fn use_intent(&self, intent: Arc<Intent>) {
        *self.intent.write().unwrap_or_else(|p| p.into_inner()) = Some(intent);
    }

    pub(super) fn intent(&self) -> Option<Arc<Intent>> {
        self.intent
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Run `f` on the bitmap with every bitmap write held off, so that whoever
    /// writes superblocks (and the bitmap beside them) while the array runs
    /// writes its current dirty bits, not an older copy. `None` without a bitmap.
    pub fn with_bitmap_held<T>(
        &self,
        f: impl FnOnce(&mut raidlab_md::bitmap::Bitmap) -> T,
    ) -> Option<T> {
        let intent = self.intent()?;
        let mut st = intent.state.lock();
        Some(f(&mut st.bitmap))
    }

    /// Keep the bitmap on a further device too (a member being rebuilt in).
    pub fn add_intent_device(
        &self,
        role: usize,
        device: Arc<dyn Volume>,
        sb: raidlab_md::Superblock,
    ) -> Result<()> {
        let Some(intent) = self.intent() else {
            return Ok(());
        };
        let mut st = intent.state.lock();
        let (at, bytes) = st
            .bitmap
            .placed(&sb)
            .map_err(|e| e.on_device(device.name()))?;
        let mut writes = crate::metadata_plan::DeviceWrites::default();
        writes.push(0, at, &bytes);
        self.executor.run(
            &writes.plan(),
            &[Some(Arc::clone(&device))],
            self.engine,
            UserBuf::Write(writes.bytes()),
            crate::exec::Hooks::NONE,
        )?;
        st.devices
            .retain(|(r, d, _)| !(*r == role && d.name() == device.name()));
        st.devices.push((role, device, sb));
        Ok(())
    }

    /// Before a member is rebuilt into `role`, or replaces the role's member,
    /// while the array runs: its partial parity log. A rebuilt member's log is
    /// the role's at once (writes planned with the role present, below the
    /// rebuild's checkpoint, log to it). A replacement's log takes a copy of
    /// every log write of the role until it takes over, so that whichever
    /// member the superblocks name after a crash holds the role's last log
    /// write.
    pub fn add_log_device(
        &self,
        role: usize,
        device: Arc<dyn Volume>,
        sb: raidlab_md::Superblock,
        replacing: bool,
    ) -> Result<()> {
        match &self.ppl {
            Some(log) if replacing => log.attach_copy(self.executor.as_ref(), role, device, sb),
            Some(log) => log.attach(self.executor.as_ref(), role, device, sb),
            None => Ok(()),
        }
    }

    /// Once the superblocks name the member that replaced `role`: its log is
    /// the only one the role's log writes go to.
    pub fn settle_logs(&self, role: usize) {
        if let Some(log) = &self.ppl {
            log.drop_copy(role);
        }
    }

    /// Log every write's partial parity first (md's PPL; RAID 5 only). Refused
    /// when one stripe's partial parity could not fit a log write.
    pub fn with_ppl(mut self, log: PartialParityLog) -> Result<Array> {
        if !self.rules.ppl {
            return Err(Error::invalid(format!(
                "a partial parity log is for RAID 5 only, not {}",
                self.geometry.level.name()
            ))
            .on_device(&self.name));
        }
        if self.geometry.chunk_bytes > log.pp_room() {
            return Err(Error::invalid(format!(
                "the chunk ({} bytes) is larger than the partial parity a log write can hold ({} bytes): md's PPL cannot cover a stripe of this array; assemble it without writing, or re-create it with a smaller chunk",
                self.geometry.chunk_bytes,
                log.pp_room()
            ))
            .on_device(&self.name));
        }
        self.ppl = Some(log);
        Ok(self)
    }

    /// Whether writes go through a partial parity log.
    pub fn has_ppl(&self) -> bool {
        self.ppl.is_some()
    }

    /// Run writes through md's write journal (RAID 4/5/6): each write's new data
    /// and parity are made durable on the journal device before the members are
    /// written. The journal must have been started (replayed) on this array's
    /// members.
    pub fn with_journal(mut self, journal: Arc<Journal>) -> Result<Array> {
        if !self.rules.journal {
            return Err(Error::invalid(format!(
                "md's write journal is for RAID 4, 5 and 6, not {}",
                self.geometry.level.name()
            ))
            .on_device(&self.name));
        }
        self.journal = Some(journal);
        Ok(self)
    }

    /// Whether writes go through a write journal.
    pub fn has_journal(&self) -> bool {
        self.journal.is_some()
    }

    /// The write journal, when writes go through one.
    pub fn journal(&self) -> Option<&Journal> {
        self.journal.as_deref()
    }

    /// Let the journal forget what the members now hold durably: flush the
    /// members and move `journal_tail` up (md's reclaim). For a clean stop.
    pub fn checkpoint_journal(&self) -> Result<()> {
        match &self.journal {
            Some(j) => j.checkpoint(&|| self.flush_members()),
            None => Ok(()),
        }
    }

    /// The bitmap as the array last wrote it.
    pub fn intent_bitmap(&self) -> Option<raidlab_md::bitmap::Bitmap> {
        self.with_bitmap_held(|b| b.clone())
    }

    /// Mark the bitmap chunks a write plan touches dirty, on every member, before
    /// the plan runs, and count the write under way on them (see
    /// [`Array::intent_done`]). md indexes RAID 10's bitmap by array sector,
    /// the other levels' by member sector. Returns the chunks held.
    pub(super) fn note_intent(&self, plan: &Plan, pos: u64, n: u64) -> Result<Vec<u64>> {
        let Some(intent) = self.intent() else {
            return Ok(Vec::new());
        };
        if planted!(SkipBitmapMark) {
            return Ok(Vec::new()); // PLANTED BUG (tests only, `planted.rs`)
        }
        let by_array = self.rules.bitmap == crate::level::BitmapUnit::ArraySectors;
        let ranges = crate::bitmap_daemon::write_sectors(by_array, [plan], (pos, n));
        let mut st = intent.state.lock();
        let st = &mut *st;
        let bm = &mut st.bitmap;
        let chunks = crate::bitmap_daemon::chunks_of(&ranges, bm.sb.chunk_sectors(), bm.chunks());
        st.daemon.start(&chunks);
        if chunks.iter().all(|&c| bm.is_dirty(c)) {
            return Ok(chunks);
        }
        let sync = bm.sb.sync_size;
        let set = ranges
            .iter()
            .filter(|(start, _)| *start < sync)
            .try_for_each(|&(start, len)| bm.set_sectors(start, len.min(sync - start)));
        if let Err(e) = set.and_then(|()| self.write_bitmap(st)) {
            st.daemon.done(&chunks);
            return Err(e);
        }
        Ok(chunks)
    }

    /// A write that held `chunks` (from [`Array::note_intent`]) has ended.
    pub(super) fn intent_done(&self, chunks: &[u64]) {
        let Some(intent) = self.intent() else {
            return;
        };
        let mut st = if std::thread::panicking() {
            // Unwinding: a simulated request dropped where the power went
            // (its task is unwound outside any runner, so it cannot wait
            // as a task) or a panic. The lock may be held by another
            // task suspended inside the bitmap's writes, which will never
            // run again: waiting would hang the thread. The chunks stay
            // counted as written, so their bits are never cleared by this
            // run: more resync, never less.
            match intent.state.try_lock() {
                Some(st) => st,
                None => return,
            }
        } else {
            intent.state.lock()
        };
        st.daemon.done(chunks);
    }

    /// One pass of md's bitmap daemon: the bits of chunks no write has
    /// touched for two passes are cleared and the bitmap written to every
    /// member, after the members' writes are made durable (the data a bit
    /// covered must be on the members before the bit goes: md's bitmap write
    /// carries a cache flush before it). Call it every
    /// [`Array::bitmap_daemon_sleep`]. Returns how many bits it cleared. A
    /// degraded or recovering array keeps its bits.
    pub fn bitmap_daemon_pass(&self) -> Result<u64> {
        self.daemon_pass()
    }

    /// md keeps every bit while a member is missing or being rebuilt: they
    /// say what it missed.
    fn keeps_bits(&self) -> bool {
        !self.missing_now().is_empty() || self.view().recovery.is_some()
    }

    /// Whether a pass of the daemon could clear anything: bits are set and
    /// the array is whole. A driver on a virtual clock need not wake the
    /// daemon otherwise (md's runs anyway and finds nothing).
    pub fn bitmap_daemon_has_work(&self) -> bool {
        self.intent().is_some()
            && self.with_bitmap_held(|b| b.dirty_count()).unwrap_or(0) > 0
            && !self.keeps_bits()
    }

    /// Bits the daemon has cleared since the array started (`None` without
    /// a bitmap).
    pub fn bitmap_bits_cleared(&self) -> Option<u64> {
        Some(self.intent()?.state.lock().cleared)
    }

    /// md's bitmap daemon's cadence as a long run, from `now`: a pass every
    /// `daemon_sleep`, the first one period from now (`None` without a
    /// bitmap). Its steps are [`Array::bitmap_daemon_pass`]; whoever owns
    /// the array drives it: `LiveArray::poll` runs the passes that are due
    /// ([`LongRun::run_due`](crate::long_run::LongRun::run_due)), a thread
    /// of its own ([`Array::bitmap_daemon_thread`]) waits for them.
    pub fn bitmap_daemon_schedule(
        &self,
        now: std::time::Duration,
    ) -> Option<crate::long_run::LongRun> {
        let period = self.bitmap_daemon_sleep()?;
        Some(crate::long_run::LongRun::every(period, now).unsliced())
    }

    /// md's bitmap daemon as a thread of its own: its schedule
    /// ([`Array::bitmap_daemon_schedule`]) driven on `clock`. Returns when
    /// the array or its bitmap is gone. A served array runs its passes on
    /// its poll thread instead (`LiveArray::poll`); the simulator runs this
    /// as a task on its virtual clock. A pass that cannot write the bitmap
    /// keeps its bits; the next tries again.
    pub fn bitmap_daemon_thread(weak: std::sync::Weak<Array>, clock: raidlab_core::SharedClock) {
        use crate::long_run::{EachStep, Stepped};
        let Some(mut run) = weak
            .upgrade()
            .and_then(|a| a.bitmap_daemon_schedule(clock.now()))
        else {
            return;
        };
        let gone = std::cell::Cell::new(false);
        let mut passes = EachStep(|r: std::ops::Range<u64>| {
            match weak.upgrade() {
                Some(array) => {
                    let _ = array.bitmap_daemon_pass();
                    // Whether the bitmap is still there, looked at under
                    // its lock before the run sleeps again (task-aware: in
                    // the simulator a request writing the bitmap holds the
                    // daemon until it is done, as it holds md's).
                    gone.set(array.bitmap_daemon_sleep().is_none());
                }
                None => gone.set(true),
            }
            Ok(Stepped {
                end: r.end,
                work: 0,
            })
        });
        let _ = run.drive(
            &*clock,
            &|| gone.get() || weak.strong_count() == 0,
            &mut passes,
        );
    }

    fn daemon_pass(&self) -> Result<u64> {
        let Some(intent) = self.intent() else {
            return Ok(0);
        };
        let degraded = self.keeps_bits();
        let mut st = intent.state.lock();
        let st = &mut *st;
        let cleared = st.daemon.pass(&mut st.bitmap, degraded)?;
        if cleared.is_empty() {
            return Ok(0);
        }
        let written = self
            .flush_members_now()
            .and_then(|()| self.flush_other_geometry(st))
            .and_then(|()| self.write_bitmap(st));
        if let Err(e) = written {
            // The bits stay as the members' copies have them.
            for &c in &cleared {
                st.bitmap.set(c)?;
            }
            return Err(e);
        }
        st.cleared += cleared.len() as u64;
        Ok(cleared.len() as u64)
    }

    /// A bitmap shared past this array's roles (a served reshape's: the
    /// other geometry's members, a grow's new ones, a shrink's leaving
    /// ones; or every member behind the one volume of the read-only array
    /// of one started mid-reshape) has its devices flushed whole, each that
    /// is in service: writes through the other arrays sharing it must be
    /// durable before a bit covering them is cleared, as this array's own
    /// members' are. A bitmap of this array's alone: nothing more to do.
    fn flush_other_geometry(&self, st: &IntentState) -> Result<()> {
        let view = self.view();
        let n = view.present.len();
        if st.devices.iter().all(|(role, _, _)| *role < n) {
            return Ok(());
        }
        for (role, dev, _) in &st.devices {
            if *role >= n || self.member_live(&view, *role) {
                dev.flush()?;
            }
        }
        Ok(())
    }

    /// Whether the write-intent bitmap marks any chunk of member range `[at,
    /// at+n)` dirty (bytes of the data area). True without a bitmap, or where
    /// it counts array sectors (RAID 10): nothing says the range is clean.
    pub(super) fn member_range_dirty(&self, at: u64, n: u64) -> bool {
        if self.rules.bitmap == crate::level::BitmapUnit::ArraySectors || n == 0 {
            return true;
        }
        let range = [(at / 512, (at + n).div_ceil(512) - at / 512)];
        self.with_bitmap_held(|bm| {
            crate::bitmap_daemon::chunks_of(&range, bm.sb.chunk_sectors(), bm.chunks())
                .into_iter()
                .any(|c| bm.is_dirty(c))
        })
        .unwrap_or(true)
    }

    /// How often md's bitmap daemon passes over this array's bitmap (`None`
    /// without one).
    pub fn bitmap_daemon_sleep(&self) -> Option<std::time::Duration> {
        self.with_bitmap_held(|b| crate::bitmap_daemon::Daemon::sleep(b))
    }

    /// Write the bitmap as it is now to every device that keeps a copy: one
    /// plan, all writes, then all flushes. A device that fails is taken out
    /// as md does (its bitmap is stale) and the rest are written again, so
    /// every device left has the bits durably before a write they cover goes
    /// out.
    fn write_bitmap(&self, st: &mut IntentState) -> Result<()> {
        let IntentState {
            bitmap: bm,
            devices,
            ..
        } = st;
        let view = self.view();
        let mut dropped = vec![false; devices.len()];
        loop {
            let mut table: Vec<Option<Arc<dyn Volume>>> = Vec::new();
            let mut which: Vec<usize> = Vec::new();
            let mut writes = crate::metadata_plan::DeviceWrites::default();
            for (i, (role, dev, sb)) in devices.iter().enumerate() {
                let rebuilding = view.recovery.as_ref().is_some_and(|r| r.role == *role);
                // A role past this array's (the other geometry's of a
                // served reshape, sharing the bitmap) is written too: the
                // bits must be on every member md will read them from.
                let ours = *role < view.present.len();
                if dropped[i] || (ours && !rebuilding && !self.member_live(&view, *role)) {
                    continue;
                }
                let (at, bytes) = bm.placed(sb).map_err(|e| e.on_device(dev.name()))?;
                writes.push(table.len(), at, &bytes);
                table.push(Some(Arc::clone(dev)));
                which.push(i);
            }
            let Err(failed) = self.run_device_writes(&writes, &table) else {
                return Ok(());
            };
            if failed.members.is_empty() {
                return Err(*failed.error);
            }
            for &t in &failed.members {
                let Some(&i) = which.get(t) else {
                    return Err(*failed.error);
                };
                dropped[i] = true;
                let role = devices[i].0;
                if role >= view.present.len() {
                    // Not this array's to take out: the other side's
                    // failure, which that side and the walk act on.
                    return Err(*failed.error);
                }
                // md fails a member whose bitmap cannot be written; the write
                // goes on without it if the array survives that.
                if view.recovery.as_ref().is_some_and(|r| r.role == role) {
                    self.fail_recovery();
                    continue;
                }
                self.take_out(role, &view);
            }
            if !self.geometry.survives(&self.missing_now()) {
                return Err(*failed.error);
            }
        }
    }

    /// A write to an array with a partial parity log: whole sectors only (a
    /// partial sector is merged with what the array holds), in pieces that are
    /// either one partial stripe or a run of whole stripes, so every member's
    /// share of a piece fits one log write.
    pub(super) fn write_logged(
        &self,
        log: &PartialParityLog,
        buf: &[u8],
        offset: u64,
    ) -> Result<()> {
        let end = offset + buf.len() as u64;
        let (a, b) = (offset / 512 * 512, end.div_ceil(512) * 512);
        if (a, b) != (offset, end) {
            let _only = self.merging.write();
            let mut merged = vec![0u8; (b - a) as usize];
            self.read_direct(&mut merged[..512], a)?;
            let tail = merged.len() - 512;
            self.read_direct(&mut merged[tail..], b - 512)?;
            merged[(offset - a) as usize..(end - a) as usize].copy_from_slice(buf);
            return self.write_logged_sectors(log, &merged, a);
        }
        let _shared = self.merging.read();
        self.write_logged_sectors(log, buf, offset)
    }

    /// [`Array::write_logged`] of whole sectors.
    pub(super) fn write_logged_sectors(
        &self,
        log: &PartialParityLog,
        buf: &[u8],
        offset: u64,
    ) -> Result<()> {
        let end = offset + buf.len() as u64;
        let stripe = self.geometry.chunk_bytes * self.geometry.data_disks() as u64;
        let mut pos = offset;
        while pos < end {
            let next = if pos % stripe != 0 || end - pos < stripe {
                (pos / stripe + 1) * stripe
            } else {
                let whole = (end - pos) / stripe;
                pos + whole.min(LOGGED_STRIPES) * stripe
            };
            let n = next.min(end) - pos;
            let start = (pos - offset) as usize;
            self.write_piece(&buf[start..start + n as usize], pos, WriteLog::Ppl(log))?;
            pos += n;
        }
        Ok(())
    }

    /// A write to an array with a journal: whole 4 KiB pages (a partial page is
    /// merged with what the array holds), in pieces that always fit the ring.
    pub(super) fn write_journaled(&self, journal: &Journal, buf: &[u8], offset: u64) -> Result<()> {
        let end = offset + buf.len() as u64;
        let (a, b) = (offset / 4096 * 4096, end.div_ceil(4096) * 4096);
        if (a, b) != (offset, end) {
            let mut merged = vec![0u8; (b - a) as usize];
            self.read_direct(&mut merged[..4096], a)?;
            let tail = merged.len() - 4096;
            self.read_direct(&mut merged[tail..], b - 4096)?;
            merged[(offset - a) as usize..(end - a) as usize].copy_from_slice(buf);
            return self.write_journaled(journal, &merged, a);
        }
        let step = journal.max_piece().min(self.piece);
        let mut pos = offset;
        while pos < end {
            let n = step.min(end - pos);
            let start = (pos - offset) as usize;
            self.write_piece(
                &buf[start..start + n as usize],
                pos,
                WriteLog::Journal(journal),
            )?;
            pos += n;
        }
        Ok(())
    }

    /// Flush every live member. One that cannot make its writes durable is
    /// taken out, as after a failed write, and the others flushed again: an
    /// error only when the array cannot serve its data without it. (The
    /// journal flushes before it reclaims space: a member failing there
    /// must not fail the journal, found by the torture harness, seed 1
    /// run 10 with --skip-known-gaps.)
    pub(super) fn flush_members(&self) -> Result<()> {
        // Each round takes at least one member out; bounded all the same
        // (a rebuild target that fails stays in the membership until its
        // rebuild ends).
        for _ in 0..=self.failed.len() {
            let view = self.view();
            let live = self.live_in(&view);
            let roles: Vec<usize> = (0..view.members.len())
                .filter(|&r| (live[r] || rebuilding(&view) == Some(r)) && view.members[r].is_some())
                .collect();
            let f = match self.run_flush_plan(&view, &roles) {
                Ok(()) => return Ok(()),
                Err(f) => f,
            };
            if f.members.is_empty() || f.members.iter().any(|r| !roles.contains(r)) {
                return Err(*f.error);
            }
            for &r in &f.members {
                self.take_out(r, &view);
            }
            if !self.geometry.survives(&self.missing_now()) {
                let mut e = *f.error;
                e.kind = ErrorKind::Unrecoverable;
                return Err(e);
            }
        }
        Err(Error::new(
            ErrorKind::Io,
            Op::Flush,
            "members kept failing their flushes: the writes are not known durable",
        )
        .on_device(&self.name))
    }

    /// Flush the members in `roles` that are in service, as one plan (their
    /// flushes overlap). A failure names the roles that failed, as a log
    /// step's failure (nothing of the write that needed it was written yet).
    pub(super) fn flush_roles(&self, roles: &[usize]) -> Result<(), Failed> {
        if roles.is_empty() {
            return Ok(());
        }
        let view = self.view();
        // A member taken out since it wrote is not in service: its writes
        // no longer count, and flushing it would fail again at every retry
        // (a PPL write on a RAID 5 with a failed member looped forever on
        // it, found by the torture harness).
        let live = self.live_in(&view);
        let roles: Vec<usize> = roles
            .iter()
            .copied()
            .filter(|&r| live.get(r).copied().unwrap_or(false) || rebuilding(&view) == Some(r))
            .collect();
        self.run_flush_plan(&view, &roles).map_err(|mut f| {
            // As a failed write of the log step: the member's writes are not
            // durable, so it is taken out as after a failed write.
            f.kind = IoKind::Write;
            f.log = true;
            f
        })
    }

    pub(super) fn run_flush_plan(&self, view: &Membership, roles: &[usize]) -> Result<(), Failed> {
        let plan = Plan::flushes(
            roles
                .iter()
                .copied()
                .filter(|&r| view.members.get(r).is_some_and(Option::is_some)),
        );
        if plan.steps.is_empty() {
            return Ok(());
        }
        let Err(mut failed) = self.executor.run(
            &plan,
            &view.members,
            self.engine,
            UserBuf::Write(&[]),
            crate::exec::Hooks::NONE,
        ) else {
            return Ok(());
        };
        // A rebuild's target that cannot make its writes durable fails the
        // rebuild, not the array: it is not in service.
        if let (Some(role), Some(rec)) = (rebuilding(view), view.recovery.as_ref()) {
            if failed.members.contains(&role) {
                rec.failed.store(true, std::sync::atomic::Ordering::Release);
                failed.members.retain(|&r| r != role);
                if failed.members.is_empty() {
                    return Ok(());
                }
            }
        }
        Err(failed)
    }

    /// Carry out a device-space metadata plan (bitmap, logs) on `table` with
    /// this array's executor.
    pub(super) fn run_device_writes(
        &self,
        writes: &crate::metadata_plan::DeviceWrites,
        table: &Members,
    ) -> Result<(), Failed> {
        if writes.is_empty() {
            return Ok(());
        }
        self.executor.run(
            &writes.plan(),
            table,
            self.engine,
            UserBuf::Write(writes.bytes()),
            crate::exec::Hooks::NONE,
        )
    }
}

/// The role a rebuild (not a replacement, whose tee is flushed with the
/// member it copies) is writing in `view`, while it has not failed.
pub(super) fn rebuilding(view: &Membership) -> Option<usize> {
    view.recovery
        .as_ref()
        .filter(|r| !r.replacing() && !r.failed())
        .map(|r| r.role)
}
