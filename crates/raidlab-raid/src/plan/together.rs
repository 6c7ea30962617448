//! Independent write plans run as one: the plans of writes to different
//! stripes (the held stripes a flush writes out) merged step by step, so that
//! their member reads go out together, then their computes, their kept rows
//! and their writes, as md works on many stripe heads at once.
//!
//! Decides only whether plans can be merged and how their buffers are
//! renumbered. It must never merge two plans that share a stripe lock: the
//! second would read old data or parity the first is about to change, and
//! its parity would undo the first's.

use super::{Buf, Compute, KeptRow, MemberOp, Plan, Slice, Step};
use raidlab_core::IoKind;

/// One plan's steps sorted into the places of a merged plan.
#[derive(Default)]
struct Shape {
    /// Computes before the member reads (rows taken from memory), in order.
    before: Vec<Vec<Compute>>,
    reads: Vec<MemberOp>,
    /// Computes after the reads, in order.
    after: Vec<Vec<Compute>>,
    keep: Vec<KeptRow>,
    writes: Vec<MemberOp>,
}

impl Shape {
    /// `plan`'s steps as computes, at most one step of reads, computes, kept
    /// rows, at most one step of writes, in that order; `None` for any other
    /// plan (a log step, an I/O step of reads and writes, a second write step:
    /// an order between writes that merging would lose).
    fn of(plan: &Plan, user: usize, scratch: usize) -> Option<Shape> {
        let mut s = Shape::default();
        // 0: before the reads, 1: after them, 2: kept, 3: written.
        let mut at = 0;
        for step in &plan.steps {
            match step {
                Step::Io(ops) if ops.iter().all(|op| op.kind == IoKind::Read) => {
                    if at > 0 {
                        return None;
                    }
                    s.reads = ops.iter().map(|op| op.moved(user, scratch)).collect();
                    at = 1;
                }
                Step::Io(ops) if ops.iter().all(|op| op.kind != IoKind::Read) => {
                    if at > 2 {
                        return None;
                    }
                    s.writes = ops.iter().map(|op| op.moved(user, scratch)).collect();
                    at = 3;
                }
                Step::Compute(cs) => {
                    let cs = cs.iter().map(|c| c.moved(user, scratch)).collect();
                    match at {
                        0 => s.before.push(cs),
                        1 => s.after.push(cs),
                        _ => return None,
                    }
                }
                Step::Keep(rows) => {
                    if at > 2 {
                        return None;
                    }
                    s.keep.extend(rows.iter().map(|r| r.moved(user, scratch)));
                    at = 2;
                }
                Step::Io(_) | Step::Log(_) => return None,
            }
        }
        Some(s)
    }
}

/// `layers[i]` gets `cs`'s i-th step appended.
fn stack(layers: &mut Vec<Vec<Compute>>, cs: Vec<Vec<Compute>>) {
    for (i, c) in cs.into_iter().enumerate() {
        match layers.get_mut(i) {
            Some(l) => l.extend(c),
            None => layers.push(c),
        }
    }
}

impl Plan {
    /// The plans `parts` as one plan, each with the place in the merged
    /// request buffer where its own request buffer starts: every plan's
    /// reads in one step, then their computes (each plan's in its order),
    /// their kept rows, and their writes in one step; the scratch buffers
    /// and stripe locks of all. `None` where they cannot be merged: two
    /// share a stripe lock, their spaces differ, or one is not of the shape
    /// a write's plan has (see `Shape::of`).
    pub fn together(parts: &[(&Plan, usize)]) -> Option<Plan> {
        let mut out = Plan {
            space: parts.first()?.0.space,
            ..Plan::default()
        };
        let (mut before, mut after) = (Vec::new(), Vec::new());
        let (mut reads, mut keep, mut writes) = (Vec::new(), Vec::new(), Vec::new());
        for &(plan, user) in parts {
            if plan.space != out.space {
                return None;
            }
            let s = Shape::of(plan, user, out.scratch.len())?;
            out.scratch.extend_from_slice(&plan.scratch);
            out.locks.extend_from_slice(&plan.locks);
            stack(&mut before, s.before);
            stack(&mut after, s.after);
            reads.extend(s.reads);
            keep.extend(s.keep);
            writes.extend(s.writes);
        }
        let locks = out.locks.len();
        out.locks.sort_unstable();
        out.locks.dedup();
        if out.locks.len() != locks {
            return None;
        }
        out.steps.extend(before.into_iter().map(Step::Compute));
        if !reads.is_empty() {
            out.steps.push(Step::Io(reads));
        }
        out.steps.extend(after.into_iter().map(Step::Compute));
        if !keep.is_empty() {
            out.steps.push(Step::Keep(keep));
        }
        if !writes.is_empty() {
            out.steps.push(Step::Io(writes));
        }
        Some(out)
    }
}

/// `s` in the merged plan: the request buffer's bytes from `user` on, the
/// scratch buffers from number `scratch` on.
fn moved(s: Slice, user: usize, scratch: usize) -> Slice {
    match s.buf {
        Buf::User => Slice {
            offset: s.offset + user,
            ..s
        },
        Buf::Scratch(id) => Slice {
            buf: Buf::Scratch(id + scratch),
            ..s
        },
    }
}

impl KeptRow {
    fn moved(&self, user: usize, scratch: usize) -> KeptRow {
        KeptRow {
            pages: self
                .pages
                .iter()
                .map(|p| p.map(|p| moved(p, user, scratch)))
                .collect(),
            ..*self
        }
    }
}

impl MemberOp {
    fn moved(&self, user: usize, scratch: usize) -> MemberOp {
        MemberOp {
            buf: moved(self.buf, user, scratch),
            ..*self
        }
    }
}

impl Compute {
    fn moved(&self, user: usize, scratch: usize) -> Compute {
        let m = |s: &Slice| moved(*s, user, scratch);
        let id = |i: &usize| i + scratch;
        match self {
            Compute::Xor { srcs, dst } => Compute::Xor {
                srcs: srcs.iter().map(m).collect(),
                dst: id(dst),
            },
            Compute::Pq { data, p, q } => Compute::Pq {
                data: data.iter().map(m).collect(),
                p: id(p),
                q: id(q),
            },
            Compute::Update {
                slot,
                old,
                new,
                p,
                q,
            } => Compute::Update {
                slot: *slot,
                old: m(old),
                new: m(new),
                p: p.as_ref().map(id),
                q: q.as_ref().map(id),
            },
            Compute::Recover {
                data,
                lost,
                p,
                q,
                fresh,
            } => Compute::Recover {
                data: data.iter().map(|d| d.as_ref().map(m)).collect(),
                lost: lost.clone(),
                p: p.as_ref().map(m),
                q: q.as_ref().map(m),
                fresh: fresh.map(|f| super::Fresh {
                    q: f.q,
                    dst: moved(f.dst, user, scratch),
                }),
            },
            Compute::Copy { src, dst } => Compute::Copy {
                src: m(src),
                dst: m(dst),
            },
            Compute::Zero { dst } => Compute::Zero { dst: m(dst) },
            Compute::Kept {
                member,
                offset,
                dst,
            } => Compute::Kept {
                member: *member,
                offset: *offset,
                dst: id(dst),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::LogEntry;

    /// A read-modify-write's shape: old data and parity read, parity
    /// updated, both written.
    fn rmw(lock: u64, member: usize) -> Plan {
        let mut p = Plan {
            locks: vec![lock],
            ..Plan::default()
        };
        let (old, par) = (p.add_scratch(4096), p.add_scratch(4096));
        p.steps = vec![
            Step::Io(vec![
                MemberOp::new(IoKind::Read, member, lock * 4096, Slice::scratch(old, 4096)),
                MemberOp::new(IoKind::Read, 3, lock * 4096, Slice::scratch(par, 4096)),
            ]),
            Step::Compute(vec![Compute::Update {
                slot: member,
                old: Slice::scratch(old, 4096),
                new: Slice::user(0, 4096),
                p: Some(par),
                q: None,
            }]),
            Step::Io(vec![
                MemberOp::new(IoKind::Write, member, lock * 4096, Slice::user(0, 4096)),
                MemberOp::new(IoKind::Write, 3, lock * 4096, Slice::scratch(par, 4096)),
            ]),
        ];
        p
    }

    #[test]
    fn plans_of_different_stripes_go_as_one_read_step_and_one_write_step() {
        let (a, b) = (rmw(1, 0), rmw(2, 1));
        let p = Plan::together(&[(&a, 0), (&b, 4096)]).unwrap();
        assert_eq!(p.steps.len(), 3);
        assert_eq!(p.locks, vec![1, 2]);
        assert_eq!(p.scratch.len(), 4);
        assert_eq!(p.reads().count(), 4);
        let Step::Compute(cs) = &p.steps[1] else {
            panic!("{:?}", p.steps[1])
        };
        // The second plan's buffers: its scratch renumbered past the
        // first's, its request bytes where they start in the merged buffer.
        assert_eq!(
            cs[1],
            Compute::Update {
                slot: 1,
                old: Slice::scratch(2, 4096),
                new: Slice::user(4096, 4096),
                p: Some(3),
                q: None,
            }
        );
        let last = p.writes().last().unwrap();
        assert_eq!(last.buf, Slice::scratch(3, 4096));
    }

    #[test]
    fn plans_sharing_a_stripe_or_with_a_log_step_are_not_merged() {
        let (a, b) = (rmw(1, 0), rmw(1, 1));
        assert!(Plan::together(&[(&a, 0), (&b, 4096)]).is_none());
        let mut logged = rmw(2, 1);
        logged.steps.insert(
            2,
            Step::Log(vec![LogEntry {
                member: 3,
                data_offset: 0,
                data_size: 4096,
                pp: None,
            }]),
        );
        assert!(Plan::together(&[(&a, 0), (&logged, 4096)]).is_none());
        // Two write steps (an order between writes): not merged either.
        let mut ordered = rmw(3, 1);
        ordered.steps.push(Step::Io(vec![MemberOp::flush(3)]));
        assert!(Plan::together(&[(&a, 0), (&ordered, 4096)]).is_none());
    }
}
