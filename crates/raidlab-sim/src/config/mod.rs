//! What a simulated target is made of, from a TOML file or a short form, built into
//! a device: one preset device, a raidlab array of them (complete or with failed
//! members, with or without the stripe cache), or a RAID card running the array,
//! or software RAID over the card's pass-through disks.
//!
//! Decides: the configuration grammar and what it builds (the short form in
//! `short.rs`, the building in `build.rs`). It must never accept a
//! key it does not know or a value a model would reject: every bad input is an
//! error naming the file, line and key (or the short form's part), and nothing is
//! built from it.
//!
//! Short form (`raidlab bench ... sim:SPEC`): parts separated by `:`
//! - `PRESET`: one device, e.g. `sim:hdd-7200`;
//! - `LEVEL:NxPRESET[:OPTION...]`, e.g. `sim:raid6:6xsamsung-hd753lj:chunk=256K`,
//!   options `chunk=SIZE`, `layout=NAME`, `failed=R[,R...]`,
//!   `stripe-cache=N` (stripes; 0 turns it off), `card=NAME` (the card runs the
//!   array) or `card=NAME/pass-through` (software RAID on the card's disks),
//!   `rebuild=R` (role R is being rebuilt onto a new device of the preset from
//!   the start of the run), `rebuild-rate=SIZE` (its limit per second) and
//!   `rebuild-from=SIZE` (a resumed rebuild); faults at virtual times
//!   ([`crate::faults`]): `fail=R@TIME` (member R fails), `lse=R/SECTOR+COUNT@TIME`
//!   (latent sector errors), `slow=R*FACTOR@TIME` (member R's device model
//!   runs FACTOR times slower), `spare=TIME` (a spare of the preset is added and
//!   rebuilt into the failed role, `rebuild-rate` its limit); `check=yes` (a scrub, md's
//!   check, runs from the start of the run) or `check=repair` (md's repair:
//!   what differs is rewritten), `check-rate=SIZE` and `check-from=SIZE`;
//!   `mismatch=ROLE@OFFSET+LENGTH[,...]` (role ROLE holds other bytes than
//!   its stripe or its other copies say there, for a check to find; RAID
//!   1, 4, 5, 6 and 10, [`crate::contents`]); `bitmap=SIZE` (md's internal write-intent
//!   bitmap with SIZE chunks; `bitmap=internal` for mdadm's choice,
//!   [`crate::bitmap`]); `scheduler=NAME` (the host's I/O scheduler on each
//!   device it sees: `none`, the default, `deadline` or `cfq`, see
//!   [`crate::sched`]); `host=NAME` (a model of the host's md of an era,
//!   [`crate::md_host`], e.g. `host=linux-2.6.2x-md`) with
//!   `host-stripe-head-us=N` and `host-page-us=N` (what-if costs); `engine=live`
//!   (the only engine, and the default: each request runs the real engine
//!   as a task in virtual time, [`crate::array::TaskArray`]);
//! - `PRESET:OPTION...` (`scheduler=NAME`, `host=NAME` or cache options) or either form above with cache options: `cache=PRESET[/MODE]`
//!   puts raidlab's SSD cache tier, on a device of that preset, in front
//!   (MODE `writeback`, `writethrough` (the default, raidlab's) or `writearound`),
//!   with `cache-size=SIZE`, `cache-block=SIZE`, `cache-cutoff=SIZE`;
//! - `FILE.toml`: a configuration file (see [`SimConfig`]).

use crate::array::{ArrayModel, ArraySpec, FaultSpec, RebuildSpec, TaskArray, DATA_OFFSET};
use crate::cache::{CacheSpec, SimCache};
use crate::cache_config::cache_option;
pub use crate::cache_config::{CacheConf, MAX_CACHE_BLOCKS};
use crate::contents::{parse_mismatches, MismatchRange};
use crate::controller::{CardParams, HostBus, PassThrough, RaidCard};
use crate::device::Device;
use crate::faults::Schedule;
use crate::host::HostCost;
use crate::md_host::host_option;
use crate::presets::{self, Preset};
use crate::sched::Scheduler;
use crate::scrub::ScrubSpec;
use raidlab_core::size::parse_size;
use raidlab_layout::{Geometry, Layout, Level};
use raidlab_raid::stripe_cache::StripeCacheConfig;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

// The short form's parser and the building of a checked configuration.
mod build;
mod short;

const CARDS_FILE: &str = "presets/cards.toml";
const CARDS: &str = include_str!("../../presets/cards.toml");

/// A simulation configuration file.
///
/// ```toml
/// name = "six disks in RAID 6"
/// presets = "my-disks.toml"     # optional: more device presets
/// device = "samsung-hd753lj"    # the device (each member's, with [array])
///
/// [array]                       # optional: a raidlab array of `members` devices
/// level = "raid6"
/// members = 6
/// chunk = "256K"                # default 512K (mdadm's)
/// layout = "left-symmetric"     # optional, md's default for the level
/// failed = [2]                  # roles that have failed (degraded)
/// stripe_cache = 64             # stripes held (0: off); raidlab's default
/// stripe_hold_ms = 20.0
/// member_size = "100G"          # optional: use only this much of each device
/// rebuild = 3                   # optional: role 3 is being rebuilt onto a new device
/// rebuild_max_rate = "50M"      # optional: at most this many bytes per second
/// rebuild_from = "10G"          # optional: resumed this far into the member
/// check = true                  # optional: a scrub (md's check) runs meanwhile
/// check_max_rate = "50M"        # optional: at most this many member bytes per second
/// check_from = "10G"            # optional: resumed this far into the members
/// repair = true                 # optional: the check rewrites what differs (md's repair)
/// mismatch = ["1@1G+64K"]       # optional: role@offset+length ranges whose copies differ
/// bitmap = "64M"                # optional: md's internal write-intent bitmap, this chunk
///                               # ("internal": mdadm's choice); default none
/// engine = "live"              # optional, and the only choice: each request runs as a
///                               # task of the engine in virtual time
/// faults = ["fail=2@10s", "spare=20s"]  # optional: faults at virtual times
///                               # (fail=R@TIME, lse=R/SECTOR+COUNT@TIME, slow=R*FACTOR@TIME, spare=TIME;
///                               # `rebuild_max_rate` paces the spare's rebuild)
///
/// [card]                        # optional: a RAID card
/// preset = "adaptec-sas-31205"
/// mode = "raid"                 # the card runs the array; or "pass-through"
///
/// [host]                        # optional: the host's costs (software RAID)
/// parity_mb_per_s = 4000.0
/// request_overhead_us = 5.0
/// scheduler = "cfq"             # I/O scheduler: "none" (default), "deadline", "cfq"
/// md = "linux-2.6.2x-md"        # optional: md's raid5d of an era (presets/hosts.toml)
///
/// [cache]                       # optional: raidlab's SSD cache tier in front
/// device = "intel-520"          # the cache device's preset
/// mode = "writeback"            # or "writethrough" (default), "writearound"
/// size = "4G"                   # bytes of the device used (default: all, see CacheConf)
/// block = "4K"                  # cache block (default 64K)
/// sequential_cutoff = "4M"      # "0": never bypass
/// dirty_target_pct = 10
/// clean_rate = "0"              # bytes/s, "0": unlimited
/// promote_threshold = 1
/// ```
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimConfig {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub presets: Option<String>,
    pub device: String,
    #[serde(default)]
    pub array: Option<ArrayConf>,
    #[serde(default)]
    pub card: Option<CardConf>,
    #[serde(default)]
    pub host: Option<HostCost>,
    #[serde(default)]
    pub cache: Option<CacheConf>,
}

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArrayConf {
    pub level: String,
    pub members: usize,
    #[serde(default)]
    pub chunk: Option<String>,
    #[serde(default)]
    pub layout: Option<String>,
    #[serde(default)]
    pub failed: Vec<usize>,
    #[serde(default = "default_stripes")]
    pub stripe_cache: usize,
    #[serde(default = "default_hold")]
    pub stripe_hold_ms: f64,
    /// Rows kept in memory after a write (md's stripe heads; 256, md's
    /// `stripe_cache_size`, by default); with the stripe cache only.
    #[serde(default = "default_kept_rows")]
    pub kept_rows: usize,
    #[serde(default)]
    pub member_size: Option<String>,
    #[serde(default)]
    pub rebuild: Option<usize>,
    #[serde(default)]
    pub rebuild_max_rate: Option<String>,
    #[serde(default)]
    pub rebuild_from: Option<String>,
    #[serde(default)]
    pub check: bool,
    #[serde(default)]
    pub check_max_rate: Option<String>,
    #[serde(default)]
    pub check_from: Option<String>,
    /// The check repairs (md's `repair`), rewriting what differs.
    #[serde(default)]
    pub repair: bool,
    /// Ranges whose copies differ: `ROLE@OFFSET+LENGTH` each.
    #[serde(default)]
    pub mismatch: Vec<String>,
    /// md's internal write-intent bitmap: its chunk size, `internal` for
    /// mdadm's choice, or `none` (the default: the articles' 2008 arrays had
    /// none, although mdadm since 3.x adds one to arrays over 100 GB).
    #[serde(default)]
    pub bitmap: Option<String>,
    /// Faults at virtual times, each `KEY=VALUE` ([`crate::faults`]).
    #[serde(default)]
    pub faults: Vec<String>,
    /// How the engine runs: `live`, the only way since the replay of
    /// recorded plans was removed (each request runs the engine as a task in
    /// virtual time, [`crate::array::TaskArray`]).
    #[serde(default)]
    pub engine: Option<String>,
}

impl ArrayConf {
    /// The bitmap asked for: `None` for none, `Some(None)` for mdadm's
    /// chunk choice, `Some(Some(bytes))` for a given chunk.
    pub fn bitmap_chunk(&self) -> Result<Option<Option<u64>>, String> {
        match self.bitmap.as_deref() {
            None | Some("none") => Ok(None),
            Some("internal") => Ok(Some(None)),
            Some(v) => match parse_size(v) {
                Ok(b) if b >= 4096 && b.is_power_of_two() => Ok(Some(Some(b))),
                Ok(b) => Err(format!(
                    "`{v}` ({b} bytes): a bitmap chunk is a power of two of at least 4K"
                )),
                Err(e) => Err(format!(
                    "`{v}`: {e}; say a chunk size (e.g. 64M), `internal` or `none`"
                )),
            },
        }
    }

    /// The `faults`, parsed and checked against the array (one contiguous
    /// place for them here; the grammar is [`crate::faults`]'s).
    pub fn fault_schedule(&self) -> Result<Schedule, (&'static str, String)> {
        let s = Schedule::parse(&self.faults).map_err(|m| ("faults", m))?;
        // A role rebuilt from the start has no device the faults could name
        // (its new one is the rebuild's).
        let mut gone = self.failed.clone();
        gone.extend(self.rebuild);
        s.check(self.members, &gone).map_err(|m| ("faults", m))?;
        if s.spare().is_some() && self.rebuild.is_some() {
            return Err((
                "faults",
                "a `spare` beside `rebuild`: the engine rebuilds one member at a time".into(),
            ));
        }
        if s.spare().is_some() && self.check {
            return Err((
                "faults",
                "a `spare` beside a check: md runs one sync action at a time".into(),
            ));
        }
        Ok(s)
    }

    fn has_spare(&self) -> bool {
        self.faults.iter().any(|f| f.starts_with("spare="))
    }

    /// The `mismatch` ranges, parsed.
    pub fn mismatches(&self) -> Result<Vec<MismatchRange>, String> {
        let mut out = Vec::new();
        for m in &self.mismatch {
            out.extend(parse_mismatches(m)?);
        }
        Ok(out)
    }
}

fn default_stripes() -> usize {
    StripeCacheConfig::default().stripes
}
fn default_kept_rows() -> usize {
    StripeCacheConfig::default().kept_rows
}
fn default_hold() -> f64 {
    StripeCacheConfig::default().hold.as_secs_f64() * 1e3
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CardMode {
    Raid,
    PassThrough,
}

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CardConf {
    pub preset: String,
    #[serde(default = "default_mode")]
    pub mode: CardMode,
}

fn default_mode() -> CardMode {
    CardMode::Raid
}

/// A configuration error: where (file and line, or the short form) and what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{place}: {message}")]
pub struct ConfigError {
    pub place: String,
    pub message: String,
}

fn err(place: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        place: place.into(),
        message: message.into(),
    }
}

/// The card presets shipped with raidlab.
pub fn card_presets() -> Result<BTreeMap<String, CardParams>, ConfigError> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Cards {
        card: BTreeMap<String, CardParams>,
    }
    let cards: Cards = toml::from_str(CARDS).map_err(|e| toml_error(CARDS_FILE, CARDS, &e))?;
    for (name, c) in &cards.card {
        c.check()
            .map_err(|m| err(format!("{CARDS_FILE}: [card.{name}]"), m))?;
    }
    Ok(cards.card)
}

/// `file:line: key: message` from a TOML error.
fn toml_error(file: &str, text: &str, e: &toml::de::Error) -> ConfigError {
    let line = e
        .span()
        .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
    let key = e
        .message()
        .split("unknown field `")
        .nth(1)
        .and_then(|r| r.split('`').next())
        .map(|k| format!("`{k}`: "))
        .unwrap_or_default();
    err(
        match line {
            Some(l) => format!("{file}:{l}"),
            None => file.to_string(),
        },
        format!("{key}{}", e.message().trim()),
    )
}

/// The line of `key = ` in `text` (for errors found after parsing).
fn line_of(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| l.trim_start().starts_with(key) && l.contains('='))
        .map(|i| i + 1)
}

impl SimConfig {
    /// Read a configuration file.
    pub fn load(path: &Path) -> Result<(SimConfig, Vec<Preset>), ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| err(&file, format!("cannot read the configuration: {e}")))?;
        let cfg: SimConfig = toml::from_str(&text).map_err(|e| toml_error(&file, &text, &e))?;
        let mut extra = Vec::new();
        if let Some(p) = &cfg.presets {
            let p = path.parent().unwrap_or(Path::new(".")).join(p);
            let ptext = std::fs::read_to_string(&p).map_err(|e| {
                err(
                    format!("{file}:{}", line_of(&text, "presets").unwrap_or(1)),
                    format!("`presets`: cannot read {}: {e}", p.display()),
                )
            })?;
            extra = presets::parse(&p.display().to_string(), &ptext)
                .map_err(|e| err(p.display().to_string(), e.to_string()))?;
        }
        cfg.check().map_err(|(key, m)| {
            err(
                format!("{file}:{}", line_of(&text, key).unwrap_or(1)),
                format!("`{key}`: {m}"),
            )
        })?;
        Ok((cfg, extra))
    }

    /// Checks that need no device: (key, what is wrong).
    fn check(&self) -> Result<(), (&'static str, String)> {
        if let Some(c) = &self.cache {
            if c.device.is_empty() {
                return Err((
                    "device",
                    "the cache needs a device preset (`cache=PRESET` or [cache] device)".into(),
                ));
            }
            c.config()?;
        }
        if let Some(h) = &self.host {
            h.check().map_err(|m| ("parity_mb_per_s", m))?;
        }
        if let Some(a) = &self.array {
            let level = Level::from_name(&a.level).map_err(|e| ("level", e.to_string()))?;
            if a.members < level.min_members() {
                return Err((
                    "members",
                    format!(
                        "{} needs at least {} members (got {})",
                        level.name(),
                        level.min_members(),
                        a.members
                    ),
                ));
            }
            if let Some(&r) = a.failed.iter().find(|&&r| r >= a.members) {
                return Err((
                    "failed",
                    format!(
                        "role {r} does not exist in an array of {} members",
                        a.members
                    ),
                ));
            }
            if let Some(r) = a.rebuild {
                if r >= a.members {
                    return Err((
                        "rebuild",
                        format!(
                            "role {r} does not exist in an array of {} members",
                            a.members
                        ),
                    ));
                }
            } else if a.rebuild_max_rate.is_some() && !a.has_spare() {
                return Err((
                    "rebuild_max_rate",
                    "a rebuild rate needs a rebuild (`rebuild = ROLE` or a `spare=TIME` fault)"
                        .into(),
                ));
            } else if a.rebuild_from.is_some() {
                return Err((
                    "rebuild_from",
                    "a rebuild position needs a rebuild (`rebuild = ROLE`)".into(),
                ));
            }
            if let Some(f) = &a.rebuild_from {
                parse_size(f).map_err(|e| ("rebuild_from", e.to_string()))?;
            }
            if a.check && a.rebuild.is_some() {
                return Err((
                    "check",
                    "a check cannot run beside a rebuild (md runs one sync action at a time)"
                        .into(),
                ));
            }
            if !a.check && a.check_max_rate.is_some() {
                return Err((
                    "check_max_rate",
                    "a check rate needs a check (`check = true`)".into(),
                ));
            }
            if !a.check && a.check_from.is_some() {
                return Err((
                    "check_from",
                    "a check position needs a check (`check = true`)".into(),
                ));
            }
            if let Some(f) = &a.check_from {
                parse_size(f).map_err(|e| ("check_from", e.to_string()))?;
            }
            if !a.check && a.repair {
                return Err((
                    "repair",
                    "a repair is a check that rewrites (`check = true`)".into(),
                ));
            }
            a.mismatches().map_err(|e| ("mismatch", e))?;
            a.fault_schedule()?;
            if let Some(r) = &a.check_max_rate {
                match parse_size(r) {
                    Ok(0) => return Err(("check_max_rate", "must be more than 0".into())),
                    Ok(_) => {}
                    Err(e) => return Err(("check_max_rate", e.to_string())),
                }
            }
            if let Some(r) = &a.rebuild_max_rate {
                match parse_size(r) {
                    Ok(0) => return Err(("rebuild_max_rate", "must be more than 0".into())),
                    Ok(_) => {}
                    Err(e) => return Err(("rebuild_max_rate", e.to_string())),
                }
            }
            if !(a.stripe_hold_ms.is_finite() && a.stripe_hold_ms >= 0.0) {
                return Err((
                    "stripe_hold_ms",
                    format!("cannot be negative (got {})", a.stripe_hold_ms),
                ));
            }
        } else if self.card.as_ref().is_some_and(|c| c.mode == CardMode::Raid) {
            return Err(("card", "a card in RAID mode needs an [array] to run".into()));
        }
        Ok(())
    }

    /// A one-line description for tables.
    pub fn describe(&self) -> String {
        if let Some(n) = &self.name {
            return n.clone();
        }
        let mut s = match &self.array {
            Some(a) => format!(
                "{} of {} x {}{}",
                a.level,
                a.members,
                self.device,
                a.chunk
                    .as_ref()
                    .map(|c| format!(", chunk {c}"))
                    .unwrap_or_default()
            ),
            None => self.device.clone(),
        };
        if let Some(a) = &self.array {
            if !a.failed.is_empty() {
                s.push_str(&format!(", failed {:?}", a.failed));
            }
            if let Some(r) = a.rebuild {
                s.push_str(&format!(", rebuilding role {r}"));
                if let Some(m) = &a.rebuild_max_rate {
                    s.push_str(&format!(" at most {m}/s"));
                }
            }
            if !a.mismatch.is_empty() {
                s.push_str(&format!(", mismatch {}", a.mismatch.join(",")));
            }
            if !a.faults.is_empty() {
                s.push_str(&format!(", faults {}", a.faults.join(",")));
            }
            if a.check {
                s.push_str(if a.repair {
                    ", repairing"
                } else {
                    ", checking"
                });
                if let Some(m) = &a.check_max_rate {
                    s.push_str(&format!(" at most {m}/s"));
                }
            }
        }
        if let Some(c) = &self.card {
            s.push_str(&match c.mode {
                CardMode::Raid => format!(" on {}", c.preset),
                CardMode::PassThrough => format!(" (software RAID on {} pass-through)", c.preset),
            });
        }
        if let Some(c) = &self.cache {
            s.push_str(&c.describe());
        }
        s
    }
}
