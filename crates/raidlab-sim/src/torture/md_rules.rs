//! md's own test of a superblock, applied by the harness to the bytes on the
//! members after a power cut: md loads a device into an array only if its
//! superblock's checksum holds (`super_90_load`, `super_1_load`), so a
//! device whose superblock a cut tore is no part of the array, whatever its
//! event count or role say. The assembly must keep none.
//!
//! It decides nothing for the engine; it is the invariant "superblocks
//! assemble by md's rules" for the one rule the engine could break without
//! any data going wrong at once (a torn superblock mixing two commits of
//! the same roles reads as either). The checksums are written here again,
//! from md's definitions, on purpose: the check must not lean on
//! `raidlab-md`'s readers, which are what it checks.

use super::run::Rig;
use raidlab_core::Volume;
use raidlab_raid::assemble::Assembly;

/// md's 0.90 superblock: 1024 words, the checksum in word 38.
const SB090_BYTES: usize = 4096;
const SB090_CSUM_WORD: usize = 38;
/// md's 1.x superblock: a 256-byte header, `max_dev` at byte 220, the
/// checksum at byte 216, then `max_dev` 16-bit roles; 4 KiB at most.
const SB1_HEADER: usize = 256;
const SB1_MAX_DEV: usize = 220;
const SB1_CSUM: usize = 216;
const SB1_AREA: usize = 4096;
const MD_MAGIC: u32 = 0xa92b_4efc;

fn fold(sum: u64) -> u32 {
    ((sum & 0xffff_ffff) + (sum >> 32)) as u32
}

/// md's `calc_sb_csum` against the stored one: the words in the byte order
/// the magic shows, `sb_csum` taken as zero.
fn sb090_ok(b: &[u8]) -> bool {
    let word = |i: usize, be: bool| {
        let a = [b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]];
        if be {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    };
    let be = word(0, false) != MD_MAGIC;
    let sum = (0..SB090_BYTES / 4)
        .filter(|&i| i != SB090_CSUM_WORD)
        .map(|i| u64::from(word(i, be)))
        .sum();
    fold(sum) == word(SB090_CSUM_WORD, be)
}

/// md's `calc_sb_1_csum` against the stored one: the little-endian words of
/// the header and roles, a trailing 16-bit word when `max_dev` is odd.
fn sb1_ok(b: &[u8]) -> bool {
    let le32 = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let max_dev = le32(SB1_MAX_DEV) as usize;
    let len = SB1_HEADER + 2 * max_dev;
    if len > SB1_AREA {
        return false;
    }
    let mut sum: u64 = (0..len / 4)
        .map(|w| 4 * w)
        .filter(|&i| i != SB1_CSUM)
        .map(|i| u64::from(le32(i)))
        .sum();
    if len % 4 == 2 {
        sum += u64::from(u16::from_le_bytes([b[len - 2], b[len - 1]]));
    }
    fold(sum) == le32(SB1_CSUM)
}

impl Rig {
    /// Every device `asm` took in, spare or stale ones included, holds a
    /// superblock md would load: read from the medium as the power left it
    /// (after the restart, nothing is held in a volatile cache), behind the
    /// member's back so that no I/O is counted.
    pub(super) fn superblocks_md_loads(&self, asm: &Assembly) -> Result<(), String> {
        for m in &asm.members {
            let Some(dev) = (0..self.vols.len()).find(|&i| self.paths[i] == m.device.path) else {
                continue;
            };
            let mut b = vec![0u8; SB1_AREA];
            let at = m.sb.super_offset * 512;
            self.vols[dev]
                .inner()
                .read_at(&mut b, at)
                .map_err(|e| format!("{}: superblock unreadable: {e}", m.device.path))?;
            let ok = if m.sb.v0_90.is_some() {
                sb090_ok(&b)
            } else {
                sb1_ok(&b)
            };
            if !ok {
                return Err(format!(
                    "{} taken into the assembly as {:?} (events {}) with a superblock md would not load: its checksum fails (torn by the cut)",
                    m.device.path, m.state, m.sb.events
                ));
            }
        }
        Ok(())
    }
}
