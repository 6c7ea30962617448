//! The run's event trace and hash: every event is folded into the run's
//! hash (a seed must replay to the same hash on any machine) and the last
//! ones are kept for a failure's report. It decides what of an event is
//! hashed (nothing that differs between two runs of one seed in one
//! process); it never decides what happens in a run.

use super::run::Rig;
use std::borrow::Cow;

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
/// no name, as 0.90 metadata has none, is labelled by it in errors). Most
/// events have neither and are passed through, not copied.
fn unnumbered(event: &str) -> Cow<'_, str> {
    let numbered: Cow<'_, str> = if event.contains("memory#") {
        let mut out = String::with_capacity(event.len());
        let mut rest = event;
        while let Some(i) = rest.find("memory#") {
            out.push_str(&rest[..i + 7]);
            rest = rest[i + 7..].trim_start_matches(|c: char| c.is_ascii_digit());
        }
        out.push_str(rest);
        Cow::Owned(out)
    } else {
        Cow::Borrowed(event)
    };
    match without_uuids(&numbered) {
        Cow::Owned(s) => Cow::Owned(s),
        Cow::Borrowed(_) => numbered,
    }
}

/// `s` with every md-style UUID (four groups of eight hex digits joined
/// by colons) replaced by "<uuid>".
fn without_uuids(s: &str) -> Cow<'_, str> {
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
    // A UUID's first colon is its ninth byte: only there can one start.
    let mut starts = b
        .iter()
        .enumerate()
        .filter(|&(i, &c)| c == b':' && i >= 8)
        .map(|(i, _)| i - 8)
        .filter(|&at| is_uuid(at));
    let Some(first) = starts.next() else {
        return Cow::Borrowed(s);
    };
    let mut out = String::with_capacity(s.len());
    out.push_str(&s[..first]);
    let mut i = first;
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
    Cow::Owned(out)
}

/// A digest of what a read returned, for the event trace and the run's
/// hash: the length and the CRC-32C of the bytes. Every restart reads the
/// whole array, so the digest runs over more bytes than any other step of a
/// run; CRC-32C is done by the CPU's own instruction (a multiply a word cost
/// an eighth of a run). It tells runs apart, it is no checksum of record.
pub(super) fn digest(b: &[u8]) -> u64 {
    (b.len() as u64) << 32 | u64::from(crc32c::crc32c(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_numbers_and_uuids_are_taken_out_and_the_rest_kept() {
        let u = "0123abcd:4567ef01:89abcdef:00112233";
        assert!(matches!(unnumbered("write 0+1: ok"), Cow::Borrowed(_)));
        assert_eq!(
            unnumbered(&format!("memory#17 of {u}: memory#3 é {u}x:")),
            "memory# of <uuid>: memory# é <uuid>x:"
        );
        // A colon where a UUID's would be, without the rest of one.
        assert_eq!(
            unnumbered("abcdefgh:12 and 12345678:"),
            "abcdefgh:12 and 12345678:"
        );
        assert_eq!(unnumbered(&format!("9{u}")), "9<uuid>");
    }
}
