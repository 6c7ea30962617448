//! Rows kept in memory after a write (`kept_rows`, md's idle stripe heads):
//! a write of a kept row reads no member, and an array that keeps rows
//! leaves its members byte for byte as one that keeps none, under random
//! writes, members failing and trims; with members lost afterwards, every
//! byte reads back from the parity it wrote.

mod common;

use raidlab_core::{ManualClock, Volume};
use raidlab_devices::recorded::{Access, Recorded};
use raidlab_devices::MemVolume;
use raidlab_layout::{Geometry, Level};
use raidlab_raid::stripe_cache::StripeCacheConfig;
use raidlab_raid::Array;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use std::time::Duration;

struct Rig {
    array: Array,
    mem: Vec<Arc<MemVolume>>,
    seen: Vec<Arc<Recorded>>,
}

fn rig(g: Geometry, kept_rows: usize) -> Rig {
    let mem: Vec<Arc<MemVolume>> = (0..g.raid_disks)
        .map(|_| Arc::new(MemVolume::new(g.member_bytes)))
        .collect();
    let seen: Vec<Arc<Recorded>> = mem
        .iter()
        .map(|m| Arc::new(Recorded::new(Arc::clone(m) as Arc<dyn Volume>)))
        .collect();
    let members = seen
        .iter()
        .map(|r| Some(Arc::clone(r) as Arc<dyn Volume>))
        .collect();
    let array = Array::new("t", g, members).unwrap();
    // No partial stripe held: every write goes straight down its path.
    let cfg = StripeCacheConfig {
        stripes: 0,
        hold: Duration::from_millis(20),
        kept_rows,
    };
    array
        .start_stripe_cache_driven(cfg, ManualClock::new())
        .unwrap();
    Rig { array, mem, seen }
}

fn member_reads(r: &Rig) -> usize {
    r.seen
        .iter()
        .map(|s| s.take().iter().filter(|a| a.access == Access::Read).count())
        .sum()
}

#[test]
fn a_write_of_a_kept_row_reads_no_member() {
    for (level, disks) in [(Level::Raid5, 4), (Level::Raid6, 5), (Level::Raid4, 4)] {
        let chunk = 64 << 10;
        let g = common::parity_geometry(level, disks, chunk, 16);
        let r = rig(g, 256);
        let a = vec![0xA5u8; 4096];
        let b = vec![0x5Au8; 4096];
        // First write of row 0: reconstruct-write reads the two other data
        // blocks (as read-modify-write would read two).
        r.array.write_at(&a, 0).unwrap();
        assert_eq!(member_reads(&r), 2, "{level:?}: the first write of the row");
        // The same row, another data member's block: nothing read.
        r.array.write_at(&b, chunk).unwrap();
        assert_eq!(member_reads(&r), 0, "{level:?}: a write of a kept row");
        // Another row (the next page of every member) was never kept.
        r.array.write_at(&b, 4096).unwrap();
        assert_eq!(member_reads(&r), 2, "{level:?}: a row not kept");
        // Part of a page is no whole row: read as before, and the row it
        // changed is forgotten.
        r.array.write_at(&a[..512], chunk + 512).unwrap();
        assert!(member_reads(&r) > 0, "{level:?}: a partial page");
        r.array.write_at(&a, 2 * chunk).unwrap();
        assert!(
            member_reads(&r) > 0,
            "{level:?}: the row changed by a partial write"
        );
        let (_, fills) = r.array.kept_counts().unwrap();
        assert!(fills >= 2, "{level:?}: {fills} fills");
        let mut back = vec![0u8; 4096];
        r.array.read_at(&mut back, chunk).unwrap();
        assert_eq!(&back[..512], &b[..512]);
        assert_eq!(&back[512..1024], &a[..512]);
    }
}

#[test]
fn no_kept_rows_no_change_in_what_is_read() {
    let chunk = 64 << 10;
    let r = rig(common::parity_geometry(Level::Raid5, 4, chunk, 16), 0);
    r.array.write_at(&[1u8; 4096], 0).unwrap();
    assert_eq!(member_reads(&r), 2);
    r.array.write_at(&[2u8; 4096], chunk).unwrap();
    assert_eq!(member_reads(&r), 2, "kept_rows 0 keeps nothing");
    assert_eq!(r.array.kept_counts(), None);
}

/// The same random writes, trims and member failures on an array keeping 8
/// rows and on one keeping none: the members end byte for byte the same,
/// and with the members the level may lose taken out, the array reads
/// back what was written.
fn same_members(level: Level, disks: usize, seed: u64) {
    let chunk = 16 << 10;
    let g = common::parity_geometry(level, disks, chunk, 8);
    let (kept, plain) = (rig(g, 8), rig(g, 0));
    let size = g.array_bytes();
    let mut model = vec![0u8; size as usize];
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut failed = 0;
    for i in 0..1500u32 {
        let pages = rng.gen_range(1..=4u64);
        let (len, offset) = if rng.gen_range(0..8) == 0 {
            // Now and then a write that is not whole pages.
            let len = rng.gen_range(1..=16u64) * 512;
            (len, rng.gen_range(0..(size - len) / 512) * 512)
        } else {
            let len = pages * 4096;
            (len, rng.gen_range(0..(size - len) / 4096) * 4096)
        };
        let data: Vec<u8> = (0..len).map(|j| (i as u64 * 31 + j) as u8).collect();
        kept.array.write_at(&data, offset).unwrap();
        plain.array.write_at(&data, offset).unwrap();
        model[offset as usize..(offset + len) as usize].copy_from_slice(&data);
        match rng.gen_range(0..200) {
            // In the last third only, so that most writes find every member.
            0 if i > 1000 && failed + 1 < g.parity_count() => {
                let role = rng.gen_range(0..disks);
                if kept.array.fail_member(role).is_ok() {
                    plain.array.fail_member(role).unwrap();
                    failed += 1;
                }
            }
            1..=3 => {
                // Write-zeroes come in whole stripes on a parity level.
                let n = chunk * g.data_disks() as u64;
                let at = rng.gen_range(0..size / n) * n;
                kept.array.write_zeroes(at, n).unwrap();
                plain.array.write_zeroes(at, n).unwrap();
                model[at as usize..(at + n) as usize].fill(0);
            }
            _ => {}
        }
    }
    let (_, fills) = kept.array.kept_counts().unwrap();
    assert!(fills > 100, "{level:?} seed {seed}: only {fills} fills");
    for (role, (a, b)) in kept.mem.iter().zip(&plain.mem).enumerate() {
        if kept.array.member(role).is_none() {
            continue;
        }
        let (mut x, mut y) = (
            vec![0u8; g.member_bytes as usize],
            vec![0u8; g.member_bytes as usize],
        );
        a.read_at(&mut x, 0).unwrap();
        b.read_at(&mut y, 0).unwrap();
        assert!(x == y, "{level:?} seed {seed}: member {role} differs");
    }
    // Lose what the level may lose: every byte must come back from parity.
    let mut role = 0;
    while failed < g.parity_count() {
        if kept.array.member(role).is_some() {
            kept.array.fail_member(role).unwrap();
            failed += 1;
        }
        role += 1;
    }
    let mut back = vec![0u8; size as usize];
    kept.array.read_at(&mut back, 0).unwrap();
    assert!(back == model, "{level:?} seed {seed}: read back differs");
}

#[test]
fn keeping_rows_leaves_the_members_as_keeping_none() {
    for seed in 0..4 {
        same_members(Level::Raid5, 4, seed);
        same_members(Level::Raid6, 5, seed);
        same_members(Level::Raid4, 5, seed);
    }
}

/// Writers on real threads, each its own blocks but sharing rows (one row
/// holds a block of each data member), on an array keeping 4 rows: rows are
/// pushed out between a write's planning and its run, and pinned rows
/// passed by, as they come. Every byte then reads back, with the members
/// whole and with one taken out (its blocks from the parity written).
#[test]
fn writers_on_threads_sharing_rows_leave_parity_true() {
    for (level, disks) in [(Level::Raid5, 4), (Level::Raid6, 5)] {
        let chunk = 4096;
        let g = common::parity_geometry(level, disks, chunk, 32);
        let r = rig(g, 4);
        let dd = g.data_disks() as u64;
        let blocks = g.array_bytes() / 4096;
        let threads = dd;
        std::thread::scope(|s| {
            for t in 0..threads {
                let array = &r.array;
                s.spawn(move || {
                    let mut rng = ChaCha8Rng::seed_from_u64(t);
                    for i in 0..3000u32 {
                        // Thread t owns the blocks of data member t's column.
                        let b = rng.gen_range(0..blocks / threads) * threads + t;
                        let data = vec![(t as u32 * 97 + i) as u8; 4096];
                        array.write_at(&data, b * 4096).unwrap();
                    }
                });
            }
        });
        // What each thread wrote last to each of its blocks.
        let mut model = vec![0u8; g.array_bytes() as usize];
        for t in 0..threads {
            let mut rng = ChaCha8Rng::seed_from_u64(t);
            for i in 0..3000u32 {
                let b = rng.gen_range(0..blocks / threads) * threads + t;
                let at = (b * 4096) as usize;
                model[at..at + 4096].fill((t as u32 * 97 + i) as u8);
            }
        }
        let (_, fills) = r.array.kept_counts().unwrap();
        assert!(fills > 0, "{level:?}: no write filled from a kept row");
        let mut back = vec![0u8; model.len()];
        r.array.read_at(&mut back, 0).unwrap();
        assert!(back == model, "{level:?}: read back differs");
        r.array.fail_member(0).unwrap();
        r.array.read_at(&mut back, 0).unwrap();
        assert!(back == model, "{level:?}: read back degraded differs");
    }
}
