//! ThrottleVolume against its own clock on memory volumes: the configured bandwidth
//! and IOPS are delivered within a few percent, threads share one budget and none is
//! starved. Each timing test runs about half a second.

use raidlab_core::{ErrorKind, Volume};
use raidlab_devices::throttle::{Limits, ThrottleVolume, BURST};
use raidlab_devices::MemVolume;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const MB: f64 = 1_000_000.0;

/// Rate in units per second of requests after the first, timed from the first
/// request's completion to the last's: in the steady state each completion is one
/// slot after the previous, so this excludes the startup burst and the I/O time.
fn steady_rate(v: &ThrottleVolume<MemVolume>, request: usize, count: usize) -> (f64, f64) {
    let buf = vec![0xa5u8; request];
    let slots = v.size() / request as u64;
    // Use up the burst allowance (BURST plus one request) first, so the measurement
    // starts in the steady state.
    let warm_up = Instant::now();
    while warm_up.elapsed() < 2 * BURST {
        v.write_at(&buf, 0).unwrap();
    }
    let mut first = None;
    for i in 0..count as u64 {
        v.write_at(&buf, (i % slots) * request as u64).unwrap();
        first.get_or_insert_with(Instant::now);
    }
    let elapsed = first.map(|t| t.elapsed()).unwrap_or_default().as_secs_f64();
    let n = (count - 1) as f64;
    (n * request as f64 / elapsed, n / elapsed)
}

/// Measure with `measure` until it lands within `tolerance` of `want`, at most three
/// times. Every attempt must stay under the upper bound: a limiter can only go too
/// fast through its own fault. Falling short can also mean the machine did not run
/// our threads on time (the CI box is shared), which a retry tells apart.
fn assert_rate(want: f64, tolerance: f64, what: &str, mut measure: impl FnMut() -> f64) {
    let mut seen = Vec::new();
    for _ in 0..3 {
        let got = measure();
        assert!(
            got <= want * (1.0 + tolerance),
            "{what}: measured {got:.0}, configured {want:.0}: too fast"
        );
        if got >= want * (1.0 - tolerance) {
            return;
        }
        seen.push(got.round());
    }
    panic!("{what}: configured {want:.0}, measured {seen:?}: too slow three times");
}

#[test]
fn bandwidth_of_sequential_256k_writes_is_within_5_percent() {
    // 115 requests of 256 KiB at 50 MB/s: about 0.6 s.
    assert_rate(50.0 * MB, 0.05, "256 KiB writes", || {
        let v =
            ThrottleVolume::new(MemVolume::new(4 << 20), Limits::bandwidth(50_000_000)).unwrap();
        steady_rate(&v, 256 << 10, 115).0
    });
}

#[test]
fn bandwidth_holds_for_small_and_large_requests() {
    for (request, count) in [(64 << 10, 200), (1 << 20, 16)] {
        // About 0.3 s each at 50 MB/s.
        assert_rate(50.0 * MB, 0.05, &format!("{request}-byte writes"), || {
            let v = ThrottleVolume::new(MemVolume::new(4 << 20), Limits::bandwidth(50_000_000))
                .unwrap();
            steady_rate(&v, request, count).0
        });
    }
}

#[test]
fn iops_limit_is_within_5_percent() {
    assert_rate(1000.0, 0.05, "IOPS", || {
        let v = ThrottleVolume::new(MemVolume::new(1 << 20), Limits::iops(1000)).unwrap();
        let (_, iops) = steady_rate(&v, 4096, 500);
        assert!(v.stats().requests > 500);
        iops
    });
}

/// Four threads, two reading and two writing 256 KiB, for 0.6 s: the total rate and
/// each thread's share (requests done) of it.
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
fn four_threads_share_one_budget_and_none_starves() {
    assert_rate(
        50.0 * MB,
        0.05,
        "4 threads, reads and writes together",
        || {
            let (rate, counts) = four_thread_run();
            let total: u64 = counts.iter().sum();
            for (t, &c) in counts.iter().enumerate() {
                // A fair share is a quarter; half of that rules out starvation.
                assert!(c * 8 >= total, "thread {t} did {c} of {total}: {counts:?}");
            }
            rate
        },
    );
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
