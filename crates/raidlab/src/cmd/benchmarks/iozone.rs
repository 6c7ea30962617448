//! `raidlab bench iozone`: IOzone's record-size x file-size sweep on each target.
//! Argument checking, progress and printing only; what runs is raidlab-bench's.

use super::*;

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
    #[command(flatten)]
    pub baseline: BaselineArgs,
    /// Print the raidlab-bench/1 JSON result instead of the -R report.
    #[arg(long)]
    pub json: bool,
}

pub fn iozone(a: IozoneArgs) -> Result<ExitCode> {
    use raidlab_bench::iozone::{self, parse_sizes, IozoneConfig};
    let cfg = IozoneConfig {
        file_sizes: parse_sizes("--file-sizes", &a.file_sizes)?,
        record_sizes: parse_sizes("--record-sizes", &a.record_sizes)?,
        auto_skip: !a.all_records,
        include_flush: a.include_flush,
        engine: a.engine.kind(),
    };
    let base = a.baseline.index(&a.targets)?;
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
    let targets = open_targets(&a.targets, opts, false)?;
    let results = run_each(
        &targets,
        |_| {
            let pb = ProgressBar::new(cells.len() as u64);
            pb.set_style(
                ProgressStyle::with_template("[{bar:30}] {pos}/{len} cells, ETA {eta}  {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            pb
        },
        |_, t, pb| {
            let mut n = 0;
            iozone::run(t, &cfg, &CONTROL, &mut |f, rec| {
                if let Some(pb) = pb {
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
            .with_context(|| format!("benchmark of {} failed", t.label))
        },
    )?;
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
