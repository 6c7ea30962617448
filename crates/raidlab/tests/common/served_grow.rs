//! A grow run by `raidlab serve` while a client works, as the served grow
//! tests drive it: the server of a test's members (again with its backup
//! file after a kill), the `grow` command in the background and the walk's
//! progress in `detail`, a client writing and flushing pages through NBD
//! until the server dies, and what the array must then hold.

use super::verbs::{detail, export};
use super::{ServeOptions, Served};
use raidlab_core::Volume;
use raidlab_nbd::client::NbdVolume;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Serve `members` as export `a` with `extra` options before them, its
/// control socket up.
pub fn serve_with(dir: &Path, members: &[&str], extra: &[&str]) -> Served {
    let mut args = vec!["-N", "a"];
    args.extend(extra);
    args.extend(members);
    Served::start_with(ServeOptions {
        dir: Some(dir),
        socket: dir.join("nbd.sock"),
        args: &args,
        wait_control: true,
    })
}

/// Serve `members` as export `a`, its control socket up.
pub fn serve(dir: &Path, members: &[&str]) -> Served {
    serve_with(dir, members, &[])
}

/// `raidlab grow MEMBERS ARGS` started in the background, its output in
/// `grow.log`.
pub fn spawn_grow(dir: &Path, members: &[&str], args: &[&str]) -> Child {
    let log = || {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("grow.log"))
            .unwrap()
    };
    Command::new(env!("CARGO_BIN_EXE_raidlab"))
        .current_dir(dir)
        .env("RAIDLAB_RUN_DIR", dir.join("run"))
        .arg("grow")
        .args(members)
        .args(args)
        .stdout(log())
        .stderr(log())
        .spawn()
        .unwrap()
}

/// Wait until the served reshape has walked at least `bytes` and still
/// runs; the grow that asked for it must not have failed meanwhile.
pub fn wait_walked(
    dir: &Path,
    members: &[&str],
    bytes: u64,
    grow: &mut Child,
) -> serde_json::Value {
    let t = Instant::now();
    loop {
        if let Some(st) = grow.try_wait().unwrap() {
            let log = std::fs::read_to_string(dir.join("grow.log")).unwrap_or_default();
            panic!("grow exited ({st}) before the walk got to {bytes}: {log}");
        }
        let v = detail(dir, members);
        if let Some(r) = v["served"].get("reshape").filter(|r| !r.is_null()) {
            assert!(r["error"].is_null(), "the reshape stopped: {v}");
            if r["running"] == true && r["done"].as_u64().unwrap() >= bytes {
                return v;
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "the reshape did not get to {bytes} in 120 s: {v}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Wait until a reshape the server resumed at its start has ended, which
/// it must without an error, within 120 s.
pub fn wait_resumed_end(dir: &Path, members: &[&str]) {
    let t = Instant::now();
    loop {
        let v = detail(dir, members);
        let r = &v["served"]["reshape"];
        assert!(
            r.is_null() || r["error"].is_null(),
            "the resumed walk failed: {v}"
        );
        if r.is_null() || r["running"] == false {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "the resumed walk did not end in 120 s: {v}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The grow's end: it succeeded and said `want`.
pub fn grow_done(dir: &Path, mut grow: Child, want: &str) {
    let st = grow.wait().unwrap();
    let log = std::fs::read_to_string(dir.join("grow.log")).unwrap();
    assert!(st.success(), "grow failed: {log}");
    assert!(log.contains(want), "{log}");
}

/// A client writing a page and flushing it, over and over, through NBD at
/// `uri` over an array of `size` bytes, until [`Writer::stop`] or until
/// the server stops answering.
pub struct Writer {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Writes>,
}

/// What the client wrote: every write whose flush was answered, in order,
/// and the one under way when the server died, which may read either way.
pub struct Writes {
    pub done: Vec<(u64, Vec<u8>)>,
    pub uncertain: Option<(u64, Vec<u8>)>,
}

impl Writer {
    pub fn start(uri: String, size: u64) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let quit = stop.clone();
        let thread = std::thread::spawn(move || {
            let nbd = NbdVolume::connect(&uri).expect("NBD connect");
            let mut done: Vec<(u64, Vec<u8>)> = Vec::new();
            let mut i = 0u64;
            while !quit.load(Ordering::Acquire) {
                let at = (i * 7919 % (size / 4096)) * 4096;
                let page = vec![(i % 251) as u8 + 1; 4096];
                let ok = nbd.write_at(&page, at).and_then(|()| nbd.flush());
                if ok.is_err() {
                    return Writes {
                        done,
                        uncertain: Some((at, page)),
                    };
                }
                done.push((at, page));
                i += 1;
            }
            Writes {
                done,
                uncertain: None,
            }
        });
        Writer { stop, thread }
    }

    pub fn stop(self) -> Writes {
        self.stop.store(true, Ordering::Release);
        self.thread.join().unwrap()
    }
}

/// The array of `members` reads as `want` with `writes` over it, page by
/// page (the write under way at a kill old or new).
pub fn assert_exact(d: &Path, members: &[&str], mut want: Vec<u8>, writes: &Writes) {
    for (at, page) in &writes.done {
        want[*at as usize..*at as usize + 4096].copy_from_slice(page);
    }
    let got = export(d, members);
    assert_eq!(got.len(), want.len());
    if let Some((at, page)) = &writes.uncertain {
        let r = *at as usize..*at as usize + 4096;
        assert!(
            got[r.clone()] == want[r.clone()] || got[r.clone()] == page[..],
            "the page written at the kill is neither old nor new"
        );
        want[r.clone()].copy_from_slice(&got[r]);
    }
    let first_bad =
        (0..want.len() / 4096).find(|&p| got[p * 4096..][..4096] != want[p * 4096..][..4096]);
    assert!(
        first_bad.is_none(),
        "page {first_bad:?} differs after the resume ({} flushed writes)",
        writes.done.len()
    );
}

/// `raidlab serve` of `m` with `extra`, which must exit with an error
/// within 60 s and change no member: its stderr.
pub fn serve_refused(d: &Path, m: &[&str], extra: &[&str]) -> String {
    let before = super::verbs::files(d, m);
    let mut child = Command::new(env!("CARGO_BIN_EXE_raidlab"))
        .current_dir(d)
        .env("RAIDLAB_RUN_DIR", d.join("run"))
        .args(["serve", "-N", "a", "--socket", "refused.sock"])
        .args(extra)
        .args(m)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let st = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("serve {extra:?} did not refuse within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut e = String::new();
    use std::io::Read;
    child.stderr.take().unwrap().read_to_string(&mut e).unwrap();
    assert!(!st.success(), "serve {extra:?} was not refused: {e}");
    assert!(
        super::verbs::files(d, m) == before,
        "a refused serve {extra:?} changed a member"
    );
    e
}
