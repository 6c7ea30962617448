//! A metadata 0.90 RAID 5/6 restriped over the same members (a new chunk,
//! a new layout) with mdadm's backup file: read back exactly and clean;
//! power cut at every member write of the run (backup written but not
//! named, window half restriped, position committed with the backup still
//! named), a third of them cut again inside the resume, and resumed from
//! the file; a stop inside a window refused a read without the file (md's
//! rule) and read exact with it put back; and the files mdadm refuses,
//! refused with nothing written.

mod md090;
use md090::*;
use raidlab_core::SliceVolume;
use raidlab_core::Volume;
use raidlab_devices::fault::FaultVolume;
use raidlab_devices::MemVolume;
use raidlab_layout::{Layout, Level};
use raidlab_md::grow_backup::BackupSuper;
use raidlab_raid::assemble::{Assembly, Device};
use raidlab_raid::grow::{BackupFile, ReshapePlan, ReshapeRequest};
use raidlab_raid::recovery::RunOptions;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

fn chunk(bytes: u64) -> ReshapeRequest {
    ReshapeRequest {
        chunk_bytes: Some(bytes),
        ..ReshapeRequest::default()
    }
}

fn layout(name: &str) -> ReshapeRequest {
    ReshapeRequest {
        layout: Some(name.into()),
        ..ReshapeRequest::default()
    }
}

/// The plan, checked with a backup file path that does not exist.
fn plan(asm: &Assembly, req: &ReshapeRequest) -> ReshapePlan {
    asm.reshape_check_with_backup(req, Path::new("/nonexistent-dir-h64/backup"))
        .unwrap()
}

/// Restriped to the end: the bytes read back exactly in the new
/// geometry, a check finds nothing to fix, the file's record is let go.
fn assert_restriped(devs: &[Device], data: &[u8], chunk: u64, layout: u32, file: &dyn Volume) {
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    assert!(asm.reshape().is_none(), "still mid-reshape");
    let sb = &asm.members[0].sb;
    assert_eq!((u64::from(sb.chunksize) * 512, sb.layout), (chunk, layout));
    assert!(read_all(devs) == data, "restriped bytes differ");
    let report = asm
        .scrub(false, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(report.mismatch_sectors, 0);
    let mut b = [0u8; 512];
    file.read_at(&mut b, 0).unwrap();
    let r = BackupSuper::parse(&b).unwrap().unwrap();
    assert_eq!((r.length, r.length2), (0, 0), "{r:?}");
}

fn md_layout(level: Level, name: &str) -> u32 {
    match Layout::parse(level, Some(name)).unwrap() {
        Layout::Parity(p) => p.md_value(),
        l => panic!("{l:?}"),
    }
}

#[test]
fn raid5_chunk_and_layout_and_raid6_layout_restriped_with_a_backup_file() {
    let cases = [
        (Level::Raid5, 4, chunk(32 << 10), 32 << 10, "left-symmetric"),
        (Level::Raid5, 3, chunk(16 << 10), 16 << 10, "left-symmetric"),
        (
            Level::Raid5,
            5,
            layout("right-asymmetric"),
            CHUNK,
            "right-asymmetric",
        ),
        (
            Level::Raid6,
            5,
            layout("left-asymmetric"),
            CHUNK,
            "left-asymmetric",
        ),
    ];
    for (level, n, req, new_chunk, new_layout) in cases {
        let devs = mem_devices(n, 8 * MIB);
        let data = fill(level, &devs, 7);
        let mut asm = Assembly::assemble(devs.clone()).unwrap();
        let plan = plan(&asm, &req);
        let vol = mem_file(&plan);
        let file = BackupFile::on_volume("backup", vol.clone());
        asm.reshape_start_with_backup(plan, &file).unwrap();
        // Before any window moves: the first one named in the record.
        let mut b = [0u8; 512];
        vol.read_at(&mut b, 0).unwrap();
        let r = BackupSuper::parse(&b).unwrap().unwrap();
        assert_eq!(
            (r.devstart, r.arraystart, r.length),
            (8, 0, plan.backup_sectors)
        );
        assert_eq!(r.devstart2, plan.backup_sectors);
        let report = asm
            .reshape_run_with_backup(&file, RunOptions::default(), &mut |_| {})
            .unwrap();
        assert!(!report.resumed && report.checkpoints >= 4, "{report:?}");
        drop(asm);
        assert_restriped(&devs, &data, new_chunk, md_layout(level, new_layout), &*vol);
    }
}

/// What the old geometry alone reads at array bytes `range` of the
/// stopped restripe on `devs` (each member in its created role): what a
/// read of it answered there before md's rule refused it.
fn old_geometry_read(devs: &[Device], range: Range<u64>) -> Vec<u8> {
    let r = Assembly::assemble(devs.to_vec())
        .unwrap()
        .reshape()
        .unwrap()
        .unwrap();
    let areas = devs
        .iter()
        .map(|d| {
            let area = SliceVolume::new(d.volume.clone(), 0, r.old.member_bytes).unwrap();
            Some(Arc::new(area) as Arc<dyn Volume>)
        })
        .collect();
    let old = raidlab_raid::Array::new("old geometry", r.old, areas).unwrap();
    let mut got = vec![0u8; (range.end - range.start) as usize];
    old.read_at(&mut got, range.start).unwrap();
    got
}

/// Power cut at the `w`-th write (members and file) of a start and run;
/// then, when `read` and the cut left the reshape recorded, the array read
/// without the file (refused) and with it (put back, exact); then a resume
/// from the file. Whether the cut came, and whether it left a window half
/// restriped (what the old geometry reads above the position is not the
/// data).
fn cut_at(
    level: Level,
    n: usize,
    req: &ReshapeRequest,
    w: u64,
    seed: u64,
    read: bool,
) -> (bool, bool) {
    let (devs, faults) = fault_devices(n, 2 * MIB);
    let data = fill(level, &devs, 7);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    let plan = plan(&asm, req);
    drop(asm);
    let inner: Arc<dyn Volume> = mem_file(&plan);
    let fvol = Arc::new(FaultVolume::with_volatile_cache(inner));
    let all: Vec<Fault> = faults.iter().cloned().chain([fvol.clone()]).collect();
    // Power goes at write `at` of `work`; what the cut leaves is decided
    // by `seed`.
    let cut = |at: u64, seed: u64, work: &mut dyn FnMut()| md090::cut_at(&all, at, seed, work);
    let file = BackupFile::on_volume("backup", fvol.clone());
    let tripped = cut(w, seed, &mut || {
        let mut asm = Assembly::assemble(devs.clone()).unwrap();
        let _ = asm
            .reshape_start_with_backup(plan, &file)
            .and_then(|()| asm.reshape_run_with_backup(&file, RunOptions::default(), &mut |_| {}));
    });
    let mut inside = false;
    let stopped = Assembly::assemble(devs.clone())
        .unwrap()
        .reshape()
        .map(|r| r.unwrap());
    if let (Some(r), true) = (stopped, read) {
        let window = r.position..(r.position + plan.backup_sectors * 512).min(r.array_bytes());
        inside = old_geometry_read(&devs, window.clone())
            != data[window.start as usize..window.end as usize];
        read_refused(&devs);
        assert!(
            read_all_with(&devs, &file) == data,
            "{level:?} cut at write {w} (window {window:?} half restriped: {inside}): read with the file, bytes differ"
        );
    }
    if tripped && w % 3 == 0 {
        // A second cut, inside the resume (the put-back, its commit, the
        // first window after it).
        cut(1 + w * 13 % 60, !seed, &mut || {
            let mut asm = Assembly::assemble(devs.clone()).unwrap();
            if asm.reshape().is_some() {
                let _ = asm.reshape_run_with_backup(&file, RunOptions::default(), &mut |_| {});
            }
        });
    }
    let mut again = Assembly::assemble(devs.clone()).unwrap();
    if again.reshape().is_some() {
        again
            .reshape_run_with_backup(&file, RunOptions::default(), &mut |_| {})
            .unwrap_or_else(|e| panic!("{level:?} cut at write {w}: resume: {e}"));
    }
    drop(again);
    assert!(
        read_all(&devs) == data,
        "{level:?} cut at write {w}: bytes differ"
    );
    let mut again = Assembly::assemble(devs.clone()).unwrap();
    if again.reshape().is_none() {
        let report = again
            .scrub(false, RunOptions::default(), &mut |_| {})
            .unwrap();
        assert_eq!(report.mismatch_sectors, 0, "{level:?} cut at write {w}");
    }
    (tripped, inside)
}

#[test]
fn a_power_cut_at_any_write_of_the_walk_resumes_from_the_backup_file() {
    for (level, n, req) in [
        (Level::Raid5, 4, chunk(32 << 10)),
        (Level::Raid6, 5, layout("right-symmetric")),
    ] {
        let mut w = 1;
        let mut cuts = 0;
        while cut_at(level, n, &req, w, w * 7919, false).0 {
            cuts += 1;
            // Every write early on (the start and the first windows), then
            // a sample: a window's phases repeat.
            w += if w < 120 { 1 } else { 5 };
        }
        eprintln!("{level:?}: {cuts} runs cut (write {w} of the last, uncut)");
        assert!(cuts > 100, "{level:?}: only {cuts} cuts");
    }
}

/// A restripe stopped inside a window (a power cut between its first
/// new-geometry write and the commit past it) reads that window wrong
/// through the superblocks alone, with no error: read without its file it
/// is refused, as md refuses to assemble it; given the file, the window is
/// put back and the array reads exact, and a resume then finishes it.
#[test]
fn a_stop_inside_a_window_is_refused_without_its_file_and_read_exact_with_it() {
    let (level, n, req) = (Level::Raid5, 4, chunk(32 << 10));
    let (mut w, mut cuts, mut inside) = (1, 0, 0);
    loop {
        let (tripped, torn) = cut_at(level, n, &req, w, w * 7919, true);
        if !tripped {
            break;
        }
        cuts += 1;
        inside += usize::from(torn);
        w += 3;
    }
    eprintln!("{cuts} runs cut, {inside} inside a window");
    // The premise: many cuts landed inside a window, where the old
    // geometry reads half-restriped bytes.
    assert!(inside >= 10, "only {inside} of {cuts} cuts inside a window");
}

/// Every member's bytes, and the file's.
fn snapshot_and_file(devs: &[Device], file: &dyn Volume) -> Vec<Vec<u8>> {
    let mut all = snapshot(devs);
    let mut b = vec![0u8; file.size() as usize];
    file.read_at(&mut b, 0).unwrap();
    all.push(b);
    all
}

/// A RAID 5 mid-restripe (stopped after two windows), its backup file.
fn stopped_mid_walk() -> (Vec<Device>, Arc<MemVolume>, Vec<u8>) {
    let devs = mem_devices(4, 8 * MIB);
    let data = fill(Level::Raid5, &devs, 7);
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    let plan = plan(&asm, &chunk(32 << 10));
    let vol = mem_file(&plan);
    let file = BackupFile::on_volume("backup", vol.clone());
    asm.reshape_start_with_backup(plan, &file).unwrap();
    static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
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
                if windows == 2 {
                    STOP.store(true, std::sync::atomic::Ordering::SeqCst);
                }
            },
        )
        .unwrap_err();
    assert_eq!(e.kind, raidlab_core::ErrorKind::Interrupted, "{e}");
    (devs, vol, data)
}

/// `shown` as the backup file is refused with `want` in the message, and
/// nothing on the members or in the file changes.
fn refused_unchanged(devs: &[Device], shown: Arc<MemVolume>, want: &[&str]) {
    let before = snapshot_and_file(devs, &*shown);
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    let f = BackupFile::on_volume("backup", shown.clone());
    let e = asm
        .reshape_run_with_backup(&f, RunOptions::default(), &mut |_| {})
        .unwrap_err()
        .to_string();
    for w in want {
        assert!(e.contains(w) && e.contains("nothing was changed"), "{e}");
    }
    drop(asm);
    assert!(
        snapshot_and_file(devs, &*shown) == before,
        "something changed: {e}"
    );
}

#[test]
fn a_stopped_restripe_carries_on_and_bad_files_are_refused_with_nothing_written() {
    let (devs, vol, data) = stopped_mid_walk();
    // Stopped cleanly between windows, which the superblocks cannot tell
    // from a stop inside one: without the file the read is refused (md's
    // rule); with it, put back, the moved windows read in the new geometry
    // and the rest in the old; a new assembly needs the file again.
    read_refused(&devs);
    let file = BackupFile::on_volume("backup", vol.clone());
    assert!(read_all_with(&devs, &file) == data, "stopped: read");
    read_refused(&devs);
    // Without the file: mdadm's reason.
    let before = snapshot_and_file(&devs, &*vol);
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    let e = asm
        .reshape_run(RunOptions::default(), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--backup-file") && e.contains("nothing was changed"),
        "{e}"
    );
    drop(asm);
    assert!(snapshot_and_file(&devs, &*vol) == before);
    let record = |v: &MemVolume| {
        let mut b = [0u8; 512];
        v.read_at(&mut b, 0).unwrap();
        BackupSuper::parse(&b).unwrap().unwrap()
    };
    let copy = |edit: &dyn Fn(&mut BackupSuper)| {
        let c = Arc::new(MemVolume::new(vol.size()));
        let mut all = vec![0u8; vol.size() as usize];
        vol.read_at(&mut all, 0).unwrap();
        c.write_at(&all, 0).unwrap();
        let mut r = record(&c);
        edit(&mut r);
        c.write_at(&r.to_bytes(), 0).unwrap();
        c
    };
    // Another array's.
    let other = copy(&|r| r.set_uuid[0] ^= 0xff);
    refused_unchanged(&devs, other, &["another array", "Wrong uuid"]);
    // Older than the superblocks by more than mdadm's window.
    let old = copy(&|r| r.mtime -= 3 * 3600);
    refused_unchanged(&devs, old, &["too-old timestamp"]);
    // Let go: nothing covers the position.
    let gone = copy(&|r| {
        r.length = 0;
        r.length2 = 0
    });
    refused_unchanged(&devs, gone, &["Failed to find backup of critical section"]);
    // Fields no file of this reshape holds (past the array, or where
    // a sum would overflow), in whichever section the walk left named
    // (it lets a window's section go once the position has passed it).
    let wild = copy(&|r| {
        r.arraystart = u64::MAX - 3;
        r.arraystart2 = u64::MAX - 3
    });
    refused_unchanged(&devs, wild, &["do not fit"]);
    let past = copy(&|r| {
        r.arraystart += 1 << 40;
        r.arraystart2 += 1 << 40
    });
    refused_unchanged(&devs, past, &["do not fit"]);
    // Too small for the two sections.
    let small = Arc::new(MemVolume::new(vol.size() / 2));
    let mut half = vec![0u8; small.size() as usize];
    vol.read_at(&mut half, 0).unwrap();
    small.write_at(&half, 0).unwrap();
    refused_unchanged(&devs, small, &["too small"]);
    // The right file: carried on to the end, exact and clean.
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    let file = BackupFile::on_volume("backup", vol.clone());
    let report = asm
        .reshape_run_with_backup(&file, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert!(report.resumed, "{report:?}");
    drop(asm);
    assert_restriped(
        &devs,
        &data,
        32 << 10,
        md_layout(Level::Raid5, "left-symmetric"),
        &*vol,
    );
}

#[test]
fn backup_file_paths_mdadm_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let devs: Vec<Device> = (0..4)
        .map(|i| {
            let p = dir.path().join(format!("m{i}"));
            Device {
                path: p.display().to_string(),
                volume: Arc::new(
                    raidlab_devices::file::FileVolume::create_sparse(&p, 8 * MIB).unwrap(),
                ),
            }
        })
        .collect();
    fill(Level::Raid5, &devs, 7);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    let before = snapshot(&devs);
    let e = asm
        .reshape_check_with_backup(&chunk(32 << 10), Path::new(&devs[2].path))
        .unwrap_err()
        .to_string();
    assert!(e.contains("backup file must NOT be on the array"), "{e}");
    let exists = dir.path().join("old-backup");
    std::fs::write(&exists, b"x").unwrap();
    let e = asm
        .reshape_check_with_backup(&chunk(32 << 10), &exists)
        .unwrap_err()
        .to_string();
    assert!(e.contains("File exists"), "{e}");
    // A grow by members has no use for one.
    let e = asm
        .reshape_check_with_backup(
            &ReshapeRequest {
                raid_devices: Some(5),
                ..ReshapeRequest::default()
            },
            &dir.path().join("new"),
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("nothing was changed"), "{e}");
    // Without one: mdadm's reason.
    let e = asm
        .reshape_check(&chunk(32 << 10), 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("need backup-file"), "{e}");
    let e = BackupFile::open(&dir.path().join("missing"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no such file"), "{e}");
    drop(asm);
    assert!(snapshot(&devs) == before);
}
