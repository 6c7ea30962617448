//! What a served array does between requests, every [`SAFE_MODE_POLL`]:
//! members the running array took out recorded as faulty (a hot spare
//! stepping in), safe mode's clean mark after a quiet spell, the passes of
//! md's bitmap daemon that are due, and bad blocks written to the members'
//! logs. The serving process runs these polls as a periodic long run on the
//! one long-run driver ([`drive_polls`]), as the stripe cache's ticks and
//! the bitmap daemon are run.
//!
//! It decides when those records are written and what is said of them; it
//! must never fail a member the running array still uses, nor plan I/O.

use super::*;
use crate::long_run::{EachStep, LongRun, Stepped};
use raidlab_core::Clock;

/// The serving process's daemon: every [`SAFE_MODE_POLL`] on `clock`, each
/// of `arrays`' polls, as a periodic run on the long-run driver (a thread's
/// sleeps in real time; a task's, in virtual time). `said(i, text)` gets what
/// array `i`'s poll said. Runs until `quit` says so, which ends a wait
/// within the driver's slice.
pub fn drive_polls(
    arrays: &[Arc<LiveArray>],
    clock: &dyn Clock,
    quit: &dyn Fn() -> bool,
    said: &mut dyn FnMut(usize, String),
) -> Result<()> {
    let mut run = LongRun::every(SAFE_MODE_POLL, clock.now());
    let mut polls = EachStep(|range: std::ops::Range<u64>| {
        for (i, a) in arrays.iter().enumerate() {
            for s in a.poll() {
                said(i, s);
            }
        }
        Ok(Stepped {
            end: range.end,
            work: 0,
        })
    });
    run.drive(clock, quit, &mut polls).map(|_| ())
}

impl LiveArray {
    /// Record members the running array took out (write errors, too many read
    /// errors) as faulty, and let a hot spare take over; mark the array clean
    /// after a quiet spell (safe mode); run the passes of md's bitmap daemon
    /// that its long run says are due. Returns what changed, for the log. Call it every
    /// [`SAFE_MODE_POLL`] ([`drive_polls`] does).
    pub fn poll(self: &Arc<Self>) -> Vec<String> {
        let mut asm = lock(&self.asm);
        let mut said = std::mem::take(&mut *lock(&self.said));
        said.extend(self.record_failures(&mut asm));
        said.extend(self.write_bad_blocks(&mut asm));
        if let Err(e) = self.start_pending(&mut asm) {
            said.push(format!("cannot start the rebuild: {e}"));
        }
        said.extend(self.settle(&mut asm));
        said.extend(self.bitmap_daemon());
        said
    }

    /// The passes of md's bitmap daemon over the running array that are
    /// due, by its schedule (`Array::bitmap_daemon_schedule`: every
    /// `daemon_sleep`, the first one period after the first poll). A pass
    /// that cannot write the bitmap is said; the bits stay set, and the next
    /// pass is a period later all the same.
    pub(super) fn bitmap_daemon(&self) -> Option<String> {
        use crate::long_run::{EachStep, Stepped};
        if self.resync_owed().is_some() {
            // The new space's bits say what the resync still owes (md's
            // NEEDED bits): no pass clears them before it is done.
            return None;
        }
        let clock = lock(&self.clock).clone();
        let mut daemon = lock(&self.bitmap_daemon);
        if daemon.is_none() {
            *daemon = Some(self.array().bitmap_daemon_schedule(clock.now())?);
        }
        let run = daemon.as_mut()?;
        let mut said = None;
        let mut pass = EachStep(|r: std::ops::Range<u64>| {
            if let Err(e) = self.array().bitmap_daemon_pass() {
                said = Some(format!(
                    "the bitmap daemon could not clear idle bits (they stay set): {e}"
                ));
            }
            Ok(Stepped {
                end: r.end,
                work: 0,
            })
        });
        // Nothing here fails: a pass's error is said, not returned.
        let _ = run.run_due(&*clock, &|| false, &mut pass);
        said
    }

    /// Before a flush or a FUA write is acknowledged: record the members the
    /// running array has taken out since the last time, so that a crash
    /// after the acknowledgement cannot assemble a dead member, with data
    /// older than the acknowledged write, as active. What it did is said at
    /// the next poll. Takes the assembly lock only when the array's set of
    /// taken-out members changed.
    pub(super) fn record_failures_now(&self) {
        let taken_out = self.taken_out();
        if *lock(&self.recorded_failed) == taken_out {
            return;
        }
        let mut asm = lock(&self.asm);
        let said = self.record_failures(&mut asm);
        lock(&self.said).extend(said);
    }

    /// The members the running array took out, recorded faulty in the
    /// superblocks (a hot spare takes over).
    pub(super) fn record_failures(&self, asm: &mut Assembly) -> Vec<String> {
        let taken_out = self.taken_out();
        *lock(&self.recorded_failed) = taken_out.clone();
        let mut outcomes = Vec::new();
        for array in self.in_service() {
            match asm.record_taken_out(&array) {
                Ok(o) => outcomes.extend(o),
                Err(e) => {
                    return vec![format!(
                        "the members of role(s) {taken_out:?} failed, and recording them faulty failed: {e}"
                    )]
                }
            }
        }
        let mut said = Vec::new();
        for crate::manage::TakenOut {
            index: i,
            role,
            outcome,
        } in outcomes
        {
            let path = asm.members[i].device.path.clone();
            let spare = match outcome {
                Ok(spare) => spare,
                Err(e) => {
                    said.push(format!("{path} (role {role}) failed: {e}"));
                    continue;
                }
            };
            said.push(format!("{path} (role {role}) failed and is marked faulty"));
            if let Some(r) = self.carried_on(asm, Some(role)) {
                said.push(r);
            }
            if let Some(s) = spare {
                said.push(format!(
                    "hot spare {} takes role {role}",
                    asm.members[s].device.path
                ));
            }
        }
        said
    }

    /// Write the running array's bad-block changes (ranges it rewrote, ranges
    /// it could not) to the members' logs, then give it the lists as the logs
    /// now hold them. A range a member's log cannot take (full, or no log)
    /// fails the member, as md does. Returns what changed, for the log.
    pub(super) fn write_bad_blocks(self: &Arc<Self>, asm: &mut Assembly) -> Vec<String> {
        let array = self.array();
        let lists = array.bad_block_lists();
        let changes = lists.take_changes();
        if changes.is_empty() {
            return Vec::new();
        }
        let mut said = Vec::new();
        for c in changes {
            let (role, start, len, good) = match c {
                BadBlockChange::MadeGood { role, start, len } => (role, start, len, true),
                BadBlockChange::Listed { role, start, len } => (role, start, len, false),
            };
            let Some(i) = asm.slots.get(role).copied().flatten() else {
                continue;
            };
            if asm.members[i].state != MemberState::Active {
                // Failed meanwhile (by an earlier change, or taken out).
                continue;
            }
            let path = asm.members[i].device.path.clone();
            let (a, b) = (start, start + len);
            let done = if good {
                asm.clear_bad_blocks(i, start, len).map(|_| true)
            } else {
                asm.list_bad_blocks(i, start, len)
            };
            match done {
                Ok(true) if good => said.push(format!(
                    "{path} (role {role}): bytes {a}..{b} rewritten, dropped from its bad-block log"
                )),
                Ok(true) => said.push(format!(
                    "{path} (role {role}): bytes {a}..{b} could not be rewritten, listed in its bad-block log"
                )),
                Ok(false) | Err(_) if good => {
                    said.push(format!("{path} (role {role}): cannot update its bad-block log"))
                }
                failed => {
                    let why = match failed {
                        Err(e) => e.to_string(),
                        _ => "it keeps no bad-block log".into(),
                    };
                    said.push(format!(
                        "{path} (role {role}): bytes {a}..{b} could not be rewritten nor listed ({why})"
                    ));
                    if self.array().fail_member(role).is_ok() {
                        if let Err(e) = asm.change_running(&self.array(), |a| a.fail(i)) {
                            said.push(format!("{path} (role {role}) failed: {e}"));
                        } else {
                            said.push(format!("{path} (role {role}) failed and is marked faulty"));
                        }
                    }
                }
            }
        }
        match asm.bad_blocks() {
            Ok(b) => lists.set(b),
            Err(e) => said.push(format!("cannot read the bad-block logs back: {e}")),
        }
        said
    }
}
