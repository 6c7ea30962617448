//! The critical section of an in-place grow (a parity array gaining data
//! members without a move of the data offset: how md reshapes metadata
//! 0.90), checked three ways against what md itself accepts:
//!
//! - mdadm's test at assembly (`Grow_restart`, when no backup is found):
//!   the reshape is past its critical section once the new stripes written
//!   end below the old stripe of the same data;
//! - the kernel's test when it resumes a reshape (`raid5_run` with no
//!   offset move): the position's row in the new geometry must be below
//!   its row in the old one, or md refuses ("reshape_position too early");
//! - the placement: from the critical section on, every unit the walk
//!   writes lands below the old row a resume from the checkpoint reads.
//!
//! And mdadm's backup (the least common multiple of an old and a new
//! stripe) always covers it.

use super::*;

fn grow(level: i32, chunk_sectors: u32, new_chunk_sectors: u32, old: u32, new: u32) -> Reshape {
    Reshape::from_md(&MdReshape {
        level,
        layout: 2,
        chunk_sectors,
        raid_disks: new,
        new_level: level,
        new_layout: 2,
        new_chunk_sectors,
        delta_disks: new as i32 - old as i32,
        position_sectors: 0,
        backwards: false,
        member_sectors: 1 << 16,
    })
    .unwrap()
}

/// mdadm's critical section at assembly, in array bytes: the first count
/// of whole new stripes whose member bytes end below the old stripe (at
/// its chunk) holding the next array byte.
fn mdadm_critical(r: &Reshape) -> u64 {
    let (oc, nc) = (r.old.chunk_bytes, r.new.chunk_bytes);
    let (od, nd) = (r.old.data_disks() as u64, r.new.data_disks() as u64);
    let mut new_member = 0;
    loop {
        new_member += nc;
        let done = new_member * nd;
        let old_member = done / od / oc * oc;
        if new_member < old_member {
            return done;
        }
    }
}

/// Whether the kernel resumes a reshape stopped at `position` without a
/// backup: on a stripe of the larger chunk over the new data members, and
/// with that stripe's new row below its old row.
fn kernel_resumes(r: &Reshape, position: u64) -> bool {
    let chunk = r.old.chunk_bytes.max(r.new.chunk_bytes);
    let (od, nd) = (r.old.data_disks() as u64, r.new.data_disks() as u64);
    position % (chunk * nd) == 0 && position / (chunk * nd) < position / (chunk * od)
}

/// The member byte where the row holding array byte `at` begins.
fn row_start(g: &Geometry, at: u64) -> u64 {
    let (locs, _) = g.mirror_map(at);
    locs[0].offset / g.chunk_bytes * g.chunk_bytes
}

fn lcm_stripes(r: &Reshape) -> u64 {
    let a = r.old.chunk_bytes * r.old.data_disks() as u64;
    let b = r.new.chunk_bytes * r.new.data_disks() as u64;
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a / x * b
}

#[test]
fn the_critical_section_is_the_one_md_and_mdadm_agree_on() {
    let mut grows = 0;
    for level in [5, 6] {
        let parity = if level == 6 { 2 } else { 1 };
        for chunk in [8u32, 64, 128, 1024] {
            for old in parity + 2..=9u32 {
                for new in old + 1..=old + 3 {
                    let r = grow(level, chunk, chunk, old, new);
                    let what = format!("RAID {level} chunk {chunk}K/2, {old}->{new}");
                    let critical = r.forward_critical_section().unwrap();
                    let unit = r.forward_unit();
                    assert_eq!(critical, mdadm_critical(&r), "{what}");
                    assert!(critical > 0 && critical % unit == 0, "{what}: {critical}");
                    assert!(kernel_resumes(&r, critical), "{what}");
                    assert!(!kernel_resumes(&r, critical - unit), "{what}");
                    assert!(
                        critical <= lcm_stripes(&r),
                        "{what}: mdadm's backup is short"
                    );
                    // Just below it the walk cannot go on without a backup.
                    assert!(
                        r.forward_write_limit(0, critical - unit) < critical,
                        "{what}"
                    );
                    grows += 1;
                }
            }
        }
    }
    assert_eq!(grows, (7 + 6) * 3 * 4);
}

#[test]
fn past_the_critical_section_the_walk_in_place_is_safe_to_the_end() {
    for level in [5, 6] {
        for (chunk, new_chunk, old, new) in [
            (128, 128, 3, 4),
            (128, 128, 4, 5),
            (64, 64, 4, 7),
            (8, 8, 5, 6),
            (128, 64, 4, 5),
            (64, 128, 4, 6),
        ] {
            if level == 6 && old < 4 {
                continue;
            }
            let r = grow(level, chunk, new_chunk, old, new);
            let what = format!("RAID {level} chunk {chunk}->{new_chunk}, {old}->{new}");
            let Some(critical) = r.forward_critical_section() else {
                panic!("{what}: no critical section");
            };
            let unit = r.forward_unit();
            let (end, old_end) = (r.new.array_bytes(), r.old.array_bytes());
            let (mut at, mut checkpoints) = (critical, 0);
            while at < end {
                let next = (at + unit).min(end);
                let limit = r.forward_write_limit(0, at);
                assert!(limit >= next, "{what}: stuck at {at} (limit {limit})");
                if at < old_end {
                    let top = row_start(&r.new, next - 1) + r.new.chunk_bytes;
                    let reads_from = row_start(&r.old, at);
                    assert!(
                        top <= reads_from,
                        "{what}: unit at {at} reaches {top} over {reads_from}"
                    );
                }
                checkpoints += 1;
                at = next;
            }
            assert!(checkpoints > 100, "{what}: {checkpoints}");
        }
    }
}

#[test]
fn no_critical_section_without_more_data_members() {
    // Same members with a new chunk, and fewer members: mdadm needs a
    // backup file for the whole walk on 0.90, so there is no prefix after
    // which an in-place walk goes on alone.
    assert_eq!(grow(5, 64, 128, 4, 4).forward_critical_section(), None);
    assert_eq!(grow(5, 64, 64, 5, 4).forward_critical_section(), None);
    assert_eq!(grow(6, 64, 64, 5, 4).forward_critical_section(), None);
}
