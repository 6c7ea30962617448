//! A metadata 0.90 RAID 5 and RAID 6 grown by a member, in place, as mdadm
//! grows one without a backup file: the critical section backed up on the
//! new member (mdadm's record and place), the walk run to the end, a stop
//! past the critical section carried on, a crash inside it (the copy torn:
//! garbage over the new rows) put back from the backup, and refusals with
//! nothing written (no backup left, a restripe that gains no data members).

use raidlab_core::Volume;
use raidlab_layout::{Layout, Level};
use raidlab_md::grow_backup::BackupSuper;
use raidlab_md::MetadataVersion;
use raidlab_raid::assemble::{create_with_metadata, Assembly, CreateSpec, Device, NewMember};
use raidlab_raid::grow::ReshapeRequest;
use raidlab_raid::recovery::RunOptions;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const MIB: u64 = 1 << 20;
const CHUNK: u64 = 64 << 10;

fn device(i: usize) -> Device {
    Device {
        path: format!("m{i}"),
        volume: Arc::new(raidlab_devices::MemVolume::new(8 * MIB)),
    }
}

fn pattern(len: u64, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| ((i ^ seed).wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// A 0.90 array of `n` members filled with a pattern, and a new device.
fn filled(level: Level, n: usize) -> (Vec<Device>, Device, Vec<u8>) {
    let devs: Vec<Device> = (0..n).map(device).collect();
    let spec = CreateSpec {
        level,
        layout: Layout::parse(level, None).unwrap(),
        chunk_bytes: CHUNK,
        spares: 0,
        name: String::new(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: false,
    };
    let members = devs
        .iter()
        .map(|d| NewMember {
            device: d.clone(),
            zeroed: true,
        })
        .collect();
    let asm = create_with_metadata(&spec, members, None, MetadataVersion::V0_90).unwrap();
    let data = pattern(asm.geometry.array_bytes(), n as u64);
    let array = asm.array().unwrap();
    array.write_at(&data, 0).unwrap();
    array.flush().unwrap();
    (devs, device(n), data)
}

/// Add `new` and start the grow by one member: the assembly and the
/// sectors mdadm would back up.
fn started(devs: &[Device], new: &Device) -> (Assembly, u64) {
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    let n = asm.geometry.raid_disks + 1;
    asm.add(new.clone(), false).unwrap();
    let req = ReshapeRequest {
        raid_devices: Some(n),
        ..ReshapeRequest::default()
    };
    let plan = asm.reshape_check(&req, 0).unwrap();
    assert_eq!(plan.gap_sectors, 0, "0.90: no data offset to move");
    let od = asm.geometry.data_disks() as u64;
    // mdadm's size: a whole number of old and new stripes (od and od + 1
    // chunks: their product, consecutive counts being coprime).
    assert_eq!(plan.backup_sectors, od * (od + 1) * CHUNK / 512);
    asm.reshape_start(plan).unwrap();
    (asm, plan.backup_sectors)
}

fn read_all(devs: &[Device]) -> Vec<u8> {
    let asm = Assembly::assemble(devs.to_vec()).unwrap();
    let array = asm.array().unwrap();
    let mut got = vec![0u8; array.size() as usize];
    array.read_at(&mut got, 0).unwrap();
    got
}

/// The trailing and leading backup records on `d` (a 0.90 member: data
/// offset 0) of an array using `size` sectors of each member.
fn records(d: &Device, size: u64) -> (Option<BackupSuper>, Option<BackupSuper>) {
    let read = |sector: u64| {
        let mut b = [0u8; 512];
        d.volume.read_at(&mut b, sector * 512).unwrap();
        BackupSuper::parse(&b).unwrap()
    };
    let trailing = read(size - 8);
    let leading = trailing.and_then(|t| read(t.devstart - 8));
    (trailing, leading)
}

/// Grown to the end: the old bytes read back exactly, the new space reads
/// zeros, a check finds no mismatch, no backup is left.
fn assert_grown(devs: &[Device], old_n: usize, data: &[u8]) {
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    assert!(asm.reshape().is_none(), "still mid-reshape");
    assert_eq!(asm.geometry.raid_disks, old_n + 1);
    let size = asm.members[0].sb.size;
    let got = read_all(devs);
    assert!(
        got[..data.len()] == *data,
        "the grown array's old bytes differ"
    );
    assert!(
        got[data.len()..].iter().all(|&b| b == 0),
        "the new space is not zeros"
    );
    let report = asm
        .scrub(false, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(report.mismatch_sectors, 0);
    // The new geometry's last stripes fill the backup's place (md's too):
    // no confirmed backup is left for a later assembly to put back.
    if let (Some(t), Some(l)) = records(&devs[old_n], size) {
        assert!(!t.confirmed_by(&l), "{t:?} {l:?}");
    }
}

#[test]
fn raid5_and_raid6_grow_by_a_member_in_place() {
    for (level, n) in [(Level::Raid5, 4), (Level::Raid6, 5), (Level::Raid5, 3)] {
        let (mut devs, new, data) = filled(level, n);
        let (mut asm, backup) = started(&devs, &new);
        devs.push(new.clone());
        // Before the walk: mdadm's backup on the new member, both copies.
        let size = asm.members[0].sb.size;
        let (t, l) = records(&new, size);
        let (t, l) = (t.unwrap(), l.unwrap());
        assert_eq!((t.arraystart, t.length), (0, backup));
        assert_eq!(t.devstart, size - 8 - backup);
        assert!(t.confirmed_by(&l));
        let report = asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
        assert_eq!(report.data_offset_moved_bytes, 0);
        assert!(!report.resumed && report.checkpoints >= 5, "{report:?}");
        drop(asm);
        assert_grown(&devs, n, &data);
    }
}

/// A crash inside the critical section: the superblocks say position 0,
/// and the new rows of the critical section hold whatever a torn copy left
/// (garbage here, over the old rows of the same data). The backup puts it
/// back and the walk goes on.
#[test]
fn a_crash_inside_the_critical_section_is_put_back_from_the_backup() {
    for (level, n) in [(Level::Raid5, 4), (Level::Raid6, 5)] {
        let (mut devs, new, data) = filled(level, n);
        let (asm, backup) = started(&devs, &new);
        devs.push(new.clone());
        drop(asm);
        let member_bytes = backup * 512 / (n as u64 - if level == Level::Raid6 { 2 } else { 1 });
        for (i, d) in devs.iter().enumerate() {
            d.volume
                .write_at(&pattern(member_bytes, 99 + i as u64), 0)
                .unwrap();
        }
        // Read before anything is put back: the critical section comes
        // from the backup, the rest from the old geometry.
        assert!(read_all(&devs) == data, "read inside the critical section");
        let mut again = Assembly::assemble(devs.clone()).unwrap();
        assert_eq!(again.reshape().unwrap().unwrap().position, 0);
        again
            .reshape_run(RunOptions::default(), &mut |_| {})
            .unwrap();
        drop(again);
        assert_grown(&devs, n, &data);
    }
}

static STOP: AtomicBool = AtomicBool::new(false);

#[test]
fn a_grow_stopped_past_the_critical_section_carries_on() {
    let (mut devs, new, data) = filled(Level::Raid5, 4);
    let (mut asm, backup) = started(&devs, &new);
    devs.push(new.clone());
    STOP.store(false, Ordering::SeqCst);
    let opts = RunOptions {
        stop: Some(&STOP),
        step_bytes: 256 << 10,
        ..RunOptions::default()
    };
    let mut steps = 0;
    let e = asm
        .reshape_run(opts, &mut |_| {
            steps += 1;
            if steps == 3 {
                STOP.store(true, Ordering::SeqCst);
            }
        })
        .unwrap_err();
    assert_eq!(e.kind, raidlab_core::ErrorKind::Interrupted, "{e}");
    drop(asm);
    let mut again = Assembly::assemble(devs.clone()).unwrap();
    let r = again.reshape().unwrap().unwrap();
    assert!(r.position > backup * 512, "{r:?}");
    assert!(read_all(&devs)[..data.len()] == *data, "stopped: read");
    // The backup is let go: nothing is put back over the moved stripes.
    let size = again.members[0].sb.size;
    let (t, l) = records(&new, size);
    assert!(!t.unwrap().confirmed_by(&l.unwrap()));
    let report = again
        .reshape_run(RunOptions::default(), &mut |_| {})
        .unwrap();
    assert!(report.resumed && report.resumed_from == r.position);
    drop(again);
    assert_grown(&devs, 4, &data);
}

/// Inside the critical section with no backup left: refused as mdadm
/// refuses, and nothing on any member changes.
#[test]
fn no_backup_inside_the_critical_section_is_refused_with_nothing_written() {
    let (mut devs, new, _) = filled(Level::Raid5, 4);
    let (asm, _) = started(&devs, &new);
    devs.push(new.clone());
    let size = asm.members[0].sb.size;
    drop(asm);
    new.volume.write_at(&[0u8; 512], (size - 8) * 512).unwrap();
    let before: Vec<Vec<u8>> = devs
        .iter()
        .map(|d| {
            let mut b = vec![0u8; d.volume.size() as usize];
            d.volume.read_at(&mut b, 0).unwrap();
            b
        })
        .collect();
    let mut again = Assembly::assemble(devs.clone()).unwrap();
    let e = again
        .reshape_run(RunOptions::default(), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("Failed to find backup of critical section"),
        "{e}"
    );
    for (d, b) in devs.iter().zip(&before) {
        let mut now = vec![0u8; d.volume.size() as usize];
        d.volume.read_at(&mut now, 0).unwrap();
        assert!(now == *b, "{} changed", d.path);
    }
}

/// A 0.90 restripe that gains no data members (a new chunk) still needs
/// mdadm's backup file: refused, nothing written.
#[test]
fn a_090_chunk_change_is_refused() {
    let (devs, _, _) = filled(Level::Raid5, 4);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    let req = ReshapeRequest {
        chunk_bytes: Some(32 << 10),
        ..ReshapeRequest::default()
    };
    let e = asm.reshape_check(&req, 0).unwrap_err().to_string();
    assert!(
        e.contains("--backup-file") && e.contains("nothing was changed"),
        "{e}"
    );
}
