//! md's bad-block log of a v1 superblock: the list of sectors of this member
//! that md could not read or write, kept `bblog_size` sectors long at
//! `bblog_offset` sectors from the superblock. Each entry is a little-endian
//! u64: the first bad sector (in units of `2^bblog_shift` sectors) in the top
//! 54 bits, the count of bad sectors (same units) in the low 10 bits; an entry
//! of all ones ends the list. Sectors count from the start of the member
//! device, not from its data area.
//!
//! It reads and parses the log and prints it as `mdadm --examine-badblocks`
//! does. It never writes the log, never trusts a count or offset it has not
//! checked, and never panics on any bytes.

use crate::Superblock;
use raidlab_core::{Error, Op, Result, Volume};

/// One listed range: `count` bad sectors from member-device sector `sector`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct BadRange {
    pub sector: u64,
    pub count: u64,
}

/// Parse a log's bytes. Entries after the end marker are ignored, as md does;
/// an entry of zero length (which md never writes) is skipped.
pub fn parse(bytes: &[u8], shift: u8) -> Vec<BadRange> {
    let shift = u32::from(shift.min(32));
    let mut out = Vec::new();
    for e in bytes.chunks_exact(8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(e);
        let bb = u64::from_le_bytes(w);
        if bb == u64::MAX {
            break;
        }
        let count = (bb & 0x3ff) << shift;
        let Some(sector) = (bb >> 10).checked_shl(shift) else {
            continue;
        };
        if count != 0 && (bb >> 10) << shift >> shift == bb >> 10 {
            out.push(BadRange { sector, count });
        }
    }
    out
}

/// The member's bad-block log: `None` when the superblock keeps none (0.90,
/// or `bblog_size` 0), else its entries (possibly none).
pub fn read(vol: &dyn Volume, sb: &Superblock) -> Result<Option<Vec<BadRange>>> {
    if sb.v0_90.is_some() || sb.bblog_size == 0 || sb.bblog_offset == 0 {
        return Ok(None);
    }
    let start = i128::from(sb.super_offset) + i128::from(sb.bblog_offset);
    let len = u64::from(sb.bblog_size) * 512;
    let dev = i128::from(vol.size() / 512);
    if start < 0 || start + i128::from(sb.bblog_size) > dev {
        return Err(Error::invalid(format!(
            "the bad-block log ({} sectors at sector {start}) lies outside the device ({dev} sectors): \
             the superblock is damaged or the image truncated",
            sb.bblog_size
        )));
    }
    let mut buf = vec![0u8; len as usize];
    vol.read_at(&mut buf, start as u64 * 512).map_err(|e| {
        Error::new(
            e.kind,
            Op::Read,
            format!("reading the bad-block log: {}", e.message),
        )
        .at(start as u64 * 512, len)
    })?;
    Ok(Some(parse(&buf, sb.bblog_shift)))
}

/// The list as `mdadm --examine-badblocks DEVICE` prints it.
pub fn render(device: &str, log: Option<&[BadRange]>) -> String {
    match log {
        None => format!("No bad-blocks list configured on {device}\n"),
        Some(list) => {
            let mut s = format!("Bad-blocks on {device}:\n");
            if list.is_empty() {
                s = format!("Bad-blocks list is empty in {device}\n");
            }
            for r in list {
                s.push_str(&format!("{:>20} for {} sectors\n", r.sector, r.count));
            }
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(sector: u64, count: u64) -> [u8; 8] {
        ((sector << 10) | count).to_le_bytes()
    }

    #[test]
    fn entries_until_the_end_marker() {
        let mut b = Vec::new();
        b.extend(entry(1000, 8));
        b.extend(entry(5_000_000, 1));
        b.extend(u64::MAX.to_le_bytes());
        b.extend(entry(7, 7));
        assert_eq!(
            parse(&b, 0),
            vec![
                BadRange {
                    sector: 1000,
                    count: 8
                },
                BadRange {
                    sector: 5_000_000,
                    count: 1
                }
            ]
        );
        // With a shift of 3 both sector and count are in units of 8 sectors.
        assert_eq!(
            parse(&entry(10, 2), 3),
            vec![BadRange {
                sector: 80,
                count: 16
            }]
        );
        assert_eq!(
            render("d", Some(&parse(&b, 0))),
            "Bad-blocks on d:\n                1000 for 8 sectors\n             5000000 for 1 sectors\n"
        );
        assert_eq!(render("d", Some(&[])), "Bad-blocks list is empty in d\n");
        assert_eq!(render("d", None), "No bad-blocks list configured on d\n");
    }

    proptest! {
        #[test]
        fn any_bytes_parse_without_panic(bytes in prop::collection::vec(any::<u8>(), 0..200), shift in any::<u8>()) {
            for r in parse(&bytes, shift) {
                prop_assert!(r.count > 0);
            }
        }
    }
}
