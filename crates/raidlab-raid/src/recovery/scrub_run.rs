//! A scrub's long run (md's check, repair and resync) over member areas: its
//! steps in order, each under the running array's stripe locks where an
//! array serves meanwhile, read, compared (`compare`), rewritten, paced and
//! checkpointed. What the run consults and changes besides the members (the
//! superblocks' resync checkpoint, the bitmap's dirty chunks, bad-block
//! logs) is its host's ([`ScrubHost`]): an assembly, or a running array on
//! its own (`scrub_array`: the simulator's arrays, which keep no
//! superblocks). It decides the order of a step's work and what a step
//! leaves out; it must never decide what differs (`compare` does), where
//! a layout puts a byte (`recovery_plan` does), nor the order of the steps,
//! their pacing, checkpoint cadence and stop (`crate::long_run`'s driver,
//! the one every long run uses, does).

use super::compare::{compare_mirror_run, scrub_parity};
use super::report::ScrubReport;
use super::*;
use crate::level::Family;
use crate::planner::Builders as _;
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

/// What a scrub consults and changes besides the member areas.
pub(super) trait ScrubHost {
    /// The ranges the members' bad-block logs list (md's), if any.
    fn bad_blocks(&self) -> Result<Option<BadBlocks>>;
    /// During a resync, whether `[pos, pos+n)` needs work (a bitmap's
    /// dirty chunks); a check or repair always does.
    fn needs_resync(&self, resync: bool, pos: u64, n: u64) -> bool;
    /// The step, for the `want` bytes the options ask.
    fn scrub_step(&self, resync: bool, want: u64) -> u64;
    /// A repair's step `[pos, pos+n)` left out listed ranges of roles
    /// `present` drops: rebuild and rewrite them, and unlist them.
    fn rewrite_listed(
        &mut self,
        bad: Option<&BadBlocks>,
        areas: &[Option<Arc<dyn Volume>>],
        present: &[bool],
        pos: u64,
        n: u64,
    ) -> Result<()>;
    /// [`ScrubHost::rewrite_listed`] of one role's range.
    fn rewrite_listed_role(
        &mut self,
        bad: Option<&BadBlocks>,
        role: usize,
        at: u64,
        n: u64,
    ) -> Result<()>;
    /// What role `role` should hold at `[pos, pos+n)`, from the others.
    fn repair_range(
        &self,
        bad: Option<&BadBlocks>,
        role: usize,
        pos: u64,
        n: u64,
    ) -> Result<Vec<u8>>;
    /// Record a resync's checkpoint in md's `resync_offset` unit: member
    /// sectors done for parity levels, array sectors for mirrors.
    fn checkpoint(&mut self, at_sector: u64) -> Result<()>;
}

/// The member areas a scrub reads and writes by role (`None`: missing,
/// never read nor written), the names its findings use, what carries its
/// plans out, and the array serving meanwhile, if any.
pub(super) struct Scope<'a> {
    pub(super) geometry: Geometry,
    pub(super) exec: Arc<dyn Executor>,
    pub(super) areas: Vec<Option<Arc<dyn Volume>>>,
    pub(super) names: Vec<String>,
    pub(super) missing: Vec<usize>,
    pub(super) running: Option<&'a Array>,
}

/// Scrub `scope` from member byte `start` (parity levels) or its array
/// equivalent (mirrors).
pub(super) fn run(
    host: &mut dyn ScrubHost,
    scope: &Scope,
    start: u64,
    repair: bool,
    resync: bool,
    opts: RunOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<ScrubReport> {
    if crate::planner::family(&scope.geometry).keeps_rows() {
        parity(host, scope, start, repair, resync, opts, progress)
    } else {
        mirrors(host, scope, start, repair, resync, opts, progress)
    }
}

fn parity(
    host: &mut dyn ScrubHost,
    scope: &Scope,
    start: u64,
    repair: bool,
    resync: bool,
    opts: RunOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<ScrubReport> {
    let (areas, names, exec, running) = (
        &scope.areas[..],
        &scope.names[..],
        scope.exec.as_ref(),
        scope.running,
    );
    let missing = scope.missing.clone();
    let total = scope.geometry.member_bytes;
    let step = host.scrub_step(resync, opts.step_bytes);
    let first = align_down(&scope.geometry, start);
    let mut run = schedule(&opts, &[(first, total)], step);
    let present: Vec<bool> = areas.iter().map(Option::is_some).collect();
    let mut report = ScrubReport::new(repair, missing);
    let mut kept = StepBuf::take();
    let buf = &mut kept.0;
    let bad = host.bad_blocks()?;
    progress(Progress { done: first, total });
    let step = |host: &mut dyn ScrubHost, next: Range<u64>| -> Result<u64> {
        let (pos, n) = (next.start, next.end - next.start);
        if !host.needs_resync(resync, pos, n) {
            return Ok(0);
        }
        // The step's stripes are locked before anything is read: a member
        // a request on them took out (it is taken out before that request
        // lets its locks go) is then seen below and never read. A scrub
        // that began before would otherwise compare, and repair from, the
        // blocks a failed write left stale.
        // PLANTED BUG (tests only, `planted.rs`): the step without its locks.
        let _held = match running {
            Some(_) if planted!(ScrubWithoutStripeLocks) => None,
            r => r.map(|a| a.hold_member_range(pos, n)).transpose()?,
        };
        let mut step_present = present.clone();
        for r in running.map(Array::failed_members).unwrap_or_default() {
            if let Some(p) = step_present.get_mut(r) {
                *p = false;
            }
        }
        // Ranges a member's bad-block log lists are not read: the stripe
        // is compared without that member where redundancy allows.
        for (role, p) in step_present.iter_mut().enumerate() {
            if *p && bad.as_ref().is_some_and(|b| b.hit(role, pos, n).is_some()) {
                *p = false;
                report.bad_block_bytes += n;
            }
        }
        let step_missing: Vec<usize> = (0..step_present.len())
            .filter(|&r| !step_present[r])
            .collect();
        if step_present != present && !scrub_can_compare(&scope.geometry, &step_missing) {
            if repair {
                host.rewrite_listed(bad.as_ref(), areas, &step_present, pos, n)?;
            }
            report.unchecked_array_bytes += n * scope.geometry.data_disks() as u64;
            return Ok(0);
        }
        let present = &step_present;
        let len = n as usize;
        let plan = plan_scrub_parity(&scope.geometry, present, pos, n)?;
        // A missing role's part is never read; scrub_parity ignores it.
        buf.resize(areas.len() * len, 0);
        if let Err(f) = run_failed(exec, &plan, areas, UserBuf::Read(buf)) {
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
                    if reread(exec, loc, page, areas).is_ok() {
                        continue;
                    }
                    let Ok(b) = host.repair_range(bad.as_ref(), role, at, page.len() as u64) else {
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
            &scope.geometry,
            &mut bufs,
            present,
            pos,
            &mut report,
            names,
            repair,
            resync,
        );
        if repair && !fixes.is_empty() {
            let writes: Vec<_> = fixes
                .iter()
                .map(|&(role, off, k)| (role, off, role * len + (off - pos) as usize, k))
                .collect();
            run_with(
                exec,
                &plan_rewrites(&writes, plan.locks),
                areas,
                UserBuf::Write(buf),
            )?;
        }
        if repair {
            host.rewrite_listed(bad.as_ref(), areas, present, pos, n)?;
        }
        // --max-rate is per member, as md's speed limits are: each step
        // reads `n` bytes of every member, the figure the progress shows.
        Ok(n)
    };
    let scrubbing = Scrubbing {
        host,
        step,
        exec,
        areas,
        resync,
        scale: &|pos| pos,
        progress,
        total,
    };
    scrubbing.drive(&mut run, &opts)?;
    if repair {
        crate::metadata_plan::flush_all(exec, areas)?;
    }
    Ok(report)
}

/// Mirrors (RAID 1/10) are scrubbed by logical address: every copy of each
/// page is compared with the first copy (md reads the first in-sync device and
/// compares the others with it); `repair` copies the first over the others.
/// Progress is in logical bytes scaled to member bytes; resync checkpoints
/// (`start` and `resync_offset`) are logical, as md's: its RAID 1 and RAID 10
/// resync walk the array (`raid10_sync_request` takes virtual addresses), so
/// a RAID 10's `resync_offset` is an array sector, and a RAID 1's equals the
/// member sector.
///
/// Degraded: only the copies left (`areas[role]` is Some) are read and
/// compared; a run with a single copy left has nothing to compare and is
/// skipped and counted (md's raid1/raid10 sync skips blocks with fewer than
/// two in-sync copies the same way).
fn mirrors(
    host: &mut dyn ScrubHost,
    scope: &Scope,
    start: u64,
    repair: bool,
    resync: bool,
    opts: RunOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<ScrubReport> {
    let (areas, names, exec, running) = (
        &scope.areas[..],
        &scope.names[..],
        scope.exec.as_ref(),
        scope.running,
    );
    let missing = scope.missing.clone();
    let geo = scope.geometry;
    let total = geo.array_bytes();
    let member_total = geo.member_bytes;
    // What the progress shows per member: logical = member * data_disks for
    // mirrors' purposes (RAID 1: equal; RAID 10: members * chunks per copy).
    let scale = |logical: u64| -> u64 {
        ((logical as u128 * member_total as u128) / total.max(1) as u128) as u64
    };
    let step = host.scrub_step(resync, opts.step_bytes);
    let first = align_down(&geo, start.min(total));
    let mut run = schedule(&opts, &[(first, total)], step);
    let mut report = ScrubReport::new(repair, missing);
    progress(Progress {
        done: scale(first),
        total: member_total,
    });
    let present: Vec<bool> = areas.iter().map(Option::is_some).collect();
    let mut kept = StepBuf::take();
    let buf = &mut kept.0;
    let bad = host.bad_blocks()?;
    let step = |host: &mut dyn ScrubHost, next: Range<u64>| -> Result<u64> {
        let (pos, end) = (next.start, next.end);
        if !host.needs_resync(resync, pos, end - pos) {
            return Ok(0);
        }
        let _held = running
            .map(|a| a.hold_array_range(pos, end - pos))
            .transpose()?;
        // As a parity step: a member taken out since the scrub began is
        // missing from here on (its copies may be stale), never the
        // reference a copy is rewritten from.
        let mut present = present.clone();
        for r in running.map(Array::failed_members).unwrap_or_default() {
            if let Some(p) = present.get_mut(r) {
                *p = false;
            }
        }
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
        let failed = match run_failed(exec, &scrub.plan, areas, UserBuf::Read(buf)) {
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
                        || reread(exec, loc, &mut buf[at..at + n], areas).is_ok()
                })
                .collect();
            compare_mirror_run(run, buf, &read, &mut report, names, repair, &mut writes)?;
        }
        if !writes.is_empty() {
            run_with(
                exec,
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
                    host.rewrite_listed_role(bad.as_ref(), l.member, l.offset, k)?;
                }
            }
        }
        report.bytes_scanned += scale(compared);
        // Per member, in the member bytes the progress shows.
        Ok(scale(end) - scale(pos))
    };
    let scrubbing = Scrubbing {
        host,
        step,
        exec,
        areas,
        resync,
        scale: &scale,
        progress,
        total: member_total,
    };
    scrubbing.drive(&mut run, &opts)?;
    if repair {
        crate::metadata_plan::flush_all(exec, areas)?;
    }
    Ok(report)
}

/// A scrub as the long-run driver steps it: `step` does the step (given
/// the host) and says the member bytes it worked; a resync's checkpoint
/// flushes the members and records the run's position in md's
/// `resync_offset` unit (the position itself: member bytes for parity
/// levels, array bytes for mirrors, see [`mirrors`]), a check's or repair's
/// records nothing; progress, and where a stop says each member stands, is
/// the position `scale`d to member bytes.
struct Scrubbing<'a, S> {
    host: &'a mut dyn ScrubHost,
    step: S,
    exec: &'a dyn Executor,
    areas: &'a [Option<Arc<dyn Volume>>],
    resync: bool,
    scale: &'a dyn Fn(u64) -> u64,
    progress: &'a mut dyn FnMut(Progress),
    total: u64,
}

impl<S: FnMut(&mut dyn ScrubHost, Range<u64>) -> Result<u64>> Scrubbing<'_, S> {
    /// Drive `run` to its end; a stop flushes, saves a resync's checkpoint
    /// and says where it stopped, as an `Interrupted` error.
    fn drive(mut self, run: &mut LongRun, opts: &RunOptions) -> Result<()> {
        match run.drive(&*clock_of(opts), &|| stopped(opts), &mut self)? {
            Driven::Stopped(pos) => {
                crate::metadata_plan::flush_all(self.exec, self.areas)?;
                if self.resync {
                    self.host.checkpoint(pos / SECTOR)?;
                }
                let member_pos = (self.scale)(pos);
                Err(interrupted(
                    if self.resync { "resync" } else { "scrub" },
                    member_pos,
                ))
            }
            _ => Ok(()),
        }
    }
}

impl<S: FnMut(&mut dyn ScrubHost, Range<u64>) -> Result<u64>> Steps for Scrubbing<'_, S> {
    fn step(&mut self, range: Range<u64>) -> Result<Stepped> {
        let end = range.end;
        let work = (self.step)(&mut *self.host, range)?;
        Ok(Stepped { end, work })
    }

    fn checkpoint(&mut self, pos: u64) -> Result<()> {
        if !self.resync {
            return Ok(());
        }
        crate::metadata_plan::flush_all(self.exec, self.areas)?;
        self.host.checkpoint(pos / SECTOR)
    }

    fn progress(&mut self, end: u64) {
        (self.progress)(Progress {
            done: (self.scale)(end),
            total: self.total,
        })
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

/// What role `role` should hold at `[pos, pos+n)` of its data area, from
/// the other `members` (a rebuild plan with `role` as its target).
pub(super) fn repair_from(
    exec: &dyn Executor,
    geo: &Geometry,
    members: &[Option<Arc<dyn Volume>>],
    bad: Option<&BadBlocks>,
    role: usize,
    pos: u64,
    n: u64,
) -> Result<Vec<u8>> {
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
        geo,
        &live,
        role,
        pos,
        n,
        role,
        |plan| run_failed(exec, &plan, members, UserBuf::Read(&mut out)),
        |_| {},
    )?;
    Ok(out)
}

/// A running array on its own, with no assembly beside it: no superblocks
/// (no resync checkpoint), no bitmap, no bad-block logs. The simulator's
/// arrays are such.
struct Alone<'a> {
    array: &'a Array,
    areas: Vec<Option<Arc<dyn Volume>>>,
}

impl ScrubHost for Alone<'_> {
    fn bad_blocks(&self) -> Result<Option<BadBlocks>> {
        Ok(None)
    }
    fn needs_resync(&self, _: bool, _: u64, _: u64) -> bool {
        true
    }
    fn scrub_step(&self, _: bool, want: u64) -> u64 {
        ScrubWalk::new(self.array.geometry(), want).step
    }
    fn rewrite_listed(
        &mut self,
        _: Option<&BadBlocks>,
        _: &[Option<Arc<dyn Volume>>],
        _: &[bool],
        _: u64,
        _: u64,
    ) -> Result<()> {
        Ok(()) // nothing is listed
    }
    fn rewrite_listed_role(
        &mut self,
        _: Option<&BadBlocks>,
        _: usize,
        _: u64,
        _: u64,
    ) -> Result<()> {
        Ok(())
    }
    fn repair_range(
        &self,
        bad: Option<&BadBlocks>,
        role: usize,
        pos: u64,
        n: u64,
    ) -> Result<Vec<u8>> {
        let exec = crate::replay::ReplayTarget::executor(self.array);
        repair_from(
            exec.as_ref(),
            self.array.geometry(),
            &self.areas,
            bad,
            role,
            pos,
            n,
        )
    }
    fn checkpoint(&mut self, _: u64) -> Result<()> {
        Err(Error::invalid(
            "internal: a running array on its own keeps no resync checkpoint",
        ))
    }
}

/// Check (or with `repair`, repair) a running array that has no assembly
/// beside it, from byte `from` of each member's data area, while it serves:
/// the same steps, locks, comparisons and rewrites as `raidlab check` on a
/// served array. Refused while a rebuild runs (md's rule) and when nothing
/// is left to compare.
pub fn scrub_array(
    array: &Array,
    repair: bool,
    from: u64,
    opts: RunOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<ScrubReport> {
    if array.recovery().is_some() {
        return Err(Error::invalid(
            "a rebuild is running: check or repair after it finishes",
        ));
    }
    let geometry = *array.geometry();
    let areas: Vec<Option<Arc<dyn Volume>>> =
        (0..geometry.raid_disks).map(|r| array.member(r)).collect();
    let missing: Vec<usize> = (0..areas.len()).filter(|&r| areas[r].is_none()).collect();
    scrubbable(&geometry, array.rules(), false, &missing)?;
    let names = areas
        .iter()
        .enumerate()
        .map(|(role, a)| match a {
            Some(v) => v.name().to_string(),
            None => format!("(missing role {role})"),
        })
        .collect();
    let scope = Scope {
        geometry,
        exec: crate::replay::ReplayTarget::executor(array),
        areas: areas.clone(),
        names,
        missing,
        running: Some(array),
    };
    let mut host = Alone { array, areas };
    run(&mut host, &scope, from, repair, false, opts, progress)
}

/// Refuse a scrub of `geo` (an array `rules` answers for: its level's, or
/// the family of what a pass-through carries) with the roles in `missing`
/// missing that has nothing to compare (see [`Assembly::check_scrubbable`]).
pub(super) fn scrubbable(
    geo: &Geometry,
    rules: &'static level::Rules,
    resync: bool,
    missing: &[usize],
) -> Result<()> {
    if !rules.resyncs {
        return Err(Error::invalid(rules.no_scrub));
    }
    // A RAID 1 md runs over one member (created so, or grown down to one).
    if rules.family == Family::Mirror && geo.raid_disks < 2 {
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
    let why = if rules.family == Family::Parity {
        "the parity left is the only source of the missing data, so there is nothing left to compare it with"
    } else {
        "every block has a single copy left, so there is nothing left to compare"
    };
    let todo = if resync && rules.write_hole {
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
