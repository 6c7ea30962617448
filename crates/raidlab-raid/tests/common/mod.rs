//! Helpers shared by the raidlab-raid integration tests.

use raidlab_core::ErrorKind;
use raidlab_raid::assemble::Assembly;
use raidlab_raid::recovery::RunOptions;
use std::sync::atomic::{AtomicBool, Ordering};

/// Rebuild in 64 KiB steps, checkpointing each, until `at` bytes of the member
/// area are done; then stop as Ctrl-C would (the checkpoint is saved). With
/// `force`, also when parity is not known to be consistent, as a live rebuild
/// of a running (dirty) array does. Returns the progress reports seen.
#[allow(dead_code)] // not every test binary that includes this module uses it
pub fn rebuild_until(asm: &mut Assembly, at: u64, force: bool) -> usize {
    // Each call its own flag: tests run in parallel threads.
    let stop: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
    let opts = RunOptions {
        step_bytes: 64 << 10,
        checkpoint_bytes: 64 << 10,
        stop: Some(stop),
        force,
        ..RunOptions::default()
    };
    let mut reports = 0;
    let e = asm
        .rebuild(opts, &mut |p| {
            reports += 1;
            if p.done >= at {
                stop.store(true, Ordering::Relaxed);
            }
        })
        .expect_err("the rebuild should have been interrupted");
    assert_eq!(e.kind, ErrorKind::Interrupted, "{e}");
    reports
}

/// Memory members of `sizes` bytes made into a new array of `level` (md's
/// default layout, 64 KiB chunks, no bitmap or log), as `raidlab create` of
/// zeroed members does.
#[allow(dead_code)] // not every test binary that includes this module uses it
pub fn mem_array(
    level: raidlab_layout::Level,
    sizes: &[u64],
) -> Vec<raidlab_raid::assemble::Device> {
    use raidlab_raid::assemble::Device;
    let devs: Vec<Device> = sizes
        .iter()
        .enumerate()
        .map(|(i, &s)| Device {
            path: format!("m{i}"),
            volume: std::sync::Arc::new(raidlab_devices::MemVolume::new(s)),
        })
        .collect();
    create_on(level, &devs);
    devs
}

/// A new array of `level` (md's default layout, 64 KiB chunks, no bitmap or
/// log) made on `devs`, as `raidlab create` of zeroed members does.
#[allow(dead_code)] // not every test binary that includes this module uses it
pub fn create_on(
    level: raidlab_layout::Level,
    devs: &[raidlab_raid::assemble::Device],
) -> Assembly {
    use raidlab_raid::assemble::{create, CreateSpec, NewMember};
    let spec = CreateSpec {
        level,
        layout: raidlab_layout::Layout::parse(level, None).unwrap(),
        chunk_bytes: 64 << 10,
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
    create(&spec, members).unwrap()
}
