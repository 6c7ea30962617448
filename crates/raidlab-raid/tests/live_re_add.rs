//! Re-add on a served array (md's bitmap-based recovery): a member that left
//! goes back into its role while the array serves, and only the chunks the
//! write-intent bitmap marks dirty when the resync reaches them are written:
//! those written while it was away, and those written after the re-add
//! before the resync passed them. The data it then serves alone is exact.

mod common;

use raidlab_core::{Clock, Volume};
use raidlab_devices::MemVolume;
use raidlab_raid::assemble::Device;
use raidlab_raid::live::LiveArray;
use std::sync::Arc;
use std::time::Duration;

const MIB: u64 = 1 << 20;
/// RAID 5 of four: three data chunks a stripe, so member offset `m` is in
/// the stripe at array offset `3 * m`.
const STRIPE_DATA: u64 = 3;

fn wait_for_rebuild(live: &LiveArray) {
    for _ in 0..2000 {
        if live.array().recovery().is_none() {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("the resync did not finish");
}

fn mem3_written(live: &LiveArray) -> u64 {
    live.member_io()
        .iter()
        .find(|m| m.device == "mem3")
        .map_or(0, |m| m.io.write_bytes)
}

#[test]
fn a_served_re_add_writes_only_the_dirty_chunks_and_serves_exact_data() {
    let (devs, live, clock) = common::served_bitmapped_raid5();
    let v = live.volume();
    let size = v.size();
    // Every byte written, then the bits cleared by md's daemon (two idle
    // passes), as on an array that has run a while.
    let mut reference: Vec<u8> = (0..size).map(|i| (i / 4096 % 251) as u8).collect();
    for (i, piece) in reference.chunks(MIB as usize).enumerate() {
        v.write_at(piece, i as u64 * MIB).unwrap();
    }
    v.flush().unwrap();
    for _ in 0..3 {
        live.poll();
        clock.sleep(Duration::from_secs(5));
    }
    live.poll();
    assert_eq!(
        live.array().intent_bitmap().unwrap().dirty_count(),
        0,
        "the daemon cleared the bits"
    );

    let mut write = |at: u64, byte: u8| {
        let data = vec![byte; 8192];
        v.write_at(&data, at).unwrap();
        reference[at as usize..at as usize + data.len()].copy_from_slice(&data);
    };
    live.fail("mem3").unwrap();
    live.remove("mem3").unwrap();
    // Away: member chunks 2 and 10 written.
    write(STRIPE_DATA * 2 * MIB + 4096, 0xa1);
    write(STRIPE_DATA * 10 * MIB, 0xa2);
    v.flush().unwrap();
    let before = mem3_written(&live);
    live.re_add_check(&devs[3])
        .expect("a former member with a bitmap");
    let said = live.re_add(devs[3].clone(), false).unwrap();
    assert!(said.contains("2 dirty chunk(s)"), "{said}");
    // Re-added, its resync not begun: member chunk 12 written now.
    write(STRIPE_DATA * 12 * MIB + 65536, 0xa3);
    v.flush().unwrap();
    live.rebuild(None).unwrap();
    wait_for_rebuild(&live);
    live.poll();
    assert!(live.array().failed_members().is_empty());

    // Three 1 MiB resync steps (chunks 2, 10, 12) of a 16 MiB member, plus
    // its superblock and bitmap writes.
    let written = mem3_written(&live) - before;
    assert!(
        (3 * MIB..3 * MIB + 256 * 1024).contains(&written),
        "{written} bytes written to the re-added member"
    );

    // mem0 fails: what role 0 held now comes from mem3 and the parity.
    live.fail("mem0").unwrap();
    let mut back = vec![0u8; size as usize];
    for (i, piece) in back.chunks_mut(MIB as usize).enumerate() {
        v.read_at(piece, i as u64 * MIB).unwrap();
    }
    assert!(back == reference, "the re-added member serves exact data");
}

#[test]
fn a_served_re_add_is_refused_for_a_blank_device_and_nothing_is_written() {
    let (_devs, live, _clock) = common::served_bitmapped_raid5();
    live.fail("mem3").unwrap();
    live.remove("mem3").unwrap();
    let blank = Device {
        path: "blank".into(),
        volume: Arc::new(MemVolume::new(16 * MIB)),
    };
    let e = live.re_add_check(&blank).unwrap_err();
    assert!(
        e.to_string().contains("re-add of blank is not possible"),
        "{e}"
    );
    let e = live.re_add(blank.clone(), true).unwrap_err();
    assert!(e.to_string().contains("nothing was changed"), "{e}");
    let mut b = vec![1u8; 8192];
    blank.volume.read_at(&mut b, 0).unwrap();
    assert!(
        b.iter().all(|&x| x == 0),
        "nothing written to the blank device"
    );
}
