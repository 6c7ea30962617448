use super::*;

fn word(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

#[test]
fn scrambled_blocks_carry_their_offset_and_the_write_serial() {
    let mut rng = worker_rng(1, 0, 0);
    let mut a = vec![0u8; 4096 + 100];
    fill(&mut a, DataFill::Random, &mut rng);
    let before = a.clone();
    let serial = write_serial(5, 3);
    assert_eq!(serial, 3 << 24 | 5);
    scramble(&mut a, 1 << 20, serial);
    let line = ((serial ^ (1 << 20 >> 9)) & 7) as usize * 64;
    for (i, block) in a.chunks_exact(512).enumerate() {
        assert_eq!(word(block, line), (1 << 20) + i as u64 * 512, "block {i}");
        assert_eq!(word(block, 56), serial, "block {i}");
    }
    // Only the stamps changed: two words per block, one if they share a line.
    let changed = a.iter().zip(&before).filter(|(x, y)| x != y).count();
    assert!(
        changed <= 8 * 16 && changed > 8 * 8,
        "{changed} bytes changed"
    );
    assert_eq!(
        a[4096..],
        before[4096..],
        "a trailing part-block is left alone"
    );
    // The same buffer written again, at the same place, differs.
    let mut b = a.clone();
    scramble(&mut b, 1 << 20, write_serial(5, 4));
    assert_ne!(a, b);
}

#[test]
fn prepare_write_does_what_the_workload_says() {
    let mut w = Workload {
        access: Access::Seq,
        dir: Dir::Write,
        bs: 1024,
        offset: 0,
        size: 1 << 20,
        threads: 1,
        qd: 1,
        limit: Limit::default(),
        data: DataFill::Random,
        rewrite: Rewrite::Never,
        random_map: false,
        seed: 0,
        split: false,
        engine: EngineKind::Auto,
    };
    let mut rng = worker_rng(1, 0, 0);
    let orig = vec![7u8; 1024];
    let mut buf = orig.clone();
    w.prepare_write(&mut buf, 0, 1, &mut rng);
    assert_eq!(buf, orig);
    w.rewrite = Rewrite::Scramble;
    w.prepare_write(&mut buf, 512, 1, &mut rng);
    assert_eq!(word(&buf, 56), 1);
    assert_eq!(word(&buf[512..], 56), 1);
    w.rewrite = Rewrite::Refill;
    let mut fresh = orig.clone();
    w.prepare_write(&mut fresh, 0, 1, &mut rng);
    assert!(fresh.iter().filter(|&&x| x == 7).count() < 64);
    w.data = DataFill::Zero;
    w.prepare_write(&mut fresh, 0, 1, &mut rng);
    assert!(fresh.iter().all(|&x| x == 0));
}
