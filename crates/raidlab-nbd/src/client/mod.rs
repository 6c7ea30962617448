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
//! connection: each caller sends its request under the writer's lock, and the
//! replies are read by the callers themselves, one at a time, each reply
//! reaching the caller whose cookie it carries (module `replies`: at queue
//! depth 1 a caller reads its own reply, with no thread hand-off). More
//! connections are opened only when asked
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
mod replies;

pub use handshake::{parse_uri, Address, ExportInfo, DEFAULT_PORT};

use crate::proto::*;
use handshake::{open, Sock};
use raidlab_core::{check_range, Error, ErrorKind, Op, Result, Volume};
use replies::{Answer, Replies};
use std::io::{BufWriter, Write};
use std::sync::Mutex;

/// An export of an NBD server, usable as a volume: one connection, any number
/// of requests in flight on it.
pub struct NbdVolume {
    uri: String,
    address: Address,
    export: String,
    info: ExportInfo,
    writer: Mutex<BufWriter<Sock>>,
    replies: Replies,
    /// A handle to shut the socket down with on drop.
    closer: Sock,
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
        Ok(NbdVolume {
            uri,
            address,
            export,
            info,
            writer: Mutex::new(BufWriter::with_capacity(64 << 10, writer)),
            replies: Replies::new(stream),
            closer,
        })
    }

    pub fn info(&self) -> ExportInfo {
        self.info
    }

    /// The server says a flush on any connection covers writes on every one.
    pub fn allows_multi_conn(&self) -> bool {
        self.info.flags & TF_CAN_MULTI_CONN != 0
    }

    /// Send one request (with a write's data) and give its cookie; the
    /// request is registered before it is sent, so the reply cannot outrun it.
    fn send(&self, kind: u16, offset: u64, len: u32, write: Option<&[u8]>) -> Result<u64> {
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
    ) -> Result<u64> {
        let op = op_of(kind);
        let read_len = if kind == CMD_READ { len as usize } else { 0 };
        let cookie = self
            .replies
            .register(read_len)
            .map_err(|why| self.broken(op, why, offset, len))?;
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
            self.replies.break_with(why.clone());
            // Collect the answer (now the breakage) so nothing waits for it.
            let _ = self.replies.wait(cookie, None);
            return Err(self.broken(op, why, offset, len));
        }
        Ok(cookie)
    }

    /// Wait for the answer to a request [`NbdVolume::send`] sent; a read's
    /// data lands in `dest`.
    fn wait(
        &self,
        cookie: u64,
        kind: u16,
        offset: u64,
        len: u32,
        dest: Option<&mut [u8]>,
    ) -> Result<()> {
        let op = op_of(kind);
        let mut dest = dest;
        match self.replies.wait(cookie, dest.as_deref_mut()) {
            Answer::Done(data) => {
                if let (Some(buf), Some(data)) = (dest, data) {
                    if buf.len() != data.len() {
                        return Err(self.broken(
                            op,
                            format!(
                                "a reply carried {} bytes for a read of {}",
                                data.len(),
                                buf.len()
                            ),
                            offset,
                            len,
                        ));
                    }
                    buf.copy_from_slice(&data);
                }
                Ok(())
            }
            Answer::ServerError(error) => Err(Error::new(
                ErrorKind::Io,
                op,
                format!("the server answered error {error} ({})", errno_name(error)),
            )
            .on_device(&self.uri)
            .at(offset, u64::from(len))),
            Answer::Broken(why) => Err(self.broken(op, why, offset, len)),
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
}

fn op_of(kind: u16) -> Op {
    match kind {
        CMD_READ => Op::Read,
        CMD_WRITE | CMD_WRITE_ZEROES => Op::Write,
        CMD_FLUSH => Op::Flush,
        _ => Op::Discard,
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
    /// collect the answers in order, so the pieces overlap on the wire. Every
    /// piece sent is waited for, even after one failed, so no answer is left
    /// for nobody; the first error is returned.
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
        let mut first_error = None;
        for &(at, n) in &pieces {
            let from = (at - offset) as usize;
            let data = write.map(|d| &d[from..from + n as usize]);
            match self.send_flagged(kind, flags, at, n, data) {
                Ok(cookie) => sent.push((cookie, at, n)),
                Err(e) => {
                    first_error = Some(e);
                    break;
                }
            }
        }
        for (cookie, at, n) in sent {
            let from = (at - offset) as usize;
            let dest = read.as_deref_mut().map(|b| &mut b[from..from + n as usize]);
            if let Err(e) = self.wait(cookie, kind, at, n, dest) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
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
        let cookie = self.send(CMD_FLUSH, 0, 0, None)?;
        self.wait(cookie, CMD_FLUSH, 0, 0, None)
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
            let cookie = self.send(CMD_TRIM, at, n, None)?;
            self.wait(cookie, CMD_TRIM, at, n, None)?;
            at += u64::from(n);
        }
        Ok(())
    }
}

impl Drop for NbdVolume {
    fn drop(&mut self) {
        // A polite goodbye (it has no reply), then close; errors do not matter
        // here. No request is in flight: dropping takes the only reference.
        let cookie = self.replies.unused_cookie();
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
    }
}
