//! A metadata 0.90 RAID 5 with md's internal bitmap (after the superblock
//! at the end of each member, clear of the data) reshaped as md reshapes
//! one: grown by a member in place (the critical section backed up on the
//! new member), stopped part-way and carried on; and given a new chunk
//! through mdadm's backup file. Each ends with the data exact, the parity
//! clean and the bitmap carried as md carries a RAID 5's through a
//! restripe: unchanged but for its events, on every member, the new one
//! included, with no bit set (a reshape's own writes mark none).

mod bitmap_grow;
mod common;
mod md090;
use bitmap_grow::{assert_bits_kept_and_clean, dirty, raid5_member_sector};
use md090::*;
use raidlab_core::Volume;
use raidlab_layout::Level;
use raidlab_md::bitmap::BitmapSuper;
use raidlab_raid::assemble::{Assembly, Device};
use raidlab_raid::grow::{BackupFile, ReshapeRequest};
use raidlab_raid::recovery::RunOptions;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// The data back exactly, a check clean, and on every member the bitmap
/// `before` with the superblock's events and no bit set.
fn assert_reshaped_with_bitmap(devs: &[Device], data: &[u8], before: &BitmapSuper, what: &str) {
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    assert!(asm.reshape().is_none(), "{what}: still mid-reshape");
    assert!(read_all(devs)[..data.len()] == *data, "{what}: data");
    let report = asm
        .scrub(false, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(report.mismatch_sectors, 0, "{what}: parity");
    for (i, (sb, bm)) in bitmap_grow::on_disk(devs).into_iter().enumerate() {
        let mut want = before.clone();
        want.events = sb.events;
        want.events_cleared = bm.sb.events_cleared;
        assert_eq!(bm.sb, want, "{what}: member {i}: bitmap superblock");
        assert_eq!(bm.dirty_count(), 0, "{what}: member {i}: bits");
    }
}

static STOP: AtomicBool = AtomicBool::new(false);

#[test]
fn a_090_raid5_with_a_bitmap_grows_in_place_through_a_stop() {
    let devs = mem_devices(5, 8 * MIB);
    let data = fill_with(Level::Raid5, &devs[..4], 3, true);
    let mut asm = Assembly::assemble(devs[..4].to_vec()).unwrap();
    let before = asm.bitmap.as_ref().unwrap().sb.clone();
    asm.add(devs[4].clone(), false).unwrap();
    let req = ReshapeRequest {
        raid_devices: Some(5),
        ..ReshapeRequest::default()
    };
    let plan = asm.reshape_check(&req, 0).unwrap();
    assert_eq!(plan.gap_sectors, 0, "0.90: grown in place");
    asm.reshape_start(plan).unwrap();
    STOP.store(false, Ordering::SeqCst);
    let opts = RunOptions {
        stop: Some(&STOP),
        step_bytes: 256 << 10,
        ..RunOptions::default()
    };
    let mut steps = 0;
    asm.reshape_run(opts, &mut |_| {
        steps += 1;
        if steps == 3 {
            STOP.store(true, Ordering::SeqCst);
        }
    })
    .unwrap_err();
    drop(asm);
    let mut again = Assembly::assemble(devs.clone()).unwrap();
    assert!(again.reshape().unwrap().unwrap().position > 0);
    assert!(again.bitmap.is_some(), "the bitmap found mid-reshape");
    again
        .reshape_run(RunOptions::default(), &mut |_| {})
        .unwrap();
    drop(again);
    assert_reshaped_with_bitmap(&devs, &data, &before, "grown in place");
}

#[test]
fn a_090_raid5_with_a_bitmap_takes_a_new_chunk_through_a_backup_file() {
    let devs = mem_devices(4, 8 * MIB);
    let data = fill_with(Level::Raid5, &devs, 5, true);
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    let before = asm.bitmap.as_ref().unwrap().sb.clone();
    let req = ReshapeRequest {
        chunk_bytes: Some(32 << 10),
        ..ReshapeRequest::default()
    };
    let plan = asm
        .reshape_check_with_backup(&req, Path::new("/nonexistent-dir/backup"))
        .unwrap();
    let file = BackupFile::on_volume("backup", mem_file(&plan));
    asm.reshape_start_with_backup(plan, &file).unwrap();
    asm.reshape_run_with_backup(&file, RunOptions::default(), &mut |_| {})
        .unwrap();
    drop(asm);
    assert_reshaped_with_bitmap(&devs, &data, &before, "new chunk");
}

/// Served: the in-place grow walked by a server and stopped, a client's
/// write on either side of the position, then the machine stops. The bits
/// on every member are exactly those of the two writes, each counted in the
/// geometry that took it; resumed offline, the grow ends with the writes in
/// place, the parity clean and the bits kept.
#[test]
fn writes_during_a_served_090_grow_mark_their_geometrys_bits_through_a_crash() {
    let devs = mem_devices(5, 8 * MIB);
    let mut data = fill_with(Level::Raid5, &devs[..4], 9, true);
    let asm = Assembly::assemble(devs[..4].to_vec()).unwrap();
    let before = asm.bitmap.as_ref().unwrap().sb.clone();
    let (a, b) =
        bitmap_grow::served_grow_stopped_with_a_write_each_side(asm, &devs, 3, MIB, &mut data);
    let chunk_sectors = u64::from(before.chunksize) / 512;
    let mut want = vec![
        raid5_member_sector(a, 5, CHUNK) / chunk_sectors,
        raid5_member_sector(b, 4, CHUNK) / chunk_sectors,
    ];
    want.sort_unstable();
    assert_ne!(want[0], want[1], "the two writes' bits differ");
    for (i, (_, bm)) in bitmap_grow::on_disk(&devs).iter().enumerate() {
        assert_eq!(dirty(bm), want, "member {i}: the bits on disk");
    }
    let mut again = Assembly::assemble(devs.clone()).unwrap();
    again
        .reshape_run(RunOptions::default(), &mut |_| {})
        .unwrap();
    drop(again);
    assert!(
        read_all(&devs)[..data.len()] == data[..],
        "the data after the resume"
    );
    assert_bits_kept_and_clean(&devs, &want);
}

/// Served through the backup file: a new chunk walked window by window, a
/// client writing between windows (one page just below the walk, in the
/// new chunk, one past the next window, in the old), stopped after a few
/// windows as a machine stops. The bits on every member are exactly the
/// pages' own, each counted in the chunk that took it; resumed from the
/// file, the restripe ends exact and clean with the bits kept.
#[test]
fn writes_during_a_served_090_backup_restripe_mark_their_chunks_bits_through_a_crash() {
    let devs = mem_devices(4, 8 * MIB);
    let mut data = fill_with(Level::Raid5, &devs, 11, true);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    let bitmap_chunk = u64::from(asm.bitmap.as_ref().unwrap().sb.chunksize);
    let req = ReshapeRequest {
        chunk_bytes: Some(32 << 10),
        ..ReshapeRequest::default()
    };
    let plan = asm
        .reshape_check_with_backup(&req, Path::new("/nonexistent-dir/backup"))
        .unwrap();
    drop(asm);
    let wbytes = plan.backup_sectors * 512;
    let file = BackupFile::on_volume("backup", mem_file(&plan));
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    asm.reshape_start_with_backup(plan, &file).unwrap();
    let mut walk = asm.reshape_served_with_backup(false, &file).unwrap();
    let vol = walk.volume("a".into());
    let gate = walk.gate().clone();
    let total = vol.size();
    let written = std::cell::RefCell::new(Vec::new());
    let n = std::cell::Cell::new(0u64);
    let quit = || {
        let p = gate.position();
        let k = n.get();
        n.set(k + 1);
        if k == 3 {
            return true;
        }
        // Below the walk (the new chunk holds it) and past the window
        // above it (the old chunk still does).
        for at in [
            p - 4096,
            p + wbytes + (total - p - wbytes) / 2 / 4096 * 4096,
        ] {
            let page = vec![k as u8 + 1; 4096];
            vol.write_at(&page, at).unwrap();
            vol.flush().unwrap();
            written.borrow_mut().push((at, at < p, page));
        }
        false
    };
    walk.run(&mut asm, &RunOptions::default(), &quit)
        .unwrap_err();
    drop((walk, vol, asm));
    let written = written.into_inner();
    assert_eq!(written.len(), 6, "three rounds of two pages");
    let mut want: Vec<u64> = written
        .iter()
        .map(|(at, new, _)| {
            let chunk = if *new { 32 << 10 } else { CHUNK };
            raid5_member_sector(*at, 4, chunk) / (bitmap_chunk / 512)
        })
        .collect();
    want.sort_unstable();
    want.dedup();
    for (i, (_, bm)) in bitmap_grow::on_disk(&devs).iter().enumerate() {
        assert_eq!(dirty(bm), want, "member {i}: the bits on disk");
    }
    for (at, _, page) in &written {
        data[*at as usize..*at as usize + 4096].copy_from_slice(page);
    }
    let mut again = Assembly::assemble(devs.clone()).unwrap();
    again
        .reshape_run_with_backup(&file, RunOptions::default(), &mut |_| {})
        .unwrap();
    drop(again);
    assert!(read_all(&devs) == data, "the data after the resume");
    assert_bits_kept_and_clean(&devs, &want);
}
