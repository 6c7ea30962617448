//! `raidlab bench cdm`, `bonnie`, `iozone`, `job`, `replay` and `raidlab bench`
//! with no target: argument checking, progress, Ctrl-C, and printing (several
//! targets side by side through raidlab-bench's `table`). What runs and how it
//! is summarised lives in raidlab-bench; this file never measures anything
//! itself.

use super::bench_compare::{
    baseline_index, conditions_cdm, conditions_once, finish_report, print_comparison,
    print_job_conditions,
};
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use raidlab_bench::cdm::{self, CdmConfig, CdmTargetResult, Event, Profile};
use raidlab_bench::target::{create_array, open_member_file};
use raidlab_bench::{BenchReport, Control, DataFill, EngineKind, OpenOptions, Target};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Exit status after Ctrl-C, as a shell reports a SIGINT death; the figures
/// measured until then are still printed.
const INTERRUPTED_EXIT: u8 = 130;

/// The one stop switch Ctrl-C flips; every run watches it.
static CONTROL: Control = Control::new();

fn size(s: &str) -> Result<u64, String> {
    raidlab_core::size::parse_size(s).map_err(|e| e.message)
}

fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=3600.0).contains(&v) => Ok(v),
        _ => Err(format!("'{s}' is not a number of seconds from 0 to 3600")),
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum EngineArg {
    /// io_uring for files and devices where the kernel allows it, else threads.
    Auto,
    /// io_uring, or an error saying why not.
    IoUring,
    /// One blocking worker thread per queue slot.
    Threads,
}

/// How targets are opened and driven (shared by the bench verbs).
#[derive(Debug, Clone, Args)]
pub struct IoArgs {
    /// Go through the page cache instead of O_DIRECT for files and devices.
    #[arg(long)]
    pub buffered: bool,
    /// I/O engine.
    #[arg(long, value_enum, default_value = "auto")]
    pub engine: EngineArg,
    /// Allow write tests on a block device (they destroy its contents).
    #[arg(long)]
    pub write_device: bool,
}

impl IoArgs {
    fn engine(&self) -> EngineKind {
        match self.engine {
            EngineArg::Auto => EngineKind::Auto,
            EngineArg::IoUring => EngineKind::Uring,
            EngineArg::Threads => EngineKind::Threads,
        }
    }
}

#[derive(Debug, Args)]
pub struct CdmArgs {
    /// Targets: a directory (a test file is made there), a file, a block device,
    /// `array:M0,M1,...` (an array by its members, run in-process),
    /// `mem:SIZE[,bw=RATE][,iops=N]`, or simulated hardware in virtual time:
    /// `sim:PRESET` (one device; `raidlab sim devices` lists them),
    /// `sim:LEVEL:NxPRESET[:chunk=SIZE][:layout=NAME][:failed=R,..]
    /// [:stripe-cache=N][:member-size=SIZE][:card=CARD[/pass-through]]`
    /// (raidlab's engine on simulated members, or a RAID card running the array)
    /// or `sim:FILE.toml`. Several targets are run one after another and printed
    /// side by side; simulated ones are marked "(simulated)".
    #[arg(required = true)]
    pub targets: Vec<String>,
    /// CrystalDiskMark profile: default, peak, real-world or nvme.
    #[arg(long, default_value = "default")]
    pub profile: String,
    /// Test file size (a device or array smaller than this is used whole).
    #[arg(long, default_value = "1G", value_parser = size)]
    pub size: u64,
    /// Runs per test; the best is reported, the average beside it.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Seconds each run measures.
    #[arg(long, default_value = "5", value_parser = seconds)]
    pub measure: f64,
    /// Seconds of idle time between tests.
    #[arg(long, default_value = "5", value_parser = seconds)]
    pub interval: f64,
    /// Write zeros instead of random data (CrystalDiskMark's "0Fill").
    #[arg(long)]
    pub zero_fill: bool,
    /// Run only the read tests.
    #[arg(long, conflicts_with = "write_only")]
    pub read_only: bool,
    /// Run only the write tests.
    #[arg(long)]
    pub write_only: bool,
    /// Also run CrystalDiskMark's Mix column: each test with 70% reads and 30%
    /// writes (MB/s, IOPS and latency count both directions).
    #[arg(long, conflicts_with_all = ["read_only", "write_only"])]
    pub mix: bool,
    /// Also write the results in CrystalDiskMark's "Save text" layout to FILE
    /// (MB/s to three decimals, IOPS to one, latency in µs to two).
    #[arg(long, value_name = "FILE")]
    pub save_text: Option<PathBuf>,
    #[command(flatten)]
    pub io: IoArgs,
    /// The target the others are compared with, as given on the command line
    /// (default: the first): each test's ratio to it, and in words, after the
    /// tables and in the JSON for `raidlab report`.
    #[arg(long, value_name = "TARGET")]
    pub baseline: Option<String>,
    /// Print the raidlab-bench/1 JSON result instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OutputFormat {
    /// raidlab's raidlab-bench/1 object (with --json) or a table.
    Normal,
    /// fio's JSON shape (`{"fio version": ..., "jobs": [...]}`) with --json.
    Fio,
}

#[derive(Debug, Args)]
pub struct JobArgs {
    /// A fio job file. A job's `filename` may be any raidlab target (a file, a
    /// device, `array:M0,M1,...`, `mem:SIZE`).
    pub file: PathBuf,
    /// With --json: `fio` prints fio's JSON shape, `normal` the raidlab-bench/1 object.
    #[arg(long, value_enum, default_value = "normal")]
    pub output_format: OutputFormat,
    /// Override every job's ioengine.
    #[arg(long, value_enum)]
    pub engine: Option<EngineArg>,
    /// Allow jobs to write to block devices (destroys their contents).
    #[arg(long)]
    pub write_device: bool,
    /// The target (a job's `filename`, as written in the job file; default: the
    /// first job's) the others are compared with: each job on another target is
    /// compared with the baseline's job of the same workload (rw, bs, iodepth,
    /// numjobs), in words after the table and in the JSON for `raidlab report`.
    #[arg(long, value_name = "TARGET")]
    pub baseline: Option<String>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn job(a: JobArgs) -> Result<ExitCode> {
    let jobs = raidlab_bench::fio::parse_file(&a.file)?;
    let mut specs: Vec<String> = Vec::new();
    for t in jobs.iter().filter_map(|j| j.target()) {
        if !specs.contains(&t) {
            specs.push(t);
        }
    }
    let base = baseline_index(a.baseline.as_deref(), &specs)?;
    // Differences from fio, on stderr so that JSON output stays parseable.
    let mut said: Vec<&str> = Vec::new();
    for j in &jobs {
        for n in &j.notes {
            if !said.contains(&n.as_str()) {
                eprintln!("note: job [{}]: {n}", j.name);
                said.push(n);
            }
        }
    }
    install_ctrlc();
    let engine = a.engine.map(|e| match e {
        EngineArg::Auto => EngineKind::Auto,
        EngineArg::IoUring => EngineKind::Uring,
        EngineArg::Threads => EngineKind::Threads,
    });
    let pb = std::io::stderr().is_terminal().then(|| {
        let pb = ProgressBar::new_spinner();
        pb.enable_steady_tick(Duration::from_millis(200));
        pb
    });
    let results = raidlab_bench::fio::run(&jobs, a.write_device, engine, &CONTROL, &mut |g, js| {
        if let Some(pb) = &pb {
            let names: Vec<&str> = js.iter().map(|j| j.name.as_str()).collect();
            pb.set_message(format!("group {g}: {}", names.join(", ")));
        }
    })
    .with_context(|| format!("job file {}", a.file.display()))?;
    if let Some(pb) = &pb {
        pb.finish_and_clear();
    }
    let mut report = raidlab_bench::fio::report(&results);
    // A baseline whose jobs were not run (Ctrl-C before them) is left out.
    report.baseline = specs
        .get(base)
        .filter(|b| report.targets.contains(b))
        .cloned();
    if a.json {
        let v = match a.output_format {
            OutputFormat::Fio => raidlab_bench::fio::fio_json(&results),
            OutputFormat::Normal => serde_json::to_value(&report)?,
        };
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        outln!(
            "{:<20} {:<5} {:>10} {:>10} {:>10} {:>10} {:>10}  {}",
            "job",
            "",
            "MB/s",
            "IOPS",
            "lat µs",
            "p99 µs",
            "runtime s",
            "target (engine)"
        );
        for r in &results {
            for (d, st) in [("read", &r.read), ("write", &r.write)] {
                if st.ios == 0 {
                    continue;
                }
                let name = if r.clone == 0 {
                    r.job.clone()
                } else {
                    format!("{} #{}", r.job, r.clone)
                };
                outln!(
                    "{:<20} {:<5} {:>10.2} {:>10.1} {:>10.1} {:>10.1} {:>10.2}  {} ({})",
                    name,
                    d,
                    st.mb_s(r.elapsed),
                    st.iops(r.elapsed),
                    st.mean_lat_us(),
                    st.hist.value_at_quantile(0.99) as f64 / 1000.0,
                    r.elapsed.as_secs_f64(),
                    r.target,
                    r.engine
                );
            }
        }
        print_job_conditions(&report)?;
        print_comparison(&report)?;
    }
    Ok(finish_status(CONTROL.stopped()))
}

#[derive(Debug, Args)]
pub struct BonnieArgs {
    /// Targets, as for `bench cdm`, printed side by side; on a directory the file
    /// create/stat/delete tests run there too.
    #[arg(required = true)]
    pub targets: Vec<String>,
    /// File size for the I/O tests (default: twice the RAM, as Bonnie++).
    #[arg(long, value_parser = size)]
    pub size: Option<u64>,
    /// Chunk size of block reads and writes (Bonnie++'s default 8K).
    #[arg(long, default_value = "8K", value_parser = size)]
    pub chunk: u64,
    /// File tests: this many thousand (x1024) files, on directory targets; 0 skips.
    #[arg(long, default_value_t = 16)]
    pub files: usize,
    /// Machine name in the CSV line (default: the host name).
    #[arg(long)]
    pub machine: Option<String>,
    /// Skip the per-character tests (a byte at a time through a buffered
    /// stream), as bonnie++ -f: their CSV fields stay empty.
    #[arg(short = 'f', long)]
    pub fast: bool,
    #[command(flatten)]
    pub io: IoArgs,
    /// The target the others are compared with, as given on the command line
    /// (default: the first): each test's ratio to it, and in words, after the
    /// tables and in the JSON for `raidlab report`.
    #[arg(long, value_name = "TARGET")]
    pub baseline: Option<String>,
    /// Print the raidlab-bench/1 JSON result (the CSV lines are in its details).
    #[arg(long)]
    pub json: bool,
}

pub fn bonnie(a: BonnieArgs) -> Result<ExitCode> {
    use raidlab_bench::bonnie::{self, BonnieConfig};
    if a.chunk == 0 || a.chunk > (64 << 20) || a.chunk % 512 != 0 {
        bail!(
            "--chunk {}: give a multiple of 512 bytes up to 64M",
            a.chunk
        );
    }
    if a.files > 1024 {
        bail!("--files {}: give at most 1024 (thousand files)", a.files);
    }
    let base = baseline_index(a.baseline.as_deref(), &a.targets)?;
    let size = a.size.unwrap_or_else(bonnie::default_size);
    let machine = a
        .machine
        .clone()
        .unwrap_or_else(|| raidlab_bench::Host::this().hostname);
    let cfg = BonnieConfig {
        size,
        chunk: a.chunk as usize,
        seeks: 8192,
        seekers: 5,
        files_k: a.files,
        machine: machine.clone(),
        per_char: !a.fast,
        seed: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        engine: a.io.engine(),
    };
    let opts = OpenOptions {
        size,
        direct: !a.io.buffered,
        writes: true,
        allow_device_writes: a.io.write_device,
    };
    let mut targets = Vec::new();
    for spec in &a.targets {
        let t = Target::open(spec, opts).with_context(|| format!("cannot use target {spec}"))?;
        let dir =
            (t.kind == raidlab_bench::target::TargetKind::Directory).then(|| PathBuf::from(spec));
        targets.push((t, dir));
    }
    install_ctrlc();
    let mut results = Vec::new();
    for (t, dir) in &targets {
        let pb = std::io::stderr().is_terminal().then(|| {
            let pb = ProgressBar::new_spinner();
            pb.set_message(format!("{}: Bonnie++ tests on {} bytes", t.label, t.size));
            pb.enable_steady_tick(Duration::from_millis(200));
            pb
        });
        let r = bonnie::run(t, dir.as_deref(), &cfg, &CONTROL)
            .with_context(|| format!("benchmark of {} failed", t.label))?;
        report_cache(t);
        t.finish()?;
        if let Some(pb) = pb {
            pb.finish_and_clear();
        }
        results.push(r);
        if CONTROL.stopped() {
            break;
        }
    }
    let mut report = bonnie::report(&results, &machine);
    report.simulated = raidlab_bench::sim::models(targets.iter().map(|(t, _)| t));
    let conditions = conditions_once(targets.iter().map(|(t, _)| t), size, a.io.engine);
    finish_report(
        &mut report,
        targets.iter().map(|(t, _)| t),
        base,
        conditions,
    );
    let any_simulated = targets.iter().any(|(t, _)| t.sim.is_some());
    drop(targets);
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(finish_status(CONTROL.stopped()));
    }
    outln!(
        "Bonnie++ tests, chunk {}, 8192 seeks by 5 seekers (MB/s = 10^6 bytes/s; latency = slowest operation)",
        raidlab_core::size::format_size(a.chunk)
    );
    outln!(
        "{}; +++++ marks a test under {} ms, too short to measure, as bonnie++ prints it",
        if a.io.buffered {
            "Through the page cache (--buffered), as bonnie++ runs by default"
        } else {
            "O_DIRECT (raidlab's default; bonnie++ uses it only with -D, so give --buffered to compare with a plain bonnie++ run)"
        },
        bonnie::MIN_TIME.as_millis()
    );
    if a.fast {
        outln!("The per-character tests are skipped (--fast, as bonnie++ -f): their CSV fields are empty");
    } else {
        outln!(
            "Per char: the whole file written, then read, a byte at a time through a {} buffered stream, as the original Bonnie's putc/getc (bonnie++ 2.00a makes a system call per byte on 3 MiB: its per-char figures are far lower, not comparable)",
            raidlab_core::size::format_size(bonnie::STREAM_BUFFER as u64)
        );
        if any_simulated {
            outln!("Simulated targets: no per-character tests (the host's CPU per byte is not simulated); their CSV fields are empty");
        }
    }
    for r in &results {
        outln!(
            "{}: {} file{}",
            r.label,
            raidlab_core::size::format_size(r.size),
            r.files.as_ref().map_or(String::new(), |f| format!(
                ", file tests with {} files",
                f.files
            ))
        );
    }
    outln!("{}", bonnie::table(&results).trim_end());
    outln!("Bonnie++ CSV (for bon_csv2html):");
    for r in &results {
        outln!("{}", bonnie::csv_line(r, &machine));
    }
    print_comparison(&report)?;
    Ok(finish_status(CONTROL.stopped()))
}

#[derive(Debug, Args)]
pub struct IozoneArgs {
    /// Targets, as for `bench cdm`, printed side by side.
    #[arg(required = true)]
    pub targets: Vec<String>,
    /// File sizes: MIN:MAX (powers of two between) or a list (default IOzone's -a:
    /// 64K:512M).
    #[arg(long, default_value = "64K:512M")]
    pub file_sizes: String,
    /// Record sizes: MIN:MAX or a list (default 4K:16M).
    #[arg(long, default_value = "4K:16M")]
    pub record_sizes: String,
    /// Also records under 64K for files over 32M (IOzone's -z).
    #[arg(long)]
    pub all_records: bool,
    /// O_DIRECT (IOzone's -I); buffered otherwise, as IOzone.
    #[arg(long)]
    pub direct: bool,
    /// Count the flush after write tests (IOzone's -e).
    #[arg(long)]
    pub include_flush: bool,
    /// I/O engine.
    #[arg(long, value_enum, default_value = "auto")]
    pub engine: EngineArg,
    /// Allow writing block devices (destroys their contents).
    #[arg(long)]
    pub write_device: bool,
    /// The target the others are compared with, as given on the command line
    /// (default: the first): each test's ratio to it, and in words, after the
    /// tables and in the JSON for `raidlab report`.
    #[arg(long, value_name = "TARGET")]
    pub baseline: Option<String>,
    /// Print the raidlab-bench/1 JSON result instead of the -R report.
    #[arg(long)]
    pub json: bool,
}

pub fn iozone(a: IozoneArgs) -> Result<ExitCode> {
    use raidlab_bench::iozone::{self, parse_sizes, IozoneConfig};
    let io = IoArgs {
        buffered: !a.direct,
        engine: a.engine,
        write_device: a.write_device,
    };
    let cfg = IozoneConfig {
        file_sizes: parse_sizes("--file-sizes", &a.file_sizes)?,
        record_sizes: parse_sizes("--record-sizes", &a.record_sizes)?,
        auto_skip: !a.all_records,
        include_flush: a.include_flush,
        engine: io.engine(),
    };
    let base = baseline_index(a.baseline.as_deref(), &a.targets)?;
    let cells = cfg.cells();
    let largest = cells.iter().map(|c| c.0).max().unwrap_or(0);
    if a.direct {
        if let Some((_, r)) = cells.iter().find(|c| c.1 % 512 != 0) {
            bail!("--direct needs record sizes that are multiples of 512 bytes; {r} is not");
        }
    }
    let opts = OpenOptions {
        size: largest,
        direct: a.direct,
        writes: true,
        allow_device_writes: a.write_device,
    };
    let mut targets = Vec::new();
    for spec in &a.targets {
        targets
            .push(Target::open(spec, opts).with_context(|| format!("cannot use target {spec}"))?);
    }
    install_ctrlc();
    let mut results = Vec::new();
    for t in &targets {
        let pb = std::io::stderr().is_terminal().then(|| {
            let pb = ProgressBar::new(cells.len() as u64);
            pb.set_style(
                ProgressStyle::with_template("[{bar:30}] {pos}/{len} cells, ETA {eta}  {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            pb
        });
        let mut n = 0;
        let r = iozone::run(t, &cfg, &CONTROL, &mut |f, rec| {
            if let Some(pb) = &pb {
                pb.set_position(n);
                pb.set_message(format!(
                    "{}: file {} record {}",
                    t.label,
                    raidlab_core::size::format_size(f),
                    raidlab_core::size::format_size(rec)
                ));
            }
            n += 1;
        })
        .with_context(|| format!("benchmark of {} failed", t.label))?;
        report_cache(t);
        t.finish()?;
        if let Some(pb) = pb {
            pb.finish_and_clear();
        }
        results.push(r);
        if CONTROL.stopped() {
            break;
        }
    }
    let mut report = iozone::report(&results);
    report.simulated = raidlab_bench::sim::models(&targets);
    let conditions = conditions_once(&targets, largest, a.engine);
    finish_report(&mut report, &targets, base, conditions);
    drop(targets);
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        outln!("IOzone -a's thirteen tests, kBytes/sec (KiB/s)");
        for r in &results {
            outln!(
                "\n{}: {}",
                r.label,
                if r.direct {
                    "O_DIRECT"
                } else {
                    "buffered or in-process"
                }
            );
            outln!("{}", iozone::iozone_text(r).trim_end());
        }
        if results.len() > 1 {
            outln!("\nSide by side:");
            outln!("{}", iozone::table(&results).trim_end());
        }
        for r in &results {
            outln!("\nIOzone -R report of {}:", r.label);
            outln!("{}", iozone::excel_report(r));
        }
        print_comparison(&report)?;
    }
    Ok(finish_status(CONTROL.stopped()))
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The trace: fio's iolog (version 2 or 3) or blkparse's default text output.
    pub trace: PathBuf,
    /// Targets to replay it onto (as for `bench cdm`); the trace's own file names
    /// are not opened.
    #[arg(required = true)]
    pub targets: Vec<String>,
    /// Keep the recorded timing (default: as fast as possible).
    #[arg(long)]
    pub timed: bool,
    /// Requests in flight at most (in trace order).
    #[arg(long, default_value_t = 1)]
    pub qd: usize,
    #[command(flatten)]
    pub io: IoArgs,
    /// The target the others are compared with, as given on the command line
    /// (default: the first): each test's ratio to it, and in words, after the
    /// tables and in the JSON for `raidlab report`.
    #[arg(long, value_name = "TARGET")]
    pub baseline: Option<String>,
    /// Print the raidlab-bench/1 JSON result instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn replay(a: ReplayArgs) -> Result<ExitCode> {
    use raidlab_bench::replay::{self, ReplayConfig};
    if a.qd == 0 || a.qd > 1024 {
        bail!("--qd {}: give 1 to 1024", a.qd);
    }
    let name = a.trace.display().to_string();
    let text = std::fs::read_to_string(&a.trace)
        .with_context(|| format!("cannot read the trace {name}"))?;
    let (format, ops) = replay::parse(&name, &text)?;
    let base = baseline_index(a.baseline.as_deref(), &a.targets)?;
    let cfg = ReplayConfig {
        timed: a.timed,
        qd: a.qd,
    };
    let opts = OpenOptions {
        size: replay::extent(&ops),
        direct: !a.io.buffered,
        writes: ops.iter().any(|o| o.kind != raidlab_core::IoKind::Read),
        allow_device_writes: a.io.write_device,
    };
    let mut targets = Vec::new();
    for spec in &a.targets {
        targets
            .push(Target::open(spec, opts).with_context(|| format!("cannot use target {spec}"))?);
    }
    install_ctrlc();
    let mut results = Vec::new();
    for t in &targets {
        let pb = std::io::stderr().is_terminal().then(|| {
            let pb = ProgressBar::new_spinner();
            pb.set_message(format!("{}: replaying {} requests", t.label, ops.len()));
            pb.enable_steady_tick(Duration::from_millis(200));
            pb
        });
        let r = replay::run(t, &ops, &cfg, &CONTROL)
            .with_context(|| format!("replay of {name} on {} failed", t.label))?;
        report_cache(t);
        t.finish()?;
        if let Some(pb) = pb {
            pb.finish_and_clear();
        }
        results.push(r);
        if CONTROL.stopped() {
            break;
        }
    }
    let mut report = replay::report(&results, &name, format, &cfg);
    report.simulated = raidlab_bench::sim::models(&targets);
    let conditions = conditions_once(&targets, opts.size, a.io.engine);
    finish_report(&mut report, &targets, base, conditions);
    drop(targets);
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        outln!(
            "replay of {name} ({format:?}, {} requests, {}, queue depth {})",
            ops.len(),
            if a.timed {
                "recorded timing"
            } else {
                "as fast as possible"
            },
            a.qd
        );
        outln!(
            "{:<24} {:<5} {:>10} {:>10} {:>10} {:>10} {:>9}",
            "target",
            "",
            "MB/s",
            "IOPS",
            "lat µs",
            "p99 µs",
            "seconds"
        );
        for r in &results {
            for (d, st) in [("read", &r.read), ("write", &r.write)] {
                if st.ios == 0 {
                    continue;
                }
                outln!(
                    "{:<24} {:<5} {:>10.2} {:>10.1} {:>10.1} {:>10.1} {:>9.2}",
                    r.label,
                    d,
                    st.mb_s(r.elapsed),
                    st.iops(r.elapsed),
                    st.mean_lat_us(),
                    st.hist.value_at_quantile(0.99) as f64 / 1000.0,
                    r.elapsed.as_secs_f64()
                );
            }
            if r.flushes + r.trims > 0 {
                outln!(
                    "{:<24} {} flushes, {} trims ({} not supported by the target)",
                    "",
                    r.flushes,
                    r.trims,
                    r.trims_unsupported
                );
            }
        }
        print_comparison(&report)?;
    }
    Ok(finish_status(CONTROL.stopped()))
}

/// A second Ctrl-C still kills the process; the first asks for a clean stop.
fn install_ctrlc() {
    let _ = ctrlc::set_handler(|| {
        if CONTROL.stopped() {
            std::process::exit(INTERRUPTED_EXIT.into());
        }
        CONTROL.stop();
    });
}

/// `raidlab bench` with no subcommand.
#[derive(Debug, Clone, Args)]
pub struct QuickArgs {
    /// Where to make the temporary directory for the member files (default: the
    /// system's temporary directory). Use a directory on the disk you care about.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Directory to write the JSON result and its HTML report (the same name,
    /// `.html`, made as `raidlab report` makes it) to.
    #[arg(long, default_value = ".")]
    pub output: PathBuf,
    /// Print the JSON result instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Seconds per run instead of the default 1 (hidden: lets tests run it fast).
    #[arg(long, hide = true, value_parser = seconds)]
    pub measure: Option<f64>,
}

pub fn cdm(a: CdmArgs) -> Result<ExitCode> {
    if a.runs == 0 || a.runs > 100 {
        bail!("--runs {}: give 1 to 100 runs", a.runs);
    }
    if a.measure <= 0.0 {
        bail!("--measure must be more than 0 seconds");
    }
    let base = baseline_index(a.baseline.as_deref(), &a.targets)?;
    let cfg = CdmConfig {
        profile: Profile::parse(&a.profile)?,
        size: a.size,
        runs: a.runs,
        measure: Duration::from_secs_f64(a.measure),
        interval: Duration::from_secs_f64(a.interval),
        data: if a.zero_fill {
            DataFill::Zero
        } else {
            DataFill::Random
        },
        engine: a.io.engine(),
        read: !a.write_only,
        write: !a.read_only,
        mix: a.mix,
    };
    let opts = OpenOptions {
        size: a.size,
        direct: !a.io.buffered,
        // CrystalDiskMark writes its test file before reading it.
        writes: true,
        allow_device_writes: a.io.write_device,
    };
    // Open every target before measuring any, so a typo fails in a second, not
    // after the first target's minutes of tests.
    let mut targets = Vec::new();
    for spec in &a.targets {
        if a.targets.iter().filter(|t| *t == spec).count() > 1 {
            bail!("{spec} is given twice: give each target once");
        }
        targets
            .push(Target::open(spec, opts).with_context(|| format!("cannot use target {spec}"))?);
    }
    let (results, interrupted) = run_targets(&targets, &cfg)?;
    let mut report = cdm::report(&results, &cfg);
    report.simulated = raidlab_bench::sim::models(&targets);
    let conditions = conditions_cdm(&targets, &results, &cfg);
    finish_report(&mut report, &targets, base, conditions);
    drop(targets);
    if let Some(path) = &a.save_text {
        std::fs::write(path, cdm::save_text(&results, &cfg))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&results, &cfg, &report)?;
    }
    Ok(finish_status(interrupted))
}

fn finish_status(interrupted: bool) -> ExitCode {
    if interrupted {
        eprintln!("raidlab: interrupted: the figures above are what was measured before Ctrl-C");
        ExitCode::from(INTERRUPTED_EXIT)
    } else {
        ExitCode::SUCCESS
    }
}

fn print_table(results: &[CdmTargetResult], cfg: &CdmConfig, report: &BenchReport) -> Result<()> {
    outln!(
        "CrystalDiskMark set, profile {}, test size {}, best of {} run(s) of {:.1} s (MB/s = 10^6 bytes/s; latency = mean of the best run)",
        cfg.profile.name(),
        raidlab_core::size::format_size(cfg.size),
        cfg.runs,
        cfg.measure.as_secs_f64()
    );
    for r in results {
        for n in &r.notes {
            outln!("note: {}: {n}", r.label);
        }
        if let Some(c) = r.cells.first() {
            outln!(
                "{}: {} bytes, {}, engine {}",
                r.label,
                r.size,
                if r.direct {
                    "O_DIRECT"
                } else {
                    "buffered or in-process"
                },
                c.engine
            );
        }
    }
    for r in results {
        outln!("\n{}", cdm::grid(r).trim_end());
    }
    outln!("\nEvery figure of the best run, side by side:");
    outln!("{}", cdm::table(results).trim_end());
    print_comparison(report)
}

/// Run the set on each target in turn with a progress bar and Ctrl-C handling.
fn run_targets(targets: &[Target], cfg: &CdmConfig) -> Result<(Vec<CdmTargetResult>, bool)> {
    install_ctrlc();
    let dirs = usize::from(cfg.read) + usize::from(cfg.write);
    let total = (targets.len() * cfg.profile.tests().len() * dirs * cfg.runs) as u64;
    let pb = std::io::stderr().is_terminal().then(|| {
        let pb = ProgressBar::new(total);
        pb.set_style(
            ProgressStyle::with_template("[{bar:30}] {pos}/{len} runs, ETA {eta}  {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        pb.enable_steady_tick(Duration::from_millis(200));
        pb
    });
    let mut results = Vec::new();
    let mut begun = 0u64;
    for t in targets {
        let mut on = |e: &Event| {
            let Some(pb) = &pb else { return };
            match e {
                Event::Prepare { target, bytes } => {
                    pb.set_message(format!("{target}: writing the {bytes}-byte test file"))
                }
                Event::Run {
                    target,
                    test,
                    dir,
                    run,
                    runs,
                    ..
                } => {
                    // The bar counts finished runs.
                    pb.set_position(begun);
                    begun += 1;
                    pb.set_message(format!("{target}: {test} {dir} run {run}/{runs}"));
                }
                Event::Interval { seconds } => pb.set_message(format!("pausing {seconds:.0} s")),
            }
        };
        let r = cdm::run(t, cfg, &CONTROL, &mut on);
        let r = r.with_context(|| format!("benchmark of {} failed", t.label))?;
        report_cache(t);
        t.finish()
            .with_context(|| format!("cannot flush {} after the benchmark", t.label))?;
        results.push(r);
        if CONTROL.stopped() {
            break;
        }
    }
    if let Some(pb) = &pb {
        pb.finish_and_clear();
    }
    Ok((results, CONTROL.stopped()))
}

/// Member size and test size of `raidlab bench` with no target: small enough that
/// preparing both test files takes a second or two, large enough that a test is
/// not one stripe.
const QUICK_MEMBER: u64 = 64 << 20;
const QUICK_TEST_SIZE: u64 = 64 << 20;
/// Two runs of one second per test, no pause: 2 targets x 8 tests x 2 s is about
/// 35 s with preparation, on any machine.
const QUICK_RUNS: usize = 2;
const QUICK_MEASURE: Duration = Duration::from_secs(1);
const QUICK_CHUNK: u64 = 64 << 10;

/// Removes the temporary directory however `quick` ends.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn quick(a: QuickArgs) -> Result<ExitCode> {
    let base = a.dir.clone().unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("raidlab-bench-{}", std::process::id()));
    std::fs::create_dir(&dir)
        .with_context(|| format!("cannot make a temporary directory in {}", base.display()))?;
    let tmp = TempDir(dir);
    let opts = OpenOptions {
        size: QUICK_TEST_SIZE,
        direct: false,
        writes: true,
        allow_device_writes: false,
    };
    let members: Vec<PathBuf> = (0..4).map(|i| tmp.0.join(format!("m{i}"))).collect();
    eprintln!(
        "raidlab bench: a 4-member RAID 5 ({} chunk) and a single member, {} member files in {}; CrystalDiskMark set, {} MiB test size, best of {} runs of {} s",
        raidlab_core::size::format_size(QUICK_CHUNK),
        raidlab_core::size::format_size(QUICK_MEMBER),
        tmp.0.display(),
        QUICK_TEST_SIZE >> 20,
        QUICK_RUNS,
        QUICK_MEASURE.as_secs()
    );
    let array = create_array(
        "RAID 5, 4 members",
        raidlab_layout::Level::Raid5,
        QUICK_CHUNK,
        &members,
        QUICK_MEMBER,
        opts,
    )
    .context("cannot create the RAID 5 of member files")?;
    let single = open_member_file("single member", &tmp.0.join("single"), QUICK_MEMBER, opts)
        .context("cannot create the single-member file")?;
    let cfg = CdmConfig {
        size: QUICK_TEST_SIZE,
        runs: QUICK_RUNS,
        measure: a
            .measure
            .filter(|m| *m > 0.0)
            .map_or(QUICK_MEASURE, Duration::from_secs_f64),
        interval: Duration::ZERO,
        ..CdmConfig::default()
    };
    let targets = vec![array, single];
    let (results, interrupted) = run_targets(&targets, &cfg)?;
    let mut report = cdm::report(&results, &cfg);
    let conditions = conditions_cdm(&targets, &results, &cfg);
    // The single member is what the array is compared with.
    finish_report(&mut report, &targets, 1, conditions);
    drop(targets);
    let json_path = write_json(&a.output, &report)?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&results, &cfg, &report)?;
        outln!("(both targets go through the page cache: this compares raidlab's RAID 5 path with one member file, like with like; run `raidlab bench cdm DIR` for a disk's own figures)");
    }
    eprintln!("raidlab: JSON result: {}", json_path.display());
    if let Some(html) = write_html_report(&json_path, &report)? {
        eprintln!("raidlab: HTML report: {}", html.display());
    }
    Ok(finish_status(interrupted))
}

/// Write the result as `raidlab-bench-<time>.json` in `dir`.
fn write_json(dir: &Path, report: &BenchReport) -> Result<PathBuf> {
    let stamp: String = report
        .created
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    let path = dir.join(format!("raidlab-bench-{stamp}.json"));
    let text = serde_json::to_string_pretty(report)?;
    std::fs::write(&path, text + "\n")
        .with_context(|| format!("cannot write the JSON result to {}", path.display()))?;
    Ok(path)
}

/// Render `raidlab bench`'s HTML report beside its JSON result (same name,
/// `.html`), with the same code as `raidlab report`.
fn write_html_report(json_path: &Path, _report: &BenchReport) -> Result<Option<PathBuf>> {
    let html = json_path.with_extension("html");
    raidlab_report::write_report(&[json_path.to_path_buf()], &html, None)
        .with_context(|| format!("cannot write the HTML report {}", html.display()))?;
    Ok(Some(html))
}

/// A cache target's statistics on stderr after its run, so that the result can
/// be explained from what the cache did.
fn report_cache(t: &Target) {
    if let Some(s) = t.cache_stats() {
        eprintln!(
            "raidlab: cache of {}: reads {} hit, {} partial, {} miss; writes {} hit, {} partial, {} miss; \
             {} promoted ({} not yet, under the threshold), {} evicted, {} invalidated; \
             bypassed bytes: {} sequential, {} mode, {} cache full of dirty blocks, {} tail; \
             {} blocks cleaned; now {} of {} blocks used, {} dirty",
            t.label,
            s.read_hits,
            s.read_partial_hits,
            s.read_misses,
            s.write_hits,
            s.write_partial_hits,
            s.write_misses,
            s.promotions,
            s.not_promoted,
            s.evictions,
            s.invalidations,
            s.bypass_sequential_bytes,
            s.bypass_mode_bytes,
            s.bypass_full_bytes,
            s.bypass_tail_bytes,
            s.cleaned_blocks,
            s.occupied_blocks,
            s.cache_blocks,
            s.dirty_blocks
        );
    }
}
