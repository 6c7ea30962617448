//! The mirror family's reads and writes (RAID 1 and 10): one copy read, every
//! copy written, per run of copies (`Geometry::mirror_map`).
//! Pure, as the planner is: no I/O, no locks, no clocks.

use super::*;

impl Builder<'_> {
    pub(super) fn mirror_read(
        &mut self,
        geo: &Geometry,
        present: &[bool],
        offset: u64,
        len: u64,
        hint: usize,
    ) -> Result<()> {
        for (pos, n, locs) in geo.mirror_runs(offset, len) {
            let live: Vec<_> = locs.iter().filter(|l| present[l.member]).collect();
            let Some(loc) = (!live.is_empty()).then(|| live[hint % live.len()]) else {
                return Err(lost_error(geo, present, pos, n));
            };
            self.read(
                loc.member,
                loc.offset,
                Slice::user((pos - offset) as usize, n as usize),
            );
        }
        Ok(())
    }

    pub(super) fn mirror_write(
        &mut self,
        geo: &Geometry,
        present: &[bool],
        offset: u64,
        len: u64,
    ) -> Result<()> {
        let unit = if geo.chunk_bytes == 0 {
            RAID1_LOCK_UNIT
        } else {
            geo.chunk_bytes
        };
        for (pos, n, locs) in geo.mirror_runs(offset, len) {
            if !locs.iter().any(|l| present[l.member]) {
                return Err(lost_error(geo, present, pos, n));
            }
            for key in pos / unit..=(pos + n - 1) / unit {
                self.lock(key);
            }
            for loc in locs.iter().filter(|l| present[l.member]) {
                self.write(
                    loc.member,
                    loc.offset,
                    Slice::user((pos - offset) as usize, n as usize),
                );
            }
        }
        Ok(())
    }
}

/// The copies family's builders (RAID 1 and 10, and RAID 0 as one copy):
/// per run of copies (`Geometry::mirror_map`).
pub(crate) struct Copies;

impl Builders for Copies {
    fn read(
        &self,
        b: &mut Builder,
        geo: &Geometry,
        present: &[bool],
        offset: u64,
        len: u64,
        hint: usize,
    ) -> Result<()> {
        b.mirror_read(geo, present, offset, len, hint)
    }

    fn write(
        &self,
        b: &mut Builder,
        geo: &Geometry,
        present: &[bool],
        offset: u64,
        len: u64,
    ) -> Result<()> {
        b.mirror_write(geo, present, offset, len)
    }

    fn zero_unit(&self, _geo: &Geometry) -> Option<u64> {
        None
    }

    fn piece_unit(&self, geo: &Geometry) -> u64 {
        geo.chunk_bytes.max(4096) * geo.raid_disks as u64
    }

    fn member_range_keys(&self, geo: &Geometry, role: usize, at: u64, n: u64) -> Result<Vec<u64>> {
        mirror_recovery::member_range_keys(geo, role, at, n)
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
        mirror_recovery::rebuild_sources(plan, geo, live, role, at, n)
    }

    fn repair(
        &self,
        geo: &Geometry,
        live: &[bool],
        role: usize,
        pos: u64,
        n: u64,
    ) -> Result<(Plan, usize)> {
        mirror_recovery::repair(geo, live, role, pos, n)
    }

    fn scrub_total(&self, geo: &Geometry) -> u64 {
        geo.array_bytes()
    }

    fn scrub_step(
        &self,
        geo: &Geometry,
        present: &[bool],
        pos: u64,
        n: u64,
    ) -> Result<(Plan, usize)> {
        mirror_recovery::scrub_step(geo, present, pos, n)
    }

    fn keeps_rows(&self) -> bool {
        false
    }
}
