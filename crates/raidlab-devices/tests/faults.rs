//! FaultVolume: every injected fault fails or corrupts exactly what it names and
//! nothing else, and a power cut leaves each sector holding a value some write (or
//! the last flush) gave it.

use proptest::prelude::*;
use raidlab_core::{ErrorKind, Op, Volume};
use raidlab_devices::{FaultVolume, MemVolume, PowerCutPolicy};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

const SECTOR: usize = 512;

fn patterned(size: usize) -> MemVolume {
    let v = MemVolume::new(size as u64);
    let data: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
    v.write_at(&data, 0).unwrap();
    v
}

fn read(v: &impl Volume, offset: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    v.read_at(&mut b, offset).unwrap();
    b
}

#[test]
fn fail_all_fails_every_op_with_device_op_and_range() {
    let v = FaultVolume::new(patterned(8192));
    let name = v.inner().name();
    let before = v.inner().snapshot();
    v.fail_all(true);

    let e = v.read_at(&mut [0u8; 100], 1000).unwrap_err();
    assert_eq!((e.kind, e.op), (ErrorKind::Io, Op::Read));
    assert_eq!(e.device.as_deref(), Some(name.as_str()));
    assert_eq!(e.range, Some((1000, 100)));
    assert!(e.to_string().contains("injected fault"), "{e}");

    let e = v.write_at(&[1u8; 10], 20).unwrap_err();
    assert_eq!(
        (e.kind, e.op, e.range),
        (ErrorKind::Io, Op::Write, Some((20, 10)))
    );
    let e = v.flush().unwrap_err();
    assert_eq!((e.kind, e.op, e.range), (ErrorKind::Io, Op::Flush, None));
    assert_eq!(v.discard(0, 512).unwrap_err().kind, ErrorKind::Io);
    assert_eq!(v.inner().snapshot(), before);

    let s = v.stats();
    assert_eq!((s.reads, s.writes, s.flushes, s.discards), (1, 1, 1, 1));
    assert_eq!(s.injected_failures, 4);

    v.fail_all(false);
    v.write_at(&[1u8; 10], 20).unwrap();
    v.flush().unwrap();
    assert_eq!(read(&v, 20, 10), vec![1u8; 10]);
}

#[test]
fn out_of_range_is_refused_before_faults() {
    let v = FaultVolume::with_volatile_cache(MemVolume::new(4096));
    v.fail_all(true);
    assert_eq!(
        v.read_at(&mut [0u8; 2], 4095).unwrap_err().kind,
        ErrorKind::OutOfRange
    );
    assert_eq!(
        v.write_at(&[0u8; 2], u64::MAX).unwrap_err().kind,
        ErrorKind::OutOfRange
    );
    assert_eq!(v.discard(4000, 97).unwrap_err().kind, ErrorKind::OutOfRange);
    assert_eq!(
        v.corrupt_stored(4095, 2).unwrap_err().kind,
        ErrorKind::OutOfRange
    );
    v.fail_all(false);
    assert_eq!(v.pending_writes(), 0);
}

#[test]
fn fail_ranges_affect_only_overlapping_io_of_their_kind() {
    let v = FaultVolume::new(patterned(16384));
    let before = v.inner().snapshot();
    v.fail_reads(4096..8192);
    v.fail_reads(12000..12001);
    v.fail_writes(0..512);

    // Reads: adjacent ranges pass, any overlap fails and names the range.
    assert_eq!(read(&v, 0, 4096), before[..4096]);
    assert_eq!(read(&v, 8192, 1000), before[8192..9192]);
    let e = v.read_at(&mut [0u8; 2], 4095).unwrap_err();
    assert_eq!(
        (e.kind, e.op, e.range),
        (ErrorKind::Io, Op::Read, Some((4095, 2)))
    );
    assert!(e.to_string().contains("4096..8192"), "{e}");
    assert!(v.read_at(&mut [0u8; 1], 12000).is_err());
    assert!(v.read_at(&mut [0u8; 0], 5000).is_ok());
    // Writes to a read-failing range still work, and the other way round.
    v.write_at(&[9u8; 512], 4096).unwrap();
    assert_eq!(read(&v, 0, 512), before[..512]);
    let e = v.write_at(&[1u8; 1], 511).unwrap_err();
    assert_eq!((e.kind, e.op), (ErrorKind::Io, Op::Write));
    assert_eq!(v.discard(256, 512).unwrap_err().op, Op::Discard);
    let mut after = before.clone();
    after[4096..4608].fill(9);
    assert_eq!(v.inner().snapshot(), after);
    assert_eq!(v.stats().injected_failures, 4);

    v.clear_faults();
    assert_eq!(read(&v, 4096, 512), vec![9u8; 512]);
    v.write_at(&[1u8; 1], 511).unwrap();
}

#[test]
fn corrupt_reads_flip_only_overlapping_bytes_and_leave_storage_alone() {
    let v = FaultVolume::new(patterned(8192));
    let before = v.inner().snapshot();
    v.corrupt_reads(1000..1010);
    let got = read(&v, 990, 40);
    for (i, (&g, &b)) in got.iter().zip(&before[990..1030]).enumerate() {
        let abs = 990 + i;
        let want = if (1000..1010).contains(&abs) {
            b ^ 0xff
        } else {
            b
        };
        assert_eq!(g, want, "byte {abs}");
    }
    // Deterministic: the same read corrupts the same way.
    assert_eq!(read(&v, 990, 40), got);
    assert_eq!(read(&v, 1010, 100), before[1010..1110]);
    assert_eq!(v.inner().snapshot(), before);
    assert_eq!(v.stats().corrupted_reads, 2);
    assert_eq!(v.stats().injected_failures, 0);
    v.clear_faults();
    assert_eq!(read(&v, 990, 40), before[990..1030]);
}

#[test]
fn corrupt_stored_changes_the_medium_only_in_range() {
    let v = FaultVolume::new(patterned(8192));
    let before = v.inner().snapshot();
    v.corrupt_stored(512, 3).unwrap();
    let after = v.inner().snapshot();
    for i in 0..8192 {
        let want = if (512..515).contains(&i) {
            before[i] ^ 0xff
        } else {
            before[i]
        };
        assert_eq!(after[i], want, "byte {i}");
    }
    assert_eq!(read(&v, 510, 6)[2..5], after[512..515]);
    assert_eq!(v.stats().writes, 0);
}

#[test]
fn cache_holds_writes_until_flush_and_reads_see_them() {
    let v = FaultVolume::with_volatile_cache(patterned(8192));
    let before = v.inner().snapshot();
    v.write_at(&[1u8; 700], 100).unwrap();
    v.write_at(&[2u8; 10], 600).unwrap();
    assert_eq!(v.pending_writes(), 2);
    assert_eq!(v.inner().snapshot(), before);
    let got = read(&v, 0, 1024);
    let mut want = before[..1024].to_vec();
    want[100..800].fill(1);
    want[600..610].fill(2);
    assert_eq!(got, want);

    v.flush().unwrap();
    assert_eq!(v.pending_writes(), 0);
    assert_eq!(v.inner().snapshot()[..1024], want[..]);
    // Nothing pending: a power cut of any kind loses nothing.
    v.power_cut(1).unwrap();
    v.restart();
    assert_eq!(read(&v, 0, 1024), want);
}

#[test]
fn discard_in_cache_mode_keeps_issue_order() {
    let v = FaultVolume::with_volatile_cache(patterned(8192));
    v.write_at(&[1u8; 1024], 0).unwrap();
    v.write_at(&[2u8; 512], 4096).unwrap();
    v.discard(512, 4096).unwrap();
    v.write_at(&[3u8; 10], 600).unwrap();
    // Writes before the discard reached the medium ahead of it; the one after waits.
    assert_eq!(v.pending_writes(), 1);
    let mut want = v.inner().snapshot();
    assert_eq!(want[..512], [1u8; 512]);
    assert!(want[512..4608].iter().all(|&b| b == 0));
    want[600..610].fill(3);
    assert_eq!(read(&v, 0, 8192), want);
}

#[test]
fn corrupt_stored_spans_chunks() {
    let size = 3 << 20;
    let v = FaultVolume::new(patterned(size));
    let before = v.inner().snapshot();
    v.corrupt_stored(1000, (size - 2000) as u64).unwrap();
    let after = v.inner().snapshot();
    assert_eq!(after[..1000], before[..1000]);
    assert_eq!(after[size - 1000..], before[size - 1000..]);
    assert!((1000..size - 1000).all(|i| after[i] == before[i] ^ 0xff));
}

#[test]
fn write_through_sends_writes_at_once() {
    let v = FaultVolume::new(MemVolume::new(4096));
    v.write_at(&[3u8; 512], 512).unwrap();
    assert_eq!(v.pending_writes(), 0);
    assert_eq!(v.inner().snapshot()[512..1024], [3u8; 512]);
    let r = v.power_cut_with(PowerCutPolicy::DropAll).unwrap();
    assert_eq!(r.dropped, 0);
    v.restart();
    assert_eq!(read(&v, 512, 512), vec![3u8; 512]);
}

#[test]
fn io_fails_between_power_cut_and_restart() {
    let v = FaultVolume::with_volatile_cache(MemVolume::new(4096));
    v.write_at(&[5u8; 512], 0).unwrap();
    v.power_cut_with(PowerCutPolicy::KeepAll).unwrap();
    assert!(!v.is_powered());
    for e in [
        v.read_at(&mut [0u8; 512], 0).unwrap_err(),
        v.write_at(&[0u8; 512], 0).unwrap_err(),
        v.flush().unwrap_err(),
        v.discard(0, 512).unwrap_err(),
    ] {
        assert_eq!(e.kind, ErrorKind::Io);
        assert!(e.to_string().contains("device lost power"), "{e}");
    }
    assert_eq!(v.inner().snapshot()[..512], [5u8; 512]);
    v.restart();
    assert!(v.is_powered());
    assert_eq!(read(&v, 0, 512), vec![5u8; 512]);
}

#[test]
fn drop_all_and_keep_all_do_what_they_say() {
    for (policy, kept) in [
        (PowerCutPolicy::DropAll, false),
        (PowerCutPolicy::KeepAll, true),
    ] {
        let v = FaultVolume::with_volatile_cache(MemVolume::new(8192));
        v.write_at(&[1u8; 1024], 0).unwrap();
        v.flush().unwrap();
        v.write_at(&[2u8; 1000], 100).unwrap();
        v.write_at(&[3u8; 512], 512).unwrap();
        v.write_at(&[4u8; 10], 5000).unwrap();
        let r = v.power_cut_with(policy).unwrap();
        assert_eq!(r.dropped + r.kept + r.torn, 3);
        assert_eq!(r.kept, if kept { 3 } else { 0 });
        v.restart();
        let mut want = vec![0u8; 8192];
        want[..1024].fill(1);
        if kept {
            // Issue order is kept: the later write wins where they overlap.
            want[100..1100].fill(2);
            want[512..1024].fill(3);
            want[5000..5010].fill(4);
        }
        assert_eq!(read(&v, 0, 8192), want, "{policy:?}");
        assert_eq!(v.pending_writes(), 0);
    }
}

/// The candidate contents of one sector: its durable value and every value written
/// to it since the last flush. Tags stand for contents: a sector filled with a tag's
/// little-endian bytes.
#[derive(Clone, Default)]
struct SectorModel {
    durable: u64,
    pending: Vec<u64>,
}

fn tag_sector(tag: u64) -> Vec<u8> {
    tag.to_le_bytes().repeat(SECTOR / 8)
}

fn run_power_cut_workload(seed: u64) -> raidlab_devices::PowerCutReport {
    const SECTORS: usize = 1024;
    let v = Arc::new(FaultVolume::with_volatile_cache(MemVolume::new(
        (SECTORS * SECTOR) as u64,
    )));
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut model = vec![SectorModel::default(); SECTORS];
    let mut next_tag = 1u64;
    let writes = rng.gen_range(200..2000);
    for _ in 0..writes {
        if rng.gen_ratio(1, 50) {
            v.flush().unwrap();
            for m in &mut model {
                if let Some(&last) = m.pending.last() {
                    m.durable = last;
                }
                m.pending.clear();
            }
            continue;
        }
        let n = rng.gen_range(1..=16usize);
        let first = rng.gen_range(0..=SECTORS - n);
        let mut buf = Vec::with_capacity(n * SECTOR);
        for m in &mut model[first..first + n] {
            buf.extend(tag_sector(next_tag));
            m.pending.push(next_tag);
            next_tag += 1;
        }
        v.write_at(&buf, (first * SECTOR) as u64).unwrap();
        if rng.gen_ratio(1, 10) {
            // Reads in the middle see the newest writes through the cache.
            let s = rng.gen_range(first..first + n);
            let want = model[s].pending.last().copied().unwrap();
            assert_eq!(read(&*v, (s * SECTOR) as u64, SECTOR), tag_sector(want));
        }
    }
    let report = v.power_cut(seed ^ 0x5eed).unwrap();
    assert!(v.read_at(&mut [0u8; 512], 0).is_err());
    v.restart();
    let all = read(&*v, 0, SECTORS * SECTOR);
    for (s, m) in model.iter().enumerate() {
        let got = &all[s * SECTOR..(s + 1) * SECTOR];
        let tag = u64::from_le_bytes(got[..8].try_into().unwrap());
        assert_eq!(got, tag_sector(tag), "seed {seed}: sector {s} is a mix");
        if m.pending.is_empty() {
            assert_eq!(tag, m.durable, "seed {seed}: flushed sector {s} changed");
        } else {
            assert!(
                tag == m.durable || m.pending.contains(&tag),
                "seed {seed}: sector {s} holds tag {tag}, never written there \
                 (durable {}, pending {:?})",
                m.durable,
                m.pending
            );
        }
    }
    report
}

#[test]
fn random_power_cuts_keep_flushed_data_and_only_written_sectors() {
    let mut total = raidlab_devices::PowerCutReport::default();
    for seed in 0..24 {
        let r = run_power_cut_workload(seed);
        total.dropped += r.dropped;
        total.kept += r.kept;
        total.torn += r.torn;
    }
    // The workload must actually exercise every fate, or the checks above prove little.
    assert!(
        total.dropped > 0 && total.kept > 0 && total.torn > 0,
        "{total:?}"
    );
}

#[test]
fn power_cut_with_the_same_seed_is_reproducible() {
    let outcome = |seed: u64| {
        let v = FaultVolume::with_volatile_cache(MemVolume::new(64 * 1024));
        for i in 0..40u8 {
            v.write_at(&vec![i + 1; 3000], u64::from(i) * 1500).unwrap();
        }
        let r = v.power_cut(seed).unwrap();
        (r, v.inner().snapshot())
    };
    assert_eq!(outcome(7), outcome(7));
    assert_ne!(outcome(7).1, outcome(8).1);
}

/// Unaligned writes of random bytes: after a power cut every byte holds its durable
/// value or a value some unflushed write gave it.
#[test]
fn unaligned_writes_survive_power_cut_bytewise() {
    const SIZE: usize = 16 * 1024;
    for seed in 0..8u64 {
        let v = FaultVolume::with_volatile_cache(MemVolume::new(SIZE as u64));
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut durable = vec![0u8; SIZE];
        let mut current = vec![0u8; SIZE];
        let mut pending: Vec<Vec<u8>> = vec![Vec::new(); SIZE];
        for _ in 0..300 {
            if rng.gen_ratio(1, 20) {
                v.flush().unwrap();
                durable.copy_from_slice(&current);
                pending.iter_mut().for_each(Vec::clear);
                continue;
            }
            let len = rng.gen_range(1..=2000usize);
            let off = rng.gen_range(0..=SIZE - len);
            let buf: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            v.write_at(&buf, off as u64).unwrap();
            current[off..off + len].copy_from_slice(&buf);
            for (i, &b) in buf.iter().enumerate() {
                pending[off + i].push(b);
            }
            let (ro, rl) = (rng.gen_range(0..SIZE - 100), 100);
            assert_eq!(read(&v, ro as u64, rl), current[ro..ro + rl]);
        }
        v.power_cut(seed).unwrap();
        v.restart();
        let got = read(&v, 0, SIZE);
        for i in 0..SIZE {
            assert!(
                got[i] == durable[i] || pending[i].contains(&got[i]),
                "seed {seed}: byte {i} = {}",
                got[i]
            );
        }
    }
}

#[test]
fn faults_can_change_while_shared_through_an_arc() {
    let v = Arc::new(FaultVolume::new(MemVolume::new(1 << 20)));
    let worker = {
        let v = Arc::clone(&v);
        std::thread::spawn(move || {
            let mut failures = 0;
            for i in 0..2000u64 {
                if v.write_at(&[1u8; 512], (i % 2048) * 512).is_err() {
                    failures += 1;
                }
            }
            failures
        })
    };
    v.fail_writes(0..(1 << 20));
    let failures = worker.join().unwrap();
    v.clear_faults();
    assert_eq!(v.stats().writes, 2000);
    assert_eq!(v.stats().injected_failures, failures);
}

proptest! {
    #[test]
    fn a_fail_range_refuses_exactly_the_overlapping_requests(
        start in 0u64..4096, flen in 0u64..1024, off in 0u64..4096, len in 0usize..1024,
    ) {
        let v = FaultVolume::new(MemVolume::new(8192));
        v.fail_reads(start..start + flen);
        v.fail_writes(start..start + flen);
        let overlaps = len > 0 && flen > 0 && off < start + flen && start < off + len as u64;
        let mut buf = vec![0u8; len];
        prop_assert_eq!(v.read_at(&mut buf, off).is_err(), overlaps);
        prop_assert_eq!(v.write_at(&buf, off).is_err(), overlaps);
    }
}

/// A volume with I/O size hints, to see that wrappers pass them on.
#[derive(Debug)]
struct Hinted(MemVolume);

impl Volume for Hinted {
    fn name(&self) -> String {
        self.0.name()
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
        self.0.flush()
    }
    fn preferred_io_size(&self) -> Option<u64> {
        Some(64 << 10)
    }
    fn optimal_io_size(&self) -> Option<u64> {
        Some(128 << 10)
    }
}

#[test]
fn wrappers_pass_io_size_hints_on_and_fua_is_durable() {
    use raidlab_devices::{Limits, ThrottleVolume};
    let f = FaultVolume::with_volatile_cache(Hinted(MemVolume::new(1 << 20)));
    assert_eq!(f.preferred_io_size(), Some(64 << 10));
    assert_eq!(f.optimal_io_size(), Some(128 << 10));
    let t = ThrottleVolume::new(Hinted(MemVolume::new(1 << 20)), Limits::unlimited()).unwrap();
    assert_eq!(t.preferred_io_size(), Some(64 << 10));
    assert_eq!(t.optimal_io_size(), Some(128 << 10));
    // A FUA write survives a power cut that drops every unflushed write.
    f.write_at(&[1; 512], 0).unwrap();
    f.write_at_fua(&[2; 512], 4096).unwrap();
    f.write_at(&[3; 512], 8192).unwrap();
    f.power_cut_with(PowerCutPolicy::DropAll).unwrap();
    f.restart();
    let mut b = [0u8; 512];
    f.read_at(&mut b, 4096).unwrap();
    assert_eq!(b, [2; 512]);
    f.read_at(&mut b, 8192).unwrap();
    assert_eq!(b, [0; 512]);
}

#[test]
fn fua_makes_only_its_own_write_durable_and_older_pending_bytes_never_land_over_it() {
    for (policy, before, after) in [
        (PowerCutPolicy::DropAll, 0u8, 0u8),
        (PowerCutPolicy::KeepAll, 1, 3),
        (PowerCutPolicy::Random(7), 9, 9),
    ] {
        let f = FaultVolume::with_volatile_cache(MemVolume::new(1 << 16));
        // A pending write straddling the FUA range on both sides.
        f.write_at(&[1; 1536], 0).unwrap();
        f.write_at_fua(&[2; 512], 512).unwrap();
        f.write_at(&[3; 512], 4096).unwrap();
        let mut b = [0u8; 1536];
        f.read_at(&mut b, 0).unwrap();
        assert!(b[..512].iter().all(|&x| x == 1));
        assert!(b[512..1024].iter().all(|&x| x == 2));
        assert!(b[1024..].iter().all(|&x| x == 1));
        f.power_cut_with(policy).unwrap();
        f.restart();
        f.read_at(&mut b, 0).unwrap();
        // The FUA bytes survive whatever happens to the rest, and the older
        // write that covered them does not come back over them.
        assert!(b[512..1024].iter().all(|&x| x == 2), "{policy:?}");
        if before != 9 {
            assert!(b[..512].iter().all(|&x| x == before), "{policy:?}");
            assert!(b[1024..].iter().all(|&x| x == before), "{policy:?}");
            let mut c = [0u8; 512];
            f.read_at(&mut c, 4096).unwrap();
            assert!(c.iter().all(|&x| x == after), "{policy:?}");
        }
    }
}
