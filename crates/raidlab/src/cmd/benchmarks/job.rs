//! `raidlab bench job`: a fio-style job file run on each target, side by side.
//! Argument checking, progress and printing only; what runs is raidlab-bench's.

use super::*;

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
    let engine = a.engine.map(EngineArg::kind);
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
