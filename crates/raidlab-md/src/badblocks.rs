//! md's bad-block log of a v1 superblock: the list of sectors of this member
//! that md could not read or write, kept `bblog_size` sectors long at
//! `bblog_offset` sectors from the superblock. Each entry is a little-endian
//! u64: the first bad sector (in units of `2^bblog_shift` sectors) in the top
//! 54 bits, the count of bad sectors (same units) in the low 10 bits; an entry
//! of all ones ends the list. Sectors count from the start of the member
//! device, not from its data area.
//!
//! It reads and parses the log, prints it as `mdadm --examine-badblocks`
//! does, and writes it back after a range is cleared (md forgets a bad range
//! once a write to it succeeded: a repaired or rebuilt range). It never
//! trusts a count or offset it has not checked, never writes outside the
//! log's `bblog_size` sectors, and never panics on any bytes.

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
    let Some((at, len)) = area(sb, vol.size())? else {
        return Ok(None);
    };
    let mut buf = vec![0u8; len];
    vol.read_at(&mut buf, at).map_err(|e| {
        Error::new(
            e.kind,
            Op::Read,
            format!("reading the bad-block log: {}", e.message),
        )
        .at(at, len as u64)
    })?;
    Ok(Some(parse(&buf, sb.bblog_shift)))
}

/// `list` with the sectors `[sector, sector + count)` listed too, as md's
/// `badblocks_set` records a range it could not write: widened to whole
/// units of `2^shift` sectors, and merged with every range it overlaps or
/// touches. Whether the result fits the log is [`encode`]'s to say.
pub fn add(list: &[BadRange], shift: u8, sector: u64, count: u64) -> Vec<BadRange> {
    if count == 0 {
        return list.to_vec();
    }
    let unit = 1u64 << u32::from(shift.min(32));
    let mut lo = sector / unit * unit;
    let mut hi = sector
        .saturating_add(count)
        .div_ceil(unit)
        .saturating_mul(unit);
    let mut out = Vec::with_capacity(list.len() + 1);
    for r in list {
        let end = r.sector.saturating_add(r.count);
        if end < lo || r.sector > hi {
            out.push(*r);
        } else {
            lo = lo.min(r.sector);
            hi = hi.max(end);
        }
    }
    if hi > lo {
        out.push(BadRange {
            sector: lo,
            count: hi - lo,
        });
    }
    out.sort_by_key(|r| r.sector);
    out
}

/// Where the member's log lies: its byte offset on a device of `dev_bytes`
/// and its length; `None` when the member keeps none (metadata 0.90, or
/// `bblog_size` 0). An error when the superblock puts it outside the device.
pub fn area(sb: &Superblock, dev_bytes: u64) -> Result<Option<(u64, usize)>> {
    if sb.v0_90.is_some() || sb.bblog_size == 0 || sb.bblog_offset == 0 {
        return Ok(None);
    }
    let start = i128::from(sb.super_offset) + i128::from(sb.bblog_offset);
    let dev = i128::from(dev_bytes / 512);
    if start < 0 || start + i128::from(sb.bblog_size) > dev {
        return Err(Error::invalid(format!(
            "the bad-block log ({} sectors at sector {start}) lies outside the device ({dev} sectors): \
             the superblock is damaged or the image truncated",
            sb.bblog_size
        )));
    }
    Ok(Some((start as u64 * 512, usize::from(sb.bblog_size) * 512)))
}

/// Longest range one entry holds, in units of `2^shift` sectors (md's
/// `BB_MAX_LEN`; the count field has room for 1023, md writes at most 512).
const MAX_LEN: u64 = 512;

/// `list` without the sectors `[sector, sector + count)`, as md's
/// `badblocks_clear` does: with a shift, only whole units inside the range are
/// cleared (a unit partly outside it stays listed); a range cut in the middle
/// becomes two.
pub fn clear(list: &[BadRange], shift: u8, sector: u64, count: u64) -> Vec<BadRange> {
    let unit = 1u64 << u32::from(shift.min(32));
    let lo = sector.div_ceil(unit).saturating_mul(unit);
    let hi = sector.saturating_add(count) / unit * unit;
    let mut out = Vec::with_capacity(list.len() + 1);
    for r in list {
        let end = r.sector.saturating_add(r.count);
        if lo >= hi || end <= lo || r.sector >= hi {
            out.push(*r);
            continue;
        }
        if r.sector < lo {
            out.push(BadRange {
                sector: r.sector,
                count: lo - r.sector,
            });
        }
        if end > hi {
            out.push(BadRange {
                sector: hi,
                count: end - hi,
            });
        }
    }
    out
}

/// The log's bytes for `list` (`len` bytes: entries sorted by sector, a range
/// longer than one entry holds split, then the all-ones end marker and
/// padding of all ones, as md fills the page). Refused, naming the numbers,
/// when a range is not in whole units of `2^shift` sectors or the entries do
/// not fit `len`.
pub fn encode(list: &[BadRange], shift: u8, len: usize) -> Result<Vec<u8>> {
    let shift = u32::from(shift.min(32));
    let unit = 1u64 << shift;
    let mut sorted = list.to_vec();
    sorted.sort_by_key(|r| r.sector);
    let mut out = Vec::with_capacity(len);
    for r in &sorted {
        if r.sector % unit != 0 || r.count % unit != 0 {
            return Err(Error::invalid(format!(
                "bad-block range {} + {} sectors is not in whole units of {unit} sectors (bblog_shift {shift})",
                r.sector, r.count
            )));
        }
        let (mut at, mut left) = (r.sector >> shift, r.count >> shift);
        while left > 0 {
            let n = left.min(MAX_LEN);
            if at >> 54 != 0 {
                return Err(Error::invalid(format!(
                    "bad-block range at sector {} does not fit the log's 54-bit sector field",
                    r.sector
                )));
            }
            out.extend(((at << 10) | n).to_le_bytes());
            at += n;
            left -= n;
        }
    }
    if out.len() > len {
        return Err(Error::invalid(format!(
            "{} bad-block entries do not fit the {len}-byte log",
            out.len() / 8
        )));
    }
    out.resize(len, 0xff);
    Ok(out)
}

/// Write `list` as the member's log (the `bblog_size` sectors at
/// `bblog_offset`) and flush. The superblock must keep a log (v1, size and
/// offset set) that lies inside the device.
pub fn write(vol: &dyn Volume, sb: &Superblock, list: &[BadRange]) -> Result<()> {
    let (at, bytes) = placed(sb, vol.size(), list)?;
    vol.write_at(&bytes, at)
        .and_then(|_| vol.flush())
        .map_err(|e| {
            Error::new(
                e.kind,
                Op::Write,
                format!("writing the bad-block log: {}", e.message),
            )
            .at(at, bytes.len() as u64)
        })
}

/// What [`write`](fn@write) writes and where: the byte offset on a device of
/// `dev_bytes` and the encoded log, with the same checks.
pub fn placed(sb: &Superblock, dev_bytes: u64, list: &[BadRange]) -> Result<(u64, Vec<u8>)> {
    let Some((at, len)) = area(sb, dev_bytes)? else {
        return Err(Error::invalid(
            "this member keeps no bad-block log (metadata 0.90, or bblog_size 0)",
        ));
    };
    Ok((at, encode(list, sb.bblog_shift, len)?))
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

    fn r(sector: u64, count: u64) -> BadRange {
        BadRange { sector, count }
    }

    #[test]
    fn clearing_cuts_ranges_and_keeps_partial_units() {
        let list = [r(100, 50), r(1000, 8)];
        // The middle of the first range: two pieces.
        assert_eq!(
            clear(&list, 0, 120, 10),
            vec![r(100, 20), r(130, 20), r(1000, 8)]
        );
        // The whole second one, and a range touching nothing.
        assert_eq!(clear(&list, 0, 990, 100), vec![r(100, 50)]);
        assert_eq!(clear(&list, 0, 500, 10), list.to_vec());
        // Units of 8 sectors: only whole units inside the range are cleared.
        let list = [r(0, 64)];
        assert_eq!(clear(&list, 3, 4, 20), vec![r(0, 8), r(24, 40)]);
        assert_eq!(clear(&list, 3, 1, 6), list.to_vec());
    }

    #[test]
    fn adding_widens_to_units_and_merges_neighbours() {
        let list = [r(100, 50), r(1000, 8)];
        // Touching the first range's end, and a new one apart.
        assert_eq!(add(&list, 0, 150, 10), vec![r(100, 60), r(1000, 8)]);
        assert_eq!(
            add(&list, 0, 500, 1),
            vec![r(100, 50), r(500, 1), r(1000, 8)]
        );
        // Spanning both: one range.
        assert_eq!(add(&list, 0, 120, 890), vec![r(100, 910)]);
        // Units of 8 sectors: sector 13 for 2 lists 8..16.
        assert_eq!(add(&[], 3, 13, 2), vec![r(8, 8)]);
        assert_eq!(add(&[], 3, 13, 0), vec![]);
    }

    #[test]
    fn encode_round_trips_and_refuses_what_does_not_fit() {
        let list = vec![r(5000, 1), r(8, 16), r(100_000, 1200)];
        let b = encode(&list, 0, 512).unwrap();
        assert_eq!(b.len(), 512);
        // Sorted, the long range split at md's 512-sector entry limit.
        assert_eq!(
            parse(&b, 0),
            vec![
                r(8, 16),
                r(5000, 1),
                r(100_000, 512),
                r(100_512, 512),
                r(101_024, 176)
            ]
        );
        assert!(b[5 * 8..].iter().all(|&x| x == 0xff));
        let b = encode(&[r(80, 16)], 3, 64).unwrap();
        assert_eq!(parse(&b, 3), vec![r(80, 16)]);
        let e = encode(&[r(81, 16)], 3, 64).unwrap_err().to_string();
        assert!(e.contains("whole units"), "{e}");
        let many: Vec<BadRange> = (0..9).map(|i| r(i * 10, 1)).collect();
        let e = encode(&many, 0, 64).unwrap_err().to_string();
        assert!(
            e.contains("9 bad-block entries") && e.contains("64-byte"),
            "{e}"
        );
    }

    proptest! {
        #[test]
        fn clear_then_encode_matches_a_sector_set(
            ranges in prop::collection::vec((0u64..2000, 1u64..700), 0..6),
            cut in (0u64..2600, 0u64..900),
        ) {
            // Reference: the set of listed sectors, minus the cleared ones.
            let mut want = std::collections::BTreeSet::new();
            let list: Vec<BadRange> = ranges.iter().map(|&(s, c)| r(s * 4, c)).collect();
            for b in &list {
                want.extend(b.sector..b.sector + b.count);
            }
            for x in cut.0..cut.0 + cut.1 {
                want.remove(&x);
            }
            let cleared = clear(&list, 0, cut.0, cut.1);
            let bytes = encode(&cleared, 0, 4096).unwrap();
            let mut got = std::collections::BTreeSet::new();
            for b in parse(&bytes, 0) {
                got.extend(b.sector..b.sector + b.count);
            }
            prop_assert_eq!(got, want);
        }

        #[test]
        fn any_bytes_parse_without_panic(bytes in prop::collection::vec(any::<u8>(), 0..200), shift in any::<u8>()) {
            for r in parse(&bytes, shift) {
                prop_assert!(r.count > 0);
            }
        }
    }
}
