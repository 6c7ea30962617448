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
use raidlab_raid::assemble::{
    create_with_journal, Assembly, CreateSpec, Device, MemberState, NewMember,
};
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

/// A RAID 5 of three members with md's partial parity log, started for
/// writing as `serve` and the verbs start it.
fn logged_raid5() -> (Vec<Arc<FaultVolume<MemVolume>>>, Vec<Device>) {
    let (faults, devs) = common::fault_members(3);
    common::create_with(Level::Raid5, &devs, |s| s.ppl = true);
    (faults, devs)
}

/// A member taken out by a write is recorded faulty before a partial parity
/// log entry that covered writes made without it is overwritten (md holds
/// its stripes until the superblocks say so). The torture harness found the
/// loss when it was not: the member came back active after a power cut, old
/// beside new parity, with no entry left to mend the stripe (seed 1 run 1327,
/// `raidlab-sim/tests/regressions`). Here nothing records it on the request's
/// way back (a plain write, no flush): only the log's overwrite can.
#[test]
fn a_partial_parity_log_is_let_go_only_after_the_member_taken_out_is_recorded() {
    let (faults, devs) = logged_raid5();
    let started = common::start_writable(&devs);
    faults[1].fail_all(true);
    // Two log writes on each parity member: the second overwrites the first.
    started.array.write_at(&[0x66; 256 << 10], 0).unwrap();
    started.array.write_at(&[0x67; 256 << 10], 4 * MIB).unwrap();
    assert_eq!(started.array.failed_members(), vec![1]);
    faults[1].fail_all(false);
    assert_ne!(
        state_after_crash(&devs, "d1"),
        MemberState::Active,
        "d1 is active on disk after its log entries were let go"
    );
    std::mem::forget(started); // the crash: no stop
}

/// The same for a served array, which records through its `LiveArray`. Its
/// volume records after every write as well, so the write here goes to the
/// array below it: only the recorder the `LiveArray` gave the array can have
/// recorded the member.
#[test]
fn a_served_array_records_the_member_before_letting_its_log_go() {
    let (faults, devs) = logged_raid5();
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    asm.start_ppl().unwrap();
    asm.mark_dirty().unwrap();
    let array = Arc::new(asm.array().unwrap());
    let live = LiveArray::new(asm, array);
    faults[2].fail_all(true);
    live.array().write_at(&[0x68; 256 << 10], 0).unwrap();
    live.array().write_at(&[0x69; 256 << 10], 4 * MIB).unwrap();
    faults[2].fail_all(false);
    assert_ne!(state_after_crash(&devs, "d2"), MemberState::Active);
}

/// With md's write journal: a journaled write records the members taken out
/// before it may reclaim journal space (which lets go of what the space
/// covered), so the write after the one that took a member out finds it
/// recorded.
#[test]
fn a_journaled_write_records_the_member_taken_out_before_it() {
    let (faults, mut devs) = common::fault_members(4);
    devs[3].path = "journal".into();
    let spec = CreateSpec {
        level: Level::Raid5,
        layout: raidlab_layout::Layout::parse(Level::Raid5, None).unwrap(),
        chunk_bytes: 64 << 10,
        spares: 0,
        name: "j".into(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: false,
    };
    let new = |d: &Device| NewMember {
        device: d.clone(),
        zeroed: true,
    };
    create_with_journal(
        &spec,
        devs[..3].iter().map(new).collect(),
        Some(new(&devs[3])),
    )
    .unwrap();
    let started = common::start_writable(&devs);
    faults[1].fail_all(true);
    started.array.write_at(&[0x6a; 256 << 10], 0).unwrap();
    assert_eq!(started.array.failed_members(), vec![1]);
    started.array.write_at(&[0x6b; 256 << 10], 4 * MIB).unwrap();
    faults[1].fail_all(false);
    assert_ne!(state_after_crash(&devs, "d1"), MemberState::Active);
    std::mem::forget(started); // the crash: no stop
}
