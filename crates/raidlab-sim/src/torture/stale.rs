//! A member that leaves and comes back: a cable pulled or one enclosure
//! rebooted. While it is away every I/O to it fails, so the engine fails it
//! at its next request (or its next superblock commit) and carries on
//! degraded; then it comes back holding what it held, after losing its
//! volatile cache as a power cycle would. The array is stopped and
//! assembled again from every device that answers, the returned one
//! included, as md assembles: the member is out of date and must not serve
//! a byte (the model's read of the whole array proves it), and it is taken
//! back as `mdadm --add` takes a former member (a re-add with only the
//! bitmap's dirty chunks when md would, else a whole rebuild).
//!
//! It decides when a member leaves and comes back and what must hold then;
//! it draws only from its own random stream, never from the run's, so a
//! run without stale members is unchanged by this module.

use super::run::{Outcome, Rig};
use raidlab_raid::assemble::{Assembly, Device, MemberState};
use rand::Rng;

impl Rig {
    /// With stale members on, one operation in thirty (drawn from their own
    /// stream) is a member leaving, or the member that left coming back.
    /// Whether this operation was one.
    pub(super) fn stale_step(&mut self, strict: bool) -> Result<bool, String> {
        if self.file_origin() {
            // The workload goes to a file: a member away would not reach it.
            return Ok(false);
        }
        let Some(rng) = self.stale.as_mut() else {
            return Ok(false);
        };
        if !strict || !rng.gen_ratio(1, 30) {
            return Ok(false);
        }
        match self.away {
            None => self.go_away()?,
            Some(dev) => self.come_back(dev)?,
        }
        Ok(true)
    }

    /// A device of the array that the level tolerates losing leaves: every
    /// I/O to it fails from now on.
    fn go_away(&mut self) -> Outcome {
        let slots = self.filled_slots();
        if slots.is_empty() {
            return Ok(());
        }
        let pick = self
            .stale
            .as_mut()
            .map_or(0, |r| r.gen_range(0..slots.len()));
        let (role, member) = slots[pick];
        let Some((dev, tolerated)) = self.victim_at(role, member) else {
            return Ok(());
        };
        if !tolerated || self.dead[dev] {
            return Ok(());
        }
        self.vols[dev].fail_all(true);
        self.dead[dev] = true;
        self.faulty[dev] = true;
        self.away = Some(dev);
        self.counts.faults += 1;
        self.note(format!("fault: {} leaves (role {role})", self.paths[dev]));
        Ok(())
    }

    /// The device that left comes back: a clean stop, the device answers
    /// again with what survived its power cycle, the array is assembled
    /// from every device that answers, started, read whole against the
    /// model, and the returned device is taken back and rebuilt.
    fn come_back(&mut self, dev: usize) -> Outcome {
        let asm = self.stop()?;
        drop(asm);
        let seed = self.stale.as_mut().map_or(0, |r| r.gen());
        let cut = self.vols[dev]
            .power_cut(seed)
            .map_err(|e| format!("power cycle of the returning member: {e}"))?;
        self.vols[dev].restart();
        self.vols[dev].clear_faults();
        self.latent.retain(|(d, _)| *d != dev);
        self.dead[dev] = false;
        self.faulty[dev] = false;
        self.away = None;
        self.counts.returns += 1;
        let asm = Assembly::assemble(self.live_devices())
            .map_err(|e| format!("assemble with {} back: {e}", self.paths[dev]))?;
        let state = asm
            .members
            .iter()
            .find(|m| m.device.path == self.paths[dev])
            .map(|m| m.state);
        self.note(format!(
            "{} comes back (its cache: dropped {} kept {} torn {}): assembled as {state:?}, array events {}",
            self.paths[dev], cut.dropped, cut.kept, cut.torn, asm.events
        ));
        if state != Some(MemberState::Active) {
            self.counts.stale_left_out += 1;
        }
        // Whatever the assembly made of it, the array must read as the
        // model says: a stale member that served a read would show.
        self.start_as_operator(asm, "start with the returned member")?;
        self.counts.restarts += 1;
        self.verify_all()?;
        if state == Some(MemberState::Active) {
            return Ok(());
        }
        let asm = self.stop()?;
        let device = Device {
            path: self.paths[dev].clone(),
            volume: self.vols[dev].clone(),
        };
        self.add_and_rebuild(asm, device, true)
    }
}
