//! The reshape arithmetic of a parity array (RAID 4/5/6) that changes its
//! member count and its chunk (or layout) in one reshape, as md does it
//! (`mdadm --grow --raid-devices N --chunk C`: the kernel's `check_reshape`
//! takes `delta_disks`, `new_chunk_sectors` and `new_layout` at once),
//! checked against the placement itself rather than against `Rows`:
//!
//! - safety: whatever `forward_write_limit` (a grow) or
//!   `backward_write_limit` (a shrink) allows to be written in the new
//!   geometry never lands on a member byte of the old geometry that a
//!   resume from the checkpoint still reads (md's rule in its reshape loop:
//!   a parity stripe's row is read whole, data and parity, on every member);
//! - liveness: with the least move (`forward_min_gap`, the larger chunk; a
//!   shrink's `backward_gap`, mdadm's least common multiple of the two
//!   stripes over the old data members), a walk in units of the larger
//!   chunk's stripes never stalls once the position is checkpointed.
//!
//! Random old/new geometries (proptest), and every small one exhaustively.

use super::*;
use proptest::prelude::*;

const SECTOR: u64 = 512;

/// The member byte (the geometry's own offsets) where the row holding
/// array byte `at` begins: a parity stripe occupies that row on every
/// member, data and parity alike.
fn row_start(g: &Geometry, at: u64) -> u64 {
    let (locs, _) = g.mirror_map(at);
    locs[0].offset / g.chunk_bytes * g.chunk_bytes
}

/// The fields of a parity reshape from `old` to `new` members, chunk
/// `oc` to `nc` sectors, layout word `ol` to `nl`, at `level`.
#[allow(clippy::too_many_arguments)]
fn fields(
    level: i32,
    ol: u32,
    nl: u32,
    oc: u32,
    nc: u32,
    old: u32,
    new: u32,
    member_sectors: u64,
) -> MdReshape {
    MdReshape {
        level,
        layout: ol,
        chunk_sectors: oc,
        raid_disks: new,
        new_level: level,
        new_layout: nl,
        new_chunk_sectors: nc,
        delta_disks: new as i32 - old as i32,
        position_sectors: 0,
        backwards: new < old,
        member_sectors,
    }
}

/// A grow walked with `gap`: at every unit boundary, checkpointed there
/// when the limit asks for it, the next unit may be written (liveness),
/// and everything the limit allows stays below the old rows a resume from
/// that checkpoint reads (safety). Returns the number of checkpoints.
fn walk_forward(r: &Reshape, gap: u64, what: &str) -> Result<u64, TestCaseError> {
    let unit = r.forward_unit();
    let end = r.new.array_bytes();
    let old_end = r.old.array_bytes();
    let (mut at, mut checkpoint, mut checkpoints) = (0, 0, 0);
    while at < end {
        let next = (at + unit).min(end);
        if r.forward_write_limit(gap, checkpoint) < next {
            checkpoint = at;
            checkpoints += 1;
        }
        let limit = r.forward_write_limit(gap, checkpoint);
        prop_assert!(limit >= next, "{}: stuck at {} (limit {})", what, at, limit);
        prop_assert_eq!(limit % unit, 0, "{}: limit off a unit boundary", what);
        // Safety: the highest new row written below the limit ends at or
        // below where the old row of the checkpoint begins, counted from
        // the new data offset (the old data starts `gap` higher).
        if checkpoint < old_end {
            let written = limit.min(end);
            let top = row_start(&r.new, written - 1) + r.new.chunk_bytes;
            let reads_from = gap + row_start(&r.old, checkpoint);
            prop_assert!(
                top <= reads_from,
                "{}: writing up to {} reaches member byte {} over old data read from {} (checkpoint {})",
                what,
                written,
                top,
                reads_from,
                checkpoint
            );
        }
        at = next;
    }
    Ok(checkpoints)
}

/// A shrink walked from the new geometry's end with `gap`: the mirror of
/// [`walk_forward`]. The old rows a resume from the checkpoint reads are
/// those up to the one holding the byte just below it; the new data starts
/// `gap` higher than the old.
fn walk_backward(r: &Reshape, gap: u64, what: &str) -> Result<u64, TestCaseError> {
    let unit = r.forward_unit();
    let end = r.new.array_bytes();
    prop_assert_eq!(end % unit, 0, "{}: the new end is off a unit", what);
    let (mut at, mut checkpoint, mut checkpoints) = (end, end, 0);
    while at > 0 {
        let next = at - unit;
        if r.backward_write_limit(gap, checkpoint) > next {
            checkpoint = at;
            checkpoints += 1;
        }
        let limit = r.backward_write_limit(gap, checkpoint);
        prop_assert!(limit <= next, "{}: stuck at {} (limit {})", what, at, limit);
        prop_assert_eq!(limit % unit, 0, "{}: limit off a unit boundary", what);
        if checkpoint > 0 && limit < end {
            // The lowest new row written from the limit on, in the old
            // offsets, starts at or above the top of the old rows read.
            let bottom = gap + row_start(&r.new, limit);
            let reads_to = row_start(&r.old, checkpoint - 1) + r.old.chunk_bytes;
            prop_assert!(
                bottom >= reads_to,
                "{}: writing down to {} reaches member byte {} under old data read up to {} (checkpoint {})",
                what,
                limit,
                bottom,
                reads_to,
                checkpoint
            );
        }
        at = next;
    }
    Ok(checkpoints)
}

/// The least move of a reshape from `f`, in bytes, as raidlab starts it.
fn least_gap(r: &Reshape) -> u64 {
    if r.new.raid_disks < r.old.raid_disks {
        r.backward_gap()
    } else {
        r.forward_min_gap()
    }
}

fn walk(f: &MdReshape, what: &str) -> Result<u64, TestCaseError> {
    let r = Reshape::from_md(f).map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
    let gap = least_gap(&r);
    if r.new.raid_disks < r.old.raid_disks {
        walk_backward(&r, gap, what)
    } else {
        walk_forward(&r, gap, what)
    }
}

fn least(level: i32) -> u32 {
    if level == 6 {
        4
    } else {
        2
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Any member count with any chunk and layout, grown or shrunk at
    /// once: safe and never stalled with the least move.
    #[test]
    fn a_combined_reshape_is_safe_and_never_stalls(
        level in prop::sample::select(vec![4i32, 5, 6]),
        ol in 0u32..4,
        nl in 0u32..4,
        oc_shift in 3u32..=11,
        nc_shift in 3u32..=11,
        old in 2u32..=10,
        new in 2u32..=12,
        rows in 1u64..=24,
    ) {
        let (old, new) = (old.max(least(level)), new.max(least(level)));
        prop_assume!(old != new);
        let (ol, nl) = if level == 4 { (0, 0) } else { (ol, nl) };
        let (oc, nc) = (1u32 << oc_shift, 1u32 << nc_shift);
        let member_sectors = u64::from(oc.max(nc)) * rows;
        let f = fields(level, ol, nl, oc, nc, old, new, member_sectors);
        let what = format!("RAID {level} {old}->{new} members, chunk {oc}->{nc} sectors, layout {ol}->{nl}, {rows} rows");
        walk(&f, &what)?;
    }
}

/// Every small combined change of a RAID 5 and 6, exhaustively: both
/// directions, a chunk going up and down, a layout changing with it.
#[test]
fn every_small_combined_reshape_is_safe_and_never_stalls() {
    let chunks = [8u32, 16, 128, 1024];
    let mut walks = 0;
    let mut checkpoints = 0;
    for level in [5, 6] {
        for &oc in &chunks {
            for &nc in &chunks {
                for old in least(level)..=7 {
                    for new in least(level)..=8 {
                        for (ol, nl) in [(2, 2), (2, 0), (1, 3)] {
                            if old == new || (oc == nc && ol == nl) {
                                continue;
                            }
                            let f = fields(level, ol, nl, oc, nc, old, new, 2048 * 4);
                            let what = format!(
                                "RAID {level} {old}->{new}, chunk {oc}->{nc}, layout {ol}->{nl}"
                            );
                            checkpoints += walk(&f, &what).unwrap_or_else(|e| panic!("{e}"));
                            walks += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(walks > 1000, "{walks}");
    // The limit is what makes a walk checkpoint: one that never did would
    // not be testing it.
    assert!(
        checkpoints > walks,
        "{checkpoints} checkpoints in {walks} walks"
    );
}

/// Whether a walk of `r` with `gap` ever stalls (the limit, with the
/// position checkpointed at the unit's edge, still forbids the next unit).
fn stalls(r: &Reshape, gap: u64) -> bool {
    let unit = r.forward_unit();
    let end = r.new.array_bytes();
    let units = end / unit;
    if r.new.raid_disks < r.old.raid_disks {
        (1..=units).any(|k| r.backward_write_limit(gap, k * unit) > (k - 1) * unit)
    } else {
        (0..units).any(|k| r.forward_write_limit(gap, k * unit) < (k + 1) * unit)
    }
}

/// The least move, in 4 KiB steps, with which a walk of `r` never stalls.
fn least_live_gap(r: &Reshape) -> u64 {
    (1..).map(|k| k * 4096).find(|&g| !stalls(r, g)).unwrap()
}

/// The least moves are what the walk needs, no less: a grow to a larger
/// chunk cannot move by the old chunk only, and a shrink's mdadm move is at
/// least what its walk needs (and a move of nothing stalls it).
#[test]
fn less_than_the_least_move_stalls() {
    // RAID 5, 4 -> 5 members, 64 KiB -> 512 KiB.
    let f = fields(5, 2, 2, 128, 1024, 4, 5, 1024 * 8);
    let r = Reshape::from_md(&f).unwrap();
    assert_eq!(r.forward_min_gap(), 1024 * SECTOR);
    assert!(stalls(&r, 128 * SECTOR));
    assert_eq!(least_live_gap(&r), r.forward_min_gap());
    // RAID 6, 6 -> 5 members, 512 KiB -> 64 KiB: mdadm's move is the
    // least common multiple of the stripes (4 x 512 and 3 x 64 KiB) over
    // the 4 old data members: lcm(4 x 1024, 3 x 128) / 4 = 3072 sectors.
    let f = fields(6, 2, 2, 1024, 128, 6, 5, 1024 * 8);
    let r = Reshape::from_md(&f).unwrap();
    assert_eq!(r.backward_gap(), 3072 * SECTOR);
    assert!(stalls(&r, 0));
    assert!(r.backward_gap() >= least_live_gap(&r));
    // Every small combined shrink: mdadm's move is enough for the walk.
    for (oc, nc) in [(8u32, 128u32), (128, 8), (64, 1024), (1024, 64)] {
        for old in 3..=7u32 {
            for new in 2..old {
                let f = fields(5, 2, 0, oc, nc, old, new, 1024 * 4);
                let r = Reshape::from_md(&f).unwrap();
                let least = least_live_gap(&r);
                assert!(
                    r.backward_gap() >= least && least > 0,
                    "{old}->{new}, chunk {oc}->{nc}: mdadm moves {}, the walk needs {least}",
                    r.backward_gap()
                );
            }
        }
    }
}
