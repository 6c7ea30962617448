//! The per-file locks of ext3 and XFS (`file-locks=`, raidlab-sim
//! `fs/locks.rs`): known answers on a device that serves any number of
//! requests at once in a fixed time, so every wait is the lock's; and the
//! effect on seed D's SSD, Bonnie++'s seekers on ext3 against XFS.

use raidlab_core::IoKind;
use raidlab_sim::config::SimConfig;
use raidlab_sim::device::{hand_out, Completion, Device, ModelInfo, Ns, Request, MS};
use raidlab_sim::fs::locks::{FileLocks, LockRules, FILE_BYTES};
use raidlab_sim::workload::{run, Job, Pattern};

/// Every request completes 1 ms after it reaches the device.
#[derive(Debug, Default)]
struct Parallel {
    pending: Vec<Completion>,
}

impl Device for Parallel {
    fn capacity(&self) -> u64 {
        8 * FILE_BYTES
    }
    fn submit(&mut self, now: Ns, req: Request) {
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
    let (none, ext3, xfs) = (
        seeks(""),
        seeks(":file-locks=ext3"),
        seeks(":file-locks=xfs"),
    );
    assert_eq!(ext3, none, "ext3's locks hold nothing back");
    // 4000 requests: 0.734 s on ext3, 1.121 s on XFS (53% longer).
    assert_eq!((ext3, xfs), (734_154_537, 1_120_961_898));
}

#[test]
fn the_locks_must_be_the_mounted_file_systems() {
    let build = |s: &str| SimConfig::short(s).unwrap().build(&[]);
    let err = build("mtron-mobi-32g:host=linux-2.6.2x-md:fs=ext3:file-locks=xfs").unwrap_err();
    assert!(err.to_string().contains("another file system's"), "{err}");
    assert!(build("mtron-mobi-32g:host=linux-2.6.2x-md:fs=xfs-noalign:file-locks=xfs").is_ok());
    assert!(SimConfig::short("mtron-mobi-32g:file-locks=zfs").is_err());
}
