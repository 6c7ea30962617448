//! A scrub (md's `check`; on a consistent array a resync's I/O is the same)
//! running below a simulated array: where it is and what it reads next.
//!
//! Where the next step starts and when (a rate limit, per member byte as md's
//! speed limits are) is the engine's long-run schedule
//! (`raidlab_raid::long_run::LongRun`, the one `raidlab check` runs by); this
//! module turns its waits into virtual times. What a step reads is the engine's
//! (`raidlab_raid::recovery_plan::plan_scrub_step`, the plan raidlab's own
//! scrub runs) and when its reads complete is the array's scheduling. A
//! simulated member holds no data (zeros, consistent), except where a
//! configuration's mismatch ranges say copies differ (`crate::contents`):
//! there the engine's comparison finds the mismatches and, with repair, the
//! engine's rewrites run in virtual time before the step lets go of its
//! stripes.

use crate::device::Ns;
use raidlab_layout::Geometry;
use raidlab_raid::long_run::{LongRun, Next};
use raidlab_raid::recovery_plan::{plan_scrub_step, ScrubWalk};
use raidlab_raid::Plan;
use std::time::Duration;

/// Bytes of member area a raidlab scrub reads per step (`RunOptions`'
/// default step).
pub const SCRUB_STEP: u64 = 2 << 20;

/// A scrub of the whole array from the start of the run.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScrubSpec {
    /// Upper bound on member bytes checked per second (`None`: as fast as the
    /// members allow, raidlab's default).
    pub max_rate: Option<u64>,
    /// Bytes of each member's data area already checked (a resumed check).
    pub from: u64,
    /// Rewrite what differs (md's `repair`); else only count it (`check`).
    pub repair: bool,
}

/// How far a simulated scrub got, in bytes of each member's data area.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScrubProgress {
    pub done: u64,
    pub total: u64,
    /// Virtual time it completed, if it has.
    pub finished: Option<Ns>,
    /// md's mismatch count so far: 512-byte sectors of mismatched pages.
    pub mismatch_sectors: u64,
    /// Member writes a repair issued (the engine's rewrites) and their bytes.
    pub rewrites: u64,
    pub rewritten_bytes: u64,
}

/// A scrub under way in virtual time.
#[derive(Debug)]
pub(crate) struct Scrub {
    walk: ScrubWalk,
    geometry: Geometry,
    present: Vec<bool>,
    /// Position (walk units), rate and steps: the engine's schedule.
    run: LongRun,
    /// Walk position of the step under way.
    upto: u64,
    /// When the next step starts (`None` while one is under way or when done).
    pub(crate) next: Option<Ns>,
    finished: Option<Ns>,
    pub(crate) repair: bool,
    mismatch_sectors: u64,
    rewrites: u64,
    rewritten_bytes: u64,
}

impl Scrub {
    /// A scrub of `geometry` with the members `present` says are there.
    pub(crate) fn new(geometry: Geometry, present: Vec<bool>, spec: ScrubSpec) -> Scrub {
        let walk = ScrubWalk::new(&geometry, SCRUB_STEP);
        let pos = walk.position(&geometry, spec.from);
        // The run starts at virtual time 0, with the workload.
        let run =
            LongRun::over(pos..walk.total, walk.step, Duration::ZERO).with_rate(spec.max_rate);
        Scrub {
            walk,
            geometry,
            present,
            run,
            upto: pos,
            next: (pos < walk.total).then_some(0),
            finished: (pos >= walk.total).then_some(0),
            repair: spec.repair,
            mismatch_sectors: 0,
            rewrites: 0,
            rewritten_bytes: 0,
        }
    }

    /// The plan of the next step (the engine's own scrub reads), now due.
    pub(crate) fn step(&mut self) -> Result<Plan, String> {
        self.next = None;
        let Some(step) = self.run.peek() else {
            return Err("internal: a scrub step after the end".into());
        };
        let (pos, n) = (step.start, step.end - step.start);
        let (plan, _) = plan_scrub_step(&self.geometry, &self.present, pos, n)
            .map_err(|e| format!("scrub step at {pos}: {e}"))?;
        self.upto = step.end;
        Ok(plan)
    }

    /// The member range of the step under way (parity walks go by member
    /// bytes) and which roles it reads.
    pub(crate) fn step_range(&self) -> (u64, u64, &[bool]) {
        (self.run.position(), self.upto, &self.present)
    }

    pub(crate) fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// What the comparison of the step under way found and rewrote.
    pub(crate) fn count(&mut self, mismatch_sectors: u64, rewrites: &[(usize, u64, usize)]) {
        self.mismatch_sectors += mismatch_sectors;
        self.rewrites += rewrites.len() as u64;
        self.rewritten_bytes += rewrites.iter().map(|r| r.2 as u64).sum::<u64>();
    }

    /// The step under way completed at `now`: say when the next starts.
    pub(crate) fn step_done(&mut self, now: Ns) {
        let member = |pos| self.walk.member_bytes(&self.geometry, pos);
        let work = member(self.upto) - member(self.run.position());
        self.run.advance(self.upto, work);
        self.next = match self.run.next(Duration::from_nanos(now)) {
            Next::Done => {
                self.finished = Some(now);
                None
            }
            Next::Step(_) => Some(now),
            Next::Wait(due) => Some(due.as_nanos() as Ns),
        };
    }

    pub(crate) fn progress(&self) -> ScrubProgress {
        ScrubProgress {
            done: self.walk.member_bytes(&self.geometry, self.run.position()),
            total: self.geometry.member_bytes,
            finished: self.finished,
            mismatch_sectors: self.mismatch_sectors,
            rewrites: self.rewrites,
            rewritten_bytes: self.rewritten_bytes,
        }
    }
}
