//! Differential tests: every available engine against the scalar reference on
//! seeded pseudo-random data, over many lengths (vector tails included) and disk
//! counts; recovery of every 1- and 2-lost case; refusals of impossible cases;
//! and known answers that anchor the reference itself.

use raidlab_parity::{available, gf, recover, reference, selected, unavailable, update, Engine};
use raidlab_parity::{bench, RecoverError};

/// SplitMix64: a tiny seeded generator, so failures reproduce exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
    fn blocks(&mut self, n: usize, len: usize) -> Vec<Vec<u8>> {
        (0..n).map(|_| self.bytes(len)).collect()
    }
}

const LENGTHS: &[usize] = &[
    0, 1, 2, 15, 16, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 300, 1000, 4096, 4113,
];

fn refs(v: &[Vec<u8>]) -> Vec<&[u8]> {
    v.iter().map(Vec::as_slice).collect()
}

fn simd_engines() -> Vec<&'static dyn Engine> {
    available().into_iter().skip(1).collect()
}

#[test]
fn reference_is_first_and_engines_are_reported() {
    let all = available();
    assert_eq!(all[0].name(), "scalar");
    assert_eq!(reference().name(), "scalar");
    let names: Vec<_> = all.iter().map(|e| e.name()).collect();
    eprintln!(
        "engines available on this CPU: {names:?}; selected: {}",
        selected().name()
    );
    for (name, missing) in unavailable() {
        eprintln!("SKIPPED: engine {name}: CPU lacks {}", missing.join(", "));
        assert!(!names.contains(&name));
        assert!(!missing.is_empty());
    }
    #[cfg(not(target_arch = "x86_64"))]
    eprintln!("SKIPPED: SIMD engines: this build is not x86-64, only the scalar engine is tested");
    assert!(names.contains(&selected().name()));
    // Compiled-in engines are either runnable or reported, never silently absent.
    #[cfg(target_arch = "x86_64")]
    for want in ["avx2", "gfni-avx2", "avx512", "gfni-avx512"] {
        let reported = unavailable().iter().any(|(n, _)| *n == want);
        assert!(
            names.contains(&want) || reported,
            "{want} neither available nor reported"
        );
    }
}

#[test]
fn known_answer_q() {
    // Three data slots of one byte: D0 = 0x01, D1 = 0x80, D2 = 0x03.
    // Q = D0 + 2*D1 + 4*D2 = 0x01 ^ 0x1d ^ 0x0c = 0x10; P = 0x01^0x80^0x03 = 0x82.
    // Horner as md: q = D2 = 0x03; q = 2*q ^ D1 = 0x06 ^ 0x80 = 0x86;
    // q = 2*0x86 ^ D0 = (0x10c ^ 0x11d) ^ 0x01 = 0x11 ^ 0x01 = 0x10.
    let d: [&[u8]; 3] = [&[0x01], &[0x80], &[0x03]];
    for e in available() {
        let (mut p, mut q) = ([0u8], [0u8]);
        e.gen_pq(&d, &mut p, &mut q);
        assert_eq!((p[0], q[0]), (0x82, 0x10), "{}", e.name());
    }
    assert_eq!(gf::mul(2, 0x80), 0x1d);
    assert_eq!(gf::mul(4, 0x03), 0x0c);
}

#[test]
fn reference_q_is_the_sum_definition() {
    // Q by Horner (the engines) equals Q by the definition sum g^i D_i.
    let mut rng = Rng(7);
    for n in 1..=40 {
        let data = rng.blocks(n, 97);
        let (mut p, mut q) = (vec![0; 97], vec![0; 97]);
        reference().gen_pq(&refs(&data), &mut p, &mut q);
        for j in 0..97 {
            let mut want = 0;
            for (i, d) in data.iter().enumerate() {
                want ^= gf::mul(gf::exp(i), d[j]);
            }
            assert_eq!(q[j], want);
        }
    }
}

#[test]
fn xor_matches_reference() {
    let mut rng = Rng(1);
    for n in 1..=20 {
        for &len in LENGTHS {
            let data = rng.blocks(n, len);
            let mut want = vec![0; len];
            reference().xor(&refs(&data), &mut want);
            for e in simd_engines() {
                let mut got = rng.bytes(len);
                e.xor(&refs(&data), &mut got);
                assert_eq!(got, want, "{} n={n} len={len}", e.name());
            }
        }
    }
}

#[test]
fn gen_pq_matches_reference() {
    let mut rng = Rng(2);
    for n in 1..=30 {
        for &len in LENGTHS {
            let data = rng.blocks(n, len);
            let (mut wp, mut wq) = (vec![0; len], vec![0; len]);
            reference().gen_pq(&refs(&data), &mut wp, &mut wq);
            let mut xp = vec![0; len];
            reference().xor(&refs(&data), &mut xp);
            assert_eq!(wp, xp, "reference P is the XOR");
            for e in simd_engines() {
                let (mut p, mut q) = (rng.bytes(len), rng.bytes(len));
                e.gen_pq(&refs(&data), &mut p, &mut q);
                assert_eq!(p, wp, "{} P n={n} len={len}", e.name());
                assert_eq!(q, wq, "{} Q n={n} len={len}", e.name());
            }
        }
    }
}

#[test]
fn mul_acc_and_mul_const_match_reference() {
    let mut rng = Rng(3);
    let exps = [0usize, 1, 2, 7, 100, 254, 255, 256, 600];
    for &len in LENGTHS {
        let src = rng.bytes(len);
        let dst0 = rng.bytes(len);
        for &x in &exps {
            let mut want = dst0.clone();
            reference().mul_acc(x, &src, &mut want);
            for (j, w) in want.iter().enumerate() {
                assert_eq!(*w, dst0[j] ^ gf::mul(gf::exp(x), src[j]));
            }
            for e in simd_engines() {
                let mut got = dst0.clone();
                e.mul_acc(x, &src, &mut got);
                assert_eq!(got, want, "{} mul_acc exp={x} len={len}", e.name());
            }
        }
        for c in 0..=255u8 {
            if len > 300 && c % 17 != 3 {
                continue; // every constant on short lengths, a sample on long ones
            }
            let mut want = vec![0; len];
            reference().mul_const(c, &src, &mut want);
            for e in simd_engines() {
                let mut got = rng.bytes(len);
                e.mul_const(c, &src, &mut got);
                assert_eq!(got, want, "{} mul_const c={c:#x} len={len}", e.name());
            }
        }
    }
}

#[test]
fn update_matches_recomputed_parity() {
    let mut rng = Rng(4);
    for n in [1usize, 2, 3, 5, 8, 17, 30] {
        for &len in &[1usize, 63, 64, 65, 4096, 4113] {
            let mut data = rng.blocks(n, len);
            let (mut p, mut q) = (vec![0; len], vec![0; len]);
            reference().gen_pq(&refs(&data), &mut p, &mut q);
            for e in available() {
                let slot = (rng.next() as usize) % n;
                let new = rng.bytes(len);
                let (mut p2, mut q2) = (p.clone(), q.clone());
                update(e, slot, &data[slot], &new, Some(&mut p2), Some(&mut q2));
                let mut p3 = p.clone();
                update(e, slot, &data[slot], &new, Some(&mut p3), None);
                let mut q3 = q.clone();
                update(e, slot, &data[slot], &new, None, Some(&mut q3));
                data[slot] = new;
                reference().gen_pq(&refs(&data), &mut p, &mut q);
                assert_eq!(p2, p, "{} P n={n} len={len} slot={slot}", e.name());
                assert_eq!(q2, q, "{} Q n={n} len={len} slot={slot}", e.name());
                assert_eq!(p3, p, "{} P-only n={n} len={len}", e.name());
                assert_eq!(q3, q, "{} Q-only n={n} len={len}", e.name());
            }
        }
    }
}

/// Rebuild `lost` with `engine` from the given parities and compare with the originals.
fn check_recover(
    e: &dyn Engine,
    data: &[Vec<u8>],
    lost: &[usize],
    p: Option<&[u8]>,
    q: Option<&[u8]>,
    rng: &mut Rng,
) {
    let mut work = data.to_vec();
    for &l in lost {
        work[l] = rng.bytes(data[l].len());
    }
    let mut bufs: Vec<&mut [u8]> = work.iter_mut().map(Vec::as_mut_slice).collect();
    recover(e, &mut bufs, lost, p, q).unwrap_or_else(|err| panic!("{}: {err}", e.name()));
    assert_eq!(
        work,
        data,
        "{} lost={lost:?} n={} len={} P={} Q={}",
        e.name(),
        data.len(),
        data[0].len(),
        p.is_some(),
        q.is_some()
    );
}

#[test]
fn recover_every_one_and_two_lost_case() {
    let mut rng = Rng(5);
    for n in 1..=30usize {
        let lens: &[usize] = if n <= 8 { LENGTHS } else { &[1, 64, 65, 4113] };
        for &len in lens {
            let data = rng.blocks(n, len);
            let (mut p, mut q) = (vec![0; len], vec![0; len]);
            reference().gen_pq(&refs(&data), &mut p, &mut q);
            let mut pairs = Vec::new();
            for x in 0..n {
                for y in 0..n {
                    if x != y && (n <= 8 || rng.next().is_multiple_of(40) || x == 0 || y == n - 1) {
                        pairs.push((x, y));
                    }
                }
            }
            for e in available() {
                for x in 0..n {
                    check_recover(e, &data, &[x], Some(&p), None, &mut rng);
                    check_recover(e, &data, &[x], None, Some(&q), &mut rng);
                    check_recover(e, &data, &[x], Some(&p), Some(&q), &mut rng);
                }
                for &(x, y) in &pairs {
                    check_recover(e, &data, &[x, y], Some(&p), Some(&q), &mut rng);
                }
            }
        }
    }
}

#[test]
fn recover_far_slots_beyond_255() {
    // Slots up to 299: coefficients wrap mod 255; x and x+255 alias and must be refused.
    let mut rng = Rng(6);
    let n = 300;
    let data = rng.blocks(n, 130);
    let (mut p, mut q) = (vec![0; 130], vec![0; 130]);
    reference().gen_pq(&refs(&data), &mut p, &mut q);
    for e in available() {
        check_recover(e, &data, &[3, 290], Some(&p), Some(&q), &mut rng);
        check_recover(e, &data, &[299], None, Some(&q), &mut rng);
        let mut work = data.clone();
        let mut bufs: Vec<&mut [u8]> = work.iter_mut().map(Vec::as_mut_slice).collect();
        assert_eq!(
            recover(e, &mut bufs, &[4, 259], Some(&p), Some(&q)),
            Err(RecoverError::AliasedSlots { x: 4, y: 259 })
        );
    }
}

#[test]
fn recover_refuses_impossible_cases() {
    let e = selected();
    let mut rng = Rng(8);
    let data = rng.blocks(4, 64);
    let (mut p, mut q) = (vec![0; 64], vec![0; 64]);
    reference().gen_pq(&refs(&data), &mut p, &mut q);
    let short = vec![0u8; 63];
    let run = |lost: &[usize], p: Option<&[u8]>, q: Option<&[u8]>, d: &[Vec<u8>]| {
        let mut work = d.to_vec();
        let mut bufs: Vec<&mut [u8]> = work.iter_mut().map(Vec::as_mut_slice).collect();
        recover(e, &mut bufs, lost, p, q)
    };
    let (p, q) = (Some(p.as_slice()), Some(q.as_slice()));
    let cases: Vec<(Result<(), RecoverError>, &str)> = vec![
        (run(&[0, 1], p, None, &data), "without both P and Q"),
        (run(&[0, 1], None, q, &data), "without both P and Q"),
        (run(&[0, 1], None, None, &data), "without both P and Q"),
        (run(&[2], None, None, &data), "neither P nor Q"),
        (run(&[4], p, q, &data), "out of range"),
        (run(&[1, 1], p, q, &data), "listed twice"),
        (run(&[], p, q, &data), "1 or 2"),
        (run(&[0, 1, 2], p, q, &data), "1 or 2"),
        (run(&[0], Some(&short), q, &data), "P is 63 bytes"),
        (run(&[0], p, Some(&short), &data), "Q is 63 bytes"),
        (run(&[0], p, q, &[]), "no data"),
    ];
    for (res, want) in cases {
        let err = res.expect_err(want);
        assert!(
            err.to_string().contains(want),
            "{err} should mention {want:?}"
        );
    }
    let mut ragged = data.clone();
    ragged[2].pop();
    let err = run(&[0], p, q, &ragged).unwrap_err();
    assert!(err.to_string().contains("data slot 2"), "{err}");
}

#[test]
fn default_two_data_recovery_matches_fused_kernels() {
    // The trait's provided multi-pass recov_2data, driven through each engine's kernels.
    #[derive(Debug)]
    struct Passes(&'static dyn Engine);
    impl Engine for Passes {
        fn name(&self) -> &'static str {
            "passes"
        }
        fn xor(&self, s: &[&[u8]], d: &mut [u8]) {
            self.0.xor(s, d)
        }
        fn gen_pq(&self, d: &[&[u8]], p: &mut [u8], q: &mut [u8]) {
            self.0.gen_pq(d, p, q)
        }
        fn mul_acc(&self, x: usize, s: &[u8], d: &mut [u8]) {
            self.0.mul_acc(x, s, d)
        }
        fn mul_const(&self, c: u8, s: &[u8], d: &mut [u8]) {
            self.0.mul_const(c, s, d)
        }
    }
    let mut rng = Rng(9);
    for e in available() {
        let passes = Passes(e);
        for n in [2usize, 3, 6, 11] {
            let data = rng.blocks(n, 1000);
            let (mut p, mut q) = (vec![0; 1000], vec![0; 1000]);
            reference().gen_pq(&refs(&data), &mut p, &mut q);
            for (x, y) in [(0, 1), (1, 0), (0, n - 1), (n - 1, n / 2)] {
                if x != y {
                    check_recover(&passes, &data, &[x, y], Some(&p), Some(&q), &mut rng);
                }
            }
        }
    }
}

#[test]
#[should_panic(expected = "xor source 1 is 3 bytes")]
fn kernels_panic_on_length_mismatch() {
    let mut dst = [0u8; 4];
    selected().xor(&[&[1, 2, 3, 4], &[1, 2, 3]], &mut dst);
}

#[test]
fn bench_runs_every_engine() {
    let res = bench::run(3, 4096 + 17, std::time::Duration::from_millis(3));
    assert_eq!(res.len(), available().len() * 3);
    assert_eq!(res.iter().filter(|r| r.selected).count(), 3);
    assert!(res.iter().all(|r| r.gbps > 0.0));
}

/// A buffer of `len` random bytes starting at a 64-byte boundary, as a
/// sub-slice of a larger Vec (returned for ownership).
fn aligned(rng: &mut Rng, len: usize) -> (Vec<u8>, usize) {
    let v = rng.bytes(len + 64);
    let off = v.as_ptr().align_offset(64);
    (v, off)
}

#[test]
fn streaming_store_paths_match_reference() {
    // Working sets larger than the core's L2 cache (8 MiB here; L2s are 2-4 MiB)
    // with aligned destinations take the non-temporal store path of the SIMD
    // engines; include a tail.
    let mut rng = Rng(10);
    let (n, len) = (30usize, 262_144 + 17);
    let mut bufs: Vec<(Vec<u8>, usize)> = (0..n + 2).map(|_| aligned(&mut rng, len)).collect();
    let data: Vec<Vec<u8>> = bufs[..n]
        .iter()
        .map(|(v, o)| v[*o..*o + len].to_vec())
        .collect();
    let (mut wp, mut wq) = (vec![0; len], vec![0; len]);
    reference().gen_pq(&refs(&data), &mut wp, &mut wq);
    for e in simd_engines() {
        let (dbufs, pq) = bufs.split_at_mut(n);
        let (pb, qb) = pq.split_at_mut(1);
        let (p, q) = (
            &mut pb[0].0[pb[0].1..pb[0].1 + len],
            &mut qb[0].0[qb[0].1..qb[0].1 + len],
        );
        assert_eq!(p.as_ptr() as usize % 64, 0);
        e.xor(&refs(&data), p);
        assert_eq!(&p[..], &wp[..], "{} streaming xor", e.name());
        e.gen_pq(&refs(&data), p, q);
        assert_eq!(&p[..], &wp[..], "{} streaming P", e.name());
        assert_eq!(&q[..], &wq[..], "{} streaming Q", e.name());
        let (p, q) = (&*p, &*q);
        // Aligned data buffers, garbage in the two lost ones.
        let mut slots: Vec<&mut [u8]> = dbufs
            .iter_mut()
            .zip(&data)
            .map(|((v, o), d)| {
                let s = &mut v[*o..*o + len];
                s.copy_from_slice(d);
                s
            })
            .collect();
        slots[2].fill(0xa5);
        slots[6].fill(0x5a);
        recover(e, &mut slots, &[6, 2], Some(p), Some(q)).unwrap();
        assert!(
            slots.iter().zip(&data).all(|(s, d)| s[..] == d[..]),
            "{} streaming recover2",
            e.name()
        );
    }
}
