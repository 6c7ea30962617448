//! The report of the fixture results, opened in headless Chromium: the rendered DOM
//! holds a bar, a tooltip and a table cell for every row, no script, and a
//! screenshot shows a bar in each target's colour (the charts were painted, not
//! just sent).
//!
//! Chromium comes from scripts/test.sh (it installs it when run as root). Without
//! it, as root this test fails (CI must not skip it silently); as another user it
//! prints `SKIPPED: <why>` and passes.

mod chromium;

use chromium::{chromium, chromium_or_skip, dom_text, table_cells};
use std::path::{Path, PathBuf};

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    [
        "cdm-ssd-raid.json",
        "cdm-rerun.json",
        "bonnie-ssd-hdd-raid6.json",
        "job-desktop-hdd.json",
        "iozone-raid5-ssd-cache.json",
    ]
    .iter()
    .map(|f| dir.join(f))
    .collect()
}

fn hex_rgb(s: &str) -> [u8; 3] {
    let v = u32::from_str_radix(s.trim_start_matches('#'), 16).expect("colour");
    [(v >> 16) as u8, (v >> 8) as u8, v as u8]
}

#[test]
fn report_renders_every_row_in_chromium() {
    let Some(bin) = chromium_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let csv = dir.path().join("report.csv");
    let summary = raidlab_report::write_report(&fixtures(), &html, Some(&csv)).unwrap();
    assert_eq!(summary.files, 5);
    assert_eq!(summary.rows, 26 + 4 + 21 + 18 + 12);

    let profile = dir.path().join("profile");
    let dom = chromium(&bin, &profile, &html, &["--dump-dom".into()]);
    let dom = String::from_utf8(dom).expect("DOM is UTF-8");
    assert!(dom.contains("<svg class=\"chart\""), "no chart in the DOM");
    assert!(!dom.contains("<script"), "the page must run no script");

    // The CSV names each row's target as the page shows it; every row must have a
    // bar with its exact value in the tooltip and a cell in a table showing it
    // rounded as the tool it comes from shows it (CrystalDiskMark's window:
    // MB/s, IOPS and µs to two decimals), the rounding of the exact value.
    let mut reader = csv::Reader::from_path(&csv).unwrap();
    let mut rows = 0;
    for rec in reader.records() {
        let rec = rec.unwrap();
        let (suite, group, test, target, metric, value) =
            (&rec[2], &rec[3], &rec[4], &rec[5], &rec[6], &rec[7]);
        let tooltip = dom_text(&format!(
            "<title>{group} · {test} · {target}: {value} {metric}</title>"
        ));
        // The tags themselves are markup, not text.
        let tooltip = tooltip.replacen("&lt;title&gt;", "<title>", 1).replacen(
            "&lt;/title&gt;",
            "</title>",
            1,
        );
        assert!(dom.contains(&tooltip), "no bar for {tooltip}");
        let exact: f64 = value.parse().unwrap();
        let rounded = raidlab_report::shown_in(exact, suite, metric);
        assert!(
            dom.contains(&format!("<td class=\"n\">{rounded}</td>")),
            "no table cell showing {rounded} for {value} {metric}"
        );
        // Never more decimals on the page than the tool shows.
        if metric.starts_with("MB/s") {
            assert!(
                rounded.split_once('.').map_or(true, |(_, d)| d.len() == 2),
                "{rounded}"
            );
        }
        rows += 1;
    }
    assert_eq!(rows, summary.rows);
    grids_and_comparison_match_the_json(&dom, &csv);
    assert_eq!(dom.matches("<rect class=\"bar\"").count(), rows);
    assert_eq!(
        dom.matches("<figure class=\"chart\"").count(),
        summary.charts
    );
    // Disambiguated labels of the two cdm runs are both shown.
    assert!(dom.contains("RAID 5 (cdm-ssd-raid)"));
    assert!(dom.contains("RAID 5 (cdm-rerun)"));

    // The legend of the first chart gives its targets' colours; each must be
    // painted somewhere in the first screenful.
    let first_fig = &dom[dom.find("<figure").unwrap()..];
    let legend = &first_fig[..first_fig.find("</ul>").unwrap()];
    let colours: Vec<[u8; 3]> = legend
        .split("background:")
        .skip(1)
        .map(|s| hex_rgb(&s[..7]))
        .collect();
    assert_eq!(colours.len(), 4, "first chart: 4 cdm targets");

    let shot = dir.path().join("shot.png");
    let (w, h) = (1300u32, 2000u32);
    chromium(
        &bin,
        &profile,
        &html,
        &[
            format!("--screenshot={}", shot.display()),
            format!("--window-size={w},{h}"),
        ],
    );
    let decoder = png::Decoder::new(std::fs::File::open(&shot).expect("screenshot written"));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (w, h));
    let channels = info.color_type.samples();
    assert!(channels >= 3, "{:?}", info.color_type);
    let pixels: Vec<[u8; 3]> = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|p| [p[0], p[1], p[2]])
        .collect();
    let non_white = pixels.iter().filter(|p| p.iter().any(|&c| c < 240)).count();
    assert!(
        non_white > pixels.len() / 50,
        "screenshot is nearly blank: {non_white} of {} pixels not white",
        pixels.len()
    );
    // A bar, unlike a 14-pixel legend swatch, is a long horizontal run of its
    // colour: each target's longest bar in the first chart spans 90+ pixels.
    for c in colours {
        let matches = |p: &[u8; 3]| (0..3).all(|i| p[i].abs_diff(c[i]) <= 8);
        let longest = pixels
            .chunks(w as usize)
            .map(|row| {
                let (mut best, mut run) = (0, 0);
                for p in row {
                    run = if matches(p) { run + 1 } else { 0 };
                    best = best.max(run);
                }
                best
            })
            .max()
            .unwrap_or(0);
        assert!(
            longest >= 30,
            "no bar painted in colour {c:?}: longest run {longest} pixels"
        );
    }
}

/// CrystalDiskMark's grid per target and the comparison table show each figure
/// of the JSON rounded as the tool shows it, and each ratio to the baseline
/// (the first target, "single disk") computed from the exact values.
fn grids_and_comparison_match_the_json(dom: &str, csv_path: &Path) {
    let mut reader = csv::Reader::from_path(csv_path).unwrap();
    let rows: Vec<(String, String, String, String, f64)> = reader
        .records()
        .map(|r| r.unwrap())
        .filter(|r| &r[2] == "cdm")
        .map(|r| {
            (
                r[3].to_string(),
                r[4].to_string(),
                r[5].to_string(),
                r[6].to_string(),
                r[7].parse().unwrap(),
            )
        })
        .collect();
    let value = |g: &str, t: &str, target: &str| {
        rows.iter()
            .find(|r| r.0 == g && r.1 == t && r.2 == target && r.3 == "MB/s")
            .map(|r| r.4)
    };
    let mut checked = 0;
    for target in [
        "single disk",
        "RAID 0",
        "RAID 5 (cdm-ssd-raid)",
        "RAID 5 (cdm-rerun)",
    ] {
        let at = dom
            .find(&format!("<caption>{}</caption>", dom_text(target)))
            .unwrap_or_else(|| panic!("no CrystalDiskMark grid for {target}"));
        let grid = table_cells(&dom[at - 40..], "cdm");
        let dirs: Vec<String> = grid[0][1..].iter().map(|d| d.to_lowercase()).collect();
        for line in &grid[1..] {
            for (d, cell) in dirs.iter().zip(&line[1..]) {
                match value(&line[0], d, target) {
                    Some(v) => {
                        assert_eq!(*cell, raidlab_report::shown(v, "MB/s"), "{target} {line:?}");
                        checked += 1;
                    }
                    None => assert_eq!(cell, "–", "{target} {line:?}"),
                }
            }
        }
    }
    assert_eq!(
        checked,
        rows.iter().filter(|r| r.3 == "MB/s").count(),
        "every MB/s figure in a grid"
    );
    // The comparison: "test | metric | single disk (baseline) | RAID 0 | × baseline | ...".
    let table = table_cells(dom, "summary");
    assert_eq!(table[0][2], "single disk (baseline)");
    let names: Vec<&str> = ["RAID 0", "RAID 5 (cdm-ssd-raid)", "RAID 5 (cdm-rerun)"].to_vec();
    for line in &table[1..] {
        let (g, t) = line[0].rsplit_once(' ').unwrap();
        assert!(line[1].starts_with("MB/s"), "headline of {line:?} is MB/s");
        let base = value(g, t, "single disk");
        assert_eq!(
            line[2],
            base.map_or("–".into(), |v| raidlab_report::shown(v, "MB/s"))
        );
        for (i, n) in names.iter().enumerate() {
            let v = value(g, t, n);
            assert_eq!(
                line[3 + 2 * i],
                v.map_or("–".into(), |v| raidlab_report::shown(v, "MB/s"))
            );
            let ratio = match (v, base) {
                (Some(v), Some(b)) => format!("{:.2}×", v / b),
                _ => "–".into(),
            };
            assert_eq!(line[4 + 2 * i], ratio, "{n} in {line:?}");
        }
    }
    assert!(table.len() > 4, "{table:?}");
}

/// `raidlab seeds` writes one raidlab-bench/1 result per seed with the targets
/// "article" and "simulated": the page must put the article's bar beside the
/// simulated one for every cell that has both (seed E's fixture: 36 of 42 cells).
#[test]
fn seeds_report_puts_the_articles_bars_beside_the_simulated_ones_in_chromium() {
    let Some(bin) = chromium_or_skip() else {
        return;
    };
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/seed-E.json");
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("seeds.html");
    let summary =
        raidlab_report::write_report(std::slice::from_ref(&fixture), &html, None).unwrap();
    assert_eq!(summary.targets, 2);
    let dom = chromium(
        &bin,
        &dir.path().join("profile"),
        &html,
        &["--dump-dom".into()],
    );
    let dom = String::from_utf8(dom).expect("DOM is UTF-8");
    assert!(dom.contains("<svg class=\"chart\""), "no chart in the DOM");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let mut pairs = 0;
    for r in rows.iter().filter(|r| r["target"] == "article") {
        let (g, t) = (r["group"].as_str().unwrap(), r["test"].as_str().unwrap());
        for target in ["article", "simulated"] {
            let tooltip = dom_text(&format!("{g} · {t} · {target}: "));
            assert!(dom.contains(&tooltip), "no {target} bar for {g} {t}");
        }
        pairs += 1;
    }
    assert_eq!(pairs, 36);
    assert_eq!(dom.matches("<rect class=\"bar\"").count(), rows.len());
}
