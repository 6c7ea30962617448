//! A volume slowed to a known speed: it wraps any other volume and limits its
//! bandwidth (bytes per second) and/or its request rate (IOPS), so that rebuild and
//! resync speed can be measured against members of a known speed.
//!
//! Reads, writes and discards share one budget, like one disk's head and link.
//! Flushes are not limited: they move no data. The wrapper must never alter a
//! request, never panic, and never starve a caller: each request reserves its slot
//! on a shared schedule the moment it arrives, so it waits at most for the requests
//! that arrived before it.
//!
//! The limiter is a token bucket kept as virtual time (a "generic cell rate"
//! scheduler): for each limit, `due` is the moment all admitted work will have been
//! paid for at the configured rate. A request may start once the device is at most
//! [`BURST`] behind schedule, then pushes `due` on by its own cost. Because `due`
//! advances by cost and not by when callers actually wake up, oversleeping and the
//! time the I/O itself takes do not accumulate into a lower rate; the price is that
//! at most `BURST` plus one request's worth of work can run ahead of the rate.
//!
//! The time comes from a [`Clock`]: the system's by default, or one the caller
//! supplies, so that the wrapper's pacing can be checked in virtual time, exactly,
//! rather than against a wall clock on a busy machine.

pub use raidlab_core::clock::{Clock, SharedClock, SystemClock};
use raidlab_core::{Error, Result, Volume};
use std::fmt::Debug;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// How far behind its schedule the device may be and still accept a request: large
/// enough to absorb sleep overshoot, small enough that bursts stay invisible over
/// any measurement longer than a few tens of milliseconds.
pub const BURST: Duration = Duration::from_millis(10);

/// Speed limits; `None` means unlimited. Zero is refused: it would block forever.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    pub bytes_per_sec: Option<u64>,
    pub iops: Option<u64>,
}

impl Limits {
    pub fn unlimited() -> Self {
        Limits::default()
    }

    pub fn bandwidth(bytes_per_sec: u64) -> Self {
        Limits {
            bytes_per_sec: Some(bytes_per_sec),
            iops: None,
        }
    }

    pub fn iops(iops: u64) -> Self {
        Limits {
            bytes_per_sec: None,
            iops: Some(iops),
        }
    }

    fn validate(&self) -> Result<()> {
        if self.bytes_per_sec == Some(0) || self.iops == Some(0) {
            return Err(Error::invalid(
                "throttle limits must be at least 1 (leave a limit unset for no limit)",
            ));
        }
        Ok(())
    }
}

/// What went through the throttle, for tests and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThrottleStats {
    /// Reads, writes and discards admitted.
    pub requests: u64,
    /// Bytes read or written (discards move none).
    pub bytes: u64,
    /// Total time callers were told to wait, summed over all threads.
    pub waited: Duration,
}

/// The shared schedule. Times are offsets from the clock's epoch, so that no
/// `Instant` arithmetic can overflow whatever the limits and request sizes.
#[derive(Debug, Default)]
struct Bucket {
    limits: Limits,
    bytes_due: Duration,
    ops_due: Duration,
    stats: ThrottleStats,
}

/// Time `units` take at `per_sec`, rounded up so the rate is never exceeded.
fn cost(units: u64, per_sec: u64) -> Duration {
    let nanos = (u128::from(units) * 1_000_000_000).div_ceil(u128::from(per_sec.max(1)));
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

impl Bucket {
    /// Reserve the slot for a request of `bytes` arriving at `now`: returns when it
    /// may start.
    fn reserve(&mut self, now: Duration, bytes: u64) -> Duration {
        let mut start = now;
        if self.limits.bytes_per_sec.is_some() {
            start = start.max(self.bytes_due.saturating_sub(BURST));
        }
        if self.limits.iops.is_some() {
            start = start.max(self.ops_due.saturating_sub(BURST));
        }
        if let Some(bps) = self.limits.bytes_per_sec {
            self.bytes_due = self.bytes_due.max(start).saturating_add(cost(bytes, bps));
        }
        if let Some(iops) = self.limits.iops {
            self.ops_due = self.ops_due.max(start).saturating_add(cost(1, iops));
        }
        self.stats.requests = self.stats.requests.saturating_add(1);
        self.stats.bytes = self.stats.bytes.saturating_add(bytes);
        self.stats.waited = self.stats.waited.saturating_add(start - now);
        start
    }
}

/// A wrapper limiting the speed of `inner`; shared by all threads using it.
#[derive(Debug)]
pub struct ThrottleVolume<V> {
    inner: V,
    clock: SharedClock,
    bucket: Mutex<Bucket>,
}

impl<V: Volume> ThrottleVolume<V> {
    /// Throttle `inner` against the system clock.
    pub fn new(inner: V, limits: Limits) -> Result<Self> {
        Self::with_clock(inner, limits, raidlab_core::clock::system())
    }

    /// Throttle `inner` against `clock`.
    pub fn with_clock(inner: V, limits: Limits, clock: SharedClock) -> Result<Self> {
        limits.validate().map_err(|e| e.on_device(inner.name()))?;
        Ok(ThrottleVolume {
            inner,
            clock,
            bucket: Mutex::new(Bucket {
                limits,
                ..Bucket::default()
            }),
        })
    }

    pub fn inner(&self) -> &V {
        &self.inner
    }

    fn lock(&self) -> MutexGuard<'_, Bucket> {
        // The bucket is a few numbers updated together; a panic elsewhere cannot
        // leave them half-written, so a poisoned lock is safe to reuse.
        self.bucket.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn limits(&self) -> Limits {
        self.lock().limits
    }

    /// Change the limits from now on. Debt run up under the old limits is
    /// forgiven, so speeding up a slow device takes effect at once for new requests;
    /// callers already sleeping keep the slot they reserved.
    pub fn set_limits(&self, limits: Limits) -> Result<()> {
        limits.validate().map_err(|e| e.on_device(self.name()))?;
        let mut b = self.lock();
        b.limits = limits;
        b.bytes_due = Duration::ZERO;
        b.ops_due = Duration::ZERO;
        Ok(())
    }

    pub fn stats(&self) -> ThrottleStats {
        self.lock().stats
    }

    /// Wait until a request of `bytes` fits the limits.
    fn admit(&self, bytes: u64) {
        let wait = {
            let mut b = self.lock();
            let now = self.clock.now();
            b.reserve(now, bytes) - now
        };
        // The slot is reserved already, so sleeping without the lock keeps other
        // threads free to reserve the slots after it.
        if !wait.is_zero() {
            self.clock.sleep(wait);
        }
    }
}

impl<V: Volume> raidlab_core::Layer for ThrottleVolume<V> {
    fn below(&self) -> &dyn Volume {
        &self.inner
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.admit(buf.len() as u64);
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.admit(buf.len() as u64);
        self.inner.write_at(buf, offset)
    }
    /// Paced as a write; the inner volume decides how it makes it durable.
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.admit(buf.len() as u64);
        self.inner.write_at_fua(buf, offset)
    }
    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        self.admit(0);
        self.inner.discard(offset, len)
    }
    /// Paced as a write of the range: a disk without a zeroing command of its
    /// own writes every byte.
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        self.admit(len);
        self.inner.write_zeroes(offset, len)
    }
    // Bytes handed over without a request would not be paced.
    fn passes_views(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn bucket(limits: Limits) -> Bucket {
        Bucket {
            limits,
            ..Bucket::default()
        }
    }

    #[test]
    fn cost_rounds_up_and_saturates() {
        assert_eq!(cost(1, 3), Duration::from_nanos(333_333_334));
        assert_eq!(cost(1_000_000, 1_000_000), Duration::from_secs(1));
        assert_eq!(cost(u64::MAX, 1), Duration::from_nanos(u64::MAX));
    }

    #[test]
    fn bandwidth_schedule_allows_a_burst_then_keeps_the_rate() {
        // 1 MB/s: 4000 bytes cost 4 ms.
        let mut b = bucket(Limits::bandwidth(1_000_000));
        let t0 = Duration::from_secs(5);
        // Idle bucket: three requests fit in the 10 ms allowance at once.
        assert_eq!(b.reserve(t0, 4000), t0);
        assert_eq!(b.reserve(t0, 4000), t0);
        assert_eq!(b.reserve(t0, 4000), t0);
        // The fourth waits until the device is back within 10 ms of schedule.
        assert_eq!(b.reserve(t0, 4000), t0 + 2 * MS);
        // From then on one request per 4 ms, however late callers arrive within the slack.
        assert_eq!(b.reserve(t0 + 3 * MS, 4000), t0 + 6 * MS);
        assert_eq!(b.stats.requests, 5);
        assert_eq!(b.stats.waited, 5 * MS);
    }

    #[test]
    fn huge_request_is_admitted_then_paid_for() {
        let mut b = bucket(Limits::bandwidth(1000));
        assert_eq!(b.reserve(Duration::ZERO, 5000), Duration::ZERO);
        assert_eq!(b.reserve(MS, 1), Duration::from_secs(5) - BURST);
    }

    #[test]
    fn both_limits_apply_each_to_its_own_cost() {
        // 100 IOPS (10 ms each) and 1 MB/s: small requests are bound by IOPS.
        let mut b = bucket(Limits {
            bytes_per_sec: Some(1_000_000),
            iops: Some(100),
        });
        let t = Duration::from_secs(1);
        assert_eq!(b.reserve(t, 512), t);
        assert_eq!(b.reserve(t, 512), t);
        assert_eq!(b.reserve(t, 512), t + 10 * MS);
        assert_eq!(b.reserve(t, 512), t + 20 * MS);
    }

    /// A caller with one request in flight: it reserves a slot, sleeps until it
    /// (overshooting by `overshoot`, as a real sleep does), then the request
    /// takes `service`. Returns requests per second over `n` requests.
    fn qd1_rate(limits: Limits, bytes: u64, service: Duration, overshoot: Duration) -> f64 {
        let mut b = bucket(limits);
        let mut now = Duration::from_secs(1);
        let t0 = now;
        let n = 20_000;
        for _ in 0..n {
            let start = b.reserve(now, bytes);
            if start > now {
                now = start + overshoot;
            }
            now += service;
        }
        n as f64 / (now - t0).as_secs_f64()
    }

    #[test]
    fn one_request_in_flight_gets_the_limit_whatever_it_takes_below_its_slot() {
        // 5000 IOPS: a 200 µs slot. A 1 MiB request that takes 120 µs, or
        // 190 µs, plus 50 µs of oversleep each time it waits, still runs at the
        // limit: the time a request takes is not added to its slot.
        let us = Duration::from_micros;
        for service in [us(1), us(120), us(190)] {
            let r = qd1_rate(Limits::iops(5000), 1 << 20, service, us(50));
            assert!((r / 5000.0 - 1.0).abs() < 0.005, "{service:?}: {r}");
        }
        // Both limits: each binds where it is the tighter one.
        let both = Limits {
            bytes_per_sec: Some(100 << 20),
            iops: Some(5000),
        };
        let r = qd1_rate(both, 1 << 20, us(120), us(50));
        assert!((r / 100.0 - 1.0).abs() < 0.005, "1 MiB under both: {r}");
        let r = qd1_rate(both, 4096, us(10), us(50));
        assert!((r / 5000.0 - 1.0).abs() < 0.005, "4 KiB under both: {r}");
        // A device slower than the limit runs at its own speed: 240 µs a request
        // is about 4170 per second, whatever the 5000 IOPS limit says.
        let r = qd1_rate(Limits::iops(5000), 1 << 20, us(240), us(50));
        assert!((r - 1e6 / 240.0).abs() < 5.0, "{r}");
    }

    #[test]
    fn callers_sharing_the_device_take_turns() {
        // Four callers, each with one 256 KiB request in flight, at 50 MB/s: the
        // event order is arrival order, as the lock gives it. Each request takes
        // 30 µs and each wake-up is 60 µs late.
        const REQ: u64 = 256 << 10;
        let mut b = bucket(Limits::bandwidth(50_000_000));
        let us = Duration::from_micros;
        let mut ready = [Duration::from_secs(1); 4];
        let mut done = [0u64; 4];
        let t0 = ready[0];
        let end = t0 + Duration::from_secs(3);
        let mut last = t0;
        loop {
            // The earliest caller arrives next; ties go to the lowest index.
            let (i, &now) = ready.iter().enumerate().min_by_key(|&(_, t)| *t).unwrap();
            if now >= end {
                break;
            }
            let start = b.reserve(now, REQ);
            let woke = if start > now { start + us(60) } else { start };
            ready[i] = woke + us(30);
            last = last.max(ready[i]);
            done[i] += 1;
        }
        let total: u64 = done.iter().sum();
        let rate = (total * REQ) as f64 / (last - t0).as_secs_f64();
        assert!((rate / 50e6 - 1.0).abs() < 0.01, "{rate}");
        // Slots are handed out in arrival order, so the callers alternate.
        for &d in &done {
            assert!(d.abs_diff(total / 4) <= 1, "{done:?}");
        }
    }

    #[test]
    fn unlimited_never_waits_and_zero_is_refused() {
        let mut b = bucket(Limits::unlimited());
        for _ in 0..1000 {
            assert_eq!(b.reserve(MS, 1 << 30), MS);
        }
        assert!(Limits::bandwidth(0).validate().is_err());
        assert!(Limits::iops(0).validate().is_err());
    }
}
