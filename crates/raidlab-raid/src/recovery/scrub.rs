//! Check, repair and resync (md's scrub): compare parity and mirror copies
//! with the data, count mismatches as md's mismatch_cnt, rewrite what differs
//! (repair, resync), and say what a degraded array could and could not check.
//! It decides what a scrub compares and rewrites; a rebuild is `super`'s, and
//! what a lost member held comes from a rebuild plan; the page comparisons
//! themselves are `compare`'s.

use super::report::ScrubReport;
use super::scrub_run::{self, scrubbable, Scope, ScrubHost};
use super::*;
use crate::recovery_plan::ScrubWalk;

/// The verb a scrub is asked as.
fn scrub_verb(repair: bool) -> &'static str {
    if repair {
        "repair"
    } else {
        "check"
    }
}

fn scrub_op(repair: bool) -> Op {
    if repair {
        Op::Write
    } else {
        Op::Read
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
        self.refuse_scrub_mid_reshape("resync", Op::Write)?;
        if self.in_sync() {
            return Err(Error::invalid(
                "the array is already in sync (clean): nothing to resync; use `raidlab check` to verify it",
            ));
        }
        self.rewind_rebuilds()?;
        let start = self.resync_offset();
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
        self.refuse_scrub_mid_reshape(scrub_verb(repair), scrub_op(repair))?;
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
        self.refuse_scrub_mid_reshape(scrub_verb(repair), scrub_op(repair))?;
        self.scrub_from(0, repair, false, Some(running), opts, progress)
    }

    /// The resync of a served array from `from` (md's `resync_offset`
    /// unit; the new space after a `--size` of a served array, whose
    /// superblocks say 0 while writes are pending), each step under
    /// `running`'s stripe locks as [`Assembly::scrub_running`]'s. Run on a
    /// copy of the served assembly: its checkpoints go to `save`, for the
    /// served assembly to record when its superblocks may say so, never to
    /// the copy's members.
    pub fn resync_running(
        &mut self,
        running: &Array,
        from: u64,
        save: &mut dyn FnMut(u64) -> Result<()>,
        opts: RunOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ScrubReport> {
        self.refuse_scrub_mid_reshape("resync", Op::Write)?;
        let start = from;
        let scope = self.scrub_scope(true, Some(running))?;
        let mut host = SavedElsewhere { asm: self, save };
        scrub_run::run(
            &mut host,
            &scope,
            start.saturating_mul(SECTOR),
            true,
            true,
            opts,
            progress,
        )
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
        let scope = self.scrub_scope(resync, running)?;
        scrub_run::run(self, &scope, start, repair, resync, opts, progress)
    }

    /// What a scrub reads and writes, by role, with `running` serving
    /// meanwhile (if any).
    fn scrub_scope<'a>(&self, resync: bool, running: Option<&'a Array>) -> Result<Scope<'a>> {
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
        Ok(Scope {
            geometry: self.geometry,
            exec: Arc::clone(self.executor()),
            areas,
            names,
            missing,
            running,
        })
    }
}

impl Assembly {
    /// Refuse `what` (a check, repair or resync, `op` its kind) of an array
    /// whose superblocks record a reshape, before anything is written. Its
    /// stripes are in two geometries, split at the reshape's position, and
    /// a scrub compares one geometry over every member: it counts
    /// mismatches that are not there, and a repair or resync rewrites
    /// parity (RAID 6: "corrects" a data block it locates from P and Q)
    /// over good data. md never runs one then: a reshape holds the array's
    /// sync thread (`sync_action` answers busy), and a recorded reshape is
    /// what md resumes first when the array starts.
    pub fn refuse_scrub_mid_reshape(&self, what: &str, op: Op) -> Result<()> {
        let Some(r) = self.reshape() else {
            return Ok(());
        };
        let at = match r {
            Ok(r) => format!("stopped at array byte {}", r.position),
            Err(_) => "its fields make no geometry".to_string(),
        };
        Err(Error::new(
            ErrorKind::Refused,
            op,
            format!(
                "{what} refused ({at}): {}; nothing was written",
                level::RESHAPE.no_scrub
            ),
        ))
    }

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
        if level::of(&self.geometry).bitmap == BitmapUnit::MemberSectors {
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
        scrubbable(&self.geometry, self.rules(), resync, missing)
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
        scrub_run::repair_from(
            self.executor().as_ref(),
            &self.geometry,
            &members,
            bad,
            role,
            pos,
            n,
        )
    }
}

impl ScrubHost for Assembly {
    fn bad_blocks(&self) -> Result<Option<BadBlocks>> {
        Assembly::bad_blocks(self)
    }
    fn needs_resync(&self, resync: bool, pos: u64, n: u64) -> bool {
        Assembly::needs_resync(self, resync, pos, n)
    }
    fn scrub_step(&self, resync: bool, want: u64) -> u64 {
        Assembly::scrub_step(self, resync, want)
    }
    fn rewrite_listed(
        &mut self,
        bad: Option<&BadBlocks>,
        areas: &[Option<Arc<dyn Volume>>],
        present: &[bool],
        pos: u64,
        n: u64,
    ) -> Result<()> {
        Assembly::rewrite_listed(self, bad, areas, present, pos, n)
    }
    fn rewrite_listed_role(
        &mut self,
        bad: Option<&BadBlocks>,
        role: usize,
        at: u64,
        n: u64,
    ) -> Result<()> {
        Assembly::rewrite_listed_role(self, bad, role, at, n)
    }
    fn repair_range(
        &self,
        bad: Option<&BadBlocks>,
        role: usize,
        pos: u64,
        n: u64,
    ) -> Result<Vec<u8>> {
        Assembly::repair_range(self, bad, role, pos, n)
    }
    fn checkpoint(&mut self, at_sector: u64) -> Result<()> {
        self.commit(|sb| sb.resync_offset = at_sector)
    }
}

/// An assembly's scrub host whose resync checkpoints go elsewhere
/// ([`Assembly::resync_running`]).
struct SavedElsewhere<'a> {
    asm: &'a mut Assembly,
    save: &'a mut dyn FnMut(u64) -> Result<()>,
}

impl ScrubHost for SavedElsewhere<'_> {
    fn bad_blocks(&self) -> Result<Option<BadBlocks>> {
        ScrubHost::bad_blocks(&*self.asm)
    }
    fn needs_resync(&self, resync: bool, pos: u64, n: u64) -> bool {
        ScrubHost::needs_resync(&*self.asm, resync, pos, n)
    }
    fn scrub_step(&self, resync: bool, want: u64) -> u64 {
        ScrubHost::scrub_step(&*self.asm, resync, want)
    }
    fn rewrite_listed(
        &mut self,
        bad: Option<&BadBlocks>,
        areas: &[Option<Arc<dyn Volume>>],
        present: &[bool],
        pos: u64,
        n: u64,
    ) -> Result<()> {
        ScrubHost::rewrite_listed(&mut *self.asm, bad, areas, present, pos, n)
    }
    fn rewrite_listed_role(
        &mut self,
        bad: Option<&BadBlocks>,
        role: usize,
        at: u64,
        n: u64,
    ) -> Result<()> {
        ScrubHost::rewrite_listed_role(&mut *self.asm, bad, role, at, n)
    }
    fn repair_range(
        &self,
        bad: Option<&BadBlocks>,
        role: usize,
        pos: u64,
        n: u64,
    ) -> Result<Vec<u8>> {
        ScrubHost::repair_range(&*self.asm, bad, role, pos, n)
    }
    fn checkpoint(&mut self, at_sector: u64) -> Result<()> {
        (self.save)(at_sector)
    }
}

impl Assembly {
    /// Where the superblocks say a resync is owed from, in sectors (md's
    /// `resync_offset`; the furthest any active member records, as md
    /// takes it): what a resync resumes from.
    pub(crate) fn resync_offset(&self) -> u64 {
        self.members
            .iter()
            .filter(|m| m.state == MemberState::Active)
            .map(|m| m.sb.resync_offset)
            .max()
            .unwrap_or(0)
    }
}
