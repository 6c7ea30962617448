//! The planner: the plan builders. Turns one array request (read, write, trim,
//! write-zeroes) into a [`Plan`], given the geometry and which member roles are
//! present, and builds the plans that restore redundancy (a rebuilt member
//! range, a repair, a scrub step), which `recovery_plan` asks for by what the
//! engine is doing. Pure: no I/O, no locks, no clocks, so `explain`, the
//! executor and the simulator all see the same decisions.
//!
//! Parity levels work per stripe row and, inside a row, per column segment: a range
//! of chunk offsets over which the same data chunks are being written. For each
//! segment a write chooses, as md does, whichever of read-modify-write (read the old
//! data being replaced and the parity) and reconstruct-write (read the data not being
//! replaced) reads fewer blocks, preferring reconstruct-write on a tie; when members
//! are missing and neither works, it reads everything left, rebuilds the lost blocks
//! and writes fresh parity. A full-stripe write reads nothing. Given the
//! array's kept rows (`plan_write_kept`, `parity_kept.rs`), a block already
//! known in memory costs no read, as md counts only blocks not up to date.
//!
//! Every level family's builders stand behind one trait, `Builders`
//! (`family.rs`), one implementation per family: the parity rows of RAID 4, 5
//! and 6 (`parity.rs`, with `parity_recovery.rs` for the plans that restore
//! redundancy) and the copies of RAID 1 and 10, RAID 0 being the one-copy
//! case (`mirror.rs`, `mirror_recovery.rs`). `family` picks a geometry's,
//! from the level's entry in `level/` (`Rules::plans`); nothing else here
//! asks which family a level is.

mod count;
mod family;
mod logged;
mod memo;
mod method;
mod mirror;
mod mirror_recovery;
mod parity;
mod parity_kept;
mod parity_recovery;
mod recovery;
mod spare;
mod zeroes;

pub(crate) use family::Builders;
pub use mirror_recovery::{plan_scrub_mirrors, plan_scrub_mirrors_skipping, MirrorScrub, ScrubRun};
pub use parity_recovery::plan_scrub_parity;
pub(crate) use recovery::check_member_range;
pub use recovery::plan_rebuild;

pub use logged::{plan_write_journaled, plan_write_logged};
pub use spare::recycle;
pub(crate) use spare::with_map as with_stripe_map;
pub use zeroes::{plan_trim, plan_write_zeroes, plan_zero_fill, zero_stripe_bytes};

use crate::kept_rows::KeptRows;
use crate::level::Plans;
use crate::plan::{Compute, KeptRow, LogEntry, MemberOp, Plan, Slice, Step};
use raidlab_core::IoKind;
use raidlab_core::{check_range, Error, ErrorKind, Op, Result};
use raidlab_layout::{Geometry, StripeMap};
use std::ops::Range;

/// Lock granularity for RAID 1, which has no chunk.
const RAID1_LOCK_UNIT: u64 = 64 << 10;

/// The plan builders of `geo`'s level family.
pub(crate) fn family(geo: &Geometry) -> FamilyBuilders {
    family_of(crate::level::of(geo).plans)
}

/// The plan builders a level's entry names.
pub(crate) fn family_of(plans: Plans) -> FamilyBuilders {
    match plans {
        Plans::ParityRows => FamilyBuilders::ParityRows,
        Plans::Copies => FamilyBuilders::Copies,
    }
}

/// A level family's builders, handed out by value: each call is a match and
/// a direct call to the family's implementation, not a virtual one, so the
/// per-request planning inlines as it did before the trait (through a
/// `&dyn Builders` the simulator ran 1.8% more instructions, callgrind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FamilyBuilders {
    ParityRows,
    Copies,
}

/// Call `method` on the implementation `builders` names.
macro_rules! on_family {
    ($builders:expr, $method:ident($($arg:expr),*)) => {
        match $builders {
            FamilyBuilders::ParityRows => parity::ParityRows.$method($($arg),*),
            FamilyBuilders::Copies => mirror::Copies.$method($($arg),*),
        }
    };
}

impl Builders for FamilyBuilders {
    fn read(
        &self,
        b: &mut Builder,
        geo: &Geometry,
        present: &[bool],
        offset: u64,
        len: u64,
        hint: usize,
    ) -> Result<()> {
        on_family!(self, read(b, geo, present, offset, len, hint))
    }

    fn write(
        &self,
        b: &mut Builder,
        geo: &Geometry,
        present: &[bool],
        offset: u64,
        len: u64,
    ) -> Result<()> {
        on_family!(self, write(b, geo, present, offset, len))
    }

    fn count_write_reads(
        &self,
        geo: &Geometry,
        present: &[bool],
        offset: u64,
        len: u64,
    ) -> Option<u64> {
        on_family!(self, count_write_reads(geo, present, offset, len))
    }

    fn zero_unit(&self, geo: &Geometry) -> Option<u64> {
        on_family!(self, zero_unit(geo))
    }

    fn piece_unit(&self, geo: &Geometry) -> u64 {
        on_family!(self, piece_unit(geo))
    }

    fn member_range_keys(&self, geo: &Geometry, role: usize, at: u64, n: u64) -> Result<Vec<u64>> {
        on_family!(self, member_range_keys(geo, role, at, n))
    }

    fn rebuild_sources(
        &self,
        plan: &mut Plan,
        geo: &Geometry,
        live: &[bool],
        role: usize,
        at: u64,
        n: u64,
    ) -> Result<()> {
        on_family!(self, rebuild_sources(plan, geo, live, role, at, n))
    }

    fn repair(
        &self,
        geo: &Geometry,
        live: &[bool],
        role: usize,
        pos: u64,
        n: u64,
    ) -> Result<(Plan, usize)> {
        on_family!(self, repair(geo, live, role, pos, n))
    }

    fn scrub_total(&self, geo: &Geometry) -> u64 {
        on_family!(self, scrub_total(geo))
    }

    fn scrub_step(
        &self,
        geo: &Geometry,
        present: &[bool],
        pos: u64,
        n: u64,
    ) -> Result<(Plan, usize)> {
        on_family!(self, scrub_step(geo, present, pos, n))
    }

    fn keeps_rows(&self) -> bool {
        on_family!(self, keeps_rows())
    }
}

/// Plan a read of `len` bytes at array offset `offset`. `hint` spreads reads over
/// mirror copies (any number, taken modulo the live copies; the array passes its
/// read balancer's choice, `balance.rs`).
pub fn plan_read(
    geo: &Geometry,
    present: &[bool],
    offset: u64,
    len: u64,
    hint: usize,
) -> Result<Plan> {
    check_request(geo, present, Op::Read, offset, len)?;
    let mut b = Builder::default();
    family(geo).read(&mut b, geo, present, offset, len, hint)?;
    Ok(b.finish())
}

/// Plan a write of `len` bytes at array offset `offset`.
pub fn plan_write(geo: &Geometry, present: &[bool], offset: u64, len: u64) -> Result<Plan> {
    let plan = write_plan(geo, present, offset, len, false, None)?;
    memo::remember(geo, present, offset, len, plan.reads().count() as u64);
    Ok(plan)
}

/// [`plan_write`] for an array that keeps rows in memory (`kept_rows`):
/// with every member present, a row segment whose rows are all in `kept`
/// is written by reconstruct-write from them, with no member read, and a
/// reconstruct-write of whole rows leaves them in `kept` (its plan's
/// [`Step::Keep`]). Pure as `plan_write`: `kept` is only asked what it
/// holds, the same answer giving the same plan.
pub fn plan_write_kept(
    geo: &Geometry,
    present: &[bool],
    offset: u64,
    len: u64,
    kept: &KeptRows,
) -> Result<Plan> {
    check_request(geo, present, Op::Write, offset, len)?;
    let mut b = Builder {
        kept: Some(kept),
        ..Builder::default()
    };
    family(geo).write(&mut b, geo, present, offset, len)?;
    Ok(b.finish())
}

/// [`plan_write`] (with a partial parity log's entries if `log`) on an
/// array whose resync is owed from member byte `from` (the new space of a
/// served `--size` while it is resynced): with every member present, a
/// stripe from `from` on is written by reconstruct-write, its parity
/// computed from data, as md writes past `recovery_cp`. A read-modify-write
/// would fold the change into parity the resync has not made right yet, and
/// a member lost before the resync reaches the stripe would then read back
/// wrong.
pub fn plan_write_unsynced(
    geo: &Geometry,
    present: &[bool],
    offset: u64,
    len: u64,
    from: u64,
    log: bool,
) -> Result<Plan> {
    if log {
        logged::check_logged(geo, offset, len)?;
    }
    write_plan(geo, present, offset, len, log, Some(from))
}

/// The member reads [`plan_write`] plans for this write (0 where it refuses
/// one), or [`plan_write_unsynced`] with `unsynced_from`: what the stripe
/// cache counts for a write held alone, then written out. Asked right after
/// the write path planned the same write on this thread, it answers without
/// planning again; past an owed resync it plans each time (the count and
/// the memo know nothing of the resync point).
pub fn write_reads(
    geo: &Geometry,
    present: &[bool],
    offset: u64,
    len: u64,
    unsynced_from: Option<u64>,
) -> u64 {
    if unsynced_from.is_none() {
        if let Some(reads) = family(geo).count_write_reads(geo, present, offset, len) {
            return reads;
        }
        if let Some(reads) = memo::recall(geo, present, offset, len) {
            return reads;
        }
    }
    match write_plan(geo, present, offset, len, false, unsynced_from) {
        Ok(p) => {
            let reads = p.reads().count() as u64;
            if unsynced_from.is_none() {
                memo::remember(geo, present, offset, len, reads);
            }
            recycle(p);
            reads
        }
        Err(_) => 0,
    }
}

fn write_plan(
    geo: &Geometry,
    present: &[bool],
    offset: u64,
    len: u64,
    log: bool,
    unsynced_from: Option<u64>,
) -> Result<Plan> {
    check_request(geo, present, Op::Write, offset, len)?;
    let mut b = Builder {
        log,
        unsynced_from,
        ..Builder::default()
    };
    family(geo).write(&mut b, geo, present, offset, len)?;
    Ok(b.finish())
}

fn check_request(geo: &Geometry, present: &[bool], op: Op, offset: u64, len: u64) -> Result<()> {
    if present.len() != geo.raid_disks {
        return Err(Error::new(
            ErrorKind::Invalid,
            Op::Plan,
            format!(
                "internal: {} member states given for {} raid devices",
                present.len(),
                geo.raid_disks
            ),
        ));
    }
    check_range("array", op, geo.array_bytes(), offset, len)
}

/// One stripe row touched by a request. A request is contiguous, so the data
/// indices it touches in a row are consecutive, `first..=last`: columns
/// `[start, chunk)` of `first`, whole chunks between, `[0, end)` of `last`
/// (`[start, end)` when `first == last`). Kept as bounds, not a vector per
/// row: the simulator plans millions of requests.
struct Row {
    stripe: u64,
    map: StripeMap,
    first: usize,
    last: usize,
    start: u64,
    end: u64,
    chunk: u64,
    data_disks: u64,
}

/// A column range of one row and the data indices whose chunks it writes/reads
/// (consecutive, in increasing order, never empty).
struct Segment {
    start: u64,
    end: u64,
    touched: Range<usize>,
}

impl Row {
    /// The column range data index `i` covers, if the request touches it.
    fn columns(&self, i: usize) -> Option<(u64, u64)> {
        (self.first..=self.last).contains(&i).then_some((
            if i == self.first { self.start } else { 0 },
            if i == self.last { self.end } else { self.chunk },
        ))
    }

    /// The row cut at every column where the set of touched chunks changes, in
    /// column order: at most three segments, since every cut is one of 0, the
    /// request's start and end columns, and the chunk size.
    fn segments(&self) -> impl Iterator<Item = Segment> + '_ {
        let mut cuts = [self.start, self.end, 0, self.chunk];
        let n = if self.last > self.first { 4 } else { 2 };
        cuts[..n].sort_unstable();
        let mut k = 0;
        for i in 0..n {
            if k == 0 || cuts[k - 1] != cuts[i] {
                cuts[k] = cuts[i];
                k += 1;
            }
        }
        (1..k).filter_map(move |w| {
            let (start, end) = (cuts[w - 1], cuts[w]);
            let covers =
                |i: &usize| matches!(self.columns(*i), Some((a, b)) if a <= start && end <= b);
            let lo = (self.first..=self.last).find(covers)?;
            let hi = (lo..=self.last).rev().find(covers)?;
            Some(Segment {
                start,
                end,
                touched: lo..hi + 1,
            })
        })
    }

    /// Offset in the caller's buffer of column `col` of data index `i`.
    fn user_offset(&self, i: usize, col: u64, req_offset: u64) -> usize {
        ((self.stripe * self.data_disks + i as u64) * self.chunk + col - req_offset) as usize
    }
}

impl Drop for Row {
    fn drop(&mut self) {
        spare::give_map(std::mem::take(&mut self.map));
    }
}

/// The stripe rows `[offset, offset+len)` touches, in order.
fn rows(geo: &Geometry, offset: u64, len: u64) -> impl Iterator<Item = Row> + '_ {
    let chunk = geo.chunk_bytes;
    let dd = geo.data_disks() as u64;
    let end = offset + len;
    let (c0, c1) = if len == 0 {
        (0, 0)
    } else {
        (offset / chunk, (end - 1) / chunk)
    };
    let count = if len == 0 { 0 } else { c1 / dd - c0 / dd + 1 };
    (c0 / dd..c0 / dd + count).map(move |stripe| {
        let (fc, lc) = (c0.max(stripe * dd), c1.min(stripe * dd + dd - 1));
        let mut map = spare::map();
        geo.stripe_into(stripe, &mut map);
        Row {
            stripe,
            map,
            first: (fc % dd) as usize,
            last: (lc % dd) as usize,
            start: offset.max(fc * chunk) - fc * chunk,
            end: end.min((lc + 1) * chunk) - lc * chunk,
            chunk,
            data_disks: dd,
        }
    })
}

/// One plan being built: the families add member operations, arithmetic,
/// log entries and lock keys; [`Builder::finish`] orders them into steps.
pub(crate) struct Builder<'k> {
    plan: Plan,
    reads: Vec<MemberOp>,
    computes: Vec<Compute>,
    writes: Vec<MemberOp>,
    /// Keep a partial parity log: collect `entries`.
    log: bool,
    /// Keep md's write journal: collect every new page in `entries`.
    journal: bool,
    /// A resync is owed from this member byte: a stripe from there may
    /// hold parity that disagrees with its data, so with every member
    /// present its writes compute parity from data (md's rule:
    /// reconstruct-write past `recovery_cp`), never fold a change into it.
    unsynced_from: Option<u64>,
    entries: Vec<LogEntry>,
    /// The array's rows kept in memory (`kept_rows`), for a plain write
    /// with every member present: a row segment whose rows are all kept is
    /// written by reconstruct-write with its other blocks taken from them,
    /// reading nothing, and a reconstruct-write leaves its rows there
    /// (`keeps`).
    kept: Option<&'k KeptRows>,
    keeps: Vec<KeptRow>,
}

impl Default for Builder<'_> {
    fn default() -> Self {
        let (plan, reads, writes, computes) = spare::builder_parts();
        Builder {
            plan,
            reads,
            computes,
            writes,
            log: false,
            journal: false,
            unsynced_from: None,
            entries: Vec::new(),
            kept: None,
            keeps: Vec::new(),
        }
    }
}

impl Builder<'_> {
    fn lock(&mut self, key: u64) {
        self.plan.locks.push(key);
    }

    fn scratch(&mut self, len: u64) -> usize {
        self.plan.add_scratch(len as usize)
    }

    fn read(&mut self, member: usize, offset: u64, buf: Slice) {
        self.reads
            .push(MemberOp::new(IoKind::Read, member, offset, buf));
    }

    fn write(&mut self, member: usize, offset: u64, buf: Slice) {
        self.writes
            .push(MemberOp::new(IoKind::Write, member, offset, buf));
    }

    fn finish(mut self) -> Plan {
        let reads = merge(std::mem::take(&mut self.reads));
        let writes = merge(std::mem::take(&mut self.writes));
        let mut unused_ops = [None, None];
        if !reads.is_empty() {
            self.plan.steps.push(Step::Io(reads));
        } else {
            unused_ops[0] = Some(reads);
        }
        let computes = std::mem::take(&mut self.computes);
        let unused_computes = if !computes.is_empty() {
            self.plan.steps.push(Step::Compute(computes));
            None
        } else {
            Some(computes)
        };
        if !self.entries.is_empty() {
            self.plan
                .steps
                .push(Step::Log(std::mem::take(&mut self.entries)));
        }
        if !self.keeps.is_empty() {
            self.plan
                .steps
                .push(Step::Keep(std::mem::take(&mut self.keeps)));
        }
        if !writes.is_empty() {
            self.plan.steps.push(Step::Io(writes));
        } else {
            unused_ops[1] = Some(writes);
        }
        spare::give_unused(unused_ops, unused_computes);
        self.plan.locks.sort_unstable();
        self.plan.locks.dedup();
        self.plan
    }
}

/// Join operations on one member that continue each other on the member and in the
/// same buffer, so a large request becomes few large member I/Os. In place (the
/// simulator plans millions of requests, and a new vector plus a hash map per
/// step was a fifth of its time); `last[member]` is the index of that member's
/// latest kept operation.
fn merge(mut ops: Vec<MemberOp>) -> Vec<MemberOp> {
    if ops.len() < 2 {
        return ops;
    }
    const NONE: usize = usize::MAX;
    let mut small = [NONE; 32];
    let mut large = Vec::new();
    let width = ops.iter().map(|o| o.member + 1).max().unwrap_or(0);
    let last: &mut [usize] = if width <= small.len() {
        &mut small[..width]
    } else {
        large.resize(width, NONE);
        &mut large
    };
    let mut kept = 0;
    for i in 0..ops.len() {
        let op = ops[i];
        let j = last[op.member];
        if j != NONE {
            let prev = &mut ops[j];
            if prev.offset + prev.length == op.offset
                && prev.buf.buf == op.buf.buf
                && prev.buf.offset + prev.buf.len == op.buf.offset
            {
                prev.length += op.length;
                prev.buf.len += op.buf.len;
                continue;
            }
        }
        last[op.member] = kept;
        ops[kept] = op;
        kept += 1;
    }
    ops.truncate(kept);
    ops
}

fn lost_error(geo: &Geometry, present: &[bool], offset: u64, len: u64) -> Error {
    let missing: Vec<String> = present
        .iter()
        .enumerate()
        .filter(|(_, p)| !**p)
        .map(|(i, _)| i.to_string())
        .collect();
    let tolerance = crate::level::of(geo).lost;
    Error::new(
        ErrorKind::Unrecoverable,
        Op::Plan,
        format!(
            "the data here is lost with member role(s) {} missing; {tolerance}. Supply the missing member(s) to read or write this range",
            missing.join(", ")
        ),
    )
    .on_device("array")
    .at(offset, len)
}
