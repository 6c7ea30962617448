//! The server side of one NBD connection, over any byte stream: the fixed newstyle
//! handshake, then transmission with many requests in flight.
//!
//! ```text
//!  reader (this thread)            workers (Limits::workers threads)
//!  parse request ─ check ─┬─ error reply ──────────────┐
//!        │ (budget: bytes │                            ├─> writer (one mutex,
//!        │  in flight)    └─ job queue ─> volume I/O ──┘    whole replies)
//! ```
//! The reader hands requests to the workers, so a slow request does not hold up
//! the ones behind it; it waits only for room in the in-flight budget (one client
//! holds at most `max_inflight_bytes` of buffers). Where a hand-off costs more
//! than the work, the reader does the work itself: a request arriving with
//! nothing in flight, and small requests while the volume answers within
//! 50 µs (memory, the page cache); one slow request ends that. The reader holds
//! the replies it makes back until it is about to wait for input (a "cork"), so
//! a burst of requests costs one write and one wake-up of the client. On a plain
//! socket the reader polls for the next request for 30 µs before it sleeps
//! (after a small request, or with nothing at the workers): waking a sleeping
//! thread costs more than a queue-depth-1 client's turnaround.
//!
//! Replies are written whole under one lock, so they never interleave; their
//! order is the order in which requests finish, as the protocol allows (replies
//! are matched by cookie). Large reads on plain sockets are spliced from the
//! volume's files (module `splice`); with structured replies they may go
//! as several chunks, which may interleave with other replies, as the protocol
//! allows.

mod conn;
mod handshake;
mod stats;

pub use stats::{CommandStats, ExportStats, LatencyHistogram, COMMANDS};

use crate::proto::*;
use crate::splice::Pipe;
use crate::tls::Tls;
use conn::{Budget, Buf, Conn, Spliced};
use raidlab_core::{ErrorKind, Volume};
use std::io::{self, BufReader, Read, Write};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// One named volume offered to clients.
pub struct Export {
    pub name: String,
    /// Shown to clients that ask (`nbdinfo`), e.g. "RAID 5, 4 members, chunk 64K".
    pub description: String,
    pub volume: Arc<dyn Volume>,
    /// Refuse writes, trims and zeroing with `EPERM`.
    pub read_only: bool,
    /// The size clients should use for best speed: an array's full stripe.
    pub preferred_block: u32,
    /// Advertise that several connections may be used at once. Safe only when a
    /// flush on any connection makes durable every write any connection has
    /// completed, which holds when all connections share one volume whose flush
    /// covers the whole volume (files, block devices, arrays).
    pub multi_conn: bool,
}

impl std::fmt::Debug for Export {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Export")
            .field("name", &self.name)
            .field("volume", &self.volume.name())
            .field("read_only", &self.read_only)
            .finish()
    }
}

impl Export {
    /// Whether clients may change the contents.
    pub fn writable(&self) -> bool {
        !self.read_only && self.volume.is_writable()
    }

    fn transmission_flags(&self) -> u16 {
        let mut f = TF_HAS_FLAGS | TF_SEND_FLUSH | TF_SEND_FUA;
        if self.writable() {
            f |= TF_SEND_TRIM | TF_SEND_WRITE_ZEROES;
        } else {
            f |= TF_READ_ONLY;
        }
        if self.multi_conn {
            f |= TF_CAN_MULTI_CONN;
        }
        f
    }
}

/// Bounds that keep one client (or many) from exhausting the server.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest read or write payload, advertised as the maximum payload (the
    /// "maximum block size" of `INFO_BLOCK_SIZE`). A read or a write longer than
    /// this gets `EINVAL`; the write's payload is read and dropped first, so the
    /// stream stays in step, up to [`Limits::skip_max`] bytes, above which the
    /// server hangs up (the protocol allows that for a payload large enough to
    /// be a denial of service). Trims and zeroing carry no payload and may be
    /// longer: the protocol lets clients ask that and says the server should
    /// not disconnect; they are carried out.
    pub max_payload: u32,
    /// Buffer bytes one connection may hold for requests not yet answered; the
    /// server stops reading that connection while it is full.
    pub max_inflight_bytes: usize,
    /// Requests of one connection served at the same time (1 to [`MAX_WORKERS`]);
    /// the threads start as requests find the ones started busy.
    pub workers: usize,
    /// Largest option payload read during the handshake; longer ones are skipped
    /// and refused with `REP_ERR_TOO_BIG`.
    pub max_option_len: u32,
    /// Connections served at once (all exports); more are closed at once.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_payload: 32 << 20,
            max_inflight_bytes: 64 << 20,
            // A queue-depth-32 client's whole queue: with 16 (nbdkit's
            // default thread count) one such connection left a 4-disk array
            // of disks 8% short of what the kernel's md and btrfs read from
            // the same disks (docs/benchmarks.md, "The kernel's md on the
            // same disks"). Threads start only as requests need them.
            workers: 32,
            max_option_len: 16 << 10,
            max_connections: 64,
        }
    }
}

impl Limits {
    /// The longest write payload the server reads and drops to refuse the write
    /// with `EINVAL`; longer ones are a hard disconnect. Twice the maximum
    /// payload (as nbdkit skips), and never under 2^25 bytes, which the protocol
    /// says should not be taken for a denial of service whatever maximum was
    /// advertised. Dropping costs the connection's reader time, not memory.
    pub fn skip_max(&self) -> u64 {
        (2 * self.max_payload as u64).max(1 << 25)
    }
}

/// How a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The client asked to end the handshake (`OPT_ABORT`) or sent `CMD_DISC`.
    Closed,
    /// The stream ended or failed (the client went away).
    Gone,
    /// The client broke the protocol; the server hung up. The text says how.
    Violation(String),
}

/// Where a handshake stopped.
#[derive(Debug, Clone, Copy)]
pub enum Handshake {
    /// Transmission may start.
    Done(Negotiated),
    /// STARTTLS was acknowledged: run a TLS handshake on the socket, then
    /// [`Server::resume_handshake`].
    StartTls(Resume),
}

/// What carries over a STARTTLS.
#[derive(Debug, Clone, Copy)]
pub struct Resume {
    no_zeroes: bool,
}

/// What the handshake settled: the export and the reply style.
#[derive(Debug, Clone, Copy)]
pub struct Negotiated {
    pub export: usize,
    pub structured: bool,
}

/// Serves a fixed set of exports to any number of connections.
pub struct Server {
    exports: Vec<Export>,
    limits: Limits,
    connections: AtomicUsize,
    log: Box<dyn Fn(&str) + Send + Sync>,
    tls: Option<Tls>,
    /// Send large read replies on plain sockets by splice (see [`crate::splice`]).
    zero_copy: bool,
    /// Connections and requests served, per export (module `stats`).
    counters: Arc<stats::Counters>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("exports", &self.exports)
            .field("limits", &self.limits)
            .finish()
    }
}

/// Reads a server's [`ExportStats`] (see [`Server::stats_reader`]).
#[derive(Debug, Clone)]
pub struct StatsReader(Arc<stats::Counters>);

impl StatsReader {
    pub fn stats(&self) -> Vec<ExportStats> {
        self.0.snapshot()
    }
}

/// A connection slot; dropping it frees the slot.
#[derive(Debug)]
pub struct Admission<'a>(&'a AtomicUsize);

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The most worker threads one connection gets.
pub const MAX_WORKERS: usize = 256;
/// Every job costs at least this much budget, so a flood of zero-length requests
/// is bounded too.
const JOB_OVERHEAD: usize = 64;
/// Buffers kept for reuse per connection, and the largest kept.
const POOLED: usize = 16;
const POOLED_MAX: usize = 2 << 20;
/// Read-ahead of request headers per connection.
const READ_BUFFER: usize = 128 << 10;
/// What a zeroing job holds of the budget: the buffer of zeros the default
/// [`Volume::write_zeroes`] allocates.
const ZERO_PIECE: usize = raidlab_core::ZERO_PIECE as usize;
/// Reads from this size up are sent by splice where they can be: below it the
/// extra system calls and page references cost more than the copies they save.
const SPLICE_MIN: usize = 32 << 10;
/// Requests up to this size may be served on the reader thread (see
/// `read_requests`) while requests take less than [`FAST`] each.
const INLINE_MAX: usize = 64 << 10;
const FAST: Duration = Duration::from_micros(50);
/// The reader flushes replies it holds back once they reach this size.
const CORK_MAX: usize = 256 << 10;

thread_local! {
    /// Set while the reader thread serves a request itself: its replies go
    /// into the connection's cork instead of the socket.
    static CORKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The send buffer asked for on plain sockets (see `enlarge_send_buffer`).
const SEND_BUFFER: libc::c_int = 4 << 20;
/// How long the reader polls for the next request before it sleeps.
const SPIN: Duration = Duration::from_micros(30);

impl Server {
    /// `log` receives one line per server-side failure (a volume error, a protocol
    /// violation) for the operator.
    pub fn new(
        exports: Vec<Export>,
        mut limits: Limits,
        log: Box<dyn Fn(&str) + Send + Sync>,
    ) -> Self {
        // Block sizes are hinted from 512 bytes up; a smaller maximum would be
        // useless to every client.
        limits.max_payload = limits.max_payload.max(4096);
        // A payload must always fit in the budget, or its reader would wait forever.
        limits.max_inflight_bytes = limits
            .max_inflight_bytes
            .max(limits.max_payload as usize + JOB_OVERHEAD);
        // Threads are spawned per connection: keep the count sane whatever a
        // caller asks for.
        limits.workers = limits.workers.clamp(1, MAX_WORKERS);
        let counters = Arc::new(stats::Counters::new(
            exports.iter().map(|e| e.name.clone()).collect(),
        ));
        Server {
            counters,
            exports,
            limits,
            connections: AtomicUsize::new(0),
            tls: None,
            log,
            zero_copy: true,
        }
    }

    /// Whether large read replies on plain sockets go from the volume's files to
    /// the socket without a copy in user space (on by default; off to compare).
    pub fn with_zero_copy(mut self, on: bool) -> Self {
        self.zero_copy = on;
        self
    }

    pub fn exports(&self) -> &[Export] {
        &self.exports
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// What each export has served since the server was made: connections
    /// and requests by command, with errors and latency.
    pub fn stats(&self) -> Vec<ExportStats> {
        self.counters.snapshot()
    }

    /// A way to read [`Server::stats`] from another thread while the server
    /// is borrowed by the listener (a metrics endpoint).
    pub fn stats_reader(&self) -> StatsReader {
        StatsReader(self.counters.clone())
    }

    /// Take a connection slot, or `None` when `max_connections` are being served.
    pub fn admit(&self) -> Option<Admission<'_>> {
        let n = self.connections.fetch_add(1, Ordering::SeqCst);
        let slot = Admission(&self.connections);
        (n < self.limits.max_connections).then_some(slot)
    }

    /// Serve one connection from handshake to end.
    /// Serve one connection from handshake to end, without TLS (a STARTTLS
    /// needs the socket: [`crate::listen::run`] does that).
    pub fn serve<R: Read, W: Write + Send>(&self, mut reader: R, mut writer: W) -> Outcome {
        match self.handshake(&mut reader, &mut writer) {
            Ok(Handshake::Done(n)) => self.transmission(reader, writer, n),
            Ok(Handshake::StartTls(_)) => {
                Outcome::Violation("STARTTLS on a stream that cannot carry TLS".into())
            }
            Err(o) => o,
        }
    }

    /// The TLS this server offers, if any.
    pub fn tls(&self) -> Option<&Tls> {
        self.tls.as_ref()
    }

    /// Offer TLS through STARTTLS (and with `require`, insist on it).
    pub fn with_tls(mut self, tls: Tls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Serve requests until the client disconnects, then finish every request
    /// already accepted before returning.
    pub fn transmission<R: Read, W: Write + Send>(&self, r: R, w: W, n: Negotiated) -> Outcome {
        self.transmit(r, w, n, None)
    }

    /// [`Server::transmission`] on a plain socket (no TLS in between): large
    /// read replies are spliced into its descriptor (module `splice`),
    /// and the reader polls it briefly for the next request before sleeping.
    pub fn transmission_on_socket<R: Read, W: Write + Send + AsFd>(
        &self,
        r: R,
        w: W,
        n: Negotiated,
    ) -> Outcome {
        let fd = w.as_fd().as_raw_fd();
        self.transmit(r, w, n, Some(fd))
    }

    /// `socket`: the descriptor of the plain socket `w` writes to, if it is
    /// one; it stays open as long as `w`, which lives until this returns.
    fn transmit<R: Read, W: Write + Send>(
        &self,
        r: R,
        w: W,
        n: Negotiated,
        socket: Option<RawFd>,
    ) -> Outcome {
        if let Some(fd) = socket {
            enlarge_send_buffer(fd);
        }
        // Buffered: at queue depth 32 one read system call brings in many request
        // headers (payloads larger than the buffer bypass it).
        let mut r = BufReader::with_capacity(READ_BUFFER, r);
        let _open = self.counters.connected(n.export);
        let conn = Conn {
            writer: Mutex::new(w),
            broken: AtomicBool::new(false),
            used: Mutex::new(Budget::default()),
            queued: AtomicUsize::new(0),
            fast: AtomicBool::new(false),
            pool: Mutex::new(Vec::new()),
            cork: Mutex::new(Vec::new()),
            freed: Condvar::new(),
            limit: self.limits.max_inflight_bytes,
            structured: n.structured,
            socket,
            zero_copy: self.zero_copy,
            pipes: Mutex::new(Vec::new()),
        };
        let (tx, rx) = mpsc::channel::<(Job, usize, Instant)>();
        let rx = Mutex::new(rx);
        std::thread::scope(|s| {
            // Workers start when a job finds every one busy, up to the limit: a
            // client at queue depth 1 keeps one thread, one with 32 requests on
            // an array of disks gets as many member I/Os in flight as the limit.
            let (rx, shared) = (&rx, &conn);
            let add_worker = || {
                s.spawn(move || loop {
                    let next = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    let Ok((job, charge, received)) = next else {
                        break;
                    };
                    self.run_timed(n.export, shared, job, received);
                    shared.queued.fetch_sub(1, Ordering::SeqCst);
                    shared.release(charge);
                });
            };
            let outcome = self.read_requests(&mut r, n.export, &conn, &tx, &add_worker);
            conn.uncork();
            drop(tx);
            outcome
        })
    }

    fn read_requests<R: Read, W: Write>(
        &self,
        r: &mut BufReader<R>,
        index: usize,
        conn: &Conn<W>,
        tx: &mpsc::Sender<(Job, usize, Instant)>,
        add_worker: &dyn Fn(),
    ) -> Outcome {
        let export = &self.exports[index];
        let size = export.volume.size();
        let mut workers = 0;
        let mut last_len = 0usize;
        loop {
            if r.buffer().len() < REQUEST_LEN {
                // About to wait for the client: it may be waiting for these.
                conn.uncork();
            }
            // Spin for small requests, or when the workers have nothing (the
            // client has every reply it waits for, so its next request is due).
            // Not behind large requests at the workers: the client is busy
            // taking in those replies, and a spinning reader would take CPU from
            // it and from the workers on a small machine (1 MiB reads at QD8 on
            // 2 CPUs: 5-33% faster without the spin).
            if r.buffer().is_empty()
                && (last_len <= INLINE_MAX || conn.queued.load(Ordering::SeqCst) == 0)
            {
                if let Some(fd) = conn.socket {
                    spin_for_request(fd);
                }
            }
            let mut hb = [0u8; REQUEST_LEN];
            if let Err(o) = recv(r, &mut hb) {
                return o;
            }
            let q = parse_request(&hb);
            last_len = q.length as usize;
            if q.magic != REQUEST_MAGIC {
                return Outcome::Violation(format!("request magic {:#x} is wrong", q.magic));
            }
            let c = q.cookie;
            let len = q.length as u64;
            let in_range = q.offset.checked_add(len).is_some_and(|end| end <= size);
            let flags_ok = q.flags & !(CMD_FLAG_FUA | CMD_FLAG_NO_HOLE) == 0;
            let fua = q.flags & CMD_FLAG_FUA != 0;
            let (job, charge) = match q.kind {
                CMD_DISC => return Outcome::Closed,
                CMD_WRITE => {
                    if q.length > self.limits.max_payload {
                        // The protocol: the server should answer EINVAL, and may
                        // hang up only on a payload large enough to be a denial
                        // of service. Up to `skip_max` the payload is read and
                        // dropped (no buffer is held), so the next request is
                        // read where it starts.
                        if len > self.limits.skip_max() {
                            return Outcome::Violation(format!(
                                "write of {len} bytes exceeds the maximum payload of {} bytes \
                                 and is too long to skip",
                                self.limits.max_payload
                            ));
                        }
                        if (r.buffer().len() as u64) < len {
                            conn.uncork();
                        }
                        if let Err(o) = skip(r, len) {
                            return o;
                        }
                        conn.reply_error(
                            EINVAL,
                            c,
                            &format!(
                                "write of {len} bytes exceeds the maximum payload of {} bytes",
                                self.limits.max_payload
                            ),
                        );
                        continue;
                    }
                    let charge = conn.acquire(q.length as usize);
                    let mut data = conn.buffer(q.length as usize);
                    if r.buffer().len() < data.len() {
                        conn.uncork();
                    }
                    if let Err(o) = recv(r, &mut data) {
                        conn.release(charge);
                        return o;
                    }
                    let err = if !flags_ok {
                        Some(EINVAL)
                    } else if !export.writable() {
                        Some(EPERM)
                    } else if !in_range {
                        Some(ENOSPC)
                    } else {
                        None
                    };
                    if let Some(e) = err {
                        conn.release(charge);
                        conn.reply_simple(e, c, &[]);
                        continue;
                    }
                    (
                        Job::Write {
                            cookie: c,
                            offset: q.offset,
                            data,
                            fua,
                        },
                        charge,
                    )
                }
                CMD_READ => {
                    let err = if !flags_ok || !in_range || q.length > self.limits.max_payload {
                        Some(EINVAL)
                    } else {
                        None
                    };
                    if let Some(e) = err {
                        conn.reply_error(
                            e,
                            c,
                            "read outside the export, too long or with unknown flags",
                        );
                        continue;
                    }
                    let charge = conn.acquire(q.length as usize);
                    (
                        Job::Read {
                            cookie: c,
                            offset: q.offset,
                            len: q.length as usize,
                        },
                        charge,
                    )
                }
                CMD_FLUSH => (Job::Flush { cookie: c }, conn.acquire(0)),
                CMD_TRIM | CMD_WRITE_ZEROES => {
                    let zero = q.kind == CMD_WRITE_ZEROES;
                    let err = if !flags_ok {
                        Some(EINVAL)
                    } else if !export.writable() {
                        Some(EPERM)
                    } else if !in_range {
                        Some(if zero { ENOSPC } else { EINVAL })
                    } else {
                        None
                    };
                    if let Some(e) = err {
                        conn.reply_simple(e, c, &[]);
                        continue;
                    }
                    let piece = if zero {
                        (q.length as usize).min(ZERO_PIECE)
                    } else {
                        0
                    };
                    let job = Job::Range {
                        cookie: c,
                        offset: q.offset,
                        len,
                        zero,
                        hole_ok: q.flags & CMD_FLAG_NO_HOLE == 0,
                        fua,
                    };
                    (job, conn.acquire(piece))
                }
                _ => {
                    // Unknown commands carry no payload we know of; refusing them
                    // keeps the stream in step.
                    conn.reply_simple(EINVAL, c, &[]);
                    continue;
                }
            };
            // Read in full: its latency counts from here.
            let received = Instant::now();
            // Serve it here, saving two thread hand-offs, when nothing else is
            // in flight and no next request waits (queue depth 1 latency), or
            // when it is small and requests have lately been served fast (a
            // volume in memory or in the page cache: there a hand-off costs
            // more than the request, and the reader keeps both CPUs' worth of
            // client busy alone). One slow request sends the next ones to the
            // workers again, so a disk's latency is never serialised here.
            let idle = conn.queued.load(Ordering::SeqCst) == 0 && r.buffer().is_empty();
            if idle || (job.is_small() && conn.fast.load(Ordering::Relaxed)) {
                // Replies made here wait in the cork until the reader is about
                // to wait for input (or the cork is full), so that a burst of
                // requests gets one write and the client one wake-up.
                CORKED.with(|c| c.set(true));
                self.run_timed(index, conn, job, received);
                CORKED.with(|c| c.set(false));
                conn.release(charge);
                if conn.corked() >= CORK_MAX {
                    conn.uncork();
                }
                continue;
            }
            if conn.queued.fetch_add(1, Ordering::SeqCst) >= workers
                && workers < self.limits.workers
            {
                add_worker();
                workers += 1;
            }
            if tx.send((job, charge, received)).is_err() {
                conn.queued.fetch_sub(1, Ordering::SeqCst);
                conn.release(charge);
                return Outcome::Gone;
            }
        }
    }

    /// [`Server::run`] on export `index`, noting in `conn.fast` whether it
    /// took less than [`FAST`], and counting it (read in full at `received`).
    fn run_timed<W: Write>(&self, index: usize, conn: &Conn<W>, job: Job, received: Instant) {
        let started = Instant::now();
        let command = job.command();
        let ok = self.run(&self.exports[index], conn, job);
        conn.fast.store(started.elapsed() < FAST, Ordering::Relaxed);
        self.counters.served(index, command, received, ok);
    }

    /// Serve `job`; whether it was answered without an error.
    fn run<W: Write>(&self, e: &Export, conn: &Conn<W>, job: Job) -> bool {
        let v = &e.volume;
        match job {
            Job::Read {
                cookie,
                offset,
                len,
            } => {
                let (offset, len) = if len >= SPLICE_MIN {
                    match conn.reply_read_stored(v.as_ref(), cookie, offset, len) {
                        Spliced::All => return true,
                        Spliced::Nothing => (offset, len),
                        // The rest goes as the reply's last chunk, copied.
                        Spliced::Upto(at) => (at, len - (at - offset) as usize),
                    }
                } else {
                    (offset, len)
                };
                // Room for the reply header in front, so header and data leave
                // in one write.
                let hdr = conn.read_header_len();
                let mut buf = conn.buffer(hdr + len);
                match v.read_at(&mut buf[hdr..], offset) {
                    Ok(()) => {
                        conn.reply_read(cookie, offset, buf);
                        true
                    }
                    Err(err) => {
                        (self.log)(&format!("export {:?}: {err}", e.name));
                        conn.reply_error(errno(&err, false), cookie, &err.to_string());
                        false
                    }
                }
            }
            Job::Write {
                cookie,
                offset,
                data,
                fua,
            } => {
                // FUA asks for this write's durability only; the volume decides
                // what that costs (by default a flush of everything).
                let r = if fua {
                    v.write_at_fua(&data, offset)
                } else {
                    v.write_at(&data, offset)
                };
                conn.recycle(data);
                self.finish(e, conn, cookie, r)
            }
            Job::Flush { cookie } => self.finish(e, conn, cookie, v.flush()),
            Job::Range {
                cookie,
                offset,
                len,
                zero,
                hole_ok,
                fua,
            } => {
                let r = if zero {
                    // A hole reads as zeros and costs no writes, where the volume
                    // promises that and the client allows it.
                    let punched = hole_ok && v.discard_zeroes() && v.discard(offset, len).is_ok();
                    if punched {
                        Ok(())
                    } else {
                        v.write_zeroes(offset, len)
                    }
                } else {
                    match v.discard(offset, len) {
                        // Trim is advisory: a volume that cannot forget keeps the data.
                        Err(err) if err.kind == ErrorKind::Unsupported => Ok(()),
                        r => r,
                    }
                };
                let r = r.and_then(|()| if fua { v.flush() } else { Ok(()) });
                self.finish(e, conn, cookie, r)
            }
        }
    }

    fn finish<W: Write>(
        &self,
        e: &Export,
        conn: &Conn<W>,
        cookie: u64,
        r: raidlab_core::Result<()>,
    ) -> bool {
        match r {
            Ok(()) => {
                conn.reply_simple(0, cookie, &[]);
                true
            }
            Err(err) => {
                (self.log)(&format!("export {:?}: {err}", e.name));
                conn.reply_simple(errno(&err, true), cookie, &[]);
                false
            }
        }
    }
}

/// Let the socket hold a few large replies unread, as far as the system allows
/// (net.core.wmem_max; the kernel caps the request silently). With the default
/// (about 200 KiB) a worker sending a 1 MiB reply waits for the client to
/// drain the socket five times, each a sleep and a wake-up on both sides; with
/// 4 MiB, 1M QD8 reads of a file in /dev/shm went from 1.6-1.9 to 3.0-3.7
/// GB/s (same run, alternating). Best effort: a refusal leaves the default.
fn enlarge_send_buffer(fd: RawFd) {
    let bytes: libc::c_int = SEND_BUFFER;
    // SAFETY: setsockopt reads one c_int from a local that outlives the call;
    // the descriptor is the connection's socket, open while it is served.
    let _ = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

/// Wait up to [`SPIN`] for the client's next request without sleeping: a
/// client at queue depth 1 sends it a few microseconds after its reply, and a
/// thread that slept meanwhile takes far longer than that to wake (on a VM, an
/// interrupt to a halted virtual CPU). Returns at once when data or an error
/// is there; the blocking read that follows does the rest.
fn spin_for_request(fd: RawFd) {
    let start = Instant::now();
    let mut b = [0u8; 1];
    loop {
        // SAFETY: a one-byte peek into a local buffer; the descriptor belongs to
        // the connection, open for as long as it is served.
        let n = unsafe {
            libc::recv(
                fd,
                b.as_mut_ptr().cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        if n >= 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN) {
            return;
        }
        if start.elapsed() >= SPIN {
            return;
        }
        std::hint::spin_loop();
    }
}

/// The protocol's error value for a volume error.
fn errno(e: &raidlab_core::Error, write: bool) -> u32 {
    match e.kind {
        ErrorKind::ReadOnly => EPERM,
        ErrorKind::OutOfRange if write => ENOSPC,
        ErrorKind::OutOfRange | ErrorKind::Invalid => EINVAL,
        ErrorKind::Unsupported => ENOTSUP,
        ErrorKind::Interrupted => ESHUTDOWN,
        _ => EIO,
    }
}

enum Job {
    Read {
        cookie: u64,
        offset: u64,
        len: usize,
    },
    Write {
        cookie: u64,
        offset: u64,
        data: Buf,
        fua: bool,
    },
    Flush {
        cookie: u64,
    },
    /// Trim or write zeroes.
    Range {
        cookie: u64,
        offset: u64,
        len: u64,
        zero: bool,
        /// Write zeroes may punch a hole (the client did not set NO_HOLE).
        hole_ok: bool,
        fua: bool,
    },
}

impl Job {
    /// A read or write small enough to serve on the reader thread when the
    /// volume answers fast (never a flush: on a disk that takes milliseconds).
    fn is_small(&self) -> bool {
        match self {
            Job::Read { len, .. } => *len <= INLINE_MAX,
            Job::Write { data, .. } => data.len() <= INLINE_MAX,
            Job::Flush { .. } | Job::Range { .. } => false,
        }
    }

    /// Its index in [`COMMANDS`].
    fn command(&self) -> usize {
        match self {
            Job::Read { .. } => 0,
            Job::Write { .. } => 1,
            Job::Flush { .. } => 2,
            Job::Range { zero: false, .. } => 3,
            Job::Range { zero: true, .. } => 4,
        }
    }
}

fn send<W: Write>(w: &mut W, b: &[u8]) -> Result<(), Outcome> {
    w.write_all(b)
        .and_then(|()| w.flush())
        .map_err(|_| Outcome::Gone)
}

fn recv<R: Read>(r: &mut R, b: &mut [u8]) -> Result<(), Outcome> {
    r.read_exact(b).map_err(|_| Outcome::Gone)
}

fn skip<R: Read>(r: &mut R, n: u64) -> Result<(), Outcome> {
    let copied = io::copy(&mut r.take(n), &mut io::sink()).map_err(|_| Outcome::Gone)?;
    if copied < n {
        return Err(Outcome::Gone);
    }
    Ok(())
}
