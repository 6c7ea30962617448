//! The simulated cache is opened and stopped through `raidlab_cache::CacheStack`,
//! as `raidlab serve` and the `cache:` benchmark open theirs: its stack starts
//! no thread, hands its cleaner to the simulator (a task on the virtual clock),
//! and its stop is the stack's (the cleaner ended first, then the cache's
//! clean stop, which writes the superblock clean and keeps dirty blocks).

use raidlab_cache::{Config, Mode};
use raidlab_core::IoKind;
use raidlab_sim::cache::{CacheSpec, SimCache};
use raidlab_sim::device::{Completion, Device, Request};
use raidlab_sim::ideal::Ideal;
use raidlab_sim::presets;

const CACHE: u64 = 8 << 20;

fn sim(dirty_target_pct: u8) -> SimCache {
    SimCache::new(CacheSpec {
        name: "stacked cache".into(),
        cache: presets::device("intel-520").unwrap(),
        cache_bytes: Some(CACHE),
        // 5 ms an operation, one at a time.
        origin: Box::new(Ideal::new(32 << 20, 5000.0, 150.0)),
        origin_optimal_io: None,
        config: Config {
            mode: Mode::WriteBack,
            block_size: 4096,
            dirty_target_pct,
            ..Config::default()
        },
    })
    .unwrap()
}

fn write(id: u64, offset: u64) -> Request {
    Request {
        id,
        kind: IoKind::Write,
        offset,
        len: 4096,
        process: 0,
    }
}

fn drain(sim: &mut SimCache) -> Vec<Completion> {
    let mut done = Vec::new();
    while let Some(at) = sim.next_event() {
        sim.advance(at, &mut done);
    }
    done
}

#[test]
fn the_simulated_cache_runs_and_stops_through_its_cache_stack() {
    // A target no write here reaches: the blocks stay dirty until the stop.
    let mut sim = sim(50);
    assert!(
        !sim.stack().cleans_in_background(),
        "no cleaner thread: the simulator runs the cleaner on its clock"
    );
    assert!(
        sim.stack().owner_cleaner().is_some(),
        "the stack hands its cleaner to the simulator"
    );
    for i in 0..8 {
        sim.submit(0, write(i, i * 4096));
    }
    assert_eq!(drain(&mut sim).len(), 8);
    assert!(sim.errors().is_empty(), "{:?}", sim.errors());
    let volume = sim.volume().clone();
    assert_eq!(volume.stats().dirty_blocks, 8);
    assert!(!volume.superblock().clean, "open: not stopped cleanly");
    let stop = sim.stop().unwrap();
    assert!(stop.cleaner_error.is_none(), "{:?}", stop.cleaner_error);
    stop.shutdown.unwrap();
    let sb = volume.superblock();
    assert!(sb.clean, "the stack's stop writes the superblock clean");
    assert_eq!(
        volume.stats().dirty_blocks,
        8,
        "a clean stop keeps dirty blocks in the cache, as serve's does"
    );
}

#[test]
fn a_simulated_cache_is_not_stopped_under_a_request() {
    let mut sim = sim(50);
    // A write-back write goes to the cache device: at 0 it is still there.
    sim.submit(0, write(1, 0));
    let err = sim.stop().unwrap_err();
    assert!(err.contains("stacked cache"), "{err}");
    assert!(err.contains("1 request(s) under way"), "{err}");
}
