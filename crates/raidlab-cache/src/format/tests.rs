use super::*;

pub(crate) fn sample() -> Superblock {
    Superblock {
        cache_uuid: [7; 16],
        generation: 1,
        origin_size: 1 << 30,
        origin_id: OriginId::Signature([3; 32]),
        origin_label: "/dev/md0".into(),
        block_size: 64 << 10,
        mode: Mode::WriteBack,
        policy: Policy::TwoQ,
        clean: true,
        detached: false,
        failed: false,
        dirty_target_pct: 20,
        sequential_cutoff: 4 << 20,
        clean_rate: 0,
        promote_threshold: 2,
        dirty_blocks: 0,
        counters: [0; COUNTERS],
        layout: Layout::plan("c", 256 << 20, 64 << 10).unwrap(),
    }
}

#[test]
fn plan_fills_the_device_and_leaves_room_for_the_table() {
    let l = Layout::plan("c", 256 << 20, 64 << 10).unwrap();
    assert_eq!(l.data_offset, DATA_ALIGN);
    assert_eq!(l.cache_blocks, 4096 - 16);
    assert_eq!(l.map_sectors, (4096 - 16u64).div_ceil(31));
    assert!(l.device_bytes(64 << 10).unwrap() <= 256 << 20);
    // Many small blocks: the table outgrows the first megabyte.
    let l = Layout::plan("c", 10 << 30, 4096).unwrap();
    assert!(l.data_offset > DATA_ALIGN);
    assert_eq!(l.data_offset % DATA_ALIGN, 0);
    assert!(l.device_bytes(4096).unwrap() <= 10 << 30);
    assert!(
        Layout::plan("c", l.data_offset + 4096 * (l.cache_blocks + 1), 4096)
            .is_ok_and(|m| m.cache_blocks >= l.cache_blocks)
    );
    let e = Layout::plan("small.img", DATA_ALIGN + 4095, 4096).unwrap_err();
    assert!(e.to_string().contains("small.img"), "{e}");
    assert!(e.to_string().contains("too small"), "{e}");
    let e = Layout::plan("c", 1 << 30, 3 << 12).unwrap_err();
    assert!(e.to_string().contains("power of two"), "{e}");
}

#[test]
fn superblock_round_trips_and_refuses_each_bad_field() {
    let sb = sample();
    let b = sb.encode().unwrap();
    assert_eq!(Superblock::decode(&b).unwrap(), sb);
    let bad = |f: &dyn Fn(&mut Superblock)| {
        let mut s = sample();
        f(&mut s);
        s.encode().unwrap_err().to_string()
    };
    assert!(bad(&|s| s.block_size = 5000).contains("power of two"));
    assert!(bad(&|s| s.generation = 0).contains("generation"));
    assert!(bad(&|s| s.origin_size = 1000).contains("origin size"));
    assert!(bad(&|s| s.dirty_target_pct = 101).contains("dirty target"));
    assert!(bad(&|s| s.promote_threshold = 0).contains("promotion"));
    assert!(bad(&|s| s.layout.data_offset += 4096).contains("layout"));
    assert!(bad(&|s| s.dirty_blocks = u64::MAX).contains("dirty blocks"));
    assert!(bad(&|s| s.origin_label = "x".repeat(256)).contains("label"));
    let mut other = b.clone();
    put_u32(&mut other, SB_VERSION, 2);
    let e = Superblock::decode(&other).unwrap_err().to_string();
    assert!(e.contains("version 2"), "{e}");
    let mut flipped = b.clone();
    flipped[SB_ORIGIN_SIZE] ^= 1;
    let e = Superblock::decode(&flipped).unwrap_err().to_string();
    assert!(e.contains("checksum"), "{e}");
    assert!(Superblock::decode(&[0; 4096])
        .unwrap_err()
        .to_string()
        .contains("magic"));
}

#[test]
fn the_newer_valid_copy_wins_and_a_torn_one_is_skipped() {
    let mut old = sample();
    old.generation = 5;
    let mut new = old.clone();
    new.generation = 6;
    new.dirty_blocks = 9;
    let (a, b) = (old.encode().unwrap(), new.encode().unwrap());
    assert_eq!(pick_superblock("c", &a, &b).unwrap(), (new.clone(), 1));
    assert_eq!(pick_superblock("c", &b, &a).unwrap(), (new.clone(), 0));
    let mut torn = b.clone();
    torn[512..1024].fill(0);
    torn[SB_DIRTY_BLOCKS] = 1;
    assert_eq!(pick_superblock("c", &a, &torn).unwrap(), (old, 0));
    let e = pick_superblock("cache.img", &torn, &[0; 4096]).unwrap_err();
    assert_eq!(e.device.as_deref(), Some("cache.img"));
    let mut stranger = new;
    stranger.cache_uuid = [8; 16];
    assert!(pick_superblock("c", &a, &stranger.encode().unwrap()).is_err());
}

#[test]
fn map_sectors_round_trip_and_refuse_what_cannot_be() {
    let sb = sample();
    let entries = [Entry::Clean(5), Entry::Free, Entry::Dirty(16383)];
    let b = encode_map_sector(sb.instance(), 3, &entries);
    let got = decode_map_sector(&sb, 3, &b).unwrap();
    assert_eq!(&got[..3], &entries);
    assert!(got[3..].iter().all(|&e| e == Entry::Free));
    // In the wrong place, from another cache, past the origin, past the cache.
    assert!(decode_map_sector(&sb, 4, &b).is_err());
    assert!(decode_map_sector(&sb, 3, &encode_map_sector(1, 3, &entries)).is_err());
    let past = encode_map_sector(sb.instance(), 3, &[Entry::Dirty(16384)]);
    assert!(decode_map_sector(&sb, 3, &past)
        .unwrap_err()
        .to_string()
        .contains("past the origin"));
    let last = sb.layout.map_sectors - 1;
    let mut tail = [Entry::Free; 31];
    tail[30] = Entry::Clean(1);
    let e = decode_map_sector(
        &sb,
        last,
        &encode_map_sector(sb.instance(), last as u32, &tail),
    );
    assert!(e.unwrap_err().to_string().contains("past the cache"));
    let mut c = MapChecker::default();
    c.add(0, Entry::Clean(9)).unwrap();
    c.add(1, Entry::Free).unwrap();
    c.add(2, Entry::Free).unwrap();
    assert!(c.add(3, Entry::Dirty(9)).is_err());
}
