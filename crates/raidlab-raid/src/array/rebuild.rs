//! A rebuild or replacement of one role while the array serves: begun, stepped
//! under the stripe locks of its range (writes below its checkpoint reach the
//! new member, above it are left to it, across it split), finished by taking
//! over the role or aborted. It decides the order of a running rebuild against
//! writes; what a lost member holds is recomputed by `crate::reconstruct`, and
//! the superblocks are the assembly's to write.

use super::*;
use crate::badblocks::BadBlocks;
use crate::planner::Builders as _;
use crate::recovery_plan::{member_range_keys, plan_copy};

/// A member being rebuilt (or a replacement being copied) while the array
/// serves I/O. Everything below `done` (bytes of its data area) is current: the
/// rebuild wrote it under the stripe locks, and every write since has gone to
/// it too. Above `done` it holds nothing useful and is never read.
pub struct Recovery {
    pub(super) role: usize,
    pub(super) target: Arc<dyn Volume>,
    /// A replacement: the role stays in service on its old member meanwhile.
    /// Cleared for good if the old member leaves first: the copy then carries on
    /// as a rebuild (see [`Array::take_out`]).
    pub(super) replacing: AtomicBool,
    /// The member being replaced.
    pub(super) replaced: Option<Arc<dyn Volume>>,
    pub(super) done: AtomicU64,
    /// A write to the target failed: the rebuild must stop, the target is not
    /// usable.
    pub(super) failed: AtomicBool,
    /// Taking over the role (finish) and losing the old member (conversion to a
    /// rebuild) each move the role's partial parity log; this makes them take
    /// turns. Never held with the membership lock: a logged write holds its log
    /// and then reads the membership.
    pub(super) handover: std::sync::Mutex<()>,
    /// The target has taken over the role: the old member leaving changes
    /// nothing any more.
    pub(super) taken_over: AtomicBool,
    /// A re-added member (md's bitmap-based recovery): it holds the role's
    /// data except where the write-intent bitmap marks a chunk dirty, so a
    /// step over clean chunks copies nothing.
    pub(super) only_dirty: AtomicBool,
    /// Bytes of the target written so far.
    pub(super) copied: AtomicU64,
}

impl std::fmt::Debug for Recovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recovery")
            .field("role", &self.role)
            .field("target", &self.target.name())
            .field("replacing", &self.replacing())
            .field("done", &self.done())
            .field("failed", &self.failed())
            .finish()
    }
}

impl Recovery {
    pub fn role(&self) -> usize {
        self.role
    }
    /// Bytes of the member's data area rebuilt so far.
    pub fn done(&self) -> u64 {
        self.done.load(Ordering::Acquire)
    }
    /// Whether a write to the target failed (the rebuild cannot finish).
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }
    pub fn target(&self) -> &Arc<dyn Volume> {
        &self.target
    }
    /// Whether this copies a member still in service (a replacement), rather
    /// than rebuilding a missing one.
    pub fn replacing(&self) -> bool {
        self.replacing.load(Ordering::Acquire)
    }
    /// Rebuild only the chunks the write-intent bitmap marks dirty when each
    /// step comes to them (a re-added member: md's bitmap-based recovery).
    /// Set before the first step.
    pub fn only_dirty_chunks(&self) {
        self.only_dirty.store(true, Ordering::Release);
    }
    /// Bytes written to the target so far.
    pub fn copied(&self) -> u64 {
        self.copied.load(Ordering::Relaxed)
    }
}

/// What became of a replacement when the member it replaces left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Handover {
    /// It carries on as a rebuild of the role.
    Rebuild,
    /// It had taken over the role already.
    TakenOver,
    /// No replacement of that role runs (finished or stopped meanwhile).
    Unchanged,
}

/// Where a write falls relative to a rebuild's checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// No rebuild, or a replacement (its tee takes every write).
    None,
    /// Every stripe touched is rebuilt: the target must be written as a member.
    Below,
    /// No stripe touched is rebuilt yet: the rebuild will compute it later.
    Above,
    /// Both: split at this array offset and write each side on its own.
    Split(u64),
}

/// The volume a replacement runs under in its role: reads come from the old
/// member, writes go to both (above the copy's checkpoint the new one is
/// overwritten again by the copy, under the same stripe locks). The new one is
/// written even when the old one fails: if the old one leaves, the replacement
/// carries on as a rebuild that trusts everything below its checkpoint.
pub(super) struct Tee {
    pub(super) old: Arc<dyn Volume>,
    pub(super) recovery: Arc<Recovery>,
}

// Reads, sizes and views come from the old member (the default); every kind
// of write goes to both.
impl raidlab_core::Layer for Tee {
    fn below(&self) -> &dyn Volume {
        &*self.old
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let old = self.old.write_at(buf, offset);
        let new = self.tee(|t| t.write_at(buf, offset));
        self.outcome(old, new)
    }
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> Result<()> {
        let old = self.old.write_at_fua(buf, offset);
        let new = self.tee(|t| t.write_at_fua(buf, offset));
        self.outcome(old, new)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        let old = self.old.write_zeroes(offset, len);
        let new = self.tee(|t| t.write_zeroes(offset, len));
        self.outcome(old, new)
    }
    fn flush(&self) -> Result<()> {
        let old = self.old.flush();
        let new = self.tee(|t| t.flush());
        self.outcome(old, new)
    }
    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        let old = self.old.discard(offset, len);
        let new = self.tee(|t| t.discard(offset, len));
        self.outcome(old, new)
    }
    fn discard_zeroes(&self) -> bool {
        self.old.discard_zeroes() && self.recovery.target.discard_zeroes()
    }
}

impl Tee {
    /// Do `op` on the replacement unless it is lost already; a failure loses it.
    pub(super) fn tee(&self, op: impl FnOnce(&dyn Volume) -> Result<()>) -> Result<()> {
        if self.recovery.failed() {
            return Ok(());
        }
        let r = op(self.recovery.target.as_ref());
        if r.is_err() {
            self.recovery.failed.store(true, Ordering::Release);
        }
        r
    }

    /// While the old member serves the role, its result is the role's (a lost
    /// replacement is not the array's failure: the old member has the data).
    /// Once it has left, the replacement is the role and its result counts.
    pub(super) fn outcome(&self, old: Result<()>, new: Result<()>) -> Result<()> {
        if self.recovery.replacing() {
            old
        } else {
            new
        }
    }
}

/// A rebuild of an array in service as the long-run driver steps it: one
/// [`Array::recovery_step`] a step.
struct LiveSteps<'a> {
    array: &'a Array,
    rec: &'a Recovery,
    scratch: Vec<Vec<u8>>,
    stepped: &'a mut dyn FnMut(u64),
    checkpoint: &'a mut dyn FnMut(u64) -> Result<()>,
}

impl crate::long_run::Steps for LiveSteps<'_> {
    fn step(&mut self, range: std::ops::Range<u64>) -> Result<crate::long_run::Stepped> {
        let copied = self.rec.copied();
        let done =
            self.array
                .recovery_step(self.rec, range.end - range.start, &mut self.scratch)?;
        // Work is what was copied: a re-add's clean chunks cost no time
        // under the rate limit.
        Ok(crate::long_run::Stepped {
            end: done,
            work: self.rec.copied() - copied,
        })
    }

    fn checkpoint(&mut self, pos: u64) -> Result<()> {
        self.array.flush_recovery_target(self.rec)?;
        (self.checkpoint)(pos)
    }

    fn progress(&mut self, end: u64) {
        (self.stepped)(end)
    }
}

impl Array {
    /// Start rebuilding `role` onto `target` (its data area) while the array
    /// serves I/O, from `from` bytes into the area (a resumed rebuild; rounded
    /// down to a chunk). With `replacing`, the role stays in service on its
    /// current member and `target` becomes a copy of it (md's replace).
    /// Refused while another rebuild runs, for a role in service (unless
    /// replacing), and for a read-only array. On an array with a partial
    /// parity log, the new member's log must be attached first
    /// ([`Array::add_log_device`]).
    pub fn begin_recovery(
        &self,
        role: usize,
        target: Arc<dyn Volume>,
        from: u64,
        replacing: bool,
    ) -> Result<Arc<Recovery>> {
        let mut slot = self.membership.write().unwrap_or_else(|p| p.into_inner());
        // Who serves a role changes: no kept row is trusted across it.
        self.forget_kept();
        let view = slot.clone();
        let refuse = |why: String| Err(Error::invalid(why).on_device(&self.name));
        if role >= view.present.len() {
            return refuse(format!("no role {role} in this array"));
        }
        if let Some(r) = &view.recovery {
            return refuse(format!(
                "role {} is being rebuilt already: one rebuild at a time; wait for it to finish",
                r.role
            ));
        }
        if replacing && self.ppl.as_ref().is_some_and(|l| !l.copy_intact(role)) {
            return refuse(format!("internal: the replacement of role {role} needs its partial parity log attached first (Array::add_log_device)"));
        }
        if self.read_only || !target.is_writable() {
            return refuse(
                "the array or the new member is read-only: nothing can be rebuilt".into(),
            );
        }
        if target.size() < self.geometry.member_bytes {
            return refuse(format!(
                "the new member's data area is {} bytes but the array needs {}",
                target.size(),
                self.geometry.member_bytes
            ));
        }
        let live = self.member_live(&view, role);
        if replacing && !live {
            return refuse(format!(
                "role {role} is not in service: nothing to replace; add a member to rebuild it"
            ));
        }
        if !replacing && live {
            return refuse(format!(
                "role {role} is in service: fail it first, or replace it"
            ));
        }
        let unit = self.geometry.chunk_bytes.max(4096);
        let rec = Arc::new(Recovery {
            role,
            target: target.clone(),
            replacing: AtomicBool::new(replacing),
            replaced: if replacing {
                view.members[role].clone()
            } else {
                None
            },
            done: AtomicU64::new(from.min(self.geometry.member_bytes) / unit * unit),
            failed: AtomicBool::new(false),
            handover: std::sync::Mutex::new(()),
            taken_over: AtomicBool::new(false),
            only_dirty: AtomicBool::new(false),
            copied: AtomicU64::new(0),
        });
        let mut next = Membership {
            members: view.members.clone(),
            present: view.present.clone(),
            recovery: Some(rec.clone()),
        };
        if let Some(old) = rec.replaced.clone() {
            next.members[role] = Some(Arc::new(Tee {
                old,
                recovery: rec.clone(),
            }));
        } else {
            next.present[role] = false;
            next.members[role] = Some(target);
        }
        *slot = Arc::new(next);
        Ok(rec)
    }

    /// The rebuild running, if any.
    pub fn recovery(&self) -> Option<Arc<Recovery>> {
        self.view().recovery.clone()
    }

    /// Run the rebuild `rec` from where `run` stands to its end, by
    /// `run`'s driver ([`LongRun::drive`](crate::long_run::LongRun::drive):
    /// its pacing on `clock`, its checkpoint cadence, its stop): each step
    /// is [`Array::recovery_step`] under its stripe locks; `stepped(done)`
    /// after each; at each checkpoint the target is flushed, then
    /// `checkpoint(done)` records it. Returns Ok(true) when complete (target
    /// flushed), Ok(false) when `quit` said so between steps (target
    /// flushed; where to record the position is the caller's). `raidlab
    /// serve`'s rebuild thread and the simulator's rebuild task run it; the
    /// offline rebuild steps its own pipeline by the same driver.
    pub fn drive_recovery(
        &self,
        rec: &Recovery,
        run: &mut crate::long_run::LongRun,
        clock: &dyn raidlab_core::Clock,
        quit: &dyn Fn() -> bool,
        stepped: &mut dyn FnMut(u64),
        checkpoint: &mut dyn FnMut(u64) -> Result<()>,
    ) -> Result<bool> {
        let mut steps = LiveSteps {
            array: self,
            rec,
            scratch: Vec::new(),
            stepped,
            checkpoint,
        };
        let ended = run.drive(clock, quit, &mut steps)?;
        self.flush_recovery_target(rec)?;
        if ended != crate::long_run::Driven::Done {
            return Ok(false);
        }
        if rec.failed() {
            return Err(Error::new(
                ErrorKind::Io,
                Op::Write,
                "a write to the member being rebuilt failed",
            )
            .on_device(rec.target.name()));
        }
        Ok(true)
    }

    /// Flush what a rebuild or replacement has written to its target, through
    /// this array's executor (a checkpoint may only record what is durable).
    pub fn flush_recovery_target(&self, rec: &Recovery) -> Result<()> {
        let table = [Some(Arc::clone(&rec.target))];
        self.executor
            .run(
                &Plan::flushes([0]),
                &table,
                self.engine,
                UserBuf::Write(&[]),
                crate::exec::Hooks::NONE,
            )
            .map_err(|f| f.error.on_device(rec.target.name()))
    }

    /// Rebuild the next `want` bytes (rounded to whole chunks) of the running
    /// rebuild's target, holding the stripe locks of that range so no write
    /// interleaves, and move its checkpoint past them. Returns the new
    /// checkpoint (the member's data size when done).
    pub fn recovery_step(
        &self,
        rec: &Recovery,
        want: u64,
        scratch: &mut Vec<Vec<u8>>,
    ) -> Result<u64> {
        let g = self.geometry;
        let unit = g.chunk_bytes.max(4096);
        let at = rec.done();
        if rec.failed() {
            return Err(Error::new(
                ErrorKind::Io,
                Op::Write,
                "a write to the member being rebuilt failed: the rebuild stopped (the member is not usable)",
            )
            .on_device(rec.target.name()));
        }
        if at >= g.member_bytes {
            return Ok(at);
        }
        let n = ((want / unit).max(1) * unit).min(g.member_bytes - at);
        let keys = member_range_keys(&g, rec.role, at, n)?;
        let _held = self.locks.lock(&keys);
        // Membership as of now, under the locks: whether the old member of a
        // replacement is still there to copy from.
        let view = self.view();
        // A re-added member already holds the chunks the bitmap has clean.
        // Checked under the step's stripe locks: a write that set a bit here
        // set it before taking them (so it is seen), and one that sets a bit
        // after this finds the checkpoint moved past it and writes the member
        // too (`write_piece` plans again).
        if rec.only_dirty.load(Ordering::Acquire) && !self.member_range_dirty(at, n) {
            rec.done.store(at + n, Ordering::Release);
            return Ok(at + n);
        }
        let mut live = self.live_in(&view);
        live[rec.role] = false;
        // The target is one more member for the executor, after the roles.
        let target = g.raid_disks;
        let mut members = view.members.clone();
        members.push(Some(rec.target.clone()));
        let mut out = std::mem::take(scratch.first_mut().unwrap_or(&mut Vec::new()));
        out.resize(n as usize, 0);
        let run = |plan: Plan, out: &mut [u8]| {
            self.executor.run(
                &plan,
                &members,
                self.engine,
                UserBuf::Read(out),
                crate::exec::Hooks::NONE,
            )
        };
        let copied = match &rec.replaced {
            // Copy from the member being replaced (read through its role's
            // tee), if it can be read.
            Some(_) if rec.replacing() => {
                match run(plan_copy(&g, rec.role, at, n, target)?, &mut out) {
                    Ok(()) => Ok(true),
                    Err(f) if f.kind == IoKind::Read => {
                        // Counted as any read error of the member; the blocks come
                        // from the other members instead.
                        let errors = self.read_errors[rec.role].fetch_add(1, Ordering::Relaxed);
                        if errors + 1 > MAX_READ_ERRORS {
                            self.take_out(rec.role, &view);
                        }
                        Ok(false)
                    }
                    Err(f) => Err(*f.error),
                }
            }
            _ => Ok(false),
        };
        let result = copied.and_then(|copied| {
            if copied {
                return Ok(());
            }
            let bad = self.bad_blocks.get();
            // A source that cannot be read counts against that member as any
            // read error does (taken out past MAX_READ_ERRORS).
            BadBlocks::rebuild_around(
                bad.as_deref(),
                &g,
                &live,
                rec.role,
                at,
                n,
                target,
                |plan| run(plan, &mut out),
                |m| {
                    let errors = self.read_errors[m].fetch_add(1, Ordering::Relaxed);
                    if errors + 1 > MAX_READ_ERRORS {
                        self.take_out(m, &view);
                    }
                },
            )
        });
        if scratch.is_empty() {
            scratch.push(Vec::new());
        }
        scratch[0] = out;
        match result {
            Ok(()) => {
                rec.copied.fetch_add(n, Ordering::Relaxed);
                rec.done.store(at + n, Ordering::Release);
                Ok(at + n)
            }
            Err(e) => {
                rec.failed.store(true, Ordering::Release);
                Err(e)
            }
        }
    }

    /// Hold the stripe locks of array range `[pos, pos+n)` (a scrub step): no
    /// write to those stripes runs until the guard is dropped.
    pub fn hold_array_range(&self, pos: u64, n: u64) -> Result<crate::locks::StripeGuard<'_>> {
        let all = vec![true; self.geometry.raid_disks];
        let keys = plan_write(&self.geometry, &all, pos, n)?.locks;
        Ok(self.locks.lock(&keys))
    }

    /// Hold the stripe locks of member range `[at, at+n)` (parity levels: the
    /// stripes there; every member has the same).
    pub fn hold_member_range(&self, at: u64, n: u64) -> Result<crate::locks::StripeGuard<'_>> {
        let keys = member_range_keys(&self.geometry, 0, at, n)?;
        Ok(self.locks.lock(&keys))
    }

    /// The rebuild finished (checkpoint at the end): its target takes the role
    /// (a replaced member leaves). Returns the member volume that left, if any.
    pub fn finish_recovery(&self, rec: &Recovery) -> Result<Option<Arc<dyn Volume>>> {
        let ready = |view: &Membership| {
            view.recovery
                .as_ref()
                .is_some_and(|r| std::ptr::eq(r.as_ref(), rec))
                && rec.done() >= self.geometry.member_bytes
                && !rec.failed()
        };
        let incomplete = || {
            Err(
                Error::invalid("internal: finishing a rebuild that is not complete")
                    .on_device(&self.name),
            )
        };
        if !ready(&self.view()) {
            return incomplete();
        }
        // Held until the target is published as the member: whoever sees
        // `taken_over` (under the turn) also sees the new membership.
        let _turn = rec.handover.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(log) = self.ppl.as_ref().filter(|_| rec.replacing()) {
            if !log.copy_intact(rec.role) {
                rec.failed.store(true, Ordering::Release);
                return Err(Error::new(
                    ErrorKind::Io,
                    Op::Write,
                    "a write to the replacement's partial parity log failed: it cannot take over",
                )
                .on_device(rec.target.name()));
            }
            // The old log stays a copy until the superblocks name the new
            // member (`settle_logs`).
            log.promote_copy(rec.role);
        }
        let mut slot = self.membership.write().unwrap_or_else(|p| p.into_inner());
        // Who serves a role changes: no kept row is trusted across it.
        self.forget_kept();
        let view = slot.clone();
        if !ready(&view) {
            return incomplete();
        }
        rec.taken_over.store(true, Ordering::Release);
        // Writes that planned with the target below its checkpoint used it as a
        // member; from here on it is one.
        let mut next = Membership {
            members: view.members.clone(),
            present: view.present.clone(),
            recovery: None,
        };
        next.members[rec.role] = Some(rec.target.clone());
        next.present[rec.role] = true;
        self.failed[rec.role].store(false, Ordering::Release);
        self.read_errors[rec.role].store(0, Ordering::Relaxed);
        self.corrected[rec.role].store(0, Ordering::Relaxed);
        *slot = Arc::new(next);
        Ok(rec.replaced.clone())
    }

    /// Stop a rebuild (failed, or cancelled): its target leaves; a replaced
    /// member stays in service.
    pub fn abort_recovery(&self) {
        // The log first, without the membership lock (see `Recovery::handover`).
        if let Some(rec) = self.view().recovery.as_ref().filter(|r| r.replacing()) {
            if let Some(log) = &self.ppl {
                log.drop_copy(rec.role);
            }
        }
        let mut slot = self.membership.write().unwrap_or_else(|p| p.into_inner());
        // Who serves a role changes: no kept row is trusted across it.
        self.forget_kept();
        let view = slot.clone();
        let Some(rec) = &view.recovery else {
            return;
        };
        rec.failed.store(true, Ordering::Release);
        let mut next = Membership {
            members: view.members.clone(),
            present: view.present.clone(),
            recovery: None,
        };
        // A replaced member serves alone again; a rebuilt role is missing again.
        next.members[rec.role] = rec.replaced.clone();
        *slot = Arc::new(next);
    }

    /// Where the write `[pos, pos+n)` falls against a running rebuild.
    pub(super) fn phase(&self, view: &Membership, pos: u64, n: u64) -> Phase {
        let Some(rec) = view
            .recovery
            .as_ref()
            .filter(|r| !r.replacing() && !r.failed())
        else {
            return Phase::None;
        };
        let g = &self.geometry;
        if !crate::planner::family_of(self.rules.plans).keeps_rows() {
            // Mirrors never read a copy to write one: writing the target above
            // its checkpoint is harmless (the rebuild rewrites it under the same
            // locks), so it is always written.
            return Phase::Below;
        }
        let done = rec.done();
        let stripe = g.chunk_bytes * g.data_disks() as u64;
        let (first, last) = (pos / stripe, (pos + n - 1) / stripe);
        if (last + 1) * g.chunk_bytes <= done {
            Phase::Below
        } else if first * g.chunk_bytes >= done {
            Phase::Above
        } else {
            // The rebuild advances in whole chunks.
            Phase::Split(done / g.chunk_bytes * stripe)
        }
    }
}
