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
//! Concurrency: each connection carries one request at a time; callers on several
//! threads get connections from a pool, opened on demand. A server that does not
//! advertise `CAN_MULTI_CONN` gets one connection only (the protocol says flushes
//! are then only safe on a single connection), so its callers take turns.
//!
//! This client must never send a request outside the export's size, never trust a
//! length from the wire it did not ask for, and never hand back data from a reply
//! whose cookie or magic does not match the request.

use crate::proto::*;
use raidlab_core::{check_range, Error, ErrorKind, Op, Result, Volume};
use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Condvar, Mutex};

/// The default NBD TCP port.
pub const DEFAULT_PORT: u16 = 10809;
/// Connections opened at most to a server that allows several.
const MAX_CONNECTIONS: usize = 64;
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

trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

struct Conn {
    stream: BufReader<Box<dyn Stream>>,
    cookie: u64,
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

/// An export of an NBD server, usable as a volume.
pub struct NbdVolume {
    uri: String,
    address: Address,
    export: String,
    info: ExportInfo,
    pool: Mutex<Pool>,
    freed: Condvar,
}

struct Pool {
    idle: Vec<Conn>,
    open: usize,
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
    /// Connect to the export an NBD URI names (one connection; more are opened
    /// when callers overlap).
    pub fn connect(uri: &str) -> Result<NbdVolume> {
        let (address, export) = parse_uri(uri)?;
        let (conn, info) = open(uri, &address, &export)?;
        Ok(NbdVolume {
            uri: uri.to_string(),
            address,
            export,
            info,
            pool: Mutex::new(Pool {
                idle: vec![conn],
                open: 1,
            }),
            freed: Condvar::new(),
        })
    }

    pub fn info(&self) -> ExportInfo {
        self.info
    }

    fn max_connections(&self) -> usize {
        if self.info.flags & TF_CAN_MULTI_CONN != 0 {
            MAX_CONNECTIONS
        } else {
            1
        }
    }

    /// Run `f` on a connection of the pool; a connection that failed is dropped
    /// rather than returned (its stream may be out of step).
    fn with_conn<T>(&self, f: impl FnOnce(&mut Conn) -> Result<T>) -> Result<T> {
        let mut conn = {
            let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if let Some(c) = pool.idle.pop() {
                    break Some(c);
                }
                if pool.open < self.max_connections() {
                    pool.open += 1;
                    break None;
                }
                pool = self.freed.wait(pool).unwrap_or_else(|p| p.into_inner());
            }
        };
        if conn.is_none() {
            match open(&self.uri, &self.address, &self.export) {
                Ok((c, _)) => conn = Some(c),
                Err(e) => {
                    self.pool.lock().unwrap_or_else(|p| p.into_inner()).open -= 1;
                    self.freed.notify_one();
                    return Err(e);
                }
            }
        }
        let Some(mut c) = conn else {
            return Err(self.err(Op::Open, "internal: no connection".into()));
        };
        let r = f(&mut c);
        let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        if r.is_ok() {
            pool.idle.push(c);
        } else {
            pool.open -= 1;
        }
        drop(pool);
        self.freed.notify_one();
        r
    }

    fn err(&self, op: Op, message: String) -> Error {
        Error::new(ErrorKind::Io, op, message).on_device(&self.uri)
    }

    /// One request and its simple reply; for a read, the data lands in `read`.
    fn request(
        &self,
        conn: &mut Conn,
        kind: u16,
        offset: u64,
        len: u32,
        write: Option<&[u8]>,
        read: Option<&mut [u8]>,
    ) -> Result<()> {
        let op = match kind {
            CMD_READ => Op::Read,
            CMD_WRITE => Op::Write,
            CMD_FLUSH => Op::Flush,
            _ => Op::Discard,
        };
        conn.cookie = conn.cookie.wrapping_add(1);
        let req = Request {
            magic: REQUEST_MAGIC,
            flags: 0,
            kind,
            cookie: conn.cookie,
            offset,
            length: len,
        };
        let io = |e: std::io::Error| {
            Error::new(
                ErrorKind::Io,
                op,
                format!("connection to the server failed: {e}"),
            )
            .on_device(&self.uri)
            .at(offset, u64::from(len))
        };
        let s = conn.stream.get_mut();
        s.write_all(&encode_request(&req)).map_err(io)?;
        if let Some(data) = write {
            s.write_all(data).map_err(io)?;
        }
        s.flush().map_err(io)?;
        let mut reply = [0u8; 16];
        conn.stream.read_exact(&mut reply).map_err(io)?;
        let magic = u32::from_be_bytes([reply[0], reply[1], reply[2], reply[3]]);
        let error = u32::from_be_bytes([reply[4], reply[5], reply[6], reply[7]]);
        let mut c = [0u8; 8];
        c.copy_from_slice(&reply[8..16]);
        let cookie = u64::from_be_bytes(c);
        if magic != SIMPLE_REPLY_MAGIC || cookie != conn.cookie {
            return Err(self
                .err(
                    op,
                    format!(
                        "the server's reply does not match the request (magic {magic:#x}, cookie {cookie}, expected {:#x}, {})",
                        SIMPLE_REPLY_MAGIC, conn.cookie
                    ),
                )
                .at(offset, u64::from(len)));
        }
        if error != 0 {
            return Err(Error::new(
                ErrorKind::Io,
                op,
                format!("the server answered error {error} ({})", errno_name(error)),
            )
            .on_device(&self.uri)
            .at(offset, u64::from(len)));
        }
        if let Some(buf) = read {
            conn.stream.read_exact(buf).map_err(io)?;
        }
        Ok(())
    }

    fn max_request(&self) -> usize {
        self.info.max_block.max(4096) as usize
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
        let max = self.max_request();
        let mut at = offset;
        for piece in buf.chunks_mut(max) {
            let len = piece.len() as u32;
            self.with_conn(|c| self.request(c, CMD_READ, at, len, None, Some(piece)))?;
            at += u64::from(len);
        }
        Ok(())
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
        let max = self.max_request();
        let mut at = offset;
        for piece in buf.chunks(max) {
            let len = piece.len() as u32;
            self.with_conn(|c| self.request(c, CMD_WRITE, at, len, Some(piece), None))?;
            at += u64::from(len);
        }
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        if self.info.flags & TF_SEND_FLUSH == 0 {
            // The server has no volatile cache to flush (it says so by not
            // offering the command).
            return Ok(());
        }
        self.with_conn(|c| self.request(c, CMD_FLUSH, 0, 0, None, None))
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
            self.with_conn(|c| self.request(c, CMD_TRIM, at, n, None, None))?;
            at += u64::from(n);
        }
        Ok(())
    }
}

impl Drop for NbdVolume {
    fn drop(&mut self) {
        // A polite goodbye on every idle connection; errors do not matter here.
        let pool = self.pool.get_mut().unwrap_or_else(|p| p.into_inner());
        for c in &mut pool.idle {
            c.cookie = c.cookie.wrapping_add(1);
            let req = Request {
                magic: REQUEST_MAGIC,
                flags: 0,
                kind: CMD_DISC,
                cookie: c.cookie,
                offset: 0,
                length: 0,
            };
            let s = c.stream.get_mut();
            let _ = s.write_all(&encode_request(&req));
            let _ = s.flush();
        }
    }
}

/// Connect and negotiate the export with `OPT_GO`.
fn open(uri: &str, address: &Address, export: &str) -> Result<(Conn, ExportInfo)> {
    let fail = |msg: String| Error::new(ErrorKind::Io, Op::Open, msg).on_device(uri);
    let stream: Box<dyn Stream> = match address {
        Address::Unix(p) => Box::new(UnixStream::connect(p).map_err(|e| {
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
            Box::new(s)
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
    Ok((
        Conn {
            stream: s,
            cookie: 0,
        },
        info,
    ))
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
