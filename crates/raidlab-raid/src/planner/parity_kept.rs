//! A parity row segment written with the array's kept rows
//! (`crate::kept_rows`): each block the write needs is taken from memory if
//! its page is known, read otherwise, and read-modify-write or
//! reconstruct-write chosen by what is left to read, as md's
//! `handle_stripe_dirtying` counts only blocks not up to date (a tie goes to
//! reconstruct-write, which leaves the whole row known). The write leaves
//! every page it read, took or wrote known again.
//!
//! It decides which blocks come from memory and which method a segment
//! takes when rows are kept. It never decides whether rows may be used (the
//! array does, `array/kept.rs`) and, pure as the planner is, only asks the
//! kept rows what they hold.

use super::*;

impl<'k> Builder<'k> {
    /// The kept rows this segment is written with, if any: an array that
    /// keeps them and trusts them for this write, every member of the row
    /// present, no log, no resync owed, whole pages, and not the whole
    /// stripe (a full-stripe write reads nothing anyway, and keeping every
    /// row a stream writes would only copy it).
    pub(super) fn kept_rows_serve(
        &self,
        present: &[bool],
        row: &Row,
        seg: &Segment,
        moff: u64,
        len: u64,
    ) -> Option<&'k KeptRows> {
        let map = &row.map;
        let serve = !self.log
            && !self.journal
            && present[map.p]
            && map.q.map_or(true, |q| present[q])
            && map.data.iter().all(|&m| present[m])
            && seg.touched.len() < map.data.len()
            && !self.parity_unsynced(row, present)
            && moff % crate::kept_rows::ROW == 0
            && len % crate::kept_rows::ROW == 0;
        self.kept.filter(|_| serve)
    }

    /// Scratch buffer with member `member`'s bytes at `moff`: from the
    /// kept rows if known, else read.
    fn known_or_read(&mut self, known: bool, member: usize, moff: u64, len: u64) -> usize {
        let s = self.scratch(len);
        if known {
            self.computes.push(Compute::Kept {
                member,
                offset: moff,
                dst: s,
            });
        } else {
            self.read(member, moff, Slice::scratch(s, len as usize));
        }
        s
    }

    /// Plan the segment (its members all present, `kept_rows_serve` said
    /// yes): the blocks each method needs, from memory where known; the
    /// method with fewer left to read; the rows it leaves known.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn kept_write_segment(
        &mut self,
        kept: &KeptRows,
        present: &[bool],
        row: &Row,
        seg: &Segment,
        moff: u64,
        len: u64,
        req: u64,
    ) {
        let map = &row.map;
        let dd = map.data.len();
        let l = len as usize;
        let user = |i: usize| Slice::user(row.user_offset(i, seg.start, req), l);
        let mask = kept.known(moff, len);
        let known = |m: usize| mask >> m & 1 == 1;
        let is_t = |i: usize| seg.touched.contains(&i);
        let unknown_data = |touched: bool| {
            (0..dd)
                .filter(|&i| is_t(i) == touched && !known(map.data[i]))
                .count()
        };
        let rcw_reads = unknown_data(false);
        let rmw_reads = unknown_data(true)
            + usize::from(!known(map.p))
            + map.q.map_or(0, |q| usize::from(!known(q)));
        let mut pages: Vec<Option<Slice>> = vec![None; present.len()];
        let (p, q) = if rcw_reads <= rmw_reads {
            let slices: Vec<Slice> = (0..dd)
                .map(|i| {
                    if is_t(i) {
                        user(i)
                    } else {
                        let m = map.data[i];
                        Slice::scratch(self.known_or_read(known(m), m, moff, len), l)
                    }
                })
                .collect();
            for (i, s) in slices.iter().enumerate() {
                pages[map.data[i]] = Some(*s);
            }
            self.new_parity(map, slices, len)
        } else {
            let olds: Vec<(usize, usize)> = seg
                .touched
                .clone()
                .map(|i| {
                    let m = map.data[i];
                    (i, self.known_or_read(known(m), m, moff, len))
                })
                .collect();
            let p = Some(self.known_or_read(known(map.p), map.p, moff, len));
            let q = map.q.map(|qm| self.known_or_read(known(qm), qm, moff, len));
            for (i, s) in olds {
                self.computes.push(Compute::Update {
                    slot: map.slot[i],
                    old: Slice::scratch(s, l),
                    new: user(i),
                    p,
                    q,
                });
                pages[map.data[i]] = Some(user(i));
            }
            (p, q)
        };
        if let Some(p) = p {
            pages[map.p] = Some(Slice::scratch(p, l));
        }
        if let (Some(qm), Some(q)) = (map.q, q) {
            pages[qm] = Some(Slice::scratch(q, l));
        }
        self.keeps.push(KeptRow {
            offset: moff,
            len,
            pages,
        });
        for i in seg.touched.clone() {
            self.write(map.data[i], moff, user(i));
        }
        self.write_parity(map, present, moff, l, p, q);
    }
}
