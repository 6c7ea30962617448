//! Trims (RAID 0/1/10): which member ranges a trim becomes (the planner's
//! `plan_trim`: what a write there would write), run through the executor
//! under the write's locks and intent bits, and what a failed member trim
//! turns into: nothing, when the first copy cannot trim at all; zeros written
//! over the copies that could not (`plan_zero_fill`), so the copies stay
//! equal. It never trims a parity level (parity over trimmed blocks could not
//! be trusted) and never decides whether a member reads zeros after a trim
//! (the member says so).

use super::*;
use crate::plan::{MemberOp, Step};
use crate::planner::{plan_trim, plan_zero_fill};

impl Array {
    /// Trim one piece of a RAID 0/1/10 array: the member ranges a write there
    /// would write (every live copy, and a rebuild target, which mirrors always
    /// write), under the same locks and write-intent bits. A copy whose trim
    /// fails is zeroed instead, so the copies stay equal.
    pub(super) fn discard_piece(&self, pos: u64, n: u64) -> Result<()> {
        let take_outs = self.take_outs();
        let view = self.view();
        let mut live = self.live_in(&view);
        if self.phase(&view, pos, n) == Phase::Below {
            if let Some(r) = &view.recovery {
                live[r.role] = true;
            }
        }
        let plan = plan_trim(&self.geometry, &live, pos, n).map_err(|e| e.on_device(&self.name))?;
        let trims: Vec<MemberOp> = plan
            .steps
            .iter()
            .flat_map(|s| match s {
                Step::Io(ops) => ops.as_slice(),
                _ => &[],
            })
            .copied()
            .collect();
        let zeroes = |op: &MemberOp| {
            view.members
                .get(op.member)
                .and_then(Option::as_ref)
                .is_some_and(|m| m.discard_zeroes())
        };
        if trims.is_empty() || !trims.iter().all(zeroes) {
            return Err(Error::new(
                ErrorKind::Unsupported,
                Op::Discard,
                "a member cannot promise zeros after a trim; the range keeps its data",
            )
            .on_device(&self.name)
            .at(pos, n));
        }
        let _bits = self.write_log().make_safe(self, &plan, pos, n)?;
        let held = self.locks.lock(&plan.locks);
        if !self.is_current(&view, take_outs) {
            // The membership changed before the locks were ours (a rebuild
            // began, a member was taken out): plan with the new one (see
            // `write_piece`).
            drop(held);
            return self.discard_piece(pos, n);
        }
        let run = |plan: &Plan| self.run_changing_rows(plan, &view.members);
        // The first copy alone first: if it cannot be trimmed at all, nothing
        // is, rather than every trim turning into writing zeros.
        let (first, rest): (Vec<MemberOp>, Vec<MemberOp>) =
            trims.iter().partition(|o| o.member == trims[0].member);
        let mut zero: Vec<MemberOp> = Vec::new();
        for (i, part) in [first, rest].into_iter().enumerate() {
            if part.is_empty() {
                continue;
            }
            let part_plan = Plan {
                space: crate::plan::Space::Data,
                steps: vec![Step::Io(part.clone())],
                scratch: Vec::new(),
                locks: plan.locks.clone(),
            };
            match run(&part_plan) {
                Ok(()) => {}
                Err(f) if f.members.is_empty() => return Err(*f.error),
                Err(f) if i == 0 && f.error.kind == ErrorKind::Unsupported => {
                    return Err(f.error.on_device(&self.name));
                }
                // Keep the copies equal: what the others now read, these hold.
                Err(f) => zero.extend(part.into_iter().filter(|o| f.members.contains(&o.member))),
            }
        }
        if zero.is_empty() {
            return Ok(());
        }
        let zero_plan = Plan {
            space: crate::plan::Space::Data,
            locks: plan.locks.clone(),
            ..plan_zero_fill(&zero)
        };
        let Err(f) = run(&zero_plan) else {
            return Ok(());
        };
        if f.members.is_empty() {
            return Err(*f.error);
        }
        for &role in &f.members {
            self.take_out(role, &view);
        }
        if !self.geometry.survives(&self.missing_now()) {
            return Err(Error::new(
                ErrorKind::Unrecoverable,
                Op::Discard,
                format!(
                    "role(s) {:?} could be neither trimmed nor zeroed, and the array cannot serve without them",
                    f.members
                ),
            )
            .on_device(&self.name)
            .at(pos, n));
        }
        Ok(())
    }
}
