//! Per-member I/O counters of an array in service: how many reads, writes
//! and flushes each member device was asked for, the bytes moved, the calls
//! that failed, and read and write latency histograms.
//!
//! The counting happens in [`CountedVolume`], a wrapper around a member's
//! volume placed before assembly (and around a device a served array gains),
//! so every member I/O of the engine (requests, rebuilds, superblock and
//! bitmap writes, log writes) passes it. It decides only what a call counts
//! as; it must never change what a call does or returns (every method of
//! [`Volume`] is passed on unchanged), and it must stay cheap on the path of
//! every request: relaxed atomic additions and two clock readings, no locks.
//! The registry's lock is taken only to register a device and to take a
//! snapshot.
//!
//! Not counted: bytes a rebuild reads through a member's memory mapping
//! ([`Volume::mapped`], tmpfs members), which bypass the volume's calls; and
//! for a zero-copy read ([`Volume::read_stored`]) the latency is that of
//! naming the stored places, not of the splice that moves the bytes later;
//! and a zero-copy read an array gives up half way (a later piece cannot be
//! spliced) counts its spliced pieces and then the `read_at` that replaces
//! them.

use crate::assemble::{Assembly, Device, MemberState};
use raidlab_core::{Result, StoredSink, Volume};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

/// Upper bounds of the latency buckets, in microseconds. From 10 µs (a
/// member in memory or the page cache) to 1 s (a disk retrying); a latency
/// above the last falls in the +Inf bucket.
pub const LATENCY_BOUNDS_US: [u64; 16] = [
    10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
    500_000, 1_000_000,
];

/// A latency histogram as a snapshot: `counts[i]` is the number of calls that
/// took at most `bounds_us[i]` and more than the bound before it (per
/// bucket, not cumulative); the last count, past every bound, is +Inf.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Histogram {
    pub bounds_us: Vec<u64>,
    /// Per bucket; `len = bounds_us.len() + 1`, the last is +Inf.
    pub counts: Vec<u64>,
    /// The sum of every latency counted, in microseconds.
    pub sum_us: u64,
}

impl Histogram {
    /// Calls counted (the sum of every bucket).
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// What one member device was asked to do since the server started.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MemberIo {
    /// Reads: `read_at` calls and zero-copy reads that were served
    /// (`read_stored` returning `Ok(true)`).
    pub reads: u64,
    /// Writes: `write_at` and `write_at_fua` calls.
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// `flush` calls (a FUA write is counted as a write, not a flush).
    pub flushes: u64,
    /// Calls of any kind that returned an error.
    pub errors: u64,
    pub read_latency: Histogram,
    pub write_latency: Histogram,
    /// `write_zeroes` calls and the bytes they zeroed (no data moved, so not
    /// in `writes` or `write_bytes`).
    pub zeroes: u64,
    pub zeroed_bytes: u64,
    /// `discard` calls and the bytes they covered.
    pub discards: u64,
    pub discarded_bytes: u64,
}

/// One member's counters with what the assembly says of it now.
#[derive(Debug, Clone, Serialize)]
pub struct MemberIoStatus {
    /// The device path as the user named it.
    pub device: String,
    /// Its slot, for active, stale, rebuilding and replacing members.
    pub role: Option<usize>,
    pub state: MemberState,
    pub io: MemberIo,
}

/// A histogram that threads add to without a lock.
#[derive(Debug)]
struct AtomicHistogram {
    counts: [AtomicU64; LATENCY_BOUNDS_US.len() + 1],
    /// Nanoseconds, so that many sub-microsecond calls still add up.
    sum_ns: AtomicU64,
}

impl Default for AtomicHistogram {
    fn default() -> Self {
        AtomicHistogram {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_ns: AtomicU64::new(0),
        }
    }
}

impl AtomicHistogram {
    fn record(&self, ns: u64) {
        // Few bounds, usually the first few taken: a linear search is as fast
        // as a binary one here.
        let i = LATENCY_BOUNDS_US
            .iter()
            .position(|&b| ns <= b * 1000)
            .unwrap_or(LATENCY_BOUNDS_US.len());
        self.counts[i].fetch_add(1, Relaxed);
        self.sum_ns.fetch_add(ns, Relaxed);
    }

    fn snapshot(&self) -> Histogram {
        Histogram {
            bounds_us: LATENCY_BOUNDS_US.to_vec(),
            counts: self.counts.iter().map(|c| c.load(Relaxed)).collect(),
            sum_us: self.sum_ns.load(Relaxed) / 1000,
        }
    }
}

/// The live counters of one member device.
#[derive(Debug, Default)]
pub struct IoCounters {
    reads: AtomicU64,
    writes: AtomicU64,
    read_bytes: AtomicU64,
    write_bytes: AtomicU64,
    flushes: AtomicU64,
    errors: AtomicU64,
    zeroes: AtomicU64,
    zeroed_bytes: AtomicU64,
    discards: AtomicU64,
    discarded_bytes: AtomicU64,
    read_latency: AtomicHistogram,
    write_latency: AtomicHistogram,
}

fn nanos(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

impl IoCounters {
    /// What the counters say now. Each counter is read on its own, so a
    /// snapshot taken during I/O may be a call ahead in one of them.
    pub fn snapshot(&self) -> MemberIo {
        MemberIo {
            reads: self.reads.load(Relaxed),
            writes: self.writes.load(Relaxed),
            read_bytes: self.read_bytes.load(Relaxed),
            write_bytes: self.write_bytes.load(Relaxed),
            flushes: self.flushes.load(Relaxed),
            errors: self.errors.load(Relaxed),
            read_latency: self.read_latency.snapshot(),
            write_latency: self.write_latency.snapshot(),
            zeroes: self.zeroes.load(Relaxed),
            zeroed_bytes: self.zeroed_bytes.load(Relaxed),
            discards: self.discards.load(Relaxed),
            discarded_bytes: self.discarded_bytes.load(Relaxed),
        }
    }

    fn read<T>(&self, bytes: u64, t: Instant, r: Result<T>) -> Result<T> {
        self.count_read(bytes, t, r.is_ok());
        r
    }

    fn count_read(&self, bytes: u64, t: Instant, ok: bool) {
        if ok {
            self.reads.fetch_add(1, Relaxed);
            self.read_bytes.fetch_add(bytes, Relaxed);
            self.read_latency.record(nanos(t));
        } else {
            self.errors.fetch_add(1, Relaxed);
        }
    }

    fn write<T>(&self, bytes: u64, t: Instant, r: Result<T>) -> Result<T> {
        self.count_write(bytes, t, r.is_ok());
        r
    }

    fn count_write(&self, bytes: u64, t: Instant, ok: bool) {
        if ok {
            self.writes.fetch_add(1, Relaxed);
            self.write_bytes.fetch_add(bytes, Relaxed);
            self.write_latency.record(nanos(t));
        } else {
            self.errors.fetch_add(1, Relaxed);
        }
    }

    fn other<T>(
        &self,
        calls: &AtomicU64,
        bytes: Option<(&AtomicU64, u64)>,
        r: Result<T>,
    ) -> Result<T> {
        self.count_other(calls, bytes, r.is_ok());
        r
    }

    fn count_other(&self, calls: &AtomicU64, bytes: Option<(&AtomicU64, u64)>, ok: bool) {
        if ok {
            calls.fetch_add(1, Relaxed);
            if let Some((counter, n)) = bytes {
                counter.fetch_add(n, Relaxed);
            }
        } else {
            self.errors.fetch_add(1, Relaxed);
        }
    }
}

/// A member's volume that counts what passes through it into [`IoCounters`]
/// and otherwise behaves exactly as the volume it wraps.
pub struct CountedVolume {
    inner: Arc<dyn Volume>,
    io: Arc<IoCounters>,
}

impl std::fmt::Debug for CountedVolume {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountedVolume")
            .field("inner", &self.inner.name())
            .finish()
    }
}

impl CountedVolume {
    pub fn new(inner: Arc<dyn Volume>, io: Arc<IoCounters>) -> Self {
        CountedVolume { inner, io }
    }
}

// Sizes, views and discard_zeroes pass through (Layer's defaults); a mapped
// view's reads are not counted, as a reader of one makes no requests.
impl raidlab_core::Layer for CountedVolume {
    fn below(&self) -> &dyn Volume {
        &*self.inner
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let t = Instant::now();
        let r = self.inner.read_at(buf, offset);
        self.io.read(buf.len() as u64, t, r)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let t = Instant::now();
        let r = self.inner.write_at(buf, offset);
        self.io.write(buf.len() as u64, t, r)
    }
    fn flush(&self) -> Result<()> {
        let r = self.inner.flush();
        self.io.other(&self.io.flushes, None, r)
    }
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> Result<()> {
        let t = Instant::now();
        let r = self.inner.write_at_fua(buf, offset);
        self.io.write(buf.len() as u64, t, r)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        let r = self.inner.write_zeroes(offset, len);
        self.io
            .other(&self.io.zeroes, Some((&self.io.zeroed_bytes, len)), r)
    }
    fn read_stored(&self, offset: u64, len: u64, sink: &mut StoredSink<'_>) -> Result<bool> {
        let t = Instant::now();
        match self.inner.read_stored(offset, len, sink) {
            // Declined: the caller reads with read_at, which counts itself.
            Ok(false) => Ok(false),
            r => self.io.read(len, t, r),
        }
    }
    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        let r = self.inner.discard(offset, len);
        self.io
            .other(&self.io.discards, Some((&self.io.discarded_bytes, len)), r)
    }
    /// Counting is all this wrapper does, so it passes its member's file on
    /// with the counters as the observer: a request made straight to the
    /// file (io_uring) counts as its call here would have. A file observed
    /// already (two counters stacked) stays behind the volume calls.
    fn raw_file(&self) -> Option<raidlab_core::RawFile<'_>> {
        let r = self.inner.raw_file()?;
        if r.observer.is_some() {
            return None;
        }
        Some(raidlab_core::RawFile {
            observer: Some(&*self.io),
            ..r
        })
    }
}

impl raidlab_core::RawObserver for IoCounters {
    fn done(&self, kind: raidlab_core::IoKind, bytes: u64, started: Instant, ok: bool) {
        match kind {
            raidlab_core::IoKind::Read => self.count_read(bytes, started, ok),
            raidlab_core::IoKind::Write => self.count_write(bytes, started, ok),
            _ => self.count_other(&self.flushes, None, ok),
        }
    }
}

#[derive(Debug)]
struct Entry {
    path: String,
    /// The counted volume handed out, to recognise a device counted already
    /// (weak: a member removed from the array must not be kept open here).
    volume: Weak<dyn Volume>,
    io: Arc<IoCounters>,
}

/// The counters of every device counted for one array, by device path. A
/// cheap handle: clones share the same list.
#[derive(Debug, Clone, Default)]
pub struct MemberIoRegistry {
    entries: Arc<Mutex<Vec<Entry>>>,
}

fn same_volume(a: &Weak<dyn Volume>, b: &Arc<dyn Volume>) -> bool {
    // The data pointers only: the same object may be seen through different
    // vtables.
    std::ptr::eq(Weak::as_ptr(a) as *const (), Arc::as_ptr(b) as *const ())
}

impl MemberIoRegistry {
    fn entries(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `device` with its I/O counted from now on. A device this registry
    /// already counts (a former member taken back) is returned as it is, so
    /// that nothing is counted twice; a new device on a path counted before
    /// (a replaced file) takes over that path's counters, which stay
    /// monotonic.
    pub fn count(&self, device: Device) -> Device {
        let mut entries = self.entries();
        if entries
            .iter()
            .any(|e| same_volume(&e.volume, &device.volume))
        {
            return device;
        }
        let io = entries
            .iter()
            .find(|e| e.path == device.path)
            .map(|e| e.io.clone())
            .unwrap_or_default();
        let volume: Arc<dyn Volume> = Arc::new(CountedVolume::new(device.volume, io.clone()));
        entries.retain(|e| e.path != device.path);
        entries.push(Entry {
            path: device.path.clone(),
            volume: Arc::downgrade(&volume),
            io,
        });
        Device {
            path: device.path,
            volume,
        }
    }

    /// Take over what `other` counts (devices counted before the array was
    /// put in service).
    pub fn adopt(&self, other: &MemberIoRegistry) {
        if Arc::ptr_eq(&self.entries, &other.entries) {
            return;
        }
        let theirs: Vec<(String, Weak<dyn Volume>, Arc<IoCounters>)> = other
            .entries()
            .iter()
            .map(|e| (e.path.clone(), e.volume.clone(), e.io.clone()))
            .collect();
        let mut entries = self.entries();
        for (path, volume, io) in theirs {
            entries.retain(|e| e.path != path);
            entries.push(Entry { path, volume, io });
        }
    }

    /// The counters of `path`, if it is counted.
    pub fn get(&self, path: &str) -> Option<Arc<IoCounters>> {
        self.entries()
            .iter()
            .find(|e| e.path == path)
            .map(|e| e.io.clone())
    }

    /// One status per member of `asm` that is counted, in the assembly's
    /// order. A member never counted (an array put in service without
    /// counting) is left out rather than shown with counts of zero.
    pub fn statuses(&self, asm: &Assembly) -> Vec<MemberIoStatus> {
        asm.members
            .iter()
            .filter_map(|m| {
                let io = self.get(&m.device.path)?;
                Some(MemberIoStatus {
                    device: m.device.path.clone(),
                    role: m.role,
                    state: m.state,
                    io: io.snapshot(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raidlab_core::{Error, ErrorKind, Op};

    #[test]
    fn counting_passes_trim_zeroes_fua_and_flush_through_and_counts_them() {
        use raidlab_core::layer::probe::{lost_in, Probe};
        let probe = Arc::new(Probe::new(1 << 20));
        let io = Arc::new(IoCounters::default());
        let v = CountedVolume::new(probe.clone(), io.clone());
        let lost = lost_in(&v, &probe);
        assert!(lost.is_empty(), "{lost:#?}");
        let s = io.snapshot();
        assert_eq!(
            (s.writes, s.flushes, s.zeroes, s.discards),
            (1, 1, 1, 1),
            "{s:?}"
        );
    }

    /// Memory that fails every call past a given offset.
    #[derive(Debug)]
    struct Mem(Mutex<Vec<u8>>);

    impl Volume for Mem {
        fn name(&self) -> String {
            "mem".into()
        }
        fn size(&self) -> u64 {
            self.0.lock().unwrap().len() as u64
        }
        fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
            raidlab_core::volume::check_range(
                "mem",
                Op::Read,
                self.size(),
                offset,
                buf.len() as u64,
            )?;
            let b = self.0.lock().unwrap();
            buf.copy_from_slice(&b[offset as usize..offset as usize + buf.len()]);
            Ok(())
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
            raidlab_core::volume::check_range(
                "mem",
                Op::Write,
                self.size(),
                offset,
                buf.len() as u64,
            )?;
            let mut b = self.0.lock().unwrap();
            b[offset as usize..offset as usize + buf.len()].copy_from_slice(buf);
            Ok(())
        }
        fn flush(&self) -> Result<()> {
            Ok(())
        }
        fn read_stored(&self, offset: u64, _len: u64, _sink: &mut StoredSink<'_>) -> Result<bool> {
            match offset {
                0 => Ok(true),
                1 => Err(Error::new(ErrorKind::Io, Op::Read, "no")),
                _ => Ok(false),
            }
        }
    }

    fn device(path: &str) -> Device {
        Device {
            path: path.into(),
            volume: Arc::new(Mem(Mutex::new(vec![0; 8192]))),
        }
    }

    #[test]
    fn counts_calls_bytes_errors_and_latency() {
        let reg = MemberIoRegistry::default();
        let d = reg.count(device("a"));
        let v = &d.volume;
        v.write_at(&[1; 4096], 0).unwrap();
        v.write_at_fua(&[2; 512], 4096).unwrap();
        let mut b = [0u8; 1024];
        v.read_at(&mut b, 0).unwrap();
        assert_eq!(b, [1; 1024]);
        v.flush().unwrap();
        assert!(v.write_at(&[0; 10], 8190).is_err());
        assert!(v.read_at(&mut b, 8000).is_err());
        v.write_zeroes(0, 100).unwrap();
        let mut sink = |_: std::os::fd::BorrowedFd<'_>, _: u64, _: usize| Ok(());
        assert!(v.read_stored(0, 300, &mut sink).unwrap());
        assert!(v.read_stored(1, 300, &mut sink).is_err());
        assert!(!v.read_stored(2, 300, &mut sink).unwrap());
        // Discard is unsupported by Mem: an error, as the inner volume says.
        assert!(v.discard(0, 10).is_err());
        let io = reg.get("a").unwrap().snapshot();
        assert_eq!((io.writes, io.write_bytes), (2, 4096 + 512));
        assert_eq!((io.reads, io.read_bytes), (2, 1024 + 300));
        assert_eq!((io.flushes, io.zeroes, io.zeroed_bytes), (1, 1, 100));
        assert_eq!(io.errors, 4);
        assert_eq!(io.write_latency.count(), 2);
        assert_eq!(io.read_latency.count(), 2);
        assert_eq!(io.read_latency.counts.len(), LATENCY_BOUNDS_US.len() + 1);
        assert_eq!(io.read_latency.bounds_us, LATENCY_BOUNDS_US);
    }

    #[test]
    fn a_device_counted_twice_is_counted_once_and_a_path_keeps_its_counters() {
        let reg = MemberIoRegistry::default();
        let d = reg.count(device("a"));
        let again = reg.count(d.clone());
        assert!(std::ptr::eq(
            Arc::as_ptr(&again.volume) as *const (),
            Arc::as_ptr(&d.volume) as *const ()
        ));
        again.volume.write_at(&[1; 512], 0).unwrap();
        assert_eq!(reg.get("a").unwrap().snapshot().writes, 1);
        // A new device on the same path carries the counts on.
        let new = reg.count(device("a"));
        new.volume.write_at(&[1; 512], 0).unwrap();
        assert_eq!(reg.get("a").unwrap().snapshot().writes, 2);
        // Adopted by another registry: the same counters.
        let other = MemberIoRegistry::default();
        other.adopt(&reg);
        new.volume.write_at(&[1; 512], 0).unwrap();
        assert_eq!(other.get("a").unwrap().snapshot().writes, 3);
        let again = other.count(new.clone());
        assert!(std::ptr::eq(
            Arc::as_ptr(&again.volume) as *const (),
            Arc::as_ptr(&new.volume) as *const ()
        ));
    }

    #[test]
    fn latency_lands_in_the_bucket_whose_bound_it_does_not_pass() {
        let h = AtomicHistogram::default();
        h.record(10_000); // exactly 10 µs: the first bucket
        h.record(10_001);
        h.record(5_000_000_000); // 5 s: +Inf
        let s = h.snapshot();
        assert_eq!(&s.counts[..3], &[1, 1, 0]);
        assert_eq!(*s.counts.last().unwrap(), 1);
        assert_eq!(s.sum_us, 5_000_020);
    }
}
