//! The io_uring engine: one ring per benchmark thread, `qd` slots per ring, each
//! slot owning an aligned buffer. A completed slot is refilled at once, so exactly
//! `qd` requests stay in flight until the workload ends.
//!
//! This is the one place in raidlab-bench with `unsafe`: the kernel writes into and
//! reads from a slot's buffer between submission and completion, which Rust cannot
//! see. The rule that keeps it sound: a slot's buffer is never touched, moved or
//! freed while its request is in flight. The worker only returns once every request
//! has completed; if the ring itself fails so that in-flight requests can no longer
//! be reaped, the buffers are leaked rather than freed.

use crate::buffer::AlignedBuf;
use crate::engine::{fill, worker_rng, Shared, WorkerStats};
use io_uring::{opcode, types, IoUring};
use raidlab_core::{Error, ErrorKind, Op};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Barrier};
use std::time::Instant;

/// One ring per benchmark thread, made before any worker starts, so that a kernel
/// without io_uring (or a seccomp filter refusing it) is found before measuring.
pub(crate) fn rings(threads: usize, qd: usize) -> std::io::Result<Vec<IoUring>> {
    let entries = u32::try_from(qd.next_power_of_two())
        .map_err(|_| std::io::Error::other("queue depth too large for io_uring"))?;
    (0..threads).map(|_| ring(entries)).collect()
}

/// A ring that completes requests only when its thread asks for completions
/// (no interrupting task work: COOP_TASKRUN, DEFER_TASKRUN, which needs
/// SINGLE_ISSUER). It is made disabled and enabled by the worker thread that
/// uses it, the one issuer. Kernels before 6.1 refuse these flags: a plain
/// ring then.
fn ring(entries: u32) -> std::io::Result<IoUring> {
    IoUring::builder()
        .setup_coop_taskrun()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_r_disabled()
        .build(entries)
        .or_else(|_| IoUring::new(entries))
}

struct Slot {
    buf: AlignedBuf,
    offset: u64,
    read: bool,
    started: Instant,
}

pub(crate) fn worker(
    shared: &Shared<'_>,
    file: &Arc<File>,
    mut ring: IoUring,
    t: usize,
    barrier: &Barrier,
) -> WorkerStats {
    let w = shared.w;
    let mut rng = worker_rng(w.seed, t, 0);
    let mut slots: Vec<Slot> = (0..w.qd)
        .map(|_| {
            let mut buf = AlignedBuf::new(w.bs);
            fill(buf.as_mut_slice(), w.data, &mut rng);
            Slot {
                buf,
                offset: 0,
                read: true,
                started: Instant::now(),
            }
        })
        .collect();
    let fd = types::Fd(file.as_raw_fd());
    let mut st = WorkerStats::default();
    let mut inflight = 0usize;
    // A ring made disabled (single issuer) is enabled by its issuer, here;
    // a plain ring refuses this harmlessly.
    let _ = ring.submitter().register_enable_rings();
    barrier.wait();
    shared.started();

    // Prepare slot `i`'s next request and queue it; false when the workload is done.
    let issue = |ring: &mut IoUring,
                 slots: &mut [Slot],
                 i: usize,
                 rng: &mut rand_chacha::ChaCha8Rng|
     -> bool {
        if !shared.claim(t) {
            return false;
        }
        let s = &mut slots[i];
        s.offset = shared.next_offset(t, rng);
        s.read = shared.next_is_read(rng);
        if !s.read && w.refill {
            fill(s.buf.as_mut_slice(), w.data, rng);
        }
        let len = w.bs as u32;
        let entry = if s.read {
            opcode::Read::new(fd, s.buf.as_mut_slice().as_mut_ptr(), len)
                .offset(s.offset)
                .build()
        } else {
            opcode::Write::new(fd, s.buf.as_slice().as_ptr(), len)
                .offset(s.offset)
                .build()
        }
        .user_data(i as u64);
        s.started = Instant::now();
        // SAFETY: the buffer belongs to `slots[i]`, which lives until this worker
        // returns; the worker returns only after this request's completion was
        // reaped (or leaks `slots` if the ring fails), and the slot is not reused
        // until then. The descriptor stays open: `file` is borrowed for the whole
        // worker. The ring has `qd` (rounded up to a power of two) entries and at
        // most `qd` requests are ever queued, so the push cannot overflow; if it
        // did, it fails without taking the entry.
        unsafe { ring.submission().push(&entry).is_ok() }
    };

    for i in 0..w.qd {
        if !issue(&mut ring, &mut slots, i, &mut rng) {
            break;
        }
        inflight += 1;
        let _ = ring.submit();
    }
    let mut done: Vec<(usize, i32)> = Vec::with_capacity(w.qd);
    while inflight > 0 {
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) => {
                shared.fail(Error::io(Op::Read, shared.volume_name.clone(), e));
                // In-flight requests may still use the buffers: never free them.
                std::mem::forget(slots);
                st.end = Some(Instant::now());
                return st;
            }
        }
        done.clear();
        done.extend(
            ring.completion()
                .map(|c| (c.user_data() as usize, c.result())),
        );
        let now = Instant::now();
        for &(i, res) in &done {
            inflight -= 1;
            let Some(s) = slots.get(i) else { continue };
            let op = if s.read { Op::Read } else { Op::Write };
            if res < 0 {
                shared.fail(
                    Error::io(
                        op,
                        shared.volume_name.clone(),
                        std::io::Error::from_raw_os_error(-res),
                    )
                    .at(s.offset, w.bs as u64),
                );
                continue;
            }
            if res as usize != w.bs {
                shared.fail(
                    Error::new(
                        ErrorKind::Io,
                        op,
                        format!(
                            "short transfer: {res} of {} bytes (the target shrank?)",
                            w.bs
                        ),
                    )
                    .on_device(shared.volume_name.clone())
                    .at(s.offset, w.bs as u64),
                );
                continue;
            }
            let lat = now.saturating_duration_since(s.started);
            if s.read {
                st.read.record(w.bs as u64, lat);
            } else {
                st.write.record(w.bs as u64, lat);
            }
            shared.control.add_done(w.bs as u64);
            if issue(&mut ring, &mut slots, i, &mut rng) {
                inflight += 1;
                // Each request goes to the kernel as soon as it is ready, as
                // fio submits by default (iodepth_batch_submit=1): held back
                // until the next wait, requests queue behind the batch and a
                // fast device idles (measured: 0.83 of fio's 4K QD32 random
                // read on a loop device over memory, 0.95 with this).
                let _ = ring.submit();
            }
        }
    }
    st.end = Some(Instant::now());
    st
}
