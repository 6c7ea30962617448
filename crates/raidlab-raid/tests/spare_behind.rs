//! A spare whose superblock missed a commit (a cut between the members'
//! superblock writes: here the start of a grow onto it) is assembled as the
//! spare its own superblock says it is, and the next commit must not write
//! its older array state with the new event count: the assembly after that
//! would take the spare's superblock for the newest and lose the reshape's
//! record. Found by the served fault simulation's level changes (seed 1 run
//! 664 of 1,000, issue 36), when the simulation marked the array dirty
//! before the walk resumed; the walk's start retakes the role
//! (`retake_new_roles`) and commits the start again, so a server that
//! resumes the walk before anything else commits is safe. Any commit before
//! that (this test: the dirty mark) loses the record. Ignored: not fixed
//! (catching the spare up at assembly hides it from `retake_new_roles`,
//! which finds such a spare by its missing reshape flag; see the report).

use raidlab_core::Volume;
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_raid::assemble::{create, Assembly, CreateSpec, Device, MemberState, NewMember};
use raidlab_raid::grow::ReshapeRequest;
use std::sync::Arc;

const MIB: u64 = 1 << 20;
/// Bytes at each member's start holding its metadata 1.2 superblock.
const HEAD: usize = 8192;

#[test]
#[ignore]
fn a_spare_that_missed_a_grows_start_keeps_the_reshape_recorded_after_the_next_commit() {
    let devs: Vec<Device> = (0..4)
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
    asm.add(devs[3].clone(), false).unwrap();
    let mut head = vec![0u8; HEAD];
    devs[3].volume.read_at(&mut head, 0).unwrap();
    let req = ReshapeRequest {
        raid_devices: Some(4),
        ..ReshapeRequest::default()
    };
    let plan = asm.reshape_check(&req, 0).unwrap();
    asm.reshape_start(plan).unwrap();
    drop(asm);
    // The start's write to the spare never landed.
    devs[3].volume.write_at(&head, 0).unwrap();
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    assert!(asm.reshape().is_some(), "the reshape is recorded");
    assert_eq!(asm.members[3].state, MemberState::Spare);
    // Any commit: the served array's dirty mark before its first write.
    asm.mark_dirty().unwrap();
    drop(asm);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    let r = asm.reshape().map(|r| r.map(|r| r.new.raid_disks));
    assert!(
        matches!(r, Some(Ok(4))),
        "the reshape to 4 members must still be recorded after the next commit: {:?}, the array read as {} of {}",
        r.map(|r| r.map_err(|e| e.to_string())),
        asm.geometry.level.name(),
        asm.geometry.raid_disks
    );
    assert_eq!(asm.members[3].state, MemberState::Spare);
}
