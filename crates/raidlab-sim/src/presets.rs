//! Named device models: the presets shipped in `presets/devices.toml` and the same
//! format for user files, with errors that say which file, line and key is wrong.
//!
//! Decides: how a preset file is read and checked, and which presets exist. It
//! must never guess a missing value or accept one a model would reject: every
//! bad input is an error naming its place, never a panic or a silent default.
//!
//! Format: one table per preset, `[hdd.<name>]`, `[ssd.<name>]` or
//! `[fixed.<name>]` (a delay, one request at a time, a bandwidth cap:
//! [`crate::fixed`]), holding
//! `description`, `sources` (one "key: where the value comes from" line per
//! parameter), a `params` table (the model's parameters, unknown keys rejected)
//! and an optional `published` table of benchmark figures to check the model
//! against, each `{ value, source }` and, when the model is known to miss it,
//! `miss = "why"`.

use crate::device::{Device, ModelInfo};
use crate::fixed::{Fixed, FixedParams};
use crate::hdd::{Hdd, HddParams, ParamError};
use crate::ssd::{Ssd, SsdParams};
use std::collections::BTreeMap;

/// The built-in presets' file name, as errors quote it.
pub const BUILTIN_FILE: &str = "presets/devices.toml";
const BUILTIN: &str = include_str!("../presets/devices.toml");

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum PresetError {
    /// A value that is not valid TOML, has the wrong type, is unknown or makes
    /// no device.
    #[error("{file}:{line}: `{key}`: {message}")]
    Invalid {
        file: String,
        line: usize,
        key: String,
        message: String,
    },
    #[error("unknown device preset `{name}`; known presets: {known}")]
    Unknown { name: String, known: String },
}

/// A published benchmark figure and where it was published.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figure {
    pub value: f64,
    pub source: String,
    /// Why the model misses this figure by more than the tests' tolerance.
    #[serde(default)]
    pub miss: Option<String>,
}

/// Figures measured the CrystalDiskMark way (see `tests/models.rs`): sequential
/// 1 MiB at QD8 and random 4 KiB at QD1 and QD32, over a 1 GiB region at the
/// start of the device; `access_time_ms` is the mean QD1 4 KiB random read
/// latency over the whole device; `*_inner_*` is read at the device's end.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Published {
    pub seq_read_mb_per_s: Option<Figure>,
    pub seq_read_inner_mb_per_s: Option<Figure>,
    pub seq_write_mb_per_s: Option<Figure>,
    pub read_4k_qd1_iops: Option<Figure>,
    pub write_4k_qd1_iops: Option<Figure>,
    pub read_4k_qd32_iops: Option<Figure>,
    pub write_4k_qd32_iops: Option<Figure>,
    pub access_time_ms: Option<Figure>,
}

impl Published {
    /// Every figure present, with its field name.
    pub fn figures(&self) -> Vec<(&'static str, &Figure)> {
        [
            ("seq_read_mb_per_s", &self.seq_read_mb_per_s),
            ("seq_read_inner_mb_per_s", &self.seq_read_inner_mb_per_s),
            ("seq_write_mb_per_s", &self.seq_write_mb_per_s),
            ("read_4k_qd1_iops", &self.read_4k_qd1_iops),
            ("write_4k_qd1_iops", &self.write_4k_qd1_iops),
            ("read_4k_qd32_iops", &self.read_4k_qd32_iops),
            ("write_4k_qd32_iops", &self.write_4k_qd32_iops),
            ("access_time_ms", &self.access_time_ms),
        ]
        .into_iter()
        .filter_map(|(k, f)| f.as_ref().map(|f| (k, f)))
        .collect()
    }
}

#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry<P> {
    description: String,
    sources: Vec<String>,
    params: P,
    #[serde(default)]
    published: Published,
}

#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    hdd: BTreeMap<String, Entry<HddParams>>,
    #[serde(default)]
    ssd: BTreeMap<String, Entry<SsdParams>>,
    #[serde(default)]
    fixed: BTreeMap<String, Entry<FixedParams>>,
}

/// Which model a preset builds, with its parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum Model {
    Hdd(HddParams),
    Ssd(SsdParams),
    Fixed(FixedParams),
}

/// One checked preset.
#[derive(Debug, Clone, PartialEq)]
pub struct Preset {
    pub name: String,
    pub description: String,
    pub sources: Vec<String>,
    pub model: Model,
    pub published: Published,
}

impl Preset {
    /// A fresh device of this preset (idle, at virtual time 0). `parse` has
    /// validated the parameters, so this fails only for a hand-built `Preset`.
    pub fn build(&self) -> Result<Box<dyn Device>, ParamError> {
        Ok(match &self.model {
            Model::Hdd(p) => Box::new(Hdd::new(&self.name, p.clone(), self.sources.clone())?),
            Model::Ssd(p) => Box::new(Ssd::new(&self.name, p.clone(), self.sources.clone())?),
            Model::Fixed(p) => Box::new(Fixed::new(&self.name, p.clone(), self.sources.clone())?),
        })
    }

    /// This preset on a link of at most `mb_per_s` decimal MB/s of payload (a
    /// card's port): a SATA/SAS link runs at the lower of its two ends' rates,
    /// so the device's interface becomes that.
    pub fn on_link(&self, mb_per_s: f64) -> Preset {
        let mut p = self.clone();
        match &mut p.model {
            // An HDD's interface is in Gb/s of line rate: 8b/10b carries
            // 100 MB/s of payload per Gb/s.
            Model::Hdd(h) => h.interface_gbit_per_s = h.interface_gbit_per_s.min(mb_per_s / 100.0),
            Model::Ssd(s) => s.interface_mb_per_s = s.interface_mb_per_s.min(mb_per_s),
            // The link caps what the bucket lets through, whichever is lower.
            Model::Fixed(f) => {
                f.rate_mb_per_s = if f.rate_mb_per_s > 0.0 {
                    f.rate_mb_per_s.min(mb_per_s)
                } else {
                    mb_per_s
                };
                if f.burst_s == 0.0 {
                    f.burst_s = 2.0; // nbdkit's rate filter's default burstiness
                }
            }
        }
        p
    }

    /// The parameter names this preset's model takes.
    pub fn param_names(&self) -> Vec<String> {
        let params = match &self.model {
            Model::Hdd(p) => p.params(),
            Model::Ssd(p) => p.params(),
            Model::Fixed(p) => p.params(),
        };
        params.into_iter().map(|p| p.name).collect()
    }
}

fn line_at(text: &str, byte: usize) -> usize {
    text[..byte.min(text.len())].matches('\n').count() + 1
}

/// The line of `key` inside the table `[header]`, or of the header itself, or 0
/// when there is no such table.
fn line_of_key(text: &str, header: &str, key: &str) -> usize {
    let mut in_table = false;
    let mut header_line = 0;
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.starts_with('[') {
            in_table = l == format!("[{header}]");
            if in_table {
                header_line = i + 1;
            }
        } else if in_table {
            let k = l.split('=').next().unwrap_or("").trim().trim_matches('"');
            if l.contains('=') && k == key {
                return i + 1;
            }
        }
    }
    header_line
}

fn key_in_message(msg: &str) -> Option<String> {
    let rest = msg.split("unknown field `").nth(1)?;
    Some(rest.split('`').next()?.to_string())
}

/// Read a preset file. `file_name` is only for messages.
pub fn parse(file_name: &str, text: &str) -> Result<Vec<Preset>, PresetError> {
    let file: File = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| line_at(text, s.start)).unwrap_or(1);
        let line_text = text.lines().nth(line - 1).unwrap_or("");
        let key = key_in_message(e.message()).unwrap_or_else(|| {
            line_text
                .split('=')
                .next()
                .filter(|_| line_text.contains('='))
                .unwrap_or(line_text)
                .trim()
                .to_string()
        });
        PresetError::Invalid {
            file: file_name.into(),
            line,
            key,
            message: e.message().trim().to_string(),
        }
    })?;
    let invalid = |kind: &str, name: &str, e: ParamError| PresetError::Invalid {
        file: file_name.into(),
        // Parameters given as an inline table sit under the preset's header.
        line: match line_of_key(text, &format!("{kind}.{name}.params"), e.key) {
            0 => line_of_key(text, &format!("{kind}.{name}"), e.key).max(1),
            n => n,
        },
        key: e.key.into(),
        message: format!("[{kind}.{name}] {}", e.message),
    };
    let mut out = Vec::new();
    for (name, e) in file.hdd {
        e.params.validate().map_err(|x| invalid("hdd", &name, x))?;
        out.push(Preset {
            name,
            description: e.description,
            sources: e.sources,
            model: Model::Hdd(e.params),
            published: e.published,
        });
    }
    for (name, e) in file.ssd {
        e.params.validate().map_err(|x| invalid("ssd", &name, x))?;
        out.push(Preset {
            name,
            description: e.description,
            sources: e.sources,
            model: Model::Ssd(e.params),
            published: e.published,
        });
    }
    for (name, e) in file.fixed {
        e.params
            .validate()
            .map_err(|x| invalid("fixed", &name, x))?;
        out.push(Preset {
            name,
            description: e.description,
            sources: e.sources,
            model: Model::Fixed(e.params),
            published: e.published,
        });
    }
    Ok(out)
}

/// The built-in presets.
pub fn builtin() -> Result<Vec<Preset>, PresetError> {
    builtin_parsed().clone()
}

/// The built-in file, parsed once per process: every simulated member is
/// built from it, and reading the TOML again for each was a few percent of a
/// short simulated run.
fn builtin_parsed() -> &'static Result<Vec<Preset>, PresetError> {
    static PARSED: std::sync::OnceLock<Result<Vec<Preset>, PresetError>> =
        std::sync::OnceLock::new();
    PARSED.get_or_init(|| parse(BUILTIN_FILE, BUILTIN))
}

/// A fresh device of the built-in preset `name`.
pub fn device(name: &str) -> Result<Box<dyn Device>, PresetError> {
    preset(name)?.build().map_err(|e| PresetError::Invalid {
        file: BUILTIN_FILE.into(),
        line: 0,
        key: e.key.into(),
        message: e.message,
    })
}

/// The built-in preset `name`.
pub fn preset(name: &str) -> Result<Preset, PresetError> {
    let all = builtin_parsed().as_ref().map_err(Clone::clone)?;
    match all.iter().find(|p| p.name == name) {
        Some(p) => Ok(p.clone()),
        None => Err(PresetError::Unknown {
            name: name.into(),
            known: all
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// What every built-in preset is (empty if the built-in file were broken, which
/// a test rules out).
pub fn list() -> Vec<ModelInfo> {
    builtin()
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p.build().ok().map(|d| d.info()))
        .collect()
}
