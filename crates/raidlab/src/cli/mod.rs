//! Argument definitions, the top-level commands here and the larger verb
//! families in their own files (`sim.rs`, `manage.rs`, `serve.rs`,
//! `cache.rs`). Sizes are parsed with raidlab-core's size parser so every
//! command accepts the same `4K`/`512M`/`2G` forms.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

mod cache;
mod manage;
mod serve;
mod sim;

pub use cache::{
    CacheCommand, CacheCreateArgs, CacheDetailArgs, CacheMode, CacheOrigin, CacheOriginArgs,
    CacheSetArgs, CacheStatsArgs,
};
pub use manage::{
    AddArgs, FailArgs, GrowArgs, GrowBitmap, RemoveArgs, ReplaceArgs, RunArgs, RunControl,
    ScrubArgs,
};
pub use serve::ServeArgs;
pub use sim::{SeedsArgs, SimCommand, SimDevicesArgs, SimShowArgs, SimTortureArgs};

fn size(s: &str) -> Result<u64, String> {
    raidlab_core::size::parse_size(s).map_err(|e| e.message)
}

#[derive(Debug, Parser)]
#[command(
    name = "raidlab",
    version,
    about = "User-space software RAID compatible with Linux md",
    long_about = "raidlab builds, reads and explains Linux md arrays (RAID 0/1/4/5/6/10, md v1.0, v1.1 and v1.2 superblocks) on plain files or block devices, without the kernel's md driver."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// How member I/O is submitted: `uring` (a step's requests to direct
    /// members sent together through io_uring, no thread per request;
    /// buffered members and writes to direct regular files stay on threads,
    /// which measured faster there), `threads` (a pool of I/O threads), or
    /// `auto`: io_uring when the kernel allows it (a probe ring completes a
    /// no-op and a read), threads otherwise, for kernels without io_uring
    /// and containers whose seccomp profile refuses it. `detail` and
    /// `serve` say which is in use and why.
    #[arg(long, global = true, value_name = "HOW", default_value = "auto", value_parser = member_io)]
    pub member_io: raidlab_raid::exec::MemberIo,
}

fn member_io(s: &str) -> Result<raidlab_raid::exec::MemberIo, String> {
    s.parse()
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create an array on member files or block devices (writes md superblocks:
    /// --metadata 0.90, 1.0, 1.1 or 1.2).
    Create(CreateArgs),
    /// Print each member's superblock, with the fields mdadm --examine shows.
    Examine(MembersJson),
    /// Assemble the members (any order) and print the array's state.
    Detail(DetailArgs),
    /// Write the array's logical contents to a file or stdout (works degraded).
    Export(ExportArgs),
    /// Write data into the array from a file or stdin, updating parity.
    Import(ImportArgs),
    /// Print the I/O plan the engine carries out for one request; for a
    /// sequence of requests, the member I/O a served array issues for each,
    /// superblock and bitmap writes included.
    Explain(ExplainArgs),
    /// Mark a member faulty (a hot spare takes over and is rebuilt at once).
    Fail(FailArgs),
    /// Take a faulty, stale or spare member out of the array.
    Remove(RemoveArgs),
    /// Add a member: into a missing slot (then rebuilt) or as a hot spare; a
    /// former member goes back into its old role with only the bitmap's dirty
    /// chunks resynced when it can (re-add).
    Add(AddArgs),
    /// Copy a working member onto a new one while the array keeps full redundancy.
    Replace(ReplaceArgs),
    /// Change an array in place, as mdadm --grow does: --size (use more or
    /// less of each member; RAID 1/4/5/6 and RAID 10 near or offset),
    /// --bitmap internal|none, --consistency-policy
    /// resync|ppl (RAID 5), --raid-devices and --level 5 of a RAID 1, for a RAID 4/5/6
    /// more or fewer (with --array-size) members, --chunk, --layout, --level
    /// 4|5|6, for a RAID 0 more or fewer (with --array-size) members,
    /// --chunk, --level 4|5, and for a RAID 10 near or offset more or fewer
    /// (with --array-size) members, --chunk, and --layout between near and
    /// offset with the same copies (restriped offline; --continue resumes).
    /// A RAID 4/5/6's --raid-devices goes with --chunk and --layout in one
    /// reshape, as md makes it (more or fewer members and the new chunk or
    /// layout at once), and a RAID 10's and a RAID 0's more or fewer
    /// members too. Other restriping (other levels) is refused: not built
    /// yet; so are a
    /// RAID 10's far layout and another number of copies, as md refuses
    /// them.
    #[command(after_help = GROW_HELP)]
    Grow(GrowArgs),
    /// Rebuild members being recovered (resumes where an earlier run stopped).
    Rebuild(RunArgs),
    /// Make parity and mirrors consistent after an unclean stop or initial create.
    Resync(RunArgs),
    /// Scrub: read everything and count mismatches (exit status 3 if any). A
    /// degraded array is checked with the redundancy it has left.
    Check(ScrubArgs),
    /// Scrub and rewrite what differs (RAID 6 also corrects a located bad data
    /// block; degraded, it rewrites only the parity it could check).
    Repair(ScrubArgs),
    /// Find md members (metadata 0.90, 1.0, 1.1, 1.2) in files, block devices,
    /// the partitions of whole-disk images and the files of directories, group
    /// them into arrays and print each with the command that exports it.
    Scan(ScanArgs),
    /// Serve arrays, files or block devices to NBD clients (Unix socket by default).
    Serve(ServeArgs),
    /// Stop the server (`raidlab serve`) serving this array: requests in flight
    /// finish, every export is flushed and arrays are marked clean.
    Stop(MembersJson),
    /// Benchmarks. With no subcommand: the source articles' experiments, simulated
    /// (`raidlab seeds`), with the HTML report; `bench files` is the real-file
    /// RAID 5 against one member.
    Bench(BenchArgs),
    /// Make one self-contained HTML page (charts, tables) and optionally a CSV from
    /// benchmark result files.
    Report(ReportArgs),
    /// SSD cache tier, offline on the devices: create a cache in front of an
    /// array or a file, show it, write its dirty blocks back, change it, detach it.
    #[command(subcommand)]
    Cache(CacheCommand),
    /// Simulated hardware: the device presets, and what a simulated
    /// configuration is made of. Benchmarks take simulated targets as `sim:SPEC`.
    #[command(subcommand)]
    Sim(SimCommand),
    /// The source articles' experiments (SEEDS.md A to E) in virtual time on
    /// simulated hardware: each article's figures beside the simulated ones, and
    /// each finding marked reproduced or not (docs/seeds.md).
    Seeds(SeedsArgs),
    /// Watch served arrays and named member sets; report mdadm's monitor
    /// events (Fail, DegradedArray, RebuildStarted, ...) to stdout, a program,
    /// mail and syslog.
    #[command(after_help = MONITOR_HELP)]
    Monitor(MonitorArgs),
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Result files written by `raidlab bench` (format raidlab-bench/1); rows of
    /// all files are merged into one report.
    #[arg(required = true, value_name = "RESULT.json")]
    pub results: Vec<PathBuf>,
    /// The HTML page to write (one file, no network needed to view it).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: PathBuf,
    /// Also write every row as CSV to this file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Compare every suite that measured it with this target (its label as the
    /// page shows it); default: the result's own baseline, else its first target.
    #[arg(long, value_name = "TARGET")]
    pub baseline: Option<String>,
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// RAID level: linear, 0, 1, 4, 5, 6 or 10 (also raid0, raid5, mirror, ...);
    /// RAID 0 over members of different sizes is md's multi-zone RAID 0.
    #[arg(long, short = 'l')]
    pub level: String,
    /// Layout: RAID 5/6 left-symmetric (default), left-asymmetric, right-symmetric,
    /// right-asymmetric, parity-first, parity-last; RAID 10 n2 (default), f2, o2, n3, ...
    #[arg(long, short = 'p')]
    pub layout: Option<String>,
    /// Chunk size, a power of two of at least 4K.
    #[arg(long, short = 'c', default_value = "512K", value_parser = size)]
    pub chunk: u64,
    /// The last K members become hot spares.
    #[arg(long, short = 'x', default_value_t = 0)]
    pub spares: usize,
    /// Array name stored in the superblocks.
    #[arg(long, short = 'N', default_value = "")]
    pub name: String,
    /// Size of member files that do not exist yet (created sparse).
    #[arg(long, value_parser = size)]
    pub member_size: Option<u64>,
    /// Overwrite members that already carry an md superblock; allow fewer members
    /// than the level normally needs.
    #[arg(long, short = 'f')]
    pub force: bool,
    /// How consistency is kept after an unclean stop, as mdadm's option: `resync`
    /// (resync everything) or `bitmap` (an internal write-intent bitmap: resync only
    /// what was being written) or `ppl` (RAID 5: md's partial parity log, which
    /// closes the write hole and needs no resync) or `journal` (RAID 4/5/6: md's
    /// write journal on the --write-journal device, write-through; closes the
    /// write hole, RAID 6 included). Default as mdadm: journal with
    /// --write-journal, else bitmap for arrays of 100 GiB and more, else resync.
    #[arg(long)]
    pub consistency_policy: Option<String>,
    /// A device (or file) for md's write journal (RAID 4/5/6), as mdadm's
    /// --write-journal: every stripe write goes to it first, so a crash cannot
    /// tear a stripe. Best on a fast device; it must not be a member.
    #[arg(long, value_name = "DEV")]
    pub write_journal: Option<PathBuf>,
    /// Bytes of each member per bitmap bit (default: mdadm's choice, 64M or more).
    #[arg(long, value_parser = size)]
    pub bitmap_chunk: Option<u64>,
    /// Where the md superblock goes, as mdadm's --metadata: 1.2 (4 KiB from the
    /// start, the default), 1.1 (at the start) or 1.0 (at the end: the data
    /// starts at sector 0, so a RAID 1 member reads as a plain file system) or
    /// 0.90 (the old format, near the end: at most 27 devices and 4 TiB per
    /// member, no bitmap).
    #[arg(
        long,
        short = 'e',
        default_value = "1.2",
        value_name = "0.90|1.0|1.1|1.2"
    )]
    pub metadata: String,
    #[command(flatten)]
    pub io: MemberIoArgs,
    /// Member files or block devices (or `IMAGE@N` partitions), in role order.
    #[arg(required = true)]
    pub members: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ScanArgs {
    /// Files, block devices, whole-disk images (their partitions are looked
    /// into) or directories (their files, not recursively).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `raidlab detail`: the members, and for a served array `--watch`.
#[derive(Debug, Args)]
pub struct DetailArgs {
    #[command(flatten)]
    pub members: MembersJson,
    /// For an array `raidlab serve` serves: redraw its live figures (state,
    /// members, rebuild/check progress with rate and ETA, per-member I/O)
    /// every --interval seconds until Ctrl-C.
    #[arg(long, short = 'w')]
    pub watch: bool,
    /// Seconds between redraws with --watch.
    #[arg(long, default_value_t = 1.0, requires = "watch", value_parser = interval)]
    pub interval: f64,
}

fn interval(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.1..=3600.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?}: give seconds between 0.1 and 3600")),
    }
}

#[derive(Debug, Args)]
pub struct MembersJson {
    /// Member files or block devices.
    #[arg(required = true)]
    pub members: Vec<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The array `export` and `import` move bytes out of and into: its members,
/// some possibly missing, and whether it may start degraded after an unclean
/// stop. Declared where `--force` stands in their help, so that the options
/// keep their order; the members are the only positional argument either way.
#[derive(Debug, Args)]
pub struct TransferArray {
    /// Member files or devices; `missing` (or leaving one out) marks an absent member.
    #[arg(required = true)]
    pub members: Vec<PathBuf>,
    /// Start a degraded array that was not shut down cleanly (its rebuilt data may
    /// be wrong).
    #[arg(long, alias = "start-degraded-dirty")]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Output file (default: stdout).
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// Array offset to start at.
    #[arg(long, default_value = "0", value_parser = size)]
    pub offset: u64,
    /// Bytes to export (default: to the end of the array).
    #[arg(long, value_parser = size)]
    pub length: Option<u64>,
    #[command(flatten)]
    pub array: TransferArray,
    /// Keep going past ranges that no member can read and redundancy cannot
    /// rebuild: write zeros there, list them at the end (exit status 4).
    #[arg(long)]
    pub ignore_read_errors: bool,
    /// With --ignore-read-errors (implied): also write a GNU ddrescue map file
    /// of what was read (+) and what was not (-), in array offsets.
    #[arg(long, value_name = "FILE")]
    pub map_file: Option<PathBuf>,
    /// The backup file of a metadata 0.90 reshape stopped part-way (one
    /// started with `grow --backup-file`: a new chunk or layout over the
    /// same members, fewer members, or more members with the file), which
    /// is refused without it, as md refuses to assemble it. As `mdadm
    /// --assemble --backup-file` does, the window the file holds is put
    /// back into the members first: this writes the members (and the
    /// file's record), then the array is read. The array stays mid-reshape
    /// and needs the file again: finish it with `grow --continue
    /// --backup-file FILE`.
    #[arg(long, value_name = "FILE")]
    pub backup_file: Option<PathBuf>,
    #[command(flatten)]
    pub io: MemberIoArgs,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Input file (default: stdin).
    #[arg(long, short = 'i')]
    pub input: Option<PathBuf>,
    /// Array offset to write at.
    #[arg(long, default_value = "0", value_parser = size)]
    pub offset: u64,
    #[command(flatten)]
    pub array: TransferArray,
    #[command(flatten)]
    pub stripe: StripeCacheArgs,
    #[command(flatten)]
    pub io: MemberIoArgs,
}

/// How the members' bytes move, for the verbs that open members: `--direct`
/// (O_DIRECT: a member's write error comes back at that write, nothing is
/// cached twice) or `--buffered` (the page cache). Default: block devices
/// direct, regular files buffered (images and test files; ramfs and tmpfs
/// before Linux 6.6 refuse O_DIRECT, and whether a file system caches the
/// files under it is the user's choice).
#[derive(Debug, Clone, Copy, Default, Args)]
#[group(multiple = false)]
pub struct MemberIoArgs {
    /// Open every member with direct I/O (O_DIRECT), files too; a member whose
    /// file system refuses it is an error naming it.
    #[arg(long)]
    pub direct: bool,
    /// Open every member through the page cache, block devices too.
    #[arg(long)]
    pub buffered: bool,
}

impl MemberIoArgs {
    /// The mode asked for; `None`: each member's default.
    pub fn mode(&self) -> Option<raidlab_devices::IoMode> {
        use raidlab_devices::IoMode;
        match (self.direct, self.buffered) {
            (true, _) => Some(IoMode::Direct),
            (_, true) => Some(IoMode::Buffered),
            _ => None,
        }
    }
}

/// The stripe cache of a parity array started for writing (md's
/// stripe_cache_size): partial-stripe writes are held and merged into whole
/// stripes, which are written with no member reads.
#[derive(Debug, Clone, Copy, Args)]
pub struct StripeCacheArgs {
    /// Stripes held at most (each holds one stripe of data: chunk x data
    /// members); 0 turns the stripe cache off.
    #[arg(long, value_name = "STRIPES", default_value_t = 64)]
    pub stripe_cache: usize,
    /// Milliseconds a partial stripe waits for the rest before it is written.
    #[arg(long, value_name = "MS", default_value_t = 20)]
    pub stripe_hold: u64,
    /// Rows (a 4 KiB page of every member) kept in memory after a write, so
    /// that a later write of the row reads them instead of the members
    /// (md's stripe_cache_size; its default); 0 keeps none.
    #[arg(long, value_name = "ROWS", default_value_t = raidlab_raid::kept_rows::MD_ROWS)]
    pub kept_rows: usize,
}

impl StripeCacheArgs {
    pub fn config(&self) -> raidlab_raid::stripe_cache::StripeCacheConfig {
        raidlab_raid::stripe_cache::StripeCacheConfig {
            stripes: self.stripe_cache,
            hold: std::time::Duration::from_millis(self.stripe_hold),
            kept_rows: self.kept_rows,
        }
    }
}

/// md's journal modes, as `--journal-mode` names them (md's sysfs names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum JournalModeArg {
    WriteThrough,
    WriteBack,
}

impl JournalModeArg {
    pub fn mode(self) -> raidlab_raid::journal::JournalMode {
        match self {
            JournalModeArg::WriteThrough => raidlab_raid::journal::JournalMode::WriteThrough,
            JournalModeArg::WriteBack => raidlab_raid::journal::JournalMode::WriteBack,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Direction {
    Read,
    Write,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    #[arg(long, short = 'l')]
    pub level: String,
    #[arg(long, short = 'p')]
    pub layout: Option<String>,
    #[arg(long, short = 'c', default_value = "512K", value_parser = size)]
    pub chunk: u64,
    #[arg(long, short = 'n')]
    pub raid_devices: usize,
    /// Data size of each member (matters for RAID 10 far/offset layouts).
    #[arg(long, default_value = "1G", value_parser = size)]
    pub member_size: u64,
    /// Member roles to treat as missing (repeat the flag or separate with commas).
    #[arg(long, value_delimiter = ',')]
    pub missing: Vec<usize>,
    #[arg(long)]
    pub json: bool,
    pub direction: Direction,
    #[arg(value_parser = size)]
    pub offset: u64,
    #[arg(value_parser = size)]
    pub length: u64,
    /// More requests after the first, each `read|write OFFSET LENGTH`: the
    /// sequence goes through a running array's stripe cache and the member
    /// I/O each request causes is shown (what merging into whole stripes does).
    #[arg(value_name = "MORE")]
    pub more: Vec<String>,
    /// Show a single request through the stripe cache too (partial stripes
    /// are held until the end of the sequence, then flushed).
    #[arg(long)]
    pub stripe_cache: bool,
    /// With md's internal write-intent bitmap: a sequence (this flag makes
    /// one of a single request) shows the bitmap writes each write causes,
    /// beside the superblocks the first write marks dirty.
    #[arg(long)]
    pub bitmap: bool,
    /// Bytes of each member per bitmap bit (mdadm's --bitmap-chunk; default:
    /// mdadm's choice).
    #[arg(long, value_parser = size, requires = "bitmap")]
    pub bitmap_chunk: Option<u64>,
    /// The array is in the middle of a reshape (RAID 4, 5, 6 or 10): the
    /// array byte where the old geometry (the options above) and the new
    /// one (the --to-* options) meet, md's reshape_position. The request
    /// is cut there as the array cuts it, and each piece planned on its
    /// side's geometry. A reshape to fewer data members runs backwards, as
    /// md runs it: the new geometry holds the bytes from the position on.
    #[arg(long, value_parser = size)]
    pub position: Option<u64>,
    /// Mid-reshape: the member count the array is being reshaped to.
    #[arg(long)]
    pub to_raid_devices: Option<usize>,
    /// Mid-reshape: the chunk the array is being reshaped to.
    #[arg(long, value_parser = size)]
    pub to_chunk: Option<u64>,
    /// Mid-reshape: the layout the array is being reshaped to.
    #[arg(long)]
    pub to_layout: Option<String>,
    /// Mid-reshape with as many data members before as after (a new chunk
    /// or layout): the reshape runs backwards (md's choice when the data
    /// moves towards the end of the members), so the new geometry holds
    /// the bytes from the position on.
    #[arg(long, requires = "position")]
    pub backwards: bool,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: Option<BenchCommand>,
    #[command(flatten)]
    pub main: BenchMainArgs,
}

/// `raidlab bench` with no subcommand: the seeds, simulated.
#[derive(Debug, Args)]
pub struct BenchMainArgs {
    /// Directory to write the result files and the HTML report to.
    #[arg(long, default_value = ".")]
    pub output: PathBuf,
    /// Print the JSON result instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Only these seeds (hidden: lets tests run the main job fast).
    #[arg(long, hide = true, value_delimiter = ',')]
    pub seeds: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Measure the parity engines on this CPU (XOR, P+Q, two-block recovery).
    Parity(BenchParityArgs),
    /// The CrystalDiskMark 8 test set on one or more targets, side by side.
    Cdm(crate::cmd::benchmarks::CdmArgs),
    /// Run a fio job file (several jobs at once, stonewall groups) and report as fio.
    Job(crate::cmd::benchmarks::JobArgs),
    /// Bonnie++'s block, rewrite, seek and file tests, with its CSV line.
    Bonnie(crate::cmd::benchmarks::BonnieArgs),
    /// IOzone's record-size x file-size matrix, with its -R report.
    Iozone(crate::cmd::benchmarks::IozoneArgs),
    /// Replay a recorded block I/O trace (fio iolog v2/v3, blkparse text).
    Replay(crate::cmd::benchmarks::ReplayArgs),
    /// The real-file comparison (the main job before the seeds): a 4-member
    /// RAID 5 against one member, in a temporary directory, CrystalDiskMark set.
    Files(crate::cmd::benchmarks::QuickArgs),
}

#[derive(Debug, Args)]
pub struct BenchParityArgs {
    #[arg(long, default_value_t = 8)]
    pub data_disks: usize,
    #[arg(long, default_value = "64K", value_parser = size)]
    pub chunk: u64,
    /// Seconds to spend on each engine and operation.
    #[arg(long, default_value_t = 0.3)]
    pub seconds: f64,
    #[arg(long)]
    pub json: bool,
}

const GROW_HELP: &str =
    "One change per run, offline (a served array is refused: `raidlab stop` it first).
Examples:
  raidlab grow m0.img m1.img --size max          # members were grown: use all of them
  raidlab grow m0.img m1.img m2.img m3.img --size 1G   # RAID 10 near/offset too (never far, as md)
  raidlab grow m0.img m1.img --bitmap internal   # add md's write-intent bitmap
  raidlab grow m0.img m1.img m2.img --consistency-policy ppl
  raidlab grow m0.img m1.img --raid-devices 3 --add m2.img --member-size 1G
  raidlab grow m0.img m1.img m2.img --raid-devices 4 --add m3.img   # RAID 5: restripe
  raidlab grow m0.img m1.img m2.img m3.img --chunk 256K             # restripe to a new chunk
  raidlab grow m0.img m1.img m2.img -n 4 --chunk 128K --add m3.img   # both in one reshape, as md
  raidlab grow m0.img m1.img m2.img m3.img --layout right-asymmetric
  raidlab grow m0.img m1.img m2.img m3.img --layout o2 --chunk 256K # RAID 10 near=2 to offset=2
  raidlab grow m0.img m1.img m2.img m3.img --level 5                # RAID 4 to 5 (takeover)
  raidlab grow m0.img m1.img m2.img m3.img --level 6 --add m4.img   # RAID 5 to 6 (Q on m4)
  raidlab grow m0.img m1.img m2.img --level 5 --add m3.img          # RAID 0 to 5 (parity on m3)
  raidlab grow m0.img m1.img m2.img m3.img m4.img -n 4 --array-size 96M   # shrink (RAID 0/4/5/6, 10)
  raidlab grow m0.img m1.img m2.img m3.img --continue               # finish an interrupted one";

const SERVE_HELP: &str = r#"Configuration file (--config), TOML:

    socket = "/run/raidlab-nbd.sock"   # optional listeners, as the flags
    tcp = true                         # 127.0.0.1, port below
    port = 10809
    # listen = "0.0.0.0:10809"         # any address (no TLS: a warning)
    max_connections = 64
    # tls_cert = "server-cert.pem"     # TLS via STARTTLS, as the --tls-* flags
    # tls_key = "server-key.pem"
    # tls_client_ca = "ca-cert.pem"
    # tls_require = true
    # metrics = "127.0.0.1:9310"       # Prometheus endpoint, as --metrics
    # metrics_allow_remote = false     # as --metrics-allow-remote

    [[export]]
    name = "r5"
    members = ["/dev/sdb", "/dev/sdc", "/dev/sdd"]
    read_only = false                  # optional
    force = false                      # optional: start dirty and degraded
    # backup_file = "/root/r5.bak"     # optional: a stopped 0.90 restripe's, as --backup-file
    stripe_cache = 64                  # optional: stripes held (0: off), as --stripe-cache
    stripe_hold_ms = 20                # optional: as --stripe-hold
    kept_rows = 256                    # optional: rows kept after a write, as --kept-rows
    journal_mode = "write-through"     # optional: or "write-back", as --journal-mode
    io = "direct"                      # optional: "direct" or "buffered", as
                                       # --direct/--buffered (which apply to
                                       # exports without this key); default:
                                       # block devices direct, files buffered

    [[export]]
    name = "scratch"
    file = "/srv/scratch.img"          # a plain file or block device

    [[export]]
    name = "cached"
    members = ["/dev/sde", "/dev/sdf", "/dev/sdg"]   # or file = "..."
    cache = "/dev/nvme0n1p1"           # a cache made by `raidlab cache create`

Flags given on the command line win over the file's listeners.

Reads and writes go up to 32 MiB, the maximum block size advertised to
clients; a longer one gets EINVAL (a write's payload is read and dropped, so
the connection carries on), but a write over 64 MiB ends the connection.
TRIM and WRITE_ZEROES carry no payload and may be longer: they are carried out.
Stop with SIGTERM, Ctrl-C or `raidlab stop MEMBER...`: requests in flight
finish, arrays are flushed and marked clean. After a crash the next start
resyncs the array before serving.

While serving, `raidlab detail|fail|remove|add|replace|rebuild|check|repair`
given the array's members act on the served array (a control socket in
$RAIDLAB_RUN_DIR, else $XDG_RUNTIME_DIR/raidlab, else /tmp/raidlab-UID). A hot
spare takes over a failed member at once; rebuilds run in the server and
`detail` shows their progress. Rebuilds of arrays with a partial parity
log or a write journal are refused while served: stop the server to rebuild
those.

A cached export (--cache DEV, or `cache = "DEV"`) opens the origin as it
would be served alone, then the cache in front of it (refused: another origin,
a resized one, a detached cache, --read-only), and cleans in the background.
While serving, `raidlab cache detail|stats|flush|set|detach --cache DEV ...`
act on the running cache; the array verbs given the members act on the array
under it. A detach writes every dirty block back (with progress) and the export
goes on serving the origin directly. The stop shuts the cache down cleanly
(dirty blocks stay, recorded), then the origin."#;

#[derive(Debug, Args)]
pub struct MonitorArgs {
    /// The members of one array to watch (any order); served or not.
    pub members: Vec<PathBuf>,
    /// Watch what a TOML file names (format below).
    #[arg(long, short = 'c')]
    pub config: Option<PathBuf>,
    /// Also watch every array a `raidlab serve` of this user serves (implied
    /// when no array is named).
    #[arg(long)]
    pub scan: bool,
    /// Seconds between polls (fractions allowed).
    #[arg(long, short = 'd', value_parser = positive_seconds)]
    pub delay: Option<f64>,
    /// Poll once, report, exit.
    #[arg(long, short = '1')]
    pub oneshot: bool,
    /// A TestMessage event for every watched array at the first poll.
    #[arg(long, short = 't')]
    pub test: bool,
    /// Run this program for each event: `PROGRAM EVENT ARRAY [MEMBER]`.
    #[arg(long, short = 'p', value_name = "PROGRAM")]
    pub program: Option<PathBuf>,
    /// Mail Fail, FailSpare, DegradedArray, SparesMissing and TestMessage
    /// events to this address through sendmail.
    #[arg(long, short = 'm', value_name = "ADDRESS")]
    pub mail: Option<String>,
    /// The From: of those mails.
    #[arg(long, value_name = "ADDRESS")]
    pub mail_from: Option<String>,
    /// The sendmail to run as `SENDMAIL -t` (else $RAIDLAB_SENDMAIL, else
    /// /usr/sbin/sendmail).
    #[arg(long, value_name = "PATH")]
    pub sendmail: Option<PathBuf>,
    /// Log every event to syslog/journald through /dev/log.
    #[arg(long, short = 'y')]
    pub syslog: bool,
    /// Report RebuildNN every this many percent.
    #[arg(long, short = 'r', value_parser = clap::value_parser!(u8).range(1..=99))]
    pub increment: Option<u8>,
}

fn positive_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!(
            "{s:?} is not a number of seconds above 0 and at most 86400"
        )),
    }
}

const MONITOR_HELP: &str = r#"Configuration file (--config), TOML:

    scan = true                        # also watch every served array
    delay = 60                         # seconds between polls
    program = "/usr/local/sbin/raid-event"
    mail = "root@localhost"
    # mail_from = "raidlab on host <root>"
    # sendmail = "/usr/sbin/sendmail"
    syslog = true
    increment = 20

    [[array]]
    name = "r5"                        # optional: the name events give (else its UUID)
    members = ["/dev/sdb", "/dev/sdc", "/dev/sdd", "/dev/sde"]
    spares = 1                         # optional: SparesMissing with fewer

Flags win over the file; relative member paths in it are taken from its
directory. Arrays a `raidlab serve` serves are asked through
its control socket; other named arrays are assembled read-only at each poll
(nothing is written). An array found by scanning is named by its export.

Events, as mdadm --monitor names them: Fail, FailSpare, SpareActive,
DegradedArray, RebuildStarted, RebuildNN, RebuildFinished, SparesMissing,
DeviceDisappeared, NewArray, TestMessage; and CacheDirtyAboveTarget for a
cache whose dirty share exceeds its dirty target, CacheDeviceFailed for a
cache whose device failed (I/O errors). Exit status 1 when
nothing is there to watch."#;
