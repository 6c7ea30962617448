//! What the metadata 0.90 reshape tests through mdadm's backup file share
//! (`reshape090_backup`, `reshape090_shrink`, `reshape090_grow_backup`):
//! the member devices, a filled 0.90 array, the backup file in memory, the
//! array read whole, a stopped reshape's read refused without its file
//! (md's rule) and read with it put back.
#![allow(dead_code)] // each test binary uses its own part

use raidlab_core::Volume;
use raidlab_devices::fault::FaultVolume;
use raidlab_devices::MemVolume;
use raidlab_layout::{Layout, Level};
use raidlab_md::MetadataVersion;
use raidlab_raid::assemble::{create_with_metadata, Assembly, CreateSpec, Device, NewMember};
use raidlab_raid::grow::{BackupFile, ReshapePlan};
use std::sync::Arc;

pub const MIB: u64 = 1 << 20;
pub const CHUNK: u64 = 64 << 10;

pub type Fault = Arc<FaultVolume<Arc<dyn Volume>>>;

pub fn pattern(len: u64, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| ((i ^ seed).wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// A filled 0.90 array over `devs` (its pattern drawn from `seed`); its
/// bytes.
pub fn fill(level: Level, devs: &[Device], seed: u64) -> Vec<u8> {
    let spec = CreateSpec {
        level,
        layout: Layout::parse(level, None).unwrap(),
        chunk_bytes: CHUNK,
        spares: 0,
        name: String::new(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: false,
    };
    let members = devs
        .iter()
        .map(|d| NewMember {
            device: d.clone(),
            zeroed: true,
        })
        .collect();
    let asm = create_with_metadata(&spec, members, None, MetadataVersion::V0_90).unwrap();
    let data = pattern(asm.geometry.array_bytes(), devs.len() as u64 * seed);
    let array = asm.array().unwrap();
    array.write_at(&data, 0).unwrap();
    array.flush().unwrap();
    data
}

pub fn mem_devices(n: usize, size: u64) -> Vec<Device> {
    (0..n)
        .map(|i| Device {
            path: format!("m{i}"),
            volume: Arc::new(MemVolume::new(size)),
        })
        .collect()
}

/// Members and the backup file with volatile caches, all on one tripwire.
pub fn fault_devices(n: usize, size: u64) -> (Vec<Device>, Vec<Fault>) {
    let mut devs = Vec::new();
    let mut faults = Vec::new();
    for i in 0..n {
        let inner: Arc<dyn Volume> = Arc::new(MemVolume::new(size));
        let f = Arc::new(FaultVolume::with_volatile_cache(inner));
        faults.push(f.clone());
        devs.push(Device {
            path: format!("m{i}"),
            volume: f,
        });
    }
    (devs, faults)
}

pub fn mem_file(plan: &ReshapePlan) -> Arc<MemVolume> {
    Arc::new(MemVolume::new(Assembly::backup_file_sectors(plan) * 512))
}

pub fn read_all(devs: &[Device]) -> Vec<u8> {
    read_whole(&Assembly::assemble(devs.to_vec()).unwrap())
}

fn read_whole(asm: &Assembly) -> Vec<u8> {
    let array = asm.array().unwrap();
    let mut got = vec![0u8; array.size() as usize];
    array.read_at(&mut got, 0).unwrap();
    got
}

/// Every member's bytes.
pub fn snapshot(devs: &[Device]) -> Vec<Vec<u8>> {
    devs.iter()
        .map(|d| {
            let mut b = vec![0u8; d.volume.size() as usize];
            d.volume.read_at(&mut b, 0).unwrap();
            b
        })
        .collect()
}

/// The array of `devs`, stopped mid-reshape, read without its backup
/// file: refused with md's reason and what to give, no member byte
/// changed. The message.
pub fn read_refused(devs: &[Device]) -> String {
    let before = snapshot(devs);
    let asm = Assembly::assemble(devs.to_vec()).unwrap();
    let e = match asm.array() {
        Ok(_) => panic!("a stopped 0.90 reshape was read without its backup file"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("--backup-file FILE") && e.contains("nothing was changed"),
        "{e}"
    );
    drop(asm);
    assert!(snapshot(devs) == before, "a refused read wrote: {e}");
    e
}

/// The array of `devs`, stopped mid-reshape, read whole once `file` is put
/// back (as `mdadm --assemble --backup-file`: this writes the members).
pub fn read_all_with(devs: &[Device], file: &BackupFile) -> Vec<u8> {
    let mut asm = Assembly::assemble(devs.to_vec()).unwrap();
    asm.reshape_put_back(file)
        .unwrap_or_else(|e| panic!("put back: {e}"));
    read_whole(&asm)
}

/// Run `work` with every device of `faults` behind one tripwire at member
/// write `at`; when it tripped (the power went there), each device loses
/// what its volatile cache held (drawn from `seed`) and comes back.
/// Whether the cut came.
pub fn cut_at(faults: &[Fault], at: u64, seed: u64, work: &mut dyn FnMut()) -> bool {
    let wire = raidlab_devices::fault::Tripwire::new(at);
    for f in faults {
        f.set_tripwire(Some(wire.clone()));
    }
    work();
    let tripped = wire.tripped();
    for (i, f) in faults.iter().enumerate() {
        f.set_tripwire(None);
        if tripped {
            f.power_cut(seed ^ (i as u64) << 32).unwrap();
            f.restart();
        }
    }
    tripped
}
