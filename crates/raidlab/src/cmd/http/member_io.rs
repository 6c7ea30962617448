//! Per-member I/O counters for the status page's charts.
//!
//! Reads counters only; it must never count I/O itself twice or change
//! what a member does.

use super::status::Counters;
use crate::cmd::live::Managed;

/// Whether this build counts each member's I/O.
pub const MEMBER_IO: bool = false;

/// Each member's counters now, by device path.
pub fn member_counters(_m: &Managed) -> std::collections::BTreeMap<String, Counters> {
    std::collections::BTreeMap::new()
}
