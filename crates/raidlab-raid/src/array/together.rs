//! Held stripes written out together: the pieces a flush of the stripe cache
//! writes (each within one stripe, no two in one stripe) planned one by one
//! as the write path plans them, merged into one plan (`Plan::together`) and
//! run under all their stripe locks at once, so that the members get every
//! piece's reads at once and then every piece's writes, as md's stripe heads
//! go down side by side. Written one after another, 33 held read-modify-writes
//! on disks that seek took a 0.47 s flush.
//!
//! Decides only when pieces may go together, and how many at once. Anything the lone write path
//! handles and this does not (a rebuild or replacement under way, a partial
//! parity log or journal, a block listed bad, a member read that fails, the
//! members changing meanwhile) sends the pieces one by one down that path,
//! before anything was written; a member write that fails is acted on as the
//! lone path does (the member taken out, the write complete on the others).

use super::*;

impl Array {
    /// Write `pieces` (array offset, bytes) as [`Array::write_direct`] would
    /// one after another, together where it can, in groups of at most one
    /// write piece's bytes (16 MiB: a merged plan's copy of the pieces and
    /// its scratch stay bounded as a lone write's do, whatever the size of
    /// the stripe cache); each piece's outcome.
    pub(super) fn write_together(&self, pieces: &[(u64, &[u8])]) -> Vec<Result<()>> {
        let mut out = Vec::with_capacity(pieces.len());
        for group in groups(pieces, self.piece as usize) {
            match (group.len() > 1)
                .then(|| self.try_together(group))
                .flatten()
            {
                Some(Ok(())) => out.extend(group.iter().map(|_| Ok(()))),
                Some(Err(e)) => out.extend(group.iter().map(|_| Err(e.copy()))),
                None => out.extend(group.iter().map(|&(o, d)| self.write_direct(d, o))),
            }
        }
        out
    }

    /// `None`: nothing written, write them one by one.
    fn try_together(&self, pieces: &[(u64, &[u8])]) -> Option<Result<()>> {
        let log = self.write_log();
        if !matches!(log, WriteLog::Resync | WriteLog::Bitmap) {
            return None;
        }
        let first = pieces.first()?.0;
        let last = pieces.iter().map(|(o, d)| o + d.len() as u64).max()?;
        self.refuse_when_failed(Op::Write, first, last - first)
            .ok()?;
        let take_outs = self.take_outs();
        let view = self.view();
        if view.recovery.is_some() {
            return None;
        }
        let live = self.live_in(&view);
        let kept = self.kept_for(&view, log, &live);
        let mut plans = Vec::new();
        let mut bits = Vec::new();
        let mut buf = Vec::new();
        // Each piece lies in one stripe, so it is one of the write path's
        // pieces (`Array::pieces` cuts only at whole stripes).
        for &(offset, data) in pieces {
            let n = data.len() as u64;
            let plan = log
                .plan(&self.geometry, &live, offset, n, self.unsynced_from(), kept)
                .ok()?;
            let (plan, around) = self
                .plan_around_bad_blocks(log, plan, &live, offset, n)
                .ok()?;
            if !around.is_empty() {
                return None;
            }
            bits.push(log.make_safe(self, &plan, offset, n).ok()?);
            plans.push((plan, buf.len()));
            buf.extend_from_slice(data);
        }
        let parts: Vec<(&Plan, usize)> = plans.iter().map(|(p, at)| (p, *at)).collect();
        let plan = Plan::together(&parts)?;
        let held = self.locks.lock(&plan.locks);
        // As a lone write: a rebuild may have begun, or a member gone, since
        // planning (both change the view); rows taken from memory may have
        // been pushed out.
        if !self.is_current(&view, take_outs) {
            return None;
        }
        let result = self.run_kept(log, &plan, &view.members, &buf, kept, true)?;
        let done = match result {
            Ok(()) => {
                for (p, _) in &plans {
                    self.count_method(p);
                }
                self.written_made_good(&plan);
                drop(held);
                Ok(())
            }
            // Every other member was written: with the failed one taken out,
            // the array holds every piece (degraded). Taken out before the
            // locks go, as a lone write does.
            Err(f) if f.kind == IoKind::Write && !f.members.is_empty() => {
                for &r in &f.members {
                    self.take_out(r, &view);
                }
                drop(held);
                self.survive_failure(f, first, last - first)
            }
            // A read failed (the writes never ran: nothing changed), or a
            // member could not be written at all: each piece alone, where
            // the write path repairs and plans again.
            Err(_) => return None,
        };
        for (p, _) in plans {
            crate::planner::recycle(p);
        }
        crate::planner::recycle(plan);
        drop(bits);
        Some(done)
    }
}

/// `pieces` in runs of at most `most` bytes (a larger piece alone).
fn groups<'a, 'b>(
    pieces: &'a [(u64, &'b [u8])],
    most: usize,
) -> impl Iterator<Item = &'a [(u64, &'b [u8])]> {
    let mut rest = pieces;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut bytes = 0;
        let n = rest
            .iter()
            .take_while(|(_, d)| {
                bytes += d.len();
                bytes <= most
            })
            .count()
            .max(1);
        let (group, tail) = rest.split_at(n);
        rest = tail;
        Some(group)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_runs_go_down_in_groups_of_at_most_16_mib() {
        let big = vec![0u8; 6 << 20];
        let huge = vec![0u8; 20 << 20];
        let pieces: Vec<(u64, &[u8])> = vec![
            (0, &big[..]),
            (1, &big[..]),
            (2, &big[..]),
            (3, &huge[..]),
            (4, &big[..]),
        ];
        let sizes: Vec<Vec<u64>> = groups(&pieces, MAX_PIECE as usize)
            .map(|g| g.iter().map(|(o, _)| *o).collect())
            .collect();
        assert_eq!(sizes, vec![vec![0, 1], vec![2], vec![3], vec![4]]);
        assert_eq!(groups(&[], MAX_PIECE as usize).count(), 0);
    }
}
