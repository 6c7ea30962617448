use super::*;
use crate::input::Row;

fn row(group: &str, test: &str, target: &str, metric: &str, value: f64) -> Row {
    Row {
        suite: "cdm".into(),
        group: group.into(),
        test: test.into(),
        target: target.into(),
        metric: metric.into(),
        value,
        higher_is_better: !metric.starts_with("latency"),
    }
}

fn file(source: &str, targets: &[&str], rows: Vec<Row>) -> ResultFile {
    ResultFile {
        baseline: None,
        conditions: Vec::new(),
        simulated: Vec::new(),
        seed: None,
        source: source.into(),
        format: crate::FORMAT.into(),
        suite: "cdm".into(),
        created: Some("2026-11-21T10:00:00Z".into()),
        host: Default::default(),
        targets: targets.iter().map(|s| s.to_string()).collect(),
        rows,
    }
}

#[test]
fn escaping() {
    assert_eq!(
        esc(r#"<a href="x">&'"#),
        "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
    );
    assert_eq!(esc("RAID 5 µs ÷"), "RAID 5 µs ÷");
}

#[test]
fn hostile_labels_are_shown_not_run() {
    let evil = "<script>alert(1)</script>";
    let f = file(
        "<img src=x onerror=alert(2)>.json",
        &[evil],
        vec![row("<b>g</b>", "t\"'", evil, "<i>MB/s</i>", 1.0)],
    );
    let html = render_html(&[f]);
    assert!(!html.contains("<script"), "{html}");
    assert!(!html.contains("<img"));
    assert!(!html.contains("<b>g"));
    assert!(!html.contains("<i>MB"));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("&lt;b&gt;g&lt;/b&gt;"));
    assert!(html.contains("t&quot;&#39;"));
}

#[test]
fn figures_rounded_as_the_tools_show_them() {
    assert_eq!(shown(13221.286051794548, "MB/s"), "13221.29");
    assert_eq!(shown(123850.14, "IOPS"), "123850");
    assert_eq!(shown(0.7980567220573407, "latency µs"), "0.8");
    assert_eq!(shown(-0.01, "latency µs"), "0.0");
    assert_eq!(shown(321.25, "seeks/s"), "321");
    assert_eq!(shown(0.00123456, "ratio"), "0.00123");
    // CrystalDiskMark's window: two decimals for MB/s, IOPS and µs, whole
    // (cut, not rounded) from a million up.
    assert_eq!(shown_in(13221.286051794548, "cdm", "MB/s"), "13221.29");
    assert_eq!(shown_in(1200.004, "cdm", "MB/s avg"), "1200.00");
    assert_eq!(shown_in(123850.14, "cdm", "IOPS"), "123850.14");
    assert_eq!(shown_in(1234567.89, "cdm", "IOPS"), "1234567");
    assert_eq!(shown_in(0.7980567220573407, "cdm", "latency µs"), "0.80");
    assert_eq!(shown_in(278.52792375971944, "cdm", "latency µs"), "278.53");
    assert_eq!(shown_in(-0.001, "cdm", "latency µs"), "0.00");
    // Other suites and metrics as before.
    assert_eq!(shown_in(123850.14, "job", "IOPS"), "123850");
    assert_eq!(shown_in(77.46, "replay", "latency µs"), "77.5");
    assert_eq!(shown_in(0.00123456, "cdm", "ratio"), "0.00123");
    assert_eq!(shown_in(f64::NAN, "cdm", "MB/s"), "NaN");
}

/// The cells of the numbers table under chart `ci` of the first suite:
/// (group, test) -> one cell per column after them.
fn chart_table(html: &str, ci: usize) -> Vec<(String, String, Vec<String>)> {
    let at = html
        .find(&format!("<figure class=\"chart\" id=\"chart-0-{ci}\">"))
        .expect("chart");
    let fig = &html[at..at + html[at..].find("</figure>").unwrap()];
    let table = &fig[fig.find("<table class=\"numbers\">").expect("table")..];
    table
        .split("<tr>")
        .skip(2)
        .map(|tr| {
            let cells: Vec<String> = tr
                .split("<td")
                .skip(1)
                .map(|td| {
                    let td = &td[td.find('>').unwrap() + 1..];
                    td[..td.find("</td>").unwrap()].to_string()
                })
                .collect();
            (cells[0].clone(), cells[1].clone(), cells[2..].to_vec())
        })
        .collect()
}

/// Issue 39: every figure a chart of a `bench cdm` result draws (each
/// test, metric and target) is in the table under that chart, in its
/// target's column, as CrystalDiskMark's window shows it: MB/s, IOPS and
/// latency in µs with two decimals, from 1,000,000 up whole.
#[test]
fn every_charted_cdm_figure_has_a_table_cell_rounded_as_crystaldiskmark_shows_it() {
    let targets = ["single disk", "RAID 5"];
    let mut rows = Vec::new();
    let mut x = 2.71f64;
    for target in targets {
        for group in ["SEQ1M Q8T1", "SEQ1M Q1T1", "RND4K Q32T1", "RND4K Q1T1"] {
            for test in ["read", "write"] {
                x = (x * 7.31 + 3.77) % 997.0;
                let (mb, iops, lat) = if group.starts_with("SEQ") {
                    (x * 3.0, x * 3.0 / 1.048576, 8e6 / (x * 3.0))
                } else {
                    (x / 10.0, x * 2.44140625e1, 4.096e4 / x)
                };
                for (metric, v) in [
                    ("MB/s", mb),
                    ("IOPS", iops),
                    ("latency µs", lat),
                    ("MB/s avg", mb * 0.97),
                ] {
                    rows.push(row(group, test, target, metric, v));
                }
            }
        }
    }
    // A million IOPS and more: whole, the fraction cut off.
    rows[2 * 4 * 4 + 9].value = 1_234_567.89;
    assert_eq!(rows[2 * 4 * 4 + 9].metric, "IOPS");
    let files = [file("cdm.json", &targets, rows)];
    let html = render_html(&files);
    let model = Model::new(&files, None);
    let charts = &model.suites[0].charts;
    assert_eq!(charts.len(), 8, "4 metrics x 2 kinds of test");
    let mut checked = 0;
    for (ci, chart) in charts.iter().enumerate() {
        let table = chart_table(&html, ci);
        for g in &chart.groups {
            for t in &g.tests {
                let line = table
                    .iter()
                    .find(|(tg, tt, _)| *tg == g.name && *tt == t.name)
                    .unwrap_or_else(|| panic!("no table row {} {}", g.name, t.name));
                for &(target, v) in &t.bars {
                    let col = chart.targets.iter().position(|&c| c == target).unwrap();
                    let want = if v >= 1e6 {
                        format!("{}", v.trunc())
                    } else {
                        format!("{v:.2}")
                    };
                    assert_eq!(
                        line.2[col], want,
                        "{} {} {} {}: {v}",
                        g.name, t.name, chart.metric, model.targets[target]
                    );
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 2 * 4 * 2 * 4, "every row charted and checked");
    assert!(html.contains("<td class=\"n\">1234567</td>"));
}

#[test]
fn number_formats() {
    assert_eq!(exact(564.95), "564.95");
    assert_eq!(exact(2.0), "2");
    assert_eq!(short(564.95), "564.95");
    assert_eq!(short(1116.341), "1116.34");
    assert_eq!(short(1500.0), "1500");
    assert_eq!(short(0.00123456), "0.00123");
    assert_eq!(short(0.0), "0");
    assert_eq!(short(-0.001), "-0.001");
    assert_eq!(short(-2.5), "-2.5");
}

fn two_target_file() -> ResultFile {
    file(
        "a.json",
        &["single disk", "RAID 0"],
        vec![
            row("SEQ1M Q8T1", "read", "single disk", "MB/s", 564.95),
            row("SEQ1M Q8T1", "read", "RAID 0", "MB/s", 1116.34),
            row("RND4K Q1T1", "write", "single disk", "latency µs", 40.0),
            row("RND4K Q1T1", "write", "RAID 0", "latency µs", 50.0),
        ],
    )
}

#[test]
fn every_row_appears_in_table_tooltip_and_bar() {
    let html = render_html(&[two_target_file()]);
    // The tooltip carries the exact value, the table and the bar label
    // the value as CrystalDiskMark shows it (latency in µs with two
    // decimals).
    for (g, t, target, m, v, cell) in [
        (
            "SEQ1M Q8T1",
            "read",
            "single disk",
            "MB/s",
            "564.95",
            "564.95",
        ),
        ("SEQ1M Q8T1", "read", "RAID 0", "MB/s", "1116.34", "1116.34"),
        (
            "RND4K Q1T1",
            "write",
            "single disk",
            "latency µs",
            "40",
            "40.00",
        ),
        ("RND4K Q1T1", "write", "RAID 0", "latency µs", "50", "50.00"),
    ] {
        assert!(
            html.contains(&format!("<title>{g} · {t} · {target}: {v} {m}</title>")),
            "no tooltip for {target} {v}"
        );
        assert!(
            html.contains(&format!("<td class=\"n\">{cell}</td>")),
            "{cell}"
        );
        // The bar's label is rounded as the table is.
        assert!(
            html.contains(&format!("text-anchor=\"start\">{cell}</text>")),
            "{cell}"
        );
    }
    assert_eq!(html.matches("<rect class=\"bar\"").count(), 4);
    assert_eq!(html.matches("<figure class=\"chart\"").count(), 2);
    // Ratio vs the first target, coloured in the metric's sense and said in
    // words; one line per test (its headline figure).
    assert!(html.contains("<th>single disk (baseline)</th><th>RAID 0</th><th>× baseline</th>"));
    assert!(
        html.contains(
            "<td class=\"n better\" title=\"RAID 0 is 1.98x the single disk in MB/s\">1.98×</td>"
        ),
        "{html}"
    );
    assert!(html.contains(">1.25×</td>"));
    assert!(html.contains(
        "<td class=\"n worse\" title=\"RAID 0 is 1.25x the single disk in latency µs\">"
    ));
    assert!(html.contains("<li>RAID 0 is 1.25x to 1.98x the single disk (geometric mean 1.57x over 2 tests).</li>"), "{html}");
    assert!(html.contains("cdm: MB/s, sequential tests (higher is better)"));
    assert!(html.contains("latency µs, random tests (lower is better)"));
    // No conditions recorded: said, not guessed.
    assert!(html.contains("do not record how these targets were measured"));
}

#[test]
fn a_simulation_is_not_better_or_worse_than_its_article() {
    let rows = vec![
        row("1ssd", "SEQ1M-Q8T1-read", "article", "MB/s", 500.0),
        row("1ssd", "SEQ1M-Q8T1-read", "simulated", "MB/s", 600.0),
    ];
    let html = render_html(&[file("e.json", &["article", "simulated"], rows.clone())]);
    assert!(html.contains(">1.20×</td>"), "{html}");
    assert!(!html.contains("n better") && !html.contains("n worse"));
    // The same figures between two measured targets are coloured.
    let mut other = rows;
    other[0].target = "one".into();
    other[1].target = "two".into();
    let html = render_html(&[file("m.json", &["one", "two"], other)]);
    assert!(html.contains("<td class=\"n better\""), "{html}");
}

#[test]
fn colours_follow_targets_across_charts() {
    let html = render_html(&[two_target_file()]);
    let first = format!("fill=\"{}\"", svg::colour(0));
    let second = format!("fill=\"{}\"", svg::colour(1));
    assert_eq!(html.matches(&first).count(), 2);
    assert_eq!(html.matches(&second).count(), 2);
    assert_eq!(
        html.matches(&format!("background:{}", svg::colour(1)))
            .count(),
        2,
        "one legend entry per chart"
    );
}

#[test]
fn self_contained() {
    let html = render_html(&[two_target_file()]);
    for bad in [
        "http://", "https://", "src=", "<script", "<link", "url(", "@import",
    ] {
        assert!(!html.contains(bad), "page holds {bad:?}");
    }
    // Every href is a fragment or the data: CSV.
    for part in html.split("href=\"").skip(1) {
        assert!(
            part.starts_with('#') || part.starts_with("data:text/csv"),
            "{}",
            &part[..40.min(part.len())]
        );
    }
}

#[test]
fn csv_link_holds_the_csv() {
    let files = [two_target_file()];
    let html = render_html(&files);
    let start = html.find("data:text/csv;charset=utf-8,").unwrap() + 28;
    let end = start + html[start..].find('"').unwrap();
    let encoded = &html[start..end];
    let mut bytes = Vec::new();
    let mut it = encoded.bytes();
    while let Some(b) = it.next() {
        if b == b'%' {
            let hex = [it.next().unwrap(), it.next().unwrap()];
            bytes.push(u8::from_str_radix(std::str::from_utf8(&hex).unwrap(), 16).unwrap());
        } else {
            bytes.push(b);
        }
    }
    assert_eq!(String::from_utf8(bytes).unwrap(), crate::render_csv(&files));
}

#[test]
fn negative_and_empty_do_not_panic() {
    let f = file("n.json", &["a"], vec![row("g", "t", "a", "delta", -3.5)]);
    let html = render_html(&[f]);
    assert!(html.contains("text-anchor=\"end\">-3.5</text>"), "{html}");
    let empty = render_html(&[file("e.json", &["a"], vec![])]);
    assert!(empty.contains("hold no measurements"));
    let none = render_html(&[]);
    assert!(none.contains("0 measurements"));
}
