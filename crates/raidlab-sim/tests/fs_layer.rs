//! The file-system layer (`fs=`, raidlab-sim `fs/`) against what Linux 2.6.2x
//! does between a program's 8 KiB calls and the volume: writes land in memory
//! up to the dirty limit and then run at the volume's pace, ext3's data=ordered
//! commit writes dirty data that XFS leaves in memory, read-ahead keeps a
//! sequential reader at the volume's rate, and the option is refused without
//! the kernel it needs.

use raidlab_core::IoKind;
use raidlab_sim::config::SimConfig;
use raidlab_sim::device::{Completion, Device, Ns, Request, SEC};
use raidlab_sim::workload::{run, Job, Pattern};

fn build(spec: &str) -> Box<dyn Device> {
    SimConfig::short(spec).unwrap().build(&[]).unwrap()
}

fn seq(read: bool, bytes: u64) -> Job {
    Job {
        pattern: Pattern::Sequential,
        block: 8192,
        read_percent: if read { 100 } else { 0 },
        threads: 1,
        queue_depth: 1,
        region: (0, bytes),
        duration: Ns::MAX / 4,
        max_ops: bytes / 8192,
        seed: 1,
    }
}

/// Let `until` of virtual time pass with nothing submitted.
fn idle(dev: &mut dyn Device, until: Ns) {
    let mut done: Vec<Completion> = Vec::new();
    while let Some(t) = dev.next_event().filter(|&t| t <= until) {
        dev.advance(t, &mut done);
    }
}

/// One flush (fsync), waited for: when it completed.
fn flush(dev: &mut dyn Device, now: Ns) -> Ns {
    dev.submit(
        now,
        Request {
            id: u64::MAX,
            kind: IoKind::Flush,
            offset: 0,
            len: 0,
            process: 0,
        },
    );
    let mut done = Vec::new();
    loop {
        let t = dev.next_event().expect("a flush completes");
        dev.advance(t, &mut done);
        if let Some(c) = done.iter().find(|c| c.id == u64::MAX) {
            return c.at;
        }
    }
}

const DISK: &str = "samsung-hd753lj:host=linux-2.6.2x-md";

#[test]
fn writes_land_in_memory_up_to_the_dirty_limit_then_run_at_the_disks_pace() {
    // 100 MiB is under the 2008 host's 192 MiB dirty limit: memory speed.
    let mut fs = build(&format!("{DISK}:fs=xfs"));
    let small = run(fs.as_mut(), &seq(false, 100 << 20), 0).unwrap();
    assert!(
        small.mb_per_s > 3000.0,
        "into memory: {} MB/s",
        small.mb_per_s
    );
    // 2 GiB is ten times the limit: the disk's sequential rate, give or take
    // the last dirty pages still in memory.
    let mut fs = build(&format!("{DISK}:fs=xfs"));
    let big = run(fs.as_mut(), &seq(false, 2 << 30), 0).unwrap();
    let mut raw = build(DISK);
    let mut block = seq(false, 2 << 30);
    block.block = 1 << 20;
    block.max_ops = 2048;
    let disk = run(raw.as_mut(), &block, 0).unwrap();
    let r = big.mb_per_s / disk.mb_per_s;
    assert!(
        (0.95..1.2).contains(&r),
        "fs {} vs disk {} MB/s",
        big.mb_per_s,
        disk.mb_per_s
    );
}

#[test]
fn ext3_ordered_commits_write_dirty_data_that_xfs_keeps_in_memory() {
    // 50 MiB: under the background limit, so only a commit writes it.
    for (fs, written) in [("ext3", true), ("ext3-writeback", false), ("xfs", false)] {
        let mut d = build(&format!(
            "raid5:4xsamsung-hd753lj:chunk=64K:member-size=10G:host=linux-2.6.2x-md:fs={fs}"
        ));
        let out = run(d.as_mut(), &seq(false, 50 << 20), 0).unwrap();
        idle(d.as_mut(), out.elapsed_ns + 6 * SEC);
        let ops = d.member_ops().expect("an array counts member ops");
        let member_writes = ops.write_bytes;
        assert_eq!(
            member_writes > 50 << 20,
            written,
            "{fs}: {member_writes} bytes written to members"
        );
    }
}

#[test]
fn a_flush_writes_everything_and_sequential_reads_keep_the_disk_busy() {
    let mut d = build(&format!("{DISK}:fs=ext3"));
    let w = run(d.as_mut(), &seq(false, 512 << 20), 0).unwrap();
    let t = flush(d.as_mut(), w.elapsed_ns);
    // 512 MiB at the disk's ~110 MB/s: the flush took seconds, not nothing.
    assert!(
        t > w.elapsed_ns + SEC,
        "flush ended at {t} after {}",
        w.elapsed_ns
    );
    // A fresh reader: read-ahead windows keep it near the disk's rate even
    // though each call is 8 KiB at queue depth 1.
    let mut d = build(&format!("{DISK}:fs=xfs"));
    run(d.as_mut(), &seq(false, 1 << 30), 0).unwrap();
    let r = run(d.as_mut(), &seq(true, 1 << 30), 100 * SEC).unwrap();
    assert!(
        r.mb_per_s > 80.0,
        "sequential 8 KiB reads: {} MB/s",
        r.mb_per_s
    );
}

#[test]
fn the_option_needs_a_host_kernel_and_names_known_file_systems() {
    let e = SimConfig::short("samsung-hd753lj:fs=xfs")
        .unwrap()
        .build(&[])
        .unwrap_err();
    assert!(e.to_string().contains("host="), "{e}");
    let e = SimConfig::short("samsung-hd753lj:host=linux-2.6.2x-md:fs=zfs").unwrap_err();
    assert!(
        e.to_string().contains("ext3") && e.to_string().contains("zfs"),
        "{e}"
    );
    let d = build("raid5:6xsamsung-hd753lj:chunk=64K:member-size=10G:host=linux-2.6.2x-md:fs=xfs");
    let info = d.info();
    assert_eq!(info.model, "file system");
    // md RAID 5 raises read-ahead to two stripes of data: 2 x 5 x 64 KiB.
    let ra = info
        .params
        .iter()
        .find(|p| p.name == "readahead_bytes")
        .unwrap();
    assert_eq!(ra.value, (640u64 << 10) as f64);
}
