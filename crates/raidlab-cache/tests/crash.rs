//! Crash consistency of the cache: seeded random workloads in every mode, a
//! power cut at a random I/O (inside any operation: a promotion, an eviction, a
//! cleaning batch, a flush, a mode change), reopen, and a check of every sector.
//!
//! Both the cache device and the origin are in-memory volumes behind
//! [`FaultVolume::with_volatile_cache`]: a write is durable only once its device
//! has been flushed, and a power cut drops, keeps or tears (at 512-byte sectors)
//! each unflushed write, in a shuffled order, on each device independently. The
//! cut is triggered by the Nth write or flush reaching either device (counted
//! across both), so it falls between any two steps of the commit protocol. The
//! host goes down with the power: the operation the cut falls into is never
//! acknowledged, whatever it would have returned (an array may go on after its
//! members fail), and the workload stops there.
//!
//! The origin is one device, or a RAID 5 of three (then the cut reaches every
//! member, and the array is reassembled from what reached them). Most runs use
//! a small shape (64 origin blocks, 24 cache slots: evictions all the time, a
//! table of one mapping sector); the wide shape (256 and 100: four sectors)
//! is there for commits that write several adjacent mapping sectors at once.
//!
//! Writes include FUA writes and write-zeroes (sizes up to six blocks, so
//! whole blocks are zeroed). The devices model FUA as a disk does: that
//! write alone is durable, nothing else pending is flushed by it.
//!
//! Each written sector carries the id of the write that wrote it (a zeroed
//! sector reads as zeros, allowed where a write-zeroes is among the allowed
//! ids). An acknowledged FUA write is the sector's durable id at once. The model keeps,
//! per sector, the id durable as of the last completed flush and the ids written
//! since. After the crash a sector must hold one of those: an older id is a
//! **stale read** (data older than what was flushed), anything else a **loss**.
//! Both must be zero. In half the crash points the power goes again during
//! the reopen (which writes after an unclean stop). Then the cache is detached
//! and the origin alone must read exactly what the cache read after the crash.
//!
//! `RAIDLAB_CACHE_CRASH_POINTS=N` runs N crash points per mode (default
//! [`DEFAULT_POINTS`]); `RAIDLAB_CACHE_CRASH_SEED=S` runs only seed S. Run with
//! `-- --nocapture` to see the figures.

use raidlab_cache::{create, CachedVolume, Config, Mode, OriginId};
use raidlab_core::{Result, Volume};
use raidlab_devices::{Clock, FaultVolume, MemVolume};
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_raid::assemble::{Assembly, CreateSpec, Device, NewMember};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SECTOR: usize = 512;
const BLOCK: u32 = 4096;
/// How large the origin and the cache are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    origin: u64,
    slots: u64,
}

impl Shape {
    fn cache_device(self) -> u64 {
        (1 << 20) + self.slots * BLOCK as u64
    }
    /// RAID 5 members: md's 1 MiB data offset and half the origin each.
    fn member(self) -> u64 {
        (1 << 20) + self.origin / 2
    }
}

/// 64 blocks of origin against 24 of cache, so evictions happen all the
/// time; the whole table is one mapping sector.
const SMALL: Shape = Shape {
    origin: 256 << 10,
    slots: 24,
};
/// 256 blocks of origin against 100 of cache: a table of four mapping
/// sectors, which a commit writes together when several changed.
const WIDE: Shape = Shape {
    origin: 1 << 20,
    slots: 100,
};
const DEFAULT_POINTS: u64 = 200;
const ID: OriginId = OriginId::Signature([9; 32]);

type Dev = Arc<FaultVolume<MemVolume>>;

/// Counts writes and flushes on both devices and cuts the power on both at the
/// chosen one, before it reaches the device.
#[derive(Debug)]
struct Trigger {
    ops: AtomicU64,
    at: u64,
    /// Counting starts once the set-up (array, stamps, cache) is done.
    armed: AtomicBool,
    fired: AtomicBool,
    devices: Vec<(Dev, u64)>,
}

impl Trigger {
    fn tick(&self) {
        if self.armed.load(Ordering::SeqCst) && self.ops.fetch_add(1, Ordering::SeqCst) == self.at {
            self.fire();
        }
    }
    fn fire(&self) {
        if !self.fired.swap(true, Ordering::SeqCst) {
            for (d, seed) in &self.devices {
                d.power_cut(*seed).unwrap();
            }
        }
    }
}

#[derive(Debug)]
struct Tripped {
    dev: Dev,
    trigger: Arc<Trigger>,
}

impl Volume for Tripped {
    fn name(&self) -> String {
        self.dev.name()
    }
    fn size(&self) -> u64 {
        self.dev.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.dev.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.trigger.tick();
        self.dev.write_at(buf, offset)
    }
    fn flush(&self) -> Result<()> {
        self.trigger.tick();
        self.dev.flush()
    }
    // The device's own FUA: this write alone becomes durable (a flush of
    // everything would hide a FUA write that forgot its mapping).
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.trigger.tick();
        self.dev.write_at_fua(buf, offset)
    }
    // Write-zeroes is the trait's default: zeros written through `write_at`,
    // each one a tick and an unflushed write.
}

/// Virtual time, moved on by the workload.
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

fn stamp(id: u64, sector: u64) -> [u8; SECTOR] {
    let mut s = [0u8; SECTOR];
    s[..8].copy_from_slice(&id.to_le_bytes());
    s[8..16].copy_from_slice(&sector.to_le_bytes());
    for (i, b) in s[16..].iter_mut().enumerate() {
        *b = (id.wrapping_mul(31) ^ sector.wrapping_mul(7) ^ i as u64) as u8;
    }
    s
}

/// The write id a sector holds, or `None` if it is not a whole stamp.
/// Zeros are [`ZEROS`]: which write-zeroes left them cannot be told.
fn id_of(bytes: &[u8], sector: u64) -> Option<u64> {
    if bytes.iter().all(|&b| b == 0) {
        return Some(ZEROS);
    }
    let id = u64::from_le_bytes(bytes[..8].try_into().ok()?);
    (bytes == stamp(id, sector)).then_some(id)
}

/// What a zeroed sector reads as, in place of a write id.
const ZEROS: u64 = u64::MAX;

#[derive(Debug, Clone, Default)]
struct Sector {
    durable: u64,
    since: Vec<u64>,
    /// Write-zeroes ids that reached this sector (all, durable or not).
    zeroed_by: Vec<u64>,
}

impl Sector {
    fn latest(&self) -> u64 {
        *self.since.last().unwrap_or(&self.durable)
    }
    /// What the sector reads as if `id` is what it holds.
    fn reads(&self, id: u64) -> u64 {
        if self.zeroed_by.contains(&id) {
            ZEROS
        } else {
            id
        }
    }
    /// Whether reading `got` after a crash is allowed: the durable write or
    /// one since.
    fn allows(&self, got: u64) -> bool {
        std::iter::once(self.durable)
            .chain(self.since.iter().copied())
            .any(|id| self.reads(id) == got)
    }
    /// Whether `got` is something this sector held before its durable write.
    fn older(&self, got: u64) -> bool {
        if got == ZEROS {
            self.zeroed_by.iter().any(|&z| z < self.durable)
        } else {
            got < self.durable
        }
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    points: u64,
    cut_inside: u64,
    losses: u64,
    stale: u64,
    unstable: u64,
    dirty_at_cut: u64,
    cut_in_reopen: u64,
    /// FUA writes and write-zeroes acknowledged before the cut.
    fua_writes: u64,
    zeroes: u64,
}

/// What the cache sits in front of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OriginKind {
    /// One device.
    Plain,
    /// A RAID 5 of three devices, 16 KiB chunks.
    Raid5,
}

fn raid5_spec() -> CreateSpec {
    CreateSpec {
        level: Level::Raid5,
        layout: Layout::Parity(ParityLayout::LeftSymmetric),
        chunk_bytes: 16 << 10,
        spares: 0,
        name: "cached".into(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: false,
    }
}

/// The origin after the crash, from what reached its devices.
fn reopen_origin(kind: OriginKind, devs: &[Dev], seed: u64) -> Arc<dyn Volume> {
    match kind {
        OriginKind::Plain => devs[0].clone(),
        OriginKind::Raid5 => {
            let devices = devs
                .iter()
                .enumerate()
                .map(|(i, d)| Device {
                    path: format!("m{i}"),
                    volume: d.clone(),
                })
                .collect();
            let asm = Assembly::assemble(devices)
                .unwrap_or_else(|e| panic!("seed {seed}: reassemble: {e}"));
            asm.check_startable(false)
                .unwrap_or_else(|e| panic!("seed {seed}: a complete RAID 5 starts: {e}"));
            Arc::new(asm.array().unwrap())
        }
    }
}

fn run_point(shape: Shape, kind: OriginKind, mode: Mode, seed: u64) -> Tally {
    let origin_size = shape.origin;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let sectors = origin_size / SECTOR as u64;
    let cache: Dev = Arc::new(FaultVolume::with_volatile_cache(MemVolume::new(
        shape.cache_device(),
    )));
    let origin_devs: Vec<Dev> = match kind {
        OriginKind::Plain => vec![Arc::new(FaultVolume::with_volatile_cache(MemVolume::new(
            origin_size,
        )))],
        OriginKind::Raid5 => (0..3)
            .map(|_| {
                Arc::new(FaultVolume::with_volatile_cache(MemVolume::new(
                    shape.member(),
                )))
            })
            .collect(),
    };
    let mut devices = vec![(cache.clone(), rng.gen())];
    devices.extend(origin_devs.iter().map(|d| (d.clone(), rng.gen())));
    let trigger = Arc::new(Trigger {
        ops: AtomicU64::new(0),
        at: rng.gen_range(0..150),
        armed: AtomicBool::new(false),
        fired: AtomicBool::new(false),
        devices,
    });
    let tripped = |d: &Dev| -> Arc<dyn Volume> {
        Arc::new(Tripped {
            dev: d.clone(),
            trigger: trigger.clone(),
        })
    };
    // The origin as the workload sees it: every device behind the trigger.
    let origin: Arc<dyn Volume> = match kind {
        OriginKind::Plain => tripped(&origin_devs[0]),
        OriginKind::Raid5 => {
            let members = origin_devs
                .iter()
                .enumerate()
                .map(|(i, d)| NewMember {
                    device: Device {
                        path: format!("m{i}"),
                        volume: tripped(d),
                    },
                    zeroed: true,
                })
                .collect();
            let mut asm = raidlab_raid::assemble::create(&raid5_spec(), members)
                .unwrap_or_else(|e| panic!("seed {seed}: create: {e}"));
            asm.mark_dirty().unwrap();
            let array = Arc::new(asm.array().unwrap());
            assert_eq!(array.size(), origin_size);
            array
        }
    };
    for s in 0..sectors {
        origin.write_at(&stamp(0, s), s * SECTOR as u64).unwrap();
    }
    origin.flush().unwrap();
    let config = Config {
        mode,
        block_size: BLOCK,
        sequential_cutoff: if rng.gen_bool(0.5) { 16 << 10 } else { 0 },
        dirty_target_pct: rng.gen_range(0..=50),
        clean_rate: if rng.gen_bool(0.5) { 0 } else { 64 << 10 },
        promote_threshold: rng.gen_range(1..=2),
        ..Config::default()
    };
    let sb = create(&cache, &origin, ID, "origin", [seed as u8; 16], config).unwrap();
    assert_eq!(sb.layout.cache_blocks, shape.slots);
    let clock = Arc::new(TestClock::default());
    let v = CachedVolume::open(tripped(&cache), origin, ID, clock.clone()).unwrap();
    trigger.armed.store(true, Ordering::SeqCst);
    let mut model = vec![Sector::default(); sectors as usize];
    let mut next_id = 1u64;
    let ops = rng.gen_range(10..80);
    let mut tally = Tally {
        points: 1,
        ..Tally::default()
    };
    let mut seq_at = 0u64;
    for _ in 0..ops {
        let r: f64 = rng.gen();
        let ok = if r < 0.45 || (0.9..0.95).contains(&r) {
            // A write: random, or the next piece of a sequential run; a
            // share of the random ones are FUA writes or write-zeroes.
            let kind: f64 = rng.gen();
            let zeroes = r < 0.45 && kind < 0.15;
            let fua = r < 0.45 && (0.15..0.4).contains(&kind);
            let (first, n) = if r < 0.45 {
                let first = rng.gen_range(0..sectors);
                // Write-zeroes up to 6 blocks, so whole blocks are zeroed.
                let most = if zeroes { 48 } else { 24 };
                (first, rng.gen_range(1..=most).min(sectors - first))
            } else {
                let n = 16u64.min(sectors - seq_at);
                let f = seq_at;
                seq_at = (seq_at + n) % sectors;
                (f, n)
            };
            let id = next_id;
            next_id += 1;
            for s in first..first + n {
                let m = &mut model[s as usize];
                m.since.push(id);
                if zeroes {
                    m.zeroed_by.push(id);
                }
            }
            let at = first * SECTOR as u64;
            let ok = if zeroes {
                v.write_zeroes(at, n * SECTOR as u64).is_ok()
            } else {
                let mut buf = Vec::with_capacity(n as usize * SECTOR);
                for s in first..first + n {
                    buf.extend_from_slice(&stamp(id, s));
                }
                if fua {
                    v.write_at_fua(&buf, at).is_ok()
                } else {
                    v.write_at(&buf, at).is_ok()
                }
            };
            if ok && !trigger.fired.load(Ordering::SeqCst) {
                tally.zeroes += u64::from(zeroes);
                tally.fua_writes += u64::from(fua);
                if fua {
                    // Acknowledged FUA: these sectors hold it or a later
                    // write after any power cut, flush or no flush.
                    for s in first..first + n {
                        let m = &mut model[s as usize];
                        m.durable = id;
                        m.since.clear();
                    }
                }
            }
            ok
        } else if r < 0.65 {
            let first = rng.gen_range(0..sectors);
            let n = rng.gen_range(1..=24u64).min(sectors - first);
            let mut buf = vec![0u8; n as usize * SECTOR];
            match v.read_at(&mut buf, first * SECTOR as u64) {
                Ok(()) if trigger.fired.load(Ordering::SeqCst) => true,
                Ok(()) => {
                    for (i, s) in (first..first + n).enumerate() {
                        let got = id_of(&buf[i * SECTOR..(i + 1) * SECTOR], s);
                        let m = &model[s as usize];
                        assert_eq!(
                            got,
                            Some(m.reads(m.latest())),
                            "seed {seed} ({mode:?}): read-your-writes of sector {s} before \
                             the crash; reproduce with RAIDLAB_CACHE_CRASH_SEED={seed}"
                        );
                    }
                    true
                }
                Err(_) => false,
            }
        } else if r < 0.78 {
            let ok = v.flush().is_ok();
            // A flush the cut fell into was never acknowledged to anyone: the
            // host loses power too, whatever the call would have returned.
            if ok && !trigger.fired.load(Ordering::SeqCst) {
                for m in &mut model {
                    m.durable = m.latest();
                    m.since.clear();
                }
            }
            ok
        } else if r < 0.86 {
            v.clean_step(rng.gen_range(1..6), rng.gen_bool(0.5)).is_ok()
        } else if r < 0.9 {
            clock.sleep(Duration::from_millis(rng.gen_range(1..200)));
            v.clean_tick().is_ok()
        } else if r < 0.97 {
            let m = [Mode::WriteBack, Mode::WriteThrough, Mode::WriteAround][rng.gen_range(0..3)];
            // Leaving write-back only happens in the modes that allow it here;
            // the write-back harness stays mostly in write-back.
            let m = if mode == Mode::WriteBack && rng.gen_bool(0.7) {
                Mode::WriteBack
            } else {
                m
            };
            v.set_mode(m).is_ok()
        } else {
            v.shutdown().is_ok()
        };
        // The host loses power with its devices: the operation the cut fell
        // into, and everything after, is never acknowledged.
        if trigger.fired.load(Ordering::SeqCst) {
            break;
        }
        assert!(ok, "seed {seed}: an operation failed with no power cut");
    }
    if trigger.fired.load(Ordering::SeqCst) {
        tally.cut_inside = 1;
    }
    tally.dirty_at_cut = v.stats().dirty_blocks;
    trigger.fire();
    drop(v);
    cache.restart();
    for d in &origin_devs {
        d.restart();
    }
    let origin = reopen_origin(kind, &origin_devs, seed);

    // Half the time the power goes again while the cache reopens (an unclean
    // open writes: it drops the clean entries from the table).
    if rng.gen_bool(0.5) {
        let again = Arc::new(Trigger {
            ops: AtomicU64::new(0),
            at: rng.gen_range(0..4),
            armed: AtomicBool::new(true),
            fired: AtomicBool::new(false),
            devices: vec![(cache.clone(), rng.gen())],
        });
        let reopened = CachedVolume::open(
            Tripped {
                dev: cache.clone(),
                trigger: again.clone(),
            },
            origin.clone(),
            ID,
            clock.clone(),
        );
        if again.fired.load(Ordering::SeqCst) {
            tally.cut_in_reopen = 1;
        }
        drop(reopened);
        again.fire();
        cache.restart();
    }

    let v = CachedVolume::open(cache.clone(), origin.clone(), ID, clock.clone())
        .unwrap_or_else(|e| panic!("seed {seed} ({mode:?}): reopen after the crash failed: {e}"));
    let mut after = vec![0u8; origin_size as usize];
    v.read_at(&mut after, 0).unwrap();
    for s in 0..sectors {
        let bytes = &after[s as usize * SECTOR..(s as usize + 1) * SECTOR];
        let m = &model[s as usize];
        match id_of(bytes, s) {
            Some(id) if m.allows(id) => {}
            Some(id) if m.older(id) => {
                tally.stale += 1;
                eprintln!(
                    "seed {seed} ({mode:?}): sector {s} reads write {id}, older than the \
                     flushed write {}; reproduce with RAIDLAB_CACHE_CRASH_SEED={seed}",
                    m.durable
                );
            }
            other => {
                tally.losses += 1;
                eprintln!(
                    "seed {seed} ({mode:?}): sector {s} holds {other:?}, never allowed \
                     (durable {}, since {:?}); reproduce with RAIDLAB_CACHE_CRASH_SEED={seed}",
                    m.durable, m.since
                );
            }
        }
    }
    // Reads are stable after the crash, and detaching leaves the origin complete.
    let mut again = vec![0u8; origin_size as usize];
    v.read_at(&mut again, 0).unwrap();
    v.detach().unwrap();
    let mut alone = vec![0u8; origin_size as usize];
    origin.read_at(&mut alone, 0).unwrap();
    if again != after || alone != after {
        tally.unstable += 1;
        eprintln!("seed {seed} ({mode:?}): reads changed after the crash or the detach");
    }
    tally
}

fn seeds() -> Vec<u64> {
    if let Some(s) = std::env::var("RAIDLAB_CACHE_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return vec![s];
    }
    let n = std::env::var("RAIDLAB_CACHE_CRASH_POINTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_POINTS);
    (0..n).collect()
}

fn run_mode(kind: OriginKind, mode: Mode) {
    run_shape(SMALL, kind, mode);
}

fn run_shape(shape: Shape, kind: OriginKind, mode: Mode) {
    let mut total = Tally::default();
    for seed in seeds() {
        let t = run_point(shape, kind, mode, seed);
        total.points += t.points;
        total.cut_inside += t.cut_inside;
        total.losses += t.losses;
        total.stale += t.stale;
        total.unstable += t.unstable;
        total.dirty_at_cut += t.dirty_at_cut;
        total.cut_in_reopen += t.cut_in_reopen;
        total.fua_writes += t.fua_writes;
        total.zeroes += t.zeroes;
    }
    println!(
        "{kind:?} origin, {mode:?}{}: {} crash points ({} cut inside an operation, {} cut again \
         while reopening), {} FUA writes and {} write-zeroes acknowledged, {} dirty blocks at the \
         cuts, {} lost sectors, {} stale sectors, {} unstable",
        if shape == WIDE {
            ", four-sector table"
        } else {
            ""
        },
        total.points,
        total.cut_inside,
        total.cut_in_reopen,
        total.fua_writes,
        total.zeroes,
        total.dirty_at_cut,
        total.losses,
        total.stale,
        total.unstable
    );
    assert_eq!((total.losses, total.stale, total.unstable), (0, 0, 0));
}

#[test]
fn write_back_loses_nothing_and_serves_nothing_stale() {
    run_mode(OriginKind::Plain, Mode::WriteBack);
}

#[test]
fn write_through_loses_nothing_and_serves_nothing_stale() {
    run_mode(OriginKind::Plain, Mode::WriteThrough);
}

#[test]
fn write_around_loses_nothing_and_serves_nothing_stale() {
    run_mode(OriginKind::Plain, Mode::WriteAround);
}

#[test]
fn over_raid5_write_back_loses_nothing_and_serves_nothing_stale() {
    run_mode(OriginKind::Raid5, Mode::WriteBack);
}

#[test]
fn over_raid5_write_through_loses_nothing_and_serves_nothing_stale() {
    run_mode(OriginKind::Raid5, Mode::WriteThrough);
}

#[test]
fn over_raid5_write_around_loses_nothing_and_serves_nothing_stale() {
    run_mode(OriginKind::Raid5, Mode::WriteAround);
}

#[test]
fn with_a_table_of_several_sectors_write_back_loses_nothing_and_serves_nothing_stale() {
    run_shape(WIDE, OriginKind::Plain, Mode::WriteBack);
}

#[test]
fn with_a_table_of_several_sectors_over_raid5_write_back_loses_nothing_and_serves_nothing_stale() {
    run_shape(WIDE, OriginKind::Raid5, Mode::WriteBack);
}

#[test]
fn with_a_table_of_several_sectors_write_through_loses_nothing_and_serves_nothing_stale() {
    run_shape(WIDE, OriginKind::Plain, Mode::WriteThrough);
}
