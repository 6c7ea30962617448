//! [`CachedVolume`]: a volume made of a cache device in front of an origin, and
//! the commit protocol that keeps it crash-safe.
//!
//! This module decides where each request goes (cache, origin, both), when the
//! mapping table is written and in what order against the data, and how dirty
//! blocks are cleaned. Which blocks to keep is [`crate::policy`]'s decision; the
//! bytes of the metadata are [`crate::format`]'s. It must never read the wall
//! clock (time comes from a [`Clock`]) and never start a thread: cleaning is a
//! step the owner calls, so the same code runs in virtual time.
//!
//! # The commit protocol
//! The mapping table on the cache device is the truth after a power cut. Three
//! rules keep it from ever pointing at wrong data:
//! 1. **Data before mapping.** Before any mapping sector is written the cache
//!    device is flushed, so every cache block the in-memory table names holds
//!    its data durably before the table on disk can name it.
//! 2. **Unmap before reuse or bypass.** A slot whose on-disk entry names a block
//!    is unmapped durably (flush, sector write, flush) before its data is
//!    overwritten with another block, and before a write-around write to that
//!    block reaches the origin; so no stale copy is ever found after a crash.
//! 3. **Origin before clean.** A cleaned block is marked clean only after its
//!    write to the origin has been flushed.
//!
//! A user flush writes every changed mapping sector (after rule 1's flush),
//! flushes the cache device again and flushes the origin. An unclean open keeps
//! only dirty entries: a clean entry's copy and the origin may each hold a
//! different half of an unflushed write-through write, and reads must not flip
//! between them; dirty entries are the only copy and stay.
//!
//! For now every request holds one lock from start to end: simple to reason
//! about, and the price (no parallel I/O inside one cached volume) is measured
//! before anything finer is built.

use crate::format::{
    check_block_size, decode_map_sector, encode_map_sector, map_sector_offset, pick_superblock,
    Entry, Layout, MapChecker, Mode, OriginId, Policy, Superblock, ENTRIES_PER_SECTOR, MAP_SECTOR,
    SUPERBLOCK_SIZE,
};
use crate::policy::{Sequential, TwoQ};
use raidlab_core::{check_range_with, Error, ErrorKind, Op, Result, Volume};
use raidlab_devices::Clock;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// What a user chooses at create (and may change with `set`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub mode: Mode,
    pub block_size: u32,
    pub policy: Policy,
    /// Sequential runs of at least this many bytes bypass the cache; 0: never.
    /// Default 4 MiB, bcache's: streams that long gain nothing from an SSD in
    /// front of a disk that streams well, and would push out the random set.
    pub sequential_cutoff: u64,
    /// Background cleaning starts above this share of dirty blocks. Default 10%.
    pub dirty_target_pct: u8,
    /// Background cleaning rate, bytes per second; 0: as fast as the origin
    /// takes it. Default 0.
    pub clean_rate: u64,
    /// Read misses of a block before it is promoted. Default 1 (every miss).
    pub promote_threshold: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            mode: Mode::WriteThrough,
            block_size: 64 << 10,
            policy: Policy::TwoQ,
            sequential_cutoff: 4 << 20,
            dirty_target_pct: 10,
            clean_rate: 0,
            promote_threshold: 1,
        }
    }
}

/// Counters since open or the last reset, and the state now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests wholly served by the cache.
    pub read_hits: u64,
    /// Requests that found none of their blocks in the cache.
    pub read_misses: u64,
    /// Requests that found some of their blocks in the cache.
    pub read_partial_hits: u64,
    pub write_hits: u64,
    pub write_misses: u64,
    pub write_partial_hits: u64,
    /// Bytes and requests (or parts) sent to the origin without the cache, by
    /// reason: part of a sequential run over the cutoff; past the origin's last
    /// whole block; write-around mode; no clean block to evict (all dirty).
    pub bypass_sequential_bytes: u64,
    pub bypass_sequential_requests: u64,
    pub bypass_tail_bytes: u64,
    pub bypass_mode_bytes: u64,
    pub bypass_full_bytes: u64,
    /// Read misses not promoted because the block has not reached the
    /// promotion threshold yet.
    pub not_promoted: u64,
    pub promotions: u64,
    /// Blocks removed to make room for others.
    pub evictions: u64,
    /// Blocks removed because a write-around write made them stale.
    pub invalidations: u64,
    pub cleaned_blocks: u64,
    pub cleaned_bytes: u64,
    /// State now (not reset).
    pub dirty_blocks: u64,
    pub occupied_blocks: u64,
    pub cache_blocks: u64,
    pub block_size: u32,
}

impl Stats {
    pub fn dirty_bytes(&self) -> u64 {
        self.dirty_blocks * u64::from(self.block_size)
    }
}

/// A cache device in front of an origin, seen as one volume of the origin's size.
#[derive(Debug)]
pub struct CachedVolume<C, O> {
    cache: C,
    origin: O,
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    sb: Superblock,
    /// Which superblock copy holds `sb` as last written.
    sb_copy: usize,
    entries: Vec<Entry>,
    /// What the mapping table on the device says, slot by slot.
    persisted: Vec<Entry>,
    map: HashMap<u64, u64>,
    dirty: BTreeSet<u64>,
    free: Vec<u64>,
    /// Mapping sectors whose in-memory entries differ from the device.
    stale: BTreeSet<u64>,
    policy: TwoQ,
    seq: Sequential,
    stats: Stats,
    clean_cursor: u64,
    clean_credit: u64,
    last_tick: Option<Duration>,
    cache_unflushed: bool,
    origin_unflushed: bool,
    detached: bool,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panic while holding the lock is a bug already reported; the state is
    // still the one the protocol left, so carry on rather than poison every caller.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Read both superblock copies of `cache`.
fn read_superblock<C: Volume>(cache: &C) -> Result<(Superblock, usize)> {
    let mut a = vec![0u8; SUPERBLOCK_SIZE as usize];
    let mut b = vec![0u8; SUPERBLOCK_SIZE as usize];
    if cache.size() < 2 * SUPERBLOCK_SIZE {
        return Err(Error::invalid(format!(
            "{} bytes is too small to hold a cache",
            cache.size()
        ))
        .on_device(cache.name()));
    }
    cache.read_at(&mut a, 0)?;
    cache.read_at(&mut b, SUPERBLOCK_SIZE)?;
    pick_superblock(&cache.name(), &a, &b)
}

/// Read the superblock of the cache on `cache` without opening it (for detail).
pub fn examine<C: Volume>(cache: &C) -> Result<Superblock> {
    Ok(read_superblock(cache)?.0)
}

/// Write a new, empty cache on `cache` for `origin`. Nothing is written when an
/// argument is refused. A power cut during create leaves no valid superblock, so
/// a half-made cache is never opened.
pub fn create<C: Volume, O: Volume>(
    cache: &C,
    origin: &O,
    origin_id: OriginId,
    origin_label: &str,
    cache_uuid: [u8; 16],
    config: Config,
) -> Result<Superblock> {
    check_block_size(config.block_size).map_err(|e| e.on_device(cache.name()))?;
    let layout = Layout::plan(&cache.name(), cache.size(), config.block_size)?;
    let sb = Superblock {
        cache_uuid,
        generation: 1,
        origin_size: origin.size(),
        origin_id,
        origin_label: origin_label.to_string(),
        block_size: config.block_size,
        mode: config.mode,
        policy: config.policy,
        clean: true,
        dirty_target_pct: config.dirty_target_pct,
        sequential_cutoff: config.sequential_cutoff,
        clean_rate: config.clean_rate,
        promote_threshold: config.promote_threshold,
        dirty_blocks: 0,
        layout,
    };
    let encoded = sb.encode().map_err(|e| e.on_device(origin.name()))?;
    if !cache.is_writable() {
        return Err(Error::new(
            ErrorKind::ReadOnly,
            Op::Write,
            "the cache device is read-only",
        )
        .on_device(cache.name()));
    }
    // Old superblocks first, so no copy of a previous cache survives next to
    // the new one; then the empty table; the superblock last makes it valid.
    cache.write_at(&vec![0u8; 2 * SUPERBLOCK_SIZE as usize], 0)?;
    cache.flush()?;
    let per_chunk = 2048u64;
    let mut index = 0u64;
    while index < layout.map_sectors {
        let n = per_chunk.min(layout.map_sectors - index);
        let mut buf = Vec::with_capacity((n * MAP_SECTOR) as usize);
        for i in index..index + n {
            buf.extend_from_slice(&encode_map_sector(sb.instance(), i as u32, &[]));
        }
        cache.write_at(&buf, map_sector_offset(index))?;
        index += n;
    }
    cache.flush()?;
    cache.write_at_fua(&encoded, 0)?;
    Ok(sb)
}

impl<C: Volume, O: Volume> CachedVolume<C, O> {
    /// Open the cache on `cache` in front of `origin`, which must be the origin
    /// it was created for (`origin_id`) and of the size recorded.
    pub fn open(cache: C, origin: O, origin_id: OriginId, clock: Arc<dyn Clock>) -> Result<Self> {
        let (sb, sb_copy) = read_superblock(&cache)?;
        if sb.origin_id != origin_id {
            return Err(Error::invalid(format!(
                "this cache belongs to another origin ({}), not {}; give the origin it was \
                 created for, or create a new cache",
                sb.origin_label,
                origin.name()
            ))
            .on_device(cache.name()));
        }
        if sb.origin_size != origin.size() {
            return Err(Error::invalid(format!(
                "the origin {} is {} bytes but the cache recorded {}: it was resized or is \
                 another device; detach needs the original size",
                origin.name(),
                origin.size(),
                sb.origin_size
            ))
            .on_device(cache.name()));
        }
        sb.check_device(&cache.name(), cache.size())?;
        let slots = sb.layout.cache_blocks;
        let mut entries = Vec::with_capacity(slots as usize);
        let mut checker = MapChecker::default();
        let chunk = 2048u64;
        let mut index = 0;
        while index < sb.layout.map_sectors {
            let n = chunk.min(sb.layout.map_sectors - index);
            let mut buf = vec![0u8; (n * MAP_SECTOR) as usize];
            cache.read_at(&mut buf, map_sector_offset(index))?;
            for (i, sector) in buf.chunks(MAP_SECTOR as usize).enumerate() {
                let got = decode_map_sector(&sb, index + i as u64, sector)
                    .map_err(|e| e.on_device(cache.name()))?;
                for e in got {
                    if (entries.len() as u64) < slots {
                        checker
                            .add(entries.len() as u64, e)
                            .map_err(|e| e.on_device(cache.name()))?;
                        entries.push(e);
                    }
                }
            }
            index += n;
        }
        let mut st = State {
            policy: TwoQ::new(slots, sb.promote_threshold),
            persisted: entries.clone(),
            entries,
            map: HashMap::new(),
            dirty: BTreeSet::new(),
            free: Vec::new(),
            stale: BTreeSet::new(),
            seq: Sequential::default(),
            stats: Stats::default(),
            clean_cursor: 0,
            clean_credit: 0,
            last_tick: None,
            cache_unflushed: false,
            origin_unflushed: false,
            detached: false,
            sb,
            sb_copy,
        };
        let unclean = !st.sb.clean;
        for slot in (0..slots).rev() {
            match st.entries[slot as usize] {
                Entry::Free => st.free.push(slot),
                Entry::Clean(_) if unclean => {
                    st.entries[slot as usize] = Entry::Free;
                    st.stale.insert(slot / ENTRIES_PER_SECTOR as u64);
                    st.free.push(slot);
                }
                Entry::Clean(b) => {
                    st.map.insert(b, slot);
                    st.policy.insert(slot, b, false);
                }
                Entry::Dirty(b) => {
                    st.map.insert(b, slot);
                    st.dirty.insert(b);
                    st.policy.insert(slot, b, false);
                }
            }
        }
        let v = CachedVolume {
            cache,
            origin,
            clock,
            state: Mutex::new(st),
        };
        if unclean {
            let mut st = lock(&v.state);
            v.commit_stale(&mut st)?;
        }
        Ok(v)
    }

    pub fn cache_device(&self) -> &C {
        &self.cache
    }

    pub fn origin(&self) -> &O {
        &self.origin
    }

    pub fn superblock(&self) -> Superblock {
        lock(&self.state).sb.clone()
    }

    pub fn stats(&self) -> Stats {
        let st = lock(&self.state);
        let mut s = st.stats;
        s.dirty_blocks = st.dirty.len() as u64;
        s.occupied_blocks = st.map.len() as u64;
        s.cache_blocks = st.sb.layout.cache_blocks;
        s.block_size = st.sb.block_size;
        s
    }

    pub fn reset_stats(&self) {
        lock(&self.state).stats = Stats::default();
    }

    fn bs(st: &State) -> u64 {
        u64::from(st.sb.block_size)
    }

    fn slot_offset(st: &State, slot: u64) -> u64 {
        st.sb.layout.data_offset + slot * Self::bs(st)
    }

    /// Write the superblock as `st.sb` says, to the other copy, durably.
    fn write_superblock(&self, st: &mut State) -> Result<()> {
        st.sb.generation += 1;
        st.sb.dirty_blocks = st.dirty.len() as u64;
        let bytes = st.sb.encode().map_err(|e| e.on_device(self.cache.name()))?;
        let copy = 1 - st.sb_copy;
        self.cache
            .write_at_fua(&bytes, copy as u64 * SUPERBLOCK_SIZE)?;
        st.sb_copy = copy;
        Ok(())
    }

    /// Before the first change after a clean stop or open: say on the device
    /// that the table may be behind memory, so a crash is recognised.
    fn begin_change(&self, st: &mut State) -> Result<()> {
        if st.detached {
            return Err(Error::new(
                ErrorKind::Invalid,
                Op::Write,
                "the cache was detached; open the origin on its own",
            )
            .on_device(self.cache.name()));
        }
        if st.sb.clean {
            st.sb.clean = false;
            if let Err(e) = self.write_superblock(st) {
                st.sb.clean = true;
                return Err(e);
            }
        }
        Ok(())
    }

    /// Write every stale mapping sector: flush the data first (rule 1), then the
    /// sectors, then flush them.
    fn commit_stale(&self, st: &mut State) -> Result<()> {
        if st.stale.is_empty() {
            return Ok(());
        }
        self.cache.flush()?;
        st.cache_unflushed = false;
        let stale: Vec<u64> = st.stale.iter().copied().collect();
        for index in stale {
            let first = (index * ENTRIES_PER_SECTOR as u64) as usize;
            let last = (first + ENTRIES_PER_SECTOR).min(st.entries.len());
            let bytes = encode_map_sector(st.sb.instance(), index as u32, &st.entries[first..last]);
            self.cache.write_at(&bytes, map_sector_offset(index))?;
        }
        self.cache.flush()?;
        for index in std::mem::take(&mut st.stale) {
            let first = (index * ENTRIES_PER_SECTOR as u64) as usize;
            let last = (first + ENTRIES_PER_SECTOR).min(st.entries.len());
            let (mem, disk) = (&st.entries[first..last], &mut st.persisted[first..last]);
            disk.copy_from_slice(mem);
        }
        Ok(())
    }

    fn set_entry(st: &mut State, slot: u64, e: Entry) {
        st.entries[slot as usize] = e;
        st.stale.insert(slot / ENTRIES_PER_SECTOR as u64);
    }

    /// Rule 2: make sure the device's table does not name anything in `slot`.
    fn unmap_durably(&self, st: &mut State, slot: u64) -> Result<()> {
        if st.persisted[slot as usize] != Entry::Free {
            self.commit_stale(st)?;
        }
        Ok(())
    }

    /// Drop slot `slot` (clean) from memory; it becomes free.
    fn drop_slot(st: &mut State, slot: u64) {
        if let Some(b) = st.entries[slot as usize].origin_block() {
            st.map.remove(&b);
            st.dirty.remove(&b);
        }
        st.policy.remove(slot);
        Self::set_entry(st, slot, Entry::Free);
    }

    /// A slot to put a new block in: a free one, or a clean victim unmapped
    /// durably. `None` when every slot is dirty.
    fn take_slot(&self, st: &mut State) -> Result<Option<u64>> {
        let slot = match st.free.pop() {
            Some(s) => s,
            None => {
                let entries = &st.entries;
                let dirty = |s: u64| matches!(entries[s as usize], Entry::Dirty(_));
                let block_of = |s: u64| entries[s as usize].origin_block();
                let Some(s) = st.policy.victim(dirty, block_of) else {
                    return Ok(None);
                };
                Self::drop_slot(st, s);
                st.stats.evictions += 1;
                s
            }
        };
        if let Err(e) = self.unmap_durably(st, slot) {
            st.free.push(slot);
            return Err(e);
        }
        Ok(Some(slot))
    }

    /// Put block `block` with contents `data` (a whole block) in the cache.
    /// Returns false when there is no room (every slot dirty).
    fn install(&self, st: &mut State, block: u64, data: &[u8], dirty: bool) -> Result<bool> {
        let ghost = st.policy.is_ghost(block);
        let Some(slot) = self.take_slot(st)? else {
            return Ok(false);
        };
        if let Err(e) = self.cache.write_at(data, Self::slot_offset(st, slot)) {
            st.free.push(slot);
            return Err(e);
        }
        st.cache_unflushed = true;
        let e = if dirty {
            st.dirty.insert(block);
            Entry::Dirty(block)
        } else {
            Entry::Clean(block)
        };
        Self::set_entry(st, slot, e);
        st.map.insert(block, slot);
        st.policy.insert(slot, block, ghost);
        Ok(true)
    }

    /// Read `[pos, pos+buf.len())` of block `b`'s slot.
    fn read_slot(&self, st: &State, slot: u64, within: u64, buf: &mut [u8]) -> Result<()> {
        self.cache
            .read_at(buf, Self::slot_offset(st, slot) + within)
    }

    fn read_inner(&self, st: &mut State, buf: &mut [u8], offset: u64) -> Result<()> {
        let len = buf.len() as u64;
        if st.detached {
            return self.origin.read_at(buf, offset);
        }
        let seq = st.seq.note(offset, len, st.sb.sequential_cutoff);
        if seq {
            st.stats.bypass_sequential_requests += 1;
        }
        let bs = Self::bs(st);
        let origin_blocks = st.sb.origin_blocks();
        let (mut hits, mut misses) = (0u32, 0u32);
        let mut pos = 0u64;
        while pos < len {
            let abs = offset + pos;
            let b = abs / bs;
            let within = abs % bs;
            let n = (bs - within).min(len - pos);
            let piece = &mut buf[pos as usize..(pos + n) as usize];
            pos += n;
            if b >= origin_blocks {
                st.stats.bypass_tail_bytes += n;
                self.origin.read_at(piece, abs)?;
                misses += 1;
                continue;
            }
            if let Some(&slot) = st.map.get(&b) {
                self.read_slot(st, slot, within, piece)?;
                st.policy.touch(slot);
                hits += 1;
                continue;
            }
            misses += 1;
            if seq {
                st.stats.bypass_sequential_bytes += n;
                self.origin.read_at(piece, abs)?;
                continue;
            }
            if !st.policy.admit(b) {
                st.stats.not_promoted += 1;
                self.origin.read_at(piece, abs)?;
                continue;
            }
            let mut whole = vec![0u8; bs as usize];
            self.origin.read_at(&mut whole, b * bs)?;
            piece.copy_from_slice(&whole[within as usize..(within + n) as usize]);
            self.begin_change(st)?;
            if self.install(st, b, &whole, false)? {
                st.stats.promotions += 1;
            } else {
                st.stats.bypass_full_bytes += n;
            }
        }
        match (hits, misses) {
            (_, 0) => st.stats.read_hits += 1,
            (0, _) => st.stats.read_misses += 1,
            _ => st.stats.read_partial_hits += 1,
        }
        Ok(())
    }

    fn write_origin(&self, st: &mut State, data: &[u8], offset: u64) -> Result<()> {
        self.origin.write_at(data, offset)?;
        st.origin_unflushed = true;
        Ok(())
    }

    fn write_inner(&self, st: &mut State, buf: &[u8], offset: u64) -> Result<()> {
        let len = buf.len() as u64;
        if st.detached {
            return self.origin.write_at(buf, offset);
        }
        self.begin_change(st)?;
        let seq = st.seq.note(offset, len, st.sb.sequential_cutoff);
        if seq {
            st.stats.bypass_sequential_requests += 1;
        }
        let bs = Self::bs(st);
        let origin_blocks = st.sb.origin_blocks();
        let mode = st.sb.mode;
        let (mut hits, mut misses) = (0u32, 0u32);
        let mut pos = 0u64;
        while pos < len {
            let abs = offset + pos;
            let b = abs / bs;
            let within = abs % bs;
            let n = (bs - within).min(len - pos);
            let piece = &buf[pos as usize..(pos + n) as usize];
            pos += n;
            if b >= origin_blocks {
                st.stats.bypass_tail_bytes += n;
                self.write_origin(st, piece, abs)?;
                misses += 1;
                continue;
            }
            if let Some(&slot) = st.map.get(&b) {
                let is_dirty = matches!(st.entries[slot as usize], Entry::Dirty(_));
                if mode == Mode::WriteAround && !is_dirty {
                    // Rule 2: the cached copy goes, durably, before the origin
                    // changes under it.
                    Self::drop_slot(st, slot);
                    st.free.push(slot);
                    self.unmap_durably(st, slot)?;
                    st.stats.invalidations += 1;
                    st.stats.bypass_mode_bytes += n;
                    self.write_origin(st, piece, abs)?;
                    misses += 1;
                    continue;
                }
                if mode == Mode::WriteThrough && !is_dirty {
                    self.write_origin(st, piece, abs)?;
                }
                self.cache
                    .write_at(piece, Self::slot_offset(st, slot) + within)?;
                st.cache_unflushed = true;
                if mode == Mode::WriteBack && !is_dirty {
                    Self::set_entry(st, slot, Entry::Dirty(b));
                    st.dirty.insert(b);
                }
                st.policy.touch(slot);
                hits += 1;
                continue;
            }
            misses += 1;
            if mode != Mode::WriteBack {
                if mode == Mode::WriteAround {
                    st.stats.bypass_mode_bytes += n;
                }
                self.write_origin(st, piece, abs)?;
                continue;
            }
            if seq {
                st.stats.bypass_sequential_bytes += n;
                self.write_origin(st, piece, abs)?;
                continue;
            }
            let mut whole = vec![0u8; bs as usize];
            if n < bs {
                self.origin.read_at(&mut whole, b * bs)?;
            }
            whole[within as usize..(within + n) as usize].copy_from_slice(piece);
            if !self.install(st, b, &whole, true)? {
                st.stats.bypass_full_bytes += n;
                self.write_origin(st, piece, abs)?;
            }
        }
        match (hits, misses) {
            (_, 0) => st.stats.write_hits += 1,
            (0, _) => st.stats.write_misses += 1,
            _ => st.stats.write_partial_hits += 1,
        }
        Ok(())
    }

    fn flush_inner(&self, st: &mut State) -> Result<()> {
        if !st.stale.is_empty() {
            self.commit_stale(st)?;
        } else if st.cache_unflushed {
            self.cache.flush()?;
            st.cache_unflushed = false;
        }
        if st.origin_unflushed {
            self.origin.flush()?;
            st.origin_unflushed = false;
        }
        Ok(())
    }

    /// Write back up to `max_blocks` dirty blocks, in ascending origin order from
    /// where the last call stopped, merging neighbours into one origin write.
    /// With `over_target_only`, does nothing while the dirty share is within the
    /// target. Returns the blocks cleaned.
    pub fn clean_step(&self, max_blocks: u64, over_target_only: bool) -> Result<u64> {
        let mut st = lock(&self.state);
        self.clean_locked(&mut st, max_blocks, over_target_only)
    }

    fn over_target(st: &State) -> u64 {
        let allowed = st.sb.layout.cache_blocks * u64::from(st.sb.dirty_target_pct) / 100;
        (st.dirty.len() as u64).saturating_sub(allowed)
    }

    fn clean_locked(&self, st: &mut State, max_blocks: u64, over_target_only: bool) -> Result<u64> {
        let mut want = max_blocks.min(st.dirty.len() as u64);
        if over_target_only {
            want = want.min(Self::over_target(st));
        }
        if want == 0 || st.detached {
            return Ok(0);
        }
        let picked: Vec<u64> = st
            .dirty
            .range(st.clean_cursor..)
            .chain(st.dirty.range(..st.clean_cursor))
            .copied()
            .take(want as usize)
            .collect();
        let bs = Self::bs(st);
        let mut i = 0;
        while i < picked.len() {
            let mut j = i + 1;
            while j < picked.len() && picked[j] == picked[j - 1] + 1 && (j - i) < 256 {
                j += 1;
            }
            let mut buf = vec![0u8; (j - i) * bs as usize];
            for (k, &b) in picked[i..j].iter().enumerate() {
                let slot = st.map[&b];
                let piece = &mut buf[k * bs as usize..(k + 1) * bs as usize];
                self.read_slot(st, slot, 0, piece)?;
            }
            self.write_origin(st, &buf, picked[i] * bs)?;
            i = j;
        }
        // Rule 3: clean only once the origin has it durably.
        self.origin.flush()?;
        st.origin_unflushed = false;
        for &b in &picked {
            let slot = st.map[&b];
            Self::set_entry(st, slot, Entry::Clean(b));
            st.dirty.remove(&b);
        }
        st.clean_cursor = picked.last().map_or(0, |&b| b + 1);
        st.stats.cleaned_blocks += picked.len() as u64;
        st.stats.cleaned_bytes += picked.len() as u64 * bs;
        Ok(picked.len() as u64)
    }

    /// Background cleaning, paced by the clock: cleans what the configured rate
    /// allows since the last call, while the dirty share is over the target.
    /// The owner calls it as often as it likes (a thread with a real clock, or a
    /// simulator's event loop); it never sleeps.
    pub fn clean_tick(&self) -> Result<u64> {
        let now = self.clock.now();
        let mut st = lock(&self.state);
        let bs = Self::bs(&st);
        let rate = st.sb.clean_rate;
        let elapsed = st
            .last_tick
            .map_or(Duration::ZERO, |t| now.saturating_sub(t));
        st.last_tick = Some(now);
        let blocks = if rate == 0 {
            64
        } else {
            // Credit is capped at one second's worth, so an idle spell does not
            // turn into a burst that starves foreground I/O.
            let earned = (elapsed.as_nanos() * u128::from(rate) / 1_000_000_000) as u64;
            st.clean_credit = st.clean_credit.saturating_add(earned).min(rate.max(bs));
            st.clean_credit / bs
        };
        let cleaned = self.clean_locked(&mut st, blocks, true)?;
        if rate != 0 {
            st.clean_credit -= cleaned * bs;
        }
        Ok(cleaned)
    }

    /// Write every dirty block back and flush, calling `progress(done, total)`
    /// between batches. Foreground I/O goes on between batches, so the total
    /// may grow; the loop ends when nothing is dirty.
    pub fn flush_dirty(&self, mut progress: impl FnMut(u64, u64)) -> Result<u64> {
        let mut done = 0;
        loop {
            let mut st = lock(&self.state);
            let total = done + st.dirty.len() as u64;
            let n = self.clean_locked(&mut st, 64, false)?;
            done += n;
            progress(done, total);
            if n == 0 {
                self.flush_inner(&mut st)?;
                return Ok(done);
            }
        }
    }

    /// Change the mode; leaving write-back writes every dirty block back first.
    pub fn set_mode(&self, mode: Mode) -> Result<()> {
        if mode != Mode::WriteBack {
            self.flush_dirty(|_, _| {})?;
        }
        let mut st = lock(&self.state);
        if mode != Mode::WriteBack && !st.dirty.is_empty() {
            return Err(Error::new(
                ErrorKind::Busy,
                Op::Write,
                "writes made the cache dirty again while leaving write-back; retry",
            )
            .on_device(self.cache.name()));
        }
        st.sb.mode = mode;
        self.write_superblock(&mut st)
    }

    /// Change the tunables (not the mode or block size).
    pub fn set_tunables(
        &self,
        sequential_cutoff: u64,
        dirty_target_pct: u8,
        clean_rate: u64,
        promote_threshold: u32,
    ) -> Result<()> {
        let mut st = lock(&self.state);
        let mut sb = st.sb.clone();
        sb.sequential_cutoff = sequential_cutoff;
        sb.dirty_target_pct = dirty_target_pct;
        sb.clean_rate = clean_rate;
        sb.promote_threshold = promote_threshold;
        sb.check().map_err(|e| e.on_device(self.cache.name()))?;
        st.sb = sb;
        st.policy.set_promote_threshold(promote_threshold);
        self.write_superblock(&mut st)
    }

    /// A clean stop: everything flushed, the table on the device current, and
    /// the superblock saying so (the next open needs no recovery). The volume
    /// stays usable; the next change marks it unclean again.
    pub fn shutdown(&self) -> Result<()> {
        let mut st = lock(&self.state);
        if st.detached {
            return Ok(());
        }
        self.flush_inner(&mut st)?;
        st.sb.clean = true;
        self.write_superblock(&mut st)
    }

    /// Write every dirty block back, then unbind: both superblock copies are
    /// erased, so the cache can never be found again with contents the origin
    /// may since have outgrown. From then on this volume passes I/O straight
    /// to the origin.
    pub fn detach(&self) -> Result<()> {
        self.flush_dirty(|_, _| {})?;
        let mut st = lock(&self.state);
        if !st.dirty.is_empty() {
            return Err(Error::new(
                ErrorKind::Busy,
                Op::Write,
                "writes made the cache dirty again during detach; retry",
            )
            .on_device(self.cache.name()));
        }
        self.flush_inner(&mut st)?;
        self.cache
            .write_at_fua(&vec![0u8; 2 * SUPERBLOCK_SIZE as usize], 0)?;
        st.detached = true;
        Ok(())
    }
}

impl<C: Volume, O: Volume> Volume for CachedVolume<C, O> {
    fn name(&self) -> String {
        format!("cache {} over {}", self.cache.name(), self.origin.name())
    }
    fn size(&self) -> u64 {
        self.origin.size()
    }
    fn block_size(&self) -> u32 {
        self.origin.block_size()
    }
    fn is_writable(&self) -> bool {
        self.origin.is_writable() && self.cache.is_writable()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        check_range_with(
            || self.name(),
            Op::Read,
            self.size(),
            offset,
            buf.len() as u64,
        )?;
        let mut st = lock(&self.state);
        self.read_inner(&mut st, buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        check_range_with(
            || self.name(),
            Op::Write,
            self.size(),
            offset,
            buf.len() as u64,
        )?;
        let mut st = lock(&self.state);
        self.write_inner(&mut st, buf, offset)
    }
    fn flush(&self) -> Result<()> {
        let mut st = lock(&self.state);
        self.flush_inner(&mut st)
    }
    fn preferred_io_size(&self) -> Option<u64> {
        self.origin.preferred_io_size()
    }
}
