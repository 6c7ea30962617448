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
