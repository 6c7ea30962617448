//! What "T threads at queue depth Q" puts on an NBD server: T connections (one
//! per benchmark thread, as fio's nbd engine opens one per job) with Q requests
//! in flight on each (as one fio job with `iodepth=Q` keeps on its one
//! connection). Counted at the server: raidlab's NBD server on a real Unix
//! socket, accepted by this test so it can count connections, in front of a
//! volume that counts requests in flight. Until issue 21 the client opened one
//! connection per request in flight, and a CrystalDiskMark Q32T1 on nbdkit was
//! twice the load fio's iodepth=32 is.

use raidlab_bench::target::OpenOptions;
use raidlab_bench::{
    engine, Access, Control, DataFill, Dir, EngineKind, Limit, Rewrite, Target, Workload,
};
use raidlab_core::{Result, Volume};
use raidlab_devices::MemVolume;
use raidlab_nbd::{Export, Limits, Server};
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Counts reads in flight; each takes `hold`, long beside the client's and the
/// server's own turnaround, so every request the client keeps in flight is
/// inside at once.
struct Probe {
    inner: MemVolume,
    now: AtomicUsize,
    max: AtomicUsize,
    hold: Duration,
}

impl Volume for Probe {
    fn name(&self) -> String {
        "probe".into()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(n, Ordering::SeqCst);
        std::thread::sleep(self.hold);
        let r = self.inner.read_at(buf, offset);
        self.now.fetch_sub(1, Ordering::SeqCst);
        r
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> Result<()> {
        Ok(())
    }
}

fn load_on_server(threads: usize, qd: usize, multi_conn: bool) -> (usize, usize) {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbd.sock");
    let probe = Arc::new(Probe {
        inner: MemVolume::new(4 << 20),
        now: AtomicUsize::new(0),
        max: AtomicUsize::new(0),
        hold: Duration::from_millis(25),
    });
    let server = Server::new(
        vec![Export {
            name: "p".into(),
            description: "probe".into(),
            volume: probe.clone(),
            read_only: true,
            preferred_block: 4096,
            multi_conn,
        }],
        Limits {
            workers: 64,
            ..Limits::default()
        },
        Box::new(|_| {}),
    );
    let listener = UnixListener::bind(&sock).unwrap();
    listener.set_nonblocking(true).unwrap();
    let connections = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((c, _)) => {
                        c.set_nonblocking(false).unwrap();
                        connections.fetch_add(1, Ordering::SeqCst);
                        let server = &server;
                        s.spawn(move || {
                            let w = c.try_clone().unwrap();
                            server.serve(c, w)
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        let uri = format!("nbd+unix:///p?socket={}", sock.display());
        let t = Target::open(
            &uri,
            OpenOptions {
                size: 4 << 20,
                direct: true,
                writes: false,
                allow_device_writes: false,
            },
        )
        .unwrap();
        let rounds = 8;
        let w = Workload {
            access: Access::Rand,
            dir: Dir::Read,
            bs: 4096,
            offset: 0,
            size: 4 << 20,
            threads,
            qd,
            limit: Limit {
                time: None,
                bytes: Some(4096 * (threads * qd * rounds) as u64),
            },
            data: DataFill::Random,
            rewrite: Rewrite::Never,
            random_map: false,
            seed: 7,
            split: true,
            engine: EngineKind::Auto,
        };
        let m = engine::run(&t, &w, &Control::new()).unwrap();
        assert_eq!(m.read.ios, (threads * qd * rounds) as u64);
        drop(t);
        done.store(true, Ordering::SeqCst);
    });
    (
        connections.load(Ordering::SeqCst),
        probe.max.load(Ordering::SeqCst),
    )
}

#[test]
fn queue_depth_is_requests_in_flight_on_one_connection_per_thread() {
    for (threads, qd, multi) in [(1, 1, true), (1, 8, true), (2, 4, true), (2, 4, false)] {
        let (conns, max) = load_on_server(threads, qd, multi);
        let want_conns = if multi { threads } else { 1 };
        assert_eq!(
            conns, want_conns,
            "T{threads} Q{qd} multi-conn {multi}: connections"
        );
        assert_eq!(
            max,
            threads * qd,
            "T{threads} Q{qd} multi-conn {multi}: requests in flight at the server"
        );
    }
}
