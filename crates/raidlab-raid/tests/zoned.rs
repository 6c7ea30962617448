//! Linear and multi-zone RAID 0 arrays, with superblocks as md writes them (each
//! member's data_size its own, the layout recorded with the RAID0_LAYOUT feature
//! bit): assembled, written through the engine, and every member sector checked
//! against where md puts it.

mod common;

use raidlab_core::Volume;
use raidlab_layout::zones::{RAID0_ALTERNATE, RAID0_ORIGINAL};
use raidlab_layout::{Level, Location};
use raidlab_md::superblock::feature;
use raidlab_md::Superblock;
use raidlab_raid::assemble::{Assembly, Device};
use raidlab_raid::lifecycle::{StartOptions, Started};

const MIB: u64 = 1 << 20;
const CHUNK: u64 = 64 << 10;

/// Members of `sizes` bytes made into an array whose superblocks say `level`,
/// `layout` (with the RAID0_LAYOUT bit when `recorded`) and `chunk_sectors`,
/// each member's data_size its whole data area, as mdadm writes them.
fn md_array(sizes: &[u64], level: i32, layout: u32, recorded: bool, chunk: u32) -> Vec<Device> {
    let devs = common::mem_array(Level::Raid0, sizes);
    for d in &devs {
        let vol = d.volume.as_ref();
        let mut sb = Superblock::read_from(vol).unwrap().unwrap();
        sb.level = level;
        sb.layout = layout;
        sb.chunksize = chunk;
        sb.data_size = vol.size() / 512 - sb.data_offset;
        if recorded {
            sb.feature_map |= feature::RAID0_LAYOUT;
        } else {
            sb.feature_map &= !feature::RAID0_LAYOUT;
        }
        sb.write_to(vol).unwrap();
    }
    devs
}

/// The assembly started for writing.
fn start_writable(asm: Assembly) -> Started {
    Started::start(
        asm,
        StartOptions {
            write: true,
            ..StartOptions::default()
        },
    )
    .unwrap()
}

/// Fill the array with each 512-byte sector holding its own array offset,
/// through a started array, and stop it cleanly.
fn fill(devs: &[Device]) -> u64 {
    let asm = Assembly::assemble(devs.to_vec()).unwrap();
    let size = asm.data_bytes();
    let started = start_writable(asm);
    assert_eq!(started.array.size(), size);
    let piece = 3 * CHUNK + 4096; // pieces that straddle chunks and zones
    let mut at = 0;
    while at < size {
        let n = piece.min(size - at);
        let buf: Vec<u8> = (0..n / 512).flat_map(|s| tag(at + s * 512)).collect();
        started.array.write_at(&buf, at).unwrap();
        at += n;
    }
    started.stop().unwrap();
    size
}

fn tag(offset: u64) -> Vec<u8> {
    let mut s = vec![0u8; 512];
    s[..8].copy_from_slice(&offset.to_le_bytes());
    s[8..16].copy_from_slice(&(!offset).to_le_bytes());
    s
}

/// The array offset a member sector holds, read from the member itself.
fn read_tag(dev: &Device, member_offset: u64) -> u64 {
    let sb = Superblock::read_from(dev.volume.as_ref()).unwrap().unwrap();
    let mut s = [0u8; 512];
    dev.volume
        .read_at(&mut s, sb.data_offset * 512 + member_offset)
        .unwrap();
    u64::from_le_bytes(s[..8].try_into().unwrap())
}

#[test]
fn multi_zone_raid0_places_chunks_where_md_does() {
    // Data areas of about 3, 1 and 5 MiB (after md's data offset): zones over
    // {0,1,2}, {0,2}, {2}.
    for (layout, name) in [(RAID0_ORIGINAL, "original"), (RAID0_ALTERNATE, "alternate")] {
        let devs = md_array(&[5 * MIB, 3 * MIB, 7 * MIB], 0, layout, true, 128);
        let asm = Assembly::assemble(devs.clone()).unwrap();
        let zones = asm.zone_map().expect("unequal members are zoned").unwrap();
        assert_eq!(zones.zones.len(), 3, "{name}");
        let rounded: Vec<u64> = devs
            .iter()
            .map(|d| {
                let sb = Superblock::read_from(d.volume.as_ref()).unwrap().unwrap();
                sb.data_size * 512 / CHUNK * CHUNK
            })
            .collect();
        assert_eq!(asm.data_bytes(), rounded.iter().sum::<u64>(), "{name}");
        assert_eq!(asm.level_name(), "raid0");
        let size = fill(&devs);
        // Every used member sector holds the array sector the map says.
        for (m, dev) in devs.iter().enumerate() {
            for off in (0..rounded[m]).step_by(4096) {
                let want = zones
                    .to_array(Location {
                        member: m,
                        offset: off,
                    })
                    .unwrap();
                assert_eq!(read_tag(dev, off), want, "{name} member {m} byte {off}");
            }
        }
        // Hand-checked points: the first chunk of zone 1 starts at member byte
        // rounded[1] on member 0 or 2, chosen by the layout.
        let z1 = &zones.zones[1];
        assert_eq!(z1.members, vec![0, 2]);
        let first_chunk = z1.start / CHUNK;
        let member = if layout == RAID0_ALTERNATE || first_chunk % 2 == 0 {
            0
        } else {
            2
        };
        assert_eq!(read_tag(&devs[member], z1.dev_start), z1.start, "{name}");
        // Read back through a fresh assembly.
        let asm = Assembly::assemble(devs.clone()).unwrap();
        let array = asm.array().unwrap();
        let mut buf = vec![0u8; 512];
        for at in [0, CHUNK * 7 + 512, z1.start, size - 512] {
            array.read_at(&mut buf, at).unwrap();
            assert_eq!(buf, tag(at), "{name} at {at}");
        }
    }
}

#[test]
fn linear_concatenates_members_in_role_order() {
    let devs = md_array(&[3 * MIB, 2 * MIB + 4096, 4 * MIB], -1, 0, false, 0);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    assert_eq!(asm.level_name(), "linear");
    let data: Vec<u64> = devs
        .iter()
        .map(|d| {
            Superblock::read_from(d.volume.as_ref())
                .unwrap()
                .unwrap()
                .data_size
                * 512
        })
        .collect();
    assert_eq!(asm.data_bytes(), data.iter().sum::<u64>());
    fill(&devs);
    assert_eq!(read_tag(&devs[0], 0), 0);
    assert_eq!(read_tag(&devs[1], 0), data[0]);
    assert_eq!(read_tag(&devs[2], 512), data[0] + data[1] + 512);
    assert_eq!(read_tag(&devs[1], data[1] - 512), data[0] + data[1] - 512);
}

#[test]
fn an_unrecorded_layout_is_refused_where_the_layouts_differ() {
    // Without the RAID0_LAYOUT bit md treats the layout as unknown.
    let devs = md_array(&[3 * MIB, 5 * MIB, 5 * MIB], 0, RAID0_ALTERNATE, false, 128);
    let err = Assembly::assemble(devs).unwrap_err();
    assert!(err.to_string().contains("records no layout"), "{err}");
    // Two zones whose second has one member: both layouts agree, so it runs.
    let devs = md_array(&[3 * MIB, 5 * MIB], 0, 0, false, 128);
    let asm = Assembly::assemble(devs).unwrap();
    assert!(asm.zone_map().unwrap().is_ok());
}

#[test]
fn a_missing_member_stops_a_zoned_array() {
    let devs = md_array(&[3 * MIB, 5 * MIB, 4 * MIB], -1, 0, false, 0);
    let asm = Assembly::assemble(devs[..2].to_vec()).unwrap();
    let err = asm.check_startable(false).unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
    assert!(asm.array().is_err());
}

#[test]
fn equal_members_stay_with_the_striping_engine() {
    let devs = md_array(&[4 * MIB, 4 * MIB], 0, RAID0_ORIGINAL, true, 128);
    let asm = Assembly::assemble(devs).unwrap();
    assert!(asm.zone_map().is_none());
    assert_eq!(asm.data_bytes(), asm.geometry.array_bytes());
}

/// `create_zoned` writes what md reads: each member keeps its own data size,
/// the level and layout (with RAID0_LAYOUT for v1) are recorded, and the
/// array assembled from those superblocks is laid out in the zones the sizes
/// make, for every metadata version.
#[test]
fn create_zoned_records_each_members_size_and_the_layout() {
    use raidlab_md::MetadataVersion;
    use raidlab_raid::assemble::{create_zoned, NewMember, ZonedSpec};
    let sizes = [5 * MIB, 3 * MIB, 7 * MIB];
    for version in [
        MetadataVersion::V1_2,
        MetadataVersion::V1_1,
        MetadataVersion::V1_0,
        MetadataVersion::V0_90,
    ] {
        for (linear, layout) in [(true, 0), (false, RAID0_ORIGINAL), (false, RAID0_ALTERNATE)] {
            let devs: Vec<Device> = sizes
                .iter()
                .enumerate()
                .map(|(i, &s)| Device {
                    path: format!("m{i}"),
                    volume: std::sync::Arc::new(raidlab_devices::MemVolume::new(s)),
                })
                .collect();
            let spec = ZonedSpec {
                linear,
                chunk_bytes: CHUNK,
                raid0_layout: layout,
                name: "z".into(),
                force: false,
            };
            let news = devs
                .iter()
                .map(|d| NewMember {
                    device: d.clone(),
                    zeroed: true,
                })
                .collect();
            let what = format!("{version} linear={linear} layout={layout}");
            let asm = create_zoned(&spec, news, version).expect(&what);
            assert_eq!(asm.level_name(), if linear { "linear" } else { "raid0" });
            let zones = asm.zone_map().expect(&what).unwrap();
            assert_eq!(zones.zones.len(), 3, "{what}");
            let mut total = 0;
            for d in &devs {
                let sb = Superblock::read_from(d.volume.as_ref()).unwrap().unwrap();
                assert_eq!(sb.version(), version, "{what}");
                assert_eq!((sb.level, sb.layout), (if linear { -1 } else { 0 }, layout));
                let v1 = version != MetadataVersion::V0_90;
                assert_eq!(
                    sb.feature_map & feature::RAID0_LAYOUT != 0,
                    !linear && v1,
                    "{what}"
                );
                // The member's own space, all of it (md rounds to the chunk).
                let end = if v1 && version != MetadataVersion::V1_0 {
                    d.volume.size() / 512
                } else {
                    sb.super_offset
                };
                assert!(sb.data_offset + sb.data_size <= end, "{what}");
                assert!(end - (sb.data_offset + sb.data_size) <= 512, "{what}");
                total += if linear {
                    sb.data_size * 512
                } else {
                    sb.data_size * 512 / CHUNK * CHUNK
                };
            }
            assert_eq!(asm.data_bytes(), total, "{what}");
            let size = fill(&devs);
            let array = Assembly::assemble(devs.clone()).unwrap().array().unwrap();
            let mut buf = vec![0u8; 512];
            for at in [0, size / 2 / 512 * 512, size - 512] {
                array.read_at(&mut buf, at).unwrap();
                assert_eq!(buf, tag(at), "{what} at {at}");
            }
        }
    }
}

/// A linear and a multi-zone RAID 0 array answer with their own family's
/// rules, not with the one-member placeholder geometry's (a RAID 1's): a
/// check is refused in the array's own words, on the assembly and on the
/// running array alike, and a trim reaches the members (md's linear and
/// RAID 0 pass a discard down), so the array reads zeros after one where
/// its members do.
#[test]
fn zoned_arrays_answer_with_their_own_rules_and_pass_trims_to_their_members() {
    use raidlab_raid::recovery::{scrub_array, RunOptions};
    let cases = [
        (
            md_array(&[3 * MIB, 2 * MIB + 4096, 4 * MIB], -1, 0, false, 0),
            "linear",
            "linear array",
        ),
        (
            md_array(&[3 * MIB, 5 * MIB, 4 * MIB], 0, RAID0_ORIGINAL, true, 128),
            "raid0",
            "RAID 0 has no redundancy to check",
        ),
    ];
    for (devs, name, why) in cases {
        let size = fill(&devs);
        let mut asm = Assembly::assemble(devs.clone()).unwrap();
        assert_eq!(asm.rules().name, name);
        let e = asm
            .scrub(false, RunOptions::default(), &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(e.contains(why), "{name}: {e}");
        let rules = asm.rules();
        let started = start_writable(asm);
        let array = &started.array;
        assert!(std::ptr::eq(array.rules(), rules), "{name}");
        let e = scrub_array(array, false, 0, RunOptions::default(), &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(e.contains(why), "{name}: running array: {e}");
        // Memory members read zeros after a trim: so does the array.
        assert!(array.discard_zeroes(), "{name}");
        // A range across the first two members' boundary (any layout).
        let (at, len) = (2 * MIB + 4096, 2 * MIB);
        array.discard(at, len).unwrap();
        let mut got = vec![1u8; len as usize];
        array.read_at(&mut got, at).unwrap();
        assert!(
            got.iter().all(|&b| b == 0),
            "{name}: not zeros after a trim"
        );
        // Around it, the data is untouched.
        let mut before = vec![0u8; 512];
        array.read_at(&mut before, at - 512).unwrap();
        assert_eq!(before, tag(at - 512), "{name}");
        let mut after = vec![0u8; 512];
        array.read_at(&mut after, at + len).unwrap();
        assert_eq!(after, tag(at + len), "{name}");
        assert!(at + len < size);
        started.stop().unwrap();
    }
}
