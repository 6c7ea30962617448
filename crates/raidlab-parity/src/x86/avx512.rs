//! AVX-512BW primitives: 64-byte vectors; `{02}` multiplication takes the top
//! bits into a mask register and xors the masked reduction constant, constant
//! multiplication uses `vpshufb` on split-nibble tables.

use std::arch::x86_64::*;

type V = __m512i;
const W: usize = 64;

/// # Safety
/// `p` must be valid for reading 64 bytes.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn load(p: *const u8) -> V {
    // SAFETY: the caller guarantees 64 readable bytes; loadu has no alignment need.
    unsafe { _mm512_loadu_si512(p.cast()) }
}

/// # Safety
/// `p` must be valid for writing 64 bytes.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn store(p: *mut u8, v: V) {
    // SAFETY: the caller guarantees 64 writable bytes; storeu has no alignment need.
    unsafe { _mm512_storeu_si512(p.cast(), v) }
}

/// # Safety
/// `p` must be valid for writing 64 bytes and 64-byte aligned.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn stream(p: *mut u8, v: V) {
    // SAFETY: the caller guarantees 64 writable, 64-byte aligned bytes.
    unsafe { _mm512_stream_si512(p.cast(), v) }
}

#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn zero() -> V {
    _mm512_setzero_si512()
}

#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn vxor(a: V, b: V) -> V {
    _mm512_xor_si512(a, b)
}

#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn vxor3(a: V, b: V, c: V) -> V {
    _mm512_ternarylogic_epi32::<0x96>(a, b, c)
}

/// `q * {02} ^ d`: top bits to a mask, 0x1d where set, one three-way xor.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn mul2x(q: V, d: V) -> V {
    let k = _mm512_movepi8_mask(q);
    let q2 = _mm512_add_epi8(q, q);
    let r = _mm512_maskz_mov_epi8(k, _mm512_set1_epi8(crate::gf::POLY as i8));
    _mm512_ternarylogic_epi32::<0x96>(q2, r, d)
}

/// Two Horner steps: `(q * {02} ^ hi) * {02} ^ lo`.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn mul2x2(q: V, hi: V, lo: V) -> V {
    mul2x(mul2x(q, hi), lo)
}

/// Low- and high-nibble product tables of one constant, in all four 128-bit lanes.
#[derive(Clone, Copy)]
struct C {
    lo: V,
    hi: V,
}

#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn mkconst(c: u8) -> C {
    let t = &crate::gf::NIBBLES[c as usize];
    // SAFETY: `t` is 32 bytes; each load reads 16 of them.
    unsafe {
        C {
            lo: _mm512_broadcast_i32x4(_mm_loadu_si128(t.as_ptr().cast())),
            hi: _mm512_broadcast_i32x4(_mm_loadu_si128(t.as_ptr().add(16).cast())),
        }
    }
}

#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn mulc(c: C, v: V) -> V {
    let mask = _mm512_set1_epi8(0x0f);
    let lo = _mm512_and_si512(v, mask);
    let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(v), mask);
    _mm512_xor_si512(_mm512_shuffle_epi8(c.lo, lo), _mm512_shuffle_epi8(c.hi, hi))
}

kernels!("avx512f,avx512bw");
