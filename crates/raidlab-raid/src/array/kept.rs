//! Where the rows kept in memory (`crate::kept_rows`) meet a running array:
//! which writes may plan with them, and what a write leaves of them.
//!
//! It decides when kept rows may be trusted: only by plain writes (no
//! partial parity log, no journal) of a parity array with every member in
//! service, no rebuild or replacement under way, no resync owed and no
//! bad block in the way. One rule after every plan of the array's data (a
//! write, a trim, write-zeroes, a repaired or rewritten block;
//! `kept_after`): the pages it changed without keeping them are forgotten,
//! and every row if it failed. Every row is also forgotten at each change
//! of who serves a role (`forget_kept`, called where membership changes and
//! where a member is taken out) and at a stop of writes (a reshape starts
//! from one). It never plans, and never does member I/O.

use super::write_log::WriteLog;
use super::*;
use crate::kept_rows::KeptRows;
use crate::plan::{Compute, Space, Step};

impl Array {
    /// The kept rows a write planned now with `live` may use.
    pub(super) fn kept_for(
        &self,
        view: &Membership,
        log: WriteLog<'_>,
        live: &[bool],
    ) -> Option<&KeptRows> {
        let kept = self.kept.get()?;
        let plain = matches!(log, WriteLog::Bitmap | WriteLog::Resync);
        let whole = view.recovery.is_none() && live.iter().all(|&l| l);
        (plain && whole && self.unsynced_from().is_none()).then_some(kept)
    }

    /// Run a write's `plan` (its stripe locks held) through `log`, the rows
    /// it fills from memory pinned while it runs, then the rule after every
    /// data plan ([`Array::kept_after`]; `clean`: nothing of the range was
    /// left out around blocks listed bad). `None`: a row it fills from was
    /// pushed out since planning, nothing ran, plan again.
    pub(super) fn run_kept(
        &self,
        log: WriteLog<'_>,
        plan: &Plan,
        members: &crate::exec::Members,
        buf: &[u8],
        kept: Option<&KeptRows>,
        clean: bool,
    ) -> Option<Result<(), crate::exec::Failed>> {
        let fills = Self::kept_fills(plan);
        if !fills.is_empty() && !kept.is_some_and(|k| k.pin(&fills)) {
            return None;
        }
        let result = log.run(self, plan, members, buf, kept);
        if let Some(k) = kept.filter(|_| !fills.is_empty()) {
            k.unpin(&fills);
        }
        self.kept_after(plan, result.is_ok() && clean);
        Some(result)
    }

    /// The member ranges (member, offset, length) `plan` fills from kept
    /// rows: pinned while it runs, so that no other write's rows push them
    /// out between its planning and its run.
    fn kept_fills(plan: &Plan) -> Vec<(usize, u64, u64)> {
        let mut fills = Vec::new();
        for step in &plan.steps {
            if let Step::Compute(cs) = step {
                for c in cs {
                    if let Compute::Kept {
                        member,
                        offset,
                        dst,
                    } = c
                    {
                        let len = plan.scratch.get(*dst).copied().unwrap_or(0) as u64;
                        fills.push((*member, *offset, len));
                    }
                }
            }
        }
        fills
    }

    /// After any plan of the array's data ran, under its stripe locks (a
    /// write, a trim, write-zeroes, a repaired block): the pages it changed
    /// without keeping them are forgotten (the members now differ from
    /// them); every row if it failed, since what reached the members is
    /// then not known.
    pub(super) fn kept_after(&self, plan: &Plan, ok: bool) {
        let Some(kept) = self.kept.get().filter(|_| plan.space == Space::Data) else {
            return;
        };
        if !ok {
            kept.clear();
            return;
        }
        // PLANTED BUG (tests only, `planted.rs`): nothing forgotten.
        if planted!(KeptRowNotForgotten) {
            return;
        }
        let kept_by_plan = |member: usize, at: u64, end: u64| {
            plan.steps.iter().any(|s| match s {
                Step::Keep(rows) => rows.iter().any(|r| {
                    r.offset <= at
                        && end <= r.offset + r.len
                        && r.pages.get(member).is_some_and(Option::is_some)
                }),
                _ => false,
            })
        };
        for op in plan.changes() {
            if !kept_by_plan(op.member, op.offset, op.offset + op.length) {
                kept.forget(op.member, op.offset, op.length);
            }
        }
    }

    /// Whether every member is a file or device read through the page
    /// cache: the kernel already keeps the pages a write left there, so a
    /// later read of them is a memory copy, and a kept row would only copy
    /// them once more on every write (RND4K writes on /dev/shm members
    /// measured 10% slower with rows kept, docs/benchmarks.md). Rows are
    /// kept for direct members, memory and the simulator's devices.
    pub(super) fn members_buffered_files(&self) -> bool {
        let view = self.view();
        let mut members = view.members.iter().flatten().peekable();
        members.peek().is_some()
            && members.all(|m| m.raw_file().is_some_and(|f| f.direct.is_none()))
    }

    /// Run `plan`, which changes members outside the write path (a trim,
    /// write-zeroes), under its stripe locks, and forget the pages it
    /// changed ([`Array::kept_after`]).
    pub(super) fn run_changing_rows(
        &self,
        plan: &Plan,
        members: &crate::exec::Members,
    ) -> Result<(), crate::exec::Failed> {
        let result = self.executor.run(
            plan,
            members,
            self.engine,
            UserBuf::Write(&[]),
            crate::exec::Hooks::NONE,
        );
        self.kept_after(plan, result.is_ok());
        result
    }

    /// Forget every kept row: the members may now differ from them.
    pub(crate) fn forget_kept(&self) {
        if let Some(kept) = self.kept.get() {
            kept.clear();
        }
    }

    /// Rows kept now and writes that read a row from memory since the
    /// start, if the array keeps rows.
    pub fn kept_counts(&self) -> Option<(u64, u64)> {
        self.kept.get().map(KeptRows::counts)
    }
}
