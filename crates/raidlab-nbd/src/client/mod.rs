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
mod handshake;

pub use handshake::{parse_uri, Address, ExportInfo, DEFAULT_PORT};

use crate::proto::*;
use handshake::{open, Sock};
use raidlab_core::{check_range, Error, ErrorKind, Op, Result, Volume};
use std::collections::HashMap;
use std::io::{BufReader, BufWriter, Read, Write};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

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
            flags: 0,
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

    fn max_request(&self) -> usize {
        self.info.max_block.max(4096) as usize
    }
}

fn op_of(kind: u16) -> Op {
    match kind {
        CMD_READ => Op::Read,
        CMD_WRITE => Op::Write,
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
        mut read: Option<&mut [u8]>,
    ) -> Result<()> {
        let pieces = Self::pieces(offset, len, max);
        let mut sent = Vec::with_capacity(pieces.len());
        for &(at, n) in &pieces {
            let from = (at - offset) as usize;
            let data = write.map(|d| &d[from..from + n as usize]);
            sent.push((self.send(kind, at, n, data)?, at, n));
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
        check_range(&self.uri, Op::Write, self.size(), offset, buf.len() as u64)?;
        if !self.is_writable() {
            return Err(Error::new(
                ErrorKind::ReadOnly,
                Op::Write,
                "the server exports this read-only",
            )
            .on_device(&self.uri)
            .at(offset, buf.len() as u64));
        }
        self.run(
            CMD_WRITE,
            offset,
            buf.len(),
            self.max_request(),
            Some(buf),
            None,
        )
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
