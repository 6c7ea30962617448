//! The engine against volumes whose behaviour is known: in-flight requests counted
//! by a probe volume, io_uring and blocking workers compared on the same file,
//! errors carrying device, offset and operation, a whole CrystalDiskMark set on
//! memory and on an in-process array. Figures are only sanity-checked here (no
//! timed assertions); measured accuracy lives in docs/benchmarks.md.

use raidlab_bench::cdm::{self, CdmConfig, Profile};
use raidlab_bench::target::{create_array, OpenOptions, TargetKind};
use raidlab_bench::{
    engine, Access, Control, DataFill, Dir, EngineKind, Limit, Rewrite, Target, Workload,
};
use raidlab_core::{Result, Volume};
use raidlab_devices::{FaultVolume, MemVolume};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

fn opts(size: u64) -> OpenOptions {
    OpenOptions {
        size,
        direct: true,
        writes: true,
        allow_device_writes: false,
    }
}

fn workload(access: Access, dir: Dir, bs: usize, size: u64, threads: usize, qd: usize) -> Workload {
    Workload {
        access,
        dir,
        bs,
        offset: 0,
        size,
        threads,
        qd,
        limit: Limit {
            time: None,
            bytes: Some(size),
        },
        data: DataFill::Random,
        rewrite: Rewrite::Never,
        random_map: false,
        seed: 7,
        split: true,
        engine: EngineKind::Auto,
    }
}

/// Counts requests in flight and remembers the most seen at once. Reads wait
/// until `expect` are inside together (a rendezvous, not a sleep), so the most
/// seen is exactly what the engine keeps in flight however the machine
/// schedules threads; an engine that keeps fewer makes the first read wait
/// out the deadline, and the count then says so.
struct Probe {
    inner: MemVolume,
    now: AtomicUsize,
    max: AtomicUsize,
    expect: usize,
    met: Mutex<bool>,
    cv: Condvar,
}

impl Volume for Probe {
    fn name(&self) -> String {
        "probe".into()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(n, Ordering::SeqCst);
        {
            let mut met = self.met.lock().unwrap();
            if n >= self.expect {
                *met = true;
                self.cv.notify_all();
            }
            // Only an engine that never gets `expect` reads in flight waits
            // this out; then every later read goes straight through.
            let (mut met, _) = self
                .cv
                .wait_timeout_while(met, Duration::from_secs(30), |m| !*m)
                .unwrap();
            *met = true;
        }
        let r = self.inner.read_at(buf, offset);
        self.now.fetch_sub(1, Ordering::SeqCst);
        r
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> Result<()> {
        Ok(())
    }
}

#[test]
fn threads_times_queue_depth_are_in_flight_exactly() {
    for (threads, qd) in [(1, 1), (1, 8), (3, 4)] {
        let probe = Arc::new(Probe {
            inner: MemVolume::new(4 << 20),
            now: AtomicUsize::new(0),
            max: AtomicUsize::new(0),
            expect: threads * qd,
            met: Mutex::new(false),
            cv: Condvar::new(),
        });
        let t = Target::from_volume("probe", probe.clone(), 4 << 20).unwrap();
        let mut w = workload(Access::Rand, Dir::Read, 4096, 4 << 20, threads, qd);
        w.limit = Limit {
            time: None,
            bytes: Some(4096 * (threads * qd * 6) as u64),
        };
        let m = engine::run(&t, &w, &Control::new()).unwrap();
        assert_eq!(m.read.ios, (threads * qd * 6) as u64);
        assert_eq!(
            probe.max.load(Ordering::SeqCst),
            threads * qd,
            "T{threads} Q{qd}"
        );
    }
}

#[test]
fn io_uring_and_blocking_workers_do_the_same_io_on_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, vec![0xAB; 8 << 20]).unwrap();
    let t = Target::open(path.to_str().unwrap(), opts(8 << 20)).unwrap();
    assert_eq!(t.kind, TargetKind::File);
    // A kernel or sandbox without io_uring runs the fallback only; CI's
    // machines have io_uring, so there its absence is a failure.
    let uring = match io_uring::IoUring::new(2) {
        Ok(_) => true,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("SKIPPED: the io_uring half: io_uring is not available here: {e}");
            false
        }
        Err(e) => panic!("io_uring is not available on this CI machine: {e}"),
    };
    for engine in [EngineKind::Uring, EngineKind::Threads] {
        if engine == EngineKind::Uring && !uring {
            continue;
        }
        let mut w = workload(Access::Seq, Dir::Write, 64 << 10, 8 << 20, 2, 4);
        w.data = DataFill::Zero;
        w.engine = engine;
        let m = engine::run(&t, &w, &Control::new()).unwrap_or_else(|e| panic!("{engine:?}: {e}"));
        assert_eq!(m.write.ios, 128, "{engine:?}");
        assert_eq!(m.write.bytes, 8 << 20);
        t.volume.flush().unwrap();
        // One sequential pass per thread slice: every byte was written once.
        assert!(
            std::fs::read(&path).unwrap().iter().all(|&b| b == 0),
            "{engine:?}"
        );
        std::fs::write(&path, vec![0xAB; 8 << 20]).unwrap();
        let mut r = workload(Access::Rand, Dir::Read, 4096, 8 << 20, 1, 16);
        r.engine = engine;
        let m = engine::run(&t, &r, &Control::new()).unwrap();
        assert_eq!(m.read.ios, 2048, "{engine:?}");
        assert!(m.read.hist.len() == 2048 && m.read.mean_lat_us() > 0.0);
    }
}

#[test]
fn a_failing_device_stops_the_run_with_device_offset_and_operation() {
    let fv = Arc::new(FaultVolume::new(MemVolume::new(1 << 20)));
    fv.fail_reads(65536..69632);
    let t = Target::from_volume("faulty", fv, 1 << 20).unwrap();
    let w = workload(Access::Seq, Dir::Read, 4096, 1 << 20, 1, 4);
    let e = engine::run(&t, &w, &Control::new())
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("read failed on"), "{e}");
    assert!(e.contains("65536"), "{e}");
}

#[test]
fn bad_workloads_are_refused_by_name() {
    let t = Target::from_volume("m", Arc::new(MemVolume::new(1 << 20)), 1 << 20).unwrap();
    let mut w = workload(Access::Seq, Dir::Read, 4096, 2 << 20, 1, 1);
    let e = engine::run(&t, &w, &Control::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("past the end"), "{e}");
    w.size = 1 << 20;
    w.qd = 0;
    let e = engine::run(&t, &w, &Control::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("queue depth"), "{e}");
    w.qd = 1;
    w.engine = EngineKind::Uring;
    let e = engine::run(&t, &w, &Control::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("threads engine"), "{e}");
    let e = Target::open("nbd://localhost:10809/x", opts(1 << 20))
        .unwrap_err()
        .to_string();
    assert!(e.contains("NBD"), "{e}");
    let e = Target::open("mem:1M,speed=3", opts(1 << 20))
        .unwrap_err()
        .to_string();
    assert!(e.contains("speed=3"), "{e}");
}

/// Counts the reads that reach a volume.
struct Counted {
    inner: Arc<dyn Volume>,
    reads: AtomicUsize,
}

impl Volume for Counted {
    fn name(&self) -> String {
        "counted".into()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
}

#[test]
fn a_stop_request_ends_a_timed_run_early_with_what_was_measured() {
    let t = Target::open("mem:4M", opts(4 << 20)).unwrap();
    let mut w = workload(Access::Rand, Dir::Read, 4096, 4 << 20, 1, 2);
    w.limit = Limit {
        time: Some(Duration::from_secs(30)),
        bytes: None,
    };
    let c = Control::new();
    // Stop once the run has done some I/O (not after a guessed time).
    let counted = Arc::new(Counted {
        inner: t.volume.clone(),
        reads: AtomicUsize::new(0),
    });
    let t = Target::from_volume("counted", counted.clone(), 4 << 20).unwrap();
    let m = std::thread::scope(|s| {
        s.spawn(|| {
            while counted.reads.load(Ordering::SeqCst) < 100 {
                std::thread::yield_now();
            }
            c.stop();
        });
        engine::run(&t, &w, &c).unwrap()
    });
    assert!(m.interrupted && m.read.ios >= 100, "{} ios", m.read.ios);
    // Well before its 30 s limit: the stop ended it.
    assert!(m.elapsed < Duration::from_secs(25));
}

fn quick() -> CdmConfig {
    CdmConfig {
        size: 4 << 20,
        runs: 2,
        measure: Duration::from_millis(60),
        interval: Duration::ZERO,
        ..CdmConfig::default()
    }
}

#[test]
fn crystaldiskmark_set_on_memory_fills_every_cell_and_row() {
    let cfg = quick();
    let t = Target::open("mem:8M", opts(cfg.size)).unwrap();
    let mut events = 0;
    let r = cdm::run(&t, &cfg, &Control::new(), &mut |_| events += 1).unwrap();
    assert_eq!(r.cells.len(), 8);
    assert_eq!(events, 1 + 8 * 2);
    assert_eq!(r.cells[0].test, "SEQ1M Q8T1");
    assert_eq!(r.cells[0].dir, "read");
    assert_eq!(r.cells[4].dir, "write");
    for c in &r.cells {
        assert_eq!(c.runs.len(), 2);
        assert!(c.best.mb_s > 0.0 && c.best.mb_s >= c.avg_mb_s, "{c:?}");
        assert!(c.best.latency_us > 0.0);
    }
    let rep = cdm::report(std::slice::from_ref(&r), &cfg);
    assert_eq!(rep.rows.len(), 8 * 4);
    let table = cdm::table(&[r]);
    assert!(table.contains("RND4K Q32T1"), "{table}");
}

#[test]
fn throttled_memory_is_measured_near_its_limit() {
    // Loose sanity only (timing on a shared machine); the 5% figures are in
    // docs/benchmarks.md.
    let cfg = CdmConfig {
        profile: Profile::RealWorld,
        size: 8 << 20,
        runs: 1,
        measure: Duration::from_millis(400),
        interval: Duration::ZERO,
        write: false,
        ..CdmConfig::default()
    };
    let t = Target::open("mem:8M,bw=40M", opts(cfg.size)).unwrap();
    let r = cdm::run(&t, &cfg, &Control::new(), &mut |_| {}).unwrap();
    let seq = &r.cells[0];
    let limit = (40 << 20) as f64 / 1e6;
    assert!(
        seq.best.mb_s < limit * 1.5 && seq.best.mb_s > limit * 0.5,
        "{seq:?}"
    );
}

#[test]
fn an_array_given_by_members_runs_in_process_and_is_left_clean() {
    let dir = tempfile::tempdir().unwrap();
    let members: Vec<_> = (0..4).map(|i| dir.path().join(format!("m{i}"))).collect();
    let cfg = CdmConfig {
        profile: Profile::RealWorld,
        ..quick()
    };
    let t = create_array(
        "r5",
        raidlab_layout::Level::Raid5,
        64 << 10,
        &members,
        8 << 20,
        opts(cfg.size),
    )
    .unwrap();
    assert_eq!(t.kind, TargetKind::Array);
    let r = cdm::run(&t, &cfg, &Control::new(), &mut |_| {}).unwrap();
    assert_eq!(r.cells.len(), 4);
    t.finish().unwrap();
    drop(t);
    // Reopened by members, the array is clean (marked so after the flush).
    let spec = format!(
        "array:{}",
        members
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    let t = Target::open(
        &spec,
        OpenOptions {
            writes: false,
            ..opts(1 << 20)
        },
    )
    .unwrap();
    assert_eq!(t.kind, TargetKind::Array);
}

#[test]
fn array_members_can_be_throttled_and_a_bad_option_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let members: Vec<_> = (0..3).map(|i| dir.path().join(format!("m{i}"))).collect();
    let t = create_array(
        "r5",
        raidlab_layout::Level::Raid5,
        64 << 10,
        &members,
        8 << 20,
        opts(1 << 20),
    )
    .unwrap();
    t.finish().unwrap();
    drop(t);
    let list = members
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(",");
    let t = Target::open(
        &format!("array:{list},bw=150000000,iops=150"),
        opts(1 << 20),
    )
    .unwrap();
    assert_eq!(t.kind, TargetKind::Array);
    assert!(
        t.notes
            .iter()
            .any(|n| n.contains("each member throttled to 150000000 bytes/s, 150 IOPS")),
        "{:?}",
        t.notes
    );
    t.finish().unwrap();
    drop(t);
    let e = Target::open(&format!("array:{list},speed=3"), opts(1 << 20)).unwrap_err();
    assert!(
        e.to_string().contains("'speed=3' is not a target option"),
        "{e}"
    );
    assert!(e.to_string().contains("bw=RATE"), "{e}");
}

#[test]
fn a_directory_gets_a_test_file_that_is_removed_afterwards() {
    let dir = tempfile::tempdir().unwrap();
    let t = Target::open(dir.path().to_str().unwrap(), opts(1 << 20)).unwrap();
    assert_eq!(t.kind, TargetKind::Directory);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    drop(t);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// The default engine on a buffered file is the blocking workers, as fio's
/// default (psync), and on an O_DIRECT file io_uring: a default run on a
/// page-cache file must never be the io_uring outlier issue 21 measured
/// (Bonnie++ block write on tmpfs at 4% of the real bonnie++).
#[test]
fn the_default_engine_is_threads_on_a_buffered_file_and_io_uring_with_o_direct() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, vec![0xAB; 4 << 20]).unwrap();
    let uring = io_uring::IoUring::new(2).is_ok();
    for direct in [false, true] {
        let t = Target::open(
            path.to_str().unwrap(),
            OpenOptions {
                direct,
                ..opts(4 << 20)
            },
        )
        .unwrap();
        let w = workload(Access::Seq, Dir::Read, 64 << 10, 4 << 20, 1, 4);
        let m = engine::run(&t, &w, &Control::new()).unwrap();
        // A file system that refuses O_DIRECT (tmpfs) runs buffered: t.direct says.
        let want = if t.direct && uring {
            "io_uring"
        } else {
            "threads"
        };
        assert_eq!(m.engine, want, "direct asked {direct}, got {}", t.direct);
        assert_eq!(m.read.ios, 64);
    }
}
