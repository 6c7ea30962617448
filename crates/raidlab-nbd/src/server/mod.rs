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
//! nothing in flight, and small requests once 16 in a row were answered within
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
mod transmit;

pub use stats::{CommandStats, ExportStats, LatencyHistogram, COMMANDS};

use crate::proto::*;
use crate::splice::Pipe;
use crate::tls::Tls;
use conn::{Budget, Buf, Conn, Spliced};
use raidlab_core::{ErrorKind, Volume};
use std::io::{self, BufReader, Read, Write};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
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
/// Requests served fast in a row before the reader serves small ones itself.
const FAST_RUN: u32 = 16;
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
