//! An array as a volume: plans each request, holds its stripe locks, executes it.

use crate::exec::{execute, Members, UserBuf};
use crate::locks::StripeLocks;
use crate::plan::Plan;
use crate::planner::{plan_read, plan_write};
use raidlab_core::{check_range, Error, ErrorKind, Op, Result, Volume};
use raidlab_layout::Geometry;
use raidlab_parity::Engine;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Requests larger than this are carried out in pieces, so that the scratch memory
/// of one plan stays bounded whatever the caller asks for.
const MAX_PIECE: u64 = 16 << 20;

/// A running array: geometry plus its member data areas by role.
pub struct Array {
    name: String,
    geometry: Geometry,
    members: Vec<Option<Arc<dyn Volume>>>,
    present: Vec<bool>,
    engine: &'static dyn Engine,
    locks: StripeLocks,
    next_mirror: AtomicUsize,
    piece: u64,
}

impl std::fmt::Debug for Array {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Array")
            .field("name", &self.name)
            .field("geometry", &self.geometry)
            .field("present", &self.present)
            .finish()
    }
}

impl Array {
    /// Build an array over member data areas (index = role; `None` = missing).
    /// Refuses members smaller than the geometry needs, or too many missing members.
    pub fn new(
        name: impl Into<String>,
        geometry: Geometry,
        members: Vec<Option<Arc<dyn Volume>>>,
    ) -> Result<Array> {
        let name = name.into();
        if members.len() != geometry.raid_disks {
            return Err(Error::invalid(format!(
                "{} members given for an array of {} raid devices",
                members.len(),
                geometry.raid_disks
            ))
            .on_device(name));
        }
        for m in members.iter().flatten() {
            if m.size() < geometry.member_bytes {
                return Err(Error::invalid(format!(
                    "member data area is {} bytes but the array needs {}",
                    m.size(),
                    geometry.member_bytes
                ))
                .on_device(m.name()));
            }
        }
        let present: Vec<bool> = members.iter().map(Option::is_some).collect();
        let missing: Vec<usize> = (0..present.len()).filter(|&i| !present[i]).collect();
        if !geometry.survives(&missing) {
            return Err(Error::new(
                ErrorKind::Unrecoverable,
                Op::Open,
                format!(
                    "too many members missing (roles {missing:?}): {} with {} raid devices cannot serve its data without them",
                    geometry.level.name(),
                    geometry.raid_disks
                ),
            )
            .on_device(name));
        }
        let stripe = if geometry.is_parity() {
            geometry.chunk_bytes * geometry.data_disks() as u64
        } else {
            geometry.chunk_bytes.max(4096) * geometry.raid_disks as u64
        };
        let piece = (MAX_PIECE / stripe).max(1) * stripe;
        Ok(Array {
            name,
            geometry,
            members,
            present,
            engine: raidlab_parity::selected(),
            locks: StripeLocks::default(),
            next_mirror: AtomicUsize::new(0),
            piece,
        })
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// Which member roles are present.
    pub fn present(&self) -> &[bool] {
        &self.present
    }

    /// The plan a read would follow (as `explain` shows it).
    pub fn plan_read(&self, offset: u64, len: u64) -> Result<Plan> {
        let hint = self.next_mirror.fetch_add(1, Ordering::Relaxed);
        plan_read(&self.geometry, &self.present, offset, len, hint)
    }

    pub fn plan_write(&self, offset: u64, len: u64) -> Result<Plan> {
        plan_write(&self.geometry, &self.present, offset, len)
    }

    fn members(&self) -> &Members {
        &self.members
    }

    /// Split `[offset, offset+len)` at multiples of the piece size.
    fn pieces(&self, offset: u64, len: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let end = offset + len;
        let mut pos = offset;
        std::iter::from_fn(move || {
            if pos >= end {
                return None;
            }
            let next = ((pos / self.piece) + 1) * self.piece;
            let n = next.min(end) - pos;
            let r = (pos, n);
            pos += n;
            Some(r)
        })
    }
}

impl Volume for Array {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn size(&self) -> u64 {
        self.geometry.array_bytes()
    }

    fn block_size(&self) -> u32 {
        4096
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        check_range(&self.name, Op::Read, self.size(), offset, buf.len() as u64)?;
        for (pos, n) in self.pieces(offset, buf.len() as u64) {
            let plan = self
                .plan_read(pos, n)
                .map_err(|e| e.on_device(&self.name))?;
            let _held = self.locks.lock(&plan.locks);
            let start = (pos - offset) as usize;
            let piece = &mut buf[start..start + n as usize];
            execute(&plan, self.members(), self.engine, UserBuf::Read(piece))?;
        }
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        check_range(&self.name, Op::Write, self.size(), offset, buf.len() as u64)?;
        for (pos, n) in self.pieces(offset, buf.len() as u64) {
            let plan = self
                .plan_write(pos, n)
                .map_err(|e| e.on_device(&self.name))?;
            let _held = self.locks.lock(&plan.locks);
            let start = (pos - offset) as usize;
            execute(
                &plan,
                self.members(),
                self.engine,
                UserBuf::Write(&buf[start..start + n as usize]),
            )?;
        }
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        for m in self.members.iter().flatten() {
            m.flush()?;
        }
        Ok(())
    }

    fn is_writable(&self) -> bool {
        self.members.iter().flatten().all(|m| m.is_writable())
    }
}
