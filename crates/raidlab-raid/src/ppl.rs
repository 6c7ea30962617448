//! md's partial parity log (PPL) at work: closing RAID 5's write hole.
//!
//! Before a stripe is written, the partial parity of the rows the write modifies
//! (the XOR of the data chunks it leaves alone) goes to a log on that stripe's
//! parity member and is made durable. After an unclean stop, parity for those
//! rows is recomputed as partial parity XOR whatever the modified chunks hold
//! now, which is consistent with the data whichever of the stripe's writes
//! reached the media. So a crash on a degraded array cannot corrupt data that
//! was not being written, and a crash on a complete array needs no resync.
//!
//! The on-disk format is md's (`raidlab_md::ppl`); this module keeps the logs
//! and replays them. Each member's log holds one log write at a time, at the
//! start of its area; before a member's log is overwritten, the writes the
//! previous log write covered are flushed, so a log is only ever replaced once
//! its stripes are safely on the media. Writes whose parity lives on the same
//! member are therefore serialised; different parity members log in parallel.
//!
//! This module must never write a log entry whose partial parity does not match
//! the write it covers, and never replay an entry whose checksum fails.

use crate::exec::UserBuf;
use crate::exec::{Executor, Failed};
use crate::metadata_plan::{DeviceRunner, DeviceWrites};
use crate::plan::{Compute, LogEntry, MemberOp, Plan, Slice, Step};
use crate::replay::ReplayTarget;
use raidlab_core::task::{Mutex, MutexGuard};
use raidlab_core::IoKind;
use raidlab_core::{Error, ErrorKind, Op, Result, Volume};
use raidlab_md::ppl::{self, PplEntry, PplHeader};
use raidlab_md::Superblock;
use serde::Serialize;
use std::sync::Arc;

const SECTOR: u64 = 512;

/// The logs of a running RAID 5 array, one per member role; a role without a
/// member has no log device until one is attached (a rebuild target).
pub struct PartialParityLog {
    signature: u32,
    /// Bytes of partial parity one log write carries on every member.
    pp_room: u64,
    logs: Vec<Mutex<LogState>>,
}

/// Where a member's log lives.
struct LogDevice {
    /// The whole member device (the log sits beside the superblock).
    device: Arc<dyn Volume>,
    sb: Superblock,
    /// Bytes of one log write that fit in the area (header and partial parity).
    room: u64,
}

/// A member's log: its device, and what its last log write covered.
#[derive(Default)]
pub(crate) struct LogState {
    dev: Option<LogDevice>,
    /// A second log every log write of the role also goes to: the member
    /// replacing this one, so that whichever of the two the superblocks name
    /// after a crash has the role's last log write.
    /// Dropped when a write to it fails: the replacement cannot take over.
    copy: Option<LogDevice>,
    generation: u64,
    /// Roles written under the current log write and not flushed since.
    unflushed: Vec<usize>,
}

impl std::fmt::Debug for PartialParityLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let members = self.logs.iter().filter(|l| l.lock().dev.is_some()).count();
        f.debug_struct("PartialParityLog")
            .field("signature", &self.signature)
            .field("members", &members)
            .finish()
    }
}

/// The log device for `device`, whose superblock must have a PPL area.
fn log_device(device: Arc<dyn Volume>, sb: Superblock) -> Result<LogDevice> {
    let (_, len) = ppl::ppl_area(&sb)
        .map_err(|e| e.on_device(device.name()))?
        .ok_or_else(|| {
            Error::invalid("the superblock has no PPL area (feature_map lacks PPL)")
                .on_device(device.name())
        })?;
    Ok(LogDevice {
        room: ppl::usable_sectors(len / SECTOR) * SECTOR,
        device,
        sb,
    })
}

/// The log guards one write holds, by role, in role order.
pub(crate) type Held<'a> = Vec<(usize, MutexGuard<'a, LogState>)>;

impl PartialParityLog {
    /// Logs on `members` (by role; `None` for a missing one): the whole device and
    /// its superblock, which must have a PPL area.
    pub fn new(
        signature: u32,
        members: Vec<Option<(Arc<dyn Volume>, Superblock)>>,
    ) -> Result<PartialParityLog> {
        let devs = members
            .into_iter()
            .map(|m| m.map(|(device, sb)| log_device(device, sb)).transpose())
            .collect::<Result<Vec<_>>>()?;
        let pp_room = devs
            .iter()
            .flatten()
            .map(|l| l.room.saturating_sub(ppl::PPL_HEADER_SIZE as u64))
            .min()
            .unwrap_or(0);
        let logs = devs
            .into_iter()
            .map(|dev| {
                Mutex::new(LogState {
                    dev,
                    ..LogState::default()
                })
            })
            .collect();
        Ok(PartialParityLog {
            signature,
            pp_room,
            logs,
        })
    }

    /// Bytes of partial parity one log write can carry on every member.
    pub fn pp_room(&self) -> u64 {
        self.pp_room
    }

    /// Give `role` the log on `device` (a member being rebuilt into the role,
    /// which writes planned with the role present log to), started afresh as
    /// at array start (by `exec`, the array's executor). Refused if its area
    /// is smaller than the others'.
    pub fn attach(
        &self,
        exec: &dyn Executor,
        role: usize,
        device: Arc<dyn Volume>,
        sb: Superblock,
    ) -> Result<()> {
        let dev = self.fresh_log(exec, device, sb)?;
        let mut st = self.slot(role, &dev)?;
        *st = LogState {
            dev: Some(dev),
            ..LogState::default()
        };
        Ok(())
    }

    /// Have every log write of `role` go to the log on `device` as well (a
    /// member replacing the role's), started afresh (by `exec`).
    pub fn attach_copy(
        &self,
        exec: &dyn Executor,
        role: usize,
        device: Arc<dyn Volume>,
        sb: Superblock,
    ) -> Result<()> {
        let dev = self.fresh_log(exec, device, sb)?;
        let mut st = self.slot(role, &dev)?;
        if st.dev.is_none() {
            return Err(Error::invalid(format!(
                "internal: role {role} has no log to copy"
            )));
        }
        st.copy = Some(dev);
        Ok(())
    }

    /// Whether `role`'s log has a copy that took every log write since it
    /// was attached (a failed write drops the copy).
    pub fn copy_intact(&self, role: usize) -> bool {
        self.logs.get(role).is_some_and(|l| l.lock().copy.is_some())
    }

    /// The replacement takes over `role`: its log becomes the role's, and the
    /// old one stays the copy until [`PartialParityLog::drop_copy`] (once the
    /// superblocks name the replacement, a crash replays its log).
    pub fn promote_copy(&self, role: usize) {
        if let Some(l) = self.logs.get(role) {
            let mut st = l.lock();
            if st.copy.is_some() {
                let st = &mut *st;
                std::mem::swap(&mut st.dev, &mut st.copy);
            }
        }
    }

    /// Stop copying `role`'s log writes.
    pub fn drop_copy(&self, role: usize) {
        if let Some(l) = self.logs.get(role) {
            l.lock().copy = None;
        }
    }

    fn slot(&self, role: usize, dev: &LogDevice) -> Result<MutexGuard<'_, LogState>> {
        let slot = self.logs.get(role).ok_or_else(|| {
            Error::invalid(format!("internal: no role {role} for a log"))
                .on_device(dev.device.name())
        })?;
        Ok(slot.lock())
    }

    /// The log on `device`, its area written empty (by `exec`) as at array
    /// start.
    fn fresh_log(
        &self,
        exec: &dyn Executor,
        device: Arc<dyn Volume>,
        sb: Superblock,
    ) -> Result<LogDevice> {
        let dev = log_device(device, sb)?;
        let name = dev.device.name();
        if dev.room.saturating_sub(ppl::PPL_HEADER_SIZE as u64) < self.pp_room {
            return Err(Error::invalid(format!(
                "its partial parity log area holds {} bytes, less than the other members' {}",
                dev.room, self.pp_room
            ))
            .on_device(name));
        }
        let mut writes = DeviceWrites::default();
        writes
            .push_empty_ppl(0, &dev.sb)
            .map_err(|e| e.on_device(&name))?;
        writes.run(exec, &[Some(Arc::clone(&dev.device))])?;
        Ok(dev)
    }

    /// Take the logs `plan` writes to, in role order (so that two writes never
    /// wait on each other's logs crosswise).
    pub(crate) fn lock(&self, plan: &Plan) -> Held<'_> {
        let mut roles: Vec<usize> = plan
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Log(entries) => Some(entries),
                _ => None,
            })
            .flatten()
            .map(|e| e.member)
            .collect();
        roles.sort_unstable();
        roles.dedup();
        roles
            .into_iter()
            .filter_map(|r| {
                let log = self.logs.get(r)?;
                Some((r, log.lock()))
            })
            .collect()
    }

    /// Write `entries` to their members' logs, durably. Each log write replaces
    /// the member's previous one, so the writes that one covered are flushed first
    /// (`flush` flushes data members by role). `written` are the roles the plan
    /// goes on to write: the next log write on these members flushes them.
    ///
    /// The log writes of every parity member (and of a replacement's copy) are
    /// one plan in device space, carried out by `run` on the table of log
    /// devices it is given: all writes, then all flushes.
    pub(crate) fn write(
        &self,
        held: &mut Held<'_>,
        entries: &[(LogEntry, &[u8])],
        written: &[usize],
        flush: &dyn Fn(&[usize]) -> std::result::Result<(), Failed>,
        run: DeviceRunner<'_>,
    ) -> std::result::Result<(), Failed> {
        let mut unflushed: Vec<usize> = Vec::new();
        let mut writes = DeviceWrites::default();
        let mut table: Vec<Option<Arc<dyn Volume>>> = Vec::new();
        // Table index -> role, for the roles' own logs; the copies go in a
        // second plan, as losing one loses the replacement, not the write.
        let mut roles: Vec<usize> = Vec::new();
        let mut copies = DeviceWrites::default();
        let mut copy_table: Vec<Option<Arc<dyn Volume>>> = Vec::new();
        // Role -> its copy's index in `copy_table` (None: it does not fit).
        let mut copy_of: Vec<(usize, Option<usize>)> = Vec::new();
        for (role, state) in held.iter() {
            let role = *role;
            let mine: Vec<&(LogEntry, &[u8])> =
                entries.iter().filter(|(e, _)| e.member == role).collect();
            if mine.is_empty() {
                continue;
            }
            let Some(log) = state.dev.as_ref() else {
                return Err(log_failed(
                    role,
                    internal("a log entry for a member without a log"),
                ));
            };
            unflushed.extend_from_slice(&state.unflushed);
            let mut md_entries = Vec::with_capacity(mine.len());
            let mut pps = Vec::with_capacity(mine.len());
            for (e, pp) in &mine {
                let data_size = u32::try_from(e.data_size)
                    .map_err(|_| log_failed(role, internal("a log entry of 4 GiB or more")))?;
                let entry = PplEntry::for_write(e.data_offset / SECTOR, data_size, role as u32, pp)
                    .map_err(|err| log_failed(role, err))?;
                md_entries.push(entry);
                pps.push(*pp);
            }
            if md_entries.len() > ppl::PPL_HDR_MAX_ENTRIES {
                return Err(log_failed(
                    role,
                    internal("more log entries than a PPL header holds"),
                ));
            }
            let header = PplHeader {
                signature: self.signature,
                generation: state.generation + 1,
                entries: md_entries,
            };
            let bytes = header
                .encode_write(&pps)
                .map_err(|err| log_failed(role, err))?;
            if bytes.len() as u64 > log.room {
                return Err(log_failed(
                    role,
                    internal("a log write larger than the PPL area"),
                ));
            }
            let at = ppl::area_offset(&log.sb, 0, bytes.len())
                .map_err(|e| log_failed(role, e.on_device(log.device.name())))?;
            writes.push(table.len(), at, &bytes);
            table.push(Some(Arc::clone(&log.device)));
            roles.push(role);
            if let Some(c) = state.copy.as_ref() {
                let placed = ppl::area_offset(&c.sb, 0, bytes.len())
                    .ok()
                    .filter(|_| bytes.len() as u64 <= c.room)
                    .map(|at| {
                        copies.push(copy_table.len(), at, &bytes);
                        copy_table.push(Some(Arc::clone(&c.device)));
                        copy_table.len() - 1
                    });
                copy_of.push((role, placed));
            }
        }
        if writes.is_empty() {
            return Ok(());
        }
        unflushed.sort_unstable();
        unflushed.dedup();
        flush(&unflushed)?;
        for (_, state) in held.iter_mut() {
            state.unflushed.clear();
        }
        run(&writes, &table).map_err(|mut f| {
            f.members = f
                .members
                .iter()
                .filter_map(|&t| roles.get(t).copied())
                .collect();
            // A failed log flush is a failed log write.
            f.kind = IoKind::Write;
            f.log = true;
            f
        })?;
        // A copy that could not be placed or written loses the replacement,
        // not the write: the role's own log has it.
        let lost: Vec<usize> = match run(&copies, &copy_table) {
            Ok(()) => Vec::new(),
            Err(f) => f.members,
        };
        for (role, state) in held.iter_mut() {
            if !roles.contains(role) {
                continue;
            }
            if let Some((_, placed)) = copy_of.iter().find(|(r, _)| r == role) {
                if placed.map_or(true, |k| lost.contains(&k)) {
                    state.copy = None;
                }
            }
            state.generation += 1;
            state.unflushed = written.to_vec();
        }
        Ok(())
    }
}

fn internal(what: &str) -> Error {
    Error::new(ErrorKind::Invalid, Op::Write, format!("internal: {what}"))
}

fn log_failed(role: usize, error: Error) -> Failed {
    Failed {
        members: vec![role],
        kind: IoKind::Write,
        error: Box::new(error),
        log: true,
    }
}

/// What replaying the logs after an unclean stop did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PplReplay {
    /// Log entries whose stripes got parity recomputed.
    pub entries_replayed: usize,
    /// Entries (or whole logs) that did not check out and were skipped, as md
    /// counts them: a resync is then still needed.
    pub mismatches: usize,
    /// Parity bytes rewritten.
    pub parity_bytes: u64,
    /// Rows left alone because a data chunk they modified is on a missing member
    /// (the write was never acknowledged; nothing else depends on those rows).
    pub rows_skipped: u64,
}

/// Replay every member's newest log write onto `array` (running without logs),
/// the way md does when it starts an array that was not stopped cleanly. `logs`
/// are the present members' whole devices and superblocks, by role.
pub fn replay(
    array: &dyn ReplayTarget,
    logs: &[(usize, Arc<dyn Volume>, Superblock)],
    signature: u32,
) -> Result<PplReplay> {
    let mut report = PplReplay::default();
    for (role, device, sb) in logs {
        let Some(area) =
            ppl::read_area(device.as_ref(), sb).map_err(|e| e.on_device(device.name()))?
        else {
            continue;
        };
        let Some(scan) = ppl::scan(&area, signature) else {
            // md counts a log without a valid header as a mismatch.
            report.mismatches += 1;
            continue;
        };
        for e in &scan.entries {
            if !e.valid || e.entry.parity_disk as usize != *role {
                report.mismatches += 1;
                continue;
            }
            let start = e.pp_offset as usize;
            let pp = &area[start..start + e.entry.pp_size as usize];
            match replay_entry(array, *role, &e.entry, pp, &mut report) {
                Ok(true) => report.entries_replayed += 1,
                Ok(false) => report.mismatches += 1,
                Err(err) => return Err(err.on_device(device.name())),
            }
        }
    }
    Ok(report)
}

/// Recompute parity for the rows one entry covers, as md's recovery reads an
/// entry: the modified chunks are consecutive data chunks starting at the
/// entry's first sector. `Ok(false)` for an entry that does not fit the array
/// (skipped, counted as a mismatch).
fn replay_entry(
    array: &dyn ReplayTarget,
    role: usize,
    e: &PplEntry,
    pp: &[u8],
    report: &mut PplReplay,
) -> Result<bool> {
    let g = array.geometry();
    let chunk = g.chunk_bytes;
    let dd = g.data_disks() as u64;
    let first = e.data_sector.saturating_mul(SECTOR);
    let pp_size = u64::from(e.pp_size);
    let data_size = u64::from(e.data_size);
    let (disks, strip, last) = if pp_size < chunk {
        let (disks, strip) = if pp_size > 0 {
            if data_size % pp_size != 0 {
                return Ok(false);
            }
            (data_size / pp_size, pp_size)
        } else {
            if data_size % (dd * SECTOR) != 0 {
                return Ok(false);
            }
            (dd, data_size / dd)
        };
        if disks == 0 || disks > dd {
            return Ok(false);
        }
        (disks, strip, first + (disks - 1) * chunk + strip)
    } else {
        (dd, chunk, first + data_size)
    };
    if strip == 0 || strip > chunk || last > g.array_bytes() || first % chunk + strip > chunk {
        return Ok(false);
    }
    // The whole entry must lie in one stripe, on this member's parity.
    let stripe_bytes = chunk * dd;
    if first / stripe_bytes != (last - 1) / stripe_bytes || g.parity_location(first).1 != role {
        return Ok(false);
    }
    let block = if first % 4096 == 0 && last % 4096 == 0 {
        4096
    } else {
        SECTOR
    };
    // Each row of blocks is a plan: read the modified data blocks, XOR them
    // with the partial parity (the plan's user buffer), write the parity.
    let table: Vec<Option<Arc<dyn Volume>>> = (0..g.raid_disks).map(|r| array.member(r)).collect();
    let b = block as usize;
    let mut i = 0;
    while i < strip {
        let mut plan = Plan::default();
        let mut reads = Vec::with_capacity(disks as usize);
        let mut srcs = Vec::with_capacity(disks as usize + 1);
        let mut lost = false;
        for d in 0..disks {
            let r = first + i + d * chunk;
            if r >= last {
                continue;
            }
            let (member, _, moff) = g.parity_location(r);
            if !matches!(table.get(member), Some(Some(_))) {
                lost = true;
                break;
            }
            let id = plan.add_scratch(b);
            reads.push(MemberOp {
                kind: IoKind::Read,
                member,
                offset: moff,
                length: block,
                buf: Slice::scratch(id, b),
            });
            srcs.push(Slice::scratch(id, b));
        }
        if lost {
            report.rows_skipped += 1;
        } else if !reads.is_empty() {
            if pp_size > 0 {
                srcs.push(Slice::user(i as usize, b));
            }
            let (_, parity, moff) = g.parity_location(first + i);
            if !matches!(table.get(parity), Some(Some(_))) {
                return Err(Error::new(
                    ErrorKind::Unrecoverable,
                    Op::Write,
                    "the member holding this log is not in the array",
                ));
            }
            let out = plan.add_scratch(b);
            plan.steps = vec![
                Step::Io(reads),
                Step::Compute(vec![Compute::Xor { srcs, dst: out }]),
                Step::Io(vec![MemberOp {
                    kind: IoKind::Write,
                    member: parity,
                    offset: moff,
                    length: block,
                    buf: Slice::scratch(out, b),
                }]),
            ];
            array.executor().run(
                &plan,
                &table,
                raidlab_parity::selected(),
                UserBuf::Write(pp),
                crate::exec::Hooks::NONE,
            )?;
            report.parity_bytes += block;
        }
        i += block;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::plan_write_logged;
    use raidlab_layout::{Geometry, Layout, Level, ParityLayout};

    fn geo() -> Geometry {
        Geometry::new(
            Level::Raid5,
            Layout::Parity(ParityLayout::LeftSymmetric),
            16 << 10,
            4,
            1 << 20,
        )
        .unwrap()
    }

    fn log_entries(plan: &Plan) -> Vec<LogEntry> {
        plan.steps
            .iter()
            .filter_map(|s| match s {
                Step::Log(e) => Some(e.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    #[test]
    fn a_small_write_logs_its_rows_on_the_parity_member() {
        let g = geo();
        let plan = plan_write_logged(&g, &[true; 4], 4096, 8192).unwrap();
        let e = log_entries(&plan);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].member, g.stripe(0).p);
        assert_eq!(e[0].data_offset, 4096);
        assert_eq!(e[0].data_size, 8192);
        assert_eq!(e[0].pp.map(|s| s.len), Some(8192));
        // The log step sits between computing parity and writing it.
        let kinds: Vec<&str> = plan
            .steps
            .iter()
            .map(|s| match s {
                Step::Io(ops) if ops[0].kind == IoKind::Read => "read",
                Step::Io(_) => "write",
                Step::Compute(_) => "compute",
                Step::Log(_) => "log",
                Step::Keep(_) => "keep",
            })
            .collect();
        assert_eq!(kinds, ["read", "compute", "log", "write"]);
    }

    #[test]
    fn a_full_stripe_write_logs_without_partial_parity() {
        let g = geo();
        let plan = plan_write_logged(&g, &[true; 4], 0, 3 * (16 << 10)).unwrap();
        let e = log_entries(&plan);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].pp, None);
        assert_eq!(e[0].data_size, 3 * (16 << 10));
    }

    #[test]
    fn no_entry_for_a_stripe_whose_parity_member_is_missing() {
        let g = geo();
        let p = g.stripe(0).p;
        let mut present = [true; 4];
        present[p] = false;
        let plan = plan_write_logged(&g, &present, 0, 4096).unwrap();
        assert!(log_entries(&plan).is_empty());
    }

    #[test]
    fn a_write_across_chunks_logs_one_entry_per_segment() {
        let g = geo();
        // From the middle of data chunk 0 to the middle of chunk 1: rows [8K,16K)
        // modify chunk 0 only and rows [0,8K) chunk 1 only: two entries.
        let plan = plan_write_logged(&g, &[true; 4], 8 << 10, 16 << 10).unwrap();
        let mut e = log_entries(&plan);
        e.sort_by_key(|e| e.data_offset);
        assert_eq!(e.len(), 2);
        assert_eq!((e[0].data_offset, e[0].data_size), (8 << 10, 8 << 10));
        assert_eq!((e[1].data_offset, e[1].data_size), (16 << 10, 8 << 10));
    }

    #[test]
    fn unaligned_or_non_raid5_logged_plans_are_refused() {
        assert!(plan_write_logged(&geo(), &[true; 4], 100, 512).is_err());
        let g6 = Geometry::new(
            Level::Raid6,
            Layout::Parity(ParityLayout::LeftSymmetric),
            16 << 10,
            5,
            1 << 20,
        )
        .unwrap();
        assert!(plan_write_logged(&g6, &[true; 5], 0, 4096).is_err());
    }
}
