//! The simulated cache tier runs the real cache live: for seeded serial
//! workloads in each mode, the operations a `SimCache` submits to its simulated
//! cache device and origin are exactly those the real `CachedVolume` issues to
//! memory volumes for the same requests and cleaner ticks begun at the same
//! virtual times, and with a RAID 5 origin so are the member operations under
//! it. Serial, because only then does a replay one request after another
//! decide in the order the live run did: with requests overlapping, a read's
//! origin reads run without the cache's lock while others decide, which is
//! what the live run is for (the last tests here).

use raidlab_cache::{CachedVolume, Config, Mode, OriginId};
use raidlab_core::IoKind;
use raidlab_core::{Result, Volume};
use raidlab_devices::{Access, MemVolume, Recorded};
use raidlab_layout::{Geometry, Layout, Level};
use raidlab_raid::Array;
use raidlab_sim::array::{ArraySpec, TaskArray, DATA_OFFSET};
use raidlab_sim::cache::{CacheSpec, Event, SimCache};
use raidlab_sim::device::{Completion, Device, ModelInfo, Ns, Request, VirtualClock, SEC};
use raidlab_sim::host::HostCost;
use raidlab_sim::ideal::Ideal;
use raidlab_sim::presets;
use raidlab_sim::workload::{run, Job, Pattern};
use std::sync::{Arc, Mutex};

const MEMBER: u64 = 16 << 20;
const CACHE: u64 = 8 << 20;

/// (kind, offset, length) as a device or volume received it.
type Op = (IoKind, u64, u64);

/// A simulated device that writes down what reaches it, then passes it on.
#[derive(Debug)]
struct Logged {
    inner: Box<dyn Device>,
    seen: Arc<Mutex<Vec<Op>>>,
}

impl Device for Logged {
    fn capacity(&self) -> u64 {
        self.inner.capacity()
    }
    fn submit(&mut self, now: Ns, req: Request) {
        self.seen
            .lock()
            .unwrap()
            .push((req.kind, req.offset, req.len));
        self.inner.submit(now, req);
    }
    fn next_event(&self) -> Option<Ns> {
        self.inner.next_event()
    }
    fn advance(&mut self, now: Ns, done: &mut Vec<Completion>) {
        self.inner.advance(now, done)
    }
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }
    fn member_ops(&self) -> Option<&raidlab_sim::stats::OpLog> {
        self.inner.member_ops()
    }
}

/// A real volume that writes down reads, writes and flushes, then passes them on.
struct Rec {
    inner: Arc<dyn Volume>,
    seen: Mutex<Vec<Op>>,
}

impl Rec {
    fn new(inner: Arc<dyn Volume>) -> Rec {
        Rec {
            inner,
            seen: Mutex::new(Vec::new()),
        }
    }
    fn note(&self, op: Op) {
        self.seen.lock().unwrap().push(op);
    }
}

impl Volume for Rec {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.note((IoKind::Read, offset, buf.len() as u64));
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.note((IoKind::Write, offset, buf.len() as u64));
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> Result<()> {
        self.note((IoKind::Flush, 0, 0));
        self.inner.flush()
    }
    fn optimal_io_size(&self) -> Option<u64> {
        self.inner.optimal_io_size()
    }
}

fn geometry() -> Geometry {
    let level = Level::Raid5;
    Geometry::new(
        level,
        Layout::parse(level, None).unwrap(),
        64 << 10,
        3,
        MEMBER,
    )
    .unwrap()
}

fn config(mode: Mode) -> Config {
    Config {
        mode,
        block_size: 4096,
        // A low target and a short cutoff, so that the cleaner runs and
        // streams bypass within a short test.
        dirty_target_pct: 2,
        sequential_cutoff: 1 << 20,
        ..Config::default()
    }
}

struct SimRun {
    cache_ops: Vec<Op>,
    origin_ops: Vec<Op>,
    member_ops: Vec<(IoKind, usize, u64, u64)>,
    events: Vec<(Ns, Event)>,
    stats: raidlab_cache::Stats,
}

fn simulate(mode: Mode, raid: bool, serial: bool) -> SimRun {
    let cache_seen = Arc::new(Mutex::new(Vec::new()));
    let origin_seen = Arc::new(Mutex::new(Vec::new()));
    let (origin, optimal): (Box<dyn Device>, Option<u64>) = if raid {
        let g = geometry();
        let members = (0..3)
            .map(|_| {
                Some(Box::new(Ideal::new(DATA_OFFSET + MEMBER, 5000.0, 150.0)) as Box<dyn Device>)
            })
            .collect();
        let mut a = TaskArray::new(ArraySpec {
            name: "sim raid5".into(),
            geometry: g,
            members,
            stripe_cache: None,
            // The engine's own member requests, before the host's plug
            // merges a step's contiguous ones (`host.rs`).
            host: HostCost {
                plug_merge_bytes: 0,
                ..HostCost::default()
            },
            rebuild: None,
        })
        .unwrap();
        a.keep_ops();
        let opt = a.engine().optimal_io_size();
        (Box::new(a), opt)
    } else {
        (Box::new(Ideal::new(2 * MEMBER, 5000.0, 150.0)), None)
    };
    let mut sim = SimCache::new(CacheSpec {
        name: "sim cache".into(),
        cache: Box::new(Logged {
            inner: presets::device("intel-520").unwrap(),
            seen: cache_seen.clone(),
        }),
        cache_bytes: Some(CACHE),
        origin: Box::new(Logged {
            inner: origin,
            seen: origin_seen.clone(),
        }),
        origin_optimal_io: optimal,
        config: config(mode),
    })
    .unwrap();
    sim.keep_events();
    let cap = sim.capacity();
    let mut t = 0;
    // (pattern, block, read %, threads, queue depth, region, seed): random
    // mixes over a region that fits the cache and one that does not, a stream
    // past the cutoff, reads of what was written; serial runs take one
    // thread at queue depth 1.
    let jobs = [
        (Pattern::Random, 4096, 50, 1, 1, 4 << 20, 11),
        (Pattern::Random, 4096, 30, 2, 4, cap, 12),
        (Pattern::Random, 16384, 70, 1, 8, 6 << 20, 13),
        (Pattern::Sequential, 256 << 10, 0, 1, 2, cap, 14),
        (Pattern::Random, 4096, 100, 1, 4, 4 << 20, 15),
        (Pattern::Random, 6144, 40, 1, 3, 8 << 20, 16),
    ];
    for (pattern, block, read_percent, threads, qd, region, seed) in jobs {
        let job = Job {
            pattern,
            block,
            read_percent,
            threads: if serial { 1 } else { threads },
            queue_depth: if serial { 1 } else { qd },
            region: (0, region),
            duration: SEC,
            max_ops: 400,
            seed,
        };
        let out = run(&mut sim, &job, t).expect("job runs");
        assert!(out.ops > 0);
        t = out.end;
    }
    let mut done = Vec::new();
    sim.submit(
        t,
        Request {
            id: 0,
            kind: IoKind::Flush,
            offset: 0,
            len: 0,
            process: 0,
        },
    );
    // The flush, then whatever cleaning is left, until nothing is to do.
    while let Some(at) = sim.next_event() {
        sim.advance(at, &mut done);
    }
    assert_eq!(done.len(), 1, "the flush completes");
    assert!(sim.errors().is_empty(), "{:?}", sim.errors());
    let member_ops = match sim.member_ops() {
        Some(log) => log
            .ops
            .iter()
            .filter(|io| matches!(io.kind, IoKind::Read | IoKind::Write))
            .map(|io| (io.kind, io.member, io.offset - DATA_OFFSET, io.len))
            .collect(),
        None => Vec::new(),
    };
    let stats = sim.stats();
    let cache_ops = cache_seen.lock().unwrap().clone();
    let origin_ops = origin_seen.lock().unwrap().clone();
    SimRun {
        cache_ops,
        origin_ops,
        member_ops,
        events: sim.events().to_vec(),
        stats,
    }
}

fn replay(mode: Mode, raid: bool, sim: &SimRun) {
    let recorded: Vec<Arc<Recorded>> = (0..3)
        .map(|_| Arc::new(Recorded::new(Arc::new(MemVolume::new(MEMBER)))))
        .collect();
    let inner: Arc<dyn Volume> = if raid {
        let members = recorded
            .iter()
            .map(|m| Some(m.clone() as Arc<dyn Volume>))
            .collect();
        Arc::new(Array::new("real", geometry(), members).unwrap())
    } else {
        Arc::new(MemVolume::new(2 * MEMBER))
    };
    let cache = Rec::new(Arc::new(MemVolume::new(CACHE)));
    let origin = Rec::new(inner);
    let id = OriginId::Signature([7; 32]);
    raidlab_cache::create(&cache, &origin, id, "real", [1; 16], config(mode)).unwrap();
    let clock = Arc::new(VirtualClock::default());
    let v = CachedVolume::open(cache, origin, id, clock.clone()).unwrap();
    v.cache_device().seen.lock().unwrap().clear();
    v.origin().seen.lock().unwrap().clear();
    for r in &recorded {
        r.take();
    }
    let mut buf = Vec::new();
    for &(t, ev) in &sim.events {
        clock.set(t);
        match ev {
            Event::Request { kind, offset, len } => {
                buf.resize(len as usize, 0x33);
                match kind {
                    IoKind::Read => v.read_at(&mut buf, offset).unwrap(),
                    IoKind::Write => v.write_at(&buf, offset).unwrap(),
                    IoKind::Zero => v.write_zeroes(offset, len).unwrap(),
                    IoKind::Flush => v.flush().unwrap(),
                    IoKind::Trim => {}
                }
            }
            Event::CleanTick => {
                v.clean_tick().unwrap();
            }
        }
    }
    let sorted = |mut o: Vec<Op>| {
        o.sort_unstable();
        o
    };
    let real_cache = v.cache_device().seen.lock().unwrap().clone();
    let real_origin = v.origin().seen.lock().unwrap().clone();
    assert_eq!(
        real_cache.len(),
        sim.cache_ops.len(),
        "{mode:?}: cache device operations"
    );
    assert_eq!(
        sorted(real_cache),
        sorted(sim.cache_ops.clone()),
        "{mode:?}: cache device operations"
    );
    assert_eq!(
        sorted(real_origin),
        sorted(sim.origin_ops.clone()),
        "{mode:?}: origin operations"
    );
    let mut stats = v.stats();
    let mut simulated = sim.stats;
    // Counters only; both are the same code, so equal counters say the same
    // decisions were made in the same order.
    stats.occupied_blocks = 0;
    simulated.occupied_blocks = 0;
    assert_eq!(stats, simulated, "{mode:?}: statistics");
    if raid {
        let mut real: Vec<(IoKind, usize, u64, u64)> = recorded
            .iter()
            .enumerate()
            .flat_map(|(m, r)| {
                r.take().into_iter().map(move |a| {
                    let kind = match a.access {
                        Access::Read => IoKind::Read,
                        Access::Write => IoKind::Write,
                    };
                    (kind, m, a.offset, a.len)
                })
            })
            .collect();
        real.sort_unstable();
        let mut simulated = sim.member_ops.clone();
        simulated.sort_unstable();
        assert_eq!(real.len(), simulated.len(), "{mode:?}: member operations");
        assert_eq!(real, simulated, "{mode:?}: member operations");
    }
}

fn check(mode: Mode, raid: bool) -> SimRun {
    let sim = simulate(mode, raid, true);
    replay(mode, raid, &sim);
    sim
}

#[test]
fn write_back_over_raid5_issues_what_the_real_cache_issues() {
    let sim = check(Mode::WriteBack, true);
    let s = sim.stats;
    // The workloads reach every decision the comparison is about.
    assert!(s.read_hits > 0 && s.write_hits > 0, "{s:?}");
    assert!(s.promotions > 0, "{s:?}");
    assert!(s.bypass_sequential_bytes > 0, "{s:?}");
    assert!(s.cleaned_blocks > 0, "{s:?}");
    assert!(
        sim.events.iter().any(|(_, e)| *e == Event::CleanTick),
        "the cleaner ticked"
    );
    // Cleaning stops at the dirty target (2%), as the real cleaner does.
    assert!(s.dirty_blocks <= s.cache_blocks * 2 / 100, "{s:?}");
    assert!(!sim.member_ops.is_empty());
}

#[test]
fn write_through_and_write_around_issue_what_the_real_cache_issues() {
    for mode in [Mode::WriteThrough, Mode::WriteAround] {
        let sim = check(mode, false);
        assert!(sim.stats.read_hits > 0, "{mode:?}: {:?}", sim.stats);
        assert!(!sim.origin_ops.is_empty());
    }
    let s = check(Mode::WriteAround, true).stats;
    assert!(s.invalidations > 0 || s.bypass_mode_bytes > 0, "{s:?}");
}

#[test]
fn write_back_on_one_device_issues_what_the_real_cache_issues() {
    check(Mode::WriteBack, false);
}

/// Overlapping requests and the cleaner, live, give the same operations, the
/// same beginnings at the same virtual times and the same counters every run.
#[test]
fn overlapping_requests_repeat_exactly() {
    for (mode, raid) in [(Mode::WriteBack, true), (Mode::WriteThrough, false)] {
        let (a, b) = (simulate(mode, raid, false), simulate(mode, raid, false));
        assert!(!a.cache_ops.is_empty() && !a.origin_ops.is_empty());
        assert_eq!(a.cache_ops, b.cache_ops, "{mode:?}");
        assert_eq!(a.origin_ops, b.origin_ops, "{mode:?}");
        assert_eq!(a.member_ops, b.member_ops, "{mode:?}");
        assert_eq!(a.events, b.events, "{mode:?}");
        assert_eq!(a.stats, b.stats, "{mode:?}");
    }
}

fn req(id: u64, kind: IoKind, offset: u64, len: u64) -> Request {
    Request {
        id,
        kind,
        offset,
        len,
        process: 0,
    }
}

/// Run `sim` until nothing is left to do; the completions by id.
fn drain(sim: &mut SimCache) -> Vec<Completion> {
    let mut done = Vec::new();
    while let Some(at) = sim.next_event() {
        sim.advance(at, &mut done);
    }
    done.sort_by_key(|c| c.id);
    done
}

/// A write that arrives while a read miss of its block is at the origin
/// keeps that read from promoting what it read (older than the write), as
/// the real cache decides when the read comes back with the lock: a cache
/// that decided each request whole at its arrival promoted the block first.
#[test]
fn a_write_during_a_read_miss_at_the_origin_stops_its_promotion() {
    let mut sim = SimCache::new(CacheSpec {
        name: "sim cache".into(),
        cache: presets::device("intel-520").unwrap(),
        cache_bytes: Some(CACHE),
        // 5 ms an operation, one at a time: the read is at the origin long
        // after the write arrives.
        origin: Box::new(Ideal::new(2 * MEMBER, 5000.0, 150.0)),
        origin_optimal_io: None,
        config: config(Mode::WriteThrough),
    })
    .unwrap();
    sim.keep_events();
    sim.submit(0, req(1, IoKind::Read, 0, 4096));
    sim.submit(100_000, req(2, IoKind::Write, 0, 4096));
    let done = drain(&mut sim);
    assert_eq!(done.len(), 2);
    // The write went to the origin after the read (one operation at a time)
    // and held the cache's lock across it, as write-through does: the read,
    // back from the origin at 5 ms, waited for the lock until the write was
    // done, then took it to decide (and promoted nothing).
    assert!(done[1].at >= 10_000_000, "{done:?}");
    assert_eq!(done[0].at, done[1].at, "{done:?}");
    let s = sim.stats();
    assert_eq!((s.read_misses, s.write_misses), (1, 1), "{s:?}");
    assert_eq!(s.promotions, 0, "{s:?}");
    assert_eq!(s.not_promoted, 1, "{s:?}");
    // Both began at their arrival: the read had let the lock go at the origin.
    let begun: Vec<Ns> = sim
        .events()
        .iter()
        .filter(|(_, e)| *e != Event::CleanTick)
        .map(|&(t, _)| t)
        .collect();
    assert_eq!(begun, vec![0, 100_000]);
    assert!(sim.errors().is_empty(), "{:?}", sim.errors());
    // The next read of the block misses again and now promotes it.
    sim.submit(done[1].at, req(3, IoKind::Read, 0, 4096));
    drain(&mut sim);
    let s = sim.stats();
    assert_eq!((s.read_misses, s.promotions), (2, 1), "{s:?}");
}

/// The cleaner is the driver's loop on the virtual clock: it begins a tick
/// at start, and each next one at least the driver's interval after the
/// previous one began; and it ticks while the dirty share is over the target.
#[test]
fn the_cleaner_ticks_at_the_drivers_interval() {
    let sim = simulate(Mode::WriteBack, false, false);
    let ticks: Vec<Ns> = sim
        .events
        .iter()
        .filter(|(_, e)| *e == Event::CleanTick)
        .map(|&(t, _)| t)
        .collect();
    assert_eq!(ticks.first(), Some(&0));
    assert!(ticks.len() > 10, "{}", ticks.len());
    let interval = raidlab_cache::driver::DEFAULT_INTERVAL.as_nanos() as Ns;
    for w in ticks.windows(2) {
        assert!(w[1] >= w[0] + interval, "{w:?}");
    }
    assert!(sim.stats.cleaned_blocks > 0, "{:?}", sim.stats);
}
