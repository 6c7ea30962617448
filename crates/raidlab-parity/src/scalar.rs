//! The scalar reference engine: byte-at-a-time, table-driven, obviously
//! correct. It is the truth every SIMD engine is tested against, the fallback
//! on CPUs without SIMD support, and the tail handler (the last few bytes that
//! do not fill a vector) for the SIMD engines.

use crate::gf;
use crate::Engine;

/// Byte-at-a-time engine built on the log/exp tables of [`gf`].
#[derive(Debug)]
pub(crate) struct Scalar;

pub(crate) static SCALAR: Scalar = Scalar;

/// `dst[off..] = XOR of srcs[..][off..]`.
pub(crate) fn xor_from(srcs: &[&[u8]], off: usize, dst: &mut [u8]) {
    for (j, d) in dst.iter_mut().enumerate().skip(off) {
        let mut acc = 0u8;
        for s in srcs {
            acc ^= s[j];
        }
        *d = acc;
    }
}

/// P and Q for bytes `off..`, Q by Horner's rule from the highest slot down, as md does:
/// `q = D[n-1]; for i in (0..n-1).rev() { q = 2*q ^ D[i] }`.
pub(crate) fn gen_pq_from(data: &[&[u8]], off: usize, p: &mut [u8], q: &mut [u8]) {
    let top = data.len() - 1;
    for j in off..p.len() {
        let mut pv = data[top][j];
        let mut qv = pv;
        for d in data[..top].iter().rev() {
            pv ^= d[j];
            qv = gf::mul2(qv) ^ d[j];
        }
        p[j] = pv;
        q[j] = qv;
    }
}

/// `dst[off..] ^= c * src[off..]`.
pub(crate) fn mul_acc_from(c: u8, src: &[u8], off: usize, dst: &mut [u8]) {
    for (d, &s) in dst[off..].iter_mut().zip(&src[off..]) {
        *d ^= gf::mul(c, s);
    }
}

/// `dst[off..] = c * src[off..]`.
pub(crate) fn mul_const_from(c: u8, src: &[u8], off: usize, dst: &mut [u8]) {
    for (d, &s) in dst[off..].iter_mut().zip(&src[off..]) {
        *d = gf::mul(c, s);
    }
}

/// Two-data recovery for bytes `off..`: P' and Q' are the stored parity plus
/// the parity of the surviving blocks (lost ones count as zero), then
/// `dx = a*P' ^ b*Q'` and `dy = P' ^ dx`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn recov_2data_from(
    data: &[Option<&[u8]>],
    a: u8,
    b: u8,
    p: &[u8],
    q: &[u8],
    off: usize,
    dx: &mut [u8],
    dy: &mut [u8],
) {
    for j in off..p.len() {
        let mut pv = p[j];
        let mut qv = 0u8;
        for d in data.iter().rev() {
            qv = gf::mul2(qv);
            if let Some(d) = d {
                pv ^= d[j];
                qv ^= d[j];
            }
        }
        qv ^= q[j];
        let x = gf::mul(a, pv) ^ gf::mul(b, qv);
        dx[j] = x;
        dy[j] = pv ^ x;
    }
}

impl Engine for Scalar {
    fn name(&self) -> &'static str {
        "scalar"
    }

    fn xor(&self, srcs: &[&[u8]], dst: &mut [u8]) {
        crate::check_xor(srcs, dst);
        xor_from(srcs, 0, dst);
    }

    fn gen_pq(&self, data: &[&[u8]], p: &mut [u8], q: &mut [u8]) {
        crate::check_pq(data, p, q);
        gen_pq_from(data, 0, p, q);
    }

    fn mul_acc(&self, exp: usize, src: &[u8], dst: &mut [u8]) {
        crate::check_pair(src, dst);
        mul_acc_from(gf::exp(exp), src, 0, dst);
    }

    fn mul_const(&self, c: u8, src: &[u8], dst: &mut [u8]) {
        crate::check_pair(src, dst);
        mul_const_from(c, src, 0, dst);
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
        recov_2data_from(data, a, b, p, q, 0, dx, dy);
    }
}
