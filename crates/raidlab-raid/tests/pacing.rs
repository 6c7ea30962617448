//! `--max-rate` is a rate per member, as md's speed limits are per device, for
//! every long run (check, repair, resync, rebuild; parity levels and mirrors):
//! a run over members of B bytes at R bytes/s takes B/R seconds whatever the
//! member count. Checked on a virtual clock that only sleeps advance. As md's
//! sync thread, a run waits before a step, never after its last one: it takes
//! B/R less at most one step's time.

use raidlab_core::{Clock, ManualClock, Volume};
use raidlab_devices::MemVolume;
use raidlab_layout::{Layout, Level, ParityLayout, Raid10Layout};
use raidlab_raid::assemble::{create, Assembly, CreateSpec, Device, NewMember};
use raidlab_raid::recovery::RunOptions;
use std::sync::Arc;

fn array(level: Level, layout: Layout, n: usize) -> (Assembly, Vec<Device>) {
    let devs: Vec<Device> = (0..n + 1)
        .map(|i| Device {
            path: format!("m{i}"),
            volume: Arc::new(MemVolume::new(3 << 20)),
        })
        .collect();
    let spec = CreateSpec {
        level,
        layout,
        chunk_bytes: 64 << 10,
        spares: 0,
        name: "pace".into(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: false,
    };
    let members = devs[..n]
        .iter()
        .map(|d| NewMember {
            device: d.clone(),
            zeroed: true,
        })
        .collect();
    (create(&spec, members).unwrap(), devs)
}

/// Bytes of each member a run's step covers.
const STEP: u64 = 256 << 10;

/// Whether `t` seconds is what a run over two seconds' worth of member bytes
/// takes at `rate`: two seconds less the last step's time, which it does not
/// wait out (a step's I/O takes no virtual time here).
fn two_seconds(t: f64, rate: u64) -> bool {
    let last = STEP as f64 / rate as f64;
    t <= 2.0 + 1e-6 && t >= 2.0 - last - 1e-6
}

/// Virtual seconds `run` took at `rate` bytes/s.
fn timed(rate: u64, run: impl FnOnce(RunOptions)) -> f64 {
    let clock = ManualClock::new();
    run(RunOptions {
        max_rate: Some(rate),
        step_bytes: STEP,
        clock: Some(clock.clone()),
        ..RunOptions::default()
    });
    clock.now().as_secs_f64()
}

#[test]
fn every_run_is_paced_per_member() {
    let cases = [
        (Level::Raid5, Layout::Parity(ParityLayout::LeftSymmetric), 4),
        (Level::Raid6, Layout::Parity(ParityLayout::LeftSymmetric), 6),
        (
            Level::Raid10,
            Layout::Raid10(Raid10Layout::from_name("n2").unwrap()),
            4,
        ),
        (Level::Raid1, Layout::Plain, 3),
    ];
    for (level, layout, n) in cases {
        let label = format!("{} of {n}", level.name());
        let (mut asm, devs) = array(level, layout, n);
        let member = asm.geometry.member_bytes;
        // Two seconds of each member's bytes at this rate, whatever n is.
        let rate = member / 2;
        for repair in [false, true] {
            let t = timed(rate, |o| {
                asm.scrub(repair, o, &mut |_| {}).unwrap();
            });
            assert!(two_seconds(t, rate), "{label}: scrub took {t} s, not 2");
        }
        asm.commit(|sb| sb.resync_offset = 0).unwrap();
        let t = timed(rate, |o| {
            asm.resync(o, &mut |_| {}).unwrap();
        });
        assert!(two_seconds(t, rate), "{label}: resync took {t} s, not 2");
        // A rebuild writes one member: the same two seconds.
        let i = asm.find("m1").unwrap();
        asm.fail(i).unwrap();
        asm.add(devs[n].clone(), false).unwrap();
        let t = timed(rate, |o| {
            asm.rebuild(o, &mut |_| {}).unwrap();
        });
        assert!(two_seconds(t, rate), "{label}: rebuild took {t} s, not 2");
        assert!(devs[n].volume.size() > 0);
    }
}
