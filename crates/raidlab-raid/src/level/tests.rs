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
        assert_eq!(r.level, level);
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
