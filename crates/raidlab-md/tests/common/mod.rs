//! Helpers shared by the tests that run the real mdadm.

use std::path::Path;
use std::process::Command;

/// Whether mdadm can be run. Without it the caller skips, loudly, except under
/// `CI=true`, where CI installs mdadm and its absence is a failure.
pub fn mdadm_available() -> bool {
    match Command::new("mdadm").arg("--version").output() {
        Ok(_) => true,
        Err(_) => {
            raidlab_core::skip::skip_or_fail("mdadm not installed (apt-get install mdadm)");
            false
        }
    }
}

/// Run `mdadm ARGS PATH` (in UTC, so times compare): success, all it printed,
/// and its `Label : value` lines as trimmed pairs (a label with an empty value
/// keeps an empty string).
#[allow(dead_code)] // not every test binary uses every helper
pub fn mdadm(args: &[&str], path: &Path) -> (bool, String, Vec<(String, String)>) {
    let out = Command::new("mdadm")
        .args(args)
        .arg(path)
        .env("TZ", "UTC")
        .output()
        .expect("run mdadm");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let pairs = text
        .lines()
        .filter_map(|l| l.split_once(" :"))
        .map(|(l, v)| (l.trim().to_string(), v.trim().to_string()))
        .collect();
    (out.status.success(), format!("{text}{stderr}"), pairs)
}
