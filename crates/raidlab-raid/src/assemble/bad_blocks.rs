//! The bad-block lists of an assembly's members, read from their md logs for
//! the running array (`crate::badblocks` decides what to do with them), and
//! written back when raidlab has rewritten a listed range.
//!
//! md forgets a listed range once a write over it has succeeded (a rebuild, a
//! repair); raidlab does the same, so that sectors it made good are read from
//! the member again, by md too. It must never drop a range it did not write
//! (a unit of `2^bblog_shift` sectors only partly written stays listed), and
//! never write a log the superblock does not reserve.

use super::Assembly;
use crate::badblocks::BadBlocks;
use raidlab_core::{Error, ErrorKind, Result, Volume};
use raidlab_md::badblocks;
use raidlab_md::superblock::feature;
use std::sync::Arc;

const SECTOR: u64 = 512;

impl Assembly {
    /// The bad-block lists of the members in service, read from their logs
    /// (`None` when none lists anything).
    pub fn bad_blocks(&self) -> Result<Option<BadBlocks>> {
        let lists = self
            .slots
            .iter()
            .map(|s| {
                let Some(i) = *s else { return Ok(None) };
                let m = &self.members[i];
                let log = badblocks::read(m.device.volume.as_ref(), &m.sb)
                    .map_err(|e| e.on_device(m.device.path.clone()))?;
                Ok(log.map(|l| (m.sb.data_offset, l)))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(BadBlocks::from_md(&lists))
    }

    /// Which roles' members keep a bad-block log a range can be listed in
    /// (v1 superblocks with a log area; not 0.90).
    pub fn bad_block_logs(&self) -> Vec<bool> {
        self.slots
            .iter()
            .map(|s| {
                s.is_some_and(|i| {
                    let m = &self.members[i];
                    badblocks::area(&m.sb, m.device.volume.size()).is_ok_and(|a| a.is_some())
                })
            })
            .collect()
    }

    /// Member `index` has just had bytes `[start, start + len)` of its data
    /// area written successfully: drop those sectors from its bad-block log
    /// and write the log back (flushed). Only whole sectors inside the range
    /// count. When the list empties, the member's superblock loses its "bad
    /// blocks present" bit, written at once. Returns whether anything was
    /// dropped.
    pub fn clear_bad_blocks(&mut self, index: usize, start: u64, len: u64) -> Result<bool> {
        let first = start.div_ceil(SECTOR);
        let end = start.saturating_add(len) / SECTOR;
        if end <= first {
            return Ok(false);
        }
        let data_offset = self.members[index].sb.data_offset;
        let sector = data_offset.saturating_add(first);
        // What was written over the listed sectors must be durable before
        // the log forgets them (the device's cache may otherwise keep the
        // data and let the log through first).
        self.change_log(index, true, |list, shift| {
            badblocks::clear(list, shift, sector, end - first)
        })
        .map(|changed| changed == Some(true))
    }

    /// Member `index` could not be written at bytes `[start, start + len)`
    /// of its data area: list those sectors (widened to whole sectors and
    /// log units) in its bad-block log, and set the superblock's "bad blocks
    /// present" bit with the first entry, as md does before it lets a member
    /// with a failed write stay. `false` when the member keeps no log (md
    /// fails the member then); an error when the log is full.
    pub fn list_bad_blocks(&mut self, index: usize, start: u64, len: u64) -> Result<bool> {
        let first = start / SECTOR;
        let end = start.saturating_add(len).div_ceil(SECTOR);
        let sector = self.members[index].sb.data_offset.saturating_add(first);
        self.change_log(index, false, |list, shift| {
            badblocks::add(list, shift, sector, end.saturating_sub(first))
        })
        .map(|changed| changed.is_some())
    }

    /// Read member `index`'s log, change it with `f`, and write it back with
    /// the superblock's "bad blocks present" bit following whether anything
    /// is listed (one plan; the member flushed first when `flush_first`).
    /// `None` when the member keeps no log, else whether the list changed.
    fn change_log(
        &mut self,
        index: usize,
        flush_first: bool,
        f: impl FnOnce(&[badblocks::BadRange], u8) -> Vec<badblocks::BadRange>,
    ) -> Result<Option<bool>> {
        let exec = Arc::clone(&self.executor);
        let m = &mut self.members[index];
        let path = m.device.path.clone();
        let ctx = |e: Error| e.on_device(path.clone());
        let table = [Some(Arc::clone(&m.device.volume))];
        let dev_bytes = m.device.volume.size();
        let Some((log_at, log_len)) = badblocks::area(&m.sb, dev_bytes).map_err(ctx)? else {
            return Ok(None);
        };
        let raw = crate::metadata_plan::read_ranges(
            &*exec,
            &table,
            &[(0, log_at, log_len)],
            crate::plan::Space::Device,
        )
        .map_err(ctx)?;
        let list = badblocks::parse(&raw, m.sb.bblog_shift);
        let kept = f(&list, m.sb.bblog_shift);
        if kept == list {
            return Ok(Some(false));
        }
        if flush_first {
            crate::metadata_plan::flush_devices(&*exec, &table, [0]).map_err(ctx)?;
        }
        // The log, and the superblock when its flag changes, as one plan.
        let mut writes = crate::metadata_plan::DeviceWrites::default();
        let (at, bytes) = badblocks::placed(&m.sb, dev_bytes, &kept).map_err(ctx)?;
        writes.push(0, at, &bytes);
        let flag = m.sb.feature_map & feature::BAD_BLOCKS != 0;
        if kept.is_empty() == flag {
            // md clears "bad blocks present" with the last entry and sets it
            // with the first; this member's superblock says so now, not at
            // some later commit.
            m.sb.feature_map ^= feature::BAD_BLOCKS;
            let (at, bytes) = m.sb.placed(dev_bytes).map_err(ctx)?;
            writes.push(0, at, &bytes);
        }
        writes.run(&*exec, &table).map_err(ctx)?;
        Ok(Some(true))
    }

    /// A repair's step `[pos, pos + n)` of each member's data area left out
    /// roles in service (`areas`) that `present` drops for their listed
    /// ranges: rebuild each such range from the others, write it, and drop
    /// it from the log, as md's repair does. A range nothing can rebuild
    /// (too many members list it) stays listed and unwritten.
    pub(crate) fn rewrite_listed(
        &mut self,
        bad: Option<&BadBlocks>,
        areas: &[Option<Arc<dyn Volume>>],
        present: &[bool],
        pos: u64,
        n: u64,
    ) -> Result<()> {
        for role in (0..present.len()).filter(|&r| areas[r].is_some() && !present[r]) {
            self.rewrite_listed_role(bad, role, pos, n)?;
        }
        Ok(())
    }

    /// Rebuild bytes `[at, at + n)` of `role`'s data area from the other
    /// members (the others' copies, for a mirror), write them, and drop them
    /// from `role`'s log. Left listed and unwritten when nothing can rebuild
    /// them.
    pub(crate) fn rewrite_listed_role(
        &mut self,
        bad: Option<&BadBlocks>,
        role: usize,
        at: u64,
        n: u64,
    ) -> Result<()> {
        match self.repair_range(bad, role, at, n) {
            Ok(_) => {
                if let Some(i) = self.slots.get(role).copied().flatten() {
                    self.clear_bad_blocks(i, at, n)?;
                }
                Ok(())
            }
            Err(e) if e.kind == ErrorKind::Unrecoverable => Ok(()),
            Err(e) => Err(e),
        }
    }
}
