//! Writing 0.90: what raidlab writes reads back as the same facts, in the
//! layout md writes (native byte order, the disk table from the devices in
//! service), and what 0.90 cannot hold is refused before anything is written.

use super::*;
use crate::superblock::{MetadataVersion, NewArray};
use raidlab_devices::MemVolume;

const DEV_SECTORS: u64 = (8 << 11) + 100;

fn member_vol(words: &[u32], big_endian: bool) -> MemVolume {
    let vol = MemVolume::new(DEV_SECTORS * 512);
    let b = if big_endian {
        big_endian_of(words)
    } else {
        bytes(words, false)
    };
    vol.write_at(&b, super_offset(DEV_SECTORS).unwrap() * 512)
        .unwrap();
    vol
}

fn raw(vol: &MemVolume) -> Sb090 {
    let at = super_offset(DEV_SECTORS).unwrap() as usize * 512;
    Sb090::parse(&vol.snapshot()[at..at + SB_BYTES]).unwrap()
}

#[test]
fn an_update_reads_back_with_the_same_facts_in_both_byte_orders() {
    for be in [false, true] {
        let mut w = sample_words(4, 2, 8000, true);
        w[11] = 3; // md_minor, kept
        fix(&mut w);
        let vol = member_vol(&w, be);
        let mut sb = crate::Superblock::read_from(&vol).unwrap().unwrap();
        sb.events = (5 << 32) + 7;
        sb.utime = 1_800_000_000;
        sb.resync_offset = 0; // dirty: writes in flight
        sb.write_to(&vol).unwrap();
        let disk = raw(&vol);
        assert!(!disk.big_endian, "written in the host's (x86) byte order");
        assert_eq!(disk.events(), (5 << 32) + 7);
        assert_eq!(disk.utime(), 1_800_000_000);
        assert!(!disk.is_clean());
        assert_eq!(disk.md_minor(), 3);
        assert_eq!(disk.this_disk(), disk.disk(2));
        assert_eq!(
            disk.this_disk().state,
            disk_state::ACTIVE | disk_state::SYNC
        );
        let again = crate::Superblock::read_from(&vol).unwrap().unwrap();
        assert_eq!(again.set_uuid, sb.set_uuid);
        assert_eq!(again.dev_roles, sb.dev_roles);
        assert_eq!(
            (again.level, again.layout, again.chunksize, again.size),
            (sb.level, sb.layout, sb.chunksize, sb.size)
        );
        assert_eq!(again.resync_offset, 0);
        // Clean again, and a checkpoint part-way.
        let mut sb = again;
        sb.resync_offset = MAX_SECTOR;
        sb.write_to(&vol).unwrap();
        assert!(raw(&vol).is_clean());
        sb.resync_offset = 4096;
        sb.write_to(&vol).unwrap();
        let back = crate::Superblock::read_from(&vol).unwrap().unwrap();
        assert_eq!(back.resync_offset, 4096);
    }
}

#[test]
fn the_disk_table_follows_the_roles() {
    let w = sample_words(4, 3, 8000, true);
    let vol = member_vol(&w, false);
    let mut sb = crate::Superblock::read_from(&vol).unwrap().unwrap();
    // Member 1 failed, member 2's slot is empty (its device left), a new
    // device 4 is rebuilding slot 2, device 5 is a spare.
    sb.dev_roles[1] = ROLE_FAULTY;
    sb.dev_roles[2] = ROLE_SPARE;
    sb.dev_roles[4] = 2;
    sb.v0_90.as_mut().unwrap().in_service = Some(InService {
        numbers: vec![0, 3, 4, 5],
        rebuilding: vec![4],
    });
    sb.write_to(&vol).unwrap();
    let d = raw(&vol);
    let st = |i: usize| d.disk(i).state;
    assert_eq!(st(0), disk_state::ACTIVE | disk_state::SYNC);
    assert_eq!(st(1), disk_state::FAULTY);
    assert_eq!(
        st(2),
        disk_state::REMOVED | disk_state::FAULTY,
        "a slot no device holds"
    );
    assert_eq!(d.disk(2).raid_disk, 2);
    assert_eq!((st(4), d.disk(4).raid_disk), (0, 4), "rebuilding: a spare");
    assert_eq!((st(5), d.disk(5).number), (0, 5), "the spare");
    assert_eq!(
        d.disk(6),
        Disk090 {
            number: 0,
            major: 0,
            minor: 0,
            raid_disk: 0,
            state: 0
        }
    );
    // nr, active, working, failed, spare
    assert_eq!(
        (d.nr_disks(), d.w(34), d.w(35), d.w(36), d.w(37)),
        (5, 2, 4, 2, 2)
    );
    let back = crate::Superblock::read_from(&vol).unwrap().unwrap();
    assert_eq!(
        &back.dev_roles[..7],
        &[
            0,
            ROLE_FAULTY,
            ROLE_FAULTY,
            3,
            ROLE_SPARE,
            ROLE_SPARE,
            ROLE_SPARE
        ]
    );
}

#[test]
fn a_new_member_is_written_as_mdadm_lays_it_out() {
    let array = NewArray {
        uuid: [7; 16],
        name: "ignored by 0.90".into(),
        level: 1,
        layout: 0,
        chunk_sectors: 0,
        raid_disks: 2,
        member_sectors: crate::superblock::default_member_sectors_for(
            MetadataVersion::V0_90,
            DEV_SECTORS * 512,
            0,
            1,
            0,
        ),
        data_offset_sectors: 0,
        total_devices: 2,
        clean: true,
    };
    let at = super_offset(DEV_SECTORS).unwrap();
    assert_eq!(
        array.member_sectors,
        (at / 128) * 128,
        "KiB rounded to 64 KiB"
    );
    let sb = crate::superblock::new_member_at(
        &array,
        MetadataVersion::V0_90,
        1,
        1,
        [0; 16],
        DEV_SECTORS,
        1_700_000_000,
    );
    assert_eq!((sb.super_offset, sb.data_offset, sb.data_size), (at, 0, at));
    assert_eq!(sb.version(), MetadataVersion::V0_90);
    let vol = MemVolume::new(DEV_SECTORS * 512);
    sb.write_to(&vol).unwrap();
    let d = raw(&vol);
    assert_eq!((d.minor_version(), d.level(), d.raid_disks()), (90, 1, 2));
    assert_eq!(d.size_kib() as u64 * 2, array.member_sectors);
    assert_eq!(d.this_disk().number, 1);
    assert!(d.is_clean());
    let text = d.examine_text();
    assert!(
        text.contains("UUID : 07070707:07070707:07070707:07070707"),
        "{text}"
    );
    // Only the 4 KiB of the superblock were written.
    let snap = vol.snapshot();
    let written: Vec<usize> = snap
        .iter()
        .enumerate()
        .filter(|(_, &b)| b != 0)
        .map(|(i, _)| i)
        .collect();
    assert!(written
        .iter()
        .all(|&i| (i as u64) >= at * 512 && (i as u64) < at * 512 + 4096));
    let back = crate::Superblock::read_from(&vol).unwrap().unwrap();
    assert_eq!(back.set_uuid, [7; 16]);
    assert_eq!(back.device_uuid, sb.device_uuid);
    assert_eq!(back.role(), crate::Role::Active(1));
}

#[test]
fn what_090_cannot_hold_is_refused_and_nothing_written() {
    let mut w = sample_words(3, 0, 8000, true);
    w[33] |= 1 << 8; // an internal bitmap
    fix(&mut w);
    let vol = member_vol(&w, false);
    let before = vol.snapshot();
    let mut sb = crate::Superblock::read_from(&vol).unwrap().unwrap();
    assert_eq!(sb.bitmap_offset, 8);
    sb.bitmap_offset = 24; // 0.90 has no field for a bitmap elsewhere
    let e = sb.write_to(&vol).unwrap_err().to_string();
    assert!(e.contains("bitmap"), "{e}");
    assert_eq!(vol.snapshot(), before);
    let w = sample_words(3, 0, 8000, true);
    let vol = member_vol(&w, false);
    let mut sb = crate::Superblock::read_from(&vol).unwrap().unwrap();
    sb.size = 1 << 40;
    sb.data_size = u64::MAX / 4;
    let before = vol.snapshot();
    assert!(sb.write_to(&vol).is_err());
    assert_eq!(vol.snapshot(), before);
}
