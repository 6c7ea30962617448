//! `create_placed`: mdadm's `--data-offset` and `--size` (and no bad-block
//! log) for a caller that chooses them, on terabyte members held sparse in
//! memory; what it refuses before writing anything.

use raidlab_devices::SparseMemVolume;
use raidlab_layout::{Layout, Level};
use raidlab_md::{MetadataVersion, Superblock};
use raidlab_raid::assemble::{create_placed, Assembly, CreateSpec, Device, NewMember, Placement};
use raidlab_raid::exec::InOrder;
use std::sync::Arc;

const TB: u64 = 1 << 40;

fn members(n: usize, size: u64) -> Vec<NewMember> {
    sparse(n, size)
        .into_iter()
        .enumerate()
        .map(|(i, v)| NewMember {
            device: Device {
                path: format!("m{i}"),
                volume: v,
            },
            zeroed: true,
        })
        .collect()
}

fn sparse(n: usize, size: u64) -> Vec<Arc<SparseMemVolume>> {
    (0..n)
        .map(|i| Arc::new(SparseMemVolume::new(format!("m{i}"), size)))
        .collect()
}

fn spec(level: Level, bitmap_chunk: Option<u32>) -> CreateSpec {
    CreateSpec {
        level,
        layout: Layout::parse(level, None).unwrap(),
        chunk_bytes: 512 << 10,
        spares: 0,
        name: "placed".into(),
        force: false,
        bitmap: bitmap_chunk.is_some(),
        bitmap_chunk,
        ppl: false,
    }
}

fn place(data_offset: u64, member_bytes: u64, bad_block_log: bool) -> Option<Placement> {
    Some(Placement {
        data_offset,
        member_bytes,
        bad_block_log,
    })
}

#[test]
fn the_data_lies_where_asked_on_terabyte_members_and_assembles_so() {
    let vols = sparse(4, 4 * TB);
    let devices: Vec<Device> = vols
        .iter()
        .enumerate()
        .map(|(i, v)| Device {
            path: format!("m{i}"),
            volume: v.clone(),
        })
        .collect();
    let m = devices
        .iter()
        .map(|d| NewMember {
            device: d.clone(),
            zeroed: true,
        })
        .collect();
    let member_bytes = 3 * TB + (512 << 10) * 3 + 4096; // rounded down to a chunk
    let asm = create_placed(
        &spec(Level::Raid5, Some(64 << 20)),
        m,
        None,
        MetadataVersion::V1_2,
        Arc::new(InOrder),
        place(1 << 20, member_bytes, false),
    )
    .unwrap();
    assert_eq!(asm.geometry.member_bytes, 3 * TB + (512 << 10) * 3);
    for d in &devices {
        let sb = Superblock::read_from(d.volume.as_ref()).unwrap().unwrap();
        assert_eq!(sb.data_offset, (1 << 20) / 512, "{}", d.path);
        assert_eq!(sb.size, asm.geometry.member_bytes / 512, "{}", d.path);
        assert_eq!(sb.bblog_size, 0, "{}: no bad-block log asked for", d.path);
        assert_eq!(sb.bblog_offset, 0, "{}", d.path);
        assert!(sb.is_clean(), "{}: zeroed members start in sync", d.path);
    }
    // Read back as md would: the same geometry, no bad-block log.
    let again = Assembly::assemble(devices.clone()).unwrap();
    assert_eq!(again.geometry, asm.geometry);
    assert_eq!(again.bad_block_logs(), vec![false; 4]);
    for v in &vols {
        // Only the metadata pages are held, not terabytes.
        assert!(v.held_bytes() <= 64 << 10, "{}", v.held_bytes());
    }
    // mdadm's own offset for a 4 TB member is far more than 1 MiB, and
    // mdadm keeps a bad-block log: what `create_placed` replaced.
    let default = create_placed(
        &CreateSpec {
            force: true,
            ..spec(Level::Raid5, None)
        },
        members(4, 4 * TB),
        None,
        MetadataVersion::V1_2,
        Arc::new(InOrder),
        None,
    )
    .unwrap();
    let sb = &default.members[0].sb;
    assert!(sb.data_offset > (1 << 20) / 512, "{}", sb.data_offset);
    assert!(sb.bblog_size > 0);
}

#[test]
fn a_placed_bad_block_log_is_kept_when_asked() {
    let asm = create_placed(
        &spec(Level::Raid1, None),
        members(2, 8 << 30),
        None,
        MetadataVersion::V1_2,
        Arc::new(InOrder),
        place(1 << 20, 4 << 30, true),
    )
    .unwrap();
    assert_eq!(asm.bad_block_logs(), vec![true; 2]);
    assert_eq!(asm.members[0].sb.data_offset, 2048);
}

#[test]
fn what_a_placement_cannot_hold_is_refused_before_anything_is_written() {
    let refuse = |version, p: Option<Placement>, bitmap: Option<u32>| {
        let m = members(3, 20 << 30);
        let vols: Vec<_> = m.iter().map(|m| m.device.volume.clone()).collect();
        let e = create_placed(
            &spec(Level::Raid5, bitmap),
            m,
            None,
            version,
            Arc::new(InOrder),
            p,
        )
        .unwrap_err()
        .to_string();
        for v in vols {
            assert!(
                Superblock::read_from(v.as_ref()).unwrap().is_none(),
                "nothing written: {e}"
            );
        }
        e
    };
    let e = refuse(
        MetadataVersion::V1_0,
        place(1 << 20, 512 << 20, false),
        None,
    );
    assert!(e.contains("metadata 1.1 and 1.2 only"), "{e}");
    let e = refuse(MetadataVersion::V1_2, place(1000, 512 << 20, false), None);
    assert!(e.contains("whole number of 4 KiB"), "{e}");
    let e = refuse(MetadataVersion::V1_2, place(1 << 20, 20 << 30, false), None);
    assert!(e.contains("the smallest member holds"), "{e}");
    // 64 KiB bitmap chunks of a 16 GiB member: 256 Ki bits, 32 KiB of
    // bitmap (mdadm leaves it 64 KiB there), past a data offset of 16 KiB.
    let e = refuse(
        MetadataVersion::V1_2,
        place(16 << 10, 16 << 30, false),
        Some(64 << 10),
    );
    assert!(e.contains("does not fit"), "{e}");
}
