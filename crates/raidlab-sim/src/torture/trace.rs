//! The run's event trace and hash: every event is folded into the run's
//! hash (a seed must replay to the same hash on any machine) and the last
//! ones are kept for a failure's report. It decides what of an event is
//! hashed (nothing that differs between two runs of one seed in one
//! process); it never decides what happens in a run.

use super::run::Rig;

/// Events kept for a failure's trace (a shrunk run keeps them all).
pub(super) const TRACE: usize = 48;

impl Rig {
    pub(super) fn note(&mut self, event: String) {
        let event = unnumbered(&event);
        for b in event.bytes().chain([b'\n']) {
            self.hash = (self.hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        if self.live {
            eprintln!("op {}: {event}", self.op);
        }
        if self.trace.len() >= self.trace_cap {
            self.trace.remove(0);
        }
        self.trace.push(format!("op {}: {event}", self.op));
    }
}

/// `event` without the process-wide numbers of memory volumes
/// ("memory#17"): they count every volume the process made, so they differ
/// between two runs of one seed in one process; and without the array's
/// UUID, which create draws from the system's random source (an array with
/// no name, as 0.90 metadata has none, is labelled by it in errors).
fn unnumbered(event: &str) -> String {
    let mut out = String::with_capacity(event.len());
    let mut rest = event;
    while let Some(i) = rest.find("memory#") {
        out.push_str(&rest[..i + 7]);
        rest = rest[i + 7..].trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out.push_str(rest);
    without_uuids(&out)
}

/// `s` with every md-style UUID (four groups of eight hex digits joined
/// by colons) replaced by "<uuid>".
fn without_uuids(s: &str) -> String {
    const LEN: usize = 35;
    let b = s.as_bytes();
    let is_uuid = |at: usize| {
        at + LEN <= b.len()
            && (0..LEN).all(|k| {
                if k % 9 == 8 {
                    b[at + k] == b':'
                } else {
                    b[at + k].is_ascii_hexdigit()
                }
            })
    };
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        if is_uuid(i) {
            out.push_str("<uuid>");
            i += LEN;
        } else {
            let c = s[i..].chars().next().expect("within the string");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// A digest of what a read returned, for the event trace and the run's
/// hash: the length and the CRC-32C of the bytes. Every restart reads the
/// whole array, so the digest runs over more bytes than any other step of a
/// run; CRC-32C is done by the CPU's own instruction (a multiply a word cost
/// an eighth of a run). It tells runs apart, it is no checksum of record.
pub(super) fn digest(b: &[u8]) -> u64 {
    (b.len() as u64) << 32 | u64::from(crc32c::crc32c(b))
}
