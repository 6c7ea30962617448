//! A served array acknowledges a flush (or a FUA write) only once the members
//! it took out meanwhile are recorded faulty in the superblocks, as md holds
//! such a write until its metadata says so: a crash right after the
//! acknowledgement must not assemble the dead member, whose data is older
//! than the acknowledged write, as active. The crash here is the members read
//! back as they are, with no poll and no stop in between.

mod common;

use raidlab_core::Volume;
use raidlab_devices::{FaultVolume, MemVolume};
use raidlab_layout::Level;
use raidlab_raid::assemble::{Assembly, Device, MemberState};
use raidlab_raid::live::LiveArray;
use std::sync::Arc;

const MIB: u64 = 1 << 20;

fn mirror() -> (
    Vec<Arc<FaultVolume<MemVolume>>>,
    Vec<Device>,
    Arc<LiveArray>,
) {
    let (faults, devs) = common::fault_members(2);
    let mut asm = common::create_with(Level::Raid1, &devs, |s| s.chunk_bytes = 0);
    asm.mark_dirty().unwrap();
    let array = Arc::new(asm.array().unwrap());
    (faults, devs, LiveArray::new(asm, array))
}

/// The state the superblocks on the members give `path` now.
fn state_after_crash(devs: &[Device], path: &str) -> MemberState {
    let asm = Assembly::assemble(devs.to_vec()).unwrap();
    asm.members
        .iter()
        .find(|m| m.device.path == path)
        .map(|m| m.state)
        .unwrap()
}

#[test]
fn a_flush_is_acknowledged_after_the_dead_member_is_recorded_faulty() {
    let (faults, devs, live) = mirror();
    let v = live.volume();
    faults[1].fail_all(true);
    v.write_at(&[0x44; 8192], MIB).unwrap();
    v.flush().unwrap();
    faults[1].fail_all(false);
    assert_ne!(
        state_after_crash(&devs, "d1"),
        MemberState::Active,
        "d1 missed an acknowledged, flushed write"
    );
    let said = live.poll();
    assert!(
        said.iter()
            .any(|s| s.contains("d1 (role 1) failed and is marked faulty")),
        "the next poll says what the flush recorded: {said:?}"
    );
}

#[test]
fn a_fua_write_is_acknowledged_after_the_dead_member_is_recorded_faulty() {
    let (faults, devs, live) = mirror();
    let v = live.volume();
    faults[0].fail_all(true);
    v.write_at_fua(&[0x55; 4096], 2 * MIB).unwrap();
    faults[0].fail_all(false);
    assert_ne!(state_after_crash(&devs, "d0"), MemberState::Active);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    let mut b = vec![0u8; 4096];
    asm.array().unwrap().read_at(&mut b, 2 * MIB).unwrap();
    assert_eq!(
        b,
        vec![0x55; 4096],
        "the array assembled after the crash reads the write"
    );
}
