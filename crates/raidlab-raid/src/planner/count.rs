//! The member reads a write would plan on a parity array with every member
//! present, counted without planning it: the stripe cache asks this of every
//! write it holds (what merging saved), and building the whole plan for a
//! count was about 6% of the simulator's time on a RAID 6 of HDDs under
//! random writes.
//!
//! Decides nothing: the method of each segment is `method`'s, as in the
//! planner; it must give exactly what `plan_write`'s plan holds, and
//! answers only where that is plain (parity level, nothing missing); every
//! other case is planned (`write_reads`).

use super::method::Segment;
use super::{check_request, rows};
use raidlab_core::Op;
use raidlab_layout::Geometry;

/// `plan_write(geo, present, offset, len)`'s member reads on a parity array
/// (the parity family asks it: `ParityRows::count_write_reads`), or 0 where
/// it refuses the write, with every member present; `None` otherwise.
///
/// With every member present, each column segment of each row takes the
/// method `method::Segment` chooses for the planner too, and costs its
/// reads. Each read goes to a scratch buffer of its own, so no two are
/// merged.
pub(super) fn reads_all_present(
    geo: &Geometry,
    present: &[bool],
    offset: u64,
    len: u64,
) -> Option<u64> {
    if !present.iter().all(|&p| p) {
        return None;
    }
    if check_request(geo, present, Op::Write, offset, len).is_err() {
        return Some(0);
    }
    let mut reads = 0;
    for row in rows(geo, offset, len) {
        let data = row.map.data.len();
        let parities = 1 + usize::from(row.map.q.is_some());
        for seg in row.segments() {
            let seg = Segment {
                data,
                touched: seg.touched.len(),
                parities,
                rmw_ok: true,
                rcw_ok: true,
            };
            // Every member present: one of the two methods always has its reads.
            reads += seg.reads()?;
        }
    }
    Some(reads as u64)
}

#[cfg(test)]
mod tests {
    use super::super::write_plan;
    use super::*;
    use raidlab_layout::{Layout, Level, ParityLayout};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn counts_what_the_plan_reads() {
        let mut rng = ChaCha8Rng::seed_from_u64(33);
        let mut geos = Vec::new();
        for chunk in [4096u64, 8192, 64 << 10] {
            for l in ParityLayout::ALL {
                for n in [3usize, 4, 6] {
                    geos.push((Level::Raid5, Layout::Parity(l), chunk, n));
                }
                for n in [4usize, 5, 6, 8] {
                    geos.push((Level::Raid6, Layout::Parity(l), chunk, n));
                }
            }
            for l in ParityLayout::CONVERSION {
                geos.push((Level::Raid6, Layout::Parity(l), chunk, 6));
            }
            geos.push((
                Level::Raid4,
                Layout::Parity(ParityLayout::ParityLast),
                chunk,
                5,
            ));
        }
        let mut checked = 0;
        for (level, layout, chunk, n) in geos {
            let g = Geometry::new(level, layout, chunk, n, 40 * chunk).expect("geometry");
            let all = vec![true; n];
            let size = g.array_bytes();
            for _ in 0..300 {
                // Small writes, chunk-sized ones, whole rows and more, at
                // sector and odd offsets, and some past the end (refused).
                let len = match rng.gen_range(0..4u32) {
                    0 => 512 * rng.gen_range(1..9u64),
                    1 => chunk * rng.gen_range(1..3u64),
                    2 => rng.gen_range(1..4 * chunk * n as u64),
                    _ => rng.gen_range(1..64u64),
                };
                let offset = if rng.gen_range(0..20u32) == 0 {
                    size - len / 2
                } else {
                    rng.gen_range(0..size - len.min(size))
                };
                let planned = write_plan(&g, &all, offset, len, false, None)
                    .map_or(0, |p| p.reads().count() as u64);
                assert_eq!(
                    reads_all_present(&g, &all, offset, len),
                    Some(planned),
                    "{level:?} {layout:?} chunk {chunk} x{n}: {len} at {offset}"
                );
                checked += 1;
            }
            let mut one_out = all.clone();
            one_out[0] = false;
            assert_eq!(reads_all_present(&g, &one_out, 0, 4096), None);
        }
        assert!(checked > 10_000);
        let mirror = Geometry::new(Level::Raid1, Layout::Plain, 0, 2, 1 << 20).expect("geometry");
        use super::super::Builders as _;
        let f = super::super::family(&mirror);
        assert_eq!(f.count_write_reads(&mirror, &[true, true], 0, 4096), None);
    }
}
