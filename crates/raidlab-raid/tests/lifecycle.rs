//! The start sequence every user of an array goes through (`lifecycle`), at
//! the engine level: after a crash during a small write, only the bitmap
//! chunks that write touched are dirty, and the resync reads only them.

use raidlab_core::Volume;
use raidlab_devices::MemVolume;
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_raid::assemble::{create, Assembly, CreateSpec, Device, NewMember};
use raidlab_raid::lifecycle::{StartOptions, Started};
use raidlab_raid::recovery::RunOptions;
use std::sync::Arc;

const MIB: u64 = 1 << 20;

#[test]
fn a_crash_during_a_small_write_leaves_only_its_bitmap_chunks_dirty() {
    let devs: Vec<Device> = (0..4)
        .map(|i| Device {
            path: format!("m{i}"),
            volume: Arc::new(MemVolume::new(64 * MIB)),
        })
        .collect();
    let spec = CreateSpec {
        level: Level::Raid5,
        layout: Layout::Parity(ParityLayout::LeftSymmetric),
        chunk_bytes: 64 << 10,
        spares: 0,
        name: "bm".into(),
        force: false,
        bitmap: true,
        bitmap_chunk: Some(MIB as u32),
        ppl: false,
    };
    let members = devs
        .iter()
        .map(|d| NewMember {
            device: d.clone(),
            zeroed: true,
        })
        .collect();
    create(&spec, members).unwrap();
    let asm = Assembly::assemble(devs.clone()).unwrap();
    assert_eq!(asm.bitmap.as_ref().unwrap().dirty_count(), 0);
    let started = Started::start(
        asm,
        StartOptions {
            write: true,
            ..StartOptions::default()
        },
    )
    .unwrap();
    // 8 KiB at array byte 40 MiB: member bytes 40/3 MiB.., one bitmap chunk.
    started.array.write_at(&[0x5a; 8192], 40 * MIB).unwrap();
    started.array.flush().unwrap();
    // The power goes: no stop, the superblocks say dirty.
    drop(started);
    let mut asm = Assembly::assemble(devs).unwrap();
    assert!(!asm.in_sync());
    let bm = asm.bitmap.as_ref().unwrap();
    assert_eq!(
        bm.dirty_count(),
        1,
        "{} of {} chunks dirty after an 8 KiB write",
        bm.dirty_count(),
        bm.chunks()
    );
    let report = asm.resync(RunOptions::default(), &mut |_| {}).unwrap();
    assert_eq!(
        report.bytes_scanned, MIB,
        "the resync read more than the dirty chunk"
    );
    assert!(asm.in_sync());
}
