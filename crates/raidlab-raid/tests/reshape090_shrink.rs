//! A metadata 0.90 RAID 5/6 shrunk by a member through mdadm's backup file
//! (md's backward walk in place: 0.90 has no data offset to move): read back
//! exactly, clean, and degraded; the superblocks md would write (the count,
//! the leaving member a spare); stopped, read only with its file (md's
//! rule), and carried on; power cut at every member and file write of the
//! run early on, then a sample, each refused a read without the file and
//! resumed from it; and each shrink mdadm refuses, refused with no member
//! byte changed.

mod md090;
use md090::*;
use raidlab_core::Volume;
use raidlab_devices::fault::FaultVolume;
use raidlab_devices::MemVolume;
use raidlab_layout::Level;
use raidlab_md::grow_backup::BackupSuper;
use raidlab_md::sb090::{self, disk_state, Sb090};
use raidlab_raid::assemble::{Assembly, Device, MemberState};
use raidlab_raid::grow::{BackupFile, ReshapePlan, ReshapeRequest};
use raidlab_raid::recovery::RunOptions;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn fewer(to: usize) -> ReshapeRequest {
    ReshapeRequest {
        raid_devices: Some(to),
        ..ReshapeRequest::default()
    }
}

/// What `to` members hold of this array: the size the user accepts.
fn holds(asm: &Assembly, to: usize) -> u64 {
    let g = asm.geometry;
    (g.data_disks() - (g.raid_disks - to)) as u64 * g.member_bytes
}

/// The plan of a shrink to `to` members with the largest size they hold,
/// checked with a backup file path that does not exist.
fn plan(asm: &Assembly, to: usize) -> ReshapePlan {
    asm.reshape_check_sized_with_backup(
        &fewer(to),
        Path::new("/nonexistent-dir-h66/backup"),
        Some(holds(asm, to)),
    )
    .unwrap()
}

/// The 0.90 superblock as it is on `dev`.
fn sb_on(dev: &Device) -> Sb090 {
    let size = dev.volume.size();
    let at = sb090::super_offset(size / 512).unwrap() * 512;
    let mut b = vec![0u8; sb090::SB_BYTES];
    dev.volume.read_at(&mut b, at).unwrap();
    Sb090::parse(&b).unwrap()
}

fn record(v: &dyn Volume) -> BackupSuper {
    let mut b = [0u8; 512];
    v.read_at(&mut b, 0).unwrap();
    BackupSuper::parse(&b).unwrap().unwrap()
}

/// Shrunk to `to` of `devs`: no reshape recorded, `to` roles, the others
/// spares in md's 0.90 words, the bytes the new members hold exact and
/// clean, and exact with each member missing in turn. `cut` (the file): a
/// power cut may have come inside the finishing commit, leaving a leaving
/// member's superblock the older one (left out of the array as stale, as md
/// leaves a member whose events lag), and members without the one that
/// took the end still recording the reshape at position 0, which read only
/// given the file (md's rule; nothing is left to put back).
fn assert_shrunk(devs: &[Device], to: usize, want: &[u8], cut_file: Option<&BackupFile>) {
    let cut = cut_file.is_some();
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    assert!(asm.reshape().is_none(), "still mid-reshape");
    assert_eq!(asm.geometry.raid_disks, to);
    for (i, m) in asm.members.iter().enumerate() {
        if i < to {
            assert_eq!(m.role, Some(i), "{}", m.device.path);
        } else if cut && m.state == MemberState::Removed {
            // Its own superblock still claims its old slot; the array's
            // newest ones list it as no member's.
            assert!(
                asm.slots.iter().flatten().all(|&s| s != i),
                "{}",
                m.device.path
            );
        } else {
            assert_eq!(m.state, MemberState::Spare, "{}", m.device.path);
        }
    }
    let stale: Vec<bool> = asm
        .members
        .iter()
        .map(|m| m.state == MemberState::Removed)
        .collect();
    let newest = devs.iter().map(|d| sb_on(d).events()).max().unwrap();
    for (i, d) in devs.iter().enumerate() {
        let sb = sb_on(d);
        // A cut inside the finishing commit leaves some superblocks one
        // event behind, the older words; md (and mdadm's event margin)
        // takes such an active member in, and the next commit rewrites it.
        if stale[i] || (cut && sb.events() + 1 == newest) {
            continue;
        }
        // md's words once the reshape is over: minor 90 again (no
        // reshape fields), the new count, this member's descriptor.
        assert_eq!(
            (sb.minor_version(), sb.raid_disks()),
            (90, to as u32),
            "{}",
            d.path
        );
        let this = sb.this_disk();
        if i < to {
            assert_eq!(this.raid_disk, i as u32, "{}", d.path);
            assert_ne!(this.state & disk_state::SYNC, 0, "{}", d.path);
        } else {
            assert_eq!(
                this.state & (disk_state::ACTIVE | disk_state::SYNC | disk_state::FAULTY),
                0,
                "{}: a spare's descriptor",
                d.path
            );
        }
    }
    let got = read_all(devs);
    assert_eq!(got.len(), want.len());
    assert!(got == want, "shrunk bytes differ");
    let report = asm
        .scrub(false, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(report.mismatch_sectors, 0);
    drop(asm);
    for gone in 0..to {
        let rest: Vec<Device> = devs[..to]
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != gone)
            .map(|(_, d)| d.clone())
            .collect();
        let recorded = Assembly::assemble(rest.clone()).unwrap().reshape();
        let got = match (recorded, cut_file) {
            (Some(r), Some(file)) => {
                assert_eq!(r.unwrap().position, 0, "m{gone} missing: mid-walk");
                read_refused(&rest);
                read_all_with(&rest, file)
            }
            _ => read_all(&rest),
        };
        assert!(got == want, "degraded (m{gone} missing) differs");
    }
}

#[test]
fn raid5_and_raid6_shrink_by_a_member_through_the_backup_file() {
    for level in [Level::Raid5, Level::Raid6] {
        let devs = mem_devices(5, 8 * MIB);
        let data = fill(level, &devs, 11);
        let mut asm = Assembly::assemble(devs.clone()).unwrap();
        let size = holds(&asm, 4);
        let plan = plan(&asm, 4);
        assert!(plan.backwards && plan.backup_sectors > 0 && plan.gap_sectors == 0);
        let vol = mem_file(&plan);
        let file = BackupFile::on_volume("backup", vol.clone());
        asm.reshape_start_with_backup(plan, &file).unwrap();
        // Recorded as md records a shrink of 0.90: the new count, delta
        // -1, the position at the new geometry's end (walking down), no
        // new offset; the leaving member still in its slot.
        for d in &devs {
            let sb = sb_on(d);
            assert_eq!((sb.minor_version(), sb.raid_disks()), (91, 4), "{}", d.path);
        }
        let m = &asm.members[0].sb;
        assert_eq!((m.delta_disks, m.reshape_position), (-1, size / 512));
        assert_eq!(m.new_offset, 0);
        assert_eq!(asm.members[4].role, Some(4));
        // The array's last window needs no backup (its new rows lie above
        // its old ones): the record names no section, which md's
        // Grow_restart reads as nothing to put back. A section below the
        // position is one md would move the position down to, and restore
        // in the old geometry (mdadm counts a shrink's raid_disks as the
        // old count), while the window is not walked yet.
        let r = record(&*vol);
        assert_eq!((r.length, r.length2), (0, 0), "at the start: {r:?}");
        // Stopped cleanly mid-walk: reads back; carried on to the end.
        static STOP: AtomicBool = AtomicBool::new(false);
        STOP.store(false, Ordering::SeqCst);
        let mut windows = 0;
        let e = asm
            .reshape_run_with_backup(
                &file,
                RunOptions {
                    stop: Some(&STOP),
                    ..RunOptions::default()
                },
                &mut |_| {
                    windows += 1;
                    if windows == 3 {
                        STOP.store(true, Ordering::SeqCst);
                    }
                },
            )
            .unwrap_err();
        assert_eq!(e.kind, raidlab_core::ErrorKind::Interrupted, "{e}");
        // Stopped three windows down, far above the critical section near
        // the array's start: still no section below the position.
        let p = asm.members[0].sb.reshape_position;
        let r = record(&*vol);
        for (start, len) in [(r.arraystart, r.length), (r.arraystart2, r.length2)] {
            assert!(len == 0 || start >= p, "a section below {p}: {r:?}");
        }
        drop(asm);
        // Read without the file: refused, as md refuses it (the superblocks
        // cannot tell this clean stop from a cut inside a window); with
        // it, exact (nothing below the position needed putting back).
        read_refused(&devs);
        assert!(
            read_all_with(&devs, &file) == data[..size as usize],
            "{level:?}: stopped mid-walk, bytes differ"
        );
        let mut asm = Assembly::assemble(devs.clone()).unwrap();
        let report = asm
            .reshape_run_with_backup(&file, RunOptions::default(), &mut |_| {})
            .unwrap();
        assert!(report.backwards && report.resumed, "{report:?}");
        assert!(report.checkpoints >= 8, "{report:?}");
        assert_eq!(report.spares, vec!["m4".to_string()]);
        assert_eq!(report.new_array_bytes, size);
        drop(asm);
        assert_shrunk(&devs, 4, &data[..size as usize], None);
        let r = record(&*vol);
        assert_eq!((r.length, r.length2), (0, 0), "let go at the end: {r:?}");
    }
}

/// Power cut at the `w`-th write (members and file) of a start and run
/// of a shrink from 5 members to 4 (with a new chunk, if given); then a
/// resume from the file (a third of them cut again inside the resume).
/// Whether the cut came.
fn cut_at(level: Level, chunk: Option<u64>, w: u64, seed: u64) -> bool {
    let (devs, faults) = fault_devices(5, 2 * MIB);
    let data = fill(level, &devs, 11);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    let size = holds(&asm, 4);
    let req = ReshapeRequest {
        chunk_bytes: chunk,
        ..fewer(4)
    };
    let plan = asm
        .reshape_check_sized_with_backup(&req, Path::new("/nonexistent-dir-h66/b"), Some(size))
        .unwrap();
    drop(asm);
    let inner: Arc<dyn Volume> = mem_file(&plan);
    let fvol = Arc::new(FaultVolume::with_volatile_cache(inner));
    let all: Vec<Fault> = faults.iter().cloned().chain([fvol.clone()]).collect();
    let cut = |at: u64, seed: u64, work: &mut dyn FnMut()| md090::cut_at(&all, at, seed, work);
    let file = BackupFile::on_volume("backup", fvol.clone());
    let tripped = cut(w, seed, &mut || {
        let mut asm = Assembly::assemble(devs.clone()).unwrap();
        let _ = asm
            .reshape_start_with_backup(plan, &file)
            .and_then(|()| asm.reshape_run_with_backup(&file, RunOptions::default(), &mut |_| {}));
    });
    if !torn(&devs).is_empty() {
        return torn_at_the_end(&devs, &file, &data[..size as usize], level, w) || tripped;
    }
    if tripped && w % 3 == 0 {
        // A second cut inside the resume: the put-back, its commits, the
        // window saved below it, the first windows after it.
        cut(1 + w * 13 % 80, !seed, &mut || {
            let mut asm = Assembly::assemble(devs.clone()).unwrap();
            if asm.reshape().is_some() {
                let _ = asm.reshape_run_with_backup(&file, RunOptions::default(), &mut |_| {});
            }
        });
    }
    if !torn(&devs).is_empty() {
        return torn_at_the_end(&devs, &file, &data[..size as usize], level, w) || tripped;
    }
    let mut again = Assembly::assemble(devs.clone()).unwrap();
    let recorded = again.reshape().is_some();
    if recorded {
        // Wherever the cut came, no read without the file (md's rule).
        read_refused(&devs);
        again
            .reshape_run_with_backup(&file, RunOptions::default(), &mut |_| {})
            .unwrap_or_else(|e| panic!("{level:?} cut at write {w}: resume: {e}"));
    }
    drop(again);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    if asm.geometry.raid_disks == 5 {
        // Cut before the start's commit: nothing recorded, the array as
        // it was.
        drop(asm);
        assert!(
            read_all(&devs) == data,
            "{level:?} cut at write {w}: unstarted, bytes differ"
        );
    } else {
        drop(asm);
        assert_shrunk(&devs, 4, &data[..size as usize], Some(&file));
    }
    tripped
}

/// The members whose 0.90 superblock no longer reads: a cut tore it (some
/// of its sectors new, some old). Only the finishing commit changes more
/// than the superblock's first sector (the leaving member's descriptor),
/// so only a cut there can.
fn torn(devs: &[Device]) -> Vec<usize> {
    (0..devs.len())
        .filter(|&i| {
            let d = &devs[i];
            let at = sb090::super_offset(d.volume.size() / 512).unwrap() * 512;
            let mut b = vec![0u8; sb090::SB_BYTES];
            d.volume.read_at(&mut b, at).unwrap();
            Sb090::parse(&b).is_err()
        })
        .collect()
}

/// A cut inside the finishing commit tore a superblock: the user names the
/// other members, as mdadm (which aborts an assembly of a named device with
/// no superblock) makes them. The walk had written every window by then,
/// so the others read the data exact, whether their superblocks took the
/// end or still record the reshape at position 0 (then, as md, only given
/// the backup file, which has nothing left to put back).
fn torn_at_the_end(devs: &[Device], file: &BackupFile, want: &[u8], level: Level, w: u64) -> bool {
    let gone = torn(devs);
    assert_eq!(gone.len(), 1, "{level:?} cut at write {w}: torn {gone:?}");
    eprintln!("{level:?} cut at write {w}: member {gone:?}'s superblock torn in the finishing commit; the rest read exact");
    let rest: Vec<Device> = (0..devs.len())
        .filter(|i| !gone.contains(i))
        .map(|i| devs[i].clone())
        .collect();
    let asm = Assembly::assemble(rest.clone()).unwrap();
    let recorded = asm.reshape().is_some();
    if let Some(r) = asm.reshape() {
        assert_eq!(
            r.unwrap().position,
            0,
            "{level:?} cut at write {w}: torn mid-walk"
        );
    }
    drop(asm);
    let got = if recorded {
        read_refused(&rest);
        let before = snapshot(&rest);
        let got = read_all_with(&rest, file);
        assert!(
            snapshot(&rest) == before,
            "{level:?} cut at write {w}: a put-back at position 0 wrote"
        );
        got
    } else {
        read_all(&rest)
    };
    assert!(
        got[..want.len()] == *want,
        "{level:?} cut at write {w}: torn superblock, the rest read wrong"
    );
    true
}

#[test]
fn a_power_cut_at_any_write_of_the_shrink_resumes_from_the_backup_file() {
    for (level, chunk) in [
        (Level::Raid5, None),
        (Level::Raid6, None),
        (Level::Raid5, Some(32 << 10)),
    ] {
        let mut w = 1;
        let mut cuts = 0;
        while cut_at(level, chunk, w, w * 7919) {
            cuts += 1;
            // Every write early on (the start, the first windows, a few
            // resumes), then a sample: a window's phases repeat.
            w += if w < 120 { 1 } else { 5 };
        }
        eprintln!(
            "{level:?} 5->4, chunk {:?}: {cuts} runs cut (write {w} of the last, uncut)",
            chunk.unwrap_or(CHUNK)
        );
        assert!(cuts > 100, "{level:?}: only {cuts} cuts");
    }
}

fn file_devices(dir: &Path, n: usize) -> Vec<Device> {
    (0..n)
        .map(|i| {
            let p = dir.join(format!("m{i}"));
            Device {
                path: p.display().to_string(),
                volume: Arc::new(
                    raidlab_devices::file::FileVolume::create_sparse(&p, 4 * MIB).unwrap(),
                ),
            }
        })
        .collect()
}

#[test]
fn shrinks_mdadm_refuses_are_refused_with_no_member_byte_changed() {
    let dir = tempfile::tempdir().unwrap();
    let devs = file_devices(dir.path(), 5);
    fill(Level::Raid5, &devs, 11);
    let before = snapshot(&devs);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    let size = holds(&asm, 4);
    let new_file = dir.path().join("backup");
    let expect = |e: raidlab_core::Error, want: &[&str]| {
        let e = e.to_string();
        for w in want {
            assert!(e.contains(w), "want {w:?}: {e}");
        }
    };
    // No backup file: mdadm's reason.
    expect(
        asm.reshape_check_sized(&fewer(4), 0, Some(size))
            .unwrap_err(),
        &[
            "need backup-file",
            "--backup-file FILE",
            "nothing was changed",
        ],
    );
    // No --array-size first: the size would cut data.
    expect(
        asm.reshape_check_sized_with_backup(&fewer(4), &new_file, None)
            .unwrap_err(),
        &["reduce the size of the array", "--array-size"],
    );
    expect(
        asm.reshape_check_sized_with_backup(&fewer(4), &new_file, Some(size + 1024))
            .unwrap_err(),
        &["does not fit in 4 members"],
    );
    // The file on a member.
    expect(
        asm.reshape_check_sized_with_backup(&fewer(4), Path::new(&devs[3].path), Some(size))
            .unwrap_err(),
        &["backup file must NOT be on the array"],
    );
    // Too few members left for the level.
    let one = holds(&asm, 1);
    expect(
        asm.reshape_check_sized_with_backup(&fewer(1), &new_file, Some(one))
            .unwrap_err(),
        &["no fewer than 2 members"],
    );
    // Starting the plan without its file.
    let plan = asm
        .reshape_check_sized_with_backup(&fewer(4), &new_file, Some(size))
        .unwrap();
    drop(asm);
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    expect(
        asm.reshape_start(plan).unwrap_err(),
        &["starts with its backup file", "nothing was changed"],
    );
    // A file too small for the plan's two windows.
    let small = BackupFile::on_volume(
        "small",
        Arc::new(MemVolume::new(
            Assembly::backup_file_sectors(&plan) * 512 / 2,
        )),
    );
    expect(
        asm.reshape_start_with_backup(plan, &small).unwrap_err(),
        &["too small", "nothing was changed"],
    );
    drop(asm);
    assert!(!new_file.exists(), "a check made the file");
    assert!(
        snapshot(&devs) == before,
        "a refused shrink changed a member"
    );

    // A RAID 6 of 5 keeps at least 4.
    let dir6 = tempfile::tempdir().unwrap();
    let devs6 = file_devices(dir6.path(), 5);
    fill(Level::Raid6, &devs6, 11);
    let before6 = snapshot(&devs6);
    let asm = Assembly::assemble(devs6.clone()).unwrap();
    let three = holds(&asm, 3);
    expect(
        asm.reshape_check_sized_with_backup(&fewer(3), &dir6.path().join("b"), Some(three))
            .unwrap_err(),
        &["no fewer than 4 members", "nothing was changed"],
    );
    drop(asm);
    assert!(snapshot(&devs6) == before6);
}

#[test]
fn a_stopped_shrink_is_not_carried_on_without_its_file_or_with_a_wrong_one() {
    let devs = mem_devices(5, 4 * MIB);
    let data = fill(Level::Raid5, &devs, 11);
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    let size = holds(&asm, 4);
    let plan = plan(&asm, 4);
    let vol = mem_file(&plan);
    let file = BackupFile::on_volume("backup", vol.clone());
    asm.reshape_start_with_backup(plan, &file).unwrap();
    drop(asm);
    let all = |v: &MemVolume| {
        let mut b = vec![0u8; v.size() as usize];
        v.read_at(&mut b, 0).unwrap();
        b
    };
    let before = (snapshot(&devs), all(&vol));
    // Without the file: mdadm's reason, nothing written.
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    let e = asm
        .reshape_run(RunOptions::default(), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--backup-file")
            && e.contains("fewer members")
            && e.contains("nothing was changed"),
        "{e}"
    );
    // Another array's file, and one too small: refused, nothing written.
    let copy = |len: u64, edit: &dyn Fn(&mut BackupSuper)| {
        let c = Arc::new(MemVolume::new(len));
        let b = all(&vol);
        c.write_at(&b[..len as usize], 0).unwrap();
        let mut r = record(&*c);
        edit(&mut r);
        c.write_at(&r.to_bytes(), 0).unwrap();
        c
    };
    for (shown, want) in [
        (copy(vol.size(), &|r| r.set_uuid[0] ^= 0xff), "Wrong uuid"),
        (copy(vol.size() / 2, &|_| {}), "too small"),
    ] {
        let f = BackupFile::on_volume("shown", shown);
        let e = asm
            .reshape_run_with_backup(&f, RunOptions::default(), &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(e.contains(want) && e.contains("nothing was changed"), "{e}");
    }
    drop(asm);
    assert!((snapshot(&devs), all(&vol)) == before, "a refusal wrote");
    // The right file: to the end.
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    asm.reshape_run_with_backup(&file, RunOptions::default(), &mut |_| {})
        .unwrap();
    drop(asm);
    assert_shrunk(&devs, 4, &data[..size as usize], None);
}

#[test]
fn raid4_by_one_raid5_by_two_and_a_shrink_with_a_new_chunk() {
    for (level, n, to, chunk) in [
        (Level::Raid4, 5, 4, None),
        (Level::Raid5, 5, 3, None),
        (Level::Raid6, 6, 4, None),
        (Level::Raid5, 5, 4, Some(32u64 << 10)),
    ] {
        let devs = mem_devices(n, 4 * MIB);
        let data = fill(level, &devs, 11);
        let mut asm = Assembly::assemble(devs.clone()).unwrap();
        let size = holds(&asm, to);
        let req = ReshapeRequest {
            chunk_bytes: chunk,
            ..fewer(to)
        };
        let plan = asm
            .reshape_check_sized_with_backup(&req, Path::new("/nonexistent-dir-h66/b"), Some(size))
            .unwrap();
        let vol = mem_file(&plan);
        let file = BackupFile::on_volume("backup", vol.clone());
        asm.reshape_start_with_backup(plan, &file).unwrap();
        let report = asm
            .reshape_run_with_backup(&file, RunOptions::default(), &mut |_| {})
            .unwrap();
        assert_eq!(
            report.spares.len(),
            n - to,
            "{level:?} {n}->{to}: {report:?}"
        );
        drop(asm);
        assert_shrunk(&devs, to, &data[..size as usize], None);
        let asm = Assembly::assemble(devs.clone()).unwrap();
        assert_eq!(
            asm.geometry.chunk_bytes,
            chunk.unwrap_or(CHUNK),
            "{level:?} {n}->{to}"
        );
    }
}
