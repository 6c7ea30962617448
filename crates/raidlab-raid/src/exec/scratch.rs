//! The scratch buffers of a plan (member reads, parity), kept per thread
//! between plans. It decides only which buffer a plan gets and which are
//! kept; it never reads a buffer's contents (test builds poison them).

use std::cell::RefCell;

/// Scratch buffers a thread keeps between plans, at most this many bytes: a fresh
/// zeroed buffer per plan costs a page fault and a page of zeroing every 4 KiB,
/// which on fast members was a large part of a degraded read or a rebuild.
const POOL_BYTES: usize = 64 << 20;

/// A thread's kept buffers, shortest first, and the bytes they hold. In
/// order, a take finds the shortest buffer long enough at once: taking the
/// first long enough handed a long buffer to a small plan, it came back cut
/// short, and the next long plan had its tail zeroed again; and a plan of a
/// few hundred pages walked the whole pool for each (in the torture harness
/// both were about 3% of a run).
struct Pool {
    bufs: Vec<Vec<u8>>,
    bytes: usize,
}

thread_local! {
    static POOL: RefCell<Pool> = const { RefCell::new(Pool { bufs: Vec::new(), bytes: 0 }) };
}

/// Buffers of the plan's scratch sizes, from this thread's pool where it has them.
/// Their contents are whatever an earlier plan left: every plan writes a scratch
/// buffer in full (a member read or a compute output) before anything reads it.
pub(super) fn take_scratch(sizes: &[usize]) -> Vec<Vec<u8>> {
    POOL.with(|p| {
        let mut pool = p.borrow_mut();
        sizes
            .iter()
            .map(|&n| {
                let fit = pool.bufs.partition_point(|b| b.len() < n);
                // None long enough: the longest, grown.
                let mut b = if fit < pool.bufs.len() {
                    pool.bufs.remove(fit)
                } else {
                    pool.bufs.pop().unwrap_or_default()
                };
                pool.bytes -= b.capacity();
                if b.len() >= n {
                    b.truncate(n);
                } else {
                    b.resize(n, 0);
                }
                // Test builds poison every buffer, so a plan that read scratch
                // before writing it would fail the engine's tests.
                if cfg!(debug_assertions) {
                    b.fill(0xa5);
                }
                b
            })
            .collect()
    })
}

pub(super) fn give_back_scratch(bufs: Vec<Vec<u8>>) {
    POOL.with(|p| {
        let mut pool = p.borrow_mut();
        for b in bufs {
            if pool.bytes + b.capacity() <= POOL_BYTES {
                pool.bytes += b.capacity();
                let at = pool.bufs.partition_point(|k| k.len() < b.len());
                pool.bufs.insert(at, b);
            }
        }
    })
}
