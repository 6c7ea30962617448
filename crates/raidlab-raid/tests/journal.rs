//! md's write journal over many ring lengths: writes that fill the journal's
//! ring again and again (reclaim: members flushed, journal_tail moved; the ring
//! wraps), a crash right after, and the replay from wherever the tail was.

use raidlab_core::Volume;
use raidlab_devices::{FaultVolume, MemVolume, PowerCutPolicy};
use raidlab_layout::{Layout, Level};
use raidlab_raid::assemble::{create_with_journal, Assembly, CreateSpec, Device, NewMember};
use raidlab_raid::recovery::RunOptions;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

mod common;

const MEMBER: u64 = (1 << 20) + (512 << 10);
/// md's 1 MiB data offset and the smallest ring raidlab accepts (256 KiB).
const JOURNAL: u64 = (1 << 20) + (256 << 10);

#[test]
fn a_wrapping_journal_reclaims_and_replays_after_a_crash() {
    let vols: Vec<Arc<FaultVolume<MemVolume>>> = (0..6)
        .map(|i| {
            Arc::new(FaultVolume::with_volatile_cache(MemVolume::new(
                if i == 5 { JOURNAL } else { MEMBER },
            )))
        })
        .collect();
    let devs: Vec<Device> = vols
        .iter()
        .enumerate()
        .map(|(i, v)| Device {
            path: if i == 5 {
                "journal".into()
            } else {
                format!("m{i}")
            },
            volume: v.clone(),
        })
        .collect();
    let spec = CreateSpec {
        level: Level::Raid6,
        layout: Layout::parse(Level::Raid6, None).unwrap(),
        chunk_bytes: 8 << 10,
        spares: 0,
        name: "wrap".into(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: false,
    };
    let members = devs[..5]
        .iter()
        .map(|d| NewMember {
            device: d.clone(),
            zeroed: true,
        })
        .collect();
    let journal = Some(NewMember {
        device: devs[5].clone(),
        zeroed: true,
    });
    let mut asm = create_with_journal(&spec, members, journal).unwrap();
    asm.start_journal().unwrap().unwrap();
    let array = asm.array().unwrap();
    assert!(array.has_journal());
    let size = array.size() as usize;
    let mut model = vec![0u8; size];
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    // About six ring lengths of data, in writes of 1 to 40 KiB at any sector.
    let mut logged = 0usize;
    while logged < 6 * (256 << 10) {
        let len = rng.gen_range(1..=80) * 512;
        let off = rng.gen_range(0..(size - len) / 512) * 512;
        let mut data = vec![0u8; len];
        rng.fill(&mut data[..]);
        array.write_at(&data, off as u64).unwrap();
        model[off..off + len].copy_from_slice(&data);
        logged += len;
    }
    let reclaims = array.journal().unwrap().reclaims();
    assert!(
        reclaims >= 3,
        "the ring should have filled several times, reclaimed {reclaims}"
    );
    assert_ne!(
        array.journal().unwrap().tail(),
        0,
        "journal_tail never moved"
    );
    // One more write across a stripe, then the power goes: the journal and the
    // data members keep it, the parity members of its stripes lose it.
    let off = 3 * 24 * 1024 + 4096;
    let data = vec![0xa5u8; 16 << 10];
    array.write_at(&data, off as u64).unwrap();
    model[off..off + data.len()].copy_from_slice(&data);
    let g = asm.geometry;
    let first = off as u64 / (g.chunk_bytes * g.data_disks() as u64);
    let last = (off + data.len() - 1) as u64 / (g.chunk_bytes * g.data_disks() as u64);
    let parity: Vec<usize> = (first..=last)
        .flat_map(|s| {
            let m = g.stripe(s);
            [Some(m.p), m.q].into_iter().flatten()
        })
        .collect();
    for (i, v) in vols.iter().enumerate() {
        let p = if i < 5 && parity.contains(&i) {
            PowerCutPolicy::DropAll
        } else {
            PowerCutPolicy::KeepAll
        };
        v.power_cut_with(p).unwrap();
    }
    drop(array);
    drop(asm);
    for v in &vols {
        v.restart();
    }
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    assert!(
        asm.in_sync(),
        "md keeps a journaled array's superblocks clean"
    );
    let before = asm
        .scrub(false, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert!(
        before.mismatch_sectors > 0,
        "the cut must have left P/Q stale, or this test proves nothing"
    );
    let replay = asm.start_journal().unwrap().unwrap();
    assert!(!replay.fresh && replay.stripes_replayed > 0, "{replay:?}");
    let after = asm
        .scrub(false, RunOptions::default(), &mut |_| {})
        .unwrap();
    assert_eq!(after.mismatch_sectors, 0, "{:?}", after.findings.first());
    let array = asm.array().unwrap();
    let mut got = vec![0u8; size];
    array.read_at(&mut got, 0).unwrap();
    assert!(got == model, "contents differ after the replay");
    // Degraded by two members, the array still reads right: P and Q agree.
    drop(array);
    let mut asm = Assembly::assemble(devs[2..].to_vec()).unwrap();
    asm.check_startable(false).unwrap();
    asm.start_journal().unwrap();
    let array = asm.array().unwrap();
    array.read_at(&mut got, 0).unwrap();
    assert!(got == model, "degraded contents differ after the replay");
}

/// What a journaled write logs: every written data page and the stripe's full
/// new P and Q, even when a parity member is missing (md replays a stripe only
/// with its parity), and never a write to the missing member.
#[test]
fn a_journaled_plan_logs_data_and_full_parity_even_without_a_parity_member() {
    use raidlab_core::IoKind;
    use raidlab_raid::plan::Step;
    use raidlab_raid::planner::plan_write_journaled;
    let g = raidlab_layout::Geometry::new(
        Level::Raid6,
        Layout::parse(Level::Raid6, None).unwrap(),
        8 << 10,
        6,
        256 << 10,
    )
    .unwrap();
    let map = g.stripe(0);
    // Six members: a one-page write would be read-modify-write (2 reads against
    // 3), which cannot produce the parity of a missing member.
    for missing in [None, Some(map.p), map.q] {
        let present: Vec<bool> = (0..6).map(|r| Some(r) != missing).collect();
        let plan = plan_write_journaled(&g, &present, 4096, 4096).unwrap();
        let entries: Vec<_> = plan
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Log(e) => Some(e.clone()),
                _ => None,
            })
            .flatten()
            .collect();
        let mut members: Vec<usize> = entries.iter().map(|e| e.member).collect();
        members.sort_unstable();
        let mut want = vec![map.data[0], map.p, map.q.unwrap()];
        want.sort_unstable();
        assert_eq!(members, want, "missing {missing:?}: {entries:?}");
        assert!(entries
            .iter()
            .all(|e| e.data_offset == 4096 && e.data_size == 4096 && e.pp.is_some()));
        // The log step comes before every write.
        let log_at = plan
            .steps
            .iter()
            .position(|s| matches!(s, Step::Log(_)))
            .unwrap();
        for (i, s) in plan.steps.iter().enumerate() {
            if let Step::Io(ops) = s {
                for op in ops.iter().filter(|o| o.kind == IoKind::Write) {
                    assert!(i > log_at, "a member write before the journal");
                    assert_ne!(Some(op.member), missing, "a write to the missing member");
                }
            }
        }
    }
    // md's journal unit is a 4 KiB page.
    assert!(plan_write_journaled(&g, &[true; 6], 512, 4096).is_err());
}

/// A RAID 5 with a journal, member m1 failed and m9 added in its place and
/// rebuilt up to 256 KiB (checkpoint saved); the devices, journal included.
fn partly_rebuilt_journaled_array() -> (Assembly, Vec<Device>) {
    let member = |i: usize| Device {
        path: format!("m{i}"),
        volume: Arc::new(MemVolume::new(if i == 4 { JOURNAL } else { 2 << 20 })),
    };
    let mut devs: Vec<Device> = (0..5).map(member).collect();
    devs[4].path = "journal".into();
    let spec = CreateSpec {
        level: Level::Raid5,
        layout: Layout::parse(Level::Raid5, None).unwrap(),
        chunk_bytes: 8 << 10,
        spares: 0,
        name: "partial".into(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: false,
    };
    let new_member = |d: &Device| NewMember {
        device: d.clone(),
        zeroed: true,
    };
    let members = devs[..4].iter().map(new_member).collect();
    let mut asm = create_with_journal(&spec, members, Some(new_member(&devs[4]))).unwrap();
    asm.start_journal().unwrap().unwrap();
    asm.fail(1).unwrap();
    let fresh = member(9);
    devs.push(fresh.clone());
    asm.add(fresh, false).unwrap();
    common::rebuild_until(&mut asm, 256 << 10, false);
    (asm, devs)
}

/// How far m9's rebuild got, in sectors.
fn m9_offset(asm: &Assembly) -> u64 {
    asm.members
        .iter()
        .find(|m| m.device.path == "m9")
        .unwrap()
        .sb
        .recovery_offset
}

/// A journaled array is kept clean while it runs, so marking it for writing
/// writes no superblock. With a member rebuilt partway, it must: that member
/// does not get the writes to come, so its rebuild has to start over.
#[test]
fn opening_a_journaled_array_for_writing_restarts_a_partial_rebuild() {
    let (_, devs) = partly_rebuilt_journaled_array();
    let mut again = Assembly::assemble(devs.clone()).unwrap();
    assert!(
        m9_offset(&again) * 512 >= 256 << 10,
        "{}",
        m9_offset(&again)
    );
    again.start_journal().unwrap().unwrap();
    assert!(again.in_sync());
    again.mark_dirty().unwrap();
    assert_eq!(m9_offset(&Assembly::assemble(devs).unwrap()), 0);
}

/// A crash with writes in the journal not yet known to be on the members, while
/// a member was being rebuilt: the replay writes the members in service only,
/// so the partial rebuild starts over rather than resuming at its checkpoint.
/// The array stays clean while it runs, so nothing else would tell.
#[test]
fn a_journal_replay_restarts_a_partial_rebuild() {
    let (asm, devs) = partly_rebuilt_journaled_array();
    // Writes through the journal, then the crash: the array was never marked
    // clean, nor the journal's tail moved past them.
    asm.array().unwrap().write_at(&[0x5a; 64 << 10], 0).unwrap();
    let mut again = Assembly::assemble(devs.clone()).unwrap();
    assert!(
        m9_offset(&again) * 512 >= 256 << 10,
        "{}",
        m9_offset(&again)
    );
    let replay = again.start_journal().unwrap().unwrap();
    assert!(replay.replayed_anything(), "{replay:?}");
    assert_eq!(m9_offset(&again), 0);
    assert_eq!(m9_offset(&Assembly::assemble(devs).unwrap()), 0);
}
