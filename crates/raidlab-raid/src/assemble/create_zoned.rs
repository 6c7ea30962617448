//! Creating a linear array, or a RAID 0 whose members differ in size (md's
//! multi-zone RAID 0): each member keeps all its own space, and the
//! superblocks record what md needs to lay the zones out as raidlab does
//! (level, the RAID 0 layout word with md's RAID0_LAYOUT feature, each
//! member's data size). Like `create`, it checks everything before writing
//! one superblock per member, and never writes data.

use super::new_member::check_new_members;
use super::*;
use raidlab_layout::zones::{ZoneMap, MD_LEVEL_LINEAR, RAID0_ALTERNATE, RAID0_ORIGINAL};
use raidlab_md::superblock::feature;

/// What the user asked `create` for, for a zoned array.
#[derive(Debug, Clone)]
pub struct ZonedSpec {
    /// md's linear (members one after another) rather than RAID 0.
    pub linear: bool,
    /// RAID 0's chunk in bytes (ignored for linear, which md creates with
    /// no rounding).
    pub chunk_bytes: u64,
    /// RAID 0's layout word: [`RAID0_ORIGINAL`] or [`RAID0_ALTERNATE`].
    pub raid0_layout: u32,
    pub name: String,
    /// Accept members that already carry a superblock.
    pub force: bool,
}

/// Whether RAID 0 over `members` (chunk `chunk_bytes`, metadata `version`)
/// has members of different sizes in chunks: md then lays it out in zones,
/// and [`create_zoned`] is the one to create it.
pub fn raid0_sizes_differ(
    members: &[NewMember],
    chunk_bytes: u64,
    version: MetadataVersion,
) -> bool {
    let chunk_sectors = (chunk_bytes / SECTOR).max(1);
    let first = members.first().map_or(0, |m| m.device.volume.size());
    let data_offset =
        raidlab_md::mdadm_data_offset_for(version, first, (chunk_bytes / 1024) as u32);
    let mut chunks = members.iter().map(|m| {
        raidlab_md::default_member_sectors_for(
            version,
            m.device.volume.size(),
            data_offset,
            0,
            chunk_sectors as u32,
        ) / chunk_sectors
    });
    let first = chunks.next();
    chunks.any(|c| Some(c) != first)
}

/// Write superblocks that make `members` (in role order) a linear or
/// multi-zone RAID 0 array with metadata `version`, and return it assembled.
pub fn create_zoned(
    spec: &ZonedSpec,
    members: Vec<NewMember>,
    version: MetadataVersion,
) -> Result<Assembly> {
    let what = if spec.linear { "linear" } else { "raid0" };
    let min = if spec.linear { 1 } else { 2 };
    if members.len() < min {
        return Err(Error::invalid(format!(
            "{what} needs at least {min} member(s), {} given",
            members.len()
        )));
    }
    let limit = if version == MetadataVersion::V0_90 {
        raidlab_md::sb090::DISKS
    } else {
        raidlab_md::superblock::MAX_DEV_LIMIT as usize
    };
    if members.len() > limit {
        return Err(Error::invalid(format!(
            "metadata {version} records at most {limit} devices, {} given",
            members.len()
        )));
    }
    if !spec.linear && ![RAID0_ORIGINAL, RAID0_ALTERNATE].contains(&spec.raid0_layout) {
        return Err(Error::invalid(format!(
            "RAID 0 layout {} is not one md records: use original (1) or alternate (2)",
            spec.raid0_layout
        )));
    }
    let chunk = if spec.linear { 0 } else { spec.chunk_bytes };
    if !spec.linear && (chunk < 4096 || !chunk.is_power_of_two()) {
        return Err(Error::invalid(format!(
            "chunk size {chunk} is not a power of two of at least 4K"
        )));
    }
    check_new_members(&members, spec.force)?;
    let level = if spec.linear { MD_LEVEL_LINEAR } else { 0 };
    let chunk_sectors = (chunk / SECTOR) as u32;
    let first = members.first().map_or(0, |m| m.device.volume.size());
    let data_offset = raidlab_md::mdadm_data_offset_for(version, first, (chunk / 1024) as u32);
    // Each member's own space, as md sizes it (rounded to the chunk by md
    // itself, and by the zone map).
    let usable: Vec<u64> = members
        .iter()
        .map(|m| {
            raidlab_md::default_member_sectors_for(
                version,
                m.device.volume.size(),
                data_offset,
                level,
                chunk_sectors,
            )
        })
        .collect();
    for (m, &u) in members.iter().zip(&usable) {
        if u * SECTOR < chunk.max(4096) {
            return Err(Error::invalid(format!(
                "{} bytes is too small for a member: nothing is left for data after md's metadata (data offset {data_offset} bytes)",
                m.device.volume.size()
            ))
            .on_device(m.device.path.clone()));
        }
    }
    let layout = if spec.linear { 0 } else { spec.raid0_layout };
    // The map md will make of these sizes: refused here rather than by md.
    ZoneMap::from_md(level, layout, chunk_sectors, &usable)?;
    let array = NewArray {
        uuid: *uuid::Uuid::new_v4().as_bytes(),
        name: spec.name.clone(),
        level,
        layout,
        chunk_sectors,
        raid_disks: members.len() as u32,
        member_sectors: 0,
        data_offset_sectors: data_offset / SECTOR,
        total_devices: members.len() as u32,
        clean: true,
    };
    let now = now_secs();
    let mut writes = crate::metadata_plan::DeviceWrites::default();
    for (i, (m, &u)) in members.iter().zip(&usable).enumerate() {
        let ctx = |e: Error| e.on_device(m.device.path.clone());
        // Laid out for this member's size; `size` stays 0 as mdadm writes it
        // for linear and RAID 0 (md sizes them from each member's data size).
        let own = NewArray {
            member_sectors: u,
            ..array.clone()
        };
        let mut sb = raidlab_md::new_member_at(
            &own,
            version,
            i as u32,
            i as u16,
            *uuid::Uuid::new_v4().as_bytes(),
            m.device.volume.size() / SECTOR,
            now,
        );
        sb.size = 0;
        if !spec.linear && version != MetadataVersion::V0_90 {
            // md (since Linux 5.4) trusts a v1 RAID 0 layout only with this bit.
            sb.feature_map |= feature::RAID0_LAYOUT;
        }
        let (at, bytes) = sb.placed(m.device.volume.size()).map_err(ctx)?;
        writes.push(i, at, &bytes);
    }
    // The superblocks as one plan: written together, each device flushed once.
    let table: Vec<Option<Arc<dyn Volume>>> = members
        .iter()
        .map(|m| Some(Arc::clone(&m.device.volume)))
        .collect();
    // The new array's executor writes its superblocks and keeps its plans.
    let exec: Arc<dyn crate::exec::Executor> = Arc::new(crate::exec::ThreadPool::default());
    writes.run(exec.as_ref(), &table)?;
    Ok(Assembly::assemble(members.into_iter().map(|m| m.device).collect())?.with_executor(exec))
}
