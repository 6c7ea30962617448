//! How a lost member's contents are recomputed from the others, decided at
//! plan time: row by row, which chunks of a row are given, which are lost,
//! and which parity is recomputed, stated as the same compute steps a
//! degraded read uses ([`Compute::Recover`]); and a mirror member's range
//! walked piece by piece. Rebuild and repair plans (the recovery planner)
//! carry these steps; the executor runs their arithmetic and must never
//! choose it. Placement comes from raidlab-layout and the arithmetic from
//! raidlab-parity; this module does no I/O and never touches a byte.

use crate::plan::{Compute, Fresh, Slice};
use raidlab_core::{Error, ErrorKind, Op, Result};
use raidlab_layout::{Content, Geometry};

const PAGE: usize = 4096;

/// Walk `[pos, pos+n)` of mirror member `slot`'s data area in pieces that
/// stay within one chunk (and page), each with what it holds: `f(offset from
/// pos, length, content)`.
pub fn mirror_pieces(
    geo: &Geometry,
    slot: usize,
    pos: u64,
    n: u64,
    mut f: impl FnMut(u64, u64, Content) -> Result<()>,
) -> Result<()> {
    let unit = geo.chunk_bytes.max(PAGE as u64);
    let mut off = 0u64;
    while off < n {
        let len = (unit - (pos + off) % unit).min(n - off);
        f(off, len, geo.content_at(slot, pos + off))?;
        off += len;
    }
    Ok(())
}

/// What member `slot` holds at `[pos, pos+dst.len)` of its data area, as
/// the arithmetic that computes it from the same range of the other members
/// (`srcs`, by role; `None` for a role not read): one [`Compute::Recover`]
/// per row (stripe) the range touches. A lost data chunk is rebuilt from the
/// row's other chunks and every parity read (the parity engine takes P when
/// it has it, Q alone, or both for two lost chunks); a lost parity is
/// recomputed from the row's data, rebuilt first where a data chunk is
/// missing too. Errs when a row cannot be rebuilt from what is read.
pub fn member_rows(
    geo: &Geometry,
    slot: usize,
    pos: u64,
    srcs: &[Option<Slice>],
    dst: Slice,
) -> Result<Vec<Compute>> {
    let chunk = geo.chunk_bytes;
    let c = chunk as usize;
    let first = pos / chunk;
    let len = dst.len;
    // Rows end at chunk boundaries of the member, not `chunk` bytes from
    // `pos`: a range that starts inside a chunk (a write's piece rewritten
    // around a bad block) has a short first row, and the bytes after it
    // belong to the next stripe, whose parity sits elsewhere.
    let skip = (pos % chunk) as usize;
    let rows = (skip + len).div_ceil(c);
    let dd = geo.data_disks();
    let mut out = Vec::with_capacity(rows);
    for r in 0..rows {
        let map = geo.stripe(first + r as u64);
        let (a, b) = ((r * c).saturating_sub(skip), ((r + 1) * c - skip).min(len));
        let row = |s: Slice| Slice {
            buf: s.buf,
            offset: s.offset + a,
            len: b - a,
        };
        let src = |m: usize| srcs.get(m).copied().flatten().map(row);
        let mut data = vec![None; dd];
        let mut lost = Vec::new();
        for i in 0..dd {
            let (member, s) = (map.data[i], map.slot[i]);
            match src(member) {
                Some(given) if member != slot => data[s] = Some(given),
                _ => {
                    lost.push(s);
                    if member == slot {
                        data[s] = Some(row(dst));
                    }
                }
            }
        }
        let (p, q) = (src(map.p), map.q.and_then(src));
        let fresh = (!map.data.contains(&slot)).then(|| Fresh {
            q: map.p != slot,
            dst: row(dst),
        });
        let solvable = match lost.len() {
            0 => true,
            1 => p.is_some() || q.is_some(),
            2 => p.is_some() && q.is_some(),
            _ => false,
        };
        if !solvable || (fresh.is_some() && map.p != slot && map.q != Some(slot)) {
            return Err(Error::new(
                ErrorKind::Unrecoverable,
                Op::Read,
                format!(
                    "cannot rebuild role {slot} at byte {} of its data area: stripe {} has data slot(s) {lost:?} lost and {} of its parity",
                    pos + a as u64,
                    first + r as u64,
                    match (p.is_some(), q.is_some()) {
                        (true, true) => "both",
                        (true, false) => "only P",
                        (false, true) => "only Q",
                        (false, false) => "none",
                    }
                ),
            ));
        }
        out.push(Compute::Recover {
            data,
            lost,
            p,
            q,
            fresh,
        });
    }
    Ok(out)
}
