//! The mirror family's reads and writes (RAID 1 and 10): one copy read, every
//! copy written, per run of copies (`Geometry::mirror_map`).
//! Pure, as the planner is: no I/O, no locks, no clocks.

use super::*;

impl Builder {
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
