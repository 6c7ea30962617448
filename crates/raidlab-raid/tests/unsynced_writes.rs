//! Writes to stripes a resync has not reached yet (the new space of a served
//! `--size` while it is resynced) compute parity from data, as md writes past
//! `recovery_cp`: a read-modify-write there would fold the change into
//! parity that is still wrong, and a member lost before the resync reached
//! the stripe would then read back wrong.

use raidlab_core::Volume;
use raidlab_devices::MemVolume;
use raidlab_layout::{Layout, Level};
use raidlab_raid::array::Array;
use raidlab_raid::assemble::{create, CreateSpec, Device, NewMember};
use std::sync::Arc;

const MIB: u64 = 1 << 20;
const CHUNK: u64 = 64 << 10;
const PAGE: usize = 4096;
const N: usize = 5;

fn raid5() -> Array {
    let devs: Vec<Device> = (0..N)
        .map(|i| Device {
            path: format!("m{i}"),
            volume: Arc::new(MemVolume::new(16 * MIB)),
        })
        .collect();
    let spec = CreateSpec {
        level: Level::Raid5,
        layout: Layout::parse(Level::Raid5, None).unwrap(),
        chunk_bytes: CHUNK,
        spares: 0,
        name: "unsynced".into(),
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
    let asm = create(&spec, members).unwrap();
    let array = asm.array().unwrap();
    let fill: Vec<u8> = (0..MIB as usize).map(|i| (i * 7 + 3) as u8).collect();
    let size = array.size();
    for at in (0..size).step_by(fill.len()) {
        let n = (size - at).min(fill.len() as u64) as usize;
        array.write_at(&fill[..n], at).unwrap();
    }
    array.flush().unwrap();
    array
}

/// The XOR of every role's page at member offset `m`: zero where parity
/// agrees with the data (RAID 5).
fn row_xor(array: &Array, m: u64) -> Vec<u8> {
    let mut x = vec![0u8; PAGE];
    for role in 0..N {
        let mut b = vec![0u8; PAGE];
        array.member(role).unwrap().read_at(&mut b, m).unwrap();
        for (a, b) in x.iter_mut().zip(&b) {
            *a ^= b;
        }
    }
    x
}

/// Make the row at member offset `m` inconsistent (a page of role 0 that
/// the resync has not made right), then write one page of the row's first
/// data chunk through the array; returns whether the row agrees after.
fn write_into_a_stale_row(unsynced_from: Option<u64>) -> bool {
    let array = raid5();
    let m = 8 * MIB + 4096;
    assert!(
        row_xor(&array, m).iter().all(|&b| b == 0),
        "consistent at first"
    );
    array
        .member(0)
        .unwrap()
        .write_at(&[0xeeu8; PAGE], m)
        .unwrap();
    assert!(row_xor(&array, m).iter().any(|&b| b != 0));
    array.set_unsynced_from(unsynced_from);
    // One page of a 4-data-member row: read-modify-write reads 2 pages,
    // reconstruct-write 3, so only the resync rule makes it reconstruct.
    let row = m / CHUNK;
    let at = row * CHUNK * (N as u64 - 1) + m % CHUNK;
    array.write_at(&[0x42u8; PAGE], at).unwrap();
    array.flush().unwrap();
    let mut back = vec![0u8; PAGE];
    array.read_at(&mut back, at).unwrap();
    assert_eq!(back, vec![0x42u8; PAGE], "the write reads back");
    row_xor(&array, m).iter().all(|&b| b == 0)
}

#[test]
fn a_write_past_the_resync_point_computes_parity_from_data() {
    assert!(
        write_into_a_stale_row(Some(4 * MIB)),
        "past the resync point the row's parity is computed from its data"
    );
}

#[test]
fn without_a_resync_owed_a_small_write_folds_into_parity() {
    // The reference: the same write with no resync owed is a
    // read-modify-write, which keeps the stale page's disagreement. This is
    // what the rule above prevents.
    assert!(!write_into_a_stale_row(None));
    // Before the resync point too.
    assert!(!write_into_a_stale_row(Some(12 * MIB)));
}
