//! The recovery plans (rebuild, copy, repair) are the only way the engine
//! restores redundancy, so they must reproduce a member's bytes exactly: on
//! every level and layout, with one role (RAID 6: two) lost, the plan run by
//! the real executor writes to a blank new member exactly what the lost
//! member held, and a repair rewrites a corrupted chunk back to what it was.

use raidlab_core::IoKind;
use raidlab_core::Volume;
use raidlab_devices::MemVolume;
use raidlab_layout::{Geometry, Layout, Level, ParityLayout, Raid10Layout};
use raidlab_raid::exec::{Executor, ThreadPool, UserBuf};
use raidlab_raid::plan::Compute;
use raidlab_raid::recovery_plan::{plan_copy, plan_rebuild, plan_repair};
use raidlab_raid::Array;
use rand::{RngCore, SeedableRng};
use std::sync::Arc;

const CHUNK: u64 = 16 << 10;
const MEMBER: u64 = 1 << 20;

fn shapes() -> Vec<(Level, Layout, usize)> {
    let r10 = |near, far, offset| Layout::Raid10(Raid10Layout { near, far, offset });
    vec![
        (Level::Raid1, Layout::Plain, 3),
        (Level::Raid4, Layout::Parity(ParityLayout::ParityLast), 4),
        (Level::Raid5, Layout::Parity(ParityLayout::LeftSymmetric), 4),
        (
            Level::Raid5,
            Layout::Parity(ParityLayout::RightAsymmetric),
            5,
        ),
        (Level::Raid6, Layout::Parity(ParityLayout::LeftSymmetric), 6),
        (Level::Raid10, r10(2, 1, false), 4),
        (Level::Raid10, r10(1, 2, false), 4),
        (Level::Raid10, r10(1, 2, true), 3),
        (Level::Raid10, r10(2, 1, false), 3),
    ]
}

/// An array of memory members filled with seeded random data.
fn filled(level: Level, layout: Layout, n: usize) -> (Geometry, Vec<Arc<MemVolume>>) {
    let chunk = if level == Level::Raid1 { 0 } else { CHUNK };
    let g = Geometry::new(level, layout, chunk, n, MEMBER).unwrap();
    let vols: Vec<Arc<MemVolume>> = (0..n).map(|_| Arc::new(MemVolume::new(MEMBER))).collect();
    let members = vols
        .iter()
        .map(|v| Some(v.clone() as Arc<dyn Volume>))
        .collect();
    let a = Array::new("fill", g, members).unwrap();
    let mut data = vec![0u8; a.size() as usize];
    rand::rngs::StdRng::seed_from_u64(n as u64 * 31 + level.md_level() as u64)
        .fill_bytes(&mut data);
    a.write_at(&data, 0).unwrap();
    (g, vols)
}

fn contents(v: &dyn Volume) -> Vec<u8> {
    let mut b = vec![0u8; v.size() as usize];
    v.read_at(&mut b, 0).unwrap();
    b
}

fn run(plan: &raidlab_raid::Plan, members: &[Option<Arc<dyn Volume>>], buf: &mut [u8]) {
    ThreadPool::default()
        .run(
            plan,
            members,
            raidlab_parity::selected(),
            UserBuf::Read(buf),
            raidlab_raid::exec::Hooks::NONE,
        )
        .unwrap_or_else(|f| panic!("plan failed: {}", f.error));
}

/// Rebuild `role` onto a blank member in steps of `step` bytes, with `lost`
/// unreadable too, and return what the new member holds.
fn rebuild(
    vols: &[Arc<MemVolume>],
    g: &Geometry,
    role: usize,
    lost: &[usize],
    step: u64,
) -> Vec<u8> {
    let mut members: Vec<Option<Arc<dyn Volume>>> = vols
        .iter()
        .enumerate()
        .map(|(r, v)| (r != role && !lost.contains(&r)).then(|| v.clone() as Arc<dyn Volume>))
        .collect();
    let target = Arc::new(MemVolume::new(MEMBER));
    members.push(Some(target.clone()));
    let live: Vec<bool> = (0..g.raid_disks).map(|r| members[r].is_some()).collect();
    let mut at = 0;
    while at < g.member_bytes {
        let n = step.min(g.member_bytes - at);
        let plan = plan_rebuild(g, &live, role, at, n, g.raid_disks).unwrap();
        assert!(plan
            .reads()
            .all(|o| o.member != role && !lost.contains(&o.member)));
        assert!(!plan.locks.is_empty(), "a rebuild step holds its stripes");
        let mut buf = vec![0u8; n as usize];
        run(&plan, &members, &mut buf);
        at += n;
    }
    contents(target.as_ref())
}

#[test]
fn a_rebuild_plan_reproduces_every_lost_member_on_every_level() {
    for (level, layout, n) in shapes() {
        let (g, vols) = filled(level, layout, n);
        for role in 0..n {
            let label = format!("{} {layout:?} x{n}, role {role}", level.name());
            let want = contents(vols[role].as_ref());
            // Steps that are not a divisor of the member, and one that is.
            for step in [3 * CHUNK, 64 << 10] {
                assert!(
                    rebuild(&vols, &g, role, &[], step) == want,
                    "{label}: step {step}"
                );
            }
            if level == Level::Raid6 {
                let other = (role + 2) % n;
                assert!(
                    rebuild(&vols, &g, role, &[other], 5 * CHUNK) == want,
                    "{label}: with role {other} also lost"
                );
            }
        }
    }
}

#[test]
fn a_rebuild_plan_refuses_what_redundancy_cannot_give() {
    let (g, _) = filled(Level::Raid5, Layout::Parity(ParityLayout::LeftSymmetric), 4);
    let live = [true, false, true, true];
    let e = plan_rebuild(&g, &live, 0, 0, CHUNK, 4).unwrap_err();
    assert!(e.to_string().contains("cannot rebuild role 0"), "{e}");
    let e = plan_rebuild(&g, &[true; 4], 0, MEMBER - 4096, 8192, 4).unwrap_err();
    assert!(e.to_string().contains("not inside"), "{e}");
}

#[test]
fn a_copy_plan_copies_the_member_it_replaces() {
    let (g, vols) = filled(Level::Raid5, Layout::Parity(ParityLayout::LeftSymmetric), 4);
    let target = Arc::new(MemVolume::new(MEMBER));
    let mut members: Vec<Option<Arc<dyn Volume>>> = vols
        .iter()
        .map(|v| Some(v.clone() as Arc<dyn Volume>))
        .collect();
    members.push(Some(target.clone()));
    let plan = plan_copy(&g, 2, 0, MEMBER, 4).unwrap();
    assert_eq!(plan.op_counts(), (1, 1));
    let mut buf = vec![0u8; MEMBER as usize];
    run(&plan, &members, &mut buf);
    assert!(contents(target.as_ref()) == contents(vols[2].as_ref()));
}

#[test]
fn a_repair_plan_rewrites_a_corrupted_block_with_its_old_contents() {
    for (level, layout, n) in shapes() {
        let (g, vols) = filled(level, layout, n);
        let before: Vec<Vec<u8>> = vols.iter().map(|v| contents(v.as_ref())).collect();
        let members: Vec<Option<Arc<dyn Volume>>> = vols
            .iter()
            .map(|v| Some(v.clone() as Arc<dyn Volume>))
            .collect();
        // A small array range; spoil what the role holds for it, then repair.
        let (pos, len) = (3 * CHUNK + 512, 6000u64);
        let live = vec![true; n];
        for role in 0..n {
            let (plan, buf_len) = plan_repair(&g, &live, role, pos, len).unwrap();
            assert!(plan.reads().all(|o| o.member != role));
            for w in plan.writes() {
                assert_eq!((w.kind, w.member), (IoKind::Write, role));
                vols[role]
                    .write_at(&vec![0xee; w.length as usize], w.offset)
                    .unwrap();
            }
            let mut buf = vec![0u8; buf_len];
            run(&plan, &members, &mut buf);
            assert!(
                contents(vols[role].as_ref()) == before[role],
                "{} {layout:?} x{n}: role {role} repaired",
                level.name()
            );
        }
    }
}

/// A scrub's reads put every present member's range where the comparison
/// looks for it (parity: role r at r*n; mirrors: each run's copies at their
/// offsets), skip a missing member, and its rewrites write what the caller's
/// buffer holds there.
#[test]
fn scrub_plans_read_every_copy_and_rewrite_from_the_buffer() {
    use raidlab_raid::recovery_plan::{plan_rewrites, plan_scrub_mirrors, plan_scrub_parity};
    for (level, layout, n) in shapes() {
        let (g, vols) = filled(level, layout, n);
        let label = format!("{} {} x{n}", level.name(), layout.name());
        let mut members: Vec<Option<Arc<dyn Volume>>> = vols
            .iter()
            .map(|v| Some(v.clone() as Arc<dyn Volume>))
            .collect();
        members[1] = None;
        let present: Vec<bool> = members.iter().map(Option::is_some).collect();
        let held: Vec<Vec<u8>> = vols.iter().map(|v| contents(v.as_ref())).collect();
        if g.is_parity() {
            let (at, len) = (3 * CHUNK, 2 * CHUNK);
            let plan = plan_scrub_parity(&g, &present, at, len).unwrap();
            assert_eq!(
                plan.reads().count(),
                n - 1,
                "{label}: no read of the missing role"
            );
            let mut buf = vec![0u8; n * len as usize];
            run(&plan, &members, &mut buf);
            for r in (0..n).filter(|&r| r != 1) {
                let part = &buf[r * len as usize..(r + 1) * len as usize];
                assert!(
                    part == &held[r][(at as usize)..(at + len) as usize],
                    "{label}: role {r}"
                );
            }
            continue;
        }
        let (pos, len) = (5 * CHUNK + 512, 3 * CHUNK);
        let scrub = plan_scrub_mirrors(&g, &present, pos, len).unwrap();
        assert_eq!(
            scrub.runs.iter().map(|r| r.len).sum::<u64>(),
            len,
            "{label}: runs cover the range"
        );
        let mut buf = vec![0u8; scrub.len];
        run(&scrub.plan, &members, &mut buf);
        for run in &scrub.runs {
            let live = run.copies.len();
            assert!(live == 0 || live >= 2, "{label}: a lone copy is not read");
            for &(loc, at) in &run.copies {
                assert_ne!(loc.member, 1, "{label}: the missing member is not read");
                let want = &held[loc.member][loc.offset as usize..(loc.offset + run.len) as usize];
                assert!(
                    &buf[at..at + run.len as usize] == want,
                    "{label}: copy on {}",
                    loc.member
                );
            }
        }
        // Rewrite the first checked copy from a buffer of 0x5a.
        let Some(run0) = scrub.runs.iter().find(|r| !r.copies.is_empty()) else {
            panic!("{label}: nothing checked");
        };
        let (loc, _) = run0.copies[0];
        let k = run0.len as usize;
        let ones = vec![0x5au8; k];
        let plan = plan_rewrites(&[(loc.member, loc.offset, 0, k)], scrub.plan.locks.clone());
        ThreadPool::default()
            .run(
                &plan,
                &members,
                raidlab_parity::selected(),
                UserBuf::Write(&ones),
                raidlab_raid::exec::Hooks::NONE,
            )
            .unwrap_or_else(|f| panic!("{label}: {}", f.error));
        let after = contents(vols[loc.member].as_ref());
        assert!(
            after[loc.offset as usize..loc.offset as usize + k] == ones[..],
            "{label}: rewritten"
        );
    }
}

/// A mirror rebuild step reads its range in one request per copy read, not
/// page by page (RAID 1 has no chunk, and its pieces are pages).
#[test]
fn a_raid1_rebuild_step_reads_in_one_request() {
    let g = Geometry::new(Level::Raid1, Layout::Plain, 0, 2, 64 << 20).unwrap();
    let plan = plan_rebuild(&g, &[false, true], 0, 4 << 20, 1 << 20, 2).unwrap();
    let reads: Vec<(usize, u64, u64)> = plan
        .reads()
        .map(|o| (o.member, o.offset, o.length))
        .collect();
    assert_eq!(reads, vec![(1, 4 << 20, 1 << 20)]);
}

/// A rebuild of a range that starts inside a chunk and runs into the next
/// stripes (what a write planned around a bad block rewrites on the member
/// it left out) recomputes each part with its own stripe's parity. Rows were
/// once cut `chunk` bytes from the range's start, so the bytes past the first
/// chunk boundary were computed with the first stripe's parity: invisible on
/// RAID 4/5 with one member lost (the XOR of the rest is the same whichever
/// holds parity), wrong on RAID 6 (found by the torture harness, seed 2 run
/// 557: a stripe's P rewritten from the wrong data, flushed data lost).
#[test]
fn a_rebuild_of_a_range_inside_a_chunk_crossing_stripes_is_exact() {
    for (level, layout, n) in shapes()
        .into_iter()
        .filter(|s| matches!(s.0, Level::Raid4 | Level::Raid5 | Level::Raid6))
    {
        let (g, vols) = filled(level, layout, n);
        for role in 0..n {
            let want = contents(vols[role].as_ref());
            let mut lost_sets = vec![vec![]];
            if level == Level::Raid6 {
                lost_sets.push(vec![(role + 1) % n]);
            }
            for lost in lost_sets {
                let mut members: Vec<Option<Arc<dyn Volume>>> = vols
                    .iter()
                    .enumerate()
                    .map(|(r, v)| {
                        (r != role && !lost.contains(&r)).then(|| v.clone() as Arc<dyn Volume>)
                    })
                    .collect();
                let target = Arc::new(MemVolume::new(MEMBER));
                members.push(Some(target.clone()));
                let live: Vec<bool> = (0..n).map(|r| members[r].is_some()).collect();
                for (at, len) in [
                    (3 * CHUNK - 2560, 5120),
                    (5 * CHUNK - 512, 2 * CHUNK + 1024),
                    (7 * CHUNK + 4096, CHUNK),
                ] {
                    let plan = plan_rebuild(&g, &live, role, at, len, n).unwrap();
                    let mut buf = vec![0u8; len as usize];
                    run(&plan, &members, &mut buf);
                    let got = contents(target.as_ref());
                    let r = at as usize..(at + len) as usize;
                    assert!(
                        got[r.clone()] == want[r],
                        "{} {layout:?} x{n}, role {role}, lost {lost:?}: {len} bytes at {at}",
                        level.name()
                    );
                }
            }
        }
    }
}

/// Every RAID 5 and RAID 6 layout md has (the "-6" ones of its RAID 5 to 6
/// conversion too), with its member count.
fn parity_shapes() -> Vec<(Level, ParityLayout, usize)> {
    use ParityLayout::*;
    let mut v: Vec<_> = ParityLayout::ALL
        .into_iter()
        .map(|l| (Level::Raid5, l, 4))
        .collect();
    v.extend(ParityLayout::ALL.into_iter().map(|l| (Level::Raid6, l, 5)));
    for l in [
        LeftAsymmetric6,
        RightAsymmetric6,
        LeftSymmetric6,
        RightSymmetric6,
        ParityFirst6,
    ] {
        v.push((Level::Raid6, l, 5));
    }
    v
}

#[test]
fn a_rebuilt_member_is_what_a_degraded_read_gives_on_every_parity_layout() {
    // A rebuild states each row's arithmetic at plan time (which chunks are
    // given, which lost, which parity is recomputed): a wrong slot, a wrong
    // parity or a row cut at the wrong place shows here as bytes that differ
    // from the member and from what a degraded read of its data returns.
    const SMALL: u64 = 256 << 10;
    for (level, layout, n) in parity_shapes() {
        let g = Geometry::new(level, Layout::Parity(layout), CHUNK, n, SMALL).unwrap();
        let vols: Vec<Arc<MemVolume>> = (0..n).map(|_| Arc::new(MemVolume::new(SMALL))).collect();
        let all: Vec<Option<Arc<dyn Volume>>> = vols
            .iter()
            .map(|v| Some(v.clone() as Arc<dyn Volume>))
            .collect();
        let a = Array::new("fill", g, all.clone()).unwrap();
        let mut data = vec![0u8; a.size() as usize];
        rand::rngs::StdRng::seed_from_u64(layout as u64 * 7 + n as u64).fill_bytes(&mut data);
        a.write_at(&data, 0).unwrap();
        for (role, vol) in vols.iter().enumerate() {
            let mut cases = vec![None];
            if level == Level::Raid6 {
                cases.extend((0..n).filter(|&u| u != role).map(Some));
            }
            for other in cases {
                let label = format!(
                    "{} {layout:?} x{n}: role {role}, {other:?} lost too",
                    level.name()
                );
                let lost: Vec<usize> = other.into_iter().collect();
                let live: Vec<bool> = (0..n).map(|r| r != role && !lost.contains(&r)).collect();
                let plan = plan_rebuild(&g, &live, role, 0, SMALL, role).unwrap();
                for step in &plan.steps {
                    if let raidlab_raid::Step::Compute(cs) = step {
                        assert!(
                            cs.iter().all(|c| matches!(c, Compute::Recover { .. })),
                            "{label}: a parity member's rows are parity arithmetic"
                        );
                        assert_eq!(cs.len() as u64, SMALL / CHUNK, "{label}: one per row");
                    }
                }
                // Run everything but the write, into a buffer.
                let mut without_write = plan.clone();
                without_write.steps.pop();
                let members: Vec<Option<Arc<dyn Volume>>> = all
                    .iter()
                    .enumerate()
                    .map(|(r, m)| m.clone().filter(|_| live[r]))
                    .collect();
                let mut got = vec![0u8; SMALL as usize];
                run(&without_write, &members, &mut got);
                assert!(got == contents(vol.as_ref()), "{label}: the member's bytes");
                let degraded = Array::new("degraded", g, members.clone()).unwrap();
                let mut read = vec![0u8; a.size() as usize];
                degraded.read_at(&mut read, 0).unwrap();
                for row in 0..SMALL / CHUNK {
                    let at = row * CHUNK;
                    if let raidlab_layout::Content::Data(l) = g.content_at(role, at) {
                        let (l, c) = (l as usize, CHUNK as usize);
                        assert!(
                            got[at as usize..at as usize + c] == read[l..l + c],
                            "{label}: row {row} differs from the degraded read of its data"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn a_rebuild_plan_says_what_each_row_computes() {
    let g = Geometry::new(
        Level::Raid6,
        Layout::Parity(ParityLayout::LeftSymmetric),
        CHUNK,
        5,
        MEMBER,
    )
    .unwrap();
    // Role 4 over md's first five stripes of a 5-member left-symmetric
    // RAID 6 (P, Q: roles 4, 0; 3, 4; 2, 3; 1, 2; 0, 1), role 1 lost too: its
    // P and Q rows recompute that parity after rebuilding role 1's chunk
    // from the other parity; its data rows rebuild from what is left.
    let live = [true, false, true, true, false];
    let plan = plan_rebuild(&g, &live, 4, 0, 5 * CHUNK, 4).unwrap();
    let then: Vec<String> = plan
        .explain()
        .phases
        .iter()
        .flat_map(|p| p.then.clone())
        .collect();
    assert_eq!(
        then,
        [
            "rebuild data slot [0] from Q, then P from the data",
            "rebuild data slot [1] from P, then Q from the data",
            "rebuild data slots [0, 2] from P and Q",
            "rebuild data slot [1] from Q",
            "rebuild data slot [2] from P",
        ]
    );
    // Nothing lost but role 4: its parity rows from the data alone.
    let plan = plan_rebuild(&g, &[true, true, true, true, false], 4, 0, 2 * CHUNK, 4).unwrap();
    let then: Vec<String> = plan
        .explain()
        .phases
        .iter()
        .flat_map(|p| p.then.clone())
        .collect();
    assert_eq!(then, ["P from 3 data blocks", "Q from 3 data blocks"]);
}

/// A rebuild, repair or copy step holds the stripe-lock keys its level family
/// gives for the member range it rewrites (`member_range_keys`); they must
/// exclude every write that reads or writes any byte of that range, or a
/// rebuild step and a write could interleave on the same member bytes. On
/// every level and layout (RAID 0 too), for writes at random places and
/// member ranges cut from each write's own member operations (so that they
/// overlap), the write's locks and the range's keys share a key.
#[test]
fn member_range_keys_exclude_every_write_that_touches_the_range() {
    use raidlab_raid::plan::Step;
    use raidlab_raid::planner::plan_write;
    use raidlab_raid::recovery_plan::member_range_keys;
    use rand::Rng;
    let mut rng = rand::rngs::StdRng::seed_from_u64(33);
    let mut shapes = shapes();
    shapes.push((Level::Raid0, Layout::Plain, 3));
    let mut checked = 0;
    for (level, layout, n) in shapes {
        let chunk = if level == Level::Raid1 { 0 } else { CHUNK };
        let g = Geometry::new(level, layout, chunk, n, MEMBER).unwrap();
        let all = vec![true; n];
        let size = g.array_bytes();
        for _ in 0..300 {
            let len = 512 * rng.gen_range(1..=128u64);
            let offset = 512 * rng.gen_range(0..(size - len) / 512);
            let write = plan_write(&g, &all, offset, len).unwrap();
            let ops: Vec<_> = write
                .steps
                .iter()
                .filter_map(|s| match s {
                    Step::Io(ops) => Some(ops),
                    _ => None,
                })
                .flatten()
                .collect();
            assert!(!ops.is_empty(), "{level:?} {len} at {offset} plans no I/O");
            let op = ops[rng.gen_range(0..ops.len())];
            // A member range holding one of the operation's sectors, starting
            // up to 8 KiB before it.
            let sector = op.offset + 512 * rng.gen_range(0..op.length / 512);
            let at = sector.saturating_sub(512 * rng.gen_range(0..16u64));
            let n_bytes = (sector - at + 512 * rng.gen_range(1..=32u64)).min(MEMBER - at);
            let keys = member_range_keys(&g, op.member, at, n_bytes).unwrap();
            assert!(
                write.locks.iter().any(|k| keys.contains(k)),
                "{level:?} {layout:?} x{n}: a write of {len} at {offset} touches role {} at \
                 {}+{} ({:?}), yet its locks {:?} share none of the keys {keys:?} of \
                 {at}+{n_bytes}",
                op.member,
                op.offset,
                op.length,
                op.kind,
                write.locks
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 300 * 10);
}
