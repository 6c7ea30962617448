//! The metrics endpoint's HTTP side: which address it may listen on, the
//! bind (done before any array is opened, so a bad address or a port in use
//! stops `serve` with nothing written), and a thread answering `GET
//! /metrics` until the server stops.
//!
//! It decides who may connect: loopback addresses only, unless the operator
//! says otherwise (`--metrics-allow-remote`), because the endpoint has no
//! authentication and names member devices and the load on them. It must
//! never answer anything but the metrics text, a pointer to it, or an HTTP
//! error; it serves nothing that changes state.

use super::{render, Sources};
use anyhow::{anyhow, bail, Context, Result};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// The Prometheus text format, version 0.0.4 (what every Prometheus scrapes).
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// How often the serving thread looks whether the server is stopping.
const POLL: Duration = Duration::from_millis(200);

/// The flags of `serve` for the metrics endpoint.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct MetricsArgs {
    /// Publish metrics for Prometheus at http://ADDR/metrics (text format
    /// 0.0.4), e.g. 127.0.0.1:9310. Loopback addresses only unless
    /// --metrics-allow-remote.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// Let --metrics listen on a non-loopback address. The endpoint has no
    /// authentication: anyone who can reach it sees member paths and load.
    #[arg(long)]
    pub metrics_allow_remote: bool,
}

/// The bound endpoint, before it serves.
#[derive(Debug)]
pub struct MetricsServer {
    listener: TcpListener,
    addr: SocketAddr,
}

/// Bind the metrics endpoint asked for by the flags or else the
/// configuration file (`metrics = "ADDR"`, `metrics_allow_remote = true`).
/// `None` when none is asked for.
pub fn bind(
    a: &MetricsArgs,
    config_addr: Option<&str>,
    config_remote: bool,
) -> Result<Option<MetricsServer>> {
    let Some(addr) = a.metrics.as_deref().or(config_addr) else {
        return Ok(None);
    };
    // Named as the user gave it: the flag, or the configuration's key.
    let what = if a.metrics.is_some() {
        "--metrics"
    } else {
        "metrics ="
    };
    let sa: SocketAddr = addr.parse().map_err(|_| {
        anyhow!("{what} {addr}: give an IP address and port, e.g. 127.0.0.1:9310 or [::1]:9310")
    })?;
    let allowed = sa.ip().is_loopback() || a.metrics_allow_remote || config_remote;
    if !allowed {
        bail!(
            "{what} {sa}: not a loopback address. The metrics endpoint has no \
             authentication and shows member device paths, array state and load to anyone \
             who can reach it; give 127.0.0.1:PORT, or add --metrics-allow-remote (or \
             metrics_allow_remote = true) to publish it on {sa} anyway. Nothing was started."
        );
    }
    let listener = TcpListener::bind(sa).map_err(|e| {
        let why = if e.kind() == std::io::ErrorKind::AddrInUse {
            "another program (another `raidlab serve`, an exporter) has the port: give another \
             port"
        } else {
            "give an address of this machine and a port you may use"
        };
        anyhow!(
            "{what} {sa}: cannot listen for metrics ({e}): {why}; nothing was started and no \
             array was opened"
        )
    })?;
    let addr = listener.local_addr().unwrap_or(sa);
    Ok(Some(MetricsServer { listener, addr }))
}

impl MetricsServer {
    /// Serve `GET /metrics` from `sources` on a thread of its own until `stop`
    /// is set; join the handle to wait for it.
    pub fn start(self, sources: Sources, stop: &'static AtomicBool) -> Result<JoinHandle<()>> {
        let addr = self.addr;
        let http = tiny_http::Server::from_listener(self.listener, None)
            .map_err(|e| anyhow!("cannot serve metrics on {addr}: {e}"))?;
        eprintln!("raidlab: metrics for Prometheus at http://{addr}/metrics");
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match http.recv_timeout(POLL) {
                        Ok(Some(request)) => answer(request, &sources),
                        Ok(None) => {}
                        Err(e) => {
                            eprintln!("raidlab serve: metrics endpoint: {e}");
                            std::thread::sleep(POLL);
                        }
                    }
                }
            })
            .context("cannot start the metrics thread")?;
        Ok(thread)
    }
}

fn header(name: &str, value: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes())
        .expect("constant header names and values are valid")
}

fn answer(request: tiny_http::Request, sources: &Sources) {
    use tiny_http::{Method, Response};
    let path = request.url().split('?').next().unwrap_or("");
    let text = |code: u16, body: String| {
        Response::from_string(body)
            .with_status_code(code)
            .with_header(header("Content-Type", "text/plain; charset=utf-8"))
    };
    let response = match (request.method(), path) {
        (Method::Get | Method::Head, "/metrics") => {
            Response::from_string(render(sources)).with_header(header("Content-Type", CONTENT_TYPE))
        }
        (Method::Get | Method::Head, "/") => {
            text(200, "raidlab serve: metrics at /metrics\n".into())
        }
        (Method::Get | Method::Head, _) => text(404, "not found: metrics are at /metrics\n".into()),
        _ => text(405, "only GET and HEAD are served here\n".into())
            .with_header(header("Allow", "GET, HEAD")),
    };
    // A client that went away is no concern of the server's.
    let _ = request.respond(response);
}
