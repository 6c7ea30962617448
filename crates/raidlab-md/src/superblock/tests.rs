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

#[test]
fn examine_sample_raid5() {
    let sb = sample(5, 2, 4, 1);
    println!("{}", sb.examine_text(131072));
}

#[test]
#[ignore]
fn dump_sample_file() {
    let sb = sample(5, 2, 4, 1);
    let path = std::env::var("DUMP").unwrap();
    let f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    f.set_len(64 << 20).unwrap();
    use std::os::unix::fs::FileExt;
    f.write_all_at(&sb.to_bytes(), SB_OFFSET).unwrap();
}
