//! Nothing the engine writes bypasses the executor: an assembly given a
//! recording executor hands it its superblock commits and its offline
//! rebuild, step by step, and the members stay untouched (what `raidlab
//! explain` shows, what a simulator could run in virtual time).

use raidlab_core::{IoKind, Volume};
use raidlab_layout::Level;
use raidlab_raid::assemble::{Assembly, Device};
use raidlab_raid::exec::Recording;
use raidlab_raid::plan::Space;
use raidlab_raid::recovery::RunOptions;
use raidlab_raid::{MemberOp, Plan, Step};
use std::sync::Arc;

mod common;

const MEMBER: u64 = 4 << 20;

fn devices(n: usize) -> Vec<Device> {
    (0..n)
        .map(|i| Device {
            path: format!("mem{i}"),
            volume: Arc::new(raidlab_devices::MemVolume::new(MEMBER)),
        })
        .collect()
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

fn io_steps(plan: &Plan) -> Vec<&[MemberOp]> {
    plan.steps
        .iter()
        .filter_map(|s| match s {
            Step::Io(ops) => Some(&ops[..]),
            _ => None,
        })
        .collect()
}

/// A RAID 5 of four members with a bitmap, created (for real), then given a
/// recording executor.
fn bitmapped_raid5() -> (Assembly, Vec<Device>, Arc<Recording>) {
    let devs = devices(4);
    let asm = common::create_with(Level::Raid5, &devs, |s| {
        s.bitmap = true;
        s.bitmap_chunk = Some(1 << 20);
    });
    let rec = Arc::new(Recording::default());
    (asm.with_executor(rec.clone()), devs, rec)
}

#[test]
fn a_superblock_commit_is_one_plan_run_by_the_assemblys_executor() {
    let (mut asm, devs, rec) = bitmapped_raid5();
    let before = snapshot(&devs);
    assert!(asm.mark_dirty().unwrap(), "a new zeroed array starts clean");
    let plans = rec.take();
    assert_eq!(plans.len(), 1, "one commit, one plan: {plans:?}");
    let plan = &plans[0];
    assert_eq!(plan.space, Space::Device);
    let steps = io_steps(plan);
    assert_eq!(steps.len(), 2, "the writes, then the flushes: {plan:?}");
    // Every member: its superblock (4 KiB into the device, metadata 1.2)
    // and its bitmap beside it, all in the first step.
    assert!(steps[0].iter().all(|o| o.kind == IoKind::Write));
    for d in 0..4 {
        let mine: Vec<&MemberOp> = steps[0].iter().filter(|o| o.member == d).collect();
        assert_eq!(mine.len(), 2, "device {d}: superblock and bitmap");
        assert!(
            mine.iter().any(|o| o.offset == 4096),
            "device {d}: {mine:?}"
        );
        assert!(mine.iter().any(|o| o.offset > 4096), "device {d}: {mine:?}");
    }
    // Then each device flushed once, after all the writes.
    let mut flushed: Vec<usize> = steps[1]
        .iter()
        .inspect(|o| assert_eq!(o.kind, IoKind::Flush))
        .map(|o| o.member)
        .collect();
    flushed.sort_unstable();
    assert_eq!(flushed, vec![0, 1, 2, 3]);
    assert!(
        snapshot(&devs) == before,
        "a recording executor wrote to the members"
    );
}

#[test]
fn an_offline_rebuild_runs_every_step_through_the_assemblys_executor() {
    let (mut asm, mut devs, rec) = bitmapped_raid5();
    asm.fail(1).unwrap();
    let fresh = Device {
        path: "new".into(),
        volume: Arc::new(raidlab_devices::MemVolume::new(MEMBER)),
    };
    devs.push(fresh.clone());
    asm.add(fresh, false).unwrap();
    rec.take();
    let before = snapshot(&devs);
    let opts = RunOptions {
        use_maps: false,
        step_bytes: 256 << 10,
        ..RunOptions::default()
    };
    let report = asm.rebuild(opts, &mut |_| {}).unwrap();
    assert_eq!(report.rebuilt.len(), 1);
    let plans = rec.take();
    let member_bytes = asm.geometry.member_bytes;
    // The executor's table: the array's roles, the target after them.
    let target = asm.geometry.raid_disks;
    let data: Vec<&Plan> = plans.iter().filter(|p| p.space == Space::Data).collect();
    let ops = |kind: IoKind| -> Vec<&MemberOp> {
        data.iter()
            .flat_map(|p| io_steps(p).into_iter().flatten())
            .filter(|o| o.kind == kind)
            .collect()
    };
    // Every byte of the target written, from reads of the three others.
    let written: u64 = ops(IoKind::Write)
        .iter()
        .inspect(|o| assert_eq!(o.member, target, "{o:?}"))
        .map(|o| o.length)
        .sum();
    assert_eq!(written, member_bytes);
    for role in [0, 2, 3] {
        let read: u64 = ops(IoKind::Read)
            .iter()
            .filter(|o| o.member == role)
            .map(|o| o.length)
            .sum();
        assert_eq!(read, member_bytes, "role {role} read whole");
    }
    assert!(ops(IoKind::Read).iter().all(|o| o.member != 1));
    // The target is flushed before the rebuild is recorded complete.
    assert!(ops(IoKind::Flush).iter().any(|o| o.member == target));
    // And the completion is a superblock commit: writes and flushes of
    // whole devices, the last plan.
    let last = plans.last().unwrap();
    assert_eq!(last.space, Space::Device);
    assert!(last.writes().count() >= 4, "{last:?}");
    assert!(
        snapshot(&devs) == before,
        "a recording executor wrote to the members"
    );
}

/// A rebuild that reads nothing ahead and maps nothing (`read_ahead` and
/// `use_maps` off, as the torture harness runs it) reads each step's
/// sources and writes the step before it reads the next, so its member
/// requests come in one order on every run: per step, one read of each
/// source role in role order, then the target's write.
#[test]
fn a_rebuild_without_read_ahead_reads_then_writes_each_step_in_order() {
    let (mut asm, mut devs, rec) = bitmapped_raid5();
    asm.fail(1).unwrap();
    let fresh = Device {
        path: "new".into(),
        volume: Arc::new(raidlab_devices::MemVolume::new(MEMBER)),
    };
    devs.push(fresh.clone());
    asm.add(fresh, false).unwrap();
    rec.take();
    let step = 256u64 << 10;
    let opts = RunOptions {
        use_maps: false,
        read_ahead: false,
        step_bytes: step,
        ..RunOptions::default()
    };
    asm.rebuild(opts, &mut |_| {}).unwrap();
    let target = asm.geometry.raid_disks;
    let got: Vec<(IoKind, usize, u64)> = rec
        .take()
        .iter()
        .filter(|p| p.space == Space::Data)
        .flat_map(|p| {
            io_steps(p)
                .into_iter()
                .flatten()
                .map(|o| (o.kind, o.member, o.offset))
                .collect::<Vec<_>>()
        })
        .filter(|(kind, _, _)| *kind != IoKind::Flush)
        .collect();
    let want: Vec<(IoKind, usize, u64)> = (0..asm.geometry.member_bytes)
        .step_by(step as usize)
        .flat_map(|at| {
            [
                (IoKind::Read, 0, at),
                (IoKind::Read, 2, at),
                (IoKind::Read, 3, at),
                (IoKind::Write, target, at),
            ]
        })
        .collect();
    assert_eq!(got, want);
    assert!(want.len() > 8, "several steps: {}", want.len());
}
