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
    create_with(level, devs, |_| {})
}

/// [`create_on`] with the spec changed by `change` first (a bitmap, a log).
#[allow(dead_code)] // not every test binary that includes this module uses it
pub fn create_with(
    level: raidlab_layout::Level,
    devs: &[raidlab_raid::assemble::Device],
    change: impl FnOnce(&mut raidlab_raid::assemble::CreateSpec),
) -> Assembly {
    use raidlab_raid::assemble::{create, CreateSpec, NewMember};
    let mut spec = CreateSpec {
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
    change(&mut spec);
    let members = devs
        .iter()
        .map(|d| NewMember {
            device: d.clone(),
            zeroed: true,
        })
        .collect();
    create(&spec, members).unwrap()
}

/// A RAID 5 of four 16 MiB memory members (`mem0`..`mem3`) with a bitmap of
/// 1 MiB chunks, served as `serve` starts it (marked dirty, then running) on
/// a clock the test moves.
#[allow(dead_code)] // not every test binary that includes this module uses it
pub fn served_bitmapped_raid5() -> (
    Vec<raidlab_raid::assemble::Device>,
    std::sync::Arc<raidlab_raid::live::LiveArray>,
    std::sync::Arc<raidlab_core::ManualClock>,
) {
    use raidlab_raid::assemble::Device;
    let devs: Vec<Device> = (0..4)
        .map(|i| Device {
            path: format!("mem{i}"),
            volume: std::sync::Arc::new(raidlab_devices::MemVolume::new(16 << 20)),
        })
        .collect();
    let mut asm = create_with(raidlab_layout::Level::Raid5, &devs, |s| {
        s.bitmap = true;
        s.bitmap_chunk = Some(1 << 20);
    });
    asm.mark_dirty().unwrap();
    let array = std::sync::Arc::new(asm.array().unwrap());
    let live = raidlab_raid::live::LiveArray::new(asm, array);
    let clock = raidlab_core::ManualClock::new();
    live.set_clock(clock.clone());
    (devs, live, clock)
}

/// `n` fault-injecting 16 MiB memory members (write-through), named d0, d1, ...
#[allow(dead_code)] // not every test binary that includes this module uses it
pub fn fault_members(
    n: usize,
) -> (
    Vec<std::sync::Arc<raidlab_devices::FaultVolume<raidlab_devices::MemVolume>>>,
    Vec<raidlab_raid::assemble::Device>,
) {
    use raidlab_devices::{FaultVolume, MemVolume};
    use std::sync::Arc;
    let faults: Vec<Arc<FaultVolume<MemVolume>>> = (0..n)
        .map(|_| Arc::new(FaultVolume::new(MemVolume::new(16 << 20))))
        .collect();
    let devs = faults
        .iter()
        .enumerate()
        .map(|(i, f)| raidlab_raid::assemble::Device {
            path: format!("d{i}"),
            volume: f.clone(),
        })
        .collect();
    (faults, devs)
}

/// The array on `devs`, assembled and started for writing.
#[allow(dead_code)] // not every test binary that includes this module uses it
pub fn start_writable(devs: &[raidlab_raid::assemble::Device]) -> raidlab_raid::lifecycle::Started {
    raidlab_raid::lifecycle::Started::start(
        Assembly::assemble(devs.to_vec()).unwrap(),
        raidlab_raid::lifecycle::StartOptions {
            write: true,
            ..Default::default()
        },
    )
    .unwrap()
}

/// A RAID 4 (parity last), 5 or 6 (left-symmetric) geometry of `disks`
/// members of `rows` chunks each.
#[allow(dead_code)] // not every test binary that includes this module uses it
pub fn parity_geometry(
    level: raidlab_layout::Level,
    disks: usize,
    chunk: u64,
    rows: u64,
) -> raidlab_layout::Geometry {
    use raidlab_layout::{Geometry, Layout, Level, ParityLayout};
    Geometry::new(
        level,
        Layout::Parity(if level == Level::Raid4 {
            ParityLayout::ParityLast
        } else {
            ParityLayout::LeftSymmetric
        }),
        chunk,
        disks,
        rows * chunk,
    )
    .unwrap()
}
