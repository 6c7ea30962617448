//! Tests: a brute-force reference that knows nothing of zones. RAID 0 walks the
//! array one row of chunks at a time: a member takes part in row r while it has
//! more than r chunks, and the row's chunks go to those members in role order
//! (alternate), or starting at the member the chunk's array-wide number picks
//! (original, md's `map_sector` with the absolute sector). Linear is the members
//! one after another. The production map must agree on every chunk.

use super::*;
use crate::{Geometry, Layout, Level};
use proptest::prelude::*;

/// (member, member offset) of every array chunk, in array order.
fn reference_raid0(sizes: &[u64], chunk: u64, alternate: bool) -> Vec<(usize, u64)> {
    let chunks: Vec<u64> = sizes.iter().map(|s| s / chunk).collect();
    let mut out = Vec::new();
    let mut row = 0u64;
    loop {
        let in_row: Vec<usize> = (0..sizes.len()).filter(|&m| chunks[m] > row).collect();
        if in_row.is_empty() {
            return out;
        }
        let nb = in_row.len() as u64;
        for i in 0..nb {
            let pick = if alternate {
                i
            } else {
                (out.len() as u64) % nb
            };
            out.push((in_row[pick as usize], row * chunk));
        }
        row += 1;
    }
}

fn reference_linear(sizes: &[u64], rounding: u64) -> Vec<(u64, usize, u64)> {
    // (array start, member, used length)
    let unit = if rounding == 0 { 512 } else { rounding };
    let mut start = 0;
    let mut out = Vec::new();
    for (m, s) in sizes.iter().enumerate() {
        let used = s / unit * unit;
        out.push((start, m, used));
        start += used;
    }
    out
}

fn sizes_strategy() -> impl Strategy<Value = Vec<u64>> {
    // Member sizes in sectors, small enough to walk every chunk.
    prop::collection::vec(8u64..400, 1..7).prop_map(|v| v.into_iter().map(|s| s * 512).collect())
}

proptest! {
    #[test]
    fn raid0_matches_the_row_walk(
        sizes in sizes_strategy(),
        chunk_pow in 12u32..15,
        alternate in any::<bool>(),
        probe in any::<u64>(),
    ) {
        let chunk = 1u64 << chunk_pow;
        prop_assume!(sizes.iter().all(|&s| s >= chunk));
        let layout = if alternate { RAID0_ALTERNATE } else { RAID0_ORIGINAL };
        let map = ZoneMap::raid0(&sizes, chunk, layout).unwrap();
        let reference = reference_raid0(&sizes, chunk, alternate);
        // Where the layouts agree, md records the original one.
        let effective_alt = match map.kind {
            ZonedKind::Raid0 { alternate, .. } => alternate,
            _ => unreachable!(),
        };
        let reference = if effective_alt == alternate {
            reference
        } else {
            let other = reference_raid0(&sizes, chunk, effective_alt);
            prop_assert_eq!(&other, &reference, "layouts said to agree differ");
            other
        };
        prop_assert_eq!(map.array_bytes(), reference.len() as u64 * chunk);
        let total: u64 = map.member_bytes.iter().sum();
        prop_assert_eq!(total, map.array_bytes());
        for (c, &(member, off)) in reference.iter().enumerate() {
            let within = probe % chunk;
            let at = c as u64 * chunk + within;
            let (loc, run) = map.locate(at).unwrap();
            prop_assert_eq!(loc, Location { member, offset: off + within });
            prop_assert_eq!(run, chunk - within);
            prop_assert_eq!(map.to_array(loc), Some(at));
        }
        prop_assert!(map.locate(map.array_bytes()).is_err());
    }

    #[test]
    fn linear_matches_concatenation(
        sizes in sizes_strategy(),
        rounding in prop::sample::select(vec![0u64, 4096, 65536]),
        probe in any::<u64>(),
    ) {
        let reference = reference_linear(&sizes, rounding);
        let map = match ZoneMap::linear(&sizes, rounding) {
            Ok(m) => m,
            Err(_) => {
                prop_assert!(reference.iter().any(|r| r.2 == 0));
                return Ok(());
            }
        };
        let end = reference.last().map(|r| r.0 + r.2).unwrap();
        prop_assert_eq!(map.array_bytes(), end);
        let at = probe % end;
        let &(start, member, used) = reference.iter().find(|r| r.0 <= at && at < r.0 + r.2).unwrap();
        let (loc, run) = map.locate(at).unwrap();
        prop_assert_eq!(loc, Location { member, offset: at - start });
        prop_assert_eq!(run, start + used - at);
        prop_assert_eq!(map.to_array(loc), Some(at));
    }

    #[test]
    fn extents_cover_a_request_exactly(
        sizes in sizes_strategy(),
        alternate in any::<bool>(),
        a in any::<u64>(),
        b in any::<u64>(),
    ) {
        let chunk = 4096;
        let layout = if alternate { RAID0_ALTERNATE } else { RAID0_ORIGINAL };
        let map = ZoneMap::raid0(&sizes, chunk, layout).unwrap();
        let size = map.array_bytes();
        let (x, y) = (a % (size + 1), b % (size + 1));
        let (offset, len) = (x.min(y), x.max(y) - x.min(y));
        let pieces = map.extents(offset, len).unwrap();
        let mut at = 0;
        for p in &pieces {
            prop_assert_eq!(p.at, at);
            prop_assert!(p.len > 0);
            prop_assert_eq!(map.locate(offset + at).unwrap().0, p.location);
            // Every byte of the piece is where locate says.
            let last = map.locate(offset + at + p.len - 1).unwrap().0;
            prop_assert_eq!(last.member, p.location.member);
            prop_assert_eq!(last.offset, p.location.offset + p.len - 1);
            at += p.len;
        }
        prop_assert_eq!(at, len);
        prop_assert!(map.extents(offset, size - offset + 1).is_err());
    }

    #[test]
    fn one_zone_is_the_plain_raid0_geometry(
        members in 2usize..6,
        chunks in 1u64..20,
        chunk_pow in 12u32..16,
        probe in any::<u64>(),
    ) {
        let chunk = 1u64 << chunk_pow;
        let sizes = vec![chunks * chunk + 512; members];
        let map = ZoneMap::raid0(&sizes, chunk, 0).unwrap();
        let geo = Geometry::new(Level::Raid0, Layout::Plain, chunk, members, sizes[0]).unwrap();
        prop_assert_eq!(map.array_bytes(), geo.array_bytes());
        let at = probe % geo.array_bytes();
        let (locs, _) = geo.mirror_map(at);
        prop_assert_eq!(map.locate(at).unwrap().0, locs[0]);
    }
}

#[test]
fn zones_of_three_sizes() {
    // 4, 2 and 6 chunks of 4 KiB: zone 0 over all three (2 rows), zone 1 over
    // members 0 and 2 (2 rows), zone 2 over member 2 alone (2 rows).
    let k = 4096;
    let map = ZoneMap::raid0(&[4 * k, 2 * k + 100, 6 * k], k, RAID0_ORIGINAL).unwrap();
    let shape: Vec<(u64, u64, u64, Vec<usize>)> = map
        .zones
        .iter()
        .map(|z| (z.start / k, z.len / k, z.dev_start / k, z.members.clone()))
        .collect();
    assert_eq!(
        shape,
        vec![
            (0, 6, 0, vec![0, 1, 2]),
            (6, 4, 2, vec![0, 2]),
            (10, 2, 4, vec![2]),
        ]
    );
    // The layouts differ only where a zone of 2+ members starts on an array
    // chunk number that is not a multiple of its member count.
    let orig = ZoneMap::raid0(&[3 * k, 2 * k, 5 * k], k, RAID0_ORIGINAL).unwrap();
    let alt = ZoneMap::raid0(&[3 * k, 2 * k, 5 * k], k, RAID0_ALTERNATE).unwrap();
    // Zone 1 starts at chunk 6 (even): both put it on member 0.
    assert_eq!(orig.locate(6 * k).unwrap().0.member, 0);
    assert_eq!(alt.locate(6 * k).unwrap().0.member, 0);
    let odd_orig = ZoneMap::raid0(&[2 * k, 3 * k, 3 * k, k], k, RAID0_ORIGINAL).unwrap();
    let odd_alt = ZoneMap::raid0(&[2 * k, 3 * k, 3 * k, k], k, RAID0_ALTERNATE).unwrap();
    // Zone 0: 4 chunks (1 row); zone 1 over 0,1,2 starts at chunk 4 -> original
    // picks 4 % 3 = member index 1, alternate index 0.
    assert_eq!(
        odd_orig.locate(4 * k).unwrap().0,
        Location {
            member: 1,
            offset: k
        }
    );
    assert_eq!(
        odd_alt.locate(4 * k).unwrap().0,
        Location {
            member: 0,
            offset: k
        }
    );
}

#[test]
fn unknown_layout_is_refused_only_where_it_matters() {
    let k = 4096;
    // Second zone of one member: layouts agree, layout 0 is fine.
    assert!(ZoneMap::raid0(&[k, 3 * k], k, 0).is_ok());
    let err = ZoneMap::raid0(&[k, 3 * k, 3 * k], k, 0).unwrap_err();
    assert!(err.to_string().contains("records no layout"), "{err}");
    assert!(ZoneMap::raid0(&[k, 3 * k, 3 * k], k, 7)
        .unwrap_err()
        .to_string()
        .contains("unknown"));
}

#[test]
fn bad_inputs_are_refused() {
    assert!(ZoneMap::raid0(&[], 4096, 1).is_err());
    assert!(ZoneMap::raid0(&[8192], 3000, 1).is_err());
    assert!(ZoneMap::raid0(&[8192, 100], 4096, 1)
        .unwrap_err()
        .to_string()
        .contains("member 1"));
    assert!(ZoneMap::linear(&[4096, 100], 0).is_err());
    assert!(ZoneMap::linear(&[4096], 100).is_err());
    assert!(ZoneMap::raid0(&[u64::MAX, u64::MAX], 4096, 1).is_err());
    assert!(ZoneMap::from_md(5, 0, 8, &[16]).is_err());
    let m = ZoneMap::from_md(-1, 0, 0, &[16, 24]).unwrap();
    assert_eq!(m.array_bytes(), 40 * 512);
    assert_eq!(
        m.to_array(Location {
            member: 1,
            offset: 24 * 512
        }),
        None
    );
}
