//! What the families' recovery plans share: a rebuild plan's frame (the range
//! checked, the stripe locks, the family's reads and arithmetic, the one write
//! to the target), the member operations they are made of, and the error when
//! nothing is left to rebuild from. The families decide what is read and
//! recomputed (`parity_recovery.rs`, `mirror_recovery.rs`); this never does.
//! Pure: no I/O, no locks taken.

use super::family;
use super::Builders as _;
use crate::plan::{MemberOp, Plan, Slice, Step};
use raidlab_core::IoKind;
use raidlab_core::{Error, ErrorKind, Op, Result};
use raidlab_layout::Geometry;

/// Rebuild `[at, at+n)` of role `role`'s data area from the members `live`
/// says can be read (`role` itself is never read), and write it to member
/// `target` at the same offset: `target` is `role` for a repair in place, or
/// another index of the executor's members for a new member. What is read
/// and recomputed is the family's (`Builders::rebuild_sources`).
pub fn plan_rebuild(
    geo: &Geometry,
    live: &[bool],
    role: usize,
    at: u64,
    n: u64,
    target: usize,
) -> Result<Plan> {
    check_member_range(geo, role, at, n)?;
    let f = family(geo);
    let mut plan = Plan {
        space: crate::plan::Space::Data,
        locks: f.member_range_keys(geo, role, at, n)?,
        ..Plan::default()
    };
    f.rebuild_sources(&mut plan, geo, live, role, at, n)?;
    plan.steps.push(Step::Io(vec![MemberOp::new(
        IoKind::Write,
        target,
        at,
        Slice::user(0, n as usize),
    )]));
    Ok(plan)
}

/// Refuse a member range that is not inside the data areas: a caller's bug,
/// said as one.
pub(crate) fn check_member_range(geo: &Geometry, role: usize, at: u64, n: u64) -> Result<()> {
    if role >= geo.raid_disks || n == 0 || at.checked_add(n).map_or(true, |e| e > geo.member_bytes)
    {
        return Err(Error::new(
            ErrorKind::Invalid,
            Op::Plan,
            format!(
                "internal: member range {at}+{n} of role {role} is not inside a {}-member array's {}-byte data areas",
                geo.raid_disks, geo.member_bytes
            ),
        ));
    }
    Ok(())
}

/// The error of a rebuild with too few members left to read.
pub(super) fn unrecoverable(geo: &Geometry, role: usize, missing: &[usize]) -> Error {
    Error::new(
        ErrorKind::Unrecoverable,
        Op::Read,
        format!(
            "cannot rebuild role {role}: with role(s) {missing:?} unreadable, {} has no redundancy left for it",
            geo.level.name()
        ),
    )
}
