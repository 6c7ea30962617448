//! raidlab-parity: the parity arithmetic of RAID 4/5/6, bit-for-bit what Linux
//! md computes.
//!
//! - P is the XOR of the data blocks (RAID 4/5, and RAID 6's first parity).
//! - Q is RAID 6's second parity: `Q = sum g^i * D_i` in GF(2^8) with polynomial
//!   0x11d and generator g = 2, where `i` is the slot (index in the `data` slice),
//!   evaluated by Horner's rule from the highest slot down as md does.
//! - [`recover`] rebuilds one or two lost data blocks; [`update`] applies a
//!   read-modify-write delta to P and Q.
//!
//! Every operation is provided by an [`Engine`]: the scalar [`reference()`] (the
//! truth, always available) and SIMD engines for x86-64 (AVX2, AVX-512BW, GFNI)
//! chosen once at run time by [`selected`].
//!
//! This crate must never do I/O, never allocate per byte, never depend on another
//! raidlab crate, and never use `unsafe` outside the SIMD engines.

pub mod bench;
pub mod gf;
mod scalar;
#[cfg(target_arch = "x86_64")]
mod x86;

use std::sync::OnceLock;

/// One implementation of the parity kernels.
///
/// Length rules are part of the contract: a call with buffers of different
/// lengths (or no sources) is a programming error and panics with a message,
/// before any memory is touched.
pub trait Engine: Send + Sync + std::fmt::Debug {
    /// Short name: "scalar", "avx2", "gfni-avx2", "avx512", "gfni-avx512".
    fn name(&self) -> &'static str;

    /// dst = XOR of all srcs. srcs non-empty, every slice the same length as dst.
    fn xor(&self, srcs: &[&[u8]], dst: &mut [u8]);

    /// p = XOR of data, q = sum g^i * `data[i]`. `data.len() >= 1`, all same length.
    fn gen_pq(&self, data: &[&[u8]], p: &mut [u8], q: &mut [u8]);

    /// dst ^= g^exp * src   (exp taken mod 255). Used for read-modify-write Q updates and recovery.
    fn mul_acc(&self, exp: usize, src: &[u8], dst: &mut [u8]);

    /// dst = c * src for an arbitrary GF(2^8) constant c (used by recovery).
    fn mul_const(&self, c: u8, src: &[u8], dst: &mut [u8]);

    /// Rebuild the two lost data slots `x` and `y` (`data[x]` and `data[y]` are
    /// `None`, every other slot is `Some`) from the survivors and the stored P and
    /// Q, into `dx` and `dy`. `x` and `y` must be distinct and `g^x != g^y`.
    ///
    /// Prefer [`recover`], which validates its input and returns errors. The
    /// provided implementation runs several passes of the other kernels and
    /// allocates one block of scratch; SIMD engines override it with a fused,
    /// single-pass kernel.
    #[allow(clippy::too_many_arguments)]
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
        check_recov(data, x, y, p, q, dx, dy);
        let (a, b) = recov_consts(x, y);
        // dx = P' = P ^ survivors.
        let mut srcs: Vec<&[u8]> = Vec::with_capacity(data.len() + 1);
        srcs.push(p);
        srcs.extend(data.iter().flatten().copied());
        self.xor(&srcs, dx);
        // dy = Q' = Q ^ sum over survivors of g^i D_i.
        self.mul_const(1, q, dy);
        for (i, d) in data.iter().enumerate() {
            if let Some(d) = d {
                self.mul_acc(i, d, dy);
            }
        }
        // D_x = a*P' ^ b*Q', D_y = P' ^ D_x.
        let mut t = vec![0u8; p.len()];
        self.mul_const(a, dx, &mut t);
        self.mul_acc(gf::LOG[b as usize] as usize, dy, &mut t);
        self.xor(&[dx, &t], dy);
        dx.copy_from_slice(&t);
    }
}

/// The scalar engine: always available, the reference every other engine is tested against.
pub fn reference() -> &'static dyn Engine {
    &scalar::SCALAR
}

/// Every engine this CPU can run, reference first, then SIMD engines from
/// slowest to fastest flavour.
///
/// CPU features are detected on the first call; the list is cached.
pub fn available() -> Vec<&'static dyn Engine> {
    static AVAILABLE: OnceLock<Vec<&'static dyn Engine>> = OnceLock::new();
    AVAILABLE
        .get_or_init(|| std::iter::once(reference()).chain(simd_engines()).collect())
        .clone()
}

/// The SIMD engines this CPU can run, slowest flavour first.
fn simd_engines() -> Vec<&'static dyn Engine> {
    #[cfg(target_arch = "x86_64")]
    {
        x86::engines()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        Vec::new()
    }
}

/// Engines compiled into this build that this CPU cannot run, each with the CPU
/// features it lacks (so tests and tools can report them instead of silently
/// skipping).
pub fn unavailable() -> Vec<(&'static str, Vec<&'static str>)> {
    #[cfg(target_arch = "x86_64")]
    {
        x86::unavailable()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        Vec::new()
    }
}

/// The fastest engine on this CPU, chosen on first use from the CPU features
/// (the preference order was measured with [`bench::run`], see
/// docs/benchmarks.md) and cached for the life of the process.
pub fn selected() -> &'static dyn Engine {
    static SELECTED: OnceLock<&'static dyn Engine> = OnceLock::new();
    *SELECTED.get_or_init(|| {
        *available()
            .last()
            .expect("the reference is always available")
    })
}

/// Read-modify-write delta: p ^= old ^ new; if q is Some, q ^= g^slot * (old ^ new).
///
/// Panics if the buffers differ in length (a caller bug, like the [`Engine`] kernels).
pub fn update(
    engine: &dyn Engine,
    slot: usize,
    old: &[u8],
    new: &[u8],
    p: Option<&mut [u8]>,
    q: Option<&mut [u8]>,
) {
    check_pair(old, new);
    if let Some(p) = p {
        engine.mul_acc(0, old, p);
        engine.mul_acc(0, new, p);
    }
    if let Some(q) = q {
        engine.mul_acc(slot, old, q);
        engine.mul_acc(slot, new, q);
    }
}

/// Why [`recover`] refused to rebuild.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecoverError {
    #[error("no data blocks given")]
    NoData,
    #[error("{0} lost blocks listed; parity can rebuild 1 or 2 data blocks")]
    LostCount(usize),
    #[error("lost slot {slot} is out of range (there are {disks} data slots)")]
    SlotOutOfRange { slot: usize, disks: usize },
    #[error("lost slot {0} is listed twice")]
    DuplicateSlot(usize),
    #[error("{what} is {got} bytes but the data blocks are {expected} bytes")]
    LengthMismatch {
        what: String,
        expected: usize,
        got: usize,
    },
    #[error("cannot rebuild 1 lost data block: neither P nor Q is available")]
    NoParity,
    #[error("cannot rebuild 2 lost data blocks without both P and Q (P {p}, Q {q})", p = avail(*.have_p), q = avail(*.have_q))]
    NeedBothParities { have_p: bool, have_q: bool },
    #[error("slots {x} and {y} have the same Q coefficient (g^x = g^y, they are 255 apart), so they cannot be told apart")]
    AliasedSlots { x: usize, y: usize },
}

fn avail(b: bool) -> &'static str {
    if b {
        "available"
    } else {
        "missing"
    }
}

/// Rebuild lost data blocks in place. `data[i]` is slot i; `lost` lists 1 or 2 distinct slots whose buffers hold garbage and are overwritten with the rebuilt contents. `p`/`q` are the stored parity (None if that parity is itself unavailable). Cases: 1 lost + p (XOR); 1 lost + only q; 2 lost + p + q. Anything else (e.g. 2 lost without both parities, lost index out of range, length mismatch) returns Err with a clear message, never panics.
pub fn recover(
    engine: &dyn Engine,
    data: &mut [&mut [u8]],
    lost: &[usize],
    p: Option<&[u8]>,
    q: Option<&[u8]>,
) -> Result<(), RecoverError> {
    // Split the slots into shared survivors and the mutable lost buffers.
    let mut survivors: Vec<Option<&[u8]>> = Vec::with_capacity(data.len());
    let mut bufs: Vec<&mut [u8]> = Vec::with_capacity(2);
    let mut order = [0usize; 2];
    for (i, d) in data.iter_mut().enumerate() {
        match lost.iter().position(|&l| l == i) {
            Some(k) if bufs.len() < 2 => {
                order[bufs.len()] = k;
                bufs.push(&mut **d);
                survivors.push(None);
            }
            _ => survivors.push(Some(&**d)),
        }
    }
    // `bufs` is in slot order; `recover_into` wants it in `lost` order.
    if bufs.len() == 2 && order[0] == 1 {
        bufs.swap(0, 1);
    }
    recover_into(engine, &survivors, lost, &mut bufs, p, q)
}

/// [`recover`] with the survivors and the lost slots' buffers apart: slot i
/// is `data[i]` (`None` for a lost slot), and the rebuilt contents of
/// `lost[k]` go to `out[k]`. The survivors are only read, so they may be
/// buffers the caller cannot lend mutably (a rebuild's member reads).
pub fn recover_into(
    engine: &dyn Engine,
    data: &[Option<&[u8]>],
    lost: &[usize],
    out: &mut [&mut [u8]],
    p: Option<&[u8]>,
    q: Option<&[u8]>,
) -> Result<(), RecoverError> {
    let n = data.len();
    if n == 0 {
        return Err(RecoverError::NoData);
    }
    if lost.is_empty() || lost.len() > 2 {
        return Err(RecoverError::LostCount(lost.len()));
    }
    for &slot in lost {
        if slot >= n {
            return Err(RecoverError::SlotOutOfRange { slot, disks: n });
        }
    }
    if lost.len() == 2 && lost[0] == lost[1] {
        return Err(RecoverError::DuplicateSlot(lost[0]));
    }
    if out.len() != lost.len() {
        return Err(RecoverError::LengthMismatch {
            what: "the lost slots' buffers (how many)".into(),
            expected: lost.len(),
            got: out.len(),
        });
    }
    let len = out[0].len();
    for (i, d) in data.iter().enumerate() {
        let got = match (d, lost.iter().position(|&l| l == i)) {
            (_, Some(k)) => out[k].len(),
            (Some(d), None) => d.len(),
            // A slot neither given nor lost: nothing to rebuild it from.
            (None, None) => 0,
        };
        if got != len {
            return Err(RecoverError::LengthMismatch {
                what: format!("data slot {i}"),
                expected: len,
                got,
            });
        }
    }
    for (what, buf) in [("P", p), ("Q", q)] {
        if let Some(b) = buf {
            if b.len() != len {
                return Err(RecoverError::LengthMismatch {
                    what: what.into(),
                    expected: len,
                    got: b.len(),
                });
            }
        }
    }
    if lost.len() == 2 {
        if p.is_none() || q.is_none() {
            return Err(RecoverError::NeedBothParities {
                have_p: p.is_some(),
                have_q: q.is_some(),
            });
        }
        if lost[0] % 255 == lost[1] % 255 {
            return Err(RecoverError::AliasedSlots {
                x: lost[0],
                y: lost[1],
            });
        }
    } else if p.is_none() && q.is_none() {
        return Err(RecoverError::NoParity);
    }

    // A lost slot's own buffer is never a survivor, whatever `data` holds there.
    let survivors: Vec<Option<&[u8]>> = data
        .iter()
        .enumerate()
        .map(|(i, d)| if lost.contains(&i) { None } else { *d })
        .collect();
    let (dx, rest) = out.split_first_mut().expect("one or two lost slots");
    match (rest.first_mut(), p, q) {
        (None, Some(p), _) => {
            let mut srcs: Vec<&[u8]> = Vec::with_capacity(n);
            srcs.push(p);
            srcs.extend(survivors.iter().flatten().copied());
            engine.xor(&srcs, dx);
        }
        (None, None, Some(q)) => {
            // D_x = g^-x (Q ^ sum g^i D_i) = g^-x Q ^ sum g^(i-x) D_i.
            let x = lost[0] % 255;
            engine.mul_const(gf::inv(gf::exp(x)), q, dx);
            for (i, d) in survivors.iter().enumerate() {
                if let Some(d) = d {
                    engine.mul_acc(i % 255 + 255 - x, d, dx);
                }
            }
        }
        (Some(dy), Some(p), Some(q)) => {
            engine.recov_2data(&survivors, lost[0], lost[1], p, q, dx, dy);
        }
        _ => unreachable!("parity availability was checked above"),
    }
    Ok(())
}

/// The constants of two-data recovery for lost slots x and y:
/// `D_x = a*P' ^ b*Q'` with `a = g^y / (g^x ^ g^y)` and `b = 1 / (g^x ^ g^y)`,
/// where P' and Q' are the stored parity xored with the survivors' parity.
pub(crate) fn recov_consts(x: usize, y: usize) -> (u8, u8) {
    let (gx, gy) = (gf::exp(x), gf::exp(y));
    let b = gf::inv(gx ^ gy);
    (gf::mul(gy, b), b)
}

pub(crate) fn check_pair(src: &[u8], dst: &[u8]) {
    assert_eq!(
        src.len(),
        dst.len(),
        "raidlab-parity: source is {} bytes but destination is {}",
        src.len(),
        dst.len()
    );
}

pub(crate) fn check_xor(srcs: &[&[u8]], dst: &[u8]) {
    assert!(
        !srcs.is_empty(),
        "raidlab-parity: xor needs at least one source"
    );
    for (i, s) in srcs.iter().enumerate() {
        assert_eq!(
            s.len(),
            dst.len(),
            "raidlab-parity: xor source {i} is {} bytes but destination is {}",
            s.len(),
            dst.len()
        );
    }
}

pub(crate) fn check_pq(data: &[&[u8]], p: &[u8], q: &[u8]) {
    assert!(
        !data.is_empty(),
        "raidlab-parity: gen_pq needs at least one data block"
    );
    check_pair(p, q);
    for (i, d) in data.iter().enumerate() {
        assert_eq!(
            d.len(),
            p.len(),
            "raidlab-parity: data slot {i} is {} bytes but parity is {}",
            d.len(),
            p.len()
        );
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn check_recov(
    data: &[Option<&[u8]>],
    x: usize,
    y: usize,
    p: &[u8],
    q: &[u8],
    dx: &[u8],
    dy: &[u8],
) {
    assert!(
        x < data.len() && y < data.len() && x % 255 != y % 255,
        "raidlab-parity: bad lost slots {x}, {y} for {} data slots",
        data.len()
    );
    check_pair(p, q);
    check_pair(p, dx);
    check_pair(p, dy);
    for (i, d) in data.iter().enumerate() {
        if let Some(d) = d {
            assert_eq!(
                d.len(),
                p.len(),
                "raidlab-parity: data slot {i} is {} bytes but parity is {}",
                d.len(),
                p.len()
            );
        }
    }
}
