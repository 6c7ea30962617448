//! GPT tables (UEFI 2.x, chapter 5): the header, from its primary place
//! or from the backup in the last sector, at 512- or 4096-byte sectors, and
//! its entry array, both checked by their CRC32s before anything in them is
//! used.
//!
//! It decides which header to trust and what each entry says; it must never
//! trust a length before checking it (an entry array is read only up to
//! `MAX_GPT_ENTRIES_BYTES`), and never write.

use super::{crc32, finish, format_guid, le32, le64, table_error};
use super::{Partition, PartitionTable, Scheme, MAX_GPT_ENTRIES_BYTES};
use raidlab_core::{Result, Volume};

pub(super) fn read_gpt(vol: &dyn Volume) -> Result<PartitionTable> {
    // A GPT written for 4 KiB sectors has its header at byte 4096.
    let mut first_err = None;
    for ss in [512u64, 4096] {
        match read_gpt_header(vol, ss, 1) {
            Ok(h) => return gpt_entries(vol, ss, &h),
            Err(e) if ss == 512 => first_err = Some(e),
            Err(_) => {}
        }
    }
    let primary = first_err.unwrap_or_else(|| table_error(512, "no GPT header"));
    // The backup header sits in the last sector.
    for ss in [512u64, 4096] {
        let last = vol.size() / ss;
        if last < 2 {
            continue;
        }
        if let Ok(h) = read_gpt_header(vol, ss, last - 1) {
            return gpt_entries(vol, ss, &h);
        }
    }
    Err(table_error(
        512,
        format!(
            "a protective MBR announces a GPT, but neither GPT header can be used (primary: {}; the backup in the last sector is no better)",
            primary.message
        ),
    ))
}

#[derive(Debug)]
struct GptHeader {
    entries_lba: u64,
    num_entries: u64,
    entry_size: u64,
    entries_crc: u32,
}

fn read_gpt_header(vol: &dyn Volume, ss: u64, lba: u64) -> Result<GptHeader> {
    let at = lba * ss;
    if at + ss > vol.size() {
        return Err(table_error(at, "the image ends before the GPT header"));
    }
    let mut b = vec![0u8; ss as usize];
    vol.read_at(&mut b, at)?;
    if &b[0..8] != b"EFI PART" {
        return Err(table_error(at, "no \"EFI PART\" signature"));
    }
    let header_size = u64::from(le32(&b, 12));
    if header_size < 92 || header_size > ss {
        return Err(table_error(
            at,
            format!("header size {header_size}, expected 92 to {ss} bytes"),
        ));
    }
    let stored = le32(&b, 16);
    let mut h = b[..header_size as usize].to_vec();
    h[16..20].fill(0);
    let crc = crc32(&h);
    if crc != stored {
        return Err(table_error(
            at,
            format!("header checksum {stored:#010x}, computed {crc:#010x}"),
        ));
    }
    let my_lba = le64(&b, 24);
    if my_lba != lba {
        return Err(table_error(
            at,
            format!("header says it is at sector {my_lba}, read at {lba}"),
        ));
    }
    let entry_size = u64::from(le32(&b, 84));
    let num_entries = u64::from(le32(&b, 80));
    if entry_size < 128 || entry_size % 128 != 0 || entry_size > 4096 {
        return Err(table_error(
            at,
            format!("partition entry size {entry_size}, expected a multiple of 128 up to 4096"),
        ));
    }
    if num_entries * entry_size > MAX_GPT_ENTRIES_BYTES {
        return Err(table_error(
            at,
            format!(
                "{num_entries} partition entries of {entry_size} bytes, more than the {} MiB raidlab reads",
                MAX_GPT_ENTRIES_BYTES >> 20
            ),
        ));
    }
    Ok(GptHeader {
        entries_lba: le64(&b, 72),
        num_entries,
        entry_size,
        entries_crc: le32(&b, 88),
    })
}

fn gpt_entries(vol: &dyn Volume, ss: u64, h: &GptHeader) -> Result<PartitionTable> {
    let len = h.num_entries * h.entry_size;
    let at = h.entries_lba.checked_mul(ss).filter(|a| {
        a.checked_add(len)
            .is_some_and(|end| end <= vol.size() && *a >= ss)
    });
    let Some(at) = at else {
        return Err(table_error(
            h.entries_lba.saturating_mul(ss),
            format!(
                "the GPT entry array ({len} bytes at sector {}) lies outside the image ({} bytes)",
                h.entries_lba,
                vol.size()
            ),
        ));
    };
    let mut b = vec![0u8; len as usize];
    vol.read_at(&mut b, at)?;
    let crc = crc32(&b);
    if crc != h.entries_crc {
        return Err(table_error(
            at,
            format!(
                "GPT entry array checksum {:#010x}, computed {crc:#010x}",
                h.entries_crc
            ),
        ));
    }
    let mut parts = Vec::new();
    for (i, e) in b.chunks_exact(h.entry_size as usize).enumerate() {
        let guid: [u8; 16] = e[0..16].try_into().unwrap_or([0; 16]);
        if guid == [0; 16] {
            continue;
        }
        let first = le64(e, 32);
        let last = le64(e, 40);
        let units: Vec<u16> = e[56..128]
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .take_while(|&u| u != 0)
            .collect();
        let mut p = Partition {
            number: i as u32 + 1,
            start: first.saturating_mul(ss),
            len: 0,
            kind: format_guid(&guid),
            label: String::from_utf16_lossy(&units),
            extended: false,
            problem: None,
        };
        match last
            .checked_sub(first)
            .and_then(|n| n.checked_add(1))
            .and_then(|n| n.checked_mul(ss))
        {
            Some(l) => p.len = l,
            None => {
                p.problem = Some(format!(
                    "its last sector {last} is before its first sector {first}"
                ))
            }
        }
        parts.push(p);
    }
    Ok(finish(vol.size(), Scheme::Gpt, ss, parts))
}
