//! One step of an offline rebuild: how its contents are produced, from the
//! source members' reads a streaming reader already did (the step's plan
//! says what is recomputed from them), or by the step's own plan around what
//! md's bad-block log lists when a read failed (the rule the live rebuild
//! follows). It decides nothing of the run's order or pacing (`rebuild`'s
//! driver does) and never writes the step (the run's writer does).

use super::{run_failed, run_with};
use crate::array::Array;
use crate::badblocks::BadBlocks;
use crate::exec::{compute_into, Executor, Members, UserBuf};
use crate::plan::{Buf, Plan, Slice, Step};
use raidlab_core::{Error, ErrorKind, Op, Result, Volume};
use raidlab_layout::Geometry;
use std::sync::Arc;

/// The members a parity rebuild of `slot` reads: every live one but `slot`.
pub(super) fn parity_sources(
    array: &Array,
    geo: &Geometry,
    slot: usize,
) -> Vec<Option<Arc<dyn Volume>>> {
    (0..geo.raid_disks)
        .map(|r| if r == slot { None } else { array.member(r) })
        .collect()
}

/// Run `plan` with `exec`, `buf` as the caller's buffer.
pub(super) fn run_plan(
    exec: &dyn Executor,
    plan: &Plan,
    members: &Members,
    buf: &mut [u8],
) -> Result<()> {
    run_with(exec, plan, members, UserBuf::Read(buf))
}

/// A rebuild step's plan as what produces the contents (the reads and the
/// recomputation) and the write of them, its last step, which the writer runs.
pub(super) fn split_write(mut plan: Plan) -> (Plan, Plan) {
    let write = Plan {
        space: crate::plan::Space::Data,
        steps: plan.steps.pop().into_iter().collect(),
        ..Plan::default()
    };
    (plan, write)
}

/// Each source member's read of the step `[at, at + n)` (`None` for a role
/// with no source), into `bufs[role]` (taken; a read that succeeds hands its
/// buffer back in the result), as the offline rebuild's readers read it.
pub(super) fn read_sources(
    exec: &dyn Executor,
    members: &Members,
    sources: &[Option<Arc<dyn Volume>>],
    at: u64,
    n: u64,
    bufs: &mut [Vec<u8>],
) -> Vec<Option<Result<Vec<u8>>>> {
    sources
        .iter()
        .zip(bufs.iter_mut())
        .enumerate()
        .map(|(role, (src, buf))| {
            src.as_ref().map(|_| {
                let mut buf = std::mem::take(buf);
                buf.resize(n as usize, 0);
                let read = Plan::read_one(role, at, n as usize);
                run_plan(exec, &read, members, &mut buf).map(|()| buf)
            })
        })
        .collect()
}

/// A parity rebuild step (`(at, n)`) computed into `out` from the sources'
/// reads of it (`got`, by role): when every read succeeded, the step's plan
/// computes from them; when one failed, the step is planned and read again
/// around it, by the rule the live rebuild follows. Returns the step's write.
#[allow(clippy::too_many_arguments)]
pub(super) fn parity_step(
    exec: &dyn Executor,
    members: &Members,
    bad: Option<&BadBlocks>,
    geometry: &Geometry,
    live: &[bool],
    slot: usize,
    (at, n): (u64, u64),
    got: &[Option<Result<Vec<u8>>>],
    wrong_member: bool,
    out: &mut [u8],
) -> Result<Plan> {
    if got.iter().flatten().all(|b| b.is_ok()) {
        let views: Vec<Option<&[u8]>> = got
            .iter()
            .map(|b| b.as_ref().and_then(|b| b.as_deref().ok()))
            .collect();
        let r = streamed_step(bad, geometry, live, slot, at, n, &views, out);
        if wrong_member && at == 0 {
            // PLANTED BUG (tests only, `planted.rs`)
            copy_first_chunk_from_another(geometry, slot, &views, out);
        }
        r
    } else {
        planned_step(exec, members, bad, geometry, live, slot, at, n, out)
    }
}

/// A rebuild step `[at, at + n)` by its own plan (a mirror's, or a parity
/// step whose streamed reads failed): the plan up to its write, into `buf`,
/// around what md's bad-block log lists. Returns the step's write.
#[allow(clippy::too_many_arguments)]
pub(super) fn planned_step(
    exec: &dyn Executor,
    members: &Members,
    bad: Option<&BadBlocks>,
    geometry: &Geometry,
    live: &[bool],
    slot: usize,
    at: u64,
    n: u64,
    buf: &mut [u8],
) -> Result<Plan> {
    BadBlocks::rebuild_around(
        bad,
        geometry,
        live,
        slot,
        at,
        n,
        geometry.raid_disks,
        |plan| {
            let (before, write) = split_write(plan);
            run_failed(exec, &before, members, UserBuf::Read(buf)).map(|()| write)
        },
        |_| {},
    )
}

/// A parity rebuild step whose member reads a streaming reader has already
/// done (`views`, by role): the step's plan says what is recomputed from
/// them, and must read exactly those ranges. Returns the plan's write.
#[allow(clippy::too_many_arguments)]
pub(super) fn streamed_step(
    bad: Option<&BadBlocks>,
    geo: &Geometry,
    live: &[bool],
    slot: usize,
    at: u64,
    n: u64,
    views: &[Option<&[u8]>],
    out: &mut [u8],
) -> Result<Plan> {
    let plan = BadBlocks::rebuild_plan(bad, geo, live, slot, at, n, geo.raid_disks)?;
    let (plan, write) = split_write(plan);
    // The plan reads streamed ranges only, perhaps not all of them (a member
    // whose range md's bad-block log lists is left out): it computes from
    // what it reads, nothing else.
    let reads_match = plan.reads().all(|o| {
        o.offset == at && o.length == n && views.get(o.member).is_some_and(|v| v.is_some())
    });
    let read: Vec<bool> = (0..views.len())
        .map(|r| plan.reads().any(|o| o.member == r))
        .collect();
    let views: Vec<Option<&[u8]>> = views
        .iter()
        .zip(&read)
        .map(|(v, &r)| v.filter(|_| r))
        .collect();
    // Which member's read each of the plan's scratch buffers is.
    let mut by_id: Vec<Option<&[u8]>> = vec![None; plan.scratch.len()];
    for o in plan.reads() {
        if let (Buf::Scratch(id), Some(v)) = (o.buf.buf, views.get(o.member).copied().flatten()) {
            if let Some(b) = by_id.get_mut(id) {
                *b = Some(v);
            }
        }
    }
    let input = |s: Slice| match s.buf {
        Buf::Scratch(id) => by_id
            .get(id)
            .copied()
            .flatten()
            .and_then(|v| v.get(s.offset..s.offset + s.len))
            .ok_or_else(|| not_streamable("reads a buffer no streamed read filled")),
        Buf::User => Err(not_streamable("reads its own output")),
    };
    let computes = plan.steps.iter().find_map(|s| match s {
        Step::Compute(cs) => Some(cs),
        _ => None,
    });
    match computes {
        Some(cs) if reads_match => {
            compute_into(cs, raidlab_parity::selected(), &input, out).map(|()| write)
        }
        _ => Err(not_streamable("reads other ranges or computes nothing")),
    }
}

fn not_streamable(why: &str) -> Error {
    Error::new(
        ErrorKind::Invalid,
        Op::Plan,
        format!(
            "internal: a rebuild step's plan is not one the streaming rebuild can run: it {why}"
        ),
    )
}

/// The planted rebuild bug: the first chunk of the step comes from the first
/// other live source, as a copy, instead of the computed contents.
pub(super) fn copy_first_chunk_from_another(
    geo: &Geometry,
    slot: usize,
    views: &[Option<&[u8]>],
    out: &mut [u8],
) {
    let other = views
        .iter()
        .enumerate()
        .find(|(r, v)| *r != slot && v.is_some());
    if let Some((_, Some(v))) = other {
        let n = (geo.chunk_bytes as usize).min(out.len()).min(v.len());
        out[..n].copy_from_slice(&v[..n]);
    }
}
