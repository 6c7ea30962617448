//! What a served reshape's array must read: after a cut, against the
//! model of what the clients were answered (with md's write hole allowed
//! where a member is gone); at the end, exactly; and the engine's refusal
//! to carry a reshape on with a member gone. It decides nothing of the
//! reshape and writes nothing to the array.

use super::Rig;
use crate::torture::model::{Model, SECTOR};
use raidlab_core::Volume;
use raidlab_raid::assemble::Assembly;

/// Read the array the assembly describes, the model's bytes and what lies
/// past them (a grow's new space once its end is committed).
pub(super) fn read_all(asm: &Assembly, model: &Model) -> Result<(Vec<u8>, Vec<u8>), String> {
    let a = asm.array().map_err(|e| format!("array: {e}"))?;
    // As a start reads an array stopped uncleanly, before its resync
    // (`lifecycle`): each mirrored block from its first copy, the copies of
    // a write in flight at a cut possibly apart (the sides of an array
    // mid-reshape read so by themselves).
    a.read_first_copy_only(!asm.in_sync());
    let size = a.size() as usize;
    if size < model.size() {
        return Err(format!(
            "the array is {size} bytes, the clients wrote up to {}",
            model.size()
        ));
    }
    let mut got = vec![0u8; model.size()];
    a.read_at(&mut got, 0).map_err(|e| format!("read: {e}"))?;
    let mut past = vec![0u8; size - model.size()];
    a.read_at(&mut past, model.size() as u64)
        .map_err(|e| format!("read past the old end: {e}"))?;
    Ok((got, past))
}

fn zeros_past(past: &[u8], from: usize, when: &str) -> Result<(), String> {
    match past.iter().position(|&b| b != 0) {
        Some(i) => Err(format!(
            "{when}: byte {} of the new space is not zero",
            from + i
        )),
        None => Ok(()),
    }
}

/// The sectors md's write hole may leave wrong once a member is gone:
/// every sector of a stripe, in the array's geometry or either of its
/// reshape's, that holds a `suspect` sector (written but not flushed at a
/// cut, not resynced since; a stripe's parity or second copy a cut left
/// behind its data gives the lost member's bytes wrong). Sorted, once each.
pub(super) fn write_hole(asm: &Assembly, size: usize, suspect: &[usize]) -> Vec<usize> {
    let mut widths: Vec<u64> = vec![asm.geometry.data_disks() as u64 * asm.geometry.chunk_bytes];
    if let Some(Ok(r)) = asm.reshape() {
        widths.push(r.old.data_disks() as u64 * r.old.chunk_bytes);
        widths.push(r.new.data_disks() as u64 * r.new.chunk_bytes);
    }
    let sectors = size.div_ceil(SECTOR);
    let mut out = Vec::new();
    for &sector in suspect {
        let at = (sector * SECTOR) as u64;
        for &w in &widths {
            let first = (at / w * w) as usize / SECTOR;
            let last = (((at / w + 1) * w) as usize).div_ceil(SECTOR).min(sectors);
            out.extend(first..last);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// After a cut: every sector holds what it held at the last flush answered
/// or something written since; then that is what the array holds. With a
/// member gone, the stripes of the `suspect` sectors (written but not
/// flushed at this cut or an earlier one, none resynced since) may read
/// anything: md's write hole, in either geometry (a stripe's parity a cut
/// left behind its data reconstructs the lost member wrong).
pub(super) fn judge_cut(
    asm: &Assembly,
    model: &mut Model,
    suspect: Option<&[usize]>,
    when: &str,
) -> Result<(), String> {
    if let Some(suspect) = suspect {
        for s in write_hole(asm, model.size(), suspect) {
            model.allow_any(s);
        }
    }
    let (got, past) = read_all(asm, model)?;
    if let Some((w, n)) = model.check_after_cut(&got) {
        return Err(format!("{when}: {}", w.describe(n)));
    }
    zeros_past(&past, model.size(), when)?;
    model.settle(got);
    Ok(())
}

/// At the end: every byte exactly as the answers wrote it.
pub(super) fn judge_exact(asm: &Assembly, model: &Model, when: &str) -> Result<(), String> {
    let (got, past) = read_all(asm, model)?;
    if let Some(i) = model.first_difference(&got, 0) {
        return Err(format!(
            "{when}: byte {i} reads {:#04x}, the answers wrote {:#04x}",
            got[i], model.current[i]
        ));
    }
    zeros_past(&past, model.size(), when)
}

/// A member died with the power: carrying the reshape on degraded is not
/// built, so the engine must refuse it, saying why, and the array still
/// reads as judged after the cut (again after the refusal).
pub(super) fn refuses_degraded(rig: &Rig, mut asm: Assembly, model: &Model) -> Result<(), String> {
    if asm.reshape().is_some() {
        match asm.reshape_served(false) {
            Ok(_) => return Err("a reshape carried on in service with a member gone".into()),
            Err(e) if !e.to_string().contains("missing") => {
                return Err(format!(
                    "the refusal with a member gone does not say so: {e}"
                ))
            }
            Err(_) => {}
        }
        let asm = rig.assemble()?;
        judge_exact(&asm, model, "after the refusal")?;
    }
    Ok(())
}
