//! `raidlab bench cdm` (CrystalDiskMark's set on each target) and `raidlab bench files`
//! (the quick real-file comparison on a temporary RAID 5).
//! Argument checking, progress and printing only; what runs is raidlab-bench's.

use super::*;

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
    #[command(flatten)]
    pub baseline: BaselineArgs,
    /// Print the raidlab-bench/1 JSON result instead of the table.
    #[arg(long)]
    pub json: bool,
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
    let base = a.baseline.index(&a.targets)?;
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
    let targets = open_targets(&a.targets, opts, true)?;
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
