//! `raidlab bench bonnie`: Bonnie++'s tests on each target, side by side.
//! Argument checking, progress and printing only; what runs is raidlab-bench's.

use super::*;

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
    #[command(flatten)]
    pub baseline: BaselineArgs,
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
    let base = a.baseline.index(&a.targets)?;
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
    let targets = open_targets(&a.targets, opts, false)?;
    let dirs: Vec<Option<PathBuf>> = targets
        .iter()
        .zip(&a.targets)
        .map(|(t, spec)| {
            (t.kind == raidlab_bench::target::TargetKind::Directory).then(|| PathBuf::from(spec))
        })
        .collect();
    let results = run_each(
        &targets,
        |t| {
            let pb = ProgressBar::new_spinner();
            pb.set_message(format!("{}: Bonnie++ tests on {} bytes", t.label, t.size));
            pb.enable_steady_tick(Duration::from_millis(200));
            pb
        },
        |i, t, _| {
            bonnie::run(t, dirs[i].as_deref(), &cfg, &CONTROL)
                .with_context(|| format!("benchmark of {} failed", t.label))
        },
    )?;
    let mut report = bonnie::report(&results, &machine);
    report.simulated = raidlab_bench::sim::models(&targets);
    let conditions = conditions_once(&targets, size, a.io.engine);
    finish_report(&mut report, &targets, base, conditions);
    let any_simulated = targets.iter().any(|t| t.sim.is_some());
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
