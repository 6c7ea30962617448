//! Writes around bad blocks: a write whose plan would read a range a
//! member's bad-block log lists (old data or parity it cannot read) is not
//! refused. As md's RAID 4/5/6 does with a block it cannot read (it counts
//! that member failed for the stripe), it is planned again without that
//! member: a read-modify-write turns into a reconstruct-write, or a degraded
//! write when that is what is left. The member's own blocks of the piece,
//! which that plan leaves alone, are then computed from the members just
//! written and written to it, under the same stripe locks, before the write
//! is acknowledged; a write that succeeds over a listed range drops it from
//! the list, as md's "made good" does. Where the member cannot take the
//! write, it is taken out, as any member that fails a write is.
//!
//! It decides how a write gets past listed ranges and what becomes of the
//! member that lists them. It must never acknowledge a write that left a
//! member's blocks stale and readable: either they are rewritten, or the
//! member is out before the write returns.

use super::*;
use crate::badblocks::BadBlocks;

/// Member bytes `[at, at+len)` of `role` that a write left alone because
/// `role` could not be read there; rewritten from the others after it.
pub(super) type Around = Vec<(usize, u64, u64)>;

impl Array {
    /// The plan for writing `[pos, pos+n)` (`full`, over the members `live`
    /// says are in service) made again without every member whose part of
    /// it would read a listed range, and the member ranges that plan leaves
    /// out (what `full` would have written to those members). `full` itself
    /// when it reads nothing listed. Errs when the members left cannot give
    /// the data (beyond the level's tolerance for this range).
    pub(super) fn plan_around_bad_blocks(
        &self,
        log: WriteLog<'_>,
        full: Plan,
        live: &[bool],
        pos: u64,
        n: u64,
    ) -> Result<(Plan, Around)> {
        let Some(bad) = self.bad_blocks.get() else {
            return Ok((full, Vec::new()));
        };
        if bad.check_write(&full, pos, n).is_ok() {
            return Ok((full, Vec::new()));
        }
        let geo = &self.geometry;
        let unsynced = self.unsynced_from();
        let (plan, usable) = bad
            .avoiding_with(
                geo,
                live,
                |l| log.plan(geo, l, pos, n, unsynced, None),
                |p| p,
            )
            .map_err(|e| {
                let mut e = e.at(pos, n);
                e.op = Op::Write;
                e.message = format!(
                    "{}; the write cannot be planned around the listed range",
                    e.message
                );
                e
            })?;
        let around = full
            .writes()
            .filter(|w| live[w.member] && !usable[w.member])
            .map(|w| (w.member, w.offset, w.length))
            .collect();
        crate::planner::recycle(full);
        Ok((plan, around))
    }

    /// After a write planned around listed ranges ran (its stripe locks still
    /// held, `view` the membership it ran on): compute each left-out member
    /// range from the other members, which hold the new data now, and write
    /// it. Written: what was listed there is forgotten (md's "made good").
    /// Not written (a write error, or the others cannot give it): the member
    /// is taken out, since its blocks there are stale. Errs when that leaves
    /// the array unable to serve its data.
    pub(super) fn rewrite_around(&self, around: &Around, view: &Membership) -> Result<()> {
        for &(role, at, len) in around {
            if !self.member_live(view, role) {
                continue; // taken out meanwhile: nothing of it is read again
            }
            // Never from another left-out member: the write left its blocks
            // stale too, in every row of the piece (it was planned without
            // that member throughout, listed in one row or not), until its
            // own turn here. The members the write was planned over hold
            // the whole stripe, so they are enough.
            let mut sources = self.live_in(view);
            for &(left_out, _, _) in around {
                sources[left_out] = false;
            }
            let bad = self.bad_blocks.get();
            let mut buf = vec![0u8; len as usize];
            // Computed as a rebuild step is, reading around another member
            // that fails to read (counted against it as any read error).
            let written = BadBlocks::rebuild_around(
                bad.as_deref(),
                &self.geometry,
                &sources,
                role,
                at,
                len,
                role,
                |plan| {
                    let r = self.executor.run(
                        &plan,
                        &view.members,
                        self.engine,
                        UserBuf::Read(&mut buf),
                        crate::exec::Hooks::NONE,
                    );
                    self.kept_after(&plan, r.is_ok());
                    crate::planner::recycle(plan);
                    r
                },
                |m| {
                    let errors = self.read_errors[m].fetch_add(1, Ordering::Relaxed);
                    if errors + 1 > MAX_READ_ERRORS {
                        self.take_out(m, view);
                    }
                },
            );
            match written {
                Ok(()) => self.bad_blocks.made_good(role, at, len),
                Err(_) => self.take_out(role, view),
            }
        }
        let missing = self.missing_now();
        if !self.geometry.survives(&missing) {
            return Err(Error::new(
                ErrorKind::Unrecoverable,
                Op::Write,
                format!(
                    "a member's blocks could not be written around its bad-block list, and with \
                     roles {missing:?} out the array cannot serve its data"
                ),
            )
            .on_device(&self.name));
        }
        Ok(())
    }

    /// A write `plan` succeeded: what it wrote over ranges the members' logs
    /// list reads back from them now (md clears a bad block a write succeeded
    /// on).
    pub(super) fn written_made_good(&self, plan: &Plan) {
        let Some(listed) = self.bad_blocks.get() else {
            return;
        };
        // Almost every write hits nothing listed: looked up in the snapshot,
        // so the list's write lock is taken only where a range is listed.
        for w in plan.writes() {
            if listed.hit(w.member, w.offset, w.length).is_some() {
                self.bad_blocks.made_good(w.member, w.offset, w.length);
            }
        }
    }
}
