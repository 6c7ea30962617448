//! A RAID card's parameters: what each means, its unit, and which values make
//! a card.
//!
//! Decides: whether a parameter set is valid. It must never hold a running
//! card's state.

use crate::device::{Ns, Param, US};

/// A card's parameters, each with its unit in its name.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CardParams {
    pub description: String,
    /// Write cache in bytes (battery- or flash-backed, so a flush need not wait
    /// for it); 0 for none.
    pub cache_bytes: u64,
    /// Acknowledge writes from the cache (write-back) or only once on disk.
    pub write_back: bool,
    /// Dirty fraction of the cache above which partial stripes are destaged at
    /// once, not only when they have waited `stripe_hold_ms`.
    pub high_watermark: f64,
    /// How long a partial stripe waits in the cache for the rest of it, in ms.
    pub stripe_hold_ms: f64,
    /// Destage writes the card keeps in flight to its array.
    pub destage_depth: u32,
    /// Stripes read ahead when the card sees a sequential read stream (0: off).
    pub read_ahead_stripes: u32,
    /// The card's parity engine (XOR and RAID 6 P+Q), decimal MB/s.
    pub parity_mb_per_s: f64,
    /// Firmware time per host command, in µs.
    pub command_overhead_us: f64,
    /// The host link (PCIe), decimal MB/s, shared by all transfers.
    pub host_link_mb_per_s: f64,
    /// Disk ports.
    pub ports: u32,
    /// Payload one port carries, decimal MB/s (its SAS/SATA line rate after
    /// 8b/10b coding: 3 Gb/s -> 300 MB/s). A disk on the port runs at the lower
    /// of this and its own interface, as the link negotiates.
    pub port_mb_per_s: f64,
    /// Read data of a parity array (RAID 5/6) the card keeps in its cache, in
    /// bytes (0: none). Parity arrays' reads go through the card's cache, whose
    /// stripe buffers the parity engine needs; what is read first stays until a
    /// write changes it (no replacement). RAID 0/1/10 reads bypass the cache, as
    /// MegaRAID's Direct I/O does.
    #[serde(default)]
    pub parity_read_cache_bytes: u64,
    #[serde(default)]
    pub sources: Vec<String>,
}

impl CardParams {
    pub fn check(&self) -> Result<(), String> {
        let positive = [
            ("parity_mb_per_s", self.parity_mb_per_s),
            ("host_link_mb_per_s", self.host_link_mb_per_s),
            ("port_mb_per_s", self.port_mb_per_s),
        ];
        for (k, v) in positive {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("{k} must be a positive number (got {v})"));
            }
        }
        for (k, v) in [
            ("command_overhead_us", self.command_overhead_us),
            ("stripe_hold_ms", self.stripe_hold_ms),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{k} cannot be negative (got {v})"));
            }
        }
        if !(0.0..=1.0).contains(&self.high_watermark) {
            return Err(format!(
                "high_watermark is a fraction of the cache between 0 and 1 (got {})",
                self.high_watermark
            ));
        }
        if self.parity_read_cache_bytes > self.cache_bytes {
            return Err(format!(
                "parity_read_cache_bytes ({}) cannot exceed cache_bytes ({})",
                self.parity_read_cache_bytes, self.cache_bytes
            ));
        }
        if self.ports == 0 {
            return Err("a card needs at least one port".into());
        }
        if self.destage_depth == 0 {
            return Err("destage_depth must be at least 1".into());
        }
        Ok(())
    }

    pub fn params(&self) -> Vec<Param> {
        let p = |name: &str, value: f64, unit: &str| Param {
            name: name.into(),
            value,
            unit: unit.into(),
        };
        vec![
            p("cache_bytes", self.cache_bytes as f64, "bytes"),
            p("write_back", f64::from(u8::from(self.write_back)), "bool"),
            p("high_watermark", self.high_watermark, "fraction"),
            p("stripe_hold_ms", self.stripe_hold_ms, "ms"),
            p("destage_depth", f64::from(self.destage_depth), "requests"),
            p(
                "read_ahead_stripes",
                f64::from(self.read_ahead_stripes),
                "stripes",
            ),
            p("parity_mb_per_s", self.parity_mb_per_s, "MB/s"),
            p("command_overhead_us", self.command_overhead_us, "µs"),
            p("host_link_mb_per_s", self.host_link_mb_per_s, "MB/s"),
            p("ports", f64::from(self.ports), "ports"),
            p("port_mb_per_s", self.port_mb_per_s, "MB/s"),
            p(
                "parity_read_cache_bytes",
                self.parity_read_cache_bytes as f64,
                "bytes",
            ),
        ]
    }

    pub(super) fn overhead(&self) -> Ns {
        (self.command_overhead_us * US as f64).round() as Ns
    }
}
