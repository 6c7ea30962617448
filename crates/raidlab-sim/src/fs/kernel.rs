//! The host kernel's page cache, writeback and file-system constants of an era
//! (`presets/kernels.toml`), as data with units and sources.
//!
//! Decides: the presets' values and the limits derived from them (the dirty
//! limits in bytes, the page cache's size, a volume's read-ahead window). It
//! must never hold a value without a source line, and nothing here is fitted to
//! an article's figures.

use crate::device::Param;
use std::collections::BTreeMap;

/// The built-in presets' file name, as errors quote it.
pub const KERNELS_FILE: &str = "presets/kernels.toml";
const KERNELS: &str = include_str!("../../presets/kernels.toml");

/// The page size of x86 Linux, in bytes.
pub const PAGE: u64 = 4096;

/// One kernel preset; every field's unit is in its name.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Kernel {
    #[serde(default)]
    pub name: String,
    pub description: String,
    pub ram_bytes: u64,
    pub reserved_bytes: u64,
    pub dirty_ratio_pct: f64,
    pub dirty_background_ratio_pct: f64,
    pub max_request_bytes: u64,
    pub queue_requests: usize,
    pub default_readahead_bytes: u64,
    pub copy_mb_per_s: f64,
    pub call_us: f64,
    pub ext3_commit_s: f64,
    pub ext3_inode_ratio_bytes: u64,
    pub ext3_journal_bytes: u64,
    pub xfs_logbuf_bytes: u64,
    pub xfs_sync_s: f64,
    pub xfs_log_bytes_per_alloc: u64,
    pub dirty_expire_s: f64,
    pub dirty_writeback_s: f64,
    pub sources: Vec<String>,
}

/// The presets shipped with raidlab, by name.
pub fn presets() -> Result<BTreeMap<String, Kernel>, String> {
    let mut all: BTreeMap<String, Kernel> =
        toml::from_str(KERNELS).map_err(|e| format!("{KERNELS_FILE}: {e}"))?;
    for (name, k) in all.iter_mut() {
        k.name = name.clone();
        k.check()
            .map_err(|m| format!("{KERNELS_FILE}: [{name}]: {m}"))?;
    }
    Ok(all)
}

/// The preset named `name` (a host preset's name).
pub fn preset(name: &str) -> Result<Kernel, String> {
    let all = presets()?;
    all.get(name).cloned().ok_or_else(|| {
        format!(
            "no kernel page-cache model for host `{name}` in {KERNELS_FILE} (known: {})",
            all.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    })
}

impl Kernel {
    pub fn check(&self) -> Result<(), String> {
        let pct = |v: f64, k: &str| {
            if v.is_finite() && v > 0.0 && v <= 100.0 {
                Ok(())
            } else {
                Err(format!("{k} must be a percentage above 0 (got {v})"))
            }
        };
        pct(self.dirty_ratio_pct, "dirty_ratio_pct")?;
        pct(
            self.dirty_background_ratio_pct,
            "dirty_background_ratio_pct",
        )?;
        if self.reserved_bytes >= self.ram_bytes {
            return Err(format!(
                "reserved_bytes ({}) leaves no page cache in ram_bytes ({})",
                self.reserved_bytes, self.ram_bytes
            ));
        }
        if self.max_request_bytes < PAGE || self.default_readahead_bytes < PAGE {
            return Err(
                "max_request_bytes and default_readahead_bytes must be at least a page (4096)"
                    .into(),
            );
        }
        if self.queue_requests == 0 {
            return Err("queue_requests must be at least 1".into());
        }
        if !(self.copy_mb_per_s.is_finite() && self.copy_mb_per_s > 0.0) {
            return Err(format!(
                "copy_mb_per_s must be positive (got {})",
                self.copy_mb_per_s
            ));
        }
        if !(self.call_us.is_finite() && self.call_us >= 0.0) {
            return Err(format!("call_us cannot be negative (got {})", self.call_us));
        }
        if !(self.ext3_commit_s > 0.0 && self.xfs_sync_s > 0.0) {
            return Err("ext3_commit_s and xfs_sync_s must be positive".into());
        }
        if !(self.dirty_expire_s > 0.0 && self.dirty_writeback_s > 0.0) {
            return Err("dirty_expire_s and dirty_writeback_s must be positive".into());
        }
        if self.xfs_logbuf_bytes < 512 || self.ext3_journal_bytes < 1 << 20 {
            return Err(
                "xfs_logbuf_bytes must be at least 512 and ext3_journal_bytes at least 1 MiB"
                    .into(),
            );
        }
        Ok(())
    }

    /// Pages the page cache can hold (dirty, under writeback or clean).
    pub fn cache_pages(&self) -> u64 {
        (self.ram_bytes - self.reserved_bytes) / PAGE
    }

    /// Dirty plus under-writeback pages past which a writer waits.
    pub fn dirty_limit_pages(&self) -> u64 {
        ((self.cache_pages() as f64 * self.dirty_ratio_pct / 100.0) as u64).max(1)
    }

    /// Dirty pages past which background writeback runs.
    pub fn background_pages(&self) -> u64 {
        ((self.cache_pages() as f64 * self.dirty_background_ratio_pct / 100.0) as u64).max(1)
    }

    /// CPU time of one call moving `len` bytes, in ns.
    pub fn call_ns(&self, len: u64) -> u64 {
        (self.call_us * 1e3 + len as f64 / (self.copy_mb_per_s * 1e6) * 1e9).round() as u64
    }

    pub fn params(&self) -> Vec<Param> {
        vec![
            Param::new("ram_bytes", self.ram_bytes as f64, "bytes"),
            Param::new("reserved_bytes", self.reserved_bytes as f64, "bytes"),
            Param::new("dirty_ratio_pct", self.dirty_ratio_pct, "%"),
            Param::new(
                "dirty_background_ratio_pct",
                self.dirty_background_ratio_pct,
                "%",
            ),
            Param::new("max_request_bytes", self.max_request_bytes as f64, "bytes"),
            Param::new("queue_requests", self.queue_requests as f64, "requests"),
            Param::new(
                "default_readahead_bytes",
                self.default_readahead_bytes as f64,
                "bytes",
            ),
            Param::new("copy_mb_per_s", self.copy_mb_per_s, "MB/s"),
            Param::new("call_us", self.call_us, "µs"),
            Param::new("ext3_commit_s", self.ext3_commit_s, "s"),
            Param::new(
                "ext3_inode_ratio_bytes",
                self.ext3_inode_ratio_bytes as f64,
                "bytes",
            ),
            Param::new(
                "ext3_journal_bytes",
                self.ext3_journal_bytes as f64,
                "bytes",
            ),
            Param::new("xfs_logbuf_bytes", self.xfs_logbuf_bytes as f64, "bytes"),
            Param::new("xfs_sync_s", self.xfs_sync_s, "s"),
            Param::new(
                "xfs_log_bytes_per_alloc",
                self.xfs_log_bytes_per_alloc as f64,
                "bytes",
            ),
            Param::new("dirty_expire_s", self.dirty_expire_s, "s"),
            Param::new("dirty_writeback_s", self.dirty_writeback_s, "s"),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_2008_host_has_the_2_6_22_dirty_limits() {
        let k = preset("linux-2.6.2x-md").unwrap();
        // (2 GiB - 128 MiB) / 4 KiB = 491520 pages; 10% and 5% of them.
        assert_eq!(k.cache_pages(), 491_520);
        assert_eq!(k.dirty_limit_pages(), 49_152);
        assert_eq!(k.background_pages(), 24_576);
        // 8 KiB at 5600 MB/s.
        assert_eq!(k.call_ns(8192), 1463);
        assert!(k.sources.iter().any(|s| s.starts_with("dirty_ratio_pct")));
    }

    #[test]
    fn an_unknown_host_is_refused_by_name() {
        let e = preset("linux-9").unwrap_err();
        assert!(
            e.contains("linux-9") && e.contains("linux-2.6.2x-md"),
            "{e}"
        );
    }
}
