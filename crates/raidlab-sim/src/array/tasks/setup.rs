//! Building a live array: the engine as raidlab's stack starts it
//! (`crate::array::stack`), then behind the outbox (and the fault executor),
//! a rebuild from the start, the engine's own threads as tasks, and a spare
//! when it comes; a rebuild's new member is added by raidlab's own `add`
//! (`crate::array::stack::add_member`). It decides only what the
//! configuration asks for; what the engine does is its own.

use super::*;

impl TaskArray {
    /// Add the new member (the model `r.device`) to the array through
    /// raidlab's `add`, begin the engine's rebuild of `r.role` onto its data
    /// area and start its loop as a task, paced as `raidlab serve`'s. The
    /// data area, which the engine names as the rebuild's target.
    pub(super) fn start_rebuild(
        &mut self,
        r: crate::array::RebuildSpec,
        spec_info: &mut Vec<Param>,
    ) -> Result<Arc<dyn Volume>, String> {
        let g = *self.array.geometry();
        if self.outbox.target.get().is_some() {
            return Err("a second rebuild in one run is not simulated".into());
        }
        let added = crate::array::stack::add_member(
            &self.started,
            &self.name,
            r.role,
            r.device.capacity(),
            r.from,
        )?;
        let volume = added.area;
        let _ = self.outbox.target.set((volume.clone(), r.role));
        let _ = self.outbox.target_device.set(added.device);
        let rec = self
            .array
            .begin_recovery(r.role, volume.clone(), added.resumes_at, false)
            .map_err(|e| e.to_string())?;
        if let Some(rate) = r.max_rate {
            spec_info.push(Param {
                name: "rebuild_max_rate".into(),
                value: rate as f64 / 1e6,
                unit: "MB/s".into(),
            });
        }
        self.members[r.role] = Some(r.device);
        self.member_next[r.role] = IDLE;
        let mut run =
            raidlab_raid::live::rebuild_schedule(&g, rec.done(), r.max_rate, Duration::ZERO);
        let (array, clock, task_rec) = (self.array.clone(), self.clock.clone(), rec.clone());
        let seq = self.spawn(None, MD_THREAD, move || {
            let complete = array.drive_recovery(
                &task_rec,
                &mut run,
                &*clock,
                &|| false,
                &mut |_| {},
                &mut |_| Ok(()),
            )?;
            if complete {
                array.finish_recovery(&task_rec)?;
            }
            Ok(())
        })?;
        self.rebuild = Some(Rebuild {
            seq,
            rec,
            role: r.role,
            finished: None,
        });
        // It runs at the next advance (`next_event` says now), so a test's
        // `keep_ops` after building sees its first step.
        self.ready.push_back(seq);
        Ok(volume)
    }

    pub fn new(spec: ArraySpec) -> Result<TaskArray, String> {
        TaskArray::with_faults(spec, None)
    }

    /// [`TaskArray::new`] with members failing and reading badly at virtual
    /// times and a spare arriving (`faults`' schedule): the engine's own
    /// failure handling (a member taken out, degraded plans, bad blocks
    /// rewritten, a rebuild onto the spare under the load) runs when a
    /// request meets the fault, mid-request.
    pub fn with_faults(spec: ArraySpec, faults: Option<FaultSpec>) -> Result<TaskArray, String> {
        TaskArray::build(spec, faults, None)
    }

    /// [`TaskArray::with_faults`], and with `bitmap` `Some(chunk)` md's
    /// internal write-intent bitmap with `chunk`-byte chunks (`None`:
    /// mdadm's choice for the member size) on every member in service, laid
    /// out by raidlab's create (as `mdadm --create --bitmap=internal`); the
    /// engine marks and writes it, and its daemon clears idle bits. Not with
    /// a rebuild, as there.
    ///
    /// The array is created, assembled and started by raidlab's own stack
    /// (`crate::array::stack`) on sparse in-memory members; its set-up I/O
    /// costs no virtual time.
    pub fn build(
        spec: ArraySpec,
        faults: Option<FaultSpec>,
        bitmap: Option<Option<u64>>,
    ) -> Result<TaskArray, String> {
        let g = spec.geometry;
        let mut spec = spec;
        let rebuild = spec.rebuild.take();
        crate::array::common::check_spec(&spec, rebuild.as_ref())?;
        if bitmap.is_some() && rebuild.is_some() {
            return Err(format!(
                "{}: a bitmap and a rebuild together are not simulated (the new member's bitmap copy is not kept)",
                spec.name
            ));
        }
        let faults = faults.filter(|f| !f.schedule.is_empty());
        if let Some(f) = &faults {
            f.check(
                &spec.name,
                &spec.members,
                rebuild.as_ref().map(|b| b.role),
                bitmap.is_some(),
            )?;
        }
        let clock = Arc::new(VirtualClock::default());
        let stack = crate::array::stack::start(&spec, bitmap, clock.clone())?;
        let bitmap_info = stack.bitmap_chunk;
        let array = stack.started.array.clone();
        // The engine's member volumes by role (its data areas), and the whole
        // devices its metadata plans name.
        let roles: Vec<Option<Arc<dyn Volume>>> =
            (0..g.raid_disks).map(|r| array.member(r)).collect();
        let aliases: Vec<(Arc<dyn Volume>, usize)> = stack
            .devices
            .iter()
            .enumerate()
            .filter_map(|(role, d)| d.clone().map(|d| (d, role)))
            .collect();
        let outbox = Arc::new(Outbox {
            roles: roles.clone(),
            host: spec.host.clone(),
            queue: Mutex::new(Out::default()),
            target: std::sync::OnceLock::new(),
            target_device: std::sync::OnceLock::new(),
            aliases: aliases.clone(),
            data: Default::default(),
        });
        let mut exec: Arc<dyn Executor> = outbox.clone();
        let mut fault_state = None;
        if let Some(f) = faults {
            let fe = Arc::new(FaultExec::over(outbox.clone(), clock.clone(), &f.schedule));
            for (role, v) in roles.iter().enumerate() {
                if let Some(v) = v {
                    fe.know(v, role, 0);
                }
            }
            for (v, role) in &aliases {
                fe.know(v, *role, 0);
            }
            exec = fe.clone();
            fault_state = Some(Box::new(crate::array::faults::Faults::new(fe, f)));
        }
        stack.exec.begin_run(exec)?;
        let mut spec_info = crate::array::common::array_params(&g, spec.stripe_cache);
        if let Some(chunk) = bitmap_info {
            spec_info.push(Param {
                name: "bitmap_chunk".into(),
                value: chunk as f64,
                unit: "bytes".into(),
            });
        }
        let mut a = TaskArray {
            name: spec.name,
            array,
            started: stack.started,
            outbox,
            clock,
            member_next: vec![IDLE; spec.members.len()],
            members: spec.members,
            request_ns: spec.host.request_ns(),
            md_thread: MdThread::default(),
            reqs: crate::array::Slab::default(),
            member_ops: crate::array::Slab::default(),
            ready: VecDeque::new(),
            key_waiters: FxHashMap::default(),
            timers: BinaryHeap::new(),
            timer_order: 0,
            daemons: Vec::new(),
            stacks: Stacks::default(),
            bufs: Vec::new(),
            ops: Vec::new(),
            finished: Vec::new(),
            member_done: Vec::new(),
            woken: Vec::new(),
            log: OpLog::default(),
            errors: Vec::new(),
            capacity: g.array_bytes(),
            spec_info: Vec::new(),
            host: spec.host,
            rebuild: None,
            check: None,
            requests: None,
            faults: fault_state,
        };
        if let Some(r) = rebuild {
            a.start_rebuild(r, &mut spec_info)?;
        }
        if let Some(cfg) = spec.stripe_cache {
            // The start installed the cache (`StartOptions::stripe_cache`).
            if a.array.stripe_cache_stats().0.is_some() {
                // The cache's own thread, as `start_stripe_cache` runs it,
                // sleeping on the virtual clock.
                let weak = Arc::downgrade(&a.array);
                let clock: raidlab_core::SharedClock = a.clock.clone();
                a.start_daemon(DaemonKind::StripeCache, move || {
                    Array::stripe_cache_thread(weak, clock, cfg.hold)
                })?;
            }
        }
        if bitmap_info.is_some() {
            let weak = Arc::downgrade(&a.array);
            let clock: raidlab_core::SharedClock = a.clock.clone();
            a.start_daemon(DaemonKind::Bitmap, move || {
                Array::bitmap_daemon_thread(weak, clock)
            })?;
        }
        spec_info.extend(a.host.params());
        a.spec_info = spec_info;
        Ok(a)
    }

    /// The spare arrives at `now`: the engine's rebuild begins into the role
    /// it goes to (`Faults::spare_for`), once that role's old device has
    /// nothing in flight, and runs as a task of the engine's own loop.
    pub(super) fn add_spare(&mut self, now: Ns) {
        let Some(f) = self.faults.as_mut() else {
            return;
        };
        let Some((role, device)) = f.spare_ready(now, &self.array, &self.member_next) else {
            return;
        };
        let max_rate = f.max_rate();
        self.clock.set(now);
        let spec = crate::array::RebuildSpec {
            role,
            device,
            max_rate,
            from: 0,
        };
        let mut info = std::mem::take(&mut self.spec_info);
        let started = self.start_rebuild(spec, &mut info);
        self.spec_info = info;
        let Some(f) = self.faults.as_mut() else {
            return;
        };
        match started {
            Ok(target) => f.rebuild_started(&target, role, now),
            Err(e) => f.rebuild_error(format!(
                "adding the spare at {}: {e}",
                crate::faults::format_time(now)
            )),
        }
    }

    /// What the faults did, when the array has any.
    pub fn fault_report(&self) -> Option<crate::faults::report::FaultReport> {
        let finished = self.rebuild.as_ref().and_then(|r| r.finished);
        Some(self.faults.as_ref()?.report(&self.array, finished))
    }

    /// Run one of the engine's threads as a task, from virtual time 0.
    pub(super) fn start_daemon(
        &mut self,
        kind: DaemonKind,
        f: impl FnOnce() + 'static,
    ) -> Result<(), String> {
        let seq = self.spawn(None, MD_THREAD, move || {
            f();
            Ok(())
        })?;
        self.daemons.push(Daemon {
            seq,
            kind,
            due: None,
        });
        self.ready.push_back(seq);
        self.run_ready(0);
        Ok(())
    }

    /// How many bits md's bitmap daemon has cleared (`None` without a
    /// bitmap): the engine's count.
    pub fn bitmap_cleared(&self) -> Option<u64> {
        self.array.bitmap_bits_cleared()
    }

    pub(super) fn spawn(
        &mut self,
        host_id: Option<u64>,
        process: u32,
        f: impl FnOnce() -> raidlab_core::Result<()> + 'static,
    ) -> Result<u64, String> {
        self.spawn_with(host_id, process, move || (f(), Vec::new()))
    }

    /// [`TaskArray::spawn`] for a task that gives back a buffer it was lent.
    pub(super) fn spawn_with(
        &mut self,
        host_id: Option<u64>,
        process: u32,
        f: impl FnOnce() -> Ended + 'static,
    ) -> Result<u64, String> {
        let task = Task::new(&mut self.stacks, f)
            .map_err(|e| format!("{}: cannot map a task's stack: {e}", self.name))?;
        Ok(self.reqs.insert(Req {
            task,
            host_id,
            process,
            outstanding: 0,
        }))
    }

    /// Keep the host requests as the engine begins them (virtual time,
    /// kind, offset, length), so a test can run them on a real array.
    pub fn keep_requests(&mut self) {
        self.requests = Some(Vec::new());
    }

    /// The host requests kept by [`TaskArray::keep_requests`].
    pub fn requests(&self) -> &[(Ns, IoKind, u64, u64)] {
        self.requests.as_deref().unwrap_or(&[])
    }

    /// Keep every member operation, in issue order, in [`Device::member_ops`].
    pub fn keep_ops(&mut self) {
        self.log.keep = true;
    }

    /// What the faults did to member operations (`None` without faults).
    pub fn faults_met(&self) -> Option<crate::faults::exec::Met> {
        self.faults.as_ref().map(|f| f.exec().met())
    }

    /// Roles the engine has taken out of service.
    pub fn out_of_service(&self) -> Vec<usize> {
        (0..self.members.len())
            .filter(|&r| self.array.member(r).is_none())
            .collect()
    }

    /// Errors the engine returned (without faults, any is a bug).
    pub fn errors(&self) -> &[String] {
        &self.errors
    }

    /// The stack the array was started by (`lifecycle::Started`): its
    /// assembly holds the members with their superblocks.
    pub fn started(&self) -> &raidlab_raid::lifecycle::Started {
        &self.started
    }

    /// The real engine's array.
    pub fn engine(&self) -> &Array {
        &self.array
    }
}
