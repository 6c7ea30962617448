//! Member failures around a start and a crash, as the torture harness met
//! them: a start whose superblock or resync writes fail on one member takes
//! that member out instead of failing; a flush through `Started` records the
//! members the array took out before it returns; a resync that cannot read a
//! few sectors rebuilds only the pages that hold them.

mod common;

use raidlab_core::Volume;
use raidlab_layout::Level;
use raidlab_raid::assemble::{Assembly, Device, MemberState};
use raidlab_raid::lifecycle::{StartOptions, Started};

const MIB: u64 = 1 << 20;

fn start(devs: &[Device]) -> raidlab_core::Result<Started> {
    Started::start(
        Assembly::assemble(devs.to_vec())?,
        StartOptions {
            write: true,
            resync_unclean: true,
            ..StartOptions::default()
        },
    )
}

fn state_of(devs: &[Device], path: &str) -> MemberState {
    let asm = Assembly::assemble(devs.to_vec()).unwrap();
    asm.members
        .iter()
        .find(|m| m.device.path == path)
        .unwrap()
        .state
}

/// After a crash, a RAID 1 of three whose third member refuses every write
/// starts degraded, with that member recorded faulty, and its data is
/// intact. The start used to fail on the first superblock or resync write
/// (torture seed 1, runs 60, 144 and others).
#[test]
fn a_start_after_a_crash_takes_out_a_member_whose_writes_fail() {
    let (faults, devs) = common::fault_members(3);
    common::create_with(Level::Raid1, &devs, |s| s.chunk_bytes = 0);
    let started = start(&devs).unwrap();
    started.array.write_at(&[0x5a; 65536], MIB).unwrap();
    started.array.flush().unwrap();
    drop(started); // a crash: the array stays marked dirty
    faults[2].fail_writes(0..16 * MIB);

    let started = start(&devs).expect("the start takes d2 out and goes on");
    assert_eq!(started.report.taken_out.len(), 1, "{:?}", started.report);
    assert!(
        started.report.taken_out[0].starts_with("d2 taken out at start"),
        "{:?}",
        started.report.taken_out
    );
    let mut got = vec![0u8; 65536];
    started.array.read_at(&mut got, MIB).unwrap();
    assert_eq!(got, vec![0x5a; 65536]);
    started.stop().unwrap();
    faults[2].clear_faults();
    assert_eq!(state_of(&devs, "d2"), MemberState::Faulty);
    assert_eq!(state_of(&devs, "d0"), MemberState::Active);
}

/// A start that would have to take out more than the level can lose still
/// fails, and says why.
#[test]
fn a_start_that_would_lose_too_many_members_fails() {
    let (faults, devs) = common::fault_members(2);
    common::create_with(Level::Raid1, &devs, |s| s.chunk_bytes = 0);
    drop(start(&devs).unwrap());
    faults[0].fail_writes(0..16 * MIB);
    faults[1].fail_writes(0..16 * MIB);
    let e = start(&devs).expect_err("no member can take the writes");
    assert!(e.message.contains("could not take"), "{e}");
}

/// A member the running array took out is recorded faulty by
/// `Started::flush` before it returns: a crash right after the flush then
/// cannot assemble the dead member, which missed the flushed write, as
/// active. With `Array::flush` alone it stays active until the stop.
#[test]
fn a_flush_through_the_start_records_a_member_taken_out() {
    let (faults, devs) = common::fault_members(2);
    common::create_with(Level::Raid1, &devs, |s| s.chunk_bytes = 0);
    let mut started = start(&devs).unwrap();
    faults[1].fail_writes(0..16 * MIB);
    started.array.write_at(&[0x77; 8192], MIB).unwrap();
    started.array.flush().unwrap();
    assert_eq!(started.array.failed_members(), vec![1]);
    // The member is out of the running array but not yet of its superblocks.
    assert_eq!(state_of(&devs, "d1"), MemberState::Active);
    started.flush().unwrap();
    drop(started); // a crash right after the acknowledged flush
    faults[1].clear_faults();
    assert_eq!(state_of(&devs, "d1"), MemberState::Faulty);
    let started = start(&devs).unwrap();
    let mut got = vec![0u8; 8192];
    started.array.read_at(&mut got, MIB).unwrap();
    assert_eq!(got, vec![0x77; 8192]);
}

/// A resync after a crash that cannot read one sector of a member rebuilds
/// the 4 KiB page that holds it, as md does, and nothing else. It used to
/// rebuild the member's whole step from parity, and parity the crash left
/// stale elsewhere in that step then overwrote readable data (torture seed 1,
/// runs 28 and 84).
#[test]
fn a_resync_rebuilds_only_the_pages_it_cannot_read() {
    let (faults, devs) = common::fault_members(3);
    common::create_with(Level::Raid5, &devs, |s| s.chunk_bytes = 64 << 10);
    let started = start(&devs).unwrap();
    // Stripes 0 and 1 (128 KiB of data each); then the crash.
    let data: Vec<u8> = (0..4 * 65536u32).map(|i| (i * 7 + 3) as u8).collect();
    started.array.write_at(&data, 0).unwrap();
    started.array.flush().unwrap();
    drop(started);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    let offset = |role: usize| {
        let i = asm.slots[role].unwrap();
        (
            asm.members[i].sb.data_offset * 512,
            asm.members[i].device.path.clone(),
        )
    };
    // Stripe 0's parity is left stale by the crash (role 2 holds it in md's
    // default left-symmetric layout), and member 0 cannot read one sector of
    // stripe 1.
    let (p_off, p_dev) = offset(2);
    let (d_off, d_dev) = offset(0);
    let dev = |path: &str| &faults[path[1..].parse::<usize>().unwrap()];
    dev(&p_dev).write_at(&[0xee; 4096], p_off).unwrap();
    dev(&d_dev).fail_reads(d_off + 65536 + 1024..d_off + 65536 + 1536);

    let started = start(&devs).unwrap();
    let resync = started.report.resync.as_ref().expect("resynced");
    assert_eq!(resync.read_errors_fixed, 1, "{resync:?}");
    let mut got = vec![0u8; data.len()];
    started.array.read_at(&mut got, 0).unwrap();
    // Stripe 0 keeps its data (its parity is what the resync rewrites), and
    // every readable sector of stripe 1 too.
    assert_eq!(&got[..131072], &data[..131072]);
    assert_eq!(got, data);
}

/// After a crash the resync of a RAID 6 trusts the data and rewrites P and
/// Q, as md's does. A stripe whose new data reached one member while P and
/// Q stayed old looks exactly like one bad data block located from P+Q;
/// the resync used to "correct" that block back, and with several blocks of
/// a stripe written at the crash that made a value never written (torture
/// seed 1, runs 1533 and 1994 of the larger sweep).
#[test]
fn a_raid6_resync_keeps_the_data_and_rewrites_p_and_q() {
    let (faults, devs) = common::fault_members(4);
    common::create_with(Level::Raid6, &devs, |s| s.chunk_bytes = 64 << 10);
    let started = start(&devs).unwrap();
    started.array.write_at(&vec![0x11; 128 << 10], 0).unwrap();
    started.array.flush().unwrap();
    drop(started); // a crash: the array stays marked dirty
    let asm = Assembly::assemble(devs.clone()).unwrap();
    let (role, _, at) = asm.geometry.parity_location(0);
    let i = asm.slots[role].unwrap();
    let start_of = asm.members[i].sb.data_offset * 512;
    let dev = asm.members[i].device.path[1..].parse::<usize>().unwrap();
    // The new data reached this member; P and Q did not.
    faults[dev].write_at(&[0x99; 4096], start_of + at).unwrap();

    let mut started = start(&devs).unwrap();
    let resync = started.report.resync.as_ref().expect("resynced");
    assert!(resync.mismatch_sectors > 0, "{resync:?}");
    let mut got = vec![0u8; 4096];
    started.array.read_at(&mut got, 0).unwrap();
    assert_eq!(got, vec![0x99; 4096], "the resync kept the data");
    let check = started
        .asm()
        .scrub(
            false,
            raidlab_raid::recovery::RunOptions::default(),
            &mut |_| {},
        )
        .unwrap();
    assert_eq!(check.mismatch_sectors, 0, "P and Q follow the data");
    started.flush().unwrap();
}
