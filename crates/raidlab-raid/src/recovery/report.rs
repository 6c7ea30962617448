//! What a check, repair or resync found and did, as `raidlab check` prints it
//! and md counts it (mismatch_cnt in sectors). It only records; it never
//! decides what is compared or rewritten.

use super::*;

/// One correction made by `repair`, or one problem found by `check`.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// Member path and role whose contents were (or would be) rewritten.
    pub device: String,
    pub role: usize,
    /// First sector (512 bytes, relative to the member's data area) of the page.
    pub sector: u64,
    /// "parity P", "syndrome Q", "data (located from P+Q)", "mirror copy".
    pub what: String,
}

/// What a scrub found.
#[derive(Debug, Clone, Serialize)]
pub struct ScrubReport {
    /// md's mismatch_cnt: 512-byte sectors in mismatched 4 KiB pages (counted per
    /// page and per stripe, as md counts stripe pages).
    pub mismatch_sectors: u64,
    pub repaired: bool,
    /// Individual findings (capped at 1000 to keep reports readable).
    pub findings: Vec<Finding>,
    /// Unreadable blocks rebuilt from redundancy and rewritten during the scrub.
    pub read_errors_fixed: u64,
    /// Bytes of each member actually read and compared (a bitmap-guided resync
    /// skips clean chunks).
    pub bytes_scanned: u64,
    /// Roles that were missing during the run (md's degraded array): their
    /// contents were neither read nor compared. Empty on a complete array.
    pub missing_roles: Vec<usize>,
    /// Array (logical) bytes compared with less redundancy than the level has:
    /// RAID 6 with one member missing (one syndrome left), mirrors with some
    /// copies missing (the copies left were compared with each other).
    pub reduced_array_bytes: u64,
    /// Array bytes with a single copy left (RAID 10 runs whose other copies are
    /// missing): nothing to compare them with, so they were skipped, as md skips
    /// them.
    pub unchecked_array_bytes: u64,
    /// Member bytes not read because the member's bad-block log (md's) lists
    /// them: compared without that member where redundancy allows (counted
    /// in `reduced_array_bytes`), otherwise left unchecked (in
    /// `unchecked_array_bytes`).
    pub bad_block_bytes: u64,
    /// RAID 6 with one member missing, 4 KiB stripe pages checked against P alone
    /// (Q missing) and against Q alone (P missing, or a data block missing and
    /// rebuilt from P as reads rebuild it). A mismatch found with one syndrome
    /// cannot be traced to one block.
    pub pages_checked_p_only: u64,
    pub pages_checked_q_only: u64,
    /// A check of an array not resynced since an unclean stop: mismatches in
    /// stripes being written at the crash are expected, and RAID 6's
    /// "located from P+Q" may name a torn stripe, not a bad block.
    pub unsynced: bool,
}

impl ScrubReport {
    pub(super) fn new(repaired: bool, missing_roles: Vec<usize>) -> Self {
        ScrubReport {
            mismatch_sectors: 0,
            repaired,
            findings: Vec::new(),
            read_errors_fixed: 0,
            bytes_scanned: 0,
            missing_roles,
            reduced_array_bytes: 0,
            unchecked_array_bytes: 0,
            bad_block_bytes: 0,
            pages_checked_p_only: 0,
            pages_checked_q_only: 0,
            unsynced: false,
        }
    }

    pub(super) fn note(&mut self, names: &[String], role: usize, sector: u64, what: &str) {
        if self.findings.len() < 1000 {
            self.findings.push(Finding {
                device: names[role].clone(),
                role,
                sector,
                what: what.to_string(),
            });
        }
    }
}
