//! The rules table stated level by level, so a change to one is a change
//! to this test too; and the table held against layout's own answers.

use super::*;
use raidlab_layout::{Geometry, Layout, Level};

/// Each level's constraints, one row: (level, family, plans, redundancy,
/// min members, [chunked, ppl, journal, trims, resyncs, write hole, stripe
/// cache, balanced reads, heals listed bad blocks, spares, sized per
/// member], bitmap).
#[allow(clippy::type_complexity)]
#[rustfmt::skip]
const TABLE: [(
    Level,
    Family,
    Plans,
    Redundancy,
    usize,
    [bool; 11],
    BitmapUnit,
); 6] = {
    use BitmapUnit as B;
    use Family::*;
    use Plans::*;
    use Redundancy as R;
    const T: bool = true;
    const F: bool = false;
    // Flags: chunked, ppl, journal, trims, resyncs, write hole, stripe cache,
    // balanced reads, heals listed, spares, sized per member.
    [
        //   ch pp jo tr rs wh sc br hl sp pm (the flags, under each row)
        (Level::Raid0, Striped, Copies, R::None, 2,
            [T, F, F, T, F, F, F, F, F, F, T], B::None),
        (Level::Raid1, Mirror, Copies, R::AllButOne, 2,
            [F, F, F, T, T, F, F, T, F, T, F], B::MemberSectors),
        (Level::Raid10, Mirror, Copies, R::CopyOfEachChunk, 2,
            [T, F, F, T, T, F, F, T, F, T, F], B::ArraySectors),
        (Level::Raid4, Parity, ParityRows, R::Parity(1), 2,
            [T, F, T, F, T, T, T, F, T, T, F], B::MemberSectors),
        (Level::Raid5, Parity, ParityRows, R::Parity(1), 2,
            [T, T, T, F, T, T, T, F, T, T, F], B::MemberSectors),
        (Level::Raid6, Parity, ParityRows, R::Parity(2), 4,
            [T, F, T, F, T, T, T, F, T, T, F], B::MemberSectors),
    ]
};

#[test]
fn every_level_has_the_constraints_stated_here() {
    assert_eq!(TABLE.len(), Level::ALL.len());
    for (level, family, plans, redundancy, min, flags, bitmap) in TABLE {
        let r = rules(level);
        assert_eq!(r.level, Some(level));
        assert_eq!(r.name, level.name());
        let got = (
            r.family,
            r.plans,
            r.redundancy,
            r.min_members(),
            [
                r.chunked,
                r.ppl,
                r.journal,
                r.trims,
                r.resyncs,
                r.write_hole,
                r.stripe_cache,
                r.balanced_reads,
                r.heals_listed,
                r.spares,
                r.sized_per_member,
            ],
            r.bitmap,
        );
        assert_eq!(
            got,
            (family, plans, redundancy, min, flags, bitmap),
            "{level}: (family, plans, redundancy, min members, [chunked, ppl, journal, trims, resyncs, write hole, stripe cache, balanced reads, heals listed, spares, sized per member], bitmap)"
        );
    }
}

#[test]
fn the_lost_data_reason_names_what_each_level_tolerates() {
    let reasons: Vec<(Level, &str)> = Level::ALL.iter().map(|&l| (l, rules(l).lost)).collect();
    assert_eq!(
        reasons,
        [
            (Level::Raid0, "RAID 0 has no redundancy"),
            (Level::Raid1, "RAID 1 needs at least one member"),
            (Level::Raid4, "it tolerates one missing member"),
            (Level::Raid5, "it tolerates one missing member"),
            (Level::Raid6, "it tolerates two missing members"),
            (Level::Raid10, "RAID 10 needs one copy of every chunk"),
        ]
    );
}

fn geometry(level: Level, layout: Option<&str>, disks: usize) -> Geometry {
    let chunk = if level == Level::Raid1 { 0 } else { 64 << 10 };
    Geometry::new(
        level,
        Layout::parse(level, layout).unwrap(),
        chunk,
        disks,
        16 << 20,
    )
    .unwrap()
}

/// Every set of `k` roles out of `n`, as lists.
fn subsets(n: usize, k: usize) -> Vec<Vec<usize>> {
    (0u32..1 << n)
        .filter(|m| m.count_ones() as usize == k)
        .map(|m| (0..n).filter(|&i| m & (1 << i) != 0).collect())
        .collect()
}

#[test]
fn failures_tolerated_is_what_the_layout_survives_whichever_members_go() {
    let cases = [
        (Level::Raid0, None, 3, 0),
        (Level::Raid1, None, 3, 2),
        (Level::Raid4, None, 4, 1),
        (Level::Raid5, None, 5, 1),
        (Level::Raid6, None, 6, 2),
        (Level::Raid10, Some("n2"), 4, 1),
        (Level::Raid10, Some("n3"), 6, 2),
        (Level::Raid10, Some("f2"), 5, 1),
        (Level::Raid10, Some("o2"), 4, 1),
    ];
    for (level, layout, disks, want) in cases {
        let geo = geometry(level, layout, disks);
        let tolerated = of(&geo).failures_tolerated(&geo);
        assert_eq!(tolerated, want, "{level} {layout:?} of {disks}");
        assert!(
            subsets(disks, tolerated).iter().all(|m| geo.survives(m)),
            "{level} {layout:?}: some {tolerated} missing members lose data"
        );
        assert!(
            subsets(disks, tolerated + 1)
                .iter()
                .any(|m| !geo.survives(m)),
            "{level} {layout:?}: every {} missing members survive",
            tolerated + 1
        );
        assert_eq!(
            matches!(of(&geo).redundancy, Redundancy::Parity(_)),
            geo.is_parity()
        );
        if let Redundancy::Parity(n) = of(&geo).redundancy {
            assert_eq!(n, geo.parity_count(), "{level}");
        }
    }
}

/// The three arrays with no geometry of their own, stated as the levels
/// are: (entry, name, family, redundancy, [chunked, ppl, journal, trims,
/// resyncs, write hole, stripe cache, balanced reads, heals listed, spares,
/// sized per member], bitmap).
#[test]
fn linear_multi_zone_and_mid_reshape_have_the_constraints_stated_here() {
    use Family::*;
    const T: bool = true;
    const F: bool = false;
    #[rustfmt::skip]
    let table: [(&Rules, &str, Family, Redundancy, [bool; 11]); 3] = [
        //                                    ch pp jo tr rs wh sc br hl sp pm
        (&LINEAR, "linear", Striped, Redundancy::None,
            [F, F, F, T, F, F, F, F, F, F, T]),
        (&MULTI_ZONE_RAID0, "raid0", Striped, Redundancy::None,
            [T, F, F, T, F, F, F, F, F, F, T]),
        (&RESHAPE, "reshape", Reshape, Redundancy::FewerOfTwoGeometries,
            [F, F, F, F, F, F, F, F, F, F, F]),
    ];
    for (r, name, family, redundancy, flags) in table {
        let got = [
            r.chunked,
            r.ppl,
            r.journal,
            r.trims,
            r.resyncs,
            r.write_hole,
            r.stripe_cache,
            r.balanced_reads,
            r.heals_listed,
            r.spares,
            r.sized_per_member,
        ];
        assert_eq!(
            (r.name, r.family, r.redundancy, got),
            (name, family, redundancy, flags)
        );
        assert_eq!(r.bitmap, BitmapUnit::None, "{name}");
        // Each runs as a pass-through: one request, one copy.
        assert_eq!(r.plans, Plans::Copies, "{name}");
        // Only a reshape keeps redundancy: its geometries'.
        assert_eq!(r.redundant(), family == Reshape, "{name}");
    }
    assert_eq!(MULTI_ZONE_RAID0.level, Some(Level::Raid0));
    assert_eq!((LINEAR.level, RESHAPE.level), (None, None));
    assert!(
        LINEAR.no_scrub.contains("linear array"),
        "{}",
        LINEAR.no_scrub
    );
    assert!(
        RESHAPE.no_scrub.contains("grow --continue"),
        "{}",
        RESHAPE.no_scrub
    );
}

/// A refusal always has its reason, and an allowed thing none.
#[test]
fn every_entry_says_why_it_refuses_a_check_or_a_trim() {
    let levels = Level::ALL.iter().map(|&l| rules(l));
    for r in levels.chain([&LINEAR, &MULTI_ZONE_RAID0, &RESHAPE]) {
        assert_eq!(r.resyncs, r.no_scrub.is_empty(), "{}", r.name);
        assert_eq!(r.trims, r.no_trim.is_empty(), "{}", r.name);
    }
}

#[test]
fn mid_reshape_an_array_tolerates_the_fewer_of_its_two_geometries_failures() {
    let cases = [
        // RAID 5 becoming RAID 6 (one member more): RAID 5's one.
        ((Level::Raid5, 4), (Level::Raid6, 5), 1),
        // RAID 6 back to RAID 5 or growing: the fewer.
        ((Level::Raid6, 5), (Level::Raid5, 4), 1),
        ((Level::Raid6, 4), (Level::Raid6, 5), 2),
        // RAID 1 of two to RAID 5 (md's takeover, then a restripe).
        ((Level::Raid1, 2), (Level::Raid5, 3), 1),
    ];
    for ((lo, no), (ln, nn), want) in cases {
        let (old, new) = (geometry(lo, None, no), geometry(ln, None, nn));
        assert_eq!(
            failures_tolerated_mid_reshape(&old, &new),
            want,
            "{lo} of {no} -> {ln} of {nn}"
        );
    }
    // One geometry cannot tell; the entry never promises more than none.
    let g = geometry(Level::Raid6, None, 5);
    assert_eq!(RESHAPE.failures_tolerated(&g), 0);
}

/// The planner's write-read count (`planner/count.rs`) asks the builder, not
/// the layout, whether a geometry is planned by parity rows: they must agree
/// for every level, or the count would answer for a plan it does not match.
#[test]
fn the_parity_rows_builder_is_exactly_the_levels_with_parity_chunks() {
    let planned_by_rows: Vec<(Level, bool)> = Level::ALL
        .iter()
        .map(|&l| (l, rules(l).plans == Plans::ParityRows))
        .collect();
    assert_eq!(
        planned_by_rows,
        [
            (Level::Raid0, false),
            (Level::Raid1, false),
            (Level::Raid4, true),
            (Level::Raid5, true),
            (Level::Raid6, true),
            (Level::Raid10, false),
        ]
    );
    for (level, disks) in [
        (Level::Raid0, 3),
        (Level::Raid1, 2),
        (Level::Raid4, 3),
        (Level::Raid5, 3),
        (Level::Raid6, 4),
        (Level::Raid10, 4),
    ] {
        let geo = geometry(level, None, disks);
        assert_eq!(
            of(&geo).plans == Plans::ParityRows,
            geo.is_parity(),
            "{level}"
        );
    }
}

/// md sizes only RAID 0 from each member's own data size; the assembly
/// (`geometry_of`, `zoned::is_zoned`) asks this of md's level number.
#[test]
fn only_raid0_and_the_zoned_arrays_are_sized_per_member() {
    let sized: Vec<(i32, bool)> = Level::ALL
        .iter()
        .map(|&l| (l.md_level(), rules(l).sized_per_member))
        .collect();
    assert_eq!(
        sized,
        [
            (0, true),
            (1, false),
            (4, false),
            (5, false),
            (6, false),
            (10, false),
        ]
    );
    assert!(LINEAR.sized_per_member && MULTI_ZONE_RAID0.sized_per_member);
    assert!(!RESHAPE.sized_per_member);
}
