//! The parity family's plans that restore redundancy (RAID 4, 5 and 6): a
//! member range rebuilt row by row from the same range of every other
//! member, a read error repaired by rebuilding the whole chunks of its
//! stripes, and a scrub step reading the same range of every member. Which
//! parity arithmetic each row needs is `reconstruct::member_rows`'s, stated
//! as compute steps here, never chosen by whatever runs the plan. Pure: no
//! I/O, no locks taken.

use super::plan_write;
use super::recovery::{check_member_range, plan_rebuild, unrecoverable};
use crate::plan::{MemberOp, Plan, Slice, Step};
use crate::reconstruct::member_rows;
use raidlab_core::IoKind;
use raidlab_core::Result;
use raidlab_layout::Geometry;

/// The stripes `[at, at+n)` of a member lies in: one lock key each.
pub(super) fn member_range_keys(geo: &Geometry, at: u64, n: u64) -> Vec<u64> {
    if n == 0 {
        return Vec::new();
    }
    let c = geo.chunk_bytes;
    (at / c..=(at + n - 1) / c).collect()
}

/// Read the same range of every other live member into scratch and state the
/// rows' arithmetic that leaves role `role`'s range in the caller's buffer.
pub(super) fn rebuild_sources(
    plan: &mut Plan,
    geo: &Geometry,
    live: &[bool],
    role: usize,
    at: u64,
    n: u64,
) -> Result<()> {
    let len = n as usize;
    let mut missing: Vec<usize> = (0..geo.raid_disks)
        .filter(|&r| r != role && !live.get(r).copied().unwrap_or(false))
        .collect();
    missing.push(role);
    if !geo.survives(&missing) {
        return Err(unrecoverable(geo, role, &missing));
    }
    let mut reads = Vec::new();
    let mut srcs = vec![None; geo.raid_disks];
    for (r, src) in srcs.iter_mut().enumerate() {
        if r == role || !live.get(r).copied().unwrap_or(false) {
            continue;
        }
        let id = plan.add_scratch(len);
        let buf = Slice::scratch(id, len);
        reads.push(MemberOp::new(IoKind::Read, r, at, buf));
        *src = Some(buf);
    }
    plan.steps.push(Step::Io(reads));
    plan.steps.push(Step::Compute(member_rows(
        geo,
        role,
        at,
        &srcs,
        Slice::user(0, len),
    )?));
    Ok(())
}

/// Repair what `role` holds for the array range `[pos, pos+n)`: the whole
/// chunks of the stripes the range touches, rebuilt in place.
pub(super) fn repair(
    geo: &Geometry,
    live: &[bool],
    role: usize,
    pos: u64,
    n: u64,
) -> Result<(Plan, usize)> {
    let stripe = geo.chunk_bytes * geo.data_disks() as u64;
    let (first, last) = (pos / stripe, (pos + n - 1) / stripe);
    let (at, len) = (
        first * geo.chunk_bytes,
        (last - first + 1) * geo.chunk_bytes,
    );
    let mut plan = plan_rebuild(geo, live, role, at, len, role)?;
    // A repair runs under the array range's locks, which a write to it
    // would take; the member range's are the same stripes.
    plan.locks = plan_write(geo, &vec![true; geo.raid_disks], pos, n)?.locks;
    Ok((plan, len as usize))
}

/// What a parity scrub or resync reads for `[at, at+n)` of the member data
/// areas: that range of every member `present` says is there, role `r`'s into
/// the caller's buffer at `r * n` (a missing role's part is not touched). The
/// buffer is `raid_disks * n` bytes.
pub fn plan_scrub_parity(geo: &Geometry, present: &[bool], at: u64, n: u64) -> Result<Plan> {
    check_member_range(geo, 0, at, n)?;
    let reads = (0..geo.raid_disks)
        .filter(|&r| present.get(r).copied().unwrap_or(false))
        .map(|r| MemberOp::new(IoKind::Read, r, at, Slice::user(r * n as usize, n as usize)))
        .collect();
    Ok(Plan {
        space: crate::plan::Space::Data,
        steps: vec![Step::Io(reads)],
        scratch: Vec::new(),
        locks: member_range_keys(geo, at, n),
    })
}
