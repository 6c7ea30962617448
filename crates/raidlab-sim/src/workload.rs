//! A closed-loop workload on one simulated device: what fio's and CrystalDiskMark's
//! jobs do (threads x queue depth in flight, sequential or random, a read/write mix),
//! run in virtual time.
//!
//! Decides: which request each slot submits next and what the figures are. It must
//! never look at a device's internals (it sees only the `Device` contract) and
//! never read the wall clock: the same job and seed give the same figures, bit for
//! bit, on any machine.

use crate::device::{Completion, Device, Ns, Request, SEC};
use raidlab_core::IoKind;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Where each slot's next offset comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// Each thread reads or writes its own share of the region in order, wrapping
    /// at its end; a thread's queue depth keeps that many consecutive blocks in
    /// flight.
    Sequential,
    /// Uniformly random block-aligned offsets in the region.
    Random,
}

/// One job: `threads` x `queue_depth` requests kept in flight for `duration` of
/// virtual time (or until `max_ops` complete, whichever comes first).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Job {
    pub pattern: Pattern,
    /// Request size in bytes.
    pub block: u64,
    /// Percent of requests that read (100 = reads only, 0 = writes only).
    pub read_percent: u8,
    pub threads: u32,
    pub queue_depth: u32,
    /// Byte range the job works in: (offset, length).
    pub region: (u64, u64),
    /// Virtual time the job runs, in nanoseconds.
    pub duration: Ns,
    /// Stop after this many completions (0: no limit).
    pub max_ops: u64,
    pub seed: u64,
}

impl Job {
    /// A job with fio's and CrystalDiskMark's usual shape: `block` bytes,
    /// reads or writes, over the first `region` bytes, for 5 virtual seconds.
    pub fn new(
        pattern: Pattern,
        block: u64,
        read: bool,
        threads: u32,
        qd: u32,
        region: u64,
    ) -> Job {
        Job {
            pattern,
            block,
            read_percent: if read { 100 } else { 0 },
            threads,
            queue_depth: qd,
            region: (0, region),
            duration: 5 * SEC,
            max_ops: 0,
            seed: 1,
        }
    }
}

/// What a job measured, in virtual time.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Outcome {
    /// Requests completed within the job's time.
    pub ops: u64,
    pub bytes: u64,
    /// Virtual time measured over, in nanoseconds.
    pub elapsed_ns: u64,
    pub iops: f64,
    /// Decimal megabytes per second (10^6 bytes), as CrystalDiskMark and the
    /// articles quote.
    pub mb_per_s: f64,
    pub mean_latency_ns: f64,
    pub p50_latency_ns: u64,
    pub p99_latency_ns: u64,
    pub max_latency_ns: u64,
    /// When the job's last request completed (the device is idle after it).
    pub end: Ns,
}

/// Run `job` on `dev`, starting at virtual time `start` (the device must be idle
/// then). Requests still in flight when the time is up are waited for but not
/// counted, as fio's time-based jobs do.
pub fn run(dev: &mut dyn Device, job: &Job, start: Ns) -> Result<Outcome, String> {
    run_observed(dev, job, start, &mut |_, _| {})
}

/// [`run`], telling `each` the kind and latency (ns) of every counted completion,
/// for callers that keep their own histograms.
pub fn run_observed(
    dev: &mut dyn Device,
    job: &Job,
    start: Ns,
    each: &mut dyn FnMut(IoKind, u64),
) -> Result<Outcome, String> {
    let blocks = job.region.1 / job.block.max(1);
    if job.block == 0 || blocks == 0 {
        return Err(format!(
            "a job of {}-byte requests needs a region of at least one request (region is {} bytes)",
            job.block, job.region.1
        ));
    }
    if job.region.0 + job.region.1 > dev.capacity() {
        return Err(format!(
            "the job's region ends at byte {}, past the device's {} bytes",
            job.region.0 + job.region.1,
            dev.capacity()
        ));
    }
    if job.threads == 0 || job.queue_depth == 0 {
        return Err("a job needs at least one thread and a queue depth of at least 1".into());
    }
    let mut rng = ChaCha8Rng::seed_from_u64(job.seed);
    let threads = job.threads as u64;
    let share = (blocks / threads).max(1);
    // Next block of each thread's sequential stream.
    let mut cursor: Vec<u64> = (0..threads).map(|t| (t * share) % blocks).collect();
    let slots = (threads * job.queue_depth as u64) as usize;
    let mut issued_at: Vec<Ns> = vec![start; slots];
    let mut kinds: Vec<IoKind> = vec![IoKind::Read; slots];
    let mut latencies: Vec<u64> = Vec::new();
    let end_time = start.saturating_add(job.duration);
    let (mut ops, mut bytes, mut in_flight, mut last) = (0u64, 0u64, 0usize, start);
    let mut stop = false;
    let mut stop_at = end_time;
    let mut next_req = |slot: usize, rng: &mut ChaCha8Rng| -> Request {
        let thread = slot as u64 / job.queue_depth as u64;
        let block = match job.pattern {
            Pattern::Sequential => {
                let b = cursor[thread as usize];
                let first = (thread * share) % blocks;
                let limit = if thread + 1 == threads {
                    blocks
                } else {
                    first + share
                };
                cursor[thread as usize] = if b + 1 >= limit { first } else { b + 1 };
                b
            }
            Pattern::Random => rng.gen_range(0..blocks),
        };
        let read = job.read_percent >= 100
            || (job.read_percent > 0 && rng.gen_range(0..100u8) < job.read_percent);
        Request {
            id: slot as u64,
            kind: if read { IoKind::Read } else { IoKind::Write },
            offset: job.region.0 + block * job.block,
            len: job.block,
            process: thread as u32,
        }
    };
    for (slot, kind) in kinds.iter_mut().enumerate() {
        let req = next_req(slot, &mut rng);
        *kind = req.kind;
        dev.submit(start, req);
        in_flight += 1;
    }
    let mut done: Vec<Completion> = Vec::new();
    while in_flight > 0 {
        next_completions(dev, in_flight, &mut done)?;
        for c in done.iter().copied() {
            in_flight -= 1;
            last = last.max(c.at);
            let slot = c.id as usize;
            if c.at <= end_time && !stop {
                ops += 1;
                bytes += job.block;
                latencies.push(c.at - issued_at[slot]);
                each(kinds[slot], c.at - issued_at[slot]);
                if job.max_ops > 0 && ops >= job.max_ops {
                    stop = true;
                    stop_at = c.at;
                }
            }
            if c.at < end_time && !stop {
                let req = next_req(slot, &mut rng);
                issued_at[slot] = c.at;
                kinds[slot] = req.kind;
                dev.submit(c.at, req);
                in_flight += 1;
            }
        }
    }
    // With a completion limit the job ends at the completion that reached it.
    Ok(figures(
        ops,
        bytes,
        (stop_at - start).max(1),
        latencies,
        last,
    ))
}

/// Advance `dev` to its next event and put what completed there in `done`
/// (a driver with requests in flight always has one coming).
pub(crate) fn next_completions(
    dev: &mut dyn Device,
    in_flight: usize,
    done: &mut Vec<Completion>,
) -> Result<(), String> {
    let Some(t) = dev.next_event() else {
        return Err(format!(
            "internal: the simulated device went idle with {in_flight} request(s) in flight"
        ));
    };
    done.clear();
    dev.advance(t, done);
    Ok(())
}

fn figures(ops: u64, bytes: u64, elapsed: u64, lat: Vec<u64>, end: Ns) -> Outcome {
    let secs = elapsed as f64 / SEC as f64;
    let (mean, p50, p99, max) = latency_figures(lat);
    Outcome {
        ops,
        bytes,
        elapsed_ns: elapsed,
        iops: ops as f64 / secs,
        mb_per_s: bytes as f64 / 1e6 / secs,
        mean_latency_ns: mean,
        p50_latency_ns: p50,
        p99_latency_ns: p99,
        max_latency_ns: max,
        end,
    }
}

/// Mean, median, 99th percentile and maximum of the latencies: the
/// percentiles as the sorted list's element at `ceil(n x q)` (1-based), the
/// mean as the sum of the sorted list in `f64` over `n`.
fn latency_figures(mut lat: Vec<u64>) -> (f64, u64, u64, u64) {
    let n = lat.len();
    if n == 0 {
        return (0.0, 0, 0, 0);
    }
    let rank = |q: f64| ((n as f64 * q).ceil() as usize).clamp(1, n) - 1;
    let (i50, i99) = (rank(0.5), rank(0.99));
    let total: u128 = lat.iter().map(|&l| u128::from(l)).sum();
    if total >= 1 << f64::MANTISSA_DIGITS {
        // Past 2^53 an f64 sum rounds, and its order matters: the sorted one.
        lat.sort_unstable();
        let mean = lat.iter().map(|&l| l as f64).sum::<f64>() / n as f64;
        return (mean, lat[i50], lat[i99], lat[n - 1]);
    }
    // Below 2^53 every partial sum is exact, so the integer sum is the
    // sorted f64 sum bit for bit, and two selections find the percentiles
    // without sorting (sorting was 4 % of a simulated run).
    let max = lat.iter().copied().max().unwrap_or(0);
    let (below, &mut p99, _) = lat.select_nth_unstable(i99);
    let p50 = if i50 < i99 {
        *below.select_nth_unstable(i50).1
    } else {
        p99
    };
    (total as f64 / n as f64, p50, p99, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The figures as they were computed before selections: sort, pick,
    /// sum in order.
    fn sorted_figures(mut lat: Vec<u64>) -> (f64, u64, u64, u64) {
        lat.sort_unstable();
        let n = lat.len();
        if n == 0 {
            return (0.0, 0, 0, 0);
        }
        let pick = |q: f64| lat[((n as f64 * q).ceil() as usize).clamp(1, n) - 1];
        let mean = lat.iter().map(|&l| l as f64).sum::<f64>() / n as f64;
        (mean, pick(0.5), pick(0.99), lat[n - 1])
    }

    #[test]
    fn latency_figures_equal_the_sorted_ones_bit_for_bit() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for n in [0usize, 1, 2, 3, 99, 100, 101, 1000, 4321] {
            for spread in [1u64, 5, 1_000, 10_000_000, 1 << 40] {
                let lat: Vec<u64> = (0..n).map(|_| rng.gen_range(0..spread)).collect();
                let (m, a, b, c) = latency_figures(lat.clone());
                let (sm, sa, sb, sc) = sorted_figures(lat);
                assert_eq!(
                    (m.to_bits(), a, b, c),
                    (sm.to_bits(), sa, sb, sc),
                    "{n} latencies below {spread}"
                );
            }
        }
        // Past 2^53 in total: the sorted sum, as before.
        let big = vec![u64::MAX / 4, 3, u64::MAX / 3, 1 << 60];
        assert_eq!(latency_figures(big.clone()), sorted_figures(big));
    }
}
