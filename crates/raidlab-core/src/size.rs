//! Sizes as people type them: `4096`, `4K`, `512M`, `1.5G` is refused (sizes are
//! whole), suffixes K, M, G, T, P are powers of 1024, an optional trailing `B`/`iB`
//! is accepted.

use crate::error::{Error, Result};

/// Parse a size such as `512K`, `4M`, `2G` (powers of 1024) or a plain byte count.
pub fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let bad = || {
        Error::invalid(format!(
            "'{text}' is not a size: write a whole number of bytes, optionally followed by K, M, G, T or P (powers of 1024), e.g. 512K or 4G"
        ))
    };
    if t.is_empty() {
        return Err(bad());
    }
    let upper = t.to_ascii_uppercase();
    let stripped = upper
        .strip_suffix("IB")
        .or_else(|| upper.strip_suffix('B'))
        .unwrap_or(&upper);
    let (digits, shift) = match stripped.chars().last() {
        Some('K') => (&stripped[..stripped.len() - 1], 10),
        Some('M') => (&stripped[..stripped.len() - 1], 20),
        Some('G') => (&stripped[..stripped.len() - 1], 30),
        Some('T') => (&stripped[..stripped.len() - 1], 40),
        Some('P') => (&stripped[..stripped.len() - 1], 50),
        _ => (stripped, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| Error::invalid(format!("size '{text}' is too large (over 2^64 bytes)")))
}

/// Format a byte count the short way people read it: exact multiples of a power of
/// 1024 get a suffix (`512K`, `4G`), anything else stays in bytes.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(u32, &str); 5] = [(50, "P"), (40, "T"), (30, "G"), (20, "M"), (10, "K")];
    for (shift, unit) in UNITS {
        let unit_bytes = 1u64 << shift;
        if bytes >= unit_bytes && bytes % unit_bytes == 0 {
            return format!("{}{}", bytes >> shift, unit);
        }
    }
    bytes.to_string()
}

/// Format a byte count approximately for humans, e.g. `1.50 GiB`.
pub fn format_size_approx(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.2} {}", UNITS[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_suffixes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("512KiB").unwrap(), 512 << 10);
        assert_eq!(parse_size("3M").unwrap(), 3 << 20);
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("1T").unwrap(), 1 << 40);
        assert_eq!(parse_size("8MB").unwrap(), 8 << 20);
    }

    #[test]
    fn refuses_garbage_with_a_hint() {
        for bad in [
            "",
            "K",
            "1.5G",
            "-4K",
            "4X",
            "4 K",
            "99999999999999999999",
            "16384P",
        ] {
            let e = parse_size(bad).unwrap_err();
            assert!(e.to_string().contains("size"), "{bad}: {e}");
        }
    }

    proptest! {
        #[test]
        fn format_then_parse_round_trips(n in 0u64..(1u64 << 52)) {
            prop_assert_eq!(parse_size(&format_size(n)).unwrap(), n);
        }
    }
}
