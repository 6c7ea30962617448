//! The cache tier in front (`--cache-tier`): raidlab-cache's `CachedVolume`
//! (write-back, write-through or write-around) over the run's array or over
//! a plain in-memory "file", on a cache device that is an in-memory volume
//! with a volatile write cache, as the members are. The workload's reads,
//! writes, flushes, FUA writes, trims and write-zeroes go through it, and
//! the model checks what reads through it return.
//!
//! It decides whether a run has a cache, its mode, its origin and its
//! tunables, when the cache alone is stopped and opened again, when every
//! dirty block is written back (and then that the origin alone reads as the
//! model says), and what a power cut does to the cache device and the file.
//! Its draws come from a random stream of its own, so a run without
//! `--cache-tier` (or one with it that draws no cache) draws exactly what it
//! drew before. It must never decide anything the cache decides: the cache
//! is created with `raidlab_cache::create`, opened (after a clean stop or a
//! power cut alike) with `CachedVolume::open`, which does the product's own
//! recovery, stopped with `shutdown` and written back with `flush_dirty`, as
//! the `cache` verbs and `serve` do; and it must never weaken what a read
//! through the cache must return.

use super::model::SECTOR;
use super::run::{Member, Outcome, Rig};
use super::trace::digest;
use raidlab_cache::format::Layout;
use raidlab_cache::{CachedVolume, Config, Mode, OriginId, Policy};
use raidlab_core::{Layer, Result, SharedClock, Volume};
use raidlab_devices::{FaultVolume, MemVolume};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// Mixed into the run's seed for the cache tier's stream.
pub(super) const CACHE_STREAM: u64 = 0xcac4_e000_5eed_0002;

/// The file origin's identity (a file's signature, as `path_identity` makes
/// one for a real file).
const FILE_ORIGIN: OriginId = OriginId::Signature(*b"raidlab torture file origin\0\0\0\0\0");

pub(super) type Front = CachedVolume<Member, Arc<dyn Volume>>;

/// What the cache is in front of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The run's array (assembled, started and stopped as without a cache).
    Array,
    /// A plain in-memory volume of the array's size; the array is then
    /// left alone (no member faults: they would not reach the workload).
    File,
}

/// The sectors of the origin written (not FUA) since its last completed
/// flush: where md's write hole may reach after a power cut, which with a
/// cache in front is where the cache wrote, not where the workload did.
type Written = Arc<Mutex<BTreeSet<usize>>>;

/// The origin as the cache sees it: every request passed on unchanged,
/// only what was written since the last flush noted (harness bookkeeping).
struct Noted {
    below: Arc<dyn Volume>,
    written: Written,
}

impl Noted {
    fn note(&self, offset: u64, len: u64) {
        let first = offset as usize / SECTOR;
        let end = (offset + len).div_ceil(SECTOR as u64) as usize;
        let mut w = self.written.lock().unwrap_or_else(|p| p.into_inner());
        w.extend(first..end);
    }
}

impl Layer for Noted {
    fn below(&self) -> &dyn Volume {
        self.below.as_ref()
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.note(offset, buf.len() as u64);
        self.below.write_at(buf, offset)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        self.note(offset, len);
        self.below.write_zeroes(offset, len)
    }
    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        self.note(offset, len);
        self.below.discard(offset, len)
    }
    fn flush(&self) -> Result<()> {
        self.below.flush()?;
        self.written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        Ok(())
    }
}

/// A run's cache tier.
pub(super) struct Tier {
    pub(super) rng: ChaCha8Rng,
    pub(super) origin: Origin,
    pub(super) config: Config,
    /// The cache device.
    pub(super) dev: Member,
    /// The plain origin, for [`Origin::File`].
    pub(super) file: Option<Member>,
    /// The cache, while open.
    pub(super) vol: Option<Arc<Front>>,
    pub(super) written: Written,
    /// The next open follows a power cut (counted as a recovery).
    pub(super) after_cut: bool,
}

pub(super) fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::WriteBack => "write-back",
        Mode::WriteThrough => "write-through",
        Mode::WriteAround => "write-around",
    }
}

impl Rig {
    /// The open cache, when the run has one.
    pub(super) fn front(&self) -> Option<Arc<Front>> {
        self.tier.as_ref().and_then(|t| t.vol.clone())
    }

    /// Whether the workload goes to a plain file, not the array.
    pub(super) fn file_origin(&self) -> bool {
        self.tier.as_ref().is_some_and(|t| t.origin == Origin::File)
    }

    /// After the array's first start: draw (from the cache stream) whether
    /// the run has a cache tier, and create and open it.
    pub(super) fn create_tier(&mut self, mut rng: ChaCha8Rng) -> Outcome {
        if !rng.gen_ratio(2, 3) {
            self.note("no cache tier".into());
            return Ok(());
        }
        let mode = [Mode::WriteBack, Mode::WriteThrough, Mode::WriteAround][rng.gen_range(0..3)];
        let origin = if rng.gen_bool(0.5) {
            Origin::Array
        } else {
            Origin::File
        };
        let block_size = [4u32 << 10, 8 << 10, 16 << 10][rng.gen_range(0..3)];
        let blocks = [8u64, 32, 128][rng.gen_range(0..3)];
        let config = Config {
            mode,
            block_size,
            policy: Policy::TwoQ,
            sequential_cutoff: if rng.gen_bool(0.5) { 0 } else { 64 << 10 },
            dirty_target_pct: [10u8, 50][rng.gen_range(0..2)],
            clean_rate: 0,
            promote_threshold: rng.gen_range(1..=2),
        };
        let bytes = Layout::for_blocks(blocks)
            .and_then(|l| l.device_bytes(block_size))
            .ok_or("internal: cache layout")?;
        let dev = Arc::new(FaultVolume::with_volatile_cache(MemVolume::new(bytes)));
        let size = self.array().size();
        let file = (origin == Origin::File)
            .then(|| Arc::new(FaultVolume::with_volatile_cache(MemVolume::new(size))));
        self.note(format!(
            "cache tier: {} over {}, {blocks} blocks of {}K, cutoff {}, dirty target {}%, promote after {}",
            mode_name(mode),
            match origin {
                Origin::Array => "the array",
                Origin::File => "a file",
            },
            block_size >> 10,
            config.sequential_cutoff,
            config.dirty_target_pct,
            config.promote_threshold
        ));
        self.tier = Some(Tier {
            rng,
            origin,
            config,
            dev,
            file,
            vol: None,
            written: Arc::default(),
            after_cut: false,
        });
        self.counts.cache_runs = 1;
        let origin = self.origin_volume().ok_or("internal: no origin")?;
        let (id, label) = self.origin_id();
        let t = self.tier.as_ref().ok_or("internal: no tier")?;
        raidlab_cache::create(&t.dev, &origin, id, &label, [0x7c; 16], t.config)
            .map_err(|e| format!("cache create: {e}"))?;
        self.open_front().map_err(|e| format!("cache open: {e}"))
    }

    fn origin_id(&self) -> (OriginId, String) {
        match (self.file_origin(), &self.started) {
            (false, Some(s)) => (OriginId::ArrayUuid(s.asm().uuid), "array torture".into()),
            _ => (FILE_ORIGIN, "file".into()),
        }
    }

    /// The origin as it is now (the array's current start, or the file).
    fn bare_origin(&self) -> Option<Arc<dyn Volume>> {
        let t = self.tier.as_ref()?;
        match &t.file {
            Some(f) => Some(f.clone() as Arc<dyn Volume>),
            None => Some(self.started.as_ref()?.array.clone() as Arc<dyn Volume>),
        }
    }

    fn origin_volume(&self) -> Option<Arc<dyn Volume>> {
        let t = self.tier.as_ref()?;
        Some(Arc::new(Noted {
            below: self.bare_origin()?,
            written: t.written.clone(),
        }))
    }

    /// Open the cache over the origin with the product's open (its recovery
    /// after an unclean stop), once the array under it is started.
    pub(super) fn open_front(&mut self) -> raidlab_core::Result<()> {
        let Some(origin) = self.origin_volume() else {
            return Ok(());
        };
        let (id, _) = self.origin_id();
        let clock = self.clock.clone() as SharedClock;
        let Some(t) = self.tier.as_mut() else {
            return Ok(());
        };
        if t.vol.is_some() {
            return Ok(());
        }
        let v = CachedVolume::open(t.dev.clone(), origin, id, clock).map_err(|mut e| {
            e.message = format!("the cache's open: {}", e.message);
            e
        })?;
        let after_cut = std::mem::take(&mut t.after_cut);
        let s = v.stats();
        t.vol = Some(Arc::new(v));
        if after_cut {
            self.counts.cache_recoveries += 1;
        }
        self.note(format!(
            "cache opened{}: {} block(s) held, {} dirty",
            if after_cut { " after the cut" } else { "" },
            s.occupied_blocks,
            s.dirty_blocks
        ));
        Ok(())
    }

    /// The cache's clean stop (`shutdown`, as `serve` stops it), before the
    /// array under it stops.
    pub(super) fn close_front(&mut self) -> Outcome {
        let Some(v) = self.tier.as_mut().and_then(|t| t.vol.take()) else {
            return Ok(());
        };
        let r = v.shutdown();
        self.note(format!(
            "cache stopped: {}",
            r.as_ref().map_or_else(|e| e.to_string(), |_| "ok".into())
        ));
        r.map_err(|e| format!("the cache's clean stop failed: {e}"))?;
        self.record()
    }

    /// The power goes on the cache device and the file as on the members:
    /// the cache is dropped unstopped and its devices keep, drop or tear
    /// their unflushed writes.
    pub(super) fn cut_tier(&mut self) -> Outcome {
        let Some(t) = self.tier.as_mut() else {
            return Ok(());
        };
        t.vol = None;
        t.after_cut = true;
        let mut devs = vec![t.dev.clone()];
        devs.extend(t.file.clone());
        let mut said = Vec::new();
        for d in devs {
            let r = d
                .power_cut(t.rng.gen())
                .map_err(|e| format!("power cut of the cache tier: {e}"))?;
            d.restart();
            said.push(format!(
                "dropped {} kept {} torn {}",
                r.dropped, r.kept, r.torn
            ));
        }
        self.note(format!("cache tier cut: {}", said.join("; ")));
        Ok(())
    }

    /// Sectors of the origin written since its last flush (then forgotten:
    /// after the cut and the recovery the origin starts afresh).
    pub(super) fn origin_pending(&mut self) -> Vec<usize> {
        let Some(t) = self.tier.as_ref() else {
            return Vec::new();
        };
        let mut w = t.written.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *w).into_iter().collect()
    }

    /// A request through the cache, acknowledged once the members the array
    /// took out are recorded faulty, as a served cache's; `None` without one.
    pub(super) fn through_front(
        &mut self,
        f: impl FnOnce(&Front) -> raidlab_core::Result<()>,
    ) -> Option<raidlab_core::Result<()>> {
        let v = self.front()?;
        Some(f(&v).and_then(|()| self.record().map_err(raidlab_core::Error::invalid)))
    }

    /// Record the members the array took out before a request through the
    /// cache is acknowledged, as `serve`'s array under a cache does.
    pub(super) fn record(&mut self) -> Outcome {
        if self.front().is_none() || self.file_origin() {
            return Ok(());
        }
        let strict = !self.beyond;
        match self.started.as_mut().map(|s| s.record_failures()) {
            Some(Err(e)) if strict => Err(format!("record failed members: {e}")),
            _ => Ok(()),
        }
    }

    /// Virtual time passed: the cleaner's tick, as its thread would.
    pub(super) fn clean_tick(&mut self, strict: bool) -> Outcome {
        let Some(v) = self.front() else {
            return Ok(());
        };
        let r = v.clean_tick();
        self.note(format!(
            "cache clean tick: {}",
            r.as_ref()
                .map_or_else(|e| e.to_string(), |n| format!("{n} block(s)"))
        ));
        match r {
            Ok(n) => {
                self.counts.cache_written_back += n;
                self.record()
            }
            Err(e) if strict => Err(format!("cache cleaning failed: {e}")),
            Err(_) => Ok(()),
        }
    }

    /// With a cache tier, one operation in twenty-five (its own stream): the
    /// cache alone stopped and opened again, or every dirty block written
    /// back (`raidlab cache flush`). Whether this operation was one.
    pub(super) fn cache_step(&mut self, strict: bool) -> Result<bool, String> {
        let Some(t) = self.tier.as_mut() else {
            return Ok(false);
        };
        if !strict || !t.rng.gen_ratio(1, 25) {
            return Ok(false);
        }
        if t.rng.gen_bool(0.5) {
            self.close_front()?;
            self.model.flush();
            self.open_front()
                .map_err(|e| format!("the cache's open after its clean stop: {e}"))?;
            self.verify_all()?;
        } else {
            self.write_back_all()?;
        }
        Ok(true)
    }

    /// The planted bug [`super::Plant::WipeCacheData`]: after a flush
    /// through the cache, its data area zeroed behind its back, then the
    /// whole volume read through it.
    pub(super) fn wipe_cache_data(&mut self) -> Outcome {
        let Some(v) = self.front() else {
            return Ok(());
        };
        self.flush(true)?;
        let start = v.superblock().layout.data_offset;
        let dev = v.cache_device();
        let len = dev.size() - start;
        dev.inner()
            .write_at(&vec![0; len as usize], start)
            .map_err(|e| format!("planted: {e}"))?;
        self.note("planted: the cache device's data area zeroed".into());
        self.verify_all()
    }

    /// Every dirty block written back and flushed, as `raidlab cache flush`
    /// does; then the origin alone must read as the model says.
    pub(super) fn write_back_all(&mut self) -> Outcome {
        let Some(v) = self.front() else {
            return Ok(());
        };
        let r = v.flush_dirty(|_, _| {});
        self.note(format!(
            "cache write back: {}",
            r.as_ref()
                .map_or_else(|e| e.to_string(), |n| format!("{n} block(s)"))
        ));
        let n = r.map_err(|e| format!("writing every dirty block back failed: {e}"))?;
        self.counts.cache_written_back += n;
        self.record()?;
        self.model.flush();
        let left = v.stats().dirty_blocks;
        if left > 0 {
            return Err(format!(
                "{left} block(s) still dirty after writing every dirty block back"
            ));
        }
        let origin = self.bare_origin().ok_or("internal: no origin")?;
        let size = self.model.size();
        let mut got = vec![0u8; size];
        origin
            .read_at(&mut got, 0)
            .map_err(|e| format!("read of the origin alone after the write-back: {e}"))?;
        self.note(format!("origin alone: {:016x}", digest(&got)));
        match self.model.first_difference(&got, 0) {
            None => Ok(()),
            Some(i) => Err(format!(
                "after every dirty block was written back the origin alone holds wrong data at byte {i} (got {:#04x}, want {:#04x})",
                got[i], self.model.current[i]
            )),
        }
    }
}
