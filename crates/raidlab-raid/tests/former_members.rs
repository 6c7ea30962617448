//! Former members (failed, removed, stale) judged as md judges them: by their
//! own superblock first. A member that claims a role but missed writes is never
//! used and never written, whatever the newest superblock's role table says of
//! its device number; only `add` takes it back, with a full rebuild.
//!
//! The md side of the same rules (md fails and removes a member, raidlab leaves
//! it alone, md still kicks it) is in `raidlab/tests/md_compat.rs`.

use raidlab_core::{ErrorKind, Volume};
use raidlab_devices::MemVolume;
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_md::{Superblock, ROLE_FAULTY, ROLE_SPARE};
use raidlab_raid::assemble::{create, Assembly, CreateSpec, Device, MemberState, NewMember};
use raidlab_raid::manage::Added;
use raidlab_raid::recovery::RunOptions;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

const MEMBER: u64 = 2 << 20;

fn raid5(n: usize) -> (Assembly, Vec<Device>) {
    let devs: Vec<Device> = (0..n)
        .map(|i| Device {
            path: format!("m{i}"),
            volume: Arc::new(MemVolume::new(MEMBER)),
        })
        .collect();
    let spec = CreateSpec {
        level: Level::Raid5,
        layout: Layout::Parity(ParityLayout::LeftSymmetric),
        chunk_bytes: 16 << 10,
        spares: 0,
        name: "former".into(),
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
    (create(&spec, members).unwrap(), devs)
}

fn assemble(devs: &[Device]) -> Assembly {
    Assembly::assemble(devs.to_vec()).unwrap()
}

fn write_random(asm: &Assembly, seed: u64) -> Vec<u8> {
    let array = asm.array().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let data: Vec<u8> = (0..array.size()).map(|_| rng.gen()).collect();
    array.write_at(&data, 0).unwrap();
    array.flush().unwrap();
    data
}

fn read_all(asm: &Assembly) -> Vec<u8> {
    let array = asm.array().unwrap();
    let mut b = vec![0u8; array.size() as usize];
    array.read_at(&mut b, 0).unwrap();
    b
}

fn bytes_of(d: &Device) -> Vec<u8> {
    let mut b = vec![0u8; d.volume.size() as usize];
    d.volume.read_at(&mut b, 0).unwrap();
    b
}

fn sb(d: &Device) -> Superblock {
    Superblock::read_from(d.volume.as_ref()).unwrap().unwrap()
}

fn state_of(asm: &Assembly, path: &str) -> MemberState {
    asm.members
        .iter()
        .find(|m| m.device.path == path)
        .unwrap()
        .state
}

/// md's sequence: fail member 1, remove it, write more. The other members'
/// role table now lists device 1 as removed (0xffff) while member 1's own
/// superblock still says "role 1" with an older event count.
fn failed_removed_then_written() -> (Vec<Device>, Vec<u8>) {
    let (mut asm, devs) = raid5(4);
    write_random(&asm, 1);
    let i = asm.find("m1").unwrap();
    asm.fail(i).unwrap();
    asm.remove(i).unwrap();
    let mut asm = assemble(&devs);
    let data = write_random(&asm, 2);
    let was = asm.mark_dirty().unwrap();
    asm.mark_clean(was).unwrap();
    (devs, data)
}

#[test]
fn a_removed_member_is_reported_removed_never_a_spare() {
    let (devs, data) = failed_removed_then_written();
    let own = sb(&devs[1]);
    let newest = sb(&devs[0]);
    assert_eq!(
        own.dev_roles[own.dev_number as usize], 1,
        "still claims role 1"
    );
    assert_eq!(newest.dev_roles[own.dev_number as usize], ROLE_SPARE);
    assert!(own.events < newest.events);
    let asm = assemble(&devs);
    assert_eq!(state_of(&asm, "m1"), MemberState::Removed);
    assert_eq!(asm.missing(), vec![1]);
    assert_eq!(read_all(&asm), data, "read without the removed member");
}

#[test]
fn no_superblock_write_touches_a_removed_or_faulty_member() {
    let (devs, data) = failed_removed_then_written();
    let before = bytes_of(&devs[1]);
    // Every array-wide superblock update an open for writing, a stop and the
    // verbs make.
    let mut asm = assemble(&devs);
    let was = asm.mark_dirty().unwrap();
    let more = write_random(&asm, 3);
    asm.mark_clean(was).unwrap();
    asm.commit(|_| {}).unwrap();
    assert_eq!(bytes_of(&devs[1]), before, "the removed member was written");
    // No hot spare takes the removed member for a spare.
    let i = asm.find("m0").unwrap();
    let e = asm.fail(i).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Refused, "{e}");
    assert_eq!(bytes_of(&devs[1]), before);
    assert_ne!(data, more);
    assert_eq!(read_all(&assemble(&devs)), more);

    // Failed but not removed: faulty, likewise never written.
    let (mut asm, devs) = raid5(4);
    write_random(&asm, 4);
    let i = asm.find("m2").unwrap();
    asm.fail(i).unwrap();
    let before = bytes_of(&devs[2]);
    let mut asm = assemble(&devs);
    assert_eq!(state_of(&asm, "m2"), MemberState::Faulty);
    assert_eq!(sb(&devs[0]).dev_roles[2], ROLE_FAULTY);
    let was = asm.mark_dirty().unwrap();
    write_random(&asm, 5);
    asm.mark_clean(was).unwrap();
    assert_eq!(bytes_of(&devs[2]), before, "the faulty member was written");
}

#[test]
fn a_member_that_missed_writes_is_stale_and_not_written() {
    let (asm, devs) = raid5(4);
    write_random(&asm, 6);
    // The array runs without member 3 (not given), then member 3 comes back.
    let mut degraded = assemble(&devs[..3]);
    let was = degraded.mark_dirty().unwrap();
    let data = write_random(&degraded, 7);
    degraded.mark_clean(was).unwrap();
    let before = bytes_of(&devs[3]);
    let mut asm = assemble(&devs);
    // The degraded array's commits listed the device it did not have as
    // removed, as md's super_1_sync does (so a member one event behind can
    // be taken as up to date, md's margin, only if it was there).
    assert_eq!(sb(&devs[0]).dev_roles[3], raidlab_md::ROLE_SPARE);
    assert_eq!(state_of(&asm, "m3"), MemberState::Removed);
    assert_eq!(read_all(&asm), data);
    let was = asm.mark_dirty().unwrap();
    asm.mark_clean(was).unwrap();
    assert_eq!(bytes_of(&devs[3]), before);
}

#[test]
fn add_takes_a_former_member_back_with_a_full_rebuild() {
    let (devs, data) = failed_removed_then_written();
    let mut asm = assemble(&devs[..]);
    let old = sb(&devs[1]);
    // Given with the members (its entry is replaced, not duplicated) ...
    let added = asm.add(devs[1].clone(), false).unwrap();
    assert_eq!(added, Added::IntoSlot(1));
    assert_eq!(asm.members.len(), 4, "one entry per device");
    asm.rebuild(RunOptions::default(), &mut |_| {}).unwrap();
    let asm = assemble(&devs);
    assert!(asm.members.iter().all(|m| m.state == MemberState::Active));
    assert_ne!(sb(&devs[1]).events, old.events);
    // ... and the rebuilt member carries the data: read without another one.
    assert_eq!(read_all(&asm), data);
    let without_0 = Assembly::assemble(devs[1..].to_vec()).unwrap();
    assert_eq!(read_all(&without_0), data);
    // A slot is claimed by one device number only.
    let table = sb(&devs[0]).dev_roles;
    assert_eq!(table.iter().filter(|&&r| r == 1).count(), 1, "{table:?}");

    // Not given with the members: taken back the same way.
    let (devs, data) = failed_removed_then_written();
    let others = [devs[0].clone(), devs[2].clone(), devs[3].clone()];
    let mut asm = assemble(&others);
    assert_eq!(asm.add(devs[1].clone(), false).unwrap(), Added::IntoSlot(1));
    asm.rebuild(RunOptions::default(), &mut |_| {}).unwrap();
    let without_0 = Assembly::assemble(devs[1..].to_vec()).unwrap();
    assert_eq!(read_all(&without_0), data);
}

#[test]
fn add_refuses_a_member_in_service() {
    let (mut asm, devs) = raid5(4);
    let e = asm.add(devs[2].clone(), true).unwrap_err();
    assert!(e.to_string().contains("already a member"), "{e}");
    // Up to date but not given with the others: list it instead.
    let mut three = assemble(&devs[..3]);
    let e = three.add(devs[3].clone(), false).unwrap_err();
    assert!(e.to_string().contains("up-to-date member"), "{e}");
}

#[test]
fn removing_a_stale_member_whose_number_was_reused_keeps_the_new_one() {
    let (devs, _) = failed_removed_then_written();
    // A new device takes slot 1 (and may take device number 1).
    let fresh = Device {
        path: "n1".into(),
        volume: Arc::new(MemVolume::new(MEMBER)),
    };
    let mut asm = assemble(&[devs[0].clone(), devs[2].clone(), devs[3].clone()]);
    asm.add(fresh.clone(), false).unwrap();
    asm.rebuild(RunOptions::default(), &mut |_| {}).unwrap();
    let all = [
        devs[0].clone(),
        devs[1].clone(),
        devs[2].clone(),
        devs[3].clone(),
        fresh.clone(),
    ];
    let mut asm = assemble(&all);
    assert_eq!(state_of(&asm, "n1"), MemberState::Active);
    assert!(matches!(
        state_of(&asm, "m1"),
        MemberState::Removed | MemberState::Stale
    ));
    let i = asm.find("m1").unwrap();
    let _ = asm.remove(i);
    let asm = assemble(&all);
    assert_eq!(state_of(&asm, "n1"), MemberState::Active);
    assert!(asm.missing().is_empty());
}

/// md frees a removed device's number: the next device added takes it, even
/// with the removed device still attached, and the two never get mixed up
/// (a long life of failures would otherwise use up the superblocks' table:
/// 27 numbers for metadata 0.90).
#[test]
fn a_removed_members_number_goes_to_the_next_device_added() {
    let (devs, data) = failed_removed_then_written();
    let fresh = Device {
        path: "n1".into(),
        volume: Arc::new(MemVolume::new(MEMBER)),
    };
    let mut asm = assemble(&devs);
    assert_eq!(state_of(&asm, "m1"), MemberState::Removed);
    assert_eq!(asm.free_device_number(None), Some(1));
    assert!(matches!(
        asm.add(fresh.clone(), false).unwrap(),
        Added::IntoSlot(1)
    ));
    asm.rebuild(RunOptions::default(), &mut |_| {}).unwrap();
    assert_eq!(sb(&fresh).dev_number, 1, "took the removed device's number");
    let mut all = devs.clone();
    all.push(fresh);
    let asm = assemble(&all);
    assert_eq!(state_of(&asm, "n1"), MemberState::Active);
    assert_ne!(state_of(&asm, "m1"), MemberState::Active);
    assert!(asm.missing().is_empty());
    assert_eq!(read_all(&asm), data);
}
