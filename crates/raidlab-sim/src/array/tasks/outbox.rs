//! The engine's executor under the simulator: a thin outbox that hands each
//! plan step to the runner ([`crate::array::TaskArray`]) and suspends the request's
//! task until the runner resumes it; the member table of a plan mapped to
//! roles. It decides nothing about the operations.

use super::*;

/// A member operation a task asks for: (kind, role, device offset, length).
pub(super) type MemberOp = crate::host::MemberRequest;

/// What a task asked of the runner before it suspended: the member
/// operations of one I/O step, all issued at once, or a compute step's host
/// time. One step at a time; the runner takes it and leaves the vector's
/// room behind, so a step costs no allocation.
#[derive(Debug, Default)]
pub(super) struct Out {
    pub(super) ops: Vec<MemberOp>,
    pub(super) compute: Option<Ns>,
}

/// What a task gives back when it ends: its result, and the buffer it was
/// lent (empty for the engine's own threads and requests without data).
pub(super) type Ended = (raidlab_core::Result<()>, Vec<u8>);

/// The engine's executor under the simulator: hands each step to the runner
/// and suspends the request's task until the runner resumes it.
pub(super) struct Outbox {
    /// Member volumes by role, to tell which role a metadata plan's member
    /// table names.
    pub(super) roles: Vec<Option<Arc<dyn Volume>>>,
    pub(super) host: HostCost,
    pub(super) queue: Mutex<Out>,
    /// A rebuild's new member and its role: the engine names it as the
    /// member after the roles in data plans, and by its volume in a flush.
    /// Set once: at the start, or when a spare arrives (one rebuild a run).
    pub(super) target: std::sync::OnceLock<(Arc<dyn Volume>, usize)>,
    /// That new member's whole device (raidlab's `add` made it a member),
    /// as a superblock commit names it.
    pub(super) target_device: std::sync::OnceLock<Arc<dyn Volume>>,
    /// Further volumes that stand for a role in metadata plans: the whole
    /// members the bitmap is written to (the engine's intent devices).
    pub(super) aliases: Vec<(Arc<dyn Volume>, usize)>,
    /// What the members hold where it is not zeros, carried for a check.
    pub(super) data: super::check::Data,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("roles", &self.roles.len())
            .finish()
    }
}

fn same(a: &Arc<dyn Volume>, b: &Arc<dyn Volume>) -> bool {
    std::ptr::eq(Arc::as_ptr(a) as *const (), Arc::as_ptr(b) as *const ())
}

impl Outbox {
    pub(super) fn queue(&self) -> std::sync::MutexGuard<'_, Out> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait(&self) -> Result<(), Failed> {
        if task::suspend(Wait::Runner(0)) {
            Ok(())
        } else {
            Err(Failed::from(Error::new(
                ErrorKind::Io,
                Op::Write,
                "internal: the simulator's executor ran outside a task",
            )))
        }
    }

    fn role(&self, plan: &Plan, members: &Members, member: usize) -> Result<usize, Failed> {
        let v = members.get(member).and_then(Option::as_ref);
        if plan.space == Space::Data {
            // The array's own table: positions are roles, the rebuild's new
            // member after them. Another table (a flush of the rebuild's
            // target alone, whose position 0 is not role 0) is looked up by
            // its volumes, as a metadata plan's.
            let own = match (v, self.roles.get(member)) {
                (Some(v), Some(Some(r))) => same(v, r),
                (None, Some(_)) => true,
                _ => false,
            };
            if own {
                return Ok(member);
            }
            if let Some((t, role)) = self.target.get() {
                if member == self.roles.len() || v.is_some_and(|v| same(v, t)) {
                    return Ok(*role);
                }
            }
        }
        v.and_then(|v| {
            self.roles
                .iter()
                .position(|r| r.as_ref().is_some_and(|r| same(r, v)))
                .or_else(|| {
                    self.target
                        .get()
                        .into_iter()
                        .chain(&self.aliases)
                        .find(|(t, _)| same(t, v))
                        .map(|&(_, role)| role)
                        .or_else(|| {
                            let (_, role) = self.target.get()?;
                            let whole = self.target_device.get()?;
                            same(whole, v).then_some(*role)
                        })
                })
        })
        .ok_or_else(|| {
            Failed::from(Error::new(
                ErrorKind::Io,
                Op::Write,
                format!("internal: a metadata plan names member {member}, which is no role of the array"),
            ))
        })
    }
}

impl Executor for Outbox {
    fn run(
        &self,
        plan: &Plan,
        members: &Members,
        _: &dyn Engine,
        mut user: UserBuf<'_>,
        hooks: Hooks<'_>,
    ) -> Result<(), Failed> {
        for step in &plan.steps {
            match step {
                Step::Io(ops) => {
                    let mut queue = self.queue();
                    let out = &mut queue.ops;
                    let before = out.len();
                    for op in ops {
                        let role = match self.role(plan, members, op.member) {
                            Ok(role) => role,
                            Err(e) => {
                                out.truncate(before);
                                return Err(e);
                            }
                        };
                        let offset = match plan.space {
                            Space::Data => DATA_OFFSET + op.offset,
                            Space::Device => op.offset,
                        };
                        // No modelled disk has a cheaper write-zeroes.
                        let kind = match op.kind {
                            IoKind::Zero => IoKind::Write,
                            k => k,
                        };
                        out.push((kind, role, offset, op.length));
                    }
                    drop(queue);
                    if plan.space == Space::Data && self.data.carrying() {
                        self.data.carry_step(ops, &mut user);
                    }
                    self.wait()?;
                }
                Step::Compute(cs) => {
                    self.queue().compute = Some(self.host.compute_ns(cs, &plan.scratch));
                    self.wait()?;
                }
                // Rows kept in memory: no device time. Their parity bytes
                // are not modelled, only which rows are kept, so that the
                // engine's next plans choose as on real members.
                Step::Keep(rows) => hooks.keep_unmodelled(rows),
                Step::Log(entries) => {
                    // The engine's own log writer: its header, ring position,
                    // reclaim and flushes come back here as plans. The partial
                    // parity's bytes are not modelled, only their length.
                    if let Some(write) = hooks.log {
                        let most = entries
                            .iter()
                            .filter_map(|e| e.pp.as_ref().map(|s| s.len))
                            .max()
                            .unwrap_or(0);
                        let zeros = vec![0u8; most];
                        let with: Vec<(LogEntry, &[u8])> = entries
                            .iter()
                            .map(|e| {
                                let n = e.pp.as_ref().map_or(0, |s| s.len);
                                (*e, &zeros[..n])
                            })
                            .collect();
                        write(&with)?;
                    }
                }
            }
        }
        Ok(())
    }
}
