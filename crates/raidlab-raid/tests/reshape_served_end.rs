//! Issue 36's suspected zero read: a served RAID 6 of 5 restriped to
//! left-symmetric-6 (md's first step of a RAID 6 to 5) while threads write
//! and read back blocks in the array's last 2 MiB, where fio once read
//! zeros. Every read, during the walk and after it, must be the block's
//! last write; a request past the array's end must fail, not read zeros.

use raidlab_core::Volume;
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_raid::assemble::{create, Assembly, CreateSpec, Device, NewMember};
use raidlab_raid::grow::ReshapeRequest;
use raidlab_raid::live::LiveArray;
use raidlab_raid::recovery::RunOptions;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

const MIB: u64 = 1 << 20;
const BLOCK: u64 = 4096;
/// The tail the writers keep to.
const TAIL: u64 = 2 * MIB;

/// A block's contents: which block, which write.
fn block(at: u64, version: u64) -> Vec<u8> {
    let seed = (at / BLOCK).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ version.wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    (0..BLOCK)
        .map(|i| ((seed ^ i).wrapping_mul(0xff51_afd7_ed55_8ccd) >> 56) as u8)
        .collect()
}

#[test]
fn a_raid6_restriped_to_left_symmetric_6_in_service_reads_its_last_stripes_as_written() {
    let devs: Vec<Device> = (0..5)
        .map(|i| Device {
            path: format!("m{i}"),
            volume: Arc::new(raidlab_devices::MemVolume::new(16 * MIB)),
        })
        .collect();
    let spec = CreateSpec {
        level: Level::Raid6,
        layout: Layout::Parity(ParityLayout::LeftSymmetric),
        chunk_bytes: 64 << 10,
        spares: 0,
        name: "end".into(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: false,
    };
    let members = devs
        .iter()
        .map(|d| NewMember {
            device: d.clone(),
            zeroed: true,
        })
        .collect();
    let mut asm = create(&spec, members).unwrap();
    let size = asm.geometry.array_bytes();
    let first = (size - TAIL) / BLOCK;
    let blocks = TAIL / BLOCK;
    asm.mark_dirty().unwrap();
    let array = Arc::new(asm.array().unwrap());
    for b in first..first + blocks {
        array.write_at(&block(b * BLOCK, 0), b * BLOCK).unwrap();
    }
    array.flush().unwrap();
    let live = LiveArray::new(asm, array);
    live.start_safe_mode(true);
    let volume = live.volume();
    // A request running past the end is refused (what fio met past 42
    // MiB must be an error, never zeros for data).
    let mut over = vec![0u8; 2 * BLOCK as usize];
    assert!(volume.read_at(&mut over, size - BLOCK).is_err());
    assert!(volume.write_at(&over, size - BLOCK).is_err());

    let done = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..2u64)
        .map(|t| {
            let (volume, done, writes) = (volume.clone(), done.clone(), writes.clone());
            std::thread::spawn(move || {
                let mut last = Vec::new();
                let mut x = 0x2545_f491_4f6c_dd1du64 ^ (t + 1);
                let mut version = 1;
                while !done.load(Ordering::Acquire) || version < 40 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // This thread's blocks: every other one of the tail,
                    // the very last always among them.
                    let b = first + (x % (blocks / 2)) * 2 + t;
                    let at = b * BLOCK;
                    let data = block(at, version);
                    volume.write_at(&data, at).unwrap();
                    let mut back = vec![0u8; BLOCK as usize];
                    volume.read_at(&mut back, at).unwrap();
                    assert!(
                        back == data,
                        "block at array byte {at} (of {size}) read back other bytes mid-restripe{}",
                        if back.iter().all(|&x| x == 0) {
                            ": zeros"
                        } else {
                            ""
                        }
                    );
                    last.push((b, version));
                    version += 1;
                    writes.fetch_add(1, Ordering::Relaxed);
                    if version % 16 == 0 {
                        volume.flush().unwrap();
                    }
                }
                last
            })
        })
        .collect();
    while writes.load(Ordering::Relaxed) < 50 {
        std::thread::yield_now();
    }
    let req = ReshapeRequest {
        layout: Some("left-symmetric-6".into()),
        ..ReshapeRequest::default()
    };
    let before = writes.load(Ordering::Relaxed);
    let report = live
        .reshape(
            |asm| {
                let plan = asm.reshape_check(&req, 0)?;
                asm.reshape_start(plan)
            },
            RunOptions {
                // Small checkpoints and a pace, so that the writers meet
                // the walk's window at the end many times over.
                checkpoint_bytes: 256 << 10,
                max_rate: Some(24 << 20),
                ..RunOptions::default()
            },
            &mut |_| {},
        )
        .unwrap();
    let during = writes.load(Ordering::Relaxed) - before;
    done.store(true, Ordering::Release);
    let mut last = vec![0u64; blocks as usize];
    for t in threads {
        for (b, v) in t.join().unwrap() {
            last[(b - first) as usize] = v;
        }
    }
    eprintln!("writes to the last 2 MiB during the restripe: {during}");
    assert!(
        during > 100,
        "the writers wrote during the restripe: {during}"
    );
    assert_eq!(report.new_array_bytes, size, "a restripe keeps the size");
    assert_eq!(
        live.array().geometry().layout,
        Layout::Parity(ParityLayout::LeftSymmetric6)
    );
    let check = |array: &dyn Volume, when: &str| {
        for (i, &v) in last.iter().enumerate() {
            let at = (first + i as u64) * BLOCK;
            let mut got = vec![0u8; BLOCK as usize];
            array.read_at(&mut got, at).unwrap();
            assert!(
                got == block(at, v),
                "{when}: array byte {at}: not the last version ({v}) written"
            );
        }
    };
    check(&*volume, "served after the restripe");
    live.shutdown();
    volume.flush().unwrap();
    drop(volume);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    assert!(asm.reshape().is_none());
    assert_eq!(
        asm.geometry.layout,
        Layout::Parity(ParityLayout::LeftSymmetric6)
    );
    let mut copy = asm.clone();
    let scrub = copy
        .scrub(false, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(
        scrub.mismatch_sectors, 0,
        "parity checks after the restripe"
    );
    check(&asm.array().unwrap(), "assembled again");
}
