//! Metadata 0.90 with md's internal bitmap (right after the superblock, the
//! superblock's state bit saying it is there): created by raidlab, found again
//! on reassembly, and honoured: after an unclean stop a resync covers only
//! the chunks the bitmap marks, then clears them.

use raidlab_core::Volume;
use raidlab_devices::MemVolume;
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_md::{MetadataVersion, Superblock};
use raidlab_raid::assemble::{create_with_metadata, Assembly, CreateSpec, Device, NewMember};
use raidlab_raid::recovery::RunOptions;
use std::sync::Arc;

const MEMBER: u64 = 8 << 20;

#[test]
fn a_090_bitmap_limits_the_resync_after_a_crash_to_what_was_written() {
    for (level, layout, n) in [
        (Level::Raid1, Layout::Plain, 2),
        (Level::Raid5, Layout::Parity(ParityLayout::LeftSymmetric), 4),
    ] {
        let devs: Vec<Device> = (0..n)
            .map(|i| Device {
                path: format!("m{i}"),
                volume: Arc::new(MemVolume::new(MEMBER)),
            })
            .collect();
        let spec = CreateSpec {
            level,
            layout,
            chunk_bytes: if level == Level::Raid1 { 0 } else { 64 << 10 },
            spares: 0,
            name: String::new(),
            force: false,
            bitmap: true,
            bitmap_chunk: Some(64 << 10),
            ppl: false,
        };
        let members = devs
            .iter()
            .map(|d| NewMember {
                device: d.clone(),
                zeroed: true,
            })
            .collect();
        let mut asm = create_with_metadata(&spec, members, None, MetadataVersion::V0_90).unwrap();
        let sb = Superblock::read_from(devs[0].volume.as_ref())
            .unwrap()
            .unwrap();
        assert!(sb.v0_90.is_some() && sb.bitmap_offset == 8, "{level}");
        assert_eq!(asm.bitmap.as_ref().unwrap().dirty_count(), 0, "{level}");
        assert!(asm.mark_dirty().unwrap());
        let array = asm.array().unwrap();
        array.write_at(&[7u8; 5000], 100_000).unwrap();
        // "Crash": no mark_clean; a new process reassembles from the members.
        drop(array);
        let mut again = Assembly::assemble(devs.clone()).unwrap();
        assert!(!again.in_sync(), "{level}: unclean stop seen");
        let dirty = again.bitmap.as_ref().unwrap().dirty_count();
        assert!((1..=2).contains(&dirty), "{level}: {dirty} dirty chunks");
        let report = again.resync(RunOptions::default(), &mut |_| {}).unwrap();
        assert!(report.bytes_scanned > 0, "{level}");
        // A whole resync scans the 8 MiB of every member's data area.
        assert!(
            report.bytes_scanned < again.geometry.member_bytes / 8,
            "{level}: scanned {} bytes for {dirty} dirty 64 KiB chunks",
            report.bytes_scanned
        );
        let after = Assembly::assemble(devs.clone()).unwrap();
        assert!(after.in_sync(), "{level}");
        assert_eq!(after.bitmap.as_ref().unwrap().dirty_count(), 0, "{level}");
        let mut b = vec![0u8; 5000];
        after.array().unwrap().read_at(&mut b, 100_000).unwrap();
        assert!(b.iter().all(|&x| x == 7), "{level}");
    }
}
