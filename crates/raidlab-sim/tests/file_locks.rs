//! The per-file locks of ext3 and XFS (`file-locks=`, raidlab-sim
//! `fs/locks.rs`): known answers on a device that serves any number of
//! requests at once in a fixed time, so every wait is the lock's; the page
//! cache a write lands in at block level; and the effect on seed D's SSD,
//! Bonnie++'s seekers on ext3 against XFS.

use raidlab_core::IoKind;
use raidlab_sim::config::SimConfig;
use raidlab_sim::device::{hand_out, Completion, Device, ModelInfo, Ns, Request, MS, SEC};
use raidlab_sim::fs::kernel::preset;
use raidlab_sim::fs::locks::{FileLocks, LockRules, FILE_BYTES};
use raidlab_sim::workload::{run, Job, Pattern};

/// What reached a test device: (time, kind, offset, length), shared with
/// the test that reads it after the device has been moved into a layer.
type Seen = std::sync::Arc<std::sync::Mutex<Vec<(Ns, IoKind, u64, u64)>>>;

/// Every request completes 1 ms after it reaches the device.
#[derive(Debug, Default)]
struct Parallel {
    pending: Vec<Completion>,
    seen: Seen,
}

impl Device for Parallel {
    fn capacity(&self) -> u64 {
        8 * FILE_BYTES
    }
    fn submit(&mut self, now: Ns, req: Request) {
        self.seen
            .lock()
            .unwrap()
            .push((now, req.kind, req.offset, req.len));
        self.pending.push(Completion {
            id: req.id,
            at: now + MS,
        });
    }
    fn next_event(&self) -> Option<Ns> {
        self.pending.iter().map(|c| c.at).min()
    }
    fn advance(&mut self, now: Ns, done: &mut Vec<Completion>) {
        hand_out(&mut self.pending, now, done);
    }
    fn info(&self) -> ModelInfo {
        ModelInfo::device("test", "parallel", Vec::new(), Vec::new())
    }
}

fn req(id: u64, kind: IoKind, offset: u64, process: u32) -> Request {
    Request {
        id,
        kind,
        offset,
        len: 8192,
        process,
    }
}

/// Run `dev` until nothing is left: every completion, in order.
fn drain(dev: &mut dyn Device) -> Vec<Completion> {
    let mut done = Vec::new();
    while let Some(t) = dev.next_event() {
        dev.advance(t, &mut done);
    }
    done
}

fn at(done: &[Completion], id: u64) -> Ns {
    done.iter().find(|c| c.id == id).expect("completed").at
}

#[test]
fn an_xfs_write_waits_for_the_reads_of_its_file_and_later_reads_wait_behind_it() {
    let mut dev = FileLocks::new(Box::<Parallel>::default(), LockRules::Xfs);
    // Time 0: a read of file 0 holds its iolock shared for 1 ms.
    dev.submit(0, req(1, IoKind::Read, 0, 0));
    // A write of file 0 waits for it; a read of file 0 after the write waits
    // behind the write (rw_semaphore order); file 1 is another lock.
    dev.submit(MS / 2, req(2, IoKind::Write, 4096 * 10, 1));
    dev.submit(MS / 2, req(3, IoKind::Read, 8192 * 7, 2));
    dev.submit(MS / 2, req(4, IoKind::Read, FILE_BYTES + 8192, 2));
    let done = drain(&mut dev);
    assert_eq!(at(&done, 1), MS);
    assert_eq!(
        at(&done, 4),
        MS / 2 + MS,
        "another file's read runs at once"
    );
    // The write goes down when the read releases (1 ms) and the waiting read
    // with it: the write holds the lock for no time.
    assert_eq!(at(&done, 2), 2 * MS);
    assert_eq!(at(&done, 3), 2 * MS);
    assert_eq!(dev.waited(), (1, 1));
}

#[test]
fn ext3_never_holds_a_read_or_a_write() {
    let mut dev = FileLocks::new(Box::<Parallel>::default(), LockRules::Ext3);
    dev.submit(0, req(1, IoKind::Read, 0, 0));
    dev.submit(MS / 2, req(2, IoKind::Write, 8192, 1));
    dev.submit(MS / 2, req(3, IoKind::Read, 16384, 2));
    let done = drain(&mut dev);
    assert_eq!(at(&done, 2), MS / 2 + MS);
    assert_eq!(at(&done, 3), MS / 2 + MS);
    assert_eq!(dev.waited(), (0, 0));
}

/// Bonnie++'s seek test on the 2008 SSD, as seed D runs it: 3 seekers, one
/// 8 KiB read each at a time, one request in 11 a write, over 4 GiB.
fn seeks(locks: &str) -> u64 {
    let spec = format!("mtron-mobi-32g:scheduler=cfq:host=linux-2.6.2x-md{locks}");
    let mut dev = SimConfig::short(&spec).unwrap().build(&[]).unwrap();
    let job = Job {
        pattern: Pattern::Random,
        block: 8192,
        read_percent: 91,
        threads: 3,
        queue_depth: 1,
        region: (0, 4 * FILE_BYTES),
        duration: Ns::MAX / 4,
        max_ops: 4000,
        seed: 42,
    };
    let out = run(dev.as_mut(), &job, 0).unwrap();
    assert_eq!(out.ops, 4000);
    out.elapsed_ns
}

#[test]
fn on_the_ssd_xfs_seekers_wait_for_each_other_and_ext3_ones_do_not() {
    // A seeker's write waits for another's read of the same 1 GiB file; CFQ
    // meanwhile idles for the writer, whose read queue is empty: the SSD
    // stands still until the idle wait (2 ms: the seekers seek) runs out.
    // The writes land in the page cache on both, so both beat the bare device,
    // whose writes go down at once.
    let (none, ext3, xfs) = (
        seeks(""),
        seeks(":file-locks=ext3"),
        seeks(":file-locks=xfs"),
    );
    assert!(
        ext3 < none,
        "ext3's writes only copy: {ext3} against {none}"
    );
    assert_eq!((none, ext3, xfs), (734_154_537, 678_523_637, 1_054_351_003));
}

/// A block-level lock layer on `Parallel` in the 2008 host's page cache, and
/// what reaches the device.
fn in_memory(rules: LockRules) -> (FileLocks, Seen) {
    let dev = Parallel::default();
    let seen = dev.seen.clone();
    let k = preset("linux-2.6.2x-md").unwrap();
    (FileLocks::with_page_cache(Box::new(dev), rules, k), seen)
}

/// 8 KiB at the preset's copy rate, 5600 MB/s.
const COPY_8K: Ns = 1463;

#[test]
fn at_block_level_an_xfs_write_copies_into_memory_holding_the_iolock() {
    let (mut dev, seen) = in_memory(LockRules::Xfs);
    dev.submit(0, req(1, IoKind::Write, 8192, 0));
    // A read of the same file while the write copies waits for the copy.
    dev.submit(100, req(2, IoKind::Read, 16384, 1));
    let done = drain(&mut dev);
    assert_eq!(at(&done, 1), COPY_8K);
    assert_eq!(at(&done, 2), COPY_8K + MS);
    assert_eq!(dev.waited(), (1, 0));
    // The write reached the device only when kupdate found it 30 s old: its
    // first wake (every 5 s) after 30 s and 1.463 µs.
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0], (COPY_8K, IoKind::Read, 16384, 8192));
    assert_eq!(seen[1], (35 * SEC, IoKind::Write, 8192, 8192));
    assert_eq!(seen.len(), 2);
    assert_eq!(dev.dirty_bytes(), 0);
}

#[test]
fn at_block_level_ext3_commits_the_written_data_5_s_on_and_a_flush_sends_it_first() {
    let (mut dev, seen) = in_memory(LockRules::Ext3);
    dev.submit(0, req(1, IoKind::Read, 0, 0));
    dev.submit(0, req(2, IoKind::Write, 0, 1));
    dev.submit(0, req(3, IoKind::Write, 8192, 1));
    let done = drain(&mut dev);
    // No lock between a read and a write on ext3.
    assert_eq!((at(&done, 1), at(&done, 2)), (MS, COPY_8K));
    // The commit 5 s after the first write: one request, the two merged.
    assert_eq!(
        seen.lock().unwrap()[1],
        (COPY_8K + 5 * SEC, IoKind::Write, 0, 16384)
    );
    // A flush: the dirty data goes down, the flush after it has completed.
    dev.submit(10 * SEC, req(4, IoKind::Write, FILE_BYTES, 1));
    let t = 10 * SEC + COPY_8K;
    let mut copied = Vec::new();
    dev.advance(t, &mut copied);
    assert_eq!(copied, vec![Completion { id: 4, at: t }]);
    dev.submit(
        t,
        Request {
            kind: IoKind::Flush,
            len: 0,
            ..req(5, IoKind::Flush, 0, 1)
        },
    );
    let done = drain(&mut dev);
    assert_eq!(at(&done, 5), t + 2 * MS);
    let seen = seen.lock().unwrap();
    assert_eq!(seen[2], (t, IoKind::Write, FILE_BYTES, 8192));
    assert_eq!(seen[3], (t + MS, IoKind::Flush, 0, 0));
}

#[test]
fn at_block_level_a_write_past_the_background_limit_goes_down_at_once() {
    let (mut dev, seen) = in_memory(LockRules::Ext3);
    // 5% of (2 GiB - 128 MiB) of page cache: 96 MiB, in 1 MiB writes.
    let mib = 1 << 20;
    for i in 0..97u64 {
        dev.submit(
            0,
            Request {
                len: mib,
                ..req(i, IoKind::Write, i * mib, 0)
            },
        );
    }
    let done = drain(&mut dev);
    assert_eq!(at(&done, 95), 187_246, "in memory: a copy of 1 MiB");
    assert_eq!(at(&done, 96), MS, "the 97th went down");
    assert_eq!(seen.lock().unwrap()[0], (0, IoKind::Write, 96 * mib, mib));
}

#[test]
fn the_locks_must_be_the_mounted_file_systems() {
    let build = |s: &str| SimConfig::short(s).unwrap().build(&[]);
    let err = build("mtron-mobi-32g:host=linux-2.6.2x-md:fs=ext3:file-locks=xfs").unwrap_err();
    assert!(err.to_string().contains("another file system's"), "{err}");
    assert!(build("mtron-mobi-32g:host=linux-2.6.2x-md:fs=xfs-noalign:file-locks=xfs").is_ok());
    assert!(SimConfig::short("mtron-mobi-32g:file-locks=zfs").is_err());
}
