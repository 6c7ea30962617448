//! How a lost member's contents are recomputed from the others: the one place
//! that decides reconstruction row by row (which chunks of a row are combined,
//! XOR or RAID 6 recovery, fresh P or Q) and walks a mirror member's range
//! piece by piece. Rebuild and repair plans (the recovery planner) name it
//! in their compute step; the executor runs it. Placement comes from
//! raidlab-layout and the arithmetic from raidlab-parity; this module does no
//! I/O at all.

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

/// What member `slot` holds at `[pos, pos+out.len())`, from the same range of
/// the other members (`bufs`, by role; `None` for one not read).
pub fn combine_parity(
    geo: &Geometry,
    slot: usize,
    pos: u64,
    bufs: &[Option<&[u8]>],
    out: &mut [u8],
) -> Result<()> {
    let chunk = geo.chunk_bytes;
    let c = chunk as usize;
    let first = pos / chunk;
    let len = out.len();
    // Rows end at chunk boundaries of the member, not `chunk` bytes from
    // `pos`: a range that starts inside a chunk (a write's piece rewritten
    // around a bad block) has a short first row, and the bytes after it
    // belong to the next stripe, whose parity sits elsewhere.
    let skip = (pos % chunk) as usize;
    let rows = (skip + len).div_ceil(c);
    let engine = raidlab_parity::selected();
    let dd = geo.data_disks();
    let mut spare_p: Vec<u8> = Vec::new();
    for r in 0..rows {
        let map = geo.stripe(first + r as u64);
        let range = (r * c).saturating_sub(skip)..((r + 1) * c - skip).min(len);
        let chunk_of = |m: usize| bufs[m].as_ref().map(|b| &b[range.clone()]);
        let lost: Vec<usize> = (0..dd)
            .filter(|&i| chunk_of(map.data[i]).is_none())
            .collect();
        let dst = &mut out[range.clone()];
        let target_data = map.data.iter().position(|&m| m == slot);
        match (target_data, lost.len(), chunk_of(map.p)) {
            // One data chunk gone (the target) and P readable: XOR of the rest.
            (Some(_), 1, Some(p)) => {
                let mut srcs: Vec<&[u8]> = (0..dd).filter_map(|i| chunk_of(map.data[i])).collect();
                srcs.push(p);
                engine.xor(&srcs, dst);
            }
            // The target is parity and every data chunk is readable: P is
            // the XOR of the data (no Q work), Q is computed straight into
            // the target with P into a buffer kept across rows.
            (None, 0, _) => {
                let mut by_slot: Vec<&[u8]> = vec![&[]; dd];
                for i in 0..dd {
                    by_slot[map.slot[i]] = chunk_of(map.data[i]).unwrap_or(&[]);
                }
                if map.q.is_some() && map.p != slot {
                    spare_p.resize(dst.len(), 0);
                    engine.gen_pq(&by_slot, &mut spare_p[..dst.len()], dst);
                } else {
                    engine.xor(&by_slot, dst);
                }
            }
            // Anything else (RAID 6 with two chunks gone, or P gone): rebuild the
            // lost data with the parity engine, then take or compute the target.
            _ => {
                let mut data: Vec<Vec<u8>> = vec![vec![0u8; dst.len()]; dd];
                for i in 0..dd {
                    if let Some(b) = chunk_of(map.data[i]) {
                        data[map.slot[i]].copy_from_slice(b);
                    }
                }
                let lost_slots: Vec<usize> = lost.iter().map(|&i| map.slot[i]).collect();
                if !lost_slots.is_empty() {
                    let mut views: Vec<&mut [u8]> =
                        data.iter_mut().map(|d| d.as_mut_slice()).collect();
                    raidlab_parity::recover(
                        engine,
                        &mut views,
                        &lost_slots,
                        chunk_of(map.p),
                        map.q.and_then(chunk_of),
                    )
                    .map_err(|e| {
                        Error::new(
                            ErrorKind::Unrecoverable,
                            Op::Read,
                            format!("cannot rebuild role {slot}: {e}"),
                        )
                    })?;
                }
                match target_data {
                    Some(i) => dst.copy_from_slice(&data[map.slot[i]]),
                    None => {
                        let refs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
                        let mut p = vec![0u8; dst.len()];
                        let mut q = vec![0u8; dst.len()];
                        if map.q.is_some() {
                            engine.gen_pq(&refs, &mut p, &mut q);
                        } else {
                            engine.xor(&refs, &mut p);
                        }
                        dst.copy_from_slice(if map.p == slot { &p } else { &q });
                    }
                }
            }
        }
    }
    Ok(())
}
