//! What handing one small member operation to a pool thread costs, beside
//! doing it on the caller's thread: the figure behind the executor's line
//! between running a small step's operations in turn and together
//! (`exec/pool.rs`, `DEVICE_NS`). It does what `run_grouped` does for a
//! two-member step (a rayon `in_place_scope`, one spawn, the caller taking the
//! other operation), with a 4 KiB copy as the operation, back to back and
//! after an idle gap (the pool's threads asleep, as between requests).
//!
//! `cargo run --release -p raidlab-raid --example handoff`

use std::time::{Duration, Instant};

fn op(dst: &mut [u8], src: &[u8]) {
    dst.copy_from_slice(src);
}

fn main() {
    // As many threads as the executor's pool.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(16)
        .build()
        .expect("a rayon pool");
    let src = vec![7u8; 4096];
    let (mut a, mut b) = (vec![0u8; 4096], vec![0u8; 4096]);
    let step = |a: &mut [u8], b: &mut [u8]| {
        pool.in_place_scope(|s| {
            let src = &src;
            s.spawn(move |_| op(b, src));
            op(a, src);
        })
    };
    for round in 1..=3 {
        let n = 20_000u32;
        let t = Instant::now();
        for _ in 0..n {
            op(&mut a, &src);
            op(&mut b, &src);
        }
        let in_turn = t.elapsed() / n;
        let t = Instant::now();
        for _ in 0..n {
            step(&mut a, &mut b);
        }
        let together = t.elapsed() / n;
        let m = 2_000u32;
        let mut idle = Duration::ZERO;
        for _ in 0..m {
            std::thread::sleep(Duration::from_micros(200));
            let t = Instant::now();
            step(&mut a, &mut b);
            idle += t.elapsed();
        }
        println!(
            "round {round}: two 4 KiB operations in turn {} ns; handed off, back to back {} ns; after a 200 µs idle gap {} ns",
            in_turn.as_nanos(),
            together.as_nanos(),
            (idle / m).as_nanos()
        );
    }
}
