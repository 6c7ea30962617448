//! Re-add (md's): a former member goes back into its old role and only the
//! chunks the write-intent bitmap marked while it was away are rebuilt; when
//! md would refuse (no bitmap, a member older than the bitmap's last
//! clearing, its role taken, another array) nothing is written.

use raidlab_core::{ErrorKind, Volume};
use raidlab_devices::MemVolume;
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_md::superblock::feature;
use raidlab_md::Superblock;
use raidlab_raid::assemble::{create, Assembly, CreateSpec, Device, MemberState, NewMember};
use raidlab_raid::recovery::RunOptions;
use std::sync::Arc;

const MIB: u64 = 1 << 20;

fn make(name: &str, level: Level, n: usize, bitmap: bool) -> Vec<Device> {
    make_chunked(name, level, n, bitmap, 64 << 10)
}

fn make_chunked(name: &str, level: Level, n: usize, bitmap: bool, chunk: u64) -> Vec<Device> {
    let devs: Vec<Device> = (0..n)
        .map(|i| Device {
            path: format!("{name}{i}"),
            volume: Arc::new(MemVolume::new(16 * MIB)),
        })
        .collect();
    let layout = match level {
        Level::Raid1 => Layout::Plain,
        _ => Layout::Parity(ParityLayout::LeftSymmetric),
    };
    let spec = CreateSpec {
        level,
        layout,
        chunk_bytes: chunk,
        spares: 0,
        name: name.into(),
        force: false,
        bitmap,
        bitmap_chunk: Some(MIB as u32),
        ppl: false,
    };
    let members = devs
        .iter()
        .map(|d| NewMember {
            device: d.clone(),
            zeroed: true,
        })
        .collect();
    create(&spec, members).unwrap();
    devs
}

/// Open `devs`, write `data` at array byte `at`, stop cleanly.
fn write(devs: &[Device], at: u64, data: &[u8]) {
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    let was = asm.mark_dirty().unwrap();
    let array = asm.array().unwrap();
    array.write_at(data, at).unwrap();
    array.flush().unwrap();
    asm.absorb_bitmap(&array);
    asm.mark_clean(was).unwrap();
}

fn read_all(devs: &[Device]) -> Vec<u8> {
    let asm = Assembly::assemble(devs.to_vec()).unwrap();
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

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Data A everywhere, the last member left out, data B over 1.5 MiB at 2 MiB
/// of the array, then the last member re-added and rebuilt. Returns the
/// members, the array's contents and the rebuild's byte count.
fn away_and_back(name: &str, level: Level, n: usize) -> (Vec<Device>, Vec<u8>, u64) {
    let devs = make(name, level, n, true);
    let size = read_all(&devs).len();
    write(&devs, 0, &pattern(size, 1));
    let rest = &devs[..n - 1];
    let b = pattern(3 * MIB as usize / 2, 2);
    write(rest, 2 * MIB, &b);
    let mut expected = pattern(size, 1);
    expected[2 * MIB as usize..2 * MIB as usize + b.len()].copy_from_slice(&b);

    let mut asm = Assembly::assemble(rest.to_vec()).unwrap();
    let dirty = asm.bitmap.as_ref().unwrap().dirty_count();
    assert!(dirty > 0, "B's chunks are dirty");
    let number = sb(&devs[n - 1]).dev_number;
    let r = asm.re_add(devs[n - 1].clone()).unwrap();
    assert_eq!(r.slot, n - 1);
    assert_eq!(r.dirty_chunks, dirty);
    let own = sb(&devs[n - 1]);
    assert_ne!(own.feature_map & feature::RECOVERY_BITMAP, 0);
    assert_eq!(own.dev_number, number, "it keeps its device number");
    assert_eq!(sb(&devs[0]).dev_roles[number as usize], (n - 1) as u16);
    let report = asm.rebuild(RunOptions::default(), &mut |_| {}).unwrap();
    let m = &report.rebuilt[0];
    assert!(m.bitmap_based);
    // Every dirty bitmap chunk (1 MiB of each member) and nothing else.
    assert_eq!(m.bytes, dirty * MIB, "{report:?}");
    assert!(m.bytes * 4 < m.member_bytes, "{report:?}");
    let own = sb(&devs[n - 1]);
    assert_eq!(own.feature_map & feature::RECOVERY_BITMAP, 0);
    assert_eq!(
        own.events,
        sb(&devs[0]).events,
        "its events are the array's"
    );
    // Complete and in sync again: the bits it was rebuilt from are cleared,
    // as md clears them once no member lacks their writes (a later re-add or
    // resync would redo them otherwise).
    let again = Assembly::assemble(devs.clone()).unwrap();
    let bm = again.bitmap.as_ref().unwrap();
    assert_eq!(bm.dirty_count(), 0, "bits left after the re-add's rebuild");
    assert_eq!(bm.sb.events_cleared, own.events);
    (devs, expected, m.bytes)
}

#[test]
fn a_re_added_raid5_member_gets_only_the_dirty_chunks_and_serves_them() {
    let (devs, expected, _) = away_and_back("r5", Level::Raid5, 4);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    assert!(asm.members.iter().all(|m| m.state == MemberState::Active));
    assert_eq!(read_all(&devs), expected);
    // Without member 0 the re-added member's chunks are read (and member 0's
    // recomputed from them): B comes back only if it got B.
    assert_eq!(read_all(&devs[1..]), expected);
    // Complete again: the next clean stop clears the bits.
    write(&devs, 0, &expected[..4096]);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    assert_eq!(asm.bitmap.as_ref().unwrap().dirty_count(), 0);
}

#[test]
fn a_re_added_raid1_member_alone_reads_back_the_new_data() {
    let (devs, expected, _) = away_and_back("r1", Level::Raid1, 2);
    assert_eq!(read_all(&devs[1..]), expected, "the re-added copy alone");
}

#[test]
fn re_add_is_refused_without_a_bitmap_and_nothing_is_written() {
    let devs = make("nob", Level::Raid5, 4, false);
    write(&devs[..3], 0, &[7u8; 8192]);
    let before: Vec<Vec<u8>> = devs.iter().map(bytes_of).collect();
    let mut asm = Assembly::assemble(devs[..3].to_vec()).unwrap();
    let e = asm.re_add(devs[3].clone()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Refused, "{e}");
    assert!(e.to_string().contains("no write-intent bitmap"), "{e}");
    let after: Vec<Vec<u8>> = devs.iter().map(bytes_of).collect();
    assert!(before == after, "a refused re-add wrote");
}

#[test]
fn re_add_is_refused_for_a_member_older_than_the_bitmap_or_whose_role_is_taken() {
    let devs = make("old", Level::Raid5, 4, true);
    // m3 leaves; the array is written without it.
    write(&devs[..3], 0, &[1u8; 8192]);
    // A new device takes role 3 with a full rebuild.
    let new = Device {
        path: "old-new".into(),
        volume: Arc::new(MemVolume::new(16 * MIB)),
    };
    let mut asm = Assembly::assemble(devs[..3].to_vec()).unwrap();
    asm.add(new.clone(), false).unwrap();
    asm.rebuild(RunOptions::default(), &mut |_| {}).unwrap();
    let with_new = [devs[0].clone(), devs[1].clone(), devs[2].clone(), new];
    let before = bytes_of(&devs[3]);
    let others: Vec<Vec<u8>> = with_new.iter().map(bytes_of).collect();
    let mut asm = Assembly::assemble(with_new.to_vec()).unwrap();
    let e = asm.re_add(devs[3].clone()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Refused, "{e}");
    assert!(e.to_string().contains("role 3 is taken by old-new"), "{e}");
    assert!(with_new.iter().map(bytes_of).collect::<Vec<_>>() == others);
    // Complete again, a clean stop clears the bitmap past m3's events; then
    // role 3 is freed.
    write(&with_new, 0, &[2u8; 8192]);
    let mut asm = Assembly::assemble(with_new.to_vec()).unwrap();
    let cleared = asm.bitmap.as_ref().unwrap().sb.events_cleared;
    assert!(sb(&devs[3]).events < cleared);
    let i = asm.find("old-new").unwrap();
    asm.fail(i).unwrap();
    let others: Vec<Vec<u8>> = devs[..3].iter().map(bytes_of).collect();
    let mut asm = Assembly::assemble(devs[..3].to_vec()).unwrap();
    let e = asm.re_add(devs[3].clone()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Refused, "{e}");
    assert!(e.to_string().contains("older than the bitmap"), "{e}");
    assert_eq!(bytes_of(&devs[3]), before, "the refused member was written");
    assert!(devs[..3].iter().map(bytes_of).collect::<Vec<_>>() == others);
    // A plain add still takes it back, whole.
    asm.add(devs[3].clone(), false).unwrap();
    let report = asm.rebuild(RunOptions::default(), &mut |_| {}).unwrap();
    assert!(!report.rebuilt[0].bitmap_based);
    assert_eq!(report.rebuilt[0].bytes, report.rebuilt[0].member_bytes);
}

#[test]
fn re_add_is_refused_for_a_member_of_another_array() {
    let devs = make("one", Level::Raid5, 4, true);
    let other = make("two", Level::Raid5, 4, true);
    write(&devs[..3], 0, &[1u8; 8192]);
    let before = bytes_of(&other[3]);
    let mut asm = Assembly::assemble(devs[..3].to_vec()).unwrap();
    let e = asm.re_add(other[3].clone()).unwrap_err();
    assert!(e.to_string().contains("belongs to array"), "{e}");
    assert_eq!(bytes_of(&other[3]), before);
}

#[test]
fn a_dirty_bitmap_chunk_smaller_than_a_raid_chunk_rebuilds_the_whole_raid_chunk() {
    // RAID chunk 2 MiB, bitmap chunk 1 MiB: the rebuild's steps are whole
    // RAID chunks, so one dirty bit rebuilds its 2 MiB RAID chunk.
    let devs = make_chunked("wide", Level::Raid5, 4, true, 2 * MIB);
    let size = read_all(&devs).len();
    write(&devs, 0, &pattern(size, 3));
    write(&devs[..3], 8192, &[9u8; 8192]);
    let mut asm = Assembly::assemble(devs[..3].to_vec()).unwrap();
    assert_eq!(asm.bitmap.as_ref().unwrap().dirty_count(), 1);
    asm.re_add(devs[3].clone()).unwrap();
    let report = asm.rebuild(RunOptions::default(), &mut |_| {}).unwrap();
    assert_eq!(report.rebuilt[0].bytes, 2 * MIB, "{report:?}");
    let mut expected = pattern(size, 3);
    expected[8192..16384].fill(9);
    assert_eq!(read_all(&devs[1..]), expected);
}
