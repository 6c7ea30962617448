//! Power cuts in a torture run: what the members keep of unflushed writes,
//! power coming back (latent errors found, members that stayed away), the
//! assembly from the superblocks and the start that follows. What is
//! allowed to be lost is the model's; the assembly and start are the
//! engine's.

use super::config::Policy;
use super::model::SECTOR;
use super::run::{Outcome, Rig};
use raidlab_core::Volume;
use raidlab_raid::assemble::Assembly;
use rand::Rng;

impl Rig {
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
}
