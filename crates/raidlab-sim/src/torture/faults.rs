//! The member faults a torture run injects: a member that fails for good,
//! latent read errors and write errors on a member's sectors, each on a
//! member picked at random, within the level's tolerance unless the run
//! goes beyond it (`gaps.rs` decides how often). It decides which device
//! a fault hits and where; it never changes what the engine does about it.

use super::run::{Outcome, Rig};
use rand::Rng;

impl Rig {
    /// A device of the array (not the journal), and whether faulting it
    /// keeps the array within its tolerance.
    pub(super) fn victim(&mut self) -> Option<(usize, bool)> {
        let slots = self.filled_slots();
        if slots.is_empty() {
            return None;
        }
        let (role, member) = slots[self.rng.gen_range(0..slots.len())];
        self.victim_at(role, member)
    }

    /// The array's filled roles, as (role, member).
    pub(super) fn filled_slots(&self) -> Vec<(usize, usize)> {
        let Some(s) = self.started.as_ref() else {
            return Vec::new();
        };
        (0..s.asm.slots.len())
            .filter_map(|r| s.asm.slots[r].map(|i| (r, i)))
            .collect()
    }

    /// The device of `member` in `role`, and whether faulting it keeps the
    /// array within its tolerance.
    pub(super) fn victim_at(&self, role: usize, member: usize) -> Option<(usize, bool)> {
        let s = self.started.as_ref()?;
        let dev = self.device_of(&s.asm, member)?;
        let mut roles = self.troubled_roles();
        if !roles.contains(&role) {
            roles.push(role);
        }
        Some((dev, self.tolerated(&roles)))
    }

    /// Most faults keep the array within its tolerance; one in four that
    /// would not goes ahead.
    pub(super) fn pick_victim(&mut self) -> Option<usize> {
        if self.file_origin() {
            // The workload goes to a file: a member fault would not reach it.
            return None;
        }
        let (dev, ok) = self.victim()?;
        if self.dead[dev] || (!ok && self.gap_holds_beyond()) {
            return None;
        }
        Some(dev)
    }

    pub(super) fn fail_member(&mut self) -> Outcome {
        let Some(dev) = self.pick_victim() else {
            return Ok(());
        };
        self.vols[dev].fail_all(true);
        self.dead[dev] = true;
        self.faulty[dev] = true;
        self.counts.faults += 1;
        self.note(format!("fault: {} fails", self.paths[dev]));
        Ok(())
    }

    /// The data area of device `dev` as (first byte, bytes).
    pub(super) fn data_area(&self, dev: usize) -> Option<(u64, u64)> {
        let s = self.started.as_ref()?;
        let m = s
            .asm
            .members
            .iter()
            .find(|m| m.device.path == self.paths[dev])?;
        Some((m.sb.data_offset * 512, s.asm.geometry.member_bytes))
    }

    pub(super) fn fault_range(&mut self, dev: usize) -> Option<std::ops::Range<u64>> {
        let (start, len) = self.data_area(dev)?;
        let sectors = len / 512;
        let first = self.rng.gen_range(0..sectors);
        let n = self.rng.gen_range(1..=16u64).min(sectors - first);
        Some(start + first * 512..start + (first + n) * 512)
    }

    pub(super) fn latent_errors(&mut self) -> Outcome {
        let Some(dev) = self.pick_victim() else {
            return Ok(());
        };
        let Some(r) = self.fault_range(dev) else {
            return Ok(());
        };
        self.vols[dev].fail_reads(r.clone());
        self.latent.push((dev, r.clone()));
        self.faulty[dev] = true;
        self.counts.faults += 1;
        self.note(format!("fault: {} reads fail at {r:?}", self.paths[dev]));
        Ok(())
    }

    pub(super) fn write_errors(&mut self) -> Outcome {
        let Some(dev) = self.pick_victim() else {
            return Ok(());
        };
        let Some(r) = self.fault_range(dev) else {
            return Ok(());
        };
        self.vols[dev].fail_writes(r.clone());
        self.faulty[dev] = true;
        self.counts.faults += 1;
        self.note(format!("fault: {} writes fail at {r:?}", self.paths[dev]));
        Ok(())
    }
}
