//! Simulated targets (`sim:...`): the benchmark suites' workloads run on a
//! raidlab-sim device in virtual time, so a table can put hardware one does not
//! own beside what is plugged in.
//!
//! Decides: how a suite's [`Workload`] maps onto the simulator's closed-loop job,
//! and how the device's virtual clock carries on from one test to the next (an
//! interval between tests is idle virtual time, in which caches destage). It must
//! never time anything with the wall clock: every figure of a simulated target is
//! virtual, the same on every machine for the same configuration and seed.
//!
//! A simulated target lives on a thread of its own, built there and driven
//! only there: the engine's requests run as tasks of the thread that made
//! them (`raidlab_core::task`), while the suites call a target from their
//! worker threads and from the main thread in turn. Each call is one message
//! to that thread (a whole workload, or one request at queue depth 1).

use crate::engine::{Access, Control, Dir, DirStats, Measured, Workload};
use raidlab_core::IoKind;
use raidlab_core::{Error, ErrorKind, Op, Result, Volume};
use raidlab_sim::config::SimConfig;
use raidlab_sim::device::{Completion, Device, ModelInfo, Ns, Request};
use raidlab_sim::workload::{run_observed, Job, Pattern};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::mpsc::{channel, sync_channel, Sender};
use std::sync::Mutex;
use std::time::Duration;

/// A call run on the target's own thread.
type Call = Box<dyn FnOnce(&mut State) + Send>;

/// A simulated device and its virtual clock, on a thread of its own.
#[derive(Debug)]
pub struct SimTarget {
    /// What the configuration describes, for tables.
    pub describe: String,
    /// The model and its parameters, for the result JSON.
    pub info: ModelInfo,
    calls: Mutex<Option<Sender<Call>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Debug)]
struct State {
    dev: Box<dyn Device>,
    now: Ns,
    next_id: u64,
}

fn bad(spec: &str, e: impl std::fmt::Display) -> Error {
    Error::invalid(e.to_string()).on_device(format!("sim:{spec}"))
}

impl SimTarget {
    /// Build from what follows `sim:`: a short form or a `.toml` file.
    pub fn open(spec: &str) -> Result<SimTarget> {
        let (cfg, extra) = if spec.ends_with(".toml") {
            SimConfig::load(Path::new(spec)).map_err(|e| bad(spec, e))?
        } else {
            (
                SimConfig::short(spec).map_err(|e| bad(spec, e))?,
                Vec::new(),
            )
        };
        let describe = cfg.describe();
        let (calls, inbox) = channel::<Call>();
        let (built, told) = sync_channel(1);
        let spec_owned = spec.to_string();
        let thread = std::thread::Builder::new()
            .name(format!(
                "sim:{}",
                describe.chars().take(10).collect::<String>()
            ))
            .spawn(move || {
                let mut st = match cfg.build(&extra) {
                    Ok(dev) => {
                        let _ = built.send(Ok((dev.info(), dev.capacity())));
                        State {
                            dev,
                            now: 0,
                            next_id: 0,
                        }
                    }
                    Err(e) => {
                        let _ = built.send(Err(bad(&spec_owned, e)));
                        return;
                    }
                };
                // Until the target is dropped (its sender with it).
                for call in inbox {
                    call(&mut st);
                }
            })
            .map_err(|e| {
                bad(
                    spec,
                    format!("cannot start the simulated target's thread: {e}"),
                )
            })?;
        let built = told
            .recv()
            .map_err(|_| bad(spec, "the simulated target's thread ended while building"));
        let (info, _) = match built.and_then(|b| b) {
            Ok(b) => b,
            Err(e) => {
                let _ = thread.join();
                return Err(e);
            }
        };
        Ok(SimTarget {
            describe,
            info,
            calls: Mutex::new(Some(calls)),
            thread: Some(thread),
        })
    }

    /// Run `f` on the target's own thread and wait for what it returns. A
    /// panic there (a bug) comes out here.
    fn call<R: Send + 'static>(&self, f: impl FnOnce(&mut State) -> R + Send + 'static) -> R {
        let (tx, rx) = sync_channel(1);
        let sent = self
            .calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|c| {
                c.send(Box::new(move |st: &mut State| {
                    let _ = tx.send(catch_unwind(AssertUnwindSafe(|| f(st))));
                }))
            });
        assert!(
            matches!(sent, Some(Ok(()))),
            "internal: the simulated target's thread is gone"
        );
        match rx.recv() {
            Ok(Ok(r)) => r,
            Ok(Err(panic)) => resume_unwind(panic),
            Err(_) => panic!("internal: the simulated target's thread ended during a call"),
        }
    }

    pub fn capacity(&self) -> u64 {
        self.call(|st| st.dev.capacity())
    }

    /// Run one suite workload in virtual time.
    pub fn run(&self, w: &Workload, control: &Control) -> Result<Measured> {
        let w = w.clone();
        let describe = self.describe.clone();
        let (measured, bytes) = self.call(move |st| Self::run_here(st, &w, describe))?;
        control.add_done(bytes);
        Ok(measured)
    }

    fn run_here(st: &mut State, w: &Workload, describe: String) -> Result<(Measured, u64)> {
        let bs = w.bs as u64;
        let duration = w.limit.time.map(|t| t.as_nanos() as Ns);
        let max_ops = w.limit.bytes.map(|b| (b / bs).max(1)).unwrap_or(0);
        let job = Job {
            pattern: match w.access {
                Access::Seq => Pattern::Sequential,
                Access::Rand => Pattern::Random,
            },
            block: bs,
            read_percent: match w.dir {
                Dir::Read => 100,
                Dir::Write => 0,
                Dir::Mix { read_pct } => read_pct.min(100) as u8,
            },
            threads: w.threads as u32,
            queue_depth: w.qd as u32,
            region: (w.offset, w.size / bs * bs),
            // A byte-limited job gets all the virtual time it needs.
            duration: duration.unwrap_or(Ns::MAX / 4),
            max_ops,
            seed: w.seed,
        };
        let mut read = DirStats::default();
        let mut write = DirStats::default();
        let start = st.now;
        let out = run_observed(st.dev.as_mut(), &job, start, &mut |kind, lat| {
            let d = if kind == IoKind::Read {
                &mut read
            } else {
                &mut write
            };
            d.record(bs, Duration::from_nanos(lat));
        })
        .map_err(|e| Error::new(ErrorKind::Invalid, Op::Read, e).on_device(describe))?;
        st.now = out.end.max(start);
        Ok((
            Measured {
                read,
                write,
                elapsed: Duration::from_nanos(out.elapsed_ns),
                interrupted: false,
                engine: "simulated",
            },
            out.bytes,
        ))
    }

    /// Let virtual time pass with nothing submitted (the pause between tests).
    pub fn idle(&self, d: Duration) {
        self.call(move |st| {
            let until = st.now + d.as_nanos() as Ns;
            let mut done = Vec::new();
            while let Some(t) = st.dev.next_event().filter(|&t| t <= until) {
                st.dev.advance(t, &mut done);
            }
            st.now = until;
        })
    }

    /// One request at queue depth 1, waited for; the virtual time it took.
    fn one(&self, kind: IoKind, offset: u64, len: u64) -> Duration {
        self.call(move |st| Self::one_here(st, kind, offset, len))
    }

    fn one_here(st: &mut State, kind: IoKind, offset: u64, len: u64) -> Duration {
        let id = st.next_id;
        st.next_id += 1;
        let start = st.now;
        st.dev.submit(
            start,
            Request {
                id,
                kind,
                offset,
                len,
                process: 0,
            },
        );
        let mut done: Vec<Completion> = Vec::new();
        let mut end = start;
        while !done.iter().any(|c| c.id == id) {
            let Some(t) = st.dev.next_event() else { break };
            st.dev.advance(t, &mut done);
            end = t;
        }
        st.now = end;
        Duration::from_nanos(end - start)
    }

    /// Replay `ops` (issue time from the start, kind, offset, length) in order
    /// with `qd` in flight, at their recorded times when `timed`: each
    /// completion's (index, latency), and the virtual time it all took.
    pub fn replay(
        &self,
        ops: &[(Ns, IoKind, u64, u64)],
        qd: usize,
        timed: bool,
    ) -> (Vec<(usize, Ns)>, Ns) {
        let ops = ops.to_vec();
        self.call(move |st| Self::replay_here(st, &ops, qd, timed))
    }

    fn replay_here(
        st: &mut State,
        ops: &[(Ns, IoKind, u64, u64)],
        qd: usize,
        timed: bool,
    ) -> (Vec<(usize, Ns)>, Ns) {
        let start = st.now;
        let mut issued: std::collections::BTreeMap<u64, Ns> = std::collections::BTreeMap::new();
        let mut out = Vec::with_capacity(ops.len());
        let mut done: Vec<Completion> = Vec::new();
        let (mut next, mut t) = (0usize, start);
        loop {
            while issued.len() < qd.max(1) && next < ops.len() {
                let (at, kind, offset, len) = ops[next];
                if timed && start + at > t {
                    break;
                }
                st.dev.submit(
                    t,
                    Request {
                        id: next as u64,
                        kind,
                        offset,
                        len,
                        process: 0,
                    },
                );
                issued.insert(next as u64, t);
                next += 1;
            }
            let due = (timed && issued.len() < qd.max(1) && next < ops.len())
                .then(|| start + ops[next].0);
            let Some(nt) = [st.dev.next_event(), due].into_iter().flatten().min() else {
                break;
            };
            t = nt.max(t);
            if st.dev.next_event().is_some_and(|e| e <= t) {
                st.dev.advance(t, &mut done);
            }
            for c in done.drain(..) {
                if let Some(at) = issued.remove(&c.id) {
                    out.push((c.id as usize, c.at - at));
                }
            }
        }
        st.now = t;
        (out, t - start)
    }

    /// Virtual time now.
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.call(|st| st.now))
    }

    /// What the faults did, when the model has any.
    pub fn fault_report(&self) -> Option<raidlab_sim::faults::report::FaultReport> {
        self.call(|st| st.dev.fault_report())
    }
}

impl Drop for SimTarget {
    /// The device is dropped on its own thread (its tasks with it), and the
    /// thread joined.
    fn drop(&mut self) {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The model of every simulated target among `targets`, for the result JSON.
pub fn models<'a>(
    targets: impl IntoIterator<Item = &'a crate::Target>,
) -> Vec<crate::schema::SimulatedTarget> {
    targets
        .into_iter()
        .filter_map(|t| {
            let sim = t.sim.as_ref()?;
            Some(crate::schema::SimulatedTarget {
                target: t.label.clone(),
                model: serde_json::to_value(&sim.info).unwrap_or_default(),
                faults: sim
                    .fault_report()
                    .and_then(|r| serde_json::to_value(r).ok()),
            })
        })
        .collect()
}

/// The simulated device as a [`Volume`] for the suites' own single requests
/// (flushes, Bonnie++'s seeks): each call is one request at queue depth 1 in
/// virtual time. No data is kept: reads return zeros.
#[derive(Debug)]
pub struct SimVolume(pub std::sync::Arc<SimTarget>);

impl Volume for SimVolume {
    fn name(&self) -> String {
        format!("sim:{}", self.0.describe)
    }
    fn size(&self) -> u64 {
        self.0.capacity()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        buf.fill(0);
        self.0.one(IoKind::Read, offset, buf.len() as u64);
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.0.one(IoKind::Write, offset, buf.len() as u64);
        Ok(())
    }
    fn flush(&self) -> Result<()> {
        self.0.one(IoKind::Flush, 0, 0);
        Ok(())
    }
}
