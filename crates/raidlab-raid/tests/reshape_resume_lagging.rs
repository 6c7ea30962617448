//! A reshape resumed after a crash inside a checkpoint's commit: the
//! commit reached one member, the others still record the checkpoint
//! before it (one event behind). The resumed walk must make every member
//! record the position it resumes from before it moves a byte: otherwise,
//! the fresh member lost, the others assemble at the older position and
//! read stripes already moved in the old geometry (the loss the served
//! reshape torture found, issue 36).

use raidlab_core::Volume;
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_raid::assemble::{create, Assembly, CreateSpec, Device, NewMember};
use raidlab_raid::grow::ReshapeRequest;
use raidlab_raid::recovery::RunOptions;
use std::cell::Cell;
use std::sync::Arc;

const MIB: u64 = 1 << 20;
/// Bytes at each member's start holding its metadata 1.2 superblock.
const HEAD: usize = 8192;

/// Walk the recorded reshape one step, then stop: the stop checkpoints
/// where the walk is (one superblock commit, the checkpoints asked for
/// being larger than the array). `ready` sees the members as the walk is
/// about to go.
fn one_step(devs: &[Device], ready: impl FnOnce()) -> u64 {
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    let mut walk = asm.reshape_served(false).unwrap();
    ready();
    let steps = Cell::new(0);
    let opts = RunOptions {
        checkpoint_bytes: 1 << 40,
        ..RunOptions::default()
    };
    let quit = || {
        steps.set(steps.get() + 1);
        steps.get() > 1
    };
    let e = walk.run(&mut asm, &opts, &quit).unwrap_err();
    assert!(e.to_string().contains("stopped"), "{e}");
    let asm = Assembly::assemble(devs.to_vec()).unwrap();
    asm.reshape().unwrap().unwrap().position
}

#[test]
fn a_resumed_walk_brings_members_a_checkpoint_behind_level_before_it_moves_anything() {
    let devs: Vec<Device> = (0..5)
        .map(|i| Device {
            path: format!("m{i}"),
            volume: Arc::new(raidlab_devices::MemVolume::new(16 * MIB)),
        })
        .collect();
    let spec = CreateSpec {
        level: Level::Raid5,
        layout: Layout::Parity(ParityLayout::RightSymmetric),
        chunk_bytes: 64 << 10,
        spares: 0,
        name: "lag".into(),
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
    let mut asm = create(&spec, members).unwrap();
    let req = ReshapeRequest {
        layout: Some("right-asymmetric".into()),
        ..ReshapeRequest::default()
    };
    let plan = asm.reshape_check(&req, 0).unwrap();
    asm.reshape_start(plan).unwrap();
    drop(asm);
    let first = one_step(&devs, || {});
    assert!(first > 0, "the first step moved something");
    // The superblocks as the second step starts, its checkpoint's commit
    // the next to write them.
    let heads = Cell::new(Vec::new());
    let second = one_step(&devs, || {
        heads.set(
            devs.iter()
                .map(|d| {
                    let mut h = vec![0u8; HEAD];
                    d.volume.read_at(&mut h, 0).unwrap();
                    h
                })
                .collect(),
        )
    });
    let heads = heads.take();
    assert!(
        second > first,
        "the second step moved on: {first} then {second}"
    );
    // The second checkpoint's commit reached member 0 only.
    for (d, h) in devs.iter().zip(&heads).skip(1) {
        d.volume.write_at(h, 0).unwrap();
        d.volume.flush().unwrap();
    }
    let others = devs[1..].to_vec();
    let behind = Assembly::assemble(others.clone()).unwrap();
    assert_eq!(behind.reshape().unwrap().unwrap().position, first);
    drop(behind);
    // Assembled with member 0, the array is at the second checkpoint; the
    // walk is made ready to go on (from here a step may move bytes).
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    assert_eq!(asm.reshape().unwrap().unwrap().position, second);
    let walk = asm.reshape_served(false).unwrap();
    drop(walk);
    drop(asm);
    // Member 0 lost: the others must now record the second checkpoint.
    let asm = Assembly::assemble(others).unwrap();
    assert_eq!(
        asm.reshape().unwrap().unwrap().position,
        second,
        "the members a checkpoint behind still record the older position after the walk was resumed"
    );
}
