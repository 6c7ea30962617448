//! Compatibility with the real mdadm: superblocks raidlab writes must be accepted by
//! `mdadm --examine`, which must print exactly what `Superblock::examine_lines` says.
//!
//! When mdadm is not installed the test says so loudly and passes, except under
//! `CI=true`, where it fails (CI installs mdadm: `apt-get install mdadm`).

mod common;

use common::{mdadm, mdadm_available};
use raidlab_md::superblock::ROLE_FAULTY;
use raidlab_md::{
    default_member_sectors_for, mdadm_data_offset_for, new_member_at, MetadataVersion, NewArray,
    Superblock,
};
use std::os::unix::fs::FileExt;
use std::process::Command;

struct Case {
    what: &'static str,
    level: i32,
    layout: u32,
    chunk_kib: u32,
    raid_disks: u32,
    spares: u32,
    dev_number: u32,
    device_bytes: u64,
    clean: bool,
    faulty_slot: Option<u32>,
    metadata: MetadataVersion,
}

fn case(what: &'static str, level: i32, layout: u32, chunk_kib: u32, raid_disks: u32) -> Case {
    Case {
        what,
        level,
        layout,
        chunk_kib,
        raid_disks,
        spares: 0,
        dev_number: 0,
        device_bytes: 64 << 20,
        clean: true,
        faulty_slot: None,
        metadata: MetadataVersion::V1_2,
    }
}

fn build(c: &Case) -> Superblock {
    let data_offset = mdadm_data_offset_for(c.metadata, c.device_bytes, c.chunk_kib);
    let chunk_sectors = c.chunk_kib * 2;
    let array = NewArray {
        uuid: [
            0x8e,
            0x2f,
            0x41,
            0x07,
            0x9a,
            0xbc,
            0x3d,
            0x10,
            0x55,
            0x66,
            0x77,
            0x88,
            0xfe,
            0xdc,
            0xba,
            c.level as u8,
        ],
        name: format!("lab-{}:{}", c.level, c.what.len()),
        level: c.level,
        layout: c.layout,
        chunk_sectors,
        raid_disks: c.raid_disks,
        member_sectors: default_member_sectors_for(
            c.metadata,
            c.device_bytes,
            data_offset,
            c.level,
            chunk_sectors,
        ),
        data_offset_sectors: data_offset / 512,
        total_devices: c.raid_disks + c.spares,
        clean: c.clean,
    };
    let role = if c.dev_number < c.raid_disks {
        c.dev_number as u16
    } else {
        raidlab_md::ROLE_SPARE
    };
    let mut sb = new_member_at(
        &array,
        c.metadata,
        c.dev_number,
        role,
        [0x40 + c.dev_number as u8; 16],
        c.device_bytes / 512,
        1_700_000_000 + u64::from(c.dev_number),
    );
    if let Some(slot) = c.faulty_slot {
        sb.dev_roles[slot as usize] = ROLE_FAULTY;
        sb.events = 42;
    }
    sb
}

#[test]
fn mdadm_examine_agrees_with_raidlab() {
    if !mdadm_available() {
        return;
    }
    let version = Command::new("mdadm").arg("--version").output().unwrap();
    eprintln!("{}", String::from_utf8_lossy(&version.stderr).trim());

    let mut cases = vec![
        case("raid0", 0, 0, 64, 2),
        case("raid0-3", 0, 0, 512, 3),
        case("raid1", 1, 0, 0, 2),
        case("raid4", 4, 5, 64, 3),
        case("raid5-la", 5, 0, 64, 4),
        case("raid5-ra", 5, 1, 64, 4),
        case("raid5-ls", 5, 2, 64, 4),
        case("raid5-rs", 5, 3, 128, 4),
        case("raid6-ls", 6, 2, 64, 5),
        case("raid6-ls6", 6, 18, 64, 5),
        case("raid6-pl", 6, 5, 256, 4),
        case("raid10-n2", 10, 0x102, 64, 4),
        case("raid10-n2-3", 10, 0x102, 64, 3),
        case("raid10-f2", 10, 0x201, 64, 4),
        case("raid10-o2", 10, 0x10201, 64, 4),
        case("raid10-n2f2", 10, 0x202, 64, 4),
    ];
    let mut spare = case("raid1-spare", 1, 0, 0, 2);
    spare.spares = 1;
    spare.dev_number = 2;
    cases.push(spare);
    let mut dirty = case("raid5-dirty-degraded", 5, 2, 64, 4);
    dirty.clean = false;
    dirty.dev_number = 3;
    dirty.faulty_slot = Some(1);
    cases.push(dirty);
    let mut big = case("raid6-300G", 6, 2, 512, 6);
    big.device_bytes = 300 << 30;
    big.dev_number = 4;
    cases.push(big);
    let mut mid = case("raid1-10G", 1, 0, 0, 2);
    mid.device_bytes = 10 << 30;
    mid.dev_number = 1;
    cases.push(mid);
    // Metadata 1.0 (at the end) and 1.1 (at the start), as mdadm lays them out.
    for (what, level, layout, chunk, disks, bytes, dev, version) in [
        (
            "v10-raid1",
            1,
            0,
            0,
            2,
            64u64 << 20,
            0,
            MetadataVersion::V1_0,
        ),
        (
            "v10-raid5",
            5,
            2,
            64,
            4,
            (64 << 20) + 7 * 512,
            3,
            MetadataVersion::V1_0,
        ),
        (
            "v10-raid10",
            10,
            0x102,
            64,
            4,
            48 << 20,
            1,
            MetadataVersion::V1_0,
        ),
        (
            "v10-raid6-300G",
            6,
            2,
            512,
            6,
            300 << 30,
            4,
            MetadataVersion::V1_0,
        ),
        (
            "v10-raid1-10G",
            1,
            0,
            0,
            2,
            10 << 30,
            1,
            MetadataVersion::V1_0,
        ),
        ("v11-raid1", 1, 0, 0, 2, 64 << 20, 1, MetadataVersion::V1_1),
        (
            "v11-raid5",
            5,
            0,
            128,
            3,
            64 << 20,
            2,
            MetadataVersion::V1_1,
        ),
        (
            "v11-raid6-300G",
            6,
            2,
            512,
            6,
            300 << 30,
            0,
            MetadataVersion::V1_1,
        ),
    ] {
        let mut c = case(what, level, layout, chunk, disks);
        c.device_bytes = bytes;
        c.dev_number = dev;
        c.metadata = version;
        cases.push(c);
    }

    let dir = tempfile::tempdir().unwrap();
    for c in &cases {
        let sb = build(c);
        let path = dir.path().join(format!("{}.img", c.what));
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(c.device_bytes).unwrap();
        f.write_all_at(&sb.to_bytes(), sb.super_offset * 512)
            .unwrap();
        drop(f);
        // raidlab finds it again where this version keeps it.
        let vol =
            raidlab_devices::FileVolume::open(&path, raidlab_devices::OpenMode::ReadOnly).unwrap();
        let back = Superblock::read_from(&vol).unwrap();
        assert_eq!(back.as_ref(), Some(&sb), "{}: read back", c.what);
        assert_eq!(sb.version(), c.metadata, "{}", c.what);
        drop(vol);

        let (ok, raw, got) = mdadm(&["--examine"], &path);
        assert!(ok, "{}: mdadm --examine failed:\n{raw}", c.what);
        assert!(got.len() >= 20, "{}: too little output:\n{raw}", c.what);
        let checksum = got.iter().find(|(l, _)| l == "Checksum").map(|p| &p.1);
        assert!(
            checksum.is_some_and(|v| v.ends_with("- correct")),
            "{}: mdadm does not call the checksum correct:\n{raw}",
            c.what
        );
        let want = sb.examine_lines(c.device_bytes / 512);
        for key in [
            "Array UUID",
            "Raid Level",
            "Layout",
            "Chunk Size",
            "Raid Devices",
            "Data Offset",
            "Events",
            "Device Role",
            "Array State",
        ] {
            let g = got.iter().find(|(l, _)| l == key);
            let w = want.iter().find(|(l, _)| l == key);
            assert_eq!(g, w, "{}: {key} differs\nmdadm:\n{raw}", c.what);
        }
        assert_eq!(
            got,
            want,
            "{}: examine lines differ\nmdadm:\n{raw}\nraidlab:\n{}",
            c.what,
            sb.examine_text(c.device_bytes / 512)
        );
    }
}
