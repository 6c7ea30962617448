//! Accept loops for Unix and TCP sockets, one thread per connection, and a drain
//! on stop: the read side of every open connection is shut, so each connection
//! finishes the requests it has already read, answers them and ends.
//!
//! A handshake must finish within [`HANDSHAKE_TIMEOUT`] and a reply must be taken
//! by the client within [`WRITE_TIMEOUT`], so a silent or stuck client cannot hold
//! a connection slot forever. Idle clients in transmission are left alone.

use crate::server::{Handshake, Outcome, Server};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(120);
/// How often the accept loop looks at the stop flag when no client connects.
const POLL: Duration = Duration::from_millis(50);

/// A listening socket.
#[derive(Debug)]
pub enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
}

/// An accepted connection.
#[derive(Debug)]
pub enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }
    fn shutdown(&self, how: Shutdown) {
        // The peer may have closed already; there is nothing left to do then.
        let _ = match self {
            Stream::Unix(s) => s.shutdown(how),
            Stream::Tcp(s) => s.shutdown(how),
        };
    }
    fn set_timeouts(&self, read: Option<Duration>, write: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Unix(s) => {
                s.set_nonblocking(false)?;
                s.set_read_timeout(read)?;
                s.set_write_timeout(write)
            }
            Stream::Tcp(s) => {
                s.set_nonblocking(false)?;
                // Replies are written whole; Nagle would only delay them.
                s.set_nodelay(true)?;
                s.set_read_timeout(read)?;
                s.set_write_timeout(write)
            }
        }
    }
}

impl std::os::fd::AsFd for Stream {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            Stream::Unix(s) => s.as_fd(),
            Stream::Tcp(s) => s.as_fd(),
        }
    }
}

impl crate::tls::Socket for Stream {
    fn try_clone_socket(&self) -> io::Result<Stream> {
        self.try_clone()
    }
}

impl Read for Stream {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(b),
            Stream::Tcp(s) => s.read(b),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(b),
            Stream::Tcp(s) => s.write(b),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Listener {
    fn accept(&self) -> io::Result<Stream> {
        match self {
            Listener::Unix(l) => l.accept().map(|(s, _)| Stream::Unix(s)),
            Listener::Tcp(l) => l.accept().map(|(s, _)| Stream::Tcp(s)),
        }
    }
    fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        match self {
            Listener::Unix(l) => l.as_raw_fd(),
            Listener::Tcp(l) => l.as_raw_fd(),
        }
    }
    fn set_nonblocking(&self) -> io::Result<()> {
        match self {
            Listener::Unix(l) => l.set_nonblocking(true),
            Listener::Tcp(l) => l.set_nonblocking(true),
        }
    }
}

/// Wait until a listener has a client to accept, or [`POLL`] has passed (so
/// the caller looks at its stop flag). A client is accepted as soon as it
/// connects: sleeping between attempts instead made every connection wait up
/// to the whole interval (`nbdcopy` with 4 connections spent about 200 ms of
/// each copy connecting).
fn wait_for_clients(listeners: &[Listener]) {
    let mut fds: Vec<libc::pollfd> = listeners
        .iter()
        .map(|l| libc::pollfd {
            fd: l.raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let Ok(n) = libc::nfds_t::try_from(fds.len()) else {
        std::thread::sleep(POLL);
        return;
    };
    // SAFETY: poll reads and writes exactly `n` pollfd entries of `fds`, a
    // live vector of that length; the descriptors are the listeners', open
    // for as long as `listeners` is borrowed. Its result needs no handling:
    // the accept loop tries every listener next either way.
    let _ = unsafe { libc::poll(fds.as_mut_ptr(), n, POLL.as_millis() as libc::c_int) };
}

/// Accept and serve connections on every listener until `stop` is set, then drain
/// open connections and return once all have ended. `log` gets one line per
/// connection that ends badly and per refused connection.
pub fn run(
    server: &Server,
    listeners: &[Listener],
    stop: &AtomicBool,
    log: &(dyn Fn(&str) + Sync),
) -> io::Result<()> {
    for l in listeners {
        l.set_nonblocking()?;
    }
    let open: Mutex<Vec<(u64, Stream)>> = Mutex::new(Vec::new());
    let next_id = AtomicU64::new(0);
    std::thread::scope(|s| {
        while !stop.load(Ordering::SeqCst) {
            let mut idle = true;
            for l in listeners {
                let stream = match l.accept() {
                    Ok(st) => st,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => {
                        // Out of descriptors and the like: say so, keep serving.
                        log(&format!("accepting a connection failed: {e}"));
                        continue;
                    }
                };
                idle = false;
                let Some(slot) = server.admit() else {
                    log(&format!(
                        "refused a connection: {} connections are open (the limit)",
                        server.limits().max_connections
                    ));
                    continue;
                };
                let id = next_id.fetch_add(1, Ordering::Relaxed);
                let (reader, watch) = match (stream.try_clone(), stream.try_clone()) {
                    (Ok(r), Ok(w)) => (r, w),
                    (Err(e), _) | (_, Err(e)) => {
                        log(&format!("cannot set up a connection: {e}"));
                        continue;
                    }
                };
                open.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((id, watch));
                let open = &open;
                s.spawn(move || {
                    let _slot = slot;
                    let outcome = serve_one(server, reader, stream);
                    if let Outcome::Violation(why) = &outcome {
                        log(&format!(
                            "closed a connection that broke the protocol: {why}"
                        ));
                    }
                    open.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .retain(|(i, _)| *i != id);
                });
            }
            if idle {
                wait_for_clients(listeners);
            }
        }
        // Stop reading requests; what was read is still served and answered.
        for (_, st) in open.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            st.shutdown(Shutdown::Read);
        }
    });
    Ok(())
}

fn serve_one(server: &Server, mut reader: Stream, mut writer: Stream) -> Outcome {
    if reader
        .set_timeouts(Some(HANDSHAKE_TIMEOUT), Some(WRITE_TIMEOUT))
        .is_err()
    {
        return Outcome::Gone;
    }
    let resume = match server.handshake(&mut reader, &mut writer) {
        Ok(Handshake::Done(n)) => {
            // Clients may stay idle between requests as long as they like.
            if reader.set_timeouts(None, Some(WRITE_TIMEOUT)).is_err() {
                return Outcome::Gone;
            }
            return server.transmission_on_socket(reader, writer, n);
        }
        Ok(Handshake::StartTls(resume)) => resume,
        Err(o) => return o,
    };
    let Some(tls) = server.tls() else {
        return Outcome::Violation("STARTTLS acknowledged without TLS set up".into());
    };
    let (mut tr, mut tw) = match crate::tls::accept(tls.config.clone(), reader) {
        Ok(halves) => halves,
        Err(e) => return Outcome::Violation(format!("TLS handshake failed: {e}")),
    };
    let n = match server.resume_handshake(&mut tr, &mut tw, resume) {
        Ok(n) => n,
        Err(o) => return o,
    };
    // The timeouts belong to the socket, which `writer` still names.
    if writer.set_timeouts(None, Some(WRITE_TIMEOUT)).is_err() {
        return Outcome::Gone;
    }
    server.transmission(tr, tw, n)
}
