//! Member requests sent to the kernel together through io_uring: every read,
//! write and flush of a batch is queued on a ring, submitted with one system
//! call, and reaped as the kernel completes them, so a step's requests to
//! several members are in flight at once without a thread for each.
//!
//! Decides only how a batch reaches the kernel: short transfers are resent
//! for the rest, `EINTR`/`EAGAIN` are resent, memory that a direct descriptor
//! cannot take is bounced through an aligned buffer. Each request's outcome
//! comes back on its own; nothing here stops at a failed one or knows what
//! the bytes are. The caller guarantees that a direct request's offset and
//! length are whole blocks (it sends the others through the volume, whose
//! read-modify-write handles edges) and that every descriptor outlives the
//! call.
//!
//! Rings are per thread (`with_ring`): the thread that submits a batch is
//! the thread that waits for it (a plan blocks its request's thread), so a
//! ring shared between threads would need a lock held for the whole wait or
//! a reaper thread handing completions back, one hand-off per request, which
//! is the cost this path exists to avoid.

use crate::direct::AlignedBuf;
use io_uring::{opcode, types, IoUring};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::os::fd::RawFd;

/// Slots of each ring: more requests than this in one batch are sent as
/// slots free up. A step touches at most one request per member and piece,
/// so 64 covers every array raidlab assembles in one submission.
const ENTRIES: u32 = 64;

/// One transfer per submission at most this long (a `u32` length), in
/// whole 1 MiB units so a direct request stays block-aligned when split.
const MAX_TRANSFER: usize = 1 << 30;

/// Bounce buffers a thread keeps between batches, at most this many bytes.
const BOUNCE_KEEP: usize = 4 << 20;

/// What one request does.
#[derive(Debug)]
pub enum Work<'a> {
    Read(&'a mut [u8]),
    Write(&'a [u8]),
    /// `fdatasync`.
    Flush,
}

/// One request: `work` on `fd` at file offset `offset`.
#[derive(Debug)]
pub struct Request<'a> {
    pub fd: RawFd,
    pub offset: u64,
    pub work: Work<'a>,
    /// The memory alignment `fd` needs (1 for a buffered descriptor).
    pub mem_align: usize,
}

thread_local! {
    static RINGS: RefCell<Vec<IoUring>> = const { RefCell::new(Vec::new()) };
    static BOUNCES: RefCell<Vec<AlignedBuf>> = const { RefCell::new(Vec::new()) };
    static SUBMITTED: Cell<u64> = const { Cell::new(0) };
}

/// Member requests in flight in this process, whichever way they were
/// submitted, for a benchmark to sample (it says how much of the queue
/// depth clients offer reaches the members). Counted only while a
/// benchmark turns it on: two shared atomic updates per request are not
/// free on the path of a request to memory.
pub mod in_flight {
    use std::sync::atomic::{AtomicBool, AtomicI64, Ordering::Relaxed};

    static ON: AtomicBool = AtomicBool::new(false);
    static NOW: AtomicI64 = AtomicI64::new(0);

    /// Start or stop counting.
    pub fn count(on: bool) {
        ON.store(on, Relaxed);
    }

    /// Requests in flight now (0 while not counting).
    pub fn now() -> i64 {
        NOW.load(Relaxed)
    }

    /// `n` requests started (`n` < 0: completed), if counting.
    pub fn add(n: i64) {
        if ON.load(Relaxed) {
            NOW.fetch_add(n, Relaxed);
        }
    }
}

/// Requests this thread has sent through a ring: lets a test see which path
/// its requests took.
pub fn submitted_on_this_thread() -> u64 {
    SUBMITTED.with(Cell::get)
}

/// Whether io_uring works here: a ring can be set up and completes a no-op
/// and a read (a kernel built without io_uring, `kernel.io_uring_disabled`,
/// or a seccomp filter such as a container runtime's default refuses the
/// setup; an old kernel may set up rings but lack the read opcode). The
/// error says which step failed and why.
pub fn probe() -> Result<(), String> {
    let mut ring = IoUring::new(4).map_err(|e| format!("io_uring_setup failed: {e}"))?;
    let zero = std::fs::File::open("/dev/zero")
        .map_err(|e| format!("cannot open /dev/zero for the probe read: {e}"))?;
    let mut buf = [1u8; 512];
    let fd = std::os::fd::AsRawFd::as_raw_fd(&zero);
    let nop = opcode::Nop::new().build().user_data(0);
    let read = opcode::Read::new(types::Fd(fd), buf.as_mut_ptr(), buf.len() as u32)
        .offset(0)
        .build()
        .user_data(1);
    // SAFETY: the read's buffer (`buf`) and descriptor (`zero`) outlive the
    // ring's use of them: both completions are waited for below (or the
    // ring, dropped on an error before anything was submitted, never used
    // them).
    unsafe {
        let mut sq = ring.submission();
        sq.push(&nop)
            .map_err(|_| "the probe ring has no free slot".to_string())?;
        sq.push(&read)
            .map_err(|_| "the probe ring has no free slot".to_string())?;
    }
    let mut seen = [false; 2];
    let mut failed = None;
    // Both requests are waited for whatever happens: `buf` must not go
    // while the kernel may still fill it.
    while !(seen[0] && seen[1]) {
        if let Err(e) = ring.submit_and_wait(1) {
            if !retryable(&e) {
                broken_ring();
            }
        }
        for cqe in ring.completion() {
            let i = cqe.user_data() as usize;
            let Some(s) = seen.get_mut(i) else { continue };
            *s = true;
            if cqe.result() < 0 && failed.is_none() {
                let what = if i == 0 { "a no-op" } else { "a read" };
                let e = std::io::Error::from_raw_os_error(-cqe.result());
                failed = Some(format!("io_uring refused {what}: {e}"));
            }
        }
    }
    if let Some(why) = failed {
        return Err(why);
    }
    if buf.iter().any(|&b| b != 0) {
        return Err("an io_uring read of /dev/zero did not return zeros".into());
    }
    Ok(())
}

/// A ring that cannot be waited on while the kernel may still write into
/// buffers it was given: returning would hand those buffers back to their
/// owners while the kernel still fills them, so the process stops here.
/// No such failure of `io_uring_enter` is known for a ring that worked
/// (its errors are `EINTR`, `EAGAIN` and `EBUSY`, all retried).
fn broken_ring() -> ! {
    eprintln!("raidlab: an io_uring ring failed while member requests were in flight; stopping so that no buffer is reused while the kernel may still fill it");
    std::process::abort()
}

/// Run `f` with a ring of this thread (made on first use; a nested batch,
/// from `meanwhile` of an outer one, gets a ring of its own). `None` when no
/// ring can be set up.
fn with_ring<R>(f: impl FnOnce(Option<&mut IoUring>) -> R) -> R {
    let ring = RINGS
        .with(|r| r.borrow_mut().pop())
        .or_else(|| IoUring::new(ENTRIES).ok());
    match ring {
        Some(mut ring) => {
            let r = f(Some(&mut ring));
            RINGS.with(|r| r.borrow_mut().push(ring));
            r
        }
        None => f(None),
    }
}

/// A request's progress: bytes done, and where its bytes are.
struct Slot {
    done: usize,
    len: usize,
    /// The memory the kernel reads or fills: the caller's, or the bounce.
    ptr: *mut u8,
    bounce: Option<AlignedBuf>,
    result: Option<std::io::Result<()>>,
    /// Submitted at least once (counted in flight).
    sent: bool,
}

fn take_bounce(len: usize, align: usize) -> AlignedBuf {
    let align = align.max(4096);
    BOUNCES
        .with(|b| {
            let mut b = b.borrow_mut();
            let i = b
                .iter()
                .position(|x| x.len() >= len && x.as_ptr() as usize % align == 0)?;
            Some(b.swap_remove(i))
        })
        .unwrap_or_else(|| AlignedBuf::new(len, align))
}

fn give_bounce(buf: AlignedBuf) {
    BOUNCES.with(|b| {
        let mut b = b.borrow_mut();
        let kept: usize = b.iter().map(|x| x.len()).sum();
        if kept + buf.len() <= BOUNCE_KEEP {
            b.push(buf);
        }
    })
}

/// Carry out `reqs` together on this thread's ring, running `meanwhile` on
/// this thread once they are submitted (the requests of the same step that
/// must go through their volumes instead). Returns each request's outcome,
/// in order, and `meanwhile`'s. Where no ring can be set up (memory short),
/// the requests are made one after another with blocking calls.
pub fn run<R>(
    reqs: &mut [Request<'_>],
    meanwhile: impl FnOnce() -> R,
) -> (Vec<std::io::Result<()>>, R) {
    let mut slots: Vec<Slot> = reqs
        .iter_mut()
        .map(|r| {
            let (ptr, len) = match &mut r.work {
                Work::Read(b) => (b.as_mut_ptr(), b.len()),
                Work::Write(b) => (b.as_ptr() as *mut u8, b.len()),
                Work::Flush => (std::ptr::null_mut(), 0),
            };
            let mut slot = Slot {
                done: 0,
                len,
                ptr,
                bounce: None,
                result: None,
                sent: false,
            };
            if len > 0 && (ptr as usize) % r.mem_align.max(1) != 0 {
                let mut b = take_bounce(len, r.mem_align);
                if let Work::Write(w) = &r.work {
                    b[..len].copy_from_slice(w);
                }
                slot.ptr = b.as_mut_ptr();
                slot.bounce = Some(b);
            }
            slot
        })
        .collect();
    let r = with_ring(|ring| match ring {
        Some(ring) => on_ring(ring, reqs, &mut slots, meanwhile),
        None => {
            let r = meanwhile();
            for (req, slot) in reqs.iter().zip(slots.iter_mut()) {
                slot.result = Some(blocking(req, slot));
            }
            r
        }
    });
    let out = reqs
        .iter_mut()
        .zip(slots)
        .map(|(req, slot)| {
            let result = slot.result.unwrap_or_else(|| {
                Err(std::io::Error::other(
                    "internal: a request was not carried out",
                ))
            });
            if let Some(b) = slot.bounce {
                if let (Ok(()), Work::Read(dst)) = (&result, &mut req.work) {
                    let n = dst.len();
                    dst.copy_from_slice(&b[..n]);
                }
                give_bounce(b);
            }
            result
        })
        .collect();
    (out, r)
}

/// One request with blocking calls, where no ring could be made.
fn blocking(req: &Request<'_>, slot: &mut Slot) -> std::io::Result<()> {
    // SAFETY: `slot.ptr` points to `slot.len` bytes that are the caller's
    // (borrowed for the call through `req`) or the slot's own bounce buffer;
    // nothing else touches them during the call.
    let bytes = || unsafe { std::slice::from_raw_parts_mut(slot.ptr, slot.len) };
    match req.work {
        Work::Read(_) => crate::direct::pread_full(req.fd, bytes(), req.offset),
        Work::Write(_) => crate::direct::pwrite_full(req.fd, bytes(), req.offset, 0),
        Work::Flush => {
            // SAFETY: fdatasync takes no pointers; `fd` is the caller's.
            if unsafe { libc::fdatasync(req.fd) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        }
    }
}

/// The submission entry for the rest of request `i`.
fn entry(req: &Request<'_>, slot: &Slot, i: usize) -> io_uring::squeue::Entry {
    let fd = types::Fd(req.fd);
    let n = (slot.len - slot.done).min(MAX_TRANSFER) as u32;
    let at = req.offset + slot.done as u64;
    // SAFETY (of the pointer arithmetic): `done < len`, inside the buffer.
    let ptr = slot.ptr.wrapping_add(slot.done);
    match req.work {
        Work::Read(_) => opcode::Read::new(fd, ptr, n).offset(at).build(),
        Work::Write(_) => opcode::Write::new(fd, ptr, n).offset(at).build(),
        Work::Flush => opcode::Fsync::new(fd)
            .flags(types::FsyncFlags::DATASYNC)
            .build(),
    }
    .user_data(i as u64)
}

fn on_ring<R>(
    ring: &mut IoUring,
    reqs: &[Request<'_>],
    slots: &mut [Slot],
    meanwhile: impl FnOnce() -> R,
) -> R {
    // An empty transfer is done before it starts (the kernel would answer
    // 0, which for a transfer with bytes left means the end of the file).
    let mut queue: VecDeque<usize> = (0..reqs.len())
        .filter(|&i| {
            let empty = slots[i].len == 0 && !matches!(reqs[i].work, Work::Flush);
            if empty {
                slots[i].result = Some(Ok(()));
            }
            !empty
        })
        .collect();
    let mut in_flight = 0usize;
    // Queue what fits in the ring's free slots.
    let fill = |ring: &mut IoUring,
                queue: &mut VecDeque<usize>,
                in_flight: &mut usize,
                slots: &mut [Slot]| {
        while let Some(&i) = queue.front() {
            let e = entry(&reqs[i], &slots[i], i);
            // SAFETY: the entry's buffer (the caller's, borrowed until `run`
            // returns, or the slot's bounce buffer, kept until then) and its
            // descriptor (the caller's, open for the call) stay valid until
            // its completion is reaped: `on_ring` returns only when nothing
            // is in flight.
            if unsafe { ring.submission().push(&e) }.is_err() {
                break;
            }
            queue.pop_front();
            *in_flight += 1;
            if !slots[i].sent {
                slots[i].sent = true;
                in_flight::add(1);
            }
            SUBMITTED.with(|s| s.set(s.get() + 1));
        }
    };
    fill(ring, &mut queue, &mut in_flight, slots);
    // Sent before the volume calls, so that both proceed at once.
    if let Err(e) = ring.submit() {
        if !retryable(&e) {
            broken_ring();
        }
    }
    let out = meanwhile();
    while in_flight > 0 || !queue.is_empty() {
        fill(ring, &mut queue, &mut in_flight, slots);
        if let Err(e) = ring.submit_and_wait(1) {
            if !retryable(&e) {
                broken_ring();
            }
        }
        for cqe in ring.completion() {
            let i = cqe.user_data() as usize;
            in_flight -= 1;
            let (req, slot) = (&reqs[i], &mut slots[i]);
            let res = cqe.result();
            if res < 0 {
                if matches!(-res, libc::EINTR | libc::EAGAIN) {
                    queue.push_back(i);
                } else {
                    finish(slot, Err(std::io::Error::from_raw_os_error(-res)));
                }
                continue;
            }
            if let Work::Flush = req.work {
                finish(slot, Ok(()));
                continue;
            }
            if res == 0 {
                finish(
                    slot,
                    Err(match req.work {
                        Work::Read(_) => std::io::ErrorKind::UnexpectedEof.into(),
                        _ => std::io::ErrorKind::WriteZero.into(),
                    }),
                );
                continue;
            }
            slot.done += res as usize;
            if slot.done < slot.len {
                // Short: the rest goes again.
                queue.push_back(i);
            } else {
                finish(slot, Ok(()));
            }
        }
    }
    out
}

/// Request `slot` is done with `r` (counted out of flight once, however
/// many times it went again).
fn finish(slot: &mut Slot, r: std::io::Result<()>) {
    in_flight::add(-1);
    slot.result = Some(r);
}

fn retryable(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;

    #[test]
    fn probe_passes_here() {
        // The machines raidlab is tested on run Linux 6.x with io_uring on;
        // a failure here says why, which is what `detail` would show.
        probe().unwrap();
    }

    #[test]
    fn a_batch_reads_writes_and_flushes_with_bounced_memory() {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("f"))
            .unwrap();
        f.set_len(1 << 20).unwrap();
        let fd = f.as_raw_fd();
        let a: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        // Odd memory, as a bounce must handle (alignment asked 4096).
        let b: Vec<u8> = (0..8193u32).map(|i| (i * 13 + 1) as u8).collect();
        let mut reqs = vec![
            Request {
                fd,
                offset: 100,
                work: Work::Write(&a),
                mem_align: 1,
            },
            Request {
                fd,
                offset: 65536,
                work: Work::Write(&b[1..]),
                mem_align: 4096,
            },
        ];
        let (res, ()) = run(&mut reqs, || ());
        assert!(res.iter().all(|r| r.is_ok()), "{res:?}");
        let mut back_a = vec![0u8; 5000];
        let mut back_b = vec![0u8; 8193];
        let (res, n) = run(
            &mut [
                Request {
                    fd,
                    offset: 100,
                    work: Work::Read(&mut back_a),
                    mem_align: 1,
                },
                Request {
                    fd,
                    offset: 65536,
                    work: Work::Read(&mut back_b[1..]),
                    mem_align: 4096,
                },
                Request {
                    fd,
                    offset: 0,
                    work: Work::Flush,
                    mem_align: 1,
                },
            ],
            || 7,
        );
        assert_eq!(n, 7);
        assert!(res.iter().all(|r| r.is_ok()), "{res:?}");
        assert_eq!(back_a, a);
        assert_eq!(&back_b[1..], &b[1..]);
        let mut check = vec![0u8; 5000];
        f.read_exact_at(&mut check, 100).unwrap();
        assert_eq!(check, a);
        // Past the end of the file a read comes back short, then empty: an
        // error for that request alone.
        let mut past = vec![0u8; 8192];
        let mut ok = vec![0u8; 16];
        let (res, ()) = run(
            &mut [
                Request {
                    fd,
                    offset: (1 << 20) - 4096,
                    work: Work::Read(&mut past),
                    mem_align: 1,
                },
                Request {
                    fd,
                    offset: 100,
                    work: Work::Read(&mut ok),
                    mem_align: 1,
                },
            ],
            || (),
        );
        assert_eq!(
            res[0].as_ref().unwrap_err().kind(),
            std::io::ErrorKind::UnexpectedEof
        );
        assert!(res[1].is_ok());
        assert_eq!(&ok[..], &a[..16]);
        // A descriptor opened read-only refuses the write with its errno.
        let ro = std::fs::File::open(dir.path().join("f")).unwrap();
        let (res, ()) = run(
            &mut [Request {
                fd: ro.as_raw_fd(),
                offset: 0,
                work: Work::Write(&a),
                mem_align: 1,
            }],
            || (),
        );
        assert_eq!(
            res[0].as_ref().unwrap_err().raw_os_error(),
            Some(libc::EBADF)
        );
    }

    #[test]
    fn more_requests_than_slots_all_complete() {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(dir.path().join("f"))
            .unwrap();
        f.set_len(1 << 20).unwrap();
        let data: Vec<Vec<u8>> = (0..200u32).map(|i| vec![i as u8; 4096]).collect();
        let mut reqs: Vec<Request> = data
            .iter()
            .enumerate()
            .map(|(i, d)| Request {
                fd: f.as_raw_fd(),
                offset: i as u64 * 4096,
                work: Work::Write(d),
                mem_align: 1,
            })
            .collect();
        let before = submitted_on_this_thread();
        let (res, ()) = run(&mut reqs, || ());
        assert!(res.iter().all(|r| r.is_ok()));
        assert_eq!(submitted_on_this_thread() - before, 200);
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, 199 * 4096 + 5).unwrap();
        assert_eq!(b[0], 199);
    }
}
