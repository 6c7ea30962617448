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
//! A request or a walk that runs as a task (the simulator's,
//! `raidlab_core::task`) suspends where a thread would wait on the gate's
//! condition variable, and is woken where threads are notified: the walk
//! and the clients of one simulated array are tasks on one thread, and a
//! thread's wait there would never end.
//!
//! It must never decide placement, parity or the walk's order (the sides are
//! running arrays; the walk is `walk`'s), and never let a write through to a
//! geometry that does not hold its bytes.

use raidlab_core::task::{self, Wait};
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

    /// Wait for a change of the state: a thread on the condition variable;
    /// a task suspended until [`ReshapeGate::notify`] wakes its key (the
    /// caller looks again either way, as after a spurious wake-up).
    fn wait<'a>(&'a self, g: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        if task::in_task() {
            drop(g);
            task::suspend(Wait::Key(self.key()));
            return self.lock();
        }
        self.changed.wait(g).unwrap_or_else(|p| p.into_inner())
    }

    /// The state changed: threads and tasks waiting look again.
    fn notify(&self) {
        self.changed.notify_all();
        task::wake(self.key());
    }

    /// What a task waiting on this gate is woken by.
    fn key(&self) -> usize {
        self as *const Self as usize
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
            if let (true, Some(why), Some(w)) = (over_window, &g.ended, &g.window) {
                // Only a walk through a backup file ends with its window
                // closed (`ended_closed`).
                return Err(Error::new(
                    ErrorKind::Io,
                    if write { Op::Write } else { Op::Read },
                    format!("the reshape stopped ({why}) while array bytes {}..{} were being moved through its backup file: they are whole only there until it resumes; stop the server and serve the array again with `--backup-file FILE` (or finish it offline with `raidlab grow --continue --backup-file FILE`)", w.start, w.end),
                ));
            }
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
                self.notify();
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
        self.notify();
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
        self.notify();
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
        self.notify();
    }

    /// A window of a walk through a backup file is moved and the
    /// superblocks record `position` past it: the bytes it covered are in
    /// the new geometry, checkpointed, and open; `next`, the window whose
    /// old bytes are already in the file (a forward restripe saves it
    /// before this commit), stays closed, with no gap a request could
    /// enter through: a write there would make the file's copy stale, and
    /// a resume would put that copy back over it.
    pub fn advance(&self, position: u64, next: Option<Range<u64>>) {
        let mut g = self.lock();
        g.reshape.position = position;
        g.checkpoint = position;
        g.wants_checkpoint = false;
        g.window = next;
        self.notify();
    }

    /// A walk through a backup file has ended short of its end: requests
    /// no longer wait for it, but its window stays closed (its bytes may
    /// be half moved, or their old bytes held by the file for the resume):
    /// a request over it gets an error saying how the reshape resumes.
    pub fn ended_closed(&self, why: String) {
        let mut g = self.lock();
        g.ended = Some(why);
        self.notify();
    }

    /// The walk has ended (`why`: done, stopped, or its error): requests no
    /// longer wait for it.
    pub fn ended(&self, why: String) {
        let mut g = self.lock();
        g.ended = Some(why);
        g.window = None;
        self.notify();
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

#[cfg(test)]
mod tests {
    use super::*;
    use raidlab_core::task::{Runner, Stacks, Step, Task};
    use raidlab_layout::reshape::MdReshape;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// A RAID 5 of 3 members grown to 4 (64K chunks), not yet walked.
    fn grow() -> Reshape {
        Reshape::from_md(&MdReshape {
            level: 5,
            layout: 2,
            chunk_sectors: 128,
            raid_disks: 4,
            new_level: 5,
            new_layout: 2,
            new_chunk_sectors: 128,
            delta_disks: 1,
            position_sectors: 0,
            backwards: false,
            member_sectors: 4096,
        })
        .unwrap()
    }

    /// Run `tasks` in turn, a task waiting for a key only once that key
    /// was woken (as the simulator's runners do); a round with none able
    /// to go on is a deadlock, which fails the test.
    fn run(tasks: Vec<Task<()>>) {
        let runner = Runner::enter();
        let mut stacks = Stacks::default();
        let mut live: Vec<(Task<()>, Option<Wait>)> =
            tasks.into_iter().map(|t| (t, None)).collect();
        let mut woken = Vec::new();
        while !live.is_empty() {
            let mut went = false;
            let mut i = 0;
            while i < live.len() {
                if matches!(live[i].1, Some(Wait::Key(_))) {
                    i += 1;
                    continue;
                }
                went = true;
                match live[i].0.resume() {
                    Step::Waits(w) => {
                        live[i].1 = Some(w);
                        i += 1;
                    }
                    Step::Done(()) => live.remove(i).0.finish(&mut stacks),
                }
                runner.woken(&mut woken);
                for k in woken.drain(..) {
                    for t in live.iter_mut() {
                        if t.1 == Some(Wait::Key(k)) {
                            t.1 = None;
                        }
                    }
                }
            }
            assert!(went, "deadlock: every task waits on the gate");
        }
    }

    /// The walk's step over a window and a write over it, as two tasks of
    /// one thread: the write suspends (not blocks) while the step copies,
    /// then waits for the checkpoint it asks for (the bytes it reaches have
    /// moved but a resume would copy them again), and goes to the new
    /// geometry once the walk has checkpointed.
    #[test]
    fn a_write_task_waits_for_the_step_then_the_checkpoint() {
        let gate = ReshapeGate::new(grow());
        let moved = 1u64 << 20;
        let order = Rc::new(RefCell::new(Vec::new()));
        let mut stacks = Stacks::default();
        let (g, o) = (gate.clone(), order.clone());
        let walk = Task::new(&mut stacks, move || {
            g.begin_step(0..moved);
            o.borrow_mut().push("step begun".to_string());
            // The copy's member I/O, where the simulator's executor
            // gives control back.
            assert!(task::suspend(Wait::Runner(1)));
            g.end_step(true, moved);
            o.borrow_mut().push("step done".to_string());
            while !g.wants_checkpoint() {
                assert!(task::suspend(Wait::Runner(2)));
            }
            g.checkpointed(moved);
            o.borrow_mut().push("checkpointed".to_string());
        })
        .unwrap();
        let (g, o) = (gate.clone(), order.clone());
        let write = Task::new(&mut stacks, move || {
            let pass = g.enter(4096..8192, true).unwrap();
            o.borrow_mut()
                .push(format!("write entered: {:?}", pass.pieces));
        })
        .unwrap();
        run(vec![walk, write]);
        assert_eq!(
            *order.borrow(),
            vec![
                "step begun",
                "step done",
                "checkpointed",
                "write entered: [(true, 4096, 4096)]"
            ]
        );
        assert!(!task::in_task());
    }

    /// A request in flight over the window, suspended mid-I/O, holds the
    /// walk's step back until it leaves; the step then copies.
    #[test]
    fn a_step_task_waits_for_a_request_task_over_its_window() {
        let gate = ReshapeGate::new(grow());
        let order = Rc::new(RefCell::new(Vec::new()));
        let mut stacks = Stacks::default();
        let (g, o) = (gate.clone(), order.clone());
        let read = Task::new(&mut stacks, move || {
            let pass = g.enter(0..4096, false).unwrap();
            o.borrow_mut().push("read entered");
            assert_eq!(pass.pieces, vec![(false, 0, 4096)]);
            assert!(task::suspend(Wait::Runner(1)));
            o.borrow_mut().push("read leaves");
        })
        .unwrap();
        let (g, o) = (gate.clone(), order.clone());
        let walk = Task::new(&mut stacks, move || {
            g.begin_step(0..1 << 20);
            o.borrow_mut().push("step begun");
            g.end_step(true, 1 << 20);
        })
        .unwrap();
        run(vec![read, walk]);
        assert_eq!(
            *order.borrow(),
            vec!["read entered", "read leaves", "step begun"]
        );
        assert_eq!(gate.position(), 1 << 20);
    }

    /// A served walk that reaches its end records that in the superblocks
    /// before requests write the new geometry without waiting. Before
    /// (found by the simulator's served reshapes, `raidlab-sim`
    /// `torture::served_reshape`) the gate was told everything was
    /// checkpointed while the superblocks still held the last checkpoint: a
    /// write answered and flushed after the walk's last step, then a crash
    /// before the end's commit, and the resume read the old geometry there.
    #[test]
    fn a_write_after_the_walks_end_survives_a_crash_before_the_end_commit() {
        use crate::assemble::{create, CreateSpec, Device, NewMember};
        use crate::grow::ReshapeRequest;
        use crate::recovery::RunOptions;
        use raidlab_layout::Layout;
        let devs: Vec<Device> = (0..3)
            .map(|i| Device {
                path: format!("m{i}"),
                volume: Arc::new(raidlab_devices::MemVolume::new(4 << 20)),
            })
            .collect();
        let spec = CreateSpec {
            level: raidlab_layout::Level::Raid5,
            layout: Layout::parse(raidlab_layout::Level::Raid5, None).unwrap(),
            chunk_bytes: 64 << 10,
            spares: 0,
            name: "end".into(),
            force: false,
            bitmap: false,
            bitmap_chunk: None,
            ppl: false,
        };
        let members = devs
            .iter()
            .map(|d| NewMember {
                device: d.clone(),
                zeroed: true,
            })
            .collect();
        let mut asm = create(&spec, members).unwrap();
        // A new chunk: the array keeps its size, so the client reaches
        // bytes past the walk's last recorded checkpoint.
        let req = ReshapeRequest {
            chunk_bytes: Some(32 << 10),
            ..ReshapeRequest::default()
        };
        let plan = asm.reshape_check(&req, 0).unwrap();
        asm.reshape_start(plan).unwrap();
        let mut walk = asm.reshape_served(false).unwrap();
        let volume = walk.volume("end".into());
        let opts = RunOptions {
            use_maps: false,
            ..RunOptions::default()
        };
        walk.run(&mut asm, &opts, &|| false).unwrap();
        // The walk is done; the server has not committed the end yet. A
        // client writes the array's last block and flushes: answered.
        let at = volume.size() - 4096;
        let data = vec![0xa5u8; 4096];
        volume.write_at(&data, at).unwrap();
        volume.flush().unwrap();
        // The machine stops here; the members are assembled again.
        drop((walk, volume, asm));
        let mut asm = crate::assemble::Assembly::assemble(devs).unwrap();
        let mut back = vec![0u8; 4096];
        asm.array().unwrap().read_at(&mut back, at).unwrap();
        assert!(back == data, "the answered write was lost to the resume");
        // Resumed from the end: nothing left to walk, the end committed.
        let mut walk = asm.reshape_served(false).unwrap();
        walk.run(&mut asm, &opts, &|| false).unwrap();
        walk.end(&mut asm).unwrap();
        assert!(asm.reshape().is_none());
        assert_eq!(asm.geometry.chunk_bytes, 32 << 10);
        asm.array().unwrap().read_at(&mut back, at).unwrap();
        assert!(back == data, "the answered write was lost at the end");
    }

    /// On threads the gate is the condition variable it was: a write over
    /// moved, unrecorded bytes waits for the walk's checkpoint.
    #[test]
    fn a_write_thread_waits_for_the_checkpoint() {
        let gate = ReshapeGate::new(grow());
        gate.begin_step(0..1 << 20);
        gate.end_step(true, 1 << 20);
        let g = gate.clone();
        let writer = std::thread::spawn(move || {
            let pass = g.enter(0..4096, true).unwrap();
            pass.pieces.clone()
        });
        while !gate.wants_checkpoint() {
            std::thread::yield_now();
        }
        gate.checkpointed(1 << 20);
        assert_eq!(writer.join().unwrap(), vec![(true, 0, 4096)]);
    }
}
