//! The page comparisons of a parity scrub, on buffers already read: which
//! pages' parity disagrees with their data (md's mismatch count), and with
//! repair, what each page must hold instead and which ranges to write back; on
//! a degraded RAID 6, what the syndrome left can still check, and which data
//! block a P and Q mismatch points at. And a mirror scrub's comparison of one
//! run's copies: the first copy that reads is the reference, a copy that did
//! not read is rewritten from it, and each page that differs from it is
//! counted (and with repair rewritten). Pure: it never reads or writes a
//! member.

use super::report::ScrubReport;
use super::*;
use crate::recovery_plan::{MirrorScrub, ScrubRun};

/// Compare the copies of one mirror run, read into `buf` (copy `k` of the run
/// at `run.copies[k].1`; `read[k]` false where that copy could not be read).
/// Adds to `report` and pushes the writes to make, as `(role, member offset,
/// offset of the source bytes in buf, length)`.
pub(super) fn compare_mirror_run(
    run: &ScrubRun,
    buf: &[u8],
    read: &[bool],
    report: &mut ScrubReport,
    names: &[String],
    repair: bool,
    writes: &mut Vec<(usize, u64, usize, usize)>,
) -> Result<()> {
    let n = run.len as usize;
    // The reference is the first copy that reads; unreadable copies are
    // rewritten from it (md's behaviour during a sync).
    let Some(k0) = read.iter().position(|&ok| ok) else {
        return Err(Error::new(
            ErrorKind::Unrecoverable,
            Op::Read,
            format!(
                "no copy of array bytes {}..{} can be read",
                run.pos,
                run.pos + run.len
            ),
        ));
    };
    let first = run.copies[k0].1;
    for (k, &(loc, at)) in run.copies.iter().enumerate() {
        if k == k0 {
            continue;
        }
        if !read[k] {
            writes.push((loc.member, loc.offset, first, n));
            report.read_errors_fixed += 1;
            continue;
        }
        for page in (0..n).step_by(PAGE) {
            let e = (page + PAGE).min(n);
            if buf[first + page..first + e] == buf[at + page..at + e] {
                continue;
            }
            report.mismatch_sectors += (e - page).div_ceil(SECTOR as usize) as u64;
            report.note(
                names,
                loc.member,
                (loc.offset + page as u64) / SECTOR,
                "mirror copy",
            );
            if repair {
                writes.push((loc.member, loc.offset + page as u64, first + page, e - page));
            }
        }
    }
    Ok(())
}

/// A mirror scrub's comparison of copies a caller holds itself (the
/// simulator's sparse members): `scrub` is a step's reads
/// ([`crate::recovery_plan::plan_scrub_mirrors`]) and `buf` (`scrub.len`
/// bytes) what they read, every copy readable. Returns md's mismatch count
/// (sectors) and, with `repair`, the writes as `(role, member offset, offset
/// of the bytes to write in buf, length)`: the same comparison and the same
/// choice of what to rewrite as `raidlab check` and `raidlab repair` make on
/// RAID 1 and 10. Runs with one copy left compare nothing.
pub fn compare_mirror(
    geo: &Geometry,
    scrub: &MirrorScrub,
    buf: &[u8],
    repair: bool,
) -> (u64, Vec<(usize, u64, usize, usize)>) {
    let mut report = ScrubReport::new(repair, Vec::new());
    let names: Vec<String> = (0..geo.raid_disks).map(|r| format!("role {r}")).collect();
    let mut writes = Vec::new();
    for run in scrub.runs.iter().filter(|r| r.copies.len() >= 2) {
        let read = vec![true; run.copies.len()];
        // Every copy read: the comparison cannot fail.
        let _ = compare_mirror_run(run, buf, &read, &mut report, &names, repair, &mut writes);
    }
    (report.mismatch_sectors, writes)
}

/// Compare parity pages with the data in `bufs` (one buffer per role, all
/// covering `[pos, pos+len)` of the member areas; a role with `present[role]`
/// false is missing and its buffer is ignored). With `repair`, fix `bufs` in
/// place and return the ranges to write back.
#[allow(clippy::too_many_arguments)]
pub(super) fn scrub_parity(
    geo: &Geometry,
    bufs: &mut [&mut [u8]],
    present: &[bool],
    pos: u64,
    report: &mut ScrubReport,
    names: &[String],
    repair: bool,
    resync: bool,
) -> Vec<(usize, u64, usize)> {
    if present.iter().any(|&p| !p) {
        return scrub_parity_degraded(geo, bufs, present, pos, report, names, repair);
    }
    let engine = raidlab_parity::selected();
    let chunk = geo.chunk_bytes;
    let n = bufs[0].len();
    let dd = geo.data_disks();
    let mut fixes = Vec::new();
    let mut p = vec![0u8; PAGE];
    let mut q = vec![0u8; PAGE];
    for page in (0..n).step_by(PAGE) {
        let off = pos + page as u64;
        let map = geo.stripe(off / chunk);
        let mut by_slot: Vec<&[u8]> = vec![&[]; dd];
        for i in 0..dd {
            by_slot[map.slot[i]] = &bufs[map.data[i]][page..page + PAGE];
        }
        if let Some(_qm) = map.q {
            engine.gen_pq(&by_slot, &mut p, &mut q);
        } else {
            engine.xor(&by_slot, &mut p);
        }
        let p_bad = bufs[map.p][page..page + PAGE] != p[..];
        let q_bad = map.q.is_some_and(|qm| bufs[qm][page..page + PAGE] != q[..]);
        if !p_bad && !q_bad {
            continue;
        }
        report.mismatch_sectors += (PAGE as u64) / SECTOR;
        // RAID 6 with both P and Q wrong: a single bad data block shows as
        // Qd = g^z * Pd for one slot z on every differing byte. Never in a
        // resync: after an unclean stop a stripe written at the crash may
        // hold new data in some blocks and old in others, with old parity,
        // and that can look like one bad block; "correcting" it would
        // rewrite data the crash left right. A resync trusts the data and
        // rewrites P and Q, as md's does.
        let located = match map.q {
            Some(qm) if p_bad && q_bad && !resync => locate_data(
                &bufs[map.p][page..page + PAGE],
                &p,
                &bufs[qm][page..page + PAGE],
                &q,
            )
            .filter(|&z| z < dd)
            .and_then(|z| (0..dd).find(|&i| map.slot[i] == z)),
            _ => None,
        };
        if let Some(i) = located {
            let role = map.data[i];
            report.note(names, role, off / SECTOR, "data (located from P+Q)");
            if repair {
                // D_z ^= P_stored ^ P_computed.
                for b in 0..PAGE {
                    let d = bufs[map.p][page + b] ^ p[b];
                    bufs[role][page + b] ^= d;
                }
                fixes.push((role, off, PAGE));
            }
            continue;
        }
        if p_bad {
            report.note(names, map.p, off / SECTOR, "parity P");
            if repair {
                bufs[map.p][page..page + PAGE].copy_from_slice(&p);
                fixes.push((map.p, off, PAGE));
            }
        }
        if let Some(qm) = map.q.filter(|_| q_bad) {
            report.note(names, qm, off / SECTOR, "syndrome Q");
            if repair {
                bufs[qm][page..page + PAGE].copy_from_slice(&q);
                fixes.push((qm, off, PAGE));
            }
        }
    }
    fixes
}

/// RAID 6 with one member missing (the only degraded parity array
/// `check_scrubbable` lets through): one syndrome is left to check in every
/// stripe, as md's handle_parity_checks6 does with one failed device.
/// - Q missing: check P against the data.
/// - P missing: check Q against the data.
/// - a data block missing: rebuild it from P (exactly as a degraded read
///   does), then check Q against the data.
///
/// A mismatch says the stripe is inconsistent, but not where: with one equation
/// left, a bad data block, a bad P used for the rebuild and a bad Q all look the
/// same, so locating "the" bad data block (as the complete-array path does from
/// P+Q) would be a guess. `repair` therefore never touches data: it rewrites the
/// parity it checked so the stripe agrees with what the array serves for every
/// read (present data, and missing data rebuilt from P), which changes no byte
/// a reader sees. The finding says the block could not be located.
pub(super) fn scrub_parity_degraded(
    geo: &Geometry,
    bufs: &mut [&mut [u8]],
    present: &[bool],
    pos: u64,
    report: &mut ScrubReport,
    names: &[String],
    repair: bool,
) -> Vec<(usize, u64, usize)> {
    let engine = raidlab_parity::selected();
    let chunk = geo.chunk_bytes;
    let n = bufs.first().map_or(0, |b| b.len());
    let dd = geo.data_disks();
    let mut fixes = Vec::new();
    let mut p = vec![0u8; PAGE];
    let mut q = vec![0u8; PAGE];
    let mut rebuilt = vec![0u8; PAGE];
    for page in (0..n).step_by(PAGE) {
        let off = pos + page as u64;
        let map = geo.stripe(off / chunk);
        let Some(qm) = map.q else {
            // RAID 4/5 has nothing left to compare when degraded; refused earlier.
            debug_assert!(false, "degraded scrub of a single-parity stripe");
            continue;
        };
        let lost: Vec<usize> = (0..dd).filter(|&i| !present[map.data[i]]).collect();
        let (p_ok, q_ok) = (present[map.p], present[qm]);
        let gone = lost.len() + usize::from(!p_ok) + usize::from(!q_ok);
        if gone != 1 {
            debug_assert!(false, "degraded RAID 6 scrub with {gone} blocks gone");
            continue;
        }
        let at = page..page + PAGE;
        if let [i] = lost[..] {
            // D_i = P ^ the other data blocks: the degraded read's rebuild.
            let srcs: Vec<&[u8]> = std::iter::once(&bufs[map.p][at.clone()])
                .chain(
                    (0..dd)
                        .filter(|&k| k != i)
                        .map(|k| &bufs[map.data[k]][at.clone()]),
                )
                .collect();
            engine.xor(&srcs, &mut rebuilt);
        }
        let mut by_slot: Vec<&[u8]> = vec![&[]; dd];
        for i in 0..dd {
            by_slot[map.slot[i]] = if lost.contains(&i) {
                &rebuilt
            } else {
                &bufs[map.data[i]][at.clone()]
            };
        }
        engine.gen_pq(&by_slot, &mut p, &mut q);
        report.reduced_array_bytes += (dd * PAGE) as u64;
        // The parity left to check: P when Q is missing, Q otherwise (when a
        // data block is missing, P was used up rebuilding it).
        let (role, calc) = if q_ok {
            report.pages_checked_q_only += 1;
            (qm, &q)
        } else {
            report.pages_checked_p_only += 1;
            (map.p, &p)
        };
        if bufs[role][at.clone()] == calc[..] {
            continue;
        }
        report.mismatch_sectors += (PAGE as u64) / SECTOR;
        let checked = match (p_ok, q_ok) {
            (true, true) => format!(
                "syndrome Q (checked alone: data role {} missing and rebuilt from P",
                map.data[lost[0]]
            ),
            (false, _) => format!("syndrome Q (checked alone: P role {} missing", map.p),
            (_, false) => format!("parity P (checked alone: Q role {qm} missing"),
        };
        let what = format!(
            "{checked}; with one syndrome the bad block cannot be located, so only this parity is rewritten)"
        );
        report.note(names, role, off / SECTOR, &what);
        if repair {
            bufs[role][at].copy_from_slice(calc);
            fixes.push((role, off, PAGE));
        }
    }
    fixes
}

/// The syndrome slot z of a single corrupted data block, if the P and Q
/// differences agree on one: Qd[b] = g^z * Pd[b] for every byte b.
fn locate_data(p_stored: &[u8], p_calc: &[u8], q_stored: &[u8], q_calc: &[u8]) -> Option<usize> {
    use raidlab_parity::gf::LOG;
    let mut z: Option<usize> = None;
    for b in 0..p_stored.len() {
        let pd = p_stored[b] ^ p_calc[b];
        let qd = q_stored[b] ^ q_calc[b];
        match (pd, qd) {
            (0, 0) => continue,
            (0, _) | (_, 0) => return None,
            _ => {
                let this = (LOG[qd as usize] as usize + 255 - LOG[pd as usize] as usize) % 255;
                if z.is_some_and(|z| z != this) {
                    return None;
                }
                z = Some(this);
            }
        }
    }
    z
}
