//! An NBD client as a [`Volume`]: what lets the benchmarks (and anything else that
//! takes a volume) use an export of any NBD server, raidlab's own, nbdkit,
//! qemu-nbd, as a target.
//!
//! Addresses are NBD URIs as libnbd spells them: `nbd://HOST[:PORT]/NAME` (TCP,
//! port 10809 by default) and `nbd+unix:///NAME?socket=PATH`. The handshake is
//! fixed newstyle with `OPT_GO` (asking for block size constraints); replies are
//! simple replies (structured replies are not requested). Requests larger than the
//! server's maximum block size are split.
//!
//! Concurrency: one [`NbdVolume`] is one connection, and callers on any number
//! of threads share it with all their requests in flight at once, as libnbd
//! (and so fio's nbd engine) keeps a job's `iodepth` requests in flight on one
//! connection: each caller sends its request under the writer's lock, and one
//! reader thread per connection hands each reply to the caller whose cookie it
//! carries. More connections are opened only when asked
//! ([`NbdVolume::another`], one per benchmark thread, as fio opens one per job),
//! which is safe for writes and flushes only where the server advertises
//! `CAN_MULTI_CONN`. So a benchmark's "queue depth 32, 1 thread" puts the same
//! load on the server as fio's `iodepth=32 numjobs=1`: one connection, 32
//! requests in flight. (Until issue 21 the client opened a connection per
//! request in flight, which on nbdkit, whose threads serve one connection each,
//! doubled the concurrency fio's same setting gets.)
//!
//! This client must never send a request outside the export's size, never trust a
//! length from the wire it did not ask for, and never hand back data from a reply
//! whose cookie or magic does not match the request.

use crate::proto::*;
use raidlab_core::{check_range, Error, ErrorKind, Op, Result, Volume};
use std::collections::HashMap;
use std::io::{BufReader, BufWriter, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

/// The default NBD TCP port.
pub const DEFAULT_PORT: u16 = 10809;
/// The largest request the protocol lets a client assume without block size
/// information (32 MiB).
const DEFAULT_MAX_BLOCK: u32 = 32 << 20;
/// Option replies longer than this are refused (nothing we ask for is near it).
const MAX_OPTION_REPLY: u32 = 64 << 10;

/// Where the server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    Unix(PathBuf),
    /// `host:port`.
    Tcp(String),
}

/// Split an NBD URI into the server's address and the export name.
pub fn parse_uri(uri: &str) -> Result<(Address, String)> {
    let bad = |why: &str| {
        Error::new(
            ErrorKind::Invalid,
            Op::Open,
            format!(
                "{uri:?} is not an NBD URI ({why}): use nbd://HOST[:PORT]/EXPORT or nbd+unix:///EXPORT?socket=PATH"
            ),
        )
    };
    if let Some(rest) = uri.strip_prefix("nbd+unix://") {
        let rest = rest
            .strip_prefix('/')
            .ok_or_else(|| bad("no export path"))?;
        let (name, query) = rest.split_once('?').ok_or_else(|| bad("no ?socket=PATH"))?;
        let socket = query
            .split('&')
            .find_map(|kv| kv.strip_prefix("socket="))
            .filter(|s| !s.is_empty())
            .ok_or_else(|| bad("no socket=PATH in the query"))?;
        return Ok((Address::Unix(PathBuf::from(socket)), name.to_string()));
    }
    if let Some(rest) = uri.strip_prefix("nbd://") {
        let (hostport, name) = rest.split_once('/').unwrap_or((rest, ""));
        if hostport.is_empty() {
            return Err(bad("no host"));
        }
        let hostport = if hostport.starts_with('[') {
            // [v6]:port or [v6]
            match hostport.rsplit_once("]:") {
                Some(_) => hostport.to_string(),
                None => format!("{hostport}:{DEFAULT_PORT}"),
            }
        } else if hostport.contains(':') {
            hostport.to_string()
        } else {
            format!("{hostport}:{DEFAULT_PORT}")
        };
        return Ok((Address::Tcp(hostport), name.to_string()));
    }
    Err(bad("unknown scheme"))
}

/// A connected socket: its two halves go to the caller that writes requests and
/// to the thread that reads replies.
enum Sock {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Sock {
    fn try_clone(&self) -> std::io::Result<Sock> {
        Ok(match self {
            Sock::Unix(s) => Sock::Unix(s.try_clone()?),
            Sock::Tcp(s) => Sock::Tcp(s.try_clone()?),
        })
    }

    /// Wake the reply reader with end-of-file (on drop).
    fn shutdown(&self) {
        let _ = match self {
            Sock::Unix(s) => s.shutdown(Shutdown::Both),
            Sock::Tcp(s) => s.shutdown(Shutdown::Both),
        };
    }
}

impl Read for Sock {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Sock::Unix(s) => s.read(buf),
            Sock::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Sock {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sock::Unix(s) => s.write(buf),
            Sock::Tcp(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sock::Unix(s) => s.flush(),
            Sock::Tcp(s) => s.flush(),
        }
    }
}

/// What the reply reader hands a waiting caller: the read's data, or the
/// server's error number, or why the connection broke.
enum Answer {
    Done(Vec<u8>),
    ServerError(u32),
    Broken(String),
}

/// A request sent and not yet answered.
struct Waiter {
    /// Bytes of data that follow a successful reply (reads only).
    read_len: usize,
    tx: mpsc::SyncSender<Answer>,
}

/// The requests in flight on a connection, by cookie.
struct InFlight {
    waiting: HashMap<u64, Waiter>,
    next_cookie: u64,
    /// Set once the connection failed: every later request fails with it.
    broken: Option<String>,
}

/// The state the callers and the reply reader share.
struct Shared {
    in_flight: Mutex<InFlight>,
}

impl Shared {
    /// The connection is unusable: fail everyone waiting and everyone to come.
    fn break_with(&self, why: String) {
        let mut f = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        if f.broken.is_none() {
            f.broken = Some(why.clone());
        }
        for (_, w) in f.waiting.drain() {
            let _ = w.tx.send(Answer::Broken(why.clone()));
        }
    }
}

/// What the server said about the export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportInfo {
    pub size: u64,
    pub flags: u16,
    pub min_block: u32,
    pub preferred_block: u32,
    pub max_block: u32,
}

/// An export of an NBD server, usable as a volume: one connection, any number
/// of requests in flight on it.
pub struct NbdVolume {
    uri: String,
    address: Address,
    export: String,
    info: ExportInfo,
    writer: Mutex<BufWriter<Sock>>,
    shared: Arc<Shared>,
    /// A handle to shut the socket down with, so the reader ends on drop.
    closer: Sock,
    reader: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for NbdVolume {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NbdVolume")
            .field("uri", &self.uri)
            .field("info", &self.info)
            .finish()
    }
}

impl NbdVolume {
    /// Connect to the export an NBD URI names (one connection).
    pub fn connect(uri: &str) -> Result<NbdVolume> {
        let (address, export) = parse_uri(uri)?;
        Self::start(uri.to_string(), address, export)
    }

    /// Another connection to the same export (for a benchmark thread of its own,
    /// as fio's nbd engine gives each job its own). Only safe to mix writes and
    /// flushes across connections when [`NbdVolume::allows_multi_conn`].
    pub fn another(&self) -> Result<NbdVolume> {
        Self::start(self.uri.clone(), self.address.clone(), self.export.clone())
    }

    fn start(uri: String, address: Address, export: String) -> Result<NbdVolume> {
        let (stream, info) = open(&uri, &address, &export)?;
        let fail = |e: std::io::Error| {
            Error::new(
                ErrorKind::Io,
                Op::Open,
                format!("cannot duplicate the connection's socket: {e}"),
            )
            .on_device(&uri)
        };
        let writer = stream.get_ref().try_clone().map_err(fail)?;
        let closer = stream.get_ref().try_clone().map_err(fail)?;
        let shared = Arc::new(Shared {
            in_flight: Mutex::new(InFlight {
                waiting: HashMap::new(),
                next_cookie: 1,
                broken: None,
            }),
        });
        let s = shared.clone();
        let reader = std::thread::Builder::new()
            .name("nbd-replies".into())
            .spawn(move || read_replies(stream, &s))
            .map_err(|e| {
                Error::new(
                    ErrorKind::Io,
                    Op::Open,
                    format!("cannot start the reply reader thread: {e}"),
                )
                .on_device(&uri)
            })?;
        Ok(NbdVolume {
            uri,
            address,
            export,
            info,
            writer: Mutex::new(BufWriter::with_capacity(64 << 10, writer)),
            shared,
            closer,
            reader: Some(reader),
        })
    }

    pub fn info(&self) -> ExportInfo {
        self.info
    }

    /// The server says a flush on any connection covers writes on every one.
    pub fn allows_multi_conn(&self) -> bool {
        self.info.flags & TF_CAN_MULTI_CONN != 0
    }

    /// Send one request (with a write's data) and return where its answer will
    /// arrive; the request is registered before it is sent, so the reply
    /// cannot outrun it.
    fn send(
        &self,
        kind: u16,
        offset: u64,
        len: u32,
        write: Option<&[u8]>,
    ) -> Result<mpsc::Receiver<Answer>> {
        self.send_flagged(kind, 0, offset, len, write)
    }

    /// [`NbdVolume::send`] with command flags (FUA).
    fn send_flagged(
        &self,
        kind: u16,
        flags: u16,
        offset: u64,
        len: u32,
        write: Option<&[u8]>,
    ) -> Result<mpsc::Receiver<Answer>> {
        let op = op_of(kind);
        let (tx, rx) = mpsc::sync_channel(1);
        let cookie = {
            let mut f = self
                .shared
                .in_flight
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if let Some(why) = &f.broken {
                return Err(self.broken(op, why.clone(), offset, len));
            }
            let cookie = f.next_cookie;
            f.next_cookie = f.next_cookie.wrapping_add(1);
            let read_len = if kind == CMD_READ { len as usize } else { 0 };
            f.waiting.insert(cookie, Waiter { read_len, tx });
            cookie
        };
        let req = Request {
            magic: REQUEST_MAGIC,
            flags,
            kind,
            cookie,
            offset,
            length: len,
        };
        let sent = {
            let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
            w.write_all(&encode_request(&req))
                .and_then(|()| write.map_or(Ok(()), |d| w.write_all(d)))
                .and_then(|()| w.flush())
        };
        if let Err(e) = sent {
            let why = format!("connection to the server failed: {e}");
            self.shared.break_with(why.clone());
            return Err(self.broken(op, why, offset, len));
        }
        Ok(rx)
    }

    /// Wait for the answer to a request [`NbdVolume::send`] sent.
    fn wait(
        &self,
        rx: mpsc::Receiver<Answer>,
        kind: u16,
        offset: u64,
        len: u32,
    ) -> Result<Vec<u8>> {
        let op = op_of(kind);
        match rx.recv() {
            Ok(Answer::Done(data)) => Ok(data),
            Ok(Answer::ServerError(error)) => Err(Error::new(
                ErrorKind::Io,
                op,
                format!("the server answered error {error} ({})", errno_name(error)),
            )
            .on_device(&self.uri)
            .at(offset, u64::from(len))),
            Ok(Answer::Broken(why)) => Err(self.broken(op, why, offset, len)),
            Err(_) => Err(self.broken(
                op,
                "the connection's reply reader stopped".into(),
                offset,
                len,
            )),
        }
    }

    fn broken(&self, op: Op, why: String, offset: u64, len: u32) -> Error {
        Error::new(ErrorKind::Io, op, why)
            .on_device(&self.uri)
            .at(offset, u64::from(len))
    }

    /// A request split into pieces of at most the server's maximum.
    fn pieces(offset: u64, len: usize, max: usize) -> Vec<(u64, u32)> {
        let mut out = Vec::with_capacity(len.div_ceil(max.max(1)));
        let mut at = 0usize;
        while at < len {
            let n = (len - at).min(max);
            out.push((offset + at as u64, n as u32));
            at += n;
        }
        out
    }

    /// A write's range inside the export, and the export writable.
    fn check_write(&self, offset: u64, len: u64) -> Result<()> {
        check_range(&self.uri, Op::Write, self.size(), offset, len)?;
        if !self.is_writable() {
            return Err(Error::new(
                ErrorKind::ReadOnly,
                Op::Write,
                "the server exports this read-only",
            )
            .on_device(&self.uri)
            .at(offset, len));
        }
        Ok(())
    }

    fn max_request(&self) -> usize {
        self.info.max_block.max(4096) as usize
    }
}

fn op_of(kind: u16) -> Op {
    match kind {
        CMD_READ => Op::Read,
        CMD_WRITE | CMD_WRITE_ZEROES => Op::Write,
        CMD_FLUSH => Op::Flush,
        _ => Op::Discard,
    }
}

/// The connection's reply reader: match each reply to its request by cookie and
/// hand it over; on anything out of step, break the connection (never guess
/// where the next reply starts).
fn read_replies(mut stream: BufReader<Sock>, shared: &Shared) {
    loop {
        let mut reply = [0u8; 16];
        if let Err(e) = stream.read_exact(&mut reply) {
            shared.break_with(format!("connection to the server failed: {e}"));
            return;
        }
        let magic = u32::from_be_bytes([reply[0], reply[1], reply[2], reply[3]]);
        let error = u32::from_be_bytes([reply[4], reply[5], reply[6], reply[7]]);
        let mut c = [0u8; 8];
        c.copy_from_slice(&reply[8..16]);
        let cookie = u64::from_be_bytes(c);
        let waiter = {
            let mut f = shared.in_flight.lock().unwrap_or_else(|p| p.into_inner());
            f.waiting.remove(&cookie)
        };
        let Some(waiter) = waiter.filter(|_| magic == SIMPLE_REPLY_MAGIC) else {
            shared.break_with(format!(
                "the server's reply matches no request in flight (magic {magic:#x}, cookie {cookie}; expected magic {SIMPLE_REPLY_MAGIC:#x})"
            ));
            return;
        };
        if error != 0 {
            let _ = waiter.tx.send(Answer::ServerError(error));
            continue;
        }
        let mut data = vec![0u8; waiter.read_len];
        if let Err(e) = stream.read_exact(&mut data) {
            let why = format!("connection to the server failed: {e}");
            let _ = waiter.tx.send(Answer::Broken(why.clone()));
            shared.break_with(why);
            return;
        }
        let _ = waiter.tx.send(Answer::Done(data));
    }
}

fn errno_name(e: u32) -> &'static str {
    match e {
        EPERM => "EPERM: the export is read-only",
        EIO => "EIO",
        ENOMEM => "ENOMEM",
        EINVAL => "EINVAL",
        ENOSPC => "ENOSPC",
        EOVERFLOW => "EOVERFLOW",
        ENOTSUP => "ENOTSUP",
        ESHUTDOWN => "ESHUTDOWN: the server is shutting down",
        _ => "unknown error",
    }
}

impl NbdVolume {
    /// Send every piece of a request (at most the server's maximum each), then
    /// collect the answers in order, so the pieces overlap on the wire.
    fn run(
        &self,
        kind: u16,
        offset: u64,
        len: usize,
        max: usize,
        write: Option<&[u8]>,
        read: Option<&mut [u8]>,
    ) -> Result<()> {
        self.run_flagged(kind, 0, offset, len, max, write, read)
    }

    /// [`NbdVolume::run`] with command flags on every piece (FUA: each piece
    /// is durable when answered, so the whole is when the last answer comes).
    #[allow(clippy::too_many_arguments)]
    fn run_flagged(
        &self,
        kind: u16,
        flags: u16,
        offset: u64,
        len: usize,
        max: usize,
        write: Option<&[u8]>,
        mut read: Option<&mut [u8]>,
    ) -> Result<()> {
        let pieces = Self::pieces(offset, len, max);
        let mut sent = Vec::with_capacity(pieces.len());
        for &(at, n) in &pieces {
            let from = (at - offset) as usize;
            let data = write.map(|d| &d[from..from + n as usize]);
            sent.push((self.send_flagged(kind, flags, at, n, data)?, at, n));
        }
        for (rx, at, n) in sent {
            let data = self.wait(rx, kind, at, n)?;
            if let Some(buf) = read.as_deref_mut() {
                let from = (at - offset) as usize;
                buf[from..from + n as usize].copy_from_slice(&data);
            }
        }
        Ok(())
    }
}

impl Volume for NbdVolume {
    fn name(&self) -> String {
        self.uri.clone()
    }

    fn size(&self) -> u64 {
        self.info.size
    }

    fn block_size(&self) -> u32 {
        self.info.min_block.max(512)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        check_range(&self.uri, Op::Read, self.size(), offset, buf.len() as u64)?;
        let len = buf.len();
        self.run(CMD_READ, offset, len, self.max_request(), None, Some(buf))
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.check_write(offset, buf.len() as u64)?;
        self.run(
            CMD_WRITE,
            offset,
            buf.len(),
            self.max_request(),
            Some(buf),
            None,
        )
    }

    /// The server's FUA flag on every piece when it offers it (the server
    /// makes just this write durable); else the write and then a flush.
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> Result<()> {
        if self.info.flags & TF_SEND_FUA == 0 {
            self.write_at(buf, offset)?;
            return self.flush();
        }
        self.check_write(offset, buf.len() as u64)?;
        self.run_flagged(
            CMD_WRITE,
            CMD_FLAG_FUA,
            offset,
            buf.len(),
            self.max_request(),
            Some(buf),
            None,
        )
    }

    /// NBD's WRITE_ZEROES when the server offers it (no zeros cross the
    /// wire); else zeros written in pieces.
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        self.check_write(offset, len)?;
        if self.info.flags & TF_SEND_WRITE_ZEROES == 0 {
            let zeroes = vec![0u8; len.min(raidlab_core::ZERO_PIECE) as usize];
            let mut done = 0u64;
            while done < len {
                let n = (len - done).min(zeroes.len() as u64) as usize;
                self.write_at(&zeroes[..n], offset + done)?;
                done += n as u64;
            }
            return Ok(());
        }
        let len = usize::try_from(len).map_err(|_| {
            Error::new(
                ErrorKind::OutOfRange,
                Op::Write,
                "range too long for this machine",
            )
            .on_device(&self.uri)
            .at(offset, len)
        })?;
        // A request's length is 32 bits; keep pieces 4 KiB aligned.
        self.run(CMD_WRITE_ZEROES, offset, len, !4095u32 as usize, None, None)
    }

    fn flush(&self) -> Result<()> {
        if self.info.flags & TF_SEND_FLUSH == 0 {
            // The server has no volatile cache to flush (it says so by not
            // offering the command).
            return Ok(());
        }
        let rx = self.send(CMD_FLUSH, 0, 0, None)?;
        self.wait(rx, CMD_FLUSH, 0, 0).map(drop)
    }

    fn is_writable(&self) -> bool {
        self.info.flags & TF_READ_ONLY == 0
    }

    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        check_range(&self.uri, Op::Discard, self.size(), offset, len)?;
        if self.info.flags & TF_SEND_TRIM == 0 {
            return Err(Error::new(
                ErrorKind::Unsupported,
                Op::Discard,
                "the server does not support TRIM on this export",
            )
            .on_device(&self.uri)
            .at(offset, len));
        }
        let max = u64::from(!4095u32);
        let mut at = offset;
        while at < offset + len {
            let n = (offset + len - at).min(max) as u32;
            let rx = self.send(CMD_TRIM, at, n, None)?;
            self.wait(rx, CMD_TRIM, at, n)?;
            at += u64::from(n);
        }
        Ok(())
    }
}

impl Drop for NbdVolume {
    fn drop(&mut self) {
        // A polite goodbye, then end the reply reader; errors do not matter here.
        let cookie = {
            let f = self
                .shared
                .in_flight
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            f.next_cookie
        };
        let req = Request {
            magic: REQUEST_MAGIC,
            flags: 0,
            kind: CMD_DISC,
            cookie,
            offset: 0,
            length: 0,
        };
        {
            let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
            let _ = w.write_all(&encode_request(&req));
            let _ = w.flush();
        }
        self.closer.shutdown();
        if let Some(h) = self.reader.take() {
            let _ = h.join();
        }
    }
}

/// Connect and negotiate the export with `OPT_GO`.
fn open(uri: &str, address: &Address, export: &str) -> Result<(BufReader<Sock>, ExportInfo)> {
    let fail = |msg: String| Error::new(ErrorKind::Io, Op::Open, msg).on_device(uri);
    let stream = match address {
        Address::Unix(p) => Sock::Unix(UnixStream::connect(p).map_err(|e| {
            fail(format!(
                "cannot connect to the NBD socket {}: {e} (is the server running?)",
                p.display()
            ))
        })?),
        Address::Tcp(hp) => {
            let s = TcpStream::connect(hp.as_str()).map_err(|e| {
                fail(format!(
                    "cannot connect to the NBD server at {hp}: {e} (is it running?)"
                ))
            })?;
            s.set_nodelay(true).ok();
            Sock::Tcp(s)
        }
    };
    let mut s = BufReader::with_capacity(256 << 10, stream);
    let io = |e: std::io::Error| fail(format!("the NBD handshake failed: {e}"));
    let mut greet = [0u8; 18];
    s.read_exact(&mut greet).map_err(io)?;
    let mut m = [0u8; 8];
    m.copy_from_slice(&greet[0..8]);
    let init = u64::from_be_bytes(m);
    m.copy_from_slice(&greet[8..16]);
    let opts = u64::from_be_bytes(m);
    if init != INIT_MAGIC || opts != OPTS_MAGIC {
        return Err(fail(
            "the peer is not a newstyle NBD server (wrong greeting magic)".into(),
        ));
    }
    let hflags = u16::from_be_bytes([greet[16], greet[17]]);
    if hflags & FLAG_FIXED_NEWSTYLE == 0 {
        return Err(fail(
            "the server does not offer fixed newstyle negotiation, which this client needs".into(),
        ));
    }
    let no_zeroes = hflags & FLAG_NO_ZEROES != 0;
    let cflags = FLAG_C_FIXED_NEWSTYLE | if no_zeroes { FLAG_C_NO_ZEROES } else { 0 };
    let name = export.as_bytes();
    if name.len() > MAX_STRING {
        return Err(fail(
            "the export name is longer than NBD allows (4096 bytes)".into(),
        ));
    }
    let mut data = Vec::with_capacity(8 + name.len());
    data.extend_from_slice(&(name.len() as u32).to_be_bytes());
    data.extend_from_slice(name);
    data.extend_from_slice(&1u16.to_be_bytes());
    data.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
    let mut msg = Vec::with_capacity(4 + 16 + data.len());
    msg.extend_from_slice(&cflags.to_be_bytes());
    msg.extend_from_slice(&OPTS_MAGIC.to_be_bytes());
    msg.extend_from_slice(&OPT_GO.to_be_bytes());
    msg.extend_from_slice(&(data.len() as u32).to_be_bytes());
    msg.extend_from_slice(&data);
    s.get_mut().write_all(&msg).map_err(io)?;
    s.get_mut().flush().map_err(io)?;
    let mut info = ExportInfo {
        size: 0,
        flags: 0,
        min_block: 1,
        preferred_block: 4096,
        max_block: DEFAULT_MAX_BLOCK,
    };
    let mut have_export = false;
    loop {
        let mut h = [0u8; 20];
        s.read_exact(&mut h).map_err(io)?;
        m.copy_from_slice(&h[0..8]);
        let magic = u64::from_be_bytes(m);
        let option = u32::from_be_bytes([h[8], h[9], h[10], h[11]]);
        let kind = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
        let len = u32::from_be_bytes([h[16], h[17], h[18], h[19]]);
        if magic != REP_MAGIC || option != OPT_GO {
            return Err(fail(format!(
                "malformed option reply from the server (magic {magic:#x}, option {option})"
            )));
        }
        if len > MAX_OPTION_REPLY {
            return Err(fail(format!(
                "the server sent an option reply of {len} bytes"
            )));
        }
        let mut d = vec![0u8; len as usize];
        s.read_exact(&mut d).map_err(io)?;
        match kind {
            REP_ACK => break,
            REP_INFO if d.len() >= 2 => {
                let t = u16::from_be_bytes([d[0], d[1]]);
                match t {
                    INFO_EXPORT if d.len() >= 12 => {
                        m.copy_from_slice(&d[2..10]);
                        info.size = u64::from_be_bytes(m);
                        info.flags = u16::from_be_bytes([d[10], d[11]]);
                        have_export = true;
                    }
                    INFO_BLOCK_SIZE if d.len() >= 14 => {
                        let r = |i: usize| u32::from_be_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]]);
                        info.min_block = r(2);
                        info.preferred_block = r(6);
                        info.max_block = r(10);
                    }
                    _ => {}
                }
            }
            k if k & (1 << 31) != 0 => {
                let text = String::from_utf8_lossy(&d).into_owned();
                let what = match k {
                    REP_ERR_UNKNOWN => "no such export",
                    REP_ERR_POLICY => "refused by the server's policy",
                    REP_ERR_UNSUP => "not supported",
                    REP_ERR_INVALID => "invalid request",
                    REP_ERR_TOO_BIG => "request too big",
                    _ => "error",
                };
                let hint = if k == REP_ERR_POLICY || k == REP_ERR_UNSUP {
                    " (a server that requires TLS refuses plain clients; this client has no TLS)"
                } else {
                    ""
                };
                return Err(fail(format!(
                    "the server refused export {export:?}: {what}{}{hint}",
                    if text.is_empty() {
                        String::new()
                    } else {
                        format!(": {text}")
                    }
                )));
            }
            _ => {}
        }
    }
    if !have_export {
        return Err(fail(
            "the server accepted the export without saying its size".into(),
        ));
    }
    if info.max_block == 0 || info.max_block > (1 << 30) {
        info.max_block = DEFAULT_MAX_BLOCK;
    }
    Ok((s, info))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris() {
        assert_eq!(
            parse_uri("nbd://localhost/disk").unwrap(),
            (Address::Tcp("localhost:10809".into()), "disk".into())
        );
        assert_eq!(
            parse_uri("nbd://10.0.0.1:2000/").unwrap(),
            (Address::Tcp("10.0.0.1:2000".into()), "".into())
        );
        assert_eq!(
            parse_uri("nbd://[::1]/x").unwrap(),
            (Address::Tcp("[::1]:10809".into()), "x".into())
        );
        assert_eq!(
            parse_uri("nbd+unix:///r5?socket=/tmp/s.sock").unwrap(),
            (Address::Unix("/tmp/s.sock".into()), "r5".into())
        );
        for bad in [
            "http://x/y",
            "nbd://",
            "nbd+unix:///x",
            "nbd+unix://x?socket=/s",
            "nbd+unix:///x?socket=",
        ] {
            assert!(parse_uri(bad).is_err(), "{bad} accepted");
        }
    }
}
