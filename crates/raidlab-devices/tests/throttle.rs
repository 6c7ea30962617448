//! ThrottleVolume on memory volumes.
//!
//! The pacing is checked exactly in virtual time: a clock the test owns, which a
//! sleep moves on (late by a set amount, as real sleeps are), and which each request
//! moves on by the time the test says the device takes. It goes through the same
//! wrapper and the same calls as the system clock does. Against the system clock
//! only what a busy machine cannot cause is asserted: never faster than the limit
//! (slowness, or a thread getting few turns, can be the machine's). How close to
//! the limit it comes on a real clock is a benchmark (docs/benchmarks.md), not a
//! test: this machine is shared.

use raidlab_core::{ErrorKind, Result, Volume};
use raidlab_devices::throttle::{Clock, Limits, ThrottleVolume, BURST};
use raidlab_devices::MemVolume;
use std::cell::Cell;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const MB: f64 = 1_000_000.0;

thread_local! {
    /// Each thread's own virtual time: a thread's requests and sleeps move only its
    /// clock, as each real thread waits only for itself.
    static NOW: Cell<Duration> = const { Cell::new(Duration::ZERO) };
}

fn advance(d: Duration) {
    NOW.with(|n| n.set(n.get() + d));
}

fn now() -> Duration {
    NOW.with(Cell::get)
}

/// Virtual time per thread; every sleep wakes `late` after it was due.
#[derive(Debug, Clone, Copy)]
struct Virtual {
    late: Duration,
}

impl Clock for Virtual {
    fn now(&self) -> Duration {
        now()
    }
    fn sleep(&self, d: Duration) {
        advance(d + self.late);
    }
}

/// A memory volume whose reads and writes take `service` of virtual time.
#[derive(Debug)]
struct Takes {
    mem: MemVolume,
    service: Duration,
}

impl Volume for Takes {
    fn name(&self) -> String {
        self.mem.name()
    }
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        advance(self.service);
        self.mem.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        advance(self.service);
        self.mem.write_at(buf, offset)
    }
    fn flush(&self) -> Result<()> {
        self.mem.flush()
    }
}

fn virtual_volume(limits: Limits, service: Duration, late: Duration) -> ThrottleVolume<Takes> {
    let mem = MemVolume::new(4 << 20);
    ThrottleVolume::with_clock(
        Takes { mem, service },
        limits,
        std::sync::Arc::new(Virtual { late }),
    )
    .unwrap()
}

/// `count` writes of `request` bytes, one at a time, cycling over the volume:
/// (bytes per second, requests per second) over the whole run, burst included.
fn run<V: Volume>(v: &V, request: usize, count: u64, clock: impl Fn() -> Duration) -> (f64, f64) {
    let buf = vec![0xa5u8; request];
    let slots = v.size() / request as u64;
    let t0 = clock();
    for i in 0..count {
        v.write_at(&buf, (i % slots) * request as u64).unwrap();
    }
    let secs = (clock() - t0).as_secs_f64();
    (count as f64 * request as f64 / secs, count as f64 / secs)
}

fn within(got: f64, want: f64, tolerance: f64, what: &str) {
    assert!(
        (got / want - 1.0).abs() <= tolerance,
        "{what}: configured {want:.0}, measured {got:.0}"
    );
}

#[test]
fn bandwidth_is_kept_exactly_in_virtual_time() {
    let us = Duration::from_micros;
    // At 50 MB/s a 4 KiB request's slot is 82 µs and a 1 MiB one's 21 ms. Whatever
    // the device takes below its slot, and however late sleeps return within the
    // burst allowance, the rate is the limit. Each run is 20 virtual seconds, so the
    // startup burst is worth at most 0.1%.
    for request in [4usize << 10, 64 << 10, 256 << 10, 1 << 20] {
        let count = 1_000_000_000 / request as u64;
        for (service, late) in [(us(0), us(0)), (us(40), us(60)), (us(70), us(5000))] {
            let v = virtual_volume(Limits::bandwidth(50_000_000), service, late);
            let (bw, _) = run(&v, request, count, now);
            let what = format!("{request}-byte writes taking {service:?}, {late:?} late");
            within(bw, 50.0 * MB, 0.002, &what);
        }
    }
}

#[test]
fn iops_are_kept_exactly_in_virtual_time() {
    let us = Duration::from_micros;
    for (service, late) in [(us(0), us(0)), (us(150), us(60)), (us(10), us(9000))] {
        let v = virtual_volume(Limits::iops(5000), service, late);
        let (_, iops) = run(&v, 4096, 100_000, now);
        within(
            iops,
            5000.0,
            0.002,
            &format!("IOPS, {service:?} each, {late:?} late"),
        );
        assert_eq!(v.stats().requests, 100_000);
    }
}

#[test]
fn a_device_slower_than_its_limit_runs_at_its_own_speed() {
    // 250 µs a request under a 5000 IOPS (200 µs) limit: 4000 IOPS, never waiting.
    let v = virtual_volume(
        Limits::iops(5000),
        Duration::from_micros(250),
        Duration::ZERO,
    );
    let (_, iops) = run(&v, 4096, 10_000, now);
    within(iops, 4000.0, 0.001, "slow device");
    assert_eq!(v.stats().waited, Duration::ZERO);
}

#[test]
fn threads_share_one_budget_in_virtual_time() {
    // Four threads, two reading and two writing 256 KiB, 500 requests each, each
    // thread on its own virtual clock. Whatever order the threads reach the lock in,
    // the last one finishes when the whole run's bytes have been paid for at the
    // limit: the threads shared one budget, and no slot went unused.
    const REQUEST: usize = 256 << 10;
    const EACH: u64 = 500;
    let v = Arc::new(virtual_volume(
        Limits::bandwidth(50_000_000),
        Duration::from_micros(30),
        Duration::from_micros(60),
    ));
    let ends: Vec<Duration> = (0..4u64)
        .map(|t| {
            let v = Arc::clone(&v);
            std::thread::spawn(move || {
                let mut buf = vec![t as u8; REQUEST];
                for i in 0..EACH {
                    let offset = (t * 4 + i % 4) * REQUEST as u64;
                    if t % 2 == 0 {
                        v.write_at(&buf, offset).unwrap();
                    } else {
                        v.read_at(&mut buf, offset).unwrap();
                    }
                }
                now()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|w| w.join().unwrap())
        .collect();
    let last = ends.iter().max().unwrap().as_secs_f64();
    let bytes = (4 * EACH * REQUEST as u64) as f64;
    within(bytes / last, 50.0 * MB, 0.005, "4 threads");
    assert_eq!(v.stats().requests, 4 * EACH);
}

/// On the system clock only what the machine's load cannot cause is asserted:
/// a run never goes faster than `want` plus 5% (a limiter can only go too fast
/// through its own fault). Being slow, or a thread getting few turns, can be
/// the machine's doing; the virtual-time tests above check those exactly.
fn real_rate(want: f64, what: &str, mut measure: impl FnMut() -> f64) {
    let got = measure();
    // The burst allowance plus one request is the most a run can get ahead,
    // under 3% of these runs.
    assert!(
        got <= want * 1.05,
        "{what}: measured {got:.0}, configured {want:.0}: too fast"
    );
    assert!(got > 0.0, "{what}: nothing moved");
}

#[test]
fn on_the_system_clock_never_faster() {
    // 256 KiB writes at 50 MB/s for about 0.6 s, after the burst allowance is used.
    real_rate(50.0 * MB, "256 KiB writes", || {
        let v =
            ThrottleVolume::new(MemVolume::new(4 << 20), Limits::bandwidth(50_000_000)).unwrap();
        let buf = vec![0u8; 256 << 10];
        let warm_up = Instant::now();
        while warm_up.elapsed() < 2 * BURST {
            v.write_at(&buf, 0).unwrap();
        }
        run(&v, 256 << 10, 115, {
            let t = Instant::now();
            move || t.elapsed()
        })
        .0
    });
}

/// Four threads, two reading and two writing 256 KiB, for 0.6 s on the system
/// clock: the total rate and each thread's count of requests.
fn four_thread_run() -> (f64, Vec<u64>) {
    const REQUEST: usize = 256 << 10;
    const THREADS: u64 = 4;
    let v = Arc::new(
        ThrottleVolume::new(MemVolume::new(8 << 20), Limits::bandwidth(50_000_000)).unwrap(),
    );
    let run_for = Duration::from_millis(600);
    let barrier = Arc::new(Barrier::new(THREADS as usize));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let v = Arc::clone(&v);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let mut buf = vec![t as u8; REQUEST];
                let mut done = 0u64;
                barrier.wait();
                let start = Instant::now();
                while start.elapsed() < run_for {
                    let offset = (t * 8 + done % 8) * REQUEST as u64;
                    if t % 2 == 0 {
                        v.write_at(&buf, offset).unwrap();
                    } else {
                        v.read_at(&mut buf, offset).unwrap();
                    }
                    done += 1;
                }
                (start, Instant::now(), done)
            })
        })
        .collect();
    let runs: Vec<(Instant, Instant, u64)> =
        workers.into_iter().map(|w| w.join().unwrap()).collect();
    // From the first thread's start to the last thread's last completion: join and
    // spawn latency are the test's, not the limiter's.
    let first = runs.iter().map(|r| r.0).min().unwrap();
    let last = runs.iter().map(|r| r.1).max().unwrap();
    let counts: Vec<u64> = runs.iter().map(|r| r.2).collect();
    let total: u64 = counts.iter().sum();
    let rate = (total * REQUEST as u64) as f64 / (last - first).as_secs_f64();
    (rate, counts)
}

#[test]
fn on_the_system_clock_four_threads_together_never_faster() {
    real_rate(50.0 * MB, "4 threads, reads and writes together", || {
        let (rate, counts) = four_thread_run();
        // Each thread got through (fair turns are checked in virtual time).
        assert!(counts.iter().all(|&c| c > 0), "{counts:?}");
        rate
    });
}

#[test]
fn data_and_errors_pass_through_unchanged() {
    let v = ThrottleVolume::new(
        MemVolume::new(8192),
        Limits {
            bytes_per_sec: Some(100_000_000),
            iops: Some(100_000),
        },
    )
    .unwrap();
    v.write_at(&[7u8; 100], 4000).unwrap();
    let mut b = [0u8; 102];
    v.read_at(&mut b, 3999).unwrap();
    assert_eq!(b[0], 0);
    assert!(b[1..101].iter().all(|&x| x == 7));
    assert_eq!(b[101], 0);
    assert_eq!(
        v.write_at(&[1], 8192).unwrap_err().kind,
        ErrorKind::OutOfRange
    );
    v.flush().unwrap();
    v.discard(0, 512).unwrap();
    assert_eq!(v.size(), 8192);
    assert_eq!(v.name(), v.inner().name());
    let s = v.stats();
    assert_eq!((s.requests, s.bytes), (4, 203));
}

#[test]
fn zero_limits_are_refused_and_limits_can_change() {
    let e = ThrottleVolume::new(MemVolume::new(4096), Limits::bandwidth(0)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid);
    let v = ThrottleVolume::new(MemVolume::new(1 << 20), Limits::bandwidth(1000)).unwrap();
    // At 1000 B/s this write would put the device ~1000 s behind schedule.
    v.write_at(&vec![0u8; 1 << 20], 0).unwrap();
    assert!(v.set_limits(Limits::iops(0)).is_err());
    v.set_limits(Limits::unlimited()).unwrap();
    assert_eq!(v.limits(), Limits::unlimited());
    let t = Instant::now();
    v.write_at(&vec![0u8; 1 << 20], 0).unwrap();
    assert!(t.elapsed() < Duration::from_secs(1));
}
