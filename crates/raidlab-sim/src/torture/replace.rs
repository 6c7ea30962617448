//! md's replace in a torture run: a spare copied into a member's role while
//! the array works, with a power cut, the old member failing or its latent
//! errors striking mid-copy (`Mishap`), and what each must leave behind.
//! It never copies anything itself: the replace, its copy and its resume
//! are the engine's calls, as `raidlab replace` makes them.

use super::restart::verb_start;
use super::run::{quiet, Outcome, Rig};
use raidlab_core::ErrorKind;
use raidlab_layout::Level;
use raidlab_md::MetadataVersion;
use raidlab_raid::assemble::{Assembly, MemberState};
use raidlab_raid::recovery::RunOptions;
use rand::Rng;
use std::sync::atomic::{AtomicBool, Ordering};

/// What goes wrong in the middle of a replace's copy, if anything.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Mishap {
    None,
    PowerCut,
    /// The member being replaced fails for good.
    OldFails,
    /// The member being replaced cannot read these device bytes any more.
    OldLatent(Option<std::ops::Range<u64>>),
}

impl Rig {
    /// md's replace (`mdadm --replace`, `raidlab replace`): on a complete
    /// array, stop, let a new device take over a random in-service member's
    /// role through the engine's `replace` and `rebuild` (the copy), with at
    /// most one thing going wrong mid-copy, drawn up front: the power goes
    /// (every member's unflushed writes kept, dropped or torn), the member
    /// being replaced fails, or it grows latent read errors. Then, once the
    /// copy is done (resumed after a cut, as the operator's `raidlab
    /// rebuild` would): the new device holds the role, the old one holds
    /// none, the array reads as the model says and a check finds 0
    /// mismatches.
    pub(super) fn replace_member(&mut self) -> Outcome {
        if self.file_origin() || !self.troubled_roles().is_empty() {
            return Ok(());
        }
        let slots = self.filled_slots();
        let Some(&(role, member)) = slots.get(self.rng.gen_range(0..slots.len().max(1))) else {
            return Ok(());
        };
        let Some(old_dev) = self
            .started
            .as_ref()
            .and_then(|s| self.device_of(&s.asm(), member))
        else {
            return Ok(());
        };
        let redundant = self.cfg.level != Level::Raid0;
        let mishap = match self.rng.gen_range(0..8u32) {
            0 | 1 => Mishap::PowerCut,
            2 if redundant => Mishap::OldFails,
            3 if redundant => Mishap::OldLatent(self.fault_range(old_dev)),
            _ => Mishap::None,
        };
        // The progress report after which the mishap strikes (0: before the
        // first step is copied; past the last: never).
        let at = self.rng.gen_range(0..=10u32);
        let seeds: Vec<u64> = (0..=self.vols.len()).map(|_| self.rng.gen()).collect();
        let mut asm = self.stop()?;
        let new = self.new_device();
        let new_dev = self.vols.len() - 1;
        let (old_path, new_path) = (self.paths[old_dev].clone(), new.path.clone());
        asm.set_executor(self.exec.clone());
        let mut asm = verb_start(asm).map_err(|e| format!("start the logs to replace: {e}"))?;
        let old = asm
            .find(&old_path)
            .map_err(|e| format!("replace: the member to replace: {e}"))?;
        self.make_room(&mut asm)?;
        if let Err(e) = asm.replace(old, new, false) {
            self.note(format!("replace {old_path} (role {role}) refused: {e}"));
            if redundant {
                return Err(format!(
                    "replace of {old_path} in role {role} refused on a complete array: {e}"
                ));
            }
            drop(asm);
            // The blank device never joined: the operator takes it back.
            self.vols.pop();
            self.paths.pop();
            self.dead.pop();
            self.faulty.pop();
            let asm = Assembly::assemble(self.live_devices())
                .map_err(|e| format!("assemble after a refused replace: {e}"))?;
            self.start_as_operator(asm, "start after a refused replace")?;
            self.counts.restarts += 1;
            return self.verify_all();
        }
        self.counts.replaces += 1;
        self.note(format!(
            "{new_path} replaces {old_path} in role {role}; mishap {mishap:?} at progress report {at}"
        ));
        // A cut strikes inside the copy, right after the step of progress
        // report `at` was written: the copy's writes go out in order on
        // this thread, so what the members' caches hold then is the seed's.
        // The other mishaps strike at the step boundary after it: the copy
        // is stopped there by the engine's own interruption (it saves its
        // checkpoint) and the fault comes with no step in flight. With
        // `read_ahead` and `use_maps` off the copy reads each step on this
        // thread too; a copy whose readers ran on threads of their own (as
        // it does with read-ahead) would take a fault injected mid-step
        // before or after one of their reads by chance. A
        // flag per replace, leaked: `RunOptions::stop` takes a static, and
        // a shared one would stop the copies of other runs on other test
        // threads.
        let stop: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
        let vols = self.vols.clone();
        let mut cut = None;
        let mut reports = 0u32;
        let mut progress = |_: raidlab_raid::recovery::Progress| {
            if reports == at {
                match mishap {
                    Mishap::None => {}
                    Mishap::PowerCut => {
                        let mut c = (0, 0, 0);
                        for (v, &seed) in vols.iter().zip(&seeds) {
                            if let Ok(r) = v.power_cut(seed) {
                                c = (c.0 + r.dropped, c.1 + r.kept, c.2 + r.torn);
                            }
                        }
                        cut = Some(c);
                    }
                    _ => stop.store(true, Ordering::Relaxed),
                }
            }
            reports += 1;
        };
        // Small steps and checkpoints, so the copy stops between them and
        // resumes from a recorded offset.
        let opts = RunOptions {
            step_bytes: 32 << 10,
            checkpoint_bytes: 64 << 10,
            ..self.run_options()
        };
        let r = asm.rebuild(
            RunOptions {
                stop: Some(stop),
                ..opts.clone()
            },
            &mut progress,
        );
        let struck = stop.load(Ordering::Relaxed) || cut.is_some();
        // With the power gone, the event names none of the copy's failed
        // requests: which one failed first is the order of the engine's
        // reads (once its reader threads' race), not a fact of the run.
        self.note(match (&r, cut) {
            (Ok(r), _) => format!("replace copy: {} member(s)", r.rebuilt.len()),
            (Err(_), Some((d, k, t))) => {
                format!("replace copy failed: power cut mid-copy (writes dropped {d} kept {k} torn {t})")
            }
            (Err(e), None) => format!("replace copy: {e}"),
        });
        match (&r, struck) {
            (Ok(_), _) => {}
            (Err(_), true) if cut.is_some() => {}
            (Err(e), true) if e.kind == ErrorKind::Interrupted => {}
            (Err(e), _) => {
                return Err(format!(
                    "replace of {old_path} by {new_path} (role {role}) failed: {e}"
                ))
            }
        }
        if r.is_err() || cut.is_some() {
            self.counts.faults += 1;
            asm = self.strike(asm, &mishap, old_dev)?;
            if asm.rebuilding().is_empty() {
                self.note("no copy is recorded to resume".into());
            } else {
                let r = asm.rebuild(opts, &mut quiet).map_err(|e| {
                    format!("carry on with the replace of role {role} after {mishap:?}: {e}")
                })?;
                self.note(format!("replace carried on: {} member(s)", r.rebuilt.len()));
            }
        }
        drop(asm);
        self.counts.rebuilds += 1;
        let asm = Assembly::assemble(self.live_devices())
            .map_err(|e| format!("assemble after the replace: {e}"))?;
        self.replace_outcome(asm, role, old_dev, new_dev)
    }

    /// The mishap of a replace whose copy stopped between two steps; the
    /// assembly to carry the copy on with, as the operator would have it.
    fn strike(
        &mut self,
        asm: Assembly,
        mishap: &Mishap,
        old_dev: usize,
    ) -> Result<Assembly, String> {
        match mishap {
            Mishap::PowerCut => {
                // The cut came inside the copy.
                drop(asm);
                self.counts.power_cuts += 1;
                // The array was stopped cleanly first: none of the model's
                // writes is in flight, every sector must read its durable
                // value.
                self.power_back(Vec::new())?;
                self.stop()
            }
            Mishap::OldFails => {
                drop(asm);
                self.vols[old_dev].fail_all(true);
                self.dead[old_dev] = true;
                self.faulty[old_dev] = true;
                self.note(format!("fault mid-copy: {} fails", self.paths[old_dev]));
                // The operator's `raidlab rebuild` with the members that
                // answer: the replacement must now rebuild the role (md's
                // kernel turns it into a rebuild the same way).
                Assembly::assemble(self.live_devices())
                    .map_err(|e| format!("assemble after the replaced member died: {e}"))
            }
            Mishap::OldLatent(Some(r)) => {
                self.vols[old_dev].fail_reads(r.clone());
                self.latent.push((old_dev, r.clone()));
                self.faulty[old_dev] = true;
                self.note(format!(
                    "fault mid-copy: {} reads fail at {r:?}",
                    self.paths[old_dev]
                ));
                Ok(asm)
            }
            Mishap::OldLatent(None) | Mishap::None => Ok(asm),
        }
        .and_then(|mut asm| {
            asm.set_executor(self.exec.clone());
            verb_start(asm).map_err(|e| format!("start the logs to carry on with the replace: {e}"))
        })
    }

    /// After a replace (or a cut that may have lost it): the new device
    /// holds `role` and the old one no role, unless the replace was never
    /// recorded (then the old one still holds it); the array starts, reads
    /// as the model says, and a check on a complete array finds 0
    /// mismatches.
    fn replace_outcome(
        &mut self,
        asm: Assembly,
        role: usize,
        old_dev: usize,
        new_dev: usize,
    ) -> Outcome {
        let holder = asm
            .slots
            .get(role)
            .copied()
            .flatten()
            .map(|i| (asm.members[i].device.path.clone(), asm.members[i].state));
        let new_state = asm
            .members
            .iter()
            .find(|m| m.device.path == self.paths[new_dev])
            .map(|m| m.state);
        let old_role = asm
            .members
            .iter()
            .find(|m| m.device.path == self.paths[old_dev])
            .filter(|m| m.state == MemberState::Active)
            .and_then(|m| m.role);
        self.note(format!(
            "after the replace: role {role} held by {holder:?}; {} in role {old_role:?}",
            self.paths[old_dev]
        ));
        match &holder {
            Some((p, MemberState::Active)) if *p == self.paths[new_dev] => {
                if old_role.is_some() {
                    return Err(format!(
                        "replaced member {} still holds role {old_role:?} beside its replacement",
                        self.paths[old_dev]
                    ));
                }
            }
            // The replace left no trace (a cut took its superblock writes):
            // the old member still serves the role.
            Some((p, MemberState::Active)) if *p == self.paths[old_dev] => {}
            // 0.90 has no field for a replacement or its progress (md
            // writes one as a spare there): a copy stopped half-way is
            // assembled as a spare, and once the member it replaced died the
            // role is missing beside it. md's kernel would recover onto it at
            // once; offline, the role waits for a rebuild, as any missing
            // role does, and the array must read right meanwhile.
            None if self.cfg.metadata == MetadataVersion::V0_90
                && new_state == Some(MemberState::Spare) => {}
            _ => {
                return Err(format!(
                    "after the replace role {role} is held by {holder:?}, neither {} (the replacement) nor {} (the member replaced)",
                    self.paths[new_dev], self.paths[old_dev]
                ))
            }
        }
        self.start_as_operator(asm, "start after the replace")?;
        self.counts.restarts += 1;
        self.verify_all()?;
        self.check(false)
    }
}
