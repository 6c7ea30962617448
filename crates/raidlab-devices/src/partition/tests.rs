use super::*;
use crate::MemVolume;

fn mbr_entry(b: &mut [u8], slot: usize, kind: u8, start: u32, sectors: u32) {
    let at = 446 + 16 * slot;
    b[at + 4] = kind;
    b[at + 8..at + 12].copy_from_slice(&start.to_le_bytes());
    b[at + 12..at + 16].copy_from_slice(&sectors.to_le_bytes());
    b[510] = 0x55;
    b[511] = 0xaa;
}

fn mem(bytes: Vec<u8>) -> MemVolume {
    let v = MemVolume::new(bytes.len() as u64);
    v.write_at(&bytes, 0).unwrap();
    v
}

#[test]
fn mbr_primary_and_logical_numbered_as_linux() {
    let mut img = vec![0u8; 4 << 20];
    mbr_entry(&mut img[..512], 0, 0xfd, 2048, 1024);
    // slot 1 empty: keeps number 2 unused
    mbr_entry(&mut img[..512], 2, 0x05, 4096, 4096);
    // EBR 1 at 4096: logical at +64 of 512 sectors, next EBR at ext+1024
    let e1 = 4096 * 512;
    mbr_entry(&mut img[e1..e1 + 512], 0, 0xfd, 64, 512);
    mbr_entry(&mut img[e1..e1 + 512], 1, 0x05, 1024, 2048);
    let e2 = (4096 + 1024) * 512;
    mbr_entry(&mut img[e2..e2 + 512], 0, 0x83, 64, 256);
    let t = PartitionTable::read(&mem(img)).unwrap().unwrap();
    assert_eq!(t.scheme, Scheme::Mbr);
    let got: Vec<(u32, u64, u64, bool)> = t
        .partitions
        .iter()
        .map(|p| (p.number, p.start / 512, p.len / 512, p.extended))
        .collect();
    assert_eq!(
        got,
        vec![
            (1, 2048, 1024, false),
            (3, 4096, 4096, true),
            (5, 4096 + 64, 512, false),
            (6, 4096 + 1024 + 64, 256, false),
        ]
    );
    assert!(t.partitions.iter().all(|p| p.problem.is_none()));
}

#[test]
fn ebr_loop_is_an_error() {
    let mut img = vec![0u8; 1 << 20];
    mbr_entry(&mut img[..512], 0, 0x0f, 100, 1000);
    let e = 100 * 512;
    mbr_entry(&mut img[e..e + 512], 0, 0x83, 10, 10);
    mbr_entry(&mut img[e..e + 512], 1, 0x05, 0, 10);
    let err = PartitionTable::read(&mem(img)).unwrap_err().to_string();
    assert!(err.contains("loops"), "{err}");
}

#[test]
fn outside_and_overlap_are_problems_of_those_partitions() {
    let mut img = vec![0u8; 1 << 20];
    mbr_entry(&mut img[..512], 0, 0xfd, 64, 256);
    mbr_entry(&mut img[..512], 1, 0xfd, 256, 256);
    mbr_entry(&mut img[..512], 2, 0xfd, 1024, 4096);
    mbr_entry(&mut img[..512], 3, 0xfd, 600, 100);
    let t = PartitionTable::read(&mem(img)).unwrap().unwrap();
    let p = |n| t.get(n).unwrap().problem.clone().unwrap_or_default();
    assert!(p(1).contains("overlaps partition 2"), "{}", p(1));
    assert!(p(2).contains("overlaps partition 1"), "{}", p(2));
    assert!(p(3).contains("past the end of the image"), "{}", p(3));
    assert_eq!(t.get(4).unwrap().problem, None);
}

#[test]
fn no_signature_no_table() {
    assert_eq!(PartitionTable::read(&mem(vec![0u8; 8192])).unwrap(), None);
    let mut img = vec![0u8; 8192];
    mbr_entry(&mut img[..512], 0, 0xfd, 1, 2);
    img[446] = 0x12; // a boot flag no MBR has
    assert_eq!(PartitionTable::read(&mem(img)).unwrap(), None);
}

/// A GPT as sgdisk lays it out: protective MBR, header at LBA 1, 128
/// entries from LBA 2, backup at the end.
pub(crate) fn gpt_image(sectors: u64, parts: &[(u64, u64, &str)]) -> Vec<u8> {
    let mut img = vec![0u8; (sectors * 512) as usize];
    mbr_entry(&mut img[..512], 0, 0xee, 1, (sectors - 1) as u32);
    let raid: [u8; 16] = [
        0x0f, 0x88, 0x9d, 0xa1, 0xfc, 0x05, 0x3b, 0x4d, 0xa0, 0x06, 0x74, 0x3f, 0x0f, 0x84, 0x91,
        0x1e,
    ];
    let mut entries = vec![0u8; 128 * 128];
    for (i, (first, last, name)) in parts.iter().enumerate() {
        let e = &mut entries[i * 128..(i + 1) * 128];
        e[0..16].copy_from_slice(&raid);
        e[16] = i as u8 + 1;
        e[32..40].copy_from_slice(&first.to_le_bytes());
        e[40..48].copy_from_slice(&last.to_le_bytes());
        for (k, u) in name.encode_utf16().enumerate() {
            e[56 + 2 * k..58 + 2 * k].copy_from_slice(&u.to_le_bytes());
        }
    }
    let ecrc = crc32(&entries);
    let mut put_header = |lba: u64, alt: u64, entries_lba: u64| {
        let mut h = vec![0u8; 92];
        h[0..8].copy_from_slice(b"EFI PART");
        h[8..12].copy_from_slice(&0x0001_0000u32.to_le_bytes());
        h[12..16].copy_from_slice(&92u32.to_le_bytes());
        h[24..32].copy_from_slice(&lba.to_le_bytes());
        h[32..40].copy_from_slice(&alt.to_le_bytes());
        h[40..48].copy_from_slice(&34u64.to_le_bytes());
        h[48..56].copy_from_slice(&(sectors - 34).to_le_bytes());
        h[72..80].copy_from_slice(&entries_lba.to_le_bytes());
        h[80..84].copy_from_slice(&128u32.to_le_bytes());
        h[84..88].copy_from_slice(&128u32.to_le_bytes());
        h[88..92].copy_from_slice(&ecrc.to_le_bytes());
        let c = crc32(&h);
        h[16..20].copy_from_slice(&c.to_le_bytes());
        let at = (lba * 512) as usize;
        img[at..at + 92].copy_from_slice(&h);
        let e = (entries_lba * 512) as usize;
        img[e..e + entries.len()].copy_from_slice(&entries);
    };
    put_header(1, sectors - 1, 2);
    put_header(sectors - 1, 1, sectors - 33);
    img
}

#[test]
fn gpt_entries_and_backup_header() {
    let img = gpt_image(8192, &[(2048, 4095, "md0"), (4096, 8191 - 34, "data")]);
    let t = PartitionTable::read(&mem(img.clone())).unwrap().unwrap();
    assert_eq!(t.scheme, Scheme::Gpt);
    assert_eq!(t.partitions.len(), 2);
    assert_eq!(t.partitions[0].number, 1);
    assert_eq!(t.partitions[0].start, 2048 * 512);
    assert_eq!(t.partitions[0].len, 2048 * 512);
    assert_eq!(t.partitions[0].label, "md0");
    assert_eq!(t.partitions[0].kind_name(), Some("Linux RAID"));
    // A damaged primary header: the backup is used.
    let mut bad = img.clone();
    bad[512 + 30] ^= 1;
    let t2 = PartitionTable::read(&mem(bad)).unwrap().unwrap();
    assert_eq!(t2.partitions, t.partitions);
    // Both damaged: a clear error.
    let mut worse = img;
    worse[512 + 30] ^= 1;
    let n = worse.len();
    worse[n - 512 + 30] ^= 1;
    let e = PartitionTable::read(&mem(worse)).unwrap_err().to_string();
    assert!(e.contains("neither GPT header"), "{e}");
}

#[test]
fn member_names() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    std::fs::write(&img, vec![0u8; 4096]).unwrap();
    let part = dir.path().join("disk.img@3");
    assert_eq!(
        MemberPath::parse(&part),
        MemberPath::Partition {
            image: img.clone(),
            number: 3
        }
    );
    // A file that is really called that stays a file.
    std::fs::write(&part, b"x").unwrap();
    assert_eq!(MemberPath::parse(&part), MemberPath::Whole(part.clone()));
    for odd in ["disk.img@", "disk.img@0", "disk.img@x", "none.img@1"] {
        let p = dir.path().join(odd);
        assert_eq!(MemberPath::parse(&p), MemberPath::Whole(p.clone()), "{odd}");
    }
}

#[test]
fn opener_refuses_a_device_named_twice_and_says_what_exists() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("d.img");
    let g = gpt_image(8192, &[(2048, 4095, "a"), (4096, 6143, "b")]);
    std::fs::write(&img, g).unwrap();
    let name = |n: &str| dir.path().join(format!("d.img@{n}"));
    let mut o = MemberOpener::new(OpenMode::ReadWrite);
    let a = o.open(&name("1")).unwrap();
    assert_eq!(a.size(), 2048 * 512);
    assert!(a.name().ends_with("d.img@1"));
    let b = o.open(&name("2")).unwrap();
    b.write_at(&[7u8; 512], 0).unwrap();
    let mut back = [0u8; 512];
    o.images[0].volume.read_at(&mut back, 4096 * 512).unwrap();
    assert_eq!(back, [7u8; 512]);
    let err = |r: Result<Arc<dyn Volume>>| r.err().map(|e| e.to_string()).unwrap_or_default();
    let e = err(o.open(&name("1")));
    assert!(e.contains("same device"), "{e}");
    let e = err(o.open(&img));
    assert!(e.contains("same device"), "{e}");
    drop((a, b, o));
    let e = err(MemberOpener::new(OpenMode::ReadOnly).open(&name("9")));
    assert!(
        e.contains("has no partition 9") && e.contains("1, 2"),
        "{e}"
    );
}

/// Recompute the primary GPT header's two checksums (so mutations reach the
/// entry decoding instead of stopping at a checksum).
fn fix_gpt_crcs(img: &mut [u8]) {
    let h = &img[512..1024];
    let hs = (le32(h, 12) as usize).clamp(92, 512);
    let (elba, n, sz) = (le64(h, 72), le32(h, 80) as u64, le32(h, 84) as u64);
    let (start, len) = (elba.saturating_mul(512), n.saturating_mul(sz));
    if let Some(end) = start.checked_add(len).filter(|&e| e <= img.len() as u64) {
        let c = crc32(&img[start as usize..end as usize]);
        img[512 + 88..512 + 92].copy_from_slice(&c.to_le_bytes());
    }
    img[512 + 16..512 + 20].fill(0);
    let c = crc32(&img[512..512 + hs]);
    img[512 + 16..512 + 20].copy_from_slice(&c.to_le_bytes());
}

/// What any accepted table promises: openable partitions lie inside the
/// image and do not overlap.
fn check_sound(t: &PartitionTable, size: u64) {
    let ok: Vec<&Partition> = t
        .partitions
        .iter()
        .filter(|p| p.problem.is_none() && !p.extended)
        .collect();
    for p in &ok {
        assert!(
            p.start.checked_add(p.len).is_some_and(|e| e <= size),
            "{p:?}"
        );
    }
    for (i, a) in ok.iter().enumerate() {
        for b in &ok[i + 1..] {
            let apart = a.start + a.len <= b.start || b.start + b.len <= a.start;
            assert!(apart || a.len == 0 || b.len == 0, "{a:?} {b:?}");
        }
    }
}

fn mbr_sample() -> Vec<u8> {
    let mut img = vec![0u8; 1 << 20];
    mbr_entry(&mut img[..512], 0, 0xfd, 64, 256);
    mbr_entry(&mut img[..512], 1, 0x05, 512, 1024);
    let e1 = 512 * 512;
    mbr_entry(&mut img[e1..e1 + 512], 0, 0xfd, 8, 100);
    mbr_entry(&mut img[e1..e1 + 512], 1, 0x05, 200, 300);
    let e2 = 712 * 512;
    mbr_entry(&mut img[e2..e2 + 512], 0, 0xfd, 8, 100);
    img
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

    #[test]
    fn mbr_never_panics(muts in proptest::collection::vec((0usize..3, 0usize..512, 0u8..=255), 1..24)) {
        let mut img = mbr_sample();
        for (sector, at, v) in muts {
            let base = [0, 512 * 512, 712 * 512][sector];
            img[base + at] = v;
        }
        let size = img.len() as u64;
        if let Ok(Some(t)) = PartitionTable::read(&mem(img)) {
            check_sound(&t, size);
        }
    }

    #[test]
    fn gpt_never_panics(
        muts in proptest::collection::vec((0usize..(34 * 512), 0u8..=255), 1..24),
        fix in proptest::bool::ANY,
    ) {
        let mut img = gpt_image(2048, &[(40, 1000, "a"), (1001, 2000, "b")]);
        for (at, v) in muts {
            img[at] = v;
        }
        if fix {
            fix_gpt_crcs(&mut img);
        }
        let size = img.len() as u64;
        if let Ok(Some(t)) = PartitionTable::read(&mem(img)) {
            check_sound(&t, size);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(0u8..=255, 0..4096), sig in proptest::bool::ANY) {
        let mut img = bytes;
        if sig && img.len() >= 512 {
            img[510] = 0x55;
            img[511] = 0xaa;
        }
        let size = img.len() as u64;
        if let Ok(Some(t)) = PartitionTable::read(&mem(img)) {
            check_sound(&t, size);
        }
    }
}
