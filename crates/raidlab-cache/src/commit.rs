//! The commit protocol: when the cache's metadata reaches the device, in what
//! order against the data, and how a cache is created, opened, stopped and
//! detached.
//!
//! This module decides durability order only; it must never decide where a
//! request goes (that is [`crate::volume`]'s) or which block to evict
//! ([`crate::policy`]'s), and never write a mapping sector any other way than
//! through `commit_stale`.
//!
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
//! A write-zeroes that drops a dirty copy follows rule 3's order too: the
//! origin's zeros are flushed before the copy is unmapped ([`crate::zeroes`]).
//!
//! A user flush writes every changed mapping sector (after rule 1's flush),
//! flushes the cache device again and flushes the origin. An unclean open keeps
//! only dirty entries: a clean entry's copy and the origin may each hold a
//! different half of an unflushed write-through write, and reads must not flip
//! between them; dirty entries are the only copy and stay.

use crate::format::{
    check_block_size, decode_map_sector, encode_map_sector, map_sector_offset, pick_superblock,
    Entry, Layout, MapChecker, OriginId, Superblock, ENTRIES_PER_SECTOR, MAP_SECTOR,
    SUPERBLOCK_SIZE,
};
use crate::policy::{Sequential, TwoQ};
use crate::stats::Stats;
use crate::volume::{lock, CachedVolume, Config, State};
use raidlab_core::task::Mutex;
use raidlab_core::SharedClock;
use raidlab_core::{Error, ErrorKind, Op, Result, Volume};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::AtomicBool;

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

/// The mapping table of the cache `sb` describes, slot by slot, checked
/// sector by sector and as a whole.
fn read_table<C: Volume>(cache: &C, sb: &Superblock) -> Result<Vec<Entry>> {
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
            let got = decode_map_sector(sb, index + i as u64, sector)
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
    Ok(entries)
}

/// What the table on a cache device records, read without the origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableSummary {
    pub occupied_blocks: u64,
    pub dirty_blocks: u64,
}

/// Read the superblock and count the table's entries (for `detail`, and to
/// say how much dirty data a cache holds when it cannot be opened). A detached
/// cache holds nothing: its table is not read.
pub fn examine_table<C: Volume>(cache: &C) -> Result<(Superblock, TableSummary)> {
    let sb = examine(cache)?;
    sb.check_device(&cache.name(), cache.size())?;
    if sb.detached {
        let none = TableSummary {
            occupied_blocks: 0,
            dirty_blocks: 0,
        };
        return Ok((sb, none));
    }
    let entries = read_table(cache, &sb)?;
    let summary = TableSummary {
        occupied_blocks: entries.iter().filter(|e| **e != Entry::Free).count() as u64,
        dirty_blocks: entries
            .iter()
            .filter(|e| matches!(e, Entry::Dirty(_)))
            .count() as u64,
    };
    Ok((sb, summary))
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
        detached: false,
        failed: false,
        dirty_target_pct: config.dirty_target_pct,
        sequential_cutoff: config.sequential_cutoff,
        clean_rate: config.clean_rate,
        promote_threshold: config.promote_threshold,
        dirty_blocks: 0,
        counters: [0; crate::stats::COUNTERS],
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
    write_empty_table(cache, &sb)?;
    cache.write_at_fua(&encoded, 0)?;
    Ok(sb)
}

/// Every mapping sector of `sb`'s table, empty, flushed.
fn write_empty_table<C: Volume>(cache: &C, sb: &Superblock) -> Result<()> {
    let per_chunk = 2048u64;
    let mut index = 0u64;
    while index < sb.layout.map_sectors {
        let n = per_chunk.min(sb.layout.map_sectors - index);
        let mut buf = Vec::with_capacity((n * MAP_SECTOR) as usize);
        for i in index..index + n {
            buf.extend_from_slice(&encode_map_sector(sb.instance(), i as u32, &[]));
        }
        cache.write_at(&buf, map_sector_offset(index))?;
        index += n;
    }
    cache.flush()
}

/// Refuse `origin` unless it is the one `sb` was made for, at the size recorded.
fn check_origin<O: Volume>(
    sb: &Superblock,
    device: &str,
    origin: &O,
    origin_id: OriginId,
) -> Result<()> {
    if sb.origin_id != origin_id {
        return Err(Error::invalid(format!(
            "this cache belongs to another origin ({}), not {}; give the origin it was \
             created for, or create a new cache",
            sb.origin_label,
            origin.name()
        ))
        .on_device(device));
    }
    if sb.origin_size != origin.size() {
        return Err(Error::invalid(format!(
            "the origin {} is {} bytes but the cache recorded {}: it was resized or is \
             another device; detach needs the original size",
            origin.name(),
            origin.size(),
            sb.origin_size
        ))
        .on_device(device));
    }
    Ok(())
}

/// Bind the detached cache on `cache` to `origin` again: the origin must be
/// the one it was made for (`origin_id`), at the size recorded. The origin has
/// been used on its own since the detach, so nothing cached then is trusted:
/// the table is emptied first and the superblock saying "attached" is written
/// last, so a power cut during attach leaves it detached. Mode, block size,
/// tunables and counters are kept. Nothing is written when a check fails.
pub fn attach<C: Volume, O: Volume>(
    cache: &C,
    origin: &O,
    origin_id: OriginId,
) -> Result<Superblock> {
    let (mut sb, copy) = read_superblock(cache)?;
    if !sb.detached {
        return Err(Error::invalid(format!(
            "the cache is attached to {} already: nothing to attach",
            sb.origin_label
        ))
        .on_device(cache.name()));
    }
    check_origin(&sb, &cache.name(), origin, origin_id)?;
    sb.check_device(&cache.name(), cache.size())?;
    if !cache.is_writable() {
        return Err(Error::new(
            ErrorKind::ReadOnly,
            Op::Write,
            "the cache device is read-only",
        )
        .on_device(cache.name()));
    }
    sb.detached = false;
    sb.clean = true;
    sb.dirty_blocks = 0;
    sb.generation += 1;
    let bytes = sb.encode().map_err(|e| e.on_device(cache.name()))?;
    write_empty_table(cache, &sb)?;
    cache.write_at_fua(&bytes, (1 - copy) as u64 * SUPERBLOCK_SIZE)?;
    Ok(sb)
}

/// Zero the counters the superblock of the cache on `cache` keeps, without
/// opening the cache (for `raidlab cache stats --reset` offline). Only the
/// superblock changes.
pub fn reset_counters<C: Volume>(cache: &C) -> Result<Superblock> {
    let (mut sb, copy) = read_superblock(cache)?;
    sb.check_device(&cache.name(), cache.size())?;
    sb.counters = [0; crate::stats::COUNTERS];
    sb.generation += 1;
    let bytes = sb.encode().map_err(|e| e.on_device(cache.name()))?;
    cache.write_at_fua(&bytes, (1 - copy) as u64 * SUPERBLOCK_SIZE)?;
    Ok(sb)
}

impl<C: Volume, O: Volume> CachedVolume<C, O> {
    /// Open the cache on `cache` in front of `origin`, which must be the origin
    /// it was created for (`origin_id`) and of the size recorded.
    pub fn open(cache: C, origin: O, origin_id: OriginId, clock: SharedClock) -> Result<Self> {
        Self::open_as(cache, origin, origin_id, clock, false)
    }

    /// Open the cache as [`CachedVolume::open`] does, read-only: nothing is
    /// ever written to the cache device or the origin. Reads are served as
    /// in any mode (hits, dirty blocks included, from the cache device; misses
    /// from the origin) and nothing is promoted; writes, cleaning, flushing
    /// dirty blocks, mode and tunable changes and counter resets are refused.
    /// After an unclean stop, the clean blocks the table may name wrongly are
    /// dropped in memory only (reads of them go to the origin), as a
    /// read-write open drops them on the device. The counters move in memory
    /// and are not saved.
    pub fn open_read_only(
        cache: C,
        origin: O,
        origin_id: OriginId,
        clock: SharedClock,
    ) -> Result<Self> {
        Self::open_as(cache, origin, origin_id, clock, true)
    }

    fn open_as(
        cache: C,
        origin: O,
        origin_id: OriginId,
        clock: SharedClock,
        read_only: bool,
    ) -> Result<Self> {
        let (sb, sb_copy) = read_superblock(&cache)?;
        check_origin(&sb, &cache.name(), &origin, origin_id)?;
        if sb.detached {
            return Err(Error::invalid(format!(
                "the cache was detached from {}, which has been used on its own since; \
                 bind it again with `raidlab cache attach` (it starts empty)",
                sb.origin_label
            ))
            .on_device(cache.name()));
        }
        if sb.failed {
            return Err(Error::new(
                ErrorKind::Io,
                Op::Open,
                format!(
                    "the cache device failed while in front of {} (I/O errors) and is not \
                     used again: it may hold copies older than the origin{}; replace the \
                     device, or create a new cache on it with `raidlab cache create --force`",
                    sb.origin_label,
                    if sb.dirty_blocks > 0 {
                        format!(
                            ", and held {} dirty block(s) the origin lacks",
                            sb.dirty_blocks
                        )
                    } else {
                        String::new()
                    }
                ),
            )
            .on_device(cache.name()));
        }
        sb.check_device(&cache.name(), cache.size())?;
        let slots = sb.layout.cache_blocks;
        let entries = read_table(&cache, &sb)?;
        let mut st = State {
            policy: TwoQ::new(slots, sb.promote_threshold),
            persisted: entries.clone(),
            entries,
            map: HashMap::new(),
            dirty: BTreeSet::new(),
            free: Vec::new(),
            stale: BTreeSet::new(),
            seq: Sequential::default(),
            stats: Stats::from_counters(sb.counters),
            clean_cursor: 0,
            clean_credit: 0,
            last_tick: None,
            cache_unflushed: false,
            origin_unflushed: false,
            detached: false,
            read_only,
            reading: HashMap::new(),
            io_errors: 0,
            failed: false,
            sb,
            sb_copy,
        };
        let unclean = !st.sb.clean;
        for slot in (0..slots).rev() {
            match st.entries[slot as usize] {
                Entry::Free => st.free.push(slot),
                Entry::Clean(_) if unclean => {
                    st.entries[slot as usize] = Entry::Free;
                    if !read_only {
                        st.stale.insert(slot / ENTRIES_PER_SECTOR as u64);
                    }
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
            overlap: AtomicBool::new(false),
        };
        if unclean && !read_only {
            let mut st = lock(&v.state);
            v.commit_stale(&mut st)?;
        }
        Ok(v)
    }

    /// Write the superblock as `st.sb` says, to the other copy, durably.
    pub(crate) fn write_superblock(&self, st: &mut State) -> Result<()> {
        if st.read_only {
            return Err(Self::read_only_error(&self.cache, Op::Write));
        }
        if st.failed {
            return Err(self.failed_error(st, Op::Write));
        }
        let r = self.put_superblock(st);
        self.on_cache(st, true, r)
    }

    /// [`Self::write_superblock`]'s write, with no check and nothing counted.
    pub(crate) fn put_superblock(&self, st: &mut State) -> Result<()> {
        st.sb.generation += 1;
        st.sb.dirty_blocks = st.dirty.len() as u64;
        st.sb.counters = st.stats.counters();
        let bytes = st.sb.encode().map_err(|e| e.on_device(self.cache.name()))?;
        let copy = 1 - st.sb_copy;
        self.cache
            .write_at_fua(&bytes, copy as u64 * SUPERBLOCK_SIZE)?;
        st.sb_copy = copy;
        Ok(())
    }

    /// Before the first change after a clean stop or open: say on the device
    /// that the table may be behind memory, so a crash is recognised.
    pub(crate) fn begin_change(&self, st: &mut State) -> Result<()> {
        if st.detached {
            return Err(Self::detached_error(&self.cache, Op::Write));
        }
        if st.read_only {
            return Err(Self::read_only_error(&self.cache, Op::Write));
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
    pub(crate) fn commit_stale(&self, st: &mut State) -> Result<()> {
        if st.stale.is_empty() {
            return Ok(());
        }
        if st.failed {
            return Err(self.failed_error(st, Op::Write));
        }
        let r = self.put_stale(st);
        self.on_cache(st, true, r)
    }

    /// [`Self::commit_stale`]'s writes, with nothing counted.
    fn put_stale(&self, st: &mut State) -> Result<()> {
        self.cache.flush()?;
        st.cache_unflushed = false;
        // Adjacent sectors go in one write (up to 1 MiB): a flush after many
        // changes (a whole flush of dirty blocks) is then a few writes, not
        // one per 31 blocks. Each sector stays checksummed on its own, so a
        // torn write still leaves every sector wholly old or wholly new.
        let stale: Vec<u64> = st.stale.iter().copied().collect();
        let mut i = 0;
        while i < stale.len() {
            let mut j = i + 1;
            while j < stale.len() && stale[j] == stale[j - 1] + 1 && j - i < 2048 {
                j += 1;
            }
            let mut bytes = Vec::with_capacity((j - i) * MAP_SECTOR as usize);
            for &index in &stale[i..j] {
                let first = (index * ENTRIES_PER_SECTOR as u64) as usize;
                let last = (first + ENTRIES_PER_SECTOR).min(st.entries.len());
                bytes.extend_from_slice(&encode_map_sector(
                    st.sb.instance(),
                    index as u32,
                    &st.entries[first..last],
                ));
            }
            self.cache.write_at(&bytes, map_sector_offset(stale[i]))?;
            i = j;
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

    pub(crate) fn set_entry(st: &mut State, slot: u64, e: Entry) {
        st.entries[slot as usize] = e;
        st.stale.insert(slot / ENTRIES_PER_SECTOR as u64);
    }

    /// Rule 2: make sure the device's table does not name anything in `slot`.
    pub(crate) fn unmap_durably(&self, st: &mut State, slot: u64) -> Result<()> {
        if st.persisted[slot as usize] != Entry::Free {
            self.commit_stale(st)?;
        }
        Ok(())
    }

    /// Drop slot `slot` (clean) from memory; it becomes free.
    pub(crate) fn drop_slot(st: &mut State, slot: u64) {
        if let Some(b) = st.entries[slot as usize].origin_block() {
            st.map.remove(&b);
            st.dirty.remove(&b);
        }
        st.policy.remove(slot);
        Self::set_entry(st, slot, Entry::Free);
    }

    /// A slot to put a new block in: a free one, or a clean victim unmapped
    /// durably. `None` when every slot is dirty.
    pub(crate) fn take_slot(&self, st: &mut State) -> Result<Option<u64>> {
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
    pub(crate) fn install(
        &self,
        st: &mut State,
        block: u64,
        data: &[u8],
        dirty: bool,
    ) -> Result<bool> {
        let ghost = st.policy.is_ghost(block);
        let Some(slot) = self.take_slot(st)? else {
            return Ok(false);
        };
        let r = self.cache.write_at(data, Self::slot_offset(st, slot));
        if let Err(e) = self.on_cache(st, true, r) {
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

    /// A clean stop: everything flushed, the table on the device current, and
    /// the superblock saying so (the next open needs no recovery). The volume
    /// stays usable; the next change marks it unclean again.
    pub fn shutdown(&self) -> Result<()> {
        let mut st = lock(&self.state);
        // A failed device is not written (its superblock said so if it could).
        if st.detached || st.read_only || st.failed {
            return Ok(());
        }
        self.flush_inner(&mut st)?;
        st.sb.clean = true;
        self.write_superblock(&mut st)
    }

    pub(crate) fn read_only_error(cache: &C, op: Op) -> Error {
        Error::new(
            ErrorKind::ReadOnly,
            op,
            "the cache was opened read-only: nothing is written to it or its \
             origin (serve it without --read-only to write, flush or change it)",
        )
        .on_device(cache.name())
    }

    pub(crate) fn detached_error(cache: &C, op: Op) -> Error {
        Error::new(
            ErrorKind::Invalid,
            op,
            "the cache was detached; its origin is complete on its own \
             (`raidlab cache attach` binds it again)",
        )
        .on_device(cache.name())
    }

    /// Write every dirty block back, then unbind: both superblock copies say
    /// "detached", so the cache is never opened again with contents the origin
    /// may since have outgrown (attach empties it first). From then on this
    /// volume passes I/O straight to the origin.
    pub fn detach(&self) -> Result<()> {
        self.flush_dirty(|_, _| {})?;
        let mut st = lock(&self.state);
        if st.detached {
            return Ok(());
        }
        // What writes made dirty since the last batch, under the lock, so that
        // constant writes cannot keep the detach from ending.
        self.clean_locked(&mut st, u64::MAX, false)?;
        self.flush_inner(&mut st)?;
        // Both copies, so that no copy saying "attached" is left to fall back
        // to: the newer one first (a power cut between leaves it the winner).
        st.sb.detached = true;
        st.sb.clean = true;
        for _ in 0..2 {
            if let Err(e) = self.write_superblock(&mut st) {
                st.sb.detached = false;
                return Err(e);
            }
        }
        st.detached = true;
        Ok(())
    }
}
