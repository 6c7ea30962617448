//! Plans for the I/O that restores redundancy: rebuilding a range of a lost
//! member, copying a range of a member being replaced, repairing what a read
//! could not read, and the reads and rewrites of a scrub or resync. Pure like
//! the planner: it decides which members are read, what is recomputed (as
//! compute steps naming the arithmetic, from `reconstruct`) and what is
//! written, so the live and offline rebuilds, the read-error repair,
//! scrubs and the simulator all run the same decisions. What a scrub's
//! comparison finds is not decided here (the recovery module compares). It never does I/O and never takes a lock; the stripe-lock keys
//! it returns in each plan are the caller's to hold.
//!
//! Every plan here leaves the range's contents in the caller's buffer (a read
//! buffer of the range's length) and writes them from there, so the caller
//! can check what was written (a repair reads it back).
//!
//! The builders themselves are each level family's, behind
//! `planner::Builders` (`planner/parity_recovery.rs`,
//! `planner/mirror_recovery.rs`); this module is where the engine asks for
//! them by what it is doing, and holds what is the same for every family (a
//! copy to a replacement, the scrub's walk, the rewrites a scrub decided).

use crate::level::{self, Redundancy};
use crate::plan::{MemberOp, Plan, Slice, Step};
use crate::planner::Builders as _;
use crate::planner::{check_member_range, family};
use raidlab_core::IoKind;
use raidlab_core::Result;
use raidlab_layout::Geometry;

pub use crate::planner::{
    plan_rebuild, plan_scrub_mirrors, plan_scrub_mirrors_skipping, plan_scrub_parity, MirrorScrub,
    ScrubRun,
};

/// The stripe-lock keys covering what `role` holds at `[at, at+n)` of its
/// data area: the stripes there (parity levels), or the array ranges whose
/// copies lie there (mirrors), as writes to them lock them.
pub fn member_range_keys(geo: &Geometry, role: usize, at: u64, n: u64) -> Result<Vec<u64>> {
    family(geo).member_range_keys(geo, role, at, n)
}

/// Copy `[at, at+n)` of member `from`'s data area to member `target` (a
/// replacement copying the member it replaces, md's replace).
pub fn plan_copy(geo: &Geometry, from: usize, at: u64, n: u64, target: usize) -> Result<Plan> {
    check_member_range(geo, from, at, n)?;
    let buf = Slice::user(0, n as usize);
    Ok(Plan {
        space: crate::plan::Space::Data,
        steps: vec![
            Step::Io(vec![MemberOp::new(IoKind::Read, from, at, buf)]),
            Step::Io(vec![MemberOp::new(IoKind::Write, target, at, buf)]),
        ],
        scratch: Vec::new(),
        locks: member_range_keys(geo, from, at, n)?,
    })
}

/// Repair what member `role` holds for the array range `[pos, pos+n)` (md's
/// read-error correction): recompute it from the members `live` says can be
/// read and write it back to `role`. Parity levels rebuild the whole chunks
/// of the stripes the range touches; mirrors rewrite `role`'s copy of each
/// piece. Returns the plan and the length of the caller's buffer it needs.
pub fn plan_repair(
    geo: &Geometry,
    live: &[bool],
    role: usize,
    pos: u64,
    n: u64,
) -> Result<(Plan, usize)> {
    family(geo).repair(geo, live, role, pos, n)
}

/// How a scrub or resync walks an array: parity levels by member bytes (the
/// same range of every member at once), mirrors by array bytes (copies are
/// compared by logical address); `step` bytes at a time, a whole number of
/// chunks and pages, over `total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScrubWalk {
    pub step: u64,
    pub total: u64,
}

impl ScrubWalk {
    /// The walk of `geo` in steps of about `want` bytes.
    pub fn new(geo: &Geometry, want: u64) -> ScrubWalk {
        let unit = geo.chunk_bytes.max(4096);
        ScrubWalk {
            step: (want / unit).max(1) * unit,
            total: family(geo).scrub_total(geo),
        }
    }

    /// Member bytes reached at walk position `pos` (what progress and rate
    /// limits count: md's speed limits are per member).
    pub fn member_bytes(&self, geo: &Geometry, pos: u64) -> u64 {
        ((pos as u128 * geo.member_bytes as u128) / self.total.max(1) as u128) as u64
    }

    /// The walk position of member byte `at`, rounded down to a step unit.
    pub fn position(&self, geo: &Geometry, at: u64) -> u64 {
        let pos = ((at as u128 * self.total as u128) / geo.member_bytes.max(1) as u128) as u64;
        let unit = geo.chunk_bytes.max(4096);
        (pos / unit * unit).min(self.total)
    }
}

/// The reads of one scrub step at walk position `pos`, `n` bytes: the plan
/// and the length of the caller's buffer it reads into.
pub fn plan_scrub_step(
    geo: &Geometry,
    present: &[bool],
    pos: u64,
    n: u64,
) -> Result<(Plan, usize)> {
    family(geo).scrub_step(geo, present, pos, n)
}

/// Whether a scrub of `geo` with roles `missing` gone has anything left to
/// compare: parity levels while a parity is left over, mirrors while some
/// block still has two copies on members not missing. Which members hold a
/// chunk's copies depends only on where its first copy starts, and that
/// cycles within `raid_disks` chunks (as in `Geometry::survives`).
pub fn scrub_can_compare(geo: &Geometry, missing: &[usize]) -> bool {
    match level::of(geo).redundancy {
        Redundancy::Parity(n) => missing.len() < n,
        // A geometry's level is never mid-reshape; nothing is scrubbed then.
        Redundancy::None | Redundancy::FewerOfTwoGeometries => false,
        Redundancy::AllButOne => geo.raid_disks.saturating_sub(missing.len()) >= 2,
        Redundancy::CopyOfEachChunk => {
            let chunks = geo.array_bytes() / geo.chunk_bytes.max(1);
            (0..chunks.min(geo.raid_disks as u64)).any(|c| {
                geo.mirror_map(c * geo.chunk_bytes)
                    .0
                    .iter()
                    .filter(|l| !missing.contains(&l.member))
                    .count()
                    >= 2
            })
        }
    }
}

/// The rewrites a scrub decided on: each `(role, member offset, buffer offset,
/// length)` written from the caller's buffer, all in one step.
pub fn plan_rewrites(writes: &[(usize, u64, usize, usize)], locks: Vec<u64>) -> Plan {
    let ops: Vec<MemberOp> = writes
        .iter()
        .map(|&(role, at, from, len)| {
            MemberOp::new(IoKind::Write, role, at, Slice::user(from, len))
        })
        .collect();
    Plan {
        locks,
        ..Plan::io(ops)
    }
}
