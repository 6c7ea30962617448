//! Two closed-loop jobs sharing one simulated device: a background job (a
//! full-disk scanner, an indexer) and a foreground job with a fixed amount of work
//! (an application starting), the way article A timed a browser start while a
//! background job indexed every file.
//!
//! Decides: how the two jobs' requests interleave (each slot resubmits as soon as
//! its request completes, the device's own queueing decides the rest) and what is
//! measured: the foreground's completion time, and how much the background got
//! done meanwhile. It must never change [`crate::workload`]'s single-job API or
//! read the wall clock: the same jobs and seeds give the same figures on any
//! machine.

use crate::device::{Completion, Device, Ns, Request};
use crate::workload::{Job, Pattern};
use raidlab_core::IoKind;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// What a foreground job took while a background job ran.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MixedOutcome {
    /// Foreground requests completed (its `max_ops`, unless its time ran out).
    pub foreground_ops: u64,
    /// Virtual time from the start until the foreground's last counted
    /// completion, in nanoseconds.
    pub foreground_ns: u64,
    pub foreground_mean_latency_ns: f64,
    /// Background requests and bytes completed while the foreground ran.
    pub background_ops: u64,
    pub background_bytes: u64,
    /// When the last request (of either job) completed: the device is idle after.
    pub end: Ns,
}

/// One job's request stream: the same choice of offsets as `workload::run`.
struct Stream<'a> {
    job: &'a Job,
    rng: ChaCha8Rng,
    blocks: u64,
    share: u64,
    cursor: Vec<u64>,
    /// The process number of the job's first thread: the background's threads
    /// come first, then the foreground's, each a process of its own.
    first_process: u32,
}

impl<'a> Stream<'a> {
    fn new(
        job: &'a Job,
        capacity: u64,
        what: &str,
        first_process: u32,
    ) -> Result<Stream<'a>, String> {
        let blocks = job.region.1 / job.block.max(1);
        if job.block == 0 || blocks == 0 {
            return Err(format!(
                "the {what} job's {}-byte requests need a region of at least one request (region is {} bytes)",
                job.block, job.region.1
            ));
        }
        if job.region.0 + job.region.1 > capacity {
            return Err(format!(
                "the {what} job's region ends at byte {}, past the device's {capacity} bytes",
                job.region.0 + job.region.1
            ));
        }
        if job.threads == 0 || job.queue_depth == 0 {
            return Err(format!(
                "the {what} job needs at least one thread and a queue depth of at least 1"
            ));
        }
        let threads = u64::from(job.threads);
        let share = (blocks / threads).max(1);
        Ok(Stream {
            job,
            rng: ChaCha8Rng::seed_from_u64(job.seed),
            blocks,
            share,
            cursor: (0..threads).map(|t| (t * share) % blocks).collect(),
            first_process,
        })
    }

    fn slots(&self) -> usize {
        (self.job.threads * self.job.queue_depth) as usize
    }

    fn next(&mut self, slot: usize, id: u64) -> Request {
        let job = self.job;
        let thread = slot as u64 / u64::from(job.queue_depth);
        let block = match job.pattern {
            Pattern::Sequential => {
                let t = thread as usize;
                let b = self.cursor[t];
                let first = (thread * self.share) % self.blocks;
                let limit = if thread + 1 == u64::from(job.threads) {
                    self.blocks
                } else {
                    first + self.share
                };
                self.cursor[t] = if b + 1 >= limit { first } else { b + 1 };
                b
            }
            Pattern::Random => self.rng.gen_range(0..self.blocks),
        };
        let read = job.read_percent >= 100
            || (job.read_percent > 0 && self.rng.gen_range(0..100u8) < job.read_percent);
        Request {
            id,
            kind: if read { IoKind::Read } else { IoKind::Write },
            offset: job.region.0 + block * job.block,
            len: job.block,
            process: thread as u32 + self.first_process,
        }
    }
}

/// Run `foreground` (which should have `max_ops` set: the work it must finish)
/// while `background` keeps its slots busy, both from `start` (the device must be
/// idle then). The background stops submitting once the foreground is done or its
/// time is up; requests still in flight are waited for but not counted.
pub fn run_mixed(
    dev: &mut dyn Device,
    background: &Job,
    foreground: &Job,
    start: Ns,
) -> Result<MixedOutcome, String> {
    let mut bg = Stream::new(background, dev.capacity(), "background", 0)?;
    let mut fg = Stream::new(foreground, dev.capacity(), "foreground", background.threads)?;
    let bg_slots = bg.slots();
    let fg_slots = fg.slots();
    // Request ids: background slots first, then the foreground's.
    let mut issued_at: Vec<Ns> = vec![start; bg_slots + fg_slots];
    let fg_end_time = start.saturating_add(foreground.duration);
    let bg_end_time = start.saturating_add(background.duration);
    let mut in_flight = 0usize;
    for slot in 0..bg_slots {
        dev.submit(start, bg.next(slot, slot as u64));
        in_flight += 1;
    }
    for slot in 0..fg_slots {
        dev.submit(start, fg.next(slot, (bg_slots + slot) as u64));
        in_flight += 1;
    }
    let (mut fg_ops, mut fg_lat, mut fg_last) = (0u64, 0u128, start);
    let (mut bg_ops, mut bg_bytes, mut last) = (0u64, 0u64, start);
    let mut fg_done = false;
    let mut done: Vec<Completion> = Vec::new();
    while in_flight > 0 {
        crate::workload::next_completions(dev, in_flight, &mut done)?;
        for c in done.iter().copied() {
            in_flight -= 1;
            last = last.max(c.at);
            let id = c.id as usize;
            if id < bg_slots {
                if !fg_done && c.at <= bg_end_time {
                    bg_ops += 1;
                    bg_bytes += background.block;
                }
                if !fg_done && c.at < bg_end_time {
                    issued_at[id] = c.at;
                    dev.submit(c.at, bg.next(id, c.id));
                    in_flight += 1;
                }
            } else {
                if !fg_done && c.at <= fg_end_time {
                    fg_ops += 1;
                    fg_lat += u128::from(c.at - issued_at[id]);
                    fg_last = c.at;
                    if foreground.max_ops > 0 && fg_ops >= foreground.max_ops {
                        fg_done = true;
                    }
                }
                if !fg_done && c.at < fg_end_time {
                    issued_at[id] = c.at;
                    dev.submit(c.at, fg.next(id - bg_slots, c.id));
                    in_flight += 1;
                } else if c.at >= fg_end_time {
                    fg_done = true;
                }
            }
        }
    }
    Ok(MixedOutcome {
        foreground_ops: fg_ops,
        foreground_ns: fg_last - start,
        foreground_mean_latency_ns: if fg_ops == 0 {
            0.0
        } else {
            fg_lat as f64 / fg_ops as f64
        },
        background_ops: bg_ops,
        background_bytes: bg_bytes,
        end: last,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::SEC;
    use crate::presets;
    use crate::workload::{self, Pattern};

    fn disk() -> Box<dyn Device> {
        presets::device("hitachi-7k250").expect("preset")
    }

    fn fg() -> Job {
        let mut j = Job::new(Pattern::Random, 65536, true, 1, 1, 100_000_000_000);
        j.max_ops = 200;
        j.duration = 600 * SEC;
        j.seed = 7;
        j
    }

    fn bg() -> Job {
        let mut j = Job::new(Pattern::Sequential, 1 << 20, true, 1, 2, 100_000_000_000);
        j.duration = 600 * SEC;
        j
    }

    #[test]
    fn a_background_scanner_slows_the_foreground_and_is_deterministic() {
        let mut d = disk();
        let alone = workload::run(d.as_mut(), &fg(), 0).expect("alone");
        let mut d = disk();
        let mixed = run_mixed(d.as_mut(), &bg(), &fg(), 0).expect("mixed");
        let mut d = disk();
        let again = run_mixed(d.as_mut(), &bg(), &fg(), 0).expect("mixed again");
        println!("alone {alone:?}\nmixed {mixed:?}");
        assert_eq!(mixed, again);
        assert_eq!(mixed.foreground_ops, 200);
        assert!(mixed.background_ops > 0);
        // Every foreground read waits behind scanner reads: clearly slower.
        assert!(
            mixed.foreground_ns as f64 > 1.3 * alone.elapsed_ns as f64,
            "mixed {} ns vs alone {} ns",
            mixed.foreground_ns,
            alone.elapsed_ns
        );
    }

    #[test]
    fn bad_jobs_are_errors() {
        let mut d = disk();
        let mut f = fg();
        f.threads = 0;
        assert!(run_mixed(d.as_mut(), &bg(), &f, 0)
            .unwrap_err()
            .contains("foreground"));
        let mut b = bg();
        b.region = (0, 1 << 60);
        assert!(run_mixed(d.as_mut(), &b, &fg(), 0)
            .unwrap_err()
            .contains("background"));
    }
}
