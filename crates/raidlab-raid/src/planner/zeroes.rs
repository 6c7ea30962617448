//! Write-zeroes as a plan: which member ranges a zeroed array range becomes.
//!
//! A write-zeroes is planned as the write of the same range would be (the
//! same member ranges, every live copy and a rebuild target, under the same
//! stripe locks), with each member write turned into a member write-zeroes
//! ([`OpKind::Zero`]) and no buffer. On parity levels that is only right for
//! whole stripes: the parity of zero data is zero (P is the XOR, Q a sum of
//! multiples, of zeros), so P and Q are zeroed like the data and nothing is
//! read or computed. A part of a stripe keeps other data, so its parity must
//! be computed: the caller writes a buffer of zeros there through the
//! ordinary write path, and this planner refuses such a range.
//!
//! Pure, like the rest of the planner: it never does I/O and never decides
//! what a member does when it cannot write zeroes (the array falls back to
//! [`super::plan_zero_fill`]).

use super::plan_write;
use crate::plan::{MemberOp, OpKind, Plan, Slice, Step};
use raidlab_core::{Error, ErrorKind, Op, Result};
use raidlab_layout::Geometry;

/// The bytes of data one stripe of a parity array holds; `None` for the
/// levels without parity.
pub fn zero_stripe_bytes(geo: &Geometry) -> Option<u64> {
    geo.is_parity()
        .then(|| geo.chunk_bytes * geo.data_disks() as u64)
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
            if op.kind != OpKind::Write {
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
                kind: OpKind::Zero,
                buf: Slice::user(0, 0),
                ..*op
            });
        }
    }
    Ok(Plan {
        steps: if zeroes.is_empty() {
            Vec::new()
        } else {
            vec![Step::Io(zeroes)]
        },
        scratch: Vec::new(),
        locks: written.locks,
        space: crate::plan::Space::Data,
    })
}
