//! Opening member paths as volumes for the commands.
//!
//! A member name is a file, a block device, or `IMAGE@N`: partition N of a
//! whole-disk image (MBR, logical partitions from 5, or GPT), numbered as Linux
//! numbers them. A name that exists as it is always means that file, even with
//! an `@` in it. The rules live in `raidlab_devices::partition`.

use anyhow::{bail, Context, Result};
use raidlab_devices::{MemberOpener, MemberPath, OpenMode};
use raidlab_raid::assemble::{Assembly, Device, MemberState};
use raidlab_raid::lifecycle::{self, StartReport};
use raidlab_raid::ppl::PplReplay;
use std::path::{Path, PathBuf};

/// The word users give in place of a member that is gone.
pub const MISSING: &str = "missing";

pub fn is_missing(p: &Path) -> bool {
    p.as_os_str() == MISSING
}

/// Open every named member (skipping the word `missing`), locked for `mode`.
/// Partitions of one image share the image (one lock); a device named twice is
/// refused.
pub fn open_members(paths: &[PathBuf], mode: OpenMode) -> Result<Vec<Device>> {
    let mut opener = MemberOpener::new(mode);
    let mut out = Vec::new();
    for p in paths.iter().filter(|p| !is_missing(p)) {
        out.push(open_with(&mut opener, p)?);
    }
    if out.is_empty() {
        bail!("no members given (only `missing`): name at least one member file or device");
    }
    Ok(out)
}

/// Open one member on its own.
pub fn open_device(p: &Path, mode: OpenMode) -> Result<Device> {
    open_with(&mut MemberOpener::new(mode), p)
}

/// Open one member through `opener` (which remembers the images and devices
/// already open for this command).
pub fn open_with(opener: &mut MemberOpener, p: &Path) -> Result<Device> {
    let volume = opener
        .open(p)
        .with_context(|| format!("cannot use member {}", p.display()))?;
    Ok(Device {
        path: p.display().to_string(),
        volume,
    })
}

/// Whether `p` names something that exists: a file or device, or a partition
/// of an existing image (`disk.img@3`). Verbs that create missing member
/// files ask this first, so `disk.img@3` never becomes a new file of that name.
pub fn member_exists(p: &Path) -> bool {
    match MemberPath::parse(p) {
        MemberPath::Whole(p) => p.exists(),
        MemberPath::Partition { .. } => true,
    }
}

/// Start an array's write journal or partial parity logs before anything
/// writes to it, as md does at every start: after an unclean stop each log is
/// replayed, which makes parity consistent again without a resync. Says on
/// stderr what the replay did.
pub fn start_logs(asm: &mut Assembly) -> Result<Option<PplReplay>> {
    let report = lifecycle::start_logs(asm)?;
    say_started(&report, "");
    Ok(report.ppl)
}

/// Tell the user what starting an array did on disk (`label` prefixes each
/// line, e.g. `export "a": `).
pub fn say_started(report: &StartReport, label: &str) {
    if let Some(r) = &report.journal {
        if r.fresh {
            eprintln!(
                "raidlab: {label}the write journal held no valid meta block at its tail (journal device wiped, or from another array?): a new log was begun, as md does; nothing was replayed"
            );
        }
        if r.replayed_anything() || r.torn_blocks > 0 {
            eprintln!(
                "raidlab: {label}replayed the write journal: {} stripe(s) written back from {} meta block(s){}; stripes are consistent, no resync needed",
                r.stripes_replayed + r.data_only_stripes,
                r.meta_blocks,
                if r.torn_blocks > 0 {
                    format!(
                        "; {} torn journal block(s) skipped (their writes never reached the members)",
                        r.torn_blocks
                    )
                } else {
                    String::new()
                }
            );
        }
    }
    if let Some(r) = &report.ppl {
        eprintln!(
            "raidlab: {label}the array was not stopped cleanly: replayed {} partial parity log entr{} ({} parity bytes rewritten{})",
            r.entries_replayed,
            if r.entries_replayed == 1 { "y" } else { "ies" },
            r.parity_bytes,
            if r.mismatches > 0 {
                format!(
                    "; {} entr{} did not check out, so a resync is still needed: `raidlab resync`",
                    r.mismatches,
                    if r.mismatches == 1 { "y" } else { "ies" }
                )
            } else {
                "; parity is consistent, no resync needed".to_string()
            }
        );
    }
    if let Some(r) = &report.resync {
        eprintln!(
            "raidlab: {label}the array was not stopped cleanly; resyncing before use: done, {} sectors corrected",
            r.mismatch_sectors
        );
    }
}

/// Say on stderr which given members the array sets aside (stale, removed,
/// faulty): they are neither read nor written, and a user who listed one
/// should not think it serves.
pub fn warn_set_aside(asm: &Assembly) {
    for m in &asm.members {
        let why = match m.state {
            MemberState::Stale => "stale (it missed writes)",
            MemberState::Removed => "removed from the array",
            MemberState::Faulty => "faulty",
            _ => continue,
        };
        eprintln!(
            "raidlab: {} is {why}: its data is out of date and it is neither read nor written (`raidlab add` with it as --new takes it back with a rebuild)",
            m.device.path
        );
    }
}
