//! The 0.90 superblock: a hand-made one as mdadm 4.x writes it, both byte
//! orders, the checksum, its v1 equivalent, and never panicking on any input.

use super::*;
use crate::superblock::MetadataVersion;

/// A 0.90 superblock of member `me` of a RAID 5 of `n` (64K chunk,
/// left-symmetric), `size_kib` per member, little-endian words.
pub(crate) fn sample_words(n: u32, me: u32, size_kib: u32, clean: bool) -> Vec<u32> {
    let mut w = vec![0u32; 1024];
    w[0] = MD_SB_MAGIC;
    w[2] = 90;
    w[4] = 0;
    w[5] = 0x1122_3344;
    w[6] = 1_700_000_000;
    w[7] = 5;
    w[8] = size_kib;
    w[9] = n;
    w[10] = n;
    w[11] = 0;
    w[13] = 0x5566_7788;
    w[14] = 0x99aa_bbcc;
    w[15] = 0xddee_ff00;
    w[32] = 1_700_000_100;
    w[33] = u32::from(clean);
    w[34] = n;
    w[35] = n;
    w[39] = 20; // events_lo (little-endian order)
    w[40] = 0;
    w[41] = 20;
    w[64] = 2;
    w[65] = 64 << 10;
    for d in 0..n as usize {
        let at = 128 + 32 * d;
        w[at] = d as u32;
        w[at + 1] = 7;
        w[at + 2] = d as u32;
        w[at + 3] = d as u32;
        w[at + 4] = disk_state::ACTIVE | disk_state::SYNC;
    }
    let mine = 128 + 32 * me as usize;
    w.copy_within(mine..mine + 32, 992);
    fix(&mut w);
    w
}

pub(crate) fn fix(w: &mut [u32]) {
    w[38] = 0;
    let sum: u64 = w.iter().map(|&x| u64::from(x)).sum();
    w[38] = ((sum & 0xffff_ffff) + (sum >> 32)) as u32;
}

pub(crate) fn bytes(w: &[u32], big_endian: bool) -> Vec<u8> {
    w.iter()
        .flat_map(|x| {
            if big_endian {
                x.to_be_bytes()
            } else {
                x.to_le_bytes()
            }
        })
        .collect()
}

/// The same superblock as a big-endian host writes it: every word swapped,
/// and the 64-bit counters with their high word first.
pub(crate) fn big_endian_of(w: &[u32]) -> Vec<u8> {
    let mut b = w.to_vec();
    for i in [39usize, 41, 44] {
        b.swap(i, i + 1);
    }
    bytes(&b, true)
}

#[test]
fn both_byte_orders_read_the_same() {
    let mut w = sample_words(4, 2, 8128, true);
    w[40] = 3; // events above 2^32
    fix(&mut w);
    let le = Sb090::parse(&bytes(&w, false)).unwrap();
    let be = Sb090::parse(&big_endian_of(&w)).unwrap();
    assert!(!le.big_endian && be.big_endian);
    assert_eq!(le.events(), (3 << 32) + 20);
    assert_eq!(be.events(), le.events());
    assert_eq!(le.examine_lines(), be.examine_lines());
    let (a, b) = (le.to_v1(16256), be.to_v1(16256));
    assert_eq!(a.set_uuid, b.set_uuid);
    assert_eq!(a.dev_roles, b.dev_roles);
    assert_eq!(a.events, b.events);
}

#[test]
fn the_v1_equivalent() {
    let w = sample_words(4, 2, 8128, false);
    let sb = Sb090::parse(&bytes(&w, false)).unwrap().to_v1(16256);
    sb.validate().unwrap();
    assert_eq!(sb.version(), MetadataVersion::V0_90);
    assert_eq!(
        crate::superblock::format_uuid(&sb.set_uuid),
        "11223344:55667788:99aabbcc:ddeeff00"
    );
    assert_eq!(
        (sb.level, sb.layout, sb.chunksize, sb.raid_disks),
        (5, 2, 128, 4)
    );
    assert_eq!(
        (sb.size, sb.data_offset, sb.super_offset),
        (16256, 0, 16256)
    );
    assert_eq!(sb.dev_number, 2);
    assert_eq!(&sb.dev_roles[..5], &[0, 1, 2, 3, ROLE_SPARE]);
    assert_eq!(sb.resync_offset, 0, "active, checkpoint 0");
    let lines = sb.examine_lines(0);
    let get = |k: &str| lines.iter().find(|(l, _)| l == k).map(|(_, v)| v.clone());
    assert_eq!(get("Version").as_deref(), Some("0.90.00"));
    assert_eq!(
        get("Used Dev Size").as_deref(),
        Some("8128 (7.94 MiB 8.32 MB)")
    );
    assert_eq!(
        get("Array Size").as_deref(),
        Some("24384 (23.81 MiB 24.97 MB)")
    );
    assert_eq!(get("Layout").as_deref(), Some("left-symmetric"));
    assert_eq!(get("Chunk Size").as_deref(), Some("64K"));
    assert_eq!(get("State").as_deref(), Some("active"));
    let text = sb.examine_text(0);
    assert!(
        text.contains("this     2       7        2        2      active sync"),
        "{text}"
    );
    // Not written where a 0.90 superblock does not belong on a device.
    let vol = raidlab_devices::MemVolume::new(9 << 20);
    let e = sb.write_to(&vol).unwrap_err().to_string();
    assert!(e.contains("0.90") && e.contains("18304"), "{e}");
    assert!(vol.snapshot().iter().all(|&b| b == 0));
}

#[test]
fn read_from_a_device_finds_it_64k_aligned_near_the_end() {
    let dev_sectors = (8u64 << 11) + 100;
    let at = super_offset(dev_sectors).unwrap();
    assert_eq!(at, (dev_sectors & !127) - 128);
    for be in [false, true] {
        let vol = raidlab_devices::MemVolume::new(dev_sectors * 512);
        let w = sample_words(3, 1, 4000, true);
        let b = if be {
            big_endian_of(&w)
        } else {
            bytes(&w, false)
        };
        vol.write_at(&b, at * 512).unwrap();
        let sb = crate::Superblock::read_from(&vol).unwrap().unwrap();
        assert_eq!(sb.super_offset, at);
        assert_eq!(sb.size, 8000);
        assert!(sb.is_clean());
    }
    // A size past the superblock is refused with the reason.
    let vol = raidlab_devices::MemVolume::new(dev_sectors * 512);
    let w = sample_words(3, 1, 9000, true);
    vol.write_at(&bytes(&w, false), at * 512).unwrap();
    let e = crate::Superblock::read_from(&vol).unwrap_err().to_string();
    assert!(
        e.contains("size") && e.contains("before the superblock"),
        "{e}"
    );
}

#[test]
fn damage_is_named() {
    let w = sample_words(4, 0, 8128, true);
    let mut b = bytes(&w, false);
    b[100] ^= 1;
    let e = Sb090::parse(&b).unwrap_err().to_string();
    assert!(e.contains("sb_csum"), "{e}");
    let mut w2 = w.clone();
    w2[10] = 40;
    fix(&mut w2);
    let e = Sb090::parse(&bytes(&w2, false)).unwrap_err().to_string();
    assert!(e.contains("raid_disks"), "{e}");
    let e = Sb090::parse(&b[..100]).unwrap_err().to_string();
    assert!(e.contains("100 bytes"), "{e}");
}

#[test]
fn a_reshape_in_examine_text_and_json() {
    // md's 0.91 superblock of a RAID 5 shrinking from 5 members to 4 (a
    // shrink: backwards, 0.90 has no flag for it) and changing its chunk to
    // 128K, 16384 sectors in.
    let mut w = sample_words(4, 2, 8128, false);
    w[2] = 91;
    w[44] = 16384; // reshape_position, low word first
    w[45] = 0;
    w[46] = 5;
    w[47] = (-1i32) as u32;
    w[48] = 2;
    w[49] = 128 << 10;
    fix(&mut w);
    let sb = Sb090::parse(&bytes(&w, false)).unwrap();
    let lines = sb.examine_lines();
    let get = |k: &str| lines.iter().find(|(l, _)| l == k).map(|(_, v)| v.clone());
    assert_eq!(
        get("Reshape pos'n").as_deref(),
        Some("8192 (8.00 MiB 8.39 MB)")
    );
    assert_eq!(get("Delta Devices").as_deref(), Some("-1 (5->4)"));
    assert_eq!(get("New Level"), None, "the level stays");
    assert_eq!(get("New Layout"), None, "the layout stays");
    assert_eq!(get("New Chunksize").as_deref(), Some("131072"));
    let r = &sb.examine_json(16256)["reshape"];
    assert_eq!(r["position_sectors"], 16384);
    assert_eq!(r["direction"], "backwards");
    assert_eq!(r["delta_devices"], -1);
    assert_eq!(r["raid_devices_before"], 5);
    assert_eq!(r["raid_devices_after"], 4);
    assert_eq!(r["new_level"], "raid5");
    assert_eq!(r["new_layout"], "left-symmetric");
    assert_eq!(r["new_chunk_sectors"], 256);
    assert_eq!(r["new_chunk_kib"], 128);
    assert_eq!(r["new_data_offset_sectors"], serde_json::Value::Null);
    // The same superblock not reshaping has none.
    let plain = Sb090::parse(&bytes(&sample_words(4, 2, 8128, false), false)).unwrap();
    assert_eq!(
        plain.examine_json(16256)["reshape"],
        serde_json::Value::Null
    );
    assert!(!plain.examine_text().contains("Delta Devices"));
}

mod write;

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        #[test]
        fn mutated_090_never_panics(
            muts in proptest::collection::vec((0usize..1024, any::<u32>()), 1..8),
            fix_csum in any::<bool>(),
            be in any::<bool>(),
            extra in 0u64..300,
        ) {
            let mut w = sample_words(4, 1, 8000, true);
            for (i, v) in muts {
                w[i] = v;
            }
            if fix_csum {
                fix(&mut w);
            }
            let b = if be { big_endian_of(&w) } else { bytes(&w, false) };
            if let Ok(sb) = Sb090::parse(&b) {
                let v1 = sb.to_v1(16256);
                let _ = v1.validate();
                let _ = sb.examine_text();
                let _ = sb.examine_json(16256);
            }
            let dev = (8u64 << 11) + extra;
            let vol = raidlab_devices::MemVolume::new(dev * 512);
            vol.write_at(&b, super_offset(dev).unwrap() * 512).unwrap();
            if let Ok(Some(sb)) = crate::Superblock::read_from(&vol) {
                prop_assert!(sb.size <= sb.super_offset);
                // Written back (or refused), it reads as the same facts.
                if sb.write_to(&vol).is_ok() {
                    let again = crate::Superblock::read_from(&vol).unwrap().unwrap();
                    prop_assert_eq!(again.events, sb.events);
                    prop_assert_eq!(again.size, sb.size);
                    prop_assert_eq!(again.dev_number, sb.dev_number);
                    prop_assert_eq!(again.role(), sb.role());
                }
            }
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4200), magic in any::<bool>()) {
            let mut b = bytes;
            if magic && b.len() >= 4 {
                b[..4].copy_from_slice(&MD_SB_MAGIC.to_le_bytes());
            }
            let _ = Sb090::parse(&b);
        }
    }
}

/// The 0.90 internal bitmap: md's state bit read as a bitmap 8 sectors after
/// the superblock, and written there by raidlab as mdadm's
/// `add_internal_bitmap0` sizes it, with the uuid words as md copies them.
#[test]
fn the_internal_bitmap_sits_right_after_the_superblock() {
    use crate::bitmap::{self, Bitmap};
    let dev_sectors = (8u64 << 11) + 100;
    let at = super_offset(dev_sectors).unwrap();
    let vol = raidlab_devices::MemVolume::new(dev_sectors * 512);
    let w = sample_words(3, 1, 4000, true);
    vol.write_at(&bytes(&w, false), at * 512).unwrap();
    let mut sb = crate::Superblock::read_from(&vol).unwrap().unwrap();
    assert_eq!(sb.feature_map & feature::BITMAP_OFFSET, 0);
    assert!(Bitmap::read_from(&vol, &sb).unwrap().is_none());
    let mut bm = bitmap::new_internal(&mut sb, None).unwrap();
    assert_eq!(sb.bitmap_offset, 8);
    // 8000 sectors in 4 KiB chunks: the smallest chunk mdadm gives 0.90.
    assert_eq!(bm.sb.chunksize, 4096);
    assert_eq!(bm.sb.sync_size, 8000);
    bm.clear_all();
    bm.set(3).unwrap();
    sb.write_to(&vol).unwrap();
    bm.write_to(&vol, &sb).unwrap();
    // On disk: the state bit, and "bitm" 4 KiB after the superblock with the
    // uuid words in this host's order (md compares them raw).
    let mut raw = vec![0u8; 4096 + 24];
    vol.read_at(&mut raw, at * 512).unwrap();
    let state = u32::from_ne_bytes(raw[33 * 4..34 * 4].try_into().unwrap());
    assert_ne!(state & SB_BITMAP_PRESENT, 0);
    assert_eq!(&raw[4096..4100], &0x6d74_6962u32.to_le_bytes());
    assert_eq!(&raw[4104..4108], &0x1122_3344u32.to_ne_bytes());
    let back = crate::Superblock::read_from(&vol).unwrap().unwrap();
    assert_eq!(back.bitmap_offset, 8);
    assert_ne!(back.feature_map & feature::BITMAP_OFFSET, 0);
    let got = Bitmap::read_from(&vol, &back).unwrap().unwrap();
    assert_eq!(got.dirty_ranges().collect::<Vec<_>>(), vec![(24, 8)]);
    // Anywhere else than right after the superblock is refused.
    let mut moved = back.clone();
    moved.bitmap_offset = 16;
    let e = moved.write_to(&vol).unwrap_err().to_string();
    assert!(e.contains("right after the superblock"), "{e}");
    let e = Bitmap::read_from(&vol, &moved).unwrap_err().to_string();
    assert!(e.contains("bitmap_offset"), "{e}");
}

#[test]
fn a_large_090_bitmap_doubles_its_chunk_to_fit_60k() {
    use crate::bitmap;
    // 1 TiB per member: 2^28 + 1 bits at 4 KiB; ten halvings fit 491520 bits.
    let w = sample_words(3, 1, 1 << 30, true);
    let sb = Sb090::parse(&bytes(&w, false)).unwrap().to_v1(1 << 32);
    assert_eq!(sb.size, 1 << 31);
    let bm = bitmap::new_internal(&mut sb.clone(), None).unwrap();
    assert_eq!(bm.sb.chunksize, 4 << 20);
    assert!(bm.sb.area_bytes() <= 60 << 10);
    let e = bitmap::new_internal(&mut sb.clone(), Some(1 << 20))
        .unwrap_err()
        .to_string();
    assert!(e.contains("60 KiB") && e.contains("4194304"), "{e}");
}
