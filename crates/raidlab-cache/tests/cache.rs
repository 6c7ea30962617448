//! The cached volume's behaviour, mode by mode: where data goes, what the
//! statistics say, cleaning order and pace, binding to the origin, and the
//! refusals that must change nothing.

use raidlab_cache::format::{Layout, DATA_ALIGN, SUPERBLOCK_SIZE};
use raidlab_cache::{
    attach, create, examine, examine_table, reset_counters, CachedVolume, Config, Mode, OriginId,
    Superblock,
};
use raidlab_core::{ErrorKind, Result, Volume};
use raidlab_devices::{Clock, FaultVolume, MemVolume};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const BS: u32 = 4096;
const ID: OriginId = OriginId::Signature([1; 32]);

#[derive(Debug, Default)]
struct TestClock(Mutex<Duration>);

impl Clock for TestClock {
    fn now(&self) -> Duration {
        *self.0.lock().unwrap()
    }
    fn sleep(&self, d: Duration) {
        *self.0.lock().unwrap() += d;
    }
}

/// An origin that records the offsets of its writes and counts its reads.
#[derive(Debug)]
struct Watched {
    inner: MemVolume,
    writes: Mutex<Vec<(u64, usize)>>,
    reads: Mutex<u64>,
}

impl Watched {
    fn new(size: u64) -> Arc<Watched> {
        let inner = MemVolume::new(size);
        let fill: Vec<u8> = (0..size).map(|i| (i / 512) as u8 ^ 0x5a).collect();
        inner.write_at(&fill, 0).unwrap();
        Arc::new(Watched {
            inner,
            writes: Mutex::new(vec![]),
            reads: Mutex::new(0),
        })
    }
}

impl Volume for Watched {
    fn name(&self) -> String {
        "origin".into()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        *self.reads.lock().unwrap() += 1;
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.writes.lock().unwrap().push((offset, buf.len()));
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> Result<()> {
        Ok(())
    }
}

type Cached = CachedVolume<Arc<MemVolume>, Arc<Watched>>;

fn setup(slots: u64, origin_blocks: u64, config: Config) -> (Cached, Arc<TestClock>) {
    let cache = Arc::new(MemVolume::new(DATA_ALIGN + slots * BS as u64));
    let origin = Watched::new(origin_blocks * BS as u64);
    let config = Config {
        block_size: BS,
        ..config
    };
    create(&cache, &origin, ID, "origin", [4; 16], config).unwrap();
    let clock = Arc::new(TestClock::default());
    let v = CachedVolume::open(cache, origin, ID, clock.clone()).unwrap();
    (v, clock)
}

fn block(v: &impl Volume, b: u64) -> Vec<u8> {
    let mut buf = vec![0u8; BS as usize];
    v.read_at(&mut buf, b * BS as u64).unwrap();
    buf
}

#[test]
fn read_misses_promote_and_hits_come_from_the_cache() {
    let (v, _) = setup(8, 64, Config::default());
    let first = block(&v, 3);
    assert_eq!(first, block(&*v.origin().clone(), 3));
    let reads = *v.origin().reads.lock().unwrap();
    assert_eq!(block(&v, 3), first);
    assert_eq!(
        *v.origin().reads.lock().unwrap(),
        reads,
        "a hit read the origin"
    );
    // A request over a cached and an uncached block is a partial hit.
    let mut two = vec![0u8; 2 * BS as usize];
    v.read_at(&mut two, 3 * BS as u64).unwrap();
    let s = v.stats();
    assert_eq!(
        (
            s.read_misses,
            s.read_hits,
            s.read_partial_hits,
            s.promotions
        ),
        (1, 1, 1, 2)
    );
    assert_eq!(s.occupied_blocks, 2);
    v.reset_stats().unwrap();
    assert_eq!(v.stats().read_hits, 0);
    assert_eq!(v.stats().occupied_blocks, 2);
}

#[test]
fn promotion_threshold_and_sequential_cutoff_keep_blocks_out() {
    let (v, _) = setup(
        8,
        64,
        Config {
            promote_threshold: 2,
            sequential_cutoff: 16 << 10,
            ..Config::default()
        },
    );
    block(&v, 1);
    assert_eq!(v.stats().promotions, 0);
    assert_eq!(v.stats().not_promoted, 1);
    block(&v, 1);
    assert_eq!(v.stats().promotions, 1);
    // 32 KiB read in 4 KiB pieces: from the fourth piece on the run is at the
    // cutoff and bypasses.
    for b in 10..18 {
        block(&v, b);
    }
    let s = v.stats();
    assert!(s.bypass_sequential_bytes > 0, "{s:?}");
    assert!(s.bypass_sequential_requests > 0, "{s:?}");
}

#[test]
fn write_back_keeps_writes_in_the_cache_until_cleaned_in_ascending_order() {
    let (v, _) = setup(
        16,
        64,
        Config {
            mode: Mode::WriteBack,
            dirty_target_pct: 0,
            ..Config::default()
        },
    );
    for b in [9u64, 2, 3, 7] {
        v.write_at(&vec![b as u8; BS as usize], b * BS as u64)
            .unwrap();
    }
    v.flush().unwrap();
    assert!(v.origin().writes.lock().unwrap().is_empty());
    assert_eq!(v.stats().dirty_blocks, 4);
    assert_eq!(block(&v, 9), vec![9u8; BS as usize]);
    // Partial write of an uncached block: the rest comes from the origin.
    let before = block(&*v.origin().clone(), 20);
    v.write_at(&[0xee; 512], 20 * BS as u64 + 512).unwrap();
    let mut want = before;
    want[512..1024].fill(0xee);
    assert_eq!(block(&v, 20), want);
    let done = v.flush_dirty(|_, _| {}).unwrap();
    assert_eq!(done, 5);
    // Neighbours 2 and 3 go in one write; blocks in ascending order.
    let writes = v.origin().writes.lock().unwrap().clone();
    let b = BS as u64;
    assert_eq!(
        writes,
        [
            (2 * b, 2 * BS as usize),
            (7 * b, BS as usize),
            (9 * b, BS as usize),
            (20 * b, BS as usize)
        ]
    );
    assert_eq!(block(&*v.origin().clone(), 20), want);
    assert_eq!(v.stats().dirty_blocks, 0);
    assert_eq!(v.stats().cleaned_blocks, 5);
}

#[test]
fn background_cleaning_keeps_the_rate_and_the_target() {
    let (v, clock) = setup(
        20,
        64,
        Config {
            mode: Mode::WriteBack,
            dirty_target_pct: 25,
            clean_rate: 2 * BS as u64,
            ..Config::default()
        },
    );
    for b in 0..10u64 {
        v.write_at(&vec![1; BS as usize], b * BS as u64).unwrap();
    }
    // 25% of 20 slots may stay dirty: 5 blocks to clean, 2 blocks a second.
    assert_eq!(v.clean_tick().unwrap(), 0, "no time has passed");
    clock.sleep(Duration::from_millis(500));
    assert_eq!(v.clean_tick().unwrap(), 1);
    clock.sleep(Duration::from_secs(1));
    assert_eq!(v.clean_tick().unwrap(), 2);
    // A long idle spell earns at most a second's worth.
    clock.sleep(Duration::from_secs(60));
    assert_eq!(v.clean_tick().unwrap(), 2);
    clock.sleep(Duration::from_secs(60));
    assert_eq!(v.clean_tick().unwrap(), 0, "at the target");
    assert_eq!(v.stats().dirty_blocks, 5);
}

#[test]
fn write_through_writes_both_and_write_around_invalidates() {
    let (v, _) = setup(8, 64, Config::default());
    block(&v, 5);
    v.write_at(&[7; 4096], 5 * BS as u64).unwrap();
    assert_eq!(block(&*v.origin().clone(), 5), vec![7; 4096]);
    assert_eq!(v.stats().write_hits, 1);
    assert_eq!(block(&v, 5), vec![7; 4096]);
    v.set_mode(Mode::WriteAround).unwrap();
    v.write_at(&[8; 4096], 5 * BS as u64).unwrap();
    let s = v.stats();
    assert_eq!((s.invalidations, s.occupied_blocks), (1, 0));
    assert_eq!(s.bypass_mode_bytes, 4096);
    assert_eq!(block(&v, 5), vec![8; 4096]);
    assert_eq!(examine(v.cache_device()).unwrap().mode, Mode::WriteAround);
}

#[test]
fn leaving_write_back_cleans_first() {
    let (v, _) = setup(
        8,
        64,
        Config {
            mode: Mode::WriteBack,
            ..Config::default()
        },
    );
    v.write_at(&[3; 4096], 0).unwrap();
    v.set_mode(Mode::WriteThrough).unwrap();
    assert_eq!(v.stats().dirty_blocks, 0);
    assert_eq!(block(&*v.origin().clone(), 0), vec![3; 4096]);
}

#[test]
fn the_scan_does_not_evict_the_reused_set() {
    let (v, _) = setup(
        16,
        4096,
        Config {
            sequential_cutoff: 0,
            ..Config::default()
        },
    );
    // A hot set read, pushed out of probation by a short scan, and read again
    // while remembered: it is now in the main queue. Then a scan of 1000 blocks,
    // far longer than the cache, which plain LRU would let flush everything.
    let hot: Vec<u64> = (0..8).collect();
    for &b in &hot {
        block(&v, b);
    }
    for b in 100..116 {
        block(&v, b);
    }
    for &b in &hot {
        block(&v, b);
    }
    for i in 0..1000u64 {
        block(&v, 200 + (i * 37) % 1000);
    }
    v.reset_stats().unwrap();
    for &b in &hot {
        block(&v, b);
    }
    assert_eq!(v.stats().read_hits, 8, "{:?}", v.stats());
}

#[test]
fn dirty_data_survives_a_clean_stop_and_a_reopen() {
    let cache = Arc::new(MemVolume::new(DATA_ALIGN + 8 * BS as u64));
    let origin = Watched::new(64 * BS as u64);
    let config = Config {
        mode: Mode::WriteBack,
        block_size: BS,
        ..Config::default()
    };
    create(&cache, &origin, ID, "origin", [4; 16], config).unwrap();
    let clock: Arc<TestClock> = Arc::default();
    let v = CachedVolume::open(cache.clone(), origin.clone(), ID, clock.clone()).unwrap();
    v.write_at(&[6; 4096], 4096).unwrap();
    block(&v, 9);
    v.shutdown().unwrap();
    let sb = examine(&cache).unwrap();
    assert!(sb.clean);
    assert_eq!(sb.dirty_blocks, 1);
    let (_, table) = examine_table(&cache).unwrap();
    assert_eq!((table.occupied_blocks, table.dirty_blocks), (2, 1));
    drop(v);
    let v = CachedVolume::open(cache.clone(), origin.clone(), ID, clock).unwrap();
    // A clean stop keeps clean blocks too.
    assert_eq!(v.stats().occupied_blocks, 2);
    assert_eq!(block(&v, 1), vec![6; 4096]);
    assert_ne!(block(&*origin.clone(), 1), vec![6; 4096]);
    v.detach().unwrap();
    assert_eq!(block(&*origin.clone(), 1), vec![6; 4096]);
    // Detached: the device says so, and the cache is never opened as it was.
    let sb = examine(&cache).unwrap();
    assert!(sb.detached && sb.clean && sb.dirty_blocks == 0);
    assert_eq!(examine_table(&cache).unwrap().1.occupied_blocks, 0);
    drop(v);
    let e = CachedVolume::open(cache, origin, ID, Arc::new(TestClock::default())).unwrap_err();
    assert!(e.to_string().contains("attach"), "{e}");
}

#[test]
fn attach_binds_a_detached_cache_again_empty_and_only_to_its_origin() {
    let cache = Arc::new(FaultVolume::new(MemVolume::new(DATA_ALIGN + 8 * BS as u64)));
    let origin = Watched::new(64 * BS as u64);
    let config = Config {
        mode: Mode::WriteBack,
        block_size: BS,
        ..Config::default()
    };
    create(&cache, &origin, ID, "origin", [4; 16], config).unwrap();
    let clock: Arc<TestClock> = Arc::default();
    let v = CachedVolume::open(cache.clone(), origin.clone(), ID, clock.clone()).unwrap();
    v.write_at(&[6; 4096], 4096).unwrap();
    block(&v, 2);
    assert!(attach(&cache, &origin, ID)
        .unwrap_err()
        .to_string()
        .contains("attached to origin already"));
    v.detach().unwrap();
    // Writes after the detach reach the origin alone.
    v.write_at(&[7; 4096], 2 * 4096).unwrap();
    drop(v);
    // The origin is used on its own while detached.
    origin.write_at(&[8; 4096], 4096).unwrap();

    // Wrong origin, resized origin, a cache that is not detached: refused, and
    // nothing is written.
    cache.reset_stats();
    let e = attach(&cache, &origin, OriginId::ArrayUuid([2; 16])).unwrap_err();
    assert!(e.to_string().contains("another origin"), "{e}");
    let e = attach(&cache, &Watched::new(65 * BS as u64), ID).unwrap_err();
    assert!(e.to_string().contains("recorded"), "{e}");
    assert_eq!(cache.stats().writes, 0);

    let sb = attach(&cache, &origin, ID).unwrap();
    assert!(!sb.detached && sb.clean);
    assert_eq!(sb.mode, Mode::WriteBack);
    let v = CachedVolume::open(cache.clone(), origin.clone(), ID, clock).unwrap();
    let s = v.stats();
    assert_eq!((s.occupied_blocks, s.dirty_blocks), (0, 0));
    // Nothing cached before the detach is served: the origin's newer data is.
    assert_eq!(block(&v, 1), vec![8; 4096]);
    assert_eq!(block(&v, 2), vec![7; 4096]);
    // The counters of before the detach are kept.
    assert_eq!(s.write_misses, 1);
    assert_eq!(s.promotions, 1);
}

#[test]
fn counters_persist_across_a_clean_stop_until_reset() {
    let cache = Arc::new(MemVolume::new(DATA_ALIGN + 8 * BS as u64));
    let origin = Watched::new(64 * BS as u64);
    let config = Config {
        mode: Mode::WriteAround,
        block_size: BS,
        ..Config::default()
    };
    create(&cache, &origin, ID, "origin", [4; 16], config).unwrap();
    let clock: Arc<TestClock> = Arc::default();
    let v = CachedVolume::open(cache.clone(), origin.clone(), ID, clock.clone()).unwrap();
    block(&v, 3);
    block(&v, 3);
    // One request, two blocks around the cache by mode: counted once.
    v.write_at(&[1; 8192], 10 * 4096).unwrap();
    let before = v.stats();
    assert_eq!((before.read_misses, before.read_hits), (1, 1));
    assert_eq!(
        (before.bypass_mode_requests, before.bypass_mode_bytes),
        (1, 8192)
    );
    v.shutdown().unwrap();
    assert_eq!(examine(&cache).unwrap().counters, before.counters());
    drop(v);
    let v = CachedVolume::open(cache.clone(), origin.clone(), ID, clock.clone()).unwrap();
    assert_eq!(v.stats().counters(), before.counters());
    block(&v, 3);
    assert_eq!(v.stats().read_hits, 2);
    v.reset_stats().unwrap();
    assert_eq!(v.stats().counters(), [0; raidlab_cache::stats::COUNTERS]);
    // The reset is on the device at once, before any clean stop.
    assert_eq!(
        examine(&cache).unwrap().counters,
        [0; raidlab_cache::stats::COUNTERS]
    );
    block(&v, 3);
    v.shutdown().unwrap();
    drop(v);
    // Offline, from the device alone: only the counters change.
    let sb = examine(&cache).unwrap();
    assert_eq!(sb.counters[0], 1);
    let after = reset_counters(&cache).unwrap();
    assert_eq!(after.counters, [0; raidlab_cache::stats::COUNTERS]);
    let again = examine(&cache).unwrap();
    assert_eq!(again, after);
    assert_eq!(
        Superblock {
            counters: sb.counters,
            generation: sb.generation,
            ..again
        },
        sb
    );
}

#[test]
fn wrong_or_resized_origin_is_refused_and_nothing_is_written() {
    let cache = Arc::new(FaultVolume::new(MemVolume::new(DATA_ALIGN + 8 * BS as u64)));
    let origin = Watched::new(64 * BS as u64);
    create(
        &cache,
        &origin,
        ID,
        "/dev/md0",
        [4; 16],
        Config {
            block_size: BS,
            ..Config::default()
        },
    )
    .unwrap();
    let clock: Arc<TestClock> = Arc::default();
    cache.reset_stats();
    let other = OriginId::ArrayUuid([2; 16]);
    let e = CachedVolume::open(cache.clone(), origin.clone(), other, clock.clone()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid);
    assert!(e.to_string().contains("/dev/md0"), "{e}");
    let bigger = Watched::new(65 * BS as u64);
    let e = CachedVolume::open(cache.clone(), bigger, ID, clock).unwrap_err();
    assert!(e.to_string().contains("recorded"), "{e}");
    assert_eq!(cache.stats().writes, 0);
}

#[test]
fn bad_create_arguments_write_nothing() {
    let cache = Arc::new(FaultVolume::new(MemVolume::new(DATA_ALIGN + 8 * BS as u64)));
    let origin = Watched::new(64 * BS as u64);
    let bad_block = Config {
        block_size: 3000,
        ..Config::default()
    };
    let e = create(&cache, &origin, ID, "o", [1; 16], bad_block).unwrap_err();
    assert!(e.to_string().contains("power of two"), "{e}");
    let small = Arc::new(FaultVolume::new(MemVolume::new(DATA_ALIGN)));
    let e = create(&small, &origin, ID, "o", [1; 16], Config::default()).unwrap_err();
    assert!(e.to_string().contains("too small"), "{e}");
    let long = "x".repeat(300);
    let e = create(
        &cache,
        &origin,
        ID,
        &long,
        [1; 16],
        Config {
            block_size: BS,
            ..Config::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("label"), "{e}");
    assert_eq!(cache.stats().writes + small.stats().writes, 0);
}

#[test]
fn a_corrupt_superblock_copy_falls_back_and_a_corrupt_table_is_refused() {
    let cache = Arc::new(FaultVolume::new(MemVolume::new(
        DATA_ALIGN + 64 * BS as u64,
    )));
    let origin = Watched::new(64 * BS as u64);
    create(
        &cache,
        &origin,
        ID,
        "o",
        [4; 16],
        Config {
            block_size: BS,
            ..Config::default()
        },
    )
    .unwrap();
    let clock: Arc<TestClock> = Arc::default();
    let v = CachedVolume::open(cache.clone(), origin.clone(), ID, clock.clone()).unwrap();
    v.set_tunables(0, 30, 0, 1).unwrap();
    drop(v);
    // The newest copy is the second; corrupt it: the first is used.
    cache.corrupt_stored(SUPERBLOCK_SIZE + 100, 1).unwrap();
    let sb = examine(&cache).unwrap();
    assert_eq!(sb.dirty_target_pct, 10);
    let layout = Layout::plan("c", cache.size(), BS).unwrap();
    assert_eq!(sb.layout, layout);
    cache.corrupt_stored(2 * SUPERBLOCK_SIZE + 7, 1).unwrap();
    let e = CachedVolume::open(cache.clone(), origin, ID, clock).unwrap_err();
    assert!(e.to_string().contains("mapping sector 0"), "{e}");
}

#[test]
fn the_background_driver_ticks_the_cleaner_at_the_volumes_pace() {
    use raidlab_cache::BackgroundCleaner;
    let (v, clock) = setup(
        20,
        64,
        Config {
            mode: Mode::WriteBack,
            dirty_target_pct: 0,
            clean_rate: 2 * BS as u64,
            ..Config::default()
        },
    );
    for b in 0..10u64 {
        v.write_at(&vec![2; BS as usize], b * BS as u64).unwrap();
    }
    let v = Arc::new(v);
    let driver = BackgroundCleaner::start(v.clone(), Duration::from_millis(1));
    // The virtual clock stands still: however often the driver ticks, the
    // rate allows nothing.
    driver.wait_ticks(3);
    assert_eq!(v.stats().dirty_blocks, 10);
    // A second of virtual time: two blocks, whatever the real time. The
    // count is read before the clock moves: the driver may tick between the
    // move and any later read (a race this test lost once in CI).
    // The ticks waited for are counted from the move: a wait for a total
    // (6 in all) returned at once when the driver's 1 ms ticks had passed
    // it already, before any tick saw the moved clock (0 cleaned, a CI run
    // with the md VM beside it).
    let report_before = v.stats().cleaned_blocks;
    let ticked = driver.ticks();
    clock.sleep(Duration::from_secs(1));
    driver.wait_ticks(ticked + 3);
    assert_eq!(v.stats().cleaned_blocks - report_before, 2);
    let report = driver.stop();
    assert!(report.error.is_none());
    assert_eq!(report.cleaned_blocks, 2);
    assert!(report.ticks >= 6);
    assert_eq!(v.stats().dirty_blocks, 8);
}

#[test]
fn writes_after_a_detach_are_made_durable_by_a_flush() {
    use raidlab_devices::PowerCutPolicy;
    let cache = Arc::new(MemVolume::new(DATA_ALIGN + 8 * BS as u64));
    let origin = Arc::new(FaultVolume::with_volatile_cache(MemVolume::new(
        64 * BS as u64,
    )));
    let config = Config {
        mode: Mode::WriteBack,
        block_size: BS,
        ..Config::default()
    };
    create(&cache, &origin, ID, "origin", [4; 16], config).unwrap();
    let v = CachedVolume::open(cache, origin.clone(), ID, Arc::new(TestClock::default())).unwrap();
    v.write_at(&[1; 4096], 0).unwrap();
    v.detach().unwrap();
    // Served on after the detach: a client's write then flush must reach the
    // origin durably, as it would without the cache.
    v.write_at(&[2; 4096], 4096).unwrap();
    v.flush().unwrap();
    origin.power_cut_with(PowerCutPolicy::DropAll).unwrap();
    // What the origin's medium holds after the power cut.
    assert_eq!(block(origin.inner(), 0), vec![1; 4096]);
    assert_eq!(block(origin.inner(), 1), vec![2; 4096]);
}

#[test]
fn a_sequential_hit_is_one_read_of_the_cache_device() {
    use raidlab_devices::{Access, Recorded};
    let dev = Arc::new(Recorded::new(Arc::new(MemVolume::new(
        DATA_ALIGN + 64 * BS as u64,
    ))));
    let origin = Watched::new(64 * BS as u64);
    let config = Config {
        block_size: BS,
        sequential_cutoff: 0,
        ..Config::default()
    };
    create(&dev, &origin, ID, "origin", [4; 16], config).unwrap();
    let v = CachedVolume::open(dev.clone(), origin, ID, Arc::new(TestClock::default())).unwrap();
    // Promoted in order, blocks 8..24 sit in adjacent slots.
    for b in 8..24 {
        block(&v, b);
    }
    let want = block(&*v.origin().clone(), 8);
    dev.take();
    let mut run = vec![0u8; 16 * BS as usize - 1024];
    v.read_at(&mut run, 8 * BS as u64 + 512).unwrap();
    let reads: Vec<_> = dev
        .take()
        .into_iter()
        .filter(|op| op.access == Access::Read)
        .collect();
    assert_eq!(reads.len(), 1, "{reads:?}");
    assert_eq!(run[..BS as usize - 512], want[512..]);
    let mut whole = vec![0u8; 16 * BS as usize];
    v.origin().read_at(&mut whole, 8 * BS as u64).unwrap();
    assert_eq!(run, whole[512..whole.len() - 512]);
    assert_eq!(v.stats().read_hits, 1);
}

#[test]
fn adjacent_mapping_sectors_are_committed_in_one_write() {
    use raidlab_devices::{Access, Recorded};
    let dev = Arc::new(Recorded::new(Arc::new(MemVolume::new(
        DATA_ALIGN + 200 * BS as u64,
    ))));
    let origin = Watched::new(400 * BS as u64);
    let config = Config {
        mode: Mode::WriteBack,
        block_size: BS,
        sequential_cutoff: 0,
        ..Config::default()
    };
    create(&dev, &origin, ID, "origin", [4; 16], config).unwrap();
    let v = CachedVolume::open(dev.clone(), origin, ID, Arc::new(TestClock::default())).unwrap();
    // 100 blocks in slots 0..100: mapping sectors 0..4 (31 entries each).
    v.write_at(&vec![7u8; 100 * BS as usize], 0).unwrap();
    dev.take();
    v.flush().unwrap();
    let writes: Vec<_> = dev
        .take()
        .into_iter()
        .filter(|op| op.access == Access::Write)
        .collect();
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!(writes[0].len, 4 * 512);
    // And they read back as the table: the reopened cache holds the blocks.
    drop(v);
    let origin = Watched::new(400 * BS as u64);
    let v = CachedVolume::open(dev, origin, ID, Arc::new(TestClock::default())).unwrap();
    assert_eq!(v.stats().dirty_blocks, 100);
    assert_eq!(block(&v, 99), vec![7u8; BS as usize]);
}

#[test]
fn overlapped_write_back_writes_the_same_bytes_in_ascending_pieces() {
    use raidlab_cache::clean::OVERLAP_PIECE_BYTES;
    let piece_blocks = OVERLAP_PIECE_BYTES / u64::from(BS);
    // 2.5 pieces of contiguous blocks, written in a scrambled order so that
    // neighbouring blocks sit in scattered cache slots, and one far block.
    let run = piece_blocks * 5 / 2;
    let (v, _) = setup(
        run + 64,
        run * 2 + 64,
        Config {
            mode: Mode::WriteBack,
            dirty_target_pct: 100,
            sequential_cutoff: 0,
            ..Config::default()
        },
    );
    v.set_overlapped_writeback(true);
    let mut order: Vec<u64> = (10..10 + run).collect();
    // A fixed permutation (multiplying by an odd number modulo a power of two
    // would not cover `run`; reverse every other stretch of 7 instead).
    for chunk in order.chunks_mut(7).step_by(2) {
        chunk.reverse();
    }
    order.push(run * 2 + 3);
    let content = |b: u64| -> Vec<u8> {
        (0..BS as u64)
            .map(|i| (b.wrapping_mul(31) ^ (i / 8)) as u8)
            .collect()
    };
    for &b in &order {
        v.write_at(&content(b), b * BS as u64).unwrap();
    }
    assert!(v.origin().writes.lock().unwrap().is_empty());
    let done = v.flush_dirty(|_, _| {}).unwrap();
    assert_eq!(done, order.len() as u64);
    let writes = v.origin().writes.lock().unwrap().clone();
    let b = u64::from(BS);
    let piece = OVERLAP_PIECE_BYTES as usize;
    // The flush's batches cut the run at 4 MiB (more than the run here), so
    // the run is cut only into pieces; then the far block.
    assert_eq!(
        writes,
        [
            (10 * b, piece),
            (10 * b + OVERLAP_PIECE_BYTES, piece),
            (10 * b + 2 * OVERLAP_PIECE_BYTES, piece / 2),
            ((run * 2 + 3) * b, BS as usize),
        ]
    );
    let origin = v.origin().clone();
    for &blk in &order {
        assert_eq!(
            block(&*origin, blk),
            content(blk),
            "block {blk} on the origin"
        );
    }
    assert_eq!(v.stats().dirty_blocks, 0);
}

#[test]
fn a_read_only_open_serves_dirty_blocks_and_writes_nothing() {
    let cache = Arc::new(MemVolume::new(DATA_ALIGN + 16 * BS as u64));
    let origin = Watched::new(64 * BS as u64);
    let config = Config {
        mode: Mode::WriteBack,
        block_size: BS,
        dirty_target_pct: 100,
        sequential_cutoff: 0,
        ..Config::default()
    };
    create(&cache, &origin, ID, "origin", [4; 16], config).unwrap();
    let clock = Arc::new(TestClock::default());
    {
        let v = CachedVolume::open(cache.clone(), origin.clone(), ID, clock.clone()).unwrap();
        for b in [3u64, 4, 11] {
            v.write_at(&vec![b as u8; BS as usize], b * BS as u64)
                .unwrap();
        }
        // Block 20 cached clean by a read miss.
        block(&v, 20);
        v.flush().unwrap();
        // No clean stop: the read-only open finds an unclean cache.
    }
    let bytes = |v: &dyn Volume| {
        let mut b = vec![0u8; v.size() as usize];
        v.read_at(&mut b, 0).unwrap();
        b
    };
    let (cache_before, origin_before) = (bytes(&*cache), bytes(&*origin));
    let origin_writes = origin.writes.lock().unwrap().len();
    let v = CachedVolume::open_read_only(cache.clone(), origin.clone(), ID, clock).unwrap();
    assert!(!v.is_writable());
    for b in [3u64, 4, 11] {
        assert_eq!(block(&v, b), vec![b as u8; BS as usize], "dirty block {b}");
    }
    let reads = *origin.reads.lock().unwrap();
    assert_eq!(
        block(&v, 40),
        origin_before[40 * BS as usize..41 * BS as usize]
    );
    assert_eq!(
        block(&v, 40),
        origin_before[40 * BS as usize..41 * BS as usize]
    );
    // Not promoted: both reads of block 40 went to the origin; and block 20,
    // clean before the unclean stop, is read from the origin too.
    assert_eq!(*origin.reads.lock().unwrap(), reads + 2);
    block(&v, 20);
    assert_eq!(*origin.reads.lock().unwrap(), reads + 3);
    let s = v.stats();
    assert_eq!((s.promotions, s.dirty_blocks), (0, 3));
    let e = v.write_at(&[1u8; 512], 0).unwrap_err();
    assert_eq!(e.kind, ErrorKind::ReadOnly, "{e}");
    assert_eq!(
        v.flush_dirty(|_, _| {}).unwrap_err().kind,
        ErrorKind::ReadOnly
    );
    assert_eq!(
        v.set_mode(Mode::WriteThrough).unwrap_err().kind,
        ErrorKind::ReadOnly
    );
    assert_eq!(
        v.set_tunables(0, 5, 0, 1).unwrap_err().kind,
        ErrorKind::ReadOnly
    );
    assert_eq!(v.reset_stats().unwrap_err().kind, ErrorKind::ReadOnly);
    assert_eq!(v.clean_tick().unwrap(), 0);
    v.flush().unwrap();
    v.shutdown().unwrap();
    assert!(
        bytes(&*cache) == cache_before,
        "the cache device was written"
    );
    assert!(bytes(&*origin) == origin_before, "the origin was written");
    assert_eq!(origin.writes.lock().unwrap().len(), origin_writes);
    // Still unclean and still dirty for the next read-write open.
    assert!(!examine(&*cache).unwrap().clean);
}

/// The cleaner's loop (the one the driver thread and the simulator's task
/// both run) ticks at once, then once per interval of the volume's clock,
/// each tick cleaning what the rate earned since the last; it ends when its
/// wait says so.
#[test]
fn the_cleaners_loop_ticks_each_interval_until_told_to_stop() {
    let (v, clock) = setup(
        20,
        64,
        Config {
            mode: Mode::WriteBack,
            dirty_target_pct: 0,
            clean_rate: 2 * BS as u64,
            ..Config::default()
        },
    );
    for b in 0..10u64 {
        v.write_at(&vec![3; BS as usize], b * BS as u64).unwrap();
    }
    let mut cleaned = Vec::new();
    raidlab_cache::driver::clean_loop(&v, Duration::from_millis(500), |d, n| {
        cleaned.push(n);
        clock.sleep(d);
        cleaned.len() < 6
    })
    .unwrap();
    // Nothing earned at the first tick; a block per half second after.
    assert_eq!(cleaned, vec![0, 1, 1, 1, 1, 1]);
    assert_eq!(v.stats().dirty_blocks, 5);
}

/// Whether a background tick has anything to do: only over the dirty target.
#[test]
fn the_cleaner_has_work_only_over_the_target() {
    let (v, _) = setup(
        20,
        64,
        Config {
            mode: Mode::WriteBack,
            dirty_target_pct: 25,
            ..Config::default()
        },
    );
    assert!(!v.cleaner_has_work(), "nothing is dirty");
    for b in 0..10u64 {
        v.write_at(&vec![4; BS as usize], b * BS as u64).unwrap();
    }
    assert!(v.cleaner_has_work(), "10 dirty of 20, 5 allowed");
    assert_eq!(v.clean_tick().unwrap(), 5);
    assert!(!v.cleaner_has_work(), "at the target");
    assert_eq!(v.try_stats().unwrap().dirty_blocks, 5);
}
