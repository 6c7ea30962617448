//! Transmission on one connection: the reader that parses requests and
//! hands them to the workers (or does small ones itself), the workers that
//! run them on the volume, and the replies written whole; the socket tuning
//! that serves them (send buffer, a short spin before sleeping). The
//! diagram and the reasons are the `server` module's doc.
//!
//! Decides when a request is run where and when its reply goes out; it must
//! never interpret a volume's data or change what a request asked.

use super::*;

impl Server {
    /// Serve requests until the client disconnects, then finish every request
    /// already accepted before returning.
    pub fn transmission<R: Read, W: Write + Send>(&self, r: R, w: W, n: Negotiated) -> Outcome {
        self.transmit(r, w, n, None)
    }

    /// [`Server::transmission`] on a plain socket (no TLS in between): large
    /// read replies are spliced into its descriptor (module `splice`),
    /// and the reader polls it briefly for the next request before sleeping.
    pub fn transmission_on_socket<R: Read, W: Write + Send + AsFd>(
        &self,
        r: R,
        w: W,
        n: Negotiated,
    ) -> Outcome {
        let fd = w.as_fd().as_raw_fd();
        self.transmit(r, w, n, Some(fd))
    }

    /// `socket`: the descriptor of the plain socket `w` writes to, if it is
    /// one; it stays open as long as `w`, which lives until this returns.
    fn transmit<R: Read, W: Write + Send>(
        &self,
        r: R,
        w: W,
        n: Negotiated,
        socket: Option<RawFd>,
    ) -> Outcome {
        if let Some(fd) = socket {
            enlarge_send_buffer(fd);
        }
        // Buffered: at queue depth 32 one read system call brings in many request
        // headers (payloads larger than the buffer bypass it).
        let mut r = BufReader::with_capacity(READ_BUFFER, r);
        let _open = self.counters.connected(n.export);
        let conn = Conn {
            writer: Mutex::new(w),
            broken: AtomicBool::new(false),
            used: Mutex::new(Budget::default()),
            queued: AtomicUsize::new(0),
            fast_run: AtomicU32::new(0),
            pool: Mutex::new(Vec::new()),
            cork: Mutex::new(Vec::new()),
            freed: Condvar::new(),
            limit: self.limits.max_inflight_bytes,
            structured: n.structured,
            socket,
            zero_copy: self.zero_copy,
            pipes: Mutex::new(Vec::new()),
        };
        let (tx, rx) = mpsc::channel::<(Job, usize, Instant)>();
        let rx = Mutex::new(rx);
        std::thread::scope(|s| {
            // Workers start when a job finds every one busy, up to the limit: a
            // client at queue depth 1 keeps one thread, one with 32 requests on
            // an array of disks gets as many member I/Os in flight as the limit.
            let (rx, shared) = (&rx, &conn);
            let add_worker = || {
                s.spawn(move || loop {
                    let next = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    let Ok((job, charge, received)) = next else {
                        break;
                    };
                    self.run_timed(n.export, shared, job, received);
                    shared.queued.fetch_sub(1, Ordering::SeqCst);
                    shared.release(charge);
                });
            };
            let outcome = self.read_requests(&mut r, n.export, &conn, &tx, &add_worker);
            conn.uncork();
            drop(tx);
            outcome
        })
    }

    fn read_requests<R: Read, W: Write>(
        &self,
        r: &mut BufReader<R>,
        index: usize,
        conn: &Conn<W>,
        tx: &mpsc::Sender<(Job, usize, Instant)>,
        add_worker: &dyn Fn(),
    ) -> Outcome {
        let export = &self.exports[index];
        let size = export.volume.size();
        let mut workers = 0;
        let mut last_len = 0usize;
        loop {
            if r.buffer().len() < REQUEST_LEN {
                // About to wait for the client: it may be waiting for these.
                conn.uncork();
            }
            // Spin for small requests, or when the workers have nothing (the
            // client has every reply it waits for, so its next request is due).
            // Not behind large requests at the workers: the client is busy
            // taking in those replies, and a spinning reader would take CPU from
            // it and from the workers on a small machine (1 MiB reads at QD8 on
            // 2 CPUs: 5-33% faster without the spin).
            if r.buffer().is_empty()
                && (last_len <= INLINE_MAX || conn.queued.load(Ordering::SeqCst) == 0)
            {
                if let Some(fd) = conn.socket {
                    spin_for_request(fd);
                }
            }
            let mut hb = [0u8; REQUEST_LEN];
            if let Err(o) = recv(r, &mut hb) {
                return o;
            }
            let q = parse_request(&hb);
            last_len = q.length as usize;
            if q.magic != REQUEST_MAGIC {
                return Outcome::Violation(format!("request magic {:#x} is wrong", q.magic));
            }
            let c = q.cookie;
            let len = q.length as u64;
            let in_range = q.offset.checked_add(len).is_some_and(|end| end <= size);
            let flags_ok = q.flags & !(CMD_FLAG_FUA | CMD_FLAG_NO_HOLE) == 0;
            let fua = q.flags & CMD_FLAG_FUA != 0;
            let (job, charge) = match q.kind {
                CMD_DISC => return Outcome::Closed,
                CMD_WRITE => {
                    if q.length > self.limits.max_payload {
                        // The protocol: the server should answer EINVAL, and may
                        // hang up only on a payload large enough to be a denial
                        // of service. Up to `skip_max` the payload is read and
                        // dropped (no buffer is held), so the next request is
                        // read where it starts.
                        if len > self.limits.skip_max() {
                            return Outcome::Violation(format!(
                                "write of {len} bytes exceeds the maximum payload of {} bytes \
                                 and is too long to skip",
                                self.limits.max_payload
                            ));
                        }
                        if (r.buffer().len() as u64) < len {
                            conn.uncork();
                        }
                        if let Err(o) = skip(r, len) {
                            return o;
                        }
                        conn.reply_error(
                            EINVAL,
                            c,
                            &format!(
                                "write of {len} bytes exceeds the maximum payload of {} bytes",
                                self.limits.max_payload
                            ),
                        );
                        continue;
                    }
                    let charge = conn.acquire(q.length as usize);
                    let mut data = conn.buffer(q.length as usize);
                    if r.buffer().len() < data.len() {
                        conn.uncork();
                    }
                    if let Err(o) = recv(r, &mut data) {
                        conn.release(charge);
                        return o;
                    }
                    let err = if !flags_ok {
                        Some(EINVAL)
                    } else if !export.writable() {
                        Some(EPERM)
                    } else if !in_range {
                        Some(ENOSPC)
                    } else {
                        None
                    };
                    if let Some(e) = err {
                        conn.release(charge);
                        conn.reply_simple(e, c, &[]);
                        continue;
                    }
                    (
                        Job::Write {
                            cookie: c,
                            offset: q.offset,
                            data,
                            fua,
                        },
                        charge,
                    )
                }
                CMD_READ => {
                    let err = if !flags_ok || !in_range || q.length > self.limits.max_payload {
                        Some(EINVAL)
                    } else {
                        None
                    };
                    if let Some(e) = err {
                        conn.reply_error(
                            e,
                            c,
                            "read outside the export, too long or with unknown flags",
                        );
                        continue;
                    }
                    let charge = conn.acquire(q.length as usize);
                    (
                        Job::Read {
                            cookie: c,
                            offset: q.offset,
                            len: q.length as usize,
                        },
                        charge,
                    )
                }
                CMD_FLUSH => (Job::Flush { cookie: c }, conn.acquire(0)),
                CMD_TRIM | CMD_WRITE_ZEROES => {
                    let zero = q.kind == CMD_WRITE_ZEROES;
                    let err = if !flags_ok {
                        Some(EINVAL)
                    } else if !export.writable() {
                        Some(EPERM)
                    } else if !in_range {
                        Some(if zero { ENOSPC } else { EINVAL })
                    } else {
                        None
                    };
                    if let Some(e) = err {
                        conn.reply_simple(e, c, &[]);
                        continue;
                    }
                    let piece = if zero {
                        (q.length as usize).min(ZERO_PIECE)
                    } else {
                        0
                    };
                    let job = Job::Range {
                        cookie: c,
                        offset: q.offset,
                        len,
                        zero,
                        hole_ok: q.flags & CMD_FLAG_NO_HOLE == 0,
                        fua,
                    };
                    (job, conn.acquire(piece))
                }
                _ => {
                    // Unknown commands carry no payload we know of; refusing them
                    // keeps the stream in step.
                    conn.reply_simple(EINVAL, c, &[]);
                    continue;
                }
            };
            // Read in full: its latency counts from here.
            let received = Instant::now();
            // Serve it here, saving two thread hand-offs, when nothing else is
            // in flight and no next request waits (queue depth 1 latency), or
            // when it is small and the last FAST_RUN requests were all served
            // fast (a volume in memory or in the page cache: there a hand-off
            // costs more than the request, and the reader keeps both CPUs'
            // worth of client busy alone). One slow request sends the next
            // ones to the workers again, so a disk's latency is never
            // serialised here; and one fast request among slow ones (a write
            // merged into a stripe the cache holds, a read it serves) does not
            // bring them back: the next request, served here, would have held
            // up the reading of every request behind it for a member's
            // read-modify-write (RAID 5 on disks that seek, QD32: the members
            // idle 1.1-1.4% of the time, their queues 9 deep against 13-15).
            let idle = conn.queued.load(Ordering::SeqCst) == 0 && r.buffer().is_empty();
            if idle || (job.is_small() && conn.fast_run.load(Ordering::Relaxed) >= FAST_RUN) {
                // Replies made here wait in the cork until the reader is about
                // to wait for input (or the cork is full), so that a burst of
                // requests gets one write and the client one wake-up.
                CORKED.with(|c| c.set(true));
                self.run_timed(index, conn, job, received);
                CORKED.with(|c| c.set(false));
                conn.release(charge);
                if conn.corked() >= CORK_MAX {
                    conn.uncork();
                }
                continue;
            }
            if conn.queued.fetch_add(1, Ordering::SeqCst) >= workers
                && workers < self.limits.workers
            {
                add_worker();
                workers += 1;
            }
            if tx.send((job, charge, received)).is_err() {
                conn.queued.fetch_sub(1, Ordering::SeqCst);
                conn.release(charge);
                return Outcome::Gone;
            }
        }
    }

    /// [`Server::run`] on export `index`, counting it (read in full at
    /// `received`) and, in `conn.fast_run`, the requests in a row that took
    /// less than [`FAST`].
    fn run_timed<W: Write>(&self, index: usize, conn: &Conn<W>, job: Job, received: Instant) {
        let started = Instant::now();
        let command = job.command();
        let ok = self.run(&self.exports[index], conn, job);
        if started.elapsed() < FAST {
            // Counted up to FAST_RUN only, so it never wraps.
            let _ = conn
                .fast_run
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                    (n < FAST_RUN).then_some(n + 1)
                });
        } else {
            conn.fast_run.store(0, Ordering::Relaxed);
        }
        self.counters.served(index, command, received, ok);
    }

    /// Serve `job`; whether it was answered without an error.
    fn run<W: Write>(&self, e: &Export, conn: &Conn<W>, job: Job) -> bool {
        let v = &e.volume;
        match job {
            Job::Read {
                cookie,
                offset,
                len,
            } => {
                let (offset, len) = if len >= SPLICE_MIN {
                    match conn.reply_read_stored(v.as_ref(), cookie, offset, len) {
                        Spliced::All => return true,
                        Spliced::Nothing => (offset, len),
                        // The rest goes as the reply's last chunk, copied.
                        Spliced::Upto(at) => (at, len - (at - offset) as usize),
                    }
                } else {
                    (offset, len)
                };
                // Room for the reply header in front, so header and data leave
                // in one write.
                let hdr = conn.read_header_len();
                let mut buf = conn.buffer(hdr + len);
                match v.read_at(&mut buf[hdr..], offset) {
                    Ok(()) => {
                        conn.reply_read(cookie, offset, buf);
                        true
                    }
                    Err(err) => {
                        (self.log)(&format!("export {:?}: {err}", e.name));
                        conn.reply_error(errno(&err, false), cookie, &err.to_string());
                        false
                    }
                }
            }
            Job::Write {
                cookie,
                offset,
                data,
                fua,
            } => {
                // FUA asks for this write's durability only; the volume decides
                // what that costs (by default a flush of everything).
                let r = if fua {
                    v.write_at_fua(&data, offset)
                } else {
                    v.write_at(&data, offset)
                };
                conn.recycle(data);
                self.finish(e, conn, cookie, r)
            }
            Job::Flush { cookie } => self.finish(e, conn, cookie, v.flush()),
            Job::Range {
                cookie,
                offset,
                len,
                zero,
                hole_ok,
                fua,
            } => {
                let r = if zero {
                    // A hole reads as zeros and costs no writes, where the volume
                    // promises that and the client allows it.
                    let punched = hole_ok && v.discard_zeroes() && v.discard(offset, len).is_ok();
                    if punched {
                        Ok(())
                    } else {
                        v.write_zeroes(offset, len)
                    }
                } else {
                    match v.discard(offset, len) {
                        // Trim is advisory: a volume that cannot forget keeps the data.
                        Err(err) if err.kind == ErrorKind::Unsupported => Ok(()),
                        r => r,
                    }
                };
                let r = r.and_then(|()| if fua { v.flush() } else { Ok(()) });
                self.finish(e, conn, cookie, r)
            }
        }
    }

    fn finish<W: Write>(
        &self,
        e: &Export,
        conn: &Conn<W>,
        cookie: u64,
        r: raidlab_core::Result<()>,
    ) -> bool {
        match r {
            Ok(()) => {
                conn.reply_simple(0, cookie, &[]);
                true
            }
            Err(err) => {
                (self.log)(&format!("export {:?}: {err}", e.name));
                conn.reply_simple(errno(&err, true), cookie, &[]);
                false
            }
        }
    }
}

/// Let the socket hold a few large replies unread, as far as the system allows
/// (net.core.wmem_max; the kernel caps the request silently). With the default
/// (about 200 KiB) a worker sending a 1 MiB reply waits for the client to
/// drain the socket five times, each a sleep and a wake-up on both sides; with
/// 4 MiB, 1M QD8 reads of a file in /dev/shm went from 1.6-1.9 to 3.0-3.7
/// GB/s (same run, alternating). Best effort: a refusal leaves the default.
fn enlarge_send_buffer(fd: RawFd) {
    let bytes: libc::c_int = SEND_BUFFER;
    // SAFETY: setsockopt reads one c_int from a local that outlives the call;
    // the descriptor is the connection's socket, open while it is served.
    let _ = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

/// Wait up to [`SPIN`] for the client's next request without sleeping: a
/// client at queue depth 1 sends it a few microseconds after its reply, and a
/// thread that slept meanwhile takes far longer than that to wake (on a VM, an
/// interrupt to a halted virtual CPU). Returns at once when data or an error
/// is there; the blocking read that follows does the rest.
fn spin_for_request(fd: RawFd) {
    let start = Instant::now();
    let mut b = [0u8; 1];
    loop {
        // SAFETY: a one-byte peek into a local buffer; the descriptor belongs to
        // the connection, open for as long as it is served.
        let n = unsafe {
            libc::recv(
                fd,
                b.as_mut_ptr().cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        if n >= 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN) {
            return;
        }
        if start.elapsed() >= SPIN {
            return;
        }
        std::hint::spin_loop();
    }
}
