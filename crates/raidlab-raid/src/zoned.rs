//! Linear arrays and RAID 0 over members of different sizes (md's multi-zone
//! RAID 0), run as one volume: [`ZonedVolume`] sends every piece of a request to
//! the member and offset `raidlab_layout::zones` computes. What an assembly of
//! such an array reports (zones, size, level) is in `assemble::zones`, which
//! uses the superblock rules here.
//!
//! These levels keep no redundancy, so a plan is just the zone map's extents:
//! no parity, no mirror choice, no rebuild; each request's member I/O is one
//! plan step run by the executor like any other; a trim goes to the members
//! as md's linear and RAID 0 pass a discard down, each piece to the member it
//! lies on. The running `Array` of such an assembly is a pass-through over
//! the zoned volume (`Array::pass_through`, answering with linear's or
//! multi-zone RAID 0's rules: `level/striped.rs`), so every user of an
//! array (serve, export, import, bench) gets the same locking-free path and
//! the same start and stop. It must never place a byte by any rule but the
//! zone map's, and never touch a member outside its data area.

use crate::exec::{Executor, UserBuf};
use crate::level;
use crate::plan::{MemberOp, Plan, Slice, Step};
use raidlab_core::IoKind;
use raidlab_core::{check_range, Error, Result, Volume};
use raidlab_layout::zones::{ZoneMap, MD_LEVEL_LINEAR};
use raidlab_layout::{Geometry, Level};
use raidlab_md::Superblock;
use std::sync::Arc;

const SECTOR: u64 = 512;

/// Whether md sizes the array `sb` describes from each member's own data
/// size (`data_size`) rather than the array-wide `size` field: the level's
/// `Rules::sized_per_member` (RAID 0), asked by md's level number.
pub fn sized_per_member(sb: &Superblock) -> bool {
    Level::from_md(sb.level).is_ok_and(|l| level::rules(l).sized_per_member)
}

/// Whether a superblock describes an array whose members are laid out in
/// zones: linear, or RAID 0 whose members do not all hold the same number of
/// chunks. Equal-size RAID 0 stays with the striping engine.
pub fn is_zoned(reference: &Superblock, member_sectors: &[u64]) -> bool {
    if reference.level == MD_LEVEL_LINEAR {
        return true;
    }
    // md sizes only RAID 0 from each member's own data size; every other
    // level is one striping.
    if !sized_per_member(reference) {
        return false;
    }
    let chunk = u64::from(reference.chunksize.max(1));
    let mut rounded = member_sectors.iter().map(|s| s / chunk);
    match rounded.next() {
        Some(first) => rounded.any(|r| r != first),
        None => false,
    }
}

/// The geometry an assembly keeps for a linear array: its member count and
/// level-0 rules (every member needed), with the newest superblock's data
/// size (a multi-zone RAID 0 keeps the RAID 0 geometry of that size). The
/// array's true size and placement come from `Assembly::zone_map`, never
/// from this geometry's `array_bytes` (use `Assembly::data_bytes`). Plain
/// names, not links: a link's path to the assembly would read as this
/// module importing the one that imports it (tests/layering.rs).
pub fn placeholder_geometry(sb: &Superblock) -> Result<Geometry> {
    let chunk = (u64::from(sb.chunksize) * SECTOR).max(4096);
    let chunk = chunk.next_power_of_two();
    // At least one chunk per member so that the geometry validates; the real
    // sizes are checked by the zone map.
    Geometry::from_md(
        0,
        0,
        (chunk / SECTOR) as u32,
        sb.raid_disks.max(1),
        sb.data_size.max(chunk / SECTOR),
    )
}

/// A linear or multi-zone RAID 0 array over its members' data areas (by role).
pub struct ZonedVolume {
    name: String,
    zones: ZoneMap,
    members: Vec<Arc<dyn Volume>>,
    /// The members as the executor's table.
    table: Vec<Option<Arc<dyn Volume>>>,
    /// Carries out each request's plan (the assembly's executor).
    executor: Arc<dyn Executor>,
}

impl std::fmt::Debug for ZonedVolume {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZonedVolume")
            .field("name", &self.name)
            .field("zones", &self.zones)
            .finish()
    }
}

impl ZonedVolume {
    /// Refuses members too small for the bytes the map gives them. Plans
    /// run on `executor`.
    pub fn new(
        name: String,
        zones: ZoneMap,
        members: Vec<Arc<dyn Volume>>,
        executor: Arc<dyn Executor>,
    ) -> Result<Self> {
        if members.len() != zones.member_bytes.len() {
            return Err(Error::invalid(format!(
                "{name}: {} member areas for a map of {} members",
                members.len(),
                zones.member_bytes.len()
            )));
        }
        for (m, need) in members.iter().zip(&zones.member_bytes) {
            if m.size() < *need {
                return Err(Error::invalid(format!(
                    "{name}: member {} has {} bytes of data area but the array uses {need}: \
                     the image is truncated",
                    m.name(),
                    m.size()
                ))
                .on_device(m.name()));
            }
        }
        Ok(ZonedVolume {
            name,
            zones,
            table: members.iter().cloned().map(Some).collect(),
            members,
            executor,
        })
    }

    pub fn zones(&self) -> &ZoneMap {
        &self.zones
    }

    /// The plan of one request: a member operation per extent of the zone
    /// map, all in one step (a request spanning members runs on them at
    /// once), each at its range of the caller's buffer.
    fn plan(&self, kind: IoKind, offset: u64, len: u64) -> Result<Plan> {
        check_range(&self.name, kind.into(), self.size(), offset, len)?;
        let ops = self
            .zones
            .extents(offset, len)?
            .into_iter()
            .map(|e| MemberOp {
                kind,
                member: e.location.member,
                offset: e.location.offset,
                length: e.len,
                buf: if matches!(kind, IoKind::Zero | IoKind::Trim) {
                    Slice::user(0, 0)
                } else {
                    Slice::user(e.at as usize, e.len as usize)
                },
            })
            .collect();
        Ok(Plan {
            steps: vec![Step::Io(ops)],
            ..Plan::default()
        })
    }

    fn run(&self, plan: &Plan, user: UserBuf<'_>) -> Result<()> {
        self.executor
            .run(
                plan,
                &self.table,
                raidlab_parity::selected(),
                user,
                crate::exec::Hooks::NONE,
            )
            .map_err(|f| *f.error)
    }
}

impl Volume for ZonedVolume {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn size(&self) -> u64 {
        self.zones.array_bytes()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let plan = self.plan(IoKind::Read, offset, buf.len() as u64)?;
        self.run(&plan, UserBuf::Read(buf))
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let plan = self.plan(IoKind::Write, offset, buf.len() as u64)?;
        self.run(&plan, UserBuf::Write(buf))
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        let plan = self.plan(IoKind::Zero, offset, len)?;
        self.run(&plan, UserBuf::Write(&[]))
    }

    /// Each piece's trim to the member it lies on, as md's linear and RAID 0
    /// pass a discard down. No byte is kept twice, so nothing can disagree
    /// after one; what a trimmed range reads is the members' to say
    /// ([`Volume::discard_zeroes`]).
    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        let plan = self.plan(IoKind::Trim, offset, len)?;
        self.run(&plan, UserBuf::Write(&[]))
    }

    /// Zeros after a trim only where every member reads zeros after one.
    fn discard_zeroes(&self) -> bool {
        self.members.iter().all(|m| m.discard_zeroes())
    }

    fn flush(&self) -> Result<()> {
        self.run(&Plan::flushes(0..self.table.len()), UserBuf::Write(&[]))
    }

    fn preferred_io_size(&self) -> Option<u64> {
        match self.zones.kind {
            raidlab_layout::ZonedKind::Raid0 { chunk_bytes, .. } => Some(chunk_bytes),
            raidlab_layout::ZonedKind::Linear { .. } => None,
        }
    }

    fn is_writable(&self) -> bool {
        self.members.iter().all(|m| m.is_writable())
    }
}
