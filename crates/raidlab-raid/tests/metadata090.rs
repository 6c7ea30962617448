//! Metadata 0.90 written by the assembly: every member's disk table lists
//! every device (spares too), a member being rebuilt is a spare on disk (0.90
//! records no recovery offset), and what 0.90 cannot describe is refused
//! before anything is written.

use raidlab_layout::{Layout, Level};
use raidlab_md::sb090::{disk_state, Sb090};
use raidlab_md::{MetadataVersion, Superblock};
use raidlab_raid::assemble::{create_with_metadata, Assembly, CreateSpec, Device, NewMember};
use std::sync::Arc;

const MIB: u64 = 1 << 20;

fn devices(sizes: &[u64]) -> Vec<Device> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &s)| Device {
            path: format!("m{i}"),
            volume: Arc::new(raidlab_devices::MemVolume::new(s)),
        })
        .collect()
}

fn spec(level: Level, spares: usize) -> CreateSpec {
    CreateSpec {
        level,
        layout: Layout::parse(level, None).unwrap(),
        chunk_bytes: 64 << 10,
        spares,
        name: String::new(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: false,
    }
}

fn news(devs: &[Device]) -> Vec<NewMember> {
    devs.iter()
        .map(|d| NewMember {
            device: d.clone(),
            zeroed: true,
        })
        .collect()
}

/// The 0.90 superblock on `d`, as md reads it.
fn raw(d: &Device) -> Sb090 {
    let sb = Superblock::read_from(d.volume.as_ref()).unwrap().unwrap();
    *sb.v0_90.expect("a 0.90 superblock")
}

#[test]
fn every_table_lists_the_spare_and_a_rebuild_is_a_spare_on_disk() {
    let devs = devices(&[8 * MIB; 4]);
    let mut asm = create_with_metadata(
        &spec(Level::Raid5, 1),
        news(&devs),
        None,
        MetadataVersion::V0_90,
    )
    .unwrap();
    for d in &devs {
        let t = raw(d);
        assert_eq!(t.nr_disks(), 4, "{}: every device listed", d.path);
        assert_eq!(t.disk(3).state, 0, "{}: the spare", d.path);
        assert_eq!(t.disk(3).number, 3);
    }
    // Member 1 fails: the spare takes its slot and is rebuilt, which 0.90
    // can only say by calling it a spare until the rebuild is done.
    let spare = asm.fail(1).unwrap();
    assert_eq!(spare, Some(3));
    for d in [&devs[0], &devs[2], &devs[3]] {
        let t = raw(d);
        assert_eq!(t.disk(1).state & disk_state::FAULTY, disk_state::FAULTY);
        assert_eq!(
            t.disk(3).state,
            0,
            "{}: rebuilding, a spare on disk",
            d.path
        );
        assert_eq!(t.disk(3).raid_disk, 3);
    }
    assert_eq!(raw(&devs[3]).this_disk().state, 0);
    // Read back: the rebuilding member is a spare, the slot missing.
    let again =
        Assembly::assemble(vec![devs[0].clone(), devs[2].clone(), devs[3].clone()]).unwrap();
    assert_eq!(again.missing(), vec![1]);
}

#[test]
fn raid0_over_members_of_different_sizes_is_refused_without_zones() {
    let devs = devices(&[8 * MIB, 12 * MIB]);
    let e = create_with_metadata(
        &spec(Level::Raid0, 0),
        news(&devs),
        None,
        MetadataVersion::V0_90,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("0.90") && e.contains("zones"), "{e}");
    for d in &devs {
        assert!(
            Superblock::read_from(d.volume.as_ref()).unwrap().is_none(),
            "nothing written"
        );
    }
    // Equal sizes are one zone: created.
    let devs = devices(&[8 * MIB, 8 * MIB]);
    create_with_metadata(
        &spec(Level::Raid0, 0),
        news(&devs),
        None,
        MetadataVersion::V0_90,
    )
    .unwrap();
}

/// A member that left and comes back beside the device added in its place:
/// 0.90 derives the device UUID from the device number, and the new device
/// got the old one's number, as md gives it. As mdadm keeps the device with
/// the most events for a slot, the old copy is assembled as stale and never
/// used; the same member given twice (equal events) is still refused. Found
/// by the torture sweep with stale members ("the same member" for both).
#[test]
fn an_old_copy_of_a_member_beside_the_device_in_its_place_is_stale() {
    use raidlab_core::Volume;
    use raidlab_raid::assemble::MemberState;
    use raidlab_raid::manage::Added;
    let devs = devices(&[8 * MIB; 3]);
    let mut asm = create_with_metadata(
        &spec(Level::Raid1, 0),
        news(&devs[..2]),
        None,
        MetadataVersion::V0_90,
    )
    .unwrap();
    let copy_of = |d: &Device, path: &str| {
        let mut bytes = vec![0u8; d.volume.size() as usize];
        d.volume.read_at(&mut bytes, 0).unwrap();
        let v = raidlab_devices::MemVolume::new(bytes.len() as u64);
        v.write_at(&bytes, 0).unwrap();
        Device {
            path: path.into(),
            volume: Arc::new(v),
        }
    };
    let old = copy_of(&devs[1], "m1-old");
    asm.fail(1).unwrap();
    // Assembled again without the failed device (it is gone), a device
    // added now takes the free number 1.
    let mut asm = Assembly::assemble(vec![devs[0].clone()]).unwrap();
    assert_eq!(asm.add(devs[2].clone(), false).unwrap(), Added::IntoSlot(1));
    asm.rebuild(raidlab_raid::recovery::RunOptions::default(), &mut |_| {})
        .unwrap();
    let uuid = |d: &Device| {
        Superblock::read_from(d.volume.as_ref())
            .unwrap()
            .unwrap()
            .device_uuid
    };
    assert_eq!(uuid(&old), uuid(&devs[2]), "the new device took the number");

    let asm = Assembly::assemble(vec![devs[0].clone(), old.clone(), devs[2].clone()])
        .expect("an old copy beside the device in its place assembles");
    let state = |p: &str| {
        asm.members
            .iter()
            .find(|m| m.device.path == p)
            .unwrap()
            .state
    };
    assert_eq!(state("m1-old"), MemberState::Stale);
    assert_eq!(state("m2"), MemberState::Active);
    assert!(asm.missing().is_empty());

    let twice = copy_of(&devs[2], "m2-copy");
    let e = Assembly::assemble(vec![devs[0].clone(), devs[2].clone(), twice]).unwrap_err();
    assert!(e.to_string().contains("are the same member"), "{e}");
}
