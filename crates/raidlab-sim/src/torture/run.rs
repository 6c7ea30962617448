//! One torture run: build the array its configuration says, then for each
//! operation draw a request or a fault, carry it out on the real engine and
//! hold the answer to the model. It decides the order of things in a run
//! and what counts as a violation; what is allowed after a power cut is the
//! model's, what the engine does is the engine's.

use super::buffers::Buffers;
use super::cache::{Tier, CACHE_STREAM};
use super::config::{Config, Policy};
use super::model::{Model, SECTOR};
use super::shrink::Script;
use super::trace::TRACE;
use super::{run_seed, Counts, Options, RunResult, Violation};
use raidlab_core::clock::ManualClock;
use raidlab_core::{ErrorKind, SharedClock, Volume};
use raidlab_devices::{FaultVolume, MemVolume};
use raidlab_layout::Level;
use raidlab_raid::assemble::{create_with_executor, Assembly, CreateSpec, Device, NewMember};
use raidlab_raid::exec::{Executor, Interleaved};
use raidlab_raid::lifecycle::{Driven, StartOptions, Started};
use raidlab_raid::recovery::RunOptions;
use raidlab_raid::stripe_cache::StripeCacheConfig;
use raidlab_raid::Array;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use std::time::Duration;

pub(super) type Member = Arc<FaultVolume<MemVolume>>;

/// A bug planted in the harness's world, behind the engine's back, to prove
/// the checker fails when data goes wrong (tests only; never on by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plant {
    /// Halfway through, after a flush, one byte of member 0's data area is
    /// flipped on the medium; the whole array is then read.
    FlipMemberByte,
    /// Halfway through, after a flush, a power cut; before power comes back
    /// every member's data area is zeroed on the medium: flushed writes lost.
    LoseFlushedWrites,
    /// With a cache tier, halfway through, after a flush through the cache:
    /// the cache device's data area is zeroed on the medium (its table kept);
    /// the whole volume is then read through the cache.
    WipeCacheData,
}

/// Mixed into the run's seed for the stream of the stale-member faults.
const STALE_STREAM: u64 = 0x57a1_e000_5eed_0001;
/// Mixed into the run's seed for the stream of the misdirected I/O.
const MISDIRECT_STREAM: u64 = 0x3d1e_c7ed_5eed_0002;
/// The stream of the cuts inside requests (`inside.rs`).
const INSIDE_STREAM: u64 = 0x1d51_de00_5eed_0003;
/// The stream of the requests in flight together (`batch.rs`).
const DEPTH_STREAM: u64 = 0xde97_4500_5eed_0004;

pub(super) struct Rig {
    pub(super) cfg: Config,
    pub(super) rng: ChaCha8Rng,
    pub(super) clock: Arc<ManualClock>,
    pub(super) exec: Arc<dyn Executor>,
    /// Every device made for the run; index = the number in its path.
    pub(super) vols: Vec<Member>,
    pub(super) paths: Vec<String>,
    /// Failed for good (every I/O refused): left out of every assembly, as
    /// md cannot read a dead disk's superblock.
    pub(super) dead: Vec<bool>,
    /// Any fault injected (latent read errors, write errors, dead).
    pub(super) faulty: Vec<bool>,
    /// Latent read errors injected: (device, device byte range).
    pub(super) latent: Vec<(usize, std::ops::Range<u64>)>,
    pub(super) started: Option<Started>,
    pub(super) model: Model,
    /// Once beyond the level's tolerance, for the rest of the run.
    pub(super) beyond: bool,
    pub(super) counts: Counts,
    pub(super) hash: u64,
    pub(super) trace: Vec<String>,
    pub(super) op: usize,
    /// Print every event as it happens (`RAIDLAB_TORTURE_LIVE`): for a run
    /// that hangs, whose trace would never be printed.
    pub(super) live: bool,
    /// Leave out the faults that hit the engine's known open gaps
    /// (docs/reliability.md; which ones: `gaps.rs`).
    pub(super) known_gaps: bool,
    /// Members that leave and come back (`stale.rs`): their own random
    /// stream, so a run without them draws exactly what it drew before
    /// they existed.
    pub(super) stale: Option<ChaCha8Rng>,
    /// The device that is away now, if one is.
    pub(super) away: Option<usize>,
    /// The cache tier in front (`cache.rs`), when the run drew one.
    pub(super) tier: Option<Tier>,
    /// Misdirected member I/O (`faults.rs`): its own random stream, so a
    /// run without it draws exactly what it drew before it existed.
    pub(super) misdirect: Option<ChaCha8Rng>,
    /// The stream of the cuts inside requests (`inside.rs`), when on.
    pub(super) inside: Option<ChaCha8Rng>,
    /// The stream of the requests in flight together (`batch.rs`), when on.
    pub(super) depth: Option<ChaCha8Rng>,
    /// Stacks of the batches' finished tasks, for the next ones.
    pub(super) stacks: raidlab_core::task::Stacks,
    /// A misdirected write struck: the array holds data md cannot tell
    /// wrong, and the run ends (nothing is promised from there).
    pub(super) corrupt: bool,
    /// A cut tore more members' superblocks than the level can lose and
    /// the start refused the rest, as md's would: the run ends there.
    pub(super) lost: bool,
    /// Recording where each operation's draws begin, or replaying only
    /// some operations from there (`shrink.rs`).
    pub(super) script: Script,
    /// Events kept in the trace: the last [`TRACE`], all for a shrunk run.
    pub(super) trace_cap: usize,
    pub(super) bufs: Buffers,
}

pub(super) type Outcome = Result<(), String>;

/// Run `run` of `seed`: `ops` operations on a configuration of `level` (any
/// when `None`), with `plant` if given.
pub fn run_one(
    seed: u64,
    run: u64,
    ops: usize,
    level: Option<Level>,
    plant: Option<Plant>,
) -> RunResult {
    run_with(seed, run, ops, level, plant, false)
}

/// [`run_one`], leaving out the faults that hit the engine's known open
/// gaps when `skip_known_gaps`.
pub fn run_with(
    seed: u64,
    run: u64,
    ops: usize,
    level: Option<Level>,
    plant: Option<Plant>,
    skip_known_gaps: bool,
) -> RunResult {
    let opts = Options {
        seed,
        first_run: run,
        runs: 1,
        ops,
        level,
        skip_known_gaps,
        stale_members: false,
        cache_tier: false,
        misdirected: false,
        cuts_inside: false,
        queue_depths: false,
    };
    run_opts(&opts, run, plant)
}

/// Run `run` of the sweep `opts` describes, with `plant` if given.
pub fn run_opts(opts: &Options, run: u64, plant: Option<Plant>) -> RunResult {
    run_rig(opts, run, plant).0
}

/// [`run_opts`], also giving back the run's world as it ended (the array
/// still started when the run passed), for a caller that looks at the
/// members afterwards (`images.rs`).
pub(super) fn run_rig(opts: &Options, run: u64, plant: Option<Plant>) -> (RunResult, Rig) {
    run_scripted(opts, run, plant, Script::Off)
}

/// [`run_rig`], recording each operation's start in the random streams or
/// replaying only some operations (`shrink.rs`).
pub(super) fn run_scripted(
    opts: &Options,
    run: u64,
    plant: Option<Plant>,
    script: Script,
) -> (RunResult, Rig) {
    let Options {
        seed,
        ops,
        level,
        skip_known_gaps,
        stale_members,
        cache_tier,
        misdirected,
        cuts_inside,
        queue_depths,
        ..
    } = *opts;
    let mut rng = ChaCha8Rng::seed_from_u64(run_seed(seed, run));
    let cfg = Config::random(&mut rng, level);
    let mut rig = Rig {
        cfg,
        rng,
        clock: ManualClock::new(),
        // In order on this thread; a task (`batch.rs`) also gives control
        // back before each I/O step.
        exec: Arc::new(Interleaved),
        vols: Vec::new(),
        paths: Vec::new(),
        dead: Vec::new(),
        faulty: Vec::new(),
        latent: Vec::new(),
        started: None,
        model: Model::new(0),
        beyond: false,
        counts: Counts::default(),
        hash: 0xcbf2_9ce4_8422_2325,
        trace: Vec::new(),
        op: 0,
        live: std::env::var_os("RAIDLAB_TORTURE_LIVE").is_some(),
        known_gaps: skip_known_gaps,
        stale: stale_members.then(|| ChaCha8Rng::seed_from_u64(run_seed(seed, run) ^ STALE_STREAM)),
        away: None,
        tier: None,
        misdirect: misdirected
            .then(|| ChaCha8Rng::seed_from_u64(run_seed(seed, run) ^ MISDIRECT_STREAM)),
        corrupt: false,
        lost: false,
        inside: cuts_inside.then(|| ChaCha8Rng::seed_from_u64(run_seed(seed, run) ^ INSIDE_STREAM)),
        depth: queue_depths.then(|| ChaCha8Rng::seed_from_u64(run_seed(seed, run) ^ DEPTH_STREAM)),
        stacks: raidlab_core::task::Stacks::default(),
        trace_cap: if matches!(script, Script::Replay(_)) {
            usize::MAX
        } else {
            TRACE
        },
        script,
        bufs: Buffers::new(),
    };
    rig.note(format!("config {}", cfg.label()));
    let cache = cache_tier.then(|| ChaCha8Rng::seed_from_u64(run_seed(seed, run) ^ CACHE_STREAM));
    let outcome = rig
        .create()
        .and_then(|()| cache.map_or(Ok(()), |c| rig.create_tier(c)))
        .and_then(|()| rig.workload(ops, plant));
    let violation = outcome.err().map(|what| Violation {
        op: rig.op,
        what,
        trace: rig.trace.clone(),
    });
    if rig.beyond {
        rig.counts.beyond_tolerance = 1;
    }
    rig.counts.member_ios = rig
        .vols
        .iter()
        .map(|v| {
            let s = v.stats();
            s.reads + s.writes + s.flushes + s.discards
        })
        .sum();
    let result = RunResult {
        seed,
        run,
        config: cfg,
        level,
        skip_known_gaps,
        stale_members,
        cache_tier,
        misdirected,
        cuts_inside,
        queue_depths,
        hash: rig.hash,
        counts: rig.counts.clone(),
        violation,
    };
    (result, rig)
}

pub(super) fn quiet(_: raidlab_raid::recovery::Progress) {}

impl Rig {
    pub(super) fn new_device(&mut self) -> Device {
        self.new_device_of(self.cfg.device_bytes())
    }

    pub(super) fn new_device_of(&mut self, bytes: u64) -> Device {
        let v = Arc::new(FaultVolume::with_volatile_cache(MemVolume::new(bytes)));
        let path = format!("mem{}", self.vols.len());
        self.vols.push(v.clone());
        self.paths.push(path.clone());
        self.dead.push(false);
        self.faulty.push(false);
        Device { path, volume: v }
    }

    pub(super) fn live_devices(&self) -> Vec<Device> {
        (0..self.vols.len())
            .filter(|&i| !self.dead[i])
            .map(|i| Device {
                path: self.paths[i].clone(),
                volume: self.vols[i].clone(),
            })
            .collect()
    }

    pub(super) fn start_options(&self, force: bool) -> StartOptions {
        StartOptions {
            write: true,
            force,
            resync_unclean: true,
            stripe_cache: Some(StripeCacheConfig {
                stripes: if self.cfg.stripe_cache { 4 } else { 0 },
                hold: Duration::from_millis(20),
                // md's 256, as served arrays keep: the harness's small
                // arrays then find their rows kept often enough for a
                // stale one to show (`planted.rs`' hunt for one).
                kept_rows: 256,
            }),
            ..StartOptions::default()
        }
    }

    pub(super) fn start(&mut self, asm: Assembly, force: bool) -> raidlab_core::Result<()> {
        let driven = Driven {
            executor: self.exec.clone(),
            clock: self.clock.clone() as SharedClock,
        };
        let s = Started::start_with(asm, self.start_options(force), Some(driven))?;
        self.note(format!(
            "started: resync {:?} ppl {:?} journal {:?}",
            s.report.resync.as_ref().map(|r| r.mismatch_sectors),
            s.report.ppl.as_ref().map(|r| r.entries_replayed),
            s.report.journal.as_ref().map(|r| r.stripes_replayed)
        ));
        self.started = Some(s);
        // The cache in front opens once the array under it is started.
        self.open_front()
    }

    pub(super) fn array(&self) -> Arc<Array> {
        self.started
            .as_ref()
            .map(|s| s.array.clone())
            .expect("the harness keeps the array started between operations")
    }

    pub(super) fn started_mut(&mut self) -> &mut Started {
        self.started
            .as_mut()
            .expect("the harness keeps the array started between operations")
    }

    pub(super) fn run_options(&self) -> RunOptions {
        RunOptions {
            use_maps: false,
            clock: Some(self.clock.clone() as SharedClock),
            // A copy interrupted mid-way must have read the same member
            // requests on every machine: no reader runs ahead of the writer.
            read_ahead: false,
            ..RunOptions::default()
        }
    }

    pub(super) fn create(&mut self) -> Outcome {
        let c = self.cfg;
        let members: Vec<NewMember> = (0..c.members)
            .map(|_| NewMember {
                device: self.new_device(),
                zeroed: true,
            })
            .collect();
        // A ring that holds the widest stripe of any configuration (6 x 64K).
        let journal = (c.policy == Policy::Journal).then(|| NewMember {
            device: self.new_device_of((1 << 20) + (2 << 20)),
            zeroed: true,
        });
        let spec = CreateSpec {
            level: c.level,
            layout: c.layout,
            chunk_bytes: c.chunk,
            spares: 0,
            name: "torture".into(),
            force: true,
            bitmap: c.policy == Policy::Bitmap,
            bitmap_chunk: (c.policy == Policy::Bitmap).then_some(16 << 10),
            ppl: c.policy == Policy::Ppl,
        };
        // The superblocks are written in order on this thread, as every
        // other member I/O of the run (and no I/O thread is woken for them).
        let asm = create_with_executor(&spec, members, journal, c.metadata, self.exec.clone())
            .map_err(|e| format!("create: {e}"))?;
        self.start(asm, false)
            .map_err(|e| format!("first start: {e}"))?;
        self.model = Model::new(self.array().size() as usize);
        Ok(())
    }

    /// Roles the array cannot count on: missing, taken out, or on a device
    /// with a fault injected.
    pub(super) fn troubled_roles(&self) -> Vec<usize> {
        let Some(s) = &self.started else {
            return Vec::new();
        };
        let failed = s.array.failed_members();
        let asm = s.asm();
        (0..asm.slots.len())
            .filter(|&r| match asm.slots[r] {
                None => true,
                Some(i) => {
                    failed.contains(&r) || self.device_of(&asm, i).map_or(true, |d| self.faulty[d])
                }
            })
            .collect()
    }

    pub(super) fn device_of(&self, asm: &Assembly, member: usize) -> Option<usize> {
        let p = &asm.members.get(member)?.device.path;
        self.paths.iter().position(|q| q == p)
    }

    pub(super) fn tolerated(&self, roles: &[usize]) -> bool {
        self.started
            .as_ref()
            .is_some_and(|s| s.asm().geometry.survives(roles))
    }

    pub(super) fn strict(&mut self) -> bool {
        if !self.beyond && !self.tolerated(&self.troubled_roles()) {
            self.beyond = true;
            self.note("beyond the level's tolerance".into());
        }
        !self.beyond
    }

    pub(super) fn workload(&mut self, ops: usize, plant: Option<Plant>) -> Outcome {
        for op in 0..ops {
            if self.lost {
                return Ok(());
            }
            self.op = op;
            if !self.script_step(op) {
                continue;
            }
            self.counts.ops += 1;
            if plant.is_some() && op == ops / 2 {
                self.plant(plant)?;
                continue;
            }
            let strict = self.strict();
            if self.stale_step(strict)?
                || self.cache_step(strict)?
                || self.misdirect_step(strict)?
                || self.inside_step(strict)?
                || self.batch_step(strict)?
            {
                if self.corrupt {
                    return Ok(());
                }
                continue;
            }
            let r = self.rng.gen_range(0..100u32);
            match r {
                0..=29 | 89..=99 => self.write(strict, false)?,
                30..=47 => self.read(strict)?,
                48..=55 => self.flush(strict)?,
                56..=60 => self.write(strict, true)?,
                61..=63 => self.trim(strict)?,
                64..=66 => self.zeroes(strict)?,
                67..=71 => self.tick(strict)?,
                72..=74 => self.fail_member()?,
                75..=76 => self.latent_errors()?,
                77..=78 => self.write_errors()?,
                // A complete array gets md's replace; one with a role in
                // trouble gets a spare and a rebuild.
                79..=80 if strict && self.troubled_roles().is_empty() => self.replace_member()?,
                79..=80 if strict => self.spare_and_rebuild()?,
                81..=82 if strict => self.check(op % 2 == 1)?,
                83..=85 if strict => self.stop_and_start()?,
                86..=88 if strict => self.power_cut(false)?,
                _ => self.read(strict)?,
            }
        }
        self.op = ops;
        if self.lost {
            return Ok(());
        }
        if self.strict() {
            // Everything written back: the origin alone reads the model.
            self.write_back_all()?;
            self.stop_and_start()?;
            self.check(false)?;
        } else {
            self.end_beyond_tolerance()?;
        }
        Ok(())
    }

    pub(super) fn range(&mut self) -> (usize, usize) {
        let size = self.model.size();
        let chunk = self.cfg.chunk as usize;
        let g = *self.array().geometry();
        let stripe = if g.is_parity() {
            chunk * g.data_disks()
        } else {
            chunk * g.raid_disks
        };
        let (off, len) = match self.rng.gen_range(0..5u32) {
            0 | 1 => {
                let len = self.rng.gen_range(1..=chunk / SECTOR) * SECTOR;
                (self.rng.gen_range(0..size / SECTOR) * SECTOR, len)
            }
            2 => (
                self.rng.gen_range(0..size / 4096) * 4096,
                self.rng.gen_range(1..=4usize) * 4096,
            ),
            3 => {
                let stripes = (size / stripe).max(1);
                let first = self.rng.gen_range(0..stripes);
                (first * stripe, self.rng.gen_range(1..=2usize) * stripe)
            }
            _ => (
                self.rng.gen_range(0..size),
                self.rng.gen_range(1..=3 * chunk),
            ),
        };
        let off = off.min(size - 1);
        (off, len.clamp(1, size - off))
    }

    pub(super) fn write(&mut self, strict: bool, fua: bool) -> Outcome {
        let (off, len) = self.range();
        let mut data = self.take_data(len);
        self.rng.fill(&mut data[..]);
        let at = off as u64;
        let r = match self.through_front(|v| {
            if fua {
                v.write_at_fua(&data, at)
            } else {
                v.write_at(&data, at)
            }
        }) {
            Some(r) => r,
            // Through the start's FUA write: acknowledged once the members
            // the array took out are recorded faulty, as a served array's.
            None if fua => self.started_mut().write_fua(&data, at),
            // Through the start, as a served array's: acknowledged once a
            // member the write took out is recorded faulty.
            None => self.started_mut().write(&data, at),
        };
        self.counts.writes += 1;
        self.note(format!(
            "{} {off}+{len}: {}",
            if fua { "fua write" } else { "write" },
            r.as_ref().map_or_else(|e| e.to_string(), |_| "ok".into())
        ));
        let out = match r {
            Ok(()) => {
                self.model.write(&data, off);
                if fua {
                    self.model.fua(off, len);
                }
                Ok(())
            }
            Err(e) if strict => Err(format!(
                "write {off}+{len} failed within the level's tolerance: {e}"
            )),
            Err(_) => {
                self.model.forget(off, len);
                Ok(())
            }
        };
        self.give_data(data);
        out
    }

    pub(super) fn read(&mut self, strict: bool) -> Outcome {
        let (off, len) = self.range();
        self.read_range(strict, off, len)
    }

    pub(super) fn flush(&mut self, strict: bool) -> Outcome {
        let r = match self.through_front(|v| v.flush()) {
            Some(r) => r,
            None => self.started_mut().flush(),
        };
        self.counts.flushes += 1;
        self.note(format!(
            "flush: {}",
            r.as_ref().map_or_else(|e| e.to_string(), |_| "ok".into())
        ));
        match r {
            Ok(()) => {
                self.model.flush();
                Ok(())
            }
            Err(e) if strict => Err(format!("flush failed within the level's tolerance: {e}")),
            Err(_) => {
                // Beyond the tolerance the flush reported that writes since
                // the last flush may be lost (held stripes it could not
                // write out are dropped): those sectors may read as anything
                // until written again. Nothing durable is released.
                let pending: Vec<usize> = self.model.pending_sectors().collect();
                for s in pending {
                    self.model.allow_any(s);
                }
                Ok(())
            }
        }
    }

    pub(super) fn trim(&mut self, strict: bool) -> Outcome {
        let (off, len) = self.range();
        let zeroes = self
            .front()
            .map_or_else(|| self.array().discard_zeroes(), |v| v.discard_zeroes());
        let r = match self.through_front(|v| v.discard(off as u64, len as u64)) {
            Some(r) => r,
            None => self.started_mut().discard(off as u64, len as u64),
        };
        self.note(format!(
            "trim {off}+{len}: {}",
            r.as_ref().map_or_else(|e| e.to_string(), |_| "ok".into())
        ));
        match r {
            Ok(()) if zeroes => {
                self.model.write_zeroes(off, len);
                Ok(())
            }
            // Forgotten, with no promise of what reads return.
            Ok(()) => {
                self.model.forget(off, len);
                Ok(())
            }
            Err(e)
                if e.kind == ErrorKind::Unsupported
                    && (self.cfg.has_parity() || self.tier.is_some()) =>
            {
                Ok(())
            }
            Err(e) if strict => Err(format!("trim {off}+{len} failed: {e}")),
            Err(_) => {
                self.model.forget(off, len);
                Ok(())
            }
        }
    }

    pub(super) fn zeroes(&mut self, strict: bool) -> Outcome {
        let (off, len) = self.range();
        let r = match self.through_front(|v| v.write_zeroes(off as u64, len as u64)) {
            Some(r) => r,
            None => self.started_mut().write_zeroes(off as u64, len as u64),
        };
        self.note(format!(
            "write-zeroes {off}+{len}: {}",
            r.as_ref().map_or_else(|e| e.to_string(), |_| "ok".into())
        ));
        match r {
            Ok(()) => {
                self.model.write_zeroes(off, len);
                Ok(())
            }
            Err(e) if strict => Err(format!("write-zeroes {off}+{len} failed: {e}")),
            Err(_) => {
                self.model.forget(off, len);
                Ok(())
            }
        }
    }

    /// Virtual time passes: held stripes past their hold time go down, one
    /// at a time, as the stripe cache's thread would write them.
    pub(super) fn tick(&mut self, strict: bool) -> Outcome {
        let ms = self.rng.gen_range(1..=40u64);
        self.clock.advance(Duration::from_millis(ms));
        let array = self.array();
        let mut n = 0;
        loop {
            match array.write_out_one_expired() {
                Ok(true) => n += 1,
                Ok(false) => break,
                Err(e) if strict => return Err(format!("writing out expired stripes failed: {e}")),
                Err(_) => break,
            }
        }
        self.note(format!("tick {ms} ms: {n} stripe(s) written out"));
        self.clean_tick(strict)
    }
}
