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
    /// The largest request, in bytes, the block layer's plug merges a
    /// step's contiguous member requests into ([`HostCost::plug_merge`]);
    /// 0: none merged.
    #[serde(default = "default_plug_merge")]
    pub plug_merge_bytes: u64,
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
fn default_plug_merge() -> u64 {
    HostCost::default().plug_merge_bytes
}

/// One member request of a step: (kind, member role, device offset, length).
pub type MemberRequest = (raidlab_core::IoKind, usize, u64, u64);

impl Default for HostCost {
    fn default() -> Self {
        HostCost {
            parity_mb_per_s: 4000.0,
            request_overhead_us: 5.0,
            plug_merge_bytes: 1280 << 10,
            scheduler: Scheduler::None,
            md: None,
            fs: None,
            file_locks: None,
            sources: vec![
                "parity_mb_per_s: assumed; the order of what Linux's boot-time xor benchmark reports for a 2008-era desktop core (kernel log line \"xor: using function: ... (N MB/sec)\"); set [host] parity_mb_per_s to your machine's, e.g. from `raidlab bench parity`".into(),
                "request_overhead_us: assumed; a few µs per request for the block layer and the engine's planning, the order raidlab's own planner costs in callgrind (docs/benchmarks.md)".into(),
                "plug_merge_bytes: Linux 6.x's plug merge (block/blk-core.c blk_attempt_plug_merge: a bio joins the plug's latest request to the same queue when contiguous, up to the queue's max_sectors_kb); raidlab sends a step's requests to block-device members in one io_uring submission, which plugs; 1280 KiB is max_sectors_kb of the loop devices sim-vs-real.sh measures on (kernel 6.18) and the kernel's default cap (BLK_DEF_MAX_SECTORS_CAP, 2560 sectors); measured with nbdkit's log filter: a RAID 0 of 4 members with 64 KiB chunks, 1 MiB writes, reaches each member as 256 KiB writes (docs/simulation.md, 'Checked against the real engine')".into(),
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
            // A card's firmware queues its own disks' requests.
            plug_merge_bytes: 0,
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

    /// The member requests of one step as the members receive them. raidlab
    /// sends them in one submission, in its order
    /// ([`raidlab_raid::exec::in_submission_order`]), through the block
    /// layer's plug, which joins a request to the last one queued when that
    /// is the same member's, or else tries only the oldest one queued for
    /// the member (Linux 6.x `blk_attempt_plug_merge`); it joins when the
    /// kind is the same (a read or a write), the request starts where that
    /// one ends, and the two stay within `plug_merge_bytes` (only back
    /// merges: a plan goes up a member in order). A merged request keeps the
    /// place of its first part. Not with `md` set: md's own bios of an era
    /// are not raidlab's submission, and their merging is not modelled.
    ///
    /// Member `m`'s own queue takes requests of at most `max_request(m)`
    /// bytes (its max_sectors_kb, 0: not known): the plug merges none past
    /// the smaller of that and `plug_merge_bytes`.
    pub fn plug_merge(&self, ops: &mut Vec<MemberRequest>, max_request: impl Fn(usize) -> u64) {
        use raidlab_core::IoKind;
        let limit = if self.md.is_some() {
            0
        } else {
            self.plug_merge_bytes
        };
        if limit == 0 || ops.len() < 2 {
            return;
        }
        raidlab_raid::exec::in_submission_order(ops, |r| (r.1, r.2));
        // In place: `ops[..kept]` are the requests the members receive.
        let mut kept = 0;
        for i in 0..ops.len() {
            let (kind, member, offset, len) = ops[i];
            let tried = match ops[..kept].last() {
                Some(last) if last.1 == member => Some(kept - 1),
                _ => ops[..kept].iter().position(|r| r.1 == member),
            };
            match tried.map(|t| &mut ops[t]) {
                Some(r)
                    if r.0 == kind
                        && matches!(kind, IoKind::Read | IoKind::Write)
                        && r.2 + r.3 == offset
                        && r.3 + len <= limit
                        && match max_request(member) {
                            0 => true,
                            m => r.3 + len <= m,
                        } =>
                {
                    r.3 += len;
                }
                _ => {
                    ops[kept] = ops[i];
                    kept += 1;
                }
            }
        }
        ops.truncate(kept);
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
                Compute::Copy { .. } | Compute::Zero { .. } | Compute::Kept { .. } => 0,
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
            Param {
                name: "plug_merge_bytes".into(),
                value: self.plug_merge_bytes as f64,
                unit: "bytes".into(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use raidlab_core::IoKind::{Flush, Read, Write};

    const K64: u64 = 64 << 10;

    #[test]
    fn a_steps_contiguous_requests_to_a_member_merge_in_the_plug() {
        // A RAID 0 of four members, 64 KiB chunks, a 1 MiB write: the plan
        // goes across the members four times.
        let mut ops: Vec<MemberRequest> = (0..16)
            .map(|i| (Write, i % 4, (i / 4) as u64 * K64, K64))
            .collect();
        HostCost::default().plug_merge(&mut ops, |_| 0);
        assert_eq!(
            ops,
            (0..4).map(|m| (Write, m, 0, 4 * K64)).collect::<Vec<_>>()
        );
    }

    /// A RAID 5 of four, 64 KiB chunks, left-symmetric, a 1 MiB read at 0:
    /// the plan's row order puts parity gaps in each member's run. In
    /// raidlab's submission order every contiguous run is one request (8);
    /// in the plan's order the plug, trying only the member's oldest
    /// request, would have left 11, as nbdkit's log showed before the
    /// order was set.
    #[test]
    fn in_submission_order_every_contiguous_run_is_one_request() {
        let plan: [(usize, u64); 16] = [
            (0, 0),
            (1, 0),
            (2, 0),
            (3, 1),
            (0, 1),
            (1, 1),
            (2, 2),
            (3, 2),
            (0, 2),
            (1, 3),
            (2, 3),
            (3, 3),
            (0, 4),
            (1, 4),
            (2, 4),
            (3, 5),
        ];
        let mut ops: Vec<MemberRequest> =
            plan.iter().map(|&(m, c)| (Read, m, c * K64, K64)).collect();
        HostCost::default().plug_merge(&mut ops, |_| 0);
        assert_eq!(
            ops,
            vec![
                (Read, 0, 0, 3 * K64),
                (Read, 0, 4 * K64, K64),
                (Read, 1, 0, 2 * K64),
                (Read, 1, 3 * K64, 2 * K64),
                (Read, 2, 0, K64),
                (Read, 2, 2 * K64, 3 * K64),
                (Read, 3, K64, 3 * K64),
                (Read, 3, 5 * K64, K64),
            ]
        );
    }

    #[test]
    fn the_plug_stops_at_the_largest_request_a_gap_or_another_kind() {
        let host = HostCost::default();
        let mut ops: Vec<MemberRequest> = (0..32).map(|i| (Read, 0, i * K64, K64)).collect();
        host.plug_merge(&mut ops, |_| 0);
        assert_eq!(
            ops,
            vec![(Read, 0, 0, 20 * K64), (Read, 0, 20 * K64, 12 * K64)]
        );
        let mut ops = vec![
            (Read, 0, 0, K64),
            (Write, 0, K64, K64),
            (Write, 0, 3 * K64, K64),
            (Flush, 1, 0, 0),
            (Flush, 1, 0, 0),
        ];
        let before = ops.clone();
        host.plug_merge(&mut ops, |_| 0);
        assert_eq!(ops, before);
        // In submission order a request meets the member's latest one.
        let mut ops = vec![
            (Write, 0, 0, K64),
            (Write, 0, 8 * K64, K64),
            (Write, 0, K64, K64),
        ];
        host.plug_merge(&mut ops, |_| 0);
        assert_eq!(ops, vec![(Write, 0, 0, 2 * K64), (Write, 0, 8 * K64, K64)]);
    }

    #[test]
    fn the_plug_stops_at_a_members_own_largest_request() {
        // Member 0's queue takes 512 KiB (sim-vs-real.sh's loop devices),
        // member 1's says nothing: the host's 1280 KiB.
        let host = HostCost::default();
        let mut ops: Vec<MemberRequest> = (0..40)
            .map(|i| (Write, (i / 20) as usize, (i % 20) * K64, K64))
            .collect();
        host.plug_merge(&mut ops, |m| if m == 0 { 8 * K64 } else { 0 });
        assert_eq!(
            ops,
            vec![
                (Write, 0, 0, 8 * K64),
                (Write, 0, 8 * K64, 8 * K64),
                (Write, 0, 16 * K64, 4 * K64),
                (Write, 1, 0, 20 * K64),
            ]
        );
    }

    #[test]
    fn nothing_merges_without_the_plug_or_under_md_of_an_era() {
        let ops: Vec<MemberRequest> = (0..8).map(|i| (Write, 0, i * K64, K64)).collect();
        let none = HostCost {
            plug_merge_bytes: 0,
            ..HostCost::default()
        };
        let mut got = ops.clone();
        none.plug_merge(&mut got, |_| 0);
        assert_eq!(got, ops);
        let md = HostCost {
            md: Some(crate::md_host::preset("linux-2.6.2x-md").unwrap()),
            ..HostCost::default()
        };
        let mut got = ops.clone();
        md.plug_merge(&mut got, |_| 0);
        assert_eq!(got, ops);
        let card = HostCost::engine(1000.0, 0.0, "a card");
        let mut got = ops.clone();
        card.plug_merge(&mut got, |_| 0);
        assert_eq!(got, ops);
    }
}
