//! The io_uring engine: one ring per benchmark thread, `qd` slots per ring, each
//! slot owning an aligned buffer. A completed slot is refilled and submitted at
//! once, so exactly `qd` requests stay in flight until the workload ends. The
//! ring is set up and driven as fio 3.33's io_uring engine drives its own (see
//! [`rings`] and the submit in the completion loop), so that on a fast device the
//! two tools measure the device rather than their ways of using io_uring.
//!
//! This is the one place in raidlab-bench with `unsafe`: the kernel writes into and
//! reads from a slot's buffer between submission and completion, which Rust cannot
//! see. The rule that keeps it sound: a slot's buffer is never touched, moved or
//! freed while its request is in flight. The worker only returns once every request
//! has completed; if the ring itself fails so that in-flight requests can no longer
//! be reaped, the buffers are leaked rather than freed.

use crate::buffer::AlignedBuf;
use crate::engine::{fill, worker_rng, write_serial, Shared, WorkerStats};
use io_uring::{opcode, types, IoUring};
use raidlab_core::{Error, ErrorKind, Op};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Barrier};
use std::time::Instant;

/// One ring per benchmark thread, made before any worker starts, so that a kernel
/// without io_uring (or a seccomp filter refusing it) is found before measuring.
///
/// Completions are delivered the cheapest way the kernel offers, as fio does:
/// with `DEFER_TASKRUN` + `SINGLE_ISSUER` (Linux 6.1+) the kernel posts them
/// only when the worker waits for them, instead of interrupting the worker (an
/// inter-processor interrupt and a wake-up per completion) as a plain ring does;
/// `COOP_TASKRUN` (5.19+) drops the interrupt but not the per-completion work.
/// On a loop device over /dev/shm, RND4K Q32T1 reads through a plain ring ran
/// at about 0.6 to 0.8 of fio's rate (docs/benchmarks.md, "Accuracy against
/// fio"); the ring flags and the submit-at-once loop together closed that.
/// A single-issuer ring is created disabled and enabled by the worker thread
/// that uses it ([`enable`]), because the kernel ties it to the enabling thread.
pub(crate) fn rings(threads: usize, qd: usize) -> std::io::Result<Vec<IoUring>> {
    let entries = u32::try_from(qd.next_power_of_two())
        .map_err(|_| std::io::Error::other("queue depth too large for io_uring"))?;
    (0..threads).map(|_| ring(entries)).collect()
}

fn ring(entries: u32) -> std::io::Result<IoUring> {
    let deferred = IoUring::builder()
        .setup_r_disabled()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_coop_taskrun()
        .build(entries);
    match deferred {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
        r => return r,
    }
    match IoUring::builder().setup_coop_taskrun().build(entries) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => IoUring::new(entries),
        r => r,
    }
}

/// Make `ring` usable from the calling thread (see [`rings`]).
fn enable(ring: &IoUring) -> std::io::Result<()> {
    if ring.params().is_setup_single_issuer() {
        ring.submitter().register_enable_rings()?;
    }
    Ok(())
}

struct Slot {
    buf: AlignedBuf,
    offset: u64,
    read: bool,
    started: Instant,
    /// Writes issued from this slot so far (for [`write_serial`]).
    writes: u64,
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
                writes: 0,
            }
        })
        .collect();
    let fd = types::Fd(file.as_raw_fd());
    let mut st = WorkerStats::default();
    let mut inflight = 0usize;
    let enabled = enable(&ring);
    barrier.wait();
    if let Err(e) = enabled {
        shared.fail(Error::io(Op::Open, shared.volume_name.clone(), e));
        st.end = Some(Instant::now());
        return st;
    }
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
        if !s.read {
            let serial = write_serial(t * w.qd + i, s.writes);
            w.prepare_write(s.buf.as_mut_slice(), s.offset, serial, rng);
            s.writes += 1;
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
            let at = now.saturating_duration_since(shared.started());
            if s.read {
                st.read.record_at(w.bs as u64, lat, at);
            } else {
                st.write.record_at(w.bs as u64, lat, at);
            }
            shared.control.add_done(w.bs as u64);
            if issue(&mut ring, &mut slots, i, &mut rng) {
                inflight += 1;
                // Hand the request to the device now, not after the rest of this
                // batch of completions was handled (fio's default too,
                // iodepth_batch_submit=1): on a fast device the queue otherwise
                // runs short while the batch is processed. A failed submit leaves
                // the entry queued; the wait below submits it again and reports
                // an error that persists.
                let _ = ring.submit();
            }
        }
    }
    st.end = Some(Instant::now());
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rings are made on one thread and used on another (each worker's own):
    /// with a single-issuer ring that works only once the user enabled it.
    #[test]
    fn rings_made_up_front_work_on_their_worker_threads() {
        let rings = match rings(2, 4) {
            Ok(r) => r,
            // CI's machines have io_uring; elsewhere its absence is a skip.
            Err(e) if std::env::var_os("CI").is_some() => {
                panic!("io_uring is not available on this CI machine: {e}")
            }
            Err(e) => {
                eprintln!("SKIPPED: io_uring is not available here: {e}");
                return;
            }
        };
        std::thread::scope(|s| {
            for (t, mut ring) in rings.into_iter().enumerate() {
                s.spawn(move || {
                    enable(&ring).expect("enable the ring on its worker thread");
                    for i in 0..3u64 {
                        let nop = opcode::Nop::new().build().user_data(i);
                        // SAFETY: a NOP refers to no memory.
                        unsafe { ring.submission().push(&nop).expect("room for one entry") };
                    }
                    ring.submit_and_wait(3)
                        .unwrap_or_else(|e| panic!("ring {t}: {e}"));
                    let mut got: Vec<u64> = ring.completion().map(|c| c.user_data()).collect();
                    got.sort_unstable();
                    assert_eq!(got, [0, 1, 2], "ring {t}");
                });
            }
        });
    }
}
