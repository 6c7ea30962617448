//! A metadata 0.90 RAID 5/6 grown to more members with a new chunk or
//! layout in the same reshape, as mdadm makes it without a backup file:
//! its critical section (mdadm's size, a whole number of old and new
//! stripes) backed up on the new members, the rest walked in place. Read
//! back exactly and clean; power cut at every member write of the start
//! and the walk's first stretch (a sample after), a third of them cut again
//! inside the resume, and resumed; and md's refusals kept, with nothing
//! written.

mod md090;
use md090::*;
use raidlab_core::Volume;
use raidlab_layout::{Layout, Level};
use raidlab_md::grow_backup::BackupSuper;
use raidlab_raid::assemble::{Assembly, Device};
use raidlab_raid::grow::{ReshapePlan, ReshapeRequest};
use raidlab_raid::recovery::RunOptions;
use std::path::Path;

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

/// The array of the first `n` of `devs`, the others added as spares and
/// the grow checked: the assembly and the plan.
fn checked(devs: &[Device], n: usize, req: &ReshapeRequest) -> (Assembly, ReshapePlan) {
    let mut asm = Assembly::assemble(devs[..n].to_vec()).unwrap();
    for d in &devs[n..] {
        asm.add(d.clone(), false).unwrap();
    }
    let plan = asm.reshape_check(req, 0).unwrap();
    (asm, plan)
}

/// [`checked`], and the grow started: the plan.
fn start(devs: &[Device], n: usize, req: &ReshapeRequest) -> ReshapePlan {
    let (mut asm, plan) = checked(devs, n, req);
    asm.reshape_start(plan).unwrap();
    plan
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
            3,
            grow(5, Some(32 << 10), None),
            32 << 10,
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
    ]
}

#[test]
fn raid5_and_raid6_grown_with_a_new_chunk_or_layout_in_place() {
    for (level, n, req, chunk, layout) in cases() {
        let m = req.raid_devices.unwrap();
        let devs = mem_devices(m, 8 * MIB + SUPER_ROOM);
        let data = fill(level, &devs[..n], 7);
        let plan = start(&devs, n, &req);
        assert_eq!(plan.gap_sectors, 0, "0.90: no data offset to move");
        // The critical section on the new member, both copies, before any
        // byte moves: mdadm's record 4 KiB before the component's end.
        let asm = Assembly::assemble(devs.clone()).unwrap();
        let size = asm.members[0].sb.size;
        let read = |d: &Device, sector: u64| {
            let mut b = [0u8; 512];
            d.volume.read_at(&mut b, sector * 512).unwrap();
            BackupSuper::parse(&b).unwrap()
        };
        let t = read(&devs[m - 1], size - 8).unwrap();
        let l = read(&devs[m - 1], t.devstart - 8).unwrap();
        assert!(t.confirmed_by(&l));
        assert_eq!((t.arraystart, t.length), (0, plan.backup_sectors));
        let r = asm.reshape().unwrap().unwrap();
        assert!(
            r.forward_critical_section().unwrap() <= plan.backup_sectors * 512,
            "{level:?} {req:?}: the backup misses part of the critical section"
        );
        // A whole number of mdadm's size and of md's resume boundary.
        let mdadm = raidlab_md::grow_backup::mdadm_backup_sectors(
            CHUNK,
            chunk,
            r.old.data_disks() as u64,
            r.new.data_disks() as u64,
        );
        assert_eq!(plan.backup_sectors % mdadm, 0, "{req:?}");
        assert_eq!(plan.backup_sectors * 512 % r.forward_unit(), 0, "{req:?}");
        drop(asm);
        let mut asm = Assembly::assemble(devs.clone()).unwrap();
        let report = asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
        assert!(!report.resumed && report.checkpoints >= 4, "{report:?}");
        drop(asm);
        assert_grown(&devs, &data, chunk, md_layout(level, layout));
    }
}

/// Power cut at the `w`-th member write of a start and run (the new
/// member added before); then a resume. Whether the cut came.
fn cut_at(level: Level, n: usize, req: &ReshapeRequest, w: u64, seed: u64) -> bool {
    let m = req.raid_devices.unwrap();
    let (devs, faults) = fault_devices(m, 2 * MIB + SUPER_ROOM);
    let data = fill(level, &devs[..n], 7);
    let (asm, plan) = checked(&devs, n, req);
    drop(asm);
    let cut = |at: u64, seed: u64, work: &mut dyn FnMut()| md090::cut_at(&faults, at, seed, work);
    let tripped = cut(w, seed, &mut || {
        let mut asm = Assembly::assemble(devs.clone()).unwrap();
        let _ = asm
            .reshape_start(plan)
            .and_then(|()| asm.reshape_run(RunOptions::default(), &mut |_| {}));
    });
    if tripped && w % 3 == 0 {
        // A second cut, inside the resume (the put-back, its commit, the
        // letting go, the first steps after it).
        cut(1 + w * 13 % 60, !seed, &mut || {
            let mut asm = Assembly::assemble(devs.clone()).unwrap();
            if asm.reshape().is_some() {
                let _ = asm.reshape_run(RunOptions::default(), &mut |_| {});
            }
        });
    }
    let mut again = Assembly::assemble(devs.clone()).unwrap();
    if again.reshape().is_some() {
        again
            .reshape_run(RunOptions::default(), &mut |_| {})
            .unwrap_or_else(|e| panic!("{level:?} {req:?} cut at write {w}: resume: {e}"));
    }
    let grown = again.geometry.raid_disks == m;
    drop(again);
    let got = read_all(&devs);
    assert!(
        got[..data.len()] == *data,
        "{level:?} {req:?} cut at write {w}: bytes differ"
    );
    let mut again = Assembly::assemble(devs.clone()).unwrap();
    if grown {
        assert!(
            got[data.len()..].iter().all(|&b| b == 0),
            "{level:?} {req:?} cut at write {w}: the new space is not zeros"
        );
    }
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
fn a_power_cut_at_any_write_of_the_grow_resumes_from_the_critical_section_backup() {
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
            // Every write early on (the backup, the start's commit, the
            // critical section and the walk's first steps), then a sample.
            w += if w < 120 { 1 } else { 7 };
        }
        eprintln!("{level:?} {req:?}: {cuts} runs cut (write {w} of the last, uncut)");
        assert!(cuts > 100, "{level:?}: only {cuts} cuts");
    }
}

/// Every member's bytes.
fn snapshot(devs: &[Device]) -> Vec<Vec<u8>> {
    devs.iter()
        .map(|d| {
            let mut b = vec![0u8; d.volume.size() as usize];
            d.volume.read_at(&mut b, 0).unwrap();
            b
        })
        .collect()
}

#[test]
fn md_refusals_are_kept_with_nothing_written() {
    let devs = mem_devices(5, 8 * MIB + SUPER_ROOM);
    fill(Level::Raid5, &devs[..4], 7);
    let mut asm = Assembly::assemble(devs[..4].to_vec()).unwrap();
    asm.add(devs[4].clone(), false).unwrap();
    let before = snapshot(&devs);
    // A backup file that exists already: mdadm makes its own (with a new
    // file the grow backs up in it, reshape090_grow_backup.rs).
    let e = asm
        .reshape_check_with_backup(&grow(5, Some(32 << 10), None), Path::new("Cargo.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("the file exists") && e.contains("nothing was changed"),
        "{e}"
    );
    // A level change with a new chunk and more members in one reshape:
    // mdadm refuses it.
    let e = asm
        .reshape_check(
            &ReshapeRequest {
                level: Some(Level::Raid6),
                ..grow(5, Some(32 << 10), None)
            },
            0,
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("nothing was changed"), "{e}");
    // A chunk that does not divide the component size (md's rule).
    let e = asm
        .reshape_check(&grow(5, Some(96 << 10), None), 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("nothing was changed"), "{e}");
    // No spare for the new slot.
    let e = asm
        .reshape_check(&grow(6, Some(32 << 10), None), 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("Need 2 spares"), "{e}");
    drop(asm);
    assert!(snapshot(&devs) == before, "a refusal wrote");
}

/// A crash inside the critical section: the superblocks say position 0,
/// and the new rows of the critical section hold whatever a torn copy
/// left (garbage here, over old rows whose bytes the backup holds). Reads
/// take those bytes from the backup; the walk puts it back and goes on.
#[test]
fn a_torn_critical_section_reads_from_the_backup_and_is_put_back() {
    for (level, n, req, chunk, layout) in cases() {
        let m = req.raid_devices.unwrap();
        let devs = mem_devices(m, 8 * MIB + SUPER_ROOM);
        let data = fill(level, &devs[..n], 7);
        let plan = start(&devs, n, &req);
        let r = Assembly::assemble(devs.clone())
            .unwrap()
            .reshape()
            .unwrap()
            .unwrap();
        // The member bytes the critical section's new stripes fill.
        let rows = plan.backup_sectors * 512 / r.new.data_disks() as u64;
        for (i, d) in devs.iter().enumerate() {
            d.volume.write_at(&pattern(rows, 99 + i as u64), 0).unwrap();
        }
        assert!(
            read_all(&devs)[..data.len()] == *data,
            "{level:?} {req:?}: read inside the critical section"
        );
        let mut asm = Assembly::assemble(devs.clone()).unwrap();
        asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
        drop(asm);
        assert_grown(&devs, &data, chunk, md_layout(level, layout));
    }
}
