//! What the reshape-with-a-bitmap tests share (`reshape_bitmap.rs`,
//! `reshape_bitmap_raid10.rs`, `reshape090_bitmap.rs`): an array made with
//! a bitmap, the bitmaps as on disk, a grow of four members to five cut by
//! a power failure throughout its run, and one walked served, stopped, with
//! a client's write on either side. Each test file declares `mod common;`
//! and `mod md090;`, which this uses.
#![allow(dead_code)] // each test binary uses its own part

use crate::common;
use crate::md090::{cut_at, fault_devices, pattern, MIB};
use raidlab_core::Volume;
use raidlab_layout::Level;
use raidlab_md::bitmap::Bitmap;
use raidlab_md::Superblock;
use raidlab_raid::assemble::{Assembly, Device};
use raidlab_raid::grow::ReshapeRequest;
use raidlab_raid::recovery::RunOptions;

pub const CHUNK: u64 = 64 << 10;

/// What judges one cut run of [`grow_cut_throughout`]: (devices, the
/// array's pattern, the bitmap's superblock before the grow, what run).
pub type Check<'a> = dyn FnMut(&[Device], &[u8], &raidlab_md::bitmap::BitmapSuper, &str) + 'a;

/// A new `level` array with an internal bitmap of `bitmap_chunk` bytes over
/// `devs`, filled with a pattern through a running array and stopped clean
/// (the bits it set cleared as a clean stop clears them). Returns the
/// pattern.
pub fn bitmapped(level: Level, devs: &[Device], bitmap_chunk: u32) -> Vec<u8> {
    let mut asm = common::create_with(level, devs, |s| {
        s.chunk_bytes = CHUNK;
        s.bitmap = true;
        s.bitmap_chunk = Some(bitmap_chunk);
    });
    let data = pattern(asm.geometry.array_bytes(), devs.len() as u64);
    let array = asm.array().unwrap();
    array.write_at(&data, 0).unwrap();
    array.flush().unwrap();
    asm.absorb_bitmap(&array);
    asm.mark_clean(true).unwrap();
    let asm = Assembly::assemble(devs.to_vec()).unwrap();
    assert_eq!(asm.bitmap.as_ref().unwrap().dirty_count(), 0);
    data
}

/// Each member's superblock and bitmap as on disk.
pub fn on_disk(devs: &[Device]) -> Vec<(Superblock, Bitmap)> {
    devs.iter()
        .map(|d| {
            let sb = Superblock::read_from(d.volume.as_ref()).unwrap().unwrap();
            let bm = Bitmap::read_from(d.volume.as_ref(), &sb)
                .unwrap()
                .unwrap_or_else(|| panic!("{}: the bitmap is gone", d.path));
            (sb, bm)
        })
        .collect()
}

/// A grow of a `level` array with a bitmap from four members of 16 MiB to
/// five, cut by a power failure at member write `at` for `at` from the
/// first write to past the run's end (volatile caches lost where the power
/// went), each then assembled and carried on from where the superblocks
/// say it is: recorded (the walk resumes) or not yet (the grow is asked
/// again; the new member may be a spare already). `check(devs, data,
/// before, what)` judges each run after: `data` the array's pattern,
/// `before` the bitmap's superblock before the grow. Asserts more than
/// three runs were cut.
pub fn grow_cut_throughout(level: Level, bitmap_chunk: u32, check: &mut Check<'_>) {
    let mut cut = 0;
    for (k, at) in [
        1u64, 3, 6, 10, 16, 25, 40, 60, 90, 130, 180, 250, 400, 700, 1200, 2000, 3500, 6000, 10000,
    ]
    .into_iter()
    .enumerate()
    {
        let (devs, faults) = fault_devices(5, 16 * MIB);
        let data = bitmapped(level, &devs[..4], bitmap_chunk);
        let before = Assembly::assemble(devs[..4].to_vec())
            .unwrap()
            .bitmap
            .unwrap()
            .sb;
        let req = ReshapeRequest {
            raid_devices: Some(5),
            ..ReshapeRequest::default()
        };
        let opts = || RunOptions {
            checkpoint_bytes: 2 * MIB,
            ..RunOptions::default()
        };
        let tripped = cut_at(&faults, at, k as u64, &mut || {
            let mut asm = Assembly::assemble(devs[..4].to_vec()).unwrap();
            let Ok(plan) = asm.reshape_check(&req, 1) else {
                return;
            };
            if asm.add(devs[4].clone(), false).is_err() || asm.reshape_start(plan).is_err() {
                return;
            }
            let _ = asm.reshape_run(opts(), &mut |_| {});
        });
        let what = format!("cut at member write {at}");
        if !tripped {
            assert!(cut > 3, "{what}: too few runs cut ({cut})");
            break;
        }
        cut += 1;
        let mut asm = Assembly::assemble(devs.clone())
            .or_else(|_| Assembly::assemble(devs[..4].to_vec()))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        if asm.reshape().is_some() {
            asm.reshape_run(opts(), &mut |_| {})
                .unwrap_or_else(|e| panic!("{what}: resume: {e}"));
        } else if asm.geometry.raid_disks == 4 {
            let spare = asm.members.iter().any(|m| m.device.path == devs[4].path);
            let plan = asm
                .reshape_check(&req, usize::from(!spare))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            if !spare {
                asm.add(devs[4].clone(), false).unwrap();
            }
            asm.reshape_start(plan).unwrap();
            asm.reshape_run(opts(), &mut |_| {}).unwrap();
        }
        check(&devs, &data, &before, &what);
    }
    eprintln!("runs cut: {cut}");
}

/// `asm` (four members of `devs`) grown onto the fifth: the new member
/// added and the grow recorded, nothing moved yet.
pub fn grow_to_five_started(asm: &mut Assembly, devs: &[Device]) {
    let req = ReshapeRequest {
        raid_devices: Some(5),
        ..ReshapeRequest::default()
    };
    let plan = asm.reshape_check(&req, 1).unwrap();
    asm.add(devs[4].clone(), false).unwrap();
    asm.reshape_start(plan).unwrap();
}

/// [`grow_to_five_started`], then walked served for `steps` checkpoints
/// and stopped, with at least `room` bytes of the old array left to move;
/// then a client's 4 KiB write on either side of the position (one block
/// the new geometry holds, one the old one still does), flushed and copied
/// into `data`. The walk, its volume and `asm` are dropped on return, as a
/// machine that stops there. Returns the two blocks' array offsets.
pub fn served_grow_stopped_with_a_write_each_side(
    mut asm: Assembly,
    devs: &[Device],
    steps: usize,
    room: u64,
    data: &mut [u8],
) -> (u64, u64) {
    grow_to_five_started(&mut asm, devs);
    let mut walk = asm.reshape_served(false).unwrap();
    let volume = walk.volume("bm".into());
    let taken = std::cell::Cell::new(0);
    let quit = || {
        taken.set(taken.get() + 1);
        taken.get() > steps
    };
    let e = walk
        .run(&mut asm, &RunOptions::default(), &quit)
        .unwrap_err();
    assert!(e.to_string().contains("stopped"), "{e}");
    let position = Assembly::assemble(devs.to_vec())
        .unwrap()
        .reshape()
        .unwrap()
        .unwrap()
        .position;
    let old_end = data.len() as u64;
    assert!(position > 0 && position + room < old_end, "{position}");
    let (a, b) = (
        position / 2 / 4096 * 4096,
        (position + old_end) / 2 / 4096 * 4096,
    );
    let block = vec![0x5au8; 4096];
    volume.write_at(&block, a).unwrap();
    volume.write_at(&block, b).unwrap();
    volume.flush().unwrap();
    for at in [a, b] {
        data[at as usize..at as usize + 4096].copy_from_slice(&block);
    }
    (a, b)
}

/// The chunks dirty in `bm`.
pub fn dirty(bm: &Bitmap) -> Vec<u64> {
    (0..bm.chunks()).filter(|&c| bm.is_dirty(c)).collect()
}

/// The member sector (from the data offset) where a RAID 5 of `members`
/// with `chunk`-byte chunks keeps array byte `at`: a RAID 5's bitmap
/// counts those.
pub fn raid5_member_sector(at: u64, members: u64, chunk: u64) -> u64 {
    let stripe = chunk * (members - 1);
    ((at / stripe) * chunk + at % chunk) / 512
}

/// After a resume: assembled, the bits `want` still set (a reshape's own
/// writes clear none) and a check finds nothing to fix.
pub fn assert_bits_kept_and_clean(devs: &[Device], want: &[u64]) {
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    assert_eq!(dirty(asm.bitmap.as_ref().unwrap()), want, "bits kept");
    let check = asm
        .scrub(false, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(check.mismatch_sectors, 0);
}
