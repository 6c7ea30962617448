//! A rotating disk's parameters: what each means, its unit, and which values
//! make a disk.
//!
//! Decides: whether a parameter set is valid (and names the key that is not)
//! and the seek curve's coefficients. It must never hold state of a running disk.

use crate::device::Param;

/// A disk's parameters, every unit in its name. Sizes are bytes, rates decimal MB/s.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HddParams {
    pub rpm: f64,
    pub capacity_bytes: u64,
    /// Recording surfaces; only sets how many tracks share a cylinder.
    pub heads: u32,
    pub track_to_track_ms: f64,
    pub average_seek_ms: f64,
    pub full_stroke_seek_ms: f64,
    pub outer_mb_per_s: f64,
    pub inner_mb_per_s: f64,
    pub head_switch_ms: f64,
    /// Firmware time per command, serialised (one controller).
    pub command_overhead_us: f64,
    pub cache_bytes: u64,
    pub read_ahead: bool,
    pub write_cache: bool,
    /// Commands queued inside the drive (1 = no queueing, up to 32).
    pub ncq_depth: u32,
    /// Link rate before 8b/10b coding: 6 Gb/s carries 600 MB/s.
    pub interface_gbit_per_s: f64,
}

/// A parameter that makes no disk: which key and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamError {
    pub key: &'static str,
    pub message: String,
}

fn bad(key: &'static str, message: impl Into<String>) -> ParamError {
    ParamError {
        key,
        message: message.into(),
    }
}

/// Coefficients of Lee's seek equation in the capacity-fraction form
/// `t(f) = min + a*sqrt(f) + b*f`, `f = (d-1)/(N-2)` for a move of `d >= 1`
/// cylinders out of `N`, so the longest move (`N-1`) has `f = 1` (DiskSim 4.0
/// manual §B.5.1, with its `x-1` over `N` rescaled to the longest move):
/// `a = (-10 min + 15 avg - 5 max)/3`, `b = (7 min - 15 avg + 8 max)/3`.
/// At f=0 it is `min`, at f=1 `min + a + b = max`, and over two uniform random
/// points (density `2(1-f)`, so `E[sqrt f] = 8/15` and `E[f] = 1/3`) its mean is `avg`.
pub fn lee_coefficients(min: f64, avg: f64, max: f64) -> (f64, f64) {
    (
        (-10.0 * min + 15.0 * avg - 5.0 * max) / 3.0,
        (7.0 * min - 15.0 * avg + 8.0 * max) / 3.0,
    )
}

impl HddParams {
    /// Check every value, naming the first key that makes no disk.
    pub fn validate(&self) -> Result<(), ParamError> {
        let pos = |key: &'static str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(bad(key, format!("must be positive, is {v}")))
            }
        };
        let nonneg = |key: &'static str, v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err(bad(key, format!("must not be negative, is {v}")))
            }
        };
        pos("rpm", self.rpm)?;
        if self.capacity_bytes == 0 || self.capacity_bytes % 512 != 0 {
            return Err(bad(
                "capacity_bytes",
                format!(
                    "must be a positive multiple of 512, is {}",
                    self.capacity_bytes
                ),
            ));
        }
        if self.heads == 0 {
            return Err(bad("heads", "must be at least 1"));
        }
        pos("track_to_track_ms", self.track_to_track_ms)?;
        pos("average_seek_ms", self.average_seek_ms)?;
        pos("full_stroke_seek_ms", self.full_stroke_seek_ms)?;
        if self.average_seek_ms < self.track_to_track_ms {
            return Err(bad("average_seek_ms", "is below track_to_track_ms"));
        }
        if self.full_stroke_seek_ms < self.average_seek_ms {
            return Err(bad("full_stroke_seek_ms", "is below average_seek_ms"));
        }
        let (a, b) = lee_coefficients(
            self.track_to_track_ms,
            self.average_seek_ms,
            self.full_stroke_seek_ms,
        );
        // t'(f) = a/(2 sqrt f) + b is smallest at f = 1; both terms keep the curve
        // rising, as a seek never gets faster with distance.
        if a < 0.0 || a / 2.0 + b < 0.0 {
            return Err(bad(
                "average_seek_ms",
                "with these track-to-track and full-stroke times Lee's seek curve is not rising",
            ));
        }
        pos("outer_mb_per_s", self.outer_mb_per_s)?;
        pos("inner_mb_per_s", self.inner_mb_per_s)?;
        if self.inner_mb_per_s > self.outer_mb_per_s {
            return Err(bad("inner_mb_per_s", "is above outer_mb_per_s"));
        }
        nonneg("head_switch_ms", self.head_switch_ms)?;
        nonneg("command_overhead_us", self.command_overhead_us)?;
        if self.cache_bytes < 4096 {
            return Err(bad("cache_bytes", "must be at least 4096"));
        }
        if self.ncq_depth == 0 || self.ncq_depth > 32 {
            return Err(bad(
                "ncq_depth",
                format!("must be 1..=32, is {}", self.ncq_depth),
            ));
        }
        pos("interface_gbit_per_s", self.interface_gbit_per_s)?;
        Ok(())
    }

    /// Every parameter with its unit, for `ModelInfo`.
    pub fn params(&self) -> Vec<Param> {
        let p = Param::new;
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        vec![
            p("rpm", self.rpm, "rpm"),
            p("capacity_bytes", self.capacity_bytes as f64, "bytes"),
            p("heads", self.heads as f64, "surfaces"),
            p("track_to_track_ms", self.track_to_track_ms, "ms"),
            p("average_seek_ms", self.average_seek_ms, "ms"),
            p("full_stroke_seek_ms", self.full_stroke_seek_ms, "ms"),
            p("outer_mb_per_s", self.outer_mb_per_s, "MB/s"),
            p("inner_mb_per_s", self.inner_mb_per_s, "MB/s"),
            p("head_switch_ms", self.head_switch_ms, "ms"),
            p("command_overhead_us", self.command_overhead_us, "us"),
            p("cache_bytes", self.cache_bytes as f64, "bytes"),
            p("read_ahead", flag(self.read_ahead), "bool"),
            p("write_cache", flag(self.write_cache), "bool"),
            p("ncq_depth", self.ncq_depth as f64, "commands"),
            p("interface_gbit_per_s", self.interface_gbit_per_s, "Gbit/s"),
        ]
    }
}
