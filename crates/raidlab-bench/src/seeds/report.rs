//! What a seed's result file tells a report besides its figures
//! ([`crate::schema::SeedSection`]): each finding with its verdict and the
//! figures behind it, seed E's error figures, and the simulated hardware and
//! host every configuration ran on, as the terminal says them.
//!
//! Decides: how a configuration's `sim:` spec is said in words (drives, card,
//! host model, file-system layer). It must never compute a figure or decide a
//! finding (the seed files do), and never describe the machine that computed
//! the run as if it had measured anything.

use super::{Config, Finding, Seed, SeedsResult};
use crate::schema::{SeedConfig, SeedError, SeedFinding, SeedSection};
use raidlab_sim::config::{CardMode, SimConfig};

/// Seed `letter`'s section of its result file.
pub(super) fn section(r: &SeedsResult, seed: Seed) -> SeedSection {
    let letter = seed.letter();
    let findings = r
        .findings
        .iter()
        .filter(|f| f.seed == letter)
        .map(finding)
        .collect();
    let mut errors = Vec::new();
    if let (Seed::E, Some(e)) = (seed, r.seed_e_error) {
        errors.push(SeedError {
            what: "every cell with an article figure".into(),
            cells: e.cells,
            median_abs_error: e.median_abs_error,
        });
        errors.push(SeedError {
            what: "the prediction cells (no card parameter was fitted to them; the calibration cells are listed in docs/seeds.md)".into(),
            cells: e.prediction_cells,
            median_abs_error: e.prediction_median_abs_error,
        });
    }
    let mut configs = Vec::new();
    for c in super::configs(seed) {
        if configs.iter().any(|x: &SeedConfig| x.config == c.name) {
            continue;
        }
        // Only the configurations that ran (a run may be limited to some).
        if r.cells
            .iter()
            .any(|x| x.seed == letter && x.config == c.name)
        {
            configs.push(config(&c));
        }
    }
    SeedSection {
        seed: letter.into(),
        scope: seed.scope().into(),
        findings,
        errors,
        configs,
    }
}

/// The verdict in the words the terminal prints it.
pub fn verdict(f: &Finding) -> &'static str {
    match (f.modelled, f.reproduced) {
        (false, _) => "not modelled",
        (true, true) => "reproduced",
        (true, false) => "not reproduced",
    }
}

fn finding(f: &Finding) -> SeedFinding {
    SeedFinding {
        text: f.text.clone(),
        verdict: verdict(f).into(),
        why: f.why.clone(),
    }
}

/// `c`'s spec in words. A spec the simulator cannot read (it would not have
/// run either) is given as it is, each part saying so.
pub(super) fn config(c: &Config) -> SeedConfig {
    let unreadable = |e: String| SeedConfig {
        config: c.name.clone(),
        spec: c.spec.clone(),
        drives: format!("(spec not readable: {e})"),
        card: "-".into(),
        host: "-".into(),
        fs: "-".into(),
    };
    let cfg = match SimConfig::short(&c.spec) {
        Ok(cfg) => cfg,
        Err(e) => return unreadable(e.to_string()),
    };
    let preset = |name: &str| match raidlab_sim::presets::preset(name) {
        Ok(p) => format!("{name} ({})", p.description),
        Err(_) => name.to_string(),
    };
    let mut drives = match &cfg.array {
        Some(a) => {
            let level = match a.level.strip_prefix("raid") {
                Some(n) => format!("RAID {n}"),
                None => a.level.clone(),
            };
            let mut s = format!("{level} of {} x {}", a.members, preset(&cfg.device));
            if let Some(ch) = &a.chunk {
                s.push_str(&format!(", chunk {ch}"));
            }
            if let Some(m) = &a.member_size {
                s.push_str(&format!(", {m} used per drive"));
            }
            s
        }
        None => format!("one {}", preset(&cfg.device)),
    };
    if let Some(cache) = &cfg.cache {
        drives.push_str(&format!(
            "; SSD cache tier: {} ({})",
            preset(&cache.device),
            cache.mode.as_deref().unwrap_or("writethrough")
        ));
    }
    let card = match &cfg.card {
        None => "none (the drives on the host's own ports)".into(),
        Some(k) => {
            let what = raidlab_sim::config::card_presets()
                .ok()
                .and_then(|m| m.get(&k.preset).map(|p| p.description.clone()));
            let name = match what {
                Some(d) => format!("{} ({d})", k.preset),
                None => k.preset.clone(),
            };
            match k.mode {
                CardMode::Raid => format!("{name}: the card's own RAID"),
                CardMode::PassThrough => {
                    format!("{name}: pass-through, the RAID is the host's software RAID")
                }
            }
        }
    };
    let host = match &cfg.host {
        None => "raidlab-sim's default host: no I/O scheduler, no CPU model of md".into(),
        Some(h) => {
            let mut s = format!("I/O scheduler {}", h.scheduler.name());
            match &h.md {
                Some(md) => s.push_str(&format!("; md {} ({})", md.name, md.description)),
                None => s.push_str("; no CPU model of md"),
            }
            s
        }
    };
    let fs = match cfg
        .host
        .as_ref()
        .and_then(|h| h.fs.as_ref().map(|f| (h, f)))
    {
        None => "none: block level (the workload's requests go straight to the volume)".into(),
        Some((h, f)) => {
            let kernel = h.md.as_ref().map(|m| m.name.clone()).unwrap_or_default();
            match raidlab_sim::fs::kernel::preset(&kernel) {
                Ok(k) => format!(
                    "{f} on the page cache of {kernel} ({}), presets/kernels.toml",
                    k.description
                ),
                Err(_) => format!("{f} on the page cache of {kernel}"),
            }
        }
    };
    SeedConfig {
        config: c.name.clone(),
        spec: c.spec.clone(),
        drives,
        card,
        host,
        fs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_2008_host_through_xfs_is_said_in_words() {
        let c = super::super::configs(Seed::C)
            .into_iter()
            .find(|c| c.name == "sw-raid6-64k")
            .unwrap();
        let s = config(&c);
        assert!(
            s.drives.starts_with("RAID 6 of 6 x samsung-hd753lj ("),
            "{s:?}"
        );
        assert!(s.drives.contains("chunk 64K"), "{s:?}");
        assert!(s.card.starts_with("adaptec-sas-31205 ("), "{s:?}");
        assert!(s.card.contains("pass-through"), "{s:?}");
        assert!(
            s.host
                .starts_with("I/O scheduler cfq; md linux-2.6.2x-md ("),
            "{s:?}"
        );
        assert!(
            s.fs.starts_with("xfs on the page cache of linux-2.6.2x-md ("),
            "{s:?}"
        );
        let e = config(&Config::new(Seed::E, "1ssd", "sata-ssd-1tb-2021".into()));
        assert!(e.drives.starts_with("one sata-ssd-1tb-2021 ("), "{e:?}");
        assert!(e.card.starts_with("none"), "{e:?}");
        assert!(e.fs.starts_with("none: block level"), "{e:?}");
        let bad = config(&Config::new(Seed::E, "x", "raid5:zz".into()));
        assert!(bad.drives.contains("not readable"), "{bad:?}");
    }
}
