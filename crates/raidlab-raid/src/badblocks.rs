//! md's bad-block log honoured: sectors a member's log lists as bad are never
//! read from that member. A read whose plan would touch one is planned again
//! without that member, so the bytes come from redundancy (a mirror copy,
//! parity); where there is none left, the read fails with an error naming the
//! member and the range, as md's does.
//!
//! Rebuilds, read-error repairs and scrubs avoid listed ranges the same way:
//! a rebuild or repair step leaves out a source member whose range is listed,
//! and a scrub compares what is left (or counts the range unchecked).
//!
//! It decides which members a plan may read; it never writes the log
//! (`assemble::bad_blocks` drops a range after a rebuild or repair wrote it,
//! and lists one a read-error rewrite could not write, as md does). A
//! running array keeps its list in a [`LiveBadBlocks`]: a range it rewrote
//! is read from the member again at once, a range it could not rewrite is
//! avoided at once, and both changes wait there until the array's owner
//! writes them to the member's log (`LiveArray::poll`). A write whose plan
//! would read a listed range (to compute parity) is planned again without
//! that member (`avoiding_with`), never computed from unreadable data; what
//! the array then does about the member's blocks is `array/around.rs`'s.

use crate::exec::Failed;
use crate::plan::Plan;
use crate::planner::plan_read;
use crate::recovery_plan::{plan_rebuild, plan_repair};
use raidlab_core::{Error, ErrorKind, IoKind, Op, Result};
use raidlab_layout::Geometry;
use raidlab_md::badblocks::BadRange;
use std::sync::{Arc, Mutex, RwLock};

const SECTOR: u64 = 512;

/// Each role's listed ranges, as byte ranges `[start, end)` of its data area,
/// sorted by start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BadBlocks {
    roles: Vec<Vec<(u64, u64)>>,
}

impl BadBlocks {
    /// From each role's md log (`None`: no member or no log) and the data
    /// offset (sectors) of that member. Ranges before the data area (in the
    /// metadata) concern no array data and are left out. `None` when no role
    /// lists anything.
    pub fn from_md(lists: &[Option<(u64, Vec<BadRange>)>]) -> Option<BadBlocks> {
        let roles: Vec<Vec<(u64, u64)>> = lists
            .iter()
            .map(|l| {
                let Some((data_offset, ranges)) = l else {
                    return Vec::new();
                };
                let mut v: Vec<(u64, u64)> = ranges
                    .iter()
                    .filter_map(|r| {
                        let end = r.sector.saturating_add(r.count);
                        (end > *data_offset).then(|| {
                            let start = r.sector.max(*data_offset) - data_offset;
                            (
                                start.saturating_mul(SECTOR),
                                (end - data_offset).saturating_mul(SECTOR),
                            )
                        })
                    })
                    .collect();
                v.sort_unstable();
                v
            })
            .collect();
        roles
            .iter()
            .any(|r| !r.is_empty())
            .then_some(BadBlocks { roles })
    }

    /// The same lists with `role`'s whole sectors inside `[start, end)` (data
    /// area bytes) dropped; `None` when nothing is listed any more.
    pub fn without(&self, role: usize, start: u64, end: u64) -> Option<BadBlocks> {
        let (lo, hi) = (start.div_ceil(SECTOR) * SECTOR, end / SECTOR * SECTOR);
        let mut roles = self.roles.clone();
        if let Some(list) = roles.get_mut(role).filter(|_| lo < hi) {
            *list = list
                .iter()
                .flat_map(|&(a, b)| {
                    if b <= lo || a >= hi {
                        return vec![(a, b)];
                    }
                    [(a, lo), (hi, b)]
                        .into_iter()
                        .filter(|(x, y)| x < y)
                        .collect()
                })
                .collect();
        }
        roles
            .iter()
            .any(|r| !r.is_empty())
            .then_some(BadBlocks { roles })
    }

    /// The same lists with `[start, end)` (data area bytes, widened to whole
    /// sectors) listed for `role` too.
    pub fn with(this: Option<&BadBlocks>, role: usize, start: u64, end: u64) -> BadBlocks {
        let mut roles = this.map(|b| b.roles.clone()).unwrap_or_default();
        if roles.len() <= role {
            roles.resize(role + 1, Vec::new());
        }
        let range = (
            start / SECTOR * SECTOR,
            end.div_ceil(SECTOR).saturating_mul(SECTOR),
        );
        roles[role].push(range);
        roles[role].sort_unstable();
        BadBlocks { roles }
    }

    /// The first listed range of `role` that `[offset, offset + len)` touches.
    pub fn hit(&self, role: usize, offset: u64, len: u64) -> Option<(u64, u64)> {
        let list = self.roles.get(role)?;
        let end = offset.saturating_add(len);
        // Ranges may overlap (md merges them, but a log is read as found).
        list.iter()
            .take_while(|r| r.0 < end)
            .find(|r| r.1 > offset)
            .copied()
    }

    /// Plan a read of `[offset, offset + len)` over the members `live` says are
    /// usable that reads no listed range: each member whose read would touch
    /// one is left out and the read planned again from redundancy.
    pub fn read_plan(
        &self,
        geo: &Geometry,
        live: &[bool],
        offset: u64,
        len: u64,
        hint: usize,
    ) -> Result<Plan> {
        self.avoiding(
            geo,
            live,
            |usable| plan_read(geo, usable, offset, len, hint),
            |p| p,
        )
        .map_err(|e| e.at(offset, len))
    }

    /// What `make(usable)` plans (a read, a rebuild, a repair), made again
    /// with each member left out whose read would touch a listed range, until
    /// it reads none; refused when the members left cannot give the data.
    pub fn avoiding<T>(
        &self,
        geo: &Geometry,
        live: &[bool],
        make: impl Fn(&[bool]) -> Result<T>,
        plan_of: impl Fn(&T) -> &Plan,
    ) -> Result<T> {
        self.avoiding_with(geo, live, make, plan_of).map(|(t, _)| t)
    }

    /// [`BadBlocks::avoiding`], with the members it was made over (those of
    /// `live` not left out).
    pub fn avoiding_with<T>(
        &self,
        geo: &Geometry,
        live: &[bool],
        make: impl Fn(&[bool]) -> Result<T>,
        plan_of: impl Fn(&T) -> &Plan,
    ) -> Result<(T, Vec<bool>)> {
        let mut usable = live.to_vec();
        loop {
            let made = make(&usable)?;
            let bad: Vec<(usize, (u64, u64))> = plan_of(&made)
                .reads()
                .filter_map(|op| {
                    self.hit(op.member, op.offset, op.length)
                        .map(|h| (op.member, h))
                })
                .collect();
            let Some(&(role, (start, end))) = bad.first() else {
                return Ok((made, usable));
            };
            for (r, _) in &bad {
                usable[*r] = false;
            }
            let missing: Vec<usize> = (0..usable.len()).filter(|&r| !usable[r]).collect();
            if !geo.survives(&missing) {
                return Err(Error::new(
                    ErrorKind::Unrecoverable,
                    Op::Read,
                    format!(
                        "role {role} lists member bytes {start}..{end} of its data area as bad \
                         (md's bad-block log) and the other members cannot rebuild them \
                         (roles {missing:?} unusable for this range)"
                    ),
                ));
            }
        }
    }

    /// A rebuild of `[at, at+n)` of `role` (see `plan_rebuild`) that reads
    /// no listed range of another member.
    pub fn rebuild_plan(
        bad: Option<&BadBlocks>,
        geo: &Geometry,
        live: &[bool],
        role: usize,
        at: u64,
        n: u64,
        target: usize,
    ) -> Result<Plan> {
        let make = |l: &[bool]| plan_rebuild(geo, l, role, at, n, target);
        match bad {
            Some(b) => b.avoiding(geo, live, make, |p| p),
            None => make(live),
        }
    }

    /// A rebuild step of `[at, at+n)` of `role` into `target` (see
    /// [`BadBlocks::rebuild_plan`]), run by `run`. A source member that
    /// fails to read is left out and the step planned again from the others
    /// while the level survives without it (RAID 6 rebuilding one role, a
    /// mirror with another copy), as md's recovery reads around a source it
    /// cannot read; `read_failed` is told of each such member. The new member
    /// is written, never read: any other failure ends the step. The live
    /// rebuild (`Array::recovery_step`) and the offline one
    /// (`Assembly::rebuild`) both follow this rule.
    #[allow(clippy::too_many_arguments)]
    pub fn rebuild_around<T>(
        bad: Option<&BadBlocks>,
        geo: &Geometry,
        live: &[bool],
        role: usize,
        at: u64,
        n: u64,
        target: usize,
        mut run: impl FnMut(Plan) -> std::result::Result<T, Failed>,
        mut read_failed: impl FnMut(usize),
    ) -> Result<T> {
        let mut live = live.to_vec();
        loop {
            let plan = Self::rebuild_plan(bad, geo, &live, role, at, n, target)?;
            let f = match run(plan) {
                Ok(t) => return Ok(t),
                Err(f) => f,
            };
            let sources = f.kind == IoKind::Read
                && !f.members.is_empty()
                && f.members
                    .iter()
                    .all(|&m| m < geo.raid_disks && live.get(m).copied().unwrap_or(false));
            if !sources {
                return Err(*f.error);
            }
            for &m in &f.members {
                live[m] = false;
                read_failed(m);
            }
            let mut missing: Vec<usize> = (0..geo.raid_disks).filter(|&r| !live[r]).collect();
            if !missing.contains(&role) {
                missing.push(role);
            }
            if !geo.survives(&missing) {
                let mut e = *f.error;
                e.message = format!(
                    "{}; the rebuild of role {role} cannot read around it (role(s) {missing:?} \
                     unusable for this range)",
                    e.message
                );
                return Err(e);
            }
        }
    }

    /// A repair of what `role` holds for array bytes `[pos, pos+n)` (see
    /// `plan_repair`) that reads no listed range of another member.
    pub fn repair_plan(
        bad: Option<&BadBlocks>,
        geo: &Geometry,
        live: &[bool],
        role: usize,
        pos: u64,
        n: u64,
    ) -> Result<(Plan, usize)> {
        let make = |l: &[bool]| plan_repair(geo, l, role, pos, n);
        match bad {
            Some(b) => b.avoiding(geo, live, make, |(p, _)| p),
            None => make(live),
        }
    }

    /// Whether a write's plan reads a listed range (old data or parity it
    /// would compute from, which cannot be read): errs naming the first. The
    /// array then plans the write around it (`Array::plan_around_bad_blocks`).
    pub fn check_write(&self, plan: &Plan, offset: u64, len: u64) -> Result<()> {
        for op in plan.reads() {
            if let Some((start, end)) = self.hit(op.member, op.offset, op.length) {
                return Err(Error::new(
                    ErrorKind::Unrecoverable,
                    Op::Write,
                    format!(
                        "this write would read member bytes {start}..{end} of role {}, which \
                         md's bad-block log lists as bad, to compute parity",
                        op.member
                    ),
                )
                .at(offset, len));
            }
        }
        Ok(())
    }
}

/// A change a running array made to its lists, not yet in the member's log:
/// data-area bytes `[start, start + len)` of `role`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadBlockChange {
    /// Written successfully over a listed range: md forgets it.
    MadeGood { role: usize, start: u64, len: u64 },
    /// Could not be rewritten: md lists it and keeps the member.
    Listed { role: usize, start: u64, len: u64 },
}

/// The bad-block lists of a running array, changed while it runs: reads and
/// repairs take a snapshot ([`LiveBadBlocks::get`]); a rewrite changes the
/// snapshot and queues the change for the owner to write to the log.
#[derive(Debug, Default)]
pub struct LiveBadBlocks {
    list: RwLock<Option<Arc<BadBlocks>>>,
    /// Roles whose member keeps a log with room to list a range in (md fails
    /// a member it cannot list a range for instead).
    logs: Vec<bool>,
    pending: Mutex<Vec<BadBlockChange>>,
    /// Roles a rewrite failed on since the array started (md's
    /// WriteErrorSeen): their listed ranges are not tried again on reads.
    write_errors: Mutex<Vec<usize>>,
}

impl LiveBadBlocks {
    pub fn new(list: Option<BadBlocks>) -> LiveBadBlocks {
        LiveBadBlocks {
            list: RwLock::new(list.map(Arc::new)),
            ..LiveBadBlocks::default()
        }
    }

    /// Which roles can list a range they could not rewrite.
    pub fn with_logs(mut self, logs: Vec<bool>) -> LiveBadBlocks {
        self.logs = logs;
        self
    }

    pub fn get(&self) -> Option<Arc<BadBlocks>> {
        self.list.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replace the lists (read again from the logs once the changes are in).
    pub fn set(&self, list: Option<BadBlocks>) {
        *self.list.write().unwrap_or_else(|p| p.into_inner()) = list.map(Arc::new);
    }

    pub fn can_list(&self, role: usize) -> bool {
        self.logs.get(role).copied().unwrap_or(false)
    }

    /// `role`'s data-area bytes `[start, start + len)` were written and read
    /// back: what was listed there is read from the member again. Queued
    /// only when something was listed.
    pub fn made_good(&self, role: usize, start: u64, len: u64) {
        let mut list = self.list.write().unwrap_or_else(|p| p.into_inner());
        let Some(now) = list.as_ref() else { return };
        if now.hit(role, start, len).is_none() {
            return;
        }
        *list = now.without(role, start, start + len).map(Arc::new);
        drop(list);
        self.queue(BadBlockChange::MadeGood { role, start, len });
    }

    /// `role`'s data-area bytes `[start, start + len)` could not be written:
    /// never read them from the member again.
    pub fn listed(&self, role: usize, start: u64, len: u64) {
        let mut list = self.list.write().unwrap_or_else(|p| p.into_inner());
        *list = Some(Arc::new(BadBlocks::with(
            list.as_deref(),
            role,
            start,
            start + len,
        )));
        drop(list);
        let mut seen = self.write_errors.lock().unwrap_or_else(|p| p.into_inner());
        if !seen.contains(&role) {
            seen.push(role);
        }
        drop(seen);
        self.queue(BadBlockChange::Listed { role, start, len });
    }

    /// Whether a rewrite failed on `role` since the array started.
    pub fn write_error_seen(&self, role: usize) -> bool {
        self.write_errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&role)
    }

    fn queue(&self, c: BadBlockChange) {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(c);
    }

    /// The changes not yet written to the logs, oldest first.
    pub fn take_changes(&self) -> Vec<BadBlockChange> {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raidlab_layout::{Layout, Level};

    fn bb(role_lists: Vec<Vec<(u64, u64)>>) -> BadBlocks {
        BadBlocks::from_md(
            &role_lists
                .into_iter()
                .map(|l| {
                    Some((
                        2048,
                        l.into_iter()
                            .map(|(sector, count)| BadRange { sector, count })
                            .collect(),
                    ))
                })
                .collect::<Vec<_>>(),
        )
        .unwrap()
    }

    #[test]
    fn ranges_are_moved_into_the_data_area() {
        // Sector 2040..2056 straddles the data offset (2048): bytes 0..4096.
        let b = bb(vec![vec![(2040, 16), (1000, 8)], vec![]]);
        assert_eq!(b.hit(0, 0, 512), Some((0, 4096)));
        assert_eq!(b.hit(0, 4096, 512), None);
        assert_eq!(b.hit(1, 0, 1 << 20), None);
        assert!(BadBlocks::from_md(&[Some((
            2048,
            vec![BadRange {
                sector: 0,
                count: 8
            }]
        ))])
        .is_none());
    }

    #[test]
    fn a_mirror_read_avoids_the_listed_copy() {
        let geo = Geometry::new(Level::Raid1, Layout::Plain, 0, 2, 1 << 20).unwrap();
        // Role 0 lists member bytes 8192..12288 as bad.
        let b = bb(vec![vec![(2048 + 16, 8)], vec![]]);
        for hint in 0..4 {
            let plan = b.read_plan(&geo, &[true, true], 8192, 4096, hint).unwrap();
            assert!(plan.reads().all(|op| op.member == 1), "hint {hint}");
        }
        // Both copies bad: nothing left to read from.
        let both = bb(vec![vec![(2048 + 16, 8)], vec![(2048 + 18, 1)]]);
        let e = both
            .read_plan(&geo, &[true, true], 8192, 4096, 0)
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unrecoverable);
        assert!(e.message.contains("bad-block log"), "{e}");
    }

    #[test]
    fn a_parity_read_rebuilds_the_listed_chunk() {
        let geo = Geometry::new(
            Level::Raid5,
            Layout::parse(Level::Raid5, None).unwrap(),
            64 << 10,
            4,
            4 << 20,
        )
        .unwrap();
        let plain = plan_read(&geo, &[true; 4], 0, 4096, 0).unwrap();
        let member = plain.reads().next().unwrap().member;
        let mut lists = vec![vec![]; 4];
        lists[member] = vec![(2048, 8)];
        let b = bb(lists);
        let plan = b.read_plan(&geo, &[true; 4], 0, 4096, 0).unwrap();
        assert!(plan.reads().all(|op| op.member != member));
        assert_eq!(plan.reads().count(), 3);
        // A small write to the next chunk of the stripe reads the other data
        // (reconstruct-write): the listed range among it. The write to the
        // listed chunk itself reads what it replaces nowhere (it reads the
        // other two chunks), so it goes through.
        let next = crate::planner::plan_write(&geo, &[true; 4], 64 << 10, 4096).unwrap();
        assert!(next.reads().any(|op| op.member == member));
        assert!(b.check_write(&next, 64 << 10, 4096).is_err());
        let own = crate::planner::plan_write(&geo, &[true; 4], 0, 4096).unwrap();
        assert!(own.reads().all(|op| op.member != member));
        assert!(b.check_write(&own, 0, 4096).is_ok());
    }
}
