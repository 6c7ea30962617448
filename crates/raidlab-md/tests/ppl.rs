//! The md raid5 partial parity log: header round trips, md's checksums, placement
//! as mdadm creates it (checked with `mdadm --examine` when mdadm is installed),
//! the start-up scan and what recovery would replay, and fuzzing.

mod common;

use common::mdadm_available;
use proptest::prelude::*;
use raidlab_core::Volume;
use raidlab_devices::MemVolume;
use raidlab_md::ppl::{self, PplEntry, PplHeader, PPL_HEADER_SIZE};
use raidlab_md::superblock::feature;
use raidlab_md::{default_member_sectors, new_member, NewArray, Superblock, SB_OFFSET};
use std::process::Command;

const UUID: [u8; 16] = [
    0x8e, 0x2f, 0x41, 0x07, 0x9a, 0xbc, 0x3d, 0x10, 0x55, 0x66, 0x77, 0x88, 0xfe, 0xdc, 0xba, 0x05,
];

fn raid5_member(device_bytes: u64) -> Superblock {
    let data_offset = ppl::mdadm_ppl_data_offset(device_bytes, 512);
    let array = NewArray {
        uuid: UUID,
        name: "lab:ppl".into(),
        level: 5,
        layout: 2,
        chunk_sectors: 1024,
        raid_disks: 3,
        member_sectors: default_member_sectors(device_bytes, data_offset, 5, 1024),
        data_offset_sectors: data_offset / 512,
        total_devices: 3,
        clean: true,
    };
    let mut sb = new_member(&array, 0, 0, [0x40; 16], device_bytes / 512, 1_700_000_000);
    ppl::enable_ppl(&mut sb).unwrap();
    sb
}

fn pp(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

#[test]
fn mdadm_create_placement() {
    // 64 MiB member, 512K chunk: headroom stops at 2048 sectors, so data_offset
    // = round_up(24 + 2048 + 2048, 2048) = 6144 sectors (3 MiB).
    assert_eq!(ppl::mdadm_ppl_data_offset(64 << 20, 512), 6144 * 512);
    // Large members: 128 MiB headroom + 1 MiB PPL + 12 KiB, rounded up to 130 MiB.
    assert_eq!(ppl::mdadm_ppl_data_offset(1 << 40, 512), 266240 * 512);
    let sb = raid5_member(64 << 20);
    assert_eq!(sb.feature_map, feature::PPL);
    assert_eq!((sb.ppl_offset(), sb.ppl_size()), (8, 2048));
    assert_eq!(sb.bitmap_offset as u32, 0x0800_0008);
    assert_eq!((sb.bblog_offset, sb.bblog_size), (2056, 8));
    assert_eq!(
        ppl::ppl_area(&sb).unwrap(),
        Some((SB_OFFSET + 4096, 1 << 20))
    );
    Superblock::parse(&sb.to_bytes()).unwrap();
    // The area mdadm writes: zeros, an empty header with the uuid's signature.
    let area = ppl::initial_area(&sb).unwrap();
    let h = PplHeader::parse(&area).unwrap();
    assert_eq!(h, PplHeader::empty(ppl::signature(&UUID)));
    assert!(area[..512].iter().all(|&b| b == 0xff));
    assert!(area[PPL_HEADER_SIZE..].iter().all(|&b| b == 0));
    // Not raid5, or a bitmap too: refused.
    let mut r6 = sb.clone();
    r6.level = 6;
    r6.feature_map = 0;
    assert!(ppl::enable_ppl(&mut r6).is_err());
    let mut both = sb.clone();
    both.feature_map |= feature::BITMAP_OFFSET;
    assert!(ppl::ppl_area(&both).is_err());
}

#[test]
fn placement_checks() {
    let sb = raid5_member(64 << 20);
    let mut s = sb.clone();
    s.feature_map = 0;
    assert_eq!(ppl::ppl_area(&s).unwrap(), None);
    let with = |offset: i16, size: u16| {
        let mut s = sb.clone();
        s.bitmap_offset = ((u32::from(size) << 16) | u32::from(offset as u16)) as i32;
        s.bblog_size = 0;
        s
    };
    assert!(ppl::ppl_area(&with(2, 2048)).is_err()); // inside the superblock area
    assert!(ppl::ppl_area(&with(-2056, 2048)).is_err()); // v1.0-style, before it
    assert!(ppl::ppl_area(&with(8, 15)).is_err()); // no page of partial parity
    assert!(ppl::ppl_area(&with(8, 16)).is_ok());
    // The area starts at sector 16 of the member: up to data_offset 6144.
    assert!(ppl::ppl_area(&with(8, 6128)).is_ok());
    assert!(ppl::ppl_area(&with(8, 6129)).is_err()); // into the data
    let mut bb = with(8, 2048);
    bb.bblog_size = 8;
    bb.bblog_offset = 2000;
    assert!(ppl::ppl_area(&bb).is_err());
    // MULTIPLE_PPLS alone (md sets it next to PPL) also locates the area.
    let mut multi = sb.clone();
    multi.feature_map = feature::MULTIPLE_PPLS;
    assert!(ppl::ppl_area(&multi).unwrap().is_some());
}

#[test]
fn header_checksum_is_crc32c_over_the_page_with_the_field_zeroed() {
    let e = PplEntry::for_write(1024, 3 * 4096, 2, &pp(1, 4096)).unwrap();
    let h = PplHeader {
        signature: ppl::signature(&UUID),
        generation: 7,
        entries: vec![e],
    };
    let mut b = h.to_bytes();
    let stored = u32::from_le_bytes(b[532..536].try_into().unwrap());
    b[532..536].fill(0);
    assert_eq!(stored, ppl::crc32c(&b));
    assert_eq!(ppl::signature(&UUID), ppl::crc32c(&UUID));
    // Field offsets as md_p.h lays them out.
    let b = h.to_bytes();
    assert_eq!(&b[520..528], &7u64.to_le_bytes());
    assert_eq!(&b[528..532], &1u32.to_le_bytes());
    assert_eq!(&b[536..544], &1024u64.to_le_bytes());
    assert_eq!(&b[544..548], &4096u32.to_le_bytes());
    assert_eq!(&b[548..552], &(3u32 * 4096).to_le_bytes());
    assert_eq!(&b[552..556], &2u32.to_le_bytes());
    assert_eq!(&b[556..560], &ppl::crc32c(&pp(1, 4096)).to_le_bytes());
    assert_eq!(PplHeader::parse(&b).unwrap(), h);
    // A full-stripe entry carries no partial parity and checksum 0 (md's ~(~0)).
    let full = PplEntry::for_write(0, 2 * 65536, 1, &[]).unwrap();
    assert_eq!((full.pp_size, full.checksum), (0, 0));
}

#[test]
fn corruption_is_detected_by_name() {
    let e = PplEntry::for_write(8, 4096, 0, &pp(3, 4096)).unwrap();
    let h = PplHeader {
        signature: 1,
        generation: 2,
        entries: vec![e],
    };
    let good = h.to_bytes();
    let mut flipped = good.clone();
    flipped[3000] ^= 1;
    let err = PplHeader::parse(&flipped).unwrap_err().to_string();
    assert!(err.contains("checksum"), "{err}");
    // Fields checked after the checksum: re-sign the corrupt header.
    let resign = |mut b: Vec<u8>| {
        b[532..536].fill(0);
        let c = ppl::crc32c(&b);
        b[532..536].copy_from_slice(&c.to_le_bytes());
        b
    };
    for (at, v, field) in [
        (5usize, 0u8, "reserved"),
        (516, 1, "padding"),
        (528, 149, "entries_count"),
        (544, 1, "pp_size"),
        (560, 1, "entries[1]"),
        (4090, 1, "tail"),
    ] {
        let mut b = good.clone();
        b[at] = v;
        let err = PplHeader::parse(&resign(b)).unwrap_err().to_string();
        assert!(err.contains(field), "{field}: {err}");
    }
}

#[test]
fn scan_finds_the_newest_write_and_what_to_replay() {
    let vol = MemVolume::new(64 << 20);
    let sb = raid5_member(64 << 20);
    sb.write_to(&vol).unwrap();
    ppl::write_area(&vol, &sb, 0, &ppl::initial_area(&sb).unwrap()).unwrap();
    let sig = ppl::signature(&sb.set_uuid);

    // Freshly created: the empty header, nothing to replay.
    let area = ppl::read_area(&vol, &sb).unwrap().unwrap();
    let s = ppl::scan(&area, sig).unwrap();
    assert_eq!((s.header_offset, s.header.generation), (0, 0));
    assert_eq!(s.replayable().count(), 0);
    // Another array's signature: nothing.
    assert!(ppl::scan(&area, sig ^ 1).is_none());

    // Two log writes chained one after the other (a 1 MiB area holds several).
    assert!(ppl::uses_multiple_ppls(u64::from(sb.ppl_size())));
    let (p1, p2, p3) = (pp(1, 8192), pp(2, 4096), pp(3, 4096));
    let w1 = PplHeader {
        signature: sig,
        generation: 1,
        entries: vec![
            PplEntry::for_write(0, 8192, 2, &p1).unwrap(),
            PplEntry::for_write(2048, 2 * 65536 * 2, 2, &[]).unwrap(),
        ],
    };
    let bytes1 = w1.encode_write(&[&p1, &[]]).unwrap();
    ppl::write_area(&vol, &sb, 0, &bytes1).unwrap();
    let w2 = PplHeader {
        signature: sig,
        generation: 2,
        entries: vec![
            PplEntry::for_write(4096, 4096, 1, &p2).unwrap(),
            PplEntry::for_write(4104, 8192, 1, &p3).unwrap(),
        ],
    };
    let bytes2 = w2.encode_write(&[&p2, &p3]).unwrap();
    let at2 = bytes1.len() as u64;
    ppl::write_area(&vol, &sb, at2, &bytes2).unwrap();

    let area = ppl::read_area(&vol, &sb).unwrap().unwrap();
    let s = ppl::scan(&area, sig).unwrap();
    assert_eq!(s.header_offset, at2);
    assert_eq!(s.header, w2);
    assert_eq!(s.entries[0].pp_offset, at2 + 4096);
    assert_eq!(s.entries[1].pp_offset, at2 + 8192);
    assert_eq!(s.replayable().count(), 2);

    // Corrupt the second entry's partial parity: it is skipped, the first kept.
    let (at, _) = ppl::ppl_area(&sb).unwrap().unwrap();
    vol.write_at(&[0x5a], at + at2 + 8192 + 100).unwrap();
    let area = ppl::read_area(&vol, &sb).unwrap().unwrap();
    let s = ppl::scan(&area, sig).unwrap();
    assert_eq!(s.mismatches(), 1);
    let r: Vec<_> = s.replayable().map(|e| e.entry.data_sector).collect();
    assert_eq!(r, vec![4096]);

    // An older generation after the newest stops the walk (wrap-around case).
    let w3 = PplHeader {
        signature: sig,
        generation: 1,
        entries: vec![],
    };
    let at3 = at2 + bytes2.len() as u64;
    ppl::write_area(&vol, &sb, at3, &w3.to_bytes()).unwrap();
    let area = ppl::read_area(&vol, &sb).unwrap().unwrap();
    assert_eq!(ppl::scan(&area, sig).unwrap().header_offset, at2);

    // A corrupt first header: no valid log at all.
    vol.write_at(&[0x77], at + 520).unwrap();
    let area = ppl::read_area(&vol, &sb).unwrap().unwrap();
    assert!(ppl::scan(&area, sig).is_none());

    // Writes past the area are refused.
    assert!(ppl::write_area(&vol, &sb, (1 << 20) - 10, &[0; 11]).is_err());
}

#[test]
fn encode_write_checks_the_partial_parity() {
    let e = PplEntry::for_write(0, 4096, 0, &pp(1, 4096)).unwrap();
    let h = PplHeader {
        signature: 0,
        generation: 1,
        entries: vec![e],
    };
    assert!(h.encode_write(&[&pp(2, 4096)]).is_err());
    assert!(h.encode_write(&[]).is_err());
    assert!(PplEntry::for_write(0, 0, 0, &[]).is_err());
    assert!(PplEntry::for_write(0, 4096, 0, &[0; 100]).is_err());
}

#[test]
fn mdadm_examine_sees_the_ppl() {
    if !mdadm_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("member.img");
    let bytes = 64u64 << 20;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    f.set_len(bytes).unwrap();
    let sb = raid5_member(bytes);
    let mut img = vec![0u8; 8 << 20];
    img[SB_OFFSET as usize..SB_OFFSET as usize + 4096].copy_from_slice(&sb.to_bytes());
    let (at, _) = ppl::ppl_area(&sb).unwrap().unwrap();
    let area = ppl::initial_area(&sb).unwrap();
    img[at as usize..at as usize + area.len()].copy_from_slice(&area);
    use std::os::unix::fs::FileExt;
    f.write_all_at(&img, 0).unwrap();
    drop(f);
    let out = Command::new("mdadm")
        .arg("--examine")
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let get = |k: &str| {
        text.lines()
            .filter_map(|l| l.split_once(" : "))
            .find(|(l, _)| l.trim() == k)
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| panic!("no {k} in:\n{text}"))
    };
    assert_eq!(
        get("PPL"),
        "2048 sectors at offset 8 sectors from superblock"
    );
    assert_eq!(get("Feature Map"), "0x400");
    // mdadm counts the PPL area (and the bad block log after it) as used space.
    assert_eq!(get("Unused Space"), "before=4072 sectors, after=0 sectors");
    assert_eq!(get("Data Offset"), "6144 sectors");
    assert_eq!(
        get("Bad Block Log"),
        "512 entries available at offset 2056 sectors"
    );
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..5000)) {
        let _ = PplHeader::parse(&bytes);
        let _ = ppl::scan(&bytes, 0);
    }

    #[test]
    fn mutated_headers_never_panic(
        flips in proptest::collection::vec((0usize..PPL_HEADER_SIZE, any::<u8>()), 1..8),
        resign in any::<bool>(),
        n in 0usize..150,
    ) {
        let entries = (0..n.min(148))
            .map(|i| PplEntry::for_write(i as u64 * 8, 4096, 1, &[]).unwrap())
            .collect();
        let h = PplHeader { signature: 9, generation: 3, entries };
        let mut b = h.to_bytes();
        prop_assert_eq!(PplHeader::parse(&b).unwrap(), h);
        for (i, v) in flips {
            b[i] = v;
        }
        if resign {
            b[532..536].fill(0);
            let c = ppl::crc32c(&b);
            b[532..536].copy_from_slice(&c.to_le_bytes());
        }
        if let Ok(p) = PplHeader::parse(&b) {
            prop_assert_eq!(PplHeader::parse(&p.to_bytes()).unwrap(), p);
        }
        let mut area = b.clone();
        area.resize(64 * 1024, 0);
        let _ = ppl::scan(&area, 9);
    }
}
