//! The bad-block lists of an assembly's members, read from their md logs for
//! the running array (`crate::badblocks` decides what to do with them).

use super::Assembly;
use crate::badblocks::BadBlocks;
use raidlab_core::Result;

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
                let log = raidlab_md::badblocks::read(m.device.volume.as_ref(), &m.sb)
                    .map_err(|e| e.on_device(m.device.path.clone()))?;
                Ok(log.map(|l| (m.sb.data_offset, l)))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(BadBlocks::from_md(&lists))
    }
}
