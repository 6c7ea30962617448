//! The offline management verbs start through the lifecycle
//! (`lifecycle::Managed`): a member whose I/O fails while the start replays
//! the partial parity log is taken out and recorded faulty, as every other
//! start takes it out, and the verb goes on degraded. The verbs' start used
//! to replay the log on its own and fail with the member's raw error.

mod common;

use raidlab_core::Volume;
use raidlab_layout::Level;
use raidlab_raid::assemble::{Assembly, Device, MemberState};
use raidlab_raid::lifecycle::{ManageOptions, Managed, StartOptions, Started};
use raidlab_raid::manage::Added;
use raidlab_raid::recovery::RunOptions;
use std::sync::Arc;

const MIB: u64 = 1 << 20;

fn state_of(devs: &[Device], path: &str) -> MemberState {
    let asm = Assembly::assemble(devs.to_vec()).unwrap();
    asm.members
        .iter()
        .find(|m| m.device.path == path)
        .unwrap()
        .state
}

fn data() -> Vec<u8> {
    (0..2 * MIB as u32).map(|i| (i * 13 + 7) as u8).collect()
}

/// A RAID 5 of four with a partial parity log on fault-injecting members,
/// written and then cut (dropped without a stop), so the log holds entries
/// a start must replay.
fn crashed_raid5_with_ppl() -> (
    Vec<Arc<raidlab_devices::FaultVolume<raidlab_devices::MemVolume>>>,
    Vec<Device>,
) {
    let (faults, devs) = common::fault_members(4);
    common::create_with(Level::Raid5, &devs, |s| s.ppl = true);
    let started = common::start_writable(&devs);
    started.array.write_at(&data(), 0).unwrap();
    started.array.flush().unwrap();
    // Partial-stripe writes, logged before they reach their stripes.
    for stripe in 0..8u64 {
        started
            .array
            .write_at(&[0xa5; 4096], stripe * 192 * 1024 + 4096)
            .unwrap();
    }
    // Flushed, so what reads back is known; the log still holds them.
    started.array.flush().unwrap();
    drop(started); // the cut: the array stays marked dirty
    assert!(!Assembly::assemble(devs.clone()).unwrap().in_sync());
    (faults, devs)
}

fn writing() -> ManageOptions {
    ManageOptions {
        write: true,
        refuse: None,
    }
}

/// `raidlab add` (through the library, as `cmd/manage.rs` runs it) on a
/// RAID 5 whose log replay cannot write one member: that member is taken
/// out and recorded faulty, the new device is added into its role and
/// rebuilt, and the array reads back what was written.
#[test]
fn a_verbs_start_takes_out_a_member_whose_log_replay_writes_fail() {
    let (faults, devs) = crashed_raid5_with_ppl();
    faults[2].fail_writes(0..16 * MIB);

    let managed = Managed::start(Assembly::assemble(devs.clone()).unwrap(), writing())
        .expect("the start takes d2 out and goes on");
    let mut managed = managed;
    assert_eq!(managed.report.taken_out.len(), 1, "{:?}", managed.report);
    assert!(
        managed.report.taken_out[0].starts_with("d2 taken out at start"),
        "{:?}",
        managed.report.taken_out
    );
    let replay = managed.report.ppl.as_ref().expect("the log was replayed");
    assert!(replay.entries_replayed > 0, "{replay:?}");
    let new = Device {
        path: "new".into(),
        volume: Arc::new(raidlab_devices::MemVolume::new(16 * MIB)),
    };
    match managed.asm.add(new.clone(), false).unwrap() {
        Added::IntoSlot(slot) => assert_eq!(slot, 2),
        Added::Spare => panic!("the new device should take d2's role"),
    }
    managed
        .asm
        .rebuild(RunOptions::default(), &mut |_| {})
        .unwrap();
    assert!(managed.stop().unwrap().is_empty());

    faults[2].clear_faults();
    assert_eq!(state_of(&devs, "d2"), MemberState::Faulty);
    let mut now: Vec<Device> = devs.clone();
    now.push(new);
    assert_eq!(state_of(&now, "new"), MemberState::Active);
    let started =
        Started::start(Assembly::assemble(now).unwrap(), StartOptions::default()).unwrap();
    let mut expected = data();
    for stripe in 0..8usize {
        let at = stripe * 192 * 1024 + 4096;
        expected[at..at + 4096].fill(0xa5);
    }
    let mut got = vec![0u8; expected.len()];
    started.array.read_at(&mut got, 0).unwrap();
    assert!(got == expected, "the array reads back what was written");
}

/// A start for `check` (reading only) replays nothing and writes nothing,
/// whatever the log holds: the check must see the array as the crash left it.
#[test]
fn a_read_only_verbs_start_writes_nothing() {
    let (faults, devs) = crashed_raid5_with_ppl();
    for f in &faults {
        f.reset_stats();
    }
    let managed = Managed::start(
        Assembly::assemble(devs.clone()).unwrap(),
        ManageOptions::default(),
    )
    .unwrap();
    assert!(managed.report.ppl.is_none());
    assert!(managed.stop().unwrap().is_empty());
    for f in &faults {
        assert_eq!(f.stats().writes, 0, "{:?}", f.stats());
    }
    assert!(!Assembly::assemble(devs).unwrap().in_sync());
}

/// A verb's stop flushes the members it wrote; one whose flush fails is
/// taken out and recorded faulty, so the verb does not report success over
/// writes a member may not have kept.
#[test]
fn a_verbs_stop_takes_out_a_member_whose_flush_fails() {
    let (faults, devs) = common::fault_members(3);
    common::create_with(Level::Raid1, &devs, |s| s.chunk_bytes = 0);
    let managed = Managed::start(Assembly::assemble(devs.clone()).unwrap(), writing()).unwrap();
    assert!(managed.report.taken_out.is_empty(), "{:?}", managed.report);
    faults[2].fail_all(true);
    let taken_out = managed.stop().unwrap();
    assert_eq!(taken_out.len(), 1, "{taken_out:?}");
    assert!(
        taken_out[0].starts_with("d2 taken out at the end of the verb"),
        "{taken_out:?}"
    );
    faults[2].fail_all(false);
    assert_eq!(state_of(&devs, "d2"), MemberState::Faulty);
    assert_eq!(state_of(&devs, "d0"), MemberState::Active);
}
