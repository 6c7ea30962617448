//! Write-zeroes on arrays: whole stripes (parity levels) and every copy
//! (mirrors, RAID 0, RAID 10) become member write-zeroes, the parts of a
//! stripe at the ends are written as zeros through the write path, the range
//! reads back as zeros, the rest is untouched, and a check finds the parity
//! and the copies consistent afterwards.

use raidlab_core::{Result, Volume};
use raidlab_devices::MemVolume;
use raidlab_layout::Level;
use raidlab_raid::assemble::{create, Assembly, CreateSpec, Device, NewMember};
use raidlab_raid::recovery::RunOptions;
use raidlab_raid::stripe_cache::StripeCacheConfig;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::{Arc, Mutex};

const MIB: u64 = 1 << 20;
const CHUNK: u64 = 64 << 10;

/// Memory that counts the bytes it was asked to write as data and as
/// write-zeroes.
#[derive(Debug)]
struct Counted {
    mem: MemVolume,
    /// (bytes written as data, bytes of write-zeroes, write-zeroes calls)
    counts: Mutex<(u64, u64, u64)>,
}

impl Counted {
    fn counts(&self) -> (u64, u64, u64) {
        *self.counts.lock().unwrap()
    }
    fn reset(&self) {
        *self.counts.lock().unwrap() = (0, 0, 0);
    }
}

impl Volume for Counted {
    fn name(&self) -> String {
        "counted".into()
    }
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.mem.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.counts.lock().unwrap().0 += buf.len() as u64;
        self.mem.write_at(buf, offset)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        {
            let mut c = self.counts.lock().unwrap();
            c.1 += len;
            c.2 += 1;
        }
        // Straight to memory: what reaches the member as data is counted
        // above only.
        self.mem.write_at(&vec![0u8; len as usize], offset)
    }
    fn flush(&self) -> Result<()> {
        Ok(())
    }
}

fn spec(level: Level) -> CreateSpec {
    CreateSpec {
        level,
        layout: raidlab_layout::Layout::parse(level, None).unwrap(),
        chunk_bytes: CHUNK,
        spares: 0,
        name: "z".into(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: false,
    }
}

#[test]
fn whole_stripes_and_copies_become_member_write_zeroes_and_parity_stays_consistent() {
    for (level, n, cached) in [
        (Level::Raid5, 4, false),
        (Level::Raid5, 4, true),
        (Level::Raid6, 5, false),
        (Level::Raid6, 5, true),
        (Level::Raid4, 3, false),
        (Level::Raid1, 3, false),
        (Level::Raid10, 4, false),
        (Level::Raid0, 3, false),
    ] {
        let label = format!(
            "{} x{n}{}",
            level.name(),
            if cached { " with a stripe cache" } else { "" }
        );
        let members: Vec<Arc<Counted>> = (0..n)
            .map(|_| {
                Arc::new(Counted {
                    mem: MemVolume::new(8 * MIB),
                    counts: Mutex::new((0, 0, 0)),
                })
            })
            .collect();
        let devs: Vec<Device> = members
            .iter()
            .enumerate()
            .map(|(i, m)| Device {
                path: format!("m{i}"),
                volume: m.clone(),
            })
            .collect();
        let new = devs
            .iter()
            .map(|d| NewMember {
                device: d.clone(),
                zeroed: true,
            })
            .collect();
        let mut asm = create(&spec(level), new).unwrap();
        let was_clean = asm.mark_dirty().unwrap();
        let array = Arc::new(asm.array().unwrap());
        if cached {
            array
                .start_stripe_cache(StripeCacheConfig::default(), raidlab_core::clock::system())
                .unwrap();
        }
        let size = array.size();
        let mut rng = ChaCha8Rng::seed_from_u64(n as u64);
        let mut data = vec![0u8; size as usize];
        rng.fill(&mut data[..]);
        array.write_at(&data, 0).unwrap();
        array.flush().unwrap();
        members.iter().for_each(|m| m.reset());

        let geo = *array.geometry();
        let stripe = if geo.is_parity() {
            CHUNK * geo.data_disks() as u64
        } else {
            CHUNK
        };
        // From inside one stripe to inside another, three whole ones between.
        let (at, len) = (stripe + 5000, 4 * stripe);
        if cached {
            // A partial-stripe write the cache holds, in a stripe about to be
            // zeroed whole: it must go down before the zeros, never after.
            array.write_at(&[0x77; 4096], 2 * stripe + 512).unwrap();
            members.iter().for_each(|m| m.reset());
        }
        array.write_zeroes(at, len).unwrap();
        array.flush().unwrap();
        data[at as usize..(at + len) as usize].fill(0);
        let mut back = vec![1u8; size as usize];
        array.read_at(&mut back, 0).unwrap();
        assert!(
            back == data,
            "{label}: reads back zeros there, the rest unchanged"
        );

        let (written, zeroed, calls): (u64, u64, u64) = members
            .iter()
            .map(|m| m.counts())
            .fold((0, 0, 0), |a, c| (a.0 + c.0, a.1 + c.1, a.2 + c.2));
        let copies = match level {
            Level::Raid1 => n as u64,
            Level::Raid10 => 2,
            _ => 1,
        };
        if geo.is_parity() {
            // Three whole stripes: every member zeroes a chunk of each (P and
            // Q of zero data are zero); the two partial stripes are data.
            assert_eq!(zeroed, 3 * CHUNK * n as u64, "{label}");
            for m in &members {
                assert_eq!(m.counts().1, 3 * CHUNK, "{label}: every member");
            }
            assert!(written > 0, "{label}: the partial stripes are written");
            // With a cache, also the held write and its parity.
            let held = if cached { 2 * 4096 + 2 * CHUNK } else { 0 };
            assert!(
                written <= 2 * CHUNK * n as u64 + held,
                "{label}: only the partial stripes are written as data ({written} bytes)"
            );
        } else {
            assert_eq!(zeroed, len * copies, "{label}: every copy zeroed");
            assert_eq!(written, 0, "{label}: nothing written as data");
        }
        assert!(calls > 0, "{label}");
        drop(array);
        asm.mark_clean(was_clean).unwrap();
        drop(asm);
        if level == Level::Raid0 {
            // Nothing to check without redundancy.
            continue;
        }
        let mut asm = Assembly::assemble(devs).unwrap();
        let r = asm
            .scrub(false, RunOptions::default(), &mut |_| {})
            .unwrap();
        assert_eq!(r.mismatch_sectors, 0, "{label}: {r:?}");
    }
}

#[test]
fn a_write_zeroes_inside_one_stripe_is_written_as_data() {
    let members: Vec<Arc<Counted>> = (0..4)
        .map(|_| {
            Arc::new(Counted {
                mem: MemVolume::new(8 * MIB),
                counts: Mutex::new((0, 0, 0)),
            })
        })
        .collect();
    let vols = members
        .iter()
        .map(|m| Some(m.clone() as Arc<dyn Volume>))
        .collect();
    let geo = raidlab_layout::Geometry::new(
        Level::Raid5,
        raidlab_layout::Layout::parse(Level::Raid5, None).unwrap(),
        CHUNK,
        4,
        8 * MIB,
    )
    .unwrap();
    let array = raidlab_raid::Array::new("z", geo, vols).unwrap();
    array.write_at(&[7u8; 8192], 4096).unwrap();
    array.write_zeroes(4096, 4096).unwrap();
    let mut b = [9u8; 8192];
    array.read_at(&mut b, 4096).unwrap();
    assert!(b[..4096].iter().all(|&x| x == 0));
    assert!(b[4096..].iter().all(|&x| x == 7));
    assert!(members.iter().all(|m| m.counts().1 == 0));
}
