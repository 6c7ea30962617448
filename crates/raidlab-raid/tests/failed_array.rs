//! An array that lost more members than its level allows takes no more
//! writes, as md marks it broken ("Cannot continue operation") and fails every
//! write after: a write that went on would land half on the members left (a
//! stripe's data without its parity), and a read through that parity would
//! answer garbage later. Reads go on where the members left can answer them.

mod common;

use raidlab_core::{ErrorKind, Volume};
use raidlab_layout::Level;

const K: usize = 1024;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

#[test]
fn a_raid5_that_lost_two_members_refuses_writes_and_changes_nothing_on_the_rest() {
    let (faults, devs) = common::fault_members(3);
    common::create_on(Level::Raid5, &devs);
    let mut s = common::start_writable(&devs);
    let data = pattern(512 * K, 7);
    s.write(&data, 0).unwrap();
    s.flush().unwrap();
    // One member out: the array carries on degraded.
    faults[0].fail_all(true);
    s.write(&pattern(64 * K, 9), 0).unwrap();
    // A second one: the write that meets it fails (a whole stripe: the
    // stripe cache sends it down at once), and so does every write after.
    faults[1].fail_all(true);
    let e = s.write(&pattern(128 * K, 11), 256 * K as u64).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unrecoverable, "{e}");
    let before: Vec<Vec<u8>> = faults.iter().map(|f| f.inner().snapshot()).collect();
    for (offset, len) in [(0, 4 * K), (128 * K, 64 * K), (448 * K, 8 * K)] {
        let e = s.write(&pattern(len, 13), offset as u64).unwrap_err();
        assert!(e.message.contains("the array has failed"), "{e}");
        assert_eq!(e.kind, ErrorKind::Unrecoverable);
    }
    assert!(s.write_zeroes(0, 64 * 1024).is_err());
    let after: Vec<Vec<u8>> = faults.iter().map(|f| f.inner().snapshot()).collect();
    assert!(before == after, "a refused write changed a member");
    // md's left-symmetric RAID 5 of three with 64 KiB chunks keeps array
    // bytes 128K..192K (stripe 1's first chunk) on role 2, still in service.
    let mut got = vec![0u8; 64 * K];
    s.array.read_at(&mut got, 128 * K as u64).unwrap();
    assert!(
        got == data[128 * K..192 * K],
        "a read the last member can answer"
    );
    // A read that needs a lost member's bytes fails rather than guess.
    assert!(s.array.read_at(&mut got, 0).is_err());
}

/// The member whose failure breaks a RAID 5 is recorded faulty before the
/// failed write is answered, as md's raid5_error marks it: the members on
/// disk then say two of three are gone, and nothing assembles the array
/// again with that member's stale blocks in service (seed 5 run 1193 of the
/// torture harness read a chunk rebuilt through them).
#[test]
fn the_member_that_breaks_a_raid5_is_recorded_faulty_before_the_error_is_answered() {
    use raidlab_raid::assemble::{Assembly, MemberState};
    let (faults, devs) = common::fault_members(3);
    common::create_on(Level::Raid5, &devs);
    let mut s = common::start_writable(&devs);
    s.write(&pattern(256 * K, 3), 0).unwrap();
    faults[0].fail_all(true);
    s.write(&pattern(128 * K, 5), 0).unwrap();
    faults[1].fail_all(true);
    assert!(s.write(&pattern(128 * K, 7), 256 * K as u64).is_err());
    // What the members' superblocks say now, with no stop in between (a
    // crash here): both gone.
    faults[0].fail_all(false);
    faults[1].fail_all(false);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    let state = |path: &str| {
        asm.members
            .iter()
            .find(|m| m.device.path == path)
            .map(|m| m.state)
    };
    assert_eq!(state("d1"), Some(MemberState::Faulty), "{:?}", asm.members);
    let started = raidlab_raid::lifecycle::Started::start(
        asm,
        raidlab_raid::lifecycle::StartOptions {
            write: true,
            ..Default::default()
        },
    );
    assert!(
        started.is_err(),
        "a RAID 5 with two of three members gone started"
    );
}
