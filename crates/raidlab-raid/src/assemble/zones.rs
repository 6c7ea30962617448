//! What an assembly of a linear or multi-zone RAID 0 array reports and runs:
//! its zone map (from the newest superblock and each role's data size), its
//! size, level name and rules (which family answers for it, a stopped
//! reshape's too), and its running array (a pass-through over a
//! `crate::zoned::ZonedVolume` that answers with linear's or multi-zone
//! RAID 0's rules). It decides nothing about placement: that is
//! `raidlab_layout::zones`.

use super::Assembly;
use crate::array::Array;
use crate::level::{self, Rules};
use crate::zoned::{is_zoned, ZonedVolume};
use raidlab_core::{Error, Result, SliceVolume, Volume};
use raidlab_layout::zones::{ZoneMap, MD_LEVEL_LINEAR};
use raidlab_md::Superblock;
use std::sync::Arc;

const SECTOR: u64 = 512;

impl Assembly {
    /// For a linear or multi-zone RAID 0 array: where its data lives, from the
    /// newest superblock's level, layout and chunk and each role's data size.
    /// `None` for every other array. An error when a role has no member (such
    /// an array cannot run without all of them) or the sizes do not make an
    /// array md would run.
    pub fn zone_map(&self) -> Option<Result<ZoneMap>> {
        let reference = self
            .members
            .iter()
            .map(|m| &m.sb)
            .max_by_key(|sb| sb.events)?;
        let sizes: Vec<Option<u64>> = self
            .slots
            .iter()
            .map(|s| s.map(|i| self.members[i].sb.data_size))
            .collect();
        let known: Vec<u64> = sizes.iter().flatten().copied().collect();
        if !is_zoned(reference, &known) {
            return None;
        }
        Some(zone_map_of(reference, &sizes))
    }

    /// The array's size in bytes: the reshape's while one is stopped, the
    /// zone map's for linear and multi-zone RAID 0, the geometry's for the
    /// rest (0 when the zones cannot be built).
    pub fn data_bytes(&self) -> u64 {
        if let Some(r) = self.reshape() {
            return r.map_or(0, |r| r.array_bytes());
        }
        match self.zone_map() {
            Some(z) => z.map_or(0, |z| z.array_bytes()),
            None => self.geometry.array_bytes(),
        }
    }

    /// md's level name ("linear", "raid0", ...).
    pub fn level_name(&self) -> &'static str {
        if self.is_linear() {
            "linear"
        } else {
            self.geometry.level.name()
        }
    }

    /// Whether md's superblocks record linear (level -1), which has no
    /// `Level` of its own: its geometry is a placeholder.
    fn is_linear(&self) -> bool {
        self.members.iter().any(|m| m.sb.level == MD_LEVEL_LINEAR)
    }

    /// What the array allows, as its running array answers: a recorded
    /// reshape's family, linear's or multi-zone RAID 0's entry for a zoned
    /// array (its geometry is a placeholder), the geometry's level's for
    /// the rest.
    pub fn rules(&self) -> &'static Rules {
        if self.reshape().is_some() {
            return &level::RESHAPE;
        }
        match self.zone_map() {
            Some(_) if self.is_linear() => &level::LINEAR,
            Some(_) => &level::MULTI_ZONE_RAID0,
            None => level::of(&self.geometry),
        }
    }

    /// The running array of a zoned assembly: a pass-through over the
    /// [`ZonedVolume`] of the members' data areas, with linear's or
    /// multi-zone RAID 0's rules.
    pub(crate) fn zoned_array(&self, zones: ZoneMap) -> Result<Array> {
        let areas = self
            .slots
            .iter()
            .enumerate()
            .map(|(role, s)| {
                let m = &self.members[s.ok_or_else(|| missing_role(role))?];
                let area = SliceVolume::new(
                    m.device.volume.clone(),
                    m.sb.data_offset * SECTOR,
                    zones.member_bytes[role],
                )
                .map_err(|e| e.on_device(m.device.path.clone()))?;
                Ok(Arc::new(area) as Arc<dyn Volume>)
            })
            .collect::<Result<Vec<_>>>()?;
        let label = if self.name.is_empty() {
            format!("array {}", super::format_uuid(&self.uuid))
        } else {
            format!("array {}", self.name)
        };
        let volume = ZonedVolume::new(label.clone(), zones, areas, Arc::clone(&self.executor))?;
        // Every request goes straight to the volume (on a thread pool of
        // its own: its one plan is the pass-through, and the volume's
        // member plans go to the assembly's executor).
        Array::pass_through(label, Arc::new(volume), self.rules())
    }
}

fn missing_role(role: usize) -> Error {
    Error::invalid(format!(
        "role {role} of this linear/RAID 0 array has no member: such an array keeps \
         no redundancy and needs every member; give the missing one"
    ))
}

fn zone_map_of(reference: &Superblock, sizes: &[Option<u64>]) -> Result<ZoneMap> {
    let sizes = sizes
        .iter()
        .enumerate()
        .map(|(role, s)| s.ok_or_else(|| missing_role(role)))
        .collect::<Result<Vec<u64>>>()?;
    // md (since Linux 5.4) trusts a v1 superblock's RAID 0 layout only with
    // the RAID0_LAYOUT feature bit; without it the layout is unrecorded.
    let recorded = reference.v0_90.is_some()
        || reference.feature_map & raidlab_md::superblock::feature::RAID0_LAYOUT != 0;
    let layout = if reference.level == 0 && !recorded {
        0
    } else {
        reference.layout
    };
    ZoneMap::from_md(reference.level, layout, reference.chunksize, &sizes)
}

/// Refuse a complete linear or multi-zone RAID 0 assembly whose sizes make no
/// array md would run (a member smaller than a chunk, an unrecorded layout
/// where the layouts differ). An incomplete one is left to the start checks,
/// which say which role is missing.
pub(crate) fn check_zones(asm: &Assembly) -> Result<()> {
    if asm.slots.iter().any(Option::is_none) {
        return Ok(());
    }
    match asm.zone_map() {
        Some(Err(e)) => Err(e),
        _ => Ok(()),
    }
}
