//! The cache metadata decoders on arbitrary and mutated bytes: they never panic,
//! and whatever they accept is canonical (encodes back to the very same bytes),
//! so no byte of a metadata block is ever silently ignored.

use proptest::prelude::*;
use raidlab_cache::format::*;

fn sample(blocks_pow: u32, mode: u8, id: bool, label: String) -> Superblock {
    let block_size = 4096u32 << blocks_pow;
    Superblock {
        cache_uuid: [0x5a; 16],
        generation: 3,
        origin_size: 64 << 20,
        origin_id: if id {
            OriginId::ArrayUuid([1; 16])
        } else {
            OriginId::Signature([2; 32])
        },
        origin_label: label,
        block_size,
        mode: [Mode::WriteBack, Mode::WriteThrough, Mode::WriteAround][mode as usize % 3],
        policy: Policy::TwoQ,
        clean: mode % 2 == 0 || mode == 5,
        detached: mode == 5,
        failed: mode == 3,
        dirty_target_pct: 10,
        sequential_cutoff: 4 << 20,
        clean_rate: 1 << 20,
        promote_threshold: 1,
        dirty_blocks: if mode == 5 { 0 } else { 1 },
        counters: std::array::from_fn(|i| (i as u64 + 1) * 1000 + u64::from(mode)),
        layout: Layout::plan("c", 32 << 20, block_size).unwrap(),
    }
}

fn mutate(mut b: Vec<u8>, flips: &[(usize, u8)]) -> Vec<u8> {
    let n = b.len();
    for &(at, x) in flips {
        b[at % n] ^= x;
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn superblock_decode_never_panics_and_accepts_only_canonical_bytes(
        pow in 0u32..5,
        mode in 0u8..6,
        id in any::<bool>(),
        label in "[a-z/0-9]{0,40}",
        flips in prop::collection::vec((0usize..4096, 1u8..=255), 0..4),
        fix_crc in any::<bool>(),
    ) {
        let sb = sample(pow, mode, id, label);
        let b = sb.encode().unwrap();
        prop_assert_eq!(&Superblock::decode(&b).unwrap(), &sb);
        let mut m = mutate(b, &flips);
        if fix_crc {
            // Reach the field checks behind the checksum too: the checksum is
            // CRC-32C of the block with its own four bytes zero.
            m[12..16].fill(0);
            let crc = crc32c::crc32c(&m);
            m[12..16].copy_from_slice(&crc.to_le_bytes());
        }
        if let Ok(got) = Superblock::decode(&m) {
            prop_assert_eq!(got.encode().unwrap(), m);
        }
    }

    #[test]
    fn superblock_decode_of_random_bytes_never_panics(b in prop::collection::vec(any::<u8>(), 0..5000)) {
        let _ = Superblock::decode(&b);
        let _ = pick_superblock("c", &b, &b);
    }

    #[test]
    fn map_sector_decode_never_panics_and_accepts_only_canonical_bytes(
        states in prop::collection::vec((0u8..3, 0u64..2048), 0..31),
        flips in prop::collection::vec((0usize..512, 1u8..=255), 0..3),
        fix_crc in any::<bool>(),
        index in 0u32..3,
    ) {
        let sb = sample(0, 0, false, String::new());
        let entries: Vec<Entry> = states
            .iter()
            .map(|&(s, n)| match s {
                0 => Entry::Free,
                1 => Entry::Clean(n),
                _ => Entry::Dirty(n),
            })
            .collect();
        let b = encode_map_sector(sb.instance(), index, &entries).to_vec();
        let got = decode_map_sector(&sb, u64::from(index), &b).unwrap();
        prop_assert_eq!(&got[..entries.len()], &entries[..]);
        let mut m = mutate(b, &flips);
        if fix_crc {
            m[4..8].fill(0);
            let crc = crc32c::crc32c(&m);
            m[4..8].copy_from_slice(&crc.to_le_bytes());
        }
        if let Ok(got) = decode_map_sector(&sb, u64::from(index), &m) {
            prop_assert_eq!(encode_map_sector(sb.instance(), index, &got).to_vec(), m);
        }
    }

    #[test]
    fn map_sector_decode_of_random_bytes_never_panics(
        b in prop::collection::vec(any::<u8>(), 0..600),
        index in any::<u64>(),
    ) {
        let sb = sample(0, 0, false, String::new());
        let _ = decode_map_sector(&sb, index, &b);
    }
}
