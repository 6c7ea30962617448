//! The reshape arithmetic of a RAID 10 restriped over the same members to a
//! new chunk or between the near and offset layouts (the same number of
//! copies, as md's `raid10_check_reshape` allows), checked against the
//! placement itself: whatever `forward_write_limit` allows must never land
//! on an old-geometry copy a resume would still read, and with
//! `forward_min_gap` the walk never stalls, also when resumed from a
//! position inside a chunk (md records those).
//!
//! The chunks of the two geometries differ, so every copy is followed in
//! blocks of the smaller chunk: each such block lies inside one chunk of
//! either geometry, so its copies are whole blocks too.

use super::*;
use crate::Raid10Layout;
use std::collections::HashSet;

const KIB: u32 = 2; // sectors

fn near(n: u32) -> Raid10Layout {
    Raid10Layout {
        near: n,
        far: 1,
        offset: false,
    }
}

fn offset(n: u32, f: u32) -> Raid10Layout {
    Raid10Layout {
        near: n,
        far: f,
        offset: true,
    }
}

/// A same-members RAID 10 restripe, stopped at 0, over members of
/// `member_kib` KiB.
fn restripe(
    (from, from_chunk): (Raid10Layout, u32),
    (to, to_chunk): (Raid10Layout, u32),
    disks: u32,
    member_kib: u64,
) -> Reshape {
    Reshape::from_md(&MdReshape {
        level: 10,
        layout: from.md_layout(),
        chunk_sectors: from_chunk * KIB,
        raid_disks: disks,
        new_level: 10,
        new_layout: to.md_layout(),
        new_chunk_sectors: to_chunk * KIB,
        delta_disks: 0,
        position_sectors: 0,
        backwards: false,
        member_sectors: member_kib * u64::from(KIB),
    })
    .unwrap()
}

/// Every same-members change md makes: within each number of copies, every
/// pair of near and offset layouts (the same one too) and chunks of 4 to
/// 32 KiB (a change of the chunk, of the layout, or both), over the member
/// counts each allows.
fn cases() -> Vec<(Reshape, String)> {
    let families = [
        vec![near(2), offset(1, 2)],
        vec![near(3), offset(1, 3)],
        vec![near(4), offset(1, 4), offset(2, 2)],
    ];
    let chunks = [4u32, 8, 16, 32];
    let mut out = Vec::new();
    for family in families {
        for &from in &family {
            for &to in &family {
                for &fc in &chunks {
                    for &tc in &chunks {
                        if from == to && fc == tc {
                            continue;
                        }
                        for disks in from.copies() as u32..=7 {
                            // The near and offset copies together need a
                            // member count the near copies divide.
                            let wraps =
                                |l: Raid10Layout| l.offset && l.near > 1 && disks % l.near != 0;
                            if wraps(from) || wraps(to) {
                                continue;
                            }
                            // 48 of the larger chunk and a little more.
                            let member = 48 * u64::from(fc.max(tc)) + 12;
                            let r = restripe((from, fc), (to, tc), disks, member);
                            let what =
                                format!("{} {fc}K -> {} {tc}K on {disks}", from.name(), to.name());
                            out.push((r, what));
                        }
                    }
                }
            }
        }
    }
    out
}

/// Every (member, block) of `g` holding a copy of a block in `blocks`,
/// blocks being `block` bytes.
fn copies_of(g: &Geometry, blocks: std::ops::Range<u64>, block: u64) -> HashSet<(usize, u64)> {
    blocks
        .flat_map(|b| g.mirror_map(b * block).0)
        .map(|l| (l.member, l.offset / block))
        .collect()
}

#[test]
fn writes_below_the_limit_never_touch_what_a_resume_reads() {
    let mut checked = 0;
    for (r, what) in cases() {
        let block = r.old.chunk_bytes.min(r.new.chunk_bytes);
        let gap = r.forward_min_gap();
        assert_eq!(gap % block, 0, "{what}");
        let gap_blocks = gap / block;
        let old_blocks = r.old.array_bytes() / block;
        let new_blocks = r.new.array_bytes() / block;
        // Checkpoints anywhere md may record one (every block).
        for checkpoint in 0..old_blocks {
            let limit = r.forward_write_limit(gap, checkpoint * block);
            let live = copies_of(&r.old, checkpoint..old_blocks, block);
            for b in 0..(limit / block).min(new_blocks) {
                for l in r.new.mirror_map(b * block).0 {
                    // The new data area starts `gap` lower on every member.
                    let at = l.offset / block;
                    if at < gap_blocks {
                        continue;
                    }
                    assert!(
                        !live.contains(&(l.member, at - gap_blocks)),
                        "{what}: block {b} written at member {} block {at} (new) lands \
                         on an old copy a resume from block {checkpoint} reads",
                        l.member
                    );
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 10_000, "{checked}");
}

#[test]
fn with_the_least_gap_the_walk_never_stalls() {
    let (mut walks, mut one_row) = (0, 0);
    for (r, what) in cases() {
        let gap = r.forward_min_gap();
        let row = |g: &Geometry| match g.layout {
            Layout::Raid10(l) => g.chunk_bytes * u64::from(if l.offset { l.far } else { 1 }),
            _ => unreachable!(),
        };
        // md's least move, the taller row of the two, or two of them.
        let taller = row(&r.old).max(row(&r.new));
        assert!(gap == taller || gap == 2 * taller, "{what}: {gap}");
        one_row += usize::from(gap == taller);
        let unit = r.forward_unit();
        assert_eq!(unit, r.old.chunk_bytes.max(r.new.chunk_bytes), "{what}");
        let (mut at, mut checkpoint) = (0, 0);
        while at < r.new.array_bytes() {
            if r.forward_write_limit(gap, checkpoint) < at + unit {
                checkpoint = at;
            }
            assert!(
                r.forward_write_limit(gap, checkpoint) >= at + unit,
                "{what} with gap {gap}: stuck at {at}"
            );
            at += unit;
        }
        // Resumed from a position md recorded inside a unit, the rest of
        // that unit can be written at once.
        let block = r.old.chunk_bytes.min(r.new.chunk_bytes);
        for at in (0..r.old.array_bytes()).step_by(block as usize) {
            let end = (at / unit + 1) * unit;
            assert!(
                r.forward_write_limit(gap, at) >= end.min(r.new.array_bytes()),
                "{what}: stuck resuming at {at}"
            );
        }
        walks += 1;
    }
    assert!(walks > 500, "{walks}");
    // md's least move is enough for most; the others take two rows.
    assert!(
        one_row > 0 && one_row < walks,
        "{one_row} of {walks} with one row"
    );
    eprintln!("{one_row} of {walks} restripes walk with md's least move");
}

#[test]
fn the_array_keeps_md_s_size_when_the_members_hold_whole_rows_of_both() {
    // 1 MiB members, 4 of them, near=2 64K to offset=2 256K: md's
    // raid10_size is the same on both sides (2 MiB).
    let r = restripe((near(2), 64), (offset(1, 2), 256), 4, 1024);
    assert_eq!(r.old.array_bytes(), 2 << 20);
    assert_eq!(r.new.array_bytes(), 2 << 20);
    // md's least move is the taller row, 512 KiB, which the walk takes.
    assert_eq!(r.forward_min_gap(), 512 * 1024);
}

/// A RAID 10 reshape from `from_disks` to `to_disks` members with a new
/// chunk or layout at once (md's `raid10_check_reshape` takes
/// `delta_disks` with the new geometry), stopped at its start.
fn combined(
    (from, from_chunk): (Raid10Layout, u32),
    (to, to_chunk): (Raid10Layout, u32),
    from_disks: u32,
    to_disks: u32,
    member_kib: u64,
) -> Reshape {
    Reshape::from_md(&MdReshape {
        level: 10,
        layout: from.md_layout(),
        chunk_sectors: from_chunk * KIB,
        raid_disks: to_disks,
        new_level: 10,
        new_layout: to.md_layout(),
        new_chunk_sectors: to_chunk * KIB,
        delta_disks: to_disks as i32 - from_disks as i32,
        position_sectors: 0,
        backwards: to_disks < from_disks,
        member_sectors: member_kib * u64::from(KIB),
    })
    .unwrap()
}

/// Other members with a new chunk or layout at once, in either direction:
/// every write the limit lets through misses every old copy a resume from
/// any block still reads, and the least move (`forward_min_gap`,
/// `backward_min_gap`) never stalls the walk.
#[test]
fn other_members_with_a_new_chunk_or_layout_at_once_are_safe_and_never_stall() {
    let families = [vec![near(2), offset(1, 2)], vec![near(3), offset(1, 3)]];
    let chunks = [4u32, 16, 32];
    let mut checked = 0;
    for family in families {
        for &from in &family {
            for &to in &family {
                for &fc in &chunks {
                    for &tc in &chunks {
                        if from == to && fc == tc {
                            continue;
                        }
                        for fd in from.copies() as u32..=5 {
                            for td in to.copies() as u32..=5 {
                                let wraps = |l: Raid10Layout, d: u32| {
                                    l.offset && l.near > 1 && d % l.near != 0
                                };
                                if fd == td || wraps(from, fd) || wraps(to, td) {
                                    continue;
                                }
                                // 24 of the larger chunk: rows enough for
                                // the walk's period, few enough to check
                                // every block's copies.
                                let member = 24 * u64::from(fc.max(tc));
                                let r = combined((from, fc), (to, tc), fd, td, member);
                                let what = format!(
                                    "{} {fc}K on {fd} -> {} {tc}K on {td}",
                                    from.name(),
                                    to.name()
                                );
                                if td > fd {
                                    check_forward(&r, &what);
                                } else {
                                    check_backward(&r, &what);
                                }
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 150, "{checked}");
}

fn check_forward(r: &Reshape, what: &str) {
    let block = r.old.chunk_bytes.min(r.new.chunk_bytes);
    let gap = r.forward_min_gap();
    let gap_blocks = gap / block;
    let old_blocks = r.old.array_bytes() / block;
    let new_blocks = r.new.array_bytes() / block;
    let unit = r.forward_unit();
    for checkpoint in 0..old_blocks.min(new_blocks) {
        let limit = r.forward_write_limit(gap, checkpoint * block);
        // Liveness: the unit holding the checkpoint can be finished.
        let end = ((checkpoint * block / unit + 1) * unit).min(r.new.array_bytes());
        assert!(
            limit >= end,
            "{what}: stuck at block {checkpoint} (gap {gap})"
        );
        let live = copies_of(&r.old, checkpoint..old_blocks, block);
        for b in 0..(limit / block).min(new_blocks) {
            for l in r.new.mirror_map(b * block).0 {
                let at = l.offset / block;
                if at < gap_blocks {
                    continue;
                }
                assert!(
                    !live.contains(&(l.member, at - gap_blocks)),
                    "{what}: block {b} lands on an old copy a resume from block {checkpoint} reads"
                );
            }
        }
    }
}

fn check_backward(r: &Reshape, what: &str) {
    let block = r.old.chunk_bytes.min(r.new.chunk_bytes);
    let gap = r.backward_min_gap();
    let gap_blocks = gap / block;
    let new_blocks = r.new.array_bytes() / block;
    let unit = r.forward_unit();
    for checkpoint in (1..=new_blocks).rev() {
        let limit = r.backward_write_limit(gap, checkpoint * block);
        // Liveness: the unit just below the checkpoint can be written.
        let below = (checkpoint * block - 1) / unit * unit;
        assert!(
            limit <= below,
            "{what}: stuck at block {checkpoint} (gap {gap})"
        );
        let live = copies_of(&r.old, 0..checkpoint, block);
        for b in (limit / block)..new_blocks {
            for l in r.new.mirror_map(b * block).0 {
                // The new data area starts `gap` higher on every member.
                let at = l.offset / block + gap_blocks;
                assert!(
                    !live.contains(&(l.member, at)),
                    "{what}: block {b} lands on an old copy a resume from block {checkpoint} reads"
                );
            }
        }
    }
}
