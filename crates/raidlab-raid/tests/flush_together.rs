//! A flush writes the stripe cache's held stripes out side by side
//! (`Array::write_together`): every held stripe's member reads go out before
//! any of their writes, and the members end byte for byte as an array that
//! held nothing leaves them, with rows kept in memory or not, whatever the
//! level; a member whose writes fail during that flush is taken out and every
//! byte still reads back.

mod common;

use raidlab_core::{ManualClock, Result, Volume};
use raidlab_devices::{FaultVolume, MemVolume};
use raidlab_layout::{Geometry, Level};
use raidlab_raid::stripe_cache::StripeCacheConfig;
use raidlab_raid::Array;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Every member's reads and writes, in the order they reached the members
/// (one list for all, so that the order across members shows).
#[derive(Default)]
struct Order(Mutex<Vec<(usize, bool)>>);

struct Seen {
    role: usize,
    inner: Arc<dyn Volume>,
    order: Arc<Order>,
}

impl Seen {
    fn note(&self, write: bool) {
        self.order.0.lock().unwrap().push((self.role, write));
    }
}

impl Volume for Seen {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.note(false);
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.note(true);
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
}

struct Rig {
    array: Array,
    mem: Vec<Arc<MemVolume>>,
    faults: Vec<Arc<FaultVolume<Arc<MemVolume>>>>,
    order: Arc<Order>,
}

fn rig(g: &Geometry, stripes: usize, kept_rows: usize) -> Rig {
    let order = Arc::new(Order::default());
    let mem: Vec<Arc<MemVolume>> = (0..g.raid_disks)
        .map(|_| Arc::new(MemVolume::new(g.member_bytes)))
        .collect();
    let faults: Vec<_> = mem
        .iter()
        .map(|m| Arc::new(FaultVolume::new(Arc::clone(m))))
        .collect();
    let members = faults
        .iter()
        .enumerate()
        .map(|(role, f)| {
            Some(Arc::new(Seen {
                role,
                inner: Arc::clone(f) as Arc<dyn Volume>,
                order: Arc::clone(&order),
            }) as Arc<dyn Volume>)
        })
        .collect();
    let array = Array::new("t", *g, members).unwrap();
    // A clock that never moves: nothing held expires, so the flush writes
    // out everything held.
    let cfg = StripeCacheConfig {
        stripes,
        hold: Duration::from_millis(20),
        kept_rows,
    };
    array
        .start_stripe_cache_driven(cfg, ManualClock::new())
        .unwrap();
    Rig {
        array,
        mem,
        faults,
        order,
    }
}

/// A rig of 64 KiB chunks holding up to 64 stripes, and its stripe's bytes.
fn stripes_of_64k(level: Level, disks: usize, kept_rows: usize) -> (Rig, u64) {
    let chunk = 64 << 10;
    let g = common::parity_geometry(level, disks, chunk, 64);
    (rig(&g, 64, kept_rows), chunk * g.data_disks() as u64)
}

const LEVELS: [(Level, usize); 3] = [(Level::Raid5, 4), (Level::Raid6, 5), (Level::Raid4, 4)];

#[test]
fn a_flush_reads_for_every_held_stripe_before_it_writes_any() {
    for (level, disks) in LEVELS {
        let (r, sb) = stripes_of_64k(level, disks, 0);
        // One 4 KiB write in each of 20 stripes: each a read-modify-write.
        for s in 0..20u64 {
            r.array
                .write_at(&[s as u8 + 1; 4096], s * sb + 8192)
                .unwrap();
        }
        assert!(
            r.order.0.lock().unwrap().is_empty(),
            "{level:?}: the writes were held"
        );
        r.array.flush().unwrap();
        let order = std::mem::take(&mut *r.order.0.lock().unwrap());
        let reads = order.iter().filter(|(_, w)| !w).count();
        let first_write = order.iter().position(|(_, w)| *w).unwrap();
        let last_read = order.iter().rposition(|(_, w)| !w).unwrap();
        assert!(
            reads >= 20 * 2,
            "{level:?}: {reads} reads for 20 read-modify-writes"
        );
        assert!(
            last_read < first_write,
            "{level:?}: a read (#{last_read}) after the first write (#{first_write}): the held stripes went down one by one"
        );
        for s in 0..20u64 {
            let mut b = vec![0u8; 4096];
            r.array.read_at(&mut b, s * sb + 8192).unwrap();
            assert!(b.iter().all(|&x| x == s as u8 + 1), "{level:?}: stripe {s}");
        }
    }
}

/// Random writes, some stripes with several separate runs held, then a
/// flush: the members as an array that held nothing leaves them.
#[test]
fn held_stripes_flushed_together_leave_the_members_as_writes_that_went_straight_down() {
    for (level, disks) in LEVELS {
        for kept_rows in [0, 256] {
            for seed in 0..3u64 {
                let chunk = 16 << 10;
                let g = common::parity_geometry(level, disks, chunk, 32);
                let held = rig(&g, 64, kept_rows);
                let plain = rig(&g, 0, 0);
                let mut rng = ChaCha8Rng::seed_from_u64(seed * 31 + disks as u64);
                let size = held.array.size();
                for round in 0..6 {
                    for _ in 0..40 {
                        let len = rng.gen_range(1..=3) * 4096u64;
                        let offset = rng.gen_range(0..(size - len) / 4096) * 4096;
                        let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                        held.array.write_at(&data, offset).unwrap();
                        plain.array.write_at(&data, offset).unwrap();
                    }
                    held.array.flush().unwrap();
                    plain.array.flush().unwrap();
                    for (i, (a, b)) in held.mem.iter().zip(&plain.mem).enumerate() {
                        assert!(
                            a.snapshot() == b.snapshot(),
                            "{level:?} kept {kept_rows} seed {seed} round {round}: member {i} differs"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn a_member_whose_writes_fail_in_a_flush_together_is_taken_out_and_nothing_is_lost() {
    for (level, disks) in LEVELS {
        let (r, sb) = stripes_of_64k(level, disks, 256);
        let mut want = Vec::new();
        for s in 0..16u64 {
            let data = vec![s as u8 + 7; 4096];
            r.array.write_at(&data, s * sb + 4096).unwrap();
            want.push((s * sb + 4096, data));
        }
        // The last role's writes fail from now on (its reads still work):
        // it holds parity for some of these stripes, and for all of them on
        // RAID 4.
        let role = disks - 1;
        r.faults[role].fail_writes(0..r.mem[role].size());
        r.array.flush().unwrap();
        assert!(
            r.array.failed_members().contains(&role),
            "{level:?}: the member whose writes failed is still in service"
        );
        for (offset, data) in &want {
            let mut b = vec![0u8; 4096];
            r.array.read_at(&mut b, *offset).unwrap();
            assert!(&b == data, "{level:?}: array bytes at {offset} lost");
        }
    }
}
