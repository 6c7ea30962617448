//! Failure handling, the last stage of a request: a member whose I/O failed is
//! retried around (its blocks read or written from redundancy), rewritten from
//! redundancy when a read failed (md's read-error repair, counted as
//! corrected), or taken out of the array; a request fails only when the array
//! can no longer serve it. It decides what a failure means for membership,
//! and when a member taken out must be recorded faulty before a write goes on;
//! it never plans a request and never writes a superblock itself (the owner of
//! the superblocks does, through its [`Recorder`]).

use super::*;

/// The owner of a running array's superblocks (a started assembly, a served
/// array) recording the members the array took out as faulty, as
/// `Assembly::record_taken_out` does. Called from inside a request, with that
/// request's stripe locks held: it must never wait for a request, and its
/// owner must never write to the array while it holds the superblocks (the
/// call would wait for it).
pub type Recorder = Arc<dyn Fn(&Array) -> Result<()> + Send + Sync>;

impl Array {
    /// Who records a member taken out (`None`: nobody, and writes go on
    /// without waiting, as an array opened by a test or a tool that records
    /// them itself after each request).
    pub fn set_recorder(&self, recorder: Option<Recorder>) {
        *self.recorder.lock().unwrap_or_else(|p| p.into_inner()) = recorder;
    }

    /// Before a log the array keeps is written, or what it covered is let go:
    /// the members taken out so far are recorded faulty in the superblocks.
    /// md holds every stripe while a member's failure is not yet in its
    /// superblocks (`MD_SB_CHANGE_PENDING`) for this reason: a write planned
    /// around a member taken out leaves that member's blocks old and parity
    /// new, and a partial parity log entry or journal space is the only
    /// record of that. Let go of before the member is faulty on disk, a power
    /// cut assembles the member as active beside parity that disagrees with it
    /// (found by the torture harness with requests in flight together: seed 1
    /// run 1327). Writes under the bitmap need none of this (its daemon never
    /// clears a bit while a member is missing), nor under resync (an unclean
    /// stop resyncs everything).
    pub(super) fn record_take_outs(&self) -> Result<()> {
        let now = self.take_outs();
        if self.recorded.load(Ordering::Acquire) >= now {
            return Ok(());
        }
        let recorder = self
            .recorder
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let Some(recorder) = recorder else {
            return Ok(());
        };
        recorder(self)?;
        self.recorded.fetch_max(now, Ordering::AcqRel);
        Ok(())
    }

    /// Take `role` out after an I/O error; `seen` is the membership the failed
    /// request ran on, which says whose error it was.
    pub(super) fn take_out(&self, role: usize, seen: &Membership) {
        // The member's last writes may not have landed: its rows are not
        // what any kept row says.
        self.forget_kept();
        if let Some(rec) = seen.recovery.as_ref().filter(|r| r.role == role) {
            if !seen.present[role] {
                // The role's only volume was a rebuild target: the rebuild fails,
                // the role stays missing as it was.
                rec.failed.store(true, Ordering::Release);
                self.take_outs.fetch_add(1, Ordering::AcqRel);
                return;
            }
            // The member being replaced failed (through its tee, which records
            // a failure of the replacement itself).
            if self.replaced_member_leaves(rec) == Handover::TakenOver {
                // The replacement serves the role already (and got this write
                // through the tee): the old member's failure is not the role's.
                return;
            }
        } else if let Some(rec) = self.replacement_of(role, seen) {
            // The request ran on the membership from before the replacement
            // began (it held its stripe locks across the start, which takes
            // none) and wrote the old member directly. Its failure is the old
            // member's all the same: the copy must not go on reading it. The
            // copy cannot have passed these stripes (their locks are still
            // held), so it cannot have taken over either.
            self.replaced_member_leaves(&rec);
        }
        self.failed[role].store(true, Ordering::Release);
        self.take_outs.fetch_add(1, Ordering::AcqRel);
    }

    /// The replacement of `role` running now, when `seen` (a membership from
    /// before it began) had the member it copies from in that role.
    fn replacement_of(&self, role: usize, seen: &Membership) -> Option<Arc<Recovery>> {
        let now = self.view();
        let rec = now.recovery.as_ref().filter(|r| r.role == role)?;
        let old = rec.replaced.as_ref()?;
        let was = seen.members.get(role)?.as_ref()?;
        std::ptr::addr_eq(Arc::as_ptr(old), Arc::as_ptr(was)).then(|| rec.clone())
    }

    /// The member a replacement copies from leaves the array: as md does, the
    /// replacement carries on as an ordinary rebuild of the role from its
    /// checkpoint. Below the checkpoint it is current (the copy wrote it, and
    /// every write since went through the tee to it too); above, the rebuild
    /// computes it from the other members from now on.
    ///
    /// This must happen before the role is marked failed: a write that sees the
    /// role out must also see the rebuild, or it would skip the replacement below
    /// its checkpoint. And a failed write must call it before it lets go of its
    /// stripe locks, or the copy could take the old member's stale blocks there.
    pub(super) fn replaced_member_leaves(&self, rec: &Arc<Recovery>) -> Handover {
        let current =
            |view: &Membership| view.recovery.as_ref().is_some_and(|r| Arc::ptr_eq(r, rec));
        // Held until the new membership is published: a failing write that
        // waits for the turn returns only once the role is the rebuild's.
        let _turn = rec.handover.lock().unwrap_or_else(|p| p.into_inner());
        if rec.taken_over.load(Ordering::Acquire) {
            // Published before the turn was given up: the role is the
            // replacement's now.
            return Handover::TakenOver;
        }
        if !rec.replacing() || !current(&self.view()) {
            return Handover::Unchanged;
        }
        if let Some(log) = &self.ppl {
            // The new member's log is the role's now; the old member is gone.
            log.promote_copy(rec.role);
            log.drop_copy(rec.role);
        }
        let mut slot = self.membership.write().unwrap_or_else(|p| p.into_inner());
        // Who serves a role changes: no kept row is trusted across it.
        self.forget_kept();
        let view = slot.clone();
        if !current(&view) {
            // Stopped meanwhile: nothing to switch.
            return Handover::Unchanged;
        }
        // Cleared only under the membership lock, with the new membership
        // published in the same hold: the tee reports the replacement's result
        // once this is clear, so a write it acknowledges that way must never be
        // followed by a read that takes the old membership (the tee would read
        // the old member, which refused the write: a stale read).
        rec.replacing.store(false, Ordering::Release);
        let mut next = Membership {
            members: view.members.clone(),
            present: view.present.clone(),
            recovery: view.recovery.clone(),
        };
        next.present[rec.role] = false;
        next.members[rec.role] = Some(rec.target.clone());
        *slot = Arc::new(next);
        Handover::Rebuild
    }

    /// Take a member out of service now, as md's `--fail` does. Refused when the
    /// array could not serve its data without it.
    pub fn fail_member(&self, role: usize) -> Result<()> {
        if role >= self.failed.len() {
            return Err(
                Error::invalid(format!("no role {role} in this array")).on_device(&self.name)
            );
        }
        let mut missing = self.missing_now();
        if !missing.contains(&role) {
            missing.push(role);
        }
        if !self.geometry.survives(&missing) {
            return Err(Error::new(
                ErrorKind::Unrecoverable,
                Op::Write,
                format!("taking role {role} out would leave the array unable to serve its data (roles {missing:?} missing)"),
            )
            .on_device(&self.name));
        }
        let view = self.view();
        if let Some(rec) = view.recovery.as_ref().filter(|r| r.role == role) {
            if self.replaced_member_leaves(rec) == Handover::TakenOver {
                // The member asked for has been replaced already; the role
                // is served by its replacement, which stays.
                return Ok(());
            }
        }
        self.failed[role].store(true, Ordering::Release);
        Ok(())
    }

    /// Refuse a write once the members taken out are more than the level can
    /// lose: md marks such an array broken ("Cannot continue operation") and
    /// fails every write after, so that no write lands half on the members
    /// left (a stripe's data written without its parity, read back later
    /// through that parity as garbage). Reads go on where the members left
    /// can answer them.
    pub(super) fn refuse_when_failed(&self, op: Op, offset: u64, len: u64) -> Result<()> {
        // Nothing taken out: the common case costs a load per role.
        if self.failed.iter().all(|f| !f.load(Ordering::Acquire)) {
            return Ok(());
        }
        let missing = self.missing_now();
        if self.geometry.survives(&missing) {
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::Unrecoverable,
            op,
            format!(
                "the array has failed: role(s) {missing:?} are out, more than {} can lose, so it takes no more writes (md: \"Cannot continue operation\"); reads still answer where the members left can. Stop it and see `raidlab detail`",
                self.geometry.level.name()
            ),
        )
        .on_device(&self.name)
        .at(offset, len))
    }

    pub(super) fn fail_recovery(&self) {
        if let Some(r) = &self.view().recovery {
            r.failed.store(true, Ordering::Release);
        }
    }

    /// A member failed `kind` operations: reads are repaired from redundancy and
    /// the member's blocks rewritten (it stays in unless it keeps failing);
    /// writes take it out. Errs if the array can no longer serve the range.
    pub(super) fn handle_failure(
        &self,
        f: Failed,
        seen: &Membership,
        pos: u64,
        n: u64,
    ) -> Result<()> {
        if f.members.is_empty() {
            return Err(*f.error);
        }
        if f.kind == IoKind::Write {
            for &r in &f.members {
                self.take_out(r, seen);
            }
        } else {
            for &r in &f.members {
                if self.read_errors[r].fetch_add(1, Ordering::Relaxed) + 1 > MAX_READ_ERRORS {
                    self.take_out(r, seen);
                }
            }
        }
        self.survive_failure(f, pos, n)
    }

    /// After `f`'s members were dealt with: errs if the array can no longer
    /// serve the range; repairs what a read could not read.
    pub(super) fn survive_failure(&self, f: Failed, pos: u64, n: u64) -> Result<()> {
        let live = self.live();
        let mut without = live.clone();
        for &r in &f.members {
            without[r] = false;
        }
        let missing: Vec<usize> = (0..without.len()).filter(|&r| !without[r]).collect();
        if !self.geometry.survives(&missing) {
            let mut e = *f.error;
            e.kind = ErrorKind::Unrecoverable;
            e.message = format!(
                "{}; with role(s) {missing:?} unusable the array cannot serve this range",
                e.message
            );
            return Err(e);
        }
        if f.kind == IoKind::Read {
            for &r in f.members.iter().filter(|&&r| live[r]) {
                self.rewrite_from_redundancy(r, &without, pos, n)?;
            }
        }
        Ok(())
    }

    /// After a read of `[pos, pos+n)` served from redundancy because a member
    /// lists part of it as bad: on RAID 4/5/6, write the listed blocks back
    /// from what the others hold, and forget them once they read back right,
    /// as md's RAID 5 does with a listed block it has computed (it tries the
    /// rewrite unless a write to that member failed before). md's RAID 1/10
    /// only read around a listed copy, and so does raidlab.
    pub(super) fn heal_listed(&self, pos: u64, n: u64) {
        let Some(bad) = self.bad_blocks.get() else {
            return;
        };
        if !self.rules.heals_listed || self.read_only {
            return;
        }
        let live = self.live();
        let Ok(plain) = plan_read(&self.geometry, &live, pos, n, 0) else {
            return;
        };
        let mut roles: Vec<usize> = plain
            .reads()
            .filter(|op| bad.hit(op.member, op.offset, op.length).is_some())
            .map(|op| op.member)
            .filter(|&r| !self.bad_blocks.write_error_seen(r))
            .collect();
        // A role's pieces need not be next to each other in the plan (a read
        // over rows where it holds parity in between): sort, so that each
        // role is rewritten once.
        roles.sort_unstable();
        roles.dedup();
        for role in roles {
            let mut sources = live.clone();
            sources[role] = false;
            // The read was served already; a range the others cannot rebuild
            // stays listed, and a failed rewrite is dealt with inside.
            let _ = self.rewrite_from_redundancy(role, &sources, pos, n);
        }
    }

    /// Rebuild what member `role` holds for the array range `[pos, pos+n)` from
    /// the members in `sources` and write it back to `role` (md's read-error
    /// correction). Holds the range's stripe locks so no write interleaves. A
    /// failed rewrite takes the member out.
    pub(super) fn rewrite_from_redundancy(
        &self,
        role: usize,
        sources: &[bool],
        pos: u64,
        n: u64,
    ) -> Result<()> {
        // Whole sectors, all read from the others as they are now: a member
        // write of part of a sector is not what a disk does (it writes the
        // sector), and in a disk's cache such a piece could land over a
        // newer write of the rest of that sector at a power cut, leaving
        // bytes of two writes in one sector (torture seed 2 run 869).
        const SECTOR: u64 = 512;
        let start = pos - pos % SECTOR;
        let end = (pos + n)
            .div_ceil(SECTOR)
            .saturating_mul(SECTOR)
            .min(self.geometry.array_bytes());
        let (pos, n) = (start, end.saturating_sub(start));
        // Planned again, as a write is, when a member was taken out while
        // this waited for the stripe locks: the caller chose `sources`
        // before, and the write that held the locks may have taken a
        // source out after leaving its blocks stale (a parity it could not
        // update). Computed from those, the role's blocks were written
        // back wrong and read later as good data (torture seed 4 run 756:
        // Q taken out by a write-zeroes planned around a bad block, then a
        // read-error repair of another member rebuilt from that Q).
        let (plan, len, _held, view) = loop {
            let take_outs = self.take_outs();
            let view = self.view();
            let usable: Vec<bool> = sources
                .iter()
                .enumerate()
                .map(|(r, &s)| s && self.member_live(&view, r))
                .collect();
            let bad = self.bad_blocks.get();
            let (plan, len) = crate::badblocks::BadBlocks::repair_plan(
                bad.as_deref(),
                &self.geometry,
                &usable,
                role,
                pos,
                n,
            )
            .map_err(|e| e.on_device(&self.name).at(pos, n))?;
            let held = self.locks.lock(&plan.locks);
            // The membership once the locks are held (a rebuild that began
            // before cannot pass these stripes now; see `write_piece`).
            if self.is_current(&view, take_outs) {
                break (plan, len, held, view);
            }
            drop(held);
        };
        if !view.members[role].as_ref().is_some_and(|m| m.is_writable()) {
            return Ok(()); // read-only: the data was still served from redundancy
        }
        let mut data = vec![0u8; len];
        let run = |plan: &Plan, buf: &mut [u8]| {
            let result = self
                .executor
                .run(
                    plan,
                    &view.members,
                    self.engine,
                    UserBuf::Read(buf),
                    crate::exec::Hooks::NONE,
                )
                .map_err(|f| *f.error);
            // The block is rewritten: a kept row's page of it is not
            // trusted after.
            self.kept_after(plan, result.is_ok());
            result
        };
        // Rewrite, then read back: a disk remaps a bad sector on write, and a block
        // that still cannot be read afterwards means the member is failing (md
        // fails it the same way).
        let result = run(&plan, &mut data).and_then(|()| {
            let mut back = vec![0u8; len];
            let check = read_back(&plan);
            run(&check, &mut back)?;
            if check.reads().any(|o| {
                let r = o.buf.offset..o.buf.offset + o.buf.len;
                back[r.clone()] != data[r]
            }) {
                return Err(Error::new(
                    ErrorKind::Io,
                    Op::Read,
                    "rewritten block reads back wrong",
                )
                .on_device(self.name.clone()));
            }
            Ok(())
        });
        // The member bytes of `role` the rewrite wrote.
        let written = plan
            .writes()
            .filter(|w| w.member == role)
            .map(|w| (w.offset, w.length));
        match result {
            Ok(()) => {
                self.corrected[role].fetch_add(1, Ordering::Relaxed);
                // Written and read back: md forgets what its log listed there.
                for (at, n) in written {
                    self.bad_blocks.made_good(role, at, n);
                }
                Ok(())
            }
            Err(_) if self.bad_blocks.can_list(role) => {
                // md lists what it could not correct in the member's
                // bad-block log, one stripe unit (a page) at a time, and
                // keeps the member (it fails it only when the log cannot
                // take it, which the owner finds when it writes the log).
                // Listing the whole rewrite would leave the member unread
                // over all of it, and its other blocks unchecked by a scrub.
                let failing = failing_pages(&plan, role, &data, run);
                // What read back right after the rewrite is good now; the
                // pages that did not are listed again after it.
                for (at, n) in written {
                    self.bad_blocks.made_good(role, at, n);
                }
                for (at, n) in failing {
                    self.bad_blocks.listed(role, at, n);
                }
                Ok(())
            }
            Err(_) => {
                // The block cannot be rewritten, and there is no log to list
                // it in: md fails such a member.
                self.take_out(role, &view);
                Ok(())
            }
        }
    }
}

/// The pages of `role`'s writes in `plan` (a rewrite from redundancy that
/// failed somewhere) that do not read back as `data` holds them: unreadable,
/// or different. Each page is read on its own, so one bad sector costs its
/// page, not the whole rewrite. Adjacent pages come merged, in order.
fn failing_pages(
    plan: &Plan,
    role: usize,
    data: &[u8],
    run: impl Fn(&Plan, &mut [u8]) -> Result<()>,
) -> Vec<(u64, u64)> {
    // md's stripe unit (the page recovery's repair works in too; not
    // imported from there, which would make `array` and `recovery` import
    // each other).
    const PAGE: u64 = 4096;
    let mut back = vec![0u8; data.len()];
    let mut out: Vec<(u64, u64)> = Vec::new();
    for w in plan.writes().filter(|w| w.member == role) {
        let mut k = 0;
        while k < w.length {
            let n = (PAGE - (w.offset + k) % PAGE).min(w.length - k);
            let at = w.buf.offset + k as usize;
            let page = crate::plan::MemberOp {
                offset: w.offset + k,
                length: n,
                buf: crate::plan::Slice {
                    offset: at,
                    len: n as usize,
                    ..w.buf
                },
                ..*w
            };
            let r = at..at + n as usize;
            let good =
                run(&reads_of([&page]), &mut back).is_ok() && back.get(r.clone()) == data.get(r);
            if !good {
                match out.last_mut() {
                    Some(last) if last.0 + last.1 == w.offset + k => last.1 += n,
                    _ => out.push((w.offset + k, n)),
                }
            }
            k += n;
        }
    }
    out
}

/// A plan that reads back, into the same places of the caller's buffer,
/// everything `plan` writes.
fn read_back(plan: &Plan) -> Plan {
    reads_of(plan.writes())
}

/// A plan of one step that reads what the write operations `writes` write,
/// into the same places of the caller's buffer.
fn reads_of<'a>(writes: impl IntoIterator<Item = &'a crate::plan::MemberOp>) -> Plan {
    let reads = writes
        .into_iter()
        .map(|w| crate::plan::MemberOp {
            kind: IoKind::Read,
            ..*w
        })
        .collect();
    Plan {
        space: crate::plan::Space::Data,
        steps: vec![crate::plan::Step::Io(reads)],
        scratch: Vec::new(),
        locks: Vec::new(),
    }
}
