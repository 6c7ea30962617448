//! Arguments of `raidlab seeds` and `raidlab sim` (torture, devices, show).

use super::*;

#[derive(Debug, Args)]
pub struct SeedsArgs {
    /// Seeds to run: A, B, C, D, E (default: all).
    pub seeds: Vec<String>,
    /// Print the result as JSON (cells and findings) instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Directory for the HTML report and the result files (not written if not given).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// `raidlab sim` verbs.
#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// List the device and RAID card presets with their parameters (units) and
    /// sources.
    Devices(SimDevicesArgs),
    /// What a simulated configuration is made of: its parts, usable capacity,
    /// failures tolerated and the expected rebuild time of one member.
    Show(SimShowArgs),
    /// Run raidlab's real engine over in-memory members under random
    /// configurations, workloads, faults and power cuts, deterministically
    /// from a seed, checking every byte against a model (docs/reliability.md).
    Torture(SimTortureArgs),
}

#[derive(Debug, Args)]
pub struct SimTortureArgs {
    /// The seed every run derives from (with its run index).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Runs, each a random configuration, workload and faults.
    #[arg(long, default_value_t = 100)]
    pub runs: u64,
    /// Index of the first run (a failure's replay names it).
    #[arg(long, default_value_t = 0)]
    pub first_run: u64,
    /// Requests and faults per run.
    #[arg(long, default_value_t = 120)]
    pub ops: usize,
    /// Only this RAID level: 0, 1, 4, 5, 6 or 10 (changes every run's draws).
    #[arg(long)]
    pub level: Option<String>,
    /// Leave out the faults that hit the engine's known open gaps: faults
    /// beyond the level's tolerance (docs/reliability.md).
    #[arg(long)]
    pub skip_known_gaps: bool,
    /// Members also leave (every I/O fails) and come back with what they
    /// held: the assembly must leave them out as out of date and re-add them
    /// (changes the draws of the runs where it happens).
    #[arg(long)]
    pub stale_members: bool,
    /// A cache tier (write-back, write-through or write-around) in front of
    /// the array or of a plain in-memory file, drawn per run: the workload
    /// goes through it, and power cuts and stops reopen it with its own
    /// recovery (changes the draws of the runs that have one).
    #[arg(long)]
    pub cache_tier: bool,
    /// Misdirected member I/O: a member write lands at another offset of
    /// that member, or a member read returns another offset's data (md has
    /// no checksums: the check must report the write, the array must hold
    /// nothing of the read; a run ends after a misdirected write). Changes
    /// the draws of the runs where it happens.
    #[arg(long)]
    pub misdirected: bool,
    /// The power also goes inside a request (a write, FUA write,
    /// write-zeroes, flush or clean stop), at one of its member writes: a
    /// cut between a stripe's data and parity, a log and its write, or the
    /// members' superblock writes of one commit (changes the draws of the
    /// runs where it happens; not with a cache tier in front).
    #[arg(long)]
    pub cuts_inside: bool,
    /// Some operations are 2 to 8 requests in flight together (reads,
    /// writes, FUA writes, write-zeroes, trims, a flush), run as tasks of
    /// the real engine that interleave between their plans' steps in a
    /// drawn order, with a member fault, the stripe cache's write-out or a
    /// power cut among them (changes the draws of the runs where it
    /// happens; not with a cache tier in front).
    #[arg(long)]
    pub queue_depths: bool,
    /// Instead of the workload runs: reshapes (`grow` of RAID 4/5/6: more
    /// or fewer members, chunk, layout, both at once, RAID 4 to 5 and back; RAID 0 more
    /// members or chunk; RAID 10 near or offset onto more or fewer
    /// members), the power cut after a random number of member writes,
    /// carried on after each cut; a member may die with the power
    /// (docs/reliability.md).
    #[arg(long, conflicts_with_all = ["stale_members", "cache_tier", "misdirected", "cuts_inside", "queue_depths", "level"])]
    pub reshapes: bool,
    /// Instead of the tallies: save the final member images of the first
    /// passed run of each class (level and policy) among the runs, one
    /// directory per run under DIR (the active members in role order, the
    /// journal device, and `expected.bin`, raidlab's read at the run's
    /// end), and print what was saved as JSON. For the real md to judge
    /// (the VM test); a run that fails is reported and the exit status is 1.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["cache_tier", "reshapes", "misdirected"])]
    pub save_images: Option<std::path::PathBuf>,
    /// Shrink every failing run: replay it with operations left out (each
    /// kept one drawing what it drew in the full run) until no operation
    /// can go and it still fails the same way; print the shrunk run's
    /// events.
    #[arg(long, conflicts_with_all = ["reshapes", "save_images"])]
    pub shrink: bool,
    /// Replays a shrink may try per failing run.
    #[arg(long, default_value_t = 3000, value_name = "N")]
    pub shrink_budget: usize,
    /// With --shrink: save each shrunk run under DIR as
    /// `seed-S-run-R.toml`, a script `--script` replays and the test
    /// `raidlab-sim/tests/regressions.rs` keeps (put it in
    /// crates/raidlab-sim/tests/regressions/).
    #[arg(long, value_name = "DIR", requires = "shrink")]
    pub save_shrunk: Option<std::path::PathBuf>,
    /// Replay a saved shrunk run (a TOML file --save-shrunk wrote) instead
    /// of a sweep: its events and its outcome; the exit status is 1 when
    /// it fails.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["reshapes", "save_images", "shrink"])]
    pub script: Option<std::path::PathBuf>,
    /// Print each run's outcome as it ends.
    #[arg(long, short = 'v')]
    pub verbose: bool,
}

#[derive(Debug, Args)]
pub struct SimDevicesArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SimShowArgs {
    /// The configuration: what follows `sim:` in a benchmark target. A device
    /// preset (`hdd-7200`), `LEVEL:NxPRESET[:chunk=SIZE][:layout=NAME]
    /// [:failed=R,..][:stripe-cache=N][:card=NAME[/pass-through]]
    /// [:rebuild=R[:rebuild-rate=SIZE][:rebuild-from=SIZE]]
    /// [:check=yes|repair[:check-rate=SIZE][:check-from=SIZE]]
    /// [:mismatch=ROLE@OFFSET+LENGTH,..][:bitmap=SIZE|internal]` (mismatch:
    /// that role's bytes there differ from what its stripe or its other copies
    /// say, for a check to count and a repair to rewrite; RAID 1, 4, 5, 6, 10;
    /// bitmap: md's internal
    /// write-intent bitmap with SIZE chunks) (`raid6:6xsamsung-hd753lj:chunk=256K`), or a `.toml` file. Either form
    /// of the short one takes `:cache=PRESET[/writeback|writethrough|writearound]`
    /// `[:cache-size=SIZE][:cache-block=SIZE][:cache-cutoff=SIZE]`: raidlab's
    /// SSD cache tier, on that device, in front (`hdd-7200:cache=intel-520`).
    pub config: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}
