//! Long-running whole-array work: rebuild a member from the others, resync parity
//! and mirrors, and scrub (check, repair).
//!
//! Each walks the members' data areas in steps, reports progress through a
//! callback, honours a rate limit, and checkpoints its position in the superblocks
//! the way md does (`recovery_offset` on the member being rebuilt, `resync_offset`
//! for a resync), so an interrupted run resumes where it stopped. The contents of a
//! lost member always come from the engine's own read path (the planner's degraded
//! reads) or from the parity engine; nothing here knows a layout rule.
//!
//! The offline rebuild is `rebuild`'s; scrubs and resyncs are `scrub` and
//! `scrub_run`'s.

mod compare;
mod gate;
mod rebuild;
mod rebuild_step;
mod report;
mod scrub;
mod scrub_run;

pub use compare::compare_mirror;
pub use report::{Finding, ScrubReport};
pub use scrub_run::scrub_array;

/// Page size of a scrub's comparisons (md's stripe page): mismatches are
/// found and counted per page.
pub const SCRUB_PAGE: usize = PAGE;

/// A parity scrub's comparison of member contents a caller holds itself (the
/// simulator's sparse members): `bufs` has one buffer per role, each covering
/// `[pos, pos+len)` of the member data areas, `pos` and `len` whole pages.
/// Returns md's mismatch count (sectors) and, with `repair`, the ranges
/// `(role, member offset, length)` to write back, `bufs` fixed in place, the
/// same comparison and the same choice of what to rewrite as `raidlab check`
/// and `raidlab repair` make.
pub fn compare_parity(
    geo: &Geometry,
    bufs: &mut [&mut [u8]],
    present: &[bool],
    pos: u64,
    repair: bool,
) -> (u64, Vec<(usize, u64, usize)>) {
    let missing = (0..present.len()).filter(|&r| !present[r]).collect();
    let mut report = ScrubReport::new(repair, missing);
    let names: Vec<String> = (0..present.len()).map(|r| format!("role {r}")).collect();
    let fixes = compare::scrub_parity(geo, bufs, present, pos, &mut report, &names, repair, false);
    (report.mismatch_sectors, fixes)
}

use crate::array::Array;
use crate::assemble::{Assembly, MemberState};
use crate::badblocks::BadBlocks;
use crate::exec::{Executor, Members, UserBuf};
use crate::level::{self, BitmapUnit};
use crate::long_run::{Driven, LongRun, Stepped, Steps};
use crate::plan::Plan;
use raidlab_core::SharedClock;
use raidlab_core::{Error, ErrorKind, Op, Result, Volume};
use raidlab_layout::{Geometry, Location};
use serde::Serialize;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A rebuild step's offset, contents and the write that puts them on the
/// member being rebuilt.
type StepResult = Result<(u64, Vec<u8>, Plan)>;

const SECTOR: u64 = 512;
/// md compares and counts mismatches in 4 KiB pages (one stripe_head per page).
const PAGE: usize = 4096;

/// How a long run goes about its work.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Upper bound on member-area bytes processed per second.
    pub max_rate: Option<u64>,
    /// Write a checkpoint to the superblocks at least this often (bytes of member
    /// area).
    pub checkpoint_bytes: u64,
    /// Bytes of member area per step.
    pub step_bytes: u64,
    /// Let a rebuild read members through their memory mappings where they have
    /// them (page-cached files); off, every byte goes through `read_at`.
    pub use_maps: bool,
    /// When set, the run stops at the next step boundary, saves its checkpoint and
    /// returns an `Interrupted` error (Ctrl-C; tests of resuming).
    pub stop: Option<&'static AtomicBool>,
    /// Rebuild even though parity is not known to be consistent (resync pending).
    pub force: bool,
    /// The clock `max_rate` paces against (the system's when `None`; tests
    /// give a virtual one, so pacing is checked exactly).
    pub clock: Option<SharedClock>,
    /// Let a rebuild's readers run ahead of its writer (on by default: the
    /// reads of the next step overlap this step's write). Off, each step is
    /// read only once the writer wants it, so the member requests of a run
    /// do not depend on thread timing (deterministic simulation).
    pub read_ahead: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            max_rate: None,
            checkpoint_bytes: 64 << 20,
            step_bytes: 2 << 20,
            use_maps: true,
            stop: None,
            force: false,
            clock: None,
            read_ahead: true,
        }
    }
}

/// Progress of a run, in bytes of each member's data area.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub done: u64,
    pub total: u64,
}

/// What a rebuild did.
#[derive(Debug, Clone, Serialize)]
pub struct RebuildReport {
    pub rebuilt: Vec<RebuiltMember>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RebuiltMember {
    pub device: String,
    pub role: usize,
    /// Where this run started (bytes into the data area; non-zero on a resume).
    pub resumed_from: u64,
    /// Bytes of its data area this run rewrote.
    pub bytes: u64,
    /// The size of its data area, what a whole rebuild rewrites.
    pub member_bytes: u64,
    /// Whether only the chunks the write-intent bitmap marks dirty were
    /// rebuilt (a re-added member, md's bitmap-based recovery).
    pub bitmap_based: bool,
}

pub(crate) fn stopped(opts: &RunOptions) -> bool {
    opts.stop.is_some_and(|s| s.load(Ordering::Relaxed))
}

fn interrupted(what: &str, pos: u64) -> Error {
    Error::new(
        ErrorKind::Interrupted,
        Op::Write,
        format!("{what} stopped at byte {pos} of each member; run the same command again to resume from there"),
    )
}

/// The clock a run paces against: the one its options give, else the system's.
pub(crate) fn clock_of(opts: &RunOptions) -> SharedClock {
    opts.clock
        .clone()
        .unwrap_or_else(raidlab_core::clock::system)
}

/// A long run's schedule over `ranges` as its options ask: step, rate and
/// checkpoint cadence, started now on its clock.
pub(crate) fn schedule(opts: &RunOptions, ranges: &[(u64, u64)], step: u64) -> LongRun {
    LongRun::new(
        ranges.iter().map(|&(a, b)| a..b),
        step,
        clock_of(opts).now(),
    )
    .with_rate(opts.max_rate)
    .with_checkpoints(opts.checkpoint_bytes)
}

/// Round a resume position down to a whole chunk (and page).
fn align_down(geo: &Geometry, pos: u64) -> u64 {
    let unit = geo.chunk_bytes.max(PAGE as u64);
    pos / unit * unit
}

fn run_with(exec: &dyn Executor, plan: &Plan, members: &Members, user: UserBuf<'_>) -> Result<()> {
    run_failed(exec, plan, members, user).map_err(|f| *f.error)
}

/// Run `plan` with `exec` (the assembly's: an offline run's I/O goes where
/// every other plan's does), saying which members failed if it did not
/// complete.
fn run_failed(
    exec: &dyn Executor,
    plan: &Plan,
    members: &Members,
    user: UserBuf<'_>,
) -> Result<(), crate::exec::Failed> {
    exec.run(
        plan,
        members,
        raidlab_parity::selected(),
        user,
        crate::exec::Hooks::NONE,
    )
}
