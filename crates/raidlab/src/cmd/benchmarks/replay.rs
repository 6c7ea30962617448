//! `raidlab bench replay`: a recorded trace replayed on each target.
//! Argument checking, progress and printing only; what runs is raidlab-bench's.

use super::*;

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
    #[command(flatten)]
    pub baseline: BaselineArgs,
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
    let base = a.baseline.index(&a.targets)?;
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
    let targets = open_targets(&a.targets, opts, false)?;
    let results = run_each(
        &targets,
        |t| {
            let pb = ProgressBar::new_spinner();
            pb.set_message(format!("{}: replaying {} requests", t.label, ops.len()));
            pb.enable_steady_tick(Duration::from_millis(200));
            pb
        },
        |_, t, _| {
            replay::run(t, &ops, &cfg, &CONTROL)
                .with_context(|| format!("replay of {name} on {} failed", t.label))
        },
    )?;
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
