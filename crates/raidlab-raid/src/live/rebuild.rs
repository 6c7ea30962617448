//! The rebuild of an array in service: starting it (after an add, a
//! replacement or a restart), running it on its own thread one step at a
//! time under the stripe locks of what each step rebuilds, pacing it, and
//! stopping it so that it saves its position. It decides when a rebuild runs
//! and what the superblocks say of it; what a step reads and computes is the
//! recovery planner's, never decided here.

// The parent's types and imports: this is the rest of its `impl LiveArray`.
use super::*;
use crate::long_run::LongRun;
use raidlab_layout::Geometry;

/// The schedule of a rebuild of an array in service from `from` bytes of
/// the member: [`REBUILD_STEP`] steps of whole chunks, at most `rate` bytes
/// a second, a checkpoint every 64 MiB, started `now`. The simulator's
/// rebuild runs by the same schedule.
pub fn rebuild_schedule(geo: &Geometry, from: u64, rate: Option<u64>, now: Duration) -> LongRun {
    let unit = geo.chunk_bytes.max(4096);
    LongRun::over(
        from..geo.member_bytes,
        REBUILD_STEP.div_ceil(unit) * unit,
        now,
    )
    .with_rate(rate)
    .with_checkpoints(CHECKPOINT)
}

impl LiveArray {
    /// Limit rebuilds started from now on to `rate` bytes of member area per
    /// second (`None`: as fast as the members allow).
    pub fn set_max_rate(&self, rate: Option<u64>) {
        *lock(&self.max_rate) = rate;
    }

    /// Start the rebuild of a member waiting for one (added with no rebuild,
    /// or left by a stop). Says what runs.
    pub fn rebuild(self: &Arc<Self>, max_rate: Option<u64>) -> Result<String> {
        *lock(&self.max_rate) = max_rate;
        let mut asm = lock(&self.asm);
        if let Some(r) = self.array().recovery() {
            return Ok(format!("role {} is being rebuilt", r.role()));
        }
        if asm.rebuilding().is_empty() {
            return Err(Error::invalid(
                "no member is being rebuilt: add a member into a missing role (raidlab add) or start a replacement (raidlab replace) first",
            ));
        }
        self.start_pending(&mut asm)?;
        match self.array().recovery() {
            Some(r) => Ok(format!("rebuilding role {}", r.role())),
            None => Err(Error::invalid("the rebuild did not start")),
        }
    }

    /// Resume where the superblocks were before the array was marked dirty:
    /// a rebuild that stopped cleanly at `offsets[index]` bytes continues there.
    pub fn resume(self: &Arc<Self>, offsets: &[(usize, u64)]) -> Result<()> {
        let mut asm = lock(&self.asm);
        for &(i, at) in offsets {
            if let Some(m) = asm.members.get_mut(i) {
                if matches!(m.state, MemberState::Rebuilding | MemberState::Replacing) {
                    m.sb.recovery_offset = at / SECTOR;
                }
            }
        }
        self.start_pending(&mut asm)
    }

    /// Start the first rebuild the superblocks wait for, when none runs.
    pub(super) fn start_pending(self: &Arc<Self>, asm: &mut Assembly) -> Result<()> {
        if self.array().recovery().is_some() || self.stop.load(Ordering::Acquire) {
            return Ok(());
        }
        if !self.array().is_writable() {
            return Ok(());
        }
        let Some((index, slot)) = asm.rebuilding().into_iter().next() else {
            return Ok(());
        };
        let m = &asm.members[index];
        let replacing = m.state == MemberState::Replacing;
        let from = asm.recovery_resumes_at(index);
        let target = asm.area(index)?;
        self.array()
            .add_intent_device(slot, m.device.volume.clone(), m.sb.clone())?;
        self.array()
            .add_log_device(slot, m.device.volume.clone(), m.sb.clone(), replacing)?;
        let rec = self.array().begin_recovery(slot, target, from, replacing)?;
        let re_add = m.sb.feature_map & raidlab_md::superblock::feature::RECOVERY_BITMAP != 0;
        if re_add {
            rec.only_dirty_chunks();
        }
        let status = Arc::new(Mutex::new(TaskStatus::new(
            match (replacing, re_add) {
                (true, _) => "replace",
                (false, true) => "re-add",
                (false, false) => "rebuild",
            },
            m.device.path.clone(),
            Some(slot),
            rec.done(),
            asm.geometry.member_bytes,
            lock(&self.clock).now(),
        )));
        let me = self.clone();
        let st = status.clone();
        let cancel = Arc::new(AtomicBool::new(false));
        let quit = cancel.clone();
        let thread = std::thread::Builder::new()
            .name(format!("rebuild role {slot}"))
            .spawn(move || me.run_rebuild(rec, index, slot, st, quit))
            .map_err(|e| {
                Error::new(
                    ErrorKind::Io,
                    Op::Write,
                    format!("cannot start the rebuild thread: {e}"),
                )
            })?;
        // A finished task's thread has ended; only its status is kept.
        *lock(&self.rebuild) = Some(RebuildTask {
            status,
            cancel,
            thread: Some(thread),
        });
        Ok(())
    }

    pub(super) fn run_rebuild(
        self: Arc<Self>,
        rec: Arc<Recovery>,
        index: usize,
        slot: usize,
        status: Arc<Mutex<TaskStatus>>,
        cancel: Arc<AtomicBool>,
    ) {
        let total = self.array().geometry().member_bytes;
        let clock = lock(&self.clock).clone();
        let rate = *lock(&self.max_rate);
        let mut run = rebuild_schedule(self.array().geometry(), rec.done(), rate, clock.now());
        let quit = || self.stop.load(Ordering::Acquire) || cancel.load(Ordering::Acquire);
        let outcome: Result<bool> = self
            .array()
            .drive_recovery(
                &rec,
                &mut run,
                &*clock,
                &quit,
                &mut |done| {
                    let mut st = lock(&status);
                    st.advance(done, clock.now());
                    st.follow(&rec);
                },
                &mut |done| lock(&self.asm).checkpoint_recovery(index, done),
            )
            .and_then(|complete| {
                if !complete {
                    // The position is worth keeping only at shutdown, when
                    // the connections are drained: stopped while the array
                    // goes on serving, the member would miss the writes from
                    // now on, so a later rebuild of it starts over.
                    let keep = self.stop.load(Ordering::Acquire);
                    lock(&self.asm)
                        .checkpoint_recovery(index, if keep { rec.done() } else { 0 })?;
                }
                Ok(complete)
            });
        let mut asm = lock(&self.asm);
        let result = outcome.and_then(|complete| {
            if !complete {
                self.array().abort_recovery();
                return Ok(false);
            }
            self.array().finish_recovery(&rec)?;
            asm.change_running(&self.array(), |a| a.complete_recovery(index, slot))?;
            // The superblocks name the new member: its log alone is the role's.
            self.array().settle_logs(slot);
            // Its bad-block log was cleared: reads use the whole member now.
            self.write_bad_blocks(&mut asm);
            Ok(true)
        });
        let mut st = lock(&status);
        st.running = false;
        st.follow(&rec);
        match result {
            Ok(true) => {
                st.advance(total, clock.now());
                drop(st);
                // RAID 6 with two roles to rebuild: the next one now.
                let _ = self.start_pending(&mut asm);
            }
            Ok(false) => {
                st.error = Some("stopped before the end; `raidlab rebuild` resumes it".into())
            }
            Err(e) => {
                self.array().abort_recovery();
                st.error = Some(e.to_string());
                drop(st);
                // Whatever becomes of the member, its rebuilt part stops
                // getting writes now: a later rebuild of it starts over.
                let _ = asm.checkpoint_recovery(index, 0);
                // The new member could not be written: md fails it.
                if matches!(
                    asm.members[index].state,
                    MemberState::Rebuilding | MemberState::Replacing
                ) && asm.change_running(&self.array(), |a| a.fail(index)).is_ok()
                {
                    let _ = self.start_pending(&mut asm);
                }
            }
        }
    }

    /// Stop the running rebuild and wait for it (it saves its position). The
    /// caller must not hold the assembly lock: the rebuild takes it to stop.
    pub(super) fn cancel_rebuild(&self) {
        let task = lock(&self.rebuild)
            .as_mut()
            .and_then(|t| t.thread.take().map(|h| (h, t.cancel.clone())));
        if let Some((t, cancel)) = task {
            cancel.store(true, Ordering::Release);
            let _ = t.join();
        }
    }
}
