//! Opening member paths as volumes for the commands.

use anyhow::{bail, Context, Result};
use raidlab_devices::{FileVolume, OpenMode};
use raidlab_raid::assemble::Device;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The word users give in place of a member that is gone.
pub const MISSING: &str = "missing";

pub fn is_missing(p: &Path) -> bool {
    p.as_os_str() == MISSING
}

/// Open every named member (skipping the word `missing`), locked for `mode`.
pub fn open_members(paths: &[PathBuf], mode: OpenMode) -> Result<Vec<Device>> {
    let mut out = Vec::new();
    for p in paths.iter().filter(|p| !is_missing(p)) {
        out.push(open_device(p, mode)?);
    }
    if out.is_empty() {
        bail!("no members given (only `missing`): name at least one member file or device");
    }
    Ok(out)
}

pub fn open_device(p: &Path, mode: OpenMode) -> Result<Device> {
    let v =
        FileVolume::open(p, mode).with_context(|| format!("cannot use member {}", p.display()))?;
    Ok(Device {
        path: p.display().to_string(),
        volume: Arc::new(v),
    })
}
