//! A spare whose superblock missed a commit (a cut between the members'
//! superblock writes) is assembled from the newest superblock's array-wide
//! fields, as md writes every superblock it keeps from the array's state
//! (`sync_super`): the next commit must not write its older array state
//! with the new event count, where the assembly after it would take the
//! spare's superblock for the newest and lose a reshape's record. Found by
//! the served fault simulation's level changes (seed 1 run 664 of 1,000,
//! issue 36). The device a grow's start gave a new role, whose own
//! superblock the start did not reach, takes that role back at assembly
//! (`Assembly::adopt_roles_missed_at_start`); a plain hot spare stays one.

use raidlab_core::Volume;
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_md::superblock::feature;
use raidlab_md::Superblock;
use raidlab_raid::assemble::{create, Assembly, CreateSpec, Device, MemberState, NewMember};
use raidlab_raid::grow::ReshapeRequest;
use raidlab_raid::recovery::RunOptions;
use std::sync::Arc;

const MIB: u64 = 1 << 20;
/// Bytes at each member's start holding its metadata 1.2 superblock.
const HEAD: usize = 8192;

fn pattern(len: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect()
}

/// A RAID 5 of 3 (of `n` 16 MiB devices, the rest added as spares), filled
/// with a pattern; the devices and the pattern.
fn raid5_with_spares(n: usize) -> (Vec<Device>, Vec<u8>) {
    let devs: Vec<Device> = (0..n)
        .map(|i| Device {
            path: format!("m{i}"),
            volume: Arc::new(raidlab_devices::MemVolume::new(16 * MIB)),
        })
        .collect();
    let spec = CreateSpec {
        level: Level::Raid5,
        layout: Layout::Parity(ParityLayout::LeftSymmetric),
        chunk_bytes: 64 << 10,
        spares: 0,
        name: "behind".into(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: false,
    };
    let members = devs[..3]
        .iter()
        .map(|d| NewMember {
            device: d.clone(),
            zeroed: true,
        })
        .collect();
    let mut asm = create(&spec, members).unwrap();
    for d in &devs[3..] {
        asm.add(d.clone(), false).unwrap();
    }
    let data = pattern(asm.geometry.array_bytes());
    let array = asm.array().unwrap();
    array.write_at(&data, 0).unwrap();
    array.flush().unwrap();
    (devs, data)
}

/// Start a grow of `devs` to 4 members, then put back the superblocks of
/// `missed` as they were before the start: the start's writes to them
/// never landed.
fn start_missing(devs: &[Device], missed: &[usize]) {
    let asm = Assembly::assemble(devs.to_vec()).unwrap();
    let heads: Vec<Vec<u8>> = missed
        .iter()
        .map(|&i| {
            let mut head = vec![0u8; HEAD];
            devs[i].volume.read_at(&mut head, 0).unwrap();
            head
        })
        .collect();
    let mut asm = asm;
    let req = ReshapeRequest {
        raid_devices: Some(4),
        ..ReshapeRequest::default()
    };
    let plan = asm.reshape_check(&req, 0).unwrap();
    asm.reshape_start(plan).unwrap();
    drop(asm);
    for (&i, head) in missed.iter().zip(heads) {
        devs[i].volume.write_at(&head, 0).unwrap();
    }
}

fn read_all(asm: &Assembly) -> Vec<u8> {
    let array = asm.array().unwrap();
    let mut got = vec![0u8; array.size() as usize];
    array.read_at(&mut got, 0).unwrap();
    got
}

fn own_superblock(d: &Device) -> Superblock {
    Superblock::read_from(d.volume.as_ref()).unwrap().unwrap()
}

#[test]
fn the_new_member_that_missed_a_grows_start_takes_its_role_and_a_commit_keeps_the_reshape() {
    let (devs, data) = raid5_with_spares(4);
    start_missing(&devs, &[3]);
    assert!(
        own_superblock(&devs[3]).feature_map & feature::RESHAPE_ACTIVE == 0,
        "the fourth device's own superblock is the spare's it was"
    );
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    assert!(
        matches!(asm.reshape(), Some(Ok(_))),
        "the reshape is recorded"
    );
    assert_eq!(asm.members[3].state, MemberState::Active);
    assert_eq!(asm.members[3].role, Some(3), "the role the start gave it");
    assert!(asm.missing().is_empty());
    // Any commit before the walk resumes: the served array's dirty mark
    // before its first write, an offline verb.
    asm.mark_dirty().unwrap();
    drop(asm);
    for d in &devs {
        let sb = own_superblock(d);
        assert!(
            sb.feature_map & feature::RESHAPE_ACTIVE != 0 && sb.raid_disks == 4,
            "{}: after the next commit every superblock records the grow to 4 (raid_disks {}, feature map {:#x})",
            d.path,
            sb.raid_disks,
            sb.feature_map
        );
    }
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    let r = asm.reshape().map(|r| r.map(|r| r.new.raid_disks));
    assert!(
        matches!(r, Some(Ok(4))),
        "the reshape to 4 members is still recorded: {:?}, the array read as {} of {}",
        r.map(|r| r.map_err(|e| e.to_string())),
        asm.geometry.level.name(),
        asm.geometry.raid_disks
    );
    assert_eq!(asm.members[3].role, Some(3));
    // Dirty mid-reshape: md carries the reshape on first (its walk
    // computes every moved stripe's parity afresh) and resyncs after; a
    // resync now would compare one geometry over both, so it is refused.
    assert_resync_refused_mid_reshape(&mut asm);
    asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
    drop(asm);
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    assert!(asm.reshape().is_none());
    assert_eq!(asm.geometry.raid_disks, 4);
    assert!(
        read_all(&asm)[..data.len()] == data[..],
        "the data after the grow"
    );
    let r = asm
        .scrub(false, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(r.mismatch_sectors, 0);
}

#[test]
fn a_hot_spare_that_missed_a_grows_start_stays_a_spare_and_keeps_the_reshape_recorded() {
    // Five devices: the fourth takes the new role, the fifth is a hot spare
    // the start commit did not reach either.
    let (devs, data) = raid5_with_spares(5);
    start_missing(&devs, &[4]);
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    assert_eq!(asm.members[4].state, MemberState::Spare);
    assert_eq!(asm.members[3].role, Some(3));
    asm.mark_dirty().unwrap();
    drop(asm);
    let spare = own_superblock(&devs[4]);
    assert!(
        spare.feature_map & feature::RESHAPE_ACTIVE != 0 && spare.raid_disks == 4,
        "the spare is written with the array's state (raid_disks {}, feature map {:#x})",
        spare.raid_disks,
        spare.feature_map
    );
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    assert!(matches!(asm.reshape(), Some(Ok(_))));
    assert_eq!(asm.members[4].state, MemberState::Spare);
    assert_resync_refused_mid_reshape(&mut asm);
    asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
    drop(asm);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    assert_eq!(asm.geometry.raid_disks, 4);
    assert_eq!(asm.members[4].state, MemberState::Spare);
    assert!(read_all(&asm)[..data.len()] == data[..]);
}

fn assert_resync_refused_mid_reshape(asm: &mut Assembly) {
    let e = asm
        .resync(RunOptions::default(), &mut |_| {})
        .expect_err("a resync of an array mid-reshape");
    assert!(e.to_string().contains("middle of a reshape"), "{e}");
}
