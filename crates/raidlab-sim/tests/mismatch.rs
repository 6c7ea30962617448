//! A check or repair in the simulator that finds differences: a
//! configuration's mismatch ranges make one role hold other bytes, the
//! engine's own comparison finds them, and a repair's rewrites (the engine's
//! choice of what to rewrite) run as member writes in virtual time, after
//! which the range compares consistent. Exact counts on ideal members, the
//! engine run live (`TaskArray`: the engine's own scrub as a task).

use raidlab_core::IoKind;
use raidlab_layout::{Geometry, Layout, Level};
use raidlab_sim::array::DATA_OFFSET;
use raidlab_sim::array::{ArraySpec, TaskArray};
use raidlab_sim::config::SimConfig;
use raidlab_sim::contents::{parse_mismatches, MismatchRange};
use raidlab_sim::device::Device;
use raidlab_sim::host::HostCost;
use raidlab_sim::ideal::Ideal;
use raidlab_sim::scrub::{ScrubProgress, ScrubSpec};
use raidlab_sim::stats::MemberIo;

const MEMBER: u64 = 8 << 20;
const CHUNK: u64 = 64 << 10;

fn geometry(level: Level, n: usize) -> Geometry {
    // RAID 1 has no chunk.
    let chunk = if level == Level::Raid1 { 0 } else { CHUNK };
    Geometry::new(level, Layout::parse(level, None).unwrap(), chunk, n, MEMBER).unwrap()
}

/// An array of ideal members (50 us, 200 MB/s).
fn ideal_array(g: Geometry) -> TaskArray {
    TaskArray::new(ArraySpec {
        name: "m".into(),
        geometry: g,
        members: (0..g.raid_disks)
            .map(|_| {
                Some(Box::new(Ideal::new(DATA_OFFSET + MEMBER, 50.0, 200.0)) as Box<dyn Device>)
            })
            .collect(),
        stripe_cache: None,
        // The engine's own member writes, page by page as md's repair
        // makes them: the host's plug (`host.rs`) would merge a step's
        // contiguous pages before the members see them.
        host: HostCost {
            plug_merge_bytes: 0,
            ..HostCost::default()
        },
        rebuild: None,
    })
    .unwrap()
}

/// Check (or repair) an idle array of `n` ideal members holding `ranges`;
/// the progress and every member write.
fn scrub(
    level: Level,
    n: usize,
    ranges: &[MismatchRange],
    repair: bool,
) -> (ScrubProgress, Vec<MemberIo>) {
    let mut sim = ideal_array(geometry(level, n));
    sim.keep_ops();
    sim.set_mismatches(ranges).unwrap();
    sim.start_scrub(ScrubSpec {
        repair,
        ..ScrubSpec::default()
    })
    .unwrap();
    let mut done = Vec::new();
    while let Some(t) = sim.next_event() {
        sim.advance(t, &mut done);
    }
    assert!(sim.errors().is_empty(), "{:?}", sim.errors());
    let writes = sim
        .member_ops()
        .unwrap()
        .ops
        .iter()
        .filter(|o| o.kind == IoKind::Write)
        .cloned()
        .collect();
    (sim.scrub_progress().unwrap(), writes)
}

#[test]
fn a_check_counts_the_mismatched_pages_and_writes_nothing() {
    // Role 1's 64 KiB at 1 MiB (16 pages) and one byte at 5 MiB + 100 (one page).
    let ranges = [
        MismatchRange {
            role: 1,
            offset: 1 << 20,
            len: 64 << 10,
        },
        MismatchRange {
            role: 2,
            offset: (5 << 20) + 100,
            len: 1,
        },
    ];
    let (p, writes) = scrub(Level::Raid5, 4, &ranges, false);
    assert!(p.finished.is_some());
    assert_eq!(p.mismatch_sectors, 17 * 8, "17 pages of 8 sectors");
    assert_eq!((p.rewrites, p.rewritten_bytes), (0, 0));
    assert!(writes.is_empty(), "{writes:?}");
}

#[test]
fn a_raid5_repair_rewrites_parity_where_the_pages_differ() {
    let ranges = [MismatchRange {
        role: 1,
        offset: 1 << 20,
        len: 64 << 10,
    }];
    let g = geometry(Level::Raid5, 4);
    let (check, _) = scrub(Level::Raid5, 4, &ranges, false);
    let (p, writes) = scrub(Level::Raid5, 4, &ranges, true);
    assert_eq!(p.mismatch_sectors, 16 * 8);
    assert_eq!((p.rewrites, p.rewritten_bytes), (16, 64 << 10));
    // md's repair of a RAID 5 stripe recomputes parity from the data: the
    // writes are the stripe's parity member's, page by page.
    let parity = g.stripe((1 << 20) / CHUNK).p;
    let want: Vec<MemberIo> = (0..16)
        .map(|i| MemberIo {
            kind: IoKind::Write,
            member: parity,
            offset: DATA_OFFSET + (1 << 20) + i * 4096,
            len: 4096,
        })
        .collect();
    assert_eq!(writes, want);
    // The writes cost virtual time.
    assert!(
        p.finished.unwrap() > check.finished.unwrap(),
        "{p:?} {check:?}"
    );
}

#[test]
fn a_raid6_repair_rewrites_the_data_block_p_and_q_point_at() {
    // One data page differs: P and Q both disagree, and together they
    // locate the data block, which the repair rewrites (md's repair on
    // RAID 6).
    let g = geometry(Level::Raid6, 5);
    let map = g.stripe(3);
    let role = map.data[1];
    let at = 3 * CHUNK + 8192;
    let ranges = [MismatchRange {
        role,
        offset: at,
        len: 4096,
    }];
    let (p, writes) = scrub(Level::Raid6, 5, &ranges, true);
    assert_eq!((p.mismatch_sectors, p.rewrites), (8, 1));
    assert_eq!(
        writes,
        vec![MemberIo {
            kind: IoKind::Write,
            member: role,
            offset: DATA_OFFSET + at,
            len: 4096,
        }]
    );
}

#[test]
fn after_a_repair_the_range_compares_consistent() {
    let ranges = [MismatchRange {
        role: 0,
        offset: 0,
        len: 12 << 10,
    }];
    let g = geometry(Level::Raid5, 4);
    let found = raidlab_sim::summary::mismatches(&g, &[], &ranges);
    assert_eq!((found.mismatch_sectors, found.rewrites), (24, 3));
    // The short form, a repair, then a check of the same members.
    let cfg =
        SimConfig::short("raid5:4xhdd-7200:member-size=16M:check=repair:mismatch=0@0+12K").unwrap();
    let a = cfg.array.as_ref().unwrap();
    assert!(a.check && a.repair);
    let mut sim = ideal_array(g);
    sim.set_mismatches(&a.mismatches().unwrap()).unwrap();
    repair_then_check(&mut sim, (24, 3));
}

/// Repair `sim`, expecting (mismatch sectors, rewrites) `repaired`, then
/// check it again: nothing is left to find.
fn repair_then_check(sim: &mut TaskArray, repaired: (u64, u64)) {
    let mut done = Vec::new();
    for repair in [true, false] {
        sim.start_scrub(ScrubSpec {
            repair,
            ..ScrubSpec::default()
        })
        .unwrap();
        while let Some(t) = sim.next_event() {
            sim.advance(t, &mut done);
        }
        let p = sim.scrub_progress().unwrap();
        let want = if repair { repaired } else { (0, 0) };
        assert_eq!((p.mismatch_sectors, p.rewrites), want, "repair {repair}");
    }
}

#[test]
fn the_same_configuration_gives_the_same_figures() {
    let ranges = parse_mismatches("1@1M+64K,3@6M+8K").unwrap();
    let a = scrub(Level::Raid6, 5, &ranges, true);
    let b = scrub(Level::Raid6, 5, &ranges, true);
    assert_eq!(a, b);
}

#[test]
fn bad_mismatch_ranges_are_refused_with_the_reason() {
    for (spec, says) in [
        ("raid0:2xhdd-7200:mismatch=1@0+4K", "RAID 0 has neither"),
        (
            "raid1:2xhdd-7200:failed=0:mismatch=1@0+4K",
            "no redundancy is left",
        ),
        ("raid5:4xhdd-7200:mismatch=4@0+4K", "no such member"),
        (
            "raid5:4xhdd-7200:failed=2:mismatch=2@0+4K",
            "no such member",
        ),
        (
            "raid5:4xhdd-7200:failed=2:mismatch=1@0+4K",
            "no redundancy is left",
        ),
        (
            "raid5:4xhdd-7200:member-size=16M:mismatch=1@16M+4K",
            "past the member's data area",
        ),
        ("raid5:4xhdd-7200:mismatch=1@0", "ROLE@OFFSET+LENGTH"),
        ("raid5:4xhdd-7200:mismatch=x@0+4K", "not a role number"),
        ("raid5:4xhdd-7200:mismatch=1@0+0", "length is 0"),
        ("raid5:4xhdd-7200:check=maybe", "check=repair"),
    ] {
        let e = match SimConfig::short(spec).and_then(|c| c.build(&[]).map(|_| ())) {
            Ok(()) => panic!("{spec} was accepted"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(says), "{spec}: {e}");
    }
}

/// Member writes of role `role`, 4 KiB each, over `[at, at+len)`.
fn page_writes(role: usize, at: u64, len: u64) -> Vec<MemberIo> {
    (0..len / 4096)
        .map(|i| MemberIo {
            kind: IoKind::Write,
            member: role,
            offset: DATA_OFFSET + at + i * 4096,
            len: 4096,
        })
        .collect()
}

#[test]
fn a_raid1_check_counts_the_pages_where_a_copy_differs_from_the_first() {
    // Role 1's 64 KiB at 1 MiB differ from role 0's: 16 pages of 8 sectors.
    let ranges = parse_mismatches("1@1M+64K").unwrap();
    let (p, writes) = scrub(Level::Raid1, 2, &ranges, false);
    assert!(p.finished.is_some());
    assert_eq!(p.mismatch_sectors, 16 * 8);
    assert_eq!((p.rewrites, p.rewritten_bytes), (0, 0));
    assert!(writes.is_empty(), "{writes:?}");
}

#[test]
fn a_raid1_repair_copies_the_first_copy_over_the_others() {
    // The odd copy is role 0's, the first: md's repair takes the first
    // readable copy as right and rewrites roles 1 and 2 with it, so both
    // count as mismatched.
    let ranges = parse_mismatches("0@1M+8K").unwrap();
    let (p, writes) = scrub(Level::Raid1, 3, &ranges, true);
    assert_eq!(p.mismatch_sectors, 2 * 2 * 8, "two copies of two pages");
    assert_eq!((p.rewrites, p.rewritten_bytes), (4, 16 << 10));
    let mut want = page_writes(1, 1 << 20, 8 << 10);
    want.extend(page_writes(2, 1 << 20, 8 << 10));
    let mut got = writes;
    got.sort_by_key(|w| (w.member, w.offset));
    assert_eq!(got, want);
    // After the repair every copy holds role 0's bytes: a check finds nothing.
    let g = geometry(Level::Raid1, 3);
    let mut sim = ideal_array(g);
    sim.set_mismatches(&ranges).unwrap();
    repair_then_check(&mut sim, (32, 4));
}

#[test]
fn a_raid10_repair_rewrites_the_other_copy_of_the_chunk() {
    // RAID 10 near=2 over 4 members: chunk c's copies are on members 2c mod 4
    // and 2c+1 mod 4, at the same offset. Role 1's page at member offset
    // 1 MiB + 4 KiB is the second copy of an array page whose first copy is
    // role 0's: a repair rewrites role 1's page from role 0's.
    let g = geometry(Level::Raid10, 4);
    let at = (1 << 20) + 4096;
    let ranges = [MismatchRange {
        role: 1,
        offset: at,
        len: 4096,
    }];
    let found = raidlab_sim::summary::mismatches(&g, &[], &ranges);
    assert_eq!((found.mismatch_sectors, found.rewrites), (8, 1));
    let (p, writes) = scrub(Level::Raid10, 4, &ranges, true);
    assert_eq!((p.mismatch_sectors, p.rewrites), (8, 1));
    assert_eq!(writes, page_writes(1, at, 4096));
    // A difference on role 0 (the first copy) rewrites role 1 instead.
    let ranges = [MismatchRange {
        role: 0,
        offset: at,
        len: 4096,
    }];
    let (_, writes) = scrub(Level::Raid10, 4, &ranges, true);
    assert_eq!(writes, page_writes(1, at, 4096));
}
