//! Arrays stopped in the middle of a reshape, read on both sides of the
//! reshape position.
//!
//! The reshape states here are WRITTEN BY RAIDLAB'S OWN CODE, not by md: a
//! RAID 5 is created and filled in its old geometry, the part below the
//! position is written again through an array of the new geometry (as md's
//! reshape leaves it), and the superblocks get md's reshape fields. They show
//! that raidlab reads such a state as md defines it; a grow md itself
//! interrupted is read in the VM test (`md_compat.rs`,
//! `an_array_md_stopped_mid_grow_reads_on_both_sides_of_the_position`).

mod md090;

use raidlab_core::Volume;
use raidlab_layout::{Geometry, Layout, Level};
use raidlab_md::superblock::feature;
use raidlab_md::{MetadataVersion, Superblock};
use raidlab_raid::array::Array;
use raidlab_raid::assemble::{create_with_metadata, Assembly, CreateSpec, Device, NewMember};
use std::sync::Arc;

const MIB: u64 = 1 << 20;

fn devices(n: usize, bytes: u64) -> Vec<Device> {
    (0..n)
        .map(|i| Device {
            path: format!("m{i}"),
            volume: Arc::new(raidlab_devices::MemVolume::new(bytes)),
        })
        .collect()
}

fn pattern(len: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// What changes in the reshape.
#[derive(Clone, Copy)]
struct Change {
    delta_disks: i32,
    new_chunk_kib: u64,
    /// md's RESHAPE_BACKWARDS: the new geometry above the position.
    backwards: bool,
}

/// A RAID 5 of `old_n` members (64K chunk, left-symmetric) with metadata
/// `version`, filled with the pattern, then reshaped by `change` up to
/// `position` bytes. Returns the members (the added one last) and the
/// pattern the array must read.
fn stopped_reshape(
    version: MetadataVersion,
    old_n: usize,
    change: Change,
    position: u64,
) -> (Vec<Device>, Vec<u8>) {
    let new_n = (old_n as i32 + change.delta_disks) as usize;
    let devs = devices(old_n.max(new_n), 16 * MIB);
    let spec = CreateSpec {
        level: Level::Raid5,
        layout: Layout::parse(Level::Raid5, None).unwrap(),
        chunk_bytes: 64 << 10,
        spares: 0,
        name: "reshape".into(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: false,
    };
    let members: Vec<NewMember> = devs[..old_n]
        .iter()
        .map(|d| NewMember {
            device: d.clone(),
            zeroed: true,
        })
        .collect();
    let asm = create_with_metadata(&spec, members, None, version).unwrap();
    let old = asm.geometry;
    let data = pattern(old.array_bytes());
    asm.array().unwrap().write_at(&data, 0).unwrap();
    let sb0 = Superblock::read_from(devs[0].volume.as_ref())
        .unwrap()
        .unwrap();
    let chunk_sectors = (change.new_chunk_kib * 2) as u32;
    let member_sectors = sb0.size / u64::from(chunk_sectors) * u64::from(chunk_sectors);
    let new = Geometry::from_md(5, 2, chunk_sectors, new_n as u32, member_sectors).unwrap();
    let area = |d: &Device, bytes: u64| -> Arc<dyn Volume> {
        Arc::new(
            raidlab_core::SliceVolume::new(d.volume.clone(), sb0.data_offset * 512, bytes).unwrap(),
        )
    };
    // The part md already reshaped, through the new geometry.
    let new_array = Array::new(
        "new",
        new,
        devs[..new_n]
            .iter()
            .map(|d| Some(area(d, new.member_bytes)))
            .collect(),
    )
    .unwrap();
    let size = old.array_bytes().min(new.array_bytes());
    let (lo, hi) = if change.backwards {
        (position, size)
    } else {
        (0, position)
    };
    new_array
        .write_at(&data[lo as usize..hi as usize], lo)
        .unwrap();
    // md's reshape fields in every superblock; an added member is role n.
    for (i, d) in devs.iter().enumerate() {
        let mut sb = if i < old_n {
            Superblock::read_from(d.volume.as_ref()).unwrap().unwrap()
        } else {
            let mut sb = sb0.clone();
            sb.dev_number = i as u32;
            sb.device_uuid[0] ^= i as u8 + 1;
            sb.device_uuid[12..].copy_from_slice(&(i as u32).to_be_bytes());
            sb
        };
        sb.feature_map |= feature::RESHAPE_ACTIVE;
        // md records the direction only for a reshape over the same
        // members; a shrink goes backwards without saying so.
        if change.backwards && change.delta_disks == 0 {
            sb.feature_map |= feature::RESHAPE_BACKWARDS;
        }
        sb.raid_disks = new_n as u32;
        sb.delta_disks = change.delta_disks;
        sb.new_level = 5;
        sb.new_layout = 2;
        sb.new_chunk = chunk_sectors;
        sb.reshape_position = position / 512;
        sb.events += 1;
        for r in old_n..new_n {
            sb.dev_roles[r] = r as u16;
        }
        sb.write_to(d.volume.as_ref()).unwrap();
    }
    (
        devs[..old_n.max(new_n)].to_vec(),
        data[..size as usize].to_vec(),
    )
}

fn read_all(devs: Vec<Device>) -> Vec<u8> {
    let asm = Assembly::assemble(devs).unwrap();
    let array = asm.array().unwrap();
    assert_eq!(array.size(), asm.data_bytes());
    assert!(!array.is_writable(), "a stopped reshape is read only");
    let mut got = vec![0u8; array.size() as usize];
    // Reads that straddle the position in odd pieces.
    for (i, piece) in got.chunks_mut(96 << 10).enumerate() {
        array.read_at(piece, (i as u64) * (96 << 10)).unwrap();
    }
    got
}

fn check(version: MetadataVersion, old_n: usize, change: Change, position: u64) {
    let (devs, want) = stopped_reshape(version, old_n, change, position);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    let r = asm.reshape().unwrap().unwrap();
    assert_eq!(r.position, position);
    assert_eq!(read_all(devs.clone()), want, "complete, {version}");
    // Degraded: each member left out in turn (RAID 5 survives one).
    for out in 0..devs.len() {
        let rest: Vec<Device> = devs
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != out)
            .map(|(_, d)| d.clone())
            .collect();
        assert_eq!(read_all(rest), want, "member {out} left out, {version}");
    }
}

#[test]
fn a_grow_by_one_member_reads_on_both_sides_of_the_position() {
    let change = Change {
        delta_disks: 1,
        new_chunk_kib: 64,
        backwards: false,
    };
    // 12 full new stripes (4 data chunks) = 16 old ones (3 data chunks).
    let position = 12 * 4 * (64 << 10);
    for version in [
        MetadataVersion::V1_2,
        MetadataVersion::V1_0,
        MetadataVersion::V0_90,
    ] {
        check(version, 4, change, position);
    }
}

/// A shrink from 5 members to 4, stopped part-way: md runs it from the end
/// of the (already cut) array down, and its v1 superblocks carry no
/// backwards flag for it (md infers the direction from delta_disks < 0).
#[test]
fn a_shrink_goes_backwards_without_the_flag() {
    let shrink = Change {
        delta_disks: -1,
        new_chunk_kib: 64,
        backwards: true,
    };
    // 20 new stripes (3 data chunks) below the position are still old.
    let position = 20 * 3 * (64 << 10);
    // 0.90 too: its superblock's raid_disks is already the new count, and
    // the member leaving is found in its old slot all the same (else the old
    // geometry would lack it: read through parity when complete, refused
    // with one more member left out).
    for version in [MetadataVersion::V1_2, MetadataVersion::V0_90] {
        let (devs, _) = stopped_reshape(version, 5, shrink, position);
        let asm = Assembly::assemble(devs.clone()).unwrap();
        assert_eq!(asm.missing(), Vec::<usize>::new(), "{version}");
        let r = asm.reshape().unwrap().unwrap();
        assert!(r.backwards);
        assert_eq!((r.old.raid_disks, r.new.raid_disks), (5, 4));
        if version == MetadataVersion::V0_90 {
            // md's rule: a 0.90 shrink runs in place through a backup file
            // and is not read without it, whatever the position (this
            // state has none to give: `reshape090_shrink.rs` reads with one).
            drop(asm);
            md090::read_refused(&devs);
            continue;
        }
        check(version, 5, shrink, position);
    }
}

#[test]
fn a_chunk_change_and_a_backwards_reshape_read_right() {
    let chunk = Change {
        delta_disks: 0,
        new_chunk_kib: 128,
        backwards: false,
    };
    check(MetadataVersion::V1_2, 4, chunk, 10 * 3 * (128 << 10));
    let backwards = Change {
        delta_disks: 0,
        new_chunk_kib: 128,
        backwards: true,
    };
    check(MetadataVersion::V1_2, 4, backwards, 10 * 3 * (128 << 10));
}

#[test]
fn the_position_decides_and_a_wrong_one_reads_wrong() {
    // The test can fail: with the position recorded one stripe too high,
    // the stripe after the reshaped part is read in the wrong geometry.
    let change = Change {
        delta_disks: 1,
        new_chunk_kib: 64,
        backwards: false,
    };
    let position = 12 * 4 * (64 << 10);
    let (devs, want) = stopped_reshape(MetadataVersion::V1_2, 4, change, position);
    for d in &devs {
        let mut sb = Superblock::read_from(d.volume.as_ref()).unwrap().unwrap();
        sb.reshape_position += 4 * 128;
        sb.write_to(d.volume.as_ref()).unwrap();
    }
    assert_ne!(read_all(devs), want);
}

#[test]
fn writing_a_stopped_reshape_is_refused() {
    let change = Change {
        delta_disks: 1,
        new_chunk_kib: 64,
        backwards: false,
    };
    let (devs, _) = stopped_reshape(MetadataVersion::V1_2, 4, change, 4 * (64 << 10));
    let array = Assembly::assemble(devs).unwrap().array().unwrap();
    let e = array.write_at(&[1u8; 4096], 0).unwrap_err().to_string();
    assert!(e.contains("read") || e.contains("reshape"), "{e}");
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Any reshape fields, on 1.2 and 0.90 members: assembling and
        /// reading never panic; what is accepted reads inside both
        /// geometries, and a refusal names a field.
        #[test]
        fn mutated_reshape_fields_never_panic(
            v090 in any::<bool>(),
            delta in -6i32..6,
            new_level in prop_oneof![Just(5i32), Just(6), Just(0), Just(1), Just(10), any::<i32>()],
            new_layout in prop_oneof![0u32..6, 16u32..21, any::<u32>()],
            new_chunk in prop_oneof![Just(128u32), Just(256), Just(0), Just(7), any::<u32>()],
            position in prop_oneof![0u64..80_000, any::<u64>()],
            backwards in any::<bool>(),
        ) {
            let version = if v090 { MetadataVersion::V0_90 } else { MetadataVersion::V1_2 };
            let change = Change { delta_disks: 1, new_chunk_kib: 64, backwards: false };
            let (devs, _) = stopped_reshape(version, 4, change, 4 * (64 << 10));
            for d in &devs {
                let mut sb = Superblock::read_from(d.volume.as_ref()).unwrap().unwrap();
                sb.delta_disks = delta;
                sb.new_level = new_level;
                sb.new_layout = new_layout;
                sb.new_chunk = new_chunk;
                sb.reshape_position = position;
                if backwards {
                    sb.feature_map |= feature::RESHAPE_BACKWARDS;
                }
                // 0.90 keeps the new chunk in bytes: what does not fit is refused.
                let _ = sb.write_to(d.volume.as_ref());
            }
            match Assembly::assemble(devs) {
                Ok(asm) => {
                    if let Ok(array) = asm.array() {
                        let size = array.size();
                        prop_assert!(size <= asm.geometry.array_bytes().max(1 << 40));
                        let mut buf = vec![0u8; 8192.min(size as usize)];
                        let _ = array.read_at(&mut buf, 0);
                        if size > 8192 {
                            let _ = array.read_at(&mut buf, size - 8192);
                        }
                    }
                }
                Err(e) => prop_assert!(!e.to_string().is_empty()),
            }
        }
    }
}

/// A 0.90 shrink md finished: the members that stay say 4 members and no
/// reshape, and the member that left is no member any more. md makes it a
/// spare at the end (`raid5_finish_reshape` clears its in-sync bit, so
/// `super_90_sync` writes it as a spare); if that last write never reached
/// it (pulled, or the machine died), its own superblock still claims its old
/// slot of the running reshape, with fewer events. Either way it must never
/// be read as array data: the array reads the same with it, without it, and
/// with another member left out as well.
#[test]
fn a_finished_090_shrink_does_not_take_back_the_member_that_left() {
    use raidlab_raid::assemble::MemberState;
    let shrink = Change {
        delta_disks: -1,
        new_chunk_kib: 64,
        backwards: true,
    };
    for md_wrote_it in [true, false] {
        let label = if md_wrote_it { "spare" } else { "never told" };
        // Position 0 of a backwards reshape: everything is in the new layout.
        let (devs, want) = stopped_reshape(MetadataVersion::V0_90, 5, shrink, 0);
        let finish = |d: &Device| {
            let mut sb = Superblock::read_from(d.volume.as_ref()).unwrap().unwrap();
            sb.feature_map &= !feature::RESHAPE_ACTIVE;
            sb.delta_disks = 0;
            sb.reshape_position = 0;
            sb.raid_disks = 4;
            sb.events += 1;
            // md writes every member's superblock from one state: device 4
            // is a spare in each table, its own included.
            sb.dev_roles[4] = 0xffff;
            sb.write_to(d.volume.as_ref()).unwrap();
        };
        for d in &devs[..4] {
            finish(d);
        }
        if md_wrote_it {
            finish(&devs[4]);
        }
        let leaving = devs[4].volume.clone();
        let before = {
            let mut b = vec![0u8; leaving.size() as usize];
            leaving.read_at(&mut b, 0).unwrap();
            b
        };
        let asm = Assembly::assemble(devs.clone()).unwrap();
        assert!(asm.reshape().is_none(), "{label}");
        assert_eq!(asm.geometry.raid_disks, 4, "{label}");
        let m = asm
            .members
            .iter()
            .find(|m| m.device.path == devs[4].path)
            .unwrap();
        // A spare when md said so; else its own claim to slot 4 is a claim
        // on a slot the array no longer has: removed, as md's newest table
        // has no member there.
        let expected = if md_wrote_it {
            MemberState::Spare
        } else {
            MemberState::Removed
        };
        assert_eq!(m.state, expected, "{label}");
        assert!(!asm
            .slots
            .iter()
            .flatten()
            .any(|&i| asm.members[i].device.path == devs[4].path));
        assert_eq!(read_all_rw(devs.clone()), want, "{label}");
        let rest = vec![
            devs[0].clone(),
            devs[2].clone(),
            devs[3].clone(),
            devs[4].clone(),
        ];
        assert_eq!(read_all_rw(rest), want, "{label}: member 1 left out");
        // Nothing read it as data, and a stale one is never written.
        if !md_wrote_it {
            let mut after = vec![0u8; leaving.size() as usize];
            leaving.read_at(&mut after, 0).unwrap();
            assert!(after == before, "{label}: the member that left was written");
        }
    }
}

fn read_all_rw(devs: Vec<Device>) -> Vec<u8> {
    let asm = Assembly::assemble(devs).unwrap();
    let array = asm.array().unwrap();
    let mut got = vec![0u8; array.size() as usize];
    array.read_at(&mut got, 0).unwrap();
    got
}

/// A stopped reshape's running array answers with the reshape family's
/// rules, not with its one-member placeholder geometry's (a RAID 1's): a
/// check is refused with the reshape as the reason (on the assembly and on
/// the running array), and a trim is ignored as md ignores one mid-reshape.
#[test]
fn a_stopped_reshape_answers_with_the_reshape_familys_rules() {
    use raidlab_raid::recovery::{scrub_array, RunOptions};
    let change = Change {
        delta_disks: 1,
        new_chunk_kib: 64,
        backwards: false,
    };
    let (devs, _) = stopped_reshape(MetadataVersion::V1_2, 4, change, 4 * (64 << 10));
    let mut asm = Assembly::assemble(devs).unwrap();
    assert_eq!(asm.rules().name, "reshape");
    for repair in [false, true] {
        let e = asm
            .scrub(repair, RunOptions::default(), &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(e.contains("middle of a reshape"), "{e}");
        assert!(e.contains("grow --continue"), "{e}");
    }
    let array = asm.array().unwrap();
    assert!(std::ptr::eq(array.rules(), &raidlab_raid::level::RESHAPE));
    let e = scrub_array(&array, false, 0, RunOptions::default(), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("middle of a reshape"), "{e}");
    let e = array.discard(0, 4096).unwrap_err().to_string();
    assert!(e.contains("skips a discard while a reshape"), "{e}");
}
