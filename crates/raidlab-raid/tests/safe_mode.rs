//! md's safe mode on a served array: the superblocks say dirty while writes
//! are pending and clean again once none has come for 200 ms, so a crash
//! while the array sits idle needs no resync, and one during writes does.
//! Time is a clock the test moves; the superblocks are read back from the
//! members as a crash would leave them (assembled again from the devices).

use raidlab_core::{Clock, ManualClock, Volume};
use raidlab_devices::MemVolume;
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_raid::assemble::{create, Assembly, CreateSpec, Device, NewMember};
use raidlab_raid::live::{drive_polls, LiveArray, WriteMark, SAFE_MODE_DELAY, SAFE_MODE_POLL};
use std::sync::Arc;
use std::time::Duration;

/// What a crash now would leave: the array assembled from its members'
/// superblocks, in sync or not.
fn in_sync_after_crash(devs: &[Device]) -> bool {
    Assembly::assemble(devs.to_vec()).unwrap().in_sync()
}

struct Served {
    devs: Vec<Device>,
    live: Arc<LiveArray>,
    clock: Arc<ManualClock>,
}

fn serve(level: Level, bitmap: bool, safe_mode: bool) -> Served {
    let devs: Vec<Device> = (0..4)
        .map(|i| Device {
            path: format!("mem{i}"),
            volume: Arc::new(MemVolume::new(4 << 20)),
        })
        .collect();
    let spec = CreateSpec {
        level,
        layout: if level == Level::Raid5 {
            Layout::Parity(ParityLayout::LeftSymmetric)
        } else {
            Layout::Plain
        },
        chunk_bytes: if level == Level::Raid1 { 0 } else { 64 << 10 },
        spares: 0,
        name: "safe".into(),
        force: false,
        bitmap,
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
    // As `serve` starts it: dirty, then running.
    assert!(asm.mark_dirty().unwrap(), "a new array is in sync");
    let array = Arc::new(asm.array().unwrap());
    let live = LiveArray::new(asm, array);
    let clock = ManualClock::new();
    live.set_clock(clock.clone());
    live.start_safe_mode(safe_mode);
    Served { devs, live, clock }
}

impl Served {
    fn wait(&self, d: Duration) {
        self.clock.sleep(d);
        let said = self.live.poll();
        assert!(said.is_empty(), "poll reported: {said:?}");
    }
}

#[test]
fn an_idle_array_is_marked_clean_after_the_delay_and_dirty_before_its_next_write() {
    for (level, bitmap) in [
        (Level::Raid5, false),
        (Level::Raid5, true),
        (Level::Raid1, false),
    ] {
        let s = serve(level, bitmap, true);
        let label = format!("{level:?} bitmap={bitmap}");
        let v = s.live.volume();
        // Started: dirty on disk, active, until a quiet spell has passed.
        assert_eq!(s.live.write_mark(), Some(WriteMark::Active), "{label}");
        assert!(!in_sync_after_crash(&s.devs), "{label}");
        s.wait(SAFE_MODE_DELAY - Duration::from_millis(1));
        assert_eq!(s.live.write_mark(), Some(WriteMark::Active), "{label}");
        assert!(!in_sync_after_crash(&s.devs), "{label}");
        s.wait(Duration::from_millis(1));
        assert_eq!(s.live.write_mark(), Some(WriteMark::Clean), "{label}");
        assert!(
            in_sync_after_crash(&s.devs),
            "{label}: idle, yet dirty on disk"
        );

        // A write marks the superblocks dirty before it changes a member.
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        v.write_at(&data, 12_345).unwrap();
        assert_eq!(s.live.write_mark(), Some(WriteMark::Active), "{label}");
        assert!(
            !in_sync_after_crash(&s.devs),
            "{label}: written, still clean on disk"
        );
        // Writes keep it active; the delay counts from the last one.
        s.wait(Duration::from_millis(150));
        v.write_zeroes(1 << 20, 4096).unwrap();
        s.wait(Duration::from_millis(150));
        assert_eq!(s.live.write_mark(), Some(WriteMark::Active), "{label}");
        s.wait(Duration::from_millis(50));
        assert_eq!(s.live.write_mark(), Some(WriteMark::Clean), "{label}");
        // Clean means flushed: what was written is on the members, and the
        // array assembled from them (as after a crash now) reads it back
        // with no resync owed.
        let again = Assembly::assemble(s.devs.clone()).unwrap();
        assert!(again.in_sync(), "{label}");
        let mut back = vec![0u8; data.len()];
        again.array().unwrap().read_at(&mut back, 12_345).unwrap();
        assert!(back == data, "{label}: data lost after the clean mark");
        let mut z = vec![1u8; 4096];
        again.array().unwrap().read_at(&mut z, 1 << 20).unwrap();
        assert!(z.iter().all(|&b| b == 0), "{label}");
    }
}

/// The serving process's polls run on the long-run driver (`drive_polls`,
/// what `raidlab serve` runs): on a clock that moves only by the driver's
/// sleeps, an array is marked clean one delay after its last write, at the
/// first poll due then, and the run ends when asked.
#[test]
fn the_polls_on_the_long_run_driver_mark_an_idle_array_clean() {
    let s = serve(Level::Raid5, false, true);
    s.live.volume().write_at(&[7u8; 4096], 0).unwrap();
    assert_eq!(s.live.write_mark(), Some(WriteMark::Active));
    let start = s.clock.now();
    let give_up = start + Duration::from_secs(10);
    let mut said = Vec::new();
    let clean = || s.live.write_mark() == Some(WriteMark::Clean);
    drive_polls(
        std::slice::from_ref(&s.live),
        s.clock.as_ref(),
        &|| clean() || s.clock.now() > give_up,
        &mut |i, text| said.push((i, text)),
    )
    .unwrap();
    assert!(said.is_empty(), "{said:?}");
    assert!(clean(), "not marked clean by {:?}", s.clock.now() - start);
    let took = s.clock.now() - start;
    assert!(
        took >= SAFE_MODE_DELAY && took <= SAFE_MODE_DELAY + SAFE_MODE_POLL,
        "marked clean {took:?} after the write"
    );
    assert!(in_sync_after_crash(&s.devs), "clean on disk too");
}

#[test]
fn an_array_owed_a_resync_stays_dirty_while_it_serves() {
    let s = serve(Level::Raid5, false, false);
    assert_eq!(s.live.write_mark(), None);
    s.wait(Duration::from_secs(5));
    assert!(!in_sync_after_crash(&s.devs));
    assert!(s.live.status().writes.is_none());
}

#[test]
fn a_repair_keeps_the_array_dirty_while_it_runs() {
    let s = serve(Level::Raid5, false, true);
    s.wait(SAFE_MODE_DELAY);
    assert_eq!(s.live.write_mark(), Some(WriteMark::Clean));
    // The repair marks the array dirty before it rewrites anything; this
    // progress callback runs while it does.
    let mut seen = Vec::new();
    s.live
        .scrub(
            true,
            raidlab_raid::recovery::RunOptions::default(),
            &mut |_| {
                seen.push((s.live.write_mark(), in_sync_after_crash(&s.devs)));
            },
        )
        .unwrap();
    assert!(!seen.is_empty());
    assert!(
        seen.iter()
            .all(|&(m, clean)| m == Some(WriteMark::Active) && !clean),
        "{seen:?}"
    );
    s.wait(SAFE_MODE_DELAY);
    assert_eq!(s.live.write_mark(), Some(WriteMark::Clean));
}
