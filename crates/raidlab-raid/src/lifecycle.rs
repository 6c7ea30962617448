//! An array's life between assembly and a clean stop: the start and stop
//! sequence that serve, import and export, the cache verbs' origin, the
//! benchmark targets, the simulator's arrays and the offline management verbs
//! (`fail`, `add`, `rebuild`, `resync`, `check`, `repair`, `grow`, ...) go
//! through, as md runs it at every start and stop (the simulator's torture
//! restarts too: their add and replace start as the verbs do).
//!
//! Start for writing: refuse an array that cannot serve its data; start the
//! write journal or the partial parity logs, which replays them after an
//! unclean stop (the old logs are replayed before any new one is written);
//! then refuse what md refuses (dirty and degraded, a missing journal) unless
//! forced; resync an unclean array no log covered, when asked and when it
//! has copies or parity to compare (complete, or degraded with redundancy
//! left and no rebuild pending); mark it dirty. Stop: flush, take back the bitmap and the members
//! that failed, mark it clean if it was. A start for reading only checks, and
//! writes nothing.
//!
//! An offline management verb ([`Managed`]) starts the same way up to the
//! array: the same refusal of a failed array before any log is touched, the
//! same log replay with members whose I/O fails taken out, then the verb's
//! own choice of md's refusals. It stops short of what would change what
//! the verb finds or leaves: no automatic resync (a `check` must see the
//! mismatches a crash left, and `resync` is the verb that runs one), no
//! dirty mark (the verb's steps commit the superblocks they change, as md's
//! recovery and resync never mark an array active; a dirty mark would turn a
//! rebuild cut short into a full resync) and no running array (the verb
//! works on the assembly). A reshape in progress is not refused: finishing
//! or changing membership of one is what `grow --continue` and the
//! membership verbs do. Its stop flushes the members, so that a verb that
//! returns has made what it wrote durable.
//!
//! A writable start of a degraded array with hot spares puts them into the
//! missing roles (`StartedParts::take_spares`, md's start; the rule is
//! `manage::spares`'), for its owner to rebuild.
//!
//! It decides the order of those steps, and the one rule of when parity and
//! copies are trusted by what computes from them after a start
//! ([`Assembly::trusts_redundancy`]: a rebuild, a spare taken for one, a
//! change), which the server's start and the simulation's owner follow; the
//! simulation's end of a run is this stop ([`stop_records`]) and this
//! start's resync ([`start_resync`]). What each step does lives in
//! `assemble`, `journal`, `ppl` and `recovery`. It never prints: it reports
//! what the start did, and callers say it.

use crate::array::Array;
use crate::assemble::{ArrayState, Assembly};
use crate::journal::{JournalMode, JournalReplay};
use crate::manage::SparesAtStart;
use crate::ppl::PplReplay;
use crate::recovery::{RunOptions, ScrubReport};
use crate::stripe_cache::StripeCacheConfig;
use raidlab_core::task::{Mutex as TaskMutex, MutexGuard};
use raidlab_core::{Result, Volume};
use std::sync::Arc;

/// How an array is started.
#[derive(Debug, Clone, Copy, Default)]
pub struct StartOptions {
    /// Open for writing (logs started, superblocks marked dirty).
    pub write: bool,
    /// Accept what md refuses without --force (a dirty degraded array, a
    /// missing journal: then read-only).
    pub force: bool,
    /// After an unclean stop that no log covered, resync a complete array
    /// before use (what `serve` does; md resyncs in the background).
    pub resync_unclean: bool,
    /// The stripe cache's tunables for a parity array started for writing
    /// (`None`: the defaults; `stripes: 0` turns it off).
    pub stripe_cache: Option<StripeCacheConfig>,
    /// md's journal mode for an array with a write journal (write-through
    /// unless asked, as md); write-back is refused without a journal.
    pub journal_mode: JournalMode,
}

/// What a start did on disk, for the caller to tell the user.
#[derive(Debug, Default)]
pub struct StartReport {
    pub journal: Option<JournalReplay>,
    pub ppl: Option<PplReplay>,
    pub resync: Option<ScrubReport>,
    /// Members whose I/O failed during the start (a log replay's, the
    /// resync's or a superblock write): taken out and recorded faulty in the
    /// others' superblocks, as md fails a member whose write fails, while
    /// the array could still serve its data. Each says which and why.
    pub taken_out: Vec<String>,
}

/// An array started for use; [`Started::stop`] ends its life cleanly.
#[derive(Debug)]
pub struct Started {
    /// Shared with the array's [`Recorder`](crate::array::Recorder), which
    /// records members taken out from inside a request
    /// ([`Started::asm`] to reach it).
    asm: Arc<TaskMutex<Assembly>>,
    pub array: Arc<Array>,
    pub report: StartReport,
    /// Whether the array was consistent at start (then a clean stop marks it
    /// clean again).
    pub was_clean: bool,
    /// Whether parity/mirrors were consistent once the logs were replayed (and
    /// a resync run, if one was): a rebuild may resume only then.
    pub consistent: bool,
    /// Members whose rebuild stopped cleanly, with the byte it stopped at (as
    /// (index into `asm.members`, offset)), read before the dirty mark resets
    /// it: a caller that runs the array may resume them there.
    pub resume: Vec<(usize, u64)>,
    pub writable: bool,
}

/// How a started array is run when its driver, not the engine's threads,
/// decides the order of things (the torture harness, the simulator's
/// arrays in virtual time): plans carried out by
/// `executor` (the array's and the assembly's own: log starts, superblock
/// commits, a resync), and the stripe cache's hold time measured on `clock` with no
/// thread of its own (the driver calls `Array::write_out_one_expired`, or runs
/// `Array::stripe_cache_thread` as a task on that clock).
#[derive(Debug, Clone)]
pub struct Driven {
    pub executor: Arc<dyn crate::exec::Executor>,
    pub clock: raidlab_core::SharedClock,
}

impl Started {
    /// Start `asm` as `opts` says.
    pub fn start(asm: Assembly, opts: StartOptions) -> Result<Started> {
        Started::start_with(asm, opts, None)
    }

    /// [`Started::start`], the array run as `driven` says when given: the
    /// same steps in the same order.
    pub fn start_with(
        mut asm: Assembly,
        opts: StartOptions,
        driven: Option<Driven>,
    ) -> Result<Started> {
        let mut report = StartReport::default();
        if opts.journal_mode == JournalMode::WriteBack && !opts.write {
            return Err(raidlab_core::Error::invalid(
                "write-back is a way of writing: start the array for writing to use it",
            ));
        }
        if opts.write && asm.reshape().is_some() {
            // Refused before the dirty mark: a write into stripes half in
            // one geometry and half in the other is not built, and marking
            // the array dirty would leave it needing a resync for nothing.
            return Err(raidlab_core::Error::new(
                raidlab_core::ErrorKind::ReadOnly,
                raidlab_core::Op::Open,
                "the array is in the middle of a reshape: it reads (read-only) but takes no writes until the reshape is finished; finish it with `raidlab grow --continue` and the same members (or mdadm --grow --continue); nothing was written",
            ));
        }
        if let Some(d) = &driven {
            asm.set_executor(d.executor.clone());
        }
        if asm.state() == ArrayState::Failed || !opts.write {
            // Nothing to replay into an array that cannot be read; a read-only
            // start writes nothing.
            asm.check_startable(opts.force)?;
        }
        let mut taken_out = Vec::new();
        if opts.write {
            report = taking_out(&mut asm, &mut taken_out, "at start", start_logs)?;
            asm.check_startable(opts.force)?;
        }
        let redundant = crate::level::of(&asm.geometry).resyncs;
        let mut was_clean = asm.in_sync();
        // A degraded array whose members left still hold copies or parity
        // to compare is resynced too, as md resyncs a dirty degraded mirror:
        // after a crash its copies may differ, and reads would then depend
        // on the copy read. Also while a member is being rebuilt, before its
        // rebuild resumes (md resyncs after it): a member failing before
        // that resync would otherwise flip what a stripe written at the
        // crash reads as. The resync takes the rebuild back over what it may
        // rewrite (`Assembly::resync`).
        if opts.write && opts.resync_unclean && start_resyncs(&asm) {
            // A member taken out mid-way may leave nothing to compare: then
            // the array runs degraded and unclean, md's write hole.
            report.resync = taking_out(&mut asm, &mut taken_out, "at start", |asm| {
                start_resync(asm, RunOptions::default())
            })?;
            was_clean = report.resync.is_some();
        }
        let consistent = was_clean;
        let resume: Vec<(usize, u64)> = asm
            .rebuilding()
            .into_iter()
            .map(|(i, _)| (i, asm.members[i].sb.recovery_offset * 512))
            .collect();
        // PLANTED BUG (tests only, `planted.rs`): no dirty mark.
        if opts.write && !planted!(NoDirtyMark) {
            was_clean = taking_out(&mut asm, &mut taken_out, "at start", Assembly::mark_dirty)?
                && was_clean;
        }
        report.taken_out = taken_out;
        // Only now: the running array writes its copy of the bitmap before
        // each write, and a copy taken before the dirty mark carries the old
        // event count, which makes the bitmap look stale after a crash (every
        // chunk resynced instead of the few written).
        let array = Arc::new(asm.array()?);
        if !consistent && redundant {
            // Not resynced (a rebuild to resume first, nothing left to
            // compare, or not asked): mirrors may differ where writes were in
            // flight, and reads balanced over them could return one copy,
            // then the other.
            array.read_first_copy_only(true);
        }
        if opts.write {
            // Parity arrays hold partial-stripe writes to merge them into
            // whole stripes, as md's stripe cache does.
            let config = opts.stripe_cache.unwrap_or_default();
            match &driven {
                Some(d) => array.start_stripe_cache_driven(config, d.clock.clone())?,
                None => array.start_stripe_cache(config, raidlab_core::clock::system())?,
            }
            array.set_journal_mode(opts.journal_mode)?;
        }
        let asm = Arc::new(TaskMutex::new(asm));
        if opts.write {
            array.set_recorder(Some(recorder(&asm)));
        }
        Ok(Started {
            asm,
            array,
            report,
            was_clean,
            consistent,
            resume,
            writable: opts.write,
        })
    }

    /// Flush the array, then record the members it took out
    /// ([`Started::record_failures`]), so that a crash after this returns
    /// cannot bring back, as active, a member older than what the flush made
    /// durable.
    pub fn flush(&mut self) -> Result<()> {
        let flushed = self.array.flush();
        self.answer(flushed)
    }

    /// A FUA write, acknowledged as [`Started::flush`] is.
    pub fn write_fua(&mut self, buf: &[u8], offset: u64) -> Result<()> {
        let written = self.array.write_at_fua(buf, offset);
        self.answer(written)
    }

    /// A write, acknowledged once a member it took out is recorded faulty:
    /// md holds a write that failed a member until its superblocks say so,
    /// and so do writes after it. Otherwise a power cut before the next
    /// flush could assemble that member as active beside the copies that
    /// took the write, and the copies would disagree with no bit or log to
    /// say where.
    pub fn write(&mut self, buf: &[u8], offset: u64) -> Result<()> {
        let written = self.array.write_at(buf, offset);
        self.answer(written)
    }

    /// A write-zeroes, acknowledged as [`Started::write`] is.
    pub fn write_zeroes(&mut self, offset: u64, len: u64) -> Result<()> {
        let written = self.array.write_zeroes(offset, len);
        self.answer(written)
    }

    /// A trim, acknowledged as [`Started::write`] is.
    pub fn discard(&mut self, offset: u64, len: u64) -> Result<()> {
        let trimmed = self.array.discard(offset, len);
        self.answer(trimmed)
    }

    /// Answer a request once the members it took out are recorded, whether
    /// it succeeded or not: the write that breaks a parity array fails, and
    /// the member it took out must be faulty in the superblocks before the
    /// error goes back (md holds it so), or a restart would serve that
    /// member's stale blocks.
    fn answer(&mut self, request: Result<()>) -> Result<()> {
        let recorded = self.record_failures();
        request?;
        recorded.map(|_| ())
    }

    /// Record the members the running array took out as faulty in the
    /// others' superblocks, as a served array does before it acknowledges a
    /// flush or a FUA write, and as md holds such a write until its
    /// superblocks say the member failed. Returns the paths recorded now.
    /// Nothing is written for a read-only start.
    pub fn record_failures(&mut self) -> Result<Vec<String>> {
        if !self.writable {
            return Ok(Vec::new());
        }
        record(&mut self.asm.lock(), &self.array)
    }

    /// The assembly, held until the guard goes. Never write to the array
    /// while holding it: a write that must record a member taken out waits
    /// for it.
    pub fn asm(&self) -> MutexGuard<'_, Assembly> {
        self.asm.lock()
    }

    /// The assembly if nobody holds it (a request recording a member taken
    /// out may, suspended in a task on this very thread).
    pub fn try_asm(&self) -> Option<MutexGuard<'_, Assembly>> {
        self.asm.try_lock()
    }

    /// Flush, record members that failed while running (returned: the array is
    /// degraded now) and a clean stop. Nothing is written for a read-only start.
    pub fn stop(self) -> Result<Vec<String>> {
        if !self.writable {
            return Ok(Vec::new());
        }
        // The writes first, with the assembly let go: one that takes a
        // member out records it through the recorder, which takes it.
        stop_writes(&self.array)?;
        let mut parts = self.into_parts();
        stop_records(&mut parts.asm, &parts.array, parts.was_clean)
    }

    /// The started array taken apart, for a caller that keeps the assembly
    /// elsewhere (a served array's `LiveArray`, which records members taken
    /// out its own way: the array has no recorder after this).
    pub fn into_parts(self) -> StartedParts {
        self.array.set_recorder(None);
        // The recorder holds it weakly, and strongly only while it records,
        // inside a request (one still ending on another thread).
        let mut shared = self.asm;
        let asm = loop {
            match Arc::try_unwrap(shared) {
                Ok(m) => break m.into_inner(),
                Err(again) => {
                    shared = again;
                    std::thread::yield_now();
                }
            }
        };
        StartedParts {
            asm,
            array: self.array,
            report: self.report,
            was_clean: self.was_clean,
            consistent: self.consistent,
            resume: self.resume,
            writable: self.writable,
        }
    }
}

/// [`Started`]'s parts ([`Started::into_parts`]).
#[derive(Debug)]
pub struct StartedParts {
    pub asm: Assembly,
    pub array: Arc<Array>,
    pub report: StartReport,
    pub was_clean: bool,
    pub consistent: bool,
    pub resume: Vec<(usize, u64)>,
    pub writable: bool,
}

impl StartedParts {
    /// md's start of a degraded array with hot spares
    /// ([`Assembly::spares_into_missing_roles`], with this start's facts:
    /// writable, and whether the redundancy a rebuild computes from is
    /// trusted, [`Assembly::trusts_redundancy`], the start's dirty mark
    /// being its owner's when the array was clean or resynced): the spares
    /// taken into missing roles join the rebuilds to resume (`resume`, from
    /// 0), which the owner runs as any rebuild. Committed through the
    /// running array (its bitmap).
    pub fn take_spares(&mut self) -> Result<SparesAtStart> {
        let writable = self.writable;
        let consistent = self.asm.trusts_redundancy(self.was_clean);
        let array = self.array.clone();
        let s = self.asm.change_running(&array, |a| {
            a.spares_into_missing_roles(writable, consistent)
        })?;
        self.resume.extend(s.taken.iter().map(|&(i, _)| (i, 0)));
        Ok(s)
    }
}

impl Assembly {
    /// Whether parity and copies may be computed from now by what trusts
    /// them (a rebuild, a hot spare taken into a missing role for one, a
    /// takeover or a restripe's start): in sync, a level with nothing to
    /// resync, or dirty only by its owner's own safe mode (`mark_is_ours`:
    /// the array was in sync when the owner started it, [`Assembly::in_sync`]
    /// then, and every write since is flushed before the act). `false`: the
    /// mark was there when the owner started (an unclean stop, not resynced
    /// since): parity or copies may disagree where writes were in flight,
    /// and a resync comes first (the one a writable start runs,
    /// [`start_resync`], or `raidlab resync`; `raidlab rebuild --force`
    /// takes the risk offline, as md's `--force`).
    ///
    /// The one rule the server's start follows (the spares it takes,
    /// [`StartedParts::take_spares`]; the rebuild it resumes, `raidlab
    /// serve`) and the simulation's owner asks (its rebuilds, spares and
    /// changes). A change itself runs with the mark counted as the rule says
    /// ([`Assembly::in_service`]).
    pub fn trusts_redundancy(&self, mark_is_ours: bool) -> bool {
        self.in_sync() || mark_is_ours || !crate::level::of(&self.geometry).resyncs
    }
}

/// The recorder a started array records members taken out with, from
/// inside a request (`Array::record_take_outs`): the same commit as
/// [`Started::record_failures`]. Weak, so that taking the started array
/// apart gets the assembly back.
fn recorder(asm: &Arc<TaskMutex<Assembly>>) -> crate::array::Recorder {
    let asm = Arc::downgrade(asm);
    Arc::new(move |array: &Array| match asm.upgrade() {
        Some(asm) => record(&mut asm.lock(), array).map(|_| ()),
        None => Ok(()),
    })
}

/// Record the members `array` took out as faulty in `asm`'s superblocks;
/// the paths recorded now.
fn record(asm: &mut Assembly, array: &Array) -> Result<Vec<String>> {
    let mut recorded = Vec::new();
    for t in asm.record_taken_out(array)? {
        let (path, role) = (asm.members[t.index].device.path.clone(), t.role);
        t.outcome.map_err(|mut e| {
            e.message = format!(
                "{path} (role {role}) failed and cannot be recorded faulty: {}",
                e.message
            );
            e
        })?;
        recorded.push(path);
    }
    Ok(recorded)
}

/// How an offline management verb starts the array ([`Managed::start`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct ManageOptions {
    /// The verb writes (its logs are started and replayed first); `false`:
    /// a read-only verb (`check`), for which nothing is written.
    pub write: bool,
    /// Refuse what md refuses to run without --force
    /// ([`Assembly::check_startable`]) once the logs are replayed, with
    /// this `force`. `None`: the verb's own steps decide (a membership
    /// change is what repairs a dirty degraded array, and a failed array
    /// may still have members removed or recorded faulty).
    pub refuse: Option<bool>,
}

/// An array started for an offline management verb, which works on the
/// assembly itself; [`Managed::stop`] ends it.
#[derive(Debug)]
pub struct Managed {
    pub asm: Assembly,
    pub report: StartReport,
    write: bool,
}

impl Managed {
    /// Start `asm` for a verb as `opts` says: a failed array's logs are left
    /// alone (nothing to replay into, as every start refuses it before its
    /// logs), a writing verb's logs are replayed with members whose I/O fails
    /// taken out (`taking_out`, as every start does), then md's refusals
    /// when asked.
    pub fn start(mut asm: Assembly, opts: ManageOptions) -> Result<Managed> {
        let mut report = StartReport::default();
        if opts.write && asm.state() != ArrayState::Failed {
            let mut taken_out = Vec::new();
            report = taking_out(&mut asm, &mut taken_out, "at start", start_logs)?;
            report.taken_out = taken_out;
        }
        if let Some(force) = opts.refuse {
            asm.check_startable(force)?;
        }
        Ok(Managed {
            asm,
            report,
            write: opts.write,
        })
    }

    /// Flush every member the verb may have written (superblock commits
    /// flush their own writes; a rebuild's or a repair's data is made
    /// durable here before the verb reports success). A member whose flush
    /// fails is taken out as at start; the paths taken out are returned.
    /// Nothing is written for a read-only start.
    pub fn stop(mut self) -> Result<Vec<String>> {
        let mut taken_out = Vec::new();
        if !self.write {
            return Ok(taken_out);
        }
        taking_out(
            &mut self.asm,
            &mut taken_out,
            "at the end of the verb",
            |asm| {
                let live: Vec<Option<Arc<dyn Volume>>> = asm
                    .members
                    .iter()
                    .map(|m| m.is_live().then(|| m.device.volume.clone()))
                    .collect();
                crate::metadata_plan::flush_all(&**asm.executor(), &live)
            },
        )?;
        Ok(taken_out)
    }
}

/// Start the array's write journal or partial parity logs, as every start for
/// writing does first: after an unclean stop they are replayed before any new
/// log is written. Only the lifecycle's starts call it.
fn start_logs(asm: &mut Assembly) -> Result<StartReport> {
    Ok(StartReport {
        journal: asm.start_journal()?,
        ppl: asm.start_ppl()?,
        resync: None,
        taken_out: Vec::new(),
    })
}

/// Run the start step `step`; when a member's I/O fails in it, take that
/// member out (recorded faulty in the other members' superblocks) and run the
/// step again, for as long as the array can serve its data without the
/// members taken out. A start meets the same failures the running array meets
/// and must answer them the same way: md fails a member whose superblock,
/// resync or log-replay write fails, and goes on degraded. Every step it runs
/// is safe to run again (a log replay rewrites what it wrote; a resync and a
/// superblock commit start over). An error that names no member (the journal
/// device's, a malformed superblock) or a failure the array cannot survive is
/// returned as it is.
fn taking_out<T>(
    asm: &mut Assembly,
    taken_out: &mut Vec<String>,
    when: &str,
    mut step: impl FnMut(&mut Assembly) -> Result<T>,
) -> Result<T> {
    // Each round takes a member out for good, so this ends.
    loop {
        let error = match step(asm) {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let Some(mut index) = asm.member_of_error(&error) else {
            return Err(error);
        };
        // Failing a member commits the others' superblocks, which may fail on
        // another member in turn.
        loop {
            let path = asm.members[index].device.path.clone();
            match asm.fail_many(&[index]) {
                Ok(outcomes) => {
                    if let Some(Err(refused)) = outcomes.into_iter().next() {
                        let mut error = error;
                        error.message = format!(
                            "{}; the start could not take {path} out: {}",
                            error.message, refused.message
                        );
                        return Err(error);
                    }
                    taken_out.push(format!("{path} taken out {when}: {error}"));
                    break;
                }
                Err(e) => match asm.member_of_error(&e) {
                    Some(next) if next != index => {
                        taken_out.push(format!("{path} taken out {when}: {error}"));
                        index = next;
                    }
                    _ => return Err(e),
                },
            }
        }
    }
}

/// The resync a writable start runs before use when asked
/// ([`StartOptions::resync_unclean`]), as md resyncs an array stopped
/// uncleanly: the array not in sync, of a level with copies or parity, and
/// something to compare them with (complete, or degraded with redundancy
/// left: `Assembly::resync_can_compare`). `None`: nothing to resync, or
/// nothing left to compare (the array then runs unclean, md's write hole).
/// [`Started::start`] runs it (again after taking out a member whose I/O
/// failed in it); an owner that stops an array and starts it again on the
/// spot (the simulation's end of a run, after [`stop_records`]) runs it as
/// that start would.
pub fn start_resync(asm: &mut Assembly, opts: RunOptions) -> Result<Option<ScrubReport>> {
    if !start_resyncs(asm) {
        return Ok(None);
    }
    asm.resync(opts, &mut |_| {}).map(Some)
}

/// Whether [`start_resync`] has a resync to run on `asm`.
fn start_resyncs(asm: &Assembly) -> bool {
    !asm.in_sync()
        && crate::level::of(&asm.geometry).resyncs
        && (asm.missing().is_empty() || asm.resync_can_compare())
}

/// A clean stop's writes to the array: the held stripes and a flush. Run
/// without holding the assembly (a write may record a member taken out).
/// With [`stop_records`] after it, [`Started::stop`] for callers that keep
/// the assembly elsewhere (a served array's lives in its `LiveArray`).
pub fn stop_writes(array: &Array) -> Result<()> {
    if planted!(StopForgetsHeldStripes) {
        array.planted_forget_held_stripes(); // PLANTED BUG (tests only, `planted.rs`)
    }
    // In write-back, the stripes held are only in the journal: they go to
    // the members now, so the journal is left empty, as md leaves it.
    array.write_out_held()?;
    // What comes next (a stop, or a reshape's walk over the same members)
    // writes the members without this array's write path.
    array.forget_kept();
    array.flush()
}

/// A clean stop's superblock part, after [`stop_writes`]: the bitmap and the
/// members taken out recorded, the array marked clean if it was.
pub fn stop_records(asm: &mut Assembly, array: &Array, was_clean: bool) -> Result<Vec<String>> {
    asm.absorb_bitmap(array);
    let failed = asm.absorb(array)?;
    asm.mark_clean(was_clean)?;
    Ok(failed)
}
