//! The array a served reshape run starts from: created on the rig's
//! members, filled with seeded data (flushed, the model of what it holds),
//! and for the sweep's kinds made ready for the change (room for a shrink,
//! the spares added) and the reshape recorded. It decides only the array
//! the run starts with; the checks and the start are the engine's.

use super::{Rig, Setup};
use crate::torture::model::Model;
use raidlab_core::Volume;
use raidlab_layout::Level;
use raidlab_raid::assemble::{create_with_executor, Assembly, CreateSpec, NewMember};
use raidlab_raid::grow::SizeRequest;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Create the array, fill it with seeded data (flushed), make room for a
/// shrink or add a grow's spare, and record the reshape asked: the array
/// and the model of what it holds, as the reshape starts.
pub(super) fn prepare(s: &Setup, rig: &Rig, seed: u64) -> Result<(Assembly, Model), String> {
    let mut asm = create(s, rig)?;
    let mut array_bytes = None;
    if s.shrink && s.level == Level::Raid10 {
        // What the fewer members hold, md's move of the data offset taken
        // out of the component size where there is no room after the data
        // (mdadm's RAID 10 shrink): the array cut to it, as a user follows
        // mdadm's refusal.
        array_bytes = Some(
            asm.raid10_shrink_holds(&s.req)
                .map_err(|e| format!("what the fewer members hold: {e}"))?,
        );
    } else if s.shrink {
        // Room after the data for md's move of the data offset up (a chunk
        // per member for one member fewer), then the array cut to what the
        // fewer members hold, as a user follows mdadm's refusal.
        let room = s.chunk * s.members as u64;
        let size = asm.geometry.member_bytes.saturating_sub(room) / s.chunk * s.chunk;
        asm.grow_size(SizeRequest::Bytes(size), true)
            .map_err(|e| format!("--size before the shrink: {e}"))?;
        let g = asm.geometry;
        array_bytes = Some((g.data_disks() - 1) as u64 * g.member_bytes);
    }
    let size = array_bytes.unwrap_or(asm.geometry.array_bytes()) as usize;
    let model = fill(&mut asm, size, seed)?;
    for k in s.members..s.members + s.spares {
        asm.add(rig.device(k), false)
            .map_err(|e| format!("add a spare: {e}"))?;
    }
    let plan = asm
        .reshape_check_sized(&s.req, 0, array_bytes)
        .map_err(|e| format!("reshape_check: {e}"))?;
    asm.reshape_start(plan)
        .map_err(|e| format!("reshape_start: {e}"))?;
    // The clients are about to write: the superblocks say so first, as a
    // served array's safe mode marks them before its first write, so that
    // a cut is seen as an unclean stop.
    asm.mark_dirty()
        .map_err(|e| format!("the dirty mark: {e}"))?;
    Ok((asm, model))
}

/// Create `s`'s array on the rig's first `s.members` members.
pub(super) fn create(s: &Setup, rig: &Rig) -> Result<Assembly, String> {
    let spec = CreateSpec {
        level: s.level,
        layout: s.layout,
        chunk_bytes: s.chunk,
        spares: 0,
        name: "served".into(),
        force: true,
        bitmap: s.bitmap,
        bitmap_chunk: s.bitmap.then_some(super::draw::BITMAP_CHUNK),
        ppl: false,
    };
    let new = (0..s.members)
        .map(|i| NewMember {
            device: rig.device(i),
            zeroed: true,
        })
        .collect();
    create_with_executor(&spec, new, None, s.metadata, rig.exec.clone())
        .map_err(|e| format!("create: {e}"))
}

/// Fill the array's first `size` bytes with data seeded by `seed`,
/// flushed: the model of what it holds.
///
/// An array with a bitmap is then stopped cleanly, as a user stops it
/// before the change: the engine's clean stop clears the fill's bits (md's
/// daemon would have, given time), so that what the clients mark, and only
/// that, is resynced after a cut, and a write that marks nothing shows.
/// Without a bitmap the stop would change nothing the run depends on (the
/// array is created clean), and leaving it out keeps those runs' draws.
pub(super) fn fill(asm: &mut Assembly, size: usize, seed: u64) -> Result<Model, String> {
    let mut model = Model::new(size);
    let a = asm.array().map_err(|e| format!("array: {e}"))?;
    let mut data = vec![0u8; size];
    ChaCha8Rng::seed_from_u64(seed).fill(&mut data[..]);
    a.write_at(&data, 0).map_err(|e| format!("fill: {e}"))?;
    a.flush().map_err(|e| format!("fill flush: {e}"))?;
    drop(a);
    model.write(&data, 0);
    model.flush();
    if asm.bitmap.is_some() {
        asm.mark_clean(true)
            .map_err(|e| format!("the clean stop after the fill: {e}"))?;
    }
    Ok(model)
}
