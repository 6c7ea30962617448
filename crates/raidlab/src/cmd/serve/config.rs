//! What `raidlab serve` is asked to serve, and whether it can be, before
//! anything starts: the configuration file or the command line made into
//! exports (each an array's members or a plain file, maybe a cache in front,
//! with its I/O mode, journal mode and stripe cache), and the checks every
//! export passes first (names differ, no device in two exports, each opens
//! read-only and assembles, a cache belongs to its origin).
//!
//! Must never write: a device is opened here read-only, and an array is
//! assembled, never started, so a mistake in one export leaves every device
//! as it was.

use crate::cli::ServeArgs;
use crate::open::open_members;
use anyhow::{bail, Context, Result};
use raidlab_devices::{FileVolume, IoMode, OpenMode};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// A configuration file: where to listen and what to export.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Config {
    pub(super) socket: Option<PathBuf>,
    pub(super) tcp: Option<bool>,
    pub(super) port: Option<u16>,
    pub(super) listen: Option<String>,
    pub(super) max_connections: Option<usize>,
    pub(super) tls_cert: Option<PathBuf>,
    pub(super) tls_key: Option<PathBuf>,
    pub(super) tls_client_ca: Option<PathBuf>,
    pub(super) tls_require: Option<bool>,
    /// The metrics endpoint's address, as --metrics.
    pub(super) metrics: Option<String>,
    pub(super) metrics_allow_remote: Option<bool>,
    #[serde(default)]
    pub(super) export: Vec<ExportConfig>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ExportConfig {
    pub(super) name: String,
    /// Array members (any order; `missing` allowed as on the command line).
    #[serde(default)]
    pub(super) members: Vec<PathBuf>,
    /// A plain file or block device, served as it is.
    pub(super) file: Option<PathBuf>,
    #[serde(default)]
    pub(super) read_only: bool,
    /// Start a degraded array that was not stopped cleanly.
    #[serde(default)]
    pub(super) force: bool,
    /// The backup file of a stopped metadata 0.90 restripe (`--backup-file`).
    pub(super) backup_file: Option<PathBuf>,
    /// A raidlab cache device in front of the array or file.
    pub(super) cache: Option<PathBuf>,
    /// The stripe cache of a parity array: stripes held (0: off) and the hold
    /// time in milliseconds (defaults: 64 and 20, as on the command line).
    pub(super) stripe_cache: Option<usize>,
    pub(super) stripe_hold_ms: Option<u64>,
    /// Rows kept in memory after a write (`--kept-rows`; default md's 256).
    pub(super) kept_rows: Option<usize>,
    /// md's journal mode: "write-through" (default) or "write-back".
    pub(super) journal_mode: Option<String>,
    /// How the members (or the file) are opened: "direct" (O_DIRECT) or
    /// "buffered" (the page cache); default: block devices direct, files
    /// buffered (see `raidlab_devices::IoMode::default_for`).
    pub(super) io: Option<String>,
}

impl ExportConfig {
    /// The I/O mode asked for, if any.
    pub(super) fn io(&self) -> Result<Option<IoMode>> {
        self.io
            .as_deref()
            .map(|s| s.parse::<IoMode>())
            .transpose()
            .map_err(|e| anyhow::anyhow!("export {:?}: io = {e}", self.name))
    }

    /// The journal mode asked for (md's default, write-through, if none).
    pub(super) fn journal_mode(&self) -> Result<raidlab_raid::journal::JournalMode> {
        self.journal_mode
            .as_deref()
            .map_or(
                Ok(Default::default()),
                raidlab_raid::journal::JournalMode::parse,
            )
            .map_err(|e| anyhow::anyhow!("export {:?}: journal_mode = {e}", self.name))
    }

    pub(super) fn stripe_cache(&self) -> raidlab_raid::stripe_cache::StripeCacheConfig {
        let d = raidlab_raid::stripe_cache::StripeCacheConfig::default();
        raidlab_raid::stripe_cache::StripeCacheConfig {
            stripes: self.stripe_cache.unwrap_or(d.stripes),
            hold: self
                .stripe_hold_ms
                .map_or(d.hold, std::time::Duration::from_millis),
            kept_rows: self.kept_rows.unwrap_or(d.kept_rows),
        }
    }
}

/// The exports and listeners asked for: the configuration file (`--config`),
/// the command line's flags filling in what an export does not say, or one
/// export made of the command line; each export's `io` checked, so a
/// misspelt one stops here, before any member is opened.
pub(super) fn from_args(a: &ServeArgs) -> Result<Config> {
    let config = match &a.config {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read the configuration file {}", p.display()))?;
            let c: Config = toml::from_str(&text).map_err(|e| {
                anyhow::anyhow!(
                    "{}: {e}\n(see `raidlab serve --help` for the format)",
                    p.display()
                )
            })?;
            if a.backup_file.is_some() {
                bail!("--backup-file goes with an array given on the command line; in --config, give it as the export's `backup_file = \"FILE\"`");
            }
            if !a.members.is_empty() || a.cache.is_some() {
                bail!("give exports either in --config or on the command line, not both (a cache in the file is an export's `cache = \"DEV\"`)");
            }
            let mut c = c;
            // --direct/--buffered: for the exports that do not say.
            for e in c.export.iter_mut().filter(|e| e.io.is_none()) {
                e.io = a.io.mode().map(|m| m.to_string());
            }
            c
        }
        None => {
            if a.plain && a.backup_file.is_some() {
                bail!("--backup-file is the backup file of an array's stopped metadata 0.90 restripe, not of a --plain file");
            }
            if a.plain && a.journal_mode == crate::cli::JournalModeArg::WriteBack {
                bail!("--journal-mode write-back is for an array with a write journal (RAID 4/5/6), not a --plain file");
            }
            if a.members.is_empty() {
                bail!("nothing to serve: give the members of an array, a file with --plain, or --config FILE");
            }
            let name = a.name.clone().unwrap_or_default();
            let e = if a.plain {
                if a.members.len() != 1 {
                    bail!(
                        "--plain serves one file or block device; {} were given",
                        a.members.len()
                    );
                }
                ExportConfig {
                    name,
                    members: vec![],
                    file: Some(a.members[0].clone()),
                    read_only: a.read_only,
                    force: a.force,
                    backup_file: None,
                    cache: a.cache.clone(),
                    stripe_cache: Some(a.stripe.stripe_cache),
                    stripe_hold_ms: Some(a.stripe.stripe_hold),
                    kept_rows: Some(a.stripe.kept_rows),
                    journal_mode: None,
                    io: a.io.mode().map(|m| m.to_string()),
                }
            } else {
                ExportConfig {
                    name,
                    members: a.members.clone(),
                    file: None,
                    read_only: a.read_only,
                    force: a.force,
                    backup_file: a.backup_file.clone(),
                    cache: a.cache.clone(),
                    stripe_cache: Some(a.stripe.stripe_cache),
                    stripe_hold_ms: Some(a.stripe.stripe_hold),
                    kept_rows: Some(a.stripe.kept_rows),
                    journal_mode: Some(a.journal_mode.mode().name().to_string()),
                    io: a.io.mode().map(|m| m.to_string()),
                }
            };
            Config {
                export: vec![e],
                ..Config::default()
            }
        }
    };
    if config.export.is_empty() {
        bail!("the configuration lists no [[export]]: nothing to serve");
    }
    // A misspelt `io` stops here, before any member is opened.
    for e in &config.export {
        e.io()?;
    }
    Ok(config)
}

/// What can be known about every export without starting one: names differ,
/// no member or file is named by two exports, each file, member set and cache
/// opens read-only and (members) assembles, and a cache belongs to its
/// origin. Nothing is written.
pub(super) fn check_exports(exports: &[ExportConfig]) -> Result<()> {
    let mut names = std::collections::HashSet::new();
    let mut used: Vec<(PathBuf, String)> = Vec::new();
    for e in exports {
        if !names.insert(e.name.as_str()) {
            bail!(
                "export name {:?} is given twice: names must differ; nothing was started",
                e.name
            );
        }
        if let Some(b) = &e.backup_file {
            if e.members.is_empty() {
                bail!(
                    "export {:?}: backup_file {} is the backup file of an array's stopped metadata 0.90 restripe; this export serves no array; nothing was started",
                    e.name,
                    b.display()
                );
            }
            if e.read_only {
                bail!(
                    "export {:?}: backup_file {} is put back into the members before the array is served, which writes them, and a read-only export writes nothing: serve it writable, or read it with `raidlab export MEMBER... --backup-file {}`; nothing was started",
                    e.name,
                    b.display(),
                    b.display()
                );
            }
        }
        let paths = e
            .members
            .iter()
            .filter(|p| !crate::open::is_missing(p))
            .chain(e.file.iter())
            .chain(e.cache.iter());
        for p in paths {
            // The same file under two names is the same device; a partition
            // (`IMAGE@N`) is compared as named.
            let key = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
            if let Some((_, other)) = used.iter().find(|(k, _)| *k == key) {
                bail!(
                    "{} is used by export {other:?} and by export {:?}: a device can serve one \
                     export; nothing was started",
                    p.display(),
                    e.name
                );
            }
            used.push((key, e.name.clone()));
        }
        // What the origin is, for a cache's binding: a file by its identity,
        // an array by its UUID.
        let named = match (&e.file, e.members.is_empty()) {
            (Some(f), true) => {
                FileVolume::open(f, OpenMode::ReadOnly).with_context(|| {
                    format!("export {:?}: cannot open {}; nothing was started", e.name, f.display())
                })?;
                raidlab_cache::path_identity(f).ok()
            }
            (None, false) => {
                let devices = open_members(&e.members, OpenMode::ReadOnly)
                    .with_context(|| format!("export {:?}; nothing was started", e.name))?;
                let asm = crate::open::assemble(devices).with_context(|| {
                    format!("export {:?}: cannot assemble the array; nothing was started", e.name)
                })?;
                Some(raidlab_cache::OriginId::ArrayUuid(asm.uuid))
            }
            _ => bail!(
                "export {:?}: give either `members` (an array) or `file` (a plain file or device), not both or neither",
                e.name
            ),
        };
        if let Some(device) = &e.cache {
            let recorded = check_cache(e, device)?;
            if named.is_some_and(|id| id != recorded.origin_id) {
                bail!(
                    "export {:?}: the cache on {} belongs to another origin ({}), not this one: give \
                     the origin it was created for; nothing was changed",
                    e.name,
                    device.display(),
                    recorded.origin_label
                );
            }
        }
    }
    Ok(())
}

/// The cache named by an export exists, is a raidlab cache and is attached.
fn check_cache(e: &ExportConfig, device: &Path) -> Result<raidlab_cache::Superblock> {
    let recorded = FileVolume::open(device, OpenMode::ReadOnly)
        .map_err(anyhow::Error::from)
        .and_then(|c| Ok(raidlab_cache::examine(&c)?))
        .with_context(|| {
            format!(
                "export {:?}: no usable cache on {} (make one with `raidlab cache create`)",
                e.name,
                device.display()
            )
        })?;
    if recorded.detached {
        bail!(
            "export {:?}: the cache on {} was detached from {}: `raidlab cache attach` binds it \
             again, or serve the origin without --cache",
            e.name,
            device.display(),
            recorded.origin_label
        );
    }
    Ok(recorded)
}
