//! md's RAID 5 to RAID 6 conversion, read by raidlab: an array left in a "-6"
//! layout (`mdadm --grow --level=6 --layout=preserve`: the RAID 5 on the first
//! n-1 members, Q on the last) and one stopped in the middle of the reshape
//! from a "-6" layout to the ordinary RAID 6 layout, read on both sides of the
//! position, complete and with any two members missing.
//!
//! The states here are WRITTEN BY RAIDLAB'S OWN CODE (an array of each
//! geometry over the same members, md's reshape fields in the superblocks);
//! that the "-6" placement is md's is shown against a reference written from
//! md's definitions in raidlab-layout's tests.

mod md090;

use raidlab_core::Volume;
use raidlab_layout::{Geometry, Layout, Level, ParityLayout};
use raidlab_md::superblock::feature;
use raidlab_md::{MetadataVersion, Superblock};
use raidlab_raid::array::Array;
use raidlab_raid::assemble::{create_with_metadata, Assembly, CreateSpec, Device, NewMember};
use std::sync::Arc;

const MIB: u64 = 1 << 20;
const CHUNK: u64 = 64 << 10;

fn devices(n: usize, bytes: u64) -> Vec<Device> {
    (0..n)
        .map(|i| Device {
            path: format!("m{i}"),
            volume: Arc::new(raidlab_devices::MemVolume::new(bytes)),
        })
        .collect()
}

fn pattern(len: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect()
}

/// A 5-member RAID 6 in `layout`, filled with the pattern. Returns the
/// members and the pattern.
fn filled(version: MetadataVersion, layout: ParityLayout) -> (Vec<Device>, Vec<u8>) {
    let devs = devices(5, 8 * MIB);
    let spec = CreateSpec {
        level: Level::Raid6,
        layout: Layout::Parity(layout),
        chunk_bytes: CHUNK,
        spares: 0,
        name: "convert".into(),
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
    let asm = create_with_metadata(&spec, members, None, version).unwrap();
    let data = pattern(asm.geometry.array_bytes());
    asm.array().unwrap().write_at(&data, 0).unwrap();
    (devs, data)
}

/// md's reshape from left-symmetric-6 to left-symmetric stopped at
/// `position`: the part below it rewritten in the new layout, md's reshape
/// fields in every superblock.
fn stopped_conversion(version: MetadataVersion, position: u64) -> (Vec<Device>, Vec<u8>) {
    let (devs, data) = filled(version, ParityLayout::LeftSymmetric6);
    let sb0 = Superblock::read_from(devs[0].volume.as_ref())
        .unwrap()
        .unwrap();
    let new = Geometry::from_md(6, 2, sb0.chunksize, 5, sb0.size).unwrap();
    let area = |d: &Device| -> Arc<dyn Volume> {
        Arc::new(
            raidlab_core::SliceVolume::new(
                d.volume.clone(),
                sb0.data_offset * 512,
                new.member_bytes,
            )
            .unwrap(),
        )
    };
    let new_array = Array::new("new", new, devs.iter().map(|d| Some(area(d))).collect()).unwrap();
    new_array.write_at(&data[..position as usize], 0).unwrap();
    for d in &devs {
        let mut sb = Superblock::read_from(d.volume.as_ref()).unwrap().unwrap();
        sb.feature_map |= feature::RESHAPE_ACTIVE;
        sb.delta_disks = 0;
        sb.new_level = 6;
        sb.new_layout = 2;
        sb.new_chunk = sb.chunksize;
        sb.reshape_position = position / 512;
        sb.events += 1;
        sb.write_to(d.volume.as_ref()).unwrap();
    }
    (devs, data)
}

/// Reads the whole array in pieces that straddle stripes and the position.
fn read_all(devs: Vec<Device>) -> Vec<u8> {
    let asm = Assembly::assemble(devs).unwrap();
    let array = asm.array().unwrap();
    let mut got = vec![0u8; array.size() as usize];
    for (i, piece) in got.chunks_mut(96 << 10).enumerate() {
        array.read_at(piece, (i as u64) * (96 << 10)).unwrap();
    }
    got
}

/// Complete, and with every pair of members left out (RAID 6 survives two).
fn reads_everywhere(devs: &[Device], want: &[u8], what: &str) {
    assert_eq!(read_all(devs.to_vec()), want, "{what}, complete");
    for a in 0..devs.len() {
        for b in a + 1..devs.len() {
            let rest: Vec<Device> = devs
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != a && *i != b)
                .map(|(_, d)| d.clone())
                .collect();
            assert_eq!(read_all(rest), want, "{what}, members {a} and {b} left out");
        }
    }
}

#[test]
fn a_preserved_conversion_layout_is_the_raid5_with_q_on_the_last_member() {
    for version in [MetadataVersion::V1_2, MetadataVersion::V0_90] {
        let (devs, data) = filled(version, ParityLayout::LeftSymmetric6);
        let sb = Superblock::read_from(devs[0].volume.as_ref())
            .unwrap()
            .unwrap();
        assert_eq!((sb.level, sb.layout), (6, 18));
        // Members 0-3 alone are the left-symmetric RAID 5 of 4 md converted:
        // its data needs nothing from member 4.
        let r5 = Geometry::from_md(5, 2, sb.chunksize, 4, sb.size).unwrap();
        let areas = devs[..4]
            .iter()
            .map(|d| {
                Some(Arc::new(
                    raidlab_core::SliceVolume::new(
                        d.volume.clone(),
                        sb.data_offset * 512,
                        r5.member_bytes,
                    )
                    .unwrap(),
                ) as Arc<dyn Volume>)
            })
            .collect();
        let raid5 = Array::new("raid5", r5, areas).unwrap();
        let mut got = vec![0u8; data.len()];
        raid5.read_at(&mut got, 0).unwrap();
        assert!(got == data, "{version}: members 0-3 are not the RAID 5");
        reads_everywhere(&devs, &data, &format!("left-symmetric-6, {version}"));
    }
}

#[test]
fn a_conversion_stopped_mid_reshape_reads_on_both_sides_of_the_position() {
    // 10 full stripes (3 data chunks each) reshaped.
    let position = 10 * 3 * CHUNK;
    for version in [MetadataVersion::V1_2, MetadataVersion::V0_90] {
        let (devs, data) = stopped_conversion(version, position);
        let asm = Assembly::assemble(devs.clone()).unwrap();
        let r = asm.reshape().unwrap().unwrap();
        assert_eq!(r.position, position);
        assert_eq!(r.old.layout, Layout::Parity(ParityLayout::LeftSymmetric6));
        assert_eq!(r.new.layout, Layout::Parity(ParityLayout::LeftSymmetric));
        if version == MetadataVersion::V0_90 {
            // md's rule: a 0.90 restripe over the same members runs in
            // place through a backup file and is not read without it (this
            // state has none to give).
            drop(asm);
            md090::read_refused(&devs);
            continue;
        }
        reads_everywhere(&devs, &data, &format!("mid-conversion, {version}"));
    }
}

#[test]
fn the_conversion_layout_decides_and_a_wrong_one_reads_wrong() {
    // The test can fail: the same members read as if the old side were an
    // ordinary left-symmetric RAID 6 (Q rotating) give other bytes.
    let (devs, data) = stopped_conversion(MetadataVersion::V1_2, 3 * CHUNK);
    for d in &devs {
        let mut sb = Superblock::read_from(d.volume.as_ref()).unwrap().unwrap();
        sb.layout = 2;
        sb.write_to(d.volume.as_ref()).unwrap();
    }
    assert_ne!(read_all(devs), data);
}
