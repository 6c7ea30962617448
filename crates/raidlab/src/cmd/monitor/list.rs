//! The `list` request of the control socket: what one `raidlab serve` serves,
//! so that `raidlab monitor` can watch arrays nobody named to it. Decides only
//! how a server describes its exports (name, member paths made absolute in the
//! server's directory, the cache device in front); it must never change an
//! export, and never hold a lock longer than it takes to copy the member list.

use crate::cmd::cache_live::{ManagedCache, ServedOrigin};
use crate::cmd::live::Managed;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A server's answer to `list`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Served {
    pub pid: u32,
    /// The server's working directory: `detail` names members as the server
    /// was given them, which may be relative to it.
    pub cwd: String,
    pub exports: Vec<ServedExport>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ServedExport {
    pub name: String,
    /// The array's members, absolute; empty for a plain file behind a cache.
    pub members: Vec<String>,
    /// The cache device in front of the export, absolute.
    pub cache: Option<String>,
    /// The cache device failed (I/O errors): requests pass it by (see
    /// `raidlab_cache::failure`). False without a cache, and from servers
    /// older than the field.
    #[serde(default)]
    pub cache_failed: bool,
}

fn absolute(p: &str) -> String {
    crate::control::absolute(std::path::Path::new(p))
        .display()
        .to_string()
}

/// The server side: every served array (with its cache, if one is in front),
/// then every cache in front of a plain file.
pub fn answer(arrays: &[Managed], caches: &[ManagedCache]) -> Result<(String, u8)> {
    let mut exports: Vec<ServedExport> = arrays
        .iter()
        .map(|m| {
            let cache = caches
                .iter()
                .find(|c| matches!(&c.origin, ServedOrigin::Array(l) if Arc::ptr_eq(l, &m.live)));
            ServedExport {
                name: m.export.clone(),
                members: m.live.with_assembly(|asm| {
                    asm.members
                        .iter()
                        .map(|d| absolute(&d.device.path))
                        .collect()
                }),
                cache: cache.map(|c| c.device.clone()),
                cache_failed: cache.is_some_and(|c| c.cached.is_failed()),
            }
        })
        .collect();
    exports.extend(
        caches
            .iter()
            .filter(|c| matches!(c.origin, ServedOrigin::File(_)))
            .map(|c| ServedExport {
                name: c.export.clone(),
                members: vec![],
                cache: Some(c.device.clone()),
                cache_failed: c.cached.is_failed(),
            }),
    );
    let served = Served {
        pid: std::process::id(),
        cwd: std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
        exports,
    };
    Ok((serde_json::to_string(&served)? + "\n", 0))
}
