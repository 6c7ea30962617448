//! Write-zeroes on an array: which part of a zeroed range becomes member
//! write-zeroes (the planner's `plan_write_zeroes`: whole stripes on RAID
//! 4/5/6, any range on RAID 0/1/10 and linear), run through the executor
//! under the write's stripe locks with the write's bitmap bits marked first,
//! and which part is written as buffers of zeros through the ordinary write
//! path (the parts of a stripe at either end, whose parity must be computed).
//! A member whose write-zeroes fails gets zeros written instead
//! (`plan_zero_fill`); a member that cannot take those either is taken out,
//! as after a failed write.
//!
//! It never zeroes members directly where every write must be logged (a
//! partial parity log, a write journal): there the whole range is written as
//! zeros through the write path. With a stripe cache, what the cache holds of
//! the whole stripes goes down first, so no held write lands on the zeros
//! afterwards.

use super::*;
use crate::plan::{MemberOp, Step};
use crate::planner::{plan_write_zeroes, plan_zero_fill, zero_stripe_bytes};
use raidlab_core::ZERO_PIECE;

impl Array {
    /// Make `[offset, offset+len)` read as zeros (the `Volume` call).
    pub(super) fn zero_range(&self, offset: u64, len: u64) -> Result<()> {
        check_range(&self.name, Op::Write, self.size(), offset, len)?;
        self.refuse_read_only(Op::Write, offset, len)?;
        self.refuse_when_failed(Op::Write, offset, len)?;
        if self.ppl.is_some() || self.journal.is_some() {
            return self.zero_by_writing(offset, len);
        }
        let end = offset + len;
        let (first, last) = match zero_stripe_bytes(&self.geometry) {
            Some(stripe) => (offset.div_ceil(stripe) * stripe, end / stripe * stripe),
            None => (offset, end),
        };
        if first >= last {
            return self.zero_by_writing(offset, len);
        }
        self.zero_by_writing(offset, first - offset)?;
        if let Some(cache) = self.stripe_cache.get() {
            cache.write_out_range(Some((first, last - first)), self)?;
        }
        for (pos, n) in self.pieces(first, last - first) {
            self.zero_piece(pos, n)?;
        }
        if let Some(cache) = self.stripe_cache.get() {
            cache.written(first, last - first);
        }
        self.zero_by_writing(last, end - last)
    }

    /// Buffers of zeros through the ordinary write path.
    fn zero_by_writing(&self, offset: u64, len: u64) -> Result<()> {
        let zeros = vec![0u8; len.min(ZERO_PIECE) as usize];
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(ZERO_PIECE) as usize;
            self.write_at(&zeros[..n], offset + done)?;
            done += n as u64;
        }
        Ok(())
    }

    /// Zero one piece (whole stripes on parity levels) with member
    /// write-zeroes: the member ranges a write there would write, under its
    /// locks and bitmap bits; planned again if a rebuild moved meanwhile.
    fn zero_piece(&self, pos: u64, n: u64) -> Result<()> {
        loop {
            let take_outs = self.take_outs();
            let view = self.view();
            let mut live = self.live_in(&view);
            let phase = self.phase(&view, pos, n);
            match phase {
                // The split falls on a stripe edge (the rebuild moves in
                // whole chunks of every member).
                Phase::Split(at) => {
                    self.zero_piece(pos, at - pos)?;
                    return self.zero_piece(at, pos + n - at);
                }
                Phase::Below => {
                    if let Some(r) = &view.recovery {
                        live[r.role] = true;
                    }
                }
                Phase::None | Phase::Above => {}
            }
            let on_array = |e: Error| e.on_device(&self.name);
            // The bitmap is marked from the write plan: the same member
            // ranges, with its usual kind of operation.
            let written = plan_write(&self.geometry, &live, pos, n).map_err(on_array)?;
            let plan = plan_write_zeroes(&self.geometry, &live, pos, n).map_err(on_array)?;
            let _bits = self.write_log().make_safe(self, &written, pos, n)?;
            let held = self.locks.lock(&plan.locks);
            if self.phase(&view, pos, n) != phase || !self.is_current(&view, take_outs) {
                drop(held);
                continue;
            }
            let run = |plan: &Plan| self.run_changing_rows(plan, &view.members);
            let f = match run(&plan) {
                Ok(()) => return Ok(()),
                Err(f) if f.members.is_empty() => return Err(*f.error),
                Err(f) => f,
            };
            // Zeros written over what the failing members could not zero.
            let failed: Vec<MemberOp> = plan
                .steps
                .iter()
                .flat_map(|s| match s {
                    Step::Io(ops) => ops.as_slice(),
                    _ => &[],
                })
                .filter(|o| f.members.contains(&o.member))
                .copied()
                .collect();
            let fill = Plan {
                locks: plan.locks.clone(),
                ..plan_zero_fill(&failed)
            };
            return match run(&fill) {
                Ok(()) => Ok(()),
                Err(g) if g.members.is_empty() => Err(*g.error),
                Err(g) => {
                    // Taken out before the locks go, as after a failed write.
                    for &role in &g.members {
                        self.take_out(role, &view);
                    }
                    drop(held);
                    self.survive_failure(g, pos, n)
                }
            };
        }
    }
}
