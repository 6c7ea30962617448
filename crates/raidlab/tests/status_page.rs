//! `raidlab serve --http`: the status page in headless Chromium (one page
//! instance, driven over the DevTools protocol, redraws without a reload
//! when a member fails and the hot spare takes over), the management
//! token and the cross-site checks, the refusals at start (non-loopback
//! address, port in use: nothing written), the JSON's figures moving when
//! a client writes over NBD, and `detail --watch`.
//!
//! Loopback only; every server and browser is killed when a test ends,
//! passed or not. Without Chromium the browser test says SKIPPED, under
//! CI=true it fails (scripts/test.sh installs Chromium).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../../raidlab-report/tests/chromium/mod.rs"]
mod chromium;

const TOKEN: &str = "s3cret-token-for-the-test-0123";

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_raidlab")
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("cannot start a command");
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A RAID 5 of three members and one hot spare, absolute paths.
fn raid5_with_spare(dir: &Path) -> Vec<PathBuf> {
    let paths: Vec<PathBuf> = ["m0", "m1", "m2", "m3"]
        .iter()
        .map(|m| dir.join(m))
        .collect();
    run(Command::new(bin())
        .args([
            "create",
            "-l",
            "5",
            "-c",
            "64K",
            "--member-size",
            "24M",
            "-x",
            "1",
        ])
        .args(&paths));
    paths
}

/// A port nobody listens on now (the kernel's pick, released at once).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running `raidlab serve --http`; killed if the test ends without stopping it.
struct Serve {
    child: Option<Child>,
    port: u16,
    socket: PathBuf,
    run_dir: PathBuf,
}

impl Serve {
    fn start(dir: &Path, members: &[PathBuf], extra: &[&str]) -> Serve {
        let port = free_port();
        let socket = dir.join("s.sock");
        let run_dir = dir.join("run");
        let child = Command::new(bin())
            .env("RAIDLAB_RUN_DIR", &run_dir)
            .arg("serve")
            .arg("--socket")
            .arg(&socket)
            .arg("--http")
            .arg(format!("127.0.0.1:{port}"))
            .args(extra)
            .args(members)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start raidlab serve");
        let mut s = Serve {
            child: Some(child),
            port,
            socket,
            run_dir,
        };
        let t = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err()
            || UnixStream::connect(&s.socket).is_err()
        {
            if let Some(st) = s.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                let mut err = String::new();
                let _ = s
                    .child
                    .take()
                    .and_then(|mut c| c.stderr.take())
                    .map(|mut e| e.read_to_string(&mut err));
                panic!("raidlab serve exited at start ({st}): {err}");
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "raidlab serve did not listen within 30 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }

    fn status(&self) -> serde_json::Value {
        let (code, body) = http(self.port, "GET", "/api/status", &[], "");
        assert_eq!(code, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    /// SIGTERM: drain, flush, mark clean; must exit 0.
    fn stop(mut self) -> String {
        let mut c = self.child.take().expect("server already stopped");
        // SAFETY: kill has no memory-safety preconditions; the pid is our
        // child, not yet reaped, so it cannot name another process.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let mut err = String::new();
        if let Some(mut e) = c.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let st = c.wait().unwrap();
        assert!(st.success(), "raidlab serve exited with {st}:\n{err}");
        err
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One HTTP/1.1 request on its own connection: (status, body).
fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req += &format!("{k}: {v}\r\n");
    }
    req += "\r\n";
    req += body;
    s.write_all(req.as_bytes()).unwrap();
    // Headers, then Content-Length bytes of body (Chromium's DevTools
    // server keeps the connection open whatever the request says).
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") {
        assert_eq!(
            s.read(&mut byte).unwrap(),
            1,
            "connection closed in the headers: {raw:?}"
        );
        raw.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&raw).into_owned();
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {head:?}"));
    let len = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("content-length")
            .then(|| v.trim().parse::<usize>().ok())?
    });
    let mut body = Vec::new();
    match len {
        Some(n) => {
            body.resize(n, 0);
            s.read_exact(&mut body).unwrap();
        }
        None => {
            s.read_to_end(&mut body).unwrap();
        }
    }
    let body = String::from_utf8_lossy(&body).into_owned();
    (code, body)
}

fn member_state(v: &serde_json::Value, device: &Path) -> String {
    v["arrays"][0]["detail"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["device"] == device.display().to_string())
        .map(|m| m["state"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

/// Headless Chromium with its DevTools websocket, killed on drop.
struct Browser {
    child: Child,
    ws: tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>,
    next: u64,
}

impl Browser {
    fn start(bin: &Path, profile: &Path) -> Browser {
        // Not under timeout(1): killing it would leave the browser running;
        // the browser is killed directly when the test ends.
        let mut child = Command::new(bin)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--hide-scrollbars",
                "--window-size=1280,1000",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run chromium");
        // Chromium says where its DevTools listen on stderr; the rest of
        // stderr is drained by a thread so the browser never blocks on it.
        let mut err = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut b = [0u8; 4096];
            let mut sent = false;
            while let Ok(n) = err.read(&mut b) {
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&b[..n]);
                if !sent {
                    let text = String::from_utf8_lossy(&buf);
                    if let Some(i) = text.find("ws://") {
                        if let Some(end) = text[i..].find('\n') {
                            let _ = tx.send(text[i..i + end].trim().to_string());
                            sent = true;
                        }
                    }
                }
            }
        });
        let browser_ws = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("chromium did not say where its DevTools listen within 30 s");
        // The page target: from the browser's port, /json/list.
        let port: u16 = browser_ws
            .trim_start_matches("ws://127.0.0.1:")
            .split('/')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let t = Instant::now();
        let page_ws = loop {
            let (_, body) = http(port, "GET", "/json/list", &[], "");
            let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            if let Some(u) = v
                .as_array()
                .and_then(|a| a.iter().find(|t| t["type"] == "page"))
                .and_then(|t| t["webSocketDebuggerUrl"].as_str())
            {
                break u.to_string();
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "no page target: {body}"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        let (ws, _) = tungstenite::connect(page_ws.as_str()).expect("DevTools websocket");
        if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        }
        Browser { child, ws, next: 1 }
    }

    /// Send one DevTools command and wait for its answer (events between
    /// are skipped: none are enabled).
    fn call(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let id = self.next;
        self.next += 1;
        let msg = serde_json::json!({"id": id, "method": method, "params": params});
        self.ws
            .send(tungstenite::Message::Text(msg.to_string().into()))
            .unwrap();
        loop {
            let m = self.ws.read().expect("DevTools answer");
            if let tungstenite::Message::Text(t) = m {
                let v: serde_json::Value = serde_json::from_str(t.as_str()).unwrap();
                if v["id"] == id {
                    assert!(v.get("error").is_none(), "{method}: {v}");
                    return v["result"].clone();
                }
            }
        }
    }

    /// Evaluate `js` in the page; its value (JSON-serialisable).
    fn eval(&mut self, js: &str) -> serde_json::Value {
        let r = self.call(
            "Runtime.evaluate",
            serde_json::json!({"expression": js, "returnByValue": true, "awaitPromise": true}),
        );
        r["result"]["value"].clone()
    }

    /// Poll `js` until `ok` says yes; panics with the last value after `limit`.
    fn wait_for(
        &mut self,
        what: &str,
        js: &str,
        limit: Duration,
        ok: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let t = Instant::now();
        loop {
            let v = self.eval(js);
            if ok(&v) {
                return v;
            }
            assert!(
                t.elapsed() < limit,
                "{what}: not within {limit:?}; the page shows {v}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the page's script has drawn: each member row's device and state,
/// the array's state, and the time of the last redraw.
const SHOWN: &str = r#"JSON.stringify({
  updated: document.body.dataset.updated || null,
  state: (document.querySelector("section.array") || {dataset: {}}).dataset.state || null,
  members: [...document.querySelectorAll("tr.member[data-device]")].map(r => [r.dataset.device, r.dataset.state]),
  charts: document.querySelectorAll("section.array svg.chart").length,
  mark: window.__sameInstance || null
})"#;

fn shown(v: &serde_json::Value) -> serde_json::Value {
    serde_json::from_str(v.as_str().unwrap_or("{}")).unwrap_or_default()
}

fn state_of(v: &serde_json::Value, device: &Path) -> String {
    v["members"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m[0] == device.display().to_string())
        .and_then(|m| m[1].as_str())
        .unwrap_or("")
        .to_string()
}

#[test]
fn page_redraws_without_a_reload_when_a_member_fails_and_the_spare_takes_over() {
    let Some(chrome) = chromium::chromium_or_skip() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let m = raid5_with_spare(d.path());
    let srv = Serve::start(d.path(), &m, &["--http-token", TOKEN]);
    let mut b = Browser::start(&chrome, &d.path().join("profile"));
    b.call(
        "Page.navigate",
        serde_json::json!({"url": format!("http://127.0.0.1:{}/", srv.port)}),
    );
    // The script has drawn the array from /api/status (the HTML sent has
    // no member rows at all).
    let first = b.wait_for("the first drawing", SHOWN, Duration::from_secs(20), |v| {
        let v = shown(v);
        v["members"].as_array().is_some_and(|a| a.len() == 4)
    });
    let first = shown(&first);
    for p in &m[..3] {
        assert_eq!(state_of(&first, p), "active", "{first}");
    }
    assert_eq!(state_of(&first, &m[3]), "spare", "{first}");
    assert_eq!(first["state"], "clean", "{first}");
    // Marked in this page instance: a reload would lose it.
    b.eval("window.__sameInstance = 'still here'; 1");

    // Fail m1 with the page's own button, as a user with the token would.
    let clicked = b.eval(&format!(
        r#"window.confirm = () => true;
           sessionStorage.setItem("raidlab-token", {TOKEN:?});
           const row = [...document.querySelectorAll("tr.member")].find(r => r.dataset.device === {:?});
           row.querySelector("button").click(); "clicked""#,
        m[1].display().to_string()
    ));
    assert_eq!(clicked, "clicked");
    let after = b.wait_for(
        "m1 faulty and the spare taking its role",
        SHOWN,
        Duration::from_secs(30),
        |v| {
            let v = shown(v);
            state_of(&v, &m[1]) == "faulty"
                && matches!(state_of(&v, &m[3]).as_str(), "rebuilding" | "active")
        },
    );
    let after = shown(&after);
    assert_eq!(
        after["mark"], "still here",
        "the page was reloaded: {after}"
    );
    assert!(
        after["state"].as_str().unwrap().contains("degraded")
            || state_of(&after, &m[3]) == "active",
        "{after}"
    );
    // Once rebuilt, the spare is active and the array whole again, still in
    // the same page.
    let whole = b.wait_for("the spare active", SHOWN, Duration::from_secs(40), |v| {
        state_of(&shown(v), &m[3]) == "active"
    });
    let whole = shown(&whole);
    assert_eq!(whole["mark"], "still here", "{whole}");
    assert!(
        whole["charts"].as_u64().unwrap() > 0,
        "no charts drawn: {whole}"
    );
    // The event list shows what happened, newest first.
    let events = b.eval(r#"document.getElementById("events").innerText"#);
    let events = events.as_str().unwrap();
    assert!(events.contains("marked faulty"), "{events}");
    // For people: what the page looked like (target/status-page.png).
    let shot = b.call(
        "Page.captureScreenshot",
        serde_json::json!({"format": "png"}),
    );
    if let Some(png) = shot["data"].as_str() {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("status-page.png");
        let _ = std::fs::write(out, decode_base64(png));
    }
    drop(b);
    srv.stop();
}

/// Standard base64 (the screenshot DevTools sends).
fn decode_base64(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let bytes: Vec<u8> = s.bytes().filter(|&c| c != b'=' && c != b'\n').collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &c)| n | (u32::from(val(c)) << (18 - 6 * i)));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

#[test]
fn actions_need_the_token_in_a_header_from_the_same_origin() {
    let d = tempfile::tempdir().unwrap();
    let m = raid5_with_spare(d.path());
    let srv = Serve::start(d.path(), &m, &["--http-token", TOKEN]);
    let body = serde_json::json!({"action": "fail", "export": "array", "device": m[1]}).to_string();
    let json = ("Content-Type", "application/json");
    let right = ("X-Raidlab-Token", TOKEN);
    let origin = format!("http://127.0.0.1:{}", srv.port);
    // What is sent, its headers, and what the refusal must say.
    type Refusal<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a str);
    let refusals: Vec<Refusal> = vec![
        ("no token", vec![json], "token is missing"),
        (
            "wrong token",
            vec![json, ("X-Raidlab-Token", "s3cret-token-for-the-test-0124")],
            "wrong token",
        ),
        (
            "wrong bearer",
            vec![json, ("Authorization", "Bearer nope-nope-nope-nope")],
            "wrong token",
        ),
        // A plain cross-site form: no custom header, the token as a field.
        (
            "form",
            vec![("Content-Type", "application/x-www-form-urlencoded")],
            "token is missing",
        ),
        (
            "foreign origin",
            vec![json, right, ("Origin", "http://evil.example")],
            "another origin",
        ),
        (
            "cross-site fetch",
            vec![json, right, ("Sec-Fetch-Site", "cross-site")],
            "cross-site",
        ),
    ];
    for (what, headers, says) in refusals {
        let b = if what == "form" {
            format!(
                "token={TOKEN}&action=fail&export=array&device={}",
                m[1].display()
            )
        } else {
            body.clone()
        };
        let (code, text) = http(srv.port, "POST", "/api/action", &headers, &b);
        assert_eq!(code, 403, "{what}: {text}");
        assert!(text.contains(says), "{what}: {text}");
        assert!(text.contains("nothing was changed"), "{what}: {text}");
        assert_eq!(
            member_state(&srv.status(), &m[1]),
            "active",
            "{what} changed something"
        );
    }
    // A DNS-rebinding page: its own name in Host, even for reading.
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.write_all(b"GET /api/status HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 403"), "{out}");

    // The right token in the header, from the page's own origin: done.
    let (code, text) = http(
        srv.port,
        "POST",
        "/api/action",
        &[
            json,
            right,
            ("Origin", &origin),
            ("Sec-Fetch-Site", "same-origin"),
        ],
        &body,
    );
    assert_eq!(code, 200, "{text}");
    assert!(text.contains("marked faulty"), "{text}");
    assert_eq!(member_state(&srv.status(), &m[1]), "faulty");
    // The bearer form works too (scripts): start a check once the spare is
    // in.
    let t = Instant::now();
    while member_state(&srv.status(), &m[3]) != "active" {
        assert!(
            t.elapsed() < Duration::from_secs(40),
            "the spare was not rebuilt"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let bearer = format!("Bearer {TOKEN}");
    let check = serde_json::json!({"action": "check", "export": "array"}).to_string();
    let (code, text) = http(
        srv.port,
        "POST",
        "/api/action",
        &[json, ("Authorization", &bearer)],
        &check,
    );
    assert!(code == 200 || code == 202, "{code}: {text}");
    srv.stop();

    // Without a token the page is read-only, whatever is sent.
    let d = tempfile::tempdir().unwrap();
    let m = raid5_with_spare(d.path());
    let srv = Serve::start(d.path(), &m, &[]);
    let (code, text) = http(srv.port, "POST", "/api/action", &[json, right], &body);
    assert_eq!(code, 403, "{text}");
    assert!(text.contains("read-only"), "{text}");
    assert_eq!(member_state(&srv.status(), &m[1]), "active");
    assert_eq!(srv.status()["actions"], false);
    srv.stop();
}

#[test]
fn non_loopback_and_a_port_in_use_are_refused_with_nothing_written() {
    let d = tempfile::tempdir().unwrap();
    let m = raid5_with_spare(d.path());
    let before: Vec<Vec<u8>> = m.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let serve = |http: &str, extra: &[&str]| {
        Command::new(bin())
            .env("RAIDLAB_RUN_DIR", d.path().join("run"))
            .args(["serve", "--socket"])
            .arg(d.path().join("s.sock"))
            .args(["--http", http])
            .args(extra)
            .args(&m)
            .output()
            .unwrap()
    };
    let out = serve("0.0.0.0:8080", &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("not a loopback address") && err.contains("--http-allow-remote"),
        "{err}"
    );

    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = serve(&port, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("cannot listen there") && err.contains(&port),
        "{err}"
    );

    let out = serve(&free_port().to_string(), &["--http-token", "short"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("at least 16 characters"), "{err}");

    for (p, b) in m.iter().zip(&before) {
        assert!(
            std::fs::read(p).unwrap() == *b,
            "{} was written",
            p.display()
        );
    }
}

/// A minimal NBD client over the Unix socket: one export, simple replies.
fn nbd_write(sock: &Path, at: u64, data: &[u8]) {
    let mut s = UnixStream::connect(sock).unwrap();
    let mut g = [0u8; 18];
    s.read_exact(&mut g).unwrap();
    s.write_all(&3u32.to_be_bytes()).unwrap();
    // NBD_OPT_GO for the default export, no information requests.
    let mut opt = 0x4948_4156_454f_5054u64.to_be_bytes().to_vec();
    opt.extend_from_slice(&7u32.to_be_bytes());
    opt.extend_from_slice(&6u32.to_be_bytes());
    opt.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    s.write_all(&opt).unwrap();
    loop {
        let mut h = [0u8; 20];
        s.read_exact(&mut h).unwrap();
        let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
        let mut rest = vec![0; len as usize];
        s.read_exact(&mut rest).unwrap();
        match kind {
            1 => break,
            3 => {}
            k => panic!("NBD_OPT_GO refused: {k:#x}"),
        }
    }
    for (cmd, payload) in [(1u16, data), (3u16, &[][..])] {
        let mut b = 0x2560_9513u32.to_be_bytes().to_vec();
        b.extend_from_slice(&0u16.to_be_bytes());
        b.extend_from_slice(&cmd.to_be_bytes());
        b.extend_from_slice(&7u64.to_be_bytes());
        b.extend_from_slice(&(if cmd == 1 { at } else { 0 }).to_be_bytes());
        b.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        s.write_all(&b).unwrap();
        s.write_all(payload).unwrap();
        let mut r = [0u8; 16];
        s.read_exact(&mut r).unwrap();
        assert_eq!(
            u32::from_be_bytes(r[4..8].try_into().unwrap()),
            0,
            "NBD error"
        );
    }
}

#[test]
fn the_json_figures_move_when_a_client_writes() {
    let d = tempfile::tempdir().unwrap();
    let m = raid5_with_spare(d.path());
    let srv = Serve::start(d.path(), &m, &[]);
    let totals = |v: &serde_json::Value| -> u64 {
        v["arrays"][0]["io"]["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["write_bytes"].as_u64().unwrap())
            .sum()
    };
    // Two samples taken (the sampler's first second) before the writes.
    std::thread::sleep(Duration::from_millis(2200));
    let before = srv.status();
    nbd_write(&srv.socket, 0, &vec![0x5a; 4 << 20]);
    let t = Instant::now();
    let after = loop {
        let v = srv.status();
        let rate: f64 = v["arrays"][0]["io"]["members"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|x| {
                x["write_bps"]
                    .as_array()
                    .and_then(|a| a.last())
                    .and_then(|r| r.as_f64())
            })
            .sum();
        if totals(&v) >= totals(&before) + (4 << 20) && rate > 0.0 {
            break v;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "no writes counted: {v}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    // Parity too: the members wrote at least 1.5 times what the client did.
    assert!(totals(&after) - totals(&before) >= 6 << 20, "{after}");
    let sc = &after["arrays"][0]["detail"]["served"]["stripe_cache"]["stats"];
    assert!(sc["full_stripes"].as_u64().unwrap() > 0, "{sc}");
    // The same counters in `detail --json`, as the page's detail.
    let detail = run(Command::new(bin())
        .env("RAIDLAB_RUN_DIR", &srv.run_dir)
        .args(["detail", "--json"])
        .args(&m));
    let v: serde_json::Value = serde_json::from_str(&detail).unwrap();
    assert_eq!(
        v["served"]["member_io"].as_array().unwrap().len(),
        4,
        "{detail}"
    );
    // The page itself is one document with nothing from other hosts.
    let (code, page) = http(srv.port, "GET", "/", &[], "");
    assert_eq!(code, 200);
    assert!(
        page.contains("<script>") && !page.contains("src=") && !page.contains("href="),
        "external asset in the page"
    );
    srv.stop();
}

#[test]
fn detail_watch_redraws_a_served_array_and_refuses_one_not_served() {
    let d = tempfile::tempdir().unwrap();
    let m = raid5_with_spare(d.path());
    let out = Command::new(bin())
        .env("RAIDLAB_RUN_DIR", d.path().join("run"))
        .args(["detail", "--watch"])
        .args(&m)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("--watch needs an array that `raidlab serve` is serving"),
        "{err}"
    );

    let srv = Serve::start(d.path(), &m, &[]);
    let mut w = Command::new(bin())
        .env("RAIDLAB_RUN_DIR", &srv.run_dir)
        .args(["detail", "--watch", "--interval", "0.3"])
        .args(&m)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    nbd_write(&srv.socket, 0, &vec![0xa5; 2 << 20]);
    std::thread::sleep(Duration::from_millis(1200));
    let _ = w.kill();
    let mut text = String::new();
    w.stdout.take().unwrap().read_to_string(&mut text).unwrap();
    let _ = w.wait();
    // Not a terminal: one block per interval, no screen clearing.
    assert!(text.matches("State : ").count() >= 3, "{text}");
    assert!(!text.contains("\x1b[2J"), "{text}");
    assert!(text.contains("Read/s") && text.contains("w IOPS"), "{text}");
    for p in &m {
        assert!(text.contains(&p.display().to_string()), "{text}");
    }

    // The plain `detail` of the served array has the same per-member
    // figures, as totals since the server started.
    let out = Command::new(bin())
        .env("RAIDLAB_RUN_DIR", &srv.run_dir)
        .arg("detail")
        .args(&m)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let (_, totals) = text
        .split_once("Member I/O since the server started")
        .unwrap_or_else(|| panic!("no member I/O in the plain detail:\n{text}"));
    assert!(totals.contains("raidlab detail --watch"), "{text}");
    let rows: Vec<Vec<&str>> = totals
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().collect())
        .filter(|w: &Vec<&str>| w.len() >= 5)
        .collect();
    assert_eq!(rows.len(), m.len(), "one row a member:\n{text}");
    let writes =
        |r: &Vec<&str>| -> u64 { r[4].parse().unwrap_or_else(|_| panic!("{r:?}\n{text}")) };
    let spare = rows
        .iter()
        .find(|r| r[1] == "spare")
        .expect("the spare's row");
    // 2 MiB written over NBD reached every active member; the spare has
    // only its superblock's writes.
    for r in rows.iter().filter(|r| r[1] != "spare") {
        assert_eq!(r[1], "active", "{text}");
        assert!(writes(r) > writes(spare), "{r:?}\n{text}");
        assert_eq!(r[8], "MiB", "about 1 MiB written: {r:?}\n{text}");
    }
    srv.stop();
}
