//! Which bytes of one 512-byte sector a write set, a bit each: what a
//! volatile-cache model or a reference model keeps beside a sector image
//! written only in part. It decides nothing about what a sector may hold.

/// Bytes in a sector.
const SECTOR_BYTES: usize = 512;
const WORDS: usize = SECTOR_BYTES / 64;

/// A bit per byte of a 512-byte sector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SectorMask([u64; WORDS]);

impl SectorMask {
    /// No byte set.
    pub const EMPTY: SectorMask = SectorMask([0; WORDS]);

    /// Whether byte `i` is set.
    pub fn holds(&self, i: usize) -> bool {
        self.0[i / 64] >> (i % 64) & 1 == 1
    }

    pub fn holds_all(&self) -> bool {
        self.0.iter().all(|&w| w == !0)
    }

    pub fn holds_none(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }

    /// Set (`on`) or clear bytes `from..to`, a word at a time.
    pub fn set(&mut self, from: usize, to: usize, on: bool) {
        let mut i = from;
        while i < to {
            let (w, b) = (i / 64, i % 64);
            let n = (64 - b).min(to - i);
            let mask = if n == 64 { !0 } else { ((1u64 << n) - 1) << b };
            if on {
                self.0[w] |= mask;
            } else {
                self.0[w] &= !mask;
            }
            i += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a bool per byte, on ranges across word edges.
    #[test]
    fn matches_a_bool_per_byte() {
        let mut m = SectorMask::EMPTY;
        let mut b = [false; SECTOR_BYTES];
        for (from, to, on) in [
            (0, 1, true),
            (63, 65, true),
            (100, 400, true),
            (128, 192, false),
            (511, 512, true),
            (0, 512, false),
            (5, 70, true),
        ] {
            m.set(from, to, on);
            b[from..to].fill(on);
            assert!(
                (0..SECTOR_BYTES).all(|i| m.holds(i) == b[i]),
                "after {from}..{to} {on}"
            );
            assert_eq!(m.holds_none(), b.iter().all(|&x| !x));
            assert_eq!(m.holds_all(), b.iter().all(|&x| x));
        }
        m.set(0, SECTOR_BYTES, true);
        assert!(m.holds_all());
    }
}
