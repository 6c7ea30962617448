//! The executor is a seam: an array given another executor runs every plan
//! through it. Here one that records each member operation instead of doing it
//! (what a simulator's executor will build on): the classic costs come out of
//! the engine's own decisions (a 4 KiB RAID 5 write is 2 reads + 2 writes,
//! RAID 6 3 + 3, a full stripe reads nothing) and the members stay untouched.

use raidlab_core::Volume;
use raidlab_devices::MemVolume;
use raidlab_layout::{Geometry, Layout, Level, ParityLayout};
use raidlab_raid::exec::Recording;
use raidlab_raid::Array;
use std::sync::Arc;

const CHUNK: u64 = 64 << 10;

/// (reads, writes) the recorded plans hold since the last call.
fn take(rec: &Recording) -> (usize, usize) {
    rec.take().iter().fold((0, 0), |(r, w), plan| {
        let (pr, pw) = plan.op_counts();
        (r + pr, w + pw)
    })
}

fn array(level: Level, n: usize) -> (Array, Arc<Recording>, Vec<Arc<MemVolume>>) {
    let member = 4 << 20;
    let g = Geometry::new(
        level,
        Layout::Parity(ParityLayout::LeftSymmetric),
        CHUNK,
        n,
        member,
    )
    .unwrap();
    let vols: Vec<Arc<MemVolume>> = (0..n).map(|_| Arc::new(MemVolume::new(member))).collect();
    let members = vols
        .iter()
        .map(|v| Some(v.clone() as Arc<dyn Volume>))
        .collect();
    let rec = Arc::new(Recording::default());
    let a = Array::new("rec", g, members)
        .unwrap()
        .with_executor(rec.clone());
    (a, rec, vols)
}

#[test]
fn every_plan_runs_through_the_executor_it_is_given() {
    for (level, n, small) in [(Level::Raid5, 4, (2, 2)), (Level::Raid6, 6, (3, 3))] {
        let label = level.name();
        let (a, rec, vols) = array(level, n);
        a.write_at(&[1; 4096], 4096).unwrap();
        assert_eq!(take(&rec), small, "{label}: a 4 KiB write");
        let data_disks = a.geometry().data_disks() as u64;
        a.write_at(&vec![2; (CHUNK * data_disks) as usize], 0)
            .unwrap();
        let (reads, writes) = take(&rec);
        assert_eq!(reads, 0, "{label}: a full stripe write reads nothing");
        assert!(writes >= n, "{label}: every member written: {writes}");
        let mut buf = vec![0; 4096];
        a.read_at(&mut buf, 0).unwrap();
        assert_eq!(take(&rec), (1, 0), "{label}: a 4 KiB read");
        // Recorded, not done: no member was touched.
        for v in &vols {
            assert!(v.snapshot().iter().all(|&b| b == 0), "{label}");
        }
    }
}

/// Runs every plan with the real executor and keeps a copy of each.
#[derive(Debug, Default)]
struct Spy(
    std::sync::Mutex<Vec<raidlab_raid::Plan>>,
    raidlab_raid::exec::ThreadPool,
);

impl raidlab_raid::exec::Executor for Spy {
    fn run(
        &self,
        plan: &raidlab_raid::Plan,
        members: &raidlab_raid::exec::Members,
        engine: &dyn raidlab_parity::Engine,
        user: raidlab_raid::exec::UserBuf<'_>,
        hooks: raidlab_raid::exec::Hooks<'_>,
    ) -> Result<(), raidlab_raid::exec::Failed> {
        self.0.lock().unwrap().push(plan.clone());
        self.1.run(plan, members, engine, user, hooks)
    }
}

/// The device-space plans the spy saw: per plan, its writes as (device,
/// offset, length) and the devices it flushed after them.
type DevicePlan = (Vec<(usize, u64, u64)>, Vec<usize>);

fn device_plans(spy: &Spy) -> Vec<DevicePlan> {
    use raidlab_core::IoKind;
    use raidlab_raid::plan::Space;
    use raidlab_raid::Step;
    std::mem::take(&mut *spy.0.lock().unwrap())
        .into_iter()
        .filter(|p| p.space == Space::Device)
        .map(|p| {
            let mut writes = Vec::new();
            let mut flushes = Vec::new();
            let mut flushed_yet = false;
            for step in &p.steps {
                let Step::Io(ops) = step else { continue };
                for op in ops {
                    match op.kind {
                        IoKind::Write => {
                            assert!(!flushed_yet, "a write after the flush: {p:?}");
                            writes.push((op.member, op.offset, op.length));
                        }
                        IoKind::Flush => {
                            flushed_yet = true;
                            flushes.push(op.member);
                        }
                        other => panic!("a metadata plan with a {other:?}"),
                    }
                }
            }
            (writes, flushes)
        })
        .collect()
}

/// The bitmap, the partial parity log and the journal are written by plans
/// (device space: whole devices, not data areas), through the executor the
/// array was given, each write followed by a flush of every device written,
/// before the data they cover; and the data still reads back.
#[test]
fn bitmap_and_log_writes_are_plans_run_by_the_arrays_executor() {
    use raidlab_raid::assemble::{create_with_journal, Device, NewMember};
    for policy in ["bitmap", "ppl", "journal"] {
        let n = 4;
        let member = 8 << 20;
        let devs: Vec<Device> = (0..n + 1)
            .map(|i| Device {
                path: format!("{policy}{i}"),
                volume: Arc::new(MemVolume::new(member)),
            })
            .collect();
        let spec = raid5_spec(policy);
        let members = devs[..n]
            .iter()
            .map(|d| NewMember {
                device: d.clone(),
                zeroed: true,
            })
            .collect();
        let journal = (policy == "journal").then(|| NewMember {
            device: devs[n].clone(),
            zeroed: true,
        });
        let mut asm = create_with_journal(&spec, members, journal).unwrap();
        asm.start_ppl().unwrap();
        asm.start_journal().unwrap();
        asm.mark_dirty().unwrap();
        let spy = Arc::new(Spy::default());
        let array = asm.array().unwrap().with_executor(spy.clone());
        device_plans(&spy);
        let data = vec![0x5a; 4096];
        array.write_at(&data, 3 * CHUNK).unwrap();
        let seen = device_plans(&spy);
        assert!(!seen.is_empty(), "{policy}: no metadata plan: {seen:?}");
        for (writes, flushes) in &seen {
            let mut written: Vec<usize> = writes.iter().map(|w| w.0).collect();
            written.sort_unstable();
            written.dedup();
            assert_eq!(
                &written, flushes,
                "{policy}: every device written is flushed once"
            );
        }
        let (writes, _) = &seen[0];
        match policy {
            // Every member's copy of the bitmap, beside its superblock.
            "bitmap" => {
                assert_eq!(writes.len(), n, "{policy}: {writes:?}");
                assert!(writes.iter().all(|w| w.1 < 1 << 20), "{policy}: {writes:?}");
            }
            // One log write, on the stripe's parity member only.
            "ppl" => assert_eq!(writes.len(), 1, "{policy}: {writes:?}"),
            // The journal device alone (table entry 0): meta block and pages.
            _ => {
                assert!(writes.iter().all(|w| w.0 == 0), "{policy}: {writes:?}");
                assert!(writes.iter().map(|w| w.2).sum::<u64>() >= 4096 * 2);
            }
        }
        let mut back = vec![0; 4096];
        array.read_at(&mut back, 3 * CHUNK).unwrap();
        assert_eq!(back, data, "{policy}: the write reads back");
    }
}

/// A member whose metadata area (bitmap, partial parity log) cannot be
/// written is taken out, as md fails it, and the write goes on without it:
/// the metadata plan's failure names the device, the array plans again
/// degraded, and the data reads back.
#[test]
fn a_member_whose_bitmap_or_log_cannot_be_written_is_taken_out_and_the_write_lands() {
    use raidlab_devices::FaultVolume;
    use raidlab_raid::assemble::{create, Device, NewMember};
    for policy in ["bitmap", "ppl"] {
        let n = 4;
        let member = 8 << 20;
        let vols: Vec<Arc<FaultVolume<MemVolume>>> = (0..n)
            .map(|_| Arc::new(FaultVolume::new(MemVolume::new(member))))
            .collect();
        let devs: Vec<Device> = vols
            .iter()
            .enumerate()
            .map(|(i, v)| Device {
                path: format!("{policy}{i}"),
                volume: v.clone(),
            })
            .collect();
        let spec = raid5_spec(policy);
        let members = devs
            .iter()
            .map(|d| NewMember {
                device: d.clone(),
                zeroed: true,
            })
            .collect();
        let mut asm = create(&spec, members).unwrap();
        asm.start_ppl().unwrap();
        asm.mark_dirty().unwrap();
        let array = asm.array().unwrap();
        let at = 3 * CHUNK;
        // The member that holds the write's log (its stripe's parity) or,
        // with a bitmap, any member: its metadata area is the first MiB.
        let victim = array.geometry().parity_location(at).1;
        vols[victim].fail_writes(0..1 << 20);
        let data = vec![0xc3; 4096];
        array
            .write_at(&data, at)
            .unwrap_or_else(|e| panic!("{policy}: {e}"));
        assert_eq!(
            array.failed_members(),
            vec![victim],
            "{policy}: the member whose metadata failed is out"
        );
        vols[victim].clear_faults();
        let mut back = vec![0; 4096];
        array.read_at(&mut back, at).unwrap();
        assert_eq!(back, data, "{policy}: the write reads back, degraded");
    }
}

/// A RAID 5 keeping `policy` ("bitmap", "ppl", or anything else: neither).
fn raid5_spec(policy: &str) -> raidlab_raid::assemble::CreateSpec {
    raidlab_raid::assemble::CreateSpec {
        level: Level::Raid5,
        layout: Layout::parse(Level::Raid5, None).unwrap(),
        chunk_bytes: CHUNK,
        spares: 0,
        name: policy.into(),
        force: false,
        bitmap: policy == "bitmap",
        bitmap_chunk: None,
        ppl: policy == "ppl",
    }
}

/// The flushes a spy saw since the last call: per plan, the members flushed
/// (plans with no flush left out).
fn flush_plans(spy: &Spy) -> Vec<Vec<usize>> {
    use raidlab_core::IoKind;
    use raidlab_raid::Step;
    std::mem::take(&mut *spy.0.lock().unwrap())
        .into_iter()
        .map(|p| {
            p.steps
                .iter()
                .filter_map(|s| match s {
                    Step::Io(ops) => Some(ops),
                    _ => None,
                })
                .flatten()
                .filter(|o| o.kind == IoKind::Flush)
                .map(|o| o.member)
                .collect::<Vec<_>>()
        })
        .filter(|f| !f.is_empty())
        .collect()
}

/// A running rebuild's target is flushed by plans through the array's
/// executor: with the array's flush (in the same step as the members in
/// service) and on its own before a checkpoint. A target that cannot make
/// its writes durable fails the rebuild, not the array.
#[test]
fn a_rebuild_targets_flushes_are_plans_and_a_failing_one_stops_only_the_rebuild() {
    use raidlab_devices::FaultVolume;
    let (n, member) = (4, 4u64 << 20);
    let g = Geometry::new(
        Level::Raid5,
        Layout::Parity(ParityLayout::LeftSymmetric),
        CHUNK,
        n,
        member,
    )
    .unwrap();
    let members: Vec<Option<Arc<dyn Volume>>> = (0..n)
        .map(|r| (r != 3).then(|| Arc::new(MemVolume::new(member)) as Arc<dyn Volume>))
        .collect();
    let spy = Arc::new(Spy::default());
    let a = Array::new("spy", g, members)
        .unwrap()
        .with_executor(spy.clone());
    a.write_at(&[5; 8192], 0).unwrap();
    let target = Arc::new(FaultVolume::new(MemVolume::new(member)));
    let rec = a.begin_recovery(3, target.clone(), 0, false).unwrap();
    a.recovery_step(&rec, 4 * CHUNK, &mut Vec::new()).unwrap();
    flush_plans(&spy);

    a.flush().unwrap();
    let seen = flush_plans(&spy);
    assert!(
        seen.iter().any(|f| f.contains(&3) && f.contains(&0)),
        "the array's flush takes in the target's role with the members: {seen:?}"
    );
    a.flush_recovery_target(&rec).unwrap();
    assert_eq!(flush_plans(&spy), vec![vec![0]], "the target flushed alone");
    let flushes = target.stats().flushes;
    assert!(flushes >= 2, "the target itself was flushed: {flushes}");

    target.fail_all(true);
    a.flush()
        .expect("a target that cannot flush does not fail the array");
    assert!(rec.failed(), "the rebuild is failed");
    assert!(a.flush_recovery_target(&rec).is_err());
    let mut back = vec![0; 8192];
    a.read_at(&mut back, 0).unwrap();
    assert_eq!(back, vec![5; 8192]);
}
