//! AVX2 primitives: 32-byte vectors; `{02}` multiplication by md's
//! compare/add/and/xor trick, constant multiplication by two `pshufb` lookups
//! into split-nibble tables.

use std::arch::x86_64::*;

type V = __m256i;
const W: usize = 32;

/// # Safety
/// `p` must be valid for reading 32 bytes.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn load(p: *const u8) -> V {
    // SAFETY: the caller guarantees 32 readable bytes; loadu has no alignment need.
    unsafe { _mm256_loadu_si256(p.cast()) }
}

/// # Safety
/// `p` must be valid for writing 32 bytes.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn store(p: *mut u8, v: V) {
    // SAFETY: the caller guarantees 32 writable bytes; storeu has no alignment need.
    unsafe { _mm256_storeu_si256(p.cast(), v) }
}

/// # Safety
/// `p` must be valid for writing 32 bytes and 32-byte aligned.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn stream(p: *mut u8, v: V) {
    // SAFETY: the caller guarantees 32 writable, 32-byte aligned bytes.
    unsafe { _mm256_stream_si256(p.cast(), v) }
}

#[target_feature(enable = "avx2")]
#[inline]
fn zero() -> V {
    _mm256_setzero_si256()
}

#[target_feature(enable = "avx2")]
#[inline]
fn vxor(a: V, b: V) -> V {
    _mm256_xor_si256(a, b)
}

#[target_feature(enable = "avx2")]
#[inline]
fn vxor3(a: V, b: V, c: V) -> V {
    _mm256_xor_si256(_mm256_xor_si256(a, b), c)
}

/// `q * {02} ^ d`: bytes with the top bit set become 0xff by a signed compare,
/// select the reduction 0x1d, which is xored into q + q.
#[target_feature(enable = "avx2")]
#[inline]
fn mul2x(q: V, d: V) -> V {
    let m = _mm256_cmpgt_epi8(_mm256_setzero_si256(), q);
    let q2 = _mm256_add_epi8(q, q);
    let r = _mm256_and_si256(m, _mm256_set1_epi8(crate::gf::POLY as i8));
    _mm256_xor_si256(_mm256_xor_si256(q2, r), d)
}

/// Two Horner steps: `(q * {02} ^ hi) * {02} ^ lo`.
#[target_feature(enable = "avx2")]
#[inline]
fn mul2x2(q: V, hi: V, lo: V) -> V {
    mul2x(mul2x(q, hi), lo)
}

/// Low- and high-nibble product tables of one constant, in both 128-bit lanes.
#[derive(Clone, Copy)]
struct C {
    lo: V,
    hi: V,
}

#[target_feature(enable = "avx2")]
#[inline]
fn mkconst(c: u8) -> C {
    let t = &crate::gf::NIBBLES[c as usize];
    // SAFETY: `t` is 32 bytes; each load reads 16 of them.
    unsafe {
        C {
            lo: _mm256_broadcastsi128_si256(_mm_loadu_si128(t.as_ptr().cast())),
            hi: _mm256_broadcastsi128_si256(_mm_loadu_si128(t.as_ptr().add(16).cast())),
        }
    }
}

#[target_feature(enable = "avx2")]
#[inline]
fn mulc(c: C, v: V) -> V {
    let mask = _mm256_set1_epi8(0x0f);
    let lo = _mm256_and_si256(v, mask);
    let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), mask);
    _mm256_xor_si256(_mm256_shuffle_epi8(c.lo, lo), _mm256_shuffle_epi8(c.hi, hi))
}

kernels!("avx2");
