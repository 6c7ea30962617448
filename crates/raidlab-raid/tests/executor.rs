//! The executor is a seam: an array given another executor runs every plan
//! through it. Here one that records each member operation instead of doing it
//! (what a simulator's executor will build on): the classic costs come out of
//! the engine's own decisions (a 4 KiB RAID 5 write is 2 reads + 2 writes,
//! RAID 6 3 + 3, a full stripe reads nothing) and the members stay untouched.

use raidlab_core::Volume;
use raidlab_devices::MemVolume;
use raidlab_layout::{Geometry, Layout, Level, ParityLayout};
use raidlab_parity::Engine;
use raidlab_raid::exec::{Executor, Failed, LogWriter, Members, UserBuf};
use raidlab_raid::{Array, OpKind, Plan, Step};
use std::sync::{Arc, Mutex};

const CHUNK: u64 = 64 << 10;

#[derive(Debug, Default)]
struct Recorder(Mutex<Vec<(OpKind, usize, u64, u64)>>);

impl Executor for Recorder {
    fn run(
        &self,
        plan: &Plan,
        _members: &Members,
        _engine: &dyn Engine,
        _user: UserBuf<'_>,
        _log: Option<LogWriter<'_>>,
    ) -> Result<(), Failed> {
        let mut seen = self.0.lock().unwrap();
        for step in &plan.steps {
            if let Step::Io(ops) = step {
                seen.extend(ops.iter().map(|o| (o.kind, o.member, o.offset, o.length)));
            }
        }
        Ok(())
    }
}

impl Recorder {
    /// (reads, writes) recorded since the last call.
    fn take(&self) -> (usize, usize) {
        let ops = std::mem::take(&mut *self.0.lock().unwrap());
        let reads = ops.iter().filter(|o| o.0 == OpKind::Read).count();
        (reads, ops.len() - reads)
    }
}

fn array(level: Level, n: usize) -> (Array, Arc<Recorder>, Vec<Arc<MemVolume>>) {
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
    let rec = Arc::new(Recorder::default());
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
        assert_eq!(rec.take(), small, "{label}: a 4 KiB write");
        let data_disks = a.geometry().data_disks() as u64;
        a.write_at(&vec![2; (CHUNK * data_disks) as usize], 0)
            .unwrap();
        let (reads, writes) = rec.take();
        assert_eq!(reads, 0, "{label}: a full stripe write reads nothing");
        assert!(writes >= n, "{label}: every member written: {writes}");
        let mut buf = vec![0; 4096];
        a.read_at(&mut buf, 0).unwrap();
        assert_eq!(rec.take(), (1, 0), "{label}: a 4 KiB read");
        // Recorded, not done: no member was touched.
        for v in &vols {
            assert!(v.snapshot().iter().all(|&b| b == 0), "{label}");
        }
    }
}
