//! The set-up the reshape benchmarks share (`reshape_bench`,
//! `reshape_served_bench`): in-memory members behind throttles whose limits
//! are set once the array holds its data, an array created on the first of
//! them, and that array filled with data that does not repeat.
//!
//! It decides nothing a figure depends on but the members' kind; what is
//! measured and how is each benchmark's.

use raidlab_core::Volume;
use raidlab_devices::{Limits, MemVolume, ThrottleVolume};
use raidlab_layout::{Layout, Level};
use raidlab_raid::assemble::{create, Assembly, CreateSpec, Device, NewMember};
use std::sync::Arc;

/// A throttled member, unlimited until the benchmark sets its limits.
pub type Member = Arc<ThrottleVolume<MemVolume>>;

/// `n` members of `bytes` each, unlimited for now, and their devices
/// (named m0, m1, ...).
pub fn members(n: usize, bytes: u64) -> (Vec<Member>, Vec<Device>) {
    let vols: Vec<Member> = (0..n)
        .map(|_| Arc::new(ThrottleVolume::new(MemVolume::new(bytes), Limits::unlimited()).unwrap()))
        .collect();
    let devs = vols
        .iter()
        .enumerate()
        .map(|(i, v)| Device {
            path: format!("m{i}"),
            volume: Arc::clone(v) as Arc<dyn Volume>,
        })
        .collect();
    (vols, devs)
}

/// An array created on `devs` (zeroed members, no spare, bitmap or log).
pub fn create_on(devs: &[Device], level: Level, layout: Layout, chunk: u64) -> Assembly {
    let spec = CreateSpec {
        level,
        layout,
        chunk_bytes: chunk,
        spares: 0,
        name: "bench".into(),
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
    create(&spec, members).unwrap()
}

/// Write every byte of `array` (xorshift data, so no two blocks are alike)
/// and flush it: the data a reshape moves.
pub fn fill(array: &dyn Volume) {
    let size = array.size();
    let mut buf = vec![0u8; 4 << 20];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut at = 0;
    while at < size {
        for b in buf.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b.copy_from_slice(&x.to_le_bytes()[..b.len()]);
        }
        let len = (size - at).min(buf.len() as u64) as usize;
        array.write_at(&buf[..len], at).unwrap();
        at += len as u64;
    }
    array.flush().unwrap();
}
