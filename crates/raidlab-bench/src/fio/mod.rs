//! fio's job-file format, run by raidlab's engine, reported in fio's JSON shape.
//!
//! Supported options (fio's names and defaults): `rw`/`readwrite` (read, write,
//! randread, randwrite, rw/readwrite, randrw), `bs`/`blocksize`, `size`, `offset`,
//! `iodepth`, `numjobs`, `direct`, `buffered`, `runtime`, `time_based`, `ramp_time`,
//! `rwmixread`, `rwmixwrite`, `randrepeat`, `zero_buffers`, `refill_buffers`,
//! `scramble_buffers`, `norandommap`, `filename`, `directory`,
//! `stonewall`/`wait_for_previous`, `ioengine` (io_uring, libaio, psync, sync,
//! pvsync; see `parse::engine_for`; a mapped one is said in [`Job::notes`]), `thread`,
//! `name`, `description`, `randseed`; `${VAR}` environment variables, and a
//! comment after a section header. Anything else is an error naming the file,
//! line and option (with the reason for the reporting and preparation options
//! fio users reach for: `group_reporting`, the syncs, `loops`,
//! `bssplit`, `percentile_list`, the `write_*_log` family): an option silently
//! ignored would make a figure mean something else.
//!
//! `ramp_time` runs the job on its target for that long first and counts none
//! of it; the measured run follows on the same target at once (a simulated
//! target's virtual clock and caches carry on), with its queue starting
//! empty where fio's stays full across the boundary, and its own random
//! offsets (the ramp draws from another seed).
//!
//! Jobs between two `stonewall`s run at once; each of a job's `numjobs` clones is
//! reported as its own entry of `jobs[]`, as fio does without `group_reporting`.
//! This module never prints; the CLI does.

mod json;
mod parse;

pub use json::{fio_json, report};
pub use parse::{parse, parse_file};

use crate::engine::{
    self, Access, Control, DataFill, Dir, DirStats, EngineKind, Limit, Rewrite, Workload,
};
use crate::rusage::Usage;
use crate::schema::RunConditions;
use crate::target::{OpenOptions, Target};
use raidlab_core::{Error, Result};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One job section after `[global]` defaults were applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub name: String,
    /// Where the section starts, for messages.
    pub line: usize,
    pub access: Access,
    pub dir: Dir,
    /// rwmixread as given (applies when `rw` is a mix; fio's default 50).
    pub mix: Option<u32>,
    pub bs: usize,
    pub size: Option<u64>,
    pub offset: u64,
    pub iodepth: usize,
    pub numjobs: usize,
    pub direct: bool,
    pub runtime: Option<Duration>,
    /// fio's `ramp_time`: run this long first, uncounted.
    pub ramp: Option<Duration>,
    pub time_based: bool,
    pub randrepeat: bool,
    pub zero_buffers: bool,
    pub refill_buffers: bool,
    /// As written; unset means fio's default (on, unless `zero_buffers` is).
    pub scramble_buffers: Option<bool>,
    /// Random offsets are independent picks (blocks repeat); by default each
    /// block is visited once per pass, as fio does.
    pub norandommap: bool,
    pub filename: Option<String>,
    pub directory: Option<String>,
    pub stonewall: bool,
    pub engine: EngineKind,
    /// The options as written (fio's "job options" in its JSON).
    pub options: BTreeMap<String, String>,
    /// What a person should know about how raidlab runs this job where it
    /// differs from fio (e.g. an `ioengine` mapped to another engine).
    pub notes: Vec<String>,
    /// fio's `randseed`: the seed of every random choice when `randrepeat`.
    pub randseed: Option<u64>,
}

impl Job {
    fn defaults(name: &str, line: usize) -> Self {
        Job {
            name: name.to_string(),
            line,
            access: Access::Seq,
            dir: Dir::Read,
            mix: None,
            bs: 4096,
            size: None,
            offset: 0,
            iodepth: 1,
            numjobs: 1,
            direct: false,
            runtime: None,
            ramp: None,
            time_based: false,
            randrepeat: true,
            zero_buffers: false,
            refill_buffers: false,
            scramble_buffers: None,
            norandommap: false,
            filename: None,
            directory: None,
            stonewall: false,
            engine: EngineKind::Auto,
            options: BTreeMap::new(),
            notes: Vec::new(),
            randseed: None,
        }
    }

    /// What written buffers get between writes, as fio decides it: refilling
    /// wins; otherwise fio stamps every write (`scramble_buffers`, on by default)
    /// unless the job asked for zeros and did not ask for stamps too.
    pub fn rewrite(&self) -> Rewrite {
        if self.refill_buffers {
            Rewrite::Refill
        } else if self.scramble_buffers.unwrap_or(!self.zero_buffers) {
            Rewrite::Scramble
        } else {
            Rewrite::Never
        }
    }

    /// The job's workload without its target, as fio names it: `randread
    /// bs=4096 iodepth=32 numjobs=1` (with `rwmixread=` for a mix). Jobs on
    /// different targets with the same workload are the ones compared.
    pub fn workload(&self) -> String {
        let rw = match (self.access, self.dir) {
            (Access::Seq, Dir::Read) => "read".to_string(),
            (Access::Seq, Dir::Write) => "write".to_string(),
            (Access::Rand, Dir::Read) => "randread".to_string(),
            (Access::Rand, Dir::Write) => "randwrite".to_string(),
            (Access::Seq, Dir::Mix { read_pct }) => format!("rw rwmixread={read_pct}"),
            (Access::Rand, Dir::Mix { read_pct }) => format!("randrw rwmixread={read_pct}"),
        };
        format!(
            "{rw} bs={} iodepth={} numjobs={}",
            self.bs, self.iodepth, self.numjobs
        )
    }

    /// The target string this job runs against.
    pub fn target(&self) -> Option<String> {
        match (&self.directory, &self.filename) {
            (Some(d), Some(f)) if !f.contains(':') => {
                Some(format!("{}/{f}", d.trim_end_matches('/')))
            }
            (_, Some(f)) => Some(f.clone()),
            (Some(d), None) => Some(d.clone()),
            (None, None) => None,
        }
    }
}

/// One clone's figures.
#[derive(Debug, Clone)]
pub struct CloneResult {
    pub job: String,
    pub clone: usize,
    pub group: usize,
    pub target: String,
    pub read: DirStats,
    pub write: DirStats,
    pub elapsed: Duration,
    pub engine: &'static str,
    pub options: BTreeMap<String, String>,
    /// How the clone ran: I/O path, bytes, time limit, engine, queue depth, its
    /// job and workload (what `raidlab report` shows and compares by).
    pub conditions: RunConditions,
    /// The process's CPU time, context switches and faults while this clone's
    /// group ran (getrusage): the whole group's, since clones run as threads
    /// of one process (with one clone per group, the clone's own).
    pub cpu: Usage,
}

/// Mixed into a job's seed for its `ramp_time` run, whose offsets are not the
/// measured run's.
const RAMP_SEED: u64 = 0x5241_4d50; // "RAMP"

/// Run every job, group by group (a `stonewall` starts a new group). Stops after
/// the group in which a stop was requested.
pub fn run(
    jobs: &[Job],
    allow_device_writes: bool,
    engine_override: Option<EngineKind>,
    control: &Control,
    on_group: &mut dyn FnMut(usize, &[Job]),
) -> Result<Vec<CloneResult>> {
    let mut groups: Vec<Vec<Job>> = Vec::new();
    for j in jobs {
        if j.stonewall || groups.is_empty() {
            groups.push(Vec::new());
        }
        if let Some(g) = groups.last_mut() {
            g.push(j.clone());
        }
    }
    let mut out = Vec::new();
    for (gi, group) in groups.iter().enumerate() {
        if control.stopped() {
            break;
        }
        on_group(gi, group);
        // Open every clone's target first: errors before any I/O.
        let mut planned = Vec::new();
        let simulated = group
            .iter()
            .filter(|j| j.target().is_some_and(|t| t.starts_with("sim:")))
            .map(|j| j.numjobs)
            .sum::<usize>();
        if simulated > 1 {
            // Each opening of a `sim:` target is its own simulated hardware, and
            // each runs in its own virtual time: jobs running together would
            // not share a device or a clock.
            return Err(Error::invalid(format!(
                "group {} runs {simulated} jobs on simulated targets at once: a simulated target runs one job at a time; give the jobs `stonewall` (one after another) or use iodepth instead of numjobs",
                gi + 1
            )));
        }
        for job in group {
            for clone in 0..job.numjobs {
                let spec = job.target().unwrap_or_default();
                let t = Target::open(
                    &spec,
                    OpenOptions {
                        size: job.size.map_or(0, |s| job.offset + s),
                        direct: job.direct,
                        // Files are opened writable anyway (to lay them out);
                        // devices and arrays only when the job writes.
                        writes: job.dir != Dir::Read,
                        allow_device_writes,
                    },
                )
                .map_err(|e| e.on_device(format!("job [{}]", job.name)))?;
                let size = match job.size {
                    Some(s) => s,
                    None => t.size.saturating_sub(job.offset),
                };
                if size == 0 {
                    return Err(Error::invalid(format!(
                        "job [{}]: {} is empty and the job gives no size: add size=...",
                        job.name, spec
                    )));
                }
                // Reads of a file this run created would read holes.
                if t.fresh && job.dir != Dir::Write {
                    lay_out(&t, job.offset, size, control)?;
                }
                let seed = if job.randrepeat {
                    job.randseed.unwrap_or(0x5EED) ^ clone as u64
                } else {
                    SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos() as u64)
                        ^ clone as u64
                };
                let w = Workload {
                    access: job.access,
                    dir: job.dir,
                    bs: job.bs,
                    offset: job.offset,
                    size,
                    threads: 1,
                    qd: job.iodepth,
                    limit: Limit {
                        time: job.runtime,
                        bytes: if job.time_based {
                            None
                        } else {
                            Some(size / job.bs as u64 * job.bs as u64)
                        },
                    },
                    data: if job.zero_buffers {
                        DataFill::Zero
                    } else {
                        DataFill::Random
                    },
                    rewrite: job.rewrite(),
                    random_map: !job.norandommap,
                    seed,
                    split: false,
                    engine: engine_override.unwrap_or(job.engine),
                };
                planned.push((job, clone, spec, t, w));
            }
        }
        let before = Usage::now();
        let results: Vec<Result<CloneResult>> = std::thread::scope(|s| {
            let handles: Vec<_> = planned
                .iter()
                .map(|(job, clone, spec, t, w)| {
                    s.spawn(move || -> Result<CloneResult> {
                        if let Some(ramp) = job.ramp.filter(|r| !r.is_zero()) {
                            // Uncounted, on the same target: what it leaves
                            // (a cache filled, a clock moved on) is the
                            // measured run's start.
                            let warm = Workload {
                                limit: Limit {
                                    time: Some(ramp),
                                    bytes: None,
                                },
                                seed: w.seed ^ RAMP_SEED,
                                ..w.clone()
                            };
                            engine::run(t, &warm, control)?;
                        }
                        let m = engine::run(t, w, control)?;
                        t.finish()?;
                        let mut conditions = RunConditions::of(t, w.size, m.engine);
                        conditions.target = spec.clone();
                        conditions.job = Some(job.name.clone());
                        conditions.workload = Some(job.workload());
                        conditions.queue_depth = Some(job.iodepth);
                        // One pass over `size` unless a runtime limits it.
                        conditions.runs = Some(1);
                        conditions.measure_s = job.runtime.map(|d| d.as_secs_f64());
                        Ok(CloneResult {
                            job: job.name.clone(),
                            clone: *clone,
                            group: gi,
                            target: spec.clone(),
                            read: m.read,
                            write: m.write,
                            elapsed: m.elapsed,
                            engine: m.engine,
                            options: job.options.clone(),
                            conditions,
                            cpu: Usage::default(),
                        })
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::invalid(
                            "internal error: a job thread panicked (a bug: please report it)",
                        ))
                    })
                })
                .collect()
        });
        let cpu = Usage::now().since(&before);
        for r in results {
            out.push(CloneResult { cpu, ..r? });
        }
    }
    Ok(out)
}

/// Write a fresh file's region before a read job reads it, as fio lays out files.
fn lay_out(t: &Target, offset: u64, size: u64, control: &Control) -> Result<()> {
    let bs = (1u64 << 20).min(size) as usize;
    let len = size / bs as u64 * bs as u64;
    let w = Workload {
        access: Access::Seq,
        dir: Dir::Write,
        bs,
        offset,
        size: len,
        threads: 1,
        qd: 4,
        limit: Limit {
            time: None,
            bytes: Some(len),
        },
        data: DataFill::Random,
        rewrite: Rewrite::Never,
        random_map: false,
        seed: 3,
        split: false,
        engine: EngineKind::Auto,
    };
    engine::run(t, &w, control)?;
    t.volume.flush()
}
