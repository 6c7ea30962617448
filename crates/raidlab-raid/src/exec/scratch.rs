//! The scratch buffers of a plan (member reads, parity), kept per thread
//! between plans. It decides only which buffer a plan gets and which are
//! kept; it never reads a buffer's contents (test builds poison them).

/// Scratch buffers a thread keeps between plans, at most this many bytes: a fresh
/// zeroed buffer per plan costs a page fault and a page of zeroing every 4 KiB,
/// which on fast members was a large part of a degraded read or a rebuild.
const POOL_BYTES: usize = 64 << 20;

/// Buffers a thread keeps at most: a plan takes a handful.
const POOL_COUNT: usize = 32;

thread_local! {
    static POOL: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
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
                // The shortest buffer long enough: a long one cut down for
                // a small plan came back short, and the next long plan had
                // its tail zeroed again (a memset per plan of a rebuild or a
                // degraded read).
                let fit = (0..pool.len())
                    .filter(|&i| pool[i].len() >= n)
                    .min_by_key(|&i| pool[i].len())
                    .or_else(|| (0..pool.len()).max_by_key(|&i| pool[i].len()));
                let mut b = fit.map(|i| pool.swap_remove(i)).unwrap_or_default();
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
        let mut kept: usize = pool.iter().map(Vec::capacity).sum();
        for b in bufs {
            if kept + b.capacity() <= POOL_BYTES {
                kept += b.capacity();
                pool.push(b);
            }
        }
        // Every take looks through the pool: small buffers given back by
        // the thousand made that walk cost more than the buffers saved.
        while pool.len() > POOL_COUNT {
            let shortest = (0..pool.len())
                .min_by_key(|&i| pool[i].len())
                .expect("a pool past its count is not empty");
            pool.swap_remove(shortest);
        }
    })
}
