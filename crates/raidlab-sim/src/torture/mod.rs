//! The torture harness: raidlab's real engine (`Array`, its planner, stripe
//! cache, logs, failure handling, assembly from superblocks, start and stop,
//! resync, rebuild, replace, check) run on one thread over in-memory members that carry
//! data, under a seeded random workload and random faults, checked against a
//! reference model of every byte ([`model`]). A run is a pure function of
//! (seed, run index): the configuration ([`config`]), every request, every
//! fault and every power cut's fate are drawn from one ChaCha RNG; plans run
//! in order on the calling thread (`exec::Interleaved`, which is `InOrder`
//! outside a task; `batch.rs` runs requests in flight together as tasks
//! that it interleaves between their member operations); the stripe cache has no
//! thread and its hold time passes on a `ManualClock` the harness moves. Each
//! event is folded into a hash, so a test can assert that a seed replays
//! exactly.
//!
//! It decides what to do to the array and what the array must answer; it
//! never changes the engine's decisions, and it must never read the wall
//! clock or an unseeded random source. What it does not model yet (device
//! timing, a live rebuild under load) is
//! listed in docs/reliability.md. Members that leave and come back
//! (`stale.rs`), a cache tier in front (`cache.rs`) and misdirected member
//! I/O (`faults.rs`) are drawn only when a sweep asks for them. `images.rs`
//! saves a passed run's final member images for the real md to judge;
//! `shrink.rs` cuts a failing run down to the operations that still fail
//! it; `md_rules.rs` holds md's own checksum test of the superblocks an
//! assembly after a cut took in; `trace.rs` keeps the events and the run's hash; `buffers.rs` the
//! buffers a run reads into and writes from, and `digest.rs` the model's
//! per-block CRCs behind a whole-array read's digest.

mod batch;
mod buffers;
mod cache;
pub mod config;
mod digest;
mod faults;
mod gaps;
pub mod images;
mod inside;
mod md_rules;
pub mod model;
mod power_cut;
mod replace;
pub mod reshape;
mod restart;
mod run;
pub mod served_reshape;
pub mod shrink;
mod stale;
mod trace;

pub use config::{Config, Policy};
pub use run::{run_one, run_opts, run_with, Plant};

use raidlab_layout::Level;
use std::collections::BTreeMap;

/// What a sweep runs.
#[derive(Debug, Clone)]
pub struct Options {
    pub seed: u64,
    /// The first run's index (a replay names the failing one).
    pub first_run: u64,
    pub runs: u64,
    /// Requests and faults per run.
    pub ops: usize,
    /// Only this level, when given.
    pub level: Option<Level>,
    /// Leave out the faults that hit the engine's known open gaps (listed
    /// in docs/reliability.md); the CI sweep does, `raidlab sim torture`
    /// does not unless asked.
    pub skip_known_gaps: bool,
    /// Members also leave (every I/O fails, as a pulled cable) and come
    /// back with what they held (`stale.rs`). Off, a run draws exactly what
    /// it drew before this fault existed, so the runs named in tests keep
    /// their meaning.
    pub stale_members: bool,
    /// A cache tier (write-back, write-through or write-around) in front of
    /// the array or of a plain file, drawn per run from a stream of its own
    /// (`cache.rs`). Off, a run draws exactly what it drew before.
    pub cache_tier: bool,
    /// Misdirected member I/O (`faults.rs`), drawn from a stream of its own
    /// and only without a cache tier. Off, a run draws exactly what it drew
    /// before.
    pub misdirected: bool,
    /// The power also goes inside requests (`inside.rs`), at a member
    /// write, drawn from a stream of its own and only without a cache tier.
    /// Off, a run draws exactly what it drew before.
    pub cuts_inside: bool,
    /// Requests in flight together (`batch.rs`): some operations are 2 to
    /// 8 requests run at once as tasks, interleaved between their plans'
    /// steps in a drawn order, with a member fault, the stripe cache's
    /// write-out or a power cut among them. Drawn from a stream of its own
    /// and only without a cache tier. Off, a run draws exactly what it drew
    /// before.
    pub queue_depths: bool,
}

/// An invariant the engine broke (or the harness could not hold).
#[derive(Debug, Clone)]
pub struct Violation {
    /// Index of the operation at which it was seen.
    pub op: usize,
    pub what: String,
    /// The run's last events, oldest first.
    pub trace: Vec<String>,
}

/// Figures of one run.
#[derive(Debug, Clone, Default)]
pub struct Counts {
    pub ops: u64,
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub faults: u64,
    pub power_cuts: u64,
    pub restarts: u64,
    pub rebuilds: u64,
    /// Replaces started (md's `--replace`: a new device copies an
    /// in-service member and takes its role).
    pub replaces: u64,
    pub checks: u64,
    /// Requests the members (and journal device) received: reads, writes,
    /// flushes, trims and write-zeroes, counted by each device.
    pub member_ios: u64,
    /// Sectors left to md's write hole (degraded parity, resync or bitmap)
    /// after a power cut: allowed any value, counted.
    pub write_hole_sectors: u64,
    /// Runs that went beyond the level's tolerance (then only "refuses or
    /// reports, never wrong data" is checked).
    pub beyond_tolerance: u64,
    /// Members that came back after leaving, and of those the ones the
    /// assembly left out as out of date (md's "non-fresh").
    pub returns: u64,
    pub stale_left_out: u64,
    /// Former members taken back by md's re-add (only the bitmap's dirty
    /// chunks rebuilt).
    pub re_adds: u64,
    /// Runs with a cache tier in front, the cache's opens after a power cut
    /// (its crash recovery), and blocks the cache wrote back to the origin.
    pub cache_runs: u64,
    pub cache_recoveries: u64,
    pub cache_written_back: u64,
    /// Member writes that landed elsewhere, of those the ones the check
    /// that followed reported (it must, where one can run), and member
    /// reads that returned another offset's data.
    pub misdirected_writes: u64,
    pub misdirected_found: u64,
    pub misdirected_reads: u64,
    /// Power cuts inside a request (`--cuts-inside`).
    pub inside_cuts: u64,
    /// Operations that were requests in flight together
    /// (`--queue-depths`), the requests they ran, the member faults that
    /// struck while they were under way, and the power cuts among them.
    pub batches: u64,
    pub batch_requests: u64,
    pub batch_faults: u64,
    pub batch_cuts: u64,
    /// Devices whose superblock a cut tore, left out of the assembly.
    pub torn_superblocks: u64,
    /// Times every device slot of the superblocks was taken and the
    /// operator removed the faulty members to add one (long runs).
    pub room_made: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.ops += o.ops;
        self.reads += o.reads;
        self.writes += o.writes;
        self.flushes += o.flushes;
        self.faults += o.faults;
        self.power_cuts += o.power_cuts;
        self.restarts += o.restarts;
        self.rebuilds += o.rebuilds;
        self.replaces += o.replaces;
        self.checks += o.checks;
        self.member_ios += o.member_ios;
        self.write_hole_sectors += o.write_hole_sectors;
        self.beyond_tolerance += o.beyond_tolerance;
        self.returns += o.returns;
        self.stale_left_out += o.stale_left_out;
        self.re_adds += o.re_adds;
        self.cache_runs += o.cache_runs;
        self.cache_recoveries += o.cache_recoveries;
        self.cache_written_back += o.cache_written_back;
        self.misdirected_writes += o.misdirected_writes;
        self.misdirected_found += o.misdirected_found;
        self.misdirected_reads += o.misdirected_reads;
        self.inside_cuts += o.inside_cuts;
        self.batches += o.batches;
        self.batch_requests += o.batch_requests;
        self.batch_faults += o.batch_faults;
        self.batch_cuts += o.batch_cuts;
        self.torn_superblocks += o.torn_superblocks;
        self.room_made += o.room_made;
    }
}

/// One run's outcome.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub seed: u64,
    pub run: u64,
    pub config: Config,
    /// The level asked for (it changes the draws: a replay must ask the same).
    pub level: Option<Level>,
    pub skip_known_gaps: bool,
    pub stale_members: bool,
    pub cache_tier: bool,
    pub misdirected: bool,
    pub cuts_inside: bool,
    pub queue_depths: bool,
    /// Hash of every event of the run, in order.
    pub hash: u64,
    pub counts: Counts,
    pub violation: Option<Violation>,
}

impl RunResult {
    /// The command that replays this run alone.
    pub fn replay_command(&self, ops: usize) -> String {
        format!(
            "raidlab sim torture --seed {} --first-run {} --runs 1 --ops {ops}{}{}{}{}{}{}{}",
            self.seed,
            self.run,
            self.level
                .map_or(String::new(), |l| format!(" --level {}", l.name())),
            if self.skip_known_gaps {
                " --skip-known-gaps"
            } else {
                ""
            },
            if self.stale_members {
                " --stale-members"
            } else {
                ""
            },
            if self.cache_tier { " --cache-tier" } else { "" },
            if self.misdirected {
                " --misdirected"
            } else {
                ""
            },
            if self.cuts_inside {
                " --cuts-inside"
            } else {
                ""
            },
            if self.queue_depths {
                " --queue-depths"
            } else {
                ""
            }
        )
    }
}

/// Per configuration kind (level and policy): runs, runs passed, figures.
#[derive(Debug, Default)]
pub struct Sweep {
    pub kinds: BTreeMap<String, (u64, u64, Counts)>,
    pub failures: Vec<RunResult>,
}

impl Sweep {
    pub fn runs(&self) -> u64 {
        self.kinds.values().map(|k| k.0).sum()
    }
    pub fn passed(&self) -> u64 {
        self.kinds.values().map(|k| k.1).sum()
    }
    pub fn total(&self) -> Counts {
        let mut c = Counts::default();
        for k in self.kinds.values() {
            c.add(&k.2);
        }
        c
    }
}

impl Sweep {
    fn record(&mut self, r: RunResult) {
        let k = self.kinds.entry(r.config.kind()).or_default();
        k.0 += 1;
        if r.violation.is_none() {
            k.1 += 1;
        }
        k.2.add(&r.counts);
        if r.violation.is_some() {
            self.failures.push(r);
        }
    }

    fn merge(&mut self, other: Sweep) {
        for (kind, (n, ok, c)) in other.kinds {
            let k = self.kinds.entry(kind).or_default();
            k.0 += n;
            k.1 += ok;
            k.2.add(&c);
        }
        self.failures.extend(other.failures);
        self.failures.sort_by_key(|r| r.run);
    }
}

/// Run `opts.runs` runs; `each` sees every result as it ends.
pub fn sweep(opts: &Options, mut each: impl FnMut(&RunResult)) -> Sweep {
    let mut out = Sweep::default();
    for run in opts.first_run..opts.first_run + opts.runs {
        let r = run_opts(opts, run, None);
        each(&r);
        out.record(r);
    }
    out
}

/// [`sweep`] with its runs shared out among `threads` threads (run `i`
/// of the sweep on thread `i % threads`): the same tallies and failures,
/// in run order, since a run draws only from its own seed and run index
/// and touches nothing another run sees. `each` sees every result as it
/// ends, on the thread that ran it.
pub fn sweep_on_threads(opts: &Options, threads: usize, each: impl Fn(&RunResult) + Sync) -> Sweep {
    let threads = threads.max(1) as u64;
    let each = &each;
    std::thread::scope(|s| {
        let shares: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut out = Sweep::default();
                    let runs = opts.first_run..opts.first_run + opts.runs;
                    for run in runs.skip(t as usize).step_by(threads as usize) {
                        let r = run_opts(opts, run, None);
                        each(&r);
                        out.record(r);
                    }
                    out
                })
            })
            .collect();
        let mut out = Sweep::default();
        for share in shares {
            out.merge(share.join().expect("a sweep thread panicked"));
        }
        out
    })
}

/// The configuration run `run` of `opts` draws, without running it.
pub fn run_config(opts: &Options, run: u64) -> Config {
    use rand::SeedableRng;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(run_seed(opts.seed, run));
    Config::random(&mut rng, opts.level)
}

/// The run's own seed: (seed, run) mixed so that neighbouring runs share
/// nothing (splitmix64's finaliser).
pub fn run_seed(seed: u64, run: u64) -> u64 {
    let mut z = seed ^ run.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The check a reshape run ends with (md's `check`): no mismatched sector,
/// or what went wrong.
fn check_at_end(
    asm: &mut raidlab_raid::assemble::Assembly,
    opts: raidlab_raid::recovery::RunOptions,
) -> Result<(), String> {
    let r = asm
        .scrub(false, opts, &mut |_| {})
        .map_err(|e| format!("check at the end: {e}"))?;
    if r.mismatch_sectors > 0 {
        return Err(format!(
            "check at the end: {} mismatched sectors",
            r.mismatch_sectors
        ));
    }
    Ok(())
}
