//! md's bitmap daemon on a served array: a chunk's write-intent bit is
//! cleared on the members once no write has touched it for two passes
//! (`daemon_sleep`, 5 s by default), so a crash resyncs only what was written
//! in the last few seconds, not everything written since the array started;
//! a degraded array keeps its bits for the member's return. Time is a clock
//! the test moves; the bitmap is read back from the members as a crash would
//! leave it.

mod common;

use raidlab_core::{Clock, ManualClock, Volume};
use raidlab_raid::assemble::{Assembly, Device};
use raidlab_raid::live::LiveArray;
use std::sync::Arc;
use std::time::Duration;

const MIB: u64 = 1 << 20;
const SLEEP: Duration = Duration::from_secs(5);

/// The bitmap chunks set on the members now (what a crash would resync).
fn dirty_after_crash(devs: &[Device]) -> u64 {
    let asm = Assembly::assemble(devs.to_vec()).unwrap();
    asm.bitmap.as_ref().unwrap().dirty_count()
}

struct Served {
    devs: Vec<Device>,
    live: Arc<LiveArray>,
    clock: Arc<ManualClock>,
}

fn serve() -> Served {
    let (devs, live, clock) = common::served_bitmapped_raid5();
    assert_eq!(
        live.array().bitmap_daemon_sleep(),
        Some(SLEEP),
        "mdadm's default"
    );
    Served { devs, live, clock }
}

impl Served {
    fn wait(&self, d: Duration) {
        self.clock.sleep(d);
        let said = self.live.poll();
        assert!(
            said.iter().all(|s| !s.contains("bitmap")),
            "poll reported: {said:?}"
        );
    }

    /// 4 KiB at array offset `at`, flushed.
    fn write(&self, at: u64) {
        let v = self.live.volume();
        v.write_at(&[0x5a; 4096], at).unwrap();
        v.flush().unwrap();
    }
}

#[test]
fn idle_bits_are_cleared_on_the_second_pass_and_a_crash_resyncs_only_recent_writes() {
    let s = serve();
    s.wait(Duration::ZERO);
    // Member chunks 0 and 5 (array offsets in stripes whose member offset is
    // 0 and 5 MiB: three data chunks a stripe).
    s.write(0);
    s.write(5 * MIB * 3);
    assert_eq!(dirty_after_crash(&s.devs), 2);
    s.wait(SLEEP);
    assert_eq!(
        dirty_after_crash(&s.devs),
        2,
        "the first pass only notes them idle"
    );
    // A write to chunk 5 between the passes keeps it set one pass longer.
    s.write(5 * MIB * 3 + 8192);
    s.wait(SLEEP);
    assert_eq!(dirty_after_crash(&s.devs), 1, "chunk 0 idle for two passes");
    s.wait(SLEEP);
    assert_eq!(dirty_after_crash(&s.devs), 0);
    // Written now, a crash resyncs that one chunk only.
    s.write(9 * MIB * 3);
    s.wait(SLEEP);
    assert_eq!(dirty_after_crash(&s.devs), 1);
    let data = {
        let mut b = vec![0u8; 4096];
        s.live.volume().read_at(&mut b, 0).unwrap();
        b
    };
    assert_eq!(data, vec![0x5a; 4096], "the data stays");
}

#[test]
fn a_degraded_array_keeps_its_bits() {
    let s = serve();
    s.wait(Duration::ZERO);
    s.live.fail("mem3").unwrap();
    s.write(0);
    s.write(7 * MIB * 3);
    let dirty = dirty_after_crash(&s.devs);
    assert!(dirty >= 2, "{dirty}");
    for _ in 0..4 {
        s.wait(SLEEP);
    }
    assert_eq!(
        dirty_after_crash(&s.devs),
        dirty,
        "what mem3 missed stays marked for its re-add"
    );
}

/// A poll that comes late (the server stalled for three periods) runs one
/// pass, not one per period missed: two passes back to back would clear a
/// bit that was idle for no time at all. The next pass is a period after
/// that late one.
#[test]
fn a_late_poll_runs_one_pass_and_the_next_is_a_period_later() {
    let s = serve();
    s.wait(Duration::ZERO);
    s.write(0);
    s.wait(3 * SLEEP);
    assert_eq!(
        dirty_after_crash(&s.devs),
        1,
        "one pass: it only notes the chunk idle"
    );
    s.wait(SLEEP - Duration::from_millis(1));
    assert_eq!(dirty_after_crash(&s.devs), 1, "not a period yet");
    s.wait(Duration::from_millis(1));
    assert_eq!(dirty_after_crash(&s.devs), 0, "the second pass clears it");
}
