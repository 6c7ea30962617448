//! The reshapes of `grow`'s table ([`super::cases`]) that go through
//! mdadm's backup file (issue 36): a metadata 0.90 RAID 5/6 restriped over
//! the same members (`--chunk`, `--layout`) with `--backup-file`, stopped
//! part-way by raidlab, which md must resume from the superblocks and the
//! file raidlab left, as mdadm's rules say (`Grow_restart`: a reshape that
//! gains no data member keeps its critical section in the file, so md is
//! given it: `mdadm --assemble --backup-file F`).
//!
//! * `r5-090-chunk-backup-killed`: a 0.90 RAID 5 of 4, `--chunk 32K` of a
//!   64 KiB chunk, killed part-way (SIGKILL); read whole and without
//!   member 2;
//! * `r6-090-layout-backup-stopped`: a 0.90 RAID 6 of 5, `--layout
//!   right-asymmetric`, stopped by Ctrl-C (SIGINT, a checkpoint between
//!   windows); read whole and without members 1 and 3;
//! * `r5-090-5to4-shrink-backup-killed`: a 0.90 RAID 5 of 5 shrunk to 4
//!   (`--raid-devices 4 --array-size`, md's backward walk in place),
//!   killed part-way (SIGKILL): md is given all five and the file, walks
//!   the rest down to the array's start and leaves the fifth a spare; read
//!   whole and without member 1.
//!
//! Decides how the file reaches md: the word `BACKUP` in a case's grow is
//! the file's path (in the case's directory, beside the members); after
//! the stop the file must be there (a restripe stopped part-way keeps it),
//! raidlab's read of the stopped array is refused without it (md's rule,
//! wherever the stop landed) and made with a copy of it on a copy of the
//! members (`export --backup-file`, which puts the window back there), the
//! same copies then carried on by raidlab's own `--continue`, and the file
//! itself is written into the data disk after the members, its place and
//! length in the `B` line's `backup=OFF:LEN` flag, from where the guest
//! copies it into a file for mdadm. It must never hand md a file other than
//! the one raidlab's run left, nor members a raidlab read wrote.

use super::*;

pub(super) fn cases() -> Vec<Grown> {
    vec![
        Grown {
            name: "r5-090-chunk-backup-killed",
            level: 5,
            devices: 4,
            create: &["--chunk", "64K", "--metadata", "0.90"],
            grow_files: false,
            grow: &["--chunk", "32K", "--backup-file", "BACKUP"],
            sets: vec![vec![2]],
            interrupt: Some("KILL"),
        },
        Grown {
            name: "r6-090-layout-backup-stopped",
            level: 6,
            devices: 5,
            create: &["--chunk", "64K", "--metadata", "0.90"],
            grow_files: false,
            grow: &["--layout", "right-asymmetric", "--backup-file", "BACKUP"],
            sets: vec![vec![1, 3]],
            interrupt: Some("INT"),
        },
        Grown {
            name: "r5-090-5to4-shrink-backup-killed",
            level: 5,
            devices: 5,
            create: &["--chunk", "64K", "--metadata", "0.90"],
            grow_files: false,
            // What four 0.90 members of 8 MiB hold: 3 x 8128 KiB.
            grow: &[
                "--raid-devices",
                "4",
                "--array-size",
                "24384K",
                "--backup-file",
                "BACKUP",
            ],
            sets: vec![vec![1]],
            interrupt: Some("KILL"),
        },
    ]
}

/// Whether a case's grow goes through a backup file.
pub(super) fn uses_backup(c: &Grown) -> bool {
    c.grow.contains(&"BACKUP")
}

/// The backup file of a case's grow, in its directory.
pub(super) fn path(dir: &Path) -> String {
    dir.join("grow.bak").to_str().unwrap().to_string()
}

/// A copy of the case's backup file beside the copied members in `to`,
/// for raidlab's own `--continue` there; its path.
pub(super) fn copy_to(dir: &Path, to: &Path) -> Result<String, String> {
    let from = path(dir);
    let copy = to.join("grow.bak");
    fs::copy(&from, &copy).map_err(|e| {
        format!("{from}: the backup file of the stopped restripe is not there to copy: {e}")
    })?;
    Ok(copy.to_str().unwrap().to_string())
}

/// Read a restripe stopped through its backup file, as md's rule has it:
/// `raidlab export` of `members` without the file refused (what to give
/// said, no member byte changed: md is given them after), then of
/// `copies` with their copy of the file `file`, which puts the window back
/// there first. What the latter read.
pub(super) fn read_stopped(
    members: &[String],
    copies: &[String],
    file: &str,
    copy: &Path,
) -> Result<Vec<u8>, String> {
    let before: Vec<Vec<u8>> = members.iter().map(|m| fs::read(m).unwrap()).collect();
    let out = copy.join("refused.bin");
    let mut a = vec!["export"];
    a.extend(members.iter().map(String::as_str));
    a.extend(["--output", out.to_str().unwrap()]);
    let o = raidlab(&a);
    let err = String::from_utf8_lossy(&o.stderr);
    if o.status.success() || !err.contains("--backup-file FILE") {
        return Err(format!(
            "a stopped 0.90 restripe read without its backup file: {}",
            describe(&a, &o)
        ));
    }
    if members
        .iter()
        .zip(&before)
        .any(|(m, b)| fs::read(m).unwrap() != *b)
    {
        return Err(format!(
            "a refused export changed a member: {}",
            describe(&a, &o)
        ));
    }
    let out = copy.join("export.bin");
    let mut a = vec!["export"];
    a.extend(copies.iter().map(String::as_str));
    a.extend(["--backup-file", file, "--output", out.to_str().unwrap()]);
    let o = raidlab(&a);
    if !o.status.success() {
        return Err(describe(&a, &o));
    }
    fs::read(&out).map_err(|e| format!("reading {}: {e}", out.display()))
}

/// Write the case's backup file into the data disk at `*next` (whole
/// MiBs), move `*next` past it, and return the `B` line's flag naming it.
pub(super) fn place(data: &fs::File, next: &mut u64, dir: &Path) -> Result<String, String> {
    let from = path(dir);
    let bytes = fs::read(&from).map_err(|e| {
        format!("{from}: raidlab's stopped restripe left no backup file for md: {e}")
    })?;
    if bytes.is_empty() || bytes.len() % 512 != 0 {
        return Err(format!(
            "{from}: a backup file of {} bytes, not whole sectors",
            bytes.len()
        ));
    }
    let at = *next;
    data.write_all_at(&bytes, at).unwrap();
    *next += (bytes.len() as u64).div_ceil(MIB) * MIB;
    Ok(format!("backup={at}:{}", bytes.len()))
}
