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
