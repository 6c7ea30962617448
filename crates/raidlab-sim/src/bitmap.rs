//! md's internal write-intent bitmap on a simulated array: raidlab's own
//! create lays it out on the members (as `mdadm --create --bitmap=internal
//! --bitmap-chunk=CHUNK`, `crate::array`'s stack), the engine marks chunks
//! dirty and plans the bitmap writes before a write reaches the members
//! (`Array::with_intent`, its `note_intent`), and the engine's bitmap
//! daemon (`raidlab_raid::bitmap_daemon`) clears the bits of chunks nobody
//! has written for two of its passes and writes the bitmap back.
//!
//! The daemon's loop (`Array::bitmap_daemon_thread`) runs as a task on the
//! virtual clock (`crate::array::TaskArray`).
//!
//! Decides: which bitmap chunk a configuration asks create for, and refuses
//! one md would refuse before anything is made. It never lays a bitmap out
//! (create does), never decides which chunks a write holds, which bits a
//! pass clears, what is written for them or when (the engine's), and never
//! reads the wall clock.

use raidlab_layout::Level;

/// The bitmap chunk to create a `level` array with: `chunk` in bytes, or
/// `None` for mdadm's choice for the member size (as `CreateSpec` takes it).
pub fn create_chunk(level: Level, chunk: Option<u64>) -> Result<Option<u32>, String> {
    if level == Level::Raid0 {
        return Err("a bitmap needs redundancy: RAID 0 has none (md refuses one there)".into());
    }
    chunk
        .map(|c| {
            u32::try_from(c).map_err(|_| {
                format!("bitmap chunk {c} bytes is too large (md's is a 32-bit byte count)")
            })
        })
        .transpose()
}
