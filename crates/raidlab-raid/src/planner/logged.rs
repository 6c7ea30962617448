//! The planner's logged writes: a write's plan with the log step md's partial
//! parity log (RAID 5) or write journal (RAID 4/5/6) needs between computing
//! parity and writing, and the entries of that step. Pure like the rest of the
//! planner; what the entries are written to, and when, is the write log's.

use super::*;

/// Plan a write to a RAID 5 array that keeps md's partial parity log: as
/// [`plan_write`], plus, between computing parity and writing, a log step with
/// one entry per stripe segment written whose parity member is present (md logs
/// nothing for a stripe whose parity member is gone: there is no parity to make
/// consistent). The partial parity is the new parity XOR the new data, which is
/// the XOR of the data chunks the write leaves alone, whichever way parity was
/// computed. Offset and length must be whole sectors, as log entries count them.
pub fn plan_write_logged(geo: &Geometry, present: &[bool], offset: u64, len: u64) -> Result<Plan> {
    check_logged(geo, offset, len)?;
    write_plan(geo, present, offset, len, true, None)
}

/// What a write with partial parity log entries must be: on a level that
/// keeps the log, whole sectors.
pub(super) fn check_logged(geo: &Geometry, offset: u64, len: u64) -> Result<()> {
    if !crate::level::of(geo).ppl {
        return Err(Error::new(
            ErrorKind::Invalid,
            Op::Plan,
            format!(
                "a partial parity log is for RAID 5 only, not {}",
                geo.level.name()
            ),
        ));
    }
    if offset % 512 != 0 || len % 512 != 0 {
        return Err(Error::new(
            ErrorKind::Invalid,
            Op::Plan,
            "internal: a logged write must cover whole 512-byte sectors",
        )
        .at(offset, len));
    }
    Ok(())
}

/// Plan a write to a RAID 4/5/6 array with md's write journal (write-through):
/// as [`plan_write`], but every segment's full new parity is computed, even for
/// a parity member that is missing (read-modify-write only when every parity
/// member is present, else reconstruct-write or rebuild), and a log step between
/// computing parity and writing carries every new page: one entry per written
/// data chunk (its member, member byte offset, length and the new data, also for
/// a data member that is missing) and one per parity (P, and Q for RAID 6).
/// The journal writes them durably before the members are written. Offset and
/// length must be whole 4 KiB pages, md's journal unit.
pub fn plan_write_journaled(
    geo: &Geometry,
    present: &[bool],
    offset: u64,
    len: u64,
) -> Result<Plan> {
    if !crate::level::of(geo).journal {
        return Err(Error::new(
            ErrorKind::Invalid,
            Op::Plan,
            format!(
                "md's write journal is for RAID 4, 5 and 6, not {}",
                geo.level.name()
            ),
        ));
    }
    if offset % 4096 != 0 || len % 4096 != 0 {
        return Err(Error::new(
            ErrorKind::Invalid,
            Op::Plan,
            "internal: a journaled write must cover whole 4 KiB pages",
        )
        .at(offset, len));
    }
    check_request(geo, present, Op::Write, offset, len)?;
    let mut b = Builder {
        journal: true,
        ..Builder::default()
    };
    family(geo).write(&mut b, geo, present, offset, len)?;
    Ok(b.finish())
}

impl Builder<'_> {
    /// The log entry for one written segment (when keeping a log and the stripe's
    /// parity member is present): the segment's touched chunks are consecutive data
    /// indices, as md's recovery expects of an entry.
    pub(super) fn log_segment(
        &mut self,
        row: &Row,
        seg: &Segment,
        present: &[bool],
        p: Option<usize>,
        user: &dyn Fn(usize) -> Slice,
    ) {
        let (Some(p), false) = (p, seg.touched.is_empty()) else {
            return;
        };
        if !self.log || !present[row.map.p] {
            return;
        }
        let len = seg.end - seg.start;
        let pp = (seg.touched.len() < row.map.data.len()).then(|| {
            let dst = self.scratch(len);
            let mut srcs = vec![Slice::scratch(p, len as usize)];
            srcs.extend(seg.touched.clone().map(user));
            self.computes.push(Compute::Xor { srcs, dst });
            Slice::scratch(dst, len as usize)
        });
        self.entries.push(LogEntry {
            member: row.map.p,
            data_offset: (row.stripe * row.data_disks + seg.touched.start as u64) * row.chunk
                + seg.start,
            data_size: seg.touched.len() as u64 * len,
            pp,
        });
    }

    /// The journal entries of one written segment: each written data chunk's
    /// new contents, then P and Q. Nothing when not journaling.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn journal_segment(
        &mut self,
        map: &StripeMap,
        seg: &Segment,
        moff: u64,
        len: u64,
        p: Option<usize>,
        q: Option<usize>,
        user: &dyn Fn(usize) -> Slice,
    ) {
        if !self.journal {
            return;
        }
        for i in seg.touched.clone() {
            self.entries.push(LogEntry {
                member: map.data[i],
                data_offset: moff,
                data_size: len,
                pp: Some(user(i)),
            });
        }
        for (member, buf) in [(Some(map.p), p), (map.q, q)] {
            if let (Some(member), Some(buf)) = (member, buf) {
                self.entries.push(LogEntry {
                    member,
                    data_offset: moff,
                    data_size: len,
                    pp: Some(Slice::scratch(buf, len as usize)),
                });
            }
        }
    }
}
