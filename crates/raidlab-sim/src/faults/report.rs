//! What a run with faults amounts to: per fault, when it happened and what
//! the engine did (members taken out and when, read errors repaired, host
//! requests failed), and a spare's rebuild with the workload's IOPS before,
//! during and after it.
//!
//! Decides how the phases are cut (at the rebuild's start and end, by host
//! completion time) and counted; it must never change what is counted (the
//! array reports completions as they happen).

use super::exec::Met;
use crate::device::{Ns, SEC};

/// A spare's rebuild, and the host load's completions around it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RebuildPhases {
    pub role: usize,
    /// Virtual time the engine's rebuild began (the spare's time, or later if
    /// the failed member was still busy then).
    pub started: Ns,
    /// Virtual time its last step completed, if it did within the run.
    pub finished: Option<Ns>,
    /// Host requests completed per second of virtual time before the rebuild
    /// began, while it ran, and after it ended (`None`: no such stretch).
    pub iops_before: Option<f64>,
    pub iops_during: Option<f64>,
    pub iops_after: Option<f64>,
    /// Why the rebuild did not start or stopped, as the engine said.
    pub error: Option<String>,
}

/// What the faults of a run did.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FaultReport {
    /// The schedule, as written (`fail=2@10s`, ...).
    pub faults: Vec<String>,
    /// (role, virtual time) for each role the engine took out of service:
    /// the first request after the fault that needed the member.
    pub taken_out: Vec<(usize, Ns)>,
    /// Read errors the engine repaired by rewriting from redundancy, per role
    /// (`Array::corrected_reads`).
    pub repaired: Vec<u32>,
    /// What the faults did to member operations.
    pub met: Met,
    /// Host requests the engine failed (the array could not serve them), and
    /// the first one's error.
    pub host_errors: u64,
    pub first_host_error: Option<String>,
    pub rebuild: Option<RebuildPhases>,
    /// Why a scheduled spare's rebuild never began, as the engine said.
    pub spare_error: Option<String>,
}

impl FaultReport {
    /// The report as lines of text, times in seconds.
    pub fn lines(&self) -> Vec<String> {
        let s = |t: Ns| format!("{:.3} s", t as f64 / SEC as f64);
        let mut out = vec![format!("faults: {}", self.faults.join(", "))];
        for &(role, at) in &self.taken_out {
            out.push(format!("engine took role {role} out at {}", s(at)));
        }
        let repaired: u32 = self.repaired.iter().sum();
        out.push(format!(
            "read errors repaired by rewriting: {repaired} {:?}; member ops on failed members: {}; latent-sector read errors: {}; bytes remapped by writes: {}",
            self.repaired, self.met.dead_ops, self.met.lse_reads, self.met.lse_remapped_bytes
        ));
        out.push(format!(
            "host requests failed: {}{}",
            self.host_errors,
            self.first_host_error
                .as_ref()
                .map(|e| format!(" (first: {e})"))
                .unwrap_or_default()
        ));
        if let Some(e) = &self.spare_error {
            out.push(format!("spare: no rebuild began: {e}"));
        }
        if let Some(r) = &self.rebuild {
            let iops = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
            out.push(format!(
                "rebuild of role {} from {} to {}{}: IOPS before {}, during {}, after {}{}",
                r.role,
                s(r.started),
                r.finished.map_or("(not finished)".into(), s),
                r.finished
                    .map(|f| format!(" ({})", s(f - r.started)))
                    .unwrap_or_default(),
                iops(r.iops_before),
                iops(r.iops_during),
                iops(r.iops_after),
                r.error
                    .as_ref()
                    .map(|e| format!("; stopped: {e}"))
                    .unwrap_or_default()
            ));
        }
        out
    }
}

/// Host completions counted in three stretches: before a rebuild, during
/// it, after it.
#[derive(Debug, Clone, Default)]
pub struct Phases {
    /// The first host request's arrival.
    pub first: Option<Ns>,
    pub last: Ns,
    pub start: Option<Ns>,
    pub end: Option<Ns>,
    pub counts: [u64; 3],
}

impl Phases {
    pub fn arrived(&mut self, at: Ns) {
        self.first.get_or_insert(at);
    }

    pub fn completed(&mut self, at: Ns) {
        let phase = match (self.start, self.end) {
            (Some(s), _) if at < s => 0,
            (None, _) => 0,
            (Some(_), Some(e)) if at >= e => 2,
            _ => 1,
        };
        self.counts[phase] += 1;
        self.last = self.last.max(at);
    }

    /// (before, during, after) in requests per virtual second.
    pub fn iops(&self) -> [Option<f64>; 3] {
        let rate = |n: u64, from: Ns, to: Ns| {
            (to > from && n > 0).then(|| n as f64 / ((to - from) as f64 / SEC as f64))
        };
        let first = self.first.unwrap_or(0);
        let start = self.start.unwrap_or(self.last);
        let end = self.end.unwrap_or(self.last);
        [
            rate(self.counts[0], first, start.min(self.last.max(first))),
            rate(self.counts[1], start, end),
            rate(self.counts[2], end, self.last),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_are_cut_at_the_rebuild() {
        let mut p = Phases::default();
        p.arrived(0);
        for t in 1..=10 {
            p.completed(t * SEC / 10);
        }
        p.start = Some(SEC);
        for t in 11..=30 {
            p.completed(t * SEC / 10);
        }
        p.end = Some(3 * SEC);
        for t in 31..=40 {
            p.completed(t * SEC / 10);
        }
        assert_eq!(p.counts, [10, 20, 10]);
        assert_eq!(p.iops(), [Some(10.0), Some(10.0), Some(10.0)]);
    }
}
