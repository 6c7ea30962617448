//! A seed's section of the page (`raidlab seeds --out`): the article's
//! findings with the simulation's verdict and the figures behind each, the
//! error figures, and as run conditions the simulated configuration each
//! figure ran on, not the machine that computed it (virtual figures are the
//! same on every machine).
//!
//! Decides: how a result file's `seed` part is read, checked and shown. It
//! must never decide a verdict or compute an error figure (the run did; this
//! shows them as written), and never present the computing machine as the
//! conditions of a simulated figure.

use crate::html::esc;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// The verdicts a finding can have, as `raidlab seeds` prints them.
pub const VERDICTS: [&str; 3] = ["reproduced", "not reproduced", "not modelled"];

/// One seed's findings, error figures and simulated configurations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Seed {
    /// The seed's letter (SEEDS.md).
    pub seed: String,
    /// What the simulation leaves out of the article's experiment.
    #[serde(default)]
    pub scope: String,
    pub findings: Vec<Finding>,
    #[serde(default)]
    pub errors: Vec<ErrorFigure>,
    #[serde(default)]
    pub configs: Vec<SimConfig>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub text: String,
    /// One of [`VERDICTS`].
    pub verdict: String,
    /// The figures the finding's rule compared, or what the model lacks.
    pub why: String,
}

/// A median absolute error |simulated/article - 1| over a set of cells.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorFigure {
    pub what: String,
    pub cells: u64,
    /// A fraction: 0.082 is 8.2%.
    pub median_abs_error: f64,
}

/// What one configuration (a group of the rows) ran on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimConfig {
    pub config: String,
    /// The simulator's short form (after `sim:`).
    pub spec: String,
    pub drives: String,
    pub card: String,
    pub host: String,
    pub fs: String,
}

impl Seed {
    /// The checks the types cannot make: (JSON path under `$.seed`, message).
    pub fn check(&self) -> Result<(), (String, String)> {
        for (i, f) in self.findings.iter().enumerate() {
            if !VERDICTS.contains(&f.verdict.as_str()) {
                return Err((
                    format!("$.seed.findings[{i}].verdict"),
                    format!(
                        "{:?} is not a verdict (one of: {})",
                        f.verdict,
                        VERDICTS.join(", ")
                    ),
                ));
            }
        }
        for (i, e) in self.errors.iter().enumerate() {
            if !(e.median_abs_error.is_finite() && e.median_abs_error >= 0.0) {
                return Err((
                    format!("$.seed.errors[{i}].median_abs_error"),
                    format!(
                        "{} is not an error fraction (a number from 0 up)",
                        e.median_abs_error
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The seed's run conditions, in place of the measured-run table: every
/// figure of the `simulated` target ran in virtual time on the configuration
/// listed; the `article` target is the article's figure.
pub fn conditions(h: &mut String, s: &Seed) {
    h.push_str("<h3>Run conditions</h3>\n<p class=\"note\">The <i>simulated</i> figures ran in virtual time on raidlab-sim, on the simulated hardware and host below: they are the same on every machine, bit for bit, and the machine that computed them (under <i>Result files</i>) does not enter them. The <i>article</i> figures are the article\u{2019}s own (SEEDS.md), measured on its hardware.</p>\n");
    if !s.scope.is_empty() {
        let _ = writeln!(
            h,
            "<p class=\"note\">What the simulation leaves out: {}</p>",
            esc(&s.scope)
        );
    }
    if s.configs.is_empty() {
        h.push_str(
            "<p class=\"note\">The result does not list the simulated configurations.</p>\n",
        );
        return;
    }
    h.push_str("<table class=\"simconfig\">\n<tr><th>configuration</th><th>simulated as (<code>sim:</code>)</th><th>drives</th><th>card</th><th>host model</th><th>file-system layer</th></tr>\n");
    for c in &s.configs {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&c.config),
            esc(&c.spec),
            esc(&c.drives),
            esc(&c.card),
            esc(&c.host),
            esc(&c.fs)
        );
    }
    h.push_str("</table>\n");
}

/// The findings with their verdicts and figures, then the error figures.
pub fn findings(h: &mut String, s: &Seed) {
    h.push_str("<h3>Findings</h3>\n");
    if s.findings.is_empty() {
        h.push_str("<p class=\"note\">The result lists no findings for this seed.</p>\n");
    } else {
        let n = |v: &str| s.findings.iter().filter(|f| f.verdict == v).count();
        let _ = writeln!(
            h,
            "<p>Of the article\u{2019}s {} findings: {} reproduced, {} not reproduced, {} not modelled. Each verdict is computed from the simulated figures by the rule given beside it.</p>",
            s.findings.len(),
            n("reproduced"),
            n("not reproduced"),
            n("not modelled")
        );
        h.push_str("<table class=\"findings\">\n<tr><th>the article found</th><th>verdict</th><th>figures behind it</th></tr>\n");
        for f in &s.findings {
            let class = match f.verdict.as_str() {
                "reproduced" => "yes",
                "not reproduced" => "no",
                _ => "na",
            };
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td class=\"verdict {class}\">{}</td><td>{}</td></tr>",
                esc(&f.text),
                esc(&f.verdict),
                esc(&f.why)
            );
        }
        h.push_str("</table>\n");
    }
    if !s.errors.is_empty() {
        h.push_str("<h3>Error against the article</h3>\n<table class=\"errors\">\n<tr><th>cells</th><th>how many</th><th>median |simulated / article \u{2212} 1|</th></tr>\n");
        for e in &s.errors {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{:.1}%</td></tr>",
                esc(&e.what),
                e.cells,
                e.median_abs_error * 100.0
            );
        }
        h.push_str("</table>\n");
    }
}

#[cfg(test)]
mod tests {
    use crate::input::ResultFile;

    /// A seed result as `raidlab seeds --out` writes it, with one hostile
    /// string, and `patch` applied to its `seed` part.
    fn seed_file(patch: impl FnOnce(&mut serde_json::Value)) -> String {
        let mut v = serde_json::json!({
            "format": "raidlab-bench/1",
            "suite": "seed D: SSD vs SATA HDD RAID (Bonnie++)",
            "created": "2026-12-02T10:00:00Z",
            "host": {"hostname": "builder", "cpus": 2, "kernel": "6.1"},
            "targets": ["article", "simulated"],
            "rows": [
                {"suite": "seed D: SSD vs SATA HDD RAID (Bonnie++)", "group": "hdd", "test": "random_seeks",
                 "target": "article", "metric": "seeks/s", "value": 100.0, "higher_is_better": true},
                {"suite": "seed D: SSD vs SATA HDD RAID (Bonnie++)", "group": "hdd", "test": "random_seeks",
                 "target": "simulated", "metric": "seeks/s", "value": 174.0, "higher_is_better": true}
            ],
            "details": null,
            "seed": {
                "seed": "D",
                "scope": "block level <b>",
                "findings": [
                    {"text": "SSD seeks far above the HDD's", "verdict": "reproduced", "why": "SSD 4933, HDD 174 seeks/s"},
                    {"text": "<script>x</script>", "verdict": "not reproduced", "why": "a < b"},
                    {"text": "metadata", "verdict": "not modelled", "why": "needs a file system"}
                ],
                "errors": [{"what": "every cell", "cells": 36, "median_abs_error": 0.0824}],
                "configs": [{"config": "hdd", "spec": "samsung-hd753lj:scheduler=cfq",
                    "drives": "one samsung-hd753lj", "card": "none", "host": "I/O scheduler cfq", "fs": "none: block level"}]
            }
        });
        patch(&mut v["seed"]);
        v.to_string()
    }

    fn cells(html: &str, class: &str) -> Vec<Vec<String>> {
        let at = html
            .find(&format!("<table class=\"{class}\">"))
            .unwrap_or_else(|| panic!("no table {class}"));
        let t = &html[at..at + html[at..].find("</table>").unwrap()];
        t.split("<tr>")
            .skip(1)
            .map(|tr| {
                tr.split("<t")
                    .skip(1)
                    .filter(|c| c.starts_with('d') || c.starts_with('h'))
                    .map(|c| {
                        let body = &c[c.find('>').unwrap() + 1..];
                        body[..body.find("</t").unwrap()].to_string()
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn a_seed_section_shows_findings_errors_and_the_simulated_configuration() {
        let f = ResultFile::from_json("d.json", &seed_file(|_| {})).unwrap();
        let html = crate::render_html(&[f]);
        let findings = cells(&html, "findings");
        assert_eq!(
            findings[1..],
            [
                vec![
                    "SSD seeks far above the HDD&#39;s".to_string(),
                    "reproduced".into(),
                    "SSD 4933, HDD 174 seeks/s".into()
                ],
                vec![
                    "&lt;script&gt;x&lt;/script&gt;".into(),
                    "not reproduced".into(),
                    "a &lt; b".into()
                ],
                vec![
                    "metadata".into(),
                    "not modelled".into(),
                    "needs a file system".into()
                ],
            ]
        );
        assert!(html.contains("<td class=\"verdict yes\">reproduced</td>"));
        assert!(html.contains("<td class=\"verdict no\">not reproduced</td>"));
        assert!(html.contains("1 reproduced, 1 not reproduced, 1 not modelled"));
        assert_eq!(
            cells(&html, "errors")[1],
            ["every cell", "36", "8.2%"].map(String::from)
        );
        let conf = cells(&html, "simconfig");
        assert_eq!(conf[1][0], "hdd");
        assert_eq!(conf[1][1], "<code>samsung-hd753lj:scheduler=cfq</code>");
        assert_eq!(conf[1][4], "I/O scheduler cfq");
        assert!(html.contains("block level &lt;b&gt;"));
        assert!(!html.contains("do not record how these targets were measured"));
        assert!(!html.contains("<script>"));
        // The computing machine is named as such, not as the test host.
        let src = cells(&html, "sources");
        assert!(
            src[1][3].starts_with("simulated in virtual time (computed on builder;"),
            "{src:?}"
        );
    }

    #[test]
    fn a_verdict_that_is_not_one_is_refused_with_its_path() {
        let e = ResultFile::from_json(
            "d.json",
            &seed_file(|s| s["findings"][1]["verdict"] = "sort of".into()),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("at $.seed.findings[1].verdict: \"sort of\" is not a verdict"),
            "{e}"
        );
        let e = ResultFile::from_json(
            "d.json",
            &seed_file(|s| s["errors"][0]["median_abs_error"] = (-0.5).into()),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("at $.seed.errors[0].median_abs_error"), "{e}");
        let e = ResultFile::from_json(
            "d.json",
            &seed_file(|s| {
                s.as_object_mut().unwrap().remove("findings");
            }),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("$.seed"), "{e}");
        assert!(e.contains("findings"), "{e}");
    }
}
