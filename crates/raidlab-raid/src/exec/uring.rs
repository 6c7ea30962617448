//! A step's member operations through io_uring: those that can go straight
//! to a member's file (reads, writes and flushes of a file or block device
//! member, whole blocks on a direct one) are submitted together on the
//! calling thread's ring; the rest (trims, write-zeroes, unaligned edges of
//! a direct member, members that are not files) go through their volumes on
//! the same thread meanwhile. Then every completion is reaped.
//!
//! Only steps that touch a direct member take this path ([`pays`]): a
//! buffered member's request is a copy from the page cache, which the
//! caller's thread makes faster than a ring round trip (on /dev/shm files,
//! 4 KiB requests through the ring ran at 0.48x-0.78x of the thread path,
//! docs/benchmarks.md), so such steps keep the thread path and its pace.
//! Nor do steps that write a direct regular file: a write the file system
//! cannot start without blocking (ext4 updating the file's times, for one)
//! goes to io_uring's worker threads, which run the writes of one regular
//! file one at a time; RAID 10 4 KiB writes at QD 32 on ext4 files ran at
//! 0.15x-0.45x of the thread path, where on block devices (whose writes
//! the workers run in parallel) they ran at 1.64x.
//!
//! Like the thread pool it decides nothing about the operations and never
//! stops at a failed one: every operation of the step is attempted, and
//! each error names the member's device, the offset and the operation, as
//! the volume's own error would.

use super::{do_op, member, Failed, Members};
use crate::plan::MemberOp;
use raidlab_core::{Error, IoKind, Op, RawObserver, Volume};
use raidlab_devices::uring::{Request, Work};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Instant;

/// An operation's buffer, as the step gives it.
pub(super) enum Data<'a> {
    Read(&'a mut [u8]),
    Write(&'a [u8]),
    /// Flushes, trims, write-zeroes.
    Bare,
}

/// Where a request sent straight to a file came from, to report it.
struct Sent<'m> {
    op: &'m MemberOp,
    vol: &'m Arc<dyn Volume>,
    observer: Option<&'m dyn RawObserver>,
}

/// Whether a step of `ops` goes through the ring: it touches a direct
/// member, whose requests wait for a device, and writes no direct regular
/// file (see the module doc for both).
pub(super) fn pays(ops: &[MemberOp], members: &Members) -> bool {
    let mut direct = false;
    for op in ops {
        let raw = members
            .get(op.member)
            .and_then(|m| m.as_ref())
            .and_then(|v| v.raw_file());
        let Some(raw) = raw.filter(|r| r.direct.is_some()) else {
            continue;
        };
        if op.kind == IoKind::Write && !raw.block_device {
            return false;
        }
        direct = true;
    }
    direct
}

/// Put a step's requests in the order they go into the ring: by member,
/// then by offset. Linux's plug, which a submission of several requests
/// goes through, tries to join a request to the last one queued, or else
/// only to the oldest one queued for the same device
/// (`blk_attempt_plug_merge`): in the plan's order (a row of the stripe
/// after another) a member's contiguous runs that a parity chunk breaks
/// merge only in part (a RAID 5 of 4 with 64 KiB chunks, a 1 MiB read: 11
/// requests instead of 8), in this order every contiguous run is one
/// request. `at` gives a request's (member, offset). The simulator's model
/// of that plug takes a step's requests in this order too.
pub fn in_submission_order<T>(ops: &mut [T], at: impl Fn(&T) -> (usize, u64)) {
    ops.sort_by_key(at);
}

/// Run `work` (one step) as the module doc says.
pub(super) fn run<'m>(
    mut work: Vec<(&'m MemberOp, Data<'_>)>,
    members: &'m Members,
) -> Result<(), Failed> {
    in_submission_order(&mut work, |(op, _)| (op.member, op.offset));
    let kind = work.first().map_or(IoKind::Read, |(op, _)| op.kind);
    let mut errs: Vec<(usize, Error)> = Vec::new();
    let mut reqs: Vec<Request<'_>> = Vec::with_capacity(work.len());
    let mut sent: Vec<Sent<'m>> = Vec::with_capacity(work.len());
    let mut rest: Vec<(&Arc<dyn Volume>, &MemberOp, Data<'_>)> = Vec::new();
    for (op, data) in work {
        let vol = match member(members, op) {
            Ok(v) => v,
            Err(e) => {
                errs.push((op.member, e));
                continue;
            }
        };
        match straight(vol, op, data) {
            Ok((req, observer)) => {
                reqs.push(req);
                sent.push(Sent { op, vol, observer });
            }
            Err(data) => rest.push((vol, op, data)),
        }
    }
    let started = Instant::now();
    let (results, rest_errs) = raidlab_devices::uring::run(&mut reqs, || {
        rest.into_iter()
            .filter_map(|(vol, op, data)| {
                let r = match data {
                    Data::Read(b) => do_op(vol, op, Some(b), None),
                    Data::Write(b) => do_op(vol, op, None, Some(b)),
                    Data::Bare => do_op(vol, op, None, None),
                };
                r.err().map(|e| (op.member, e))
            })
            .collect::<Vec<_>>()
    });
    errs.extend(rest_errs);
    for (s, r) in sent.iter().zip(results) {
        if let Some(o) = s.observer {
            o.done(s.op.kind, s.op.length, started, r.is_ok());
        }
        if let Err(e) = r {
            let err = match s.op.kind {
                IoKind::Flush => Error::io(Op::Flush, s.vol.name(), e),
                IoKind::Read => Error::io(Op::Read, s.vol.name(), e).at(s.op.offset, s.op.length),
                _ => Error::io(Op::Write, s.vol.name(), e).at(s.op.offset, s.op.length),
            };
            errs.push((s.op.member, err));
        }
    }
    if errs.is_empty() {
        return Ok(());
    }
    // The first member's error first, as the thread pool reports them.
    errs.sort_by_key(|(m, _)| *m);
    let mut roles: Vec<usize> = errs.iter().map(|(r, _)| *r).collect();
    roles.dedup();
    Err(Failed {
        members: roles,
        kind,
        error: Box::new(errs.swap_remove(0).1),
        log: false,
    })
}

/// `op` as a request straight to its member's file, or its buffer back
/// when it must go through the volume: the member is no file; the range
/// lies (partly) outside it or the file is read-only (the volume then
/// refuses with its own error); a direct member's range is not whole blocks
/// (the volume reads and writes its edge blocks under their locks).
fn straight<'m, 'b>(
    vol: &'m Arc<dyn Volume>,
    op: &MemberOp,
    data: Data<'b>,
) -> Result<(Request<'b>, Option<&'m dyn RawObserver>), Data<'b>> {
    let Some(raw) = vol.raw_file() else {
        return Err(data);
    };
    let fits = op
        .offset
        .checked_add(op.length)
        .is_some_and(|end| end <= raw.size);
    let whole = raw.direct.map_or(true, |(block, _)| {
        op.offset % block == 0 && op.length % block == 0
    });
    let mem_align = raw.direct.map_or(1, |(_, m)| m);
    let ok = match (&data, op.kind) {
        (Data::Read(b), IoKind::Read) => fits && whole && b.len() as u64 == op.length,
        (Data::Write(b), IoKind::Write) => {
            fits && whole && raw.writable && b.len() as u64 == op.length
        }
        // A read-only member's flush does nothing; its volume says so.
        (Data::Bare, IoKind::Flush) => raw.writable,
        _ => false,
    };
    if !ok {
        return Err(data);
    }
    let work = match data {
        Data::Read(b) => Work::Read(b),
        Data::Write(b) => Work::Write(b),
        Data::Bare => Work::Flush,
    };
    Ok((
        Request {
            // The descriptor stays open while `vol` lives, which is past
            // the step: `members` holds it.
            fd: raw.fd.as_raw_fd(),
            offset: raw.base + op.offset,
            work,
            mem_align,
        },
        raw.observer,
    ))
}
