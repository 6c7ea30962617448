//! FUA writes and write-zeroes through the cache, mode by mode: what each
//! device is asked to do (a FUA write makes its piece durable where it lands
//! and flushes nothing it does not need; whole zeroed blocks go to the origin
//! as write-zeroes and are never cached as zeros), and that the data reads
//! back, after a power cut too. The crash harness (`crash.rs`) covers both
//! under power cuts at every step.

use raidlab_cache::format::DATA_ALIGN;
use raidlab_cache::{create, CachedVolume, Config, Mode, OriginId};
use raidlab_core::{Result, Volume};
use raidlab_devices::{Clock, FaultVolume, MemVolume, PowerCutPolicy};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const BS: u64 = 4096;
const ID: OriginId = OriginId::Signature([2; 32]);

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

/// One request a device was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ev {
    Write(u64, u64),
    Fua(u64, u64),
    Zeroes(u64, u64),
    Flush,
}

/// A device with a volatile cache that records what it is asked for.
#[derive(Debug)]
struct Logged {
    dev: FaultVolume<MemVolume>,
    log: Mutex<Vec<Ev>>,
}

impl Logged {
    fn new(size: u64) -> Arc<Logged> {
        Arc::new(Logged {
            dev: FaultVolume::with_volatile_cache(MemVolume::new(size)),
            log: Mutex::new(Vec::new()),
        })
    }
    fn take(&self) -> Vec<Ev> {
        std::mem::take(&mut self.log.lock().unwrap())
    }
    fn note(&self, e: Ev) {
        self.log.lock().unwrap().push(e);
    }
}

impl Volume for Logged {
    fn name(&self) -> String {
        "logged".into()
    }
    fn size(&self) -> u64 {
        self.dev.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.dev.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.note(Ev::Write(offset, buf.len() as u64));
        self.dev.write_at(buf, offset)
    }
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.note(Ev::Fua(offset, buf.len() as u64));
        self.dev.write_at_fua(buf, offset)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        self.note(Ev::Zeroes(offset, len));
        self.dev.write_zeroes(offset, len)
    }
    fn flush(&self) -> Result<()> {
        self.note(Ev::Flush);
        self.dev.flush()
    }
}

type Cached = CachedVolume<Arc<Logged>, Arc<Logged>>;

/// A cache of 8 slots over 32 blocks whose every byte is 0xEE, flushed.
fn setup(mode: Mode) -> (Cached, Arc<Logged>, Arc<Logged>) {
    let cache = Logged::new(DATA_ALIGN + 8 * BS);
    let origin = Logged::new(32 * BS);
    origin.write_at(&vec![0xEE; 32 * BS as usize], 0).unwrap();
    origin.flush().unwrap();
    let config = Config {
        mode,
        block_size: BS as u32,
        sequential_cutoff: 0,
        ..Config::default()
    };
    create(&cache, &origin, ID, "origin", [5; 16], config).unwrap();
    let clock = Arc::new(TestClock::default());
    let v = CachedVolume::open(cache.clone(), origin.clone(), ID, clock).unwrap();
    cache.take();
    origin.take();
    (v, cache, origin)
}

fn read(v: &impl Volume, offset: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    v.read_at(&mut b, offset).unwrap();
    b
}

/// Cut the power on both devices (every unflushed write lost) and reopen.
fn power_cut(v: Cached, cache: &Arc<Logged>, origin: &Arc<Logged>) -> Cached {
    drop(v);
    for d in [cache, origin] {
        d.dev.power_cut_with(PowerCutPolicy::DropAll).unwrap();
        d.dev.restart();
    }
    let clock = Arc::new(TestClock::default());
    CachedVolume::open(cache.clone(), origin.clone(), ID, clock).unwrap()
}

#[test]
fn write_back_fua_is_durable_on_the_cache_device_alone() {
    let (v, cache, origin) = setup(Mode::WriteBack);
    // A miss: installed dirty, data and mapping committed on the cache device.
    v.write_at_fua(&[1; 4096], 3 * BS).unwrap();
    assert!(origin.take().is_empty(), "the origin is not touched");
    assert!(cache.take().contains(&Ev::Flush));
    // A hit on a block the table already names dirty: one FUA write, no flush.
    v.write_at_fua(&[2; 512], 3 * BS + 512).unwrap();
    // (The first slot handed out is the first of the data area.)
    assert_eq!(cache.take(), [Ev::Fua(DATA_ALIGN + 512, 512)]);
    assert!(origin.take().is_empty());
    // A plain write next to it is not made durable by the FUA ones.
    v.write_at(&[3; 4096], 9 * BS).unwrap();
    let v = power_cut(v, &cache, &origin);
    let mut want = vec![1u8; 4096];
    want[512..1024].fill(2);
    assert_eq!(read(&v, 3 * BS, 4096), want);
    assert_eq!(read(&v, 9 * BS, 4096), vec![0xEE; 4096]);
}

#[test]
fn write_through_and_write_around_fua_go_to_the_origin_as_fua() {
    for mode in [Mode::WriteThrough, Mode::WriteAround] {
        let (v, cache, origin) = setup(mode);
        // Cache block 5 first (a read miss promotes it), with the table on
        // the device naming it.
        read(&v, 5 * BS, 4096);
        v.flush().unwrap();
        cache.take();
        origin.take();
        v.write_at_fua(&[7; 1024], 5 * BS).unwrap();
        v.write_at_fua(&[8; 1024], 6 * BS).unwrap();
        let o = origin.take();
        assert_eq!(
            o,
            [Ev::Fua(5 * BS, 1024), Ev::Fua(6 * BS, 1024)],
            "{mode:?}: FUA at the origin, no origin flush"
        );
        let c = cache.take();
        if mode == Mode::WriteThrough {
            // The clean copy is updated without durability: an unclean open
            // drops clean entries and reads the origin.
            assert_eq!(c, [Ev::Write(DATA_ALIGN, 1024)], "{mode:?}");
        } else {
            // The invalidation is durable before the origin changes.
            assert!(c.contains(&Ev::Flush), "{mode:?}: {c:?}");
            assert!(!c.iter().any(|e| matches!(e, Ev::Fua(..))), "{mode:?}");
        }
        let v = power_cut(v, &cache, &origin);
        let got = read(&v, 5 * BS, 4096);
        assert_eq!(got[..1024], [7; 1024], "{mode:?}");
        assert_eq!(got[1024..], [0xEE; 3072], "{mode:?}");
        assert_eq!(read(&v, 6 * BS, 1024), vec![8; 1024], "{mode:?}");
    }
}

#[test]
fn whole_zeroed_blocks_go_to_the_origin_and_leave_the_cache_in_every_mode() {
    for mode in [Mode::WriteBack, Mode::WriteThrough, Mode::WriteAround] {
        let (v, cache, origin) = setup(mode);
        // Blocks 2 and 3 cached (clean), block 4 dirty in write-back.
        read(&v, 2 * BS, 2 * BS as usize);
        v.write_at(&[4; 4096], 4 * BS).unwrap();
        v.flush().unwrap();
        let before = v.stats();
        cache.take();
        origin.take();
        // From the middle of block 1 to the middle of block 6.
        let (at, len) = (BS + 1024, 5 * BS);
        v.write_zeroes(at, len).unwrap();
        let o = origin.take();
        assert!(
            o.contains(&Ev::Zeroes(2 * BS, 4 * BS)),
            "{mode:?}: whole blocks zeroed at the origin: {o:?}"
        );
        // Nothing written into a slot for the whole blocks. In write-back
        // the two partial blocks at the ends are written as data (installed
        // dirty, one whole-block write each); the other modes send them to
        // the origin.
        let c = cache.take();
        let slot_writes: Vec<&Ev> = c
            .iter()
            .filter(|e| matches!(e, Ev::Write(off, _) | Ev::Fua(off, _) if *off >= DATA_ALIGN))
            .collect();
        let ends = if mode == Mode::WriteBack { 2 } else { 0 };
        assert_eq!(slot_writes.len(), ends, "{mode:?}: {c:?}");
        assert!(slot_writes
            .iter()
            .all(|e| matches!(e, Ev::Write(_, n) if *n == BS)));
        let after = v.stats();
        let cached = if mode == Mode::WriteBack { 3 } else { 2 };
        assert_eq!(
            after.invalidations - before.invalidations,
            cached,
            "{mode:?}"
        );
        assert_eq!(
            after.occupied_blocks,
            before.occupied_blocks - cached + ends as u64,
            "{mode:?}"
        );
        if mode == Mode::WriteBack {
            // The dirty block's only copy goes once the origin has the zeros
            // durably: an origin flush after its write-zeroes.
            let z = o.iter().position(|e| *e == Ev::Zeroes(2 * BS, 4 * BS));
            let f = o.iter().position(|e| *e == Ev::Flush);
            assert!(matches!((z, f), (Some(z), Some(f)) if z < f), "{o:?}");
        }
        let mut want = vec![0xEEu8; 8 * BS as usize];
        want[at as usize..(at + len) as usize].fill(0);
        assert_eq!(read(&v, 0, 8 * BS as usize), want, "{mode:?}");
        v.flush().unwrap();
        let v = power_cut(v, &cache, &origin);
        assert_eq!(
            read(&v, 0, 8 * BS as usize),
            want,
            "{mode:?} after a power cut"
        );
    }
}
