//! mdadm's backup of a reshape's critical section (`struct mdp_backup_super`,
//! magic `md_backup_data-1` or `-2`) and where mdadm puts it when it has no
//! `--backup-file`: on each new member (a spare when the grow starts), at
//! the end of that member's data area.
//!
//! | byte | field | | byte | field |
//! |---|---|---|---|---|
//! | 0 | magic, 16 bytes | | 68 | pad1 u32 |
//! | 16 | set_uuid, 16 bytes | | 72 | devstart2 u64 (sectors into the backup) |
//! | 32 | mtime u64 (seconds) | | 80 | arraystart2 u64 |
//! | 40 | devstart u64 (sector on the device) | | 88 | length2 u64 |
//! | 48 | arraystart u64 (array sector) | | 96 | sb_csum2 u32 (`-2` only) |
//! | 56 | length u64 (sectors) | | 100 | zeros to 512 |
//! | 64 | sb_csum u32 | | | |
//!
//! On a member with data offset `o` and component size `c` (sectors), a
//! backup of `b` sectors is at sector `o + c - b - 8`; the 512-byte record
//! is written 4 KiB before it and again right after it (sector `o + c - 8`,
//! the copy mdadm's `Grow_restart` reads first), the data first and the
//! records after. mdadm trusts a backup only when both copies agree over
//! the fields (the first 68 bytes of a `-1`, 100 of a `-2`), so a backup is
//! let go by writing the leading copy with a zero length.
//!
//! mdadm's checksum adds the record's *first* byte at every step (a slip in
//! its loop kept for compatibility), so it only tells a record from zeros:
//! it depends on the magic and the length summed, never on the fields. It
//! is computed here exactly so, and nothing here relies on it for more.
//!
//! It decides the bytes and the placement only; it must never do I/O (the
//! backup lives in a member's data area, which this crate never touches:
//! the grow in `raidlab-raid` writes it).

use crate::le::{invalid, put, u32_at, u64_at};
use raidlab_core::Error;

/// Bytes of one record.
pub const RECORD_BYTES: usize = 512;
/// Sectors between the leading record and the backup data (4 KiB).
pub const LEAD_SECTORS: u64 = 8;
const MAGIC_1: &[u8; 16] = b"md_backup_data-1";
const MAGIC_2: &[u8; 16] = b"md_backup_data-2";
/// Bytes the two copies must agree over, and the first checksum covers.
const FIELDS_1: usize = 68;
const FIELDS_2: usize = 100;
const CSUM: usize = 64;
const CSUM2: usize = 96;

/// One backup record. Sectors are 512 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackupSuper {
    /// `md_backup_data-2`: a second section (`*2` fields) is in use.
    pub two_sections: bool,
    /// The array's uuid as mdadm copies it (for 0.90: [`uuid_bytes_090`]).
    pub set_uuid: [u8; 16],
    /// Seconds since the epoch when written; mdadm refuses a backup whose
    /// time is far from the array's update time ([`BackupSuper::fresh_for`]).
    pub mtime: u64,
    /// Device sector where the backup data starts.
    pub devstart: u64,
    /// Array sector of the first byte backed up.
    pub arraystart: u64,
    /// Sectors backed up; 0 when the backup was let go.
    pub length: u64,
    /// Sectors from `devstart` to the second section.
    pub devstart2: u64,
    pub arraystart2: u64,
    pub length2: u64,
}

/// Where a backup of `backup_sectors` goes on a new member whose data area
/// starts at `data_offset` and holds `component_sectors` (md's size).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// Device sector of the backup data (the record's `devstart`).
    pub data: u64,
    /// Device sector of the record 4 KiB before the data.
    pub leading: u64,
    /// Device sector of the record right after the data (8 sectors before
    /// the end of the component).
    pub trailing: u64,
}

impl Placement {
    /// mdadm's placement, or an error when the component is too small to
    /// hold the backup and its leading record.
    pub fn on_member(
        data_offset: u64,
        component_sectors: u64,
        backup_sectors: u64,
    ) -> Result<Placement, Error> {
        let need = backup_sectors + 2 * LEAD_SECTORS;
        if component_sectors < need {
            return Err(Error::invalid(format!(
                "md backup: a member of {component_sectors} sectors cannot hold a backup of {backup_sectors} sectors and its two 4 KiB records"
            )));
        }
        let data = data_offset + component_sectors - backup_sectors - LEAD_SECTORS;
        Ok(Placement {
            data,
            leading: data - LEAD_SECTORS,
            trailing: data + backup_sectors,
        })
    }
}

/// How many array sectors mdadm backs up for a restripe: a whole number of
/// both an old and a new stripe (their least common multiple), chunks in
/// bytes.
pub fn mdadm_backup_sectors(old_chunk: u64, new_chunk: u64, old_data: u64, new_data: u64) -> u64 {
    let a = old_chunk / 512 * old_data;
    let b = new_chunk / 512 * new_data;
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a.checked_div(x).map_or(0, |q| q * b)
}

/// A 0.90 array's uuid in the order mdadm copies it into a record: the four
/// uuid words, each in the host's (little-endian) order.
pub fn uuid_bytes_090(words: [u32; 4]) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (i, w) in words.iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
    }
    out
}

/// mdadm's checksum of the first `len` bytes of `record` (see the module
/// doc: only the first byte, taken as a signed char, ever enters it).
fn csum(record: &[u8], len: usize) -> u32 {
    let first = i32::from(record[0] as i8);
    (0..len).fold(0i32, |c, _| c.wrapping_shl(3).wrapping_add(first)) as u32
}

impl BackupSuper {
    /// The record's 512 bytes, checksums filled in.
    pub fn to_bytes(&self) -> [u8; RECORD_BYTES] {
        let mut b = [0u8; RECORD_BYTES];
        put(&mut b, 0, if self.two_sections { MAGIC_2 } else { MAGIC_1 });
        put(&mut b, 16, &self.set_uuid);
        for (at, v) in [
            (32, self.mtime),
            (40, self.devstart),
            (48, self.arraystart),
            (56, self.length),
            (72, self.devstart2),
            (80, self.arraystart2),
            (88, self.length2),
        ] {
            put(&mut b, at, &v.to_le_bytes());
        }
        let c = csum(&b, CSUM);
        put(&mut b, CSUM, &c.to_le_bytes());
        if self.two_sections {
            let c2 = csum(&b, CSUM2);
            put(&mut b, CSUM2, &c2.to_le_bytes());
        }
        b
    }

    /// A record read from a member, checked as mdadm checks it (magic,
    /// checksums). `Ok(None)` when there is no record (no magic): a member
    /// that never held a backup.
    pub fn parse(b: &[u8]) -> Result<Option<BackupSuper>, Error> {
        if b.len() < RECORD_BYTES {
            return Err(invalid("backup record", "length", b.len(), RECORD_BYTES));
        }
        let two_sections = match &b[..16] {
            m if m == MAGIC_1 => false,
            m if m == MAGIC_2 => true,
            _ => return Ok(None),
        };
        let found = u32_at(b, CSUM);
        if found != csum(b, CSUM) {
            return Err(invalid("backup record", "sb_csum", found, csum(b, CSUM)));
        }
        if two_sections && u32_at(b, CSUM2) != csum(b, CSUM2) {
            return Err(invalid(
                "backup record",
                "sb_csum2",
                u32_at(b, CSUM2),
                csum(b, CSUM2),
            ));
        }
        let mut set_uuid = [0u8; 16];
        set_uuid.copy_from_slice(&b[16..32]);
        Ok(Some(BackupSuper {
            two_sections,
            set_uuid,
            mtime: u64_at(b, 32),
            devstart: u64_at(b, 40),
            arraystart: u64_at(b, 48),
            length: u64_at(b, 56),
            devstart2: u64_at(b, 72),
            arraystart2: u64_at(b, 80),
            length2: u64_at(b, 88),
        }))
    }

    /// Whether `leading` (the record 4 KiB before the data) confirms this
    /// one (read after the data): mdadm compares the fields byte for byte.
    pub fn confirmed_by(&self, leading: &BackupSuper) -> bool {
        let n = if self.two_sections {
            FIELDS_2
        } else {
            FIELDS_1
        };
        self.to_bytes()[..n] == leading.to_bytes()[..n]
    }

    /// Whether mdadm accepts the record's time for an array last updated at
    /// `utime`: no more than two hours older, no more than ten minutes newer.
    pub fn fresh_for(&self, utime: u32) -> bool {
        // mdadm compares in 32-bit wrapping time, as the kernel's time_after.
        let m = self.mtime as u32;
        let after = |a: u32, b: u32| (b.wrapping_sub(a) as i32) < 0;
        !after(utime, m.wrapping_add(2 * 60 * 60)) && !after(m.wrapping_sub(10 * 60), utime)
    }

    /// Whether a forward reshape stopped at array sector `position` still
    /// needs this backup restored (mdadm's `Grow_restart`: a section that
    /// ends before the position holds nothing new).
    pub fn needed_at(&self, position: u64) -> bool {
        // The fields come from a device or file: a sum past u64 covers
        // everything rather than overflowing.
        let first = self.length != 0 && self.arraystart.saturating_add(self.length) >= position;
        let second = self.two_sections
            && self.length2 != 0
            && self.arraystart2.saturating_add(self.length2) >= position;
        first || second
    }

    /// Whether a backward reshape (fewer members: the position decreasing)
    /// stopped at array sector `position` still needs this backup restored
    /// (mdadm's `Grow_restart`: a section that starts at or past the
    /// position holds only what the walk already committed).
    pub fn needed_below(&self, position: u64) -> bool {
        let first = self.length != 0 && self.arraystart < position;
        let second = self.two_sections && self.length2 != 0 && self.arraystart2 < position;
        first || second
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> BackupSuper {
        BackupSuper {
            two_sections: false,
            set_uuid: uuid_bytes_090([0x0102_0304, 5, 6, 0xa0b0_c0d0]),
            mtime: 1_700_000_000,
            devstart: 2_000_000,
            arraystart: 0,
            length: 1536,
            devstart2: 1536,
            arraystart2: 0,
            length2: 0,
        }
    }

    #[test]
    fn fields_sit_where_mdadm_puts_them() {
        let b = record().to_bytes();
        assert_eq!(&b[..16], b"md_backup_data-1");
        assert_eq!(&b[16..20], &[4, 3, 2, 1]);
        assert_eq!(&b[28..32], &[0xd0, 0xc0, 0xb0, 0xa0]);
        assert_eq!(u64_at(&b, 32), 1_700_000_000);
        assert_eq!(u64_at(&b, 40), 2_000_000);
        assert_eq!(u64_at(&b, 56), 1536);
        assert_eq!(u64_at(&b, 72), 1536);
        assert!(b[100..].iter().all(|&x| x == 0));
        assert_eq!(BackupSuper::parse(&b).unwrap(), Some(record()));
    }

    #[test]
    fn the_checksum_is_mdadms_first_byte_sum() {
        // Sum of 'm' (0x6d) times 8^k over the length, in 32 bits.
        let expect = |len: u32| {
            (0..len).fold(0u32, |c, k| {
                c.wrapping_add(0x6d_u32.wrapping_mul(8u32.wrapping_pow(k)))
            })
        };
        let b = record().to_bytes();
        assert_eq!(u32_at(&b, 64), expect(64));
        let mut two = record();
        two.two_sections = true;
        two.length2 = 99;
        let b2 = two.to_bytes();
        assert_eq!(&b2[..16], b"md_backup_data-2");
        assert_eq!(u32_at(&b2, 96), expect(96));
        // It never covers the fields: another length, the same checksum.
        let mut other = record();
        other.length = 0;
        assert_eq!(u32_at(&other.to_bytes(), 64), expect(64));
        // But a torn or zeroed one is refused, naming the field.
        let mut bad = b;
        bad[64] ^= 1;
        let e = BackupSuper::parse(&bad).unwrap_err().to_string();
        assert!(e.contains("sb_csum"), "{e}");
        let mut bad2 = b2;
        bad2[96] ^= 1;
        let e = BackupSuper::parse(&bad2).unwrap_err().to_string();
        assert!(e.contains("sb_csum2"), "{e}");
        assert_eq!(BackupSuper::parse(&[0u8; 512]).unwrap(), None);
        assert!(BackupSuper::parse(&[0u8; 100]).is_err());
    }

    #[test]
    fn placement_at_the_end_of_the_component() {
        // A 0.90 member (data offset 0) of 1 GiB used, backing up 1536
        // sectors: the trailing record is 4 KiB before the component's end.
        let p = Placement::on_member(0, 2_097_152, 1536).unwrap();
        assert_eq!(p.trailing, 2_097_152 - 8);
        assert_eq!(p.data, 2_097_152 - 8 - 1536);
        assert_eq!(p.leading, p.data - 8);
        let e = Placement::on_member(0, 1000, 1536).unwrap_err().to_string();
        assert!(e.contains("1000 sectors") && e.contains("1536"), "{e}");
    }

    #[test]
    fn let_go_by_a_leading_copy_with_no_length() {
        let trailing = record();
        assert!(trailing.confirmed_by(&record()));
        let mut leading = record();
        leading.length = 0;
        assert!(!trailing.confirmed_by(&leading));
        // Fields past the compared bytes of a `-1` record do not count.
        leading = record();
        leading.arraystart2 = 7;
        assert!(trailing.confirmed_by(&leading));
    }

    #[test]
    fn needed_and_fresh_as_mdadm_judges() {
        let r = record();
        assert!(r.needed_at(0) && r.needed_at(1536));
        assert!(!r.needed_at(1537));
        let mut gone = r;
        gone.length = 0;
        assert!(!gone.needed_at(0));
        // Going backwards: needed while the section starts below the
        // position.
        assert!(r.needed_below(1) && !r.needed_below(0));
        assert!(!gone.needed_below(1 << 30));
        let t = 1_700_000_000u32;
        assert!(r.fresh_for(t) && r.fresh_for(t + 7200) && r.fresh_for(t - 600));
        assert!(!r.fresh_for(t + 7201) && !r.fresh_for(t - 601));
    }

    #[test]
    fn mdadms_backup_size() {
        // A 4-member RAID 5 grown to 5, 64 KiB chunks: 3 and 4 data
        // members, 12 chunks (mdadm: "Need to backup 768K").
        assert_eq!(mdadm_backup_sectors(65536, 65536, 3, 4), 1536);
        assert_eq!(mdadm_backup_sectors(65536, 65536, 2, 3), 768);
        assert_eq!(mdadm_backup_sectors(65536, 131072, 3, 4), 3072);
    }
}
