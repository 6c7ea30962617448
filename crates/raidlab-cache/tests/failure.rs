//! A cache device that fails: errors counted, the device failed at a write
//! error or at the read-error limit, pass-through in write-through, and in
//! write-back never the origin's stale copy of a dirty block (the rules of
//! `raidlab_cache::failure`'s module doc).

use raidlab_cache::failure::IO_ERROR_LIMIT;
use raidlab_cache::format::DATA_ALIGN;
use raidlab_cache::{create, examine, CachedVolume, Config, Mode, OriginId};
use raidlab_core::Volume;
use raidlab_devices::{Clock, FaultVolume, MemVolume};
use std::sync::Arc;
use std::time::Duration;

const BS: u64 = 4096;
const ID: OriginId = OriginId::Signature([3; 32]);

#[derive(Debug, Default)]
struct Still;

impl Clock for Still {
    fn now(&self) -> Duration {
        Duration::ZERO
    }
    fn sleep(&self, _: Duration) {}
}

type Dev = Arc<FaultVolume<MemVolume>>;
type Cached = CachedVolume<Dev, Arc<MemVolume>>;

/// A cache of 16 blocks over an origin of 64 whose block `b` is filled with `b`.
fn setup(mode: Mode) -> (Cached, Dev, Arc<MemVolume>) {
    let cache: Dev = Arc::new(FaultVolume::new(MemVolume::new(DATA_ALIGN + 16 * BS)));
    let origin = Arc::new(MemVolume::new(64 * BS));
    for b in 0..64 {
        origin.write_at(&[b as u8; BS as usize], b * BS).unwrap();
    }
    let config = Config {
        mode,
        block_size: BS as u32,
        ..Config::default()
    };
    create(&cache, &origin, ID, "origin", [5; 16], config).unwrap();
    let v = CachedVolume::open(cache.clone(), origin.clone(), ID, Arc::new(Still)).unwrap();
    (v, cache, origin)
}

fn read(v: &Cached, b: u64) -> Vec<u8> {
    let mut buf = vec![0u8; BS as usize];
    v.read_at(&mut buf, b * BS).unwrap();
    buf
}

/// The cache device's data area (slots), where the faults are injected so
/// that the superblock can still say "failed".
fn data_area<O: Volume>(v: &CachedVolume<Dev, O>) -> std::ops::Range<u64> {
    let l = v.superblock().layout;
    l.data_offset..l.data_offset + l.cache_blocks * BS
}

#[test]
fn a_write_error_fails_a_write_through_cache_at_once_and_it_passes_through() {
    let (v, dev, origin) = setup(Mode::WriteThrough);
    for b in [1, 5, 9] {
        assert_eq!(read(&v, b), vec![b as u8; BS as usize]);
    }
    assert_eq!(v.stats().occupied_blocks, 3);
    assert!(!v.is_failed());
    dev.fail_writes(data_area(&v));
    // A write hit: the origin takes it, the cache device refuses it.
    v.write_at(&[0xa5; BS as usize], 5 * BS).unwrap();
    assert!(v.is_failed(), "a refused write fails the device at once");
    let s = v.stats();
    assert!(s.failed);
    assert_eq!(s.io_errors, 1);
    assert_eq!(read(&v, 5), vec![0xa5; BS as usize]);
    let mut o = vec![0u8; BS as usize];
    origin.read_at(&mut o, 5 * BS).unwrap();
    assert_eq!(o, vec![0xa5; BS as usize], "the origin is complete");

    // From now on the device is not touched: every request passes through.
    dev.reset_stats();
    assert_eq!(read(&v, 1), vec![1; BS as usize]);
    assert_eq!(read(&v, 20), vec![20; BS as usize]);
    v.write_at(&[0x3c; BS as usize], 9 * BS).unwrap();
    assert_eq!(read(&v, 9), vec![0x3c; BS as usize]);
    v.write_zeroes(30 * BS, 2 * BS).unwrap();
    assert_eq!(read(&v, 31), vec![0; BS as usize]);
    v.flush().unwrap();
    v.shutdown().unwrap();
    let f = dev.stats();
    assert_eq!((f.reads, f.writes, f.flushes), (0, 0, 0), "{f:?}");
    // Changes of the cache are refused.
    let e = v.set_tunables(0, 10, 0, 1).unwrap_err();
    assert!(e.to_string().contains("failed"), "{e}");
    assert!(v.detach().is_err());

    // The superblock (outside the failing area) says so; the cache is not
    // opened again.
    drop(v);
    assert!(examine(&dev).unwrap().failed);
    let e = CachedVolume::open(dev.clone(), origin, ID, Arc::new(Still)).unwrap_err();
    assert!(e.to_string().contains("failed"), "{e}");
    assert!(e.to_string().contains("cache create --force"), "{e}");
}

#[test]
fn read_errors_fall_back_to_the_origin_until_the_limit_fails_the_device() {
    let (v, dev, _origin) = setup(Mode::WriteThrough);
    let blocks: Vec<u64> = (0..IO_ERROR_LIMIT + 2).map(|i| 2 * i).collect();
    for &b in &blocks {
        read(&v, b);
    }
    dev.fail_reads(data_area(&v));
    for (i, &b) in blocks.iter().enumerate() {
        // Each hit's copy cannot be read: the origin's (the same) is returned.
        assert_eq!(read(&v, b), vec![b as u8; BS as usize]);
        let s = v.stats();
        let errors = (i as u64 + 1).min(IO_ERROR_LIMIT);
        assert_eq!(s.io_errors, errors, "block {b}");
        assert_eq!(s.failed, errors == IO_ERROR_LIMIT, "block {b}");
    }
}

#[test]
fn write_back_never_returns_the_origins_stale_copy_of_a_dirty_block() {
    let (v, dev, origin) = setup(Mode::WriteBack);
    v.write_at(&[0xd1; BS as usize], 3 * BS).unwrap();
    v.write_at(&[0xd2; BS as usize], 4 * BS).unwrap();
    v.flush().unwrap();
    assert_eq!(v.stats().dirty_blocks, 2);

    // Below the limit a read error on a dirty block fails the read; the
    // device is not failed by one read error.
    dev.fail_reads(data_area(&v));
    let mut buf = vec![0u8; BS as usize];
    assert!(v.read_at(&mut buf, 3 * BS).is_err());
    assert_ne!(buf, vec![3u8; BS as usize]);
    assert!(!v.is_failed());
    dev.clear_faults();

    // A write error (a new dirty block) fails the device at once; the write
    // itself has no dirty copy to disagree with, so it reaches the origin.
    dev.fail_writes(data_area(&v));
    v.write_at(&[0xe0; BS as usize], 40 * BS).unwrap();
    assert!(v.is_failed());
    let mut o = vec![0u8; BS as usize];
    origin.read_at(&mut o, 40 * BS).unwrap();
    assert_eq!(o, vec![0xe0; BS as usize]);
    dev.clear_faults();

    // Dirty blocks are served from the failed device while it reads them...
    assert_eq!(read(&v, 3), vec![0xd1; BS as usize]);
    // ...and their reads fail when it cannot: never the origin's old copy.
    dev.fail_reads(data_area(&v));
    let mut buf = vec![0u8; BS as usize];
    let e = v.read_at(&mut buf, 4 * BS).unwrap_err();
    assert_ne!(buf, vec![4u8; BS as usize], "{e}");
    // A read spanning a clean and a dirty block fails too.
    let mut two = vec![0u8; 2 * BS as usize];
    assert!(v.read_at(&mut two, 2 * BS).is_err());
    // Blocks with no dirty copy still come from the origin.
    assert_eq!(read(&v, 2), vec![2; BS as usize]);

    // Writes touching a dirty block are refused, the others pass through.
    let e = v.write_at(&[0xff; BS as usize], 3 * BS).unwrap_err();
    assert!(e.to_string().contains("dirty"), "{e}");
    assert!(v.write_zeroes(0, 8 * BS).is_err());
    v.write_at(&[0x77; BS as usize], 10 * BS).unwrap();
    assert_eq!(read(&v, 10), vec![0x77; BS as usize]);
    origin.read_at(&mut o, 3 * BS).unwrap();
    assert_eq!(o, vec![3; BS as usize], "the refused write changed nothing");

    // Nothing is cleaned; a flush says the dirty data is not safe.
    assert_eq!(v.clean_tick().unwrap(), 0);
    assert!(v.clean_step(16, false).is_err());
    let e = v.flush().unwrap_err();
    assert!(e.to_string().contains("2 dirty block(s)"), "{e}");
    assert!(v.set_mode(Mode::WriteThrough).is_err());
    assert_eq!(v.stats().dirty_blocks, 2);
    origin.read_at(&mut o, 4 * BS).unwrap();
    assert_eq!(
        o,
        vec![4; BS as usize],
        "no write-back from the failed device"
    );
}

#[test]
fn a_device_refusing_everything_fails_in_memory_and_the_request_passes_through() {
    let (v, dev, _origin) = setup(Mode::WriteThrough);
    read(&v, 6);
    dev.fail_all(true);
    // The superblock cannot be written either: failed in memory only.
    v.write_at_fua(&[9; BS as usize], 6 * BS).unwrap();
    assert!(v.is_failed());
    assert_eq!(read(&v, 6), vec![9; BS as usize]);
    v.flush().unwrap();
}

/// An origin whose next read, once armed, waits for the test between
/// saying it began and going on.
#[derive(Debug)]
struct Gated {
    inner: MemVolume,
    armed: std::sync::Mutex<Option<Arc<(std::sync::Barrier, std::sync::Barrier)>>>,
}

impl Volume for Gated {
    fn name(&self) -> String {
        "gated origin".into()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> raidlab_core::Result<()> {
        let gate = self.armed.lock().unwrap().take();
        if let Some(g) = gate {
            g.0.wait();
            g.1.wait();
        }
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> raidlab_core::Result<()> {
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> raidlab_core::Result<()> {
        Ok(())
    }
}

#[test]
fn a_read_waiting_for_the_origin_while_the_device_fails_never_serves_a_stale_copy() {
    let dev: Dev = Arc::new(FaultVolume::new(MemVolume::new(DATA_ALIGN + 16 * BS)));
    let origin = Arc::new(Gated {
        inner: MemVolume::new(64 * BS),
        armed: Default::default(),
    });
    for b in 0..64 {
        origin.write_at(&[b as u8; BS as usize], b * BS).unwrap();
    }
    let config = Config {
        mode: Mode::WriteThrough,
        block_size: BS as u32,
        sequential_cutoff: 0,
        ..Config::default()
    };
    create(&dev, &origin, ID, "origin", [6; 16], config).unwrap();
    let v = Arc::new(CachedVolume::open(dev.clone(), origin.clone(), ID, Arc::new(Still)).unwrap());
    let mut one = vec![0u8; BS as usize];
    v.read_at(&mut one, BS).unwrap();
    assert_eq!(v.stats().occupied_blocks, 1, "block 1 cached");

    // A read of blocks 0 and 1 waits at the origin for block 0 (a miss)...
    let gate = Arc::new((std::sync::Barrier::new(2), std::sync::Barrier::new(2)));
    *origin.armed.lock().unwrap() = Some(gate.clone());
    let reader = {
        let v = v.clone();
        std::thread::spawn(move || {
            let mut two = vec![0u8; 2 * BS as usize];
            v.read_at(&mut two, 0).map(|()| two)
        })
    };
    gate.0.wait();
    // ...while the device fails under a write of block 1, which then
    // reaches the origin only: the cached copy of block 1 is stale.
    dev.fail_writes(data_area(&v));
    v.write_at(&[0x11; BS as usize], BS).unwrap();
    assert!(v.is_failed());
    gate.1.wait();
    let two = reader.join().unwrap().unwrap();
    assert_eq!(&two[..BS as usize], &[0u8; BS as usize][..]);
    assert_eq!(
        &two[BS as usize..],
        &[0x11; BS as usize][..],
        "block 1 as written, not the failed device's older copy"
    );
}

#[test]
fn a_flush_that_fails_the_device_still_flushes_a_write_through_origin() {
    let (v, dev, _origin) = setup(Mode::WriteThrough);
    // A promotion leaves a mapping sector and the device to flush.
    read(&v, 7);
    dev.fail_all(true);
    v.flush().unwrap();
    assert!(v.is_failed());
    assert_eq!(v.stats().io_errors, 1);
    assert_eq!(read(&v, 7), vec![7; BS as usize]);
}

#[test]
fn a_flush_that_fails_a_write_back_device_with_dirty_blocks_fails() {
    let (v, dev, _origin) = setup(Mode::WriteBack);
    v.write_at(&[0xd3; BS as usize], 5 * BS).unwrap();
    dev.fail_all(true);
    let e = v.flush().unwrap_err();
    assert!(v.is_failed());
    assert!(e.to_string().contains("1 dirty block(s)"), "{e}");
}
