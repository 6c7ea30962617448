//! Read replies without copying the data in user space: the stored bytes go
//! into a pipe by `splice` from the files that hold them (page references, not
//! copies), and after the reply header, written as usual, the pipe goes into the
//! socket (Unix and TCP sockets take the pages by reference too). The only copy
//! left is the client's own read from its socket; the copying path costs two
//! more (file into a buffer, buffer into the socket).
//!
//! A pipe here is filled without blocking: data that does not fit is given up
//! (the caller sends it another way), never half sent. A pipe is only reused
//! when it was drained completely, so no stale bytes reach a reply.
//!
//! This module must never write to the socket except from a pipe holding
//! exactly one reply's data (or one chunk's), right after its header, and only
//! while the caller holds the connection's writer lock.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

const PAGE: usize = 4096;
/// The default of /proc/sys/fs/pipe-max-size: the largest pipe a process
/// without CAP_SYS_RESOURCE can ask for.
const UNPRIVILEGED_MAX: usize = 1 << 20;

/// One pipe and how many bytes it holds.
#[derive(Debug)]
pub(crate) struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    /// What the pipe can hold, in bytes (its slots times the page size).
    capacity: usize,
    held: usize,
}

impl Pipe {
    /// An empty non-blocking pipe of the kernel's default size.
    pub(crate) fn new() -> io::Result<Pipe> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 writes two descriptors into the array we pass, which has
        // room for exactly two.
        let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pipe2 succeeded, so both descriptors are open and ours alone.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: F_GETPIPE_SZ only reads the pipe's size.
        let capacity = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_GETPIPE_SZ) };
        Ok(Pipe {
            read,
            write,
            capacity: usize::try_from(capacity).unwrap_or(0),
            held: 0,
        })
    }

    /// Make room for `bytes` bytes from files plus `slack` more slots: each
    /// page (or part of one) of a piece takes a whole slot of the pipe, so a
    /// piece starting or ending inside a page takes one more than its size
    /// says. False when the kernel refuses (an unprivileged process is held to
    /// /proc/sys/fs/pipe-max-size, 1 MiB by default, and to a per-user total).
    pub(crate) fn reserve(&mut self, bytes: usize, slack: usize) -> bool {
        let want = bytes.div_ceil(PAGE).saturating_add(slack) * PAGE;
        if self.capacity >= want {
            return true;
        }
        self.resize(want.next_power_of_two()) && self.capacity >= want
    }

    /// Ask the kernel for a pipe of `bytes`; false when it refuses.
    fn resize(&mut self, bytes: usize) -> bool {
        let Ok(arg) = libc::c_int::try_from(bytes) else {
            return false;
        };
        // SAFETY: F_SETPIPE_SZ resizes the pipe's slot array; it touches no memory
        // of ours. It fails (EBUSY) rather than drop what the pipe holds.
        let got = unsafe { libc::fcntl(self.write.as_raw_fd(), libc::F_SETPIPE_SZ, arg) };
        match usize::try_from(got) {
            Ok(c) => {
                self.capacity = c;
                true
            }
            Err(_) => false,
        }
    }

    /// Like [`Pipe::reserve`], but when `bytes` cannot fit, grow the pipe to the
    /// size any process may have and return how many bytes fit there besides
    /// `slack` slots (0 if none do).
    pub(crate) fn reserve_up_to(&mut self, bytes: usize, slack: usize) -> usize {
        if self.reserve(bytes, slack) {
            return bytes;
        }
        if self.capacity < UNPRIVILEGED_MAX {
            self.resize(UNPRIVILEGED_MAX);
        }
        let slots = (self.capacity / PAGE).saturating_sub(slack);
        (slots * PAGE).min(bytes)
    }

    /// Put `bytes` into the pipe (copied).
    #[cfg(test)]
    pub(crate) fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut done = 0;
        while done < bytes.len() {
            let rest = &bytes[done..];
            // SAFETY: writes from `rest`, which is valid for `rest.len()` bytes.
            let n =
                unsafe { libc::write(self.write.as_raw_fd(), rest.as_ptr().cast(), rest.len()) };
            let k = moved(n, io::ErrorKind::WriteZero)?;
            done += k;
            self.held += k;
        }
        Ok(())
    }

    /// Move `len` bytes at `offset` of the file `fd` into the pipe. A full pipe
    /// is an error (`WouldBlock`), as is a file that ends early.
    pub(crate) fn fill(&mut self, fd: BorrowedFd<'_>, offset: u64, len: usize) -> io::Result<()> {
        let mut done = 0usize;
        while done < len {
            let mut at = i64::try_from(offset + done as u64)
                .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
            // SAFETY: splice reads the file at `at` (a local the kernel updates)
            // and appends page references to our pipe; no user memory is read
            // or written besides `at`. SPLICE_F_NONBLOCK: a full pipe returns
            // EAGAIN instead of waiting for a reader that would never come.
            let n = unsafe {
                libc::splice(
                    fd.as_raw_fd(),
                    &mut at,
                    self.write.as_raw_fd(),
                    std::ptr::null_mut(),
                    len - done,
                    libc::SPLICE_F_NONBLOCK,
                )
            };
            let k = moved(n, io::ErrorKind::UnexpectedEof)?;
            done += k;
            self.held += k;
        }
        Ok(())
    }

    /// Send everything the pipe holds into the socket `sock` (blocking, as the
    /// socket is; its send timeout applies).
    pub(crate) fn drain_to(&mut self, sock: RawFd) -> io::Result<()> {
        while self.held > 0 {
            // SAFETY: splice moves what the pipe holds into the socket; no user
            // memory is involved. `sock` is open: the caller owns the stream it
            // belongs to for longer than this call.
            let n = unsafe {
                libc::splice(
                    self.read.as_raw_fd(),
                    std::ptr::null_mut(),
                    sock,
                    std::ptr::null_mut(),
                    self.held,
                    libc::SPLICE_F_MOVE,
                )
            };
            self.held -= moved(n, io::ErrorKind::WriteZero)?;
        }
        Ok(())
    }

    /// Whether the pipe is empty, so it can serve the next reply.
    pub(crate) fn is_empty(&self) -> bool {
        self.held == 0
    }
}

/// The bytes a write or splice call returning `n` moved: 0 when a signal
/// interrupted it (call again), `nothing` when it moved none (the other side
/// is gone or the file ended), the system's error otherwise.
fn moved(n: isize, nothing: io::ErrorKind) -> io::Result<usize> {
    match n {
        n if n > 0 => Ok(n as usize),
        0 => Err(nothing.into()),
        _ => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(0)
            } else {
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;

    /// Header and file pieces come out of the socket in order, byte for byte,
    /// and the pipe is reusable afterwards.
    #[test]
    fn a_reply_assembled_in_a_pipe_arrives_whole() {
        let mut file = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 4096) as u8).collect();
        file.write_all(&data).unwrap();
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut p = Pipe::new().unwrap();
        for round in 0..2u64 {
            let pieces = [(5u64, 70_000usize), (123_457, 100_001), (1, 3)];
            let total: usize = 9 + pieces.iter().map(|p| p.1).sum::<usize>();
            assert!(p.reserve(total, pieces.len()), "round {round}");
            p.put(b"header:").unwrap();
            p.put(&[round as u8, 0xee]).unwrap();
            for (at, n) in pieces {
                p.fill(file.as_fd(), at, n).unwrap();
            }
            let reader = std::thread::spawn(move || {
                let mut got = vec![0u8; total];
                b.read_exact(&mut got).map(|()| (got, b))
            });
            p.drain_to(a.as_raw_fd()).unwrap();
            assert!(p.is_empty());
            let (got, back) = reader.join().unwrap().unwrap();
            b = back;
            let mut want = b"header:".to_vec();
            want.extend([round as u8, 0xee]);
            for (at, n) in pieces {
                want.extend_from_slice(&data[at as usize..at as usize + n]);
            }
            assert!(got == want, "round {round}: the reply differs");
        }
    }

    /// A piece past the end of the file is an error, not a short reply.
    #[test]
    fn a_file_that_ends_early_is_an_error() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&[1u8; 1000]).unwrap();
        let mut p = Pipe::new().unwrap();
        assert!(p.reserve(2000, 1));
        let e = p.fill(file.as_fd(), 500, 1000).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }

    /// A reply larger than the pipe is refused with WouldBlock instead of
    /// blocking forever on a pipe nobody drains yet.
    #[test]
    fn an_overfull_pipe_refuses_instead_of_blocking() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&vec![3u8; 1 << 20]).unwrap();
        let mut p = Pipe::new().unwrap();
        let e = p.fill(file.as_fd(), 0, 1 << 20).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert!(!p.is_empty(), "part of the piece went in");
    }
}
