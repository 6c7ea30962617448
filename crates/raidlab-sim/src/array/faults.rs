//! A simulated array's faults: the engine runs behind the
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
use crate::faults::{describe, Fault, Schedule};
use raidlab_core::Volume;
use std::sync::Arc;

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
pub(super) const KEPT_ERRORS: usize = 100;

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
    /// A plan has failed: from then on every engine call is looked at for a
    /// member taken out. Live, the engine hears of a failure only when the
    /// task is resumed after the failed operations come back, any number of
    /// other tasks' calls later than the fault executor saw it; and a
    /// failure it repairs takes no member out at all.
    watching: bool,
}

impl FaultSpec {
    /// Refuse what cannot be simulated, before anything is built: faults on
    /// roles that are not there, sectors beyond a member, a spare beside a
    /// rebuild from the start or beside a bitmap (one rebuild at a time; the
    /// new member's bitmap copy is not kept). `members` by role, `rebuild`
    /// the role rebuilt from the start.
    pub(super) fn check(
        &self,
        name: &str,
        members: &[Option<Box<dyn Device>>],
        rebuild: Option<usize>,
        bitmap: bool,
    ) -> Result<(), String> {
        // Roles with no device of their own: failed, or rebuilt from the start.
        let at_start: Vec<usize> = (0..members.len())
            .filter(|&r| members[r].is_none() || rebuild == Some(r))
            .collect();
        let here = |m: String| format!("{name}: {m}");
        self.schedule
            .check(members.len(), &at_start)
            .map_err(here)?;
        let spare_at = self.schedule.spare();
        if spare_at.is_some() != self.spare.is_some() {
            return Err(here(
                "internal: a spare's time and its device come together".into(),
            ));
        }
        if spare_at.is_some() && rebuild.is_some() {
            return Err(here(
                "`spare` beside `rebuild`: the engine rebuilds one member at a time".into(),
            ));
        }
        if spare_at.is_some() && bitmap {
            return Err(here(
                "`spare` with a bitmap is not simulated (the new member's bitmap copy is not kept)"
                    .into(),
            ));
        }
        self.schedule
            .check_sectors(|role| members[role].as_ref().map_or(0, |d| d.capacity()))
            .map_err(here)
    }
}

impl Faults {
    /// The bookkeeping of `spec`'s faults, met through `exec`.
    pub(super) fn new(exec: Arc<FaultExec>, spec: FaultSpec) -> Faults {
        Faults {
            exec,
            spare_at: spec.schedule.spare(),
            schedule: spec.schedule,
            spare: spec.spare,
            max_rate: spec.max_rate,
            taken_out: Vec::new(),
            host_errors: 0,
            first_host_error: None,
            phases: Phases::default(),
            rebuild: None,
            rebuild_error: None,
            watching: false,
        }
    }

    pub(super) fn exec(&self) -> &Arc<FaultExec> {
        &self.exec
    }

    pub(super) fn max_rate(&self) -> Option<u64> {
        self.max_rate
    }

    /// A host request arrived at `now`.
    pub(super) fn arrived(&mut self, now: Ns) {
        self.phases.arrived(now);
    }

    /// A host request completed at `now`.
    pub(super) fn completed(&mut self, now: Ns) {
        self.phases.completed(now);
    }

    /// A host request failed with `e`.
    pub(super) fn host_error(&mut self, e: &str) {
        self.host_errors += 1;
        self.first_host_error.get_or_insert_with(|| e.to_string());
    }

    /// After an engine call at `now`: the roles `array` took out since, if a
    /// plan failed.
    pub(super) fn notice(&mut self, now: Ns, array: &Array) {
        if self.exec.take_noticed() {
            self.watching = true;
        }
        if !self.watching {
            return;
        }
        for r in array.failed_members() {
            if !self.taken_out.iter().any(|&(t, _)| t == r) {
                self.taken_out.push((r, now));
            }
        }
    }

    /// When the spare is due, if it is yet to come.
    pub(super) fn spare_due(&self) -> Option<Ns> {
        self.spare_at
    }

    /// The spare is due at `now`: the role it goes to (the first the engine
    /// has out of service; else a member the schedule failed that no request
    /// has met yet, failed through the engine first) and its device. `None`
    /// when there is none (the reason kept for the report).
    pub(super) fn spare_for(&mut self, now: Ns, array: &Array) -> Option<(usize, Box<dyn Device>)> {
        self.spare_at = None;
        let device = self.spare.take()?;
        let live = array.live();
        let mut role = (0..live.len()).find(|&r| !live[r]);
        if role.is_none() {
            // Failed by the schedule, but no request has met it yet.
            let failed = self.schedule.faults.iter().find_map(|t| match t.fault {
                Fault::Fail { role } if t.at <= now => Some(role),
                _ => None,
            });
            if let Some(r) = failed {
                match array.fail_member(r) {
                    Ok(()) => role = Some(r),
                    Err(e) => {
                        self.rebuild_error = Some(format!("failing role {r} for the spare: {e}"))
                    }
                }
            }
        }
        let Some(role) = role else {
            self.rebuild_error
                .get_or_insert_with(|| "the spare found no failed role to rebuild".into());
            return None;
        };
        Some((role, device))
    }

    /// [`Faults::spare_for`], and the spare only if it can go in now: while
    /// the old device of its role still serves operations planned before its
    /// failure (`busy_until[role]`, [`IDLE`] when it has none), it waits until
    /// they are done.
    pub(super) fn spare_ready(
        &mut self,
        now: Ns,
        array: &Array,
        busy_until: &[Ns],
    ) -> Option<(usize, Box<dyn Device>)> {
        let (role, device) = self.spare_for(now, array)?;
        if busy_until[role] != IDLE {
            self.spare = Some(device);
            self.spare_at = Some(busy_until[role]);
            return None;
        }
        Some((role, device))
    }

    /// The engine's rebuild onto `target` began at `now`.
    pub(super) fn rebuild_started(&mut self, target: &Arc<dyn Volume>, role: usize, now: Ns) {
        self.exec.know(target, role, now);
        self.phases.start = Some(now);
        self.rebuild = Some((role, now));
    }

    /// The rebuild could not start or go on: the engine's reason.
    pub(super) fn rebuild_error(&mut self, e: String) {
        self.rebuild_error.get_or_insert(e);
    }

    /// The rebuild ended at `now`: the load's "after" stretch begins.
    pub(super) fn rebuild_done(&mut self, now: Ns) {
        self.phases.end = Some(now);
    }

    /// What the faults did; `finished` when the rebuild did.
    pub(super) fn report(&self, array: &Array, finished: Option<Ns>) -> FaultReport {
        let [before, during, after] = self.phases.iops();
        let rebuild = self.rebuild.map(|(role, started)| RebuildPhases {
            role,
            started,
            finished,
            iops_before: before,
            iops_during: during,
            iops_after: after,
            error: self.rebuild_error.clone(),
        });
        FaultReport {
            faults: self.schedule.faults.iter().map(describe).collect(),
            taken_out: self.taken_out.clone(),
            repaired: array.corrected_reads(),
            met: self.exec.met(),
            host_errors: self.host_errors,
            first_host_error: self.first_host_error.clone(),
            spare_error: self
                .rebuild
                .is_none()
                .then(|| self.rebuild_error.clone())
                .flatten(),
            rebuild,
        }
    }
}
