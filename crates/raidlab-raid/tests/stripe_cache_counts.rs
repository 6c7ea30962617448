//! The stripe cache's counters do not depend on when it asks how many member
//! reads a write needs: an array that lets it ask later (a token of the
//! members, counted after the write from the write's own plan) gives the same
//! counters, bit for bit, as one asked at once (the `Below` defaults), over
//! random writes, evictions, expiries and flushes, with members failing while
//! writes are held.

use raidlab_core::{ManualClock, Volume};
use raidlab_devices::MemVolume;
use raidlab_layout::{Geometry, Layout, Level, ParityLayout};
use raidlab_raid::stripe_cache::{Below, StripeCache, StripeCacheConfig};
use raidlab_raid::Array;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use std::time::Duration;

/// The array below the cache, answering only the questions every `Below`
/// must: "how many reads" is asked at once, before each write.
struct Eager<'a>(&'a Array);

impl Below for Eager<'_> {
    fn write_direct(&self, buf: &[u8], offset: u64) -> raidlab_core::Result<()> {
        Below::write_direct(self.0, buf, offset)
    }
    fn read_direct(&self, buf: &mut [u8], offset: u64) -> raidlab_core::Result<()> {
        Below::read_direct(self.0, buf, offset)
    }
    fn reads_for(&self, offset: u64, len: u64) -> u64 {
        Below::reads_for(self.0, offset, len)
    }
}

fn array(g: Geometry) -> Array {
    let members = (0..g.raid_disks)
        .map(|_| Some(Arc::new(MemVolume::new(g.member_bytes)) as Arc<dyn Volume>))
        .collect();
    Array::new("t", g, members).unwrap()
}

fn run(level: Level, disks: usize, seed: u64) {
    let chunk = 4096;
    let g = Geometry::new(
        level,
        Layout::Parity(ParityLayout::LeftSymmetric),
        chunk,
        disks,
        64 * chunk,
    )
    .unwrap();
    let stripe = chunk * g.data_disks() as u64;
    let (lazy, eager) = (array(g), array(g));
    let clock = ManualClock::new();
    let cfg = StripeCacheConfig {
        stripes: 4,
        hold: Duration::from_millis(20),
        ..StripeCacheConfig::default()
    };
    let (lazy_cache, eager_cache) = (
        StripeCache::new(stripe, cfg, clock.clone()),
        StripeCache::new(stripe, cfg, clock.clone()),
    );
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let size = g.array_bytes();
    let mut failed = 0;
    for i in 0..600u32 {
        let sectors = match rng.gen_range(0..10) {
            // Now and then a whole stripe or more (written with no reads).
            0 => stripe / 512 * rng.gen_range(1..3),
            _ => rng.gen_range(1..=16),
        };
        let len = sectors * 512;
        let offset = rng.gen_range(0..(size - len) / 512) * 512;
        let data = vec![(i % 251) as u8; len as usize];
        lazy_cache.write(&data, offset, &lazy).unwrap();
        eager_cache.write(&data, offset, &Eager(&eager)).unwrap();
        match rng.gen_range(0..60) {
            0 => {
                lazy_cache.write_out_range(None, &lazy).unwrap();
                eager_cache.write_out_range(None, &Eager(&eager)).unwrap();
            }
            1..=5 => {
                clock.advance(Duration::from_millis(rng.gen_range(1..30)));
                lazy_cache.write_out_expired(&lazy).unwrap();
                eager_cache.write_out_expired(&Eager(&eager)).unwrap();
            }
            // A member fails with writes held, counted as it was before.
            6 if failed < g.parity_count() => {
                let role = rng.gen_range(0..disks);
                if lazy.fail_member(role).is_ok() {
                    eager.fail_member(role).unwrap();
                    failed += 1;
                }
            }
            _ => {}
        }
        assert_eq!(
            lazy_cache.stats(),
            eager_cache.stats(),
            "{level:?} seed {seed}, after write {i} ({len} bytes at {offset})"
        );
    }
    lazy_cache.write_out_range(None, &lazy).unwrap();
    eager_cache.write_out_range(None, &Eager(&eager)).unwrap();
    let (a, b) = (lazy_cache.stats(), eager_cache.stats());
    assert_eq!(a, b, "{level:?} seed {seed}, at the end");
    assert!(
        a.reads_avoided > 0 && a.evicted > 0 && a.expired > 0 && a.full_stripes > 0,
        "the run should merge, evict, expire and fill stripes: {a:?}"
    );
    let (mut x, mut y) = (vec![0; size as usize], vec![0; size as usize]);
    lazy.read_at(&mut x, 0).unwrap();
    eager.read_at(&mut y, 0).unwrap();
    assert!(
        x == y,
        "{level:?} seed {seed}: the arrays hold different data"
    );
}

#[test]
fn counters_do_not_depend_on_when_reads_are_counted() {
    for seed in 0..4 {
        run(Level::Raid5, 4, seed);
        run(Level::Raid6, 6, seed);
    }
}
