//! Requests in flight together (`--queue-depths`): one operation in five
//! (drawn from its own stream) is 2 to 8 requests of the real engine run at
//! once, each a task (`raidlab_core::task`), as a served array's clients
//! keep a queue full. The run's executor (`exec::Interleaved`) gives control
//! back before every I/O step of a plan, and this module's runner draws
//! which request goes on: two read-modify-writes of one stripe, a degraded
//! read beside a write to its stripe, a log entry and another request's
//! write, a held stripe's write-out beside a write to it, all meet in an
//! order the seed decides and replays exactly. Among them, drawn too: a
//! member fault that strikes while they are under way, the stripe cache's
//! write-out of expired stripes (its thread's work), a flush, and a power
//! cut at one of their member writes.
//!
//! It decides what a batch holds, the order its tasks are resumed in, and
//! what the model makes of the answers: the requests' ranges never share a
//! sector (concurrent writes to one sector have no order a block device
//! promises), a flush promises only what was acknowledged before it was
//! issued (nothing of its own batch), and every answer is held until the
//! batch ends and the members the array took out are recorded faulty, as a
//! served array holds it. What the engine does with them is the engine's. A
//! request still waiting when nothing can run (every task waits for a lock
//! another holds) is a deadlock, reported as a violation.

use super::model::SECTOR;
use super::run::{Outcome, Rig};
use raidlab_core::task::{Runner, Stacks, Step, Task, Wait};
use raidlab_core::{Clock, Error, ErrorKind, Volume};
use raidlab_devices::Tripwire;
use raidlab_layout::Level;
use raidlab_raid::recovery::RunOptions;
use raidlab_raid::Array;
use rand::Rng;
use std::sync::Arc;
use std::time::Duration;

/// What one request of a batch asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    Fua,
    Zeroes,
    Trim,
    Flush,
    /// The stripe cache's write-out of what waited past its hold time.
    WriteOut,
    /// md's `check` of the running array (`recovery::scrub_array`), its
    /// steps under the stripe locks the requests beside it take.
    Check,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Write => "write",
            Kind::Fua => "fua write",
            Kind::Zeroes => "write-zeroes",
            Kind::Trim => "trim",
            Kind::Flush => "flush",
            Kind::WriteOut => "stripe write-out",
            Kind::Check => "check",
        }
    }
}

/// One request of a batch, and how it ended.
struct Req {
    kind: Kind,
    off: usize,
    len: usize,
    /// A write's data; a read's buffer once it ended.
    data: Vec<u8>,
    result: Option<raidlab_core::Result<()>>,
    /// A check's mismatched sectors.
    found: u64,
}

/// What a task gives back: its result, its buffer, and a check's
/// mismatched sectors.
type Ended = (raidlab_core::Result<()>, Vec<u8>, u64);

/// A member fault struck mid-batch.
#[derive(Debug, Clone, Copy)]
enum Fault {
    Fail,
    Latent,
    WriteErrors,
}

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Ready,
    Waits(Wait),
    Done,
}

impl Rig {
    /// With queue depths on, one operation in five (drawn from its own
    /// stream) is a batch of requests in flight together. Whether this
    /// operation was one.
    pub(super) fn batch_step(&mut self, strict: bool) -> Result<bool, String> {
        // Behind a cache tier the requests would meet the cache's own
        // locks, which are threads' (a task must never block one).
        if self.tier.is_some() || self.started.is_none() {
            return Ok(false);
        }
        let Some(rng) = self.depth.as_mut() else {
            return Ok(false);
        };
        if !rng.gen_ratio(1, 5) {
            return Ok(false);
        }
        // The batch draws its ranges, data and fault from its own stream
        // through the run's usual helpers: swap it in for the batch.
        let mut depth = self.depth.take().expect("checked above");
        std::mem::swap(&mut self.rng, &mut depth);
        let out = self.batch(strict);
        std::mem::swap(&mut self.rng, &mut depth);
        self.depth = Some(depth);
        out.map(|()| true)
    }

    /// Draw `depth` requests whose sectors do not overlap.
    fn draw_requests(&mut self, depth: usize) -> Vec<Req> {
        let mut reqs: Vec<Req> = Vec::with_capacity(depth + 2);
        let mut taken: Vec<(usize, usize)> = Vec::new();
        let mut flush = false;
        for _ in 0..depth * 4 {
            if reqs.len() == depth {
                break;
            }
            let kind = match self.rng.gen_range(0..20u32) {
                0..=6 => Kind::Write,
                7..=8 => Kind::Fua,
                9..=14 => Kind::Read,
                15..=16 => Kind::Zeroes,
                17 => Kind::Trim,
                _ => Kind::Flush,
            };
            if kind == Kind::Flush {
                if !flush {
                    flush = true;
                    reqs.push(Req {
                        kind,
                        off: 0,
                        len: 0,
                        data: Vec::new(),
                        result: None,
                        found: 0,
                    });
                }
                continue;
            }
            let (off, len) = self.range();
            let sectors = (off / SECTOR, (off + len).div_ceil(SECTOR));
            if taken.iter().any(|&(a, b)| sectors.0 < b && a < sectors.1) {
                continue;
            }
            taken.push(sectors);
            let data = match kind {
                Kind::Write | Kind::Fua => {
                    let mut d = vec![0u8; len];
                    self.rng.fill(&mut d[..]);
                    d
                }
                _ => Vec::new(),
            };
            reqs.push(Req {
                kind,
                off,
                len,
                data,
                result: None,
                found: 0,
            });
        }
        if self.cfg.level != Level::Raid0 && self.rng.gen_ratio(1, 8) {
            reqs.push(Req {
                kind: Kind::Check,
                off: 0,
                len: 0,
                data: Vec::new(),
                result: None,
                found: 0,
            });
        }
        if self.cfg.stripe_cache && self.rng.gen_ratio(1, 3) {
            // Time passes first, so that something may be past its hold.
            let ms = self.rng.gen_range(1..=40u64);
            self.clock.advance(Duration::from_millis(ms));
            reqs.push(Req {
                kind: Kind::WriteOut,
                off: 0,
                len: 0,
                data: Vec::new(),
                result: None,
                found: 0,
            });
        }
        reqs
    }

    fn batch(&mut self, strict: bool) -> Outcome {
        let depth = self.rng.gen_range(2..=8usize);
        let mut reqs = self.draw_requests(depth);
        // A member fault after this many resumes, if any.
        let fault = self.rng.gen_ratio(1, 3).then(|| {
            let at = self.rng.gen_range(0..8 * reqs.len());
            let f = match self.rng.gen_range(0..3u32) {
                0 => Fault::Fail,
                1 => Fault::Latent,
                _ => Fault::WriteErrors,
            };
            (at, f)
        });
        // The power goes at one of the batch's member writes.
        let cut_at = (strict && self.rng.gen_ratio(1, 6)).then(|| self.rng.gen_range(1..=24u64));
        let wire = cut_at.map(Tripwire::new);
        let zeroes = self.array().discard_zeroes();
        // A check beside the requests must find nothing on an array with
        // every role in service, nothing struck and the power on.
        let complete = self.troubled_roles().is_empty();
        let faults_before = self.counts.faults;
        self.counts.batches += 1;
        self.counts.batch_requests += reqs.len() as u64;
        self.note(format!(
            "batch of {}: {}{}{}",
            reqs.len(),
            reqs.iter()
                .map(|r| match r.kind {
                    Kind::Flush | Kind::WriteOut | Kind::Check => r.kind.name().to_string(),
                    k => format!("{} {}+{}", k.name(), r.off, r.len),
                })
                .collect::<Vec<_>>()
                .join(", "),
            fault.map_or(String::new(), |(at, f)| format!(
                "; {f:?} after {at} resumes"
            )),
            cut_at.map_or(String::new(), |n| format!(
                "; power goes at member write {n}"
            )),
        ));
        if wire.is_some() {
            self.arm_tripwire(wire.as_ref());
        }
        // A cut is only ever checked within the level's tolerance (as the
        // workload's own cuts are): with the power set to go, a fault that
        // would take the array beyond it is left out, as under
        // `--skip-known-gaps`.
        let gaps = self.known_gaps;
        self.known_gaps |= wire.is_some();
        let opts = self.run_options();
        let ran = self.run_tasks(&mut reqs, fault, &opts);
        self.known_gaps = gaps;
        // Every answer is held until the members the array took out are
        // recorded faulty, as a served array holds it. With the power gone,
        // those superblock writes are lost like every other: the tripwire
        // stays until they are done.
        let recorded = match ran {
            Ok(()) => self.started_mut().record_failures().map(|_| ()),
            Err(_) => Ok(()),
        };
        if wire.is_some() {
            self.arm_tripwire(None);
        }
        ran?;
        if wire.is_some_and(|w| w.tripped()) {
            self.counts.batch_cuts += 1;
            self.note("the power went during the batch; its answers are never seen".into());
            // Unanswered: each sector written holds its old or its new
            // contents; a trim promised nothing; a flush nothing either.
            for r in &reqs {
                match r.kind {
                    Kind::Write | Kind::Fua => self.model.write(&r.data, r.off),
                    Kind::Zeroes => self.model.write(&vec![0u8; r.len], r.off),
                    Kind::Trim => self.model.forget(r.off, r.len),
                    _ => {}
                }
            }
            return self.power_cut(false);
        }
        let strict = self.strict();
        // A flush covers what was acknowledged before it was issued: every
        // earlier batch and operation, none of this batch's requests.
        if let Some(r) = reqs.iter().find(|r| r.kind == Kind::Flush) {
            let res = answer(r, &recorded);
            self.note(format!("flush: {}", said(&res)));
            self.counts.flushes += 1;
            match res {
                Ok(()) => self.model.flush(),
                Err(e) if strict => {
                    return Err(format!("flush failed within the level's tolerance: {e}"))
                }
                Err(_) => {
                    let pending: Vec<usize> = self.model.pending_sectors().collect();
                    for s in pending {
                        self.model.allow_any(s);
                    }
                }
            }
        }
        for r in &reqs {
            let res = answer(r, &recorded);
            let what = format!("{} {}+{}", r.kind.name(), r.off, r.len);
            match r.kind {
                Kind::Flush => {}
                Kind::Read => self.judge_read(strict, r.off, &r.data, res)?,
                Kind::Check => {
                    self.counts.checks += 1;
                    self.note(format!(
                        "check beside the batch: {}",
                        res.as_ref().map_or_else(
                            |e| e.to_string(),
                            |_| format!("{} mismatched sectors", r.found)
                        )
                    ));
                    let sure = complete && self.counts.faults == faults_before;
                    match res {
                        Ok(()) if sure && r.found > 0 => {
                            return Err(format!(
                                "a check beside requests in flight found {} mismatched sectors on a complete array",
                                r.found
                            ))
                        }
                        Err(e) if sure && e.kind != ErrorKind::Refused => {
                            return Err(format!(
                                "a check beside requests in flight failed on a complete array: {e}"
                            ))
                        }
                        _ => {}
                    }
                }
                Kind::WriteOut => {
                    self.note(format!("stripe write-out: {}", said(&res)));
                    if let Err(e) = res {
                        if strict {
                            return Err(format!("writing out expired stripes failed: {e}"));
                        }
                    }
                }
                Kind::Write | Kind::Fua | Kind::Zeroes | Kind::Trim => {
                    self.note(format!("{what}: {}", said(&res)));
                    if matches!(r.kind, Kind::Write | Kind::Fua) {
                        self.counts.writes += 1;
                    }
                    match res {
                        Ok(()) => match r.kind {
                            Kind::Write => self.model.write(&r.data, r.off),
                            Kind::Fua => {
                                self.model.write(&r.data, r.off);
                                self.model.fua(r.off, r.len);
                            }
                            Kind::Trim if !zeroes => self.model.forget(r.off, r.len),
                            _ => self.model.write_zeroes(r.off, r.len),
                        },
                        Err(e)
                            if r.kind == Kind::Trim
                                && e.kind == ErrorKind::Unsupported
                                && self.cfg.has_parity() => {}
                        Err(e) if strict => {
                            return Err(format!(
                                "{what} failed within the level's tolerance (in a batch): {e}"
                            ))
                        }
                        Err(_) => self.model.forget(r.off, r.len),
                    }
                }
            }
        }
        // What the batch wrote reads back once it is answered: a request
        // that raced another into a wrong parity shows at once, not only
        // when a later read or a cut happens to reconstruct from it.
        for r in &reqs {
            if matches!(r.kind, Kind::Write | Kind::Fua | Kind::Zeroes) {
                self.read_range(strict, r.off, r.len)?;
            }
        }
        Ok(())
    }

    /// Run the batch's requests as tasks to their ends, resuming a ready one
    /// drawn at random each time; strike `fault` after that many resumes.
    fn run_tasks(
        &mut self,
        reqs: &mut [Req],
        mut fault: Option<(usize, Fault)>,
        opts: &RunOptions,
    ) -> Outcome {
        let array = self.array();
        let mut stacks = std::mem::take(&mut self.stacks);
        let runner = Runner::enter();
        let mut tasks: Vec<Option<Task<Ended>>> = Vec::with_capacity(reqs.len());
        for r in reqs.iter_mut() {
            let t =
                spawn(&mut stacks, &array, r, opts).map_err(|e| format!("internal: a task: {e}"));
            match t {
                Ok(t) => tasks.push(Some(t)),
                Err(e) => {
                    self.stacks = stacks;
                    return Err(e);
                }
            }
        }
        // Where the batch writes: a write error strikes there.
        let writes: Vec<(usize, usize)> = reqs
            .iter()
            .filter(|r| matches!(r.kind, Kind::Write | Kind::Fua | Kind::Zeroes))
            .map(|r| (r.off, r.len))
            .collect();
        let mut state = vec![State::Ready; tasks.len()];
        let mut ready = Vec::with_capacity(tasks.len());
        let mut woken = Vec::new();
        let mut resumes = 0usize;
        let out = loop {
            ready.clear();
            let now = self.clock.now();
            for (i, s) in state.iter().enumerate() {
                match s {
                    State::Ready | State::Waits(Wait::Runner(_)) => ready.push(i),
                    State::Waits(Wait::Until(t)) if *t <= now => ready.push(i),
                    _ => {}
                }
            }
            if ready.is_empty() {
                if state.iter().all(|s| *s == State::Done) {
                    break Ok(());
                }
                let next = state
                    .iter()
                    .filter_map(|s| match s {
                        State::Waits(Wait::Until(t)) => Some(*t),
                        _ => None,
                    })
                    .min();
                if let Some(t) = next {
                    self.clock.advance(t.saturating_sub(now));
                    continue;
                }
                let stuck: Vec<String> = state
                    .iter()
                    .zip(reqs.iter())
                    .filter(|(s, _)| **s != State::Done)
                    .map(|(_, r)| format!("{} {}+{}", r.kind.name(), r.off, r.len))
                    .collect();
                break Err(format!(
                    "deadlock: requests in flight wait for each other and none can go on: {}",
                    stuck.join(", ")
                ));
            }
            let i = ready[self.rng.gen_range(0..ready.len())];
            if let Some((at, f)) = fault {
                if resumes >= at {
                    fault = None;
                    self.strike_mid_batch(f, &writes)?;
                }
            }
            resumes += 1;
            let Some(task) = tasks[i].as_mut() else {
                break Err("internal: a finished task was ready".into());
            };
            match task.resume() {
                Step::Waits(w) => state[i] = State::Waits(w),
                Step::Done((res, buf, found)) => {
                    state[i] = State::Done;
                    reqs[i].result = Some(res);
                    reqs[i].found = found;
                    if reqs[i].kind == Kind::Read {
                        reqs[i].data = buf;
                    }
                    if let Some(t) = tasks[i].take() {
                        t.finish(&mut stacks);
                    }
                }
            }
            runner.woken(&mut woken);
            for key in woken.drain(..) {
                for s in state.iter_mut() {
                    if *s == State::Waits(Wait::Key(key)) {
                        *s = State::Ready;
                    }
                }
            }
        };
        // Tasks still suspended (a deadlock) unwind here, letting go of
        // what they hold.
        drop(tasks);
        drop(runner);
        self.stacks = stacks;
        out
    }

    fn strike_mid_batch(&mut self, f: Fault, writes: &[(usize, usize)]) -> Outcome {
        // A request suspended while it records a member taken out holds the
        // assembly (`Array::record_take_outs`); the harness, on the same
        // thread, would wait for it for ever. The fault is not struck then.
        if self.started.as_ref().is_some_and(|s| s.try_asm().is_none()) {
            self.note("fault not struck: a request is writing the superblocks".into());
            return Ok(());
        }
        let before = self.counts.faults;
        match f {
            Fault::Fail => self.fail_member()?,
            Fault::Latent => self.latent_errors()?,
            Fault::WriteErrors => {
                if !self.write_errors_under(writes) {
                    self.write_errors()?
                }
            }
        }
        self.counts.batch_faults += self.counts.faults - before;
        Ok(())
    }
}

impl Rig {
    /// On a parity level, write errors where one of the batch's writes is
    /// about to land: the data member of a byte it writes, a few sectors
    /// from there (a random range elsewhere would rarely meet a request in
    /// flight). Whether it struck; within the tolerance as any fault
    /// (`pick_victim`'s rule).
    fn write_errors_under(&mut self, writes: &[(usize, usize)]) -> bool {
        if writes.is_empty() || !self.cfg.has_parity() || self.file_origin() {
            return false;
        }
        let (off, len) = writes[self.rng.gen_range(0..writes.len())];
        let at = off + self.rng.gen_range(0..len);
        let Some(s) = self.started.as_ref() else {
            return false;
        };
        let g = s.asm().geometry;
        let (role, _, member_at) = g.parity_location(at as u64);
        let Some(member) = s.asm().slots.get(role).copied().flatten() else {
            return false;
        };
        let Some((dev, ok)) = self.victim_at(role, member) else {
            return false;
        };
        if self.dead[dev] || (!ok && self.gap_holds_beyond()) {
            return false;
        }
        let Some((start, bytes)) = self.data_area(dev) else {
            return false;
        };
        let first = start + member_at / 512 * 512;
        let n = self.rng.gen_range(1..=8u64) * 512;
        let r = first..(first + n).min(start + bytes);
        self.fail_writes_at(
            dev,
            r,
            &format!(" (under the batch's write at array byte {at})"),
        );
        true
    }
}

/// A task running `r` on `array`.
fn spawn(
    stacks: &mut Stacks,
    array: &Arc<Array>,
    r: &mut Req,
    opts: &RunOptions,
) -> std::io::Result<Task<Ended>> {
    let a = array.clone();
    let (off, len) = (r.off as u64, r.len);
    let plain = |res| (res, Vec::new(), 0);
    match r.kind {
        Kind::Read => Task::new(stacks, move || {
            let mut buf = vec![0u8; len];
            let res = a.read_at(&mut buf, off);
            (res, buf, 0)
        }),
        Kind::Write => {
            let data = r.data.clone();
            Task::new(stacks, move || plain(a.write_at(&data, off)))
        }
        Kind::Fua => {
            let data = r.data.clone();
            Task::new(stacks, move || plain(a.write_at_fua(&data, off)))
        }
        Kind::Zeroes => Task::new(stacks, move || plain(a.write_zeroes(off, len as u64))),
        Kind::Trim => Task::new(stacks, move || plain(a.discard(off, len as u64))),
        Kind::Flush => Task::new(stacks, move || plain(a.flush())),
        Kind::WriteOut => Task::new(stacks, move || plain(a.write_out_expired())),
        Kind::Check => {
            let opts = opts.clone();
            Task::new(stacks, move || {
                match raidlab_raid::recovery::scrub_array(&a, false, 0, opts, &mut |_| {}) {
                    Ok(r) => (Ok(()), Vec::new(), r.mismatch_sectors),
                    Err(e) => plain(Err(e)),
                }
            })
        }
    }
}

/// A request's answer, held until the failures it caused were recorded.
fn answer(r: &Req, recorded: &raidlab_core::Result<()>) -> raidlab_core::Result<()> {
    match (&r.result, recorded) {
        (Some(Ok(())), Ok(())) => Ok(()),
        (Some(Err(e)), _) | (Some(Ok(())), Err(e)) => Err(e.copy()),
        (None, _) => Err(Error::invalid("internal: a request never ended")),
    }
}

fn said(r: &raidlab_core::Result<()>) -> String {
    r.as_ref().map_or_else(|e| e.to_string(), |_| "ok".into())
}
