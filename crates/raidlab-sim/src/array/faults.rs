//! A simulated array's faults in its event loop: the engine runs behind the
//! fault executor ([`crate::faults::exec`]), a spare arrives at its virtual
//! time and the engine's live rebuild starts into the failed role, and what
//! the engine did is gathered for [`FaultReport`].
//!
//! Decides when the spare is added (its time, or once the failed member's
//! last in-flight operation completed) and which role it goes to (the first
//! the engine has out of service; a member the schedule failed but no request
//! has touched yet is failed through the engine's `fail_member` first, as an
//! administrator does with `mdadm --fail` before adding a spare). It must
//! never take a member out or plan I/O itself: the engine does.

use super::*;
use crate::faults::exec::FaultExec;
use crate::faults::report::{FaultReport, Phases, RebuildPhases};
use crate::faults::{describe, format_time, Fault, Schedule};

/// Faults for a simulated array, as a configuration asks for them.
#[derive(Debug)]
pub struct FaultSpec {
    pub schedule: Schedule,
    /// The spare, a fresh device of the members' preset, when the schedule
    /// has `spare=`.
    pub spare: Option<Box<dyn Device>>,
    /// The spare's rebuild's limit, member bytes per second.
    pub max_rate: Option<u64>,
}

/// Host requests' errors kept word for word, at most (the rest are counted).
const KEPT_ERRORS: usize = 100;

#[derive(Debug)]
pub(super) struct Faults {
    exec: Arc<FaultExec>,
    schedule: Schedule,
    spare_at: Option<Ns>,
    spare: Option<Box<dyn Device>>,
    max_rate: Option<u64>,
    taken_out: Vec<(usize, Ns)>,
    host_errors: u64,
    first_host_error: Option<String>,
    pub(super) phases: Phases,
    rebuild: Option<(usize, Ns)>,
    rebuild_error: Option<String>,
}

impl SimArray {
    /// Run the engine behind `spec`'s faults from virtual time 0: members fail
    /// and read badly at their times, and a spare arrives. Refused with a
    /// `rebuild` from the start or a bitmap beside a spare (one rebuild at a
    /// time; the new member's bitmap copy is not kept).
    pub fn with_faults(mut self, spec: FaultSpec) -> Result<SimArray, String> {
        if spec.schedule.is_empty() {
            return Ok(self);
        }
        // Roles with no device of their own: failed, or rebuilt from the start.
        let at_start: Vec<usize> = (0..self.members.len())
            .filter(|&r| {
                self.members[r].is_none() || self.rebuild.as_ref().is_some_and(|b| b.role == r)
            })
            .collect();
        let here = |m: String| format!("{}: {m}", self.name);
        spec.schedule
            .check(self.members.len(), &at_start)
            .map_err(here)?;
        let spare_at = spec.schedule.spare();
        if spare_at.is_some() != spec.spare.is_some() {
            return Err(here(
                "internal: a spare's time and its device come together".into(),
            ));
        }
        if spare_at.is_some() && self.rebuild.is_some() {
            return Err(here(
                "`spare` beside `rebuild`: the engine rebuilds one member at a time".into(),
            ));
        }
        if spare_at.is_some() && self.bitmap.is_some() {
            return Err(here(
                "`spare` with a bitmap is not simulated (the new member's bitmap copy is not kept)"
                    .into(),
            ));
        }
        spec.schedule
            .check_sectors(|role| self.members[role].as_ref().map_or(0, |d| d.capacity()))
            .map_err(here)?;
        let exec = Arc::new(FaultExec::new(
            self.recording.clone(),
            self.clock.clone(),
            &spec.schedule,
        ));
        for role in 0..self.members.len() {
            if let Some(v) = self.array.member(role) {
                exec.know(&v, role, 0);
            }
        }
        let array = Arc::try_unwrap(self.array)
            .map_err(|_| "internal: the array is shared before it is built".to_string())?;
        self.array = Arc::new(array.with_executor(exec.clone()));
        self.faults = Some(Box::new(Faults {
            exec,
            schedule: spec.schedule,
            spare_at,
            spare: spec.spare,
            max_rate: spec.max_rate,
            taken_out: Vec::new(),
            host_errors: 0,
            first_host_error: None,
            phases: Phases::default(),
            rebuild: None,
            rebuild_error: None,
        }));
        Ok(self)
    }

    /// A host request's engine call ended at `now` (`error` if it failed).
    pub(super) fn faults_after_request(&mut self, now: Ns, host: bool, error: Option<&String>) {
        let Some(f) = self.faults.as_mut() else {
            return;
        };
        if host {
            f.phases.arrived(now);
            if let Some(e) = error {
                f.host_errors += 1;
                f.first_host_error.get_or_insert_with(|| e.clone());
            }
        }
        self.faults_notice(now);
    }

    /// After an engine call at `now`: the roles it took out since, if a plan
    /// failed.
    pub(super) fn faults_notice(&mut self, now: Ns) {
        let Some(f) = self.faults.as_mut() else {
            return;
        };
        if !f.exec.take_noticed() {
            return;
        }
        for r in self.array.failed_members() {
            if !f.taken_out.iter().any(|&(t, _)| t == r) {
                f.taken_out.push((r, now));
            }
        }
    }

    /// Whether a host error should be kept word for word (the first
    /// [`KEPT_ERRORS`] are; a run on a broken array fails every request).
    pub(super) fn keep_error(&self) -> bool {
        self.faults.is_none() || self.errors.len() < KEPT_ERRORS
    }

    /// When the spare is due, if it is yet to come.
    pub(super) fn spare_due(&self) -> Option<Ns> {
        self.faults.as_ref().and_then(|f| f.spare_at)
    }

    /// A rebuild step failed to start: the engine's reason, for the report.
    pub(super) fn faults_rebuild_error(&mut self, e: &str) {
        if let Some(f) = self.faults.as_mut() {
            f.rebuild_error.get_or_insert_with(|| e.to_string());
        }
    }

    /// The spare arrives at `now`: the engine's live rebuild begins into the
    /// failed role (once its old device has nothing in flight).
    pub(super) fn add_spare(&mut self, now: Ns) {
        let Some(f) = self.faults.as_mut() else {
            return;
        };
        f.spare_at = None;
        let Some(device) = f.spare.take() else {
            return;
        };
        let live = self.array.live();
        let mut role = (0..live.len()).find(|&r| !live[r]);
        if role.is_none() {
            // Failed by the schedule, but no request has met it yet.
            let failed = f.schedule.faults.iter().find_map(|t| match t.fault {
                Fault::Fail { role } if t.at <= now => Some(role),
                _ => None,
            });
            if let Some(r) = failed {
                match self.array.fail_member(r) {
                    Ok(()) => role = Some(r),
                    Err(e) => {
                        f.rebuild_error = Some(format!("failing role {r} for the spare: {e}"))
                    }
                }
            }
        }
        let Some(role) = role else {
            f.rebuild_error
                .get_or_insert_with(|| "the spare found no failed role to rebuild".into());
            return;
        };
        if self.member_next[role] != IDLE {
            // The old device still serves operations planned before its
            // failure: the spare goes in once it is done.
            f.spare = Some(device);
            f.spare_at = Some(self.member_next[role]);
            return;
        }
        let g = *self.array.geometry();
        let target: Arc<dyn Volume> = Arc::new(SizeOnly::new(
            format!("{} spare for role {role}", self.name),
            g.member_bytes,
        ));
        self.clock.set(now);
        match self.array.begin_recovery(role, target.clone(), 0, false) {
            Ok(rec) => {
                f.exec.know(&target, role, now);
                f.phases.start = Some(now);
                f.rebuild = Some((role, now));
                self.members[role] = Some(device);
                self.member_next[role] = IDLE;
                let geo = *self.array.geometry();
                self.rebuild = Some(Rebuild::new(rec, role, &geo, f.max_rate, now));
            }
            Err(e) => {
                f.rebuild_error = Some(format!("adding the spare at {}: {e}", format_time(now)))
            }
        }
    }

    /// The rebuild ended at `now`: the load's "after" stretch begins.
    pub(super) fn faults_rebuild_done(&mut self, now: Ns) {
        if let Some(f) = self.faults.as_mut() {
            f.phases.end = Some(now);
        }
    }

    /// What the faults did, when the array has any.
    pub fn fault_report(&self) -> Option<FaultReport> {
        let f = self.faults.as_ref()?;
        let [before, during, after] = f.phases.iops();
        let rebuild = f.rebuild.map(|(role, started)| RebuildPhases {
            role,
            started,
            finished: self.rebuild.as_ref().and_then(|r| r.finished),
            iops_before: before,
            iops_during: during,
            iops_after: after,
            error: f.rebuild_error.clone(),
        });
        Some(FaultReport {
            faults: f.schedule.faults.iter().map(describe).collect(),
            taken_out: f.taken_out.clone(),
            repaired: self.array.corrected_reads(),
            met: f.exec.met(),
            host_errors: f.host_errors,
            first_host_error: f.first_host_error.clone(),
            spare_error: f
                .rebuild
                .is_none()
                .then(|| f.rebuild_error.clone())
                .flatten(),
            rebuild,
        })
    }
}
