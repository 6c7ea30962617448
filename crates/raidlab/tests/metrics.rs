//! `raidlab serve --metrics ADDR` as Prometheus meets it: the endpoint's text
//! passes `promtool check metrics` and counts the writes made through NBD on
//! the members; the real Prometheus server scrapes a served array while a
//! member fails and its query API shows the change; a port in use or a
//! remote address stops `serve` before anything is written.
//!
//! promtool and prometheus come from Debian's `prometheus` package, which
//! scripts/test.sh installs when run as root. Without them a test prints
//! `SKIPPED: <why>` and passes, except under CI=true, where it fails.
//! Everything listens on 127.0.0.1 and every wait is bounded; servers are
//! killed when a test ends, passing or not.

use raidlab_core::Volume;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_raidlab")
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether the tools are there; prints SKIPPED, or fails under CI.
fn tools(test: &str, needed: &[&str]) -> bool {
    let missing: Vec<&str> = needed.iter().copied().filter(|t| !have(t)).collect();
    if missing.is_empty() {
        return true;
    }
    raidlab_core::skip::skip_or_fail(&format!(
        "{test}: {missing:?} not installed (Debian's prometheus package; scripts/test.sh installs it as root)"
    ));
    false
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

fn create(dir: &Path, members: &[&str]) -> Vec<PathBuf> {
    let paths: Vec<PathBuf> = members.iter().map(|m| dir.join(m)).collect();
    run(Command::new(bin())
        .args(["create", "-l", "5", "-c", "64K", "--member-size", "16M"])
        .args(&paths));
    paths
}

/// A port on 127.0.0.1 nobody listens on now (the kernel's choice).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("cannot find a free port")
        .port()
}

/// A child process killed (and reaped) when the test ends without stopping it.
struct Proc {
    child: Option<Child>,
    what: &'static str,
}

impl Proc {
    /// SIGTERM, then wait (killed after 30 s); its exit status and stderr.
    fn stop(&mut self) -> (std::process::ExitStatus, String) {
        let mut c = self.child.take().expect("stopped twice");
        // SAFETY: kill has no memory-safety preconditions; the pid is our
        // child, not yet reaped, so it names no other process.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let t = Instant::now();
        let status = loop {
            if let Some(s) = c.try_wait().expect("wait") {
                break s;
            }
            if t.elapsed() > Duration::from_secs(30) {
                let _ = c.kill();
                panic!("{} did not stop within 30 s of SIGTERM", self.what);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        if let Some(mut e) = c.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        (status, err)
    }

    fn exited(&mut self) -> Option<String> {
        let c = self.child.as_mut()?;
        let st = c.try_wait().ok().flatten()?;
        let mut err = String::new();
        if let Some(mut e) = c.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        Some(format!("{} exited ({st}): {err}", self.what))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A running `raidlab serve` with a metrics endpoint.
struct Served {
    proc: Proc,
    socket: PathBuf,
    metrics: String,
    run_dir: PathBuf,
}

impl Served {
    fn start(dir: &Path, members: &[PathBuf]) -> Served {
        let socket = dir.join("nbd.sock");
        let run_dir = dir.join("run");
        std::fs::create_dir_all(&run_dir).unwrap();
        let metrics = format!("127.0.0.1:{}", free_port());
        let child = Command::new(bin())
            .args(["serve", "-N", "r5", "--metrics", &metrics, "--socket"])
            .arg(&socket)
            .args(members)
            .env("RAIDLAB_RUN_DIR", &run_dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start raidlab serve");
        let mut s = Served {
            proc: Proc {
                child: Some(child),
                what: "raidlab serve",
            },
            socket,
            metrics,
            run_dir,
        };
        let t = Instant::now();
        while UnixStream::connect(&s.socket).is_err() || http_get(&s.metrics, "/metrics").is_err() {
            if let Some(why) = s.proc.exited() {
                panic!("{why}");
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "raidlab serve did not listen within 60 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }

    fn uri(&self) -> String {
        format!("nbd+unix:///r5?socket={}", self.socket.display())
    }

    fn scrape(&self) -> Scrape {
        let (head, body) = http_get(&self.metrics, "/metrics").expect("scrape /metrics");
        // HTTP/1.0 asked, so HTTP/1.0 answered.
        assert!(head.starts_with("HTTP/1.0 200"), "{head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: text/plain; version=0.0.4"),
            "{head}"
        );
        Scrape::parse(&body)
    }

    fn stop(mut self) {
        let (st, err) = self.proc.stop();
        assert!(st.success(), "raidlab serve exited with {st}:\n{err}");
    }
}

/// GET `path` from `addr` (HTTP/1.0, so the server closes when done):
/// (status line and headers, body).
fn http_get(addr: &str, path: &str) -> std::io::Result<(String, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut all = String::new();
    s.read_to_string(&mut all)?;
    match all.split_once("\r\n\r\n") {
        Some((h, b)) => Ok((h.to_string(), b.to_string())),
        None => Err(std::io::Error::other(format!("no HTTP reply: {all:?}"))),
    }
}

/// One scrape: every sample by its series (name and labels as written) and
/// the text itself.
struct Scrape {
    text: String,
    samples: BTreeMap<String, f64>,
}

impl Scrape {
    fn parse(text: &str) -> Scrape {
        let samples = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| {
                let (series, value) = l.rsplit_once(' ').expect("a sample line");
                (series.to_string(), value.parse().expect("a number"))
            })
            .collect();
        Scrape {
            text: text.to_string(),
            samples,
        }
    }

    fn get(&self, series: &str) -> f64 {
        *self
            .samples
            .get(series)
            .unwrap_or_else(|| panic!("no sample {series} in:\n{}", self.text))
    }

    /// The values of `name` by member label, for the given labels' prefix.
    fn by_member(&self, name: &str) -> BTreeMap<String, f64> {
        self.samples
            .iter()
            .filter(|(k, _)| k.starts_with(&format!("{name}{{")))
            .map(|(k, v)| {
                let member = k
                    .split("member=\"")
                    .nth(1)
                    .and_then(|r| r.split('"').next())
                    .expect("a member label")
                    .to_string();
                (member, *v)
            })
            .collect()
    }
}

#[test]
fn metrics_pass_promtool_and_count_writes_on_the_members() {
    if !tools("metrics text", &["promtool"]) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let members = create(d.path(), &["m0", "m1", "m2", "m3"]);
    let srv = Served::start(d.path(), &members);

    let before = srv.scrape();
    assert_eq!(
        before.get(r#"node_md_disks{device="r5",state="active"}"#),
        4.0
    );
    assert_eq!(
        before.get(r#"node_md_disks{device="r5",state="failed"}"#),
        0.0
    );
    assert_eq!(before.get(r#"node_md_disks_required{device="r5"}"#), 4.0);
    assert_eq!(
        before.get(r#"node_md_state{device="r5",state="active"}"#),
        1.0
    );
    assert_eq!(before.get(r#"node_md_degraded{device="r5"}"#), 0.0);

    // 1 MiB through NBD, flushed: more than five whole stripes of 192 KiB,
    // so every member of the RAID 5 is written (data and parity).
    let nbd = raidlab_nbd::client::NbdVolume::connect(&srv.uri()).expect("NBD connect");
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i * 7 + i / 4096) as u8).collect();
    nbd.write_at(&data, 0).expect("NBD write");
    nbd.flush().expect("NBD flush");
    let mut back = vec![0u8; data.len()];
    nbd.read_at(&mut back, 0).expect("NBD read");
    assert!(back == data, "read back differs from what was written");
    drop(nbd);

    let after = srv.scrape();
    let w0 = before.by_member("raidlab_member_write_bytes_total");
    let w1 = after.by_member("raidlab_member_write_bytes_total");
    assert_eq!(w1.len(), 4, "one series per member: {w1:?}");
    for (m, bytes) in &w1 {
        assert!(
            *bytes >= w0[m] + (256 << 10) as f64,
            "member {m} wrote {} bytes for a 1 MiB write over four members",
            bytes - w0[m]
        );
    }
    // RAID 5 of four: data plus a third for parity reach the members.
    let total: f64 = w1.values().sum::<f64>() - w0.values().sum::<f64>();
    assert!(
        total >= (4 << 20) as f64 / 3.0,
        "{total} bytes reached the members"
    );
    let writes = after.by_member("raidlab_member_writes_total");
    let latency = after.by_member("raidlab_member_write_latency_seconds_count");
    for (m, n) in &writes {
        // The counters are read one by one: a superblock write (safe mode's
        // clean mark) between two of them may leave one a write ahead.
        assert!(
            (n - latency[m]).abs() <= 1.0,
            "member {m}: {n} writes, {} in the latency histogram",
            latency[m]
        );
    }
    let nbd_writes = after.get(r#"raidlab_nbd_requests_total{export="r5",command="write"}"#);
    assert!(nbd_writes >= 1.0, "{nbd_writes} NBD writes counted");
    assert!(after.get(r#"raidlab_nbd_connections_total{export="r5"}"#) >= 1.0);
    assert_eq!(
        after.get(r#"raidlab_nbd_request_errors_total{export="r5",command="write"}"#),
        0.0
    );

    // promtool: the format and its lint rules (HELP, TYPE, names, units).
    let mut p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start promtool");
    p.stdin
        .take()
        .unwrap()
        .write_all(after.text.as_bytes())
        .unwrap();
    let out = p.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics ({}): {said}\non:\n{}",
        out.status,
        after.text
    );
    srv.stop();
}

/// A running Prometheus with its own configuration and storage in `dir`.
struct Prometheus {
    proc: Proc,
    addr: String,
}

impl Prometheus {
    fn start(dir: &Path, target: &str) -> Prometheus {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 250ms\n  scrape_timeout: 200ms\n\
                 scrape_configs:\n  - job_name: raidlab\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let addr = format!("127.0.0.1:{}", free_port());
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("cannot start prometheus");
        let mut p = Prometheus {
            proc: Proc {
                child: Some(child),
                what: "prometheus",
            },
            addr,
        };
        let t = Instant::now();
        loop {
            if let Ok((head, _)) = http_get(&p.addr, "/-/ready") {
                if head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200") {
                    break;
                }
            }
            if let Some(why) = p.proc.exited() {
                let log = std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
                panic!("{why}\n{log}");
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "prometheus was not ready within 30 s: {}",
                std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        p
    }

    /// An instant query's first value, if it has one.
    fn query(&self, q: &str) -> Option<f64> {
        let enc: String = q
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let (_, body) = http_get(&self.addr, &format!("/api/v1/query?query={enc}")).ok()?;
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        assert_eq!(v["status"], "success", "query {q}: {body}");
        v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    }

    /// Wait (at most 30 s) until `q` gives `want`.
    fn wait_for(&self, q: &str, want: f64) {
        let t = Instant::now();
        let mut last = None;
        while t.elapsed() < Duration::from_secs(30) {
            last = self.query(q);
            if last == Some(want) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("prometheus: {q} is {last:?} after 30 s, not {want}");
    }
}

#[test]
fn prometheus_scrapes_a_member_failing() {
    if !tools("prometheus scrape", &["prometheus"]) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let members = create(d.path(), &["m0", "m1", "m2", "m3"]);
    let srv = Served::start(d.path(), &members);
    let mut prom = Prometheus::start(d.path(), &srv.metrics);

    // Scraped complete first, so that the change below is one it saw.
    prom.wait_for(r#"node_md_disks{device="r5",state="active"}"#, 4.0);
    prom.wait_for(r#"node_md_disks{device="r5",state="failed"}"#, 0.0);
    prom.wait_for(r#"raidlab_array_state{device="r5",state="clean"}"#, 1.0);

    let out = run(Command::new(bin())
        .args(["fail", "--member"])
        .arg(&members[1])
        .args(&members)
        .env("RAIDLAB_RUN_DIR", &srv.run_dir));
    assert!(out.contains("marked faulty"), "{out}");

    prom.wait_for(r#"node_md_disks{device="r5",state="failed"}"#, 1.0);
    prom.wait_for(r#"node_md_disks{device="r5",state="active"}"#, 3.0);
    prom.wait_for(r#"node_md_degraded{device="r5"}"#, 1.0);
    prom.wait_for(r#"raidlab_array_state{device="r5",state="degraded"}"#, 1.0);
    // Its history holds both: complete before, degraded after.
    prom.wait_for(
        r#"min_over_time(node_md_disks{device="r5",state="failed"}[5m])"#,
        0.0,
    );
    let member = members[1].display().to_string();
    prom.wait_for(
        &format!(r#"raidlab_member_info{{array="r5",member="{member}",state="faulty"}}"#),
        1.0,
    );

    let (st, err) = prom.proc.stop();
    assert!(st.success(), "prometheus exited with {st}: {err}");
    srv.stop();
}

#[test]
fn a_metrics_port_in_use_or_a_remote_address_stops_serve_with_nothing_written() {
    let d = tempfile::tempdir().unwrap();
    let members = create(d.path(), &["m0", "m1", "m2", "m3"]);
    let bytes =
        |ms: &[PathBuf]| -> Vec<Vec<u8>> { ms.iter().map(|m| std::fs::read(m).unwrap()).collect() };
    let before = bytes(&members);
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let port = taken.local_addr().unwrap().port();
    let cases: Vec<(String, Vec<&str>)> = vec![
        (addr, vec!["Address already in use", "nothing was started"]),
        (
            format!("0.0.0.0:{port}"),
            vec!["not a loopback address", "--metrics-allow-remote"],
        ),
        ("localhost".into(), vec!["give an IP address and port"]),
    ];
    for (metrics, want) in cases {
        let socket = d.path().join("nbd.sock");
        let mut child = Command::new(bin())
            .args(["serve", "--metrics", &metrics, "--socket"])
            .arg(&socket)
            .args(&members)
            .env("RAIDLAB_RUN_DIR", d.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let t = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if t.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("--metrics {metrics}: serve still running after 30 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(!status.success(), "--metrics {metrics}: exit {status}");
        for w in want {
            assert!(err.contains(w), "--metrics {metrics}: {w:?} not in: {err}");
        }
        assert!(
            !socket.exists(),
            "--metrics {metrics}: the NBD socket was made"
        );
        assert!(
            bytes(&members) == before,
            "--metrics {metrics}: the members changed"
        );
    }
    drop(taken);
}
