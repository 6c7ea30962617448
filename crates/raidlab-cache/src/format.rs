//! The cache device's metadata as plain bytes: the superblock (two copies) and
//! the mapping table, laid out as docs/cache-format.md describes.
//!
//! This module decides the layout, the encoding and what counts as valid. Every
//! decoder checks the magic, the version, the checksum and then every field's
//! range, and accepts only canonical bytes (reserved bytes zero, padding zero), so
//! that whatever it accepts encodes back to the very same bytes. It must never do
//! I/O, never panic on any input, and never decide policy (when to write which
//! copy, in what order): that is the commit protocol's business.

use crate::stats::COUNTERS;
use raidlab_core::{Error, Result};
use std::collections::HashMap;

/// The first eight bytes of each superblock copy.
pub const MAGIC: [u8; 8] = *b"RLCACHE\0";
/// The only format version this code reads and writes.
pub const VERSION: u32 = 1;
/// One superblock copy: 4 KiB, written whole, so a copy is old or new on any
/// device whose atomic unit is 4 KiB, and told apart by its checksum otherwise.
pub const SUPERBLOCK_SIZE: u64 = 4096;
/// Where the mapping table starts: after the two superblock copies.
pub const MAP_OFFSET: u64 = 2 * SUPERBLOCK_SIZE;
/// A mapping sector: the unit a disk writes atomically, so a power cut leaves
/// each one wholly old or wholly new and its checksum holds either way.
pub const MAP_SECTOR: u64 = 512;
/// The first four bytes of each mapping sector.
pub const MAP_MAGIC: [u8; 4] = *b"RLCM";
/// Mapping entries per sector, after a 16-byte header.
pub const ENTRIES_PER_SECTOR: usize = 31;
/// The data area starts on a multiple of this, as md's data offset does, so
/// that cache blocks are aligned for direct I/O and for the device's pages.
pub const DATA_ALIGN: u64 = 1 << 20;
/// Smallest cache block: a page, the unit of direct I/O.
pub const MIN_BLOCK: u32 = 4096;
/// Largest cache block (dm-cache's limit too).
pub const MAX_BLOCK: u32 = 1 << 30;
/// Longest origin label, in bytes of UTF-8.
pub const MAX_LABEL: usize = 255;
/// Largest promotion threshold (hits before a block is promoted).
pub const MAX_PROMOTE: u32 = 1000;

/// How writes are handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A write completes on the cache device; the origin gets it when cleaned.
    WriteBack,
    /// A write goes to both; the cache never holds anything the origin lacks.
    WriteThrough,
    /// A write goes to the origin only and invalidates the cached copy.
    WriteAround,
}

impl Mode {
    fn code(self) -> u8 {
        match self {
            Mode::WriteBack => 0,
            Mode::WriteThrough => 1,
            Mode::WriteAround => 2,
        }
    }
    fn from_code(c: u8) -> Option<Mode> {
        Some(match c {
            0 => Mode::WriteBack,
            1 => Mode::WriteThrough,
            2 => Mode::WriteAround,
            _ => return None,
        })
    }
}

/// Which replacement policy the cache runs. Recorded so that a reopened cache
/// keeps the user's choice; the policy's own state is not persistent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// 2Q: a block enters a probationary FIFO and is promoted to the main LRU
    /// only on a second hit, so one scan cannot flush the hot set.
    TwoQ,
}

impl Policy {
    fn code(self) -> u8 {
        match self {
            Policy::TwoQ => 0,
        }
    }
    fn from_code(c: u8) -> Option<Policy> {
        (c == 0).then_some(Policy::TwoQ)
    }
}

/// What the cache is bound to, so it is never attached to another origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OriginId {
    /// An md array, by its array UUID.
    ArrayUuid([u8; 16]),
    /// A file or device, by a 32-byte signature recorded at create.
    Signature([u8; 32]),
}

/// The cache's configuration and state summary, as recorded in a superblock copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblock {
    /// This cache's identity; its first four bytes also tag every mapping sector.
    pub cache_uuid: [u8; 16],
    /// Bumped by every superblock write; the valid copy with the higher one wins.
    pub generation: u64,
    /// Size of the origin in bytes when the cache was created.
    pub origin_size: u64,
    pub origin_id: OriginId,
    /// A name for messages (the origin's path or array name at create).
    pub origin_label: String,
    pub block_size: u32,
    pub mode: Mode,
    pub policy: Policy,
    /// Set by a clean stop: the mapping table is exactly what is on the device
    /// and no recovery scan is needed.
    pub clean: bool,
    /// Set by detach: every dirty block was written back and the origin has
    /// been used on its own since, so the mapping table means nothing. Such a
    /// cache is never opened; attach empties the table and clears this.
    pub detached: bool,
    /// Set when the cache device failed while in use (I/O errors past the
    /// limit, or a write that cannot be retried; see [`crate::failure`]),
    /// if the failing device still took this write. Such a cache is never
    /// opened again: what it holds may be older than the origin.
    pub failed: bool,
    /// Percentage of cache blocks that may be dirty before cleaning starts.
    pub dirty_target_pct: u8,
    /// Requests of at least this many sequential bytes bypass the cache; 0: never.
    pub sequential_cutoff: u64,
    /// Background cleaning rate in bytes per second; 0: unlimited.
    pub clean_rate: u64,
    /// Hits a block needs before it is promoted.
    pub promote_threshold: u32,
    /// Dirty blocks at the last superblock write: what an origin opened
    /// without its cache may be missing.
    pub dirty_blocks: u64,
    /// The statistics counters as of this superblock write, in the order of
    /// [`crate::Stats::counters`] (zero in a cache written before they were kept).
    pub counters: [u64; COUNTERS],
    pub layout: Layout,
}

/// Where things are on the cache device. Fully determined by the number of
/// cache blocks and the block size, and checked against that on decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Number of cache blocks (slots) in the data area.
    pub cache_blocks: u64,
    /// Sectors of mapping table, from [`MAP_OFFSET`].
    pub map_sectors: u64,
    /// Byte offset of cache block 0.
    pub data_offset: u64,
}

impl Layout {
    /// The layout for `cache_blocks` blocks.
    pub fn for_blocks(cache_blocks: u64) -> Option<Layout> {
        let map_sectors = cache_blocks.div_ceil(ENTRIES_PER_SECTOR as u64);
        let map_end = map_sectors
            .checked_mul(MAP_SECTOR)?
            .checked_add(MAP_OFFSET)?;
        let data_offset = map_end.checked_next_multiple_of(DATA_ALIGN)?;
        Some(Layout {
            cache_blocks,
            map_sectors,
            data_offset,
        })
    }

    /// As many blocks of `block_size` as fit on a device of `device_size` bytes.
    pub fn plan(device: &str, device_size: u64, block_size: u32) -> Result<Layout> {
        check_block_size(block_size)?;
        let bs = u64::from(block_size);
        let too_small = || {
            Error::invalid(format!(
                "{device} ({device_size} bytes) is too small for a cache with {bs}-byte \
                 blocks: it needs at least {} bytes; use a larger device or a smaller --block",
                DATA_ALIGN + bs
            ))
        };
        // Start from the smallest data offset and move it on while the table
        // for the blocks that would fit does not; the count only shrinks, so
        // this ends within a few rounds.
        let mut data_offset = DATA_ALIGN;
        loop {
            let blocks = device_size.checked_sub(data_offset).ok_or_else(too_small)? / bs;
            let layout = Layout::for_blocks(blocks).ok_or_else(too_small)?;
            if layout.data_offset <= data_offset {
                if blocks == 0 {
                    return Err(too_small());
                }
                return Ok(layout);
            }
            data_offset = layout.data_offset;
        }
    }

    /// Bytes of the cache device this layout uses.
    pub fn device_bytes(&self, block_size: u32) -> Option<u64> {
        self.cache_blocks
            .checked_mul(u64::from(block_size))?
            .checked_add(self.data_offset)
    }
}

/// Refuse a block size that is not a power of two within bounds.
pub fn check_block_size(block_size: u32) -> Result<()> {
    if !block_size.is_power_of_two() || !(MIN_BLOCK..=MAX_BLOCK).contains(&block_size) {
        return Err(Error::invalid(format!(
            "cache block size {block_size} is not a power of two from {MIN_BLOCK} to \
             {MAX_BLOCK} bytes; pick one such as 64K"
        )));
    }
    Ok(())
}

// Field offsets in a superblock copy.
const SB_VERSION: usize = 8;
const SB_CRC: usize = 12;
const SB_UUID: usize = 16;
const SB_GENERATION: usize = 32;
const SB_ORIGIN_SIZE: usize = 40;
const SB_CACHE_BLOCKS: usize = 48;
const SB_MAP_OFFSET: usize = 56;
const SB_MAP_SECTORS: usize = 64;
const SB_DATA_OFFSET: usize = 72;
const SB_BLOCK_SIZE: usize = 80;
const SB_MODE: usize = 84;
const SB_POLICY: usize = 85;
const SB_FLAGS: usize = 86;
const SB_DIRTY_TARGET: usize = 87;
const SB_SEQ_CUTOFF: usize = 88;
const SB_CLEAN_RATE: usize = 96;
const SB_PROMOTE: usize = 104;
const SB_DIRTY_BLOCKS: usize = 112;
const SB_ORIGIN_KIND: usize = 120;
const SB_LABEL_LEN: usize = 121;
const SB_ORIGIN_ID: usize = 128;
const SB_LABEL: usize = 160;
const SB_END: usize = SB_LABEL + MAX_LABEL + 1;
/// The statistics counters: 32 slots of 8 bytes, the first [`COUNTERS`] used.
const SB_COUNTERS: usize = 512;
const SB_COUNTER_SLOTS: usize = 32;
const _: () = assert!(COUNTERS <= SB_COUNTER_SLOTS && SB_END <= SB_COUNTERS);

const FLAG_CLEAN: u8 = 1;
const FLAG_DETACHED: u8 = 2;
const FLAG_FAILED: u8 = 4;
const KIND_ARRAY: u8 = 1;
const KIND_SIGNATURE: u8 = 2;

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
// Callers pass buffers whose length they checked, so the slices always fit;
// `unwrap_or_default` keeps a slip from becoming a panic on untrusted bytes.
fn get_u32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_le_bytes)
        .unwrap_or_default()
}
fn get_u64(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .unwrap_or_default()
}

/// CRC-32C of `bytes` with the four checksum bytes at `crc_at` taken as zero.
fn checksum(bytes: &[u8], crc_at: usize) -> u32 {
    let crc = crc32c::crc32c(&bytes[..crc_at]);
    let crc = crc32c::crc32c_append(crc, &[0; 4]);
    crc32c::crc32c_append(crc, &bytes[crc_at + 4..])
}

impl Superblock {
    /// The 4 KiB of one copy, checksum included. Refuses a superblock that
    /// [`Superblock::decode`] would refuse, so nothing invalid is ever written.
    pub fn encode(&self) -> Result<Vec<u8>> {
        self.check()?;
        let mut b = vec![0u8; SUPERBLOCK_SIZE as usize];
        b[..8].copy_from_slice(&MAGIC);
        put_u32(&mut b, SB_VERSION, VERSION);
        b[SB_UUID..SB_UUID + 16].copy_from_slice(&self.cache_uuid);
        put_u64(&mut b, SB_GENERATION, self.generation);
        put_u64(&mut b, SB_ORIGIN_SIZE, self.origin_size);
        put_u64(&mut b, SB_CACHE_BLOCKS, self.layout.cache_blocks);
        put_u64(&mut b, SB_MAP_OFFSET, MAP_OFFSET);
        put_u64(&mut b, SB_MAP_SECTORS, self.layout.map_sectors);
        put_u64(&mut b, SB_DATA_OFFSET, self.layout.data_offset);
        put_u32(&mut b, SB_BLOCK_SIZE, self.block_size);
        b[SB_MODE] = self.mode.code();
        b[SB_POLICY] = self.policy.code();
        b[SB_FLAGS] = if self.clean { FLAG_CLEAN } else { 0 }
            | if self.detached { FLAG_DETACHED } else { 0 }
            | if self.failed { FLAG_FAILED } else { 0 };
        b[SB_DIRTY_TARGET] = self.dirty_target_pct;
        put_u64(&mut b, SB_SEQ_CUTOFF, self.sequential_cutoff);
        put_u64(&mut b, SB_CLEAN_RATE, self.clean_rate);
        put_u32(&mut b, SB_PROMOTE, self.promote_threshold);
        put_u64(&mut b, SB_DIRTY_BLOCKS, self.dirty_blocks);
        for (i, &c) in self.counters.iter().enumerate() {
            put_u64(&mut b, SB_COUNTERS + 8 * i, c);
        }
        match self.origin_id {
            OriginId::ArrayUuid(u) => {
                b[SB_ORIGIN_KIND] = KIND_ARRAY;
                b[SB_ORIGIN_ID..SB_ORIGIN_ID + 16].copy_from_slice(&u);
            }
            OriginId::Signature(s) => {
                b[SB_ORIGIN_KIND] = KIND_SIGNATURE;
                b[SB_ORIGIN_ID..SB_ORIGIN_ID + 32].copy_from_slice(&s);
            }
        }
        let label = self.origin_label.as_bytes();
        b[SB_LABEL_LEN] = label.len() as u8;
        b[SB_LABEL..SB_LABEL + label.len()].copy_from_slice(label);
        let crc = checksum(&b, SB_CRC);
        put_u32(&mut b, SB_CRC, crc);
        Ok(b)
    }

    /// Parse one copy. Any input gives a superblock or an error saying which
    /// field is wrong; never a panic.
    pub fn decode(b: &[u8]) -> Result<Superblock> {
        if b.len() != SUPERBLOCK_SIZE as usize {
            return Err(Error::invalid(format!(
                "a cache superblock is {SUPERBLOCK_SIZE} bytes, got {}",
                b.len()
            )));
        }
        if b[..8] != MAGIC {
            return Err(Error::invalid(
                "no raidlab cache superblock here (wrong magic); create one with \
                 `raidlab cache create`",
            ));
        }
        let version = get_u32(b, SB_VERSION);
        if version != VERSION {
            return Err(Error::invalid(format!(
                "cache metadata version {version}; this raidlab reads version {VERSION} only"
            )));
        }
        let stored = get_u32(b, SB_CRC);
        let computed = checksum(b, SB_CRC);
        if stored != computed {
            return Err(Error::invalid(format!(
                "cache superblock checksum mismatch (stored {stored:#010x}, computed \
                 {computed:#010x}): the copy is corrupt or was torn by a power cut"
            )));
        }
        let bad = |what: &str| Error::invalid(format!("cache superblock: {what}"));
        let reserved_zero = |r: std::ops::Range<usize>| b[r].iter().all(|&x| x == 0);
        if !reserved_zero(108..112)
            || !reserved_zero(122..128)
            || !reserved_zero(SB_END..SB_COUNTERS)
            || !reserved_zero(SB_COUNTERS + 8 * COUNTERS..b.len())
        {
            return Err(bad("reserved bytes are not zero"));
        }
        if get_u64(b, SB_MAP_OFFSET) != MAP_OFFSET {
            return Err(bad("mapping table offset is not the one version 1 uses"));
        }
        let origin_id = match b[SB_ORIGIN_KIND] {
            KIND_ARRAY if reserved_zero(SB_ORIGIN_ID + 16..SB_ORIGIN_ID + 32) => {
                let mut u = [0; 16];
                u.copy_from_slice(&b[SB_ORIGIN_ID..SB_ORIGIN_ID + 16]);
                OriginId::ArrayUuid(u)
            }
            KIND_SIGNATURE => {
                let mut s = [0; 32];
                s.copy_from_slice(&b[SB_ORIGIN_ID..SB_ORIGIN_ID + 32]);
                OriginId::Signature(s)
            }
            k => return Err(bad(&format!("unknown origin identity kind {k}"))),
        };
        let label_len = b[SB_LABEL_LEN] as usize;
        if !reserved_zero(SB_LABEL + label_len..SB_END) {
            return Err(bad("origin label padding is not zero"));
        }
        let origin_label = std::str::from_utf8(&b[SB_LABEL..SB_LABEL + label_len])
            .map_err(|_| bad("origin label is not UTF-8"))?
            .to_string();
        let flags = b[SB_FLAGS];
        if flags & !(FLAG_CLEAN | FLAG_DETACHED | FLAG_FAILED) != 0 {
            return Err(bad(&format!("unknown flags {flags:#04x}")));
        }
        let mut uuid = [0; 16];
        uuid.copy_from_slice(&b[SB_UUID..SB_UUID + 16]);
        let sb = Superblock {
            cache_uuid: uuid,
            generation: get_u64(b, SB_GENERATION),
            origin_size: get_u64(b, SB_ORIGIN_SIZE),
            origin_id,
            origin_label,
            block_size: get_u32(b, SB_BLOCK_SIZE),
            mode: Mode::from_code(b[SB_MODE])
                .ok_or_else(|| bad(&format!("unknown mode {}", b[SB_MODE])))?,
            policy: Policy::from_code(b[SB_POLICY])
                .ok_or_else(|| bad(&format!("unknown policy {}", b[SB_POLICY])))?,
            clean: flags & FLAG_CLEAN != 0,
            detached: flags & FLAG_DETACHED != 0,
            failed: flags & FLAG_FAILED != 0,
            dirty_target_pct: b[SB_DIRTY_TARGET],
            sequential_cutoff: get_u64(b, SB_SEQ_CUTOFF),
            clean_rate: get_u64(b, SB_CLEAN_RATE),
            promote_threshold: get_u32(b, SB_PROMOTE),
            dirty_blocks: get_u64(b, SB_DIRTY_BLOCKS),
            counters: std::array::from_fn(|i| get_u64(b, SB_COUNTERS + 8 * i)),
            layout: Layout {
                cache_blocks: get_u64(b, SB_CACHE_BLOCKS),
                map_sectors: get_u64(b, SB_MAP_SECTORS),
                data_offset: get_u64(b, SB_DATA_OFFSET),
            },
        };
        sb.check()?;
        Ok(sb)
    }

    /// Every field within its range and the fields consistent with each other.
    pub fn check(&self) -> Result<()> {
        let bad = |what: String| Err(Error::invalid(format!("cache superblock: {what}")));
        check_block_size(self.block_size)?;
        if self.generation == 0 {
            return bad("generation 0 (the first write is generation 1)".into());
        }
        if self.origin_size == 0 || self.origin_size % 512 != 0 {
            return bad(format!(
                "origin size {} is not a positive multiple of 512",
                self.origin_size
            ));
        }
        if self.origin_label.len() > MAX_LABEL || self.origin_label.contains('\0') {
            return bad("origin label longer than 255 bytes or holding a NUL".into());
        }
        if self.dirty_target_pct > 100 {
            return bad(format!(
                "dirty target {}% is over 100%",
                self.dirty_target_pct
            ));
        }
        if !(1..=MAX_PROMOTE).contains(&self.promote_threshold) {
            return bad(format!(
                "promotion threshold {} is not from 1 to {MAX_PROMOTE}",
                self.promote_threshold
            ));
        }
        let l = self.layout;
        if l.cache_blocks == 0 {
            return bad("no cache blocks".into());
        }
        if Layout::for_blocks(l.cache_blocks) != Some(l)
            || l.device_bytes(self.block_size).is_none()
        {
            return bad(format!(
                "layout (blocks {}, map sectors {}, data offset {}) is not the one \
                 version 1 computes",
                l.cache_blocks, l.map_sectors, l.data_offset
            ));
        }
        if self.dirty_blocks > l.cache_blocks {
            return bad(format!(
                "{} dirty blocks recorded in a cache of {}",
                self.dirty_blocks, l.cache_blocks
            ));
        }
        if self.detached && (self.dirty_blocks != 0 || !self.clean) {
            return bad("detached, yet recording dirty blocks or an unclean stop".into());
        }
        Ok(())
    }

    /// Whole blocks of the origin; a tail shorter than a block is never cached.
    pub fn origin_blocks(&self) -> u64 {
        self.origin_size / u64::from(self.block_size)
    }

    /// The tag every mapping sector of this cache carries.
    pub fn instance(&self) -> u32 {
        u32::from_le_bytes([
            self.cache_uuid[0],
            self.cache_uuid[1],
            self.cache_uuid[2],
            self.cache_uuid[3],
        ])
    }

    /// Refuse a cache device smaller than the layout needs (it shrank, or this
    /// is another device).
    pub fn check_device(&self, device: &str, device_size: u64) -> Result<()> {
        let need = self
            .layout
            .device_bytes(self.block_size)
            .unwrap_or(u64::MAX);
        if device_size < need {
            return Err(Error::invalid(format!(
                "the device holds {device_size} bytes but its cache metadata needs {need}: \
                 the device shrank or is not the one the cache was created on"
            ))
            .on_device(device));
        }
        Ok(())
    }
}

/// Of the two superblock copies as read, the one to use: the valid copy with
/// the higher generation. A torn or corrupt copy is skipped; if both are bad
/// the error of the first is returned, naming the device.
pub fn pick_superblock(device: &str, a: &[u8], b: &[u8]) -> Result<(Superblock, usize)> {
    match (Superblock::decode(a), Superblock::decode(b)) {
        (Ok(x), Ok(y)) if x.cache_uuid != y.cache_uuid => Err(Error::invalid(
            "the two cache superblock copies belong to different caches; \
             recreate the cache with `raidlab cache create`",
        )
        .on_device(device)),
        (Ok(x), Ok(y)) if y.generation > x.generation => Ok((y, 1)),
        (Ok(x), _) => Ok((x, 0)),
        (Err(_), Ok(y)) => Ok((y, 1)),
        (Err(e), Err(_)) => Err(e.on_device(device)),
    }
}

/// One slot of the mapping table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// The slot holds nothing.
    Free,
    /// The slot holds origin block `n`, equal to the origin's copy.
    Clean(u64),
    /// The slot holds origin block `n`, newer than the origin's copy.
    Dirty(u64),
}

impl Entry {
    pub fn origin_block(self) -> Option<u64> {
        match self {
            Entry::Free => None,
            Entry::Clean(n) | Entry::Dirty(n) => Some(n),
        }
    }
}

const STATE_FREE: u8 = 0;
const STATE_CLEAN: u8 = 1;
const STATE_DIRTY: u8 = 2;
const MAP_CRC: usize = 4;
const MAP_HEADER: usize = 16;
const ENTRY_SIZE: usize = 16;

/// Byte offset of mapping sector `index` on the cache device (saturating: an
/// index read from a corrupt place must still make an error message, not a panic).
pub fn map_sector_offset(index: u64) -> u64 {
    index.saturating_mul(MAP_SECTOR).saturating_add(MAP_OFFSET)
}

/// Mapping sector `index` (slots `index * 31 ..`) holding `entries`, at most
/// [`ENTRIES_PER_SECTOR`]; missing ones are free.
pub fn encode_map_sector(instance: u32, index: u32, entries: &[Entry]) -> [u8; 512] {
    let mut b = [0u8; MAP_SECTOR as usize];
    b[..4].copy_from_slice(&MAP_MAGIC);
    put_u32(&mut b, 8, instance);
    put_u32(&mut b, 12, index);
    for (i, e) in entries.iter().take(ENTRIES_PER_SECTOR).enumerate() {
        let at = MAP_HEADER + i * ENTRY_SIZE;
        let (block, state) = match *e {
            Entry::Free => (0, STATE_FREE),
            Entry::Clean(n) => (n, STATE_CLEAN),
            Entry::Dirty(n) => (n, STATE_DIRTY),
        };
        put_u64(&mut b, at, block);
        b[at + 8] = state;
    }
    let crc = checksum(&b, MAP_CRC);
    put_u32(&mut b, MAP_CRC, crc);
    b
}

/// Parse mapping sector `index` of the cache described by `sb`. Slots past the
/// end of the cache must be free, and mapped blocks must lie inside the origin.
pub fn decode_map_sector(sb: &Superblock, index: u64, b: &[u8]) -> Result<[Entry; 31]> {
    let at_sector = |what: String| {
        Error::invalid(format!("cache mapping sector {index}: {what}"))
            .at(map_sector_offset(index), MAP_SECTOR)
    };
    if b.len() != MAP_SECTOR as usize {
        return Err(at_sector(format!("{} bytes, not {MAP_SECTOR}", b.len())));
    }
    if index >= sb.layout.map_sectors {
        return Err(at_sector(format!(
            "past the table's {} sectors",
            sb.layout.map_sectors
        )));
    }
    if b[..4] != MAP_MAGIC {
        return Err(at_sector("wrong magic".into()));
    }
    let stored = get_u32(b, MAP_CRC);
    if stored != checksum(b, MAP_CRC) {
        return Err(at_sector("checksum mismatch: the sector is corrupt".into()));
    }
    if get_u32(b, 8) != sb.instance() {
        return Err(at_sector("belongs to another cache (instance tag)".into()));
    }
    if u64::from(get_u32(b, 12)) != index {
        return Err(at_sector(format!(
            "records index {}: written to the wrong place",
            get_u32(b, 12)
        )));
    }
    let origin_blocks = sb.origin_blocks();
    let mut out = [Entry::Free; ENTRIES_PER_SECTOR];
    for (i, slot) in out.iter_mut().enumerate() {
        let at = MAP_HEADER + i * ENTRY_SIZE;
        let block = get_u64(b, at);
        let cache_slot = index * ENTRIES_PER_SECTOR as u64 + i as u64;
        if b[at + 9..at + ENTRY_SIZE].iter().any(|&x| x != 0) {
            return Err(at_sector(format!(
                "slot {cache_slot}: reserved bytes not zero"
            )));
        }
        let entry = match b[at + 8] {
            STATE_FREE if block == 0 => Entry::Free,
            STATE_FREE => return Err(at_sector(format!("free slot {cache_slot} maps a block"))),
            STATE_CLEAN => Entry::Clean(block),
            STATE_DIRTY => Entry::Dirty(block),
            s => return Err(at_sector(format!("slot {cache_slot}: unknown state {s}"))),
        };
        if let Some(n) = entry.origin_block() {
            if cache_slot >= sb.layout.cache_blocks {
                return Err(at_sector(format!(
                    "slot {cache_slot} past the cache's {} blocks is in use",
                    sb.layout.cache_blocks
                )));
            }
            if n >= origin_blocks {
                return Err(at_sector(format!(
                    "slot {cache_slot} maps origin block {n}, past the origin's {origin_blocks}"
                )));
            }
        }
        *slot = entry;
    }
    Ok(out)
}

/// Checks the table as a whole while its sectors are read one by one: no
/// origin block may be mapped by two slots (the commit protocol unmaps before it
/// remaps), so two would mean the table cannot be trusted.
#[derive(Debug, Default)]
pub struct MapChecker {
    seen: HashMap<u64, u64>,
}

impl MapChecker {
    /// Note slot `slot` holding `entry`; refuse a second slot for one block.
    pub fn add(&mut self, slot: u64, entry: Entry) -> Result<()> {
        if let Some(n) = entry.origin_block() {
            if let Some(first) = self.seen.insert(n, slot) {
                return Err(Error::invalid(format!(
                    "cache mapping table: origin block {n} is mapped by slots {first} and \
                     {slot}; the metadata is corrupt"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
