//! Fewer members of a RAID 5 and a RAID 6 (md's backward reshape) through
//! the library: a shrink run to its end, one stopped part-way by a stop
//! request then assembled again and carried on, and a stopped shrink laid
//! out by hand as md's definition of one says (the new geometry above the
//! position, at the data offset moved up; the old one below, untouched),
//! which raidlab finishes. Every time the bytes the new members hold read
//! back exactly and the members that left are spares.

use raidlab_core::{SliceVolume, Volume};
use raidlab_layout::{Geometry, Layout, Level};
use raidlab_md::superblock::feature;
use raidlab_md::Superblock;
use raidlab_raid::array::Array;
use raidlab_raid::assemble::{create, Assembly, CreateSpec, Device, MemberState, NewMember};
use raidlab_raid::grow::{ReshapeRequest, SizeRequest};
use raidlab_raid::recovery::RunOptions;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const MIB: u64 = 1 << 20;

fn devices(n: usize) -> Vec<Device> {
    (0..n)
        .map(|i| Device {
            path: format!("m{i}"),
            volume: Arc::new(raidlab_devices::MemVolume::new(16 * MIB)),
        })
        .collect()
}

fn pattern(len: u64, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| ((i ^ seed).wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// A RAID `level` of `n` members, 64K chunk, using 14 MiB of each (room
/// after the data for the move up), filled with a pattern.
fn filled(level: Level, n: usize) -> (Vec<Device>, Vec<u8>) {
    let devs = devices(n);
    let spec = CreateSpec {
        level,
        layout: Layout::parse(level, None).unwrap(),
        chunk_bytes: 64 << 10,
        spares: 0,
        name: "shrink".into(),
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
    asm.grow_size(SizeRequest::Bytes(14 * MIB), true).unwrap();
    let data = pattern(asm.geometry.array_bytes(), n as u64);
    let array = asm.array().unwrap();
    array.write_at(&data, 0).unwrap();
    array.flush().unwrap();
    (devs, data)
}

fn read_all(devs: &[Device]) -> Vec<u8> {
    let asm = Assembly::assemble(devs.to_vec()).unwrap();
    let array = asm.array().unwrap();
    let mut got = vec![0u8; array.size() as usize];
    for (i, piece) in got.chunks_mut(3 << 17).enumerate() {
        array.read_at(piece, i as u64 * (3 << 17)).unwrap();
    }
    got
}

/// Start a shrink of `devs` to `to` members with the largest array size
/// the new members hold; the assembly, and that size.
fn started(devs: &[Device], to: usize) -> (Assembly, u64) {
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    let req = ReshapeRequest {
        raid_devices: Some(to),
        ..ReshapeRequest::default()
    };
    let g = asm.geometry;
    let holds = (g.data_disks() - (g.raid_disks - to)) as u64 * g.member_bytes;
    // Without a size the user accepts, mdadm's refusal.
    let e = asm.reshape_check(&req, 0).unwrap_err().to_string();
    assert!(e.contains("reduce the size of the array"), "{e}");
    let plan = asm.reshape_check_sized(&req, 0, Some(holds)).unwrap();
    assert!(plan.backwards && plan.gap_sectors > 0);
    asm.reshape_start(plan).unwrap();
    (asm, holds)
}

fn assert_done(devs: &[Device], to: usize, want: &[u8]) {
    let asm = Assembly::assemble(devs.to_vec()).unwrap();
    assert!(asm.reshape().is_none(), "still mid-reshape");
    assert_eq!(asm.geometry.raid_disks, to);
    for m in &asm.members {
        let role = m.role.map(|r| r < to);
        match m.device.path[1..].parse::<usize>().unwrap() < to {
            true => assert_eq!(role, Some(true), "{}", m.device.path),
            false => assert_eq!(m.state, MemberState::Spare, "{}", m.device.path),
        }
        assert_eq!(m.sb.feature_map & feature::RESHAPE_ACTIVE, 0);
    }
    assert!(
        read_all(devs) == want,
        "the data the new members hold changed"
    );
}

#[test]
fn raid5_and_raid6_shrink_to_the_end() {
    for (level, n, to) in [(Level::Raid5, 5, 4), (Level::Raid6, 6, 4)] {
        let (devs, data) = filled(level, n);
        let (mut asm, holds) = started(&devs, to);
        let report = asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
        assert!(report.backwards && !report.resumed);
        assert_eq!(report.new_array_bytes, holds);
        assert_eq!(report.spares.len(), n - to);
        assert_done(&devs, to, &data[..holds as usize]);
    }
}

static STOP: AtomicBool = AtomicBool::new(false);

#[test]
fn a_stopped_shrink_assembled_again_reads_exactly_and_carries_on() {
    for (level, n, to) in [(Level::Raid5, 4, 3), (Level::Raid6, 5, 4)] {
        let (devs, data) = filled(level, n);
        let (mut asm, holds) = started(&devs, to);
        STOP.store(false, Ordering::SeqCst);
        let opts = RunOptions {
            stop: Some(&STOP),
            step_bytes: 256 << 10,
            ..RunOptions::default()
        };
        let mut steps = 0;
        let e = asm
            .reshape_run(opts, &mut |_| {
                steps += 1;
                if steps == 2 {
                    STOP.store(true, Ordering::SeqCst);
                }
            })
            .unwrap_err();
        assert_eq!(e.kind, raidlab_core::ErrorKind::Interrupted, "{e}");
        drop(asm);
        let again = Assembly::assemble(devs.clone()).unwrap();
        let r = again.reshape().unwrap().unwrap();
        assert!(r.backwards && r.position > 0 && r.position < holds, "{r:?}");
        assert!(read_all(&devs) == data[..holds as usize], "stopped: read");
        let mut again = again;
        let report = again
            .reshape_run(RunOptions::default(), &mut |_| {})
            .unwrap();
        assert!(report.resumed && report.resumed_from == r.position);
        assert_done(&devs, to, &data[..holds as usize]);
    }
}

/// md's definition of a shrink stopped at `position`: everything from it on
/// in the new geometry, at each member's data offset plus new_offset, and
/// the old geometry below it as it was; the superblocks as at the start but
/// with the position. raidlab carries it on to the same end.
#[test]
fn a_shrink_stopped_as_md_defines_it_is_finished() {
    for (level, n, to) in [(Level::Raid5, 5, 3), (Level::Raid6, 6, 5)] {
        let (devs, data) = filled(level, n);
        let (asm, holds) = started(&devs, to);
        let r = asm.reshape().unwrap().unwrap();
        let sb = Superblock::read_from(devs[0].volume.as_ref())
            .unwrap()
            .unwrap();
        assert!(sb.new_offset > 0);
        let gap = sb.new_offset as u64 * 512;
        drop(asm);
        // The highest stripe boundary in the lower half the whole part
        // above may be written from, as md's walk would have.
        let unit = r.forward_unit();
        let position = (holds / 2 / unit..holds / unit)
            .map(|k| k * unit)
            .find(|&p| r.backward_write_limit(gap, p) <= p)
            .unwrap();
        let new: Geometry = r.new;
        let vols = devs[..to]
            .iter()
            .map(|d| {
                Some(Arc::new(
                    SliceVolume::new(
                        d.volume.clone(),
                        sb.data_offset * 512 + gap,
                        new.member_bytes,
                    )
                    .unwrap(),
                ) as Arc<dyn Volume>)
            })
            .collect();
        let above = Array::new("md's new geometry", new, vols).unwrap();
        above
            .write_at(&data[position as usize..holds as usize], position)
            .unwrap();
        above.flush().unwrap();
        for d in &devs {
            let mut s = Superblock::read_from(d.volume.as_ref()).unwrap().unwrap();
            s.reshape_position = position / 512;
            s.events += 1;
            s.write_to(d.volume.as_ref()).unwrap();
        }
        assert!(
            read_all(&devs) == data[..holds as usize],
            "md's state: read"
        );
        let mut asm = Assembly::assemble(devs.clone()).unwrap();
        let report = asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
        assert_eq!(report.resumed_from, position);
        assert_done(&devs, to, &data[..holds as usize]);
    }
}
