//! The report page: one self-contained HTML file (inline CSS, inline SVG charts,
//! the CSV as a `data:` link, no script and no reference to anything outside the
//! file), so it opens offline, in a mail attachment or a CI artifact viewer.
//!
//! Every string that comes from an input file goes through [`esc`]: labels are
//! user-controlled (a target may be named `<script>`), and the page must show them,
//! never run them.

use crate::compare::{in_words, metrics, ratio, ratios};
use crate::input::ResultFile;
use crate::model::{differences, Model, SuiteView};
use crate::{grid, svg};
use std::fmt::Write as _;

/// Escape text for HTML element content and quoted attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A value exactly as read (shortest form that reads back to the same number):
/// what the tables and tooltips show.
pub fn exact(v: f64) -> String {
    format!("{v}")
}

/// A value as the tool it comes from shows it, for the tables and bar labels
/// (the exact value stays in the tooltip, the JSON and the CSV): for suite
/// `cdm`, as CrystalDiskMark's window shows its figures (`cdm_shown`); for the
/// others by metric ([`shown`]).
pub fn shown_in(v: f64, suite: &str, metric: &str) -> String {
    if suite == "cdm" {
        if let Some(s) = cdm_shown(v, metric) {
            return s;
        }
    }
    shown(v, metric)
}

/// A figure as CrystalDiskMark 8's window shows it (`DiskMarkDlg.cpp`,
/// `UpdateScore`, any profile but Demo): MB/s, IOPS and latency in µs all with
/// two decimals (`%.2f`), and from 1,000,000 up as a whole number, the
/// fraction cut off (`%d` of the value cast to an integer). None for a metric
/// CrystalDiskMark does not show.
fn cdm_shown(v: f64, metric: &str) -> Option<String> {
    let cdm = metric.starts_with("MB/s") || metric.starts_with("IOPS") || metric.contains("µs");
    if !cdm || !v.is_finite() {
        return None;
    }
    if v.abs() >= 1_000_000.0 {
        return Some(format!("{}", v.trunc()));
    }
    Some(no_negative_zero(format!("{v:.2}")))
}

/// "-0.00" and the like read as zero.
fn no_negative_zero(s: String) -> String {
    if s.trim_start_matches('-')
        .chars()
        .all(|c| c == '0' || c == '.')
    {
        return s.trim_start_matches('-').to_string();
    }
    s
}

/// A value rounded by its metric, as the tools other than CrystalDiskMark
/// show it: MB/s with two decimals, IOPS as whole numbers and latency in µs
/// with one decimal (as `raidlab bench` prints them in the terminal; fio's
/// IOPS are whole too), Bonnie++'s seeks/s and files/s and IOzone's kB/s as
/// whole numbers; anything else as a bar label (`short`).
pub fn shown(v: f64, metric: &str) -> String {
    if !v.is_finite() {
        return exact(v);
    }
    let decimals = if metric.starts_with("MB/s") {
        2
    } else if metric.contains("µs") || metric.contains("us") {
        1
    } else if metric.starts_with("IOPS")
        || metric.starts_with("seeks/s")
        || metric.starts_with("files/s")
        || metric.starts_with("kB/s")
        || metric.starts_with("KiB/s")
    {
        0
    } else {
        return short(v);
    };
    no_negative_zero(format!("{v:.decimals$}"))
}

/// A value for a bar label: two decimals for values of 1 and more, three
/// significant digits below, trailing zeros dropped (`564.95`, `1116.3`,
/// `0.00123`).
pub fn short(v: f64) -> String {
    if !v.is_finite() {
        return exact(v);
    }
    let a = v.abs();
    let decimals = if a >= 1.0 || a == 0.0 {
        2
    } else {
        ((-a.log10().floor()) as usize + 2).min(12)
    };
    let s = format!("{v:.decimals$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

/// Human name of a suite; an unknown suite is shown by its own name.
fn suite_title(s: &str) -> String {
    match s {
        "cdm" => "CrystalDiskMark test set (cdm)".into(),
        "bonnie" => "Bonnie++ tests (bonnie)".into(),
        "iozone" => "IOzone record size × file size (iozone)".into(),
        "job" => "fio-style jobs (job)".into(),
        "replay" => "Trace replay (replay)".into(),
        other => other.into(),
    }
}

/// Percent-encode for a `data:` URI: everything but unreserved characters, so the
/// result is also safe inside a quoted attribute without further escaping.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

const CSS: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222;margin:24px auto;max-width:1200px;padding:0 16px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:20px;margin:32px 0 8px;border-bottom:2px solid #ddd}h3{font-size:16px;margin:20px 0 6px}
table{border-collapse:collapse;margin:6px 0 14px;font-variant-numeric:tabular-nums}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}table.summary td,table.numbers td{white-space:nowrap}td.n{text-align:right}
td.better{color:#1b7837}td.worse{color:#b2182b}
figure{margin:18px 0 28px;padding:12px;border:1px solid #e3e3e3;border-radius:6px;overflow-x:auto}
figcaption{font-weight:600;font-size:15px;margin-bottom:6px}
ul.legend{list-style:none;padding:0;margin:0 0 8px;display:flex;flex-wrap:wrap;gap:4px 16px}
ul.legend li{display:flex;align-items:center;gap:6px}
.sw{display:inline-block;width:14px;height:14px;border-radius:2px}
svg.chart{display:block;font:12px system-ui,sans-serif}
svg.chart text.group{font-weight:600}svg.chart text.tick{text-anchor:middle;fill:#555}
svg.chart text.v{fill:#222}svg.chart line.grid{stroke:#e4e4e4}svg.chart line.zero{stroke:#777}
.note{color:#555}
.warn{background:#fff4e5;border-left:4px solid #e69f00;padding:6px 10px;margin:8px 0}
.grids{display:flex;flex-wrap:wrap;gap:6px 24px}table.cdm caption{font-weight:600;text-align:left;padding:2px 0}
table.cdm td.n{min-width:70px}table.seedgrid caption{font-weight:600;text-align:left;padding:2px 0}table.seedgrid td.n{min-width:56px}
td.verdict{font-weight:600;white-space:nowrap}td.verdict.yes{color:#1b7837}td.verdict.no{color:#b2182b}td.verdict.na{color:#555}
"#;

/// The page for `files`: merged as `Model` merges them, each suite compared
/// with its first target or the one its result names.
pub fn render_html(files: &[ResultFile]) -> String {
    render_html_with(files, None)
}

/// [`render_html`] comparing each suite with the target labelled `baseline`
/// where the suite measured it.
pub fn render_html_with(files: &[ResultFile], baseline: Option<&str>) -> String {
    let model = Model::new(files, baseline);
    let csv = crate::csv::render_model(files, &model);
    let mut h = String::new();
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    h.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    h.push_str("<title>raidlab benchmark report</title>\n<style>");
    h.push_str(CSS);
    h.push_str("</style>\n</head>\n<body>\n<h1>raidlab benchmark report</h1>\n");
    let charts: usize = model.suites.iter().map(|s| s.charts.len()).sum();
    let _ = writeln!(
        h,
        "<p>{} measurements of {} targets from {} result files, in {} charts. \
         <a download=\"raidlab-report.csv\" href=\"data:text/csv;charset=utf-8,{}\">Download every row as CSV</a>.</p>",
        model.rows.len(),
        model.targets.len(),
        files.len(),
        charts,
        percent_encode(&csv)
    );
    if model.rows.is_empty() {
        h.push_str("<p class=\"note\">The result files hold no measurements.</p>\n");
    }
    sources(&mut h, files, &model);
    if model.suites.len() > 1 {
        h.push_str("<nav><ul>\n");
        for (si, s) in model.suites.iter().enumerate() {
            let _ = writeln!(
                h,
                "<li><a href=\"#suite-{si}\">{}</a></li>",
                esc(&suite_title(&s.name))
            );
        }
        h.push_str("</ul></nav>\n");
    }
    for (si, suite) in model.suites.iter().enumerate() {
        let seed = files
            .iter()
            .filter(|f| f.suite == suite.name)
            .find_map(|f| f.seed.as_ref());
        suite_section(&mut h, &model, suite, si, seed);
    }
    h.push_str("<p class=\"note\">Made by <code>raidlab report</code>. Bars show each value; hover a bar for the exact number, which the table under each chart also gives.</p>\n");
    h.push_str("</body>\n</html>\n");
    h
}

fn sources(h: &mut String, files: &[ResultFile], model: &Model) {
    h.push_str("<h2>Result files</h2>\n<table class=\"sources\">\n<tr><th>file</th><th>suite</th><th>created</th><th>host</th><th>CPUs</th><th>kernel</th><th>targets (as shown)</th></tr>\n");
    for (fi, f) in files.iter().enumerate() {
        let targets: Vec<String> = model.labels[fi]
            .iter()
            .map(|(orig, shown)| {
                if orig == shown {
                    esc(orig)
                } else {
                    format!("{} (shown as {})", esc(orig), esc(shown))
                }
            })
            .collect();
        // A seed's figures are virtual: the machine that computed them did not
        // measure anything, so it is named as such, not as a test host.
        let host = if f.seed.is_some() {
            format!(
                "<td colspan=\"3\">simulated in virtual time (computed on {}; the figures do not depend on the machine)</td>",
                esc(f.host.hostname.as_deref().unwrap_or("an unnamed machine"))
            )
        } else {
            format!(
                "<td>{}</td><td class=\"n\">{}</td><td>{}</td>",
                esc(f.host.hostname.as_deref().unwrap_or("")),
                f.host.cpus.map(|c| c.to_string()).unwrap_or_default(),
                esc(f.host.kernel.as_deref().unwrap_or(""))
            )
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td>{}<td>{}</td></tr>",
            esc(&f.source),
            esc(&f.suite),
            esc(f.created.as_deref().unwrap_or("")),
            host,
            targets.join(", ")
        );
    }
    h.push_str("</table>\n");
}

fn direction(hib: Option<bool>) -> &'static str {
    match hib {
        Some(true) => "higher is better",
        Some(false) => "lower is better",
        None => "rows disagree on whether higher is better",
    }
}

fn suite_section(
    h: &mut String,
    model: &Model,
    suite: &SuiteView,
    si: usize,
    seed: Option<&crate::seed::Seed>,
) {
    let _ = writeln!(
        h,
        "<section class=\"suite\" id=\"suite-{si}\">\n<h2>{}</h2>",
        esc(&suite_title(&suite.name))
    );
    match seed {
        Some(s) => {
            crate::seed::findings(h, s);
            crate::seed::conditions(h, s);
        }
        None => conditions(h, model, suite),
    }
    if suite.name == "cdm" {
        grid::cdm_grids(h, model, suite);
    }
    grid::seed_grids(h, model, suite);
    if suite.targets.len() > 1 {
        if suite.jobs.is_empty() {
            comparison(h, model, suite);
        } else {
            crate::jobs::comparison_html(h, model, suite);
        }
    }
    let mixed = suite.mixed_conditions();
    for (ci, chart) in suite.charts.iter().enumerate() {
        let title = format!(
            "{}: {}{} ({})",
            suite.name,
            chart.metric,
            chart.kind.map_or(String::new(), |k| format!(", {k} tests")),
            direction(chart.higher_is_better)
        );
        let _ = writeln!(
            h,
            "<figure class=\"chart\" id=\"chart-{si}-{ci}\">\n<figcaption>{}</figcaption>",
            esc(&title)
        );
        if mixed && chart.targets.len() > 1 {
            h.push_str("<p class=\"warn\">These bars come from runs made under different conditions (see <i>Run conditions</i> above): compare them with that in mind.</p>\n");
        }
        h.push_str("<ul class=\"legend\">");
        for &t in &chart.targets {
            let _ = write!(
                h,
                "<li><span class=\"sw\" style=\"background:{}\"></span>{}</li>",
                svg::colour(t),
                esc(&model.targets[t])
            );
        }
        h.push_str("</ul>\n");
        h.push_str(&svg::chart(model, &suite.name, chart, &title));
        // The numbers under the chart as the tool shows them: rows = group and
        // test, columns = the chart's targets.
        h.push_str("\n<table class=\"numbers\">\n<tr><th>group</th><th>test</th>");
        for &t in &chart.targets {
            let _ = write!(h, "<th>{}</th>", esc(&model.targets[t]));
        }
        let _ = writeln!(h, "</tr>");
        for g in &chart.groups {
            for test in &g.tests {
                let _ = write!(
                    h,
                    "<tr><td>{}</td><td>{}</td>",
                    esc(&g.name),
                    esc(&test.name)
                );
                for &t in &chart.targets {
                    let cell: Vec<String> = test
                        .bars
                        .iter()
                        .filter(|b| b.0 == t)
                        .map(|b| esc(&shown_in(b.1, &suite.name, &chart.metric)))
                        .collect();
                    let cell = if cell.is_empty() {
                        "–".to_string()
                    } else {
                        cell.join(" / ")
                    };
                    let _ = write!(h, "<td class=\"n\">{cell}</td>");
                }
                h.push_str("</tr>\n");
            }
        }
        let _ = writeln!(
            h,
            "</table>\n<p class=\"note\">{} in {}.</p>\n</figure>",
            esc(direction(chart.higher_is_better)),
            esc(&chart.metric)
        );
    }
    h.push_str("</section>\n");
}

/// `1073741824` -> `1 GiB`: the test sizes people type.
pub(crate) fn bytes(n: u64) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if n >= 1 << shift && n % (1 << shift) == 0 {
            return format!("{} {unit}", n >> shift);
        }
    }
    format!("{n} bytes")
}

/// How each target was measured: I/O path, test size, runs x seconds, engine,
/// simulated or real; and a warning when they differ.
fn conditions(h: &mut String, model: &Model, suite: &SuiteView) {
    h.push_str("<h3>Run conditions</h3>\n");
    if !suite.jobs.is_empty() {
        crate::jobs::conditions_html(h, model, suite);
        return;
    }
    if suite.conditions.iter().all(Option::is_none) {
        h.push_str("<p class=\"note\">The result files do not record how these targets were measured (results written before raidlab recorded it, or a suite that does not).</p>\n");
        return;
    }
    h.push_str("<table class=\"conditions\">\n<tr><th>target</th><th>I/O</th><th>test size</th><th>runs × seconds</th><th>engine</th><th>figures</th></tr>\n");
    for (i, &t) in suite.targets.iter().enumerate() {
        let _ = write!(h, "<tr><td>{}</td>", esc(&model.targets[t]));
        match &suite.conditions[i] {
            None => h.push_str("<td colspan=\"5\">not recorded</td>"),
            Some(c) => {
                let runs = match (c.runs, c.measure_s) {
                    (Some(r), Some(s)) => format!("{r} × {} s", crate::html::short(s)),
                    (Some(r), None) => format!("{r} runs"),
                    _ => "each test once".into(),
                };
                let _ = write!(
                    h,
                    "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
                    esc(&c.io),
                    if c.test_size > 0 {
                        bytes(c.test_size)
                    } else {
                        "–".into()
                    },
                    esc(&runs),
                    esc(&c.engine),
                    if c.simulated {
                        "simulated (virtual time)"
                    } else {
                        "measured"
                    }
                );
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
    if suite.mixed_conditions() {
        let _ = writeln!(
            h,
            "<p class=\"warn\">The targets of this suite were not measured under the same conditions ({}): a difference in their figures may come from that, not from the targets.</p>",
            esc(&differences(
                &suite.conditions.iter().flatten().collect::<Vec<_>>(),
                suite.conditions.iter().any(Option::is_none)
            ))
        );
    }
}

/// One line per test with its headline figure per target and each target's
/// ratio to the baseline, then the ratios said in words.
fn comparison(h: &mut String, model: &Model, suite: &SuiteView) {
    let names: Vec<&str> = suite
        .targets
        .iter()
        .map(|&t| model.targets[t].as_str())
        .collect();
    let base = names[suite.baseline];
    let against_article = base == "article" && names.contains(&"simulated");
    let lines = suite.headlines();
    let _ = writeln!(
        h,
        "<h3>Compared with {}</h3>\n<p class=\"note\">Each test\u{2019}s headline figure; the ratio is the target\u{2019}s figure over the baseline\u{2019}s (<code>--baseline TARGET</code> picks the baseline).</p>\n<table class=\"summary\">\n<tr><th>test</th><th>metric</th>",
        esc(base)
    );
    for (c, n) in names.iter().enumerate() {
        if c == suite.baseline {
            let _ = write!(h, "<th>{} (baseline)</th>", esc(n));
        } else {
            let _ = write!(h, "<th>{}</th><th>× baseline</th>", esc(n));
        }
    }
    h.push_str("</tr>\n");
    for r in &lines {
        let _ = write!(
            h,
            "<tr><td>{} {}</td><td title=\"{}\">{} {}</td>",
            esc(&r.group),
            esc(&r.test),
            direction(Some(r.higher_is_better)),
            esc(&r.metric),
            if r.higher_is_better { "↑" } else { "↓" }
        );
        for (c, v) in r.values.iter().enumerate() {
            let _ = write!(
                h,
                "<td class=\"n\">{}</td>",
                v.map(|v| esc(&shown_in(v, &suite.name, &r.metric)))
                    .unwrap_or_else(|| "–".into())
            );
            if c == suite.baseline {
                continue;
            }
            match ratio(*v, r.values[suite.baseline]) {
                Some(q) => {
                    // Green when this target beats the baseline in this metric's
                    // sense, red when it does worse; a simulation against its
                    // article is neither (faster than the article is not better).
                    let class = if against_article {
                        "n"
                    } else {
                        grid::ratio_class(q, r.higher_is_better)
                    };
                    let _ = write!(
                        h,
                        "<td class=\"{class}\" title=\"{}\">{q:.2}×</td>",
                        esc(&in_words(names[c], base, &[q], &[&r.metric]))
                    );
                }
                None => h.push_str("<td class=\"n\">–</td>"),
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n<ul class=\"words\">\n");
    let units = metrics(&lines);
    for (c, n) in names.iter().enumerate() {
        if c != suite.baseline {
            let _ = writeln!(
                h,
                "<li>{}.</li>",
                esc(&in_words(n, base, &ratios(suite, &lines, c), &units))
            );
        }
    }
    h.push_str("</ul>\n");
}

#[cfg(test)]
mod tests;
