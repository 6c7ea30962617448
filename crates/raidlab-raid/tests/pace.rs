//! A parity array's small write reads old data and parity from two or three
//! members. On members that wait for a device (a disk that seeks)
//! those reads must be in flight together, as md sends them, not one after
//! another: here members whose reads take milliseconds count how many of
//! them are in flight at once, and the data written must read back.

use raidlab_core::{Result, Volume};
use raidlab_devices::MemVolume;
use raidlab_layout::{Geometry, Layout, Level, ParityLayout};
use raidlab_raid::Array;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Reads in flight now and at most, over all of an array's members.
#[derive(Debug, Default)]
struct InFlight {
    now: AtomicUsize,
    most: AtomicUsize,
}

/// A memory member whose reads wait `delay` as a device would.
#[derive(Debug)]
struct Slow {
    inner: MemVolume,
    delay: Duration,
    flight: Arc<InFlight>,
}

impl Volume for Slow {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let n = self.flight.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.flight.most.fetch_max(n, Ordering::SeqCst);
        std::thread::sleep(self.delay);
        let r = self.inner.read_at(buf, offset);
        self.flight.now.fetch_sub(1, Ordering::SeqCst);
        r
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
}

fn slow_array(level: Level, n: usize, delay: Duration) -> (Array, Arc<InFlight>) {
    let member = 4 << 20;
    let g = Geometry::new(
        level,
        Layout::Parity(ParityLayout::LeftSymmetric),
        64 << 10,
        n,
        member,
    )
    .unwrap();
    let flight = Arc::new(InFlight::default());
    let members = (0..n)
        .map(|_| {
            Some(Arc::new(Slow {
                inner: MemVolume::new(member),
                delay,
                flight: flight.clone(),
            }) as Arc<dyn Volume>)
        })
        .collect();
    (Array::new("slow", g, members).unwrap(), flight)
}

#[test]
fn a_small_writes_reads_reach_members_that_seek_together() {
    // RAID 5: old data + P; RAID 6: old data + P + Q.
    for (level, n, reads) in [(Level::Raid5, 4, 2), (Level::Raid6, 6, 3)] {
        let label = level.name();
        let (a, flight) = slow_array(level, n, Duration::from_millis(3));
        let offsets: Vec<u64> = (0..64u64).map(|i| i * 53_248 + 4096).collect();
        for (i, &off) in offsets.iter().enumerate() {
            a.write_at(&[i as u8 + 1; 4096], off).unwrap();
        }
        // The first writes teach the executor its members' pace; the later
        // ones send their reads at once.
        assert_eq!(
            flight.most.load(Ordering::SeqCst),
            reads,
            "{label}: reads in flight together at most"
        );
        for (i, &off) in offsets.iter().enumerate() {
            let mut b = vec![0; 4096];
            a.read_at(&mut b, off).unwrap();
            assert!(b.iter().all(|&x| x == i as u8 + 1), "{label}: write {i}");
        }
    }
}
