//! The cache tier's speed against the devices under it (issue 18), on
//! throttled in-memory devices so that the ratios mean something on any
//! machine: an SSD-like cache device in front of a RAID 5 of three HDD-like
//! members.
//!
//! ```text
//! cargo run --release -p raidlab-cache --example cache_bench -- [--seconds S] [--rounds N] [--only NAME]
//! cargo run --release -p raidlab-cache --example cache_bench -- seed-b
//! ```
//!
//! Each comparison runs both sides `--rounds` times, alternating which goes
//! first, and compares the medians. The workloads are raidlab-bench's engine
//! (blocking workers, one per queue slot), as `raidlab bench` runs an
//! in-process target. `seed-b` runs IOzone's random-write / random-read test on
//! 1 MiB and 16 MiB files, 4 KiB records, on the same stack with and without a
//! write-back cache (SEEDS.md, seed B), and prints the cache's statistics.
//!
//! What it cannot say: the throttle has a rate and no latency or seek model,
//! so an HDD-like member pays its IOPS limit on sequential requests too, a
//! device at QD32 is no faster than at QD1, and a request to an idle throttle
//! returns at once (its cost is charged to the requests after it). That last
//! point hides the cache device's read time in a flush, where each read is
//! followed by a long origin write; so the flush is also measured on devices
//! with a service time ([`Serial`]: one request at a time, each taking its
//! size at the device's bandwidth or one IOPS interval, whichever is longer).

use raidlab_bench::engine::{self, Control, Measured};
use raidlab_bench::iozone::{self, IozoneConfig};
use raidlab_bench::{Access, DataFill, Dir, EngineKind, Limit, Rewrite, Target, Workload};
use raidlab_cache::driver::DEFAULT_INTERVAL;
use raidlab_cache::format::DATA_ALIGN;
use raidlab_cache::{create, BackgroundCleaner, CachedVolume, Config, Mode, OriginId, Stats};
use raidlab_core::{Result, Volume};
use raidlab_devices::{Limits, MemVolume, SystemClock, ThrottleVolume};
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_raid::array::Array;
use raidlab_raid::assemble::{CreateSpec, Device, NewMember};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A SATA SSD's order of magnitude: 500 MB/s, 50,000 IOPS.
const SSD: Limits = Limits {
    bytes_per_sec: Some(500_000_000),
    iops: Some(50_000),
};
/// A 7,200 rpm disk's order of magnitude: 150 MB/s, 150 IOPS.
const HDD: Limits = Limits {
    bytes_per_sec: Some(150_000_000),
    iops: Some(150),
};
/// mdadm's default chunk.
const CHUNK: u64 = 512 << 10;
/// Data on each member: 512 MiB, so the array holds 1 GiB.
const MEMBER_DATA: u64 = 512 << 20;
/// The cache's block: 4 KiB, the size for small random I/O (a larger block
/// makes a 4 KiB write-back miss read the rest of the block from the origin).
const BLOCK: u64 = 4096;
const ID: OriginId = OriginId::Signature([0x5b; 32]);

type Dev = Arc<dyn Volume>;
type Cached = CachedVolume<Dev, Arc<Array>>;

/// How a device's speed is modelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Model {
    /// [`ThrottleVolume`]: a rate, no latency.
    Rate,
    /// [`Serial`]: one request at a time, each with a service time.
    Service,
}

/// A device serving one request at a time, each taking `len / bandwidth` or
/// `1 / iops`, whichever is longer: a disk at queue depth 1, whose requests
/// take time even when it is idle.
#[derive(Debug)]
struct Serial {
    inner: MemVolume,
    limits: Limits,
    busy: Mutex<()>,
}

impl Serial {
    fn serve(&self, len: usize) {
        let _one = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        let bw = self
            .limits
            .bytes_per_sec
            .map_or(0.0, |b| len as f64 / b as f64);
        let ops = self.limits.iops.map_or(0.0, |i| 1.0 / i as f64);
        std::thread::sleep(Duration::from_secs_f64(bw.max(ops)));
    }
}

impl Volume for Serial {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.serve(buf.len());
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.serve(buf.len());
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> Result<()> {
        Ok(())
    }
}

fn device(bytes: u64, limits: Limits, model: Model) -> Result<Dev> {
    Ok(match model {
        Model::Rate => Arc::new(ThrottleVolume::new(MemVolume::new(bytes), limits)?),
        Model::Service => Arc::new(Serial {
            inner: MemVolume::new(bytes),
            limits,
            busy: Mutex::new(()),
        }),
    })
}

fn ssd(bytes: u64) -> Dev {
    device(bytes, SSD, Model::Rate).expect("valid limits")
}

/// A RAID 5 of three HDD-like members, 512 KiB chunks.
fn raid5(model: Model) -> Result<Arc<Array>> {
    let members = (0..3)
        .map(|i| {
            Ok(NewMember {
                device: Device {
                    path: format!("hdd{i}"),
                    volume: device(MEMBER_DATA + (4 << 20), HDD, model)?,
                },
                zeroed: true,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let spec = CreateSpec {
        level: Level::Raid5,
        layout: Layout::Parity(ParityLayout::LeftSymmetric),
        chunk_bytes: CHUNK,
        spares: 0,
        name: "origin".into(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: false,
    };
    let mut asm = raidlab_raid::assemble::create(&spec, members)?;
    asm.mark_dirty()?;
    Ok(Arc::new(asm.array()?))
}

/// A new, empty cache of `cache_bytes` of blocks on an SSD-like device in
/// front of `origin`.
fn cache(origin: &Arc<Array>, cache_bytes: u64, mode: Mode) -> Result<Arc<Cached>> {
    cache_on(origin, cache_bytes, mode, Model::Rate)
}

fn cache_on(
    origin: &Arc<Array>,
    cache_bytes: u64,
    mode: Mode,
    model: Model,
) -> Result<Arc<Cached>> {
    let dev = device(4 * DATA_ALIGN + cache_bytes, SSD, model)?;
    let config = Config {
        mode,
        block_size: BLOCK as u32,
        // The benchmarks decide what is sequential; nothing bypasses.
        sequential_cutoff: 0,
        // Nothing is cleaned behind a test's back: no cleaner runs here.
        dirty_target_pct: 100,
        ..Config::default()
    };
    create(&dev, origin, ID, "origin", [0x5b; 16], config)?;
    let c = CachedVolume::open(dev, origin.clone(), ID, Arc::new(SystemClock::default()))?;
    // As `raidlab serve` and the cache verbs run it on real devices.
    c.set_overlapped_writeback(true);
    Ok(Arc::new(c))
}

fn workload(access: Access, dir: Dir, bs: usize, qd: usize, size: u64, secs: f64) -> Workload {
    Workload {
        access,
        dir,
        bs,
        offset: 0,
        size,
        threads: 1,
        qd,
        limit: Limit {
            time: Some(Duration::from_secs_f64(secs)),
            bytes: None,
        },
        data: DataFill::Random,
        rewrite: Rewrite::Never,
        // Each block once per pass: a miss test must not hit what it promoted.
        random_map: true,
        seed: 18,
        split: true,
        engine: EngineKind::Threads,
    }
}

fn run(label: &str, volume: Arc<dyn Volume>, w: &Workload) -> Result<Measured> {
    let t = Target::from_volume(label, volume, w.size)?;
    engine::run(&t, w, &Control::new())
}

/// What one side of a comparison measures, in its figure of merit (MB/s).
type Side<'a> = Box<dyn Fn() -> Result<f64> + 'a>;

struct Comparison<'a> {
    name: &'static str,
    /// The side the target is about (the cache), then the reference.
    ours: (&'static str, Side<'a>),
    theirs: (&'static str, Side<'a>),
    /// ours / theirs must be at least this.
    target: f64,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

struct Args {
    secs: f64,
    rounds: usize,
    only: Option<String>,
    seed_b: bool,
}

fn args() -> std::result::Result<Args, String> {
    let mut a = Args {
        secs: 3.0,
        rounds: 3,
        only: None,
        seed_b: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        let mut value = |what: &str| it.next().ok_or(format!("{what} needs a value"));
        match x.as_str() {
            "--seconds" => {
                a.secs = value("--seconds")?
                    .parse()
                    .map_err(|e| format!("--seconds: {e}"))?
            }
            "--rounds" => {
                a.rounds = value("--rounds")?
                    .parse()
                    .map_err(|e| format!("--rounds: {e}"))?
            }
            "--only" => a.only = Some(value("--only")?),
            "seed-b" => a.seed_b = true,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if a.rounds == 0 || a.secs.is_nan() || a.secs <= 0.0 {
        return Err("--rounds and --seconds must be more than 0".into());
    }
    Ok(a)
}

fn main() {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("cache_bench: {e}");
            std::process::exit(2);
        }
    };
    let r = if a.seed_b { seed_b() } else { compare(&a) };
    if let Err(e) = r {
        eprintln!("cache_bench: {e}");
        std::process::exit(1);
    }
}

fn compare(a: &Args) -> Result<()> {
    let secs = a.secs;
    let origin = raid5(Model::Rate)?;
    // Hits: a region written through a write-back cache (whole blocks, so no
    // origin read) is all in the cache; the device alone gets the same test
    // on a device of its own with the same limits.
    let hot = 128u64 << 20;
    let warm = cache(&origin, hot + (32 << 20), Mode::WriteBack)?;
    fill(&*warm, hot)?;
    let device = ssd(hot);
    let hit = |access, dir, bs, qd| -> Side<'_> {
        let warm = warm.clone();
        Box::new(move || {
            let w = workload(access, dir, bs, qd, hot, secs);
            mb_s(&run("cache", warm.clone(), &w)?)
        })
    };
    // Write-back writes: a new cache every time, larger than the region, so
    // the first pass fills free slots and later ones overwrite dirty blocks.
    let written = |qd| -> Side<'_> {
        let origin = origin.clone();
        Box::new(move || {
            let c = cache(&origin, hot + (32 << 20), Mode::WriteBack)?;
            let w = workload(Access::Rand, Dir::Write, 4096, qd, hot, secs);
            mb_s(&run("cache", c, &w)?)
        })
    };
    let alone = |access, dir, bs, qd| -> Side<'_> {
        let device = device.clone();
        Box::new(move || {
            let w = workload(access, dir, bs, qd, hot, secs);
            mb_s(&run("ssd", device.clone(), &w)?)
        })
    };
    // Misses: a new cache every time (cold), write-through, every miss
    // promoted; the origin alone gets the same reads. The region is the
    // whole 1 GiB array, and each block is read once per pass.
    let cold = |qd| -> Side<'_> {
        let origin = origin.clone();
        Box::new(move || {
            let c = cache(&origin, 64 << 20, Mode::WriteThrough)?;
            let w = workload(Access::Rand, Dir::Read, 4096, qd, origin.size(), secs);
            mb_s(&run("cache", c, &w)?)
        })
    };
    let bare = |qd| -> Side<'_> {
        let origin = origin.clone();
        Box::new(move || {
            let w = workload(Access::Rand, Dir::Read, 4096, qd, origin.size(), secs);
            mb_s(&run("origin", origin.clone(), &w)?)
        })
    };
    // Flush: N contiguous dirty blocks (written in 1 MiB pieces, untimed),
    // then `flush_dirty` timed; against the origin written sequentially in
    // 1 MiB (one stripe) pieces and flushed. With rate-limited devices and
    // with devices that take time per request (see the module's doc).
    let n = 64u64 << 20;
    let served = raid5(Model::Service)?;
    // The region once beforehand, untimed: whichever side ran first would
    // otherwise pay for the members' first touch of their memory.
    fill_at(&*origin, 256 << 20, n)?;
    fill_at(&*served, 256 << 20, n)?;
    let flush = |origin: Arc<Array>, model, overlap| -> Side<'_> {
        Box::new(move || {
            let c = cache_on(&origin, n + (16 << 20), Mode::WriteBack, model)?;
            c.set_overlapped_writeback(overlap);
            fill_at(&*c, 256 << 20, n)?;
            let t0 = Instant::now();
            let done = c.flush_dirty(|_, _| {})?;
            let s = t0.elapsed().as_secs_f64();
            if done != n / BLOCK {
                return Err(raidlab_core::Error::invalid(format!(
                    "the flush wrote back {done} blocks, not {}",
                    n / BLOCK
                )));
            }
            Ok(n as f64 / s / 1e6)
        })
    };
    let sequential = |origin: Arc<Array>| -> Side<'_> {
        Box::new(move || {
            let t0 = Instant::now();
            fill_at(&*origin, 256 << 20, n)?;
            origin.flush()?;
            Ok(n as f64 / t0.elapsed().as_secs_f64() / 1e6)
        })
    };
    let (rr, rw, sr) = (
        (Access::Rand, Dir::Read),
        (Access::Rand, Dir::Write),
        (Access::Seq, Dir::Read),
    );
    let comparisons = vec![
        Comparison {
            name: "hit 4K random read QD1",
            ours: ("cache", hit(rr.0, rr.1, 4096, 1)),
            theirs: ("SSD alone", alone(rr.0, rr.1, 4096, 1)),
            target: 0.9,
        },
        Comparison {
            name: "hit 4K random read QD32",
            ours: ("cache", hit(rr.0, rr.1, 4096, 32)),
            theirs: ("SSD alone", alone(rr.0, rr.1, 4096, 32)),
            target: 0.9,
        },
        Comparison {
            name: "hit 1M sequential read QD1",
            ours: ("cache", hit(sr.0, sr.1, 1 << 20, 1)),
            theirs: ("SSD alone", alone(sr.0, sr.1, 1 << 20, 1)),
            target: 0.9,
        },
        Comparison {
            name: "write-back 4K random write QD1",
            ours: ("cache", written(1)),
            theirs: ("SSD alone", alone(rw.0, rw.1, 4096, 1)),
            target: 0.9,
        },
        Comparison {
            name: "write-back 4K random write QD32",
            ours: ("cache", written(32)),
            theirs: ("SSD alone", alone(rw.0, rw.1, 4096, 32)),
            target: 0.9,
        },
        Comparison {
            name: "miss 4K random read QD1",
            ours: ("cache", cold(1)),
            theirs: ("RAID 5 alone", bare(1)),
            target: 1.0 / 1.1,
        },
        Comparison {
            name: "miss 4K random read QD32",
            ours: ("cache", cold(32)),
            theirs: ("RAID 5 alone", bare(32)),
            target: 1.0 / 1.1,
        },
        Comparison {
            name: "flush 64 MiB contiguous dirty",
            ours: ("flush", flush(origin.clone(), Model::Rate, true)),
            theirs: ("RAID 5 1M seq write", sequential(origin.clone())),
            target: 0.8,
        },
        Comparison {
            name: "flush 64 MiB contiguous dirty, service-time devices",
            ours: ("flush", flush(served.clone(), Model::Service, true)),
            theirs: ("RAID 5 1M seq write", sequential(served.clone())),
            target: 0.8,
        },
        // The same without overlapped write-back (reading each piece, then
        // writing it), as a simulator runs the cache: what the overlap buys.
        Comparison {
            name: "flush 64 MiB contiguous dirty, service-time devices, no overlap",
            ours: ("flush", flush(served.clone(), Model::Service, false)),
            theirs: ("RAID 5 1M seq write", sequential(served.clone())),
            target: 0.8,
        },
    ];
    println!(
        "SSD-like cache device {} MB/s {} IOPS; RAID 5 of 3 HDD-like members {} MB/s {} IOPS, \
         {} KiB chunks; cache blocks {} bytes; {} rounds of {secs} s, alternating order",
        SSD.bytes_per_sec.unwrap_or(0) / 1_000_000,
        SSD.iops.unwrap_or(0),
        HDD.bytes_per_sec.unwrap_or(0) / 1_000_000,
        HDD.iops.unwrap_or(0),
        CHUNK >> 10,
        BLOCK,
        a.rounds
    );
    println!();
    println!("| test | cache side MB/s | reference MB/s | ratio | target | cache side runs | reference runs |");
    println!("|---|---:|---:|---:|---|---|---|");
    for c in comparisons {
        if a.only.as_deref().is_some_and(|o| !c.name.contains(o)) {
            continue;
        }
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for round in 0..a.rounds {
            if round % 2 == 0 {
                ours.push((c.ours.1)()?);
                theirs.push((c.theirs.1)()?);
            } else {
                theirs.push((c.theirs.1)()?);
                ours.push((c.ours.1)()?);
            }
        }
        let runs = |v: &[f64]| {
            v.iter()
                .map(|x| format!("{x:.2}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (o_runs, t_runs) = (runs(&ours), runs(&theirs));
        let (o, t) = (median(&mut ours), median(&mut theirs));
        let ratio = o / t;
        println!(
            "| {} ({} vs {}) | {o:.2} | {t:.2} | {ratio:.3} | {} (>= {:.2}) | {o_runs} | {t_runs} |",
            c.name,
            c.ours.0,
            c.theirs.0,
            if ratio >= c.target { "ok" } else { "**missed**" },
            c.target
        );
    }
    println!();
    println!(
        "statistics of the warm cache after the hit tests: {}",
        brief(&warm.stats())
    );
    Ok(())
}

fn mb_s(m: &Measured) -> Result<f64> {
    Ok(m.main().mb_s(m.elapsed))
}

/// Write `[0, len)` of `v` in 1 MiB pieces.
fn fill(v: &dyn Volume, len: u64) -> Result<()> {
    fill_at(v, 0, len)
}

fn fill_at(v: &dyn Volume, at: u64, len: u64) -> Result<()> {
    let piece: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let mut done = 0;
    while done < len {
        let n = (len - done).min(piece.len() as u64);
        v.write_at(&piece[..n as usize], at + done)?;
        done += n;
    }
    Ok(())
}

fn brief(s: &Stats) -> String {
    format!(
        "read hits {} misses {} partial {}; write hits {} misses {}; sequential bypass {} KiB \
         in {} requests; not promoted {}; promotions {}; \
         evictions {}; dirty blocks {}; cleaned blocks {}; occupied {} of {} blocks",
        s.read_hits,
        s.read_misses,
        s.read_partial_hits,
        s.write_hits,
        s.write_misses,
        s.bypass_sequential_bytes >> 10,
        s.bypass_sequential_requests,
        s.not_promoted,
        s.promotions,
        s.evictions,
        s.dirty_blocks,
        s.cleaned_blocks,
        s.occupied_blocks,
        s.cache_blocks
    )
}

/// SEEDS.md seed B: IOzone `-i 0 -i 2 -r 4k` on 1 MiB and 16 MiB files, on
/// the RAID 5 directly (no file system), with and without a write-back cache
/// in front; raidlab-bench's IOzone (what `raidlab bench iozone` runs). Then
/// the same six tests once more on a new cached stack, one at a time, with
/// the cache's statistics of each test, to explain the figures.
fn seed_b() -> Result<()> {
    let cfg = IozoneConfig {
        file_sizes: vec![1 << 20, 16 << 20],
        record_sizes: vec![4 << 10],
        auto_skip: false,
        include_flush: false,
        engine: EngineKind::Threads,
    };
    for with_cache in [false, true] {
        let origin = raid5(Model::Rate)?;
        let (volume, cached) = seed_b_stack(&origin, with_cache)?;
        let t = Target::from_volume(
            if with_cache {
                "cached RAID 5"
            } else {
                "RAID 5"
            },
            volume,
            16 << 20,
        )?;
        let cleaner = cached
            .as_ref()
            .map(|c| BackgroundCleaner::start(c.clone(), DEFAULT_INTERVAL));
        let r = iozone::run(&t, &cfg, &Control::new(), &mut |f, rec| {
            eprintln!(
                "{}: file {} KiB, record {} KiB",
                t.label,
                f >> 10,
                rec >> 10
            );
        })?;
        if let Some(c) = cleaner {
            let report = c.stop();
            if let Some(e) = report.error {
                return Err(e);
            }
        }
        println!("{}", iozone::table(std::slice::from_ref(&r)).trim_end());
        if let Some(c) = &cached {
            println!("cache statistics over both files: {}", brief(&c.stats()));
        }
        println!();
    }
    // Test by test, IOzone's workloads as raidlab-bench defines them (one
    // thread, QD1, each record once, random offsets repeating as IOzone's do).
    println!("| file | test | KiB/s | cache statistics of this test |");
    println!("|---|---|---:|---|");
    for file in [1u64 << 20, 16 << 20] {
        let origin = raid5(Model::Rate)?;
        let (volume, cached) = seed_b_stack(&origin, true)?;
        let cached = cached.ok_or_else(|| raidlab_core::Error::invalid("no cache"))?;
        for (i, (name, _)) in iozone::TESTS.iter().enumerate() {
            let (access, dir) = match *name {
                "write" | "rewrite" => (Access::Seq, Dir::Write),
                "read" | "re-read" => (Access::Seq, Dir::Read),
                "random read" => (Access::Rand, Dir::Read),
                _ => (Access::Rand, Dir::Write),
            };
            let w = Workload {
                limit: Limit {
                    time: None,
                    bytes: Some(file),
                },
                random_map: false,
                seed: i as u64,
                ..workload(access, dir, 4096, 1, file, 1.0)
            };
            cached.reset_stats()?;
            let m = run("cached RAID 5", volume.clone(), &w)?;
            let kib_s = m.main().bytes as f64 / 1024.0 / m.elapsed.as_secs_f64().max(1e-9);
            println!(
                "| {} MiB | {name} | {kib_s:.0} | {} |",
                file >> 20,
                brief(&cached.stats())
            );
        }
    }
    Ok(())
}

/// What seed B runs on, and its cache when it has one.
type SeedStack = (Arc<dyn Volume>, Option<Arc<Cached>>);

/// The seed's stack: the RAID 5 alone, or a 256 MiB write-back cache of
/// 4 KiB blocks in front of it at the product's defaults otherwise (4 MiB
/// sequential cutoff, 10% dirty target, unlimited cleaning rate).
fn seed_b_stack(origin: &Arc<Array>, with_cache: bool) -> Result<SeedStack> {
    if !with_cache {
        return Ok((origin.clone(), None));
    }
    let c = cache(origin, 256 << 20, Mode::WriteBack)?;
    let d = Config::default();
    c.set_tunables(
        d.sequential_cutoff,
        d.dirty_target_pct,
        d.clean_rate,
        d.promote_threshold,
    )?;
    c.reset_stats()?;
    Ok((c.clone(), Some(c)))
}
