//! Fewer members of a RAID 10 in the near and offset layouts (md's backward
//! reshape, Linux 3.5 and later) through the library: a shrink run to its
//! end, with and without room after the data (without, the move of the
//! data offset comes out of the component size, as mdadm does it); one
//! stopped at several points by a stop request, assembled again, read, and
//! carried on; one stopped as md's definition says (the new geometry above
//! the position, at the data offset moved up; the old one below), also at a
//! position inside a chunk as md records them, which raidlab finishes; and
//! md's refusals, with nothing written. Every time the bytes the fewer
//! members hold read back exactly, the copies agree (check: 0 mismatches)
//! and the members that left are spares.

use raidlab_core::{SliceVolume, Volume};
use raidlab_layout::{Geometry, Layout, Level};
use raidlab_md::superblock::feature;
use raidlab_md::Superblock;
use raidlab_raid::array::Array;
use raidlab_raid::assemble::{create, Assembly, CreateSpec, Device, MemberState, NewMember};
use raidlab_raid::grow::ReshapeRequest;
use raidlab_raid::recovery::RunOptions;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const MIB: u64 = 1 << 20;
const CHUNK: u64 = 64 << 10;

fn devices(n: usize) -> Vec<Device> {
    (0..n)
        .map(|i| Device {
            path: format!("m{i}"),
            volume: Arc::new(raidlab_devices::MemVolume::new(8 * MIB)),
        })
        .collect()
}

fn pattern(len: u64, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| ((i ^ seed).wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// A RAID 10 in `layout` ("n2", "o2") of `n` members, 64K chunk, filled
/// with a pattern. `room`: the component size lowered by four chunks
/// first, so the move up fits after the data (as on members larger than
/// the array uses); else all of each member, as mdadm creates it.
fn filled(layout: &str, n: usize, room: bool) -> (Vec<Device>, Vec<u8>) {
    let devs = devices(n);
    let spec = CreateSpec {
        level: Level::Raid10,
        layout: Layout::parse(Level::Raid10, Some(layout)).unwrap(),
        chunk_bytes: CHUNK,
        spares: 0,
        name: "shrink10".into(),
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
    drop(create(&spec, members).unwrap());
    if room {
        for d in &devs {
            let mut s = Superblock::read_from(d.volume.as_ref()).unwrap().unwrap();
            s.size -= 4 * CHUNK / 512;
            s.write_to(d.volume.as_ref()).unwrap();
        }
    }
    let asm = Assembly::assemble(devs.clone()).unwrap();
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

fn request(to: usize) -> ReshapeRequest {
    ReshapeRequest {
        raid_devices: Some(to),
        ..ReshapeRequest::default()
    }
}

/// The most `to` members hold, from mdadm's refusal without a size (it
/// names the `--array-size` to give).
fn holds(asm: &Assembly, to: usize) -> u64 {
    let e = asm.reshape_check(&request(to), 0).unwrap_err().to_string();
    assert!(e.contains("reduce the size of the array"), "{e}");
    let k = e.rsplit("`--array-size ").next().unwrap();
    let k: u64 = k[..k.find('K').unwrap()].parse().unwrap();
    k * 1024
}

/// Start a shrink of `devs` to `to` members with the largest array size
/// they hold; the assembly, that size, and the data offset before.
fn started(devs: &[Device], to: usize) -> (Assembly, u64, u64) {
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    let size = holds(&asm, to);
    let offset = asm.members[0].sb.data_offset;
    let plan = asm
        .reshape_check_sized(&request(to), 0, Some(size))
        .unwrap();
    assert!(plan.backwards && plan.gap_sectors > 0);
    asm.reshape_start(plan).unwrap();
    let sb = &asm.members[0].sb;
    assert_eq!(sb.delta_disks, to as i32 - devs.len() as i32);
    assert_eq!(sb.raid_disks, to as u32);
    assert!(sb.new_offset > 0 && sb.feature_map & feature::NEW_OFFSET != 0);
    // md writes RESHAPE_BACKWARDS only when the count stays.
    assert_eq!(sb.feature_map & feature::RESHAPE_BACKWARDS, 0);
    assert_eq!(sb.reshape_position * 512, size);
    (asm, size, offset)
}

fn assert_done(devs: &[Device], to: usize, want: &[u8], old_offset: u64) {
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    assert!(asm.reshape().is_none(), "still mid-reshape");
    assert_eq!(asm.geometry.raid_disks, to);
    assert_eq!(asm.geometry.level, Level::Raid10);
    for m in &asm.members {
        match m.device.path[1..].parse::<usize>().unwrap() < to {
            true => assert_eq!(m.role.map(|r| r < to), Some(true), "{}", m.device.path),
            false => assert_eq!(m.state, MemberState::Spare, "{}", m.device.path),
        }
        let f = m.sb.feature_map;
        assert_eq!(f & (feature::RESHAPE_ACTIVE | feature::NEW_OFFSET), 0);
        assert_eq!((m.sb.delta_disks, m.sb.new_offset), (0, 0));
        assert!(m.sb.data_offset > old_offset, "data offset not moved up");
    }
    assert_eq!(asm.geometry.array_bytes(), want.len() as u64);
    assert!(
        read_all(devs) == want,
        "the data the fewer members hold changed"
    );
    let check = asm
        .scrub(false, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(check.mismatch_sectors, 0, "copies differ after the shrink");
}

#[test]
fn near_and_offset_shrink_to_the_end_with_and_without_room_after_the_data() {
    for (layout, n, to, room) in [
        ("n2", 5, 4, false),
        ("n2", 5, 4, true),
        ("o2", 4, 3, false),
        ("o2", 4, 3, true),
        ("n2", 4, 2, false),
    ] {
        let (devs, data) = filled(layout, n, room);
        let before = Superblock::read_from(devs[0].volume.as_ref())
            .unwrap()
            .unwrap();
        let (mut asm, size, offset) = started(&devs, to);
        let sb = &asm.members[0].sb;
        // Without room after the data md takes the move out of the
        // component size; with it, the size stays.
        assert_eq!(sb.size == before.size, room, "{layout} {n}->{to}");
        let report = asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
        assert!(report.backwards && !report.resumed);
        assert_eq!(report.new_array_bytes, size);
        assert_eq!(report.spares.len(), n - to);
        assert_done(&devs, to, &data[..size as usize], offset);
    }
}

static STOP: AtomicBool = AtomicBool::new(false);

#[test]
fn a_stopped_shrink_assembled_again_reads_exactly_and_carries_on() {
    for (layout, n, to, stops) in [("n2", 5, 4, &[1, 4][..]), ("o2", 4, 3, &[2, 3][..])] {
        let (devs, data) = filled(layout, n, false);
        let (asm, size, offset) = started(&devs, to);
        let want = &data[..size as usize];
        let mut asm = asm;
        let mut last = size;
        for &stop_at in stops {
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
                    if steps == stop_at {
                        STOP.store(true, Ordering::SeqCst);
                    }
                })
                .unwrap_err();
            assert_eq!(e.kind, raidlab_core::ErrorKind::Interrupted, "{e}");
            drop(asm);
            asm = Assembly::assemble(devs.clone()).unwrap();
            let r = asm.reshape().unwrap().unwrap();
            assert!(r.backwards && r.position > 0 && r.position < last, "{r:?}");
            last = r.position;
            assert!(read_all(&devs) == want, "{layout}: stopped at {last}: read");
        }
        let report = asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
        assert!(report.resumed && report.resumed_from == last);
        assert_done(&devs, to, want, offset);
    }
}

/// md's definition of a RAID 10 shrink stopped at `position`: everything
/// from it on in the new geometry, at each member's data offset plus
/// new_offset, and the old geometry below it as it was; the superblocks as
/// at the start but with the position (md's RAID 10 walk records positions
/// inside a chunk too). raidlab carries it on to the same end.
#[test]
fn a_shrink_stopped_as_md_defines_it_is_finished() {
    for (layout, n, to, inside) in [("n2", 5, 4, false), ("o2", 4, 3, true), ("n2", 3, 2, true)] {
        let (devs, data) = filled(layout, n, false);
        let (asm, size, offset) = started(&devs, to);
        let r = asm.reshape().unwrap().unwrap();
        let sb = Superblock::read_from(devs[0].volume.as_ref())
            .unwrap()
            .unwrap();
        let gap = sb.new_offset as u64 * 512;
        drop(asm);
        // A position in the lower half the whole part above may be
        // written from, as md's walk would have.
        let half = if inside { CHUNK / 2 } else { 0 };
        let position = (size / 2 / CHUNK..size / CHUNK)
            .map(|k| k * CHUNK + half)
            .find(|&p| r.backward_write_limit(gap, p) <= p / CHUNK * CHUNK)
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
            .write_at(&data[position as usize..size as usize], position)
            .unwrap();
        above.flush().unwrap();
        for d in &devs {
            let mut s = Superblock::read_from(d.volume.as_ref()).unwrap().unwrap();
            s.reshape_position = position / 512;
            s.events += 1;
            s.write_to(d.volume.as_ref()).unwrap();
        }
        let want = &data[..size as usize];
        assert!(read_all(&devs) == want, "md's state: read");
        let mut asm = Assembly::assemble(devs.clone()).unwrap();
        let report = asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
        assert_eq!(report.resumed_from, position);
        assert_done(&devs, to, want, offset);
    }
}

fn snapshot(devs: &[Device]) -> Vec<Vec<u8>> {
    devs.iter()
        .map(|d| {
            let mut b = vec![0u8; d.volume.size() as usize];
            d.volume.read_at(&mut b, 0).unwrap();
            b
        })
        .collect()
}

#[test]
fn md_s_refusals_say_why_and_write_nothing() {
    let (devs, _) = filled("n2", 4, false);
    let before = snapshot(&devs);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    let fits = holds(&asm, 3);
    let refuse = |req: &ReshapeRequest, size: Option<u64>, want: &str| {
        let e = asm
            .reshape_check_sized(req, 0, size)
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "want {want:?}: {e}");
        assert!(e.contains("nothing was changed"), "{e}");
    };
    refuse(&request(3), None, "use --grow --array-size first");
    refuse(&request(3), Some(fits + CHUNK), "does not fit in 3 members");
    refuse(
        &request(3),
        Some(fits - 1024),
        "not a whole number of 64 KiB chunks",
    );
    refuse(&request(1), Some(CHUNK), "needs at least 2 members");
    // Fewer members with a new chunk or layout is one reshape, as md makes
    // it; the move up is then a row of the taller geometry (two where the
    // walk needs them), so the same members hold less than `fits`, and
    // what the refusal names is accepted.
    for changed in [
        ReshapeRequest {
            chunk_bytes: Some(128 << 10),
            ..request(3)
        },
        ReshapeRequest {
            layout: Some("o2".into()),
            ..request(3)
        },
    ] {
        refuse(&changed, Some(fits), "does not fit in 3 members");
        let most = asm.raid10_shrink_holds(&changed).unwrap();
        assert!(most < fits, "{changed:?}: {most} of {fits}");
        let plan = asm.reshape_check_sized(&changed, 0, Some(most)).unwrap();
        assert_eq!(
            (plan.new_raid_devices, plan.backwards),
            (3, true),
            "{plan:?}"
        );
    }
    drop(asm);
    assert!(snapshot(&devs) == before, "a refusal wrote");

    // The far layout: md never reshapes it.
    let (devs, _) = filled("f2", 4, false);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    let e = asm
        .reshape_check_sized(&request(3), 0, Some(CHUNK))
        .unwrap_err()
        .to_string();
    assert!(e.contains("Cannot reshape RAID10 in far-mode"), "{e}");
}
