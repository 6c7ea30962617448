//! `raidlab report RESULT.json... --output report.html [--csv FILE]`: the HTML page
//! and CSV of benchmark results. All the work is raidlab-report's `write_report`,
//! which `raidlab bench` calls too; this only wires arguments and prints.

use crate::cli::ReportArgs;
use anyhow::Result;
use std::process::ExitCode;

pub fn run(a: ReportArgs) -> Result<ExitCode> {
    let s = raidlab_report::write_report_with_baseline(
        &a.results,
        &a.output,
        a.csv.as_deref(),
        a.baseline.as_deref(),
    )?;
    outln!(
        "wrote {}: {} measurements of {} targets from {} result files, {} charts",
        a.output.display(),
        s.rows,
        s.targets,
        s.files,
        s.charts
    );
    if let Some(csv) = &a.csv {
        outln!("wrote {}: {} rows", csv.display(), s.rows);
    }
    Ok(ExitCode::SUCCESS)
}
