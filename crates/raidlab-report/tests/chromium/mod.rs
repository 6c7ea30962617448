//! Headless Chromium for the report tests (this crate's and `raidlab`'s, which
//! includes this file by path): finding the browser, running it with a time
//! limit, and reading tables out of the DOM it dumps.
#![allow(dead_code)] // Each including test uses its own part.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn find_chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RAIDLAB_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for name in [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ] {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

pub fn is_root() -> bool {
    // /proc/self belongs to the process's effective user: no unsafe geteuid.
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Run Chromium headless on `page` with `args`, at most a minute (a hung browser
/// must fail the test, not stall CI).
pub fn chromium(bin: &Path, profile: &Path, page: &Path, args: &[String]) -> Vec<u8> {
    let out = Command::new("timeout")
        .arg("60")
        .arg(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium under timeout(1)");
    assert!(
        out.status.success(),
        "chromium failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Text as Chromium serialises it in element content.
pub fn dom_text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\u{a0}', "&nbsp;")
}

/// The cells of each `<tr>` of the first `<table class="{class}">` after `from`
/// (header cells included), as text.
pub fn table_cells(dom: &str, class: &str) -> Vec<Vec<String>> {
    let start = dom
        .find(&format!("<table class=\"{class}\""))
        .unwrap_or_else(|| panic!("no table {class}"));
    let table = &dom[start..start + dom[start..].find("</table>").unwrap()];
    table
        .split("<tr>")
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

/// The browser, or None after saying why the test is skipped: as root a missing
/// Chromium fails (CI must not skip silently); as another user it is skipped.
pub fn chromium_or_skip() -> Option<PathBuf> {
    let bin = find_chromium();
    if bin.is_none() {
        if is_root() {
            panic!("chromium is not installed: run scripts/test.sh as root (it installs it) or `apt-get install chromium`");
        }
        raidlab_core::skip::skip_or_fail("chromium is not installed and this user cannot install it (run scripts/test.sh as root, or set RAIDLAB_CHROMIUM)");
    }
    bin
}
