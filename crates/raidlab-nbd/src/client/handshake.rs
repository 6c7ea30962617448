//! The client's side of the NBD handshake: NBD URIs as libnbd spells them,
//! connecting, and fixed newstyle negotiation with `OPT_GO`. It decides which
//! export and limits a connection has; it must never accept an export whose
//! size the server did not say, or an option reply longer than it asked for.

use crate::proto::*;
use raidlab_core::{Error, ErrorKind, Op, Result};
use std::io::{BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

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
pub(super) enum Sock {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Sock {
    pub(super) fn try_clone(&self) -> std::io::Result<Sock> {
        Ok(match self {
            Sock::Unix(s) => Sock::Unix(s.try_clone()?),
            Sock::Tcp(s) => Sock::Tcp(s.try_clone()?),
        })
    }

    /// Wake the reply reader with end-of-file (on drop).
    pub(super) fn shutdown(&self) {
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

/// What the server said about the export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportInfo {
    pub size: u64,
    pub flags: u16,
    pub min_block: u32,
    pub preferred_block: u32,
    pub max_block: u32,
}

/// Connect and negotiate the export with `OPT_GO`.
pub(super) fn open(
    uri: &str,
    address: &Address,
    export: &str,
) -> Result<(BufReader<Sock>, ExportInfo)> {
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
