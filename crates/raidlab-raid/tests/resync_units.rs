//! md records a resync's progress (`resync_offset`) in the unit its resync
//! walks: member sectors for RAID 4/5/6, array sectors for RAID 1 and 10
//! (`raid10_sync_request` walks virtual addresses). A RAID 10 md stopped
//! mid-resync must be resumed from that array position, not from the member
//! position of the same number (twice as far into a near=2 array of four,
//! which skips what md never synced), and raidlab's own checkpoint must be
//! one md reads the same way.

use raidlab_core::Volume;
use raidlab_devices::MemVolume;
use raidlab_layout::{Layout, Level, Raid10Layout};
use raidlab_raid::assemble::{create, Assembly, CreateSpec, Device, NewMember};
use raidlab_raid::recovery::{Progress, RunOptions};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const MEMBER: u64 = 3 << 20;
const CHUNK: u64 = 16 << 10;

fn raid10(name: &str) -> Assembly {
    let devs: Vec<Device> = (0..4)
        .map(|i| Device {
            path: format!("mem{i}"),
            volume: Arc::new(MemVolume::new(MEMBER)),
        })
        .collect();
    let spec = CreateSpec {
        level: Level::Raid10,
        layout: Layout::Raid10(Raid10Layout::from_name(name).unwrap()),
        chunk_bytes: CHUNK,
        spares: 0,
        name: "t".into(),
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
    let data: Vec<u8> = (0..array.size())
        .map(|i| (i * 7 + i / 4099) as u8)
        .collect();
    array.write_at(&data, 0).unwrap();
    asm
}

/// Make the last copy of array byte `at` differ from the first.
fn corrupt_last_copy(asm: &Assembly, at: u64) {
    let (locs, _) = asm.geometry.mirror_map(at);
    let last = locs[locs.len() - 1];
    let area = asm.area(asm.slots[last.member].unwrap()).unwrap();
    let mut b = [0u8; 1];
    area.read_at(&mut b, last.offset).unwrap();
    area.write_at(&[b[0] ^ 0xa5], last.offset).unwrap();
}

fn mismatches(asm: &mut Assembly) -> u64 {
    asm.scrub(false, RunOptions::default(), &mut |_: Progress| {})
        .unwrap()
        .mismatch_sectors
}

#[test]
fn a_raid10_resync_resumes_at_mds_array_sector() {
    for name in ["n2", "o2", "f2"] {
        let mut asm = raid10(name);
        let array = asm.geometry.array_bytes();
        // md stopped its resync a quarter into the array: below that every
        // copy agrees (md synced it), from there on nothing is promised.
        let md_at = array / 4;
        asm.commit(|sb| sb.resync_offset = md_at / 512).unwrap();
        // Inside what md left to do, and below twice md's position (where
        // reading it as a member sector of this near=2 array would resume).
        corrupt_last_copy(&asm, md_at + CHUNK);
        // Below md's position: md says it is in sync, so a resync that
        // resumes where md stopped leaves it for a check to find.
        corrupt_last_copy(&asm, md_at - CHUNK);
        asm.resync(RunOptions::default(), &mut |_: Progress| {})
            .unwrap();
        assert_eq!(
            mismatches(&mut asm),
            8,
            "{name}: the resync mended the copy past md's position (found only the one below it, one 4 KiB page)"
        );
    }
}

#[test]
fn a_stopped_raid10_resync_records_an_array_sector() {
    static STOP: AtomicBool = AtomicBool::new(false);
    let mut asm = raid10("n2");
    let array = asm.geometry.array_bytes();
    asm.commit(|sb| sb.resync_offset = 0).unwrap();
    // Every copy differs everywhere the resync has not reached.
    let mut at = 0;
    while at < array {
        corrupt_last_copy(&asm, at);
        at += CHUNK;
    }
    let opts = RunOptions {
        stop: Some(&STOP),
        step_bytes: 64 << 10,
        checkpoint_bytes: 64 << 10,
        ..RunOptions::default()
    };
    let mut steps = 0;
    let stopped = asm.resync(opts, &mut |p: Progress| {
        if p.done > 0 {
            steps += 1;
        }
        if steps == 5 {
            STOP.store(true, Ordering::SeqCst);
        }
    });
    STOP.store(false, Ordering::SeqCst);
    assert!(stopped.is_err(), "the resync was stopped");
    let recorded = asm.members[0].sb.resync_offset * 512;
    assert!(
        recorded > 0 && recorded < array,
        "recorded {recorded} of {array}"
    );
    // What md would do with it: every array byte below it in sync (so md
    // resumes there without skipping), and the bytes at it not yet: the
    // record is the array position the resync reached, not a member one.
    // (Each chunk's first byte differed before the resync.)
    let (locs, _) = asm.geometry.mirror_map(recorded - CHUNK);
    let read = |l: raidlab_layout::Location| {
        let mut b = [0u8; 1];
        let area = asm.area(asm.slots[l.member].unwrap()).unwrap();
        area.read_at(&mut b, l.offset).unwrap();
        b[0]
    };
    let below: Vec<u8> = locs.iter().map(|&l| read(l)).collect();
    assert!(below.windows(2).all(|w| w[0] == w[1]), "below: {below:?}");
    let (locs, _) = asm.geometry.mirror_map(recorded);
    let at_record: Vec<u8> = locs.iter().map(|&l| read(l)).collect();
    assert!(
        at_record.windows(2).any(|w| w[0] != w[1]),
        "the copies at the recorded position are not synced yet: {at_record:?}"
    );
}
