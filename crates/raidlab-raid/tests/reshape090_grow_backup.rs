//! A metadata 0.90 RAID 5/6 grown to more members (with a new chunk or
//! layout in the same reshape, or not) given mdadm's `--backup-file`: the
//! critical section backed up in the file (one section at 4 KiB, named by
//! the record at byte 0), none on the new members, as mdadm leaves the
//! spares out when given a file. Read back exactly and clean; power cut at
//! every write (members and file) of the start and the walk's first
//! stretch, a third of them cut again inside the resume, and resumed from
//! the file; a resume or a read without the file inside the critical
//! section, or with another array's file, refused with nothing written
//! (md's rule), past it read exact without the file.

mod md090;
use md090::*;
use raidlab_core::Volume;
use raidlab_devices::fault::FaultVolume;
use raidlab_layout::{Layout, Level};
use raidlab_md::grow_backup::BackupSuper;
use raidlab_md::sb090::{self, Sb090};
use raidlab_raid::assemble::{Assembly, Device};
use raidlab_raid::grow::{BackupFile, ReshapePlan, ReshapeRequest};
use raidlab_raid::recovery::RunOptions;
use std::path::Path;
use std::sync::Arc;

/// A 0.90 superblock's 64 KiB at the member's end: with it the component
/// is a whole number of MiB, which a 128 KiB chunk divides (md's rule).
const SUPER_ROOM: u64 = 64 << 10;

fn grow(n: usize, chunk: Option<u64>, layout: Option<&str>) -> ReshapeRequest {
    ReshapeRequest {
        raid_devices: Some(n),
        chunk_bytes: chunk,
        layout: layout.map(Into::into),
        ..ReshapeRequest::default()
    }
}

fn md_layout(level: Level, name: &str) -> u32 {
    match Layout::parse(level, Some(name)).unwrap() {
        Layout::Parity(p) => p.md_value(),
        l => panic!("{l:?}"),
    }
}

/// The array of the first `n` of `devs`, the others added as spares, and
/// the grow checked with a backup file: the assembly and the plan.
fn checked(devs: &[Device], n: usize, req: &ReshapeRequest) -> (Assembly, ReshapePlan) {
    let mut asm = Assembly::assemble(devs[..n].to_vec()).unwrap();
    for d in &devs[n..] {
        asm.add(d.clone(), false).unwrap();
    }
    let plan = asm
        .reshape_check_with_backup(req, Path::new("/nonexistent-dir-h72/backup"))
        .unwrap();
    (asm, plan)
}

/// (level, members before, request, new chunk, new layout name)
fn cases() -> Vec<(Level, usize, ReshapeRequest, u64, &'static str)> {
    vec![
        (
            Level::Raid5,
            4,
            grow(5, Some(32 << 10), None),
            32 << 10,
            "left-symmetric",
        ),
        (
            Level::Raid5,
            3,
            grow(4, Some(128 << 10), None),
            128 << 10,
            "left-symmetric",
        ),
        (
            Level::Raid5,
            4,
            grow(5, None, Some("right-asymmetric")),
            CHUNK,
            "right-asymmetric",
        ),
        (
            Level::Raid6,
            5,
            grow(6, Some(128 << 10), Some("left-asymmetric")),
            128 << 10,
            "left-asymmetric",
        ),
        // A plain grow by members: mdadm takes the file for it too.
        (
            Level::Raid5,
            3,
            grow(4, None, None),
            CHUNK,
            "left-symmetric",
        ),
    ]
}

/// Grown to the end: the old bytes read back exactly, the new space reads
/// zeros, the new chunk and layout recorded, a check finds no mismatch.
fn assert_grown(devs: &[Device], data: &[u8], chunk: u64, layout: u32) {
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    assert!(asm.reshape().is_none(), "still mid-reshape");
    assert_eq!(asm.geometry.raid_disks, devs.len());
    let sb = &asm.members[0].sb;
    assert_eq!((u64::from(sb.chunksize) * 512, sb.layout), (chunk, layout));
    let got = read_all(devs);
    assert!(got[..data.len()] == *data, "the grown array's bytes differ");
    assert!(
        got[data.len()..].iter().all(|&b| b == 0),
        "the new space is not zeros"
    );
    let report = asm
        .scrub(false, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(report.mismatch_sectors, 0);
}

fn record_at(vol: &dyn Volume, byte: u64) -> Option<BackupSuper> {
    let mut b = [0u8; 512];
    vol.read_at(&mut b, byte).unwrap();
    BackupSuper::parse(&b).unwrap()
}

#[test]
fn raid5_and_raid6_grown_with_the_critical_section_in_the_backup_file() {
    for (level, n, req, chunk, layout) in cases() {
        let m = req.raid_devices.unwrap();
        let devs = mem_devices(m, 8 * MIB + SUPER_ROOM);
        let data = fill(level, &devs[..n], 7);
        let (mut asm, plan) = checked(&devs, n, &req);
        assert_eq!(plan.gap_sectors, 0, "0.90: no data offset to move");
        let fvol = mem_file(&plan);
        let file = BackupFile::on_volume("backup", fvol.clone());
        asm.reshape_start_with_backup(plan, &file).unwrap();
        drop(asm);
        // The critical section in the file, named from array byte 0, its
        // old bytes at 4 KiB; nothing on the new member.
        let b = record_at(fvol.as_ref(), 0).expect("no record in the file");
        assert_eq!(
            (b.devstart, b.arraystart, b.length, b.two_sections),
            (8, 0, plan.backup_sectors, false),
            "{req:?}"
        );
        let mut asm = Assembly::assemble(devs.clone()).unwrap();
        let size = asm.members[0].sb.size;
        assert!(
            record_at(devs[m - 1].volume.as_ref(), (size - 8) * 512).is_none(),
            "{req:?}: a backup on the new member"
        );
        let r = asm.reshape().unwrap().unwrap();
        assert!(r.forward_critical_section().unwrap() <= plan.backup_sectors * 512);
        let mut saved = vec![0u8; (plan.backup_sectors * 512) as usize];
        fvol.read_at(&mut saved, 4096).unwrap();
        assert!(saved == data[..saved.len()], "{req:?}: the file's bytes");
        let report = asm
            .reshape_run_with_backup(&file, RunOptions::default(), &mut |_| {})
            .unwrap();
        assert!(!report.resumed && report.checkpoints >= 4, "{report:?}");
        drop(asm);
        // Done: the record names nothing any more.
        let b = record_at(fvol.as_ref(), 0).unwrap();
        assert_eq!((b.length, b.length2), (0, 0));
        assert_grown(&devs, &data, chunk, md_layout(level, layout));
    }
}

/// Power cut at the `w`-th write (members and file) of a start and run;
/// then a resume from the file. Whether the cut came.
fn cut_at(level: Level, n: usize, req: &ReshapeRequest, w: u64, seed: u64) -> bool {
    let m = req.raid_devices.unwrap();
    let (devs, faults) = fault_devices(m, 2 * MIB + SUPER_ROOM);
    let data = fill(level, &devs[..n], 7);
    let (asm, plan) = checked(&devs, n, req);
    drop(asm);
    for d in &devs {
        d.volume.flush().unwrap();
    }
    let inner: Arc<dyn Volume> = mem_file(&plan);
    let fvol = Arc::new(FaultVolume::with_volatile_cache(inner));
    let all: Vec<Fault> = faults.iter().cloned().chain([fvol.clone()]).collect();
    let cut = |at: u64, seed: u64, work: &mut dyn FnMut()| md090::cut_at(&all, at, seed, work);
    let file = BackupFile::on_volume("backup", fvol.clone());
    // The spare was added before the cut (its superblock durable): the
    // start is what the cut falls in.
    let tripped = cut(w, seed, &mut || {
        let mut asm = Assembly::assemble(devs.clone()).unwrap();
        let _ = asm
            .reshape_start_with_backup(plan, &file)
            .and_then(|()| asm.reshape_run_with_backup(&file, RunOptions::default(), &mut |_| {}));
    });
    if !torn(&devs).is_empty() {
        return torn_at_the_start(&devs, &file, &data, w) || tripped;
    }
    if let Some(r) = Assembly::assemble(devs.clone()).unwrap().reshape() {
        // md's rule: inside the critical section (in the file only) no
        // read without the file; past it, the in-place walk's reads need
        // none, and read exact.
        let r = r.unwrap();
        if r.position < r.forward_critical_section().unwrap() {
            read_refused(&devs);
        } else {
            assert!(
                read_all(&devs)[..data.len()] == *data,
                "{level:?} {req:?} cut at write {w}: stopped past the critical section, read without the file: bytes differ"
            );
        }
    }
    if tripped && w % 3 == 0 {
        // A second cut, inside the resume (the put-back, its commit, the
        // letting go, the first steps after it).
        cut(1 + w * 13 % 60, !seed, &mut || {
            let mut asm = Assembly::assemble(devs.clone()).unwrap();
            if asm.reshape().is_some() {
                let _ = asm.reshape_run_with_backup(&file, RunOptions::default(), &mut |_| {});
            }
        });
    }
    if !torn(&devs).is_empty() {
        return torn_at_the_start(&devs, &file, &data, w) || tripped;
    }
    let mut again = Assembly::assemble(devs.clone())
        .unwrap_or_else(|e| panic!("{level:?} {req:?} cut at write {w}: assemble: {e}"));
    if again.reshape().is_some() {
        again
            .reshape_run_with_backup(&file, RunOptions::default(), &mut |_| {})
            .unwrap_or_else(|e| panic!("{level:?} {req:?} cut at write {w}: resume: {e}"));
    }
    let grown = again.geometry.raid_disks == m;
    drop(again);
    let got = read_all(&devs);
    assert!(
        got[..data.len()] == *data,
        "{level:?} {req:?} cut at write {w}: bytes differ"
    );
    if grown {
        assert!(
            got[data.len()..].iter().all(|&b| b == 0),
            "{level:?} {req:?} cut at write {w}: the new space is not zeros"
        );
    }
    let mut again = Assembly::assemble(devs.clone()).unwrap();
    let report = again
        .scrub(false, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(
        report.mismatch_sectors, 0,
        "{level:?} {req:?} cut at write {w}"
    );
    tripped
}

#[test]
fn a_power_cut_at_any_write_of_the_grow_resumes_from_the_backup_file() {
    for (level, n, req) in [
        (Level::Raid5, 4, grow(5, Some(32 << 10), None)),
        (
            Level::Raid6,
            5,
            grow(6, Some(32 << 10), Some("left-asymmetric")),
        ),
    ] {
        let mut w = 1;
        let mut cuts = 0;
        while cut_at(level, n, &req, w, w * 7919) {
            cuts += 1;
            // Every write early on (the file, the start's commit, the
            // put-back and the walk's first steps), then a sample.
            w += if w < 120 { 1 } else { 7 };
        }
        eprintln!("{level:?} {req:?}: {cuts} runs cut (write {w} of the last, uncut)");
        assert!(cuts > 100, "{level:?}: only {cuts} cuts");
    }
}

/// Stopped inside the critical section (the superblocks at position 0, the
/// new rows torn): without the file, or with another array's, the resume
/// and a read are refused with nothing written (a read answered the torn
/// rows before md's rule); with it, the read is exact, and past the
/// critical section the grow is carried on to its end without the file.
#[test]
fn a_resume_inside_the_critical_section_needs_the_grows_own_file() {
    let (level, n, req, chunk, layout) = cases().remove(0);
    let m = req.raid_devices.unwrap();
    let devs = mem_devices(m, 8 * MIB + SUPER_ROOM);
    let data = fill(level, &devs[..n], 7);
    let (mut asm, plan) = checked(&devs, n, &req);
    let fvol = mem_file(&plan);
    let file = BackupFile::on_volume("backup", fvol.clone());
    asm.reshape_start_with_backup(plan, &file).unwrap();
    drop(asm);
    let r = Assembly::assemble(devs.clone())
        .unwrap()
        .reshape()
        .unwrap()
        .unwrap();
    // Garbage over the member rows the critical section's new stripes fill.
    let rows = plan.backup_sectors * 512 / r.new.data_disks() as u64;
    for (i, d) in devs.iter().enumerate() {
        d.volume.write_at(&pattern(rows, 99 + i as u64), 0).unwrap();
    }
    let before = snapshot(&devs);
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    let e = asm
        .reshape_run(RunOptions::default(), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--backup-file") && e.contains("nothing was changed"),
        "{e}"
    );
    // Another array's file (its uuid differs).
    let other_devs = mem_devices(m, 8 * MIB + SUPER_ROOM);
    fill(level, &other_devs[..n], 3);
    let (mut other, other_plan) = checked(&other_devs, n, &req);
    let other_vol = mem_file(&other_plan);
    let other_file = BackupFile::on_volume("other", other_vol);
    other
        .reshape_start_with_backup(other_plan, &other_file)
        .unwrap();
    let e = asm
        .reshape_run_with_backup(&other_file, RunOptions::default(), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("another array") && e.contains("nothing was changed"),
        "{e}"
    );
    // An empty file: nothing names the critical section.
    let empty = BackupFile::on_volume("empty", mem_file(&plan));
    let e = asm
        .reshape_run_with_backup(&empty, RunOptions::default(), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("critical section") && e.contains("nothing was changed"),
        "{e}"
    );
    // A read: without the file, refused (the torn rows read as they are
    // before md's rule); with another array's, refused; nothing written.
    drop(asm);
    read_refused(&devs);
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    let e = asm.reshape_put_back(&other_file).unwrap_err().to_string();
    assert!(
        e.contains("another array") && e.contains("nothing was changed"),
        "{e}"
    );
    drop(asm);
    assert!(snapshot(&devs) == before, "a refusal wrote");
    // With the grow's own file: the critical section put back, exact.
    let got = read_all_with(&devs, &file);
    assert!(
        got[..data.len()] == *data,
        "read with the file: bytes differ"
    );
    // Past the critical section now, the put-back's section let go: read
    // without the file too, and carried on without it (md's rule: past
    // the critical section a grow needs no backup).
    assert!(read_all(&devs)[..data.len()] == *data);
    let b = record_at(fvol.as_ref(), 0).unwrap();
    assert_eq!(b.length, 0, "the put-back did not let the section go");
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    let report = asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
    assert!(report.resumed, "{report:?}");
    drop(asm);
    assert_grown(&devs, &data, chunk, md_layout(level, layout));
}

/// A cut inside the start's commit tore a superblock (the new member's
/// descriptor in the disk table changes, past the superblock's first
/// sector; no later commit changes more than that sector): the user names
/// the other members, as mdadm makes them. Nothing had moved, so they
/// read the data exact: at once if they did not record the reshape; at
/// position 0, as md, only given the file (its critical section put back,
/// into the degraded new geometry).
fn torn_at_the_start(devs: &[Device], file: &BackupFile, want: &[u8], w: u64) -> bool {
    let gone = torn(devs);
    assert_eq!(gone.len(), 1, "cut at write {w}: torn {gone:?}");
    eprintln!("cut at write {w}: member {gone:?}'s superblock torn in the start's commit; the rest read exact");
    let rest: Vec<Device> = (0..devs.len())
        .filter(|i| !gone.contains(i))
        .map(|i| devs[i].clone())
        .collect();
    let asm = Assembly::assemble(rest.clone()).unwrap();
    let recorded = asm.reshape().is_some();
    if let Some(r) = asm.reshape() {
        assert_eq!(r.unwrap().position, 0, "cut at write {w}: torn mid-walk");
    }
    drop(asm);
    let got = if recorded {
        read_refused(&rest);
        read_all_with(&rest, file)
    } else {
        read_all(&rest)
    };
    assert!(
        got[..want.len()] == *want,
        "cut at write {w}: torn superblock, the rest read wrong"
    );
    true
}

/// The members whose 0.90 superblock no longer reads: a cut tore it.
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
