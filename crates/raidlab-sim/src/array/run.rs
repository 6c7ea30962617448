//! The event loop of a simulated array: requests and member operations in
//! numbered slots, each request's plans carried step by step (stripe locks
//! taken, member operations issued, compute steps timed), and the `Device`
//! contract (next event, advance) over the members.
//!
//! Decides only when each recorded step runs. It must never decide what
//! member I/O a request needs (the engine's plans say) nor read the wall
//! clock.

use super::*;

/// Values in reusable numbered slots: the simulator looks requests and member
/// operations up by number several times per I/O, and a vector index is what a
/// million of those a second can afford. Slots are reused lowest-freed-last, the
/// same way on every run.
#[derive(Debug)]
pub(super) struct Slab<T> {
    items: Vec<Option<T>>,
    free: Vec<usize>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            items: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Slab<T> {
    pub(super) fn insert(&mut self, t: T) -> u64 {
        match self.free.pop() {
            Some(i) => {
                self.items[i] = Some(t);
                i as u64
            }
            None => {
                self.items.push(Some(t));
                (self.items.len() - 1) as u64
            }
        }
    }
    pub(super) fn get(&self, i: u64) -> Option<&T> {
        self.items.get(i as usize).and_then(Option::as_ref)
    }
    pub(super) fn get_mut(&mut self, i: u64) -> Option<&mut T> {
        self.items.get_mut(i as usize).and_then(Option::as_mut)
    }
    pub(super) fn remove(&mut self, i: u64) -> Option<T> {
        let t = self.items.get_mut(i as usize)?.take();
        if t.is_some() {
            self.free.push(i as usize);
        }
        t
    }
}

/// One request (or a background write-out) on its way through its plans.
#[derive(Debug)]
pub(super) struct Active {
    /// The submitter's id; `None` for the stripe cache's own write-outs.
    pub(super) host_id: Option<u64>,
    pub(super) plans: VecDeque<Plan>,
    pub(super) step: usize,
    /// Member operations of the current step not yet complete.
    pub(super) outstanding: usize,
    /// Whether the current plan holds its locks.
    pub(super) locked: bool,
    /// Not before this time (the request's own overhead).
    pub(super) not_before: Ns,
    /// A rebuild step: when it completes, the next is due.
    pub(super) rebuild_step: bool,
    /// A scrub step: when it completes, the next is due.
    pub(super) scrub_step: bool,
    /// A stripe the cache wrote out because its hold time passed: when it
    /// completes, the next expired one goes (the cache's thread, one at a
    /// time).
    pub(super) expiry_step: bool,
    /// A scrub step whose reads the engine has compared.
    pub(super) compared: bool,
    /// The process its member I/O is issued as (for a scheduler on the
    /// members): a host read's own; md's thread for everything else, as md
    /// reads an aligned chunk in the caller's context but handles stripes
    /// (parity writes and their reads) in its raid5d thread.
    pub(super) process: u32,
    /// Bitmap chunks it writes (busy for md's bitmap daemon until it ends).
    pub(super) bitmap_chunks: Vec<u64>,
}

impl Active {
    /// md's own work (a stripe write-out, a rebuild or scrub step, a
    /// bitmap update), issued by its thread, due at `now`.
    pub(super) fn md(plans: VecDeque<Plan>, now: Ns) -> Active {
        Active {
            host_id: None,
            plans,
            step: 0,
            outstanding: 0,
            locked: false,
            not_before: now,
            rebuild_step: false,
            scrub_step: false,
            expiry_step: false,
            compared: false,
            process: MD_THREAD,
            bitmap_chunks: Vec::new(),
        }
    }
}

/// The member side of a request's step being issued, borrowed beside the
/// request (whose plan stays where it is).
struct Issue<'a> {
    members: &'a mut [Option<Box<dyn Device>>],
    member_next: &'a mut [Ns],
    member_ops: &'a mut Slab<u64>,
    log: &'a mut OpLog,
    errors: &'a mut Vec<String>,
    now: Ns,
    /// The request (its slot) and the process it issues as.
    seq: u64,
    process: u32,
    /// Member operations issued.
    issued: usize,
}

impl Issue<'_> {
    fn submit(&mut self, kind: IoKind, member: usize, offset: u64, len: u64) {
        let id = self.member_ops.insert(self.seq);
        self.log.record(MemberIo {
            kind,
            member,
            offset,
            len,
        });
        match self.members.get_mut(member).and_then(Option::as_mut) {
            Some(dev) => {
                dev.submit(
                    self.now,
                    Request {
                        id,
                        kind,
                        offset,
                        len,
                        process: self.process,
                    },
                );
                self.member_next[member] = dev.next_event().unwrap_or(IDLE);
                self.issued += 1;
            }
            None => {
                // The engine never plans I/O on a missing member; should it,
                // the request completes with an error noted, not a hang.
                self.errors.push(format!(
                    "a plan used missing member {member} ({kind:?} at {offset})"
                ));
                self.member_ops.remove(id);
            }
        }
    }
}

impl SimArray {
    /// The plans the engine ran since the last call, in a reused queue.
    pub(super) fn recorded_plans(&mut self) -> VecDeque<Plan> {
        let mut q = self.spare_queues.pop().unwrap_or_default();
        self.recording.drain_into(&mut q);
        q
    }

    /// Run the engine for a request now and start scheduling its plans.
    fn start(&mut self, now: Ns, host_id: Option<u64>, req: Request) {
        let Request {
            kind,
            offset,
            len,
            process,
            ..
        } = req;
        self.maybe_held |= matches!(kind, IoKind::Write | IoKind::Zero);
        self.clock.set(now);
        if let (Some(r), Some(_)) = (self.requests.as_mut(), host_id) {
            r.push((now, kind, offset, len));
        }
        let result = match kind {
            IoKind::Read => {
                self.buf.resize(len as usize, 0);
                self.array.read_at(&mut self.buf[..len as usize], offset)
            }
            IoKind::Write => {
                self.buf.resize(len as usize, 0);
                self.array.write_at(&self.buf[..len as usize], offset)
            }
            IoKind::Zero => self.array.write_zeroes(offset, len),
            IoKind::Flush => self.array.flush(),
            IoKind::Trim => Ok(()),
        };
        let error = result
            .err()
            .map(|e| format!("{kind:?} of {len} bytes at {offset}: {e}"));
        if self.faults.is_some() {
            self.faults_after_request(now, host_id.is_some(), error.as_ref());
        }
        if let Some(e) = error {
            if self.keep_error() {
                self.errors.push(e);
            }
        }
        let overhead = if host_id.is_some() {
            self.request_ns
        } else {
            0
        };
        let plans = self.recorded_plans();
        let bitmap_chunks = match self.bitmap.as_mut() {
            Some(b) => b.start(now, &plans, Some((offset, len))),
            None => Vec::new(),
        };
        let seq = self.active.insert(Active {
            host_id,
            plans,
            step: 0,
            outstanding: 0,
            locked: false,
            not_before: now + overhead,
            rebuild_step: false,
            scrub_step: false,
            expiry_step: false,
            compared: false,
            process: if kind == IoKind::Read {
                process
            } else {
                MD_THREAD
            },
            bitmap_chunks,
        });
        if overhead > 0 {
            self.timers.push(Reverse((now + overhead, seq)));
        } else {
            self.ready.push_back(seq);
        }
    }

    /// Try to take every lock of the request's current plan at once; on a
    /// conflict, the key held by another request (to wait on).
    fn try_lock(&mut self, seq: u64) -> Result<(), u64> {
        let Some(plan) = self.active.get(seq).and_then(|a| a.plans.front()) else {
            return Ok(());
        };
        if let Some(&k) = plan
            .locks
            .iter()
            .find(|k| self.locks.get(k).is_some_and(|&h| h != seq))
        {
            return Err(k);
        }
        for &k in &plan.locks {
            self.locks.insert(k, seq);
        }
        Ok(())
    }

    fn unlock(&mut self, seq: u64, plan: &Plan) {
        for k in &plan.locks {
            if self.locks.get(k) == Some(&seq) {
                self.locks.remove(k);
                // Whoever waits for this key tries again, in arrival order.
                if let Some(q) = self.waiting.remove(k) {
                    self.ready.extend(q);
                }
            }
        }
    }

    /// Carry request `seq` as far as it goes at `now`.
    fn progress(&mut self, now: Ns, seq: u64) {
        loop {
            let Some(a) = self.active.get(seq) else {
                return;
            };
            if a.outstanding > 0 || a.not_before > now {
                return;
            }
            if a.plans.is_empty() {
                let a = self.active.remove(seq).expect("present");
                self.spare_queues.push(a.plans);
                if let Some(b) = self.bitmap.as_mut() {
                    b.done(&a.bitmap_chunks);
                }
                if let Some(id) = a.host_id {
                    self.finished.push(Completion { id, at: now });
                    if let Some(f) = self.faults.as_mut() {
                        f.completed(now);
                    }
                }
                if a.rebuild_step {
                    self.rebuild_step_done(now);
                }
                if a.scrub_step {
                    if let Some(s) = self.scrub.as_mut() {
                        s.step_done(now);
                    }
                }
                if a.expiry_step {
                    self.expiry_step(now);
                }
                return;
            }
            if !a.locked {
                if let Err(key) = self.try_lock(seq) {
                    self.waiting.entry(key).or_default().push_back(seq);
                    return;
                }
                self.active.get_mut(seq).expect("present").locked = true;
            }
            let a = self.active.get_mut(seq).expect("present");
            let step_index = a.step;
            a.step += 1;
            let steps = a.plans.front().expect("not empty").steps.len();
            if step_index == steps && a.scrub_step && !a.compared {
                a.compared = true;
                // The scrub step's reads are done: what the engine rewrites
                // is the step's last part, under the same stripe locks (the
                // real scrub holds its range while it compares and rewrites).
                if let Some(writes) = self.compare_scrub_step() {
                    let a = self.active.get_mut(seq).expect("present");
                    let plan = a.plans.front_mut().expect("not empty");
                    plan.steps.push(Step::Io(writes));
                }
            }
            let a = self.active.get(seq).expect("present");
            // The plan stays in place while its step is issued (the member
            // side is borrowed beside it): moving it out and back for every
            // step cost more than issuing a 4K read.
            let plan = a.plans.front().expect("not empty");
            let Some(step) = plan.steps.get(step_index) else {
                let a = self.active.get_mut(seq).expect("present");
                a.step = 0;
                a.locked = false;
                let plan = a.plans.pop_front().expect("not empty");
                self.unlock(seq, &plan);
                self.recording.recycle(plan);
                continue;
            };
            let roles = self.members.len();
            let mut to = Issue {
                members: &mut self.members,
                member_next: &mut self.member_next,
                member_ops: &mut self.member_ops,
                log: &mut self.log,
                errors: &mut self.errors,
                now,
                seq,
                process: a.process,
                issued: 0,
            };
            let mut busy_until = None;
            match step {
                Step::Io(ops) => {
                    for op in ops {
                        let kind = match op.kind {
                            // Member write-zeroes (never planned here yet): no
                            // modelled device has a cheaper way, so it is
                            // issued, and logged, as the write of the zeros.
                            IoKind::Zero => IoKind::Write,
                            kind => kind,
                        };
                        // A rebuild's target is the member after the roles
                        // to the engine; here it is the role's new device.
                        let member = match (&self.rebuild, &self.bitmap) {
                            (Some(r), _) if op.member == roles => r.role,
                            // The engine's bitmap plans number the members in
                            // service, in role order.
                            (_, Some(b)) if plan.space == raidlab_raid::plan::Space::Device => {
                                b.roles.get(op.member).copied().unwrap_or(usize::MAX)
                            }
                            _ => op.member,
                        };
                        to.submit(
                            kind,
                            member,
                            match plan.space {
                                raidlab_raid::plan::Space::Data => DATA_OFFSET + op.offset,
                                // Metadata (bitmap, superblock, log areas)
                                // is addressed on the whole device.
                                raidlab_raid::plan::Space::Device => op.offset,
                            },
                            op.length,
                        );
                    }
                }
                Step::Compute(cs) => {
                    let cost = self.host.compute_ns(cs, &plan.scratch);
                    let end = if self.host.md.is_some() {
                        self.md_thread.run(now, cost)
                    } else {
                        now + cost
                    };
                    busy_until = (end > now).then_some(end);
                }
                Step::Log(entries) => {
                    // md writes a log entry (a 4 KiB header and the partial
                    // parity or the new block) with FUA before the data.
                    for e in entries {
                        let len = 4096 + e.pp.map(|s| s.len as u64).unwrap_or(0);
                        to.submit(IoKind::Write, e.member, LOG_OFFSET, len);
                        to.submit(IoKind::Flush, e.member, 0, 0);
                    }
                }
            }
            let issued = to.issued;
            let a = self.active.get_mut(seq).expect("present");
            a.outstanding += issued;
            if let Some(end) = busy_until {
                a.not_before = end;
                self.timers.push(Reverse((end, seq)));
            }
        }
    }

    /// The stripe cache's thread at `now`: write out the stripe held longest
    /// if its hold time has passed, and when that write-out completes, the
    /// next (`expiry_step` on its request). While one is under way no tick
    /// starts another, as the real thread does one at a time; what is still
    /// held meanwhile stays in the cache, merging writes and filling it, so
    /// writers meet a full cache as they would on real members.
    pub(super) fn expiry_step(&mut self, now: Ns) {
        self.clock.set(now);
        let more = match self.array.write_out_one_expired() {
            Ok(more) => more,
            Err(e) => {
                self.errors.push(format!("stripe cache write-out: {e}"));
                false
            }
        };
        self.faults_notice(now);
        let plans = self.recorded_plans();
        if plans.is_empty() {
            self.spare_queues.push(plans);
            self.expiring = false;
            if more {
                // A stripe a writer took down meanwhile: on to the next.
                self.ready_expiry(now);
            }
            return;
        }
        let bitmap_chunks = match self.bitmap.as_mut() {
            Some(b) => b.start(now, &plans, None),
            None => Vec::new(),
        };
        let seq = self.active.insert(Active {
            bitmap_chunks,
            expiry_step: more,
            ..Active::md(plans, now)
        });
        self.expiring = more;
        self.ready.push_back(seq);
    }

    /// The next expired stripe now, without waiting for a tick.
    fn ready_expiry(&mut self, now: Ns) {
        self.tick = Some(now);
    }

    fn run_ready(&mut self, now: Ns) {
        while let Some(seq) = self.ready.pop_front() {
            self.progress(now, seq);
        }
        if self.tick.is_none() && !self.expiring && self.tick_every > 0 && self.maybe_held {
            let held = self
                .array
                .stripe_cache_stats()
                .0
                .is_some_and(|(_, s)| s.held_now > 0);
            if held {
                self.tick = Some(now + self.tick_every);
            } else {
                self.maybe_held = false;
            }
        }
    }
}

impl Device for SimArray {
    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn submit(&mut self, now: Ns, req: Request) {
        self.start(now, Some(req.id), req);
        self.run_ready(now);
    }

    fn next_event(&self) -> Option<Ns> {
        // Asked once per event: a plain loop, not a chain of iterators (which
        // cost 6 % of a simulated parity array's time).
        let mut next = IDLE;
        for &t in &self.member_next {
            next = next.min(t);
        }
        for c in &self.finished {
            next = next.min(c.at);
        }
        let mut see = |t: Option<Ns>| {
            if let Some(t) = t {
                next = next.min(t);
            }
        };
        see(self.timers.peek().map(|&Reverse((t, _))| t));
        see(self.tick);
        see(self.rebuild.as_ref().and_then(|r| r.next));
        see(self.scrub.as_ref().and_then(|s| s.next));
        see(self.bitmap.as_ref().and_then(|b| b.next));
        see(self.spare_due());
        (next != IDLE).then_some(next)
    }

    fn advance(&mut self, now: Ns, done: &mut Vec<Completion>) {
        self.clock.set(now);
        let mut member_done = std::mem::take(&mut self.member_done);
        loop {
            let mut any = super::common::advance_members(
                &mut self.members,
                &mut self.member_next,
                now,
                &mut member_done,
            );
            for c in member_done.drain(..) {
                if let Some(seq) = self.member_ops.remove(c.id) {
                    if let Some(a) = self.active.get_mut(seq) {
                        a.outstanding -= 1;
                        if a.outstanding == 0 {
                            self.ready.push_back(seq);
                        }
                    }
                }
            }
            any |= super::common::due_timers(&mut self.timers, now, &mut self.ready);
            if self.spare_due().is_some_and(|t| t <= now) {
                self.add_spare(now);
                any = true;
            }
            if self
                .rebuild
                .as_ref()
                .and_then(|r| r.next)
                .is_some_and(|t| t <= now)
            {
                self.rebuild_step(now);
                any = true;
            }
            if self
                .scrub
                .as_ref()
                .and_then(|s| s.next)
                .is_some_and(|t| t <= now)
            {
                self.scrub_step(now);
                any = true;
            }
            if self
                .bitmap
                .as_ref()
                .and_then(|b| b.next)
                .is_some_and(|t| t <= now)
            {
                self.bitmap_pass(now);
                any = true;
            }
            if self.tick.is_some_and(|t| t <= now) {
                self.tick = None;
                self.expiry_step(now);
                any = true;
            }
            if !any && self.ready.is_empty() {
                break;
            }
            self.run_ready(now);
        }
        self.member_done = member_done;
        done.append(&mut self.finished);
    }

    fn info(&self) -> ModelInfo {
        super::common::array_info(
            "raidlab array",
            &self.name,
            self.array.geometry(),
            self.spec_info.clone(),
            self.host.all_sources(),
            &self.members,
        )
    }

    fn member_ops(&self) -> Option<&OpLog> {
        Some(&self.log)
    }

    fn fault_report(&self) -> Option<crate::faults::report::FaultReport> {
        SimArray::fault_report(self)
    }

    fn scrub_progress(&self) -> Option<ScrubProgress> {
        self.scrub.as_ref().map(Scrub::progress)
    }

    fn rebuild_progress(&self) -> Option<RebuildProgress> {
        self.rebuild.as_ref().map(|r| RebuildProgress {
            role: r.role,
            done: r.rec.done(),
            total: self.array.geometry().member_bytes,
            finished: r.finished,
        })
    }
}
