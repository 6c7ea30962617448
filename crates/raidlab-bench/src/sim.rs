//! Simulated targets (`sim:...`): the benchmark suites' workloads run on a
//! raidlab-sim device in virtual time, so a table can put hardware one does not
//! own beside what is plugged in.
//!
//! Decides: how a suite's [`Workload`] maps onto the simulator's closed-loop job,
//! and how the device's virtual clock carries on from one test to the next (an
//! interval between tests is idle virtual time, in which caches destage). It must
//! never time anything with the wall clock: every figure of a simulated target is
//! virtual, the same on every machine for the same configuration and seed.

use crate::engine::{Access, Control, Dir, DirStats, Measured, Workload};
use raidlab_core::IoKind;
use raidlab_core::{Error, ErrorKind, Op, Result, Volume};
use raidlab_sim::config::SimConfig;
use raidlab_sim::device::{Completion, Device, ModelInfo, Ns, Request};
use raidlab_sim::workload::{run_observed, Job, Pattern};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

/// A simulated device and its virtual clock.
#[derive(Debug)]
pub struct SimTarget {
    /// What the configuration describes, for tables.
    pub describe: String,
    /// The model and its parameters, for the result JSON.
    pub info: ModelInfo,
    state: Mutex<State>,
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
        let dev = cfg.build(&extra).map_err(|e| bad(spec, e))?;
        Ok(SimTarget {
            describe: cfg.describe(),
            info: dev.info(),
            state: Mutex::new(State {
                dev,
                now: 0,
                next_id: 0,
            }),
        })
    }

    pub fn capacity(&self) -> u64 {
        self.lock().dev.capacity()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Run one suite workload in virtual time.
    pub fn run(&self, w: &Workload, control: &Control) -> Result<Measured> {
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
        let mut st = self.lock();
        let start = st.now;
        let out = run_observed(st.dev.as_mut(), &job, start, &mut |kind, lat| {
            let d = if kind == IoKind::Read {
                &mut read
            } else {
                &mut write
            };
            d.record(bs, Duration::from_nanos(lat));
        })
        .map_err(|e| {
            Error::new(ErrorKind::Invalid, Op::Read, e).on_device(self.describe.clone())
        })?;
        st.now = out.end.max(start);
        control.add_done(out.bytes);
        Ok(Measured {
            read,
            write,
            elapsed: Duration::from_nanos(out.elapsed_ns),
            interrupted: false,
            engine: "simulated",
        })
    }

    /// Let virtual time pass with nothing submitted (the pause between tests).
    pub fn idle(&self, d: Duration) {
        let mut st = self.lock();
        let until = st.now + d.as_nanos() as Ns;
        let mut done = Vec::new();
        while let Some(t) = st.dev.next_event().filter(|&t| t <= until) {
            st.dev.advance(t, &mut done);
        }
        st.now = until;
    }

    /// One request at queue depth 1, waited for; the virtual time it took.
    fn one(&self, kind: IoKind, offset: u64, len: u64) -> Duration {
        let mut st = self.lock();
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
        let mut st = self.lock();
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
        Duration::from_nanos(self.lock().now)
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
                    .lock()
                    .dev
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
