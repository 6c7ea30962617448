//! Restripes with an internal bitmap where md runs them with one (issue
//! 36), beyond RAID 4/5/6 (`reshape_bitmap.rs`): a RAID 10 near=2 onto
//! more members, whose bitmap counts array sectors and which md resizes to
//! the new array at the reshape's start (`raid10_start_reshape`: seen in
//! the VM, 4 to 5 members of 6 MiB: `sync_size` 12 MiB to 15 MiB, the
//! 64 KiB chunk kept); a RAID 10 over the same members to a new chunk (the
//! bitmap kept as it was); a RAID 1 of two taken over as a RAID 5 and
//! restriped onto three (md keeps its member-sector bitmap throughout). A
//! power cut anywhere in the RAID 10 grow: resumed, exact, the mirrors
//! agreeing and the bitmap md's. A RAID 10 near=2 onto fewer members
//! (md resizes its bitmap down to the new array; raidlab keeps it at its
//! size through the walk and resizes it in the end's commit), offline and
//! cut by a power failure anywhere; served, `reshape_served.rs`.

mod bitmap_grow; // the bitmapped array and the cut grow these files share
mod common;
mod md090; // the power-cut helper the reshape tests share
use bitmap_grow::{dirty, grow_cut_throughout, on_disk};
use md090::{cut_at, fault_devices, mem_devices, read_all, MIB};

use raidlab_core::Volume;
use raidlab_layout::Level;
use raidlab_md::bitmap::{Bitmap, BitmapSuper};
use raidlab_raid::assemble::{Assembly, Device, MemberState};
use raidlab_raid::grow::ReshapeRequest;
use raidlab_raid::recovery::RunOptions;

const BITMAP_CHUNK: u32 = 64 << 10;

/// The bitmap on every member is `want` but for the event count (the
/// superblock's), current, below the data.
fn assert_bitmap(devs: &[Device], want: &BitmapSuper) {
    for (i, (sb, bm)) in on_disk(devs).into_iter().enumerate() {
        let mut want = want.clone();
        want.events = sb.events;
        assert_eq!(bm.sb, want, "member {i}: bitmap superblock");
        assert!(!bm.is_stale(&sb), "member {i}: bitmap out of date");
        let end = sb.super_offset + sb.bitmap_offset as u64 + bm.sb.area_bytes() / 512;
        assert!(sb.data_offset >= end, "member {i}: data over the bitmap");
    }
}

/// What md's bitmap of a RAID 10 grown from `before` to `array_bytes` is:
/// `sync_size` the new array's sectors, the chunk kept.
fn grown(before: &BitmapSuper, array_bytes: u64) -> BitmapSuper {
    let mut want = before.clone();
    want.sync_size = array_bytes / 512;
    want
}

/// The array readable, exact, its copies agreeing.
fn assert_exact_and_clean(devs: &[Device], data: &[u8], what: &str) {
    let got = read_all(devs);
    assert!(got[..data.len()] == data[..], "{what}: the data changed");
    assert!(
        got[data.len()..].iter().all(|&b| b == 0),
        "{what}: new space"
    );
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    assert!(asm.reshape().is_none(), "{what}: reshape left recorded");
    let check = asm
        .scrub(false, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(check.mismatch_sectors, 0, "{what}: the copies differ");
}

fn raid10_grow(to: usize) {
    let devs = mem_devices(to, 16 * MIB);
    let data = bitmap_grow::bitmapped(Level::Raid10, &devs[..4], BITMAP_CHUNK);
    let mut asm = Assembly::assemble(devs[..4].to_vec()).unwrap();
    let before = asm.bitmap.as_ref().unwrap().sb.clone();
    let old_sync = before.sync_size;
    assert_eq!(old_sync * 512, data.len() as u64, "counts array sectors");
    let req = ReshapeRequest {
        raid_devices: Some(to),
        ..ReshapeRequest::default()
    };
    let plan = asm.reshape_check(&req, to - 4).unwrap();
    for d in &devs[4..] {
        asm.add(d.clone(), false).unwrap();
    }
    asm.reshape_start(plan).unwrap();
    // Resized at the start, on every member (the new ones too).
    let new_bytes = asm.reshape().unwrap().unwrap().new.array_bytes();
    assert_eq!(new_bytes, data.len() as u64 * to as u64 / 4);
    let want = grown(&before, new_bytes);
    assert_bitmap(&devs, &want);
    let report = asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
    assert_eq!(report.new_raid_devices, to);
    assert_exact_and_clean(&devs, &data, "grown");
    assert_bitmap(&devs, &want);
    // The old array's bits stay clear; the new space's are marked, as md
    // marks them for its resync after the reshape.
    let asm = Assembly::assemble(devs.to_vec()).unwrap();
    let bm = asm.bitmap.as_ref().unwrap();
    let first = old_sync / (u64::from(BITMAP_CHUNK) / 512);
    assert_eq!(dirty(bm), (first..bm.chunks()).collect::<Vec<_>>());
    assert_eq!(bm.chunks(), new_bytes / u64::from(BITMAP_CHUNK));
}

#[test]
fn a_raid10_with_a_bitmap_grows_from_four_to_five_members_offline() {
    raid10_grow(5);
}

#[test]
fn a_raid10_with_a_bitmap_grows_from_four_to_six_members_offline() {
    raid10_grow(6);
}

/// md keeps a RAID 10's bitmap over a new chunk on the same members (the
/// array keeps its size; in the VM: 192 bits of 64 KiB, sync size 12 MiB,
/// before and after `--chunk=128`).
#[test]
fn a_raid10_with_a_bitmap_takes_a_new_chunk_offline() {
    let devs = mem_devices(4, 16 * MIB);
    let data = bitmap_grow::bitmapped(Level::Raid10, &devs, BITMAP_CHUNK);
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    let before = asm.bitmap.as_ref().unwrap().sb.clone();
    let req = ReshapeRequest {
        chunk_bytes: Some(128 << 10),
        ..ReshapeRequest::default()
    };
    let plan = asm.reshape_check(&req, 0).unwrap();
    asm.reshape_start(plan).unwrap();
    asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
    assert_exact_and_clean(&devs, &data, "new chunk");
    assert_eq!(
        Assembly::assemble(devs.to_vec()).unwrap().members[0]
            .sb
            .chunksize,
        256
    );
    assert_bitmap(&devs, &before);
}

/// md's `--level=5 --raid-devices=3` of a RAID 1 of two with a bitmap: the
/// takeover, then the restripe onto the third member; the bitmap (member
/// sectors, as a RAID 5's) kept as it was.
#[test]
fn a_raid1_with_a_bitmap_becomes_a_raid5_of_three() {
    let devs = mem_devices(3, 16 * MIB);
    let data = bitmap_grow::bitmapped(Level::Raid1, &devs[..2], BITMAP_CHUNK);
    let mut asm = Assembly::assemble(devs[..2].to_vec()).unwrap();
    let before = asm.bitmap.as_ref().unwrap().sb.clone();
    asm.convert_check(Level::Raid5, Some(3), None, 1).unwrap();
    asm.add(devs[2].clone(), false).unwrap();
    asm.raid5_takeover_raid1().unwrap();
    assert_bitmap(&devs[..2], &before);
    let req = ReshapeRequest {
        raid_devices: Some(3),
        ..ReshapeRequest::default()
    };
    let plan = asm.reshape_check(&req, 0).unwrap();
    asm.reshape_start(plan).unwrap();
    asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
    assert_exact_and_clean(&devs, &data, "RAID 5 of three");
    let asm = Assembly::assemble(devs.to_vec()).unwrap();
    assert_eq!(asm.geometry.level, Level::Raid5);
    assert_eq!(asm.geometry.raid_disks, 3);
    assert_bitmap(&devs, &before);
}

fn shrink_to_four() -> ReshapeRequest {
    ReshapeRequest {
        raid_devices: Some(4),
        ..ReshapeRequest::default()
    }
}

/// What md's bitmap of a RAID 10 shrunk from `before` to `array_bytes` is
/// once the shrink ends: `sync_size` the fewer members' array, the chunk
/// kept (`raid10_start_reshape` resizes it to the new geometry's size).
fn shrunk(before: &BitmapSuper, array_bytes: u64) -> BitmapSuper {
    grown(before, array_bytes)
}

/// A RAID 10 near=2 of five with a bitmap, shrunk to four (md's backward
/// reshape, the move of the data offset out of the component size): the
/// bitmap keeps its size while the walk runs (it covers more than the
/// truncated array), then is resized down to the new array in the end's
/// commit; a bit a crash left below the new end is kept, one past it
/// dropped with the array it named. The data the four hold exact, the
/// copies agreeing, the fifth member a spare with the same bitmap.
#[test]
fn a_raid10_with_a_bitmap_shrinks_from_five_to_four_members_offline() {
    let devs = mem_devices(5, 16 * MIB);
    let data = bitmap_grow::bitmapped(Level::Raid10, &devs, BITMAP_CHUNK);
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    let fits = asm.raid10_shrink_holds(&shrink_to_four()).unwrap();
    let cs = u64::from(BITMAP_CHUNK);
    let (kept, past) = (3, fits / cs + 1);
    let bm = asm.bitmap.as_mut().unwrap();
    assert!(past < bm.chunks(), "a chunk past the new end");
    for c in [kept, past] {
        bm.set_sectors(c * cs / 512, 8).unwrap();
    }
    asm.commit(|_| {}).unwrap();
    let before = asm.bitmap.as_ref().unwrap().sb.clone();
    let plan = asm
        .reshape_check_sized(&shrink_to_four(), 0, Some(fits))
        .unwrap();
    assert!(plan.backwards);
    asm.reshape_start(plan).unwrap();
    // Kept at its size while the walk runs.
    assert_bitmap(&devs, &before);
    for (i, (_, bm)) in on_disk(&devs).iter().enumerate() {
        assert_eq!(dirty(bm), vec![kept, past], "member {i}: bits at the start");
    }
    let report = asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
    assert_eq!((report.new_raid_devices, report.new_array_bytes), (4, fits));
    assert_exact_and_clean(&devs[..4], &data[..fits as usize], "shrunk");
    let want = shrunk(&before, fits);
    assert_bitmap(&devs, &want);
    for (i, (_, bm)) in on_disk(&devs).iter().enumerate() {
        assert_eq!(dirty(bm), vec![kept], "member {i}: bits after the end");
    }
    let asm = Assembly::assemble(devs.to_vec()).unwrap();
    let spare = asm.members.iter().find(|m| m.device.path == devs[4].path);
    assert_eq!(spare.map(|m| m.state), Some(MemberState::Spare));
}

/// The shrink above cut by a power failure at member writes through its
/// whole run and at each of the last writes (the end's commit, where the
/// bitmap is resized beside the superblocks), then assembled and carried
/// on (or asked again when the cut came before it was recorded): the data
/// the four hold exact, the copies agreeing, the bitmap resized as md's on
/// every member, and after every cut a bitmap that covers the array
/// assembled.
#[test]
fn a_raid10_shrink_with_a_bitmap_cut_anywhere_is_resumed_exact_and_clean() {
    let mut cut = 0;
    let mut last = 0;
    for at in [
        1u64, 3, 6, 10, 16, 25, 40, 60, 90, 130, 180, 250, 400, 700, 1200, 2000, 3500, 6000, 10000,
    ] {
        if !shrink_cut_at(at) {
            break;
        }
        (cut, last) = (cut + 1, at);
    }
    // The run's last write: the first cut point past it trips nothing.
    let (mut lo, mut hi) = (last, 10_000);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        match shrink_cut_at(mid) {
            true => lo = mid,
            false => hi = mid,
        }
    }
    assert!(lo > 100, "the shrink wrote {lo} times");
    for at in lo - 16..lo {
        assert!(shrink_cut_at(at), "cut at {at}");
        cut += 1;
    }
    eprintln!("runs cut: {cut}, the run's writes: {lo}");
}

/// One run of the test above, cut at member write `at`; false when the
/// shrink ended before it (nothing cut, nothing checked).
fn shrink_cut_at(at: u64) -> bool {
    let opts = || RunOptions {
        checkpoint_bytes: 2 * MIB,
        ..RunOptions::default()
    };
    let (devs, faults) = fault_devices(5, 16 * MIB);
    let data = bitmap_grow::bitmapped(Level::Raid10, &devs, BITMAP_CHUNK);
    let asm = Assembly::assemble(devs.to_vec()).unwrap();
    let before = asm.bitmap.as_ref().unwrap().sb.clone();
    let fits = asm.raid10_shrink_holds(&shrink_to_four()).unwrap();
    let tripped = cut_at(&faults, at, at, &mut || {
        let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
        let Ok(plan) = asm.reshape_check_sized(&shrink_to_four(), 0, Some(fits)) else {
            return;
        };
        if asm.reshape_start(plan).is_ok() {
            let _ = asm.reshape_run(opts(), &mut |_| {});
        }
    });
    if !tripped {
        return false;
    }
    let what = format!("cut at member write {at}");
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap_or_else(|e| panic!("{what}: {e}"));
    let covers = asm.bitmap.as_ref().unwrap().sb.sync_size * 512;
    assert!(covers >= asm.geometry.array_bytes(), "{what}: {covers}");
    if asm.reshape().is_some() {
        asm.reshape_run(opts(), &mut |_| {})
            .unwrap_or_else(|e| panic!("{what}: resume: {e}"));
    } else if asm.geometry.raid_disks == 5 {
        let plan = asm
            .reshape_check_sized(&shrink_to_four(), 0, Some(fits))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        asm.reshape_start(plan).unwrap();
        asm.reshape_run(opts(), &mut |_| {}).unwrap();
    }
    assert_exact_and_clean(&devs[..4], &data[..fits as usize], &what);
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    assert_eq!(asm.geometry.raid_disks, 4, "{what}");
    // A cut between a member's superblock and its bitmap in the end's
    // commit leaves that copy out of date (every bit set, as md answers
    // it) and at the old size; the bitmap the array runs with is the
    // resized one, which the next commit puts on every member.
    let mut md = shrunk(&before, fits);
    md.events = asm.bitmap.as_ref().unwrap().sb.events;
    assert_eq!(asm.bitmap.as_ref().unwrap().sb, md, "{what}: bitmap");
    // (The member that left keeps what it had if the cut came before its
    // superblock: one event behind, the assembly leaves it out.)
    asm.commit(|_| {}).unwrap();
    assert_bitmap(&devs[..4], &md);
    true
}

/// A RAID 10 grow with a bitmap cut by a power failure at member writes
/// through the whole run, then assembled and carried on: the data exact,
/// the copies agreeing, the bitmap md's resized one.
#[test]
fn a_raid10_grow_with_a_bitmap_cut_anywhere_is_resumed_exact_and_clean() {
    grow_cut_throughout(
        Level::Raid10,
        BITMAP_CHUNK,
        &mut |devs, data, before, what| {
            assert_exact_and_clean(devs, data, what);
            let asm = Assembly::assemble(devs.to_vec()).unwrap();
            assert_eq!(asm.geometry.raid_disks, 5, "{what}");
            let mut md = grown(before, data.len() as u64 * 5 / 4);
            md.events = asm.members[0].sb.events;
            // A cut between a superblock and its bitmap leaves that copy out of
            // date, which md answers with every bit set: the bits may differ,
            // the superblock may not.
            assert_eq!(asm.bitmap.as_ref().unwrap().sb, md, "{what}: bitmap");
        },
    );
}

/// A served RAID 10 grow stopped part-way, a client's write on either side
/// of the position, then the machine stops: every member's bitmap is the
/// resized one and its bits are exactly the two writes' array chunks (a
/// RAID 10's bits count array sectors, the same in either geometry; the
/// walk's own writes marked nothing). Resumed offline: the writes in
/// place, the copies agreeing, the bits kept.
#[test]
fn writes_during_a_served_raid10_grow_mark_their_array_chunks_through_a_crash() {
    let devs = mem_devices(5, 16 * MIB);
    let mut data = bitmap_grow::bitmapped(Level::Raid10, &devs[..4], BITMAP_CHUNK);
    let asm = Assembly::assemble(devs[..4].to_vec()).unwrap();
    let before = asm.bitmap.as_ref().unwrap().sb.clone();
    let new_bytes = data.len() as u64 / 4 * 5;
    // The machine stops with the two writes made.
    let (a, b) =
        bitmap_grow::served_grow_stopped_with_a_write_each_side(asm, &devs, 2, 2 * MIB, &mut data);
    let mut want = vec![a / u64::from(BITMAP_CHUNK), b / u64::from(BITMAP_CHUNK)];
    want.sort_unstable();
    assert_ne!(want[0], want[1]);
    let first_new = before.sync_size / (u64::from(BITMAP_CHUNK) / 512);
    let chunks = new_bytes / u64::from(BITMAP_CHUNK);
    // The new space's chunks, marked at the start as md marks them.
    want.extend(first_new..chunks);
    for (i, (_, bm)) in on_disk(&devs).iter().enumerate() {
        assert_eq!(bm.sb.sync_size, new_bytes / 512, "member {i}: resized");
        assert_eq!(dirty(bm), want, "member {i}: the bits on disk");
    }
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
    assert_exact_and_clean(&devs, &data, "resumed");
    let asm = Assembly::assemble(devs.to_vec()).unwrap();
    assert_eq!(dirty(asm.bitmap.as_ref().unwrap()), want, "bits kept");
    assert_bitmap(&devs, &grown(&before, new_bytes));
}

/// md's own RAID 10 grow, stopped: its bitmap on disk keeps the old
/// `sync_size` (md resizes it in memory only). raidlab's walk makes it
/// cover the new array before it moves anything
/// (`raid10_bitmap_for_recorded_grow`), so after the grow a write to the new
/// space marks its chunk (without that, no bit: this test failed).
#[test]
fn a_bitmap_md_left_at_the_old_size_is_made_to_cover_the_grown_array() {
    let devs = mem_devices(5, 16 * MIB);
    let data = bitmap_grow::bitmapped(Level::Raid10, &devs[..4], BITMAP_CHUNK);
    let mut asm = Assembly::assemble(devs[..4].to_vec()).unwrap();
    let old = asm.bitmap.as_ref().unwrap().sb.clone();
    bitmap_grow::grow_to_five_started(&mut asm, &devs);
    // As md leaves it: the bitmap of the old array.
    asm.bitmap = Some(Bitmap::new(old.clone(), false).unwrap());
    asm.commit(|_| {}).unwrap();
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    assert_eq!(asm.bitmap.as_ref().unwrap().sb.sync_size, old.sync_size);
    // The walk resizes it before it moves anything.
    asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
    assert_exact_and_clean(&devs, &data, "grown");
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    let end = asm.geometry.array_bytes();
    assert_eq!(asm.bitmap.as_ref().unwrap().sb.sync_size, end / 512);
    asm.bitmap.as_mut().unwrap().clear_all();
    asm.mark_dirty().unwrap();
    let array = asm.array().unwrap();
    array.write_at(&[7u8; 4096], end - 4096).unwrap();
    array.flush().unwrap();
    asm.absorb_bitmap(&array);
    let bm = asm.bitmap.as_ref().unwrap();
    let last = (end - 4096) / u64::from(BITMAP_CHUNK);
    assert_eq!(dirty(bm), vec![last], "the write at the end marks its bit");
    // Once covered, nothing more to do.
    assert!(!asm.raid10_bitmap_for_recorded_grow().unwrap());
}

/// A RAID 10 bitmap smaller than the array with no reshape recorded (md
/// writes a shrink's resized bitmap before the superblocks that record the
/// shrink; a cut between leaves this): the assembly fits it to the array
/// as md's bitmap load does, the chunks it did not cover dirty (a write
/// there marked nothing), and the next commit writes it so. Without the
/// fit, a write past the small bitmap's end would mark no bit.
#[test]
fn a_bitmap_smaller_than_the_array_is_fitted_at_assembly() {
    let devs = mem_devices(4, 16 * MIB);
    bitmap_grow::bitmapped(Level::Raid10, &devs, BITMAP_CHUNK);
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    let full = asm.bitmap.as_ref().unwrap().sb.clone();
    let array = asm.geometry.array_bytes() / 512;
    assert_eq!(full.sync_size, array);
    let half = array / 2;
    let small = raidlab_md::bitmap::resized_to(
        asm.bitmap.as_ref().unwrap(),
        half,
        full.area_bytes(),
        false,
    )
    .unwrap();
    asm.bitmap = Some(small);
    asm.commit(|_| {}).unwrap();
    assert_eq!(on_disk(&devs)[0].1.sb.sync_size, half);
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    let bm = asm.bitmap.as_ref().unwrap();
    assert_eq!(bm.sb.sync_size, array, "fitted to the array");
    let cs = u64::from(BITMAP_CHUNK) / 512;
    assert_eq!(dirty(bm), (half / cs..array / cs).collect::<Vec<_>>());
    asm.commit(|_| {}).unwrap();
    let mut want = full.clone();
    want.events = asm.members[0].sb.events;
    assert_bitmap(&devs, &want);
}
