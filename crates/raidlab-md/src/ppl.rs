//! md's RAID 5 partial parity log (PPL), as md writes it for native (v1.x)
//! metadata.
//!
//! Placement: with `feature::PPL` (and, once md has run it with room for more than
//! one log, also `feature::MULTIPLE_PPLS`) the superblock's `bitmap_offset` field
//! holds `ppl.offset` (i16, sectors from the superblock) and `ppl.size` (u16,
//! sectors). `mdadm --create --consistency-policy=ppl` on v1.2 chooses offset 8
//! (right after the 4 KiB superblock) and size 2048 (1 MiB,
//! MULTIPLE_PPL_AREA_SIZE_SUPER1), reserves those 2048 sectors when it picks the data
//! offset, puts the bad block log after them, zeroes the area and writes an empty
//! header at its start.
//!
//! A log write is a 4 KiB header followed by the partial parity of its entries, in
//! entry order. Header layout (little-endian):
//!
//! | offset | field |
//! |---|---|
//! | 0 | reserved \[512\], all 0xff |
//! | 512 | signature u32 = crc32c(set_uuid) |
//! | 516 | padding u32 (zero) |
//! | 520 | generation u64 |
//! | 528 | entries_count u32 (at most 148) |
//! | 532 | checksum u32: crc32c of the 4096 bytes with this field zero |
//! | 536 | entries\[148\], 24 bytes each: data_sector u64, pp_size u32, data_size u32, parity_disk u32, checksum u32 |
//! | 4088 | 8 bytes (zero) |
//!
//! "crc32c" is the standard CRC-32C (Castagnoli, reflected, initial value and final
//! xor all ones): md computes `~crc32c_le(~0, ...)`, which is exactly it
//! (crc32c("123456789") = 0xe3069283). An entry's checksum is that of its partial
//! parity bytes (0 when `pp_size` is 0, a full-stripe write). `data_sector` is the
//! array sector of the first modified data block, in 512-byte units for native md,
//! `data_size` the bytes of modified data, `pp_size` the bytes of partial parity
//! (md writes whole 4 KiB pages), `parity_disk` the slot holding the stripe's parity
//! (the log lives on that member).
//!
//! With an area of at least 2 * (128 KiB + 4 KiB) md appends writes one after the
//! other (next header after the previous header and its partial parity, back to the
//! start when the rest would not fit); at start-up it walks the chain from the start
//! of the area and takes the last header whose checksum and signature are good and
//! whose generation does not go backwards. Recovery (only for an array that was not
//! shut down cleanly) replays that header's entries whose partial parity checksum
//! matches.
//!
//! Sources read (never copied): Linux `include/uapi/linux/raid/md_p.h` (`struct
//! ppl_header`, `ppl_header_entry`), `drivers/md/raid5-ppl.c` (`ppl_log_stripe`,
//! `ppl_submit_iounit`, `ppl_recover`, `ppl_load_distributed`, `ppl_validate_rdev`,
//! `ppl_init_log`), mdadm `super1.c` (`write_init_ppl1`, `write_init_super1`,
//! `validate_geometry1`, `update_super1` for `ppl`).

use crate::le::{put, u32_at, u64_at};
use crate::superblock::{feature, Superblock, HEADER_LEN, SB_AREA};
use raidlab_core::{Error, ErrorKind, Op, Volume};
use serde::Serialize;

/// Size of a PPL header.
pub const PPL_HEADER_SIZE: usize = 4096;
/// Leading bytes of the header, filled with 0xff.
pub const PPL_HDR_RESERVED: usize = 512;
/// Size of one `ppl_header_entry`.
pub const PPL_ENTRY_SIZE: usize = 24;
/// Entries that fit in a header: (4096 - 512 - 4 * 4 - 8) / 24.
pub const PPL_HDR_MAX_ENTRIES: usize =
    (PPL_HEADER_SIZE - PPL_HDR_RESERVED - 4 * 4 - 8) / PPL_ENTRY_SIZE;
/// md's partial parity space per log write when the area holds several (128 KiB).
pub const PPL_SPACE_SIZE: u64 = 128 * 1024;
/// The PPL area mdadm reserves for v1.x metadata (1 MiB).
pub const MULTIPLE_PPL_AREA_SIZE_SUPER1: u64 = 1024 * 1024;
/// Sectors per 4 KiB page (md's STRIPE_SECTORS).
const PAGE_SECTORS: u64 = 8;
const HEADER_SECTORS: u64 = (PPL_HEADER_SIZE / 512) as u64;

/// Byte offsets in the header.
pub mod off {
    pub const RESERVED: usize = 0;
    pub const SIGNATURE: usize = 512;
    pub const PADDING: usize = 516;
    pub const GENERATION: usize = 520;
    pub const ENTRIES_COUNT: usize = 528;
    pub const CHECKSUM: usize = 532;
    pub const ENTRIES: usize = 536;
    /// Offsets inside an entry.
    pub const E_DATA_SECTOR: usize = 0;
    pub const E_PP_SIZE: usize = 8;
    pub const E_DATA_SIZE: usize = 12;
    pub const E_PARITY_DISK: usize = 16;
    pub const E_CHECKSUM: usize = 20;
}

/// Standard CRC-32C of `data` (md's `~crc32c_le(~0, data)`).
pub fn crc32c(data: &[u8]) -> u32 {
    // The crc32c crate uses the CPU's CRC32 instruction where there is one: a
    // table-driven CRC made checksumming every logged write the largest cost of
    // a small write with a partial parity log.
    crc32c::crc32c(data)
}

/// The header signature md uses for a native array: crc32c of the 16-byte
/// `set_uuid`.
pub fn signature(set_uuid: &[u8; 16]) -> u32 {
    crc32c(set_uuid)
}

/// One `ppl_header_entry`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PplEntry {
    /// Array sector (512-byte units) of the first modified data block.
    pub data_sector: u64,
    /// Bytes of partial parity stored for this entry (0 for a full-stripe write).
    pub pp_size: u32,
    /// Bytes of modified data.
    pub data_size: u32,
    /// Slot of the member holding the stripe's parity (and this log).
    pub parity_disk: u32,
    /// crc32c of the partial parity.
    pub checksum: u32,
}

impl PplEntry {
    /// The entry md logs for a write of `data_size` bytes from array sector
    /// `data_sector` to a stripe whose parity is on slot `parity_disk`, with
    /// partial parity `pp` (empty for a full-stripe write). Sizes must be whole
    /// sectors and `data_size` non-zero.
    pub fn for_write(
        data_sector: u64,
        data_size: u32,
        parity_disk: u32,
        pp: &[u8],
    ) -> Result<PplEntry, Error> {
        let pp_size = u32::try_from(pp.len())
            .map_err(|_| invalid("pp_size", format!("{} bytes", pp.len()), "below 4 GiB"))?;
        let e = PplEntry {
            data_sector,
            pp_size,
            data_size,
            parity_disk,
            checksum: Self::pp_checksum(pp),
        };
        e.validate(0)?;
        Ok(e)
    }

    /// The checksum of a partial parity buffer (crc32c; 0 when empty).
    pub fn pp_checksum(pp: &[u8]) -> u32 {
        crc32c(pp)
    }

    /// Whether `pp` is this entry's partial parity (length and checksum).
    pub fn pp_matches(&self, pp: &[u8]) -> bool {
        pp.len() as u64 == u64::from(self.pp_size) && Self::pp_checksum(pp) == self.checksum
    }

    fn validate(&self, i: usize) -> Result<(), Error> {
        if self.data_size == 0 || self.data_size % 512 != 0 {
            return Err(invalid(
                &format!("entries[{i}].data_size"),
                self.data_size,
                "a non-zero multiple of 512 bytes",
            ));
        }
        if self.pp_size % 512 != 0 {
            return Err(invalid(
                &format!("entries[{i}].pp_size"),
                self.pp_size,
                "a multiple of 512 bytes",
            ));
        }
        if self
            .data_sector
            .checked_add(u64::from(self.data_size / 512))
            .is_none()
        {
            return Err(invalid(
                &format!("entries[{i}].data_sector"),
                self.data_sector,
                "a sector whose data range fits in 64 bits",
            ));
        }
        Ok(())
    }
}

/// A PPL header, decoded. `checksum` is not stored: [`PplHeader::parse`] verifies
/// it and [`PplHeader::to_bytes`] recomputes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PplHeader {
    pub signature: u32,
    pub generation: u64,
    /// `entries_count` entries (at most [`PPL_HDR_MAX_ENTRIES`]).
    pub entries: Vec<PplEntry>,
}

impl PplHeader {
    /// The empty header md and mdadm write when a log is (re)initialised.
    pub fn empty(signature: u32) -> PplHeader {
        PplHeader {
            signature,
            generation: 0,
            entries: Vec::new(),
        }
    }

    /// md's header checksum: crc32c of the first 4096 bytes of `bytes` with the
    /// checksum field taken as zero. 0 when `bytes` is shorter than a header.
    pub fn checksum(bytes: &[u8]) -> u32 {
        let Some(h) = bytes.get(..PPL_HEADER_SIZE) else {
            return 0;
        };
        let c = crc32c::crc32c(&h[..off::CHECKSUM]);
        let c = crc32c::crc32c_append(c, &[0; 4]);
        crc32c::crc32c_append(c, &h[off::CHECKSUM + 4..])
    }

    /// Decode and validate a header from the first 4096 bytes of `bytes`: checksum,
    /// reserved bytes 0xff, padding and unused entries zero, `entries_count` at most
    /// 148, entry sizes whole sectors. The signature is not compared here (see
    /// [`scan`]). Never panics.
    pub fn parse(bytes: &[u8]) -> Result<PplHeader, Error> {
        if bytes.len() < PPL_HEADER_SIZE {
            return Err(invalid(
                "(length)",
                format!("{} bytes", bytes.len()),
                format!("{PPL_HEADER_SIZE} bytes"),
            ));
        }
        let b = &bytes[..PPL_HEADER_SIZE];
        let stored = u32_at(b, off::CHECKSUM);
        let computed = Self::checksum(b);
        if stored != computed {
            return Err(invalid(
                "checksum",
                format!("{stored:#010x}"),
                format!("{computed:#010x} (checksum mismatch: no valid header here)"),
            ));
        }
        if let Some(i) = b[off::RESERVED..PPL_HDR_RESERVED]
            .iter()
            .position(|&x| x != 0xff)
        {
            return Err(invalid(
                &format!("reserved (byte {i})"),
                format!("{:#04x}", b[i]),
                "0xff",
            ));
        }
        let padding = u32_at(b, off::PADDING);
        if padding != 0 {
            return Err(invalid("padding", padding, 0));
        }
        let count = u32_at(b, off::ENTRIES_COUNT);
        if count as usize > PPL_HDR_MAX_ENTRIES {
            return Err(invalid(
                "entries_count",
                count,
                format!("at most {PPL_HDR_MAX_ENTRIES}"),
            ));
        }
        let mut entries = Vec::with_capacity(count as usize);
        for i in 0..count as usize {
            let at = off::ENTRIES + i * PPL_ENTRY_SIZE;
            let e = PplEntry {
                data_sector: u64_at(b, at + off::E_DATA_SECTOR),
                pp_size: u32_at(b, at + off::E_PP_SIZE),
                data_size: u32_at(b, at + off::E_DATA_SIZE),
                parity_disk: u32_at(b, at + off::E_PARITY_DISK),
                checksum: u32_at(b, at + off::E_CHECKSUM),
            };
            e.validate(i)?;
            entries.push(e);
        }
        let unused = off::ENTRIES + count as usize * PPL_ENTRY_SIZE;
        if let Some(i) = b[unused..].iter().position(|&x| x != 0) {
            let at = unused + i;
            let what = if at < off::ENTRIES + PPL_HDR_MAX_ENTRIES * PPL_ENTRY_SIZE {
                format!(
                    "entries[{}] (byte {at}, past entries_count {count})",
                    (at - off::ENTRIES) / PPL_ENTRY_SIZE
                )
            } else {
                format!("tail (byte {at})")
            };
            return Err(invalid(&what, b[at], 0));
        }
        Ok(PplHeader {
            signature: u32_at(b, off::SIGNATURE),
            generation: u64_at(b, off::GENERATION),
            entries,
        })
    }

    /// The 4096-byte header with a fresh checksum. Entries past
    /// [`PPL_HDR_MAX_ENTRIES`] are dropped (use [`PplHeader::validate`] first).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; PPL_HEADER_SIZE];
        b[..PPL_HDR_RESERVED].fill(0xff);
        put(&mut b, off::SIGNATURE, &self.signature.to_le_bytes());
        put(&mut b, off::GENERATION, &self.generation.to_le_bytes());
        let n = self.entries.len().min(PPL_HDR_MAX_ENTRIES);
        put(&mut b, off::ENTRIES_COUNT, &(n as u32).to_le_bytes());
        for (i, e) in self.entries.iter().take(n).enumerate() {
            let at = off::ENTRIES + i * PPL_ENTRY_SIZE;
            put(
                &mut b,
                at + off::E_DATA_SECTOR,
                &e.data_sector.to_le_bytes(),
            );
            put(&mut b, at + off::E_PP_SIZE, &e.pp_size.to_le_bytes());
            put(&mut b, at + off::E_DATA_SIZE, &e.data_size.to_le_bytes());
            put(
                &mut b,
                at + off::E_PARITY_DISK,
                &e.parity_disk.to_le_bytes(),
            );
            put(&mut b, at + off::E_CHECKSUM, &e.checksum.to_le_bytes());
        }
        let c = Self::checksum(&b);
        put(&mut b, off::CHECKSUM, &c.to_le_bytes());
        b
    }

    /// Range-check the entries (count and sizes).
    pub fn validate(&self) -> Result<(), Error> {
        if self.entries.len() > PPL_HDR_MAX_ENTRIES {
            return Err(invalid(
                "entries_count",
                self.entries.len(),
                format!("at most {PPL_HDR_MAX_ENTRIES}"),
            ));
        }
        for (i, e) in self.entries.iter().enumerate() {
            e.validate(i)?;
        }
        Ok(())
    }

    /// Bytes of partial parity following the header.
    pub fn pp_bytes(&self) -> u64 {
        self.entries.iter().map(|e| u64::from(e.pp_size)).sum()
    }

    /// One log write: this header then each entry's partial parity, in order.
    /// `pps[i]` must be entry `i`'s partial parity (length and checksum).
    pub fn encode_write(&self, pps: &[&[u8]]) -> Result<Vec<u8>, Error> {
        self.validate()?;
        if pps.len() != self.entries.len() {
            return Err(Error::invalid(format!(
                "PPL write has {} partial parity buffers for {} entries",
                pps.len(),
                self.entries.len()
            )));
        }
        let mut out = self.to_bytes();
        for (i, (e, pp)) in self.entries.iter().zip(pps).enumerate() {
            if !e.pp_matches(pp) {
                return Err(Error::invalid(format!(
                    "PPL entry {i}: partial parity of {} bytes does not match pp_size {} / checksum {:#010x}",
                    pp.len(),
                    e.pp_size,
                    e.checksum
                )));
            }
            out.extend_from_slice(pp);
        }
        Ok(out)
    }
}

/// Where the PPL area of a v1.2 member is: `(byte offset on the member, bytes)`,
/// from `ppl.offset` / `ppl.size` (sectors, relative to the superblock).
/// `Ok(None)` without a PPL feature bit. Refused as md refuses them (no room for a
/// header and one page of partial parity; overlapping the data) and, stricter than
/// md, an area that is not after the 4 KiB superblock area (raidlab rewrites that
/// whole area) or that overlaps the bad block log, or a PPL together with a bitmap.
pub fn ppl_area(sb: &Superblock) -> Result<Option<(u64, u64)>, Error> {
    if sb.feature_map & (feature::PPL | feature::MULTIPLE_PPLS) == 0 {
        return Ok(None);
    }
    let bad = |found: String, expected: String| {
        Err(Error::invalid(format!(
            "md superblock ppl (offset {}, size {} sectors): {found}, expected {expected}",
            sb.ppl_offset(),
            sb.ppl_size()
        )))
    };
    if sb.feature_map & feature::BITMAP_OFFSET != 0 {
        return bad(
            "a bitmap is also set".into(),
            "a bitmap or a PPL, not both".into(),
        );
    }
    let offset = i64::from(sb.ppl_offset());
    let size = u64::from(sb.ppl_size());
    let min = (SB_AREA / 512) as i64;
    let sb_sectors = (HEADER_LEN as u64 + 2 * u64::from(sb.max_dev)).div_ceil(512) as i64;
    if offset < min.max(sb_sectors) {
        return bad(
            "the area starts inside or before the superblock".into(),
            format!("an offset of at least {min} sectors (after the 4 KiB superblock area)"),
        );
    }
    if usable_sectors(size) == 0 {
        return bad(
            "too small".into(),
            "room for the 4 KiB header and at least one 4 KiB page of partial parity".into(),
        );
    }
    let start = sb.super_offset + offset as u64;
    let end = start + size;
    if end > sb.data_offset {
        return bad(
            format!("the area ends at sector {end}"),
            format!(
                "an area ending at or before data_offset ({})",
                sb.data_offset
            ),
        );
    }
    if sb.bblog_size != 0 {
        let bb = i128::from(sb.super_offset) + i128::from(sb.bblog_offset);
        let bb_end = bb + i128::from(sb.bblog_size);
        if bb < i128::from(end) && bb_end > i128::from(start) {
            return bad(
                format!("the area overlaps the bad block log (sectors {bb}..{bb_end})"),
                "separate areas".into(),
            );
        }
    }
    Ok(Some((start * 512, size * 512)))
}

/// The part of a PPL area md uses (sectors): the header plus the partial parity
/// space rounded down to whole 4 KiB pages; 0 when that leaves no page.
pub fn usable_sectors(ppl_size_sectors: u64) -> u64 {
    let data = ppl_size_sectors.saturating_sub(HEADER_SECTORS) / PAGE_SECTORS * PAGE_SECTORS;
    if data == 0 {
        0
    } else {
        data + HEADER_SECTORS
    }
}

/// Whether md keeps several log writes in an area of `ppl_size_sectors` (at least
/// two of 128 KiB + 4 KiB) rather than rewriting one at the start.
pub fn uses_multiple_ppls(ppl_size_sectors: u64) -> bool {
    usable_sectors(ppl_size_sectors) * 512 >= (PPL_SPACE_SIZE + PPL_HEADER_SIZE as u64) * 2
}

/// `(ppl.offset, ppl.size)` in sectors that `mdadm --create
/// --consistency-policy=ppl` records for a v1.2 member: right after the 4 KiB
/// superblock, 1 MiB.
pub fn mdadm_ppl_offset_size() -> (i16, u16) {
    (
        (SB_AREA / 512) as i16,
        (MULTIPLE_PPL_AREA_SIZE_SUPER1 / 512) as u16,
    )
}

/// The data offset (bytes) mdadm chooses for a v1.2 member with
/// `--consistency-policy=ppl`: as [`crate::mdadm_data_offset`] but reserving the
/// 1 MiB PPL area instead of bitmap space: `round_up(24 + 2048 + headroom, 2048)`
/// sectors.
pub fn mdadm_ppl_data_offset(member_bytes: u64, chunk_kib: u32) -> u64 {
    let dev = member_bytes / 512;
    let mut headroom: u64 = 128 * 1024 * 2;
    while (headroom << 10) > dev && (chunk_kib == 0 || headroom / 2 >= u64::from(chunk_kib) * 4) {
        headroom >>= 1;
    }
    let sectors = (24 + MULTIPLE_PPL_AREA_SIZE_SUPER1 / 512 + headroom).div_ceil(2048) * 2048;
    sectors * 512
}

/// Turn a new raid5 member's superblock into what `mdadm --create
/// --consistency-policy=ppl` writes: `feature::PPL`, `ppl` = (8, 2048), and the
/// bad block log moved after the PPL area (or just before the data when that does
/// not fit, or dropped when neither does), as mdadm places it. The data offset
/// must leave room for the area (see [`mdadm_ppl_data_offset`]).
pub fn enable_ppl(sb: &mut Superblock) -> Result<(), Error> {
    if sb.level != 5 {
        return Err(Error::invalid(format!(
            "md superblock field level is {}, expected 5 (md's PPL is raid5 only)",
            sb.level
        )));
    }
    if sb.feature_map & (feature::BITMAP_OFFSET | feature::JOURNAL) != 0 {
        return Err(Error::invalid(format!(
            "md superblock field feature_map is {:#x}, expected no bitmap or journal (md allows one consistency policy)",
            sb.feature_map
        )));
    }
    let (offset, size) = mdadm_ppl_offset_size();
    let mut new = sb.clone();
    new.feature_map |= feature::PPL;
    new.bitmap_offset = ((u32::from(size) << 16) | u32::from(offset as u16)) as i32;
    let sbo = new.super_offset;
    let after = offset as u64 + u64::from(size);
    if new.data_offset >= sbo + after + 8 {
        new.bblog_size = 8;
        new.bblog_offset = after as i32;
    } else if new.data_offset >= sbo + 16 {
        new.bblog_size = 8;
        new.bblog_offset = (new.data_offset - 8 - sbo) as i32;
    } else {
        new.bblog_size = 0;
        new.bblog_offset = 0;
    }
    ppl_area(&new)?;
    *sb = new;
    Ok(())
}

/// What mdadm writes to a new member's PPL area: zeros, then an empty header
/// (reserved 0xff, the array's signature, generation 0, no entries) at its start.
pub fn initial_area(sb: &Superblock) -> Result<Vec<u8>, Error> {
    let mut area = vec![0u8; area_len(sb)? as usize];
    area[..PPL_HEADER_SIZE].copy_from_slice(&empty_header(sb));
    Ok(area)
}

/// The length in bytes of the member's PPL area.
pub fn area_len(sb: &Superblock) -> Result<u64, Error> {
    match ppl_area(sb)? {
        Some((_, len)) => Ok(len),
        None => Err(Error::invalid(
            "the superblock has no PPL (feature_map lacks PPL)",
        )),
    }
}

/// The empty header that starts an emptied PPL area: reserved 0xff, the
/// array's signature, generation 0, no entries ([`PPL_HEADER_SIZE`] bytes).
pub fn empty_header(sb: &Superblock) -> Vec<u8> {
    PplHeader::empty(signature(&sb.set_uuid)).to_bytes()
}

/// Read a member's whole PPL area (`Ok(None)` without a PPL feature bit).
pub fn read_area(vol: &dyn Volume, sb: &Superblock) -> Result<Option<Vec<u8>>, Error> {
    let name = vol.name();
    let Some((at, len)) = ppl_area(sb).map_err(|e| e.on_device(name.clone()))? else {
        return Ok(None);
    };
    let mut area = vec![0u8; len as usize];
    vol.read_at(&mut area, at)?;
    Ok(Some(area))
}

/// Where [`write_area`] puts `len` bytes at byte `offset` of the member's
/// PPL area: the byte offset on the member device, after the same checks.
/// For callers that do the write themselves (the engine, as a step of a plan).
pub fn area_offset(sb: &Superblock, offset: u64, len: usize) -> Result<u64, Error> {
    let Some((at, area)) = ppl_area(sb)? else {
        return Err(Error::new(
            ErrorKind::Invalid,
            Op::Write,
            "the superblock has no PPL (feature_map lacks PPL)",
        ));
    };
    match offset.checked_add(len as u64) {
        Some(end) if end <= area => Ok(at + offset),
        _ => Err(Error::new(
            ErrorKind::OutOfRange,
            Op::Write,
            format!("PPL write of {len} bytes at {offset} does not fit the {area} byte area"),
        )),
    }
}

/// Write `bytes` (a header and partial parity, or a whole area from
/// [`initial_area`]) at byte `offset` of the member's PPL area, and flush.
pub fn write_area(
    vol: &dyn Volume,
    sb: &Superblock,
    offset: u64,
    bytes: &[u8],
) -> Result<(), Error> {
    let at = area_offset(sb, offset, bytes.len()).map_err(|e| e.on_device(vol.name()))?;
    vol.write_at(bytes, at)?;
    vol.flush()
}

/// One entry of the header [`scan`] found, with where its partial parity is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScannedEntry {
    pub entry: PplEntry,
    /// Byte offset of the partial parity inside the area.
    pub pp_offset: u64,
    /// The partial parity lies inside the area and matches the entry checksum:
    /// md's recovery would replay this entry.
    pub valid: bool,
}

/// The newest valid log write in a PPL area, as md finds it at start-up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PplScan {
    /// Byte offset of the header inside the area.
    pub header_offset: u64,
    pub header: PplHeader,
    pub entries: Vec<ScannedEntry>,
}

impl PplScan {
    /// The entries recovery would replay (checksum good), in log order.
    pub fn replayable(&self) -> impl Iterator<Item = &ScannedEntry> + '_ {
        self.entries.iter().filter(|e| e.valid)
    }

    /// Entries whose partial parity does not check out (md counts them as
    /// mismatches and skips them).
    pub fn mismatches(&self) -> usize {
        self.entries.iter().filter(|e| !e.valid).count()
    }
}

/// Find the newest valid header in a PPL `area` (its first `usable_sectors(size)`
/// sectors are used) for an array whose header signature is `signature`, walking
/// from the start as md does: a header is taken while its checksum and signature
/// are good and its generation is not older than the previous one; the next header
/// is looked for after this one's partial parity. `None` when the first header is
/// not valid. Each entry's partial parity is then checked.
pub fn scan(area: &[u8], signature: u32) -> Option<PplScan> {
    let usable = usable_sectors(area.len() as u64 / 512);
    let mut at: u64 = 0;
    let mut best: Option<(u64, PplHeader)> = None;
    while usable > HEADER_SECTORS && at < usable - HEADER_SECTORS {
        let start = (at * 512) as usize;
        let Ok(h) = PplHeader::parse(&area[start..]) else {
            break;
        };
        if h.signature != signature {
            break;
        }
        if let Some((_, prev)) = &best {
            if prev.generation > h.generation {
                break;
            }
        }
        let next = at + HEADER_SECTORS + h.pp_bytes() / 512;
        best = Some((at, h));
        at = next;
    }
    let (hat, header) = best?;
    let mut pp = hat * 512 + PPL_HEADER_SIZE as u64;
    let entries = header
        .entries
        .iter()
        .map(|e| {
            let end = pp + u64::from(e.pp_size);
            let valid = end <= area.len() as u64
                && PplEntry::pp_checksum(&area[pp as usize..end as usize]) == e.checksum;
            let s = ScannedEntry {
                entry: *e,
                pp_offset: pp,
                valid,
            };
            pp = end;
            s
        })
        .collect();
    Some(PplScan {
        header_offset: hat * 512,
        header,
        entries,
    })
}

fn invalid(field: &str, found: impl std::fmt::Display, expected: impl std::fmt::Display) -> Error {
    crate::le::invalid("PPL header", field, found, expected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_constants_match_md_p_h() {
        assert_eq!(PPL_HDR_MAX_ENTRIES, 148);
        assert_eq!(off::ENTRIES + PPL_HDR_MAX_ENTRIES * PPL_ENTRY_SIZE, 4088);
    }

    #[test]
    fn crc32c_known_answers() {
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(b""), 0);
        // 32 zero bytes: the iSCSI (RFC 3720 B.4) test vector.
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62a8_ab43);
    }

    #[test]
    fn usable_size_rounds_like_md() {
        assert_eq!(usable_sectors(2048), 2048);
        assert_eq!(usable_sectors(2047), 2040);
        assert_eq!(usable_sectors(15), 0);
        assert_eq!(usable_sectors(16), 16);
        assert!(uses_multiple_ppls(2048));
        assert!(!uses_multiple_ppls(527));
        assert!(uses_multiple_ppls(528));
    }
}
