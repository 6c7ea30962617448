//! A passed run's final member images, for the real md driver to judge
//! (issue 34: a sample of each run class is assembled by md in the VM test
//! and reads the reference data).
//!
//! It runs the run exactly as a sweep does, stops the array cleanly at its
//! end (every write on the medium, the superblocks marked clean, as `raidlab
//! stop` leaves them), assembles it again from the superblocks and writes
//! what every device still in service holds on its medium to a file. It
//! decides which devices md is given (the active members in role order,
//! then the journal device) and what the set is judged by: raidlab's read of
//! the array at the run's end, which the run itself held to the model. It
//! never changes what the run draws or does (a run saved replays the same
//! hash as the run in a sweep), and saves nothing of a run that failed, went
//! beyond its level's tolerance, or ran behind a cache tier (not an md
//! array).

use super::run::run_rig;
use super::Options;
use raidlab_core::Volume;
use raidlab_raid::assemble::MemberState;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// What was saved, for the VM test's manifest.
#[derive(Debug, Clone, Serialize)]
pub struct ImageSet {
    pub seed: u64,
    pub run: u64,
    /// The run's configuration, as its trace names it.
    pub config: String,
    /// Level and policy: the run's class.
    pub kind: String,
    /// md's level number.
    pub level: i32,
    /// The active members, in role order, then the journal device.
    pub devices: Vec<PathBuf>,
    /// How many of `devices` are active members (the rest: the journal).
    pub members: usize,
    /// Roles with no active member (a degraded array).
    pub missing: Vec<usize>,
    /// Whether the superblocks say parity and mirrors are consistent. A
    /// degraded array started forced after a power cut stays unclean until
    /// it is rebuilt (md's rule and raidlab's): md and raidlab start it
    /// only with `--force`.
    pub clean: bool,
    /// Bytes of each of `devices`.
    pub device_bytes: Vec<u64>,
    /// The array's size, and its bytes as raidlab reads them at the run's
    /// end (`expected.bin` in the directory).
    pub array_bytes: u64,
    pub expected: PathBuf,
}

/// Run `run` of `opts` and save its final images into `dir` (created).
pub fn save_images(opts: &Options, run: u64, dir: &Path) -> Result<ImageSet, String> {
    if opts.cache_tier {
        return Err("a run behind a cache tier is not an md array: no images".into());
    }
    if opts.misdirected {
        return Err(
            "a run with misdirected I/O ends with data md cannot vouch for: no images".into(),
        );
    }
    let (result, mut rig) = run_rig(opts, run, None);
    if let Some(v) = &result.violation {
        return Err(format!(
            "run {run} failed at op {}: {}; nothing saved",
            v.op, v.what
        ));
    }
    if rig.beyond {
        return Err(format!(
            "run {run} went beyond its level's tolerance: no array for md to read; nothing saved"
        ));
    }
    let size = rig.model.size();
    let mut expected = vec![0u8; size];
    rig.array()
        .read_at(&mut expected, 0)
        .map_err(|e| format!("run {run}: reading the array at the end: {e}"))?;
    let asm = rig.stop()?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let write = |name: &str, bytes: &[u8]| -> Result<PathBuf, String> {
        let p = dir.join(name);
        std::fs::write(&p, bytes).map_err(|e| format!("{}: {e}", p.display()))?;
        Ok(p)
    };
    let image = |path: &str| -> Result<Vec<u8>, String> {
        let i = rig
            .paths
            .iter()
            .position(|p| p == path)
            .ok_or_else(|| format!("internal: no device {path}"))?;
        let v = &rig.vols[i];
        let mut buf = vec![0u8; v.size() as usize];
        // The medium itself: a device with latent read errors still holds
        // its bytes, and md is given them as a disk that reads.
        v.inner()
            .read_at(&mut buf, 0)
            .map_err(|e| format!("{path}: {e}"))?;
        Ok(buf)
    };
    let mut active: Vec<(usize, &str)> = Vec::new();
    let mut journal = None;
    for m in &asm.members {
        match (m.state, m.role) {
            (MemberState::Active, Some(role)) => active.push((role, &m.device.path)),
            (MemberState::Journal, _) => journal = Some(m.device.path.as_str()),
            _ => {}
        }
    }
    active.sort();
    let mut devices = Vec::new();
    let mut device_bytes = Vec::new();
    let names = active
        .iter()
        .map(|(role, path)| (format!("role{role}.img"), *path))
        .chain(journal.map(|path| ("journal.img".to_string(), path)));
    for (name, path) in names {
        let bytes = image(path)?;
        device_bytes.push(bytes.len() as u64);
        devices.push(write(&name, &bytes)?);
    }
    let expected_path = write("expected.bin", &expected)?;
    Ok(ImageSet {
        seed: opts.seed,
        run,
        config: result.config.label(),
        kind: result.config.kind(),
        level: result.config.level.md_level(),
        members: active.len(),
        missing: asm.missing(),
        clean: asm.in_sync(),
        device_bytes,
        array_bytes: size as u64,
        devices,
        expected: expected_path,
    })
}
