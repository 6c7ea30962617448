//! Helpers shared by the raidlab-raid integration tests.

use raidlab_core::ErrorKind;
use raidlab_raid::assemble::Assembly;
use raidlab_raid::recovery::RunOptions;
use std::sync::atomic::{AtomicBool, Ordering};

/// Rebuild in 64 KiB steps, checkpointing each, until `at` bytes of the member
/// area are done; then stop as Ctrl-C would (the checkpoint is saved). With
/// `force`, also when parity is not known to be consistent, as a live rebuild
/// of a running (dirty) array does. Returns the progress reports seen.
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
