//! The NBD client against raidlab's own server over a real Unix socket: reads
//! and writes (from several threads at once, larger than the server's maximum
//! request), flush, trim, a read-only export, an unknown export, a bad address.

use raidlab_core::Volume;
use raidlab_devices::MemVolume;
use raidlab_nbd::client::NbdVolume;
use raidlab_nbd::listen::{run, Listener};
use raidlab_nbd::{Export, Limits, Server};
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

#[test]
fn client_round_trips_through_raidlab_serve() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbd.sock");
    let disk: Arc<dyn Volume> = Arc::new(MemVolume::new(8 << 20));
    let ro: Arc<dyn Volume> = Arc::new(MemVolume::new(1 << 20));
    let exports = vec![
        Export {
            name: "disk".into(),
            description: "memory".into(),
            volume: disk.clone(),
            read_only: false,
            preferred_block: 64 << 10,
            multi_conn: true,
        },
        Export {
            name: "ro".into(),
            description: "read-only".into(),
            volume: ro,
            read_only: true,
            preferred_block: 4096,
            multi_conn: false,
        },
    ];
    let limits = Limits {
        // Smaller than the writes below, so the client must split them.
        max_payload: 256 << 10,
        ..Limits::default()
    };
    let server = Server::new(exports, limits, Box::new(|_| {}));
    let listener = Listener::Unix(UnixListener::bind(&sock).unwrap());
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| run(&server, std::slice::from_ref(&listener), &stop, &|_| {}).unwrap());
        let uri = format!("nbd+unix:///disk?socket={}", sock.display());
        let v = NbdVolume::connect(&uri).unwrap();
        assert_eq!(v.size(), 8 << 20);
        assert_eq!(v.info().max_block, 256 << 10);
        assert!(v.is_writable());
        // Four threads, each its own region, each write larger than max_block.
        std::thread::scope(|t| {
            for k in 0..4u32 {
                let v = &v;
                t.spawn(move || {
                    let data = pattern(1 << 20, k + 1);
                    let at = u64::from(k) * (2 << 20) + 512;
                    v.write_at(&data, at).unwrap();
                    let mut back = vec![0u8; data.len()];
                    v.read_at(&mut back, at).unwrap();
                    assert!(back == data, "thread {k} read back different data");
                });
            }
        });
        v.flush().unwrap();
        // What the server's volume holds is what the client wrote.
        let mut direct = vec![0u8; 1 << 20];
        disk.read_at(&mut direct, 2 * (2 << 20) + 512).unwrap();
        assert!(direct == pattern(1 << 20, 3));
        // Out of range: refused by the client before anything is sent.
        let mut b = vec![0u8; 4096];
        assert!(v.read_at(&mut b, (8 << 20) - 2048).is_err());

        let ro = NbdVolume::connect(&format!("nbd+unix:///ro?socket={}", sock.display())).unwrap();
        assert!(!ro.is_writable());
        let e = ro.write_at(&[1u8; 512], 0).unwrap_err();
        assert!(e.to_string().contains("read-only"), "{e}");
        let e =
            NbdVolume::connect(&format!("nbd+unix:///nope?socket={}", sock.display())).unwrap_err();
        assert!(e.to_string().contains("no such export"), "{e}");
        let e = NbdVolume::connect(&format!(
            "nbd+unix:///disk?socket={}",
            dir.path().join("absent.sock").display()
        ))
        .unwrap_err();
        assert!(e.to_string().contains("is the server running"), "{e}");
        drop(v);
        drop(ro);
        stop.store(true, Ordering::SeqCst);
    });
}

/// A memory volume whose reads take a different time each (so a server with
/// several workers answers out of order) and fail at one offset.
struct Jittery {
    inner: MemVolume,
    bad: u64,
}

impl Volume for Jittery {
    fn name(&self) -> String {
        "jittery".into()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> raidlab_core::Result<()> {
        // 0-1.5 ms, from the offset: repeatable, and different for neighbours.
        let us = (offset / 4096).wrapping_mul(0x9E37_79B9) % 1500;
        std::thread::sleep(std::time::Duration::from_micros(us));
        if offset == self.bad {
            return Err(raidlab_core::Error::new(
                raidlab_core::ErrorKind::Io,
                raidlab_core::Op::Read,
                "injected",
            ));
        }
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> raidlab_core::Result<()> {
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> raidlab_core::Result<()> {
        Ok(())
    }
}

/// Many callers on one connection, replies out of order: every caller gets
/// the data of its own offset, and the one error reply reaches the caller
/// whose request failed and nobody else. The callers read the replies
/// themselves (whoever waits with nobody reading leads), so this also shows
/// that no caller is left waiting with nobody reading.
#[test]
fn replies_out_of_order_reach_their_own_callers() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbd.sock");
    let size = 4u64 << 20;
    let data = pattern(size as usize, 9);
    let mem = MemVolume::new(size);
    mem.write_at(&data, 0).unwrap();
    let bad = 77 * 4096;
    let vol: Arc<dyn Volume> = Arc::new(Jittery { inner: mem, bad });
    let server = Server::new(
        vec![Export {
            name: "j".into(),
            description: "jittery".into(),
            volume: vol,
            read_only: true,
            preferred_block: 4096,
            multi_conn: true,
        }],
        Limits {
            workers: 8,
            ..Limits::default()
        },
        Box::new(|_| {}),
    );
    let listener = Listener::Unix(UnixListener::bind(&sock).unwrap());
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| run(&server, std::slice::from_ref(&listener), &stop, &|_| {}).unwrap());
        let v = NbdVolume::connect(&format!("nbd+unix:///j?socket={}", sock.display())).unwrap();
        let errors = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|t| {
            for k in 0..12u64 {
                let (v, data, errors) = (&v, &data, &errors);
                t.spawn(move || {
                    // Thread k reads blocks k, k + 12, k + 24, ...; block 77
                    // (thread 5's) fails at the server.
                    let mut b = vec![0u8; 4096];
                    for block in (k..1024).step_by(12).take(40) {
                        let at = block * 4096;
                        match v.read_at(&mut b, at) {
                            Ok(()) => assert!(
                                b[..] == data[at as usize..at as usize + 4096],
                                "thread {k}: the read at {at} got another request's data"
                            ),
                            Err(e) => errors.lock().unwrap().push((k, at, e.to_string())),
                        }
                    }
                });
            }
        });
        let errors = errors.into_inner().unwrap();
        assert_eq!(errors.len(), 1, "{errors:?}");
        let (k, at, msg) = &errors[0];
        assert_eq!((*k, *at), (5, bad), "{msg}");
        assert!(msg.contains("the server answered error"), "{msg}");
        // The connection is still good after the error.
        let mut b = vec![0u8; 4096];
        v.read_at(&mut b, 4096).unwrap();
        assert!(b[..] == data[4096..8192]);
        drop(v);
        stop.store(true, Ordering::SeqCst);
    });
}
