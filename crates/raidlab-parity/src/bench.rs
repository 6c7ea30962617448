//! A small throughput benchmark of every available engine, used by the
//! `parity_bench` example and the side-by-side comparison with Intel ISA-L in
//! `bench/isal/`. Method: for each case, a warm-up call, then the best of many
//! timed loops of 20 ms each, about `time_per_case` in all; throughput counts the
//! DATA bytes processed (data_disks * chunk_bytes per call), in GB/s of 1e9
//! bytes. Buffers are 64-byte aligned, like ISA-L's own tests use.

use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::{available, recover, selected, Engine};

/// One measured case.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BenchResult {
    /// "xor" | "pq" | "recover2".
    pub op: String,
    pub engine: String,
    pub data_disks: usize,
    pub chunk_bytes: usize,
    /// GB/s (1e9 bytes) of DATA processed.
    pub gbps: f64,
    /// Whether this is the engine [`selected`] picks.
    pub selected: bool,
}

/// A heap buffer whose usable part starts on a 64-byte boundary.
struct Aligned {
    buf: Vec<u8>,
    off: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize, seed: u64) -> Self {
        let mut buf = vec![0u8; len + 64];
        let off = buf.as_ptr().align_offset(64).min(64);
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        for b in &mut buf[off..off + len] {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            *b = s as u8;
        }
        Aligned { buf, off, len }
    }
    fn get(&self) -> &[u8] {
        &self.buf[self.off..self.off + self.len]
    }
    fn get_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.off..self.off + self.len]
    }
}

/// Length of one timed loop. Short loops make "best of" robust on a shared
/// machine: some of them run without being preempted.
const ROUND: Duration = Duration::from_millis(20);

/// Calls per second of `f`: the best of as many 20 ms loops as fit in `time`
/// (at least three).
fn rate(time: Duration, mut f: impl FnMut()) -> f64 {
    f();
    let rounds = (time.as_secs_f64() / ROUND.as_secs_f64()).ceil().max(3.0) as usize;
    let round = ROUND.min(time / 3);
    let mut best = 0f64;
    for _ in 0..rounds {
        let start = Instant::now();
        let mut iters = 0u64;
        loop {
            f();
            iters += 1;
            if start.elapsed() >= round {
                break;
            }
        }
        best = best.max(iters as f64 / start.elapsed().as_secs_f64());
    }
    best
}

/// Measure every available engine for xor, pq and recover2 (recovery of two lost data blocks) over data_disks blocks of chunk_bytes each, about `time_per_case` each.
///
/// `recover2` needs two data disks and is left out when `data_disks` is 1.
pub fn run(data_disks: usize, chunk_bytes: usize, time_per_case: Duration) -> Vec<BenchResult> {
    assert!(data_disks >= 1, "bench needs at least one data disk");
    let mut data: Vec<Aligned> = (0..data_disks)
        .map(|i| Aligned::new(chunk_bytes, i as u64 + 1))
        .collect();
    let mut p = Aligned::new(chunk_bytes, 1000);
    let mut q = Aligned::new(chunk_bytes, 1001);
    let bytes = (data_disks * chunk_bytes) as f64;
    let chosen = selected().name();
    let mut out = Vec::new();
    for engine in available() {
        let mut push = |op: &str, per_sec: f64| {
            out.push(BenchResult {
                op: op.into(),
                engine: engine.name().into(),
                data_disks,
                chunk_bytes,
                gbps: per_sec * bytes / 1e9,
                selected: engine.name() == chosen,
            })
        };
        let srcs: Vec<&[u8]> = data.iter().map(Aligned::get).collect();
        let r = rate(time_per_case, || {
            engine.xor(black_box(&srcs), black_box(p.get_mut()));
        });
        push("xor", r);
        let r = rate(time_per_case, || {
            engine.gen_pq(black_box(&srcs), black_box(p.get_mut()), q.get_mut());
        });
        push("pq", r);
        drop(srcs);
        if data_disks >= 2 {
            // P and Q are valid for `data` now, so recovering slots 0 and 1
            // rewrites them with their own contents, call after call.
            let r = rate(time_per_case, || {
                let mut bufs: Vec<&mut [u8]> = data.iter_mut().map(Aligned::get_mut).collect();
                recover(
                    engine as &dyn Engine,
                    black_box(&mut bufs),
                    &[0, 1],
                    Some(p.get()),
                    Some(q.get()),
                )
                .expect("recovery of two data blocks with P and Q");
            });
            push("recover2", r);
        }
    }
    out
}
