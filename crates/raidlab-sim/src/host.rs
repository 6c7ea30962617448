//! What the host's CPU costs a software RAID in virtual time: parity work and a
//! fixed cost per request.
//!
//! Decides: how long a plan's compute steps and a request's passage through the
//! block layer take. It must never measure anything at run time (the measured
//! parity speed is taken once, by the caller, and then is only a number), so runs
//! stay the same on every machine for the same parameters.

use crate::device::{Ns, Param};
use crate::md_host::MdHost;
use crate::sched::Scheduler;
use raidlab_raid::plan::{Compute, Slice};

/// The host's costs, each with its unit in its name.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostCost {
    /// Bytes of parity input one core processes per second, in decimal MB/s
    /// (XOR for RAID 4/5; RAID 6's P+Q is charged twice the bytes).
    #[serde(default = "default_parity")]
    pub parity_mb_per_s: f64,
    /// Time the block layer and raidlab's engine add to every request, in µs.
    #[serde(default = "default_overhead")]
    pub request_overhead_us: f64,
    /// The I/O scheduler in front of every device the host sees (each member
    /// of a software array, a single device, a card's logical drive); md
    /// itself has none. `none` by default; `cfq` for the articles' 2008 hosts.
    #[serde(default)]
    pub scheduler: Scheduler,
    /// A model of Linux md's raid5d of an era (`md = "NAME"`, a preset of
    /// `presets/hosts.toml`, [`crate::md_host`]): when set, compute steps cost
    /// its parity speeds and run one at a time on its single thread.
    #[serde(default, with = "crate::md_host::by_name")]
    pub md: Option<MdHost>,
    /// A file system and the era's page cache between the workload and the
    /// volume (`fs = "ext3"`, `ext3-writeback`, `xfs`, `xfs-noalign`;
    /// [`crate::fs`]); needs `md` for the kernel of that era.
    #[serde(default)]
    pub fs: Option<String>,
    /// The per-file lock a file system takes around read() and write()
    /// calls, between the workload's processes (`file_locks = "ext3"` or
    /// `"xfs"`; [`crate::fs::locks`]): alone, at block level, or in front of
    /// `fs`.
    #[serde(default)]
    pub file_locks: Option<String>,
    /// Where the figures come from.
    #[serde(default)]
    pub sources: Vec<String>,
}

fn default_parity() -> f64 {
    HostCost::default().parity_mb_per_s
}
fn default_overhead() -> f64 {
    HostCost::default().request_overhead_us
}

impl Default for HostCost {
    fn default() -> Self {
        HostCost {
            parity_mb_per_s: 4000.0,
            request_overhead_us: 5.0,
            scheduler: Scheduler::None,
            md: None,
            fs: None,
            file_locks: None,
            sources: vec![
                "parity_mb_per_s: assumed; the order of what Linux's boot-time xor benchmark reports for a 2008-era desktop core (kernel log line \"xor: using function: ... (N MB/sec)\"); set [host] parity_mb_per_s to your machine's, e.g. from `raidlab bench parity`".into(),
                "request_overhead_us: assumed; a few µs per request for the block layer and the engine's planning, the order raidlab's own planner costs in callgrind (docs/benchmarks.md)".into(),
            ],
        }
    }
}

impl HostCost {
    /// A controller's or a host's cost model with no per-request cost and
    /// `parity_mb_per_s` of parity engine (a RAID card's XOR engine).
    pub fn engine(parity_mb_per_s: f64, request_overhead_us: f64, source: &str) -> HostCost {
        HostCost {
            parity_mb_per_s,
            request_overhead_us,
            scheduler: Scheduler::None,
            md: None,
            fs: None,
            file_locks: None,
            sources: vec![source.to_string()],
        }
    }

    pub fn check(&self) -> Result<(), String> {
        if !(self.parity_mb_per_s.is_finite() && self.parity_mb_per_s > 0.0) {
            return Err(format!(
                "parity_mb_per_s must be a positive number of MB/s (got {})",
                self.parity_mb_per_s
            ));
        }
        if !(self.request_overhead_us.is_finite() && self.request_overhead_us >= 0.0) {
            return Err(format!(
                "request_overhead_us cannot be negative (got {})",
                self.request_overhead_us
            ));
        }
        self.md.as_ref().map_or(Ok(()), MdHost::check)
    }

    pub fn request_ns(&self) -> Ns {
        (self.request_overhead_us * 1e3).round() as Ns
    }

    /// Virtual time of one compute step: its input bytes at the parity rate.
    pub fn compute_ns(&self, step: &[Compute], scratch: &[usize]) -> Ns {
        if let Some(md) = &self.md {
            return md.compute_ns(step, scratch);
        }
        let len = |s: &Slice| s.len as u64;
        let mut bytes = 0u64;
        for c in step {
            bytes += match c {
                Compute::Xor { srcs, .. } => srcs.iter().map(len).sum(),
                Compute::Pq { data, .. } => 2 * data.iter().map(len).sum::<u64>(),
                Compute::Update { old, new, q, .. } => {
                    (len(old) + len(new)) * if q.is_some() { 2 } else { 1 }
                }
                // Solving for each block written (a lost chunk wanted, a
                // fresh parity) reads every block given once. A lost
                // member's row is one block written from every other
                // member's (RAID 6 recovery of two, one of them only a
                // means to the other, counted as one).
                Compute::Recover {
                    data,
                    lost,
                    p,
                    q,
                    fresh,
                } => {
                    let given = data
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| !lost.contains(i))
                        .filter_map(|(_, s)| s.as_ref());
                    let block = data
                        .iter()
                        .flatten()
                        .chain(p)
                        .chain(q)
                        .next()
                        .map_or(0, len);
                    let inputs =
                        given.count() + usize::from(p.is_some()) + usize::from(q.is_some());
                    let outputs = lost
                        .iter()
                        .filter(|&&l| data.get(l).is_some_and(Option::is_some))
                        .count()
                        + usize::from(fresh.is_some());
                    inputs as u64 * block * outputs as u64
                }
                // Copies and zeroing run at memory speed, an order above
                // parity: not charged.
                Compute::Copy { .. } | Compute::Zero { .. } => 0,
            };
        }
        (bytes as f64 / (self.parity_mb_per_s * 1e6) * 1e9).round() as Ns
    }

    pub fn params(&self) -> Vec<Param> {
        let md = self.md.iter().flat_map(MdHost::params);
        let mut v = vec![
            Param {
                name: "parity_mb_per_s".into(),
                value: self.parity_mb_per_s,
                unit: "MB/s".into(),
            },
            Param {
                name: "request_overhead_us".into(),
                value: self.request_overhead_us,
                unit: "µs".into(),
            },
        ];
        v.extend(md);
        v
    }

    /// Where the figures come from, the md model's included.
    pub fn all_sources(&self) -> Vec<String> {
        let mut v = self.sources.clone();
        if let Some(md) = &self.md {
            v.extend(md.sources.iter().map(|s| format!("md {}: {s}", md.name)));
        }
        v
    }
}
