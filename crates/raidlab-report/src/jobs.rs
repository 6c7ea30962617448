//! `raidlab bench job` results: a fio job file may run several jobs on one
//! target and names each job itself, so its targets are compared job by job:
//! a job on another target with the baseline's job of the same workload (rw,
//! bs, iodepth, numjobs), its clones' MB/s added up, said in words; and each
//! job's own run conditions are listed, with what differs between two jobs
//! compared.
//!
//! It decides how jobs are paired and how that is said; it never measures,
//! reads files or prints.

use crate::compare::in_words;
use crate::html::{esc, short};
use crate::input::ResultFile;
use crate::model::{differences, shown, Merged, Model, Shown, SuiteView};
use std::fmt::Write as _;

/// One job section of a `bench job` result, with how it ran.
#[derive(Debug, Clone)]
pub struct JobRun {
    /// Position of its target in the suite's targets.
    pub col: usize,
    pub job: String,
    pub workload: Option<String>,
    pub shown: Shown,
}

/// The job sections recorded in the files of a suite's rows (`in_suite`), each
/// once, in the order the files list them.
pub fn job_runs(
    files: &[ResultFile],
    in_suite: &[&Merged],
    s_targets: &[usize],
    tidx: &dyn Fn(&Merged) -> usize,
) -> Vec<JobRun> {
    let mut seen: Vec<(usize, &str)> = Vec::new();
    let mut out = Vec::new();
    for m in in_suite {
        if seen.contains(&(m.file, m.row.target.as_str())) {
            continue;
        }
        seen.push((m.file, &m.row.target));
        let Some(col) = s_targets.iter().position(|&t| t == tidx(m)) else {
            continue;
        };
        let f = &files[m.file];
        for c in f.conditions.iter().filter(|c| c.target == m.row.target) {
            if let Some(job) = &c.job {
                out.push(JobRun {
                    col,
                    job: job.clone(),
                    workload: c.workload.clone(),
                    shown: shown(c, false),
                });
            }
        }
    }
    out
}

/// The MB/s of job `job` on the target at `col` per direction, its clones
/// (`job #1`, ...) added up, as fio's group_reporting would.
fn mb_s(suite: &SuiteView, col: usize, job: &str) -> Vec<(&'static str, f64)> {
    let clone = format!("{job} #");
    ["read", "write"]
        .into_iter()
        .filter_map(|d| {
            let vals: Vec<f64> = suite
                .summary
                .iter()
                .filter(|r| r.metric == "MB/s" && r.test == d)
                .filter(|r| r.group == job || r.group.starts_with(&clone))
                .filter_map(|r| r.values[col])
                .collect();
            (!vals.is_empty()).then(|| (d, vals.iter().sum()))
        })
        .collect()
}

/// Per job on a target other than the baseline, its ratio to the baseline's
/// job of the same workload, in words; or why there is none.
pub fn job_words(model: &Model, suite: &SuiteView) -> Vec<String> {
    let name = |col: usize| model.targets[suite.targets[col]].as_str();
    let base = suite.baseline;
    let mut out = Vec::new();
    for run in suite.jobs.iter().filter(|r| r.col != base) {
        let me = format!("job [{}] on {}", run.job, name(run.col));
        let Some(w) = &run.workload else { continue };
        let partner = suite
            .jobs
            .iter()
            .find(|b| b.col == base && b.workload.as_ref() == Some(w));
        let Some(b) = partner else {
            out.push(format!(
                "{me}: the baseline {} runs no job with its workload ({w})",
                name(base)
            ));
            continue;
        };
        let theirs = mb_s(suite, base, &b.job);
        let ratios: Vec<f64> = mb_s(suite, run.col, &run.job)
            .iter()
            .filter_map(|(d, v)| {
                let (_, t) = theirs.iter().find(|(td, _)| td == d)?;
                (*t != 0.0).then(|| v / t)
            })
            .collect();
        let them = format!("job [{}] on the baseline {}", b.job, name(base));
        let mut s = in_words(&me, &them, &ratios, &["MB/s"]);
        if run.shown != b.shown {
            let _ = write!(
                s,
                ", not under the same conditions ({})",
                differences(&[&run.shown, &b.shown], false)
            );
        }
        out.push(s);
    }
    out
}

/// The run conditions table of a `bench job` suite: one line per job.
pub fn conditions_html(h: &mut String, model: &Model, suite: &SuiteView) {
    h.push_str("<table class=\"conditions\">\n<tr><th>target</th><th>job</th><th>workload</th><th>I/O</th><th>size</th><th>runtime</th><th>engine</th><th>queue depth</th><th>figures</th></tr>\n");
    for r in &suite.jobs {
        let c = &r.shown;
        let runtime = match c.measure_s {
            Some(s) => format!("{} s", short(s)),
            None => "one pass over the size".into(),
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            esc(&model.targets[suite.targets[r.col]]),
            esc(&r.job),
            esc(r.workload.as_deref().unwrap_or("–")),
            esc(&c.io),
            crate::html::bytes(c.test_size),
            esc(&runtime),
            esc(&c.engine),
            c.queue_depth.map_or("–".into(), |q| q.to_string()),
            if c.simulated {
                "simulated (virtual time)"
            } else {
                "measured"
            }
        );
    }
    h.push_str("</table>\n");
    if suite.mixed_conditions() {
        let all: Vec<&Shown> = suite.jobs.iter().map(|r| &r.shown).collect();
        let _ = writeln!(
            h,
            "<p class=\"warn\">The jobs of this result did not run under the same conditions ({}): a difference in their figures may come from that, not from the targets.</p>",
            esc(&differences(&all, false))
        );
    }
}

/// The comparison of a `bench job` suite with its baseline, job by job.
pub fn comparison_html(h: &mut String, model: &Model, suite: &SuiteView) {
    let _ = writeln!(
        h,
        "<h3>Compared with {}</h3>\n<p class=\"note\">Each job on another target against the baseline\u{2019}s job of the same workload (rw, bs, iodepth, numjobs), MB/s of its clones added up (<code>--baseline TARGET</code> picks the baseline).</p>\n<ul class=\"words\">",
        esc(&model.targets[suite.targets[suite.baseline]])
    );
    for w in job_words(model, suite) {
        let _ = writeln!(h, "<li>{}.</li>", esc(&w));
    }
    h.push_str("</ul>\n");
}
