//! An array's life between assembly and a clean stop: the start and stop
//! sequence that serve, import and export, the cache verbs' origin and the
//! benchmark targets go through, as md runs it at every start and stop. Not
//! yet every user: the offline management verbs start only the logs
//! (`start_logs`), and the simulator builds its `Array` directly.
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
//! It decides the order of those steps and nothing else: what each step does
//! lives in `assemble`, `journal`, `ppl` and `recovery`. It never prints: it
//! reports what the start did, and callers say it.

use crate::array::Array;
use crate::assemble::{ArrayState, Assembly};
use crate::journal::{JournalMode, JournalReplay};
use crate::ppl::PplReplay;
use crate::recovery::{RunOptions, ScrubReport};
use crate::stripe_cache::StripeCacheConfig;
use raidlab_core::{Result, Volume};
use raidlab_layout::Level;
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
}

/// An array started for use; [`Started::stop`] ends its life cleanly.
#[derive(Debug)]
pub struct Started {
    pub asm: Assembly,
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
/// decides the order of things (the torture harness): plans carried out by
/// `executor`, and the stripe cache's hold time measured on `clock` with no
/// thread of its own (the driver calls `Array::write_out_one_expired`).
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
        if asm.state() == ArrayState::Failed || !opts.write {
            // Nothing to replay into an array that cannot be read; a read-only
            // start writes nothing.
            asm.check_startable(opts.force)?;
        }
        if opts.write {
            report = start_logs(&mut asm)?;
            asm.check_startable(opts.force)?;
        }
        let redundant = asm.geometry.level != Level::Raid0;
        let mut was_clean = asm.in_sync();
        // A degraded array whose members left still hold copies or parity
        // to compare is resynced too, as md resyncs a dirty degraded mirror:
        // after a crash its copies may differ, and reads would then depend
        // on the copy read. Not while a member is being rebuilt: its rebuilt
        // part is not among what the resync compares, so the rebuild must
        // not resume as if the array were consistent.
        let resyncable =
            asm.missing().is_empty() || (asm.rebuilding().is_empty() && asm.resync_can_compare());
        if opts.write && opts.resync_unclean && redundant && !was_clean && resyncable {
            report.resync = Some(asm.resync(RunOptions::default(), &mut |_| {})?);
            was_clean = true;
        }
        let consistent = was_clean;
        let resume: Vec<(usize, u64)> = asm
            .rebuilding()
            .into_iter()
            .map(|(i, _)| (i, asm.members[i].sb.recovery_offset * 512))
            .collect();
        if opts.write {
            was_clean = asm.mark_dirty()? && was_clean;
        }
        // Only now: the running array writes its copy of the bitmap before
        // each write, and a copy taken before the dirty mark carries the old
        // event count, which makes the bitmap look stale after a crash (every
        // chunk resynced instead of the few written).
        let array = match &driven {
            Some(d) => Arc::new(asm.array()?.with_executor(d.executor.clone())),
            None => Arc::new(asm.array()?),
        };
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

    /// Flush, record members that failed while running (returned: the array is
    /// degraded now) and a clean stop. Nothing is written for a read-only start.
    pub fn stop(mut self) -> Result<Vec<String>> {
        stop_parts(&mut self.asm, &self.array, self.was_clean, self.writable)
    }
}

/// Start the array's write journal or partial parity logs, as every start for
/// writing does first: after an unclean stop they are replayed before any new
/// log is written. Verbs that change membership start them too.
pub fn start_logs(asm: &mut Assembly) -> Result<StartReport> {
    Ok(StartReport {
        journal: asm.start_journal()?,
        ppl: asm.start_ppl()?,
        resync: None,
    })
}

/// [`Started::stop`] for callers that keep the assembly elsewhere (a served
/// array's assembly lives in its `LiveArray`).
pub fn stop_parts(
    asm: &mut Assembly,
    array: &Array,
    was_clean: bool,
    writable: bool,
) -> Result<Vec<String>> {
    if !writable {
        return Ok(Vec::new());
    }
    // In write-back, the stripes held are only in the journal: they go to
    // the members now, so the journal is left empty, as md leaves it.
    array.write_out_held()?;
    array.flush()?;
    asm.absorb_bitmap(array);
    let failed = asm.absorb(array)?;
    asm.mark_clean(was_clean)?;
    Ok(failed)
}
