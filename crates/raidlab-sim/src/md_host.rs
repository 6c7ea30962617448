//! A host CPU model of Linux md's RAID 4/5/6 of a given era: one raid5d
//! thread per array does every stripe's parity work, one step after another,
//! at the speeds the kernel itself measured at boot on that CPU.
//!
//! Decides: the presets of `presets/hosts.toml` (`host=NAME`), how long one
//! plan's compute step keeps that thread busy, and when the step can end given
//! what the thread is already doing ([`MdThread`]). It must never hold a value
//! without a source: a cost no source gives is 0 and its source line says so,
//! and nothing here is fitted to an article's figures. It must never read the
//! wall clock.
//!
//! What it leaves to the array: which steps are compute steps (raidlab's
//! engine plans them; reads of a complete array have none, as md 2.6.20+
//! reads a chunk around raid5d) and md's stripe cache (the simulated array
//! keeps raidlab's own stripe cache, and md's 256 kept rows through the
//! engine's `kept_rows`; stated in the preset's sources).

use crate::device::{Ns, Param};
use crate::host::HostCost;
use crate::sched::Scheduler;
use raidlab_raid::plan::{Compute, Slice};
use std::collections::BTreeMap;

/// The built-in host presets' file name, as errors quote it.
pub const HOSTS_FILE: &str = "presets/hosts.toml";
const HOSTS: &str = include_str!("../presets/hosts.toml");

/// md's stripe head covers one page of each member (STRIPE_SIZE = PAGE_SIZE).
const PAGE: u64 = 4096;

/// One host preset: md's raid5d on a CPU.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MdHost {
    /// The preset's name (`host=NAME`); filled in when loaded.
    #[serde(default)]
    pub name: String,
    pub description: String,
    /// RAID 4/5 parity (and RAID 6 P-only work) in MB/s of input data
    /// (10^6 bytes/s), as the kernel's boot-time xor benchmark prints it.
    pub xor_mb_per_s: f64,
    /// RAID 6 P+Q generation in MB/s of data, as lib/raid6's boot benchmark
    /// prints it.
    pub raid6_gen_mb_per_s: f64,
    /// raid5d's time per stripe head (a 4 KiB row across the members) a step
    /// computes, besides parity, in µs.
    pub stripe_head_us: f64,
    /// raid5d's time per 4 KiB member page a step reads or writes, in µs.
    pub page_us: f64,
    pub sources: Vec<String>,
}

/// The presets shipped with raidlab, by name.
pub fn presets() -> Result<BTreeMap<String, MdHost>, String> {
    let mut all: BTreeMap<String, MdHost> =
        toml::from_str(HOSTS).map_err(|e| format!("{HOSTS_FILE}: {e}"))?;
    for (name, h) in all.iter_mut() {
        h.name = name.clone();
        h.check()
            .map_err(|m| format!("{HOSTS_FILE}: [{name}]: {m}"))?;
    }
    Ok(all)
}

/// The preset `name`, or an error listing the known ones.
pub fn preset(name: &str) -> Result<MdHost, String> {
    let mut all = presets()?;
    let known = all.keys().cloned().collect::<Vec<_>>().join(", ");
    all.remove(name)
        .ok_or_else(|| format!("unknown host `{name}` (known: {known}; {HOSTS_FILE})"))
}

impl MdHost {
    pub fn check(&self) -> Result<(), String> {
        for (key, v) in [
            ("xor_mb_per_s", self.xor_mb_per_s),
            ("raid6_gen_mb_per_s", self.raid6_gen_mb_per_s),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("{key} must be a positive number of MB/s (got {v})"));
            }
        }
        for (key, v) in [
            ("stripe_head_us", self.stripe_head_us),
            ("page_us", self.page_us),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{key} must be 0 or more µs (got {v})"));
            }
        }
        Ok(())
    }

    /// raid5d's time for one compute step, in ns.
    pub fn compute_ns(&self, step: &[Compute], scratch: &[usize]) -> Ns {
        let len = |s: &Slice| s.len as u64;
        let pages = |bytes: u64| bytes.div_ceil(PAGE);
        let mut s = 0.0;
        for c in step {
            // (parity seconds, stripe heads, member pages)
            let (secs, rows, member_pages) = match c {
                Compute::Xor { srcs, .. } => {
                    let bytes: u64 = srcs.iter().map(len).sum();
                    let rows = pages(srcs.iter().map(len).max().unwrap_or(0));
                    (self.xor_s(bytes), rows, pages(bytes) + rows)
                }
                Compute::Pq { data, .. } => {
                    let bytes: u64 = data.iter().map(len).sum();
                    let rows = pages(data.iter().map(len).max().unwrap_or(0));
                    (self.gen_s(bytes), rows, pages(bytes) + 2 * rows)
                }
                Compute::Update { old, new, q, .. } => {
                    let bytes = len(old) + len(new);
                    let rows = pages(len(new));
                    let q_s = if q.is_some() { self.gen_s(bytes) } else { 0.0 };
                    let parities = 1 + u64::from(q.is_some());
                    (
                        self.xor_s(bytes) + q_s,
                        rows,
                        pages(bytes) + parities * rows,
                    )
                }
                // Degraded reads and rebuilds: their bytes as raidlab's host
                // counts them, at the xor speed; no per-page figure either way.
                other => {
                    let engine = HostCost::engine(self.xor_mb_per_s, 0.0, "md xor");
                    let ns = engine.compute_ns(std::slice::from_ref(other), scratch);
                    (ns as f64 / 1e9, 0, 0)
                }
            };
            s += secs
                + rows as f64 * self.stripe_head_us / 1e6
                + member_pages as f64 * self.page_us / 1e6;
        }
        (s * 1e9).round() as Ns
    }

    fn xor_s(&self, bytes: u64) -> f64 {
        bytes as f64 / (self.xor_mb_per_s * 1e6)
    }

    fn gen_s(&self, bytes: u64) -> f64 {
        bytes as f64 / (self.raid6_gen_mb_per_s * 1e6)
    }

    pub fn params(&self) -> Vec<Param> {
        let p = |name: &str, value: f64, unit: &str| Param {
            name: format!("md.{name}"),
            value,
            unit: unit.into(),
        };
        vec![
            p("xor_mb_per_s", self.xor_mb_per_s, "MB/s"),
            p("raid6_gen_mb_per_s", self.raid6_gen_mb_per_s, "MB/s"),
            p("stripe_head_us", self.stripe_head_us, "µs"),
            p("page_us", self.page_us, "µs"),
        ]
    }
}

/// raid5d: one thread, so compute steps of different requests run one after
/// another, not side by side.
#[derive(Debug, Clone, Copy, Default)]
pub struct MdThread {
    free_at: Ns,
}

impl MdThread {
    /// When a step of `cost` ns that is ready at `now` ends: after whatever the
    /// thread is already doing.
    pub fn run(&mut self, now: Ns, cost: Ns) -> Ns {
        let end = now.max(self.free_at) + cost;
        self.free_at = end;
        end
    }
}

/// The short form's host options, applied to `host` (the default host if none
/// yet): `scheduler=NAME`, `host=NAME` (a preset of `presets/hosts.toml`),
/// `fs=NAME` and `file-locks=NAME` ([`crate::fs`]), and
/// `host-stripe-head-us=N` / `host-page-us=N` (what-if values for the
/// costs no source gives; after `host=`). Ok(false): `k` is not one of them.
pub fn host_option(host: &mut Option<HostCost>, k: &str, v: &str) -> Result<bool, String> {
    let us = |v: &str| -> Result<f64, String> {
        v.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| format!("`{k}={v}` is not a number of µs (0 or more)"))
    };
    match k {
        "scheduler" => {
            host.get_or_insert_with(HostCost::default).scheduler =
                Scheduler::parse(v).map_err(|m| format!("`scheduler={v}`: {m}"))?;
        }
        "host" => host.get_or_insert_with(HostCost::default).md = Some(preset(v)?),
        "fs" => {
            crate::fs::layout::FsKind::parse(v)?;
            host.get_or_insert_with(HostCost::default).fs = Some(v.to_string());
        }
        "file-locks" => {
            crate::fs::locks::LockRules::parse(v)?;
            host.get_or_insert_with(HostCost::default).file_locks = Some(v.to_string());
        }
        "host-stripe-head-us" | "host-page-us" => {
            let Some(md) = host.as_mut().and_then(|h| h.md.as_mut()) else {
                return Err(format!(
                    "`{k}` changes a host model: give `host=NAME` before it"
                ));
            };
            let x = us(v)?;
            let (field, what) = if k == "host-page-us" {
                (&mut md.page_us, "page_us")
            } else {
                (&mut md.stripe_head_us, "stripe_head_us")
            };
            *field = x;
            md.sources
                .push(format!("{what}: {x} µs set by `{k}` (what-if, no source)"));
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// `[host] md = "NAME"` in a TOML configuration: the preset, by name.
pub mod by_name {
    use super::MdHost;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(md: &Option<MdHost>, s: S) -> Result<S::Ok, S::Error> {
        match md {
            Some(h) => s.serialize_some(&h.name),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<MdHost>, D::Error> {
        let name = Option::<String>::deserialize(d)?;
        name.map(|n| super::preset(&n).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(len: usize) -> Slice {
        Slice::user(0, len)
    }

    #[test]
    fn the_era_preset_loads_with_a_source_per_parameter() {
        let h = preset("linux-2.6.2x-md").unwrap();
        for key in [
            "xor_mb_per_s",
            "raid6_gen_mb_per_s",
            "stripe_head_us",
            "page_us",
        ] {
            assert!(
                h.sources.iter().any(|s| s.contains(key)),
                "no source line for {key}"
            );
        }
        let e = preset("linux-9").unwrap_err();
        assert!(e.contains("linux-2.6.2x-md"), "{e}");
    }

    #[test]
    fn raid6_costs_the_gen_speed_and_the_thread_serialises_steps() {
        let mut h = preset("linux-2.6.2x-md").unwrap();
        let pq = Compute::Pq {
            data: vec![slice(65536); 4],
            p: 0,
            q: 1,
        };
        let xor = Compute::Xor {
            srcs: vec![slice(65536); 4],
            dst: 0,
        };
        let (t_pq, t_xor) = (
            h.compute_ns(std::slice::from_ref(&pq), &[]),
            h.compute_ns(&[xor], &[]),
        );
        assert_eq!(
            t_pq,
            (262144.0 / (h.raid6_gen_mb_per_s * 1e6) * 1e9_f64).round() as Ns
        );
        assert!(t_pq > t_xor, "{t_pq} vs {t_xor}");
        // 16 stripe heads of 4 pages of data, a P and a Q page each.
        h.stripe_head_us = 1.0;
        h.page_us = 0.5;
        let with = h.compute_ns(&[pq], &[]);
        assert_eq!(with - t_pq, 16_000 + 96 * 500);
        let mut t = MdThread::default();
        assert_eq!(t.run(100, 10), 110);
        assert_eq!(t.run(105, 10), 120, "waits for the first step");
        assert_eq!(t.run(500, 10), 510);
    }

    #[test]
    fn host_options_parse_and_bad_ones_are_refused() {
        use crate::config::SimConfig;
        let c = SimConfig::short(
            "raid6:6xsamsung-hd753lj:chunk=64K:scheduler=cfq:host=linux-2.6.2x-md:host-stripe-head-us=20",
        )
        .unwrap();
        let h = c.host.unwrap();
        assert_eq!(h.scheduler, Scheduler::Cfq);
        let md = h.md.unwrap();
        assert_eq!((md.stripe_head_us, md.page_us), (20.0, 0.0));
        assert!(md.sources.iter().any(|s| s.contains("what-if")));
        for (bad, says) in [
            (
                "raid5:3xsamsung-hd753lj:host=linux-9",
                "unknown host `linux-9`",
            ),
            (
                "raid5:3xsamsung-hd753lj:host-page-us=3",
                "give `host=NAME` before it",
            ),
            (
                "raid5:3xsamsung-hd753lj:host=linux-2.6.2x-md:host-page-us=-1",
                "not a number of µs",
            ),
        ] {
            let e = SimConfig::short(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
        // A TOML configuration names the preset; an unknown one is refused.
        let ok: SimConfig =
            toml::from_str("device = \"samsung-hd753lj\"\n[host]\nmd = \"linux-2.6.2x-md\"\n")
                .unwrap();
        assert_eq!(ok.host.unwrap().md.unwrap().xor_mb_per_s, 7064.0);
        let bad = toml::from_str::<SimConfig>("device = \"x\"\n[host]\nmd = \"linux-9\"\n");
        assert!(bad.unwrap_err().to_string().contains("unknown host"));
    }
}
