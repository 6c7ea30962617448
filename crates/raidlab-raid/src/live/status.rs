//! What `detail` shows of an array in service: its long runs (rebuild,
//! re-add, replace, check, repair, reshape, resync) with their progress and
//! rate, the journal, and the stripe cache's counters, as data to print or
//! serialise.
//!
//! It decides only how a run's progress and rate are reckoned from its
//! position and clock; it must never change the array or start a run.

use super::WriteMark;
use crate::array::Recovery;
use serde::Serialize;
use std::time::Duration;

/// A long run as `detail` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct TaskStatus {
    /// "rebuild", "re-add" (only the bitmap's dirty chunks), "replace",
    /// "check", "repair" or "reshape".
    pub kind: String,
    /// The member written (rebuild, replace) or the array (check, repair).
    pub device: String,
    pub role: Option<usize>,
    /// Bytes of each member's data area done, of `total`.
    pub done: u64,
    pub total: u64,
    /// Average since the start of this run.
    pub bytes_per_sec: f64,
    /// Bytes written to the member so far in this run (a re-add writes only
    /// the dirty chunks of what it has done).
    pub written: u64,
    pub running: bool,
    /// Why it stopped, when it did not finish.
    pub error: Option<String>,
    /// When it started, on the array's clock.
    #[serde(skip)]
    started: Duration,
    #[serde(skip)]
    first: u64,
}

impl TaskStatus {
    pub(super) fn new(
        kind: &str,
        device: String,
        role: Option<usize>,
        from: u64,
        total: u64,
        now: Duration,
    ) -> Self {
        TaskStatus {
            kind: kind.into(),
            device,
            role,
            done: from,
            total,
            bytes_per_sec: 0.0,
            written: 0,
            running: true,
            error: None,
            started: now,
            first: from,
        }
    }

    pub(super) fn advance(&mut self, done: u64, now: Duration) {
        self.done = done;
        let s = now.saturating_sub(self.started).as_secs_f64();
        if s > 0.0 {
            self.bytes_per_sec = done.saturating_sub(self.first) as f64 / s;
        }
    }

    /// A replacement whose old member left is a rebuild from then on.
    pub(super) fn follow(&mut self, rec: &Recovery) {
        if self.kind == "replace" && !rec.replacing() {
            self.kind = "rebuild".into();
        }
        self.written = rec.copied();
    }

    /// Percent done.
    pub fn percent(&self) -> f64 {
        if self.total == 0 {
            100.0
        } else {
            self.done as f64 * 100.0 / self.total as f64
        }
    }
}

/// What is running or last ran.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LiveStatus {
    pub rebuild: Option<TaskStatus>,
    pub scrub: Option<TaskStatus>,
    /// A reshape in service (running, or how the last one ended), in array
    /// bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reshape: Option<TaskStatus>,
    /// What the superblocks say about writes (md's safe mode): `clean` when
    /// none is pending, `active` while they are; absent when safe mode is off
    /// (read-only, or a resync is owed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writes: Option<WriteMark>,
    /// A parity array's stripe cache: tunables and what it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stripe_cache: Option<StripeCacheReport>,
    /// The write journal of a running array: md's mode and what it holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub journal: Option<JournalStatus>,
    /// What the clients address, when `--array-size` cut it below what
    /// the array holds (md's external size; forgotten at stop).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub array_size_cut_bytes: Option<u64>,
}

/// A running array's write journal, as `detail` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct JournalStatus {
    pub device: String,
    pub mode: crate::journal::JournalMode,
    /// Write-back: stripes whose data is only in the journal now.
    pub stripes_only_in_journal: u64,
    /// Times the ring was full and space was reclaimed.
    pub reclaims: u64,
}

/// The stripe cache of a running array, as `detail` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct StripeCacheReport {
    pub config: crate::stripe_cache::StripeCacheConfig,
    pub stats: crate::stripe_cache::StripeCacheStats,
    /// Write plans that read members: read-modify-write (they read parity)
    /// and reconstruct-write (they read other data).
    pub read_modify_write_plans: u64,
    pub reconstruct_write_plans: u64,
    /// Rows kept in memory now (`crate::kept_rows`), and member ranges
    /// writes took from them instead of reading a member, since the start.
    pub kept_rows_now: u64,
    pub kept_row_fills: u64,
}
