//! A check or repair (md's `check`, `repair`) run live: the engine's own
//! scrub of a running array (`raidlab_raid::recovery::scrub_array`: its
//! steps, stripe locks, comparisons, rewrites and pacing) as a task on the
//! virtual clock, and what the members hold where a configuration says
//! their copies differ (`crate::contents`), carried for that task's reads
//! and writes only.
//!
//! Decides nothing of the scrub: what it reads, compares, counts and
//! rewrites is the engine's. It decides which bytes a simulated member
//! holds (zeros, but for the mismatch pages and what a repair wrote over
//! them) and counts the scrub's member writes. Host requests carry no data
//! (the simulator's writes are zeros and never change the contents).

use super::*;
use crate::contents::{check_mismatches, Contents, MismatchRange};
use crate::scrub::{ScrubProgress, ScrubSpec, SCRUB_STEP};
use raidlab_raid::plan::Buf;
use raidlab_raid::recovery::{scrub_array, Progress, RunOptions};

/// The scrub under way, run as a task.
#[derive(Debug)]
pub(super) struct Check {
    pub(super) seq: u64,
    /// Whether its plans carry the members' bytes: some differed when it
    /// started. Decided once: a repair that leaves every page zeros must
    /// still have its later reads overwrite the step buffer, as real reads
    /// do.
    carry: bool,
    pub(super) state: Arc<Mutex<CheckState>>,
    pub(super) finished: Option<Ns>,
    /// The scrub's member writes (a repair's rewrites) and their bytes.
    pub(super) rewrites: u64,
    pub(super) rewritten_bytes: u64,
}

/// What the scrub's task reports as it goes.
#[derive(Debug, Default)]
pub(super) struct CheckState {
    done: u64,
    total: u64,
    mismatch_sectors: u64,
}

/// The members' bytes where they are not all zeros, and whether the
/// running task's plans carry them (the scrub's do, while any page is
/// stored).
#[derive(Debug, Default)]
pub(super) struct Data {
    pub(super) contents: Mutex<Contents>,
    pub(super) carry: std::sync::atomic::AtomicBool,
}

impl Data {
    pub(super) fn carrying(&self) -> bool {
        self.carry.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn contents(&self) -> std::sync::MutexGuard<'_, Contents> {
        lock(&self.contents)
    }

    /// An I/O step of a plan of the carrying task, in the members' data
    /// areas: reads into the caller's buffer get what the members hold
    /// (every byte: a scrub's step buffer is not zeroed between steps, as
    /// a real read overwrites it), writes from it are kept. Scratch
    /// buffers are not carried (a scrub reads and writes the caller's).
    pub(super) fn carry_step(&self, ops: &[raidlab_raid::MemberOp], user: &mut UserBuf<'_>) {
        let mut c = self.contents();
        for op in ops.iter().filter(|op| op.buf.buf == Buf::User) {
            let (at, n) = (op.buf.offset, op.buf.len);
            match (op.kind, &mut *user) {
                (IoKind::Read, UserBuf::Read(b)) => {
                    c.read(op.member, op.offset, &mut b[at..at + n])
                }
                (IoKind::Write, UserBuf::Write(b)) => c.write(op.member, op.offset, &b[at..at + n]),
                (IoKind::Write, UserBuf::Read(b)) => c.write(op.member, op.offset, &b[at..at + n]),
                _ => {}
            }
        }
    }
}

impl TaskArray {
    /// Let role `r` hold other bytes than the rest of its stripe says in
    /// each range (`crate::contents`), for a check to find. Levels with
    /// parity or copies; ranges on members in service, inside the data area.
    pub fn set_mismatches(&mut self, ranges: &[MismatchRange]) -> Result<(), String> {
        let g = *self.array.geometry();
        check_mismatches(&g, &self.out_of_service(), ranges)
            .map_err(|m| format!("{}: {m}", self.name))?;
        *self.outbox.data.contents() = Contents::new(ranges);
        Ok(())
    }

    /// Start the engine's check (or repair) of the whole array at virtual
    /// time 0, from `spec.from` bytes into each member, paced at
    /// `spec.max_rate` member bytes a second, as `raidlab check` runs it.
    pub fn start_scrub(&mut self, spec: ScrubSpec) -> Result<(), String> {
        let g = *self.array.geometry();
        let missing = self.out_of_service();
        if !raidlab_raid::recovery_plan::scrub_can_compare(&g, &missing) {
            return Err(format!(
                "{}: a {} array with role(s) {missing:?} missing has no redundancy left to check",
                self.name,
                g.level.name()
            ));
        }
        let checking = self.check.as_ref().is_some_and(|c| c.finished.is_none());
        if checking || self.rebuild.is_some() {
            return Err(format!(
                "{}: one sync action at a time (a check beside a rebuild or another check)",
                self.name
            ));
        }
        if let Some(rate) = spec.max_rate {
            self.spec_info.push(Param {
                name: "check_max_rate".into(),
                value: rate as f64 / 1e6,
                unit: "MB/s".into(),
            });
        }
        let state = Arc::new(Mutex::new(CheckState {
            done: spec.from.min(g.member_bytes),
            total: g.member_bytes,
            mismatch_sectors: 0,
        }));
        let (array, task_state) = (self.array.clone(), state.clone());
        let clock: raidlab_core::SharedClock = self.clock.clone();
        let opts = RunOptions {
            max_rate: spec.max_rate,
            step_bytes: SCRUB_STEP,
            clock: Some(clock),
            use_maps: false,
            read_ahead: false,
            ..RunOptions::default()
        };
        let seq = self.spawn(None, MD_THREAD, move || {
            let report = scrub_array(&array, spec.repair, spec.from, opts, &mut |p: Progress| {
                lock(&task_state).done = p.done;
            })?;
            lock(&task_state).mismatch_sectors = report.mismatch_sectors;
            Ok(())
        })?;
        let carry = !self.outbox.data.contents().is_empty();
        self.check = Some(Check {
            seq,
            carry,
            state,
            finished: None,
            rewrites: 0,
            rewritten_bytes: 0,
        });
        // It runs at the next advance (`next_event` says now).
        self.ready.push_back(seq);
        Ok(())
    }

    /// How far the check got.
    pub fn scrub_progress(&self) -> Option<ScrubProgress> {
        let c = self.check.as_ref()?;
        let s = lock(&c.state);
        Some(ScrubProgress {
            done: s.done,
            total: s.total,
            finished: c.finished,
            mismatch_sectors: s.mismatch_sectors,
            rewrites: c.rewrites,
            rewritten_bytes: c.rewritten_bytes,
        })
    }

    /// Whether task `seq` is the check's and its plans carry data.
    pub(super) fn carries(&self, seq: u64) -> bool {
        self.check.as_ref().is_some_and(|c| c.seq == seq && c.carry)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
