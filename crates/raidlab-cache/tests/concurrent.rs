//! Requests to one cached volume from several threads: a read miss waits for
//! the origin without keeping other requests out, and what it read is not
//! installed when a write reached the block meanwhile (a stale clean copy
//! would be served from then on).
//!
//! The origin here parks reads of chosen blocks until the test lets them go,
//! so the interleavings are forced, not hoped for. A park that nobody releases
//! gives up after a minute with an error, so a regression fails the test
//! instead of hanging it; no speed is asserted.

use raidlab_cache::format::DATA_ALIGN;
use raidlab_cache::{create, CachedVolume, Config, Mode, OriginId};
use raidlab_core::{Error, Result, Volume};
use raidlab_devices::{Clock, MemVolume};
use std::collections::HashSet;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

const BS: u64 = 4096;
const ID: OriginId = OriginId::Signature([2; 32]);
const PATIENCE: Duration = Duration::from_secs(60);

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

#[derive(Debug, Default)]
struct Gates {
    /// Blocks whose reads park.
    held: HashSet<u64>,
    /// Blocks with a read parked now.
    parked: HashSet<u64>,
}

/// Memory whose reads of held blocks wait until released.
#[derive(Debug)]
struct Parking {
    inner: MemVolume,
    gates: Mutex<Gates>,
    changed: Condvar,
}

impl Parking {
    fn new(size: u64) -> Arc<Parking> {
        Arc::new(Parking {
            inner: MemVolume::new(size),
            gates: Mutex::new(Gates::default()),
            changed: Condvar::new(),
        })
    }
    fn hold(&self, b: u64) {
        self.gates.lock().unwrap().held.insert(b);
    }
    fn release(&self, b: u64) {
        self.gates.lock().unwrap().held.remove(&b);
        self.changed.notify_all();
    }
    /// Wait until a read of `b` is parked; false if none came.
    fn wait_parked(&self, b: u64) -> bool {
        let g = self.gates.lock().unwrap();
        let (g, _) = self
            .changed
            .wait_timeout_while(g, PATIENCE, |g| !g.parked.contains(&b))
            .unwrap();
        g.parked.contains(&b)
    }
}

impl Volume for Parking {
    fn name(&self) -> String {
        "parking".into()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    /// The data is read first, then the read parks: what it returns is the
    /// block as it was when the read reached the device.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.inner.read_at(buf, offset)?;
        let b = offset / BS;
        let mut g = self.gates.lock().unwrap();
        if g.held.contains(&b) {
            g.parked.insert(b);
            self.changed.notify_all();
            let (mut g2, _) = self
                .changed
                .wait_timeout_while(g, PATIENCE, |g| g.held.contains(&b))
                .unwrap();
            let released = !g2.held.contains(&b);
            g2.parked.remove(&b);
            if !released {
                return Err(Error::invalid("nobody released the parked read"));
            }
            g = g2;
        }
        drop(g);
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> Result<()> {
        Ok(())
    }
}

type Cached = CachedVolume<Arc<MemVolume>, Arc<Parking>>;

fn setup(mode: Mode) -> (Arc<Cached>, Arc<Parking>) {
    let origin = Parking::new(64 * BS);
    let dev = Arc::new(MemVolume::new(DATA_ALIGN + 32 * BS));
    let config = Config {
        mode,
        block_size: BS as u32,
        sequential_cutoff: 0,
        ..Config::default()
    };
    create(&dev, &origin, ID, "origin", [2; 16], config).unwrap();
    let v = CachedVolume::open(dev, origin.clone(), ID, Arc::new(TestClock::default())).unwrap();
    (Arc::new(v), origin)
}

fn block(v: &Cached, b: u64) -> Vec<u8> {
    let mut buf = vec![0u8; BS as usize];
    v.read_at(&mut buf, b * BS).unwrap();
    buf
}

#[test]
fn a_miss_waiting_for_the_origin_does_not_hold_up_other_requests() {
    let (v, origin) = setup(Mode::WriteThrough);
    origin.hold(3);
    let reader = {
        let v = v.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; BS as usize];
            v.read_at(&mut buf, 3 * BS).map(|()| buf)
        })
    };
    assert!(
        origin.wait_parked(3),
        "the read of block 3 never reached the origin"
    );
    // While it waits: another miss, a write and a hit all complete.
    block(&v, 5);
    v.write_at(&[9u8; BS as usize], 7 * BS).unwrap();
    assert_eq!(block(&v, 5), vec![0u8; BS as usize]);
    origin.release(3);
    assert_eq!(reader.join().unwrap().unwrap(), vec![0u8; BS as usize]);
    assert_eq!(v.stats().promotions, 2);
}

/// A read miss of block 6 is parked at the origin; meanwhile a write changes
/// block 6 (in `mode`); then the read completes. Whatever it returns, the
/// block must read as written from then on.
fn a_write_during_a_miss_wins(mode: Mode) {
    let (v, origin) = setup(mode);
    origin.hold(6);
    let reader = {
        let v = v.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; BS as usize];
            v.read_at(&mut buf, 6 * BS).map(|()| buf)
        })
    };
    assert!(origin.wait_parked(6));
    let new = vec![0x66u8; BS as usize];
    v.write_at(&new, 6 * BS).unwrap();
    origin.release(6);
    reader.join().unwrap().unwrap();
    assert_eq!(block(&v, 6), new, "{mode:?}: a stale copy was installed");
    v.flush_dirty(|_, _| {}).unwrap();
    let mut on_origin = vec![0u8; BS as usize];
    origin.inner.read_at(&mut on_origin, 6 * BS).unwrap();
    assert_eq!(on_origin, new, "{mode:?}: the origin");
}

#[test]
fn a_write_through_write_during_a_miss_is_not_undone_by_its_promotion() {
    a_write_during_a_miss_wins(Mode::WriteThrough);
}

#[test]
fn a_write_around_write_during_a_miss_is_not_undone_by_its_promotion() {
    a_write_during_a_miss_wins(Mode::WriteAround);
}

#[test]
fn a_write_back_write_during_a_miss_is_not_undone_by_its_promotion() {
    a_write_during_a_miss_wins(Mode::WriteBack);
}
