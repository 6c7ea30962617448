//! The server driven from memory by a tiny client over a socket pair: handshake,
//! every command, errors, limits and parallelism.

use raidlab_core::{Result as VResult, Volume};
use raidlab_devices::MemVolume;
use raidlab_nbd::proto::*;
use raidlab_nbd::{Export, Handshake, Limits, Outcome, Server};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

fn export(name: &str, v: Arc<dyn Volume>, read_only: bool) -> Export {
    Export {
        name: name.into(),
        description: format!("test {name}"),
        volume: v,
        read_only,
        preferred_block: 64 << 10,
        multi_conn: true,
    }
}

struct Client {
    s: UnixStream,
}

/// A structured reply: its error (0 for none) and its data chunks as
/// (offset, bytes) in the order received.
type Reply = (u32, Vec<(u64, Vec<u8>)>);

impl Client {
    fn start(server: Arc<Server>) -> (Client, std::thread::JoinHandle<Outcome>) {
        Self::start_with(server, false)
    }
    /// `socket`: serve as `listen` does a plain socket, so that large reads
    /// may be spliced into it.
    fn start_with(server: Arc<Server>, socket: bool) -> (Client, std::thread::JoinHandle<Outcome>) {
        let (a, b) = UnixStream::pair().unwrap();
        Self::start_on(server, socket, a, b)
    }
    /// [`Client::start_with`] over a given pair: `a` the client's end, `b` the
    /// server's.
    fn start_on(
        server: Arc<Server>,
        socket: bool,
        a: UnixStream,
        b: UnixStream,
    ) -> (Client, std::thread::JoinHandle<Outcome>) {
        let h = std::thread::spawn(move || {
            if !socket {
                return server.serve(b.try_clone().unwrap(), b);
            }
            let (mut r, mut w) = (b.try_clone().unwrap(), b);
            match server.handshake(&mut r, &mut w) {
                Ok(Handshake::Done(n)) => server.transmission_on_socket(r, w, n),
                Ok(Handshake::StartTls(_)) => Outcome::Violation("no TLS here".into()),
                Err(o) => o,
            }
        });
        let mut c = Client { s: a };
        let mut g = [0u8; 18];
        c.s.read_exact(&mut g).unwrap();
        assert_eq!(g, encode_greeting(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES));
        c.s.write_all(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes())
            .unwrap();
        (c, h)
    }
    fn option(&mut self, opt: u32, data: &[u8]) {
        let mut b = OPTS_MAGIC.to_be_bytes().to_vec();
        b.extend_from_slice(&opt.to_be_bytes());
        b.extend_from_slice(&(data.len() as u32).to_be_bytes());
        b.extend_from_slice(data);
        self.s.write_all(&b).unwrap();
    }
    /// (option, reply type, data)
    fn option_reply(&mut self) -> (u32, u32, Vec<u8>) {
        let mut h = [0u8; 20];
        self.s.read_exact(&mut h).unwrap();
        assert_eq!(&h[0..8], &REP_MAGIC.to_be_bytes());
        let opt = u32::from_be_bytes(h[8..12].try_into().unwrap());
        let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
        let mut d = vec![0; len as usize];
        self.s.read_exact(&mut d).unwrap();
        (opt, kind, d)
    }
    fn info_data(name: &str, reqs: &[u16]) -> Vec<u8> {
        let mut d = (name.len() as u32).to_be_bytes().to_vec();
        d.extend_from_slice(name.as_bytes());
        d.extend_from_slice(&(reqs.len() as u16).to_be_bytes());
        for r in reqs {
            d.extend_from_slice(&r.to_be_bytes());
        }
        d
    }
    /// Structured replies, then GO; returns (size, flags, block sizes).
    fn go(&mut self, name: &str) -> (u64, u16, [u32; 3]) {
        self.option(OPT_STRUCTURED_REPLY, &[]);
        assert_eq!(self.option_reply().1, REP_ACK);
        self.option(OPT_GO, &Self::info_data(name, &[INFO_BLOCK_SIZE]));
        let (mut size, mut flags, mut bs) = (0, 0, [0; 3]);
        loop {
            let (opt, kind, d) = self.option_reply();
            assert_eq!(opt, OPT_GO);
            if kind == REP_ACK {
                return (size, flags, bs);
            }
            assert_eq!(
                kind,
                REP_INFO,
                "GO refused: {}",
                String::from_utf8_lossy(&d)
            );
            match u16::from_be_bytes([d[0], d[1]]) {
                INFO_EXPORT => {
                    size = u64::from_be_bytes(d[2..10].try_into().unwrap());
                    flags = u16::from_be_bytes([d[10], d[11]]);
                }
                INFO_BLOCK_SIZE => {
                    for (i, v) in bs.iter_mut().enumerate() {
                        *v = u32::from_be_bytes(d[2 + 4 * i..6 + 4 * i].try_into().unwrap());
                    }
                }
                _ => {}
            }
        }
    }
    fn send(&mut self, kind: u16, flags: u16, cookie: u64, offset: u64, length: u32, data: &[u8]) {
        let r = Request {
            magic: REQUEST_MAGIC,
            flags,
            kind,
            cookie,
            offset,
            length,
        };
        self.s.write_all(&encode_request(&r)).unwrap();
        self.s.write_all(data).unwrap();
    }
    /// One reply: (cookie, error, read data). Handles simple and structured.
    fn reply(&mut self) -> (u64, u32, Vec<u8>) {
        let mut m = [0u8; 4];
        self.s.read_exact(&mut m).unwrap();
        match u32::from_be_bytes(m) {
            SIMPLE_REPLY_MAGIC => {
                let mut h = [0u8; 12];
                self.s.read_exact(&mut h).unwrap();
                let err = u32::from_be_bytes(h[0..4].try_into().unwrap());
                (
                    u64::from_be_bytes(h[4..12].try_into().unwrap()),
                    err,
                    vec![],
                )
            }
            STRUCTURED_REPLY_MAGIC => {
                let mut h = [0u8; 16];
                self.s.read_exact(&mut h).unwrap();
                let flags = u16::from_be_bytes([h[0], h[1]]);
                assert_eq!(flags, REPLY_FLAG_DONE, "one chunk per reply");
                let kind = u16::from_be_bytes([h[2], h[3]]);
                let cookie = u64::from_be_bytes(h[4..12].try_into().unwrap());
                let len = u32::from_be_bytes(h[12..16].try_into().unwrap());
                let mut d = vec![0; len as usize];
                self.s.read_exact(&mut d).unwrap();
                match kind {
                    REPLY_TYPE_OFFSET_DATA => (cookie, 0, d[8..].to_vec()),
                    REPLY_TYPE_NONE => (cookie, 0, vec![]),
                    REPLY_TYPE_ERROR => (
                        cookie,
                        u32::from_be_bytes(d[0..4].try_into().unwrap()),
                        vec![],
                    ),
                    k => panic!("unexpected chunk type {k}"),
                }
            }
            m => panic!("bad reply magic {m:#x}"),
        }
    }
    /// The structured replies to `count` requests, whose chunks may arrive
    /// interleaved: cookie -> (error, [(offset, data)] in the order received).
    fn replies(&mut self, count: usize) -> std::collections::HashMap<u64, Reply> {
        let mut out: std::collections::HashMap<u64, Reply> = Default::default();
        let mut done = 0;
        while done < count {
            let mut h = [0u8; 20];
            self.s.read_exact(&mut h).unwrap();
            assert_eq!(
                u32::from_be_bytes(h[0..4].try_into().unwrap()),
                STRUCTURED_REPLY_MAGIC
            );
            let flags = u16::from_be_bytes([h[4], h[5]]);
            let kind = u16::from_be_bytes([h[6], h[7]]);
            let cookie = u64::from_be_bytes(h[8..16].try_into().unwrap());
            let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
            let mut d = vec![0; len as usize];
            self.s.read_exact(&mut d).unwrap();
            let entry = out.entry(cookie).or_default();
            match kind {
                REPLY_TYPE_OFFSET_DATA => entry.1.push((
                    u64::from_be_bytes(d[0..8].try_into().unwrap()),
                    d[8..].to_vec(),
                )),
                REPLY_TYPE_ERROR => entry.0 = u32::from_be_bytes(d[0..4].try_into().unwrap()),
                k => panic!("unexpected chunk type {k}"),
            }
            if flags & REPLY_FLAG_DONE != 0 {
                done += 1;
            }
        }
        out
    }
    fn call(
        &mut self,
        kind: u16,
        flags: u16,
        offset: u64,
        length: u32,
        data: &[u8],
    ) -> (u32, Vec<u8>) {
        self.send(kind, flags, 7, offset, length, data);
        let (c, e, d) = self.reply();
        assert_eq!(c, 7);
        (e, d)
    }
}

fn server(exports: Vec<Export>, limits: Limits) -> Arc<Server> {
    Arc::new(Server::new(exports, limits, Box::new(|_| {})))
}

#[test]
fn go_then_every_command_round_trips() {
    let v = Arc::new(MemVolume::new(1 << 20));
    let s = server(vec![export("a", v.clone(), false)], Limits::default());
    let (mut c, h) = Client::start(s);
    let (size, flags, bs) = c.go("a");
    assert_eq!(size, 1 << 20);
    for f in [
        TF_HAS_FLAGS,
        TF_SEND_FLUSH,
        TF_SEND_FUA,
        TF_SEND_TRIM,
        TF_SEND_WRITE_ZEROES,
        TF_CAN_MULTI_CONN,
    ] {
        assert_ne!(flags & f, 0, "flag {f:#x}");
    }
    assert_eq!(flags & TF_READ_ONLY, 0);
    assert_eq!(bs, [1, 64 << 10, 32 << 20]);
    let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
    assert_eq!(
        c.call(CMD_WRITE, CMD_FLAG_FUA, 1234, data.len() as u32, &data)
            .0,
        0
    );
    assert_eq!(&v.snapshot()[1234..11_234], &data[..]);
    let (e, d) = c.call(CMD_READ, 0, 1234, 10_000, &[]);
    assert_eq!((e, &d[..]), (0, &data[..]));
    assert_eq!(c.call(CMD_FLUSH, 0, 0, 0, &[]).0, 0);
    assert_eq!(c.call(CMD_WRITE_ZEROES, 0, 2000, 100, &[]).0, 0);
    assert!(v.snapshot()[2000..2100].iter().all(|&b| b == 0));
    assert_eq!(v.snapshot()[2100], data[2100 - 1234]);
    // MemVolume cannot discard: trim is advisory and succeeds, keeping the data.
    assert_eq!(c.call(CMD_TRIM, 0, 0, 4096, &[]).0, 0);
    c.send(CMD_DISC, 0, 8, 0, 0, &[]);
    assert_eq!(h.join().unwrap(), Outcome::Closed);
}

/// Memory that records which volume calls the server makes.
#[derive(Debug)]
struct Recorded {
    inner: MemVolume,
    calls: std::sync::Mutex<Vec<String>>,
}

impl Recorded {
    fn log(&self, call: String) {
        self.calls.lock().unwrap().push(call);
    }
}

impl Volume for Recorded {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> VResult<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> VResult<()> {
        self.log(format!("write {offset}+{}", buf.len()));
        self.inner.write_at(buf, offset)
    }
    fn write_at_fua(&self, buf: &[u8], offset: u64) -> VResult<()> {
        self.log(format!("fua {offset}+{}", buf.len()));
        self.inner.write_at(buf, offset)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> VResult<()> {
        self.log(format!("zeroes {offset}+{len}"));
        self.inner.write_zeroes(offset, len)
    }
    fn flush(&self) -> VResult<()> {
        self.log("flush".into());
        Ok(())
    }
}

#[test]
fn fua_and_write_zeroes_reach_the_volume_as_such() {
    let v = Arc::new(Recorded {
        inner: MemVolume::new(4 << 20),
        calls: Default::default(),
    });
    let s = server(vec![export("a", v.clone(), false)], Limits::default());
    let (mut c, h) = Client::start(s);
    c.go("a");
    let data = vec![7u8; 4096];
    assert_eq!(c.call(CMD_WRITE, CMD_FLAG_FUA, 8192, 4096, &data).0, 0);
    assert_eq!(c.call(CMD_WRITE, 0, 0, 4096, &data).0, 0);
    // A zeroing of more than one piece is one call: the volume chooses how.
    let len = 3 << 20;
    assert_eq!(
        c.call(CMD_WRITE_ZEROES, CMD_FLAG_NO_HOLE, 4096, len, &[]).0,
        0
    );
    let mut back = vec![1u8; len as usize + 8192];
    v.inner.read_at(&mut back, 0).unwrap();
    assert!(back[..4096].iter().all(|&b| b == 7));
    assert!(back[4096..4096 + len as usize].iter().all(|&b| b == 0));
    c.send(CMD_DISC, 0, 8, 0, 0, &[]);
    assert_eq!(h.join().unwrap(), Outcome::Closed);
    assert_eq!(
        *v.calls.lock().unwrap(),
        [
            "fua 8192+4096",
            "write 0+4096",
            &format!("zeroes 4096+{len}")
        ]
    );
}

#[test]
fn list_info_unknown_and_abort() {
    let s = server(
        vec![
            export("one", Arc::new(MemVolume::new(4096)), false),
            export("two", Arc::new(MemVolume::new(8192)), true),
        ],
        Limits::default(),
    );
    let (mut c, h) = Client::start(s);
    c.option(OPT_LIST, &[]);
    let mut names = vec![];
    loop {
        let (_, k, d) = c.option_reply();
        if k == REP_ACK {
            break;
        }
        assert_eq!(k, REP_SERVER);
        names.push(String::from_utf8(d[4..].to_vec()).unwrap());
    }
    assert_eq!(names, ["one", "two"]);
    c.option(OPT_LIST, b"x");
    assert_eq!(c.option_reply().1, REP_ERR_INVALID);
    c.option(OPT_INFO, &Client::info_data("nope", &[]));
    assert_eq!(c.option_reply().1, REP_ERR_UNKNOWN);
    c.option(OPT_INFO, &[0, 0, 0, 9, b'a']);
    assert_eq!(c.option_reply().1, REP_ERR_INVALID);
    c.option(OPT_STARTTLS, &[]);
    assert_eq!(c.option_reply().1, REP_ERR_UNSUP);
    c.option(999, b"whatever");
    assert_eq!(
        c.option_reply(),
        (999, REP_ERR_UNSUP, b"option 999 is not supported".to_vec())
    );
    c.option(
        OPT_INFO,
        &Client::info_data("two", &[INFO_NAME, INFO_DESCRIPTION]),
    );
    let mut got = vec![];
    loop {
        let (_, k, d) = c.option_reply();
        if k == REP_ACK {
            break;
        }
        got.push(d);
    }
    assert_eq!(got.len(), 4, "export, block size, name, description");
    assert_eq!(&got[0][2..10], &8192u64.to_be_bytes());
    assert_ne!(
        u16::from_be_bytes([got[0][10], got[0][11]]) & TF_READ_ONLY,
        0
    );
    assert_eq!(&got[3][2..], b"test two");
    c.option(OPT_ABORT, &[]);
    assert_eq!(c.option_reply().1, REP_ACK);
    assert_eq!(h.join().unwrap(), Outcome::Closed);
}

#[test]
fn refusals_touch_nothing() {
    let ro = Arc::new(MemVolume::new(65536));
    let rw = Arc::new(MemVolume::new(65536));
    let limits = Limits {
        max_payload: 1 << 20,
        ..Limits::default()
    };
    let s = server(
        vec![
            export("ro", ro.clone(), true),
            export("rw", rw.clone(), false),
        ],
        limits,
    );
    let (mut c, _h) = Client::start(s.clone());
    c.go("ro");
    assert_eq!(c.call(CMD_WRITE, 0, 0, 4, b"abcd").0, EPERM);
    assert_eq!(c.call(CMD_WRITE_ZEROES, 0, 0, 4, &[]).0, EPERM);
    assert_eq!(c.call(CMD_TRIM, 0, 0, 4, &[]).0, EPERM);
    // The stream stayed in step after the refused payload.
    assert_eq!(c.call(CMD_READ, 0, 0, 4, &[]), (0, vec![0; 4]));
    assert!(ro.snapshot().iter().all(|&b| b == 0));

    let (mut c, h) = Client::start(s);
    c.go("rw");
    assert_eq!(c.call(CMD_WRITE, 0, 65534, 4, b"abcd").0, ENOSPC);
    assert_eq!(c.call(CMD_WRITE, 0, u64::MAX - 1, 4, b"abcd").0, ENOSPC);
    assert_eq!(c.call(CMD_READ, 0, 65535, 2, &[]).0, EINVAL);
    assert_eq!(
        c.call(CMD_READ, 0, 0, 2 << 20, &[]).0,
        EINVAL,
        "over max payload"
    );
    assert_eq!(c.call(CMD_TRIM, 0, 65535, 2, &[]).0, EINVAL);
    assert_eq!(c.call(CMD_WRITE_ZEROES, 0, 65535, 2, &[]).0, ENOSPC);
    assert_eq!(
        c.call(CMD_WRITE, 1 << 9, 0, 4, b"abcd").0,
        EINVAL,
        "unknown flag"
    );
    assert_eq!(c.call(77, 0, 0, 0, &[]).0, EINVAL, "unknown command");
    assert!(rw.snapshot().iter().all(|&b| b == 0), "nothing written");
    // A write too long to skip (over twice the maximum payload and over 2^25
    // bytes): hard disconnect, before any of its payload is read.
    assert_eq!(limits.skip_max(), 32 << 20);
    c.send(CMD_WRITE, 0, 1, 0, (32 << 20) + 1, &[]);
    assert!(matches!(h.join().unwrap(), Outcome::Violation(_)));
}

/// A volume of 64 KiB holding a pattern, served with the smallest maximum
/// payload (4 KiB), so that requests just over it stay small.
fn patterned_small_payload() -> (Arc<MemVolume>, Vec<u8>, Arc<Server>) {
    let v = Arc::new(MemVolume::new(65536));
    let pattern: Vec<u8> = (0..65536u32).map(|i| (i % 251) as u8 + 1).collect();
    v.write_at(&pattern, 0).unwrap();
    let limits = Limits {
        max_payload: 4096,
        ..Limits::default()
    };
    let s = server(vec![export("a", v.clone(), false)], limits);
    (v, pattern, s)
}

/// Issue 39: a write over the advertised maximum payload gets EINVAL (a
/// structured error with a message), its payload is read and dropped so the
/// next request is read where it starts, and nothing is written.
#[test]
fn write_over_the_advertised_maximum_gets_einval_and_the_stream_stays_in_step() {
    let (v, pattern, s) = patterned_small_payload();
    let (mut c, h) = Client::start(s);
    let (_, _, bs) = c.go("a");
    assert_eq!(bs[2], 4096, "the maximum advertised");
    // The over-long write and a read right behind it, in one go.
    c.send(CMD_WRITE, 0, 1, 0, 8192, &[0xee; 8192]);
    c.send(CMD_READ, 0, 2, 0, 4096, &[]);
    let mut h20 = [0u8; 20];
    c.s.read_exact(&mut h20).unwrap();
    assert_eq!(&h20[0..4], &STRUCTURED_REPLY_MAGIC.to_be_bytes());
    assert_eq!(
        u16::from_be_bytes([h20[4], h20[5]]),
        REPLY_FLAG_DONE,
        "one final chunk"
    );
    assert_eq!(u16::from_be_bytes([h20[6], h20[7]]), REPLY_TYPE_ERROR);
    assert_eq!(&h20[8..16], &1u64.to_be_bytes());
    let mut d = vec![0; u32::from_be_bytes(h20[16..20].try_into().unwrap()) as usize];
    c.s.read_exact(&mut d).unwrap();
    assert_eq!(u32::from_be_bytes(d[0..4].try_into().unwrap()), EINVAL);
    let msg = String::from_utf8_lossy(&d[6..]);
    assert!(msg.contains("maximum payload"), "message {msg:?}");
    let (cookie, e, back) = c.reply();
    assert_eq!((cookie, e), (2, 0));
    assert_eq!(back, pattern[..4096]);
    // A write far over the maximum (but still skippable) is refused alike,
    // and one at the maximum is carried out.
    let long = vec![0xdd; 1 << 20];
    assert_eq!(c.call(CMD_WRITE, CMD_FLAG_FUA, 0, 1 << 20, &long).0, EINVAL);
    assert_eq!(v.snapshot(), pattern, "nothing written");
    assert_eq!(c.call(CMD_WRITE, 0, 4096, 4096, &[0xcc; 4096]).0, 0);
    assert!(v.snapshot()[4096..8192].iter().all(|&b| b == 0xcc));
    c.send(CMD_DISC, 0, 8, 0, 0, &[]);
    assert_eq!(h.join().unwrap(), Outcome::Closed);
}

/// Without structured replies the refusal is a simple reply, and the stream
/// stays in step alike.
#[test]
fn write_over_the_advertised_maximum_gets_a_simple_einval_without_structured_replies() {
    let (v, pattern, s) = patterned_small_payload();
    let (mut c, h) = Client::start(s);
    c.option(OPT_GO, &Client::info_data("a", &[INFO_BLOCK_SIZE]));
    while c.option_reply().1 != REP_ACK {}
    c.send(CMD_WRITE, 0, 1, 0, 8192, &[0xee; 8192]);
    assert_eq!(c.reply(), (1, EINVAL, vec![]));
    // A simple read reply: the header, then as many bytes as asked for.
    assert_eq!(c.call(CMD_READ, 0, 0, 16, &[]).0, 0);
    let mut back = [0u8; 16];
    c.s.read_exact(&mut back).unwrap();
    assert_eq!(back, pattern[..16]);
    assert_eq!(v.snapshot(), pattern, "nothing written");
    c.send(CMD_DISC, 0, 8, 0, 0, &[]);
    assert_eq!(h.join().unwrap(), Outcome::Closed);
}

/// Zeroing and trims carry no payload: the protocol lets a client ask for
/// more than the maximum payload and says the server should not hang up; it
/// may refuse only where the length would cost it more than a maximum one
/// would, which a zeroing in pieces does not. They are carried out.
#[test]
fn write_zeroes_and_trim_over_the_maximum_payload_are_carried_out() {
    let (v, pattern, s) = patterned_small_payload();
    let (mut c, h) = Client::start(s);
    c.go("a");
    assert_eq!(c.call(CMD_WRITE_ZEROES, 0, 4096, 16384, &[]).0, 0);
    let snap = v.snapshot();
    assert!(snap[4096..20480].iter().all(|&b| b == 0));
    assert_eq!(snap[..4096], pattern[..4096]);
    assert_eq!(snap[20480..], pattern[20480..]);
    assert_eq!(c.call(CMD_TRIM, 0, 0, 65536, &[]).0, 0);
    // Still in step (what a trimmed range reads as is the volume's affair).
    assert_eq!(c.call(CMD_READ, 0, 0, 16, &[]).1.len(), 16);
    c.send(CMD_DISC, 0, 8, 0, 0, &[]);
    assert_eq!(h.join().unwrap(), Outcome::Closed);
}

#[test]
fn client_vanishing_mid_write_changes_nothing() {
    let v = Arc::new(MemVolume::new(65536));
    let s = server(vec![export("a", v.clone(), false)], Limits::default());
    let (mut c, h) = Client::start(s);
    c.go("a");
    c.send(CMD_WRITE, 0, 1, 0, 4096, &[0xaa; 1000]);
    drop(c);
    assert_eq!(h.join().unwrap(), Outcome::Gone);
    assert!(v.snapshot().iter().all(|&b| b == 0));
}

/// Each read waits until `want` reads are inside the volume at once (a
/// rendezvous), and the most seen together is kept: a server that serves
/// requests one at a time makes the first read wait out the deadline and
/// then shows 1, however fast or slow the machine is.
struct Rendezvous {
    inner: MemVolume,
    want: usize,
    inside: Mutex<usize>,
    met: Mutex<bool>,
    cv: Condvar,
    most: AtomicUsize,
}
impl Volume for Rendezvous {
    fn name(&self) -> String {
        "rendezvous".into()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> VResult<()> {
        {
            let mut inside = self.inside.lock().unwrap();
            *inside += 1;
            self.most.fetch_max(*inside, Ordering::SeqCst);
        }
        {
            let mut met = self.met.lock().unwrap();
            if *self.inside.lock().unwrap() >= self.want {
                *met = true;
                self.cv.notify_all();
            }
            let (mut met, _) = self
                .cv
                .wait_timeout_while(met, Duration::from_secs(30), |m| !*m)
                .unwrap();
            *met = true;
        }
        *self.inside.lock().unwrap() -= 1;
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> VResult<()> {
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> VResult<()> {
        Ok(())
    }
}

/// Sends `sent` 4 KiB reads in one write to a server with `limits` over a
/// [`Rendezvous`] that waits for `want` reads at once; returns the most that
/// were inside the volume together, after checking every read was answered.
fn most_served_at_once(limits: Limits, sent: u64, want: usize) -> usize {
    let v = Arc::new(Rendezvous {
        inner: MemVolume::new(1 << 20),
        want,
        inside: Mutex::new(0),
        met: Mutex::new(false),
        cv: Condvar::new(),
        most: AtomicUsize::new(0),
    });
    let s = server(vec![export("a", v.clone(), false)], limits);
    let (mut c, h) = Client::start(s);
    c.go("a");
    // All in one write, so they are in flight together whatever the
    // machine's load: the server serves a request itself when it arrives
    // with nothing else in flight and nothing behind it (queue depth 1), and
    // reads sent one by one on a loaded machine could each arrive so, and
    // wait out the rendezvous's deadline one at a time.
    let mut burst = Vec::new();
    for i in 0..sent {
        burst.extend_from_slice(&encode_request(&Request {
            magic: REQUEST_MAGIC,
            flags: 0,
            kind: CMD_READ,
            cookie: i,
            offset: i * 4096,
            length: 4096,
        }));
    }
    c.s.write_all(&burst).unwrap();
    let mut cookies: Vec<u64> = (0..sent).map(|_| c.reply().0).collect();
    cookies.sort();
    assert_eq!(cookies, (0..sent).collect::<Vec<_>>());
    c.send(CMD_DISC, 0, sent + 1, 0, 0, &[]);
    assert_eq!(h.join().unwrap(), Outcome::Closed);
    v.most.load(Ordering::SeqCst)
}

#[test]
fn requests_in_flight_are_served_in_parallel() {
    let limits = Limits {
        workers: 8,
        ..Limits::default()
    };
    let most = most_served_at_once(limits, 8, 8);
    assert_eq!(
        most, 8,
        "8 reads in flight, {most} served at once: not parallel"
    );
}

#[test]
fn one_connection_gets_as_many_workers_as_the_limit_and_no_more() {
    // 64 reads in flight, more than a queue-depth-32 client sends to an
    // array of disks: the workers started on demand reach the default limit
    // (32, that client's whole queue), and no more start.
    let limits = Limits::default();
    assert_eq!(limits.workers, 32);
    let most = most_served_at_once(limits, 64, 32);
    assert_eq!(
        most, 32,
        "64 reads in flight with a limit of 32 workers: {most} served at once"
    );
}

#[test]
fn small_budget_still_serves_a_deep_queue() {
    let v = Arc::new(MemVolume::new(1 << 20));
    // The budget is raised to hold one maximum payload; 64 writes of 64 KiB must
    // queue behind it rather than grow memory, and all complete.
    let limits = Limits {
        max_payload: 64 << 10,
        max_inflight_bytes: 0,
        workers: 2,
        ..Limits::default()
    };
    let s = server(vec![export("a", v.clone(), false)], limits);
    let (c, h) = Client::start(s);
    let mut c = c;
    c.go("a");
    let mut w = c.s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        for i in 0..64u64 {
            let r = Request {
                magic: REQUEST_MAGIC,
                flags: 0,
                kind: CMD_WRITE,
                cookie: i,
                offset: (i % 16) * 65536,
                length: 65536,
            };
            w.write_all(&encode_request(&r)).unwrap();
            w.write_all(&[i as u8 + 1; 65536]).unwrap();
        }
    });
    for _ in 0..64 {
        assert_eq!(c.reply().1, 0);
    }
    writer.join().unwrap();
    c.send(CMD_DISC, 0, 99, 0, 0, &[]);
    assert_eq!(h.join().unwrap(), Outcome::Closed);
    assert!(v.snapshot()[..65536].iter().all(|&b| b != 0));
}

#[test]
fn export_name_option_and_simple_replies() {
    let v = Arc::new(MemVolume::new(8192));
    v.write_at(b"hello", 100).unwrap();
    let s = server(vec![export("a", v, false)], Limits::default());
    let (mut c, _h) = Client::start(s.clone());
    c.option(OPT_EXPORT_NAME, b"a");
    let mut b = [0u8; 10];
    c.s.read_exact(&mut b).unwrap();
    assert_eq!(&b[0..8], &8192u64.to_be_bytes());
    // Without structured replies the data follows a simple reply header.
    let (e, _) = c.call(CMD_READ, 0, 100, 5, &[]);
    assert_eq!(e, 0);
    let mut d = [0u8; 5];
    c.s.read_exact(&mut d).unwrap();
    assert_eq!(&d, b"hello");
    // An unknown name with EXPORT_NAME can only be answered by hanging up.
    let (mut c, h) = Client::start(s);
    c.option(OPT_EXPORT_NAME, b"zzz");
    assert!(matches!(h.join().unwrap(), Outcome::Violation(_)));
}

/// A file volume that counts how its reads are served, and declines
/// `read_stored` after `stored_ok` calls (as a degraded array would).
struct Counted {
    inner: Arc<dyn Volume>,
    stored: std::sync::atomic::AtomicUsize,
    copied: std::sync::atomic::AtomicUsize,
    stored_ok: usize,
}

impl Volume for Counted {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> VResult<()> {
        self.copied
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> VResult<()> {
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> VResult<()> {
        self.inner.flush()
    }
    fn read_stored(
        &self,
        offset: u64,
        len: u64,
        sink: &mut raidlab_core::StoredSink<'_>,
    ) -> VResult<bool> {
        let n = self
            .stored
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if n >= self.stored_ok {
            return Ok(false);
        }
        self.inner.read_stored(offset, len, sink)
    }
}

const FILE_BYTES: usize = 8 << 20;

fn counted_file(dir: &std::path::Path, stored_ok: usize) -> (Arc<Counted>, Vec<u8>) {
    let data: Vec<u8> = (0..FILE_BYTES as u32)
        .map(|i| (i ^ (i >> 9) ^ (i >> 17)) as u8)
        .collect();
    let path = dir.join("f");
    std::fs::write(&path, &data).unwrap();
    let inner =
        raidlab_devices::FileVolume::open(&path, raidlab_devices::OpenMode::ReadWrite).unwrap();
    let v = Counted {
        inner: Arc::new(inner),
        stored: Default::default(),
        copied: Default::default(),
        stored_ok,
    };
    (Arc::new(v), data)
}

/// A server on a plain socket exporting a counted file as "a"; the directory
/// holding the file lives as long as the returned guard.
fn counted_server(stored_ok: usize) -> (tempfile::TempDir, Arc<Counted>, Vec<u8>, Client) {
    let dir = tempfile::tempdir().unwrap();
    let (v, data) = counted_file(dir.path(), stored_ok);
    let s = server(vec![export("a", v.clone(), false)], Limits::default());
    let (c, _h) = Client::start_with(s, true);
    (dir, v, data, c)
}

/// The chunks cover `[offset, offset+len)` end to end and hold the file's bytes.
fn assert_chunks(what: &str, chunks: &[(u64, Vec<u8>)], offset: u64, len: usize, data: &[u8]) {
    let mut at = offset;
    for (o, d) in chunks {
        assert_eq!(*o, at, "{what}: chunks out of order or overlapping");
        assert!(
            d[..] == data[at as usize..at as usize + d.len()],
            "{what}: chunk at {o} holds other bytes than the file"
        );
        at += d.len() as u64;
    }
    assert_eq!(
        at,
        offset + len as u64,
        "{what}: chunks do not cover the read"
    );
}

#[test]
fn large_reads_on_a_socket_are_spliced_byte_for_byte() {
    use std::sync::atomic::Ordering::SeqCst;
    let (_dir, v, data, mut c) = counted_server(usize::MAX);
    c.go("a");
    // From the splice threshold up, unaligned, across the 1 MiB a pipe holds,
    // and a small read that is copied.
    let reads: [(u64, usize); 6] = [
        (4095, 32 << 10),
        (512, 100_000),
        (0, 1 << 20),
        (777, (1 << 20) + 3),
        (1 << 20, 4 << 20),
        (12_345, 20_000),
    ];
    // All in flight at once: chunks of different replies may interleave.
    for (i, &(off, n)) in reads.iter().enumerate() {
        c.send(CMD_READ, 0, i as u64, off, n as u32, &[]);
    }
    let replies = c.replies(reads.len());
    assert_eq!(replies.len(), reads.len());
    for (cookie, (err, chunks)) in replies {
        let (off, n) = reads[cookie as usize];
        assert_eq!(err, 0, "read {n} at {off}");
        assert_chunks(&format!("read {n} at {off}"), &chunks, off, n, &data);
    }
    assert!(
        v.stored.load(SeqCst) >= 5,
        "the five large reads were not spliced"
    );
    assert_eq!(
        v.copied.load(SeqCst),
        1,
        "only the 20000-byte read is copied"
    );
}

#[test]
fn a_splice_declined_half_way_ends_with_copied_data() {
    use std::sync::atomic::Ordering::SeqCst;
    let (_dir, v, data, mut c) = counted_server(1);
    c.go("a");
    let (off, n) = (3000u64, 6 << 20);
    c.send(CMD_READ, 0, 9, off, n as u32, &[]);
    let replies = c.replies(1);
    let (err, chunks) = &replies[&9];
    assert_eq!(*err, 0);
    assert_chunks("6 MiB read", chunks, off, n, &data);
    // A pipe of any size a process may have holds less than 6 MiB: the first
    // chunk is spliced, the rest (declined) copied into the last chunk.
    let stored = v.stored.load(SeqCst);
    let copied = v.copied.load(SeqCst);
    assert!(stored >= 1, "nothing was spliced");
    if stored >= 2 {
        assert_eq!(copied, 1, "the declined rest must be copied once");
        assert!(chunks.len() >= 2);
    }
}

#[test]
fn simple_replies_splice_only_what_fits_one_pipe() {
    use std::sync::atomic::Ordering::SeqCst;
    let (_dir, v, data, mut c) = counted_server(usize::MAX);
    c.option(OPT_EXPORT_NAME, b"a");
    let mut b = [0u8; 10];
    c.s.read_exact(&mut b).unwrap();
    for (off, n) in [(100u64, 100_000usize), (5, 5 << 20)] {
        let (e, _) = c.call(CMD_READ, 0, off, n as u32, &[]);
        assert_eq!(e, 0);
        let mut d = vec![0u8; n];
        c.s.read_exact(&mut d).unwrap();
        assert!(
            d[..] == data[off as usize..off as usize + n],
            "read {n} at {off}"
        );
    }
    // 100000 bytes fit a pipe; whether 5 MiB do depends on the process's
    // privileges, and if they do not, they are copied, whole, once.
    let stored = v.stored.load(SeqCst);
    assert!(stored >= 1, "the 100000-byte read was not spliced");
    assert_eq!(v.copied.load(SeqCst) + (stored - 1), 1);
}

/// On a plain socket the server asks for a send buffer that holds a few large
/// replies, within what the system allows (net.core.wmem_max).
#[test]
fn plain_sockets_get_a_large_send_buffer() {
    use std::os::fd::AsRawFd;
    let sndbuf = |s: &UnixStream| {
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes one c_int into `v`, whose size `len` gives.
        let rc = unsafe {
            libc::getsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0);
        v as usize
    };
    let wmem_max: usize = std::fs::read_to_string("/proc/sys/net/core/wmem_max")
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0);
    let v = Arc::new(MemVolume::new(1 << 20));
    let s = server(vec![export("a", v, false)], Limits::default());
    let (a, b) = UnixStream::pair().unwrap();
    let before = sndbuf(&b);
    let watch = b.try_clone().unwrap();
    let (mut c, h) = Client::start_on(s, true, a, b);
    c.go("a");
    // A request answered means transmission (and its set-up) has started.
    assert_eq!(c.call(CMD_FLUSH, 0, 0, 0, &[]).0, 0);
    let after = sndbuf(&watch);
    // Linux reports twice what was granted (its bookkeeping overhead).
    let want = (4usize << 20).min(wmem_max) * 2;
    assert!(
        after >= want.max(before),
        "send buffer {after} bytes, wanted {want} (was {before}, wmem_max {wmem_max})"
    );
    c.send(CMD_DISC, 0, 8, 0, 0, &[]);
    assert_eq!(h.join().unwrap(), Outcome::Closed);
}

/// A page-aligned read whose bytes start inside a page of the file (a data
/// area at an odd offset) needs one pipe slot more than its size says: the
/// first attempt finds the pipe full, and the read is sent anyway, exactly.
#[test]
fn an_aligned_read_of_unaligned_file_pieces_arrives_whole() {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..(3u32 << 20)).map(|i| (i ^ (i >> 11)) as u8).collect();
    let path = dir.path().join("f");
    std::fs::write(&path, &data).unwrap();
    let file =
        raidlab_devices::FileVolume::open(&path, raidlab_devices::OpenMode::ReadOnly).unwrap();
    let slice = raidlab_core::SliceVolume::new(file, 100, 2 << 20).unwrap();
    let v = Arc::new(Counted {
        inner: Arc::new(slice),
        stored: Default::default(),
        copied: Default::default(),
        stored_ok: usize::MAX,
    });
    let s = server(vec![export("a", v.clone(), true)], Limits::default());
    let (mut c, _h) = Client::start_with(s, true);
    c.go("a");
    for (cookie, off) in [(1u64, 0u64), (2, 1 << 20)] {
        c.send(CMD_READ, 0, cookie, off, 1 << 20, &[]);
        let replies = c.replies(1);
        let (err, chunks) = &replies[&cookie];
        assert_eq!(*err, 0);
        let start = 100 + off as usize;
        assert_chunks(
            &format!("1 MiB at {off} of a slice at 100"),
            chunks,
            off,
            1 << 20,
            &data[100..],
        );
        assert!(chunks[0].1[..16] == data[start..start + 16]);
    }
    assert_eq!(
        v.copied.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "a full pipe must lead to smaller chunks, not to copying"
    );
}
