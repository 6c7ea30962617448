//! Whole-engine behaviour: seeded random read/write workloads against an in-memory
//! model, for every level and layout, complete and degraded; parity on the members
//! checked against the reference parity engine; and the plan shapes the classic
//! results predict.

use raidlab_core::{ErrorKind, Volume};
use raidlab_devices::MemVolume;
use raidlab_layout::{Geometry, Layout, Level, ParityLayout, Raid10Layout};
use raidlab_raid::planner::{plan_read, plan_write};
use raidlab_raid::Array;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

const PARITY_LAYOUTS: [ParityLayout; 6] = [
    ParityLayout::LeftAsymmetric,
    ParityLayout::RightAsymmetric,
    ParityLayout::LeftSymmetric,
    ParityLayout::RightSymmetric,
    ParityLayout::ParityFirst,
    ParityLayout::ParityLast,
];

fn configs() -> Vec<Geometry> {
    let chunk = 4096u64;
    let member = 24 * chunk;
    let mut out = vec![
        Geometry::new(Level::Raid0, Layout::Plain, chunk, 3, member).unwrap(),
        Geometry::new(Level::Raid1, Layout::Plain, 0, 3, member).unwrap(),
        Geometry::new(
            Level::Raid4,
            Layout::Parity(ParityLayout::ParityLast),
            chunk,
            4,
            member,
        )
        .unwrap(),
    ];
    for l in PARITY_LAYOUTS {
        out.push(Geometry::new(Level::Raid5, Layout::Parity(l), chunk, 4, member).unwrap());
        out.push(Geometry::new(Level::Raid6, Layout::Parity(l), chunk, 5, member).unwrap());
    }
    out.push(
        Geometry::new(
            Level::Raid6,
            Layout::Parity(ParityLayout::LeftSymmetric),
            8192,
            6,
            12 * 8192,
        )
        .unwrap(),
    );
    for (name, n) in [
        ("n2", 4),
        ("n2", 3),
        ("f2", 4),
        ("o2", 4),
        ("n3", 4),
        ("f3", 5),
        ("o3", 3),
    ] {
        let l = Raid10Layout::from_name(name).unwrap();
        out.push(Geometry::new(Level::Raid10, Layout::Raid10(l), chunk, n, member).unwrap());
    }
    out
}

fn label(g: &Geometry) -> String {
    format!(
        "{} {} x{} chunk {}",
        g.level.name(),
        g.layout.name(),
        g.raid_disks,
        g.chunk_bytes
    )
}

fn array_over(g: &Geometry, mems: &[Arc<MemVolume>], missing: &[usize]) -> Array {
    let vols = mems
        .iter()
        .enumerate()
        .map(|(i, m)| (!missing.contains(&i)).then(|| m.clone() as Arc<dyn Volume>))
        .collect();
    Array::new("test", *g, vols).unwrap()
}

/// Random request: sometimes sector-aligned, sometimes any byte; sometimes spanning
/// several stripes.
fn random_request(rng: &mut ChaCha8Rng, size: u64, chunk: u64) -> (u64, usize) {
    let max = (chunk.max(4096) * 6).min(size);
    let len = match rng.gen_range(0..4) {
        0 => rng.gen_range(1..=512),
        1 => 4096,
        _ => rng.gen_range(1..=max),
    };
    let mut off = rng.gen_range(0..=size - len);
    if rng.gen_bool(0.5) {
        off -= off % 512;
    }
    (off, len as usize)
}

/// Every stripe's parity on the members equals P/Q computed by the reference engine.
fn assert_parity_consistent(g: &Geometry, mems: &[Arc<MemVolume>]) {
    if !g.is_parity() {
        // Mirrors: every copy of every chunk identical.
        let mut pos = 0;
        while pos < g.array_bytes() {
            let (locs, run) = g.mirror_map(pos);
            let n = run.min(g.array_bytes() - pos) as usize;
            let first = read(&mems[locs[0].member], locs[0].offset, n);
            for l in &locs[1..] {
                assert_eq!(
                    read(&mems[l.member], l.offset, n),
                    first,
                    "{}: copies differ at {pos}",
                    label(g)
                );
            }
            pos += n as u64;
        }
        return;
    }
    let c = g.chunk_bytes as usize;
    let engine = raidlab_parity::reference();
    for s in 0..g.member_bytes / g.chunk_bytes {
        let map = g.stripe(s);
        let off = s * g.chunk_bytes;
        let mut by_slot = vec![Vec::new(); map.data.len()];
        for (i, &m) in map.data.iter().enumerate() {
            by_slot[map.slot[i]] = read(&mems[m], off, c);
        }
        let refs: Vec<&[u8]> = by_slot.iter().map(|v| v.as_slice()).collect();
        let mut p = vec![0u8; c];
        let mut q = vec![0u8; c];
        engine.gen_pq(&refs, &mut p, &mut q);
        assert_eq!(
            read(&mems[map.p], off, c),
            p,
            "{}: P wrong in stripe {s}",
            label(g)
        );
        if let Some(qm) = map.q {
            assert_eq!(
                read(&mems[qm], off, c),
                q,
                "{}: Q wrong in stripe {s}",
                label(g)
            );
        }
    }
}

fn read(v: &MemVolume, off: u64, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    v.read_at(&mut b, off).unwrap();
    b
}

/// All sets of missing roles the level survives, up to its tolerance.
fn survivable_sets(g: &Geometry) -> Vec<Vec<usize>> {
    let n = g.raid_disks;
    let mut sets = Vec::new();
    for a in 0..n {
        sets.push(vec![a]);
        for b in a + 1..n {
            sets.push(vec![a, b]);
        }
    }
    if g.level == Level::Raid1 {
        sets.push((1..n).collect());
    }
    sets.retain(|s| g.survives(s));
    sets
}

/// Seeds per configuration: 1 by default, more with RAIDLAB_SOAK=N (a longer run).
fn rounds() -> u64 {
    std::env::var("RAIDLAB_SOAK")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1)
}

#[test]
fn random_workloads_match_the_model_complete_and_degraded() {
    for round in 0..rounds() {
        for (ci, g) in configs().into_iter().enumerate() {
            workload(&g, 0x5eed + ci as u64 + 1000 * round);
        }
    }
}

fn workload(g: &Geometry, seed: u64) {
    let g = *g;
    {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mems: Vec<Arc<MemVolume>> = (0..g.raid_disks)
            .map(|_| Arc::new(MemVolume::new(g.member_bytes)))
            .collect();
        let size = g.array_bytes();
        let mut model = vec![0u8; size as usize];
        let array = array_over(&g, &mems, &[]);
        assert_eq!(array.size(), size);
        for _ in 0..150 {
            let (off, len) = random_request(&mut rng, size, g.chunk_bytes);
            if rng.gen_bool(0.6) {
                let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                array.write_at(&data, off).unwrap();
                model[off as usize..off as usize + len].copy_from_slice(&data);
            } else {
                let mut b = vec![0u8; len];
                array.read_at(&mut b, off).unwrap();
                assert!(
                    b == model[off as usize..off as usize + len],
                    "{}: read {off}+{len} differs",
                    label(&g)
                );
            }
        }
        assert_parity_consistent(&g, &mems);

        for missing in survivable_sets(&g) {
            // Reads with members gone rebuild the data exactly.
            let degraded = array_over(&g, &mems, &missing);
            let mut all = vec![0u8; size as usize];
            degraded.read_at(&mut all, 0).unwrap();
            assert!(
                all == model,
                "{}: degraded read with {missing:?} missing differs",
                label(&g)
            );
        }
        // Writes while degraded, then read back degraded, on copies of the members.
        for missing in survivable_sets(&g).into_iter().take(6) {
            let copies: Vec<Arc<MemVolume>> = mems
                .iter()
                .map(|m| {
                    let c = MemVolume::new(m.size());
                    c.write_at(&m.snapshot(), 0).unwrap();
                    Arc::new(c)
                })
                .collect();
            let mut model2 = model.clone();
            let degraded = array_over(&g, &copies, &missing);
            for _ in 0..40 {
                let (off, len) = random_request(&mut rng, size, g.chunk_bytes);
                let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                degraded.write_at(&data, off).unwrap();
                model2[off as usize..off as usize + len].copy_from_slice(&data);
            }
            let mut all = vec![0u8; size as usize];
            degraded.read_at(&mut all, 0).unwrap();
            assert!(
                all == model2,
                "{}: degraded writes with {missing:?} missing read back wrong",
                label(&g)
            );
        }
    }
}

#[test]
fn too_many_missing_is_refused_and_writes_nothing() {
    let g = Geometry::new(
        Level::Raid5,
        Layout::Parity(ParityLayout::LeftSymmetric),
        4096,
        4,
        16 * 4096,
    )
    .unwrap();
    let vols: Vec<Option<Arc<dyn Volume>>> = vec![
        None,
        None,
        Some(Arc::new(MemVolume::new(g.member_bytes))),
        Some(Arc::new(MemVolume::new(g.member_bytes))),
    ];
    let e = Array::new("t", g, vols).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unrecoverable);
    assert!(e.to_string().contains("too many members missing"), "{e}");

    let g0 = Geometry::new(Level::Raid0, Layout::Plain, 4096, 2, 16 * 4096).unwrap();
    let e = plan_read(&g0, &[true, false], 0, 8192, 0).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unrecoverable);
    assert!(e.to_string().contains("RAID 0 has no redundancy"), "{e}");
}

#[test]
fn requests_past_the_end_are_refused() {
    for g in configs() {
        let mems: Vec<Arc<MemVolume>> = (0..g.raid_disks)
            .map(|_| Arc::new(MemVolume::new(g.member_bytes)))
            .collect();
        let a = array_over(&g, &mems, &[]);
        let size = a.size();
        assert_eq!(
            a.write_at(&[1, 2], size - 1).unwrap_err().kind,
            ErrorKind::OutOfRange
        );
        assert_eq!(
            a.read_at(&mut [0; 1], size).unwrap_err().kind,
            ErrorKind::OutOfRange
        );
        assert_eq!(
            a.read_at(&mut [0; 1], u64::MAX).unwrap_err().kind,
            ErrorKind::OutOfRange
        );
        assert!(
            mems.iter().all(|m| m.snapshot().iter().all(|&b| b == 0)),
            "nothing written"
        );
    }
}

fn parity_geo(level: Level, n: usize) -> Geometry {
    let layout = if level == Level::Raid4 {
        ParityLayout::ParityLast
    } else {
        ParityLayout::LeftSymmetric
    };
    Geometry::new(level, Layout::Parity(layout), 64 << 10, n, 1 << 30).unwrap()
}

/// (reads in first phase, writes in last phase, number of phases)
fn shape(p: &raidlab_raid::Plan) -> (usize, usize, usize) {
    let e = p.explain();
    let reads = e.phases.first().map_or(0, |ph| {
        ph.ops
            .iter()
            .filter(|o| o.kind == raidlab_core::IoKind::Read)
            .count()
    });
    let writes = e.phases.last().map_or(0, |ph| {
        ph.ops
            .iter()
            .filter(|o| o.kind == raidlab_core::IoKind::Write)
            .count()
    });
    (reads, writes, e.phases.len())
}

#[test]
fn small_writes_choose_the_method_that_reads_less() {
    let all = |n| vec![true; n];
    // 5-member RAID 5: read-modify-write, 2 reads (old data, old P) then 2 writes.
    let p = plan_write(&parity_geo(Level::Raid5, 5), &all(5), 0, 4096).unwrap();
    assert_eq!(shape(&p), (2, 2, 2));
    // 6-member RAID 6: 3 reads either way; 3 writes.
    let p = plan_write(&parity_geo(Level::Raid6, 6), &all(6), 0, 4096).unwrap();
    assert_eq!(shape(&p), (3, 3, 2));
    // 5-member RAID 6: reconstruct-write reads the 2 other data chunks, not D+P+Q.
    let p = plan_write(&parity_geo(Level::Raid6, 5), &all(5), 0, 4096).unwrap();
    assert_eq!(shape(&p), (2, 3, 2));
    // 3-member RAID 5: reconstruct-write reads 1 (the other data) rather than 2.
    let p = plan_write(&parity_geo(Level::Raid5, 3), &all(3), 0, 4096).unwrap();
    assert_eq!(shape(&p), (1, 2, 2));
}

#[test]
fn full_stripe_writes_read_nothing() {
    for (level, n) in [(Level::Raid5, 5), (Level::Raid6, 6), (Level::Raid4, 4)] {
        let g = parity_geo(level, n);
        let stripe = g.chunk_bytes * g.data_disks() as u64;
        let p = plan_write(&g, &vec![true; n], 3 * stripe, 2 * stripe).unwrap();
        let (r, w) = p.op_counts();
        assert_eq!(r, 0, "{level:?}");
        assert_eq!(w, 2 * n, "{level:?}: one write per member per stripe");
        assert_eq!(p.locks, vec![3, 4]);
    }
}

#[test]
fn reading_a_missing_chunk_reads_the_rest_of_its_stripe() {
    let g = parity_geo(Level::Raid5, 5);
    let map = g.stripe(0);
    let mut present = vec![true; 5];
    present[map.data[0]] = false;
    let p = plan_read(&g, &present, 0, 4096, 0).unwrap();
    let e = p.explain();
    assert_eq!(e.phases.len(), 1);
    let mut members: Vec<usize> = e.phases[0].ops.iter().map(|o| o.member).collect();
    members.sort_unstable();
    let mut expect: Vec<usize> = (0..5).filter(|&m| m != map.data[0]).collect();
    expect.sort_unstable();
    assert_eq!(members, expect, "3 other data chunks and P");
    assert!(e.phases[0].then.iter().any(|t| t.contains("rebuild")));
    // A read of a present chunk is a single read.
    let p = plan_read(&g, &present, 64 << 10, 4096, 0).unwrap();
    assert_eq!(p.op_counts(), (1, 0));
}

#[test]
fn raid1_reads_spread_over_mirrors_and_writes_go_everywhere() {
    let g = Geometry::new(Level::Raid1, Layout::Plain, 0, 3, 1 << 20).unwrap();
    let mut used = std::collections::HashSet::new();
    for hint in 0..6 {
        let p = plan_read(&g, &[true; 3], 0, 4096, hint).unwrap();
        assert_eq!(p.op_counts(), (1, 0));
        let e = p.explain();
        used.insert(e.phases[0].ops[0].member);
    }
    assert_eq!(used.len(), 3, "concurrent readers use every mirror");
    let p = plan_write(&g, &[true, false, true], 0, 4096).unwrap();
    assert_eq!(p.op_counts(), (0, 2));
}

#[test]
fn concurrent_writers_to_one_stripe_keep_parity_consistent() {
    let g = Geometry::new(
        Level::Raid6,
        Layout::Parity(ParityLayout::LeftSymmetric),
        4096,
        5,
        8 * 4096,
    )
    .unwrap();
    let mems: Vec<Arc<MemVolume>> = (0..5)
        .map(|_| Arc::new(MemVolume::new(g.member_bytes)))
        .collect();
    let array = Arc::new(array_over(&g, &mems, &[]));
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let array = array.clone();
            std::thread::spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(t as u64);
                for _ in 0..300 {
                    // All threads hammer the first two stripes with small writes.
                    let off = rng.gen_range(0..(6 * 4096 - 512) / 512) * 512;
                    array.write_at(&[t; 512], off).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_parity_consistent(&g, &mems);
}

/// With a partial parity log writes are whole sectors, so a write of part of a
/// sector is read, merged and written back. Two threads writing different
/// bytes of the same sectors at once must both land: neither write-back may
/// undo the other.
#[test]
fn concurrent_partial_sector_writes_with_a_log_both_land() {
    use raidlab_devices::MemVolume;
    use raidlab_layout::{Layout, Level, ParityLayout};
    use raidlab_raid::assemble::{create, CreateSpec, Device, NewMember};
    let members = (0..4)
        .map(|i| NewMember {
            device: Device {
                path: format!("m{i}"),
                volume: std::sync::Arc::new(MemVolume::new((2 << 20) + (256 << 10))),
            },
            zeroed: true,
        })
        .collect();
    let spec = CreateSpec {
        level: Level::Raid5,
        layout: Layout::Parity(ParityLayout::LeftSymmetric),
        chunk_bytes: 16 << 10,
        spares: 0,
        name: "merge".into(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: true,
    };
    let mut asm = create(&spec, members).unwrap();
    asm.start_ppl().unwrap();
    let array = asm.array().unwrap();
    assert!(array.has_ppl());
    // Thread t writes bytes [t*100, t*100+100) of each of 64 sectors, over and
    // over with a changing value.
    std::thread::scope(|s| {
        for t in 0..2u8 {
            let array = &array;
            s.spawn(move || {
                for round in 0..200u32 {
                    for sector in 0..64u64 {
                        let v = [t.wrapping_mul(100).wrapping_add(round as u8); 100];
                        array
                            .write_at(&v, sector * 512 + u64::from(t) * 100)
                            .unwrap();
                    }
                }
            });
        }
    });
    let mut got = vec![0u8; 64 * 512];
    array.read_at(&mut got, 0).unwrap();
    for sector in 0..64usize {
        for t in 0..2usize {
            let want = (t as u8).wrapping_mul(100).wrapping_add(199);
            let at = sector * 512 + t * 100;
            assert!(
                got[at..at + 100].iter().all(|&b| b == want),
                "sector {sector}: thread {t}'s last write was undone by the other's write-back"
            );
        }
    }
}

/// `read_stored` hands out exactly the bytes `read_at` returns, in order, for
/// every level and layout over file members (behind a data offset, as assembled
/// arrays have them); where a read needs parity it declines instead, and a
/// degraded array still gives plain member reads (a mirror, a present chunk).
#[test]
fn stored_reads_name_the_bytes_read_at_returns() {
    use raidlab_core::SliceVolume;
    use raidlab_devices::{FileVolume, OpenMode};
    use std::os::unix::fs::FileExt;
    const DATA_OFFSET: u64 = 8192;
    let gather = |a: &Array, off: u64, n: usize| -> raidlab_core::Result<Option<Vec<u8>>> {
        let mut out = Vec::with_capacity(n);
        let mut sink = |fd: std::os::fd::BorrowedFd<'_>, at: u64, k: usize| {
            let f = std::fs::File::from(fd.try_clone_to_owned()?);
            let mut b = vec![0u8; k];
            f.read_exact_at(&mut b, at)?;
            out.extend_from_slice(&b);
            Ok(())
        };
        let whole = a.read_stored(off, n as u64, &mut sink)?;
        Ok(whole.then_some(out))
    };
    for (ci, g) in configs().into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<Arc<dyn Volume>> = (0..g.raid_disks)
            .map(|i| {
                let f = FileVolume::create_sparse(
                    &dir.path().join(format!("m{i}")),
                    g.member_bytes + DATA_OFFSET,
                )
                .unwrap();
                drop(f);
                let f = FileVolume::open(&dir.path().join(format!("m{i}")), OpenMode::ReadWrite)
                    .unwrap();
                Arc::new(SliceVolume::new(f, DATA_OFFSET, g.member_bytes).unwrap())
                    as Arc<dyn Volume>
            })
            .collect();
        let mut rng = ChaCha8Rng::seed_from_u64(0x5701 + ci as u64);
        let full = Array::new("stored", g, files.iter().cloned().map(Some).collect()).unwrap();
        let size = full.size();
        let data: Vec<u8> = (0..size).map(|_| rng.gen()).collect();
        full.write_at(&data, 0).unwrap();
        for _ in 0..40 {
            let (off, n) = random_request(&mut rng, size, g.chunk_bytes);
            let got = gather(&full, off, n).unwrap();
            let want = &data[off as usize..off as usize + n];
            assert!(
                got.as_deref() == Some(want),
                "{}: complete array, read {n} at {off}: stored pieces differ from the data (or were declined)",
                label(&g)
            );
        }
        drop(full);
        for missing in survivable_sets(&g) {
            let vols = files
                .iter()
                .enumerate()
                .map(|(i, f)| (!missing.contains(&i)).then(|| f.clone()))
                .collect();
            let a = Array::new("stored", g, vols).unwrap();
            for _ in 0..10 {
                let (off, n) = random_request(&mut rng, size, g.chunk_bytes);
                if let Some(got) = gather(&a, off, n).unwrap() {
                    assert!(
                        got == data[off as usize..off as usize + n],
                        "{} missing {missing:?}, read {n} at {off}: stored pieces differ",
                        label(&g)
                    );
                }
            }
            // With parity rotating, every member holds data in some stripe.
            let rotating = matches!(
                g.layout,
                Layout::Parity(
                    ParityLayout::LeftAsymmetric
                        | ParityLayout::RightAsymmetric
                        | ParityLayout::LeftSymmetric
                        | ParityLayout::RightSymmetric
                )
            );
            if rotating {
                assert!(
                    gather(&a, 0, size as usize).unwrap().is_none(),
                    "{} missing {missing:?}: a whole read needs parity, yet was not declined",
                    label(&g)
                );
            }
        }
    }
}

/// A member that panics (a bug in a volume) fails the request with an error; the
/// panic does not unwind through the shared I/O threads into the caller.
#[test]
fn a_panicking_member_fails_the_request_instead_of_the_caller() {
    struct Boom(u64);
    impl Volume for Boom {
        fn name(&self) -> String {
            "boom".into()
        }
        fn size(&self) -> u64 {
            self.0
        }
        fn read_at(&self, _: &mut [u8], _: u64) -> raidlab_core::Result<()> {
            panic!("this member's read panics on purpose")
        }
        fn write_at(&self, _: &[u8], _: u64) -> raidlab_core::Result<()> {
            panic!("this member's write panics on purpose")
        }
        fn flush(&self) -> raidlab_core::Result<()> {
            Ok(())
        }
    }
    let g = Geometry::new(Level::Raid0, Layout::Plain, 64 << 10, 4, 4 << 20).unwrap();
    for boom in [0, 2] {
        let vols = (0..4)
            .map(|i| {
                Some(if i == boom {
                    Arc::new(Boom(4 << 20)) as Arc<dyn Volume>
                } else {
                    Arc::new(MemVolume::new(4 << 20)) as Arc<dyn Volume>
                })
            })
            .collect();
        let a = Array::new("boom", g, vols).unwrap();
        // 1 MiB over four members: a parallel step, the panicking member's
        // operations on the caller's thread (role 0) or on the pool (role 2).
        let mut buf = vec![0u8; 1 << 20];
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a.read_at(&mut buf, 0)));
        let r = r.unwrap_or_else(|_| panic!("role {boom}: the panic reached the caller"));
        let e = r.expect_err("a read through a panicking member cannot succeed");
        assert!(e.to_string().contains("panicked"), "role {boom}: {e}");
    }
}

/// Trims: on RAID 0, 1 and 10 the range reads as zeros afterwards, every copy
/// of it is trimmed (copies stay equal), and nothing outside it changes, also
/// with a mirror missing; RAID 4/5/6 refuse (md's default) and change nothing.
/// A member that cannot promise zeros after a trim makes the array keep the data.
#[test]
fn trims_zero_every_copy_on_mirrors_and_are_refused_on_parity_levels() {
    for (ci, g) in configs().into_iter().enumerate() {
        let missing_sets: Vec<Vec<usize>> = if g.is_parity() || g.level == Level::Raid0 {
            vec![vec![]]
        } else {
            vec![vec![], vec![1]]
        };
        for missing in missing_sets {
            let what = format!("{} missing {missing:?}", label(&g));
            let mut rng = ChaCha8Rng::seed_from_u64(0x7e1d + ci as u64);
            let mems: Vec<Arc<MemVolume>> = (0..g.raid_disks)
                .map(|_| Arc::new(MemVolume::new(g.member_bytes)))
                .collect();
            let a = array_over(&g, &mems, &[]);
            let mut model: Vec<u8> = (0..a.size()).map(|_| rng.gen()).collect();
            a.write_at(&model, 0).unwrap();
            let a = array_over(&g, &mems, &missing);
            let before: Vec<Vec<u8>> = mems
                .iter()
                .map(|m| read(m, 0, g.member_bytes as usize))
                .collect();
            for _ in 0..20 {
                let (off, len) = random_request(&mut rng, a.size(), g.chunk_bytes);
                match a.discard(off, len as u64) {
                    Ok(()) => {
                        assert!(!g.is_parity(), "{what}: a parity level trimmed");
                        model[off as usize..off as usize + len].fill(0);
                    }
                    Err(e) => {
                        assert!(g.is_parity(), "{what}: {e}");
                        assert_eq!(e.kind, ErrorKind::Unsupported, "{what}: {e}");
                    }
                }
            }
            let mut got = vec![0u8; a.size() as usize];
            a.read_at(&mut got, 0).unwrap();
            assert!(got == model, "{what}: contents after trims");
            if g.is_parity() {
                for (m, b) in mems.iter().zip(&before) {
                    assert!(
                        read(m, 0, g.member_bytes as usize) == *b,
                        "{what}: a member changed"
                    );
                }
            } else if missing.is_empty() {
                assert_parity_consistent(&g, &mems);
            }
        }
    }
    // A member that cannot promise zeros: the array keeps the data.
    let g = Geometry::new(Level::Raid1, Layout::Plain, 0, 2, 1 << 16).unwrap();
    let m0: Arc<dyn Volume> = Arc::new(MemVolume::new(1 << 16));
    let m1: Arc<dyn Volume> = Arc::new(OddTrim(MemVolume::new(1 << 16), false));
    let a = Array::new("t", g, vec![Some(m0), Some(m1)]).unwrap();
    a.write_at(&[9u8; 4096], 0).unwrap();
    assert_eq!(a.discard(0, 4096).unwrap_err().kind, ErrorKind::Unsupported);
    let mut b = [0u8; 4096];
    a.read_at(&mut b, 0).unwrap();
    assert!(b.iter().all(|&x| x == 9));
    // Members that promise zeros but cannot trim: if the first copy cannot,
    // nothing changes (no trim turns into writing zeros); if a later one
    // cannot, it is zeroed so the copies stay equal.
    for first_fails in [true, false] {
        let odd = Arc::new(OddTrim(MemVolume::new(1 << 16), true));
        let mem = Arc::new(MemVolume::new(1 << 16));
        let (a0, a1): (Arc<dyn Volume>, Arc<dyn Volume>) = if first_fails {
            (odd.clone(), mem.clone())
        } else {
            (mem.clone(), odd.clone())
        };
        let a = Array::new("t", g, vec![Some(a0), Some(a1)]).unwrap();
        a.write_at(&[9u8; 4096], 0).unwrap();
        let r = a.discard(0, 4096);
        let want = if first_fails { 9 } else { 0 };
        assert_eq!(r.is_err(), first_fails, "{r:?}");
        assert!(read(&mem, 0, 4096).iter().all(|&x| x == want));
        let mut c = vec![0u8; 4096];
        odd.read_at(&mut c, 0).unwrap();
        assert!(c.iter().all(|&x| x == want), "first fails: {first_fails}");
    }
}

/// A trim is a plan like any write: an executor that records plans sees one
/// trim of each copy's member range (what a write there would write), under
/// the write's locks, and no data moved.
#[test]
fn a_trim_is_a_plan_of_member_trims() {
    let g = Geometry::new(
        Level::Raid10,
        Layout::Raid10(Raid10Layout {
            near: 2,
            far: 1,
            offset: false,
        }),
        16 << 10,
        4,
        1 << 20,
    )
    .unwrap();
    let mems: Vec<Arc<MemVolume>> = (0..4).map(|_| Arc::new(MemVolume::new(1 << 20))).collect();
    let rec = Arc::new(raidlab_raid::exec::Recording::default());
    let a = array_over(&g, &mems, &[]).with_executor(rec.clone());
    let (off, len) = (40 << 10, 24 << 10);
    a.discard(off, len).unwrap();
    let plans = rec.take();
    let trims: Vec<raidlab_raid::MemberOp> = plans
        .iter()
        .flat_map(|p| p.steps.iter())
        .flat_map(|s| match s {
            raidlab_raid::Step::Io(ops) => ops.clone(),
            _ => Vec::new(),
        })
        .collect();
    let write = plan_write(&g, &[true; 4], off, len).unwrap();
    let mut want: Vec<(usize, u64, u64)> = write
        .writes()
        .map(|o| (o.member, o.offset, o.length))
        .collect();
    let mut got: Vec<(usize, u64, u64)> = trims
        .iter()
        .map(|o| (o.member, o.offset, o.length))
        .collect();
    want.sort_unstable();
    got.sort_unstable();
    assert_eq!(got, want);
    assert!(trims.iter().all(|o| o.kind == raidlab_core::IoKind::Trim));
    assert!(
        plans.iter().all(|p| p.locks == write.locks),
        "under the write's locks"
    );
}

/// Memory whose trim does not do what a trim of memory does: with `false`,
/// it makes no promise about what reads return after it; with `true`, it
/// promises zeros but cannot trim at all.
#[derive(Debug)]
struct OddTrim(MemVolume, bool);

impl Volume for OddTrim {
    fn name(&self) -> String {
        "odd-trim".into()
    }
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> raidlab_core::Result<()> {
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> raidlab_core::Result<()> {
        self.0.write_at(buf, offset)
    }
    fn flush(&self) -> raidlab_core::Result<()> {
        Ok(())
    }
    fn discard(&self, offset: u64, len: u64) -> raidlab_core::Result<()> {
        if self.1 {
            return Err(raidlab_core::Error::new(
                ErrorKind::Unsupported,
                raidlab_core::Op::Discard,
                "cannot trim",
            ));
        }
        self.0.discard(offset, len)
    }
    fn discard_zeroes(&self) -> bool {
        self.1
    }
}
