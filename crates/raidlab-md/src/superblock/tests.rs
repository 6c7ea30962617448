//! Unit tests of the v1.2 superblock: md_p.h field offsets, round trips, single-byte
//! corruption, error messages, create-time choices, and never panicking on any input.

use super::*;

pub(crate) fn sample(level: i32, layout: u32, raid_disks: u32, dev_number: u32) -> Superblock {
    let dev_bytes = 64u64 << 20;
    let chunk_sectors = if level == 1 { 0 } else { 128 };
    let data_offset = mdadm_data_offset(dev_bytes, chunk_sectors / 2);
    let array = NewArray {
        uuid: [
            0x3a, 0x1b, 0x5c, 0x7d, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a,
            0x0b, 0x0c,
        ],
        name: "raidlab:test".into(),
        level,
        layout,
        chunk_sectors,
        raid_disks,
        member_sectors: default_member_sectors(dev_bytes, data_offset, level, chunk_sectors),
        data_offset_sectors: data_offset / 512,
        total_devices: raid_disks + 1,
        clean: true,
    };
    let mut dev_uuid = [0u8; 16];
    for (i, b) in dev_uuid.iter_mut().enumerate() {
        *b = 0xd0 + i as u8 + dev_number as u8;
    }
    let role = if dev_number < raid_disks {
        dev_number as u16
    } else {
        ROLE_SPARE
    };
    new_member(
        &array,
        dev_number,
        role,
        dev_uuid,
        dev_bytes / 512,
        1_700_000_000,
    )
}

#[test]
fn round_trip_new_member() {
    for (level, layout, n) in [
        (0, 0, 2),
        (1, 0, 2),
        (4, 5, 3),
        (5, 2, 4),
        (6, 2, 5),
        (10, 0x102, 4),
    ] {
        for dev in 0..=n {
            let sb = sample(level, layout, n, dev);
            let bytes = sb.to_bytes();
            assert_eq!(bytes.len(), 4096);
            assert!(Superblock::checksum_ok(&bytes));
            let back = Superblock::parse(&bytes).unwrap();
            assert_eq!(back, sb);
            assert_eq!(back.to_bytes(), bytes);
        }
    }
}

/// Recompute the checksum in place (to reach the field checks past the checksum).
fn fix_csum(b: &mut [u8]) {
    let c = Superblock::checksum(b);
    b[216..220].copy_from_slice(&c.to_le_bytes());
}

fn set_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn set_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// An independent, deliberately naive implementation of md's checksum.
fn reference_csum(b: &[u8]) -> u32 {
    let max_dev = u32::from_le_bytes(b[220..224].try_into().unwrap()) as usize;
    let mut copy = b[..256 + 2 * max_dev].to_vec();
    copy[216..220].fill(0);
    if copy.len() % 4 == 2 {
        copy.extend_from_slice(&[0, 0]);
    }
    let sum: u64 = copy
        .chunks(4)
        .map(|w| u64::from(u32::from_le_bytes(w.try_into().unwrap())))
        .sum();
    ((sum & 0xffff_ffff) + (sum >> 32)) as u32
}

/// A superblock laid out by hand from md_p.h's offsets, as md writes one for member
/// 2 of a 4-device raid6 (left-symmetric, 128K chunk) that has been running.
fn hand_built() -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    set_u32(&mut b, 0, 0xa92b4efc); // magic
    set_u32(&mut b, 4, 1); // major_version
    set_u32(&mut b, 8, 0); // feature_map
    b[16..32].copy_from_slice(&[0x11; 16]); // set_uuid
    b[32..38].copy_from_slice(b"host:7"); // set_name
    set_u64(&mut b, 64, 1_600_000_000); // ctime
    set_u32(&mut b, 72, 6); // level
    set_u32(&mut b, 76, 2); // layout
    set_u64(&mut b, 80, 20_480); // size
    set_u32(&mut b, 88, 256); // chunksize
    set_u32(&mut b, 92, 4); // raid_disks
    set_u64(&mut b, 128, 2048); // data_offset
    set_u64(&mut b, 136, 22_528); // data_size
    set_u64(&mut b, 144, 8); // super_offset
    set_u32(&mut b, 160, 2); // dev_number
    b[168..184].copy_from_slice(&[0x22; 16]); // device_uuid
    b[186..188].copy_from_slice(&8u16.to_le_bytes()); // bblog_size
    set_u32(&mut b, 188, 16); // bblog_offset
    set_u64(&mut b, 192, 1_600_000_100); // utime
    set_u64(&mut b, 200, 17); // events
    set_u64(&mut b, 208, u64::MAX); // resync_offset
    set_u32(&mut b, 220, 128); // max_dev
    b[256..].fill(0xff);
    for (i, r) in [0u16, 1, 2, 3].iter().enumerate() {
        b[256 + 2 * i..258 + 2 * i].copy_from_slice(&r.to_le_bytes());
    }
    let c = reference_csum(&b);
    set_u32(&mut b, 216, c);
    b
}

#[test]
fn field_offsets_match_md_p_h() {
    // The offsets of struct mdp_superblock_1 (include/uapi/linux/raid/md_p.h).
    assert_eq!(
        (off::MAGIC, off::MAJOR_VERSION, off::FEATURE_MAP, off::PAD0),
        (0, 4, 8, 12)
    );
    assert_eq!((off::SET_UUID, off::SET_NAME, off::CTIME), (16, 32, 64));
    assert_eq!((off::LEVEL, off::LAYOUT, off::SIZE), (72, 76, 80));
    assert_eq!(
        (off::CHUNKSIZE, off::RAID_DISKS, off::BITMAP_OFFSET),
        (88, 92, 96)
    );
    assert_eq!(
        (off::NEW_LEVEL, off::RESHAPE_POSITION, off::DELTA_DISKS),
        (100, 104, 112)
    );
    assert_eq!(
        (off::NEW_LAYOUT, off::NEW_CHUNK, off::NEW_OFFSET),
        (116, 120, 124)
    );
    assert_eq!(
        (off::DATA_OFFSET, off::DATA_SIZE, off::SUPER_OFFSET),
        (128, 136, 144)
    );
    assert_eq!(
        (
            off::RECOVERY_OFFSET,
            off::DEV_NUMBER,
            off::CNT_CORRECTED_READ
        ),
        (152, 160, 164)
    );
    assert_eq!(
        (off::DEVICE_UUID, off::DEVFLAGS, off::BBLOG_SHIFT),
        (168, 184, 185)
    );
    assert_eq!(
        (off::BBLOG_SIZE, off::BBLOG_OFFSET, off::UTIME),
        (186, 188, 192)
    );
    assert_eq!(
        (off::EVENTS, off::RESYNC_OFFSET, off::SB_CSUM),
        (200, 208, 216)
    );
    assert_eq!((off::MAX_DEV, off::PAD3, off::DEV_ROLES), (220, 224, 256));

    let b = hand_built();
    let sb = Superblock::parse(&b).expect("hand-built superblock parses");
    assert_eq!(sb.level, 6);
    assert_eq!(sb.layout, 2);
    assert_eq!(sb.set_uuid, [0x11; 16]);
    assert_eq!(sb.device_uuid, [0x22; 16]);
    assert_eq!(sb.set_name, "host:7");
    assert_eq!(sb.chunksize, 256);
    assert_eq!(sb.events, 17);
    assert_eq!(sb.role(), Role::Active(2));
    assert!(sb.is_clean());
    assert_eq!(sb.array_state_string(), "AAAA");
    // Serialising gives back exactly the hand-made bytes.
    assert_eq!(sb.to_bytes(), b);

    // And the other way: fields land at md's offsets.
    let out = sample(5, 2, 4, 3).to_bytes();
    assert_eq!(&out[0..4], &[0xfc, 0x4e, 0x2b, 0xa9]); // magic, little-endian
    assert_eq!(&out[4..8], &1u32.to_le_bytes());
    assert_eq!(out[16], 0x3a); // set_uuid
    assert_eq!(&out[32..44], b"raidlab:test");
    assert_eq!(&out[72..76], &5u32.to_le_bytes()); // level
    assert_eq!(&out[76..80], &2u32.to_le_bytes()); // layout
    assert_eq!(&out[88..92], &128u32.to_le_bytes()); // chunksize
    assert_eq!(&out[92..96], &4u32.to_le_bytes()); // raid_disks
    assert_eq!(&out[144..152], &8u64.to_le_bytes()); // super_offset
    assert_eq!(&out[160..164], &3u32.to_le_bytes()); // dev_number
    assert_eq!(&out[208..216], &u64::MAX.to_le_bytes()); // resync_offset: clean
    assert_eq!(&out[216..220], &reference_csum(&out).to_le_bytes());
    assert_eq!(&out[220..224], &128u32.to_le_bytes()); // max_dev
    assert_eq!(&out[256 + 6..256 + 8], &3u16.to_le_bytes()); // dev_roles[3]
    assert_eq!(&out[256 + 8..256 + 10], &[0xff, 0xff]); // dev_roles[4]: spare
}

#[test]
fn checksum_matches_reference_including_odd_max_dev() {
    let mut b = hand_built();
    for max_dev in [0u32, 1, 4, 5, 127, 128, 1919, 1920] {
        set_u32(&mut b, 220, max_dev);
        assert_eq!(
            Superblock::checksum(&b),
            reference_csum(&b),
            "max_dev {max_dev}"
        );
    }
    // Over the 4 KiB limit: clamped, no panic, and parse refuses with the field name.
    set_u32(&mut b, 220, 5000);
    let _ = Superblock::checksum(&b);
    let e = Superblock::parse(&b).unwrap_err().to_string();
    assert!(
        e.contains("max_dev") && e.contains("5000") && e.contains("1920"),
        "{e}"
    );
}

#[test]
fn every_single_byte_flip_is_detected() {
    let sb = sample(6, 2, 5, 1);
    let good = sb.to_bytes();
    let covered = 256 + 2 * sb.max_dev as usize;
    for i in 0..covered {
        for mask in [0x01u8, 0x80, 0xff] {
            let mut b = good.clone();
            b[i] ^= mask;
            assert!(
                Superblock::parse(&b).is_err(),
                "flip {mask:#x} at byte {i} not detected"
            );
        }
    }
    // Bytes past the roles are outside the checksum and do not matter.
    let mut b = good.clone();
    b[covered] ^= 1;
    assert_eq!(Superblock::parse(&b).unwrap(), sb);
}

#[test]
fn errors_name_field_value_and_expectation() {
    let good = sample(5, 2, 4, 0).to_bytes();
    type Mutation = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(Mutation, &[&str])> = vec![
        (
            Box::new(|b| set_u32(b, 0, 0x12345678)),
            &["magic", "0x12345678", "0xa92b4efc"],
        ),
        (
            Box::new(|b| set_u32(b, 4, 0)),
            &["major_version", "is 0", "expected 1"],
        ),
        (
            Box::new(|b| set_u32(b, 216, 7)),
            &["sb_csum", "0x00000007", "expected 0x"],
        ),
        (
            Box::new(|b| {
                set_u64(b, 144, 3);
                fix_csum(b)
            }),
            &["super_offset", "3 sectors", "8 (v1.2)", "multiple of 8"],
        ),
        (
            Box::new(|b| {
                set_u64(b, 128, 8);
                fix_csum(b)
            }),
            &["data_offset", "8 sectors", "at least 16"],
        ),
        (
            Box::new(|b| {
                set_u64(b, 80, 1 << 40);
                fix_csum(b)
            }),
            &["size", "at most data_size"],
        ),
        (
            Box::new(|b| {
                set_u32(b, 92, 0);
                fix_csum(b)
            }),
            &["raid_disks", "is 0"],
        ),
        (
            Box::new(|b| {
                set_u32(b, 92, 200);
                fix_csum(b)
            }),
            &["raid_disks", "200", "max_dev"],
        ),
        (
            Box::new(|b| {
                set_u32(b, 160, 128);
                fix_csum(b)
            }),
            &["dev_number", "128"],
        ),
        (
            Box::new(|b| {
                set_u32(b, 8, 1 << 20);
                fix_csum(b)
            }),
            &["feature_map", "unknown bits"],
        ),
        (
            Box::new(|b| {
                b[256 + 2] = 9;
                fix_csum(b)
            }),
            &["dev_roles[1]", "is 9"],
        ),
        (
            Box::new(|b| {
                b[256 + 2] = 0;
                b[256 + 4] = 0;
                fix_csum(b)
            }),
            &["dev_roles[2]", "more than two"],
        ),
        (
            Box::new(|b| {
                b[230] = 1;
                fix_csum(b)
            }),
            &["pad3 (byte 230)"],
        ),
        (
            Box::new(|b| {
                set_u32(b, 88, 0);
                fix_csum(b)
            }),
            &["chunksize", "non-zero"],
        ),
        (
            Box::new(|b| {
                set_u32(b, 188, 0xffff_fff0);
                fix_csum(b)
            }),
            &["bblog_offset", "-16"],
        ),
    ];
    for (mutate, words) in cases {
        let mut b = good.clone();
        mutate(&mut b);
        let e = Superblock::parse(&b).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Invalid);
        let msg = e.to_string();
        for w in words {
            assert!(msg.contains(w), "{msg:?} lacks {w:?}");
        }
    }
    let e = Superblock::parse(&good[..100]).unwrap_err().to_string();
    assert!(e.contains("100 bytes"), "{e}");
}

#[test]
fn roles_and_array_state() {
    let mut sb = sample(5, 2, 4, 4); // device 4 is the spare
    assert_eq!(sb.role(), Role::Spare);
    assert_eq!(sb.device_role_string(), "spare");
    sb.dev_roles[2] = ROLE_FAULTY;
    assert_eq!(sb.array_state_string(), "AA.A");
    sb.dev_roles[4] = 2; // the spare took slot 2
    assert_eq!(sb.role(), Role::Active(2));
    assert_eq!(sb.array_state_string(), "AAAA");
    sb.dev_roles[2] = 2;
    sb.feature_map |= feature::REPLACEMENT;
    assert_eq!(sb.role(), Role::Replacement(2));
    assert_eq!(sb.device_role_string(), "Replacement device 2");
    assert_eq!(sb.array_state_string(), "AARA");
    sb.dev_roles[4] = ROLE_JOURNAL;
    assert_eq!(sb.role(), Role::Journal);
    sb.dev_number = 500;
    assert_eq!(sb.role(), Role::Unknown);
    let mut sb = sample(1, 0, 2, 0);
    assert!(sb.is_clean());
    sb.resync_offset = 0;
    assert!(!sb.is_clean());
    assert!(sb
        .examine_lines(131072)
        .contains(&("State".into(), "active".into())));
}

#[test]
fn mdadm_data_offset_rule() {
    const MIB: u64 = 1 << 20;
    // Large members: 128 MiB headroom + bitmap space + 12 KiB, rounded up to 1 MiB.
    assert_eq!(default_data_offset(1 << 40), 264_192 * 512);
    assert_eq!(default_data_offset(200 << 30), 264_192 * 512);
    // 100 GiB: headroom halves once (aiming at ~0.1%), 64 MiB + 64 KiB + 12 KiB -> 65 MiB.
    assert_eq!(default_data_offset(100 << 30), 133_120 * 512);
    // 64 MiB with the default 512K chunk: headroom stops at 2048 sectors.
    assert_eq!(default_data_offset(64 * MIB), 2 * MIB);
    assert_eq!(mdadm_data_offset(64 * MIB, 64), MIB);
    assert_eq!(mdadm_data_offset(64 * MIB, 0), MIB);
    assert_eq!(mdadm_data_offset(1 << 30, 0), 2 * MIB);
    for bytes in [
        0u64,
        1,
        4096,
        1 << 20,
        100 << 20,
        7 << 30,
        300 << 30,
        u64::MAX / 2,
    ] {
        for chunk in [0u32, 4, 64, 512, 4096] {
            let o = mdadm_data_offset(bytes, chunk);
            assert_eq!(o % 4096, 0);
            assert!(o >= 8192 + 4096, "{bytes} {chunk}: room for the superblock");
        }
    }
    // Member size: whole chunks (raid5) or 64 KiB (raid1) after the data offset.
    assert_eq!(default_member_sectors(64 * MIB, MIB, 5, 128), 129_024);
    assert_eq!(default_member_sectors(64 * MIB + 3000, MIB, 1, 0), 129_024);
    assert_eq!(default_member_sectors(MIB, 2 * MIB, 5, 128), 0);
}

#[test]
fn new_member_matches_mdadm_create() {
    let sb = sample(5, 2, 4, 0);
    assert_eq!(sb.events, 0);
    assert_eq!(sb.max_dev, 128);
    assert_eq!(sb.dev_roles[..5], [0, 1, 2, 3, ROLE_SPARE]);
    assert_eq!((sb.bblog_size, sb.bblog_offset), (8, 16));
    assert_eq!(sb.data_size, 131_072 - 2048);
    assert_eq!(sb.ctime, sb.utime);
    // max_dev grows in 256-device steps of the 512-byte-rounded superblock.
    let mut a = NewArray {
        uuid: [1; 16],
        name: "x".repeat(40),
        level: 1,
        layout: 0,
        chunk_sectors: 0,
        raid_disks: 2,
        member_sectors: 1024,
        data_offset_sectors: 2048,
        total_devices: 300,
        clean: false,
    };
    let sb = new_member(&a, 0, 0, [2; 16], 4096, 5);
    assert_eq!(sb.max_dev, 384);
    assert_eq!(sb.set_name.len(), 31);
    assert_eq!(sb.resync_offset, 0);
    Superblock::parse(&sb.to_bytes()).unwrap();
    // Data right after the superblock: no room for a bad block log.
    a.data_offset_sectors = 16;
    let sb = new_member(&a, 1, 1, [2; 16], 4096, 5);
    assert_eq!((sb.bblog_size, sb.bblog_offset), (0, 0));
    Superblock::parse(&sb.to_bytes()).unwrap();
    a.data_offset_sectors = 32;
    let sb = new_member(&a, 1, 1, [2; 16], 4096, 5);
    assert_eq!((sb.bblog_size, sb.bblog_offset), (8, 16));
    Superblock::parse(&sb.to_bytes()).unwrap();
}

struct MemVol(std::sync::Mutex<Vec<u8>>);

impl Volume for MemVol {
    fn name(&self) -> String {
        "mem".into()
    }
    fn size(&self) -> u64 {
        self.0.lock().unwrap().len() as u64
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<(), Error> {
        let v = self.0.lock().unwrap();
        raidlab_core::check_range("mem", Op::Read, v.len() as u64, offset, buf.len() as u64)?;
        buf.copy_from_slice(&v[offset as usize..offset as usize + buf.len()]);
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<(), Error> {
        let mut v = self.0.lock().unwrap();
        raidlab_core::check_range("mem", Op::Write, v.len() as u64, offset, buf.len() as u64)?;
        v[offset as usize..offset as usize + buf.len()].copy_from_slice(buf);
        Ok(())
    }
    fn flush(&self) -> Result<(), Error> {
        Ok(())
    }
}

#[test]
fn read_and_write_through_a_volume() {
    let vol = MemVol(std::sync::Mutex::new(vec![0u8; 64 << 20]));
    assert_eq!(Superblock::read_from(&vol).unwrap(), None);
    let sb = sample(10, 0x102, 4, 2);
    sb.write_to(&vol).unwrap();
    assert_eq!(Superblock::read_from(&vol).unwrap(), Some(sb.clone()));
    {
        let v = vol.0.lock().unwrap();
        assert!(
            v[..4096].iter().all(|&b| b == 0),
            "nothing before the superblock"
        );
        assert!(
            v[8192..].iter().all(|&b| b == 0),
            "nothing after the 4 KiB area"
        );
    }
    // Magic present but corrupt: an error naming the device and offset.
    vol.0.lock().unwrap()[4096 + 100] ^= 1;
    let e = Superblock::read_from(&vol).unwrap_err();
    assert_eq!(e.device.as_deref(), Some("mem"));
    assert_eq!(e.range, Some((4096, 4096)));
    assert!(e.to_string().contains("sb_csum"));
    // A data area past the end of the device is refused both ways.
    let small = MemVol(std::sync::Mutex::new(vec![0u8; 32 << 20]));
    assert!(sb.write_to(&small).is_err());
    small.0.lock().unwrap()[4096..8192].copy_from_slice(&sb.to_bytes());
    let e = Superblock::read_from(&small).unwrap_err().to_string();
    assert!(e.contains("data_size"), "{e}");
    // Too small to hold a superblock at all: not a member.
    let tiny = MemVol(std::sync::Mutex::new(vec![0u8; 5000]));
    assert_eq!(Superblock::read_from(&tiny).unwrap(), None);
}

#[test]
fn json_examine_has_mdadm_labels() {
    let sb = sample(6, 2, 5, 1);
    let j = sb.examine_json(131_072);
    assert_eq!(j["array_uuid"], "3a1b5c7d:01020304:05060708:090a0b0c");
    assert_eq!(j["level"], "raid6");
    assert_eq!(j["layout"], "left-symmetric");
    assert_eq!(j["chunk_size_kib"], 64);
    assert_eq!(j["raid_devices"], 5);
    assert_eq!(j["data_offset"], 2048);
    assert_eq!(j["device_role"], "Active device 1");
    assert_eq!(j["checksum_state"], "correct");
    assert_eq!(j["array_state"], "AAAAA");
    assert_eq!(j["events"], 0);
    serde_json::to_string(&sb).unwrap();
}

#[test]
fn layout_names() {
    assert_eq!(layout_name(10, 0x102, 0).unwrap(), "near=2");
    assert_eq!(layout_name(10, 0x201, 0).unwrap(), "far=2");
    assert_eq!(layout_name(10, 0x10201, 0).unwrap(), "offset=2");
    assert_eq!(layout_name(10, 0x202, 0).unwrap(), "near=2, far=2");
    assert_eq!(layout_name(10, 0x101, 0).unwrap(), "NO REDUNDANCY");
    assert_eq!(layout_name(5, 0, 0).unwrap(), "left-asymmetric");
    assert_eq!(layout_name(5, 9, 0).unwrap(), "-unknown-");
    assert_eq!(layout_name(6, 18, 0).unwrap(), "left-symmetric-6");
    assert_eq!(layout_name(0, 2, 0), None);
    assert_eq!(
        layout_name(0, 2, feature::RAID0_LAYOUT).unwrap(),
        "alternate"
    );
    assert_eq!(layout_name(1, 0, 0), None);
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4200)) {
            prop_assert!(Superblock::parse(&bytes).is_err());
            let _ = Superblock::checksum(&bytes);
        }

        #[test]
        fn random_bytes_with_magic_never_panic(
            mut bytes in proptest::collection::vec(any::<u8>(), 256..4097),
            fix in any::<bool>(),
        ) {
            bytes[0..4].copy_from_slice(&MD_SB_MAGIC.to_le_bytes());
            bytes[4..8].copy_from_slice(&1u32.to_le_bytes());
            if fix {
                fix_csum(&mut bytes);
            }
            let _ = Superblock::parse(&bytes);
        }

        #[test]
        fn mutated_superblocks_never_panic_and_round_trip_when_accepted(
            level_idx in 0usize..6,
            muts in proptest::collection::vec((0usize..4096, any::<u8>()), 1..8),
            fix in any::<bool>(),
        ) {
            let (level, layout, n) = [(0, 0, 2), (1, 0, 2), (4, 5, 3), (5, 2, 4), (6, 2, 5), (10, 0x102, 4)][level_idx];
            let mut b = sample(level, layout, n, 0).to_bytes();
            for (at, v) in muts {
                b[at] = v;
            }
            if fix {
                fix_csum(&mut b);
            }
            if let Ok(sb) = Superblock::parse(&b) {
                let again = sb.to_bytes();
                prop_assert_eq!(Superblock::parse(&again).unwrap(), sb.clone());
                let _ = sb.examine_lines(u64::MAX);
                let _ = sb.examine_lines(0);
                let _ = sb.examine_json(0);
            }
        }

        /// v1.0 (end) and v1.1 (start) superblocks on a device, mutated: reading
        /// them never panics, and whatever is accepted lies inside the device with
        /// its data clear of the superblock.
        #[test]
        fn mutated_v10_v11_on_a_device_never_panic(
            v10 in any::<bool>(),
            extra in 0u64..16,
            muts in proptest::collection::vec((0usize..4096, any::<u8>()), 0..8),
            fix in any::<bool>(),
        ) {
            let version = if v10 { MetadataVersion::V1_0 } else { MetadataVersion::V1_1 };
            let dev_sectors = (8u64 << 11) + extra;
            let sb = sample_at(version, 5, 2, 4, 1, dev_sectors);
            let mut b = sb.to_bytes();
            for (at, v) in muts {
                b[at] = v;
            }
            if fix {
                fix_csum(&mut b);
            }
            let vol = raidlab_devices::MemVolume::new(dev_sectors * 512);
            vol.write_at(&b, sb.super_offset * 512).unwrap();
            if let Ok(Some(got)) = Superblock::read_from(&vol) {
                prop_assert_eq!(got.super_offset, version.super_offset(dev_sectors).unwrap());
                prop_assert!(got.data_offset + got.data_size <= dev_sectors);
                if v10 {
                    prop_assert!(got.data_offset + got.data_size <= got.super_offset);
                } else {
                    prop_assert!(got.data_offset >= 8);
                }
            }
        }
    }
}

/// A member of a RAID `level` array with metadata `version` on a device of
/// `dev_sectors`, as mdadm would create it.
pub(crate) fn sample_at(
    version: MetadataVersion,
    level: i32,
    layout: u32,
    raid_disks: u32,
    dev_number: u32,
    dev_sectors: u64,
) -> Superblock {
    let chunk_sectors = if level == 1 { 0 } else { 128 };
    let dev_bytes = dev_sectors * 512;
    let data_offset = mdadm_data_offset_for(version, dev_bytes, chunk_sectors / 2);
    let array = NewArray {
        uuid: [7; 16],
        name: "v1x".into(),
        level,
        layout,
        chunk_sectors,
        raid_disks,
        member_sectors: default_member_sectors_for(
            version,
            dev_bytes,
            data_offset,
            level,
            chunk_sectors,
        ),
        data_offset_sectors: data_offset / 512,
        total_devices: raid_disks,
        clean: true,
    };
    new_member_at(
        &array,
        version,
        dev_number,
        dev_number as u16,
        [9; 16],
        dev_sectors,
        1_700_000_000,
    )
}

#[test]
fn v10_and_v11_are_placed_as_mdadm_places_them() {
    // 64 MiB + 3 sectors: the v1.0 superblock is 4 KiB aligned, 8 to 12 KiB
    // from the end.
    let dev = (64u64 << 11) + 3;
    let sb = sample_at(MetadataVersion::V1_0, 1, 0, 2, 0, dev);
    assert_eq!(sb.super_offset, (dev - 16) & !7);
    assert_eq!(sb.data_offset, 0);
    assert_eq!(sb.version(), MetadataVersion::V1_0);
    // 64 MiB: bitmap space 8 sectors + 8 for the log before the superblock.
    assert_eq!(sb.data_size, sb.super_offset - 16);
    assert_eq!((sb.bblog_size, sb.bblog_offset), (8, -8));
    assert!(sb.size <= sb.data_size && sb.size % 128 == 0);
    sb.validate().unwrap();
    let sb = sample_at(MetadataVersion::V1_1, 5, 2, 4, 2, 64 << 11);
    assert_eq!(sb.super_offset, 0);
    assert_eq!(sb.data_offset, 2048);
    assert_eq!(sb.data_size, (64 << 11) - 2048);
    assert_eq!((sb.bblog_size, sb.bblog_offset), (8, 16));
    sb.validate().unwrap();
}

#[test]
fn read_from_finds_each_version_and_write_to_puts_it_back() {
    let dev = (32u64 << 11) + 5;
    for version in MetadataVersion::ALL {
        let vol = raidlab_devices::MemVolume::new(dev * 512);
        let mut sb = sample_at(version, 6, 2, 5, 3, dev);
        sb.write_to(&vol).unwrap();
        let got = Superblock::read_from(&vol).unwrap().unwrap();
        assert_eq!(got, sb, "{version}");
        let raw = vol.snapshot();
        let at = (sb.super_offset * 512) as usize;
        assert_eq!(raw[at..at + 4], MD_SB_MAGIC.to_le_bytes(), "{version}");
        // Nothing else was written.
        assert!(raw[..at].iter().all(|&b| b == 0), "{version}");
        assert!(raw[at + 4096..].iter().all(|&b| b == 0), "{version}");
        // The same superblock on a device of another size is not v1.0's place.
        if version == MetadataVersion::V1_0 {
            let other = raidlab_devices::MemVolume::new((dev + 64) * 512);
            let e = sb.write_to(&other).unwrap_err().to_string();
            assert!(e.contains("does not belong on this device"), "{e}");
            sb.events += 1;
        }
    }
}

#[test]
fn the_newest_of_several_superblocks_wins_as_in_mdadm() {
    // A device once a v1.0 member, then made a v1.2 member later: both
    // superblocks are on it; mdadm takes the later creation time.
    let dev = 32u64 << 11;
    let vol = raidlab_devices::MemVolume::new(dev * 512);
    let mut old = sample_at(MetadataVersion::V1_0, 1, 0, 2, 0, dev);
    old.ctime = 1_600_000_000;
    old.write_to(&vol).unwrap();
    let mut new = sample_at(MetadataVersion::V1_2, 1, 0, 2, 0, dev);
    new.data_size = old.super_offset - new.data_offset; // keep clear of the old one
    new.size = new.size.min(new.data_size);
    new.write_to(&vol).unwrap();
    assert_eq!(Superblock::read_from(&vol).unwrap().unwrap(), new);
    new.ctime = 1_500_000_000;
    new.write_to(&vol).unwrap();
    assert_eq!(Superblock::read_from(&vol).unwrap().unwrap(), old);
}

#[test]
fn a_superblock_found_where_its_super_offset_does_not_say_is_refused() {
    // A v1.2 superblock copied to sector 0 claims super_offset 8.
    let dev = 32u64 << 11;
    let vol = raidlab_devices::MemVolume::new(dev * 512);
    let sb = sample_at(MetadataVersion::V1_2, 1, 0, 2, 0, dev);
    vol.write_at(&sb.to_bytes(), 0).unwrap();
    let e = Superblock::read_from(&vol).unwrap_err().to_string();
    assert!(
        e.contains("super_offset") && e.contains("where this v1.1"),
        "{e}"
    );
}

mod reshape_examine;
