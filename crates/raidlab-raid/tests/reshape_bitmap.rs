//! A RAID 5/6 restriped with its internal write-intent bitmap, as md
//! restripes it (issue 36): md's RAID 4/5/6 bitmap counts each member's
//! sectors from the data offset, which a restripe keeps, so md carries it
//! through unchanged but for its event count. Offline: the data exact,
//! parity clean, the bitmap's superblock on every member (the new one
//! too) as md leaves it. Served: a client's write marks its stripe's
//! member sectors in the geometry that takes it, on the members, before it
//! goes out, and the walk's own writes mark nothing, through a crash and
//! the resume. Power cuts anywhere in a grow: resumed, exact and clean,
//! the bitmap kept.

mod bitmap_grow; // the bitmapped array and the cut grow these files share
mod common;
mod md090; // the power-cut helper the reshape tests share
use bitmap_grow::{dirty, grow_cut_throughout, on_disk, raid5_member_sector};
use md090::{mem_devices, pattern, read_all, MIB};

use raidlab_core::Volume;
use raidlab_layout::Level;
use raidlab_md::bitmap::BitmapSuper;
use raidlab_raid::assemble::{Assembly, Device};
use raidlab_raid::grow::{ReshapeRequest, SizeRequest};
use raidlab_raid::recovery::RunOptions;

use bitmap_grow::CHUNK;
/// The bitmap's chunk: small, so that one write's bit says where it went.
const BITMAP_CHUNK: u32 = 256 << 10;

/// The bitmap superblock on every member is md's after a restripe: what
/// it was before (`before`) but for the event count, which is the
/// superblock's; the bitmap where it was, the data offset below it no
/// lower than its end.
fn assert_bitmap_as_mds(devs: &[Device], before: &BitmapSuper, bitmap_offset: i32) {
    for (i, (sb, bm)) in on_disk(devs).into_iter().enumerate() {
        let mut want = before.clone();
        want.events = sb.events;
        assert_eq!(bm.sb, want, "member {i}: bitmap superblock");
        assert!(!bm.is_stale(&sb), "member {i}: bitmap out of date");
        assert_eq!(sb.bitmap_offset, bitmap_offset, "member {i}");
        let end = sb.super_offset + sb.bitmap_offset as u64 + bm.sb.area_bytes() / 512;
        assert!(
            sb.data_offset >= end,
            "member {i}: data at {} over the bitmap (ends at {end})",
            sb.data_offset
        );
    }
}

/// Restripe offline (`req`, `add` new members) and check the result.
fn restripe_offline(level: Level, old: usize, add: usize, req: ReshapeRequest) {
    let devs = mem_devices(old + add, 16 * MIB);
    let data = bitmap_grow::bitmapped(level, &devs[..old], BITMAP_CHUNK);
    let mut asm = Assembly::assemble(devs[..old].to_vec()).unwrap();
    let before = asm.bitmap.as_ref().unwrap().sb.clone();
    let bitmap_offset = asm.members[0].sb.bitmap_offset;
    let offset = asm.members[0].sb.data_offset;
    let plan = asm.reshape_check(&req, add).unwrap();
    for d in &devs[old..] {
        asm.add(d.clone(), false).unwrap();
    }
    asm.reshape_start(plan).unwrap();
    let report = asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
    assert_eq!(report.new_raid_devices, old + add);
    let got = read_all(&devs);
    assert!(got[..data.len()] == data[..], "the data changed");
    assert!(got[data.len()..].iter().all(|&b| b == 0), "new space");
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    assert!(asm.reshape().is_none());
    assert!(
        asm.members[0].sb.data_offset < offset,
        "the data moved down"
    );
    let check = asm
        .scrub(false, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(check.mismatch_sectors, 0, "parity after the restripe");
    assert_bitmap_as_mds(&devs, &before, bitmap_offset);
}

#[test]
fn a_raid5_with_a_bitmap_grows_from_four_to_five_members_offline() {
    let req = ReshapeRequest {
        raid_devices: Some(5),
        ..ReshapeRequest::default()
    };
    restripe_offline(Level::Raid5, 4, 1, req);
}

#[test]
fn a_raid6_with_a_bitmap_takes_a_new_chunk_and_layout_offline() {
    let req = ReshapeRequest {
        chunk_bytes: Some(32 << 10),
        layout: Some("right-asymmetric".into()),
        ..ReshapeRequest::default()
    };
    restripe_offline(Level::Raid6, 5, 0, req);
}

/// md's backward reshape of a RAID 5 with a bitmap onto one member fewer
/// (the data offset moved up, away from the bitmap): exact, clean, the
/// bitmap md's on every member, the one that left (a spare) too.
#[test]
fn a_raid5_with_a_bitmap_shrinks_by_a_member_offline() {
    let devs = mem_devices(5, 16 * MIB);
    bitmap_grow::bitmapped(Level::Raid5, &devs, BITMAP_CHUNK);
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    // Room after every member's data for the data to move up.
    asm.grow_size(SizeRequest::Bytes(14 * MIB), true).unwrap();
    let g = asm.geometry;
    let kept = (g.data_disks() as u64 - 1) * g.member_bytes;
    let data = pattern(kept, 3);
    let array = asm.array().unwrap();
    array.write_at(&data, 0).unwrap();
    array.flush().unwrap();
    drop(array);
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    let before = asm.bitmap.as_ref().unwrap().sb.clone();
    let bitmap_offset = asm.members[0].sb.bitmap_offset;
    let req = ReshapeRequest {
        raid_devices: Some(4),
        ..ReshapeRequest::default()
    };
    let plan = asm.reshape_check_sized(&req, 0, Some(kept)).unwrap();
    asm.reshape_start(plan).unwrap();
    let report = asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
    assert!(report.backwards);
    assert_eq!(report.spares.len(), 1);
    let got = read_all(&devs);
    assert!(got[..kept as usize] == data[..], "the data changed");
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    assert_eq!(asm.geometry.raid_disks, 4);
    let check = asm
        .scrub(false, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(check.mismatch_sectors, 0);
    assert_bitmap_as_mds(&devs, &before, bitmap_offset);
}

/// A served grow stopped part-way, a client's write on either side of the
/// position, then the machine stops: the bits on the members are exactly
/// those of the two writes, each counted in the geometry that took it (the
/// walk's own writes marked nothing). Resumed offline, the grow ends with
/// the writes in place, parity clean and the bits kept.
#[test]
fn writes_during_a_served_grow_mark_their_geometrys_bits_through_a_crash() {
    let devs = mem_devices(5, 16 * MIB);
    let mut data = bitmap_grow::bitmapped(Level::Raid5, &devs[..4], BITMAP_CHUNK);
    let asm = Assembly::assemble(devs[..4].to_vec()).unwrap();
    let before = asm.bitmap.as_ref().unwrap().sb.clone();
    let bitmap_offset = asm.members[0].sb.bitmap_offset;
    // The machine stops with the two writes made.
    let (a, b) =
        bitmap_grow::served_grow_stopped_with_a_write_each_side(asm, &devs, 3, 4 * MIB, &mut data);
    let chunk_sectors = u64::from(BITMAP_CHUNK) / 512;
    let mut want = vec![
        raid5_member_sector(a, 5, CHUNK) / chunk_sectors,
        raid5_member_sector(b, 4, CHUNK) / chunk_sectors,
    ];
    want.sort_unstable();
    assert_ne!(want[0], want[1], "the two writes' bits differ");
    for (i, (_, bm)) in on_disk(&devs).iter().enumerate() {
        assert_eq!(dirty(bm), want, "member {i}: the bits on disk");
    }
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    assert_eq!(dirty(asm.bitmap.as_ref().unwrap()), want);
    asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
    let got = read_all(&devs);
    assert!(got[..data.len()] == data[..], "the data after the resume");
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    assert_eq!(dirty(asm.bitmap.as_ref().unwrap()), want, "bits kept");
    let mut md = before.clone();
    md.events = asm.members[0].sb.events;
    assert_eq!(asm.bitmap.as_ref().unwrap().sb, md);
    assert_eq!(asm.members[0].sb.bitmap_offset, bitmap_offset);
    let check = asm
        .scrub(false, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(check.mismatch_sectors, 0);
}

/// A grow of a RAID 5 with a bitmap cut by a power failure at member
/// writes through the whole run (volatile caches lost where the power
/// went), then assembled and carried on: the data exact, parity clean, the
/// bitmap's superblock md's.
#[test]
fn a_grow_with_a_bitmap_cut_anywhere_is_resumed_exact_and_clean() {
    grow_cut_throughout(
        Level::Raid5,
        BITMAP_CHUNK,
        &mut |devs, data, before, what| {
            let got = read_all(devs);
            assert!(got[..data.len()] == data[..], "{what}: the data");
            let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
            assert_eq!(asm.geometry.raid_disks, 5, "{what}");
            let check = asm
                .scrub(false, RunOptions::default(), &mut |_| {})
                .unwrap();
            assert_eq!(check.mismatch_sectors, 0, "{what}: parity");
            let bm = &asm.bitmap.as_ref().unwrap().sb;
            let mut md = before.clone();
            md.events = asm.members[0].sb.events;
            // A cut between a superblock and its bitmap leaves that copy out
            // of date, which md answers with every bit set: the bits may
            // differ, the superblock may not.
            assert_eq!(*bm, md, "{what}: bitmap superblock");
        },
    );
}
