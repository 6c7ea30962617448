//! x86-64 SIMD engines. Each instruction-set flavour (AVX2, AVX-512BW, and
//! GFNI on top of either) defines a handful of vector primitives (load,
//! store, xor, multiply-by-2-and-add, multiply-by-constant); the macro
//! `kernels!` then stamps out the same five loops for each of them, compiled
//! with that flavour's `#[target_feature]`. Engine values exist only after
//! run-time detection found the features, which is what makes calling the
//! kernels sound.
//!
//! Loops take four vectors per iteration; tails shorter than a vector go to
//! the scalar code. Calls whose working set exceeds this core's L2 cache write
//! their outputs with non-temporal stores (see [`streaming`]).

use std::sync::OnceLock;

use crate::Engine;

/// The loops shared by all flavours, written against the primitives `V`, `W`,
/// `load`, `store`, `zero`, `vxor`, `vxor3`, `mul2x` (`q*2 ^ d`), `mul2x2`
/// (`(q*2 ^ hi)*2 ^ lo`), `C`, `mkconst` and `mulc` that the invoking module
/// defines. All kernels expect lengths already checked by the engine (every buffer exactly `len` bytes); the tail that does not fill
/// a vector goes to the scalar code.
macro_rules! kernels {
    ($feat:literal) => {
        /// Alignment a destination needs for streaming stores.
        pub(in crate::x86) const ALIGN: usize = W;

        /// Store one vector, with a non-temporal (streaming) store when `NT`.
        ///
        /// # Safety
        /// `p` must be valid for writing a vector, and `ALIGN`-aligned when `NT`.
        #[target_feature(enable = $feat)]
        #[inline]
        unsafe fn put<const NT: bool>(p: *mut u8, v: V) {
            // SAFETY: forwarded from the caller.
            unsafe {
                if NT {
                    stream(p, v)
                } else {
                    store(p, v)
                }
            }
        }

        /// dst = XOR of srcs. With `NT`, the full vectors of dst are written
        /// with streaming stores (then fenced), bypassing the caches.
        ///
        /// # Safety
        /// The CPU must support the module's features; every source must be
        /// `dst.len()` bytes; with `NT`, dst must be `ALIGN`-aligned.
        #[target_feature(enable = $feat)]
        pub(in crate::x86) unsafe fn xor<const NT: bool>(srcs: &[&[u8]], dst: &mut [u8]) {
            let len = dst.len();
            let out = dst.as_mut_ptr();
            let (first, rest) = srcs.split_first().expect("xor needs a source");
            let pairs = rest.chunks_exact(2);
            let odd = pairs.remainder().first();
            let mut off = 0;
            while off + 4 * W <= len {
                // SAFETY: off + 4W <= len and every buffer is len bytes long.
                unsafe {
                    let s = first.as_ptr().add(off);
                    let mut a0 = load(s);
                    let mut a1 = load(s.add(W));
                    let mut a2 = load(s.add(2 * W));
                    let mut a3 = load(s.add(3 * W));
                    for pr in pairs.clone() {
                        let s = pr[0].as_ptr().add(off);
                        let t = pr[1].as_ptr().add(off);
                        a0 = vxor3(a0, load(s), load(t));
                        a1 = vxor3(a1, load(s.add(W)), load(t.add(W)));
                        a2 = vxor3(a2, load(s.add(2 * W)), load(t.add(2 * W)));
                        a3 = vxor3(a3, load(s.add(3 * W)), load(t.add(3 * W)));
                    }
                    if let Some(o) = odd {
                        let s = o.as_ptr().add(off);
                        a0 = vxor(a0, load(s));
                        a1 = vxor(a1, load(s.add(W)));
                        a2 = vxor(a2, load(s.add(2 * W)));
                        a3 = vxor(a3, load(s.add(3 * W)));
                    }
                    let o = out.add(off);
                    put::<NT>(o, a0);
                    put::<NT>(o.add(W), a1);
                    put::<NT>(o.add(2 * W), a2);
                    put::<NT>(o.add(3 * W), a3);
                }
                off += 4 * W;
            }
            while off + W <= len {
                // SAFETY: off + W <= len and every buffer is len bytes long.
                unsafe {
                    let mut a = load(first.as_ptr().add(off));
                    for s in rest {
                        a = vxor(a, load(s.as_ptr().add(off)));
                    }
                    put::<NT>(out.add(off), a);
                }
                off += W;
            }
            if NT {
                _mm_sfence();
            }
            if off < len {
                crate::scalar::xor_from(srcs, off, dst);
            }
        }

        /// P = XOR of data, Q = sum g^i `data[i]` by Horner's rule from the top
        /// slot down; streaming stores for P and Q with `NT`.
        ///
        /// # Safety
        /// The CPU must support the module's features; `data` non-empty, every
        /// block, `p` and `q` the same length; with `NT`, p and q `ALIGN`-aligned.
        #[target_feature(enable = $feat)]
        pub(in crate::x86) unsafe fn gen_pq<const NT: bool>(
            data: &[&[u8]],
            p: &mut [u8],
            q: &mut [u8],
        ) {
            let len = p.len();
            let (pp, qp) = (p.as_mut_ptr(), q.as_mut_ptr());
            let (top, below) = data.split_last().expect("gen_pq needs data");
            let mut off = 0;
            while off + 4 * W <= len {
                // SAFETY: off + 4W <= len and every buffer is len bytes long.
                unsafe {
                    let s = top.as_ptr().add(off);
                    let mut p0 = load(s);
                    let mut p1 = load(s.add(W));
                    let mut p2 = load(s.add(2 * W));
                    let mut p3 = load(s.add(3 * W));
                    let (mut q0, mut q1, mut q2, mut q3) = (p0, p1, p2, p3);
                    // Two slots per step, from the top down: q = (q*2 ^ hi)*2 ^ lo.
                    for pair in below.rchunks_exact(2) {
                        let s = pair[1].as_ptr().add(off);
                        let t = pair[0].as_ptr().add(off);
                        let (h0, l0) = (load(s), load(t));
                        let (h1, l1) = (load(s.add(W)), load(t.add(W)));
                        let (h2, l2) = (load(s.add(2 * W)), load(t.add(2 * W)));
                        let (h3, l3) = (load(s.add(3 * W)), load(t.add(3 * W)));
                        p0 = vxor3(p0, h0, l0);
                        p1 = vxor3(p1, h1, l1);
                        p2 = vxor3(p2, h2, l2);
                        p3 = vxor3(p3, h3, l3);
                        q0 = mul2x2(q0, h0, l0);
                        q1 = mul2x2(q1, h1, l1);
                        q2 = mul2x2(q2, h2, l2);
                        q3 = mul2x2(q3, h3, l3);
                    }
                    // An odd count leaves slot 0, the last Horner step.
                    if let Some(d) = below.rchunks_exact(2).remainder().first() {
                        let s = d.as_ptr().add(off);
                        let x0 = load(s);
                        let x1 = load(s.add(W));
                        let x2 = load(s.add(2 * W));
                        let x3 = load(s.add(3 * W));
                        p0 = vxor(p0, x0);
                        p1 = vxor(p1, x1);
                        p2 = vxor(p2, x2);
                        p3 = vxor(p3, x3);
                        q0 = mul2x(q0, x0);
                        q1 = mul2x(q1, x1);
                        q2 = mul2x(q2, x2);
                        q3 = mul2x(q3, x3);
                    }
                    put::<NT>(pp.add(off), p0);
                    put::<NT>(pp.add(off + W), p1);
                    put::<NT>(pp.add(off + 2 * W), p2);
                    put::<NT>(pp.add(off + 3 * W), p3);
                    put::<NT>(qp.add(off), q0);
                    put::<NT>(qp.add(off + W), q1);
                    put::<NT>(qp.add(off + 2 * W), q2);
                    put::<NT>(qp.add(off + 3 * W), q3);
                }
                off += 4 * W;
            }
            while off + W <= len {
                // SAFETY: off + W <= len and every buffer is len bytes long.
                unsafe {
                    let mut pv = load(top.as_ptr().add(off));
                    let mut qv = pv;
                    for d in below.iter().rev() {
                        let x = load(d.as_ptr().add(off));
                        pv = vxor(pv, x);
                        qv = mul2x(qv, x);
                    }
                    put::<NT>(pp.add(off), pv);
                    put::<NT>(qp.add(off), qv);
                }
                off += W;
            }
            if NT {
                _mm_sfence();
            }
            if off < len {
                crate::scalar::gen_pq_from(data, off, p, q);
            }
        }

        /// dst ^= c * src (a plain XOR when c == 1).
        ///
        /// # Safety
        /// The CPU must support the module's features; `src` and `dst` the same length.
        #[target_feature(enable = $feat)]
        pub(in crate::x86) unsafe fn mul_acc(c: u8, src: &[u8], dst: &mut [u8]) {
            let len = dst.len();
            let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
            let mut off = 0;
            if c == 1 {
                while off + 4 * W <= len {
                    // SAFETY: off + 4W <= len = src.len() = dst.len().
                    unsafe {
                        for k in 0..4 {
                            let o = off + k * W;
                            store(d.add(o), vxor(load(d.add(o)), load(s.add(o))));
                        }
                    }
                    off += 4 * W;
                }
            } else {
                let cv = mkconst(c);
                while off + 4 * W <= len {
                    // SAFETY: off + 4W <= len = src.len() = dst.len().
                    unsafe {
                        for k in 0..4 {
                            let o = off + k * W;
                            store(d.add(o), vxor(load(d.add(o)), mulc(cv, load(s.add(o)))));
                        }
                    }
                    off += 4 * W;
                }
            }
            let cv = mkconst(c);
            while off + W <= len {
                // SAFETY: off + W <= len = src.len() = dst.len().
                unsafe {
                    store(
                        d.add(off),
                        vxor(load(d.add(off)), mulc(cv, load(s.add(off)))),
                    );
                }
                off += W;
            }
            if off < len {
                crate::scalar::mul_acc_from(c, src, off, dst);
            }
        }

        /// dst = c * src.
        ///
        /// # Safety
        /// The CPU must support the module's features; `src` and `dst` the same length.
        #[target_feature(enable = $feat)]
        pub(in crate::x86) unsafe fn mul_const(c: u8, src: &[u8], dst: &mut [u8]) {
            let len = dst.len();
            let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
            let cv = mkconst(c);
            let mut off = 0;
            while off + 4 * W <= len {
                // SAFETY: off + 4W <= len = src.len() = dst.len().
                unsafe {
                    for k in 0..4 {
                        let o = off + k * W;
                        store(d.add(o), mulc(cv, load(s.add(o))));
                    }
                }
                off += 4 * W;
            }
            while off + W <= len {
                // SAFETY: off + W <= len = src.len() = dst.len().
                unsafe { store(d.add(off), mulc(cv, load(s.add(off)))) };
                off += W;
            }
            if off < len {
                crate::scalar::mul_const_from(c, src, off, dst);
            }
        }

        /// Fused two-data recovery: one pass computes P' and Q' (stored parity
        /// plus the surviving blocks' parity) and writes dx = a*P' ^ b*Q',
        /// dy = P' ^ dx; streaming stores for dx and dy with `NT`.
        ///
        /// # Safety
        /// The CPU must support the module's features; every present block,
        /// `p`, `q`, `dx` and `dy` the same length; with `NT`, dx and dy
        /// `ALIGN`-aligned.
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = $feat)]
        pub(in crate::x86) unsafe fn recov_2data<const NT: bool>(
            data: &[Option<&[u8]>],
            a: u8,
            b: u8,
            p: &[u8],
            q: &[u8],
            dx: &mut [u8],
            dy: &mut [u8],
        ) {
            let len = p.len();
            let (xp, yp) = (dx.as_mut_ptr(), dy.as_mut_ptr());
            let (ca, cb) = (mkconst(a), mkconst(b));
            let z = zero();
            let mut off = 0;
            while off + 4 * W <= len {
                // SAFETY: off + 4W <= len and every buffer is len bytes long.
                unsafe {
                    let s = p.as_ptr().add(off);
                    let mut p0 = load(s);
                    let mut p1 = load(s.add(W));
                    let mut p2 = load(s.add(2 * W));
                    let mut p3 = load(s.add(3 * W));
                    let (mut q0, mut q1, mut q2, mut q3) = (z, z, z, z);
                    for d in data.iter().rev() {
                        match d {
                            Some(d) => {
                                let s = d.as_ptr().add(off);
                                let x0 = load(s);
                                let x1 = load(s.add(W));
                                let x2 = load(s.add(2 * W));
                                let x3 = load(s.add(3 * W));
                                p0 = vxor(p0, x0);
                                p1 = vxor(p1, x1);
                                p2 = vxor(p2, x2);
                                p3 = vxor(p3, x3);
                                q0 = mul2x(q0, x0);
                                q1 = mul2x(q1, x1);
                                q2 = mul2x(q2, x2);
                                q3 = mul2x(q3, x3);
                            }
                            None => {
                                q0 = mul2x(q0, z);
                                q1 = mul2x(q1, z);
                                q2 = mul2x(q2, z);
                                q3 = mul2x(q3, z);
                            }
                        }
                    }
                    let s = q.as_ptr().add(off);
                    q0 = vxor(q0, load(s));
                    q1 = vxor(q1, load(s.add(W)));
                    q2 = vxor(q2, load(s.add(2 * W)));
                    q3 = vxor(q3, load(s.add(3 * W)));
                    let x0 = vxor(mulc(ca, p0), mulc(cb, q0));
                    let x1 = vxor(mulc(ca, p1), mulc(cb, q1));
                    let x2 = vxor(mulc(ca, p2), mulc(cb, q2));
                    let x3 = vxor(mulc(ca, p3), mulc(cb, q3));
                    put::<NT>(xp.add(off), x0);
                    put::<NT>(xp.add(off + W), x1);
                    put::<NT>(xp.add(off + 2 * W), x2);
                    put::<NT>(xp.add(off + 3 * W), x3);
                    put::<NT>(yp.add(off), vxor(p0, x0));
                    put::<NT>(yp.add(off + W), vxor(p1, x1));
                    put::<NT>(yp.add(off + 2 * W), vxor(p2, x2));
                    put::<NT>(yp.add(off + 3 * W), vxor(p3, x3));
                }
                off += 4 * W;
            }
            while off + W <= len {
                // SAFETY: off + W <= len and every buffer is len bytes long.
                unsafe {
                    let mut pv = load(p.as_ptr().add(off));
                    let mut qv = z;
                    for d in data.iter().rev() {
                        let x = match d {
                            Some(d) => load(d.as_ptr().add(off)),
                            None => z,
                        };
                        pv = vxor(pv, x);
                        qv = mul2x(qv, x);
                    }
                    qv = vxor(qv, load(q.as_ptr().add(off)));
                    let xv = vxor(mulc(ca, pv), mulc(cb, qv));
                    put::<NT>(xp.add(off), xv);
                    put::<NT>(yp.add(off), vxor(pv, xv));
                }
                off += W;
            }
            if NT {
                _mm_sfence();
            }
            if off < len {
                crate::scalar::recov_2data_from(data, a, b, p, q, off, dx, dy);
            }
        }
    };
}

mod avx2;
mod avx512;
mod gfni;

/// Declares one engine type over a flavour module: the type can only be
/// obtained from `detect()`, after the CPU was found to have `$det` features.
macro_rules! engine {
    ($(#[$meta:meta])* $Engine:ident, $name:literal, $($ops:ident)::+, [$($det:tt),+]) => {
        $(#[$meta])*
        #[derive(Debug)]
        pub(crate) struct $Engine {
            _detected: (),
        }

        impl $Engine {
            /// The engine, if this CPU has the features its kernels are compiled for.
            pub(crate) fn detect() -> Option<&'static dyn Engine> {
                static ENGINE: $Engine = $Engine { _detected: () };
                if $(std::is_x86_feature_detected!($det))&&+ {
                    Some(&ENGINE)
                } else {
                    None
                }
            }

            /// The features this engine needs that the CPU lacks.
            pub(crate) fn missing() -> Vec<&'static str> {
                let mut m = Vec::new();
                $(if !std::is_x86_feature_detected!($det) { m.push($det); })+
                m
            }
        }

        impl Engine for $Engine {
            fn name(&self) -> &'static str {
                $name
            }

            fn xor(&self, srcs: &[&[u8]], dst: &mut [u8]) {
                crate::check_xor(srcs, dst);
                use $($ops)::+ as k;
                let nt = streaming(dst.len() * (srcs.len() + 1), &[&*dst], k::ALIGN);
                // SAFETY: values of this type exist only once detect() saw the CPU
                // features the kernel is compiled for; lengths were checked above;
                // streaming only with an aligned destination.
                unsafe {
                    if nt {
                        k::xor::<true>(srcs, dst)
                    } else {
                        k::xor::<false>(srcs, dst)
                    }
                }
            }

            fn gen_pq(&self, data: &[&[u8]], p: &mut [u8], q: &mut [u8]) {
                crate::check_pq(data, p, q);
                use $($ops)::+ as k;
                let nt = streaming(p.len() * (data.len() + 2), &[&*p, &*q], k::ALIGN);
                // SAFETY: features detected (see xor); lengths checked above;
                // streaming only with aligned destinations.
                unsafe {
                    if nt {
                        k::gen_pq::<true>(data, p, q)
                    } else {
                        k::gen_pq::<false>(data, p, q)
                    }
                }
            }

            fn mul_acc(&self, exp: usize, src: &[u8], dst: &mut [u8]) {
                crate::check_pair(src, dst);
                // SAFETY: features detected (see xor); lengths checked above.
                unsafe { $($ops)::+::mul_acc(crate::gf::exp(exp), src, dst) }
            }

            fn mul_const(&self, c: u8, src: &[u8], dst: &mut [u8]) {
                crate::check_pair(src, dst);
                // SAFETY: features detected (see xor); lengths checked above.
                unsafe { $($ops)::+::mul_const(c, src, dst) }
            }

            fn recov_2data(
                &self,
                data: &[Option<&[u8]>],
                x: usize,
                y: usize,
                p: &[u8],
                q: &[u8],
                dx: &mut [u8],
                dy: &mut [u8],
            ) {
                crate::check_recov(data, x, y, p, q, dx, dy);
                let (a, b) = crate::recov_consts(x, y);
                use $($ops)::+ as k;
                let nt = streaming(p.len() * (data.len() + 2), &[&*dx, &*dy], k::ALIGN);
                // SAFETY: features detected (see xor); lengths checked above;
                // streaming only with aligned destinations.
                unsafe {
                    if nt {
                        k::recov_2data::<true>(data, a, b, p, q, dx, dy)
                    } else {
                        k::recov_2data::<false>(data, a, b, p, q, dx, dy)
                    }
                }
            }
        }
    };
}

engine!(
    /// AVX2: 32-byte vectors, `pshufb` nibble tables, md's mask/shift/xor `{02}` step.
    Avx2,
    "avx2",
    avx2,
    ["avx2"]
);
engine!(
    /// AVX-512BW: 64-byte vectors, mask registers for the `{02}` step.
    Avx512,
    "avx512",
    avx512,
    ["avx512f", "avx512bw"]
);
engine!(
    /// GFNI with VEX-encoded 32-byte vectors: `gf2p8affineqb` does each multiplication.
    GfniAvx2,
    "gfni-avx2",
    gfni::ymm,
    ["avx2", "gfni"]
);
engine!(
    /// GFNI with 64-byte AVX-512 vectors.
    GfniAvx512,
    "gfni-avx512",
    gfni::zmm,
    ["avx512f", "avx512bw", "gfni"]
);

/// Working sets (sources plus destinations) larger than a core's L2 cache are
/// written with streaming stores: the parity would not stay cached anyway, and
/// streaming skips reading each destination line before overwriting it and
/// leaves the sources in the cache. Within L2, ordinary stores are much faster.
fn stream_min() -> usize {
    static MIN: OnceLock<usize> = OnceLock::new();
    *MIN.get_or_init(|| l2_bytes().unwrap_or(1 << 20))
}

/// This core's L2 size from CPUID leaf 0x8000_0006 (ECX bits 31:16, in KiB),
/// which Intel and AMD both report.
fn l2_bytes() -> Option<usize> {
    use std::arch::x86_64::__cpuid;
    // SAFETY: CPUID exists on every x86-64 CPU and any leaf may be queried; a
    // leaf above the maximum returns meaningless values, so `max` is checked
    // before `l2` is used. (The intrinsic is a safe fn in newer Rust releases,
    // hence the allow.)
    #[allow(unused_unsafe)]
    let (max, l2) = unsafe { (__cpuid(0x8000_0000).eax, __cpuid(0x8000_0006).ecx) };
    if max < 0x8000_0006 {
        return None;
    }
    let kib = (l2 >> 16) as usize;
    (kib > 0).then_some(kib * 1024)
}

/// Whether to use streaming stores for a call touching `bytes` in all, writing `dsts`.
fn streaming(bytes: usize, dsts: &[&[u8]], align: usize) -> bool {
    bytes > stream_min()
        && dsts
            .iter()
            .all(|d| (d.as_ptr() as usize).is_multiple_of(align))
}

type Detect = fn() -> Option<&'static dyn Engine>;
type Missing = fn() -> Vec<&'static str>;

/// Every x86 engine, slowest first: (name, detector, missing-features report).
const ALL: [(&str, Detect, Missing); 4] = [
    ("avx2", Avx2::detect, Avx2::missing),
    ("gfni-avx2", GfniAvx2::detect, GfniAvx2::missing),
    ("avx512", Avx512::detect, Avx512::missing),
    ("gfni-avx512", GfniAvx512::detect, GfniAvx512::missing),
];

/// The engines this CPU can run, in the order of [`ALL`].
pub(crate) fn engines() -> Vec<&'static dyn Engine> {
    ALL.iter().filter_map(|(_, d, _)| d()).collect()
}

/// Engines compiled in but not runnable here, with the missing CPU features.
pub(crate) fn unavailable() -> Vec<(&'static str, Vec<&'static str>)> {
    ALL.iter()
        .filter(|(_, d, _)| d().is_none())
        .map(|(n, _, m)| (*n, m()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l2_size_and_streaming_rule() {
        let l2 = l2_bytes();
        eprintln!(
            "L2 per core from CPUID: {l2:?}; streaming above {} bytes",
            stream_min()
        );
        if let Some(b) = l2 {
            assert!(
                (64 << 10..=64 << 20).contains(&b),
                "implausible L2 size {b}"
            );
        }
        let buf = vec![0u8; 4096 + 64];
        let off = buf.as_ptr().align_offset(64);
        let aligned = &buf[off..off + 4096];
        let unaligned = &buf[off + 1..off + 4097];
        let big = stream_min() + 1;
        assert!(streaming(big, &[aligned], 64));
        assert!(!streaming(big, &[aligned, unaligned], 64));
        assert!(!streaming(stream_min(), &[aligned], 64));
    }
}
