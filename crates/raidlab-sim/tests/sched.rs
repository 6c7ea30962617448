//! The host's I/O scheduler (`sched.rs`): known answers on a device that
//! serves any number of requests at once in a fixed time, so what is in flight
//! is the scheduler's doing alone (CFQ's idle wait: `slice_idle`, or
//! `CFQ_MIN_TT` for a process that seeks); and CFQ on the models where the
//! articles' hosts ran it.

use raidlab_core::IoKind;
use raidlab_sim::config::SimConfig;
use raidlab_sim::device::{hand_out, Completion, Device, ModelInfo, Ns, Request, MS, SEC};
use raidlab_sim::sched::{Scheduler, CFQ_MIN_TT, CFQ_QUANTUM, CFQ_SLICE_IDLE};
use raidlab_sim::workload::{self, Job, Pattern};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Every request completes `latency` after it arrives, however many are in
/// flight; the most ever in flight is kept.
#[derive(Debug)]
struct Parallel {
    latency: Ns,
    pending: Vec<Completion>,
    most: Arc<AtomicUsize>,
}

impl Device for Parallel {
    fn capacity(&self) -> u64 {
        1 << 30
    }
    fn submit(&mut self, now: Ns, req: Request) {
        self.pending.push(Completion {
            id: req.id,
            at: now + self.latency,
        });
        self.most.fetch_max(self.pending.len(), Ordering::Relaxed);
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

/// `job` on a `Parallel` device of 1 ms behind `sched`: (ops done, most in
/// flight).
fn run(sched: Scheduler, job: &Job) -> (u64, usize) {
    let most = Arc::new(AtomicUsize::new(0));
    let mut dev = sched.attach(Box::new(Parallel {
        latency: MS,
        pending: Vec::new(),
        most: most.clone(),
    }));
    let out = workload::run(dev.as_mut(), job, 0).expect("job runs");
    (out.ops, most.load(Ordering::Relaxed))
}

fn job(read: bool, threads: u32, qd: u32) -> Job {
    let mut j = Job::new(Pattern::Random, 4096, read, threads, qd, 1 << 30);
    j.duration = SEC;
    j
}

#[test]
fn cfq_serves_one_process_at_a_time_where_none_serves_all() {
    // Three processes with one read each: all three in flight without a
    // scheduler, one at a time under CFQ (each process's next read comes at
    // once, so CFQ keeps the disk for it until its slice is used up).
    assert_eq!(run(Scheduler::None, &job(true, 3, 1)), (3000, 3));
    assert_eq!(run(Scheduler::Deadline, &job(true, 3, 1)), (3000, 3));
    assert_eq!(run(Scheduler::Cfq, &job(true, 3, 1)), (1000, 1));
}

#[test]
fn cfq_dispatches_a_quantum_of_one_process() {
    // One process with 8 reads queued: at most `quantum` on the device.
    let q = CFQ_QUANTUM as u64;
    assert_eq!(
        run(Scheduler::Cfq, &job(true, 1, 8)),
        (1000 * q, q as usize)
    );
    assert_eq!(run(Scheduler::None, &job(true, 1, 8)), (8000, 8));
}

#[test]
fn cfq_lets_writes_through() {
    assert_eq!(run(Scheduler::Cfq, &job(false, 3, 1)), (3000, 3));
}

#[test]
fn cfq_takes_turns_every_slice() {
    // Two processes: each gets the disk for a 100 ms slice in turn, so over 1 s
    // both finish about half of the reads, neither starves.
    let most = Arc::new(AtomicUsize::new(0));
    let mut dev = Scheduler::Cfq.attach(Box::new(Parallel {
        latency: MS,
        pending: Vec::new(),
        most,
    }));
    let mut per = [0u64; 2];
    let mut n = 0u64;
    let mut done = Vec::new();
    for p in 0..2u32 {
        dev.submit(
            0,
            Request {
                id: u64::from(p),
                kind: IoKind::Read,
                offset: 0,
                len: 4096,
                process: p,
            },
        );
    }
    while let Some(t) = dev.next_event().filter(|&t| t <= SEC) {
        done.clear();
        dev.advance(t, &mut done);
        for c in done.clone() {
            let p = (c.id % 2) as usize;
            per[p] += 1;
            n += 2;
            dev.submit(
                t,
                Request {
                    id: n + p as u64,
                    kind: IoKind::Read,
                    offset: 0,
                    len: 4096,
                    process: p as u32,
                },
            );
        }
    }
    assert_eq!(per[0] + per[1], 1000);
    assert_eq!(per, [500, 500]);
}

fn seeks(spec: &str, threads: u32) -> f64 {
    let cfg = SimConfig::short(spec).expect("spec");
    let mut dev = cfg.build(&[]).expect("build");
    let mut j = Job::new(Pattern::Random, 8192, true, threads, 1, 4 << 30);
    j.duration = 10 * SEC;
    workload::run(dev.as_mut(), &j, 0).expect("runs").iops
}

#[test]
fn cfq_on_a_disk_and_on_md_members() {
    // One disk: CFQ holds three seekers to one read at a time, so NCQ has
    // nothing to reorder: the rate of one seeker.
    let one = seeks("samsung-hd753lj", 1);
    let three_none = seeks("samsung-hd753lj", 3);
    let three_cfq = seeks("samsung-hd753lj:scheduler=cfq", 3);
    assert!(three_none > 1.15 * one, "none {three_none} vs one {one}");
    assert!(
        (three_cfq / one - 1.0).abs() < 0.03,
        "cfq {three_cfq} vs one {one}"
    );
    // md RAID 6 members: each seeker comes back to a member only after reads
    // on the others, so its think time there passes slice_idle, CFQ stops
    // idling for it, and the seekers' reads run on several members at once.
    let r6 = "raid6:6xsamsung-hd753lj:chunk=256K:member-size=8G";
    let r6_cfq = seeks(&format!("{r6}:scheduler=cfq"), 3);
    let r6_none = seeks(r6, 3);
    assert!(
        r6_cfq > 2.0 * three_cfq,
        "raid6 cfq {r6_cfq} vs disk {three_cfq}"
    );
    assert!(
        r6_cfq <= r6_none * 1.01,
        "raid6 cfq {r6_cfq} vs none {r6_none}"
    );
}

#[test]
fn scheduler_names_are_checked() {
    let e = SimConfig::short("samsung-hd753lj:scheduler=bfq").unwrap_err();
    assert!(e.to_string().contains("unknown I/O scheduler `bfq`"), "{e}");
    let e = SimConfig::short("raid5:3xsamsung-hd753lj:scheduler=x").unwrap_err();
    assert!(e.to_string().contains("none, deadline, cfq"), "{e}");
    assert!(SimConfig::short("raid5:3xsamsung-hd753lj:scheduler=cfq").is_ok());
}

fn read(id: u64, offset: u64, process: u32) -> Request {
    Request {
        id,
        kind: IoKind::Read,
        offset,
        len: 8192,
        process,
    }
}

/// When process 1's read, queued while process 0 holds CFQ, reaches the
/// device: process 0 first reads 20 times one at a time at `stride` apart.
fn handover(stride: u64) -> Ns {
    let mut dev = Scheduler::Cfq.attach(Box::new(Parallel {
        latency: MS,
        pending: Vec::new(),
        most: Arc::new(AtomicUsize::new(0)),
    }));
    let mut now = 0;
    for i in 0..20 {
        dev.submit(now, read(i, i * stride, 0));
        let mut done = Vec::new();
        while done.is_empty() {
            now = dev.next_event().expect("the read completes");
            dev.advance(now, &mut done);
        }
    }
    dev.submit(now, read(100, 0, 1));
    let mut done = Vec::new();
    while let Some(t) = dev.next_event() {
        dev.advance(t, &mut done);
    }
    done.iter().find(|c| c.id == 100).expect("completed").at - MS - now
}

#[test]
fn cfq_idles_less_for_a_process_that_seeks() {
    // Sequential reads: CFQ waits slice_idle for the process's next one.
    assert_eq!(handover(8192), CFQ_SLICE_IDLE);
    // Reads 64 MiB apart (CIC_SEEKY: a mean over 4 MiB): CFQ_MIN_TT.
    assert_eq!(handover(64 << 20), CFQ_MIN_TT);
}
