//! Where clients connect: the Unix socket (a stale one left by a killed
//! server removed, a live one refused), TCP on loopback or a given address
//! (a warning when it is reachable without required TLS), and TLS from the
//! flags or the configuration file. Bound before any export starts, so a
//! port in use stops serve with nothing written; the accepting itself is
//! `raidlab_nbd::listen::run`'s.
//!
//! Must never say it listens before the exports have started (the lines are
//! kept in `Bound::said` for `run` to print), nor start an export.

use super::config::Config;
use crate::cli::ServeArgs;
use anyhow::{bail, Context, Result};
use raidlab_nbd::listen::Listener;
use raidlab_nbd::tls::Tls;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

/// The NBD port registered with IANA.
const DEFAULT_PORT: u16 = 10809;

/// The socket path used when none is given: in the user's runtime directory.
fn default_socket() -> PathBuf {
    crate::control::per_user("raidlab-nbd", ".sock")
}

/// TLS settings from the flags, else the configuration file.
pub(super) fn tls(a: &ServeArgs, c: &Config) -> Result<Option<Tls>> {
    let cert = a.tls_cert.clone().or(c.tls_cert.clone());
    let key = a.tls_key.clone().or(c.tls_key.clone());
    let ca = a.tls_client_ca.clone().or(c.tls_client_ca.clone());
    let require = a.tls_require || c.tls_require.unwrap_or(false);
    match (cert, key) {
        (Some(cert), Some(key)) => {
            let config = raidlab_nbd::tls::server_config(&cert, &key, ca.as_deref())
                .map_err(|e| anyhow::anyhow!("cannot set up TLS: {e}"))?;
            eprintln!(
                "raidlab: TLS offered (STARTTLS){}{}",
                if require { ", required" } else { ", optional" },
                if ca.is_some() { ", client certificates verified" } else { "" }
            );
            Ok(Some(Tls { config, require }))
        }
        (None, None) if ca.is_none() && !require => Ok(None),
        _ => bail!("TLS needs both a certificate and its key (--tls-cert and --tls-key, or tls_cert and tls_key in the configuration)"),
    }
}

/// Every listener asked for, bound.
pub(super) struct Bound {
    pub(super) listeners: Vec<Listener>,
    /// Socket files to remove at the end.
    pub(super) files: Vec<PathBuf>,
    /// Where clients connect, said once the exports have started (a serve
    /// that fails to start one must not have said it listens).
    pub(super) said: Vec<String>,
}

/// Bind every listener asked for.
pub(super) fn bind(a: &ServeArgs, c: &Config, tls_required: bool) -> Result<Bound> {
    let mut out = Vec::new();
    let mut files = Vec::new();
    let mut said = Vec::new();
    let listen = a.listen.clone().or(c.listen.clone());
    let tcp = a.tcp || c.tcp.unwrap_or(false);
    let port = a.port.or(c.port).unwrap_or(DEFAULT_PORT);
    let socket = a.socket.clone().or(c.socket.clone());
    if let Some(addr) = &listen {
        let sa: SocketAddr = addr.parse().with_context(|| {
            format!("--listen {addr}: give an address and port, e.g. 0.0.0.0:10809 or [::]:10809")
        })?;
        if !sa.ip().is_loopback() && !tls_required {
            eprintln!(
                "raidlab: warning: serving on {sa} without required TLS: anyone who can reach this address can read and write the exports, and the data crosses the network in clear (use --tls-cert, --tls-key and --tls-require)"
            );
        }
        out.push(tcp_listener(sa, &mut said)?);
    } else if tcp {
        out.push(tcp_listener(
            SocketAddr::from(([127, 0, 0, 1], port)),
            &mut said,
        )?);
    }
    if socket.is_some() || out.is_empty() {
        let p = socket.unwrap_or_else(default_socket);
        if p.exists() {
            if UnixStream::connect(&p).is_ok() {
                bail!(
                    "{}: another server is listening on this socket; stop it or give another --socket",
                    p.display()
                );
            }
            // Left behind by a server that was killed: nobody listens on it.
            std::fs::remove_file(&p)
                .with_context(|| format!("cannot remove the stale socket {}", p.display()))?;
        }
        let l = crate::socket_file::bind_listening(&p)
            .with_context(|| format!("cannot listen on the Unix socket {}", p.display()))?;
        said.push(format!(
            "raidlab: listening on unix socket {} (e.g. nbdinfo 'nbd+unix:///?socket={}')",
            p.display(),
            p.display()
        ));
        out.push(Listener::Unix(l));
        files.push(p);
    }
    Ok(Bound {
        listeners: out,
        files,
        said,
    })
}

fn tcp_listener(sa: SocketAddr, said: &mut Vec<String>) -> Result<Listener> {
    let l = TcpListener::bind(sa).with_context(|| {
        format!("cannot listen on {sa}: is another NBD server using the port? (try --port)")
    })?;
    said.push(format!(
        "raidlab: listening on tcp {sa} (e.g. nbdinfo nbd://{sa})"
    ));
    Ok(Listener::Tcp(l))
}
