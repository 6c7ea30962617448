//! GFNI primitives. `gf2p8mulb` multiplies in the AES field (0x11b), which is
//! the wrong field for md, so every multiplication here is `gf2p8affineqb`
//! with the 8x8 bit matrix of "multiply by c" in the 0x11d field
//! ([`crate::gf::affine_matrix`]): one instruction per vector, for `{02}` and
//! for arbitrary constants alike. Two widths: VEX-encoded 32-byte vectors
//! (GFNI + AVX2) and 64-byte AVX-512 vectors.

/// GFNI on 32-byte AVX2 vectors.
pub(super) mod ymm {
    use std::arch::x86_64::*;

    type V = __m256i;
    const W: usize = 32;

    /// # Safety
    /// `p` must be valid for reading 32 bytes.
    #[target_feature(enable = "avx2,gfni")]
    #[inline]
    unsafe fn load(p: *const u8) -> V {
        // SAFETY: the caller guarantees 32 readable bytes; loadu has no alignment need.
        unsafe { _mm256_loadu_si256(p.cast()) }
    }

    /// # Safety
    /// `p` must be valid for writing 32 bytes.
    #[target_feature(enable = "avx2,gfni")]
    #[inline]
    unsafe fn store(p: *mut u8, v: V) {
        // SAFETY: the caller guarantees 32 writable bytes; storeu has no alignment need.
        unsafe { _mm256_storeu_si256(p.cast(), v) }
    }

    /// # Safety
    /// `p` must be valid for writing 32 bytes and 32-byte aligned.
    #[target_feature(enable = "avx2,gfni")]
    #[inline]
    unsafe fn stream(p: *mut u8, v: V) {
        // SAFETY: the caller guarantees 32 writable, 32-byte aligned bytes.
        unsafe { _mm256_stream_si256(p.cast(), v) }
    }

    #[target_feature(enable = "avx2,gfni")]
    #[inline]
    fn zero() -> V {
        _mm256_setzero_si256()
    }

    #[target_feature(enable = "avx2,gfni")]
    #[inline]
    fn vxor(a: V, b: V) -> V {
        _mm256_xor_si256(a, b)
    }

    #[target_feature(enable = "avx2,gfni")]
    #[inline]
    fn vxor3(a: V, b: V, c: V) -> V {
        _mm256_xor_si256(_mm256_xor_si256(a, b), c)
    }

    /// The broadcast bit matrix of one constant.
    type C = V;

    #[target_feature(enable = "avx2,gfni")]
    #[inline]
    fn mkconst(c: u8) -> C {
        _mm256_set1_epi64x(crate::gf::MATRICES[c as usize] as i64)
    }

    #[target_feature(enable = "avx2,gfni")]
    #[inline]
    fn mulc(c: C, v: V) -> V {
        _mm256_gf2p8affine_epi64_epi8::<0>(v, c)
    }

    #[target_feature(enable = "avx2,gfni")]
    #[inline]
    fn mul2x(q: V, d: V) -> V {
        const M2: u64 = crate::gf::affine_matrix(2);
        vxor(mulc(_mm256_set1_epi64x(M2 as i64), q), d)
    }

    /// Two Horner steps in one: `q * {04} ^ hi * {02} ^ lo`, two affine products
    /// and one three-way xor instead of two dependent steps.
    #[target_feature(enable = "avx2,gfni")]
    #[inline]
    fn mul2x2(q: V, hi: V, lo: V) -> V {
        const M2: u64 = crate::gf::affine_matrix(2);
        const M4: u64 = crate::gf::affine_matrix(4);
        vxor3(
            mulc(_mm256_set1_epi64x(M4 as i64), q),
            mulc(_mm256_set1_epi64x(M2 as i64), hi),
            lo,
        )
    }

    kernels!("avx2,gfni");
}

/// GFNI on 64-byte AVX-512 vectors.
pub(super) mod zmm {
    use std::arch::x86_64::*;

    type V = __m512i;
    const W: usize = 64;

    /// # Safety
    /// `p` must be valid for reading 64 bytes.
    #[target_feature(enable = "avx512f,avx512bw,gfni")]
    #[inline]
    unsafe fn load(p: *const u8) -> V {
        // SAFETY: the caller guarantees 64 readable bytes; loadu has no alignment need.
        unsafe { _mm512_loadu_si512(p.cast()) }
    }

    /// # Safety
    /// `p` must be valid for writing 64 bytes.
    #[target_feature(enable = "avx512f,avx512bw,gfni")]
    #[inline]
    unsafe fn store(p: *mut u8, v: V) {
        // SAFETY: the caller guarantees 64 writable bytes; storeu has no alignment need.
        unsafe { _mm512_storeu_si512(p.cast(), v) }
    }

    /// # Safety
    /// `p` must be valid for writing 64 bytes and 64-byte aligned.
    #[target_feature(enable = "avx512f,avx512bw,gfni")]
    #[inline]
    unsafe fn stream(p: *mut u8, v: V) {
        // SAFETY: the caller guarantees 64 writable, 64-byte aligned bytes.
        unsafe { _mm512_stream_si512(p.cast(), v) }
    }

    #[target_feature(enable = "avx512f,avx512bw,gfni")]
    #[inline]
    fn zero() -> V {
        _mm512_setzero_si512()
    }

    #[target_feature(enable = "avx512f,avx512bw,gfni")]
    #[inline]
    fn vxor(a: V, b: V) -> V {
        _mm512_xor_si512(a, b)
    }

    #[target_feature(enable = "avx512f,avx512bw,gfni")]
    #[inline]
    fn vxor3(a: V, b: V, c: V) -> V {
        _mm512_ternarylogic_epi32::<0x96>(a, b, c)
    }

    /// The broadcast bit matrix of one constant.
    type C = V;

    #[target_feature(enable = "avx512f,avx512bw,gfni")]
    #[inline]
    fn mkconst(c: u8) -> C {
        _mm512_set1_epi64(crate::gf::MATRICES[c as usize] as i64)
    }

    #[target_feature(enable = "avx512f,avx512bw,gfni")]
    #[inline]
    fn mulc(c: C, v: V) -> V {
        _mm512_gf2p8affine_epi64_epi8::<0>(v, c)
    }

    #[target_feature(enable = "avx512f,avx512bw,gfni")]
    #[inline]
    fn mul2x(q: V, d: V) -> V {
        const M2: u64 = crate::gf::affine_matrix(2);
        vxor(mulc(_mm512_set1_epi64(M2 as i64), q), d)
    }

    /// Two Horner steps in one: `q * {04} ^ hi * {02} ^ lo`, two affine products
    /// and one three-way xor instead of two dependent steps.
    #[target_feature(enable = "avx512f,avx512bw,gfni")]
    #[inline]
    fn mul2x2(q: V, hi: V, lo: V) -> V {
        const M2: u64 = crate::gf::affine_matrix(2);
        const M4: u64 = crate::gf::affine_matrix(4);
        vxor3(
            mulc(_mm512_set1_epi64(M4 as i64), q),
            mulc(_mm512_set1_epi64(M2 as i64), hi),
            lo,
        )
    }

    kernels!("avx512f,avx512bw,gfni");
}
