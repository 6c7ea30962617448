//! `raidlab serve --http ADDR`: the live status page and its JSON.
//!
//! Decides who may see and do what over HTTP: the address listened on
//! (loopback unless `--http-allow-remote`; a port alone means 127.0.0.1),
//! the `Host` names accepted on loopback (so a DNS-rebinding site cannot read
//! the page), and whether a management request is carried out: only with the
//! token given at start (`--http-token`/`--http-token-file`), compared in
//! constant time, carried in a header a cross-site form cannot send
//! (`X-Raidlab-Token` or `Authorization: Bearer`), with a JSON body, and not
//! from another origin (`Origin`, `Sec-Fetch-Site`).
//!
//! It must never change an array itself: a permitted action is sent to the
//! server's own control socket, so the page's fail, add and check are exactly
//! the `raidlab fail|add|check` verbs, with their checks and refusals. What
//! the page shows is in `status.rs`, the page itself in `page.html` (one
//! document, inline CSS and script, nothing from other hosts).

mod events;
mod member_io;
mod status;

pub use events::Events;
pub(crate) use member_io::member_counters;

use crate::cli::ServeArgs;
use crate::cmd::cache_live::ManagedCache;
use crate::cmd::live::Managed;
use crate::control::{self, Command};
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use status::Page;
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tiny_http::{Header, Method, Request, Response};

/// The page: one self-contained document.
const PAGE: &str = include_str!("page.html");

/// Requests served at once; more get 503 (the page polls once a second, so
/// this is many pages or a misbehaving client).
const MAX_CONCURRENT: usize = 32;

/// How long an action's answer is waited for before the page is told it
/// carries on in the server (a check runs for minutes).
const ACTION_WAIT: Duration = Duration::from_secs(5);

/// What `--http*` asked for.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub addr: SocketAddr,
    token: Option<String>,
}

/// Read and check the `--http*` flags (nothing is bound yet).
pub fn options(a: &ServeArgs) -> Result<Option<HttpOptions>> {
    let Some(given) = &a.http else {
        return Ok(None);
    };
    let addr = parse_addr(given)?;
    if !addr.ip().is_loopback() && !a.http_allow_remote {
        bail!(
            "--http {given}: {} is not a loopback address, and the status page is served over plain HTTP (no TLS): \
             anyone on the network could read it and, with --http-token, see the token cross in clear; \
             listen on 127.0.0.1 (the default for a port alone) and reach it over an SSH tunnel, or add \
             --http-allow-remote to accept that; nothing was started",
            addr.ip()
        );
    }
    let token = match (&a.http_token, &a.http_token_file) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(f)) => {
            let text = std::fs::read_to_string(f)
                .with_context(|| format!("--http-token-file: cannot read {}", f.display()))?;
            Some(text.lines().next().unwrap_or("").trim().to_string())
        }
        (None, None) => None,
    };
    if let Some(t) = &token {
        // Short tokens can be guessed over the network at HTTP speed.
        if t.len() < 16 {
            bail!("--http-token: give at least 16 characters (e.g. `openssl rand -hex 16`); nothing was started");
        }
        if t.bytes().any(|b| !(0x21..0x7f).contains(&b)) {
            bail!(
                "--http-token: printable ASCII without spaces only (it travels in an HTTP header)"
            );
        }
    }
    Ok(Some(HttpOptions { addr, token }))
}

/// `PORT`, `HOST:PORT`, `[V6]:PORT` or `localhost:PORT`.
fn parse_addr(s: &str) -> Result<SocketAddr> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    if let Some(port) = s.strip_prefix("localhost:") {
        if let Ok(port) = port.parse::<u16>() {
            return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
        }
    }
    s.parse().with_context(|| {
        format!("--http {s}: give a port (8080, on 127.0.0.1) or an address and port (127.0.0.1:8080, [::1]:8080)")
    })
}

/// The page's listener, bound before any array is started (a port in use
/// stops `serve` with nothing written).
pub struct Bound {
    server: tiny_http::Server,
    opts: HttpOptions,
}

impl std::fmt::Debug for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bound")
            .field("addr", &self.opts.addr)
            .finish()
    }
}

pub fn bind(opts: HttpOptions) -> Result<Bound> {
    let l = TcpListener::bind(opts.addr).with_context(|| {
        format!(
            "--http {}: cannot listen there (is another program using the port? give another); nothing was started",
            opts.addr
        )
    })?;
    let server = tiny_http::Server::from_listener(l, None)
        .map_err(|e| anyhow::anyhow!("--http {}: {e}", opts.addr))?;
    Ok(Bound { server, opts })
}

struct Ctx {
    page: Page,
    token: Option<String>,
    addr: SocketAddr,
    control: PathBuf,
}

impl Bound {
    /// Serve the page until `stop`: one thread samples the figures every
    /// second, one accepts requests (each answered on its own thread).
    pub fn start(
        self,
        arrays: Arc<Vec<Managed>>,
        caches: Arc<Vec<ManagedCache>>,
        events: Arc<Events>,
        control: PathBuf,
        stop: &'static AtomicBool,
    ) -> JoinHandle<()> {
        let addr = self.opts.addr;
        eprintln!(
            "raidlab: status page on http://{addr}/ ({})",
            if self.opts.token.is_some() {
                "management actions need the token"
            } else {
                "read-only: no --http-token"
            }
        );
        let ctx = Arc::new(Ctx {
            page: Page::new(arrays, caches, events, self.opts.token.is_some()),
            token: self.opts.token,
            addr,
            control,
        });
        let c = ctx.clone();
        let sampler = std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                c.page.sample();
                // In slices, so a stop is seen within 100 ms.
                for _ in 0..10 {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        });
        let server = self.server;
        std::thread::spawn(move || {
            let busy = Arc::new(AtomicUsize::new(0));
            while !stop.load(Ordering::Relaxed) {
                let rq = match server.recv_timeout(Duration::from_millis(100)) {
                    Ok(Some(rq)) => rq,
                    Ok(None) => continue,
                    Err(e) => {
                        ctx.page.events.say(&format!("status page: {e}"));
                        std::thread::sleep(Duration::from_millis(100));
                        continue;
                    }
                };
                if busy.fetch_add(1, Ordering::AcqRel) >= MAX_CONCURRENT {
                    busy.fetch_sub(1, Ordering::AcqRel);
                    let _ = rq.respond(text(503, "too many requests at once; try again"));
                    continue;
                }
                let (ctx, busy) = (ctx.clone(), busy.clone());
                std::thread::spawn(move || {
                    handle(rq, &ctx);
                    busy.fetch_sub(1, Ordering::AcqRel);
                });
            }
            let _ = sampler.join();
        })
    }
}

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("ASCII header")
}

type Reply = Response<std::io::Cursor<Vec<u8>>>;

/// Headers every answer carries: nothing cached, nothing sniffed, never in
/// another site's frame (its buttons could be clicked through it).
fn with_common(r: Reply, content_type: &str) -> Reply {
    r.with_header(header("Content-Type", content_type))
        .with_header(header("Cache-Control", "no-store"))
        .with_header(header("X-Content-Type-Options", "nosniff"))
        .with_header(header("X-Frame-Options", "DENY"))
        .with_header(header("Referrer-Policy", "no-referrer"))
}

fn text(code: u16, msg: &str) -> Reply {
    with_common(
        Response::from_string(format!("{msg}\n")).with_status_code(code),
        "text/plain; charset=utf-8",
    )
}

fn json_reply(code: u16, v: &serde_json::Value) -> Reply {
    with_common(
        Response::from_string(v.to_string()).with_status_code(code),
        "application/json",
    )
}

fn get<'a>(rq: &'a Request, name: &str) -> Option<&'a str> {
    rq.headers()
        .iter()
        .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str())
}

fn handle(mut rq: Request, ctx: &Ctx) {
    let path = rq.url().split('?').next().unwrap_or("").to_string();
    if let Err(why) = host_allowed(get(&rq, "Host"), ctx.addr) {
        let _ = rq.respond(text(403, &why));
        return;
    }
    let reply = match (rq.method(), path.as_str()) {
        (Method::Get | Method::Head, "/") => {
            with_common(Response::from_string(PAGE), "text/html; charset=utf-8")
                // Belt and braces for "no assets from other hosts": the browser may
                // load nothing but this document and fetch only from this server.
                .with_header(header(
                    "Content-Security-Policy",
                    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
             connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; \
             frame-ancestors 'none'",
                ))
        }
        (Method::Get | Method::Head, "/api/status") => json_reply(200, &ctx.page.json()),
        (Method::Post, "/api/action") => action(&mut rq, ctx),
        (_, "/" | "/api/status" | "/api/action") => text(405, "method not allowed"),
        _ => text(404, "not found: the page is /, its figures /api/status"),
    };
    let _ = rq.respond(reply);
}

/// On a loopback address only loopback names are accepted as `Host`: a page
/// of another site whose name was made to resolve to 127.0.0.1 (DNS
/// rebinding) sends its own name and is refused. A remote listener accepts
/// any name (there is no list of them to check against).
fn host_allowed(host: Option<&str>, addr: SocketAddr) -> Result<(), String> {
    if !addr.ip().is_loopback() {
        return Ok(());
    }
    let Some(host) = host else {
        return Err("a Host header is required".into());
    };
    let port = addr.port().to_string();
    let ok = ["127.0.0.1", "localhost", "[::1]"]
        .iter()
        .any(|n| host == format!("{n}:{port}") || (port == "80" && host == *n));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "Host {host:?} refused: this status page answers to 127.0.0.1:{port}, localhost:{port} or [::1]:{port} only"
        ))
    }
}

/// Compare without stopping at the first difference, so the time taken says
/// nothing about how much of a guess was right.
fn same_token(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// Whether a management request may be carried out: Err(status, why).
fn authorize(rq: &Request, ctx: &Ctx) -> Result<(), (u16, String)> {
    let Some(token) = &ctx.token else {
        return Err((
            403,
            "this status page is read-only: `raidlab serve` was started without --http-token; nothing was changed".into(),
        ));
    };
    // Another site's page: a browser says so in these headers, which a page
    // cannot change. Absent (curl, scripts) they prove nothing either way;
    // the header check below is what stops a plain cross-site form.
    if let Some(site) = get(rq, "Sec-Fetch-Site") {
        if site != "same-origin" && site != "none" {
            return Err((
                403,
                format!("cross-site request refused (Sec-Fetch-Site: {site}); nothing was changed"),
            ));
        }
    }
    if let Some(origin) = get(rq, "Origin") {
        let host = get(rq, "Host").unwrap_or("");
        if origin != format!("http://{host}") {
            return Err((
                403,
                format!("request from another origin ({origin}) refused; nothing was changed"),
            ));
        }
    }
    let given = get(rq, "X-Raidlab-Token").or_else(|| {
        get(rq, "Authorization").and_then(|v| v.strip_prefix("Bearer ").map(str::trim))
    });
    let Some(given) = given else {
        return Err((
            403,
            "the token is missing: send it in an X-Raidlab-Token (or Authorization: Bearer) header; form fields are not accepted, so another site's form cannot act; nothing was changed".into(),
        ));
    };
    if !same_token(given.as_bytes(), token.as_bytes()) {
        return Err((403, "wrong token; nothing was changed".into()));
    }
    let json = get(rq, "Content-Type").is_some_and(|c| {
        c.split(';')
            .next()
            .is_some_and(|t| t.trim() == "application/json")
    });
    if !json {
        return Err((
            415,
            "send the action as JSON (Content-Type: application/json); nothing was changed".into(),
        ));
    }
    Ok(())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Action {
    /// `fail`, `add` (a device as a hot spare, or into a missing role) or
    /// `check`.
    action: String,
    /// The export the array is served as.
    export: String,
    /// The member to fail, or the device to add.
    #[serde(default)]
    device: Option<String>,
}

fn refused(code: u16, why: &str) -> Reply {
    json_reply(code, &serde_json::json!({ "error": why }))
}

fn action(rq: &mut Request, ctx: &Ctx) -> Reply {
    if let Err((code, why)) = authorize(rq, ctx) {
        ctx.page
            .events
            .say(&format!("status page: action refused: {why}"));
        return refused(code, &why);
    }
    let mut body = String::new();
    if rq.as_reader().take(8192).read_to_string(&mut body).is_err() {
        return refused(400, "the request body is not UTF-8 text");
    }
    let a: Action = match serde_json::from_str(&body) {
        Ok(a) => a,
        Err(e) => {
            return refused(
                400,
                &format!("bad action ({e}): give {{\"action\": \"fail|add|check\", \"export\": NAME, \"device\": PATH}}"),
            )
        }
    };
    let Some(m) = ctx.page.arrays.iter().find(|m| m.export == a.export) else {
        return refused(
            404,
            &format!(
                "no array is served as export {:?}; nothing was changed",
                a.export
            ),
        );
    };
    let device = || {
        a.device
            .as_deref()
            .filter(|d| !d.is_empty())
            .map(|d| control::absolute(Path::new(d)).display().to_string())
            .ok_or_else(|| format!("{} needs a device; nothing was changed", a.action))
    };
    let command = match a.action.as_str() {
        "fail" => device().map(|member| Command::Fail {
            member,
            wait: false,
            max_rate: None,
        }),
        "add" => device().map(|new| Command::Add {
            new,
            force: false,
            rebuild: true,
            max_rate: None,
            re_add: false,
        }),
        "check" => Ok(Command::Check {
            repair: false,
            json: false,
            max_rate: None,
        }),
        other => Err(format!(
            "unknown action {other:?}: fail, add or check; nothing was changed"
        )),
    };
    let command = match command {
        Ok(c) => c,
        Err(why) => return refused(400, &why),
    };
    ctx.page.events.say(&format!(
        "status page: {} asked for export {:?}{}",
        a.action,
        a.export,
        a.device
            .as_deref()
            .map(|d| format!(" ({d})"))
            .unwrap_or_default()
    ));
    // The array is named to the control socket by its members, as the
    // command line names it.
    let members: Vec<PathBuf> = m.live.with_assembly(|asm| {
        asm.members
            .iter()
            .map(|x| PathBuf::from(&x.device.path))
            .collect()
    });
    let socket = ctx.control.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = control::call(&socket, &members, command, &mut |_| {});
        let _ = tx.send(r);
    });
    match rx.recv_timeout(ACTION_WAIT) {
        Ok(Ok((stdout, exit))) => json_reply(
            200,
            &serde_json::json!({ "ok": exit == 0, "exit": exit, "message": stdout.trim() }),
        ),
        Ok(Err(e)) => refused(409, &format!("{e:#}")),
        Err(_) => json_reply(
            202,
            &serde_json::json!({ "ok": true, "message": format!("{} started; it carries on in the server (its progress shows here)", a.action) }),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(parse_addr("8080").unwrap().to_string(), "127.0.0.1:8080");
        assert_eq!(
            parse_addr("localhost:81").unwrap().to_string(),
            "127.0.0.1:81"
        );
        assert_eq!(parse_addr("[::1]:81").unwrap().to_string(), "[::1]:81");
        assert!(parse_addr("nowhere").is_err());
    }

    #[test]
    fn hosts_on_loopback() {
        let a: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert!(host_allowed(Some("127.0.0.1:8080"), a).is_ok());
        assert!(host_allowed(Some("localhost:8080"), a).is_ok());
        assert!(host_allowed(Some("evil.example:8080"), a).is_err());
        assert!(host_allowed(Some("127.0.0.1:9090"), a).is_err());
        assert!(host_allowed(None, a).is_err());
        let r: SocketAddr = "192.0.2.1:8080".parse().unwrap();
        assert!(host_allowed(Some("storage.example:8080"), r).is_ok());
    }

    #[test]
    fn tokens() {
        assert!(same_token(b"0123456789abcdef", b"0123456789abcdef"));
        assert!(!same_token(b"0123456789abcdef", b"0123456789abcdeg"));
        assert!(!same_token(b"0123456789abcdef", b"0123456789abcde"));
    }
}
