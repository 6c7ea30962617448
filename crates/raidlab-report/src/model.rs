//! Rows of all files merged into what the page shows: target labels made distinct
//! across files, one chart per (suite, metric, kind of test) with groups and
//! targets in first-seen order, one comparison table per suite against its
//! baseline, and each target's run conditions. Pure data, no formatting.
//!
//! A kind of test is CrystalDiskMark's sequential or random family (`SEQ…`,
//! `RND…` in the group or test name): their MB/s differ by one or two orders of
//! magnitude, so on one axis the 4K bars would be slivers; each kind gets its own
//! chart and scale, as the articles' figures do.

use crate::input::{Conditions, ResultFile, Row};
pub use crate::jobs::JobRun;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;

/// One row with the label its target is shown under.
#[derive(Debug, Clone)]
pub struct Merged<'a> {
    /// Index of the file in the input slice.
    pub file: usize,
    pub row: &'a Row,
    /// The target label, with the file's stem appended when another file that
    /// shares a suite uses the same label.
    pub target: String,
}

/// Everything the page and the CSV are made of.
#[derive(Debug)]
pub struct Model<'a> {
    pub rows: Vec<Merged<'a>>,
    /// Display labels in first-seen order over all files; the index is the colour.
    pub targets: Vec<String>,
    /// Per file: (label in the file, label shown), in the file's target order.
    pub labels: Vec<Vec<(String, String)>>,
    pub suites: Vec<SuiteView>,
}

#[derive(Debug)]
pub struct SuiteView {
    pub name: String,
    /// Targets measured in this suite, first-seen order (indices into
    /// `Model::targets`).
    pub targets: Vec<usize>,
    /// Position in `targets` of the target the others are compared with.
    pub baseline: usize,
    /// Per `targets` entry: how it was measured, if its result says.
    pub conditions: Vec<Option<Shown>>,
    /// `bench job` results: each job section's own conditions (a target may
    /// run several jobs, each its own way); empty for other suites.
    pub jobs: Vec<JobRun>,
    pub charts: Vec<Chart>,
    /// (group, test, metric) in first-seen order, each with one value per
    /// `targets` entry (None where that target was not measured).
    pub summary: Vec<SummaryRow>,
}

#[derive(Debug)]
pub struct SummaryRow {
    pub group: String,
    pub test: String,
    pub metric: String,
    pub higher_is_better: bool,
    pub values: Vec<Option<f64>>,
}

/// A target's run conditions as the page lists them.
#[derive(Debug, Clone, PartialEq)]
pub struct Shown {
    pub io: String,
    pub test_size: u64,
    pub runs: Option<u64>,
    pub measure_s: Option<f64>,
    pub engine: String,
    pub simulated: bool,
    pub queue_depth: Option<u64>,
}

impl SuiteView {
    /// The comparison table's lines: per (group, test) its headline figure, the
    /// first metric where higher is better that is not an average (MB/s for
    /// CrystalDiskMark, K/sec or files/s for Bonnie++), else its first metric.
    pub fn headlines(&self) -> Vec<&SummaryRow> {
        let mut out: Vec<&SummaryRow> = Vec::new();
        for r in &self.summary {
            if out.iter().any(|o| o.group == r.group && o.test == r.test) {
                continue;
            }
            let of_test = || {
                self.summary
                    .iter()
                    .filter(|o| o.group == r.group && o.test == r.test)
            };
            let pick = of_test()
                .find(|o| o.higher_is_better && !o.metric.contains("avg"))
                .unwrap_or(r);
            out.push(pick);
        }
        out
    }

    /// Whether the targets with recorded conditions differ in any of them, or
    /// some have none recorded while others do: then a chart of them mixes
    /// unlike runs and the page must say so.
    pub fn mixed_conditions(&self) -> bool {
        if !self.jobs.is_empty() {
            return self.jobs.windows(2).any(|w| w[0].shown != w[1].shown);
        }
        let known: Vec<&Shown> = self.conditions.iter().flatten().collect();
        let some_unknown = known.len() != self.conditions.len();
        (some_unknown && !known.is_empty()) || known.windows(2).any(|w| w[0] != w[1])
    }
}

/// `SEQ1M Q8T1` or `SEQ1M-Q8T1-read` -> "sequential", `RND4K …` -> "random":
/// CrystalDiskMark's families, looked for in the group, then the test.
pub fn kind(group: &str, test: &str) -> Option<&'static str> {
    [group, test].iter().find_map(|s| {
        let digit = s.chars().nth(3).is_some_and(|c| c.is_ascii_digit());
        match (s.get(..3), digit) {
            (Some("SEQ"), true) => Some("sequential"),
            (Some("RND"), true) => Some("random"),
            _ => None,
        }
    })
}

/// One chart: one suite, one metric, one kind of test.
#[derive(Debug)]
pub struct Chart {
    pub metric: String,
    /// The kind of test it shows (see [`kind`]); None: all of the metric's.
    pub kind: Option<&'static str>,
    /// None when rows of this metric disagree (then the page says so).
    pub higher_is_better: Option<bool>,
    pub groups: Vec<ChartGroup>,
    /// Targets with a bar in this chart, in global first-seen order.
    pub targets: Vec<usize>,
}

#[derive(Debug)]
pub struct ChartGroup {
    pub name: String,
    pub tests: Vec<ChartTest>,
}

#[derive(Debug)]
pub struct ChartTest {
    pub name: String,
    /// (target index, value), ordered by target index so that every cluster of
    /// bars has the same order and colours.
    pub bars: Vec<(usize, f64)>,
}

impl Chart {
    #[cfg(test)]
    pub fn bar_count(&self) -> usize {
        self.groups
            .iter()
            .flat_map(|g| &g.tests)
            .map(|t| t.bars.len())
            .sum()
    }
}

/// Index of `key` in `list`, appending it when new: first-seen order.
fn index_of<T: PartialEq>(list: &mut Vec<T>, key: T) -> usize {
    match list.iter().position(|k| *k == key) {
        Some(i) => i,
        None => {
            list.push(key);
            list.len() - 1
        }
    }
}

fn stem(source: &str) -> String {
    Path::new(source)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| source.to_string())
}

/// The label each file's targets are shown under. A label is changed only when
/// another file uses it in a suite both files measured: the same "RAID 0" in a cdm
/// file and a bonnie file is one target (one colour), but "RAID 0" in two cdm
/// runs is two.
fn display_labels(files: &[ResultFile]) -> Vec<Vec<(String, String)>> {
    let suites: Vec<BTreeSet<&str>> = files
        .iter()
        .map(|f| {
            let mut s: BTreeSet<&str> = f.rows.iter().map(|r| r.suite.as_str()).collect();
            s.insert(&f.suite);
            s
        })
        .collect();
    let labels: Vec<Vec<&str>> = files
        .iter()
        .map(|f| {
            let mut l: Vec<&str> = Vec::new();
            for t in f.targets.iter().chain(f.rows.iter().map(|r| &r.target)) {
                if !l.contains(&t.as_str()) {
                    l.push(t);
                }
            }
            l
        })
        .collect();
    let clashes_with = |i: usize, label: &str| -> Vec<usize> {
        (0..files.len())
            .filter(|&j| j != i && labels[j].contains(&label) && !suites[i].is_disjoint(&suites[j]))
            .collect()
    };
    // (suite, shown label) -> (file, label), to make sure the result is distinct
    // even in odd cases (a file whose own label already reads "x (b)").
    let mut taken: HashMap<(&str, String), (usize, &str)> = HashMap::new();
    let mut out = Vec::with_capacity(files.len());
    for (i, file_labels) in labels.iter().enumerate() {
        let mut mine = Vec::new();
        for &label in file_labels {
            let others = clashes_with(i, label);
            let mut shown = if others.is_empty() {
                label.to_string()
            } else {
                // The stem is short and usually says which run it was; when the
                // clashing files share a stem (run1/cdm.json, run2/cdm.json), the
                // path as given tells them apart.
                let my_stem = stem(&files[i].source);
                if others.iter().any(|&j| stem(&files[j].source) == my_stem) {
                    let p = Path::new(&files[i].source).with_extension("");
                    format!("{label} ({})", p.display())
                } else {
                    format!("{label} ({my_stem})")
                }
            };
            let base = shown.clone();
            let mut n = 2;
            while suites[i].iter().any(|s| {
                taken
                    .get(&(*s, shown.clone()))
                    .is_some_and(|&(f, l)| (f, l) != (i, label))
            }) {
                shown = format!("{base} #{n}");
                n += 1;
            }
            for s in &suites[i] {
                taken.insert((*s, shown.clone()), (i, label));
            }
            mine.push((label.to_string(), shown));
        }
        out.push(mine);
    }
    out
}

impl<'a> Model<'a> {
    /// The model of `files`, each suite compared with `baseline` where it measured
    /// a target of that label (as shown, or as its file names it), else with its
    /// result's own baseline, else with its first target.
    pub fn new(files: &'a [ResultFile], baseline: Option<&str>) -> Model<'a> {
        let labels = display_labels(files);
        let mut rows = Vec::new();
        let mut targets: Vec<String> = Vec::new();
        for (fi, f) in files.iter().enumerate() {
            // Listed targets first, so the colour order is the runs' own order even
            // for a target without rows.
            for (_, shown) in &labels[fi] {
                index_of(&mut targets, shown.clone());
            }
            for row in &f.rows {
                let target = labels[fi]
                    .iter()
                    .find(|(l, _)| *l == row.target)
                    .map(|(_, s)| s.clone())
                    .unwrap_or_else(|| row.target.clone());
                rows.push(Merged {
                    file: fi,
                    row,
                    target,
                });
            }
        }
        let target_idx: HashMap<&str, usize> = targets
            .iter()
            .enumerate()
            .map(|(i, t)| (t.as_str(), i))
            .collect();
        let tidx = |m: &Merged| target_idx.get(m.target.as_str()).copied().unwrap_or(0);

        let mut suite_names: Vec<&str> = Vec::new();
        for m in &rows {
            index_of(&mut suite_names, m.row.suite.as_str());
        }
        let mut suites = Vec::new();
        for s in suite_names {
            let in_suite: Vec<&Merged> = rows.iter().filter(|m| m.row.suite == s).collect();
            let mut s_targets: Vec<usize> = Vec::new();
            for m in &in_suite {
                index_of(&mut s_targets, tidx(m));
            }
            let mut metrics: Vec<(&str, Option<&'static str>)> = Vec::new();
            for m in &in_suite {
                index_of(
                    &mut metrics,
                    (m.row.metric.as_str(), kind(&m.row.group, &m.row.test)),
                );
            }
            // Metric first, then kind: all MB/s charts before the IOPS ones.
            let mut order: Vec<&str> = Vec::new();
            for (metric, _) in &metrics {
                index_of(&mut order, *metric);
            }
            metrics.sort_by_key(|(m, _)| order.iter().position(|o| o == m));
            let charts = metrics
                .iter()
                .map(|&(metric, chart_kind)| {
                    let of: Vec<&&Merged> = in_suite
                        .iter()
                        .filter(|m| {
                            m.row.metric == metric && kind(&m.row.group, &m.row.test) == chart_kind
                        })
                        .collect();
                    let hib: HashSet<bool> = of.iter().map(|m| m.row.higher_is_better).collect();
                    let mut groups: Vec<ChartGroup> = Vec::new();
                    let mut chart_targets = Vec::new();
                    for m in &of {
                        let g = match groups.iter().position(|g| g.name == m.row.group) {
                            Some(g) => g,
                            None => {
                                groups.push(ChartGroup {
                                    name: m.row.group.clone(),
                                    tests: Vec::new(),
                                });
                                groups.len() - 1
                            }
                        };
                        let tests = &mut groups[g].tests;
                        let t = match tests.iter().position(|t| t.name == m.row.test) {
                            Some(t) => t,
                            None => {
                                tests.push(ChartTest {
                                    name: m.row.test.clone(),
                                    bars: Vec::new(),
                                });
                                tests.len() - 1
                            }
                        };
                        tests[t].bars.push((tidx(m), m.row.value));
                        index_of(&mut chart_targets, tidx(m));
                    }
                    for t in groups.iter_mut().flat_map(|g| &mut g.tests) {
                        // Stable: duplicates (only possible in hand-built input)
                        // keep their order.
                        t.bars.sort_by_key(|b| b.0);
                    }
                    chart_targets.sort_unstable();
                    Chart {
                        metric: metric.to_string(),
                        kind: chart_kind,
                        higher_is_better: if hib.len() == 1 {
                            hib.into_iter().next()
                        } else {
                            None
                        },
                        groups,
                        targets: chart_targets,
                    }
                })
                .collect();
            let mut summary: Vec<SummaryRow> = Vec::new();
            for m in &in_suite {
                let pos = summary.iter().position(|r| {
                    r.group == m.row.group && r.test == m.row.test && r.metric == m.row.metric
                });
                let r = match pos {
                    Some(p) => p,
                    None => {
                        summary.push(SummaryRow {
                            group: m.row.group.clone(),
                            test: m.row.test.clone(),
                            metric: m.row.metric.clone(),
                            higher_is_better: m.row.higher_is_better,
                            values: vec![None; s_targets.len()],
                        });
                        summary.len() - 1
                    }
                };
                if let Some(col) = s_targets.iter().position(|&t| t == tidx(m)) {
                    // The first value wins; a duplicate can only come from
                    // hand-built input, which `ResultFile::from_json` refuses.
                    summary[r].values[col].get_or_insert(m.row.value);
                }
            }
            let shown_of = |t: usize| -> Option<&str> {
                // The label as its file names it, for a --baseline typed that way.
                rows.iter()
                    .find(|m| tidx(m) == t && m.row.suite == s)
                    .map(|m| m.row.target.as_str())
            };
            let wanted = |label: &str| {
                s_targets
                    .iter()
                    .position(|&t| targets[t] == label || shown_of(t) == Some(label))
            };
            let from_files = || {
                in_suite.iter().find_map(|m| {
                    let b = files[m.file].baseline.as_deref()?;
                    let shown = labels[m.file].iter().find(|(l, _)| l == b)?;
                    wanted(&shown.1)
                })
            };
            let base = baseline.and_then(wanted).or_else(from_files).unwrap_or(0);
            let conditions = s_targets
                .iter()
                .map(|&t| conditions_of(files, &in_suite, t, &tidx))
                .collect();
            let jobs = crate::jobs::job_runs(files, &in_suite, &s_targets, &tidx);
            suites.push(SuiteView {
                name: s.to_string(),
                targets: s_targets,
                baseline: base,
                conditions,
                jobs,
                charts,
                summary,
            });
        }
        Model {
            rows,
            targets,
            labels,
            suites,
        }
    }
}

/// The recorded conditions of target `t` in a suite (`in_suite`: its rows):
/// from the first file that measured it there and records them; a target only
/// listed as simulated gets "simulated" with nothing else known.
fn conditions_of(
    files: &[ResultFile],
    in_suite: &[&Merged],
    t: usize,
    tidx: &dyn Fn(&Merged) -> usize,
) -> Option<Shown> {
    let mut simulated = false;
    for m in in_suite.iter().filter(|m| tidx(m) == t) {
        let f = &files[m.file];
        let own = m.row.target.as_str();
        let listed = f.simulated.iter().any(|s| s.target == own);
        if let Some(c) = f.conditions.iter().find(|c| c.target == own) {
            return Some(shown(c, listed));
        }
        simulated |= listed;
    }
    simulated.then(|| Shown {
        io: "simulated".into(),
        test_size: 0,
        runs: None,
        measure_s: None,
        engine: String::new(),
        simulated: true,
        queue_depth: None,
    })
}

pub(crate) fn shown(c: &Conditions, listed_simulated: bool) -> Shown {
    Shown {
        io: c.io.clone(),
        test_size: c.test_size,
        runs: c.runs,
        measure_s: c.measure_s,
        engine: c.engine.clone(),
        simulated: c.simulated || listed_simulated,
        queue_depth: c.queue_depth,
    }
}

/// Which conditions differ among `known`, in words (`some_unknown`: others
/// recorded none).
pub fn differences(known: &[&Shown], some_unknown: bool) -> String {
    let mut what = Vec::new();
    let differs = |f: &dyn Fn(&Shown) -> String| known.windows(2).any(|w| f(w[0]) != f(w[1]));
    if differs(&|s| s.io.clone()) {
        what.push("I/O path");
    }
    if differs(&|s| s.test_size.to_string()) {
        what.push("test size");
    }
    if differs(&|s| format!("{:?} {:?}", s.runs, s.measure_s)) {
        what.push("runs or seconds");
    }
    if differs(&|s| s.engine.clone()) {
        what.push("engine");
    }
    if differs(&|s| format!("{:?}", s.queue_depth)) {
        what.push("queue depth");
    }
    if differs(&|s| s.simulated.to_string()) {
        what.push("simulated against measured");
    }
    if some_unknown {
        what.push("some not recorded");
    }
    what.join(", ")
}

#[cfg(test)]
mod tests;
