//! What one connection's reader and workers share: the in-flight budget, the
//! writer with its cork, pooled request buffers and pipes, and every kind of
//! reply (simple, error, read, spliced read). It decides how replies reach the
//! socket whole and in budget; it must never parse requests or decide which
//! thread serves one.

use super::*;

/// How much of a read [`Conn::reply_read_stored`] answered.
pub(super) enum Spliced {
    /// All of it (or the connection broke on the way).
    All,
    /// Nothing was sent.
    Nothing,
    /// Chunks up to this offset went out, none of them final.
    Upto(u64),
}

/// A request buffer: the first `len` bytes of a pooled allocation.
pub(super) struct Buf {
    pub(super) data: Vec<u8>,
    pub(super) len: usize,
}

impl std::ops::Deref for Buf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.data[..self.len]
    }
}

impl std::ops::DerefMut for Buf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.data[..self.len]
    }
}

/// A connection's in-flight budget: bytes taken, and whether the reader (the
/// only one that ever waits for room) is waiting.
#[derive(Default)]
pub(super) struct Budget {
    pub(super) used: usize,
    pub(super) waiting: bool,
}

/// The state one connection's reader and workers share.
pub(super) struct Conn<W> {
    pub(super) writer: Mutex<W>,
    /// Set once a reply could not be written: the client is gone, later replies
    /// are dropped (the requests themselves still finish).
    pub(super) broken: AtomicBool,
    pub(super) used: Mutex<Budget>,
    /// Jobs handed to the workers and not finished.
    pub(super) queued: AtomicUsize,
    /// Requests served in a row, up to now, each in less than [`FAST`]
    /// (counted up to [`FAST_RUN`]).
    pub(super) fast_run: AtomicU32,
    /// Buffers of finished requests, for reuse.
    pub(super) pool: Mutex<Vec<Vec<u8>>>,
    /// Replies the reader made itself, not yet written (see [`CORKED`]). Only
    /// the reader thread touches it, so its lock is never contended.
    pub(super) cork: Mutex<Vec<u8>>,
    pub(super) freed: Condvar,
    pub(super) limit: usize,
    pub(super) structured: bool,
    /// The plain socket `writer` writes to, if it is one.
    pub(super) socket: Option<RawFd>,
    /// Splice large read replies into `socket`.
    pub(super) zero_copy: bool,
    /// Empty pipes for spliced replies, for reuse.
    pub(super) pipes: Mutex<Vec<Pipe>>,
}

impl<W: Write> Conn<W> {
    /// Wait until `bytes` more fit in the in-flight budget and take them; returns
    /// the charge to give back with [`Conn::release`].
    pub(super) fn acquire(&self, bytes: usize) -> usize {
        let charge = bytes + JOB_OVERHEAD;
        let mut b = self.used.lock().unwrap_or_else(|p| p.into_inner());
        if b.used + charge > self.limit && self.corked() > 0 {
            // Never wait with replies held back.
            drop(b);
            self.uncork();
            b = self.used.lock().unwrap_or_else(|p| p.into_inner());
        }
        while b.used + charge > self.limit {
            b.waiting = true;
            b = self.freed.wait(b).unwrap_or_else(|p| p.into_inner());
        }
        b.waiting = false;
        b.used += charge;
        charge
    }

    pub(super) fn release(&self, charge: usize) {
        let mut b = self.used.lock().unwrap_or_else(|p| p.into_inner());
        b.used -= charge;
        // A wake-up is a system call: make it only when the reader waits.
        if b.waiting {
            self.freed.notify_all();
        }
    }

    /// Write to the client under the writer lock, so replies never interleave.
    /// False when nothing was (or could be) sent: the connection is broken, now
    /// or before, and later replies are dropped.
    pub(super) fn send_now(&self, f: impl FnOnce(&mut W) -> io::Result<()>) -> bool {
        if self.broken.load(Ordering::Relaxed) {
            return false;
        }
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let ok = f(&mut w).and_then(|()| w.flush()).is_ok();
        if !ok {
            self.broken.store(true, Ordering::Relaxed);
        }
        ok
    }

    pub(super) fn write_all(&self, parts: &[&[u8]]) {
        if CORKED.with(|c| c.get()) {
            if !self.broken.load(Ordering::Relaxed) {
                let mut cork = self.cork.lock().unwrap_or_else(|p| p.into_inner());
                for p in parts {
                    cork.extend_from_slice(p);
                }
            }
            return;
        }
        self.send_now(|w| parts.iter().try_for_each(|p| w.write_all(p)));
    }

    /// Bytes of replies held in the cork.
    pub(super) fn corked(&self) -> usize {
        self.cork.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Write the replies held in the cork.
    pub(super) fn uncork(&self) {
        let mut cork = self.cork.lock().unwrap_or_else(|p| p.into_inner());
        if cork.is_empty() {
            return;
        }
        self.send_now(|w| w.write_all(&cork));
        cork.clear();
        if cork.capacity() > 4 * CORK_MAX {
            cork.shrink_to(CORK_MAX);
        }
    }

    pub(super) fn reply_simple(&self, error: u32, cookie: u64, data: &[u8]) {
        self.write_all(&[&simple_reply(error, cookie), data]);
    }

    /// An error for a read: a structured error chunk with a message when
    /// structured replies were negotiated (required for reads), else simple.
    pub(super) fn reply_error(&self, error: u32, cookie: u64, message: &str) {
        if self.structured {
            self.write_all(&[&structured_error(cookie, error, message)]);
        } else {
            self.reply_simple(error, cookie, &[]);
        }
    }

    /// Bytes of reply header before a read's data.
    pub(super) fn read_header_len(&self) -> usize {
        if self.structured {
            20 + 8
        } else {
            16
        }
    }

    /// The header of a successful read reply, or of one chunk of it, carrying
    /// `len` (> 0) bytes from `offset`, into `out` ([`Conn::read_header_len`]
    /// bytes long). `last`: the chunk ends the reply (always, for simple replies).
    pub(super) fn read_header(
        &self,
        out: &mut [u8],
        cookie: u64,
        offset: u64,
        len: usize,
        last: bool,
    ) {
        if self.structured {
            let h = structured_header(
                if last { REPLY_FLAG_DONE } else { 0 },
                REPLY_TYPE_OFFSET_DATA,
                cookie,
                (len + 8) as u32,
            );
            out[..20].copy_from_slice(&h);
            out[20..28].copy_from_slice(&offset.to_be_bytes());
        } else {
            out[..16].copy_from_slice(&simple_reply(0, cookie));
        }
    }

    /// Send a read's reply; `buf` holds [`Conn::read_header_len`] bytes of room
    /// followed by the data.
    pub(super) fn reply_read(&self, cookie: u64, offset: u64, mut buf: Buf) {
        let hdr = self.read_header_len();
        let len = buf.len() - hdr;
        if self.structured && len == 0 {
            // An OFFSET_DATA chunk must carry data: answer an empty read with a
            // bare DONE.
            let h = structured_header(REPLY_FLAG_DONE, REPLY_TYPE_NONE, cookie, 0);
            self.write_all(&[&h]);
            return;
        }
        self.read_header(&mut buf[..hdr], cookie, offset, len, true);
        self.write_all(&[&buf[..]]);
        self.recycle(buf);
    }

    /// Answer a read (`len` > 0) by splicing the stored bytes from the volume's
    /// files into the socket, in one reply, or with structured replies in
    /// chunks as large as a pipe allows. Anything that cannot be done so (no
    /// plain socket, data not simply stored, a pipe too small, any error on the
    /// way) is left to the caller, which reads through `read_at`, the path that
    /// also reports and repairs errors.
    pub(super) fn reply_read_stored(
        &self,
        v: &dyn Volume,
        cookie: u64,
        offset: u64,
        len: usize,
    ) -> Spliced {
        let Some(socket) = self.socket.filter(|_| self.zero_copy) else {
            return Spliced::Nothing;
        };
        let hdr_len = self.read_header_len();
        let end = offset + len as u64;
        let mut at = offset;
        // What has gone out when the next step gives up.
        let sent = |at: u64| {
            if at == offset {
                Spliced::Nothing
            } else {
                Spliced::Upto(at)
            }
        };
        // Set once a fill found the pipe full: size the rest for pieces that
        // start or end inside pages.
        let mut cautious = false;
        while at < end {
            let rest = (end - at) as usize;
            let mut pipe = match self.pipes.lock().unwrap_or_else(|p| p.into_inner()).pop() {
                Some(p) => p,
                None => match Pipe::new() {
                    Ok(p) => p,
                    Err(_) => return sent(at),
                },
            };
            // A page-aligned read of members whose data areas are page-aligned
            // (the usual case) takes one pipe slot per page, so a 1 MiB read
            // fits the 1 MiB any process may have and goes in one chunk.
            // Otherwise allow for a partial page at both ends of each piece
            // (one piece per 64K member chunk touched, plus two).
            let aligned = !cautious && at % 4096 == 0 && rest % 4096 == 0;
            let slack = if aligned { 0 } else { rest / (64 << 10) + 2 };
            let room = pipe.reserve_up_to(rest, slack);
            let n = if room >= rest {
                rest
            } else if self.structured && room >= SPLICE_MIN {
                // Equal chunks, whole pages: not a full pipe plus a little.
                let chunks = rest.div_ceil(room);
                rest.div_ceil(chunks).next_multiple_of(4096).min(rest)
            } else {
                return sent(at);
            };
            let mut full = false;
            let mut fill = |fd: std::os::fd::BorrowedFd<'_>, o: u64, k: usize| {
                pipe.fill(fd, o, k)
                    .inspect_err(|e| full |= e.kind() == io::ErrorKind::WouldBlock)
            };
            if !matches!(v.read_stored(at, n as u64, &mut fill), Ok(true)) {
                // The pipe holds part of a chunk: it goes, unsent. A pipe that
                // was too small for unaligned pieces is tried once more, sized
                // for them.
                if full && !cautious {
                    cautious = true;
                    continue;
                }
                return sent(at);
            }
            let mut hdr = [0u8; 28];
            self.read_header(&mut hdr, cookie, at, n, at + n as u64 == end);
            let delivered = self.send_now(|w| {
                w.write_all(&hdr[..hdr_len])
                    .and_then(|()| w.flush())
                    .and_then(|()| pipe.drain_to(socket))
            });
            if !delivered {
                // Broken, now or before: the pipe may still hold the chunk,
                // so it is not kept.
                return Spliced::All;
            }
            let mut pipes = self.pipes.lock().unwrap_or_else(|p| p.into_inner());
            if pipe.is_empty() && pipes.len() < POOLED {
                pipes.push(pipe);
            }
            at += n as u64;
        }
        Spliced::All
    }

    /// A buffer of `n` bytes, reusing one from an earlier request: fresh large
    /// allocations come from mmap and fault in every page each time. A reused
    /// buffer is not cleared (only bytes it never had are zeroed): every user
    /// overwrites all `n` bytes before reading them (a read from the volume, a
    /// payload from the socket).
    pub(super) fn buffer(&self, n: usize) -> Buf {
        let mut data = self
            .pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
            .unwrap_or_default();
        if data.len() < n {
            data.resize(n, 0);
        }
        Buf { data, len: n }
    }

    /// Keep a buffer for reuse; the pool is small and holds no huge buffers, so
    /// idle memory per connection stays bounded (POOLED x POOLED_MAX).
    pub(super) fn recycle(&self, b: Buf) {
        let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        if pool.len() < POOLED && b.data.len() <= POOLED_MAX {
            pool.push(b.data);
        }
    }
}
