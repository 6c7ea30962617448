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

use crate::level::{self, Plans, Redundancy};
use crate::plan::{Compute, MemberOp, Plan, Slice, Step};
use crate::planner::{plan_read, plan_write};
use crate::reconstruct::{member_rows, mirror_pieces};
use raidlab_core::IoKind;
use raidlab_core::{Error, ErrorKind, Op, Result};
use raidlab_layout::{Content, Geometry, Location};

/// The stripe-lock keys covering what `role` holds at `[at, at+n)` of its
/// data area: the stripes there (parity levels), or the array ranges whose
/// copies lie there (mirrors), as writes to them lock them.
pub fn member_range_keys(geo: &Geometry, role: usize, at: u64, n: u64) -> Result<Vec<u64>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if level::of(geo).plans == Plans::ParityRows {
        let c = geo.chunk_bytes;
        return Ok((at / c..=(at + n - 1) / c).collect());
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

/// Rebuild `[at, at+n)` of role `role`'s data area from the members `live`
/// says can be read (`role` itself is never read), and write it to member
/// `target` at the same offset: `target` is `role` for a repair in place, or
/// another index of the executor's members for a new member. Parity levels
/// read the same range of every other live member and recompute it row by
/// row; mirrors read each piece from another copy, and space the layout
/// leaves unused becomes zeros. A parity member's rows are stated as the
/// parity arithmetic each needs (`reconstruct::member_rows`), decided here
/// once, not by whatever runs the plan.
pub fn plan_rebuild(
    geo: &Geometry,
    live: &[bool],
    role: usize,
    at: u64,
    n: u64,
    target: usize,
) -> Result<Plan> {
    check_member_range(geo, role, at, n)?;
    let mut plan = Plan {
        space: crate::plan::Space::Data,
        locks: member_range_keys(geo, role, at, n)?,
        ..Plan::default()
    };
    let len = n as usize;
    if level::of(geo).plans == Plans::ParityRows {
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
            reads.push(op(IoKind::Read, r, at, buf));
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
    } else {
        let mut sources = live.to_vec();
        if let Some(s) = sources.get_mut(role) {
            *s = false;
        }
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
    }
    plan.steps.push(Step::Io(vec![op(
        IoKind::Write,
        target,
        at,
        Slice::user(0, len),
    )]));
    Ok(plan)
}

/// Copy `[at, at+n)` of member `from`'s data area to member `target` (a
/// replacement copying the member it replaces, md's replace).
pub fn plan_copy(geo: &Geometry, from: usize, at: u64, n: u64, target: usize) -> Result<Plan> {
    check_member_range(geo, from, at, n)?;
    let buf = Slice::user(0, n as usize);
    Ok(Plan {
        space: crate::plan::Space::Data,
        steps: vec![
            Step::Io(vec![op(IoKind::Read, from, at, buf)]),
            Step::Io(vec![op(IoKind::Write, target, at, buf)]),
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
    if level::of(geo).plans == Plans::ParityRows {
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
        return Ok((plan, len as usize));
    }
    let mut sources = live.to_vec();
    if let Some(s) = sources.get_mut(role) {
        *s = false;
    }
    let mut plan = plan_read(geo, &sources, pos, n, role)?;
    let writes: Vec<MemberOp> = geo
        .mirror_runs(pos, n)
        .filter_map(|(at, k, locs)| {
            locs.iter().find(|l| l.member == role).map(|l| {
                op(
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

/// What a parity scrub or resync reads for `[at, at+n)` of the member data
/// areas: that range of every member `present` says is there, role `r`'s into
/// the caller's buffer at `r * n` (a missing role's part is not touched). The
/// buffer is `raid_disks * n` bytes.
pub fn plan_scrub_parity(geo: &Geometry, present: &[bool], at: u64, n: u64) -> Result<Plan> {
    check_member_range(geo, 0, at, n)?;
    let reads = (0..geo.raid_disks)
        .filter(|&r| present.get(r).copied().unwrap_or(false))
        .map(|r| op(IoKind::Read, r, at, Slice::user(r * n as usize, n as usize)))
        .collect();
    Ok(Plan {
        space: crate::plan::Space::Data,
        steps: vec![Step::Io(reads)],
        scratch: Vec::new(),
        locks: member_range_keys(geo, 0, at, n)?,
    })
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
                reads.push(op(
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
            space: crate::plan::Space::Data,
            steps: if reads.is_empty() {
                Vec::new()
            } else {
                vec![Step::Io(reads)]
            },
            scratch: Vec::new(),
            locks: if n == 0 {
                Vec::new()
            } else {
                plan_write(geo, &all, pos, n)?.locks
            },
        },
        runs,
        len,
    })
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
            total: if level::of(geo).plans == Plans::ParityRows {
                geo.member_bytes
            } else {
                geo.array_bytes()
            },
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
    if level::of(geo).plans == Plans::ParityRows {
        return Ok((
            plan_scrub_parity(geo, present, pos, n)?,
            geo.raid_disks * n as usize,
        ));
    }
    let m = plan_scrub_mirrors(geo, present, pos, n)?;
    Ok((m.plan, m.len))
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
        .map(|&(role, at, from, len)| op(IoKind::Write, role, at, Slice::user(from, len)))
        .collect();
    Plan {
        space: crate::plan::Space::Data,
        steps: if ops.is_empty() {
            Vec::new()
        } else {
            vec![Step::Io(ops)]
        },
        scratch: Vec::new(),
        locks,
    }
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

fn op(kind: IoKind, member: usize, offset: u64, buf: Slice) -> MemberOp {
    MemberOp {
        kind,
        member,
        offset,
        length: buf.len as u64,
        buf,
    }
}

fn check_member_range(geo: &Geometry, role: usize, at: u64, n: u64) -> Result<()> {
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

fn unrecoverable(geo: &Geometry, role: usize, missing: &[usize]) -> Error {
    Error::new(
        ErrorKind::Unrecoverable,
        Op::Read,
        format!(
            "cannot rebuild role {role}: with role(s) {missing:?} unreadable, {} has no redundancy left for it",
            geo.level.name()
        ),
    )
}
