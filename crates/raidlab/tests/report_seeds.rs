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
