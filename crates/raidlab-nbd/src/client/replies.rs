//! Who reads a connection's replies and how each reaches the caller that
//! asked: leader and followers, without a reader thread. A caller that waits
//! for its answer and finds nobody reading reads replies itself (it "leads")
//! until its own arrives, storing the others' answers for their callers and
//! waking them; when its own arrives it hands the reading to a caller still
//! waiting, if any, and returns. So at queue depth 1 the caller reads its own
//! reply on its own thread, with no thread hand-off (a futex wake and a
//! context switch per request, about 150 µs more than fio's nbd engine per
//! request at QD1 on this VM, see docs/benchmarks.md), and at any depth every
//! reply is read by exactly one thread.
//!
//! It decides which caller a reply belongs to (by cookie, never by order) and
//! must never hand data to a caller whose cookie the reply does not carry,
//! guess where the next reply starts after one it cannot place, or leave a
//! waiting caller with nobody reading for it.

use super::handshake::Sock;
use crate::proto::SIMPLE_REPLY_MAGIC;
use std::collections::HashMap;
use std::io::{BufReader, Read};
use std::sync::Mutex;
use std::thread::Thread;

/// What a request's reply said.
pub(super) enum Answer {
    /// Success; a read's data, unless it went straight into the caller's buffer.
    Done(Option<Vec<u8>>),
    /// The server's error number.
    ServerError(u32),
    /// Why the connection broke.
    Broken(String),
}

/// A request sent and not yet answered.
struct Waiter {
    /// Bytes of data that follow a successful reply (reads only).
    read_len: usize,
    /// The caller, woken when its answer is in or when it is to read.
    thread: Thread,
    answer: Option<Answer>,
    /// The caller sleeps waiting for this answer (so it must be woken).
    parked: bool,
}

/// The requests in flight on a connection, by cookie.
struct State {
    waiting: HashMap<u64, Waiter>,
    next_cookie: u64,
    /// Set once the connection failed: every later request fails with it.
    broken: Option<String>,
    /// A caller is reading replies.
    reading: bool,
}

/// A connection's replies and the requests waiting for them.
pub(super) struct Replies {
    state: Mutex<State>,
    /// The socket's reading half, used only by the caller that leads.
    stream: Mutex<BufReader<Sock>>,
}

impl Replies {
    pub(super) fn new(stream: BufReader<Sock>) -> Replies {
        Replies {
            state: Mutex::new(State {
                waiting: HashMap::new(),
                next_cookie: 1,
                broken: None,
                reading: false,
            }),
            stream: Mutex::new(stream),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Register a request about to be sent (before it is, so its reply cannot
    /// outrun it) and give its cookie; the connection's failure if it failed.
    pub(super) fn register(&self, read_len: usize) -> Result<u64, String> {
        let mut st = self.state();
        if let Some(why) = &st.broken {
            return Err(why.clone());
        }
        let cookie = st.next_cookie;
        st.next_cookie = st.next_cookie.wrapping_add(1);
        st.waiting.insert(
            cookie,
            Waiter {
                read_len,
                thread: std::thread::current(),
                answer: None,
                parked: false,
            },
        );
        Ok(cookie)
    }

    /// A cookie no request will ever use (for the goodbye, which has no reply).
    pub(super) fn unused_cookie(&self) -> u64 {
        self.state().next_cookie
    }

    /// The connection is unusable: answer everyone waiting, and everyone to
    /// come, with why.
    pub(super) fn break_with(&self, why: String) {
        let mut st = self.state();
        if st.broken.is_none() {
            st.broken = Some(why.clone());
        }
        for w in st.waiting.values_mut() {
            if w.answer.is_none() {
                w.answer = Some(Answer::Broken(why.clone()));
            }
            if w.parked {
                w.thread.unpark();
            }
        }
    }

    /// Wait for the answer to request `cookie`, reading replies while nobody
    /// else does. A read's data goes straight into `dest` when this caller
    /// reads its own reply.
    pub(super) fn wait(&self, cookie: u64, mut dest: Option<&mut [u8]>) -> Answer {
        let mut st = self.state();
        loop {
            let answered = match st.waiting.get_mut(&cookie) {
                Some(w) => {
                    w.parked = false;
                    w.answer.take()
                }
                None => return Answer::Broken(format!("request {cookie} was never sent")),
            };
            if let Some(a) = answered {
                st.waiting.remove(&cookie);
                return a;
            }
            if !st.reading {
                st.reading = true;
                drop(st);
                let mine = self.lead(cookie, dest.as_deref_mut());
                st = self.state();
                st.reading = false;
                // Whoever still waits for an answer must not wait with
                // nobody reading: hand the reading to one of them (not to one
                // whose answer is in: it was woken for that and will not read).
                if let Some(next) = st.waiting.values().find(|w| w.parked && w.answer.is_none()) {
                    next.thread.unpark();
                }
                if let Some(a) = mine {
                    st.waiting.remove(&cookie);
                    return a;
                }
                continue;
            }
            if let Some(w) = st.waiting.get_mut(&cookie) {
                w.parked = true;
            }
            drop(st);
            // Woken when the answer is in or the reading is handed over; a
            // spurious wake-up just looks again.
            std::thread::park();
            st = self.state();
        }
    }

    /// Read replies until request `cookie`'s arrives; give its answer (None
    /// if the connection broke first: the answer is then in its waiter).
    fn lead(&self, cookie: u64, dest: Option<&mut [u8]>) -> Option<Answer> {
        let mut stream = self.stream.lock().unwrap_or_else(|p| p.into_inner());
        let fail = |e: std::io::Error| {
            self.break_with(format!("connection to the server failed: {e}"));
        };
        loop {
            let mut reply = [0u8; 16];
            if let Err(e) = stream.read_exact(&mut reply) {
                fail(e);
                return None;
            }
            let magic = u32::from_be_bytes([reply[0], reply[1], reply[2], reply[3]]);
            let error = u32::from_be_bytes([reply[4], reply[5], reply[6], reply[7]]);
            let mut c = [0u8; 8];
            c.copy_from_slice(&reply[8..16]);
            let got = u64::from_be_bytes(c);
            let read_len = {
                let st = self.state();
                st.waiting
                    .get(&got)
                    .filter(|w| w.answer.is_none() && magic == SIMPLE_REPLY_MAGIC)
                    .map(|w| w.read_len)
            };
            let Some(read_len) = read_len else {
                self.break_with(format!(
                    "the server's reply matches no request in flight (magic {magic:#x}, cookie {got}; expected magic {SIMPLE_REPLY_MAGIC:#x})"
                ));
                return None;
            };
            let answer = if error != 0 {
                Answer::ServerError(error)
            } else if got == cookie {
                match dest {
                    Some(buf) if buf.len() == read_len => {
                        if let Err(e) = stream.read_exact(buf) {
                            fail(e);
                            return None;
                        }
                        return Some(Answer::Done(None));
                    }
                    _ => match read_data(&mut stream, read_len) {
                        Ok(d) => return Some(Answer::Done(d)),
                        Err(e) => {
                            fail(e);
                            return None;
                        }
                    },
                }
            } else {
                match read_data(&mut stream, read_len) {
                    Ok(d) => Answer::Done(d),
                    Err(e) => {
                        fail(e);
                        return None;
                    }
                }
            };
            if got == cookie {
                return Some(answer);
            }
            let mut st = self.state();
            if let Some(w) = st.waiting.get_mut(&got) {
                w.answer = Some(answer);
                if w.parked {
                    w.thread.unpark();
                }
            }
        }
    }
}

/// A successful reply's data (None for requests that carry none).
fn read_data(stream: &mut BufReader<Sock>, len: usize) -> std::io::Result<Option<Vec<u8>>> {
    if len == 0 {
        return Ok(None);
    }
    let mut data = vec![0u8; len];
    stream.read_exact(&mut data)?;
    Ok(Some(data))
}
