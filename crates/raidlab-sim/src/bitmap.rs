//! md's internal write-intent bitmap on a simulated array: the members carry
//! an md 1.2 superblock and bitmap (built by raidlab-md as `mdadm --create
//! --bitmap=internal` would), the engine marks chunks dirty and plans the
//! bitmap writes before a write reaches the members (`Array::with_intent`,
//! its `note_intent`), and the engine's bitmap daemon
//! (`raidlab_raid::bitmap_daemon`) clears the bits of chunks nobody has
//! written for two of its passes and writes the bitmap back.
//!
//! The daemon's loop (`Array::bitmap_daemon_thread`) runs as a task on the
//! virtual clock (`crate::array::TaskArray`).
//!
//! Decides: the superblocks and bitmap the simulated members start with (a
//! clean array: no bit set). It never decides which chunks a write holds,
//! which bits a pass clears, what is written for them or when (the
//! engine's), and never reads the wall clock.

use crate::array::DATA_OFFSET;
use raidlab_core::Volume;
use raidlab_devices::SizeOnly;
use raidlab_layout::{Geometry, Level};
use raidlab_md::bitmap::{new_internal, Bitmap};
use raidlab_md::superblock::{new_member, NewArray};
use raidlab_md::Superblock;
use std::sync::Arc;

/// The engine's view of the members' bitmap copies: what
/// `Array::with_intent` takes.
pub type IntentDevices = Vec<(usize, Arc<dyn Volume>, Superblock)>;

/// Superblocks and a clean bitmap for the members of `g` that are present,
/// as `mdadm --create --bitmap=internal --bitmap-chunk=CHUNK` lays them
/// out (with the simulator's 1 MiB data offset); `chunk` `None` takes
/// mdadm's choice for the member size. Also the bitmap chunk, in bytes.
pub fn build(
    name: &str,
    g: &Geometry,
    capacities: &[Option<u64>],
    chunk: Option<u64>,
) -> Result<(Bitmap, IntentDevices, u64), String> {
    if g.level == Level::Raid0 {
        return Err("a bitmap needs redundancy: RAID 0 has none (md refuses one there)".into());
    }
    let chunk = match chunk {
        Some(c) => Some(u32::try_from(c).map_err(|_| {
            format!("bitmap chunk {c} bytes is too large (md's is a 32-bit byte count)")
        })?),
        None => None,
    };
    let array = NewArray {
        uuid: [0x5a; 16],
        name: name.chars().take(31).collect(),
        level: g.level.md_level(),
        layout: g.md_layout(),
        chunk_sectors: g.md_chunk_sectors(),
        raid_disks: g.raid_disks as u32,
        member_sectors: g.member_bytes / 512,
        data_offset_sectors: DATA_OFFSET / 512,
        total_devices: g.raid_disks as u32,
        clean: true,
    };
    let mut devices: IntentDevices = Vec::new();
    let mut bitmap: Option<Bitmap> = None;
    for (role, cap) in capacities.iter().enumerate() {
        let Some(cap) = *cap else { continue };
        let mut sb = new_member(
            &array,
            role as u32,
            role as u16,
            [role as u8; 16],
            cap / 512,
            0,
        );
        let bm = new_internal(&mut sb, chunk).map_err(|e| format!("bitmap: {e}"))?;
        bitmap.get_or_insert(bm);
        let dev = Arc::new(SizeOnly::new(format!("{name} member {role} (whole)"), cap));
        devices.push((role, dev as Arc<dyn Volume>, sb));
    }
    let mut bitmap = bitmap.ok_or("a bitmap needs at least one member in service")?;
    // md clears a new bitmap when it starts an array that is in sync.
    bitmap.clear_all();
    let chunk_bytes = bitmap.sb.chunk_sectors() * 512;
    Ok((bitmap, devices, chunk_bytes))
}
