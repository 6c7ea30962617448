//! The member faults a torture run injects: a member that fails for good,
//! latent read errors and write errors on a member's sectors, each on a
//! member picked at random, within the level's tolerance unless the run
//! goes beyond it (`gaps.rs` decides how often); and, with
//! `--misdirected`, misdirected member I/O (TigerBeetle's storage fault
//! model): a member write that lands at another offset of that member (the
//! intended sectors keep their old data), or a member read that returns
//! another offset's data.
//!
//! md keeps no checksums, so neither can be caught on the way: what holds
//! is that a misdirected write leaves stripes whose copies or parity
//! disagree, which md's check must report (on a complete redundant array;
//! the run then ends, since no read of the array is promised from there),
//! and that a misdirected read leaves nothing behind (the same range read
//! again is right, and a check finds 0 mismatches), whatever that one read
//! returned. It decides which device a fault hits and where; it never
//! changes what the engine does about it.

use super::model::SECTOR;
use super::run::{Outcome, Rig};
use raidlab_core::Volume;
use raidlab_layout::Level;
use raidlab_raid::assemble::MemberState;
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
        let asm = s.asm();
        (0..asm.slots.len())
            .filter_map(|r| asm.slots[r].map(|i| (r, i)))
            .collect()
    }

    /// The device of `member` in `role`, and whether faulting it keeps the
    /// array within its tolerance.
    pub(super) fn victim_at(&self, role: usize, member: usize) -> Option<(usize, bool)> {
        let s = self.started.as_ref()?;
        let dev = self.device_of(&s.asm(), member)?;
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
        let asm = s.asm();
        let m = asm
            .members
            .iter()
            .find(|m| m.device.path == self.paths[dev])?;
        Some((m.sb.data_offset * 512, asm.geometry.member_bytes))
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
        self.fail_writes_at(dev, r, "");
        Ok(())
    }

    /// Writes to device `dev` fail in `r` from now on; `why` ends the note.
    pub(super) fn fail_writes_at(&mut self, dev: usize, r: std::ops::Range<u64>, why: &str) {
        self.vols[dev].fail_writes(r.clone());
        self.faulty[dev] = true;
        self.counts.faults += 1;
        self.note(format!(
            "fault: {} writes fail at {r:?}{why}",
            self.paths[dev]
        ));
    }

    /// With misdirected I/O on, one operation in forty (drawn from its own
    /// stream) misdirects one member request. Whether this operation did.
    pub(super) fn misdirect_step(&mut self, strict: bool) -> Result<bool, String> {
        // Behind a cache tier the harness's own requests would bypass the
        // cache's model of the origin.
        if self.tier.is_some() || !strict {
            return Ok(false);
        }
        let Some(rng) = self.misdirect.as_mut() else {
            return Ok(false);
        };
        if !rng.gen_ratio(1, 40) {
            return Ok(false);
        }
        let write = rng.gen_bool(0.5);
        let slots = self.filled_slots();
        if slots.is_empty() {
            return Ok(true);
        }
        let pick = self
            .misdirect
            .as_mut()
            .map_or(0, |r| r.gen_range(0..slots.len()));
        let (role, member) = slots[pick];
        let dev = match self.victim_at(role, member) {
            Some((dev, _)) if !self.dead[dev] => dev,
            _ => return Ok(true),
        };
        let Some((start, len)) = self.data_area(dev) else {
            return Ok(true);
        };
        // Half the data area away: past any one member request of a
        // stripe (a chunk at most), so the intended and landed sectors
        // never overlap.
        let delta = len / 2 / SECTOR as u64 * SECTOR as u64;
        let (off, n) = self.one_stripe();
        if write {
            self.misdirected_write(dev, role, start..start + len, delta, off, n)?;
        } else {
            self.misdirected_read(dev, role, start..start + len, delta, off, n)?;
        }
        Ok(true)
    }

    /// A whole stripe of the array, drawn from the misdirection's stream:
    /// a write of it reaches every member.
    fn one_stripe(&mut self) -> (usize, usize) {
        let g = *self.array().geometry();
        let chunk = self.cfg.chunk as usize;
        let stripe = if g.is_parity() {
            chunk * g.data_disks()
        } else {
            chunk * g.raid_disks
        };
        let stripes = (self.model.size() / stripe).max(1);
        let first = self
            .misdirect
            .as_mut()
            .map_or(0, |r| r.gen_range(0..stripes));
        let off = (first * stripe).min(self.model.size() - 1);
        (off, stripe.min(self.model.size() - off))
    }

    /// Arm a misdirection of the next write to device `dev`'s data area,
    /// write a whole stripe and flush it down; if a member write landed
    /// elsewhere, md's check must report the stripes it left inconsistent,
    /// and the run ends.
    fn misdirected_write(
        &mut self,
        dev: usize,
        role: usize,
        area: std::ops::Range<u64>,
        delta: u64,
        off: usize,
        n: usize,
    ) -> Outcome {
        self.vols[dev].misdirect_next_write(area, delta);
        let mut data = vec![0u8; n];
        if let Some(r) = self.misdirect.as_mut() {
            r.fill(&mut data[..]);
        }
        let r = self
            .started_mut()
            .write(&data, off as u64)
            .and_then(|()| self.started_mut().flush());
        self.vols[dev].disarm_misdirection();
        let struck = self.vols[dev].misdirected();
        self.note(format!(
            "misdirected write armed on {} (role {role}), write and flush of {off}+{n}: {}; struck: {struck:?}",
            self.paths[dev],
            r.as_ref().map_or_else(|e| e.to_string(), |_| "ok".into())
        ));
        r.map_err(|e| format!("write {off}+{n} failed within the level's tolerance: {e}"))?;
        self.model.write(&data, off);
        self.model.flush();
        let Some(m) = struck.first() else {
            // No write of this stripe went to that member's data area as
            // one request within it (a mirror's other copy, a journal
            // holding it): nothing happened.
            return Ok(());
        };
        self.counts.faults += 1;
        self.counts.misdirected_writes += 1;
        self.corrupt = true;
        let redundant = self.cfg.level != Level::Raid0;
        let complete = self.troubled_roles().is_empty()
            && self.started.as_ref().is_some_and(|s| {
                s.asm()
                    .members
                    .iter()
                    .all(|m| m.state != MemberState::Rebuilding)
            });
        if !(redundant && complete && (m.intended_differs || m.landed_differs)) {
            self.note("silent corruption md cannot detect here: the run ends".into());
            return Ok(());
        }
        let array = self.array();
        let opts = self.run_options();
        let s = self
            .started
            .as_mut()
            .ok_or_else(|| "internal: no started array".to_string())?;
        let r = s
            .asm()
            .scrub_running(&array, false, opts, &mut super::run::quiet);
        self.counts.checks += 1;
        self.note(format!(
            "check after the misdirected write: {}",
            r.as_ref().map_or_else(
                |e| e.to_string(),
                |r| format!("{} mismatched sectors", r.mismatch_sectors)
            )
        ));
        match r {
            Ok(r) if r.mismatch_sectors > 0 => {
                self.counts.misdirected_found += 1;
                Ok(())
            }
            Ok(_) => Err(format!(
                "a member write to {:?} landed at {:?} on {} (role {role}) and the check found no mismatch",
                m.intended, m.landed, self.paths[dev]
            )),
            Err(e) => Err(format!("check after a misdirected write failed: {e}")),
        }
    }

    /// Arm a misdirection of the next read of device `dev`'s data area and
    /// read a whole stripe: whatever that read returned, nothing may stay
    /// behind: the range reads right again and a check finds 0 mismatches.
    fn misdirected_read(
        &mut self,
        dev: usize,
        role: usize,
        area: std::ops::Range<u64>,
        delta: u64,
        off: usize,
        n: usize,
    ) -> Outcome {
        self.vols[dev].misdirect_next_read(area, delta);
        let mut got = vec![0u8; n];
        let r = self.array().read_at(&mut got, off as u64);
        self.vols[dev].disarm_misdirection();
        let struck = self.vols[dev].misdirected();
        let wrong = r.is_ok() && self.model.first_difference(&got, off).is_some();
        self.note(format!(
            "misdirected read armed on {} (role {role}), read {off}+{n}: {}{}; struck: {struck:?}",
            self.paths[dev],
            r.as_ref().map_or_else(|e| e.to_string(), |_| "ok".into()),
            if wrong {
                ", wrong data (md cannot tell)"
            } else {
                ""
            }
        ));
        if struck.is_empty() {
            // Nothing misdirected: the read had to be right.
            r.map_err(|e| format!("read {off}+{n} failed within the level's tolerance: {e}"))?;
            if wrong {
                return Err(format!(
                    "read {off}+{n} returned wrong data with nothing misdirected"
                ));
            }
            return Ok(());
        }
        self.counts.faults += 1;
        self.counts.misdirected_reads += 1;
        self.read_range(true, off, n)?;
        self.check(false)
    }
}
