//! md's internal write-intent bitmap (`bitmap_super_t` plus one bit per chunk).
//!
//! On disk, for a v1.2 member with `feature::BITMAP_OFFSET` set, the bitmap area
//! starts `bitmap_offset` sectors (signed, relative to the superblock, so 8 means
//! "right after the 4 KiB superblock area", which is what `mdadm --create
//! --bitmap=internal` chooses) from the superblock. Metadata 0.90 has no offset
//! field: its state bit says a bitmap is there, always right after the 4 KiB
//! superblock, in at most the 60 KiB left of the 64 KiB md reserves at the end
//! of the member (raidlab's 0.90 reader sets `bitmap_offset` to 8 for it):
//!
//! | offset | field (all little-endian) | | offset | field |
//! |---|---|---|---|---|
//! | 0 | magic u32 = 0x6d746962 ("bitm") | | 52 | chunksize u32 (bytes) |
//! | 4 | version u32 (4; 3 also read) | | 56 | daemon_sleep u32 (seconds) |
//! | 8 | uuid \[16\] (= the array's set_uuid) | | 60 | write_behind u32 |
//! | 24 | events u64 | | 64 | sectors_reserved u32 |
//! | 32 | events_cleared u64 | | 68 | nodes u32 |
//! | 40 | sync_size u64 (sectors) | | 72 | cluster_name \[64\] |
//! | 48 | state u32 | | 136 | pad \[120\] (zero) |
//!
//! The bits follow the 256-byte header directly: chunk `c` is bit `c % 8` (least
//! significant first) of byte `256 + c / 8` of the area (md's `set_bit_le` on the
//! page holding the superblock, then the following pages). A set bit means "this
//! chunk may differ between the copies / from parity: resync it". Chunk `c` covers
//! sectors `[c * chunksize / 512, (c + 1) * chunksize / 512)` of `sync_size`, the
//! range md resyncs: each member's data area for raid1/4/5/6, the array for raid10.
//!
//! mdadm reserves, and writes, the header plus bits rounded up to 4 KiB; when it
//! creates a bitmap every byte after the header is 0xff (all chunks dirty) and
//! `events`/`events_cleared` are 0: the kernel decides on first start whether the
//! set bits need a resync (only below `resync_offset`) and clears them.
//!
//! Sources read (never copied): Linux `drivers/md/md-bitmap.{h,c}`
//! (`md_bitmap_read_sb`, `file_page_offset`, `md_bitmap_storage_alloc`), mdadm
//! `bitmap.{h,c}` (`ExamineBitmap`, `bitmap_bits`), `super1.c`
//! (`add_internal_bitmap1`, `write_bitmap1`, `locate_bitmap1`, `choose_bm_space`)
//! and `super0.c` (`add_internal_bitmap0`).

use crate::le::{put, rd, u32_at, u64_at};
use crate::superblock::{feature, Superblock, SB_AREA};
use raidlab_core::{Error, ErrorKind, Op, Volume};
use serde::Serialize;

mod examine;
mod grow;
mod place;
mod v090;
pub use grow::{grow_internal, resized, resized_to, room_bytes};
pub use place::{bitmap_byte_offset, choose_bm_space, choose_chunk, mdadm_bitmap_room};
use place::{check_against, fresh_header, min_chunk, placement};
pub use place::{mdadm_sync_size, new_internal};
use v090::{new_internal_090, placement_v090, uuid_090_host};

/// `magic`: "bitm" read as a little-endian u32.
pub const BITMAP_MAGIC: u32 = 0x6d74_6962;
/// Oldest bitmap version md reads (bits in host order; the same as little-endian
/// order on the little-endian machines raidlab runs on).
pub const BITMAP_MAJOR_LO: u32 = 3;
/// The version mdadm writes and md keeps: bits in little-endian order.
pub const BITMAP_MAJOR_HI: u32 = 4;
/// Clustered md (one bitmap per node): not supported here.
pub const BITMAP_MAJOR_CLUSTERED: u32 = 5;
/// The newer lockless bitmap (different layout): not supported here.
pub const BITMAP_MAJOR_LOCKLESS: u32 = 6;
/// Size of `bitmap_super_t`; the bits start right after it.
pub const BITMAP_SB_LEN: usize = 256;
/// mdadm's default bitmap chunk for an internal bitmap (64 MiB), used unless the
/// bits would not fit in the reserved space.
pub const DEFAULT_CHUNK: u32 = 64 << 20;
/// mdadm's default `daemon_sleep` (DEFAULT_BITMAP_DELAY), seconds.
pub const DEFAULT_DAEMON_SLEEP: u32 = 5;
/// Largest `write_behind` md accepts (its COUNTER_MAX).
pub const MAX_WRITE_BEHIND: u32 = 16383;
/// Smallest chunk md accepts (bytes).
pub const MIN_CHUNK: u32 = 512;
/// Most bitmap space mdadm uses for an internal bitmap when no chunk is given.
pub const MAX_DEFAULT_ROOM_SECTORS: u64 = 256;

/// Bits of `state` (md's `enum bitmap_state`, as bit numbers shifted).
pub mod state {
    /// The bitmap is out of date (or had an I/O error): a full resync is needed.
    pub const STALE: u32 = 1 << 1;
    pub const WRITE_ERROR: u32 = 1 << 2;
    pub const FIRST_USE: u32 = 1 << 3;
    pub const CLEAN: u32 = 1 << 4;
    pub const DAEMON_BUSY: u32 = 1 << 5;
    pub const HOSTENDIAN: u32 = 1 << 15;
    /// Every bit md defines; others are refused on read.
    pub const ALL: u32 = STALE | WRITE_ERROR | FIRST_USE | CLEAN | DAEMON_BUSY | HOSTENDIAN;
}

/// Byte offsets of every field in `bitmap_super_t`.
pub mod off {
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 4;
    pub const UUID: usize = 8;
    pub const EVENTS: usize = 24;
    pub const EVENTS_CLEARED: usize = 32;
    pub const SYNC_SIZE: usize = 40;
    pub const STATE: usize = 48;
    pub const CHUNKSIZE: usize = 52;
    pub const DAEMON_SLEEP: usize = 56;
    pub const WRITE_BEHIND: usize = 60;
    pub const SECTORS_RESERVED: usize = 64;
    pub const NODES: usize = 68;
    pub const CLUSTER_NAME: usize = 72;
    pub const PAD: usize = 136;
}

/// `bitmap_super_t`, field for field (md's names), decoded. `magic` is not stored
/// (always [`BITMAP_MAGIC`]) and `pad` is always zero.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BitmapSuper {
    /// [`BITMAP_MAJOR_HI`] (or [`BITMAP_MAJOR_LO`] from old arrays).
    pub version: u32,
    /// Must equal the array's `set_uuid`.
    pub uuid: [u8; 16],
    /// The array's event count when the bitmap was last written; older than the
    /// superblock's means the bitmap is stale.
    pub events: u64,
    /// The event count when bits were last cleared.
    pub events_cleared: u64,
    /// Sectors the bitmap covers (what md resyncs).
    pub sync_size: u64,
    /// [`state`] bits.
    pub state: u32,
    /// Bytes per bit: a power of two, at least 512.
    pub chunksize: u32,
    /// Seconds between bitmap flushes (at least 1).
    pub daemon_sleep: u32,
    /// Most outstanding write-behind writes (0: normal).
    pub write_behind: u32,
    /// Sectors reserved for the bitmap (0: not recorded, as mdadm writes).
    pub sectors_reserved: u32,
    /// Cluster nodes: always 0 here (clustered bitmaps are not supported).
    pub nodes: u32,
    /// Cluster name bytes before the NUL (empty here).
    pub cluster_name: Vec<u8>,
}

impl BitmapSuper {
    /// Decode and validate the 256-byte bitmap superblock at the start of `bytes`.
    /// Every failure names the field, the value found and what was expected. Never
    /// panics.
    pub fn parse(bytes: &[u8]) -> Result<BitmapSuper, Error> {
        if bytes.len() < BITMAP_SB_LEN {
            return Err(invalid(
                "(length)",
                format!("{} bytes", bytes.len()),
                format!("at least {BITMAP_SB_LEN} bytes"),
            ));
        }
        let magic = u32_at(bytes, off::MAGIC);
        if magic != BITMAP_MAGIC {
            return Err(invalid(
                "magic",
                format!("{magic:#010x}"),
                format!("{BITMAP_MAGIC:#010x} (\"bitm\": no md bitmap here)"),
            ));
        }
        let name_raw = &bytes[off::CLUSTER_NAME..off::PAD];
        let name_len = name_raw.iter().position(|&b| b == 0).unwrap_or(64);
        if let Some(i) = name_raw[name_len..].iter().position(|&b| b != 0) {
            return Err(invalid(
                &format!("cluster_name (byte {})", name_len + i),
                name_raw[name_len + i],
                "0 after the terminating NUL",
            ));
        }
        if let Some(i) = bytes[off::PAD..BITMAP_SB_LEN].iter().position(|&b| b != 0) {
            return Err(invalid(
                &format!("pad (byte {})", off::PAD + i),
                bytes[off::PAD + i],
                0,
            ));
        }
        let sb = BitmapSuper {
            version: u32_at(bytes, off::VERSION),
            uuid: rd(bytes, off::UUID),
            events: u64_at(bytes, off::EVENTS),
            events_cleared: u64_at(bytes, off::EVENTS_CLEARED),
            sync_size: u64_at(bytes, off::SYNC_SIZE),
            state: u32_at(bytes, off::STATE),
            chunksize: u32_at(bytes, off::CHUNKSIZE),
            daemon_sleep: u32_at(bytes, off::DAEMON_SLEEP),
            write_behind: u32_at(bytes, off::WRITE_BEHIND),
            sectors_reserved: u32_at(bytes, off::SECTORS_RESERVED),
            nodes: u32_at(bytes, off::NODES),
            cluster_name: name_raw[..name_len].to_vec(),
        };
        sb.validate()?;
        Ok(sb)
    }

    /// Range-check every field: what md's `md_bitmap_read_sb` checks (version,
    /// chunk size a power of two of at least 512, daemon_sleep at least 1,
    /// write_behind at most 16383) plus what raidlab needs (no cluster, known state
    /// bits, a bit count that fits in memory).
    pub fn validate(&self) -> Result<(), Error> {
        match self.version {
            BITMAP_MAJOR_LO | BITMAP_MAJOR_HI => {}
            BITMAP_MAJOR_CLUSTERED => {
                return Err(invalid(
                    "version",
                    "5 (a clustered md bitmap)",
                    "3 or 4 (clustered md is not supported)",
                ))
            }
            BITMAP_MAJOR_LOCKLESS => {
                return Err(invalid(
                    "version",
                    "6 (md's lockless bitmap)",
                    "3 or 4 (the lockless bitmap is not supported)",
                ))
            }
            v => return Err(invalid("version", v, "3 or 4")),
        }
        if self.chunksize < MIN_CHUNK || !self.chunksize.is_power_of_two() {
            return Err(invalid(
                "chunksize",
                format!("{} bytes", self.chunksize),
                "a power of two of at least 512 bytes",
            ));
        }
        if self.daemon_sleep == 0 {
            return Err(invalid("daemon_sleep", 0, "at least 1 second"));
        }
        if self.write_behind > MAX_WRITE_BEHIND {
            return Err(invalid(
                "write_behind",
                self.write_behind,
                format!("0..={MAX_WRITE_BEHIND}"),
            ));
        }
        let unknown = self.state & !state::ALL;
        if unknown != 0 {
            return Err(invalid(
                "state",
                format!("{:#x} (unknown bits {unknown:#x})", self.state),
                format!("only bits in {:#x}", state::ALL),
            ));
        }
        if self.nodes != 0 {
            return Err(invalid(
                "nodes",
                self.nodes,
                "0 (clustered md is not supported)",
            ));
        }
        if self.cluster_name.len() > 63 || self.cluster_name.contains(&0) {
            return Err(invalid(
                "cluster_name",
                format!("{} bytes", self.cluster_name.len()),
                "at most 63 bytes, no NUL",
            ));
        }
        // A bitmap md could hold: sync_size in bytes fits in u64 and the bit
        // area (one bit per chunk) stays below 1 GiB.
        if self.sync_size > u64::MAX >> 9 || self.bits_bytes() > 1 << 30 {
            return Err(invalid(
                "sync_size",
                format!("{} sectors", self.sync_size),
                format!(
                    "a size whose bitmap at {} byte chunks fits in 1 GiB",
                    self.chunksize
                ),
            ));
        }
        Ok(())
    }

    /// The 256-byte header (explicit little-endian, pad zero).
    pub fn to_bytes(&self) -> [u8; BITMAP_SB_LEN] {
        let mut b = [0u8; BITMAP_SB_LEN];
        put(&mut b, off::MAGIC, &BITMAP_MAGIC.to_le_bytes());
        put(&mut b, off::VERSION, &self.version.to_le_bytes());
        put(&mut b, off::UUID, &self.uuid);
        put(&mut b, off::EVENTS, &self.events.to_le_bytes());
        put(
            &mut b,
            off::EVENTS_CLEARED,
            &self.events_cleared.to_le_bytes(),
        );
        put(&mut b, off::SYNC_SIZE, &self.sync_size.to_le_bytes());
        put(&mut b, off::STATE, &self.state.to_le_bytes());
        put(&mut b, off::CHUNKSIZE, &self.chunksize.to_le_bytes());
        put(&mut b, off::DAEMON_SLEEP, &self.daemon_sleep.to_le_bytes());
        put(&mut b, off::WRITE_BEHIND, &self.write_behind.to_le_bytes());
        put(
            &mut b,
            off::SECTORS_RESERVED,
            &self.sectors_reserved.to_le_bytes(),
        );
        put(&mut b, off::NODES, &self.nodes.to_le_bytes());
        let n = self.cluster_name.len().min(63);
        put(&mut b, off::CLUSTER_NAME, &self.cluster_name[..n]);
        b
    }

    /// Sectors per chunk (`chunksize / 512`, at least 1).
    pub fn chunk_sectors(&self) -> u64 {
        (u64::from(self.chunksize) >> 9).max(1)
    }

    /// Number of chunks (bits): `ceil(sync_size / chunk_sectors)`, as md's
    /// `bitmap_bits` and the kernel count them.
    pub fn chunks(&self) -> u64 {
        self.sync_size.div_ceil(self.chunk_sectors())
    }

    /// Bytes of bits: `ceil(chunks / 8)`.
    pub fn bits_bytes(&self) -> u64 {
        self.chunks().div_ceil(8)
    }

    /// The bitmap area as mdadm sizes it (`calc_bitmap_size(.., 4096)`): header
    /// plus bits rounded up to 4 KiB.
    pub fn area_bytes(&self) -> u64 {
        (BITMAP_SB_LEN as u64 + self.bits_bytes()).div_ceil(4096) * 4096
    }
}

/// A write-intent bitmap: the header and the bytes after it.
///
/// `bits` holds everything from byte 256 of the area up to [`BitmapSuper::area_bytes`]
/// (so at least `ceil(chunks / 8)` bytes; bits past the last chunk are kept as
/// found and ignored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bitmap {
    pub sb: BitmapSuper,
    pub bits: Vec<u8>,
}

fn out_of_range(chunk: u64, chunks: u64) -> Error {
    Error::new(
        ErrorKind::OutOfRange,
        Op::Plan,
        format!("bitmap chunk {chunk} is past the last chunk ({chunks} chunks)"),
    )
}

impl Bitmap {
    /// A bitmap with every byte after the header set to `0xff` (`dirty`) or 0,
    /// sized as mdadm sizes the area. The header is validated first.
    pub fn new(sb: BitmapSuper, dirty: bool) -> Result<Bitmap, Error> {
        sb.validate()?;
        let len = (sb.area_bytes() - BITMAP_SB_LEN as u64) as usize;
        let fill = if dirty { 0xff } else { 0 };
        Ok(Bitmap {
            sb,
            bits: vec![fill; len],
        })
    }

    /// Decode a bitmap area (header then bits). `area` must hold the header and at
    /// least `ceil(chunks / 8)` bytes of bits; up to [`BitmapSuper::area_bytes`] are
    /// kept. Never panics.
    pub fn parse(area: &[u8]) -> Result<Bitmap, Error> {
        let sb = BitmapSuper::parse(area)?;
        let need = BITMAP_SB_LEN as u64 + sb.bits_bytes();
        if (area.len() as u64) < need {
            return Err(invalid(
                "(length)",
                format!("{} bytes of bitmap area", area.len()),
                format!(
                    "at least {need} bytes for {} chunks of {} bytes",
                    sb.chunks(),
                    sb.chunksize
                ),
            ));
        }
        let keep = (area.len() as u64).min(sb.area_bytes()) as usize;
        let bits = area[BITMAP_SB_LEN..keep].to_vec();
        Ok(Bitmap { sb, bits })
    }

    /// Header followed by `bits`, as written to disk.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(BITMAP_SB_LEN + self.bits.len());
        out.extend_from_slice(&self.sb.to_bytes());
        out.extend_from_slice(&self.bits);
        out
    }

    /// Number of chunks (bits that mean something).
    pub fn chunks(&self) -> u64 {
        self.sb.chunks()
    }

    fn check(&self, chunk: u64) -> Result<(usize, u8), Error> {
        let chunks = self.chunks();
        if chunk >= chunks || (chunk / 8) as usize >= self.bits.len() {
            return Err(out_of_range(chunk, chunks));
        }
        Ok(((chunk / 8) as usize, 1u8 << (chunk % 8)))
    }

    /// Whether chunk `chunk` is marked dirty (false past the last chunk).
    pub fn is_dirty(&self, chunk: u64) -> bool {
        match self.check(chunk) {
            Ok((i, m)) => self.bits[i] & m != 0,
            Err(_) => false,
        }
    }

    /// Mark chunk `chunk` dirty.
    pub fn set(&mut self, chunk: u64) -> Result<(), Error> {
        let (i, m) = self.check(chunk)?;
        self.bits[i] |= m;
        Ok(())
    }

    /// Mark chunk `chunk` clean.
    pub fn clear(&mut self, chunk: u64) -> Result<(), Error> {
        let (i, m) = self.check(chunk)?;
        self.bits[i] &= !m;
        Ok(())
    }

    /// The chunk holding sector `sector` of the synced range.
    pub fn chunk_of(&self, sector: u64) -> u64 {
        sector / self.sb.chunk_sectors()
    }

    /// Mark dirty every chunk touched by sectors `[start, start + len)`.
    pub fn set_sectors(&mut self, start: u64, len: u64) -> Result<(), Error> {
        if len == 0 {
            return Ok(());
        }
        let end = start.checked_add(len).filter(|&e| e <= self.sb.sync_size);
        let Some(end) = end else {
            return Err(Error::new(
                ErrorKind::OutOfRange,
                Op::Plan,
                format!(
                    "sectors {start}+{len} are past the bitmap's sync_size ({} sectors)",
                    self.sb.sync_size
                ),
            ));
        };
        for c in self.chunk_of(start)..=self.chunk_of(end - 1) {
            self.set(c)?;
        }
        Ok(())
    }

    /// Mark every chunk clean (bits past the last chunk are left alone).
    pub fn clear_all(&mut self) {
        for c in 0..self.chunks() {
            let _ = self.clear(c);
        }
    }

    /// How many chunks are dirty (what `mdadm -X` reports as "dirty").
    pub fn dirty_count(&self) -> u64 {
        let chunks = self.chunks();
        let full = (chunks / 8) as usize;
        let mut n: u64 = self.bits[..full.min(self.bits.len())]
            .iter()
            .map(|b| u64::from(b.count_ones()))
            .sum();
        let rest = chunks % 8;
        if rest != 0 {
            if let Some(&b) = self.bits.get(full) {
                n += u64::from((b & ((1u8 << rest) - 1)).count_ones());
            }
        }
        n
    }

    /// Dirty sector ranges `(start_sector, len)` of the synced range (each
    /// member's data area for raid1/4/5/6, the array for raid10), adjacent dirty
    /// chunks merged, the last clipped to `sync_size`.
    pub fn dirty_ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let chunks = self.chunks();
        let cs = self.sb.chunk_sectors();
        let sync = self.sb.sync_size;
        let mut c = 0u64;
        std::iter::from_fn(move || {
            // Skip clean chunks, a whole zero byte at a time where possible.
            while c < chunks && !self.is_dirty(c) {
                if c % 8 == 0 && self.bits.get((c / 8) as usize) == Some(&0) {
                    c += 8;
                } else {
                    c += 1;
                }
            }
            if c >= chunks {
                return None;
            }
            let first = c;
            while c < chunks && self.is_dirty(c) {
                c += 1;
            }
            let start = first * cs;
            let end = (c * cs).min(sync);
            Some((start, end - start))
        })
    }

    /// Whether md would treat the bitmap as out of date (and resync everything):
    /// `events` older than the superblock's, or the STALE state bit.
    pub fn is_stale(&self, sb: &Superblock) -> bool {
        self.sb.events < sb.events || self.sb.state & state::STALE != 0
    }

    /// Read the internal bitmap of a v1.2 member whose superblock is `sb`.
    /// `Ok(None)` when `feature::BITMAP_OFFSET` is not set. Checks the placement
    /// (after the superblock, before the data and clear of the bad block log), the
    /// header, that its uuid is the array's and that `sync_size` is the member size
    /// (raid1/4/5/6).
    pub fn read_from(vol: &dyn Volume, sb: &Superblock) -> Result<Option<Bitmap>, Error> {
        if sb.feature_map & feature::BITMAP_OFFSET == 0 {
            return Ok(None);
        }
        let name = vol.name();
        let (start, room) = placement(sb, 2).map_err(|e| e.on_device(name.clone()))?;
        let mut head = [0u8; BITMAP_SB_LEN];
        if room < BITMAP_SB_LEN as u64 {
            return Err(Error::invalid(format!(
                "md bitmap at byte {start} has only {room} bytes before the data or bad block log"
            ))
            .on_device(name));
        }
        vol.read_at(&mut head, start)?;
        let ctx = |e: Error| e.on_device(name.clone()).at(start, BITMAP_SB_LEN as u64);
        let bsb = BitmapSuper::parse(&head).map_err(ctx)?;
        check_against(&bsb, sb).map_err(ctx)?;
        let need = BITMAP_SB_LEN as u64 + bsb.bits_bytes();
        if need > room {
            return Err(ctx(invalid(
                "sync_size",
                format!(
                    "{} sectors ({} chunks: {need} bytes of bitmap)",
                    bsb.sync_size,
                    bsb.chunks()
                ),
                format!("a bitmap that fits in the {room} bytes before the data or bad block log"),
            )));
        }
        let len = bsb.area_bytes().min(room);
        let mut area = vec![0u8; len as usize];
        vol.read_at(&mut area, start)?;
        let bm = Bitmap::parse(&area).map_err(|e| e.on_device(name.clone()).at(start, len))?;
        Ok(Some(bm))
    }

    /// Write header and bits at the place `sb` records (which must have
    /// `feature::BITMAP_OFFSET` and a `bitmap_offset` of at least 8: raidlab writes
    /// the whole 4 KiB superblock area) and flush.
    pub fn write_to(&self, vol: &dyn Volume, sb: &Superblock) -> Result<(), Error> {
        let (start, bytes) = self.placed(sb).map_err(|e| e.on_device(vol.name()))?;
        vol.write_at(&bytes, start)?;
        vol.flush()
    }

    /// What [`Bitmap::write_to`] writes and where: the byte offset on the
    /// member device `sb` describes, and the header and bits. For callers
    /// that do the write themselves (the engine, as a step of a plan).
    pub fn placed(&self, sb: &Superblock) -> Result<(u64, Vec<u8>), Error> {
        if sb.feature_map & feature::BITMAP_OFFSET == 0 {
            return Err(Error::new(
                ErrorKind::Invalid,
                Op::Write,
                "the superblock has no internal bitmap (feature_map lacks BITMAP_OFFSET)",
            ));
        }
        self.sb.validate()?;
        check_against(&self.sb, sb)?;
        let (start, room) = placement(sb, (SB_AREA / 512) as i64)?;
        let bytes = self.to_bytes();
        let need = BITMAP_SB_LEN as u64 + self.sb.bits_bytes();
        if (bytes.len() as u64) < need || bytes.len() as u64 > room {
            return Err(Error::new(
                ErrorKind::Invalid,
                Op::Write,
                format!(
                    "md bitmap of {} bytes (at least {need} needed) does not fit the {room} bytes at byte {start}",
                    bytes.len()
                ),
            ));
        }
        Ok((start, bytes))
    }
}

fn invalid(field: &str, found: impl std::fmt::Display, expected: impl std::fmt::Display) -> Error {
    crate::le::invalid("bitmap", field, found, expected)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> BitmapSuper {
        BitmapSuper {
            version: 4,
            uuid: [7; 16],
            events: 10,
            events_cleared: 9,
            sync_size: 1000,
            state: 0,
            chunksize: 4096,
            daemon_sleep: 5,
            write_behind: 0,
            sectors_reserved: 0,
            nodes: 0,
            cluster_name: Vec::new(),
        }
    }

    #[test]
    fn header_round_trips_and_offsets_are_md_s() {
        let sb = sample();
        let b = sb.to_bytes();
        assert_eq!(&b[0..4], b"bitm");
        assert_eq!(u64_at(&b, 40), 1000);
        assert_eq!(u32_at(&b, 52), 4096);
        assert_eq!(BitmapSuper::parse(&b).unwrap(), sb);
    }

    #[test]
    fn chunk_count_and_bits() {
        let mut bm = Bitmap::new(sample(), false).unwrap();
        // 1000 sectors / 8 sectors per chunk = 125 chunks, 16 bytes of bits.
        assert_eq!(bm.chunks(), 125);
        assert_eq!(bm.sb.bits_bytes(), 16);
        assert_eq!(bm.bits.len(), 4096 - 256);
        bm.set(0).unwrap();
        bm.set(9).unwrap();
        bm.set(124).unwrap();
        assert!(bm.set(125).is_err());
        assert_eq!(bm.bits[0], 1);
        assert_eq!(bm.bits[1], 2);
        assert_eq!(bm.bits[15], 1 << 4);
        assert_eq!(bm.dirty_count(), 3);
        let r: Vec<_> = bm.dirty_ranges().collect();
        assert_eq!(r, vec![(0, 8), (72, 8), (992, 8)]);
        bm.set(10).unwrap();
        let r: Vec<_> = bm.dirty_ranges().collect();
        assert_eq!(r, vec![(0, 8), (72, 16), (992, 8)]);
        bm.clear(9).unwrap();
        assert!(!bm.is_dirty(9));
        assert!(bm.is_dirty(10));
    }

    #[test]
    fn last_range_is_clipped_to_sync_size() {
        let mut s = sample();
        s.sync_size = 1003;
        let mut bm = Bitmap::new(s, false).unwrap();
        assert_eq!(bm.chunks(), 126);
        bm.set_sectors(1001, 2).unwrap();
        assert_eq!(bm.dirty_ranges().collect::<Vec<_>>(), vec![(1000, 3)]);
        assert!(bm.set_sectors(1002, 2).is_err());
    }

    #[test]
    fn mdadm_chunk_choice() {
        // Small members: 64 MiB default.
        assert_eq!(choose_chunk(64 << 11, 8), Some(64 << 20));
        // 1 TiB member, room 256 sectors: (131072 - 256) * 8 = 1046528 bits; at
        // 2 MiB chunks mdadm counts 2^19 + 1 bits, at 1 MiB 2^20 + 1 (too many).
        let tib = 1u64 << 31;
        assert_eq!(min_chunk(tib, 256), Some(2 << 20));
        assert_eq!(choose_chunk(tib, 256), Some(64 << 20));
        // 100 TiB in 8 sectors of room: 30720 bits -> chunk >= 100 TiB / 30720.
        let big = 100 * tib;
        let c = min_chunk(big, 8).unwrap();
        assert!((big * 512 / c + 1) <= 30720);
        assert!((big * 512 / (c / 2) + 1) > 30720);
        assert_eq!(choose_chunk(big, 1), None);
    }
}
