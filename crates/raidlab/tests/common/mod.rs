//! Helpers shared by the CLI's integration tests.
#![allow(dead_code)]

/// A crash in the middle of a logged write, made on raidlab's members with its
/// own engine: the array is opened (logs started, superblocks marked active), `data` is written at `at`, then the power goes: the partial parity log
/// was already durable, the data member keeps its write and the parity member
/// loses its parity update. Parity is now stale for those rows; only a replay
/// of the log makes it right again.
pub fn ppl_crash(members: &[String], at: u64, data: &[u8]) -> Result<(), String> {
    use raidlab_core::Volume;
    use raidlab_devices::{FaultVolume, FileVolume, OpenMode, PowerCutPolicy};
    use raidlab_raid::assemble::{Assembly, Device};
    use std::path::Path;
    use std::sync::Arc;
    let err = |what: &str, e: &dyn std::fmt::Display| format!("pplcrash: {what}: {e}");
    let mut faults = Vec::new();
    for m in members {
        let f = FileVolume::open(Path::new(m), OpenMode::ReadWrite).map_err(|e| err("open", &e))?;
        faults.push(Arc::new(FaultVolume::with_volatile_cache(f)));
    }
    let devices = faults
        .iter()
        .zip(members)
        .map(|(f, m)| Device {
            path: m.clone(),
            volume: f.clone(),
        })
        .collect();
    let mut asm = Assembly::assemble(devices).map_err(|e| err("assemble", &e))?;
    asm.start_ppl().map_err(|e| err("start the logs", &e))?;
    asm.mark_dirty().map_err(|e| err("mark dirty", &e))?;
    let array = asm.array().map_err(|e| err("array", &e))?;
    if !array.has_ppl() {
        return Err("pplcrash: the array does not keep a partial parity log".into());
    }
    array.write_at(data, at).map_err(|e| err("write", &e))?;
    let g = asm.geometry;
    let stripe = at / (g.chunk_bytes * g.data_disks() as u64);
    let parity = g.stripe(stripe).p;
    for (role, f) in faults.iter().enumerate() {
        let policy = if role == parity {
            PowerCutPolicy::DropAll
        } else {
            PowerCutPolicy::KeepAll
        };
        f.power_cut_with(policy).map_err(|e| err("power cut", &e))?;
    }
    drop(array);
    drop(asm);
    Ok(())
}
