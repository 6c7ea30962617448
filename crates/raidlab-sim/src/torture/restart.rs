//! What a torture run does to the array's life: clean stops, power cuts
//! (`power_cut.rs`),
//! assembly again from the superblocks, starts with the array's own recovery,
//! a spare and its rebuild, md's replace (`replace.rs`: with a cut or a fault
//! mid-copy),
//! check and repair, and the planted bugs that prove the checker fails. It
//! decides what each of those must leave behind; what is allowed after a
//! power cut is the model's. It never does the engine's part itself: the
//! replace, the copy, its resume and the assembly are the engine's calls,
//! as `raidlab replace` and `raidlab rebuild` make them.

use super::run::{quiet, Outcome, Plant, Rig};
use super::trace::digest;
use raidlab_core::{ErrorKind, Volume};
use raidlab_layout::Level;
use raidlab_raid::assemble::{Assembly, MemberState};
use raidlab_raid::lifecycle;
use raidlab_raid::manage::Added;
use raidlab_raid::recovery::RunOptions;

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
    pub(super) fn make_room(&mut self, asm: &mut Assembly) -> Outcome {
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
pub(super) fn verb_start(asm: Assembly) -> raidlab_core::Result<Assembly> {
    let started = lifecycle::Managed::start(
        asm,
        lifecycle::ManageOptions {
            write: true,
            refuse: None,
        },
    )?;
    Ok(started.asm)
}
