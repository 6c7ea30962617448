//! STARTTLS end to end in one process: forced-TLS refusals before the upgrade,
//! then a rustls client that upgrades, negotiates an export and writes and reads
//! through the server's split TLS session. Certificates come from openssl; the
//! test prints SKIPPED without it.

use raidlab_devices::MemVolume;
use raidlab_nbd::proto::*;
use raidlab_nbd::tls::{self, Socket, Tls};
use raidlab_nbd::{Export, Handshake, Limits, Outcome, Server};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

struct Sock(UnixStream);
impl Read for Sock {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        self.0.read(b)
    }
}
impl Write for Sock {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.write(b)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
impl Socket for Sock {
    fn try_clone_socket(&self) -> io::Result<Sock> {
        self.0.try_clone().map(Sock)
    }
}

fn option(s: &mut impl Write, opt: u32, data: &[u8]) {
    let mut b = OPTS_MAGIC.to_be_bytes().to_vec();
    b.extend_from_slice(&opt.to_be_bytes());
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    s.write_all(&b).unwrap();
}

fn reply(s: &mut impl Read) -> (u32, Vec<u8>) {
    let mut h = [0u8; 20];
    s.read_exact(&mut h).unwrap();
    let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
    let mut d = vec![0; u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize];
    s.read_exact(&mut d).unwrap();
    (kind, d)
}

fn go_data(name: &str) -> Vec<u8> {
    let mut d = (name.len() as u32).to_be_bytes().to_vec();
    d.extend_from_slice(name.as_bytes());
    d.extend_from_slice(&0u16.to_be_bytes());
    d
}

/// A CA (ca.pem) and a server certificate for localhost signed by it
/// (cert.pem, key.pem): rustls refuses a CA certificate as a server's.
fn cert(dir: &Path) -> bool {
    Command::new("sh")
        .arg("-ec")
        .arg(
            "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca-key.pem -out ca.pem -days 2 \
               -subj '/CN=test CA' 2>/dev/null
             openssl req -newkey rsa:2048 -nodes -keyout key.pem -out s.csr -subj /CN=localhost 2>/dev/null
             printf 'subjectAltName=DNS:localhost\\nbasicConstraints=CA:FALSE\\n' > s.ext
             openssl x509 -req -in s.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -out cert.pem \
               -days 2 -extfile s.ext 2>/dev/null",
        )
        .current_dir(dir)
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn forced_tls_refuses_then_serves_over_starttls() {
    let dir = tempfile::tempdir().unwrap();
    if !cert(dir.path()) {
        raidlab_core::skip::skip_or_fail(
            "STARTTLS in memory: openssl is not installed to make a test certificate",
        );
        return;
    }
    let config = tls::server_config(
        &dir.path().join("cert.pem"),
        &dir.path().join("key.pem"),
        None,
    )
    .unwrap();
    let vol = Arc::new(MemVolume::new(1 << 20));
    let export = Export {
        name: "a".into(),
        description: String::new(),
        volume: vol.clone(),
        read_only: false,
        preferred_block: 4096,
        multi_conn: true,
    };
    let server = Arc::new(
        Server::new(vec![export], Limits::default(), Box::new(|_| {})).with_tls(Tls {
            config,
            require: true,
        }),
    );

    // The server side as listen.rs runs it.
    let (c, s) = UnixStream::pair().unwrap();
    let srv = server.clone();
    let h = std::thread::spawn(move || {
        let mut r = Sock(s.try_clone().unwrap());
        let mut w = Sock(s);
        let resume = match srv.handshake(&mut r, &mut w) {
            Ok(Handshake::StartTls(resume)) => resume,
            other => panic!("expected STARTTLS, got {other:?}"),
        };
        let (mut tr, mut tw) = tls::accept(srv.tls().unwrap().config.clone(), r).unwrap();
        let n = srv.resume_handshake(&mut tr, &mut tw, resume).unwrap();
        assert!(
            !n.structured,
            "what was negotiated before STARTTLS is forgotten"
        );
        srv.transmission(tr, tw, n)
    });

    let mut c = c;
    let mut g = [0u8; 18];
    c.read_exact(&mut g).unwrap();
    c.write_all(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes())
        .unwrap();
    // Before the upgrade: everything but STARTTLS and ABORT is refused.
    option(&mut c, OPT_STRUCTURED_REPLY, &[]);
    assert_eq!(reply(&mut c).0, REP_ERR_TLS_REQD);
    option(&mut c, OPT_LIST, &[]);
    assert_eq!(reply(&mut c).0, REP_ERR_TLS_REQD);
    option(&mut c, OPT_GO, &go_data("a"));
    assert_eq!(reply(&mut c).0, REP_ERR_TLS_REQD);
    option(&mut c, OPT_STARTTLS, &[]);
    assert_eq!(reply(&mut c).0, REP_ACK);

    // Upgrade with a client that trusts the self-signed certificate.
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(dir.path().join("ca.pem")).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let conn =
        rustls::ClientConnection::new(Arc::new(cfg), ServerName::try_from("localhost").unwrap())
            .unwrap();
    let mut t = rustls::StreamOwned::new(conn, c);
    option(&mut t, OPT_STARTTLS, &[]);
    assert_eq!(
        reply(&mut t).0,
        REP_ERR_INVALID,
        "a second STARTTLS is refused"
    );
    option(&mut t, OPT_GO, &go_data("a"));
    loop {
        let (k, _) = reply(&mut t);
        if k == REP_ACK {
            break;
        }
        assert_eq!(k, REP_INFO);
    }
    let req = |kind, cookie, offset, length| {
        encode_request(&Request {
            magic: REQUEST_MAGIC,
            flags: 0,
            kind,
            cookie,
            offset,
            length,
        })
    };
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 253) as u8).collect();
    t.write_all(&req(CMD_WRITE, 1, 4096, data.len() as u32))
        .unwrap();
    t.write_all(&data).unwrap();
    let mut r = [0u8; 16];
    t.read_exact(&mut r).unwrap();
    assert_eq!(r, simple_reply(0, 1));
    t.write_all(&req(CMD_READ, 2, 4096, data.len() as u32))
        .unwrap();
    t.read_exact(&mut r).unwrap();
    assert_eq!(r, simple_reply(0, 2));
    let mut back = vec![0u8; data.len()];
    t.read_exact(&mut back).unwrap();
    assert!(back == data, "read through TLS differs");
    assert!(vol.snapshot()[4096..4096 + data.len()] == data[..]);
    t.write_all(&req(CMD_DISC, 3, 0, 0)).unwrap();
    assert_eq!(h.join().unwrap(), Outcome::Closed);

    // A client that skips negotiation with EXPORT_NAME is hung up on.
    let (mut c, s) = UnixStream::pair().unwrap();
    let srv = server.clone();
    let h = std::thread::spawn(move || srv.serve(s.try_clone().unwrap(), s));
    c.read_exact(&mut g).unwrap();
    c.write_all(&FLAG_C_FIXED_NEWSTYLE.to_be_bytes()).unwrap();
    option(&mut c, OPT_EXPORT_NAME, b"a");
    assert!(matches!(h.join().unwrap(), Outcome::Violation(_)));
}
