//! The cache tier's part of the simulator's configuration grammar: the
//! `[cache]` section of a TOML file and the short form's `cache=`,
//! `cache-size=`, `cache-block=` and `cache-cutoff=` options.
//!
//! Decides: how those keys map onto `raidlab_cache::Config` and which values
//! are refused. It must never accept a value the real cache would refuse at
//! create, nor build anything ([`crate::config`] builds).

use raidlab_core::size::parse_size;

/// raidlab's cache tier in front of the rest of the configuration. Unset
/// tunables take raidlab-cache's defaults (`raidlab_cache::Config`, reasons
/// documented there).
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheConf {
    /// The cache device's preset (an SSD).
    pub device: String,
    #[serde(default)]
    pub mode: Option<String>,
    /// Bytes of the cache device used. Default: all of it, up to
    /// [`MAX_CACHE_BLOCKS`] blocks (the simulated cache keeps its table in
    /// memory, as the real one does: tens of bytes per block).
    #[serde(default)]
    pub size: Option<String>,
    #[serde(default)]
    pub block: Option<String>,
    #[serde(default)]
    pub sequential_cutoff: Option<String>,
    #[serde(default)]
    pub dirty_target_pct: Option<u8>,
    #[serde(default)]
    pub clean_rate: Option<String>,
    #[serde(default)]
    pub promote_threshold: Option<u32>,
}

/// The most cache blocks a simulated cache holds by default (64 GiB of 64 KiB
/// blocks); a larger `size` is refused rather than filling the host's memory.
pub const MAX_CACHE_BLOCKS: u64 = 1 << 20;

fn parse_mode(v: &str) -> Result<raidlab_cache::Mode, String> {
    use raidlab_cache::Mode;
    match v {
        "writeback" | "write-back" => Ok(Mode::WriteBack),
        "writethrough" | "write-through" => Ok(Mode::WriteThrough),
        "writearound" | "write-around" => Ok(Mode::WriteAround),
        _ => Err(format!(
            "unknown cache mode `{v}` (use writeback, writethrough or writearound)"
        )),
    }
}

impl CacheConf {
    /// The cache's configuration, and the bytes of the device to use if given:
    /// (key, what is wrong) on a bad value.
    pub(crate) fn config(
        &self,
    ) -> Result<(raidlab_cache::Config, Option<u64>), (&'static str, String)> {
        let mut c = raidlab_cache::Config::default();
        let size = |key: &'static str,
                    v: &Option<String>|
         -> Result<Option<u64>, (&'static str, String)> {
            v.as_deref()
                .map(parse_size)
                .transpose()
                .map_err(|e| (key, e.to_string()))
        };
        if let Some(m) = &self.mode {
            c.mode = parse_mode(m).map_err(|e| ("mode", e))?;
        }
        if let Some(b) = size("block", &self.block)? {
            c.block_size = u32::try_from(b)
                .ok()
                .filter(|b| raidlab_cache::format::check_block_size(*b).is_ok())
                .ok_or_else(|| {
                    (
                        "block",
                        format!("{b} is not a power of two from 4K to 1G; pick one such as 64K"),
                    )
                })?;
        }
        if let Some(v) = size("sequential_cutoff", &self.sequential_cutoff)? {
            c.sequential_cutoff = v;
        }
        if let Some(v) = self.dirty_target_pct {
            if v > 100 {
                return Err((
                    "dirty_target_pct",
                    format!("{v} is over 100 (a percentage)"),
                ));
            }
            c.dirty_target_pct = v;
        }
        if let Some(v) = size("clean_rate", &self.clean_rate)? {
            c.clean_rate = v;
        }
        if let Some(v) = self.promote_threshold {
            if v == 0 || v > raidlab_cache::format::MAX_PROMOTE {
                return Err((
                    "promote_threshold",
                    format!(
                        "{v} is not from 1 to {}",
                        raidlab_cache::format::MAX_PROMOTE
                    ),
                ));
            }
            c.promote_threshold = v;
        }
        let bytes = size("size", &self.size)?;
        if let Some(b) = bytes {
            if b / u64::from(c.block_size) > MAX_CACHE_BLOCKS {
                return Err((
                    "size",
                    format!(
                        "{b} bytes is more than {MAX_CACHE_BLOCKS} blocks of {} bytes, the most a simulated cache holds; use a larger block or a smaller size",
                        c.block_size
                    ),
                ));
            }
        }
        Ok((c, bytes))
    }

    pub(crate) fn describe(&self) -> String {
        let mode = self.mode.as_deref().unwrap_or("writethrough");
        let mut s = format!(", cached by {} ({mode}", self.device);
        if let Some(z) = &self.size {
            s.push_str(&format!(", {z}"));
        }
        if let Some(b) = &self.block {
            s.push_str(&format!(", {b} blocks"));
        }
        s.push(')');
        s
    }
}

/// Apply a short-form cache option; false when `k` is not one.
pub(crate) fn cache_option(
    cache: &mut Option<CacheConf>,
    k: &str,
    v: &str,
) -> Result<bool, String> {
    let needs = |k: &str| format!("`{k}` needs `cache=PRESET` before it");
    match k {
        "cache" => {
            let (device, mode) = match v.split_once('/') {
                Some((d, m)) => {
                    parse_mode(m).map_err(|e| format!("`cache={v}`: {e}"))?;
                    (d, Some(m.to_string()))
                }
                None => (v, None),
            };
            *cache = Some(CacheConf {
                device: device.into(),
                mode,
                ..CacheConf::default()
            });
        }
        "cache-size" => cache.as_mut().ok_or_else(|| needs(k))?.size = Some(v.into()),
        "cache-block" => cache.as_mut().ok_or_else(|| needs(k))?.block = Some(v.into()),
        "cache-cutoff" => {
            cache.as_mut().ok_or_else(|| needs(k))?.sequential_cutoff = Some(v.into())
        }
        _ => return Ok(false),
    }
    Ok(true)
}
