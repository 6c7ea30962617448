//! Little-endian field access shared by every md format module: md writes all its
//! on-disk integers little-endian. Reads are total (a short buffer reads as zeros,
//! so a parser never panics; callers check lengths first); writes index directly,
//! since they only ever fill buffers this crate sized.

use raidlab_core::Error;

pub(crate) fn rd<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(s) = b.get(at..at + N) {
        out.copy_from_slice(s);
    }
    out
}

pub(crate) fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(rd(b, at))
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(rd(b, at))
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(rd(b, at))
}

pub(crate) fn put(b: &mut [u8], at: usize, v: &[u8]) {
    b[at..at + v.len()].copy_from_slice(v);
}

/// "md {what} field {field} is {found}, expected {expected}".
pub(crate) fn invalid(
    what: &str,
    field: &str,
    found: impl std::fmt::Display,
    expected: impl std::fmt::Display,
) -> Error {
    Error::invalid(format!(
        "md {what} field {field} is {found}, expected {expected}"
    ))
}
