//! The reshape arithmetic of a RAID 10 growing onto more members and
//! shrinking onto fewer (near and offset layouts, as md reshapes them),
//! checked against the placement itself: whatever `forward_write_limit`
//! and `backward_write_limit` allow must never land on an old-geometry
//! copy of a chunk a resume would still read, and with `forward_min_gap`
//! and `backward_min_gap` the walk never stalls.

use super::*;
use crate::Raid10Layout;

const CHUNK: u64 = 4096;

/// A RAID 10 reshape from `old` to `new` members in `layout`, stopped at 0,
/// over members of `member_chunks` chunks.
fn grow(layout: Raid10Layout, old: u32, new: u32, member_chunks: u64) -> Reshape {
    Reshape::from_md(&MdReshape {
        level: 10,
        layout: layout.md_layout(),
        chunk_sectors: (CHUNK / SECTOR) as u32,
        raid_disks: new,
        new_level: 10,
        new_layout: layout.md_layout(),
        new_chunk_sectors: (CHUNK / SECTOR) as u32,
        delta_disks: (new - old) as i32,
        position_sectors: 0,
        backwards: false,
        member_sectors: member_chunks * CHUNK / SECTOR,
    })
    .unwrap()
}

/// The layouts md reshapes (never far), with the member counts they allow.
fn cases() -> Vec<(Raid10Layout, u32, u32)> {
    let near = |n| Raid10Layout {
        near: n,
        far: 1,
        offset: false,
    };
    let offset = |n, f| Raid10Layout {
        near: n,
        far: f,
        offset: true,
    };
    let mut out = Vec::new();
    for layout in [near(2), near(3), offset(1, 2), offset(1, 3), offset(2, 2)] {
        let copies = layout.copies() as u32;
        for old in copies..=7 {
            for new in old + 1..=old + 3 {
                // md (and the layout crate) refuse near and offset copies
                // together over a member count the near copies do not divide.
                let wraps = |n: u32| layout.offset && layout.near > 1 && n % layout.near != 0;
                if !wraps(old) && !wraps(new) {
                    out.push((layout, old, new));
                }
            }
        }
    }
    out
}

/// Every (member, chunk row) of the old geometry holding a copy of a chunk
/// from `from_chunk` on.
fn old_copies_from(r: &Reshape, from_chunk: u64) -> std::collections::HashSet<(usize, u64)> {
    let chunks = r.old.array_bytes() / CHUNK;
    (from_chunk..chunks)
        .flat_map(|c| r.old.mirror_map(c * CHUNK).0)
        .map(|l| (l.member, l.offset / CHUNK))
        .collect()
}

#[test]
fn writes_below_the_limit_never_touch_what_a_resume_reads() {
    let mut checked = 0;
    for (layout, old, new) in cases() {
        let r = grow(layout, old, new, 48);
        let unit = r.forward_unit();
        assert_eq!(unit, CHUNK, "a RAID 10 walks in chunks");
        let gap_chunks = r.forward_min_gap() / CHUNK;
        for checkpoint_chunk in 0..r.old.array_bytes() / CHUNK {
            let limit = r.forward_write_limit(gap_chunks * CHUNK, checkpoint_chunk * CHUNK);
            let live = old_copies_from(&r, checkpoint_chunk);
            for c in 0..(limit / CHUNK).min(r.new.array_bytes() / CHUNK) {
                for l in r.new.mirror_map(c * CHUNK).0 {
                    // The new data area starts `gap` lower on every member.
                    let row = l.offset / CHUNK;
                    if row < gap_chunks {
                        continue;
                    }
                    assert!(
                        !live.contains(&(l.member, row - gap_chunks)),
                        "{} {old}->{new}: chunk {c} written at member {} row {row} (new) \
                         lands on an old copy a resume from chunk {checkpoint_chunk} reads",
                        layout.name(),
                        l.member
                    );
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 1000, "{checked}");
}

#[test]
fn with_the_least_gap_the_walk_never_stalls() {
    for (layout, old, new) in cases() {
        let r = grow(layout, old, new, 64);
        let gap = r.forward_min_gap();
        let row = CHUNK * u64::from(if layout.offset { layout.far } else { 1 });
        assert!(gap == row || gap == 2 * row, "{}: {gap}", layout.name());
        let unit = r.forward_unit();
        let (mut at, mut checkpoint) = (0, 0);
        while at < r.new.array_bytes() {
            if r.forward_write_limit(gap, checkpoint) < at + unit {
                checkpoint = at;
            }
            assert!(
                r.forward_write_limit(gap, checkpoint) >= at + unit,
                "{} {old}->{new} with gap {gap}: stuck at {at}",
                layout.name()
            );
            at += unit;
        }
        // md records positions inside a chunk too: resumed from one, the
        // rest of that chunk can be written at once.
        for c in 0..r.old.array_bytes() / CHUNK {
            let at = c * CHUNK + CHUNK / 2;
            assert!(
                r.forward_write_limit(gap, at) >= (c + 1) * CHUNK,
                "{} {old}->{new}: stuck resuming at {at}",
                layout.name()
            );
        }
    }
}

#[test]
fn md_s_least_move_is_one_row_when_the_copies_fit_and_two_otherwise() {
    let n2 = Raid10Layout {
        near: 2,
        far: 1,
        offset: false,
    };
    let n3 = Raid10Layout { near: 3, ..n2 };
    let o2 = Raid10Layout {
        near: 1,
        far: 2,
        offset: true,
    };
    assert_eq!(grow(n2, 4, 5, 64).forward_min_gap(), CHUNK);
    assert_eq!(grow(o2, 4, 6, 64).forward_min_gap(), 2 * CHUNK);
    assert_eq!(grow(n3, 4, 6, 64).forward_min_gap(), CHUNK);
    // near=3 onto one member more: one row is not enough for the rule, as
    // the walk shows (it stalls at the chunk after the first).
    let r = grow(n3, 4, 5, 64);
    assert_eq!(r.forward_min_gap(), 2 * CHUNK);
    assert!(r.forward_write_limit(CHUNK, CHUNK) < 2 * CHUNK);
}

#[test]
fn the_array_grows_as_md_sizes_it() {
    // md's raid10_size: chunks per member / far copies * members / near.
    let n2 = Raid10Layout {
        near: 2,
        far: 1,
        offset: false,
    };
    let r = grow(n2, 4, 6, 100);
    assert_eq!(r.old.array_bytes(), 200 * CHUNK);
    assert_eq!(r.new.array_bytes(), 300 * CHUNK);
    assert_eq!(r.array_bytes(), 200 * CHUNK, "the old size until done");
    let r = grow(n2, 4, 5, 101);
    assert_eq!(r.new.array_bytes(), 101 * 5 / 2 * CHUNK);
    let o2 = Raid10Layout {
        near: 1,
        far: 2,
        offset: true,
    };
    let r = grow(o2, 3, 4, 101);
    assert_eq!(r.new.array_bytes(), 101 / 2 * 4 * CHUNK);
}

/// A RAID 10 reshape from `old` to fewer `new` members in `layout` (md's
/// backward walk), stopped at the new geometry's end.
fn shrink(layout: Raid10Layout, old: u32, new: u32, member_chunks: u64) -> Reshape {
    let mut r = Reshape::from_md(&MdReshape {
        level: 10,
        layout: layout.md_layout(),
        chunk_sectors: (CHUNK / SECTOR) as u32,
        raid_disks: new,
        new_level: 10,
        new_layout: layout.md_layout(),
        new_chunk_sectors: (CHUNK / SECTOR) as u32,
        delta_disks: new as i32 - old as i32,
        position_sectors: 0,
        backwards: true,
        member_sectors: member_chunks * CHUNK / SECTOR,
    })
    .unwrap();
    r.position = r.new.array_bytes();
    r
}

/// The shrinks md makes: the grows of [`cases`] the other way round.
fn shrink_cases() -> Vec<(Raid10Layout, u32, u32)> {
    cases()
        .into_iter()
        .map(|(layout, old, new)| (layout, new, old))
        .collect()
}

/// Every (member, chunk row) of the old geometry holding a copy of a chunk
/// below `upto_chunk`.
fn old_copies_below(r: &Reshape, upto_chunk: u64) -> std::collections::HashSet<(usize, u64)> {
    (0..upto_chunk)
        .flat_map(|c| r.old.mirror_map(c * CHUNK).0)
        .map(|l| (l.member, l.offset / CHUNK))
        .collect()
}

#[test]
fn backward_writes_above_the_limit_never_touch_what_a_resume_reads() {
    let mut checked = 0;
    for (layout, old, new) in shrink_cases() {
        let r = shrink(layout, old, new, 48);
        let gap_chunks = r.backward_min_gap() / CHUNK;
        let end = r.new.array_bytes() / CHUNK;
        for checkpoint_chunk in 0..=end {
            let limit = r.backward_write_limit(gap_chunks * CHUNK, checkpoint_chunk * CHUNK);
            assert_eq!(limit % CHUNK, 0);
            let live = old_copies_below(&r, checkpoint_chunk);
            for c in limit / CHUNK..end {
                for l in r.new.mirror_map(c * CHUNK).0 {
                    // The new data area starts `gap` higher on every member.
                    let row = l.offset / CHUNK + gap_chunks;
                    assert!(
                        !live.contains(&(l.member, row)),
                        "{} {old}->{new}: chunk {c} written at member {} old row {row} \
                         lands on an old copy a resume from chunk {checkpoint_chunk} reads",
                        layout.name(),
                        l.member
                    );
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 1000, "{checked}");
}

#[test]
fn backward_with_the_least_gap_the_walk_never_stalls() {
    let mut two_rows = 0;
    for (layout, old, new) in shrink_cases() {
        let r = shrink(layout, old, new, 64);
        let gap = r.backward_min_gap();
        let row = CHUNK * u64::from(if layout.offset { layout.far } else { 1 });
        assert!(gap == row || gap == 2 * row, "{}: {gap}", layout.name());
        two_rows += usize::from(gap == 2 * row);
        let unit = r.forward_unit();
        let end = r.new.array_bytes();
        let (mut at, mut checkpoint) = (end, end);
        while at > 0 {
            if r.backward_write_limit(gap, checkpoint) > at - unit {
                checkpoint = at;
            }
            assert!(
                r.backward_write_limit(gap, checkpoint) <= at - unit,
                "{} {old}->{new} with gap {gap}: stuck at {at}",
                layout.name()
            );
            at -= unit;
        }
        // md records positions inside a chunk too: resumed from one, the
        // rest of that chunk down can be written at once.
        for c in 0..end / CHUNK {
            let at = c * CHUNK + CHUNK / 2;
            assert!(
                r.backward_write_limit(gap, at) <= c * CHUNK,
                "{} {old}->{new}: stuck resuming at {at}",
                layout.name()
            );
        }
    }
    assert!(two_rows > 0, "no case needs two rows");
}

#[test]
fn md_s_least_move_up_is_one_row_for_near_2_and_offset() {
    let n2 = Raid10Layout {
        near: 2,
        far: 1,
        offset: false,
    };
    let n3 = Raid10Layout { near: 3, ..n2 };
    let o2 = Raid10Layout {
        near: 1,
        far: 2,
        offset: true,
    };
    assert_eq!(shrink(n2, 5, 4, 64).backward_min_gap(), CHUNK);
    assert_eq!(shrink(n2, 4, 3, 64).backward_min_gap(), CHUNK);
    assert_eq!(shrink(o2, 4, 3, 64).backward_min_gap(), 2 * CHUNK);
    // near=3 from five members to four: chunk 1's last old copy is in row
    // 1 while its first new copy is in row 0.
    let r = shrink(n3, 5, 4, 64);
    assert_eq!(r.backward_min_gap(), 2 * CHUNK);
    assert!(r.backward_write_limit(CHUNK, 2 * CHUNK) > CHUNK);
    // The array shrinks to what md's raid10_size gives the new members.
    assert_eq!(shrink(n2, 5, 4, 100).new.array_bytes(), 200 * CHUNK);
    assert_eq!(shrink(o2, 4, 3, 101).new.array_bytes(), 50 * 3 * CHUNK);
}
