//! `raidlab seeds E --out DIR` as a user runs it, the page opened in headless
//! Chromium: seed E's CrystalDiskMark grid per configuration shows the article's
//! figure, the simulated one and their ratio exactly as rounded from the
//! figures `raidlab seeds E --json` gives for the same run (no simulated value
//! is written into this test: the seed figures are the model's to change).

#[path = "../../raidlab-report/tests/chromium/mod.rs"]
mod chromium;

use assert_cmd::Command;
use chromium::{chromium, chromium_or_skip, dom_text, table_cells};

#[test]
fn seed_e_grid_matches_the_json_in_chromium() {
    let Some(bin) = chromium_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = Command::cargo_bin("raidlab")
        .unwrap()
        .args(["seeds", "E", "--json", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json is JSON");
    let html = dir.path().join("raidlab-seeds.html");
    let dom = chromium(
        &bin,
        &dir.path().join("profile"),
        &html,
        &["--dump-dom".into()],
    );
    let dom = String::from_utf8(dom).expect("DOM is UTF-8");
    let cells: Vec<&serde_json::Value> = v["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .filter(|c| c["seed"] == "E" && c["unit"] == "MB/s")
        .collect();
    assert!(cells.len() >= 36, "seed E has its CrystalDiskMark cells");
    let mut configs: Vec<&str> = Vec::new();
    for c in &cells {
        let g = c["config"].as_str().unwrap();
        if !configs.contains(&g) {
            configs.push(g);
        }
    }
    let two = |x: Option<f64>| x.map_or("–".to_string(), |x| format!("{x:.2}"));
    let mut checked = 0;
    for g in configs {
        let at = dom
            .find(&format!("<caption>{}</caption>", dom_text(g)))
            .unwrap_or_else(|| panic!("no grid for configuration {g}"));
        let grid = table_cells(&dom[at - 60..], "seedgrid");
        // Header: "", then per direction "Read article", "Read simulated", "×".
        let dirs: Vec<String> = grid[0][1..]
            .chunks(3)
            .map(|h| h[0].split(' ').next().unwrap().to_lowercase())
            .collect();
        assert!(dirs.contains(&"read".into()) && dirs.contains(&"write".into()));
        for line in &grid[1..] {
            for (d, fig) in dirs.iter().zip(line[1..].chunks(3)) {
                let name = format!("{}-{d}", line[0].replace(' ', "-"));
                let cell = cells
                    .iter()
                    .find(|c| c["config"] == g && c["test"] == name.as_str());
                let Some(cell) = cell else {
                    assert_eq!(fig, ["–", "–", "–"], "{g} {name}");
                    continue;
                };
                let article = cell["article"].as_f64();
                let simulated = cell["simulated"].as_f64();
                assert_eq!(fig[0], two(article), "{g} {name} article");
                assert_eq!(fig[1], two(simulated), "{g} {name} simulated");
                let ratio = match (article, simulated) {
                    (Some(a), Some(s)) if a > 0.0 => format!("{:.2}×", s / a),
                    _ => "–".into(),
                };
                assert_eq!(fig[2], ratio, "{g} {name} ratio");
                checked += 1;
            }
        }
    }
    assert_eq!(checked, cells.len(), "every seed E cell is in a grid");

    // A screenshot for a person to look at (kept when RAIDLAB_KEEP_SHOT names a
    // file): the grids must have been painted, not only sent.
    let shot = std::env::var_os("RAIDLAB_KEEP_SHOT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| dir.path().join("shot.png"));
    chromium(
        &bin,
        &dir.path().join("profile"),
        &html,
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1300,2400".into(),
        ],
    );
    assert!(
        std::fs::metadata(&shot).unwrap().len() > 10_000,
        "screenshot"
    );
}

/// The seeds run's terminal output, parsed: per finding (seed, mark, text,
/// why) as `raidlab seeds` prints them, and seed E's error line.
fn terminal_findings(text: &str) -> Vec<(String, String, String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == "findings:")
        .expect("a findings: line");
    let mut out = Vec::new();
    let mut i = at + 1;
    while i + 1 < lines.len() {
        let l = lines[i].trim_start();
        let (seed, rest) = l.split_once(' ').expect("SEED [mark] text");
        let rest = rest.strip_prefix('[').expect("[mark]");
        let (mark, finding) = rest.split_once("] ").expect("mark]");
        out.push((
            seed.to_string(),
            mark.to_string(),
            finding.to_string(),
            lines[i + 1].trim().to_string(),
        ));
        i += 2;
    }
    out
}

/// Issue 38: the page a person opens says what the terminal says. For seeds
/// D and E run as a user runs them (`raidlab seeds D E --out DIR`), the page
/// opened in headless Chromium holds, in each seed's section, every finding
/// the terminal printed with the same verdict and the same figures, seed E's
/// median errors as the terminal rounds them, and as run conditions each
/// configuration's simulated hardware and host (its `sim:` spec), not "not
/// recorded"; the machine that computed the figures is named as such.
#[test]
fn seed_page_says_what_the_terminal_says_in_chromium() {
    let Some(bin) = chromium_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = Command::cargo_bin("raidlab")
        .unwrap()
        .args(["seeds", "D", "E", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let html = dir.path().join("raidlab-seeds.html");
    let dom = chromium(
        &bin,
        &dir.path().join("profile"),
        &html,
        &["--dump-dom".into()],
    );
    let dom = String::from_utf8(dom).expect("DOM is UTF-8");
    assert!(
        !dom.contains("do not record how these targets were measured"),
        "a seed's page must give its simulated run conditions"
    );
    // Each seed's section: from its heading to the next section.
    let section = |letter: &str| -> &str {
        let at = dom
            .find(&format!("<h2>seed {letter}: "))
            .unwrap_or_else(|| panic!("no section for seed {letter}"));
        let end = dom[at..].find("</section>").unwrap();
        &dom[at..at + end]
    };
    let findings = terminal_findings(&text);
    assert_eq!(
        findings.iter().filter(|f| f.0 == "D").count(),
        5,
        "seed D prints 5 findings"
    );
    assert_eq!(findings.iter().filter(|f| f.0 == "E").count(), 4);
    for letter in ["D", "E"] {
        let s = section(letter);
        let rows = table_cells(s, "findings");
        assert_eq!(
            rows[0],
            ["the article found", "verdict", "figures behind it"],
            "seed {letter}"
        );
        let mine: Vec<_> = findings.iter().filter(|f| f.0 == letter).collect();
        assert_eq!(
            rows.len() - 1,
            mine.len(),
            "seed {letter}: one row per finding"
        );
        for (row, (_, mark, finding, why)) in rows[1..].iter().zip(&mine) {
            assert_eq!(row[0], dom_text(finding), "seed {letter}");
            // The terminal shouts NOT; the verdict is the same words.
            assert_eq!(row[1], mark.to_lowercase(), "seed {letter}: {finding}");
            assert_eq!(row[2], dom_text(why), "seed {letter}: {finding}");
        }
        // Run conditions: every configuration the terminal printed, with its
        // spec; the generic table of measured runs is not there.
        let conf = table_cells(s, "simconfig");
        let printed: Vec<&str> = text
            .split(&format!("seed {letter}: "))
            .nth(1)
            .unwrap()
            .split("\n\n")
            .next()
            .unwrap()
            .lines()
            .skip(3)
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        let mut configs: Vec<&str> = Vec::new();
        for p in printed {
            if !configs.contains(&p) {
                configs.push(p);
            }
        }
        assert_eq!(
            conf[1..].iter().map(|r| r[0].as_str()).collect::<Vec<_>>(),
            configs,
            "seed {letter}"
        );
        for r in &conf[1..] {
            assert!(r[1].starts_with("<code>") && r[1].len() > 13, "{r:?}");
            assert!(!r[2].is_empty() && !r[4].is_empty(), "{r:?}");
        }
        assert!(!s.contains("not recorded"), "seed {letter}");
    }
    // Seed D's 2008 host (CFQ, md of 2.6.2x) is said; seed E's drives are on
    // the MegaRAID card.
    let d = table_cells(section("D"), "simconfig");
    let hdd = d.iter().find(|r| r[0] == "hdd").expect("hdd row");
    assert!(
        hdd[4].starts_with("I/O scheduler cfq; md linux-2.6.2x-md ("),
        "{hdd:?}"
    );
    let e = table_cells(section("E"), "simconfig");
    let r5 = e
        .iter()
        .find(|r| r[0] == "raid5-3ssd")
        .expect("raid5-3ssd row");
    assert!(r5[3].starts_with("megaraid-9361-4i"), "{r5:?}");
    assert!(r5[3].ends_with("the card's own RAID"), "{r5:?}");
    // Seed E's error, as the terminal rounds it: "median absolute error X% over
    // N cells; Y% over the M prediction cells".
    let line = text
        .lines()
        .find(|l| l.starts_with("seed E: median absolute error "))
        .expect("seed E's error line");
    let nums: Vec<&str> = line
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter(|w| !w.is_empty() && *w != ".")
        .collect();
    let (all, n, pred, m) = (nums[0], nums[1], nums[2], nums[3]);
    let errors = table_cells(section("E"), "errors");
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert_eq!(errors[1][1], n);
    assert_eq!(errors[1][2], format!("{all}%"));
    assert_eq!(errors[2][1], m);
    assert_eq!(errors[2][2], format!("{pred}%"));
    assert!(
        errors[2][0].starts_with("the prediction cells"),
        "{errors:?}"
    );
    // The result files' table names the machine as the computer of virtual
    // figures, not as a test host.
    let sources = table_cells(&dom, "sources");
    for r in &sources[1..] {
        assert!(
            r[3].starts_with("simulated in virtual time (computed on "),
            "{r:?}"
        );
    }

    // A screenshot for a person to look at (kept when RAIDLAB_KEEP_SHOT_SEEDS
    // names a file).
    let shot = std::env::var_os("RAIDLAB_KEEP_SHOT_SEEDS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| dir.path().join("shot.png"));
    chromium(
        &bin,
        &dir.path().join("profile"),
        &html,
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1300,2400".into(),
        ],
    );
    assert!(
        std::fs::metadata(&shot).unwrap().len() > 10_000,
        "screenshot"
    );
}
