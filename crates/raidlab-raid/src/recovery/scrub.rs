//! Check, repair and resync (md's scrub): compare parity and mirror copies
//! with the data, count mismatches as md's mismatch_cnt, rewrite what differs
//! (repair, resync), and say what a degraded array could and could not check.
//! It decides what a scrub compares and rewrites; a rebuild is `super`'s, and
//! what a lost member held comes from a rebuild plan; the page comparisons
//! themselves are `compare`'s.

use super::compare::{compare_mirror_run, scrub_parity};
use super::report::ScrubReport;
use super::*;
use crate::recovery_plan::{
    plan_rewrites, plan_scrub_mirrors_skipping, plan_scrub_parity, scrub_can_compare, ScrubWalk,
};
use raidlab_core::IoKind;

/// The longest step buffer a thread keeps for its next scrub: a check of
/// a few members' 2 MiB steps fits; a larger one is freed as before.
const KEEP_BYTES: usize = 64 << 20;

thread_local! {
    static KEPT: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A scrub's step buffer, empty as a new one and kept on the thread for
/// the next scrub. A fresh allocation of a whole step per scrub was the
/// kernel's page faults and zeroing on every check (the torture harness
/// checks after most restarts: about 3% of its run). Its length starts at
/// 0, so every byte the scrub uses is zeroed by its own `resize`, as with a
/// new `Vec`: nothing of an earlier scrub shows through.
struct StepBuf(Vec<u8>);

impl StepBuf {
    fn take() -> StepBuf {
        let mut b = KEPT.try_with(|k| k.take()).unwrap_or_default();
        b.clear();
        StepBuf(b)
    }
}

impl Drop for StepBuf {
    fn drop(&mut self) {
        let b = std::mem::take(&mut self.0);
        if b.capacity() <= KEEP_BYTES {
            let _ = KEPT.try_with(|k| k.replace(b));
        }
    }
}

impl Assembly {
    /// Make parity and mirrors consistent with the data (md's resync), resuming at
    /// the superblock's resync offset, then mark the array clean. A degraded
    /// array with redundancy left is resynced with what is left (md resyncs a
    /// RAID 6 with one member missing: the parity left is made to agree with the
    /// data served); see [`Assembly::scrub`] for what is refused.
    pub fn resync(
        &mut self,
        opts: RunOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ScrubReport> {
        if self.in_sync() {
            return Err(Error::invalid(
                "the array is already in sync (clean): nothing to resync; use `raidlab check` to verify it",
            ));
        }
        self.rewind_rebuilds()?;
        let start = self
            .members
            .iter()
            .filter(|m| m.state == MemberState::Active)
            .map(|m| m.sb.resync_offset)
            .max()
            .unwrap_or(0);
        let report = self.scrub_from(
            start.saturating_mul(SECTOR),
            true,
            true,
            None,
            opts,
            progress,
        )?;
        // A degraded resync leaves the bits (and events_cleared) alone: the
        // missing member still lacks every write they mark.
        self.clear_bitmap_if_complete(true, self.events + 1);
        self.commit(|sb| sb.resync_offset = u64::MAX)?;
        Ok(report)
    }

    /// Read everything and compare parity/mirrors with the data; with `repair`,
    /// rewrite what differs (RAID 6 locates a single corrupted block from P+Q and
    /// corrects the data itself).
    ///
    /// A degraded array is checked with the redundancy it has left, as md does:
    /// RAID 6 with one member missing against the one syndrome left per stripe
    /// (repair rewrites that parity, never data), mirrors by comparing the copies
    /// left (runs with one copy are skipped and counted). The report says what
    /// could not be checked. Refused when nothing is left to compare (RAID 4/5
    /// with a member missing, RAID 6 with two, mirrors down to one copy).
    pub fn scrub(
        &mut self,
        repair: bool,
        opts: RunOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ScrubReport> {
        let unsynced = !self.in_sync();
        if repair && unsynced {
            // After a crash a stripe may hold new data beside old parity: a
            // repair would "correct" data (RAID 6 locates a block from P+Q)
            // where only parity is behind. md resyncs such an array first.
            return Err(Error::new(
                ErrorKind::Refused,
                Op::Write,
                "the array has not been resynced since it was last stopped uncleanly: stripes written at the crash may hold new data beside old parity, and repair could rewrite good data; run `raidlab resync` with the same members (it recomputes parity from the data, as md does after a crash), then check",
            ));
        }
        let mut report = self.scrub_from(0, repair, false, None, opts, progress)?;
        report.unsynced = unsynced;
        Ok(report)
    }

    /// [`Assembly::scrub`] of an array that serves I/O meanwhile: each step
    /// holds the stripe locks of what it reads, compares and rewrites, so no
    /// write of `running` lands in the middle of it.
    pub fn scrub_running(
        &mut self,
        running: &Array,
        repair: bool,
        opts: RunOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ScrubReport> {
        self.scrub_from(0, repair, false, Some(running), opts, progress)
    }

    #[allow(clippy::too_many_arguments)]
    fn scrub_from(
        &mut self,
        start: u64,
        repair: bool,
        resync: bool,
        running: Option<&Array>,
        opts: RunOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ScrubReport> {
        // A member the running array took out (a write to it failed) is
        // still in the assembly until it is recorded faulty, and its blocks
        // may be stale: it is missing for the scrub too, never read, never
        // repaired from.
        let mut missing = self.missing();
        for r in running.map(Array::failed_members).unwrap_or_default() {
            if !missing.contains(&r) {
                missing.push(r);
            }
        }
        missing.sort_unstable();
        self.scrubbable_without(resync, &missing)?;
        // Missing roles have no area: nothing is read from or written to them.
        let areas: Vec<Option<Arc<dyn Volume>>> = self
            .slots
            .iter()
            .enumerate()
            .map(|(r, s)| {
                s.filter(|_| !missing.contains(&r))
                    .map(|i| self.area(i))
                    .transpose()
            })
            .collect::<Result<_>>()?;
        let names: Vec<String> = self
            .slots
            .iter()
            .enumerate()
            .map(|(role, s)| match s {
                Some(i) => self.members[*i].device.path.clone(),
                None => format!("(missing role {role})"),
            })
            .collect();
        if !self.geometry.is_parity() {
            return self.scrub_mirrors(
                start, repair, resync, running, &areas, &names, missing, opts, progress,
            );
        }
        let total = self.geometry.member_bytes;
        let step = self.scrub_step(resync, opts.step_bytes);
        let first = align_down(&self.geometry, start);
        let mut run = schedule(&opts, &[(first, total)], step);
        let present: Vec<bool> = areas.iter().map(Option::is_some).collect();
        let mut report = ScrubReport::new(repair, missing);
        let mut kept = StepBuf::take();
        let buf = &mut kept.0;
        let bad = self.bad_blocks()?;
        progress(Progress { done: first, total });
        while let Some(next) = run.peek() {
            let (pos, n) = (next.start, next.end - next.start);
            if stopped(&opts) {
                return self.stop_scrub(&areas, resync, pos);
            }
            if !self.needs_resync(resync, pos, n) {
                run.advance(pos + n, 0);
                progress(Progress {
                    done: pos + n,
                    total,
                });
                continue;
            }
            // Ranges a member's bad-block log lists are not read: the stripe
            // is compared without that member where redundancy allows.
            let mut step_present = present.clone();
            for (role, p) in step_present.iter_mut().enumerate() {
                if *p && bad.as_ref().is_some_and(|b| b.hit(role, pos, n).is_some()) {
                    *p = false;
                    report.bad_block_bytes += n;
                }
            }
            let step_missing: Vec<usize> = (0..step_present.len())
                .filter(|&r| !step_present[r])
                .collect();
            if step_present != present && !scrub_can_compare(&self.geometry, &step_missing) {
                if repair {
                    let _held = running.map(|a| a.hold_member_range(pos, n)).transpose()?;
                    self.rewrite_listed(bad.as_ref(), &areas, &step_present, pos, n)?;
                }
                report.unchecked_array_bytes += n * self.geometry.data_disks() as u64;
                run.advance(pos + n, 0);
                progress(Progress {
                    done: pos + n,
                    total,
                });
                continue;
            }
            let present = &step_present;
            let _held = running.map(|a| a.hold_member_range(pos, n)).transpose()?;
            let len = n as usize;
            let plan = plan_scrub_parity(&self.geometry, present, pos, n)?;
            // A missing role's part is never read; scrub_parity ignores it.
            buf.resize(areas.len() * len, 0);
            if let Err(f) = run_failed(self.executor().as_ref(), &plan, &areas, UserBuf::Read(buf))
            {
                if f.kind != IoKind::Read || f.members.is_empty() {
                    return Err(*f.error);
                }
                // As md does during a sync: rebuild each page that cannot be
                // read from the others and write it back. Page by page, as
                // md's stripe handling goes (and as a disk with 4 KiB
                // physical sectors loses them): during a resync the parity
                // of a stripe the crash interrupted is not to be trusted, so
                // rebuilding the whole step from it would rewrite readable
                // data of other stripes with what the torn parity says.
                for &role in &f.members {
                    let own = &mut buf[role * len..(role + 1) * len];
                    for (k, page) in own.chunks_mut(PAGE).enumerate() {
                        let at = pos + (k * PAGE) as u64;
                        let loc = Location {
                            member: role,
                            offset: at,
                        };
                        if reread(self.executor().as_ref(), loc, page, &areas).is_ok() {
                            continue;
                        }
                        let Ok(b) = self.repair_range(bad.as_ref(), role, at, page.len() as u64)
                        else {
                            return Err(*f.error);
                        };
                        page.copy_from_slice(&b);
                        report.read_errors_fixed += 1;
                    }
                }
            }
            report.bytes_scanned += n;
            let mut bufs: Vec<&mut [u8]> = buf.chunks_mut(len).collect();
            let fixes = scrub_parity(
                &self.geometry,
                &mut bufs,
                present,
                pos,
                &mut report,
                &names,
                repair,
                resync,
            );
            if repair && !fixes.is_empty() {
                let writes: Vec<_> = fixes
                    .iter()
                    .map(|&(role, off, k)| (role, off, role * len + (off - pos) as usize, k))
                    .collect();
                run_with(
                    self.executor().as_ref(),
                    &plan_rewrites(&writes, plan.locks),
                    &areas,
                    UserBuf::Write(buf),
                )?;
            }
            if repair {
                self.rewrite_listed(bad.as_ref(), &areas, present, pos, n)?;
            }
            // --max-rate is per member, as md's speed limits are: each step
            // reads `n` bytes of every member, the figure the progress shows.
            if run.advance(pos + n, n) && resync {
                crate::metadata_plan::flush_all(self.executor().as_ref(), &areas)?;
                let at = run.position() / SECTOR;
                self.commit(|sb| sb.resync_offset = at)?;
            }
            progress(Progress {
                done: pos + n,
                total,
            });
            run.wait(&*clock_of(&opts), &|| stopped(&opts));
        }
        if repair {
            crate::metadata_plan::flush_all(self.executor().as_ref(), &areas)?;
        }
        Ok(report)
    }
}

impl Assembly {
    /// Mirrors (RAID 1/10) are scrubbed by logical address: every copy of each
    /// page is compared with the first copy (md reads the first in-sync device and
    /// compares the others with it); `repair` copies the first over the others.
    /// Progress and checkpoints are in logical bytes scaled to member bytes.
    ///
    /// Degraded: only the copies left (`areas[role]` is Some) are read and
    /// compared; a run with a single copy left has nothing to compare and is
    /// skipped and counted (md's raid1/raid10 sync skips blocks with fewer than
    /// two in-sync copies the same way).
    #[allow(clippy::too_many_arguments)]
    fn scrub_mirrors(
        &mut self,
        start: u64,
        repair: bool,
        resync: bool,
        running: Option<&Array>,
        areas: &[Option<Arc<dyn Volume>>],
        names: &[String],
        missing: Vec<usize>,
        opts: RunOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ScrubReport> {
        let geo = self.geometry;
        let total = geo.array_bytes();
        let member_total = geo.member_bytes;
        // Resync offsets are member sectors; logical = member * data_disks for
        // mirrors' purposes (RAID 1: equal; RAID 10: members * chunks per copy).
        let scale = |logical: u64| -> u64 {
            ((logical as u128 * member_total as u128) / total.max(1) as u128) as u64
        };
        let unscale = |member: u64| -> u64 {
            ((member as u128 * total as u128) / member_total.max(1) as u128) as u64
        };
        let step = self.scrub_step(resync, opts.step_bytes);
        let first = align_down(&geo, unscale(start));
        let mut run = schedule(&opts, &[(first, total)], step);
        let mut report = ScrubReport::new(repair, missing);
        progress(Progress {
            done: scale(first),
            total: member_total,
        });
        let present: Vec<bool> = areas.iter().map(Option::is_some).collect();
        let mut kept = StepBuf::take();
        let buf = &mut kept.0;
        let bad = self.bad_blocks()?;
        while let Some(next) = run.peek() {
            let (pos, end) = (next.start, next.end);
            if stopped(&opts) {
                return self.stop_scrub(areas, resync, scale(pos));
            }
            if !self.needs_resync(resync, pos, end - pos) {
                run.advance(end, 0);
                progress(Progress {
                    done: scale(end),
                    total: member_total,
                });
                continue;
            }
            let _held = running
                .map(|a| a.hold_array_range(pos, end - pos))
                .transpose()?;
            let skip = |loc: Location, len: u64| {
                bad.as_ref()
                    .is_some_and(|b| b.hit(loc.member, loc.offset, len).is_some())
            };
            let scrub = plan_scrub_mirrors_skipping(&geo, &present, pos, end - pos, &skip)?;
            report.bad_block_bytes += scrub
                .runs
                .iter()
                .map(|r| r.skipped as u64 * r.len)
                .sum::<u64>();
            buf.resize(scrub.len, 0);
            let failed = match run_failed(
                self.executor().as_ref(),
                &scrub.plan,
                areas,
                UserBuf::Read(buf),
            ) {
                Ok(()) => Vec::new(),
                Err(f) if f.kind == IoKind::Read && !f.members.is_empty() => f.members,
                Err(f) => return Err(*f.error),
            };
            // Scanned: the runs compared, not those skipped for want of a copy.
            let mut compared = 0;
            let mut writes = Vec::new();
            for run in &scrub.runs {
                if run.copies.is_empty() {
                    // One copy left (survives() rules out none): nothing to
                    // compare it with, and nowhere to copy it to.
                    report.unchecked_array_bytes += run.len;
                    continue;
                }
                if run.copies.len() < run.all {
                    report.reduced_array_bytes += run.len;
                }
                compared += run.len;
                let n = run.len as usize;
                // Which copies read: a member that failed somewhere in the step
                // has its copy of this run read again on its own.
                let read: Vec<bool> = run
                    .copies
                    .iter()
                    .map(|&(loc, at)| {
                        !failed.contains(&loc.member)
                            || reread(self.executor().as_ref(), loc, &mut buf[at..at + n], areas)
                                .is_ok()
                    })
                    .collect();
                compare_mirror_run(run, buf, &read, &mut report, names, repair, &mut writes)?;
            }
            if !writes.is_empty() {
                run_with(
                    self.executor().as_ref(),
                    &plan_rewrites(&writes, scrub.plan.locks),
                    areas,
                    UserBuf::Write(buf),
                )?;
            }
            if repair {
                // A copy md's log lists is written from a good one and
                // forgotten, as md's repair does.
                for (_, k, locs) in geo.mirror_runs(pos, end - pos) {
                    for l in locs.iter().filter(|l| present[l.member] && skip(**l, k)) {
                        self.rewrite_listed_role(bad.as_ref(), l.member, l.offset, k)?;
                    }
                }
            }
            report.bytes_scanned += scale(compared);
            // Per member, in the member bytes the progress shows.
            if run.advance(end, scale(end) - scale(pos)) && resync {
                crate::metadata_plan::flush_all(self.executor().as_ref(), areas)?;
                let at = scale(run.position()) / SECTOR;
                self.commit(|sb| sb.resync_offset = at)?;
            }
            progress(Progress {
                done: scale(end),
                total: member_total,
            });
            run.wait(&*clock_of(&opts), &|| stopped(&opts));
        }
        if repair {
            crate::metadata_plan::flush_all(self.executor().as_ref(), areas)?;
        }
        Ok(report)
    }
}

impl Assembly {
    /// Before a resync that leaves out members being rebuilt (they are not
    /// among what it compares or rewrites): what they rebuilt before an
    /// unclean stop may lack writes that were in flight, and the resync may
    /// then settle those stripes on other contents. Their rebuild goes back
    /// to the first member byte the resync may rewrite (the bitmap's first
    /// dirty chunk; the start without a bitmap), recorded before the resync
    /// marks the array clean, so a crash between the two never leaves a
    /// rebuilt part that disagrees with a clean array. md resyncs after the
    /// recovery instead, so a second failure before that resync can flip a
    /// read between the old and the new contents; this order closes it at
    /// the cost of rebuilding the dirty part again.
    fn rewind_rebuilds(&mut self) -> Result<()> {
        let rebuilding = self.rebuilding();
        if rebuilding.is_empty() {
            return Ok(());
        }
        let mut changed = false;
        for (index, slot) in rebuilding {
            let Some(from) = self.resync_reaches(slot) else {
                continue;
            };
            let from = align_down(&self.geometry, from) / SECTOR;
            let m = &mut self.members[index];
            if m.sb.recovery_offset > from {
                m.sb.recovery_offset = from;
                changed = true;
            }
        }
        if changed {
            self.commit(|_| {})?;
        }
        Ok(())
    }

    /// The lowest byte of role `slot`'s data area a resync may rewrite, or
    /// `None` when it rewrites nothing there (a bitmap with no dirty chunk).
    fn resync_reaches(&self, slot: usize) -> Option<u64> {
        let Some(b) = self.bitmap.as_ref() else {
            return Some(0);
        };
        let mut ranges = b.dirty_ranges();
        if super::member_indexed_bitmap(self.geometry.level) {
            return ranges.next().map(|(sector, _)| sector * SECTOR);
        }
        // RAID 10's bitmap counts array sectors: a dirty range's copies on
        // this role may lie anywhere (the far copies in the member's second
        // part), so every run is mapped.
        let total = self.geometry.array_bytes();
        ranges
            .flat_map(|(sector, len)| {
                let at = (sector * SECTOR).min(total);
                let n = (len * SECTOR).min(total - at);
                self.geometry.mirror_runs(at, n)
            })
            .flat_map(|(_, _, locs)| locs)
            .filter(|l| l.member == slot)
            .map(|l| l.offset)
            .min()
    }

    /// Whether a resync has anything to compare now: complete, or degraded
    /// with some redundancy left (a RAID 1 or 10 copy, RAID 6's second
    /// parity). See [`Assembly::check_scrubbable`].
    pub(crate) fn resync_can_compare(&self) -> bool {
        self.check_scrubbable(true).is_ok()
    }

    /// Refuse a scrub or resync that has nothing to compare: RAID 0, one-member
    /// mirrors, and degraded arrays with no redundancy left (RAID 4/5 with a
    /// member missing, RAID 6 with two, mirrors where every block has one copy
    /// left). A degraded array that still has some redundancy is scrubbed with
    /// what is left (md does the same).
    pub(super) fn check_scrubbable(&self, resync: bool) -> Result<()> {
        self.scrubbable_without(resync, &self.missing())
    }

    /// [`Assembly::check_scrubbable`] with the roles in `missing` missing.
    fn scrubbable_without(&self, resync: bool, missing: &[usize]) -> Result<()> {
        let geo = &self.geometry;
        if geo.level == Level::Raid0 {
            return Err(Error::invalid("RAID 0 has no redundancy to check"));
        }
        if !geo.is_parity() && geo.raid_disks < 2 {
            return Err(Error::invalid(
                "a one-member array has no redundancy to check",
            ));
        }
        let missing = missing.to_vec();
        if missing.is_empty() {
            return Ok(());
        }
        let level = geo.level.name();
        if !geo.survives(&missing) {
            return Err(Error::new(
                ErrorKind::Refused,
                Op::Read,
                format!(
                    "the {level} array has failed: role(s) {missing:?} are missing, more than it can do without, so parts of it cannot even be read; give the missing member(s)"
                ),
            ));
        }
        if scrub_can_compare(geo, &missing) {
            return Ok(());
        }
        let why = if geo.is_parity() {
            "the parity left is the only source of the missing data, so there is nothing left to compare it with"
        } else {
            "every block has a single copy left, so there is nothing left to compare"
        };
        let todo = if resync && geo.is_parity() {
            "a resync cannot check or correct anything until the member is back: add a member (raidlab add) and rebuild it (rebuild --force if the array was not shut down cleanly: data rebuilt across a torn stripe write may be wrong), then resync or check"
        } else {
            "add a member (raidlab add), let it rebuild, then check again"
        };
        Err(Error::new(
            ErrorKind::Refused,
            Op::Read,
            format!("the {level} array is degraded (role(s) {missing:?} missing): {why}; {todo}"),
        ))
    }

    /// During a resync with a trustworthy bitmap, whether bytes `[pos, pos+n)` (in
    /// the bitmap's coordinates: member bytes, or array bytes for RAID 10) lie in a
    /// dirty chunk and so need work; without a bitmap everything does.
    fn needs_resync(&self, resync: bool, pos: u64, n: u64) -> bool {
        if resync && pos == 0 && self.bitmap.is_some() && planted!(BitmapResyncSkipsFirstChunk) {
            return false; // PLANTED BUG (tests only, `planted.rs`)
        }
        let Some(b) = self.bitmap.as_ref().filter(|_| resync) else {
            return true;
        };
        let first = b.chunk_of(pos / SECTOR);
        let last = b.chunk_of((pos + n).div_ceil(SECTOR).saturating_sub(1));
        (first..=last).any(|c| c >= b.chunks() || b.is_dirty(c))
    }

    /// Scrub step: whole chunks normally; with a bitmap-guided resync no larger
    /// than a bitmap chunk, so clean chunks are skipped (scrubs compare page by
    /// page and need no chunk alignment).
    fn scrub_step(&self, resync: bool, want: u64) -> u64 {
        let step = ScrubWalk::new(&self.geometry, want).step;
        match self.bitmap.as_ref().filter(|_| resync) {
            Some(b) => step.min((b.sb.chunk_sectors() * SECTOR).max(PAGE as u64)),
            None => step,
        }
    }

    /// Rewrite what member `role` should hold at `[pos, pos+n)` from the other
    /// members (a rebuild plan with `role` as its target), and return it.
    pub(crate) fn repair_range(
        &self,
        bad: Option<&BadBlocks>,
        role: usize,
        pos: u64,
        n: u64,
    ) -> Result<Vec<u8>> {
        let members = (0..self.slots.len())
            .map(|r| self.slots[r].map(|i| self.area(i)).transpose())
            .collect::<Result<Vec<_>>>()?;
        let live: Vec<bool> = members
            .iter()
            .enumerate()
            .map(|(r, m)| r != role && m.is_some())
            .collect();
        let mut out = vec![0u8; n as usize];
        // Around a source that fails to read too, where the level allows it
        // (RAID 6 with two unreadable blocks in a stripe rebuilds both from
        // the other two, as md's sync does); otherwise a second latent error
        // would fail the whole resync and take `role`'s member out.
        BadBlocks::rebuild_around(
            bad,
            &self.geometry,
            &live,
            role,
            pos,
            n,
            role,
            |plan| {
                run_failed(
                    self.executor().as_ref(),
                    &plan,
                    &members,
                    UserBuf::Read(&mut out),
                )
            },
            |_| {},
        )?;
        Ok(out)
    }

    /// Stop a scrub or resync: flush, save a resync checkpoint, report.
    fn stop_scrub(
        &mut self,
        areas: &[Option<Arc<dyn Volume>>],
        resync: bool,
        member_pos: u64,
    ) -> Result<ScrubReport> {
        crate::metadata_plan::flush_all(self.executor().as_ref(), areas)?;
        if resync {
            let at = member_pos / SECTOR;
            self.commit(|sb| sb.resync_offset = at)?;
        }
        Err(interrupted(
            if resync { "resync" } else { "scrub" },
            member_pos,
        ))
    }
}

/// Read one copy again on its own, as a plan of one read.
fn reread(
    exec: &dyn Executor,
    loc: Location,
    into: &mut [u8],
    areas: &[Option<Arc<dyn Volume>>],
) -> Result<()> {
    let plan = Plan::read_one(loc.member, loc.offset, into.len());
    run_with(exec, &plan, areas, UserBuf::Read(into))
}
