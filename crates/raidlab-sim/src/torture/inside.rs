//! Power cuts inside a request: the power goes at a chosen member write of
//! a write, FUA write, write-zeroes, flush or clean stop, so a cut can land
//! between a stripe's data and its parity, between a log entry and the
//! write it covers, between a bitmap mark and the data, or between the
//! members' superblock writes of one commit (the mixed event counts md's
//! assembly must sort out). The harness's other cuts fall between requests.
//!
//! It decides which request is cut and at which member write, and what the
//! model makes of a request whose answer nobody saw: a write's sectors may
//! hold their old or their new contents, a flush promised nothing, a stop
//! left the array as a crash does. It draws only from its own random stream
//! (the power cut itself then draws as every cut does), so a run without
//! `--cuts-inside` is unchanged by this module. The tripwire is the member
//! model's (`raidlab_devices::Tripwire`): every member write after it is
//! lost, and the engine, which cannot tell, carries on to the request's end.

use super::run::{Outcome, Rig};
use raidlab_devices::Tripwire;
use rand::Rng;

/// The request a cut lands in.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Write,
    Fua,
    Zeroes,
    Flush,
    Stop,
}

impl Rig {
    /// Give every device `wire` (the power goes at its member write), or
    /// take it off (`None`).
    pub(super) fn arm_tripwire(&self, wire: Option<&std::sync::Arc<Tripwire>>) {
        for v in &self.vols {
            v.set_tripwire(wire.cloned());
        }
    }

    /// With cuts inside requests on, one operation in twelve (drawn from
    /// their own stream) is a request with the power set to go at one of
    /// its member writes. Whether this operation was one.
    pub(super) fn inside_step(&mut self, strict: bool) -> Result<bool, String> {
        // Behind a cache tier the request would reach the cache's devices
        // too; the tripwire holds the array's members only.
        if self.tier.is_some() || !strict {
            return Ok(false);
        }
        let Some(rng) = self.inside.as_mut() else {
            return Ok(false);
        };
        if !rng.gen_ratio(1, 12) {
            return Ok(false);
        }
        let kind = match rng.gen_range(0..10u32) {
            0..=3 => Kind::Write,
            4 => Kind::Fua,
            5 => Kind::Zeroes,
            6..=7 => Kind::Flush,
            _ => Kind::Stop,
        };
        let at_write = rng.gen_range(1..=16u64);
        let size = self.model.size();
        let sectors = size / super::model::SECTOR;
        let off = rng.gen_range(0..sectors) * super::model::SECTOR;
        let most = (3 * self.cfg.chunk as usize).min(size - off);
        let len = rng.gen_range(1..=most);
        let data: Vec<u8> = match kind {
            Kind::Write | Kind::Fua => {
                let mut d = vec![0u8; len];
                rng.fill(&mut d[..]);
                d
            }
            _ => vec![0u8; len],
        };
        self.cut_inside(kind, at_write, off, data)?;
        Ok(true)
    }

    fn cut_inside(&mut self, kind: Kind, at_write: u64, off: usize, data: Vec<u8>) -> Outcome {
        let wire = Tripwire::new(at_write);
        self.arm_tripwire(Some(&wire));
        let at = off as u64;
        let len = data.len();
        // A stop answers with the members it recorded failed.
        let r = match kind {
            Kind::Write => self.started_mut().write(&data, at).map(|()| Vec::new()),
            Kind::Fua => self.started_mut().write_fua(&data, at).map(|()| Vec::new()),
            Kind::Zeroes => self
                .started_mut()
                .write_zeroes(at, len as u64)
                .map(|()| Vec::new()),
            Kind::Flush => self.started_mut().flush().map(|()| Vec::new()),
            Kind::Stop => match self.started.take() {
                Some(s) => s.stop(),
                None => return Err("internal: no started array to stop".into()),
            },
        };
        self.arm_tripwire(None);
        let what = match kind {
            Kind::Write => format!("write {off}+{len}"),
            Kind::Fua => format!("fua write {off}+{len}"),
            Kind::Zeroes => format!("write-zeroes {off}+{len}"),
            Kind::Flush => "flush".into(),
            Kind::Stop => "clean stop".into(),
        };
        if !wire.tripped() {
            // Fewer member writes than the cut waited for: the request ended
            // with the power on, and its answer counts.
            self.note(format!(
                "{what} (power to go at member write {at_write}, not reached): {}",
                r.as_ref().map_or_else(|e| e.to_string(), |_| "ok".into())
            ));
            if let Kind::Stop = kind {
                // As every clean stop goes on (`stop_and_start`).
                let asm = self.stopped(r)?;
                return self.start_after_stop(asm);
            }
            r.map_err(|e| format!("{what} failed within the level's tolerance: {e}"))?;
            match kind {
                Kind::Write | Kind::Zeroes => self.model.write(&data, off),
                Kind::Fua => {
                    self.model.write(&data, off);
                    self.model.fua(off, len);
                }
                Kind::Flush => self.model.flush(),
                Kind::Stop => {}
            }
            return Ok(());
        }
        self.counts.inside_cuts += 1;
        self.note(format!(
            "{what}: the power goes at member write {at_write}; the answer is never seen"
        ));
        // Unanswered: each sector the request wrote holds its old or its
        // new contents (as a write not yet flushed); a flush or a stop
        // promised nothing.
        if matches!(kind, Kind::Write | Kind::Fua | Kind::Zeroes) {
            self.model.write(&data, off);
        }
        self.power_cut(false)
    }
}
