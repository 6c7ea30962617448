//! A reshape while clients use the array: the window between the reshape's
//! walk and the clients' requests, and the array's bytes as the clients see
//! them meanwhile (each byte in the geometry that holds it, writable).
//!
//! What it decides: which geometry a client's request goes to, and when a
//! request must wait for the walk (or the walk for requests), so that no
//! acknowledged write is lost to the walk's copy or to a resume after a
//! crash. md's rules in its reshape (`make_request` against
//! `reshape_progress` and `reshape_safe`), restated:
//!
//! - The step under way (the walk's window: old-geometry bytes being copied
//!   into the new one) takes no client request; a request over it waits for
//!   the step, and the step waits for the requests already over it.
//! - Bytes the walk has moved are read and written in the new geometry, the
//!   others in the old one, as the position was when the request entered.
//! - A write to bytes moved since the last checkpoint waits for the next
//!   checkpoint (and asks for it): a resume after a crash re-copies those
//!   bytes from the old geometry, over such a write.
//! - A step waits for every request still using the old geometry's copy of
//!   bytes the walk has moved (a request that entered before they moved):
//!   once the checkpoint passes them, the new geometry's writes may land on
//!   those old rows.
//!
//! It must never decide placement, parity or the walk's order (the sides are
//! running arrays; the walk is `walk`'s), and never let a write through to a
//! geometry that does not hold its bytes.

use raidlab_core::{check_range, Error, ErrorKind, Op, Result, Volume};
use raidlab_layout::reshape::Reshape;
use std::ops::Range;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Where the walk is, and the requests in flight.
#[derive(Debug)]
struct State {
    /// The reshape, its `position` the walk's: bytes below it (above it,
    /// going backwards) are in the new geometry.
    reshape: Reshape,
    /// The last position recorded in the superblocks.
    checkpoint: u64,
    /// The step under way, in array bytes.
    window: Option<Range<u64>>,
    /// Requests in flight: (id, bytes, bytes it reads or writes in the old
    /// geometry).
    in_flight: Vec<(u64, Range<u64>, Option<Range<u64>>)>,
    next_id: u64,
    /// A write waits for a checkpoint.
    wants_checkpoint: bool,
    /// The walk has stopped (done, stopped or failed): nothing waits for it
    /// any more; a write that needs a checkpoint gets this error instead.
    ended: Option<String>,
}

/// The window between the walk and the clients.
#[derive(Debug)]
pub struct ReshapeGate {
    state: Mutex<State>,
    changed: Condvar,
    /// The array's size while the reshape runs: the smaller geometry's,
    /// fixed for its life (read on every request, so kept out of the lock).
    bytes: u64,
}

fn overlaps(a: &Range<u64>, b: &Range<u64>) -> bool {
    a.start < b.end && b.start < a.end
}

impl ReshapeGate {
    /// A gate for `reshape` as the superblocks record it (its position the
    /// last checkpoint).
    pub fn new(reshape: Reshape) -> Arc<ReshapeGate> {
        Arc::new(ReshapeGate {
            bytes: reshape.array_bytes(),
            state: Mutex::new(State {
                checkpoint: reshape.position,
                reshape,
                window: None,
                in_flight: Vec::new(),
                next_id: 0,
                wants_checkpoint: false,
                ended: None,
            }),
            changed: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait<'a>(&self, g: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed.wait(g).unwrap_or_else(|p| p.into_inner())
    }

    /// The array's size while the reshape runs.
    pub fn array_bytes(&self) -> u64 {
        self.bytes
    }

    /// The walk's position now.
    pub fn position(&self) -> u64 {
        self.lock().reshape.position
    }

    /// Bytes moved but not yet checkpointed: a write there would be undone
    /// by a resume.
    fn unsafe_bytes(s: &State) -> Range<u64> {
        let (p, c) = (s.reshape.position, s.checkpoint);
        if s.reshape.backwards {
            p..c.max(p)
        } else {
            c.min(p)..p
        }
    }

    /// Enter a request over `bytes`: wait until it may run, then say which
    /// pieces go to which geometry (`(new, at, len)`, in order). The entry
    /// ends when the returned pass is dropped.
    fn enter(&self, bytes: Range<u64>, write: bool) -> Result<Pass<'_>> {
        let mut g = self.lock();
        loop {
            let over_window = g.window.as_ref().is_some_and(|w| overlaps(w, &bytes));
            let needs_checkpoint = write && overlaps(&Self::unsafe_bytes(&g), &bytes);
            if needs_checkpoint {
                if let Some(why) = &g.ended {
                    return Err(Error::new(
                        ErrorKind::Io,
                        Op::Write,
                        format!("the reshape stopped ({why}) before the bytes this write reaches were checkpointed; restart the server to resume the reshape, then write again"),
                    ));
                }
            }
            if !over_window && !needs_checkpoint {
                break;
            }
            if needs_checkpoint && !g.wants_checkpoint {
                g.wants_checkpoint = true;
                self.changed.notify_all();
            }
            g = self.wait(g);
        }
        let pieces = g.reshape.split(bytes.start, bytes.end - bytes.start);
        let old = pieces
            .iter()
            .find(|p| !p.0)
            .map(|&(_, at, len)| at..at + len);
        let id = g.next_id;
        g.next_id += 1;
        g.in_flight.push((id, bytes, old));
        Ok(Pass {
            gate: self,
            id,
            pieces,
        })
    }

    fn leave(&self, id: u64) {
        let mut g = self.lock();
        g.in_flight.retain(|e| e.0 != id);
        self.changed.notify_all();
    }

    /// The walk is about to copy `bytes`: from now on no request enters
    /// them; wait for those in flight over them, and for those still using
    /// the old geometry's copy of bytes already moved.
    pub fn begin_step(&self, bytes: Range<u64>) {
        let mut g = self.lock();
        g.window = Some(bytes.clone());
        loop {
            let s = &*g;
            // The bytes the old geometry still holds once this step is done.
            let unmoved = if s.reshape.backwards {
                0..bytes.start
            } else {
                bytes.end..u64::MAX
            };
            let busy = s.in_flight.iter().any(|(_, b, old)| {
                overlaps(b, &bytes)
                    || old
                        .as_ref()
                        .is_some_and(|o| o.start < unmoved.start || o.end > unmoved.end)
            });
            if !busy {
                return;
            }
            g = self.wait(g);
        }
    }

    /// The step is done (`moved`: its bytes are in the new geometry now, the
    /// position `position`; not moved: it failed, the position stays).
    pub fn end_step(&self, moved: bool, position: u64) {
        let mut g = self.lock();
        g.window = None;
        if moved {
            g.reshape.position = position;
        }
        self.changed.notify_all();
    }

    /// Whether a write waits for a checkpoint.
    pub fn wants_checkpoint(&self) -> bool {
        self.lock().wants_checkpoint
    }

    /// The superblocks now record `position`.
    pub fn checkpointed(&self, position: u64) {
        let mut g = self.lock();
        g.checkpoint = position;
        g.wants_checkpoint = false;
        self.changed.notify_all();
    }

    /// The walk has ended (`why`: done, stopped, or its error): requests no
    /// longer wait for it.
    pub fn ended(&self, why: String) {
        let mut g = self.lock();
        g.ended = Some(why);
        g.window = None;
        self.changed.notify_all();
    }
}

/// A request's entry through the gate, left when dropped.
struct Pass<'a> {
    gate: &'a ReshapeGate,
    id: u64,
    pieces: Vec<(bool, u64, u64)>,
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        self.gate.leave(self.id);
    }
}

/// The array's bytes while it is reshaped in service: each request through
/// the gate, each piece to the running array of the geometry that holds it.
pub struct ReshapingVolume {
    name: String,
    gate: Arc<ReshapeGate>,
    old: Arc<dyn Volume>,
    new: Arc<dyn Volume>,
}

impl std::fmt::Debug for ReshapingVolume {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReshapingVolume")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ReshapingVolume {
    /// The array `name` over its two sides (running arrays of the old and
    /// the new geometry, both writable), through `gate`.
    pub fn new(
        name: String,
        gate: Arc<ReshapeGate>,
        old: Arc<dyn Volume>,
        new: Arc<dyn Volume>,
    ) -> ReshapingVolume {
        ReshapingVolume {
            name,
            gate,
            old,
            new,
        }
    }

    fn side(&self, new: bool) -> &dyn Volume {
        if new {
            self.new.as_ref()
        } else {
            self.old.as_ref()
        }
    }

    /// Run `f` on each piece of `offset..offset + len` in its geometry.
    fn each(
        &self,
        op: Op,
        offset: u64,
        len: u64,
        mut f: impl FnMut(&dyn Volume, u64, usize, u64) -> Result<()>,
    ) -> Result<()> {
        check_range(&self.name, op, self.size(), offset, len)?;
        if len == 0 {
            return Ok(());
        }
        let pass = self.gate.enter(offset..offset + len, op != Op::Read)?;
        let mut done = 0usize;
        for &(new, at, piece) in &pass.pieces {
            f(self.side(new), at, done, piece)?;
            done += piece as usize;
        }
        Ok(())
    }
}

impl Volume for ReshapingVolume {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn size(&self) -> u64 {
        self.gate.array_bytes()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.each(Op::Read, offset, buf.len() as u64, |v, at, done, len| {
            v.read_at(&mut buf[done..done + len as usize], at)
        })
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.each(Op::Write, offset, buf.len() as u64, |v, at, done, len| {
            v.write_at(&buf[done..done + len as usize], at)
        })
    }

    fn write_at_fua(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.each(Op::Write, offset, buf.len() as u64, |v, at, done, len| {
            v.write_at_fua(&buf[done..done + len as usize], at)
        })
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        self.each(Op::Write, offset, len, |v, at, _, len| {
            v.write_zeroes(at, len)
        })
    }

    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        self.each(Op::Discard, offset, len, |v, at, _, len| v.discard(at, len))
    }

    fn discard_zeroes(&self) -> bool {
        self.old.discard_zeroes() && self.new.discard_zeroes()
    }

    /// Both geometries' members: a write acknowledged on either is durable.
    fn flush(&self) -> Result<()> {
        self.old.flush()?;
        self.new.flush()
    }

    fn is_writable(&self) -> bool {
        self.old.is_writable() && self.new.is_writable()
    }
}
