//! CrystalDiskMark's own window on the page: per measured target its tests down
//! and Read/Write (and Mix) across, MB/s with two decimals; and for a seed of
//! `raidlab seeds` that is a CrystalDiskMark table (seed E), the same grid per
//! configuration with the article's figure beside the simulated one and their
//! ratio, rounded as `raidlab seeds` prints them in the terminal.
//!
//! It decides how a grid is laid out and how a ratio is coloured; it never
//! computes a figure other than a ratio, and never reads files.

use crate::html::{esc, shown_in};
use crate::model::{kind, Model, SuiteView, SummaryRow};
use std::fmt::Write as _;

/// The class of a ratio cell: `better` when the target beats the baseline in
/// the metric's sense, `worse` when it does worse, neither when the ratio as
/// shown (two decimals) reads 1.00: a 0.999x shown as "1.00×" in red would
/// contradict its own figure.
pub fn ratio_class(q: f64, higher_is_better: bool) -> &'static str {
    let as_shown = (q * 100.0).round() / 100.0;
    if as_shown == 1.0 || !q.is_finite() {
        "n"
    } else if (as_shown > 1.0) == higher_is_better {
        "n better"
    } else {
        "n worse"
    }
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// The distinct values of `key` over `rows`, first seen first.
fn first_seen<'a>(
    rows: &[&'a SummaryRow],
    key: impl Fn(&'a SummaryRow) -> &'a str,
) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for r in rows {
        let k = key(r);
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

/// CrystalDiskMark's own window per target: its tests down, Read and Write (and
/// Mix) across, MB/s with two decimals.
pub fn cdm_grids(h: &mut String, model: &Model, suite: &SuiteView) {
    let mb: Vec<&SummaryRow> = suite
        .summary
        .iter()
        .filter(|r| r.metric == "MB/s")
        .collect();
    if mb.is_empty() {
        return;
    }
    let groups = first_seen(&mb, |r| r.group.as_str());
    let dirs = first_seen(&mb, |r| r.test.as_str());
    h.push_str("<h3>CrystalDiskMark (MB/s)</h3>\n<div class=\"grids\">\n");
    for (col, &t) in suite.targets.iter().enumerate() {
        let _ = write!(
            h,
            "<table class=\"cdm\"><caption>{}</caption><tr><th></th>",
            esc(&model.targets[t])
        );
        for d in &dirs {
            let _ = write!(h, "<th>{}</th>", esc(&capitalised(d)));
        }
        h.push_str("</tr>\n");
        for g in &groups {
            let _ = write!(h, "<tr><th>{}</th>", esc(g));
            for d in &dirs {
                let v = mb
                    .iter()
                    .find(|r| r.group == *g && r.test == *d)
                    .and_then(|r| r.values[col]);
                let _ = write!(
                    h,
                    "<td class=\"n\">{}</td>",
                    v.map_or("–".into(), |v| esc(&shown_in(v, "cdm", "MB/s")))
                );
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</table>\n");
    }
    h.push_str("</div>\n");
}

/// `SEQ1M-Q8T1-read` -> (`SEQ1M Q8T1`, `read`): a seed's CrystalDiskMark cell
/// name split into the grid's line and column; None for anything else.
fn cdm_cell(test: &str) -> Option<(String, &str)> {
    let (name, dir) = test.rsplit_once('-')?;
    kind(name, "")?;
    matches!(dir, "read" | "write" | "mix").then(|| (name.replace('-', " "), dir))
}

/// Per configuration of a seed whose targets are `article` and `simulated` and
/// whose MB/s cells are CrystalDiskMark tests: the grid with, per direction, the
/// article's figure, the simulated one and simulated ÷ article, each to two
/// decimals as `raidlab seeds` prints them. Nothing for other suites.
pub fn seed_grids(h: &mut String, model: &Model, suite: &SuiteView) {
    let col = |label: &str| {
        suite
            .targets
            .iter()
            .position(|&t| model.targets[t] == label)
    };
    let (Some(art), Some(sim)) = (col("article"), col("simulated")) else {
        return;
    };
    let mb: Vec<&SummaryRow> = suite
        .summary
        .iter()
        .filter(|r| r.metric == "MB/s" && cdm_cell(&r.test).is_some())
        .collect();
    if mb.is_empty() {
        return;
    }
    let configs = first_seen(&mb, |r| r.group.as_str());
    let mut tests: Vec<String> = Vec::new();
    let mut dirs: Vec<&str> = Vec::new();
    for (t, d) in mb.iter().filter_map(|r| cdm_cell(&r.test)) {
        if !tests.contains(&t) {
            tests.push(t);
        }
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    h.push_str("<h3>CrystalDiskMark grids, article beside simulation (MB/s)</h3>\n<p class=\"note\">Per configuration: the article\u{2019}s figure, the simulated one and simulated \u{f7} article, rounded as <code>raidlab seeds</code> prints them; \u{2013} where the article gives no figure.</p>\n<div class=\"grids\">\n");
    for g in &configs {
        let _ = write!(
            h,
            "<table class=\"seedgrid\"><caption>{}</caption><tr><th></th>",
            esc(g)
        );
        for d in &dirs {
            let _ = write!(
                h,
                "<th>{0} article</th><th>{0} simulated</th><th>\u{d7}</th>",
                esc(&capitalised(d))
            );
        }
        h.push_str("</tr>\n");
        for t in &tests {
            let _ = write!(h, "<tr><th>{}</th>", esc(t));
            for d in &dirs {
                let row = mb.iter().find(|r| {
                    r.group == *g && cdm_cell(&r.test).is_some_and(|(rt, rd)| rt == *t && rd == *d)
                });
                let a = row.and_then(|r| r.values[art]);
                let s = row.and_then(|r| r.values[sim]);
                let fig = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.2}"));
                let q = match (a, s) {
                    (Some(a), Some(s)) if a > 0.0 => format!("{:.2}\u{d7}", s / a),
                    _ => "–".to_string(),
                };
                let _ = write!(
                    h,
                    "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{q}</td>",
                    fig(a),
                    fig(s)
                );
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</table>\n");
    }
    h.push_str("</div>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_colour_follows_the_figure_as_shown() {
        // 0.999 reads "1.00×": neither colour, whichever way it leans.
        assert_eq!(ratio_class(0.999, true), "n");
        assert_eq!(ratio_class(1.004, false), "n");
        assert_eq!(ratio_class(1.0, true), "n");
        // Just past the rounding: coloured in the metric's sense.
        assert_eq!(ratio_class(0.994, true), "n worse");
        assert_eq!(ratio_class(1.006, true), "n better");
        assert_eq!(ratio_class(0.994, false), "n better");
        assert_eq!(ratio_class(1.006, false), "n worse");
        assert_eq!(ratio_class(f64::NAN, true), "n");
    }

    #[test]
    fn seed_cells_split_into_line_and_column() {
        assert_eq!(
            cdm_cell("SEQ1M-Q8T1-read"),
            Some(("SEQ1M Q8T1".to_string(), "read"))
        );
        assert_eq!(
            cdm_cell("RND4K-Q1T1-write"),
            Some(("RND4K Q1T1".to_string(), "write"))
        );
        assert_eq!(cdm_cell("rebuild-time"), None);
        assert_eq!(cdm_cell("SEQ1M-Q8T1-sideways"), None);
    }
}
