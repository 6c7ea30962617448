//! Running a compute step: the arithmetic a [`Compute`] names, on the
//! buffers it names, with its outputs lent apart from its inputs. Which
//! arithmetic a row needs is decided when the plan is made (the planner's
//! degraded reads and writes, `reconstruct` for a lost member's rows); this
//! module must never choose it, and does no I/O.

use super::{carve, slice_of, UserBuf};
use crate::plan::{Buf, Compute, Fresh, Slice};
use raidlab_core::{Error, ErrorKind, Op, Result};
use raidlab_parity::Engine;

/// Where a computation reads its inputs: any slice of a buffer none of its
/// outputs is in.
pub type Input<'a> = dyn Fn(Slice) -> Result<&'a [u8]> + 'a;

/// Run `cs` on buffers a streaming executor already holds: `input` gives
/// the slices they read, and every output lies in `user` (a rebuild step's
/// rows, whose sources are reads done ahead). Errs for a computation with
/// an output elsewhere.
pub fn compute_into(
    cs: &[Compute],
    engine: &dyn Engine,
    input: &Input<'_>,
    user: &mut [u8],
) -> Result<()> {
    for c in cs {
        let outs = c.outputs(|_| 0);
        if outs.iter().any(|s| s.buf != Buf::User) {
            return Err(malformed(
                "a streamed computation writes outside its output",
            ));
        }
        let mut views = carve(user, &mut [], outs.len(), |i| outs[i])?;
        compute(c, engine, input, &mut views)?;
    }
    Ok(())
}

pub(super) fn run_compute(
    c: &Compute,
    engine: &dyn Engine,
    user: &mut UserBuf<'_>,
    scratch: &mut [Vec<u8>],
) -> Result<()> {
    let outs = c.outputs(|id| scratch.get(id).map_or(0, Vec::len));
    // The scratch buffers written are held apart while the others are read;
    // an input in one of them is a malformed plan (it then reads as missing).
    let mut held: Vec<Vec<u8>> = Vec::new();
    held.resize_with(scratch.len(), Vec::new);
    for s in &outs {
        if let Buf::Scratch(id) = s.buf {
            if let (Some(h), Some(b)) = (held.get_mut(id), scratch.get_mut(id)) {
                if h.is_empty() {
                    std::mem::swap(h, b);
                }
            }
        }
    }
    let r = compute_held(c, engine, user, scratch, &mut held, &outs);
    for (id, h) in held.into_iter().enumerate() {
        if !h.is_empty() {
            scratch[id] = h;
        }
    }
    r
}

/// [`run_compute`] with its outputs' scratch buffers in `held`: a caller's
/// output only exists for a read, and then no input is in the caller's buffer.
fn compute_held(
    c: &Compute,
    engine: &dyn Engine,
    user: &mut UserBuf<'_>,
    scratch: &[Vec<u8>],
    held: &mut [Vec<u8>],
    outs: &[Slice],
) -> Result<()> {
    let into_user = outs.iter().any(|s| s.buf == Buf::User);
    let (user_out, user_in): (&mut [u8], &[u8]) = match (into_user, user) {
        (false, u) => (&mut [], u.get()),
        (true, UserBuf::Read(b)) => (&mut **b, &[]),
        (true, UserBuf::Write(_)) => {
            return Err(malformed(
                "a computation writes the caller's buffer of a write",
            ))
        }
    };
    let mut views = carve(user_out, held, outs.len(), |i| outs[i])?;
    compute(c, engine, &|s| slice_of(user_in, scratch, s), &mut views)
}

fn malformed(what: &str) -> Error {
    Error::new(ErrorKind::Invalid, Op::Plan, format!("internal: {what}"))
}

/// The arithmetic `c` names, on its inputs and its outputs (`outs`, in
/// [`Compute::outputs`] order).
fn compute(
    c: &Compute,
    engine: &dyn Engine,
    input: &Input<'_>,
    outs: &mut [&mut [u8]],
) -> Result<()> {
    let inputs = |ss: &[Slice]| ss.iter().map(|&s| input(s)).collect::<Result<Vec<_>>>();
    let same_len = |ins: &[&[u8]], out: &[u8]| {
        if ins.is_empty() || ins.iter().any(|i| i.len() != out.len()) {
            Err(malformed(&format!(
                "a computation's inputs are not all {} bytes like its output",
                out.len()
            )))
        } else {
            Ok(())
        }
    };
    match (c, outs) {
        (Compute::Xor { srcs, .. }, [dst]) => {
            let ins = inputs(srcs)?;
            same_len(&ins, dst)?;
            engine.xor(&ins, dst);
        }
        (Compute::Pq { data, .. }, [p, q]) => {
            let ins = inputs(data)?;
            same_len(&ins, p)?;
            same_len(&ins, q)?;
            engine.gen_pq(&ins, p, q);
        }
        (
            Compute::Update {
                slot,
                old,
                new,
                p,
                q,
            },
            outs,
        ) => {
            let (o, n) = (input(*old)?, input(*new)?);
            let mut it = outs.iter_mut();
            let pb = p.and_then(|_| it.next()).map(|b| &mut **b);
            let qb = q.and_then(|_| it.next()).map(|b| &mut **b);
            for b in pb.iter().chain(qb.iter()) {
                same_len(&[o, n], b)?;
            }
            raidlab_parity::update(engine, *slot, o, n, pb, qb);
        }
        (
            Compute::Recover {
                data,
                lost,
                p,
                q,
                fresh,
            },
            outs,
        ) => recover_row(engine, input, data, lost, (*p, *q), *fresh, outs)?,
        (Compute::Copy { src, .. }, [dst]) => {
            let s = input(*src)?;
            same_len(&[s], dst)?;
            dst.copy_from_slice(s);
        }
        (Compute::Zero { .. }, [dst]) => dst.fill(0),
        _ => return Err(malformed("a computation's outputs do not match its kind")),
    }
    Ok(())
}

thread_local! {
    /// A row's P when only its Q is wanted, kept between rows.
    static SPARE_P: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A [`Compute::Recover`]: its lost chunks rebuilt into their outputs (or
/// buffers of its own for those it has none for), then its fresh parity.
#[allow(clippy::too_many_arguments)]
fn recover_row(
    engine: &dyn Engine,
    input: &Input<'_>,
    data: &[Option<Slice>],
    lost: &[usize],
    (p, q): (Option<Slice>, Option<Slice>),
    fresh: Option<Fresh>,
    outs: &mut [&mut [u8]],
) -> Result<()> {
    let given: Vec<Option<&[u8]>> = data
        .iter()
        .enumerate()
        .map(|(i, s)| match s {
            Some(s) if !lost.contains(&i) => input(*s).map(Some),
            _ => Ok(None),
        })
        .collect::<Result<_>>()?;
    let pp = p.map(input).transpose()?;
    let qq = q.map(input).transpose()?;
    let row_len = outs.first().map_or(0, |o| o.len());
    let unwanted = lost
        .iter()
        .filter(|&&l| data.get(l).copied().flatten().is_none())
        .count();
    let mut temps = vec![vec![0u8; row_len]; unwanted];
    let mut temp = temps.iter_mut();
    let mut out = outs.iter_mut();
    let mut rebuilt: Vec<&mut [u8]> = Vec::with_capacity(lost.len());
    for &l in lost {
        let buf = match data.get(l).copied().flatten() {
            Some(_) => out.next().map(|b| &mut **b),
            None => temp.next().map(|b| b.as_mut_slice()),
        };
        rebuilt.push(buf.ok_or_else(|| malformed("a rebuilt chunk has no buffer"))?);
    }
    let fresh_out = match fresh {
        Some(_) => Some(
            out.next()
                .ok_or_else(|| malformed("a fresh parity has no output"))?,
        ),
        None => None,
    };
    if !lost.is_empty() {
        raidlab_parity::recover_into(engine, &given, lost, &mut rebuilt, pp, qq).map_err(|e| {
            Error::new(
                ErrorKind::Unrecoverable,
                Op::Read,
                format!("cannot rebuild lost data slot(s) {lost:?}: {e}"),
            )
        })?;
    }
    let (Some(f), Some(dst)) = (fresh, fresh_out) else {
        return Ok(());
    };
    let mut row: Vec<&[u8]> = given.iter().map(|g| g.unwrap_or(&[])).collect();
    for (k, &l) in lost.iter().enumerate() {
        if let Some(r) = row.get_mut(l) {
            *r = &*rebuilt[k];
        }
    }
    if row.is_empty() || row.iter().any(|d| d.len() != dst.len()) {
        return Err(malformed(
            "a fresh parity's row is not complete, or its chunks differ in length",
        ));
    }
    if f.q {
        SPARE_P.with(|spare| {
            let mut spare = spare.borrow_mut();
            spare.resize(dst.len(), 0);
            engine.gen_pq(&row, &mut spare[..dst.len()], dst);
        });
    } else {
        engine.xor(&row, dst);
    }
    Ok(())
}
