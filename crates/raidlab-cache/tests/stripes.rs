//! Write-back to a parity-RAID origin in whole stripes: what the array's
//! members see when a write-back cache is flushed or cleaned.
//!
//! A RAID 5 rewrites parity for any write that covers less than a stripe,
//! reading the old data or parity first; a write of a whole aligned stripe
//! needs no read. So the member traffic tells whether the cleaner gathered the
//! dirty blocks into whole stripes: the members are wrapped in
//! [`Recorded`], which notes every read and write reaching them.

use raidlab_cache::format::DATA_ALIGN;
use raidlab_cache::{create, CachedVolume, Config, Mode, OriginId};
use raidlab_core::{Result, Volume};
use raidlab_devices::{Access, Accessed, Clock, MemVolume, Recorded};
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_raid::array::Array;
use raidlab_raid::assemble::{CreateSpec, Device, NewMember};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const BS: u64 = 4096;
const ID: OriginId = OriginId::Signature([7; 32]);
/// Room for md's superblock and data offset on each member (mdadm's rules
/// choose the offset, at least 1 MiB); member operations below it are the
/// array's own metadata, not data.
const DATA_OFFSET: u64 = 1 << 20;

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

/// The array as the cache sees it, with the cache's own requests to it noted
/// (reads counted, writes listed); its optimal I/O size passes through, which
/// is the point of the test.
#[derive(Debug)]
struct Origin {
    array: Arc<Array>,
    reads: Mutex<u64>,
    writes: Mutex<Vec<(u64, u64)>>,
}

impl Volume for Origin {
    fn name(&self) -> String {
        self.array.name()
    }
    fn size(&self) -> u64 {
        self.array.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        *self.reads.lock().unwrap() += 1;
        self.array.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.writes.lock().unwrap().push((offset, buf.len() as u64));
        self.array.write_at(buf, offset)
    }
    fn flush(&self) -> Result<()> {
        self.array.flush()
    }
    fn optimal_io_size(&self) -> Option<u64> {
        self.array.optimal_io_size()
    }
}

struct Stack {
    members: Vec<Arc<Recorded>>,
    origin: Arc<Origin>,
    cache: CachedVolume<Arc<MemVolume>, Arc<Origin>>,
    clock: Arc<TestClock>,
    chunk: u64,
    stripe: u64,
    /// Stripes of data in the array.
    stripes: u64,
}

/// A write-back cache of 4 KiB blocks, big enough never to evict, in front
/// of a RAID 5 of `disks` in-memory members with `chunk`-byte chunks and
/// at least `stripes` stripes of data.
fn stack(disks: u64, chunk: u64, stripes: u64) -> Stack {
    stack_with(disks, chunk, stripes, 100, 0)
}

/// [`stack`] with a dirty target and a cleaning rate.
fn stack_with(
    disks: u64,
    chunk: u64,
    stripes: u64,
    dirty_target_pct: u8,
    clean_rate: u64,
) -> Stack {
    let member_size = 2 * DATA_OFFSET + stripes * chunk;
    let members: Vec<Arc<Recorded>> = (0..disks)
        .map(|_| Arc::new(Recorded::new(Arc::new(MemVolume::new(member_size)))))
        .collect();
    let spec = CreateSpec {
        level: Level::Raid5,
        layout: Layout::Parity(ParityLayout::LeftSymmetric),
        chunk_bytes: chunk,
        spares: 0,
        name: "stripes".into(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: false,
    };
    let new = members
        .iter()
        .enumerate()
        .map(|(i, m)| NewMember {
            device: Device {
                path: format!("m{i}"),
                volume: m.clone(),
            },
            zeroed: true,
        })
        .collect();
    let asm = raidlab_raid::assemble::create(&spec, new).unwrap();
    let array = Arc::new(asm.array().unwrap());
    let stripe = chunk * (disks - 1);
    assert_eq!(array.optimal_io_size(), Some(stripe));
    assert_eq!(array.size() % stripe, 0);
    let stripes = array.size() / stripe;
    let origin = Arc::new(Origin {
        array,
        reads: Mutex::new(0),
        writes: Mutex::new(Vec::new()),
    });
    let slots = origin.size() / BS + 16;
    let dev = Arc::new(MemVolume::new(DATA_ALIGN + slots * BS));
    let config = Config {
        mode: Mode::WriteBack,
        block_size: BS as u32,
        sequential_cutoff: 0,
        dirty_target_pct,
        clean_rate,
        ..Config::default()
    };
    create(&dev, &origin, ID, "stripes", [3; 16], config).unwrap();
    let clock = Arc::new(TestClock::default());
    let cache = CachedVolume::open(dev, origin.clone(), ID, clock.clone()).unwrap();
    for m in &members {
        m.take();
    }
    Stack {
        members,
        origin,
        cache,
        clock,
        chunk,
        stripe,
        stripes,
    }
}

fn content(b: u64) -> Vec<u8> {
    (0..BS).map(|i| (b * 131 + i / 7) as u8).collect()
}

/// Member operations in the data area (the array may update its superblock).
fn data_ops(m: &Recorded) -> Vec<Accessed> {
    m.take()
        .into_iter()
        .filter(|op| op.offset >= DATA_OFFSET)
        .collect()
}

/// Write every block of the array, one 4 KiB block at a time in a shuffled
/// order, into the write-back cache; flush the dirty data back; then every
/// member must have been written exactly once over its whole data area and
/// never read, and the array must read back what was written.
fn whole_stripes_are_written_once(disks: u64, chunk: u64, stripes: u64) {
    let s = stack(disks, chunk, stripes);
    let stripes = s.stripes;
    let blocks = stripes * s.stripe / BS;
    let mut order: Vec<u64> = (0..blocks).collect();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(disks * chunk));
    for &b in &order {
        s.cache.write_at(&content(b), b * BS).unwrap();
    }
    for m in &s.members {
        assert_eq!(data_ops(m), [], "a write-back write reached the origin");
    }
    assert_eq!(s.cache.flush_dirty(|_, _| {}).unwrap(), blocks);

    for (i, m) in s.members.iter().enumerate() {
        let ops = data_ops(m);
        let reads = ops.iter().filter(|op| op.access == Access::Read).count();
        assert_eq!(
            reads, 0,
            "member {i} of a {disks}-disk RAID 5 ({chunk}-byte chunks) was read \
             {reads} times: some stripe was written in part; {ops:?}"
        );
        let mut writes: Vec<(u64, u64)> = ops.iter().map(|op| (op.offset, op.len)).collect();
        writes.sort_unstable();
        let start = writes.first().map_or(0, |w| w.0);
        let mut at = start;
        for &(offset, len) in &writes {
            assert_eq!(
                offset, at,
                "member {i}: data written twice or left out; {writes:?}"
            );
            at += len;
        }
        assert_eq!(at - start, stripes * s.chunk, "member {i}: {writes:?}");
    }
    for &(offset, len) in s.origin.writes.lock().unwrap().iter() {
        assert!(
            offset % s.stripe == 0 && len % s.stripe == 0,
            "origin write of {len} bytes at {offset} is not whole stripes of {}",
            s.stripe
        );
    }
    assert_eq!(*s.origin.reads.lock().unwrap(), 0);
    for b in 0..blocks {
        let mut got = vec![0u8; BS as usize];
        s.origin.array.read_at(&mut got, b * BS).unwrap();
        assert_eq!(got, content(b), "block {b} on the array");
    }
}

#[test]
fn scattered_blocks_of_whole_stripes_reach_a_three_disk_raid5_as_whole_stripes() {
    // md's default chunk: a 1 MiB stripe is 256 blocks, more than one batch
    // of a flush.
    whole_stripes_are_written_once(3, 512 << 10, 4);
}

#[test]
fn scattered_blocks_of_whole_stripes_reach_a_four_disk_raid5_as_whole_stripes() {
    // Three data chunks of 64 KiB: a stripe that is not a power of two, so
    // batches and run caps in blocks never fall on its edges by chance.
    whole_stripes_are_written_once(4, 64 << 10, 10);
}

#[test]
fn a_partly_dirty_stripe_goes_in_one_write_per_run_without_reading_the_origin() {
    let s = stack(3, 64 << 10, 4);
    let per_stripe = s.stripe / BS;
    // A run inside stripe 0, a run across the edge of stripes 1 and 2, and
    // one lone block in stripe 3, written back to front.
    let runs = [
        (3, 10),
        (2 * per_stripe - 5, 2 * per_stripe + 7),
        (3 * per_stripe + 1, 3 * per_stripe + 2),
    ];
    for &(first, end) in runs.iter().rev() {
        for b in (first..end).rev() {
            s.cache.write_at(&content(b), b * BS).unwrap();
        }
    }
    s.cache.flush_dirty(|_, _| {}).unwrap();
    let want: Vec<(u64, u64)> = runs
        .iter()
        .map(|&(first, end)| (first * BS, (end - first) * BS))
        .collect();
    assert_eq!(*s.origin.writes.lock().unwrap(), want);
    assert_eq!(
        *s.origin.reads.lock().unwrap(),
        0,
        "the cache read the origin to fill a stripe"
    );
    for &(first, end) in &runs {
        for b in first..end {
            let mut got = vec![0u8; BS as usize];
            s.origin.array.read_at(&mut got, b * BS).unwrap();
            assert_eq!(got, content(b), "block {b} on the array");
        }
    }
}

#[test]
fn a_cleaning_step_finishes_the_stripe_it_starts() {
    let s = stack(3, 64 << 10, 4);
    let per_stripe = s.stripe / BS;
    for b in (per_stripe..3 * per_stripe).rev() {
        s.cache.write_at(&content(b), b * BS).unwrap();
    }
    // One block asked for: the rest of its stripe goes with it, in one write,
    // so the stripe is not written in two halves by two steps.
    assert_eq!(s.cache.clean_step(1, false).unwrap(), per_stripe);
    assert_eq!(
        *s.origin.writes.lock().unwrap(),
        [(s.stripe, s.stripe)],
        "one whole stripe"
    );
    assert_eq!(s.cache.stats().dirty_blocks, per_stripe);
    for m in &s.members {
        let ops = data_ops(m);
        assert!(ops.iter().all(|op| op.access == Access::Write), "{ops:?}");
    }
}

#[test]
fn finishing_a_stripe_beyond_the_cleaning_rate_is_paid_back() {
    // 8 blocks a second, 32-block stripes: a tick earns a quarter of a
    // stripe, cleans the whole stripe, and the next three ticks pay for it.
    let s = stack_with(3, 64 << 10, 4, 0, 8 * BS);
    let per_stripe = s.stripe / BS;
    for b in 0..3 * per_stripe {
        s.cache.write_at(&content(b), b * BS).unwrap();
    }
    let mut cleaned = Vec::new();
    s.cache.clean_tick().unwrap();
    for _ in 0..8 {
        s.clock.sleep(Duration::from_secs(1));
        cleaned.push(s.cache.clean_tick().unwrap());
    }
    assert_eq!(
        cleaned,
        [per_stripe, 0, 0, 0, per_stripe, 0, 0, 0],
        "8 blocks a second on average, a stripe at a time"
    );
    for &(offset, len) in s.origin.writes.lock().unwrap().iter() {
        assert_eq!((offset % s.stripe, len), (0, s.stripe));
    }
}
