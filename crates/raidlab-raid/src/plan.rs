//! I/O plans as data: what the engine decided to do for one request.
//!
//! A plan is a list of steps. An I/O step is a set of member operations that may run
//! in parallel; a compute step is parity work on buffers that earlier steps filled.
//! Buffers are either the caller's buffer (`User`) or scratch buffers the plan
//! declares. The real executor carries a plan out; `raidlab explain` prints it; a
//! simulator can schedule it on device models. Nothing here does I/O.

use raidlab_core::IoKind;
use serde::Serialize;

mod together;

/// What a plan's member offsets count from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Space {
    /// The member's data area (what the array's layout addresses).
    #[default]
    Data,
    /// The whole member device: the superblock, the write-intent bitmap and
    /// the partial parity log live outside the data area. A plan in this
    /// space is run against the whole devices (or a journal device) by role.
    Device,
}

/// Which buffer a slice lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buf {
    /// The caller's buffer (read destination or write source).
    User,
    /// Scratch buffer number n of the plan.
    Scratch(usize),
}

/// `len` bytes at `offset` of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice {
    pub buf: Buf,
    pub offset: usize,
    pub len: usize,
}

impl Slice {
    pub fn user(offset: usize, len: usize) -> Slice {
        Slice {
            buf: Buf::User,
            offset,
            len,
        }
    }
    pub fn scratch(id: usize, len: usize) -> Slice {
        Slice {
            buf: Buf::Scratch(id),
            offset: 0,
            len,
        }
    }
}

/// One member operation: `len` bytes at `offset` of member `member`'s data area.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MemberOp {
    pub kind: IoKind,
    pub member: usize,
    pub offset: u64,
    pub length: u64,
    #[serde(skip)]
    pub buf: Slice,
}

impl MemberOp {
    /// A `kind` of `buf`'s length at `offset` of member `member`, to or
    /// from `buf`.
    pub fn new(kind: IoKind, member: usize, offset: u64, buf: Slice) -> MemberOp {
        MemberOp {
            kind,
            member,
            offset,
            length: buf.len as u64,
            buf,
        }
    }

    /// A flush of member `member` (no range, no buffer).
    pub fn flush(member: usize) -> MemberOp {
        MemberOp {
            kind: IoKind::Flush,
            member,
            offset: 0,
            length: 0,
            buf: Slice::user(0, 0),
        }
    }
}

/// Parity work, the arithmetic named: the executor runs it and decides
/// nothing. Every output lies in a buffer that no input of the same
/// computation uses (a scratch buffer, or a read's own buffer), so the
/// executor never aliases; [`Compute::outputs`] lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compute {
    /// dst = XOR of srcs (RAID 4/5 parity from full data, or RAID 5 rebuild).
    Xor { srcs: Vec<Slice>, dst: usize },
    /// P and Q from full data given in syndrome-slot order.
    Pq {
        data: Vec<Slice>,
        p: usize,
        q: usize,
    },
    /// Read-modify-write delta: P ^= old ^ new, Q ^= g^slot (old ^ new).
    Update {
        slot: usize,
        old: Slice,
        new: Slice,
        p: Option<usize>,
        q: Option<usize>,
    },
    /// Solve one row of a parity stripe: rebuild the `lost` syndrome slots of
    /// `data` from the others and the parities that are given (the parity
    /// engine uses what it needs of them), then, if `fresh` asks, recompute a
    /// parity from the completed row. Degraded reads and writes rebuild
    /// chunks with it; a rebuild or repair states what each row of a lost
    /// member is with it (`reconstruct::member_rows`).
    Recover {
        /// The row's data chunks by syndrome slot: a given chunk's contents,
        /// a lost one's destination (`None`: rebuilt only for `fresh`, into
        /// a buffer of the executor's).
        data: Vec<Option<Slice>>,
        lost: Vec<usize>,
        p: Option<Slice>,
        q: Option<Slice>,
        fresh: Option<Fresh>,
    },
    /// Copy bytes between buffers (e.g. rebuilt data to the caller).
    Copy { src: Slice, dst: Slice },
    /// Fill with zeros (space a mirror layout leaves unused, which a rebuilt
    /// member holds as zeros).
    Zero { dst: Slice },
    /// Scratch buffer `dst` gets member `member`'s bytes at member offset
    /// `offset` from the array's kept rows (`kept_rows`) instead of a
    /// member read: a write of a row a recent write left in memory.
    Kept {
        member: usize,
        offset: u64,
        dst: usize,
    },
}

/// A parity a [`Compute::Recover`] recomputes from its completed row: a
/// lost parity member's contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fresh {
    /// Q when true, P otherwise.
    pub q: bool,
    pub dst: Slice,
}

impl Compute {
    /// The slices the computation writes, in the order the executor hands
    /// them over; `size(id)` is scratch buffer `id`'s length (a whole-buffer
    /// output).
    pub fn outputs(&self, size: impl Fn(usize) -> usize) -> Vec<Slice> {
        let whole = |id: usize| Slice::scratch(id, size(id));
        match self {
            Compute::Xor { dst, .. } => vec![whole(*dst)],
            Compute::Pq { p, q, .. } => vec![whole(*p), whole(*q)],
            Compute::Update { p, q, .. } => p.iter().chain(q).map(|&id| whole(id)).collect(),
            Compute::Recover {
                data, lost, fresh, ..
            } => lost
                .iter()
                .filter_map(|&l| data.get(l).copied().flatten())
                .chain(fresh.map(|f| f.dst))
                .collect(),
            Compute::Copy { dst, .. } | Compute::Zero { dst } => vec![*dst],
            Compute::Kept { dst, .. } => vec![whole(*dst)],
        }
    }
}

/// One entry of md's partial parity log (PPL, RAID 5 only): which rows of a stripe
/// a write modifies and the partial parity that, XORed with whatever the modified
/// data chunks hold after a crash, gives parity consistent with them. It goes to the
/// log on the stripe's parity member, durably, before the stripe is written.
///
/// With md's write journal (`planner::plan_write_journaled`) an entry is instead
/// one new block of the write: `member` the role it goes to, `data_offset` its
/// byte offset on that member, `data_size` its length, `pp` its new contents
/// (data or parity; which one follows from the layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LogEntry {
    /// Role of the parity member whose log holds the entry.
    pub member: usize,
    /// Array byte offset of the first modified data block of the rows.
    pub data_offset: u64,
    /// Bytes of data modified (modified chunks times the rows' height).
    pub data_size: u64,
    /// XOR of the data chunks the write leaves alone in those rows; `None` when it
    /// writes every data chunk (recovery then XORs the data alone).
    #[serde(skip)]
    pub pp: Option<Slice>,
}

/// Pages of whole rows a write leaves known in memory: `len` bytes at
/// member offset `offset`, `pages[m]` member `m`'s contents there once the
/// write is done (`None`: not known to the write, left as they were).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptRow {
    pub offset: u64,
    pub len: u64,
    pub pages: Vec<Option<Slice>>,
}

/// One step of a plan.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    Io(Vec<MemberOp>),
    Compute(Vec<Compute>),
    /// Write these partial parity log entries (and make them durable) before the
    /// next step's writes.
    Log(Vec<LogEntry>),
    /// Keep these rows in the array's memory (`kept_rows`) with the
    /// contents the next step writes: no I/O. An executor without kept
    /// rows passes it by.
    Keep(Vec<KeptRow>),
}

/// Everything the engine will do for one request.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub steps: Vec<Step>,
    /// Sizes of the scratch buffers the plan uses.
    pub scratch: Vec<usize>,
    /// Stripe lock keys to hold (sorted, distinct) while the plan runs, so that two
    /// writes to one stripe never interleave.
    pub locks: Vec<u64>,
    /// What the member offsets count from.
    pub space: Space,
}

// Clone by hand for `clone_from`: the derived one allocates every vector
// anew, and a recording executor that keeps copies of millions of plans
// (the simulator's) reuses a finished plan's vectors instead.
impl Clone for Step {
    fn clone(&self) -> Step {
        match self {
            Step::Io(ops) => Step::Io(ops.clone()),
            Step::Compute(cs) => Step::Compute(cs.clone()),
            Step::Log(entries) => Step::Log(entries.clone()),
            Step::Keep(rows) => Step::Keep(rows.clone()),
        }
    }

    fn clone_from(&mut self, source: &Step) {
        match (self, source) {
            (Step::Io(a), Step::Io(b)) => a.clone_from(b),
            (Step::Compute(a), Step::Compute(b)) => a.clone_from(b),
            (Step::Log(a), Step::Log(b)) => a.clone_from(b),
            (Step::Keep(a), Step::Keep(b)) => a.clone_from(b),
            (s, source) => *s = source.clone(),
        }
    }
}

impl Clone for Plan {
    fn clone(&self) -> Plan {
        Plan {
            steps: self.steps.clone(),
            scratch: self.scratch.clone(),
            locks: self.locks.clone(),
            space: self.space,
        }
    }

    fn clone_from(&mut self, source: &Plan) {
        self.steps.clone_from(&source.steps);
        self.scratch.clone_from(&source.scratch);
        self.locks.clone_from(&source.locks);
        self.space = source.space;
    }
}

/// The JSON shape of `raidlab explain --json`: phases of member operations.
#[derive(Debug, Clone, Serialize)]
pub struct Explained {
    pub phases: Vec<ExplainedPhase>,
    pub computes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ExplainedPhase {
    pub ops: Vec<MemberOp>,
    /// Partial parity log entries written (durably) before this phase's writes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub log: Vec<LogEntry>,
    /// Parity work done after this phase's I/O completes.
    pub then: Vec<String>,
}

impl Plan {
    /// One step flushing each of `members` (their caches to stable
    /// storage), in parallel; an empty plan for none.
    pub fn flushes(members: impl IntoIterator<Item = usize>) -> Plan {
        Plan::io(members.into_iter().map(MemberOp::flush).collect())
    }

    /// One step of `ops`, in parallel, in the data space with no locks; an
    /// empty plan for none.
    pub fn io(ops: Vec<MemberOp>) -> Plan {
        Plan {
            steps: if ops.is_empty() {
                Vec::new()
            } else {
                vec![Step::Io(ops)]
            },
            ..Plan::default()
        }
    }

    /// One read of `length` bytes at `offset` of member `member`'s data
    /// area into the start of the caller's buffer: a streaming reader's
    /// read-ahead, which decides when to read but not what the data is for.
    pub fn read_one(member: usize, offset: u64, length: usize) -> Plan {
        Plan {
            steps: vec![Step::Io(vec![MemberOp::new(
                IoKind::Read,
                member,
                offset,
                Slice::user(0, length),
            )])],
            ..Plan::default()
        }
    }

    pub fn add_scratch(&mut self, len: usize) -> usize {
        self.scratch.push(len);
        self.scratch.len() - 1
    }

    /// Every member write of the plan, in step order.
    pub fn writes(&self) -> impl Iterator<Item = &MemberOp> + '_ {
        self.ops(IoKind::Write)
    }

    /// The plan's member reads.
    pub fn reads(&self) -> impl Iterator<Item = &MemberOp> + '_ {
        self.ops(IoKind::Read)
    }

    /// Every member operation that changes what a member holds (writes,
    /// write-zeroes, trims), in step order.
    pub fn changes(&self) -> impl Iterator<Item = &MemberOp> + '_ {
        self.io_ops()
            .filter(|op| matches!(op.kind, IoKind::Write | IoKind::Zero | IoKind::Trim))
    }

    fn io_ops(&self) -> impl Iterator<Item = &MemberOp> + '_ {
        self.steps
            .iter()
            .filter_map(|s| match s {
                Step::Io(ops) => Some(ops),
                _ => None,
            })
            .flatten()
    }

    fn ops(&self, kind: IoKind) -> impl Iterator<Item = &MemberOp> + '_ {
        self.io_ops().filter(move |op| op.kind == kind)
    }

    /// Number of member reads and writes, for tests and summaries.
    pub fn op_counts(&self) -> (usize, usize) {
        let mut r = 0;
        let mut w = 0;
        for step in &self.steps {
            if let Step::Io(ops) = step {
                for op in ops {
                    match op.kind {
                        IoKind::Read => r += 1,
                        IoKind::Write | IoKind::Zero => w += 1,
                        IoKind::Trim | IoKind::Flush => {}
                    }
                }
            }
        }
        (r, w)
    }

    /// I/O steps as phases, with the parity work that follows each.
    pub fn explain(&self) -> Explained {
        let mut phases: Vec<ExplainedPhase> = Vec::new();
        let mut before_first = Vec::new();
        for step in &self.steps {
            match step {
                Step::Io(ops) => phases.push(ExplainedPhase {
                    ops: ops.clone(),
                    log: Vec::new(),
                    then: Vec::new(),
                }),
                Step::Log(entries) => phases.push(ExplainedPhase {
                    ops: Vec::new(),
                    log: entries.clone(),
                    then: Vec::new(),
                }),
                Step::Keep(rows) => {
                    let pages: u64 = rows
                        .iter()
                        .map(|r| r.pages.iter().flatten().count() as u64 * r.len)
                        .sum();
                    let text = format!("keep {} KiB of the members' rows in memory", pages >> 10);
                    match phases.last_mut() {
                        Some(p) => p.then.push(text),
                        None => before_first.push(text),
                    }
                }
                Step::Compute(cs) => {
                    let text: Vec<String> = cs.iter().map(describe_compute).collect();
                    match phases.last_mut() {
                        Some(p) => p.then.extend(text),
                        None => before_first.extend(text),
                    }
                }
            }
        }
        Explained {
            phases,
            computes: before_first,
        }
    }
}

fn describe_compute(c: &Compute) -> String {
    match c {
        Compute::Xor { srcs, .. } => format!("P = XOR of {} blocks", srcs.len()),
        Compute::Pq { data, .. } => format!("P, Q from {} data blocks", data.len()),
        Compute::Update { slot, q, .. } => {
            if q.is_some() {
                format!("P ^= old ^ new, Q ^= g^{slot} * (old ^ new)")
            } else {
                "P ^= old ^ new".to_string()
            }
        }
        Compute::Recover {
            data,
            lost,
            p,
            q,
            fresh,
        } => {
            let parity = match fresh {
                Some(f) if f.q => "Q",
                Some(_) => "P",
                None => "",
            };
            if lost.is_empty() {
                let given = data.iter().flatten().count();
                return format!("{parity} from {given} data blocks");
            }
            let rebuilt = format!(
                "rebuild data slot{} {:?} from {}",
                if lost.len() > 1 { "s" } else { "" },
                lost,
                match (p.is_some(), q.is_some()) {
                    (true, true) => "P and Q",
                    (true, false) => "P",
                    (false, true) => "Q",
                    (false, false) => "nothing",
                }
            );
            if parity.is_empty() {
                rebuilt
            } else {
                format!("{rebuilt}, then {parity} from the data")
            }
        }
        Compute::Copy { src, .. } => format!("copy {} bytes", src.len),
        Compute::Zero { dst } => format!("zero {} bytes", dst.len),
        Compute::Kept { member, offset, .. } => {
            format!("member {member}'s bytes at {offset} from the rows kept in memory")
        }
    }
}
