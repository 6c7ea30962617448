//! Per-member I/O counters for the status page's charts: the served array's
//! own counters (`LiveArray::member_io`, every member volume wrapped in a
//! counting volume by `serve`), read as plain monotonic numbers.
//!
//! It only reads them; it must never count anything itself, so the page,
//! `detail --watch` and the metrics endpoint show one set of figures.

use super::status::Counters;
use crate::cmd::live::Managed;
use std::collections::BTreeMap;

/// Each member's counters now, by device path.
pub fn member_counters(m: &Managed) -> BTreeMap<String, Counters> {
    m.live
        .member_io()
        .into_iter()
        .map(|s| {
            let io = s.io;
            (
                s.device,
                Counters {
                    reads: io.reads,
                    writes: io.writes,
                    read_bytes: io.read_bytes,
                    write_bytes: io.write_bytes,
                    errors: io.errors,
                    read_us: io.read_latency.sum_us,
                    write_us: io.write_latency.sum_us,
                },
            )
        })
        .collect()
}
