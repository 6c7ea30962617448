//! TLS for NBD's STARTTLS (rustls, X.509 certificates): loading the server's
//! certificate and key, optional verification of client certificates against a
//! CA, and a TLS session shared by a connection's reader and writer threads.
//!
//! The server's reader and workers run on different threads, so the one TLS
//! session sits behind a mutex that is never held while blocked in a socket
//! read: [`TlsReader`] reads ciphertext without the lock, then feeds it in under
//! it; [`TlsWriter`] encrypts and sends under it. This module must never hand out
//! plaintext before the TLS handshake has finished.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection};
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// How a server offers TLS.
#[derive(Debug, Clone)]
pub struct Tls {
    pub config: Arc<ServerConfig>,
    /// Refuse every option but STARTTLS and ABORT until TLS is up (the
    /// protocol's "forced TLS" mode).
    pub require: bool,
}

/// Build a rustls server configuration from PEM files. With `client_ca`,
/// clients must present a certificate signed by that CA.
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> Result<Arc<ServerConfig>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            format!(
                "{}: cannot read the certificate chain (PEM): {e}",
                cert.display()
            )
        })?;
    if certs.is_empty() {
        return Err(format!(
            "{}: no certificate in this PEM file",
            cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("{}: cannot read the private key (PEM): {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup failed: {e}"))?;
    let builder = match client_ca {
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            let cas = CertificateDer::pem_file_iter(ca)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("{}: cannot read the client CA (PEM): {e}", ca.display()))?;
            for c in cas {
                roots
                    .add(c)
                    .map_err(|e| format!("{}: not a usable CA certificate: {e}", ca.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| {
                    format!("{}: cannot verify clients with this CA: {e}", ca.display())
                })?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let config = builder.with_single_cert(certs, key).map_err(|e| {
        format!(
            "{}: the private key does not fit this certificate, or one of them is unusable: {e}",
            cert.display()
        )
    })?;
    Ok(Arc::new(config))
}

/// A socket that can be cloned into a reading and a writing handle.
pub trait Socket: Read + Write + Send + Sized {
    fn try_clone_socket(&self) -> io::Result<Self>;
}

/// Run the TLS handshake on `sock`, then split the session into a reader and a
/// writer that can live on different threads.
pub fn accept<S: Socket>(
    config: Arc<ServerConfig>,
    mut sock: S,
) -> io::Result<(TlsReader<S>, TlsWriter<S>)> {
    let mut conn = ServerConnection::new(config).map_err(io::Error::other)?;
    while conn.is_handshaking() {
        let (rd, wr) = conn.complete_io(&mut sock)?;
        if rd == 0 && wr == 0 && conn.is_handshaking() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "client left during the TLS handshake",
            ));
        }
    }
    let shared = Arc::new(Mutex::new(conn));
    let wsock = sock.try_clone_socket()?;
    Ok((
        TlsReader {
            tls: shared.clone(),
            sock,
            raw: vec![0; 18 << 10],
            pos: 0,
            len: 0,
        },
        TlsWriter {
            tls: shared,
            sock: wsock,
        },
    ))
}

/// The reading half of a TLS session.
pub struct TlsReader<S> {
    tls: Arc<Mutex<ServerConnection>>,
    sock: S,
    /// Ciphertext read from the socket and not yet given to rustls.
    raw: Vec<u8>,
    pos: usize,
    len: usize,
}

/// The writing half of a TLS session.
pub struct TlsWriter<S> {
    tls: Arc<Mutex<ServerConnection>>,
    sock: S,
}

impl<S> std::fmt::Debug for TlsReader<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsReader")
    }
}

impl<S> std::fmt::Debug for TlsWriter<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsWriter")
    }
}

impl<S: Read + Write> Read for TlsReader<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            {
                let mut c = self.tls.lock().unwrap_or_else(|p| p.into_inner());
                match c.reader().read(buf) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
            }
            if self.pos == self.len {
                // Blocking read without the lock, so writers can go on.
                let n = self.sock.read(&mut self.raw)?;
                if n == 0 {
                    return Ok(0);
                }
                self.pos = 0;
                self.len = n;
            }
            let mut c = self.tls.lock().unwrap_or_else(|p| p.into_inner());
            let mut pending = &self.raw[self.pos..self.len];
            let used = c.read_tls(&mut pending)?;
            self.pos += used;
            c.process_new_packets().map_err(io::Error::other)?;
            // Alerts or key updates the peer's data called for.
            while c.wants_write() {
                c.write_tls(&mut self.sock)?;
            }
        }
    }
}

impl<S: Write> Write for TlsWriter<S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut c = self.tls.lock().unwrap_or_else(|p| p.into_inner());
        let n = c.writer().write(buf)?;
        while c.wants_write() {
            c.write_tls(&mut self.sock)?;
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
