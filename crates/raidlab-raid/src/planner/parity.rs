//! The parity family's per-segment plans (RAID 4, 5 and 6): a read, degraded
//! or not; a write by read-modify-write or reconstruct-write, whichever reads
//! fewer blocks; a missing member's blocks recovered and fresh parity written.
//! Pure, as the planner is: no I/O, no locks, no clocks.

use super::*;

impl Builder<'_> {
    pub(super) fn parity_read_segment(
        &mut self,
        geo: &Geometry,
        present: &[bool],
        row: &Row,
        seg: Segment,
        req: u64,
    ) -> Result<()> {
        let map = &row.map;
        let len = seg.end - seg.start;
        let moff = row.stripe * row.chunk + seg.start;
        let lost = |i: usize| !present[map.data[i]];
        if !seg.touched.clone().any(lost) {
            for i in seg.touched {
                let u = row.user_offset(i, seg.start, req);
                self.read(map.data[i], moff, Slice::user(u, len as usize));
            }
            return Ok(());
        }
        // A chunk we need is on a missing member: read the rest of the stripe and
        // rebuild. Hold the stripe lock so a concurrent write cannot change data and
        // parity between our reads.
        self.lock(row.stripe);
        let missing: Vec<usize> = (0..map.data.len()).filter(|&i| lost(i)).collect();
        let (data, p, q) = self.read_for_rebuild(geo, present, row, &missing, moff, len)?;
        self.computes
            .push(recover_row(map, &data, &missing, p, q, len as usize));
        for i in seg.touched {
            let u = row.user_offset(i, seg.start, req);
            self.computes.push(Compute::Copy {
                src: Slice::scratch(data[i], len as usize),
                dst: Slice::user(u, len as usize),
            });
        }
        Ok(())
    }

    /// Read every present data chunk of a segment into scratch (allocating scratch
    /// for the missing ones too) and the parity needed to rebuild `missing`.
    fn read_for_rebuild(
        &mut self,
        geo: &Geometry,
        present: &[bool],
        row: &Row,
        missing: &[usize],
        moff: u64,
        len: u64,
    ) -> Result<(Vec<usize>, Option<usize>, Option<usize>)> {
        let map = &row.map;
        let p_ok = present[map.p];
        let q_ok = map.q.is_some_and(|q| present[q]);
        let (use_p, use_q) = match missing.len() {
            0 => (false, false),
            1 if p_ok => (true, false),
            1 if q_ok => (false, true),
            2 if p_ok && q_ok => (true, true),
            _ => {
                return Err(lost_error(
                    geo,
                    present,
                    row.stripe * row.data_disks * row.chunk,
                    row.data_disks * row.chunk,
                ))
            }
        };
        let mut data = Vec::with_capacity(map.data.len());
        for &member in &map.data {
            let s = self.scratch(len);
            if present[member] {
                self.read(member, moff, Slice::scratch(s, len as usize));
            }
            data.push(s);
        }
        let p = use_p.then(|| {
            let s = self.scratch(len);
            self.read(map.p, moff, Slice::scratch(s, len as usize));
            s
        });
        let q = match (use_q, map.q) {
            (true, Some(qm)) => {
                let s = self.scratch(len);
                self.read(qm, moff, Slice::scratch(s, len as usize));
                Some(s)
            }
            _ => None,
        };
        Ok((data, p, q))
    }

    pub(super) fn parity_write_segment(
        &mut self,
        geo: &Geometry,
        present: &[bool],
        row: &Row,
        seg: Segment,
        req: u64,
    ) -> Result<()> {
        let map = &row.map;
        let dd = map.data.len();
        let len = seg.end - seg.start;
        let l = len as usize;
        let moff = row.stripe * row.chunk + seg.start;
        let is_t = |i: usize| seg.touched.contains(&i);
        let user = |i: usize| Slice::user(row.user_offset(i, seg.start, req), l);
        let p_ok = present[map.p];
        let q_ok = map.q.is_some_and(|q| present[q]);
        let parities = usize::from(p_ok) + usize::from(q_ok);

        // New data always goes to the data members that are present.
        let write_data = |b: &mut Builder| {
            for i in seg.touched.clone() {
                if present[map.data[i]] {
                    b.write(map.data[i], moff, user(i));
                }
            }
        };
        // The journal needs the full new parity even when no parity member is
        // there to take it: md's recovery only replays a stripe with its parity.
        if parities == 0 && !self.journal {
            write_data(self);
            return Ok(());
        }
        let all_parity = p_ok && (map.q.is_none() || q_ok);
        if let Some(kept) = self.kept_rows_serve(present, row, &seg, moff, len) {
            self.kept_write_segment(kept, present, row, &seg, moff, len, req);
            return Ok(());
        }

        let choice = method::Segment {
            data: dd,
            touched: seg.touched.len(),
            parities,
            rmw_ok: seg.touched.clone().all(|i| present[map.data[i]])
                && (all_parity || !self.journal)
                && !self.parity_unsynced(row, present),
            rcw_ok: (0..dd).filter(|&i| !is_t(i)).all(|i| present[map.data[i]]),
        };
        let how = choice.method();
        if how == method::ParityWrite::Reconstruct {
            // Reconstruct-write: parity from the new data and the untouched old data.
            let slices: Vec<Slice> = (0..dd)
                .map(|i| {
                    if is_t(i) {
                        user(i)
                    } else {
                        let s = self.scratch(len);
                        self.read(map.data[i], moff, Slice::scratch(s, l));
                        Slice::scratch(s, l)
                    }
                })
                .collect();
            let (p, q) = self.new_parity(map, slices, len);
            self.log_segment(row, &seg, present, p, &user);
            self.journal_segment(map, &seg, moff, len, p, q, &user);
            write_data(self);
            self.write_parity(map, present, moff, l, p, q);
        } else if how == method::ParityWrite::ReadModify {
            // Read-modify-write: fold (old ^ new) of each replaced chunk into parity.
            let olds: Vec<(usize, usize)> = seg
                .touched
                .clone()
                .map(|i| {
                    let s = self.scratch(len);
                    self.read(map.data[i], moff, Slice::scratch(s, l));
                    (i, s)
                })
                .collect();
            let p = p_ok.then(|| {
                let s = self.scratch(len);
                self.read(map.p, moff, Slice::scratch(s, l));
                s
            });
            let q = match map.q {
                Some(qm) if q_ok => {
                    let s = self.scratch(len);
                    self.read(qm, moff, Slice::scratch(s, l));
                    Some(s)
                }
                _ => None,
            };
            for (i, s) in olds {
                self.computes.push(Compute::Update {
                    slot: map.slot[i],
                    old: Slice::scratch(s, l),
                    new: user(i),
                    p,
                    q,
                });
            }
            self.log_segment(row, &seg, present, p, &user);
            self.journal_segment(map, &seg, moff, len, p, q, &user);
            write_data(self);
            self.write_parity(map, present, moff, l, p, q);
        } else {
            // Members we would need for either method are missing: read what is left,
            // rebuild the missing chunks, lay the new data over them, fresh parity.
            let missing: Vec<usize> = (0..dd).filter(|&i| !present[map.data[i]]).collect();
            let (data, p_old, q_old) =
                self.read_for_rebuild(geo, present, row, &missing, moff, len)?;
            self.computes
                .push(recover_row(map, &data, &missing, p_old, q_old, l));
            for i in seg.touched.clone() {
                self.computes.push(Compute::Copy {
                    src: user(i),
                    dst: Slice::scratch(data[i], l),
                });
            }
            let slices = data.iter().map(|&s| Slice::scratch(s, l)).collect();
            let (p, q) = self.new_parity(map, slices, len);
            self.log_segment(row, &seg, present, p, &user);
            self.journal_segment(map, &seg, moff, len, p, q, &user);
            write_data(self);
            self.write_parity(map, present, moff, l, p, q);
        }
        Ok(())
    }

    /// Whether `row`'s parity may disagree with its data (a resync owed
    /// from before its stripe) while every member is present: md then
    /// writes it from data. With a member missing md does not force it (the
    /// stripe is lost to a second failure either way), and neither does this.
    pub(super) fn parity_unsynced(&self, row: &Row, present: &[bool]) -> bool {
        self.unsynced_from
            .is_some_and(|from| row.stripe * row.chunk >= from && present.iter().all(|&p| p))
    }

    /// Compute P (and Q for RAID 6) from full data given in logical order.
    pub(super) fn new_parity(
        &mut self,
        map: &StripeMap,
        data: Vec<Slice>,
        len: u64,
    ) -> (Option<usize>, Option<usize>) {
        let p = self.scratch(len);
        if map.q.is_some() {
            let q = self.scratch(len);
            let mut by_slot = data.clone();
            for (i, s) in data.into_iter().enumerate() {
                by_slot[map.slot[i]] = s;
            }
            self.computes.push(Compute::Pq {
                data: by_slot,
                p,
                q,
            });
            (Some(p), Some(q))
        } else {
            self.computes.push(Compute::Xor { srcs: data, dst: p });
            (Some(p), None)
        }
    }

    pub(super) fn write_parity(
        &mut self,
        map: &StripeMap,
        present: &[bool],
        moff: u64,
        len: usize,
        p: Option<usize>,
        q: Option<usize>,
    ) {
        if let Some(p) = p.filter(|_| present[map.p]) {
            self.write(map.p, moff, Slice::scratch(p, len));
        }
        if let (Some(qm), Some(q)) = (map.q, q) {
            if present[qm] {
                self.write(qm, moff, Slice::scratch(q, len));
            }
        }
    }
}

/// Scratch ids given per logical data index, reordered by syndrome slot.
/// The rebuild of a row segment's `missing` data chunks (by data index) in
/// place, from the rest of its data (`data`, scratch buffers by data index,
/// `len` bytes each) and the parity read: the arithmetic of a lost chunk,
/// as a rebuild states it for a lost member's rows.
fn recover_row(
    map: &StripeMap,
    data: &[usize],
    missing: &[usize],
    p: Option<usize>,
    q: Option<usize>,
    len: usize,
) -> Compute {
    let mut by_slot = vec![None; data.len()];
    for (i, &s) in data.iter().enumerate() {
        by_slot[map.slot[i]] = Some(Slice::scratch(s, len));
    }
    Compute::Recover {
        data: by_slot,
        lost: missing.iter().map(|&i| map.slot[i]).collect(),
        p: p.map(|id| Slice::scratch(id, len)),
        q: q.map(|id| Slice::scratch(id, len)),
        fresh: None,
    }
}

/// The parity family's builders (RAID 4, 5 and 6): per stripe row and column
/// segment, parity computed and checked.
pub(crate) struct ParityRows;

impl Builders for ParityRows {
    fn read(
        &self,
        b: &mut Builder,
        geo: &Geometry,
        present: &[bool],
        offset: u64,
        len: u64,
        _hint: usize,
    ) -> Result<()> {
        for row in rows(geo, offset, len) {
            for seg in row.segments() {
                b.parity_read_segment(geo, present, &row, seg, offset)?;
            }
        }
        Ok(())
    }

    fn write(
        &self,
        b: &mut Builder,
        geo: &Geometry,
        present: &[bool],
        offset: u64,
        len: u64,
    ) -> Result<()> {
        for row in rows(geo, offset, len) {
            b.lock(row.stripe);
            for seg in row.segments() {
                b.parity_write_segment(geo, present, &row, seg, offset)?;
            }
        }
        Ok(())
    }

    fn count_write_reads(
        &self,
        geo: &Geometry,
        present: &[bool],
        offset: u64,
        len: u64,
    ) -> Option<u64> {
        count::reads_all_present(geo, present, offset, len)
    }

    fn zero_unit(&self, geo: &Geometry) -> Option<u64> {
        Some(self.piece_unit(geo))
    }

    fn piece_unit(&self, geo: &Geometry) -> u64 {
        geo.chunk_bytes * geo.data_disks() as u64
    }

    fn member_range_keys(&self, geo: &Geometry, _role: usize, at: u64, n: u64) -> Result<Vec<u64>> {
        Ok(parity_recovery::member_range_keys(geo, at, n))
    }

    fn rebuild_sources(
        &self,
        plan: &mut Plan,
        geo: &Geometry,
        live: &[bool],
        role: usize,
        at: u64,
        n: u64,
    ) -> Result<()> {
        parity_recovery::rebuild_sources(plan, geo, live, role, at, n)
    }

    fn repair(
        &self,
        geo: &Geometry,
        live: &[bool],
        role: usize,
        pos: u64,
        n: u64,
    ) -> Result<(Plan, usize)> {
        parity_recovery::repair(geo, live, role, pos, n)
    }

    fn scrub_total(&self, geo: &Geometry) -> u64 {
        geo.member_bytes
    }

    fn scrub_step(
        &self,
        geo: &Geometry,
        present: &[bool],
        pos: u64,
        n: u64,
    ) -> Result<(Plan, usize)> {
        Ok((
            parity_recovery::plan_scrub_parity(geo, present, pos, n)?,
            geo.raid_disks * n as usize,
        ))
    }

    fn keeps_rows(&self) -> bool {
        true
    }
}
