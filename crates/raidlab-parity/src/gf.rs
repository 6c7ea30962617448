//! Arithmetic in GF(2^8) with the Linux md RAID-6 polynomial x^8+x^4+x^3+x^2+1
//! (0x11d) and generator g = 2 (`{02}`), plus the constant tables the SIMD
//! engines load: split-nibble product tables for `pshufb` and 8x8 bit matrices
//! for `gf2p8affineqb`. Every table is computed at compile time.

/// The reduction polynomial without its x^8 term (0x11d & 0xff).
pub const POLY: u8 = 0x1d;

/// Multiply by the generator g = 2 (one Horner step of md's Q syndrome).
#[inline]
pub const fn mul2(a: u8) -> u8 {
    let hi = a & 0x80 != 0;
    let s = a << 1;
    if hi {
        s ^ POLY
    } else {
        s
    }
}

const fn build_exp() -> [u8; 512] {
    let mut t = [0u8; 512];
    let mut x = 1u8;
    let mut i = 0;
    while i < 512 {
        t[i] = x;
        x = mul2(x);
        i += 1;
    }
    t
}

const fn build_log() -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 255 {
        t[EXP[i] as usize] = i as u8;
        i += 1;
    }
    t
}

/// `EXP[i] = g^i`, doubled in length so that `EXP[log a + log b]` needs no reduction.
pub const EXP: [u8; 512] = build_exp();
/// `LOG[a] = i` with `g^i = a`, for a != 0 (`LOG[0]` is meaningless and set to 0).
pub const LOG: [u8; 256] = build_log();

/// g^e, with e taken mod 255 (the multiplicative order of g).
#[inline]
pub const fn exp(e: usize) -> u8 {
    EXP[e % 255]
}

/// Product of two field elements.
#[inline]
pub const fn mul(a: u8, b: u8) -> u8 {
    if a == 0 || b == 0 {
        0
    } else {
        EXP[LOG[a as usize] as usize + LOG[b as usize] as usize]
    }
}

/// Multiplicative inverse; `inv(0)` is defined as 0 (callers never ask for it).
#[inline]
pub const fn inv(a: u8) -> u8 {
    if a == 0 {
        0
    } else {
        EXP[255 - LOG[a as usize] as usize]
    }
}

const fn build_nibbles() -> [[u8; 32]; 256] {
    let mut t = [[0u8; 32]; 256];
    let mut c = 0;
    while c < 256 {
        let mut i = 0;
        while i < 16 {
            t[c][i] = mul(c as u8, i as u8);
            t[c][16 + i] = mul(c as u8, (i << 4) as u8);
            i += 1;
        }
        c += 1;
    }
    t
}

/// Split-nibble tables: `NIBBLES[c][i] = c * i` and `NIBBLES[c][16 + i] = c * (i << 4)`,
/// so `c * x = NIBBLES[c][x & 15] ^ NIBBLES[c][16 + (x >> 4)]` (the `pshufb` method).
pub static NIBBLES: [[u8; 32]; 256] = build_nibbles();

/// The 8x8 bit matrix of "multiply by `c`" in the 0x11d field, laid out for
/// `gf2p8affineqb`: output bit `i` is the parity of `byte[7 - i] & x`, so byte
/// `7 - i` holds, in bit `k`, bit `i` of `c * 2^k`.
pub const fn affine_matrix(c: u8) -> u64 {
    let mut m = 0u64;
    let mut i = 0;
    while i < 8 {
        let mut row = 0u8;
        let mut k = 0;
        while k < 8 {
            if mul(c, 1 << k) & (1 << i) != 0 {
                row |= 1 << k;
            }
            k += 1;
        }
        m |= (row as u64) << (8 * (7 - i));
        i += 1;
    }
    m
}

const fn build_matrices() -> [u64; 256] {
    let mut t = [0u64; 256];
    let mut c = 0;
    while c < 256 {
        t[c] = affine_matrix(c as u8);
        c += 1;
    }
    t
}

/// `MATRICES[c] = affine_matrix(c)` for every constant.
pub static MATRICES: [u64; 256] = build_matrices();

#[cfg(test)]
mod tests {
    use super::*;

    /// Carry-less "Russian peasant" multiplication, independent of the tables.
    fn slow_mul(mut a: u8, mut b: u8) -> u8 {
        let mut r = 0;
        while b != 0 {
            if b & 1 != 0 {
                r ^= a;
            }
            a = mul2(a);
            b >>= 1;
        }
        r
    }

    #[test]
    fn known_products() {
        // Worked by hand: 2 * 0x80 = x^8 = x^4+x^3+x^2+1 = 0x1d.
        assert_eq!(mul(2, 0x80), 0x1d);
        assert_eq!(mul2(0x80), 0x1d);
        // 2 * 0x8e = 0x11c ^ 0x11d = 0x01, so 0x8e is the inverse of 2.
        assert_eq!(mul(2, 0x8e), 0x01);
        assert_eq!(inv(2), 0x8e);
        // 3 * 7 = (x+1)(x^2+x+1) = x^3+1 = 0x09 (no reduction needed).
        assert_eq!(mul(3, 7), 0x09);
        // 0x80 * 0x80 = x^14; x^8 = 0x1d, x^14 = 0x1d << 6 reduced:
        // 0x1d<<1=0x3a, 0x74, 0xe8, 0xe8<<1=0x1d0^0x11d=0xcd, 0xcd<<1=0x19a^0x11d=0x87, 0x87<<1=0x10e^0x11d=0x13.
        assert_eq!(mul(0x80, 0x80), 0x13);
        assert_eq!(exp(8), 0x1d);
        assert_eq!(exp(255), 1);
        assert_eq!(exp(0), 1);
    }

    #[test]
    fn generator_has_order_255() {
        let mut seen = [false; 256];
        for (e, &v) in EXP.iter().take(255).enumerate() {
            assert!(!seen[v as usize], "g^{e} repeats");
            seen[v as usize] = true;
        }
        assert!(!seen[0]);
        assert_eq!(EXP[255], 1);
    }

    #[test]
    fn tables_agree_with_slow_multiplication() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(mul(a, b), slow_mul(a, b), "{a:#x}*{b:#x}");
            }
            if a != 0 {
                assert_eq!(mul(a, inv(a)), 1);
            }
        }
    }

    #[test]
    fn nibble_tables_and_matrices_multiply() {
        for c in 0..=255u8 {
            let m = affine_matrix(c);
            for x in 0..=255u8 {
                let t = &NIBBLES[c as usize];
                assert_eq!(t[(x & 15) as usize] ^ t[16 + (x >> 4) as usize], mul(c, x));
                // Software model of gf2p8affineqb with imm8 = 0.
                let mut y = 0u8;
                for i in 0..8 {
                    let row = (m >> (8 * (7 - i))) as u8;
                    if (row & x).count_ones() % 2 == 1 {
                        y |= 1 << i;
                    }
                }
                assert_eq!(y, mul(c, x));
            }
        }
    }
}
