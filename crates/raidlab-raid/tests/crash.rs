//! Crash consistency: seeded random workloads with flushes on every level, a power
//! cut at a random point, reassembly, resync, and a check that everything the array
//! acknowledged before its last completed flush reads back intact.
//!
//! The members are in-memory volumes behind a volatile write cache
//! ([`FaultVolume::with_volatile_cache`]): a write is durable only once the member
//! has been flushed. A power cut drops, keeps or tears (at 512-byte sectors) each
//! unflushed write of each member, independently and in a shuffled order.
//!
//! A subset also runs on direct members
//! (`direct_members_lose_nothing_on_every_level_and_consistency_policy`): every
//! level and each consistency policy (resync, bitmap, partial parity log, write
//! journal in both modes), complete and degraded. Each member is then a sparse
//! file under the build's target directory opened with `O_DIRECT` (checked with
//! raidlab and in /proc/self/fdinfo) behind the same volatile cache, so the cut
//! is the same and everything that reaches the medium (a flush's writes, a cut's
//! surviving sectors, every read beneath the cache) goes through the engine's
//! direct I/O: requests aligned to the file system's block, bounce buffers,
//! edge-block read-modify-write, `fdatasync` for a flush. The seeds are the
//! memory runs', so the workloads and cuts are too. A file system refusing
//! `O_DIRECT` fails the test: a skip would pass off direct members as tested.
//!
//! The model tracks, per 512-byte array sector, its durable contents (as of the
//! last completed `flush`) and every value written to it since. After the crash a
//! sector may legally hold its durable value or any of those written values; any
//! other value is a loss. Writes are sector-aligned, so that set is exact at the
//! fault model's granularity.
//!
//! Complete arrays and mirrors (RAID 0, 1, 4, 5, 6, 10) must lose nothing, and after
//! the resync `check` must find no mismatch. Degraded parity arrays (RAID 4/5/6 with
//! a member missing) have md's write hole: without a partial parity log or journal
//! a torn stripe write can corrupt data that was durable. Their losses are counted
//! and printed, not asserted; docs/reliability.md records them.
//!
//! `RAIDLAB_CRASH_POINTS=N` runs N crash points per configuration (the default is
//! [`DEFAULT_POINTS`] in memory, [`DIRECT_POINTS`] on direct members);
//! `RAIDLAB_CRASH_SEED=S` runs only seed S (to reproduce a
//! failure: the seed fixes the workload, the crash point and every member's cut).
//! Run with `-- --nocapture` to see the figures.

use raidlab_core::Volume;
use raidlab_devices::throttle::Clock;
use raidlab_devices::{FaultVolume, FileVolume, IoMode, MemVolume, OpenMode};
use raidlab_layout::{Layout, Level, ParityLayout, Raid10Layout};
use raidlab_raid::assemble::{create_with_journal, Assembly, CreateSpec, Device, NewMember};
use raidlab_raid::recovery::{Progress, RunOptions};
use raidlab_raid::stripe_cache::StripeCacheConfig;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A clock that never moves (its sleeps do wait, so the stripe cache's thread
/// idles): the stripe cache's hold time never passes.
#[derive(Debug)]
struct Frozen;
impl Clock for Frozen {
    fn now(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
    fn sleep(&self, d: std::time::Duration) {
        std::thread::sleep(d);
    }
}

const SECTOR: usize = 512;
/// Member size: md's 1 MiB data offset plus 256 KiB of data area, so arrays have
/// tens of stripes and a whole-array check stays cheap.
const MEMBER: u64 = (1 << 20) + (256 << 10);
/// With a partial parity log mdadm's data offset is 2 MiB (the 1 MiB log sits
/// after the superblock).
const PPL_MEMBER: u64 = (2 << 20) + (256 << 10);
/// The journal device: md's 1 MiB data offset plus a 512 KiB ring, small enough
/// that the workloads fill it and the journal reclaims space (flush the members,
/// move journal_tail) several times per crash point.
const JOURNAL_DEVICE: u64 = (1 << 20) + (512 << 10);
/// Bytes of member per bitmap bit, for the configurations with a bitmap.
const BITMAP_CHUNK: u32 = 16 << 10;
/// Crash points per configuration in the default run.
const DEFAULT_POINTS: u64 = 16;
/// Crash points per configuration on direct members in the default run: each
/// one makes real disk I/O (every flush an `fdatasync`), so fewer than in
/// memory; `RAIDLAB_CRASH_POINTS` sets both.
const DIRECT_POINTS: u64 = 8;

type Member = Arc<FaultVolume<Arc<dyn Volume>>>;

/// Where the members keep their bytes, beneath the same volatile cache either
/// way (what direct members add: the module's doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Media {
    Memory,
    Direct,
}

/// Makes the members of one crash point; direct members are files in a
/// directory of their own, removed with it.
struct Backing {
    dir: Option<tempfile::TempDir>,
}

impl Backing {
    fn new(media: Media) -> Backing {
        let dir = (media == Media::Direct).then(|| {
            // The build's own disk: /tmp or /dev/shm may be tmpfs or ramfs,
            // where O_DIRECT may be refused.
            let base = env!("CARGO_TARGET_TMPDIR");
            tempfile::Builder::new()
                .prefix("crash-direct-")
                .tempdir_in(base)
                .unwrap_or_else(|e| {
                    panic!("cannot make a directory for direct members in {base}: {e}")
                })
        });
        Backing { dir }
    }

    /// A zeroed member of `size` bytes called `name`.
    fn make(&self, name: &str, size: u64) -> (Member, Device) {
        let (inner, path): (Arc<dyn Volume>, String) = match &self.dir {
            None => (Arc::new(MemVolume::new(size)), name.to_string()),
            Some(dir) => {
                let path = dir.path().join(name);
                (
                    Arc::new(direct_file(&path, size)),
                    path.display().to_string(),
                )
            }
        };
        let v = Arc::new(FaultVolume::with_volatile_cache(inner));
        (v.clone(), Device { path, volume: v })
    }
}

/// A sparse (so zeroed) file of `size` bytes opened with `O_DIRECT`, seen to be
/// direct by raidlab and by the kernel. A file system that refuses `O_DIRECT`
/// fails the test: skipping would report direct members as tested when they
/// were not.
fn direct_file(path: &std::path::Path, size: u64) -> FileVolume {
    let made = std::fs::File::create_new(path).and_then(|f| f.set_len(size));
    made.unwrap_or_else(|e| panic!("cannot make the member file {}: {e}", path.display()));
    let v =
        FileVolume::open_io(path, OpenMode::ReadWrite, Some(IoMode::Direct)).unwrap_or_else(|e| {
            panic!(
                "the crash harness's direct members need a file system that takes O_DIRECT, \
                 and the one holding {} refuses it (they are made under the build's target \
                 directory: put CARGO_TARGET_DIR on a disk file system such as ext4 or xfs, \
                 not tmpfs or ramfs); raidlab said: {e}",
                path.parent().unwrap_or(path).display()
            )
        });
    assert_eq!(
        v.io_mode(),
        IoMode::Direct,
        "{}: opened for direct I/O, yet raidlab moves its bytes buffered",
        path.display()
    );
    let flags = kernel_open_flags(&v);
    assert!(
        flags & libc::O_DIRECT as u32 != 0,
        "{}: the kernel holds its descriptor without O_DIRECT (flags {flags:o})",
        path.display()
    );
    v
}

/// The open flags of `v`'s descriptor as /proc/self/fdinfo shows them: the
/// kernel's word, not raidlab's, that the member is direct.
fn kernel_open_flags(v: &FileVolume) -> u32 {
    use std::os::fd::AsRawFd;
    let fd = v
        .raw_file()
        .expect("a file volume hands out its descriptor")
        .fd
        .as_raw_fd();
    let at = format!("/proc/self/fdinfo/{fd}");
    let info = std::fs::read_to_string(&at).unwrap_or_else(|e| panic!("cannot read {at}: {e}"));
    let flags = info
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .unwrap_or_else(|| panic!("{at} has no flags line: {info}"));
    u32::from_str_radix(flags.trim(), 8)
        .unwrap_or_else(|e| panic!("{at}: flags {flags:?} are not octal: {e}"))
}

#[derive(Debug, Clone, Copy)]
struct Config {
    level: Level,
    layout: Layout,
    members: usize,
    chunk: u64,
    /// One member failed before the session starts.
    degraded: bool,
    /// An internal write-intent bitmap (md's --consistency-policy=bitmap): the
    /// resync after the crash covers only the chunks it marks dirty.
    bitmap: bool,
    /// md's partial parity log (--consistency-policy=ppl, RAID 5): the log is
    /// replayed after the crash instead of a resync, and closes the write hole.
    ppl: bool,
    /// md's write journal on a separate device (--write-journal, RAID 4/5/6):
    /// replayed after the crash; the superblocks stay clean throughout.
    journal: bool,
    /// The journal in md's write-back mode: a write is acknowledged once its
    /// data is in the journal, so every acknowledged write must survive, not
    /// only those before a flush.
    write_back: bool,
}

impl Config {
    fn label(&self) -> String {
        let shape = if self.level == Level::Raid1 {
            format!("{} members", self.members)
        } else {
            format!("{} members, chunk {}K", self.members, self.chunk >> 10)
        };
        let layout = match self.layout {
            Layout::Plain => String::new(),
            l => format!(" {}", l.name()),
        };
        format!(
            "{}{layout} ({shape}{}, {})",
            self.level.name(),
            if self.bitmap {
                ", bitmap"
            } else if self.ppl {
                ", ppl"
            } else if self.write_back {
                ", journal write-back"
            } else if self.journal {
                ", journal"
            } else {
                ""
            },
            if self.degraded {
                "degraded"
            } else {
                "complete"
            }
        )
    }

    fn has_parity(&self) -> bool {
        matches!(self.level, Level::Raid4 | Level::Raid5 | Level::Raid6)
    }
}

fn cfg(level: Level, layout: Layout, members: usize, chunk_k: u64, degraded: bool) -> Config {
    Config {
        level,
        layout,
        members,
        chunk: chunk_k << 10,
        degraded,
        bitmap: false,
        ppl: false,
        journal: false,
        write_back: false,
    }
}

fn with_bitmap(c: Config) -> Config {
    Config { bitmap: true, ..c }
}

fn with_ppl(c: Config) -> Config {
    Config { ppl: true, ..c }
}

fn with_journal(c: Config) -> Config {
    Config { journal: true, ..c }
}

fn with_write_back(c: Config) -> Config {
    Config {
        journal: true,
        write_back: true,
        ..c
    }
}

fn parity(l: ParityLayout) -> Layout {
    Layout::Parity(l)
}

fn raid10(name: &str) -> Layout {
    Layout::Raid10(Raid10Layout::from_name(name).unwrap())
}

/// The array's contents as the workload left them, and what a crash may leave.
struct Model {
    /// Every acknowledged write applied: what reads must return before the crash.
    current: Vec<u8>,
    /// Contents as of the last completed flush.
    durable: Vec<u8>,
    /// Per sector written since the last flush: every value written to it.
    pending: BTreeMap<usize, Vec<Vec<u8>>>,
}

impl Model {
    fn new(size: usize) -> Model {
        // Created with zeroed members: the array starts as zeros, durably.
        Model {
            current: vec![0; size],
            durable: vec![0; size],
            pending: BTreeMap::new(),
        }
    }

    fn write(&mut self, data: &[u8], offset: usize) {
        assert!(offset % SECTOR == 0 && data.len() % SECTOR == 0);
        self.current[offset..offset + data.len()].copy_from_slice(data);
        for (i, s) in data.chunks(SECTOR).enumerate() {
            self.pending
                .entry(offset / SECTOR + i)
                .or_default()
                .push(s.to_vec());
        }
    }

    fn flush(&mut self) {
        for &s in self.pending.keys() {
            let r = s * SECTOR..(s + 1) * SECTOR;
            self.durable[r.clone()].copy_from_slice(&self.current[r]);
        }
        self.pending.clear();
    }
}

/// Figures for one configuration.
#[derive(Debug, Default)]
struct Stats {
    points: u64,
    writes: u64,
    flushes: u64,
    /// Sectors written since the last flush when the power went (summed).
    in_flight_sectors: u64,
    /// Member writes the power cuts dropped, kept whole, and tore.
    dropped: u64,
    kept: u64,
    torn: u64,
    /// Crash points whose redundancy `check` found inconsistent before the resync.
    inconsistent_before_resync: u64,
    /// Member bytes the resyncs read, and the member bytes of those arrays: with a
    /// bitmap the first is a fraction of the second.
    resync_scanned: u64,
    resync_total: u64,
    /// Crash points refused by `check_startable(false)` after reassembly.
    refused: u64,
    /// Partial parity log entries replayed after the crashes.
    ppl_entries: u64,
    /// Journal: meta blocks read and stripes written back by the replays.
    journal_blocks: u64,
    journal_stripes: u64,
    /// Write-back: stripes the replays found only as data (acknowledged,
    /// never written out) and wrote through the array.
    journal_data_only: u64,
    /// With a log on a degraded array: sectors being written on the missing
    /// member at the crash that read back as neither value (allowed, see
    /// `check_contents`).
    torn_on_missing: u64,
    sectors_checked: u64,
    /// Sectors holding a value the model does not allow.
    losses: u64,
    /// The subset of `losses` in sectors not written since the last flush: data
    /// that had been made durable.
    durable_losses: u64,
    points_with_loss: u64,
    /// First failure, for the assertion message.
    first: Option<String>,
}

fn devices(backing: &Backing, n: usize, size: u64) -> (Vec<Member>, Vec<Device>) {
    (0..n)
        .map(|i| backing.make(&format!("mem{i}"), size))
        .unzip()
}

fn quiet() -> impl FnMut(Progress) {
    |_| {}
}

/// Bytes of one stripe: the unit of full-stripe writes in the workload.
fn stripe_bytes(c: &Config, asm: &Assembly) -> u64 {
    let g = &asm.geometry;
    if g.is_parity() {
        g.chunk_bytes * g.data_disks() as u64
    } else {
        g.chunk_bytes.max(4096) * g.raid_disks as u64
    }
    .max(c.chunk)
}

/// A sector-aligned write: sub-stripe, whole stripes, 4K pages, or spanning
/// stripes at any sector.
fn random_write(rng: &mut ChaCha8Rng, size: u64, chunk: u64, stripe: u64) -> (u64, u64) {
    let s = SECTOR as u64;
    let sectors = size / s;
    let (off, len) = match rng.gen_range(0..4) {
        0 => {
            let len = rng.gen_range(1..=chunk / s) * s;
            (rng.gen_range(0..sectors) * s, len)
        }
        1 => {
            let stripes = size / stripe;
            let first = rng.gen_range(0..stripes);
            let k = rng.gen_range(1..=2).min(stripes - first);
            (first * stripe, k * stripe)
        }
        2 => {
            let pages = size / 4096;
            let len = rng.gen_range(1..=4u64) * 4096;
            (rng.gen_range(0..pages) * 4096, len)
        }
        _ => {
            let len = rng.gen_range(1..=3 * stripe / s) * s;
            (rng.gen_range(0..sectors) * s, len)
        }
    };
    (off, len.min(size - off))
}

/// One crash point: session, workload, power cut, reassembly, recovery, check.
fn crash_point(c: &Config, media: Media, seed: u64, stats: &mut Stats) {
    let label = label(c, media);
    let ctx = |what: &str| format!("{label} seed {seed}: {what}");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let backing = Backing::new(media);
    let (mut vols, mut devs) =
        devices(&backing, c.members, if c.ppl { PPL_MEMBER } else { MEMBER });
    let journal = c.journal.then(|| {
        let (v, d) = backing.make("journal", JOURNAL_DEVICE);
        vols.push(v);
        devs.push(d.clone());
        NewMember {
            device: d,
            zeroed: true,
        }
    });
    let spec = CreateSpec {
        level: c.level,
        layout: c.layout,
        chunk_bytes: c.chunk,
        spares: 0,
        name: "crash".into(),
        force: false,
        bitmap: c.bitmap,
        // Small bitmap chunks: a crash leaves some dirty, most clean.
        bitmap_chunk: c.bitmap.then_some(BITMAP_CHUNK),
        ppl: c.ppl,
    };
    let members = devs
        .iter()
        .take(c.members)
        .map(|d| NewMember {
            device: d.clone(),
            zeroed: true,
        })
        .collect();
    let mut asm = create_with_journal(&spec, members, journal)
        .unwrap_or_else(|e| panic!("{}: {e}", ctx("create")));
    assert!(asm.in_sync(), "{}", ctx("a zeroed array is created clean"));
    if c.degraded {
        let victim = rng.gen_range(0..c.members);
        asm.fail(victim)
            .unwrap_or_else(|e| panic!("{}: {e}", ctx("fail a member")));
        assert_eq!(asm.missing(), vec![victim], "{}", ctx("one member missing"));
    }
    // A session, as the engine's writers open one: the logs start afresh, then
    // the superblocks say "active".
    assert_eq!(
        asm.start_ppl()
            .unwrap_or_else(|e| panic!("{}: {e}", ctx("start_ppl"))),
        None,
        "{}",
        ctx("a clean array has no log to replay")
    );
    if c.journal {
        let r = asm
            .start_journal()
            .unwrap_or_else(|e| panic!("{}: {e}", ctx("start_journal")))
            .unwrap_or_else(|| panic!("{}", ctx("a journaled array starts its journal")));
        assert!(
            !r.fresh && !r.replayed_anything(),
            "{}",
            ctx(&format!("a new journal holds nothing to replay: {r:?}"))
        );
    }
    asm.mark_dirty()
        .unwrap_or_else(|e| panic!("{}: {e}", ctx("mark_dirty")));
    let array = Arc::new(
        asm.array()
            .unwrap_or_else(|e| panic!("{}: {e}", ctx("array"))),
    );
    // As every writer starts a parity array: partial-stripe writes held in
    // the stripe cache. Its hold time never passes on this clock, so what is
    // held goes down only when a stripe fills, the cache is full or a flush
    // asks, and a crash loses whatever is still held, as it would.
    let small = StripeCacheConfig {
        stripes: 4,
        ..StripeCacheConfig::default()
    };
    array
        .start_stripe_cache(small, std::sync::Arc::new(Frozen))
        .unwrap_or_else(|e| panic!("{}: {e}", ctx("stripe cache")));
    if c.write_back {
        array
            .set_journal_mode(raidlab_raid::journal::JournalMode::WriteBack)
            .unwrap_or_else(|e| panic!("{}: {e}", ctx("write-back")));
    }
    let size = array.size();
    let stripe = stripe_bytes(c, &asm);
    // Sub-stripe writes stay within this (RAID 1 has no chunk).
    let unit = c.chunk.max(16 << 10);
    let mut model = Model::new(size as usize);

    // The workload, cut off after a random number of operations.
    let ops = rng.gen_range(1..=40);
    // On average this many writes between flushes.
    let flush_every = rng.gen_range(1..=6u32);
    for op in 0..ops {
        if rng.gen_ratio(1, flush_every + 1) {
            array
                .flush()
                .unwrap_or_else(|e| panic!("{}: {e}", ctx("flush")));
            model.flush();
            stats.flushes += 1;
        } else if rng.gen_ratio(1, 8) {
            let (off, len) = random_write(&mut rng, size, unit, stripe);
            let mut got = vec![0u8; len as usize];
            array
                .read_at(&mut got, off)
                .unwrap_or_else(|e| panic!("{}: {e}", ctx("read")));
            let want = &model.current[off as usize..(off + len) as usize];
            if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
                panic!(
                    "{}",
                    ctx(&format!(
                        "op {op}: read before the crash returns wrong data at array byte {}",
                        off + i as u64
                    ))
                );
            }
        } else {
            let (off, len) = random_write(&mut rng, size, unit, stripe);
            let mut data = vec![0u8; len as usize];
            rng.fill(&mut data[..]);
            array
                .write_at(&data, off)
                .unwrap_or_else(|e| panic!("{}: {e}", ctx("write")));
            model.write(&data, off as usize);
            if c.write_back {
                // Acknowledged means durable: in the journal, flushed.
                model.flush();
            }
            stats.writes += 1;
        }
    }
    stats.in_flight_sectors += model.pending.len() as u64;

    // The power goes on every member at once; each cache decides on its own.
    for v in &vols {
        let cut = v
            .power_cut(rng.gen())
            .unwrap_or_else(|e| panic!("{}: {e}", ctx("power cut")));
        stats.dropped += cut.dropped as u64;
        stats.kept += cut.kept as u64;
        stats.torn += cut.torn as u64;
    }
    drop(array);
    drop(asm);
    for v in &vols {
        v.restart();
    }

    // Power back: assemble from whatever reached the media.
    let mut asm =
        Assembly::assemble(devs.clone()).unwrap_or_else(|e| panic!("{}: {e}", ctx("assemble")));
    if c.level == Level::Raid0 {
        // No redundancy, nothing to resync: md never marks RAID 0 dirty.
        assert!(asm.in_sync(), "{}", ctx("RAID 0 was marked dirty"));
    } else if c.journal {
        // md keeps a journaled array's superblocks clean: the journal, replayed
        // at every start, is what makes the crash safe.
        assert!(
            asm.in_sync(),
            "{}",
            ctx("a journaled array was marked dirty")
        );
    } else {
        assert!(
            !asm.in_sync(),
            "{}",
            ctx("the array was not stopped cleanly, yet assembles as in sync")
        );
    }
    assert_eq!(
        asm.missing().is_empty(),
        !c.degraded,
        "{}",
        ctx("members missing after reassembly")
    );
    if c.journal {
        let replay = asm
            .start_journal()
            .unwrap_or_else(|e| panic!("{}: {e}", ctx("journal replay")))
            .unwrap_or_else(|| panic!("{}", ctx("a journaled array must start its journal")));
        assert!(
            !replay.fresh,
            "{}",
            ctx("the journal's tail block was not found after the crash")
        );
        assert_eq!(replay.torn_blocks, 0, "{}", ctx("torn journal blocks"));
        stats.journal_blocks += replay.meta_blocks;
        stats.journal_stripes += replay.stripes_replayed;
        stats.journal_data_only += replay.data_only_stripes;
        asm.check_startable(false)
            .unwrap_or_else(|e| panic!("{}: {e}", ctx("start after the journal replay")));
        if !c.degraded {
            let after = asm
                .scrub(false, RunOptions::default(), &mut quiet())
                .unwrap_or_else(|e| panic!("{}: {e}", ctx("check after journal replay")));
            assert_eq!(
                after.mismatch_sectors,
                0,
                "{}",
                ctx(&format!(
                    "check after the journal replay: {:?}",
                    after.findings.first()
                ))
            );
        }
    } else if c.ppl {
        // md's way: replay the partial parity logs; the array is then consistent
        // and clean without a resync, and a degraded one starts without force.
        let replay = asm
            .start_ppl()
            .unwrap_or_else(|e| panic!("{}: {e}", ctx("PPL replay")))
            .unwrap_or_else(|| panic!("{}", ctx("a dirty array with a PPL must be replayed")));
        assert_eq!(
            replay.mismatches,
            0,
            "{}",
            ctx("PPL entries that did not check out")
        );
        stats.ppl_entries += replay.entries_replayed as u64;
        assert!(
            asm.in_sync(),
            "{}",
            ctx("the PPL replay did not record the array clean")
        );
        asm.check_startable(false)
            .unwrap_or_else(|e| panic!("{}: {e}", ctx("start after the PPL replay")));
        if !c.degraded {
            let after = asm
                .scrub(false, RunOptions::default(), &mut quiet())
                .unwrap_or_else(|e| panic!("{}: {e}", ctx("check after PPL replay")));
            assert_eq!(
                after.mismatch_sectors,
                0,
                "{}",
                ctx(&format!(
                    "check after the PPL replay: {:?}",
                    after.findings.first()
                ))
            );
        }
    } else {
        start_and_resync(c, &mut asm, &devs, stats, &ctx);
    }
    check_contents(c, &asm, &model, size, seed, stats, &ctx);
}

/// Without a log: the start checks of an unclean array, then check, resync and
/// check again on a complete one.
fn start_and_resync(
    c: &Config,
    asm: &mut Assembly,
    devs: &[Device],
    stats: &mut Stats,
    ctx: &dyn Fn(&str) -> String,
) {
    match asm.check_startable(false) {
        Ok(()) => {
            assert!(
                !(c.degraded && c.has_parity()),
                "{}",
                ctx("a dirty degraded parity array must be refused without force")
            );
        }
        Err(e) => {
            assert!(
                c.degraded && c.has_parity(),
                "{}: {e}",
                ctx("only a dirty degraded parity array is refused (mirrors have no write hole)")
            );
            stats.refused += 1;
            asm.check_startable(true)
                .unwrap_or_else(|e| panic!("{}: {e}", ctx("forced start")));
        }
    }
    if !c.degraded && c.level != Level::Raid0 {
        let before = asm
            .scrub(false, RunOptions::default(), &mut quiet())
            .unwrap_or_else(|e| panic!("{}: {e}", ctx("check before resync")));
        if before.mismatch_sectors > 0 {
            stats.inconsistent_before_resync += 1;
        }
        let resync = asm
            .resync(RunOptions::default(), &mut quiet())
            .unwrap_or_else(|e| panic!("{}: {e}", ctx("resync")));
        stats.resync_scanned += resync.bytes_scanned;
        stats.resync_total += asm.geometry.member_bytes;
        let after = asm
            .scrub(false, RunOptions::default(), &mut quiet())
            .unwrap_or_else(|e| panic!("{}: {e}", ctx("check after resync")));
        assert_eq!(
            after.mismatch_sectors,
            0,
            "{}",
            ctx(&format!("check after resync: {:?}", after.findings.first()))
        );
        assert!(
            Assembly::assemble(devs.to_vec())
                .unwrap_or_else(|e| panic!("{}: {e}", ctx("assemble after resync")))
                .in_sync(),
            "{}",
            ctx("the resync did not record the array clean")
        );
    }
}

/// Whether array byte `at` of a parity array lives on a missing member.
fn on_missing_member(asm: &Assembly, at: u64) -> bool {
    let (member, _, _) = asm.geometry.parity_location(at);
    asm.missing().contains(&member)
}

/// Every sector: its durable value, or one written since the last flush.
fn check_contents(
    c: &Config,
    asm: &Assembly,
    model: &Model,
    size: u64,
    seed: u64,
    stats: &mut Stats,
    ctx: &dyn Fn(&str) -> String,
) {
    let array = asm
        .array()
        .unwrap_or_else(|e| panic!("{}: {e}", ctx("array after the crash")));
    let mut got = vec![0u8; size as usize];
    array
        .read_at(&mut got, 0)
        .unwrap_or_else(|e| panic!("{}: {e}", ctx("read after the crash")));
    let mut lost = 0u64;
    for (s, sector) in got.chunks(SECTOR).enumerate() {
        let r = s * SECTOR..(s + 1) * SECTOR;
        if sector == &model.durable[r] {
            continue;
        }
        let written = model.pending.get(&s);
        if written.is_some_and(|w| w.iter().any(|v| v == sector)) {
            continue;
        }
        if c.ppl && written.is_some() && on_missing_member(asm, (s * SECTOR) as u64) {
            // md's PPL replay leaves a row alone when a chunk it was modifying is
            // on the missing member (that data exists nowhere but in the torn
            // parity), so a sector being written there may read back as a mix of
            // old and new. It was never acknowledged as durable; the log's promise
            // is that nothing else in the stripe suffers, which the rest of this
            // check holds it to.
            stats.torn_on_missing += 1;
            continue;
        }
        lost += 1;
        if written.is_none() {
            stats.durable_losses += 1;
        }
        if stats.first.is_none() {
            stats.first = Some(format!(
                "seed {seed}: array sector {s} (byte {}) holds a value never allowed there ({}; {} value(s) written since the last flush); reproduce with RAIDLAB_CRASH_SEED={seed}",
                s * SECTOR,
                if written.is_none() {
                    "durable data lost"
                } else {
                    "neither the durable nor a written value"
                },
                written.map_or(0, Vec::len)
            ));
        }
    }
    stats.points += 1;
    stats.sectors_checked += (size as usize / SECTOR) as u64;
    stats.losses += lost;
    if lost > 0 {
        stats.points_with_loss += 1;
    }
}

/// The crash points to run on `media`: seeds from 0, so a configuration runs
/// the same workloads, crash points and cuts on either media.
fn seeds(media: Media) -> Vec<u64> {
    if let Some(s) = std::env::var("RAIDLAB_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return vec![s];
    }
    let n = std::env::var("RAIDLAB_CRASH_POINTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(match media {
            Media::Memory => DEFAULT_POINTS,
            Media::Direct => DIRECT_POINTS,
        });
    (0..n).collect()
}

/// A configuration's name in figures and failures, with the media when they
/// are not memory.
fn label(c: &Config, media: Media) -> String {
    match media {
        Media::Memory => c.label(),
        Media::Direct => format!("{} on direct files", c.label()),
    }
}

fn run(c: &Config, media: Media) -> Stats {
    let mut stats = Stats::default();
    let start = std::time::Instant::now();
    for seed in seeds(media) {
        crash_point(c, media, seed, &mut stats);
    }
    println!(
        "crash | {:<60} | points {:>5} | writes {:>6} | flushes {:>5} | in-flight sectors {:>7} | cut: dropped {} kept {} torn {} | inconsistent before resync {:>4} | resync read {:>3}% | refused {:>4} | ppl entries replayed {:>5}, in-flight torn on the missing member {:>4} | journal blocks read {:>5}, stripes replayed {:>6} (data only {:>5}) | sectors checked {:>9} | losses {:>5} (durable {:>5}) in {:>4} points | {:.1}s",
        label(c, media),
        stats.points,
        stats.writes,
        stats.flushes,
        stats.in_flight_sectors,
        stats.dropped,
        stats.kept,
        stats.torn,
        stats.inconsistent_before_resync,
        (stats.resync_scanned * 100)
            .checked_div(stats.resync_total)
            .unwrap_or(0),
        stats.refused,
        stats.ppl_entries,
        stats.torn_on_missing,
        stats.journal_blocks,
        stats.journal_stripes,
        stats.journal_data_only,
        stats.sectors_checked,
        stats.losses,
        stats.durable_losses,
        stats.points_with_loss,
        start.elapsed().as_secs_f64()
    );
    stats
}

/// Run every configuration on members in memory and require zero losses.
fn must_lose_nothing(configs: &[Config]) {
    must_lose_nothing_on(Media::Memory, configs);
}

/// Run every configuration on `media` and require zero losses.
fn must_lose_nothing_on(media: Media, configs: &[Config]) {
    let mut failures = Vec::new();
    for c in configs {
        let stats = run(c, media);
        if stats.losses > 0 {
            failures.push(format!(
                "{}: {} sector(s) lost in {} of {} crash points; first: {}",
                label(c, media),
                stats.losses,
                stats.points_with_loss,
                stats.points,
                stats.first.unwrap_or_default()
            ));
        } else if c.write_back && stats.journal_data_only == 0 {
            failures.push(format!(
                "{}: no crash point left a stripe only in the journal: write-back's replay went untested",
                label(c, media)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn parity_configs(degraded: bool) -> Vec<Config> {
    use ParityLayout::*;
    vec![
        cfg(Level::Raid4, parity(ParityLast), 4, 8, degraded),
        cfg(Level::Raid4, parity(ParityLast), 3, 4, degraded),
        cfg(Level::Raid5, parity(LeftSymmetric), 4, 8, degraded),
        cfg(Level::Raid5, parity(LeftAsymmetric), 3, 4, degraded),
        cfg(Level::Raid5, parity(RightSymmetric), 5, 16, degraded),
        cfg(Level::Raid5, parity(RightAsymmetric), 4, 4, degraded),
        cfg(Level::Raid6, parity(LeftSymmetric), 5, 8, degraded),
        cfg(Level::Raid6, parity(LeftAsymmetric), 4, 4, degraded),
        cfg(Level::Raid6, parity(RightSymmetric), 6, 16, degraded),
        cfg(Level::Raid6, parity(ParityLast), 5, 4, degraded),
    ]
}

fn mirror_configs(degraded: bool) -> Vec<Config> {
    vec![
        cfg(Level::Raid1, Layout::Plain, 2, 0, degraded),
        cfg(Level::Raid1, Layout::Plain, 3, 0, degraded),
        cfg(Level::Raid10, raid10("n2"), 4, 8, degraded),
        cfg(Level::Raid10, raid10("n2"), 3, 4, degraded),
        cfg(Level::Raid10, raid10("f2"), 4, 8, degraded),
        cfg(Level::Raid10, raid10("o2"), 4, 4, degraded),
    ]
}

#[test]
fn raid0_loses_nothing_acknowledged_before_a_flush() {
    must_lose_nothing(&[
        cfg(Level::Raid0, Layout::Plain, 3, 8, false),
        cfg(Level::Raid0, Layout::Plain, 2, 4, false),
    ]);
}

#[test]
fn complete_parity_arrays_lose_nothing_and_resync_to_a_clean_check() {
    must_lose_nothing(&parity_configs(false));
}

#[test]
fn complete_mirrors_lose_nothing_and_resync_to_a_clean_check() {
    must_lose_nothing(&mirror_configs(false));
}

/// With a write-intent bitmap the resync after the crash skips the chunks the
/// bitmap says are clean: the full check afterwards proves it skipped none that
/// mattered.
#[test]
fn arrays_with_a_bitmap_lose_nothing_and_resync_only_dirty_chunks() {
    use ParityLayout::*;
    must_lose_nothing(&[
        with_bitmap(cfg(Level::Raid1, Layout::Plain, 2, 0, false)),
        with_bitmap(cfg(Level::Raid4, parity(ParityLast), 4, 8, false)),
        with_bitmap(cfg(Level::Raid5, parity(LeftSymmetric), 4, 8, false)),
        with_bitmap(cfg(Level::Raid5, parity(RightAsymmetric), 3, 4, false)),
        with_bitmap(cfg(Level::Raid6, parity(LeftSymmetric), 5, 8, false)),
        with_bitmap(cfg(Level::Raid10, raid10("n2"), 4, 8, false)),
        with_bitmap(cfg(Level::Raid10, raid10("f2"), 4, 8, false)),
        with_bitmap(cfg(Level::Raid10, raid10("o2"), 4, 4, false)),
        with_bitmap(cfg(Level::Raid1, Layout::Plain, 3, 0, true)),
        with_bitmap(cfg(Level::Raid10, raid10("n2"), 4, 8, true)),
    ]);
}

/// md's partial parity log on RAID 5: after the crash the logs are replayed (no
/// resync), and degraded arrays lose nothing either: the write hole is closed.
#[test]
fn raid5_with_a_partial_parity_log_loses_nothing_even_degraded() {
    use ParityLayout::*;
    let mut configs = Vec::new();
    for degraded in [false, true] {
        configs.extend([
            with_ppl(cfg(Level::Raid5, parity(LeftSymmetric), 4, 8, degraded)),
            with_ppl(cfg(Level::Raid5, parity(LeftAsymmetric), 3, 4, degraded)),
            with_ppl(cfg(Level::Raid5, parity(RightSymmetric), 5, 16, degraded)),
            with_ppl(cfg(Level::Raid5, parity(RightAsymmetric), 4, 4, degraded)),
        ]);
    }
    must_lose_nothing(&configs);
}

/// md's write journal (write-through) on RAID 4, 5 and 6: every stripe write
/// is made durable on the journal device first, replayed after the crash (no
/// resync), and degraded arrays lose nothing either: the write hole is closed,
/// RAID 6 included.
#[test]
fn raid456_with_a_write_journal_loses_nothing_even_degraded() {
    use ParityLayout::*;
    let mut configs = Vec::new();
    for degraded in [false, true] {
        configs.extend([
            with_journal(cfg(Level::Raid4, parity(ParityLast), 4, 8, degraded)),
            with_journal(cfg(Level::Raid5, parity(LeftSymmetric), 4, 8, degraded)),
            with_journal(cfg(Level::Raid5, parity(RightAsymmetric), 3, 4, degraded)),
            with_journal(cfg(Level::Raid6, parity(LeftSymmetric), 5, 8, degraded)),
            with_journal(cfg(Level::Raid6, parity(ParityLast), 4, 4, degraded)),
            with_journal(cfg(Level::Raid6, parity(RightSymmetric), 6, 16, degraded)),
        ]);
    }
    must_lose_nothing(&configs);
}

/// md's write-back journal: every acknowledged write reads back after the
/// crash (the journal's data-only stripes are replayed through the array,
/// stripes whose write-out was logged are replayed whole), and the array is
/// consistent afterwards, degraded too.
#[test]
fn raid456_with_a_write_back_journal_loses_no_acknowledged_write() {
    use ParityLayout::*;
    let mut configs = Vec::new();
    for degraded in [false, true] {
        configs.extend([
            with_write_back(cfg(Level::Raid4, parity(ParityLast), 4, 8, degraded)),
            with_write_back(cfg(Level::Raid5, parity(LeftSymmetric), 4, 8, degraded)),
            with_write_back(cfg(Level::Raid5, parity(RightAsymmetric), 3, 4, degraded)),
            with_write_back(cfg(Level::Raid6, parity(LeftSymmetric), 5, 8, degraded)),
            with_write_back(cfg(Level::Raid6, parity(RightSymmetric), 6, 16, degraded)),
        ]);
    }
    must_lose_nothing(&configs);
}

#[test]
fn degraded_mirrors_lose_nothing() {
    must_lose_nothing(&mirror_configs(true));
}

/// The write hole: measured, not asserted. A degraded RAID 4/5/6 stripe whose
/// write was torn can read back wrong for the missing member's blocks, including
/// blocks that were durable. The engine refuses to start such an array after an
/// unclean stop unless forced (asserted in `crash_point`).
#[test]
fn degraded_parity_arrays_write_hole_is_measured() {
    let mut total = Stats::default();
    for c in parity_configs(true) {
        let s = run(&c, Media::Memory);
        assert_eq!(
            s.refused,
            s.points,
            "{}: every dirty degraded start must be refused without force",
            c.label()
        );
        total.points += s.points;
        total.losses += s.losses;
        total.durable_losses += s.durable_losses;
        total.points_with_loss += s.points_with_loss;
    }
    println!(
        "crash | degraded parity total: {} points, {} sectors lost ({} of them durable) in {} points: the write hole (these arrays keep no PPL or journal)",
        total.points, total.losses, total.durable_losses, total.points_with_loss
    );
}

/// The engine's direct I/O path under the same crash workloads and checks:
/// every level, each consistency policy (resync, bitmap, partial parity log,
/// write journal in both modes) and a degraded array of each kind that must
/// lose nothing, on member files opened with `O_DIRECT`. Fewer crash points
/// than in memory by default ([`DIRECT_POINTS`]): each is real disk I/O.
#[test]
fn direct_members_lose_nothing_on_every_level_and_consistency_policy() {
    use ParityLayout::*;
    // A member made first, before any array: a file system without O_DIRECT
    // fails here with its message, and the figures say what alignment the
    // engine's requests were held to.
    let probe = Backing::new(Media::Direct);
    let path = probe
        .dir
        .as_ref()
        .expect("direct members have a directory")
        .path()
        .join("probe");
    let (block, memory) = direct_file(&path, MEMBER)
        .raw_file()
        .and_then(|f| f.direct)
        .expect("a direct file volume says its alignment");
    println!(
        "crash | direct members: files under {}, O_DIRECT, offsets and lengths in multiples of {block} bytes, memory at multiples of {memory}",
        env!("CARGO_TARGET_TMPDIR")
    );
    must_lose_nothing_on(
        Media::Direct,
        &[
            cfg(Level::Raid0, Layout::Plain, 3, 8, false),
            cfg(Level::Raid1, Layout::Plain, 2, 0, false),
            cfg(Level::Raid10, raid10("o2"), 4, 4, false),
            cfg(Level::Raid4, parity(ParityLast), 3, 4, false),
            cfg(Level::Raid5, parity(LeftSymmetric), 4, 8, false),
            cfg(Level::Raid6, parity(RightSymmetric), 6, 16, false),
            cfg(Level::Raid10, raid10("n2"), 4, 8, true),
            with_bitmap(cfg(Level::Raid5, parity(RightAsymmetric), 3, 4, false)),
            with_bitmap(cfg(Level::Raid10, raid10("f2"), 4, 8, false)),
            with_ppl(cfg(Level::Raid5, parity(LeftSymmetric), 4, 8, false)),
            with_ppl(cfg(Level::Raid5, parity(RightAsymmetric), 4, 4, true)),
            with_journal(cfg(Level::Raid6, parity(LeftSymmetric), 5, 8, false)),
            with_journal(cfg(Level::Raid5, parity(RightAsymmetric), 3, 4, true)),
            with_write_back(cfg(Level::Raid5, parity(LeftSymmetric), 4, 8, false)),
        ],
    );
}
