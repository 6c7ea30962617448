//! Fewer members of a RAID 0 through the library, as md makes them: taken
//! over as a RAID 4 of one member more with its parity role empty, shrunk
//! backwards (the data offset moved up), then taken back as a RAID 0, the
//! members that leave removed. Run to its end, and stopped by a stop
//! request, assembled again and carried on: every time the bytes the kept
//! members hold read back exactly, and what is recorded mid-way is md's
//! RAID 4 reshape. Also the one RAID 0 grow here: its end leaves the
//! array in sync, as md's takeover to RAID 0 does.

use raidlab_core::{Layer, Volume};
use raidlab_layout::{Layout, Level};
use raidlab_md::superblock::feature;
use raidlab_md::Superblock;
use raidlab_raid::assemble::{create, Assembly, CreateSpec, Device, MemberState, NewMember};
use raidlab_raid::grow::ReshapeRequest;
use raidlab_raid::recovery::RunOptions;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

const MIB: u64 = 1 << 20;

fn pattern(len: u64, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| ((i ^ seed).wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// A RAID 0 of `n` 16 MiB members, 64K chunk, each using 2 MiB less than it
/// has (as a member grown after the array was made: md keeps a RAID 0
/// member's data size), filled with a pattern.
fn filled(n: usize) -> (Vec<Device>, Vec<u8>) {
    let devs: Vec<Device> = (0..n)
        .map(|i| Device {
            path: format!("m{i}"),
            volume: Arc::new(raidlab_devices::MemVolume::new(16 * MIB)),
        })
        .collect();
    let spec = CreateSpec {
        level: Level::Raid0,
        layout: Layout::Plain,
        chunk_bytes: 64 << 10,
        spares: 0,
        name: "shrink0".into(),
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
    for d in &devs {
        let v = d.volume.as_ref();
        let mut sb = Superblock::read_from(v).unwrap().unwrap();
        sb.data_size -= 2 * MIB / 512;
        sb.size = sb.size.min(sb.data_size);
        sb.write_to(v).unwrap();
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
    array.read_at(&mut got, 0).unwrap();
    got
}

/// Start a shrink of `devs` to `to` members with the largest array size
/// they hold; the assembly and that size.
fn started(devs: &[Device], to: usize) -> (Assembly, u64) {
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    let req = ReshapeRequest {
        raid_devices: Some(to),
        ..ReshapeRequest::default()
    };
    let holds = to as u64 * asm.geometry.member_bytes;
    let e = asm.reshape_check(&req, 0).unwrap_err().to_string();
    assert!(e.contains("reduce the size of the array"), "{e}");
    let e = asm
        .reshape_check_sized(&req, 0, Some(holds + 1024))
        .unwrap_err()
        .to_string();
    assert!(e.contains(&format!("does not fit in {to} members")), "{e}");
    let plan = asm.reshape_check_sized(&req, 0, Some(holds)).unwrap();
    assert!(plan.backwards && plan.gap_sectors > 0);
    asm.reshape_start(plan).unwrap();
    (asm, holds)
}

/// Done: a RAID 0 of `to`, nothing recorded, the data exact; the members
/// that left are out of the array's roles, their own superblocks as md
/// leaves them (the new parity member: its role in the RAID 4; the others
/// spare).
fn assert_done(devs: &[Device], to: usize, want: &[u8]) {
    let asm = Assembly::assemble(devs.to_vec()).unwrap();
    assert!(asm.reshape().is_none(), "still mid-reshape");
    assert_eq!(asm.geometry.level, Level::Raid0);
    assert_eq!(asm.geometry.raid_disks, to);
    for m in &asm.members {
        let k = m.device.path[1..].parse::<usize>().unwrap();
        if k < to {
            assert_eq!(m.role, Some(k), "{}", m.device.path);
            assert_eq!(m.state, MemberState::Active, "{}", m.device.path);
            assert_eq!(m.sb.level, 0);
            assert_eq!(m.sb.feature_map & feature::RESHAPE_ACTIVE, 0);
        } else {
            // The parity member claims its RAID 4 role at the events
            // before: out of date, removed. The others' own superblocks say
            // spare, which an assembly takes as one whatever its events (as
            // md takes a spare).
            let state = if k == to {
                MemberState::Removed
            } else {
                MemberState::Spare
            };
            assert_eq!(m.state, state, "{}", m.device.path);
            let own = Superblock::read_from(devs[k].volume.as_ref())
                .unwrap()
                .unwrap();
            assert_eq!(own.level, 4, "{}", m.device.path);
            assert_eq!(own.feature_map & feature::RESHAPE_ACTIVE, 0);
            let role = own.dev_roles[own.dev_number as usize];
            if k == to {
                assert_eq!(role as usize, to, "the parity member's own role");
            } else {
                assert_eq!(role, raidlab_md::ROLE_SPARE, "{}", m.device.path);
            }
        }
    }
    assert!(
        read_all(devs) == want,
        "the data the kept members hold changed"
    );
}

#[test]
fn raid0_shrinks_run_to_the_end() {
    for (n, to) in [(4, 3), (5, 2), (3, 1)] {
        let (devs, data) = filled(n);
        let (mut asm, holds) = started(&devs, to);
        let t = Superblock::read_from(devs[0].volume.as_ref())
            .unwrap()
            .unwrap();
        // md's RAID 4 reshape, as the takeover leaves it: parity-last, one
        // role more than the RAID 0's, going backwards by delta_disks.
        assert_eq!((t.level, t.layout, t.raid_disks), (4, 5, to as u32 + 1));
        assert_eq!(t.delta_disks, to as i32 - n as i32);
        assert!(t.new_offset > 0);
        let report = asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
        assert_eq!((report.old_raid_devices, report.new_raid_devices), (n, to));
        assert!(report.backwards && report.spares.is_empty());
        assert_eq!(report.removed.len(), n - to);
        assert_done(&devs, to, &data[..holds as usize]);
    }
}

/// A RAID 0 restripe onto more members that ran dirty (served, or resumed
/// after a cut) ends as a RAID 0 in sync, as md's takeover to RAID 0 leaves
/// it ("make sure it will be not marked as dirty"): a RAID 0 has nothing to
/// resync, and nothing would ever clear the mark. (Fewer members end
/// through `raid0_takeover_raid45`, which always did.)
#[test]
fn a_dirty_raid0_grow_ends_in_sync() {
    let (mut devs, data) = filled(3);
    devs.push(Device {
        path: "m3".into(),
        volume: Arc::new(raidlab_devices::MemVolume::new(16 * MIB)),
    });
    let mut asm = Assembly::assemble(devs[..3].to_vec()).unwrap();
    asm.add(devs[3].clone(), false).unwrap();
    let req = ReshapeRequest {
        raid_devices: Some(4),
        ..ReshapeRequest::default()
    };
    let plan = asm.reshape_check(&req, 0).unwrap();
    asm.reshape_start(plan).unwrap();
    asm.mark_dirty().unwrap();
    assert!(!asm.in_sync(), "the RAID 4 it runs as is marked dirty");
    asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
    drop(asm);
    for d in &devs {
        let sb = Superblock::read_from(d.volume.as_ref()).unwrap().unwrap();
        assert_eq!((sb.level, sb.raid_disks), (0, 4), "{}", d.path);
        assert_eq!(sb.resync_offset, u64::MAX, "{}: resync_offset", d.path);
    }
    let asm = Assembly::assemble(devs.clone()).unwrap();
    assert!(asm.in_sync());
    assert!(read_all(&devs)[..data.len()] == data[..]);
}

static STOP: AtomicBool = AtomicBool::new(false);

#[test]
fn a_stopped_raid0_shrink_reads_exactly_and_carries_on() {
    let (devs, data) = filled(5);
    let (mut asm, holds) = started(&devs, 3);
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
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    let r = asm.reshape().unwrap().unwrap();
    assert!(r.backwards && r.position > 0 && r.position < holds);
    assert!(asm.raid0_restripe(&r));
    assert!(read_all(&devs) == data[..holds as usize]);
    let report = asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
    assert!(report.resumed && report.resumed_from == r.position);
    assert_done(&devs, 3, &data[..holds as usize]);
}

/// A member whose writes fail once the run's budget is spent (the power
/// gone: what was written before stays, nothing after).
struct Budget {
    below: Arc<dyn Volume>,
    left: Arc<AtomicI64>,
}

impl Budget {
    fn spend(&self) -> raidlab_core::Result<()> {
        if self.left.fetch_sub(1, Ordering::SeqCst) <= 0 {
            return Err(raidlab_core::Error::new(
                raidlab_core::ErrorKind::Io,
                raidlab_core::Op::Write,
                "the power is gone",
            ));
        }
        Ok(())
    }
}

impl Layer for Budget {
    fn below(&self) -> &dyn Volume {
        self.below.as_ref()
    }
    fn passes_views(&self) -> bool {
        false
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> raidlab_core::Result<()> {
        self.spend()?;
        self.below.write_at(buf, offset)
    }
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> raidlab_core::Result<()> {
        self.spend()?;
        self.below.write_at_fua(buf, offset)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> raidlab_core::Result<()> {
        self.spend()?;
        self.below.write_zeroes(offset, len)
    }
}

/// `devs`, each behind the shared write budget `left`.
fn behind(devs: &[Device], left: &Arc<AtomicI64>) -> Vec<Device> {
    devs.iter()
        .map(|d| Device {
            path: d.path.clone(),
            volume: Arc::new(Budget {
                below: d.volume.clone(),
                left: left.clone(),
            }),
        })
        .collect()
}

/// A RAID 0 shrink of 4 to 3 whose power goes after `budget` member writes
/// (every write counted when `None`): the writes made.
fn shrink_cut(budget: Option<i64>) -> (Vec<Device>, Vec<u8>, u64, i64) {
    let (devs, data) = filled(4);
    let left = Arc::new(AtomicI64::new(budget.unwrap_or(i64::MAX)));
    let (mut asm, holds) = started(&behind(&devs, &left), 3);
    let r = asm.reshape_run(RunOptions::default(), &mut |_| {});
    assert_eq!(r.is_ok(), budget.is_none(), "{:?}", r.err());
    let spent = budget.unwrap_or(i64::MAX) - left.load(Ordering::SeqCst);
    (devs, data, holds, spent)
}

#[test]
fn a_crash_between_the_reshape_end_and_the_takeover_back_leaves_a_raid4_level_0_finishes() {
    // The takeover back is the last commit: one superblock write for each
    // of the 3 kept members. Cut right before it.
    let (_, _, _, writes) = shrink_cut(None);
    let (devs, data, holds, _) = shrink_cut(Some(writes - 3));
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    assert!(asm.reshape().is_none());
    // md's end of the RAID 4 shrink: complete, the new parity in role 3.
    assert_eq!(asm.geometry.level, Level::Raid4);
    assert_eq!(asm.geometry.raid_disks, 4);
    assert!(asm.missing().is_empty());
    assert!(read_all(&devs) == data[..holds as usize]);
    let r = asm
        .scrub(false, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(r.mismatch_sectors, 0, "the walk's parity");
    // `raidlab grow --level 0`, as the engine's doc says.
    asm.raid0_takeover_raid45().unwrap();
    drop(asm);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    assert_eq!(asm.geometry.level, Level::Raid0);
    assert_eq!(asm.geometry.raid_disks, 3);
    assert!(read_all(&devs) == data[..holds as usize]);
}

#[test]
fn a_cut_inside_the_start_commit_carries_on() {
    // The start commit gives each member a data size reaching past the
    // component size plus the move up (its RAID 0 data size does not): two
    // of the four superblock writes land, and the two members that missed
    // it must get that size when taken one event behind, or the reshape's
    // end takes the move out of a size that never had it (found by the
    // torture family's RAID 0 shrinks).
    let (devs, data) = filled(4);
    let left = Arc::new(AtomicI64::new(2));
    let mut asm = Assembly::assemble(behind(&devs, &left)).unwrap();
    let req = ReshapeRequest {
        raid_devices: Some(3),
        ..ReshapeRequest::default()
    };
    let holds = 3 * asm.geometry.member_bytes;
    let plan = asm.reshape_check_sized(&req, 0, Some(holds)).unwrap();
    assert!(asm.reshape_start(plan).is_err(), "the power went");
    drop(asm);
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    assert!(asm.reshape().is_some(), "two members record the start");
    let got = read_all(&devs);
    assert!(
        got == data[..got.len()],
        "cut in the start: reads other bytes"
    );
    asm.reshape_run(RunOptions::default(), &mut |_| {}).unwrap();
    assert_done(&devs, 3, &data[..holds as usize]);
}
