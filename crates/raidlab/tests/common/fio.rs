//! fio through NBD, as the served grow tests drive it: a run directory only
//! where fio is installed, and the verified random-write job whose blocks
//! each carry a crc32c.

use std::process::{Command, Stdio};

/// A run directory for a test that drives fio, or `None` (the test then
/// skips, or fails under CI) when fio is missing.
pub fn with_fio(what: &str) -> Option<tempfile::TempDir> {
    let have = Command::new("sh")
        .args(["-c", "command -v fio"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !have {
        raidlab_core::skip::skip_or_fail(&format!(
            "{what}: fio not installed (scripts/test.sh installs it)"
        ));
        return None;
    }
    Some(tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap())
}

/// fio through NBD at `uri`: random 64K writes over `size` bytes from
/// `offset`, each block verified by crc32c (`extra`: `--do_verify=1` after
/// writing, or `--verify_only`); fails the test on any error. Its output.
pub fn verify(uri: &str, offset: &str, size: &str, seed: &str, extra: &[&str]) -> String {
    let out = Command::new("fio")
        .args([
            "--name=grow",
            "--ioengine=nbd",
            "--rw=randwrite",
            "--bs=64k",
            "--iodepth=8",
            "--verify=crc32c",
            "--verify_fatal=1",
            "--verify_state_save=0",
        ])
        .arg(format!("--offset={offset}"))
        .arg(format!("--size={size}"))
        .arg(format!("--randseed={seed}"))
        .arg(format!("--uri={uri}"))
        .args(extra)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && text.contains("err= 0"),
        "fio:\n{text}"
    );
    assert!(!text.contains("verify:"), "fio verify error:\n{text}");
    text
}
