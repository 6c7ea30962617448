//! What a torture run does to the array's life: clean stops, power cuts,
//! assembly again from the superblocks, starts with the array's own recovery,
//! a spare and its rebuild, md's replace (with a cut or a fault mid-copy),
//! check and repair, and the planted bugs that prove the checker fails. It
//! decides what each of those must leave behind; what is allowed after a
//! power cut is the model's. It never does the engine's part itself: the
//! replace, the copy, its resume and the assembly are the engine's calls,
//! as `raidlab replace` and `raidlab rebuild` make them.

use super::config::Policy;
use super::model::SECTOR;
use super::run::{quiet, Outcome, Plant, Rig};
use super::trace::digest;
use raidlab_core::{ErrorKind, Volume};
use raidlab_layout::Level;
use raidlab_md::MetadataVersion;
use raidlab_raid::assemble::{Assembly, MemberState};
use raidlab_raid::lifecycle;
use raidlab_raid::manage::Added;
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

/// Hot spares an operator keeps attached at most: a role whose device only
/// has latent errors is not taken over, so each spare added for it stays a
/// spare, and a long run would otherwise fill the superblocks' device table
/// with them. No run of the 120-operation sweeps reaches it.
const SPARES_ENOUGH: usize = 8;

impl Rig {
    /// Spares attached to the started array.
    fn spares_attached(&self) -> usize {
        self.started.as_ref().map_or(0, |s| {
            s.asm()
                .members
                .iter()
                .filter(|m| m.state == MemberState::Spare)
                .count()
        })
    }

    /// A clean stop, then assembly from the superblocks of the devices that
    /// still answer (only the writes it flushed are on the media).
    pub(super) fn stop(&mut self) -> Result<Assembly, String> {
        // The cache in front stops first, as `serve` stops it.
        self.close_front()?;
        let s = self
            .started
            .take()
            .ok_or_else(|| "internal: no started array to stop".to_string())?;
        let said = s.stop();
        self.stopped(said)
    }

    /// After a clean stop that answered `said` (the members it recorded
    /// failed): what it flushed is durable, and the array is assembled from
    /// the superblocks of the devices that still answer.
    pub(super) fn stopped(
        &mut self,
        said: raidlab_core::Result<Vec<String>>,
    ) -> Result<Assembly, String> {
        let said = said.map_err(|e| format!("clean stop failed: {e}"))?;
        self.model.flush();
        self.note(format!("stopped cleanly; recorded failed: {said:?}"));
        Assembly::assemble(self.live_devices())
            .map_err(|e| format!("assemble after a clean stop: {e}"))
    }

    pub(super) fn stop_and_start(&mut self) -> Outcome {
        let asm = self.stop()?;
        self.start_after_stop(asm)
    }

    /// Start what a clean stop left (`asm`) and read it whole.
    pub(super) fn start_after_stop(&mut self, asm: Assembly) -> Outcome {
        self.counts.restarts += 1;
        self.start_as_operator(asm, "start after a clean stop")?;
        self.verify_all()
    }

    /// Start; a dirty degraded array (one started forced after a power cut
    /// stays dirty until rebuilt, as md's does) is refused, then started
    /// forced, as its refusal tells the operator.
    pub(super) fn start_as_operator(&mut self, asm: Assembly, what: &str) -> Outcome {
        let keep = asm.clone();
        let dirty_degraded = !asm.in_sync() && !asm.missing().is_empty();
        match self.start(asm, false) {
            Ok(()) => Ok(()),
            Err(e) if dirty_degraded && e.kind == ErrorKind::Refused => {
                self.note(format!("refused, dirty and degraded: {e}"));
                self.start(keep, true)
                    .map_err(|e| format!("{what}, forced: {e}"))
            }
            Err(e) => Err(format!("{what}: {e}")),
        }
    }

    /// The whole array reads as the model says (within tolerance).
    pub(super) fn verify_all(&mut self) -> Outcome {
        let size = self.model.size();
        self.read_range(true, 0, size)
    }

    /// The members a role would be rebuilt from are fine and a role is
    /// missing or its device is faulty: stop, add a new device, rebuild it
    /// offline, start again, read everything, check.
    pub(super) fn spare_and_rebuild(&mut self) -> Outcome {
        if self.troubled_roles().is_empty() || self.spares_attached() >= SPARES_ENOUGH {
            return Ok(());
        }
        let asm = self.stop()?;
        let dev = self.new_device();
        self.add_and_rebuild(asm, dev, false)
    }

    /// Make room for a new device in the stopped array `asm`: when every
    /// slot of the superblocks' table is taken (a long run fills metadata
    /// 0.90's 27, or 1.x's, with members that failed and stayed attached),
    /// remove the faulty members, as the engine's refusal tells the
    /// operator to (`mdadm --remove`).
    fn make_room(&mut self, asm: &mut Assembly) -> Outcome {
        if asm.free_device_number(None).is_some() {
            return Ok(());
        }
        let faulty: Vec<usize> = (0..asm.members.len())
            .filter(|&i| asm.members[i].state == MemberState::Faulty)
            .collect();
        for &i in &faulty {
            let path = asm.members[i].device.path.clone();
            asm.remove(i)
                .map_err(|e| format!("remove faulty {path} to make room: {e}"))?;
        }
        self.counts.room_made += 1;
        self.note(format!(
            "every device slot taken: {} faulty member(s) removed",
            faulty.len()
        ));
        Ok(())
    }

    /// Add `dev` to the stopped array `asm` (a re-add first when `re_add`
    /// and md would take it back that way, else `add`), rebuild what it
    /// went into, start again, read everything, check.
    pub(super) fn add_and_rebuild(
        &mut self,
        mut asm: Assembly,
        dev: raidlab_raid::assemble::Device,
        re_add: bool,
    ) -> Outcome {
        // The log start, the add and the rebuild run in order on this
        // thread, as the started array's plans do.
        asm.set_executor(self.exec.clone());
        let mut asm = verb_start(asm).map_err(|e| format!("start the logs to add: {e}"))?;
        let path = dev.path.clone();
        let readd = if re_add {
            asm.re_add_check(&dev)
        } else {
            Err(raidlab_core::Error::invalid("a new device"))
        };
        let into_slot = match readd {
            Ok(plan) => {
                asm.re_add(dev).map_err(|e| format!("re-add {path}: {e}"))?;
                self.counts.re_adds += 1;
                self.note(format!(
                    "{path} re-added into role {} ({} dirty bitmap chunk(s))",
                    plan.slot, plan.dirty_chunks
                ));
                true
            }
            Err(why) => {
                if re_add {
                    self.note(format!("no re-add: {why}"));
                }
                self.make_room(&mut asm)?;
                let added = asm
                    .add(dev, false)
                    .map_err(|e| format!("add {path}: {e}"))?;
                self.counts.faults += 1;
                self.note(format!("spare {path} added: {added:?}"));
                matches!(added, Added::IntoSlot(_))
            }
        };
        if into_slot {
            let opts = self.run_options();
            let r = match asm.rebuild(opts.clone(), &mut quiet) {
                // Not stopped cleanly (a forced start after a power cut):
                // what the refusal tells the operator, resync if it can,
                // then rebuild.
                Err(e) if e.kind == ErrorKind::Refused => {
                    self.note(format!("rebuild refused: {e}"));
                    let resync = asm.resync(opts.clone(), &mut quiet);
                    self.note(format!(
                        "resync first: {:?}",
                        resync.as_ref().map(|r| r.mismatch_sectors)
                    ));
                    asm.rebuild(
                        RunOptions {
                            force: resync.is_err(),
                            ..opts
                        },
                        &mut quiet,
                    )
                }
                r => r,
            }
            .map_err(|e| format!("rebuild onto {path}: {e}"))?;
            self.counts.rebuilds += 1;
            self.note(format!("rebuilt {} member(s)", r.rebuilt.len()));
        }
        drop(asm);
        let asm = Assembly::assemble(self.live_devices())
            .map_err(|e| format!("assemble after the rebuild: {e}"))?;
        self.start_as_operator(asm, "start after the rebuild")?;
        self.counts.restarts += 1;
        self.verify_all()?;
        self.check(false)
    }

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

    /// md's check (or repair): on a complete redundant array, 0 mismatches.
    pub(super) fn check(&mut self, repair: bool) -> Outcome {
        if self.cfg.level == Level::Raid0 {
            return Ok(());
        }
        let complete = self.troubled_roles().is_empty();
        let opts = self.run_options();
        // Through the cache first: its flush is the one the model counts.
        if let Some(v) = self.front() {
            let r = v.flush().map_err(|e| e.to_string());
            if let Err(e) = r.and_then(|()| self.record()) {
                return Err(format!("cache flush before the check: {e}"));
            }
        }
        let s = self
            .started
            .as_mut()
            .ok_or_else(|| "internal: no started array".to_string())?;
        let array = s.array.clone();
        // Held stripes go down first: a check compares what is on the members.
        if let Err(e) = s.flush() {
            return Err(format!("flush before the check: {e}"));
        }
        self.model.flush();
        let r = s.asm().scrub_running(&array, repair, opts, &mut quiet);
        self.counts.checks += 1;
        self.note(format!(
            "{}: {}",
            if repair { "repair" } else { "check" },
            r.as_ref().map_or_else(
                |e| e.to_string(),
                |r| format!("{} mismatched sectors", r.mismatch_sectors)
            )
        ));
        match r {
            Ok(r) if complete && r.mismatch_sectors > 0 && !repair => Err(format!(
                "check found {} mismatched sectors on a complete array: {:?}",
                r.mismatch_sectors,
                r.findings.first()
            )),
            Ok(_) => Ok(()),
            Err(e) if e.kind == ErrorKind::Refused || !complete => Ok(()),
            Err(e) => Err(format!("check on a complete array failed: {e}")),
        }
    }

    /// The power goes: each member's unflushed writes are kept, dropped or
    /// torn at random; the array is assembled from its superblocks and
    /// started with its own recovery, and every sector must hold what the
    /// policy promises.
    pub(super) fn power_cut(&mut self, lose_flushed: bool) -> Outcome {
        self.counts.power_cuts += 1;
        // Where md's write hole may reach: the array's sectors written
        // since its last flush (with a cache in front, where the cache
        // wrote, and none when the cache is over a file).
        let pending: Vec<usize> = if self.tier.is_some() {
            let p = self.origin_pending();
            if self.file_origin() {
                Vec::new()
            } else {
                p
            }
        } else {
            self.model.pending_sectors().collect()
        };
        self.cut_tier()?;
        let mut cut = (0, 0, 0);
        for v in self.vols.clone() {
            let seed = self.rng.gen();
            let r = v.power_cut(seed).map_err(|e| format!("power cut: {e}"))?;
            cut = (cut.0 + r.dropped, cut.1 + r.kept, cut.2 + r.torn);
        }
        self.started = None;
        self.note(format!(
            "power cut: {} sector(s) in flight; writes dropped {} kept {} torn {}",
            pending.len(),
            cut.0,
            cut.1,
            cut.2
        ));
        if lose_flushed {
            // Where the data areas are: 1 MiB in for metadata 1.1 and 1.2,
            // at the start for 0.90 and 1.0 (the harness's member sizes).
            for v in &self.vols {
                let len = super::config::DATA_BYTES;
                let start = if v.size() < (1 << 20) + len {
                    0
                } else {
                    1 << 20
                };
                let _ = v.inner().write_at(&vec![0; len as usize], start);
            }
        }
        self.power_back(pending)
    }

    /// Power comes back after a cut that left `pending` (array sectors
    /// written since the last flush) to the members' volatile caches: the
    /// array is assembled from its superblocks, started with its own
    /// recovery, read whole against the model, and checked.
    pub(super) fn power_back(&mut self, pending: Vec<usize>) -> Outcome {
        for v in &self.vols {
            v.restart();
        }
        let torn_before = self.counts.torn_superblocks;
        let Some(asm) = self.assemble_after_cut()? else {
            // Every device dead or torn (requests in flight can tear the
            // superblocks of a small array all at once): nothing is served,
            // so nothing is wrong, and the run ends there.
            self.note("no device left with a superblock md would load: nothing to assemble".into());
            self.lost = true;
            return Ok(());
        };
        // Torn superblocks count as members lost (this may go beyond the
        // level's tolerance).
        let torn = self.counts.torn_superblocks > torn_before && !self.strict();
        let mut missing = asm.missing();
        let g = asm.geometry;
        let write_hole = self.cfg.has_parity()
            && !missing.is_empty()
            && matches!(self.cfg.policy, Policy::Resync | Policy::Bitmap);
        let lost_pages = self.latent_pages(&asm);
        // A cut between a member's log write and its flush tears that log;
        // md then skips the log (a mismatch), leaves the array dirty and
        // refuses it degraded, as raidlab does. The operator forces it. The
        // log's own stripes lose nothing by it: their data goes to the
        // members only after the log is flushed, and the log it replaced
        // was flushed with its stripes first (`ppl.rs`), so nothing widens
        // the hole here and the model holds the forced start to it.
        let torn_log_refusal = self.cfg.policy == Policy::Ppl && !missing.is_empty();
        let forced = match self.start_after_cut(asm, write_hole || torn_log_refusal) {
            Err(e) if torn => {
                // md refuses too: nothing is served, so nothing is wrong.
                self.note(format!(
                    "beyond the tolerance after the torn superblocks, the start refused: {e}"
                ));
                self.lost = true;
                return Ok(());
            }
            r => r?,
        };
        self.counts.restarts += 1;
        // A member the start takes out (a write of its resync fails, and
        // without a bad-block log to list it md fails the member too) leaves
        // the rest of the resync degraded: the same hole.
        let write_hole = write_hole
            || (self.cfg.has_parity()
                && matches!(self.cfg.policy, Policy::Resync | Policy::Bitmap)
                && {
                    let s = self.started_mut();
                    let mut now = s.asm().missing();
                    now.extend(s.array.failed_members());
                    now.iter().any(|r| !missing.contains(r))
                });
        if write_hole {
            // md's write hole: a stripe being written when the power went,
            // on an array with no redundancy left, may hold anything.
            let stripe = (g.chunk_bytes * g.data_disks() as u64) as usize;
            let mut hole = std::collections::BTreeSet::new();
            for &s in &pending {
                hole.insert(s * SECTOR / stripe);
            }
            for &st in &hole {
                for s in st * stripe / SECTOR
                    ..((st + 1) * stripe / SECTOR).min(self.model.size() / SECTOR)
                {
                    self.model.allow_any(s);
                    self.counts.write_hole_sectors += 1;
                }
            }
        } else if self.cfg.policy == Policy::Ppl && {
            // A member whose read fails in the replay is taken out by the
            // start and the replay run again degraded (md fails it there
            // too): its rows are then left alone as a missing member's.
            let s = self.started_mut();
            let mut now = s.asm().missing();
            now.extend(s.array.failed_members());
            for r in now {
                if !missing.contains(&r) {
                    missing.push(r);
                }
            }
            !missing.is_empty()
        } {
            // md's PPL replay leaves a row alone when the chunk being
            // written there is on the missing member.
            for &s in &pending {
                let (member, _, _) = g.parity_location((s * SECTOR) as u64);
                if missing.contains(&member) {
                    self.model.allow_any(s);
                    self.counts.write_hole_sectors += 1;
                }
            }
        }
        if !write_hole
            && self.cfg.has_parity()
            && matches!(self.cfg.policy, Policy::Resync | Policy::Bitmap)
        {
            // Two faults in one stripe: a page the resync cannot read is
            // rebuilt from parity (md's way, page by page), and parity of a
            // stripe being written at the cut may be torn. The data on such
            // a page may hold anything; the rest of the stripe may not.
            let stripe = (g.chunk_bytes * g.data_disks() as u64) as usize;
            let stripes: std::collections::BTreeSet<usize> =
                pending.iter().map(|&s| s * SECTOR / stripe).collect();
            for &st in &stripes {
                for s in st * stripe / SECTOR
                    ..((st + 1) * stripe / SECTOR).min(self.model.size() / SECTOR)
                {
                    let (role, _, at) = g.parity_location((s * SECTOR) as u64);
                    if lost_pages
                        .iter()
                        .any(|&(r, ref pages)| r == role && pages.contains(&at))
                    {
                        self.model.allow_any(s);
                        self.counts.write_hole_sectors += 1;
                    }
                }
            }
        }
        let size = self.model.size();
        let (got, r) = self.read_front(0, size);
        if let Err(e) = &r {
            if !self.strict() {
                // Beyond the tolerance (superblocks torn by the cut left
                // too few members): the array reports, which is allowed.
                self.note(format!(
                    "beyond the tolerance after the cut, the read reports: {e}"
                ));
                self.give_read(got);
                return Ok(());
            }
        }
        r.map_err(|e| format!("read after the power cut and recovery: {e}"))?;
        if let Some((w, n)) = self.model.check_after_cut(&got) {
            return Err(format!(
                "after a power cut{}: {}",
                if forced { " (forced start)" } else { "" },
                w.describe(n)
            ));
        }
        let old = self.model.settle(got);
        self.give_read(old);
        let contents = self.model.digest();
        self.note(format!("after the cut: contents {contents:016x}"));
        self.check(false)
    }

    /// The 4 KiB pages of each role's data area that hold a latent read
    /// error, as (role, member-area byte range).
    fn latent_pages(&self, asm: &Assembly) -> Vec<(usize, std::ops::Range<u64>)> {
        // The resync's repair unit, the engine's: the harness must not keep
        // its own copy of it.
        const PAGE: u64 = raidlab_raid::recovery::SCRUB_PAGE as u64;
        self.latent
            .iter()
            .filter_map(|(dev, r)| {
                let m = asm
                    .members
                    .iter()
                    .find(|m| m.device.path == self.paths[*dev])?;
                let start = m.sb.data_offset * SECTOR as u64;
                let lo = r.start.checked_sub(start)? / PAGE * PAGE;
                let hi = (r.end.saturating_sub(start)).div_ceil(PAGE) * PAGE;
                Some((m.role?, lo..hi))
            })
            .collect()
    }

    /// Assemble after a cut as an operator does with mdadm: a device whose
    /// superblock the cut tore (its checksum fails) stops the assembly with
    /// an error naming it (mdadm: "no superblock - assembly aborted"); it is
    /// then left out, as a member lost, and the rest assembled. Only a cut
    /// inside a commit can tear one (`inside.rs`): 0.90 checksums its whole
    /// 4 KiB superblock, 1.x its first sectors. What the assembly took in
    /// must pass md's own checksum test (`md_rules.rs`). `None`: no device
    /// is left to assemble (every one dead or torn), as mdadm finds none.
    fn assemble_after_cut(&mut self) -> Result<Option<Assembly>, String> {
        loop {
            let devices = self.live_devices();
            if devices.is_empty() {
                return Ok(None);
            }
            match Assembly::assemble(devices) {
                Ok(asm) => {
                    self.superblocks_md_loads(&asm)?;
                    return Ok(Some(asm));
                }
                Err(e) if e.message.contains("the superblock is corrupt") => {
                    let dev = e
                        .device
                        .as_ref()
                        .and_then(|d| {
                            (0..self.vols.len())
                                .find(|&i| self.paths[i] == *d || self.vols[i].name() == *d)
                        })
                        .filter(|&i| !self.dead[i])
                        .ok_or_else(|| format!("assemble after a power cut: {e}"))?;
                    self.note(format!(
                        "{}: its superblock was torn by the cut ({e}); left out of the assembly",
                        self.paths[dev]
                    ));
                    self.dead[dev] = true;
                    self.faulty[dev] = true;
                    self.counts.torn_superblocks += 1;
                }
                Err(e) => return Err(format!("assemble after a power cut: {e}")),
            }
        }
    }

    /// Start after a power cut as md would: a dirty degraded parity array
    /// with no log, or whose partial parity log a cut tore, is refused, then
    /// started forced (the operator's choice).
    pub(super) fn start_after_cut(
        &mut self,
        asm: Assembly,
        write_hole: bool,
    ) -> Result<bool, String> {
        let keep = asm.clone();
        // What the assembly made of each device, for the trace of a refusal.
        let seen: Vec<String> = asm
            .members
            .iter()
            .map(|m| {
                format!(
                    "{} {:?} slot {:?} events {}",
                    m.device.path, m.state, m.role, m.sb.events
                )
            })
            .collect();
        self.note(format!(
            "assembled at events {}: {}",
            asm.events,
            seen.join(", ")
        ));
        match self.start(asm, false) {
            Ok(()) => Ok(false),
            Err(e) if write_hole => {
                self.note(format!("refused as md refuses: {e}"));
                self.start(keep, true)
                    .map_err(|e| format!("forced start after a power cut: {e}"))?;
                Ok(true)
            }
            Err(e) => Err(format!("start after a power cut: {e}")),
        }
    }

    /// Beyond the tolerance: a stop, an assembly and a start may refuse;
    /// whatever the array then serves must be right.
    pub(super) fn end_beyond_tolerance(&mut self) -> Outcome {
        let front = if self.front().is_some() {
            self.close_front().is_ok()
        } else {
            true
        };
        let Some(s) = self.started.take() else {
            return Ok(());
        };
        let current: Vec<String> = s
            .asm()
            .members
            .iter()
            .filter(|m| m.state == MemberState::Active)
            .map(|m| m.device.path.clone())
            .collect();
        let stop = s.stop();
        self.note(format!("stop beyond tolerance: {stop:?}"));
        let stopped = stop.is_ok() && front;
        if stopped {
            self.model.flush();
        }
        let asm = match Assembly::assemble(self.live_devices()) {
            Ok(a) => a,
            Err(e) => {
                self.note(format!("assembly refused: {e}"));
                return Ok(());
            }
        };
        let from_current = asm
            .members
            .iter()
            .any(|m| m.state == MemberState::Active && current.contains(&m.device.path));
        if !from_current {
            // Every member the array last ran on is gone; what assembles is
            // members it had left before, whose superblocks cannot know of
            // the writes since (md assembles them too). Their contents are
            // older than the model, and nothing can tell.
            self.note("assembled only from members the array had left before: not checked".into());
            return Ok(());
        }
        if let Err(e) = self.start(asm, false) {
            self.note(format!("start refused: {e}"));
            return Ok(());
        }
        let size = self.model.size();
        if stopped {
            return self.read_range(false, 0, size);
        }
        // The stop failed and said so: what it had not made durable may read
        // old or new, as after a power cut, and nothing else.
        let (got, r) = self.read_front(0, size);
        self.counts.reads += 1;
        if let Err(e) = r {
            self.note(format!("read after a failed stop: {e}"));
            return Ok(());
        }
        self.note(format!(
            "after a failed stop: contents {:016x}",
            digest(&got)
        ));
        let out = match self.model.check_after_cut(&got) {
            None => Ok(()),
            Some((w, n)) => Err(format!(
                "after a stop that failed: {} beyond the level's tolerance: silently wrong data",
                w.describe(n)
            )),
        };
        self.give_read(got);
        out
    }

    pub(super) fn plant(&mut self, plant: Option<Plant>) -> Outcome {
        if plant == Some(Plant::WipeCacheData) {
            return self.wipe_cache_data();
        }
        self.started_mut()
            .flush()
            .map_err(|e| format!("flush before the planted bug: {e}"))?;
        self.model.flush();
        match plant {
            Some(Plant::FlipMemberByte) => {
                let (start, _) = self.data_area(0).ok_or("no data area")?;
                self.vols[0]
                    .corrupt_stored(start, 1)
                    .map_err(|e| format!("corrupt: {e}"))?;
                self.note("planted: member 0's first data byte flipped".into());
                self.verify_all()
            }
            Some(Plant::LoseFlushedWrites) => {
                self.note("planted: flushed writes lost at the power cut".into());
                self.power_cut(true)
            }
            Some(Plant::WipeCacheData) => self.wipe_cache_data(),
            None => Ok(()),
        }
    }
}

/// The start an offline membership verb makes (`raidlab add`, `replace`):
/// the lifecycle's, logs replayed with a member whose I/O fails taken out,
/// md's refusals left to the verb.
fn verb_start(asm: Assembly) -> raidlab_core::Result<Assembly> {
    let started = lifecycle::Managed::start(
        asm,
        lifecycle::ManageOptions {
            write: true,
            refuse: None,
        },
    )?;
    Ok(started.asm)
}
