//! The copies family's plans that restore redundancy (RAID 1 and 10, and
//! RAID 0's one copy, which has nothing to restore from): a member range
//! rebuilt piece by piece from another copy of each piece, a read error
//! repaired by rewriting the member's copy, and a scrub step reading every
//! copy of each run on members in service. Space the layout leaves unused
//! becomes zeros. Pure: no I/O, no locks taken.

use super::{plan_read, plan_write};
use crate::plan::{Compute, MemberOp, Plan, Slice, Step};
use crate::reconstruct::mirror_pieces;
use raidlab_core::IoKind;
use raidlab_core::Result;
use raidlab_layout::{Content, Geometry, Location};

/// The array ranges whose copies lie in `[at, at+n)` of `role`, as lock keys
/// a write to them takes.
pub(super) fn member_range_keys(geo: &Geometry, role: usize, at: u64, n: u64) -> Result<Vec<u64>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let all = vec![true; geo.raid_disks];
    let mut keys = Vec::new();
    mirror_pieces(geo, role, at, n, |_, len, content| {
        if let Content::Data(l) = content {
            keys.extend(plan_write(geo, &all, l, len)?.locks);
        }
        Ok(())
    })?;
    keys.sort_unstable();
    keys.dedup();
    Ok(keys)
}

/// Read each piece of `role`'s range from another copy (zeros where the
/// layout keeps no data) into the caller's buffer.
pub(super) fn rebuild_sources(
    plan: &mut Plan,
    geo: &Geometry,
    live: &[bool],
    role: usize,
    at: u64,
    n: u64,
) -> Result<()> {
    let sources = others(live, role);
    let mut reads = Vec::new();
    let mut zeros = Vec::new();
    mirror_pieces(geo, role, at, n, |off, piece, content| {
        match content {
            Content::Data(l) => {
                // The piece's reads, placed at its offset in the range.
                let sub = plan_read(geo, &sources, l, piece, role)?;
                for step in sub.steps {
                    if let Step::Io(ops) = step {
                        reads.extend(ops.into_iter().map(|mut o| {
                            o.buf.offset += off as usize;
                            o
                        }));
                    }
                }
            }
            _ => zeros.push(Compute::Zero {
                dst: Slice::user(off as usize, piece as usize),
            }),
        }
        Ok(())
    })?;
    if !reads.is_empty() {
        plan.steps.push(Step::Io(coalesce(reads)));
    }
    if !zeros.is_empty() {
        plan.steps.push(Step::Compute(zeros));
    }
    Ok(())
}

/// Repair what `role` holds for the array range `[pos, pos+n)`: read each
/// piece from another copy and rewrite `role`'s copy of it.
pub(super) fn repair(
    geo: &Geometry,
    live: &[bool],
    role: usize,
    pos: u64,
    n: u64,
) -> Result<(Plan, usize)> {
    let sources = others(live, role);
    let mut plan = plan_read(geo, &sources, pos, n, role)?;
    let writes: Vec<MemberOp> = geo
        .mirror_runs(pos, n)
        .filter_map(|(at, k, locs)| {
            locs.iter().find(|l| l.member == role).map(|l| {
                MemberOp::new(
                    IoKind::Write,
                    role,
                    l.offset,
                    Slice::user((at - pos) as usize, k as usize),
                )
            })
        })
        .collect();
    if !writes.is_empty() {
        plan.steps.push(Step::Io(writes));
    }
    plan.locks = plan_write(geo, &vec![true; geo.raid_disks], pos, n)?.locks;
    Ok((plan, n as usize))
}

/// One run of a mirror scrub: array bytes `[pos, pos+len)`, whose copies on
/// members in service are `copies` (each with where it lies in the caller's
/// buffer); `all` is how many copies the layout keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScrubRun {
    pub pos: u64,
    pub len: u64,
    pub copies: Vec<(Location, usize)>,
    pub all: usize,
    /// Copies on members in service left unread because `skip` said so.
    pub skipped: usize,
}

/// A mirror scrub step's reads: every copy on a member in service of each run
/// with at least two such copies (a run with one copy left has nothing to be
/// compared with, and is returned with no buffer space and no reads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorScrub {
    pub plan: Plan,
    pub runs: Vec<ScrubRun>,
    /// Bytes of the caller's buffer the plan reads into.
    pub len: usize,
}

/// What a mirror (RAID 1/10) scrub or resync reads for the array range `[pos,
/// pos+n)`, run by run.
pub fn plan_scrub_mirrors(
    geo: &Geometry,
    present: &[bool],
    pos: u64,
    n: u64,
) -> Result<MirrorScrub> {
    plan_scrub_mirrors_skipping(geo, present, pos, n, &|_, _| false)
}

/// [`plan_scrub_mirrors`], reading no copy for which `skip(copy, length)`
/// says so (one whose range md's bad-block log lists): such a copy counts as
/// missing for its run.
pub fn plan_scrub_mirrors_skipping(
    geo: &Geometry,
    present: &[bool],
    pos: u64,
    n: u64,
    skip: &dyn Fn(Location, u64) -> bool,
) -> Result<MirrorScrub> {
    let all = vec![true; geo.raid_disks];
    let mut reads = Vec::new();
    let mut runs = Vec::new();
    let mut len = 0usize;
    for (at, k, locs) in geo.mirror_runs(pos, n) {
        let in_service: Vec<Location> = locs
            .iter()
            .copied()
            .filter(|l| present.get(l.member).copied().unwrap_or(false))
            .collect();
        let live: Vec<Location> = in_service
            .iter()
            .copied()
            .filter(|l| !skip(*l, k))
            .collect();
        let skipped = in_service.len() - live.len();
        let mut copies = Vec::new();
        if live.len() >= 2 {
            for loc in live {
                reads.push(MemberOp::new(
                    IoKind::Read,
                    loc.member,
                    loc.offset,
                    Slice::user(len, k as usize),
                ));
                copies.push((loc, len));
                len += k as usize;
            }
        }
        runs.push(ScrubRun {
            pos: at,
            len: k,
            copies,
            all: locs.len(),
            skipped,
        });
    }
    Ok(MirrorScrub {
        plan: Plan {
            locks: if n == 0 {
                Vec::new()
            } else {
                plan_write(geo, &all, pos, n)?.locks
            },
            ..Plan::io(reads)
        },
        runs,
        len,
    })
}

/// Which members a piece of `role` may be read from: those `live` says can
/// be read, `role` itself never.
fn others(live: &[bool], role: usize) -> Vec<bool> {
    let mut sources = live.to_vec();
    if let Some(s) = sources.get_mut(role) {
        *s = false;
    }
    sources
}

/// Merge operations that continue each other (same kind and member, the next
/// member range and the next bytes of the same buffer) into one: a mirror is
/// walked in pieces of a chunk, or of a page where it has no chunk (RAID 1),
/// and a rebuild should read a step in one request per copy, not 256.
fn coalesce(ops: Vec<MemberOp>) -> Vec<MemberOp> {
    let mut out: Vec<MemberOp> = Vec::with_capacity(ops.len());
    for o in ops {
        if let Some(last) = out.last_mut() {
            if last.kind == o.kind
                && last.member == o.member
                && last.offset + last.length == o.offset
                && last.buf.buf == o.buf.buf
                && last.buf.offset + last.buf.len == o.buf.offset
            {
                last.length += o.length;
                last.buf.len += o.buf.len;
                continue;
            }
        }
        out.push(o);
    }
    out
}

/// A scrub step's reads and the caller's buffer length they need.
pub(super) fn scrub_step(
    geo: &Geometry,
    present: &[bool],
    pos: u64,
    n: u64,
) -> Result<(Plan, usize)> {
    let m = plan_scrub_mirrors(geo, present, pos, n)?;
    Ok((m.plan, m.len))
}
