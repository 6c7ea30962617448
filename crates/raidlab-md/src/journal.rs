//! md's RAID 4/5/6 write journal (`raid5-cache`), as md writes it in its default
//! write-through mode: the on-disk format as bytes, and the superblock fields of a
//! journal device.
//!
//! A journal is a separate device (`mdadm --write-journal DEV`). Its superblock
//! carries role 0xfffd ([`crate::ROLE_JOURNAL`]) in `dev_roles`, every device of the
//! array carries `feature::JOURNAL`, and the journal device keeps `journal_tail`
//! (the `recovery_offset` field, sectors from its data offset): where the oldest
//! log block still needed starts. The log is a ring over the journal's data area
//! (`data_size` sectors rounded down to 4 KiB blocks), made of *meta blocks*, each
//! followed by the 4 KiB pages its payloads describe. Layout (little-endian):
//!
//! | offset | meta block field |
//! |---|---|
//! | 0 | magic u32 = 0x6433c509 |
//! | 4 | checksum u32 |
//! | 8 | version u8 = 1, then u8 and u16 zero |
//! | 12 | meta_size u32: bytes used, header and payload descriptors |
//! | 16 | seq u64: one more than the previous meta block's |
//! | 24 | position u64: this block's sector in the ring |
//! | 32 | payload descriptors, back to back |
//!
//! A data or parity descriptor is type u16 (0 data, 1 parity), flags u16, size u32
//! (sectors of pages that follow: 8 per page), location u64 (data: the array
//! sector of the page; parity: the stripe's sector on the members), then one
//! checksum u32 per page. A stripe's parity descriptor covers P, and for RAID 6 Q
//! after it (size 16). A flush descriptor (type 2, write-back mode only) is the
//! type, flags, size u32 in bytes, and that many bytes of u64 stripe sectors.
//! The rest of the 4 KiB block is zero.
//!
//! Checksums are the kernel's `crc32c_le(seed, ...)`: CRC-32C without the final
//! inversion, started from `seed` = `crc32c_le(~0, set_uuid)` ([`uuid_seed`]).
//! A meta block's checksum covers its whole 4 KiB with the field zero; a page's,
//! its 4 KiB.
//!
//! Recovery (every start, clean or not): from `journal_tail`, read meta blocks
//! while magic, version, checksum, seq (the previous one's plus one) and
//! position (where it was read) all match; a meta block whose pages do not all
//! match their checksums is skipped (md moves on by one block). A stripe with
//! data and parity in the log is written back to the members, data pages and
//! parity; a stripe with only parity was already done. Afterwards md writes an
//! empty meta block where the scan stopped (seq + 10000) and points
//! `journal_tail` at it.
//!
//! What this module must never do: panic on any bytes (fuzzed), accept a meta
//! block that fails any of md's checks, or do I/O other than the journal
//! device's superblock and data area through [`raidlab_core::Volume`].
//!
//! Sources read (never copied): Linux `drivers/md/raid5-cache.c`
//! (`r5l_append_payload_meta`, `r5l_log_stripe`, `r5l_submit_current_io`,
//! `r5l_recovery_read_meta_block`, `r5l_recovery_verify_data_checksum_for_mb`,
//! `r5c_recovery_analyze_meta_block`, `r5l_recovery_log`, `r5l_load_log`),
//! `include/uapi/linux/raid/md_p.h` (`r5l_meta_block`, `r5l_payload_*`),
//! `drivers/md/md.c` (`super_1_validate` / `super_1_sync` for the journal role
//! and `journal_tail`), mdadm `super1.c` and `Assemble.c` (the feature bit on
//! every device; "Not safe to assemble with missing or stale journal device").

use crate::le::{put, u16_at, u32_at, u64_at};
use crate::superblock::{feature, Superblock, ROLE_JOURNAL};
use raidlab_core::{Error, ErrorKind, Op, Volume};
use serde::Serialize;

/// md's `R5LOG_MAGIC`.
pub const R5LOG_MAGIC: u32 = 0x6433_c509;
/// md's `R5LOG_VERSION`.
pub const R5LOG_VERSION: u8 = 1;
/// A meta block, and every payload page: md's PAGE_SIZE.
pub const BLOCK: usize = 4096;
/// Sectors per block (md's BLOCK_SECTORS).
pub const BLOCK_SECTORS: u64 = 8;
/// Size of the meta block header (`struct r5l_meta_block`).
pub const META_HEADER: usize = 32;
/// Size of a data/parity descriptor without its checksums.
pub const DATA_PARITY_HEADER: usize = 16;
/// Size of a flush descriptor without its stripe list.
pub const FLUSH_HEADER: usize = 8;
/// How far md moves `seq` on after a recovery, so that stale blocks further on
/// can never look like a continuation.
pub const RECOVERY_SEQ_SKIP: u64 = 10_000;

// md_p.h: r5l_meta_block is 32 bytes, a data/parity payload 16 plus 4 per page,
// and md refuses a journal for more than 203 disks because one stripe's
// descriptors must fit a meta block: the sizes here agree with that limit.
const _: () = assert!(META_HEADER == off::PAYLOADS);
const _: () = assert!(META_HEADER + (DATA_PARITY_HEADER + 4) * 203 <= BLOCK);
const _: () = assert!(META_HEADER + (DATA_PARITY_HEADER + 4) * 204 > BLOCK);

/// Payload types (`enum r5l_payload_type`).
pub mod kind {
    pub const DATA: u16 = 0;
    pub const PARITY: u16 = 1;
    pub const FLUSH: u16 = 2;
}

/// Byte offsets in a meta block.
pub mod off {
    pub const MAGIC: usize = 0;
    pub const CHECKSUM: usize = 4;
    pub const VERSION: usize = 8;
    pub const PAD1: usize = 9;
    pub const PAD2: usize = 10;
    pub const META_SIZE: usize = 12;
    pub const SEQ: usize = 16;
    pub const POSITION: usize = 24;
    pub const PAYLOADS: usize = 32;
}

/// The kernel's `crc32c_le(seed, data)`: CRC-32C continued from `seed`, with no
/// inversion on the way in or out (so the standard CRC-32C of `data` is
/// `!crc32c_le(!0, data)`).
pub fn crc32c_le(seed: u32, data: &[u8]) -> u32 {
    // The crc32c crate continues a finished (inverted) CRC: inverting on the
    // way in and out leaves the kernel's raw one. It uses the CPU's CRC32
    // instruction where there is one; a byte-at-a-time table made
    // checksumming every journaled page a tenth of a torture run.
    !crc32c::crc32c_append(!seed, data)
}

/// The seed of every journal checksum: `crc32c_le(~0, set_uuid)` (md's
/// `log->uuid_checksum`).
pub fn uuid_seed(set_uuid: &[u8; 16]) -> u32 {
    crc32c_le(!0, set_uuid)
}

/// A page's checksum.
pub fn page_checksum(seed: u32, page: &[u8]) -> u32 {
    crc32c_le(seed, page)
}

/// One payload descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Payload {
    /// One page of new data for array sector `location`.
    Data {
        flags: u16,
        location: u64,
        checksum: u32,
    },
    /// The new parity of the stripe at member sector `location`: P, then Q for
    /// RAID 6, one checksum each.
    Parity {
        flags: u16,
        location: u64,
        checksums: Vec<u32>,
    },
    /// Stripes (member sectors) written out from the cache (write-back mode).
    Flush { flags: u16, stripes: Vec<u64> },
}

impl Payload {
    /// Pages that follow the meta block for this payload.
    pub fn pages(&self) -> u64 {
        match self {
            Payload::Data { .. } => 1,
            Payload::Parity { checksums, .. } => checksums.len() as u64,
            Payload::Flush { .. } => 0,
        }
    }

    /// Bytes of its descriptor in the meta block.
    pub fn descriptor_len(&self) -> usize {
        match self {
            Payload::Data { .. } => DATA_PARITY_HEADER + 4,
            Payload::Parity { checksums, .. } => DATA_PARITY_HEADER + 4 * checksums.len(),
            Payload::Flush { stripes, .. } => FLUSH_HEADER + 8 * stripes.len(),
        }
    }
}

/// A meta block, decoded. `checksum` and `meta_size` are not stored:
/// [`MetaBlock::parse`] verifies them and [`MetaBlock::to_bytes`] computes them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MetaBlock {
    pub seq: u64,
    /// Sector of this block in the ring (from the journal's data offset).
    pub position: u64,
    pub payloads: Vec<Payload>,
}

impl MetaBlock {
    /// An empty meta block (what md writes to start a log, or after a recovery).
    pub fn empty(seq: u64, position: u64) -> MetaBlock {
        MetaBlock {
            seq,
            position,
            payloads: Vec::new(),
        }
    }

    /// Bytes used: header plus descriptors.
    pub fn meta_size(&self) -> usize {
        META_HEADER
            + self
                .payloads
                .iter()
                .map(Payload::descriptor_len)
                .sum::<usize>()
    }

    /// Whether one more payload of `descriptor_len` bytes fits.
    pub fn has_room(&self, descriptor_len: usize) -> bool {
        self.meta_size() + descriptor_len <= BLOCK
    }

    /// Pages that follow this block.
    pub fn pages(&self) -> u64 {
        self.payloads.iter().map(Payload::pages).sum()
    }

    /// The 4 KiB block with md's checksum (seeded with [`uuid_seed`]). Fails
    /// when the descriptors do not fit a block or a parity payload has not one
    /// or two pages.
    pub fn to_bytes(&self, seed: u32) -> Result<Vec<u8>, Error> {
        let size = self.meta_size();
        if size > BLOCK {
            return Err(invalid(
                "meta_size",
                size,
                format!("at most {BLOCK} bytes (too many payloads for one meta block)"),
            ));
        }
        let mut b = vec![0u8; BLOCK];
        put(&mut b, off::MAGIC, &R5LOG_MAGIC.to_le_bytes());
        b[off::VERSION] = R5LOG_VERSION;
        put(&mut b, off::META_SIZE, &(size as u32).to_le_bytes());
        put(&mut b, off::SEQ, &self.seq.to_le_bytes());
        put(&mut b, off::POSITION, &self.position.to_le_bytes());
        let mut at = off::PAYLOADS;
        for (i, p) in self.payloads.iter().enumerate() {
            match p {
                Payload::Data {
                    flags,
                    location,
                    checksum,
                } => {
                    put(&mut b, at, &kind::DATA.to_le_bytes());
                    put(&mut b, at + 2, &flags.to_le_bytes());
                    put(&mut b, at + 4, &(BLOCK_SECTORS as u32).to_le_bytes());
                    put(&mut b, at + 8, &location.to_le_bytes());
                    put(&mut b, at + 16, &checksum.to_le_bytes());
                }
                Payload::Parity {
                    flags,
                    location,
                    checksums,
                } => {
                    if !(1..=2).contains(&checksums.len()) {
                        return Err(invalid(
                            &format!("payloads[{i}].size"),
                            format!("{} pages", checksums.len()),
                            "1 page (P) or 2 (P and Q)",
                        ));
                    }
                    put(&mut b, at, &kind::PARITY.to_le_bytes());
                    put(&mut b, at + 2, &flags.to_le_bytes());
                    let sectors = checksums.len() as u32 * BLOCK_SECTORS as u32;
                    put(&mut b, at + 4, &sectors.to_le_bytes());
                    put(&mut b, at + 8, &location.to_le_bytes());
                    for (k, c) in checksums.iter().enumerate() {
                        put(&mut b, at + 16 + 4 * k, &c.to_le_bytes());
                    }
                }
                Payload::Flush { flags, stripes } => {
                    put(&mut b, at, &kind::FLUSH.to_le_bytes());
                    put(&mut b, at + 2, &flags.to_le_bytes());
                    put(&mut b, at + 4, &((stripes.len() * 8) as u32).to_le_bytes());
                    for (k, s) in stripes.iter().enumerate() {
                        put(&mut b, at + 8 + 8 * k, &s.to_le_bytes());
                    }
                }
            }
            at += p.descriptor_len();
        }
        let c = crc32c_le(seed, &b);
        put(&mut b, off::CHECKSUM, &c.to_le_bytes());
        Ok(b)
    }

    /// md's checksum of a meta block: its first 4 KiB with the checksum field
    /// zero. 0 when `bytes` is shorter than a block.
    pub fn checksum(bytes: &[u8], seed: u32) -> u32 {
        let Some(b) = bytes.get(..BLOCK) else {
            return 0;
        };
        let c = crc32c_le(seed, &b[..off::CHECKSUM]);
        let c = crc32c_le(c, &[0; 4]);
        crc32c_le(c, &b[off::CHECKSUM + 4..])
    }

    /// Decode a meta block from the first 4 KiB of `bytes` with md's checks:
    /// magic, version, checksum (seeded with `seed`), `meta_size` between the
    /// header and 4 KiB, and every descriptor whole inside `meta_size` with a
    /// known type and a size md accepts (a data page is 8 sectors, parity 8 or
    /// 16, a flush list whole u64s). Whether `seq` and `position` are the ones
    /// expected is the caller's check. Never panics.
    pub fn parse(bytes: &[u8], seed: u32) -> Result<MetaBlock, Error> {
        if bytes.len() < BLOCK {
            return Err(invalid(
                "(length)",
                format!("{} bytes", bytes.len()),
                format!("{BLOCK} bytes"),
            ));
        }
        let b = &bytes[..BLOCK];
        let magic = u32_at(b, off::MAGIC);
        if magic != R5LOG_MAGIC {
            return Err(invalid(
                "magic",
                format!("{magic:#010x}"),
                format!("{R5LOG_MAGIC:#010x} (no journal meta block here)"),
            ));
        }
        if b[off::VERSION] != R5LOG_VERSION {
            return Err(invalid("version", b[off::VERSION], R5LOG_VERSION));
        }
        let stored = u32_at(b, off::CHECKSUM);
        let computed = Self::checksum(b, seed);
        if stored != computed {
            return Err(invalid(
                "checksum",
                format!("{stored:#010x}"),
                format!("{computed:#010x} (torn or from another array)"),
            ));
        }
        let size = u32_at(b, off::META_SIZE) as usize;
        if !(META_HEADER..=BLOCK).contains(&size) {
            return Err(invalid(
                "meta_size",
                size,
                format!("{META_HEADER} to {BLOCK} bytes"),
            ));
        }
        let mut payloads = Vec::new();
        let mut at = off::PAYLOADS;
        while at < size {
            let i = payloads.len();
            let field = |f: &str| format!("payloads[{i}].{f} (byte {at})");
            if at + 4 > size {
                return Err(invalid(&field("type"), "cut off", "a whole descriptor"));
            }
            let ty = u16_at(b, at);
            let flags = u16_at(b, at + 2);
            match ty {
                kind::DATA | kind::PARITY => {
                    if at + DATA_PARITY_HEADER > size {
                        return Err(invalid(&field("size"), "cut off", "a whole descriptor"));
                    }
                    let sectors = u64::from(u32_at(b, at + 4));
                    let pages = sectors / BLOCK_SECTORS;
                    let ok = sectors % BLOCK_SECTORS == 0
                        && if ty == kind::DATA {
                            pages == 1
                        } else {
                            (1..=2).contains(&pages)
                        };
                    if !ok {
                        return Err(invalid(
                            &field("size"),
                            sectors,
                            if ty == kind::DATA {
                                "8 sectors (one page)"
                            } else {
                                "8 or 16 sectors (P, or P and Q)"
                            },
                        ));
                    }
                    let len = DATA_PARITY_HEADER + 4 * pages as usize;
                    if at + len > size {
                        return Err(invalid(
                            &field("checksum"),
                            "past meta_size",
                            format!("inside meta_size {size}"),
                        ));
                    }
                    let location = u64_at(b, at + 8);
                    let checksums: Vec<u32> = (0..pages as usize)
                        .map(|k| u32_at(b, at + 16 + 4 * k))
                        .collect();
                    payloads.push(if ty == kind::DATA {
                        Payload::Data {
                            flags,
                            location,
                            checksum: checksums[0],
                        }
                    } else {
                        Payload::Parity {
                            flags,
                            location,
                            checksums,
                        }
                    });
                    at += len;
                }
                kind::FLUSH => {
                    if at + FLUSH_HEADER > size {
                        return Err(invalid(&field("size"), "cut off", "a whole descriptor"));
                    }
                    let bytes = u32_at(b, at + 4) as usize;
                    if bytes % 8 != 0 || at + FLUSH_HEADER + bytes > size {
                        return Err(invalid(
                            &field("size"),
                            bytes,
                            format!("whole u64 stripe sectors inside meta_size {size}"),
                        ));
                    }
                    let stripes = (0..bytes / 8)
                        .map(|k| u64_at(b, at + FLUSH_HEADER + 8 * k))
                        .collect();
                    payloads.push(Payload::Flush { flags, stripes });
                    at += FLUSH_HEADER + bytes;
                }
                other => {
                    return Err(invalid(
                        &field("type"),
                        other,
                        "0 (data), 1 (parity) or 2 (flush)",
                    ))
                }
            }
        }
        Ok(MetaBlock {
            seq: u64_at(b, off::SEQ),
            position: u64_at(b, off::POSITION),
            payloads,
        })
    }
}

/// The journal's ring: `(byte offset of the data area on the device, sectors
/// of ring)`, from the journal device's superblock (data size rounded down to
/// whole blocks, as md's `device_size`). Refuses a superblock that is not a
/// journal device's, or a ring too small for a meta block and a page.
pub fn ring(sb: &Superblock) -> Result<(u64, u64), Error> {
    if !is_journal_device(sb) {
        return Err(Error::invalid(format!(
            "md superblock of device {} has role {:#06x}, expected the journal role 0xfffd with feature JOURNAL",
            sb.dev_number,
            sb.dev_roles.get(sb.dev_number as usize).copied().unwrap_or(0)
        )));
    }
    let sectors = sb.data_size / BLOCK_SECTORS * BLOCK_SECTORS;
    if sectors < 4 * BLOCK_SECTORS {
        return Err(invalid(
            "data_size",
            sb.data_size,
            "at least 32 sectors of journal (room for meta blocks and pages)",
        ));
    }
    Ok((sb.data_offset * 512, sectors))
}

/// Whether `sb` is a journal device's: role 0xfffd and `feature::JOURNAL`.
pub fn is_journal_device(sb: &Superblock) -> bool {
    sb.feature_map & feature::JOURNAL != 0
        && sb.dev_roles.get(sb.dev_number as usize) == Some(&ROLE_JOURNAL)
}

/// `journal_tail` of a journal device (sectors in the ring; md keeps it in the
/// `recovery_offset` field).
pub fn journal_tail(sb: &Superblock) -> u64 {
    sb.recovery_offset
}

/// Set `journal_tail` (see [`journal_tail`]).
pub fn set_journal_tail(sb: &mut Superblock, tail: u64) {
    sb.recovery_offset = tail;
}

/// Where md starts reading: `journal_tail`, or 0 when it is past the ring or not
/// on a block boundary (md's `r5l_load_log`).
pub fn start_position(sb: &Superblock, ring_sectors: u64) -> u64 {
    let cp = journal_tail(sb);
    if cp >= ring_sectors || cp % BLOCK_SECTORS != 0 {
        0
    } else {
        cp
    }
}

/// `pos + sectors` around a ring of `ring_sectors` (md's `r5l_ring_add`).
pub fn ring_add(pos: u64, sectors: u64, ring_sectors: u64) -> u64 {
    if ring_sectors == 0 {
        return 0;
    }
    (pos + sectors % ring_sectors) % ring_sectors
}

/// Read one 4 KiB block at ring sector `pos`.
pub fn read_block(vol: &dyn Volume, sb: &Superblock, pos: u64) -> Result<Vec<u8>, Error> {
    let (at, sectors) = ring(sb).map_err(|e| e.on_device(vol.name()))?;
    if pos % BLOCK_SECTORS != 0 || pos >= sectors {
        return Err(Error::new(
            ErrorKind::OutOfRange,
            Op::Read,
            format!("journal block at sector {pos} is outside the {sectors}-sector ring"),
        )
        .on_device(vol.name()));
    }
    let mut b = vec![0u8; BLOCK];
    vol.read_at(&mut b, at + pos * 512)?;
    Ok(b)
}

/// Write whole 4 KiB blocks starting at ring sector `pos`, wrapping around the
/// ring (no flush: the caller orders durability).
pub fn write_blocks(
    vol: &dyn Volume,
    sb: &Superblock,
    pos: u64,
    blocks: &[u8],
) -> Result<(), Error> {
    for (at, range) in place_blocks(sb, pos, blocks.len()).map_err(|e| e.on_device(vol.name()))? {
        vol.write_at(&blocks[range], at)?;
    }
    Ok(())
}

/// Where [`write_blocks`] puts `len` bytes of whole blocks starting at ring
/// sector `pos`: one or two (byte offset on the device, range of the bytes)
/// pieces, the second from the ring's start when the write wraps. For
/// callers that do the write themselves (the engine, as a step of a plan).
pub fn place_blocks(
    sb: &Superblock,
    pos: u64,
    len: usize,
) -> Result<Vec<(u64, std::ops::Range<usize>)>, Error> {
    let (at, sectors) = ring(sb)?;
    if pos % BLOCK_SECTORS != 0 || pos >= sectors || len % BLOCK != 0 {
        return Err(Error::new(
            ErrorKind::OutOfRange,
            Op::Write,
            format!(
                "journal write of {len} bytes at sector {pos} is not whole blocks inside the {sectors}-sector ring"
            ),
        ));
    }
    if len as u64 / 512 > sectors {
        return Err(Error::new(
            ErrorKind::OutOfRange,
            Op::Write,
            format!("journal write of {len} bytes is larger than the {sectors}-sector ring"),
        ));
    }
    // Up to the end of the ring, then the rest from its start.
    let first = (((sectors - pos) * 512) as usize).min(len);
    let mut pieces = vec![(at + pos * 512, 0..first)];
    if first < len {
        pieces.push((at, first..len));
    }
    Ok(pieces)
}

/// Turn a new superblock into a journal device's, as mdadm writes it: role
/// 0xfffd in its slot of `dev_roles`, `feature::JOURNAL`, `journal_tail` 0.
/// The members get the feature with [`enable_journal_feature`].
pub fn make_journal_device(sb: &mut Superblock) -> Result<(), Error> {
    enable_journal_feature(sb)?;
    let slot = sb.dev_number as usize;
    let Some(r) = sb.dev_roles.get_mut(slot) else {
        return Err(invalid(
            "dev_number",
            sb.dev_number,
            format!("below max_dev ({})", sb.dev_roles.len()),
        ));
    };
    *r = ROLE_JOURNAL;
    set_journal_tail(sb, 0);
    Ok(())
}

/// Give a raid4/5/6 superblock md's JOURNAL feature (mdadm sets it on every
/// device of an array created with `--write-journal`). Refused with a bitmap or
/// a PPL: md keeps one consistency policy.
pub fn enable_journal_feature(sb: &mut Superblock) -> Result<(), Error> {
    if !matches!(sb.level, 4..=6) {
        return Err(invalid(
            "level",
            sb.level,
            "4, 5 or 6 (md's journal is for parity levels)",
        ));
    }
    if sb.feature_map & (feature::BITMAP_OFFSET | feature::PPL | feature::MULTIPLE_PPLS) != 0 {
        return Err(invalid(
            "feature_map",
            format!("{:#x}", sb.feature_map),
            "no bitmap or PPL (md allows one consistency policy)",
        ));
    }
    sb.feature_map |= feature::JOURNAL;
    Ok(())
}

fn invalid(field: &str, found: impl std::fmt::Display, expected: impl std::fmt::Display) -> Error {
    crate::le::invalid("journal meta block", field, found, expected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_matches_the_standard_crc32c_when_inverted() {
        // Standard CRC-32C of "123456789" is 0xe3069283; the kernel's raw form
        // started from ~0 is its inverse.
        assert_eq!(!crc32c_le(!0, b"123456789"), 0xe306_9283);
        assert_eq!(
            !crc32c_le(!0, b"123456789"),
            crate::ppl::crc32c(b"123456789")
        );
        // Chaining: one pass equals two.
        let (a, b) = b"hello, journal".split_at(5);
        assert_eq!(
            crc32c_le(7, b"hello, journal"),
            crc32c_le(crc32c_le(7, a), b)
        );
    }

    /// The kernel's definition, a bit at a time (reflected Castagnoli
    /// polynomial, no inversion): what `crc32c_le` must equal for any seed.
    fn bitwise(seed: u32, data: &[u8]) -> u32 {
        let mut c = seed;
        for &b in data {
            c ^= u32::from(b);
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    (c >> 1) ^ 0x82f6_3b78
                } else {
                    c >> 1
                };
            }
        }
        c
    }

    #[test]
    fn crc_equals_the_kernels_definition_for_any_seed() {
        // Journal checksums start from the set's uuid seed, not ~0; a page is
        // 4 KiB, a meta block's header shorter and unaligned.
        let data: Vec<u8> = (0..4099u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for seed in [0, 1, !0, 0x1234_5678, uuid_seed(&[0xa5; 16])] {
            for len in [0, 1, 3, 7, 8, 9, 63, 64, 4096, 4099] {
                for start in [0, 1, 3] {
                    let d = &data[start..start + len.min(data.len() - start)];
                    assert_eq!(
                        crc32c_le(seed, d),
                        bitwise(seed, d),
                        "seed {seed:#x} len {len}"
                    );
                }
            }
        }
    }
}
