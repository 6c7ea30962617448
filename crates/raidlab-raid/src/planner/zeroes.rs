//! Requests that carry no data, as plans: which member ranges a zeroed or
//! trimmed array range becomes, and the zeros written where a member could
//! not zero or trim.
//!
//! A write-zeroes is planned as the write of the same range would be (the
//! same member ranges, every live copy and a rebuild target, under the same
//! stripe locks), with each member write turned into a member write-zeroes
//! ([`IoKind::Zero`]) and no buffer. On parity levels that is only right for
//! whole stripes: the parity of zero data is zero (P is the XOR, Q a sum of
//! multiples, of zeros), so P and Q are zeroed like the data and nothing is
//! read or computed. A part of a stripe keeps other data, so its parity must
//! be computed: the caller writes a buffer of zeros there through the
//! ordinary write path, and this planner refuses such a range.
//!
//! Pure, like the rest of the planner: it never does I/O and never decides
//! what a member does when it cannot write zeroes (the array falls back to
//! [`plan_zero_fill`]).

use super::plan_write;
use super::Builders as _;
use crate::plan::{Compute, MemberOp, Plan, Slice, Step};
use raidlab_core::IoKind;
use raidlab_core::{Error, ErrorKind, Op, Result};
use raidlab_layout::Geometry;

/// The bytes of data one stripe of a parity array holds; `None` for the
/// levels without parity.
pub fn zero_stripe_bytes(geo: &Geometry) -> Option<u64> {
    super::family(geo).zero_unit(geo)
}

/// Plan making `[offset, offset+len)` of the array read as zeros with member
/// write-zeroes. On RAID 4/5/6 the range must be whole stripes (see
/// [`zero_stripe_bytes`]); on RAID 0/1/10 and linear any range is.
pub fn plan_write_zeroes(geo: &Geometry, present: &[bool], offset: u64, len: u64) -> Result<Plan> {
    if let Some(stripe) = zero_stripe_bytes(geo) {
        if stripe == 0 || offset % stripe != 0 || len % stripe != 0 {
            return Err(Error::new(
                ErrorKind::Invalid,
                Op::Plan,
                format!(
                    "internal: a write-zeroes of {len} bytes at {offset} on a {} array is not \
                     whole stripes of {stripe} bytes",
                    geo.level.name()
                ),
            ));
        }
    }
    let written = plan_write(geo, present, offset, len)?;
    let mut zeroes: Vec<MemberOp> = Vec::new();
    for step in &written.steps {
        let Step::Io(ops) = step else { continue };
        for op in ops {
            if op.kind != IoKind::Write {
                // A whole-stripe write reads nothing; a plan that does could
                // not be turned into zeroes without computing.
                return Err(Error::new(
                    ErrorKind::Invalid,
                    Op::Plan,
                    format!(
                        "internal: the write of {len} bytes at {offset} reads member {} first; \
                         it cannot become write-zeroes",
                        op.member
                    ),
                ));
            }
            zeroes.push(MemberOp {
                kind: IoKind::Zero,
                buf: Slice::user(0, 0),
                ..*op
            });
        }
    }
    Ok(Plan {
        locks: written.locks,
        ..Plan::io(zeroes)
    })
}

/// Plan a trim of `[offset, offset+len)` on a RAID 0/1/10 array: the member
/// ranges a write there would write (every live copy), trimmed instead, under
/// the same stripe locks. Parity levels are refused: parity over trimmed
/// blocks is only right if every member reads zeros after a trim, which the
/// caller checks per member, not the planner.
pub fn plan_trim(geo: &Geometry, present: &[bool], offset: u64, len: u64) -> Result<Plan> {
    if !crate::level::of(geo).trims {
        return Err(Error::new(
            ErrorKind::Unsupported,
            Op::Discard,
            format!(
                "internal: a trim of a {} array was planned",
                geo.level.name()
            ),
        ));
    }
    let mut plan = plan_write(geo, present, offset, len)?;
    for step in &mut plan.steps {
        if let Step::Io(ops) = step {
            for op in ops.iter_mut() {
                op.kind = IoKind::Trim;
                op.buf = Slice::user(0, 0);
            }
            if planted!(TrimSkipsLastMember) {
                // PLANTED BUG (tests only, `planted.rs`): one member keeps its data.
                let last = ops.iter().map(|o| o.member).max();
                ops.retain(|o| Some(o.member) != last);
            }
        }
    }
    plan.steps.retain(|s| matches!(s, Step::Io(_)));
    plan.scratch.clear();
    Ok(plan)
}

/// Write zeros over each range of `ranges` (member operations of any kind; a
/// trim that could not be done, say): one zeroed scratch buffer of at most
/// 1 MiB, written as many times as the ranges need.
pub fn plan_zero_fill(ranges: &[MemberOp]) -> Plan {
    const PIECE: u64 = 1 << 20;
    let widest = ranges
        .iter()
        .map(|o| o.length.min(PIECE))
        .max()
        .unwrap_or(0) as usize;
    let mut writes = Vec::new();
    for r in ranges {
        let mut at = 0;
        while at < r.length {
            let k = (r.length - at).min(PIECE);
            writes.push(MemberOp {
                kind: IoKind::Write,
                member: r.member,
                offset: r.offset + at,
                length: k,
                buf: Slice::scratch(0, k as usize),
            });
            at += k;
        }
    }
    if writes.is_empty() {
        return Plan::default();
    }
    Plan {
        space: crate::plan::Space::Data,
        steps: vec![
            Step::Compute(vec![Compute::Zero {
                dst: Slice::scratch(0, widest),
            }]),
            Step::Io(writes),
        ],
        scratch: vec![widest],
        locks: Vec::new(),
    }
}
