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
    fill_with(level, devs, seed, false)
}

/// [`fill`], with md's internal bitmap of 64 KiB chunks when `bitmap`
/// (stopped clean: no bit set).
pub fn fill_with(level: Level, devs: &[Device], seed: u64, bitmap: bool) -> Vec<u8> {
    let spec = CreateSpec {
        level,
        layout: Layout::parse(level, None).unwrap(),
        chunk_bytes: CHUNK,
        spares: 0,
        name: String::new(),
        force: false,
        bitmap,
        bitmap_chunk: bitmap.then_some(64 << 10),
        ppl: false,
    };
    let members = devs
        .iter()
        .map(|d| NewMember {
            device: d.clone(),
            zeroed: true,
        })
        .collect();
    let mut asm = create_with_metadata(&spec, members, None, MetadataVersion::V0_90).unwrap();
    let data = pattern(asm.geometry.array_bytes(), devs.len() as u64 * seed);
    let array = asm.array().unwrap();
    array.write_at(&data, 0).unwrap();
    array.flush().unwrap();
    if bitmap {
        asm.absorb_bitmap(&array);
        asm.mark_clean(true).unwrap();
    }
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
    power_back(faults, tripped, seed);
    tripped
}

/// Each device of `faults` off its tripwire; when it `tripped`, each loses
/// what its volatile cache held (drawn from `seed`) and comes back.
pub fn power_back(faults: &[Fault], tripped: bool, seed: u64) {
    for (i, f) in faults.iter().enumerate() {
        f.set_tripwire(None);
        if tripped {
            f.power_cut(seed ^ (i as u64) << 32).unwrap();
            f.restart();
        }
    }
}

/// Assembled after a cut and, when it is still mid-reshape, carried on
/// offline through `file`, as `raidlab grow --continue --backup-file`.
/// `w` names the cut in messages.
pub fn resume_with_backup(devs: &[Device], file: &BackupFile, w: u64) {
    let mut again = Assembly::assemble(devs.to_vec()).unwrap();
    if again.reshape().is_some() {
        again
            .reshape_run_with_backup(
                file,
                raidlab_raid::recovery::RunOptions::default(),
                &mut |_| {},
            )
            .unwrap_or_else(|e| panic!("cut at write {w}: resume: {e}"));
    }
}

/// After a served reshape cut by a power failure and finished: the array
/// reads back as `data` (the array's bytes before, grown with zeros to the
/// new size by the caller) with every page a client had flushed (`acked`,
/// array byte and page) in place, and each sector of a page written but not
/// flushed at the cut (`unsure`) old or new; the reshape is done, and
/// unless a client's write was cut (md's write hole) the parity is clean.
/// `w` names the cut in messages.
pub fn judge_served_cut(
    devs: &[Device],
    mut data: Vec<u8>,
    acked: &[(u64, Vec<u8>)],
    unsure: &[(u64, Vec<u8>)],
    w: u64,
) {
    for (at, page) in acked {
        data[*at as usize..*at as usize + 4096].copy_from_slice(page);
    }
    let got = read_all(devs);
    assert_eq!(got.len(), data.len(), "cut at write {w}");
    for (at, page) in unsure {
        let r = *at as usize..*at as usize + 4096;
        // Unflushed at the cut: each sector old or new (a power cut keeps
        // whole sectors only).
        for s in (0..4096).step_by(512) {
            let (g, o) = (&got[r.start + s..][..512], &data[r.start + s..][..512]);
            assert!(
                g == o || g == &page[s..s + 512],
                "cut at write {w}: a sector of the page written at the cut is neither old nor new"
            );
        }
        data[r.clone()].copy_from_slice(&got[r]);
    }
    let bad = (0..data.len() / 4096).find(|&p| got[p * 4096..][..4096] != data[p * 4096..][..4096]);
    assert!(
        bad.is_none(),
        "cut at write {w}: page {bad:?} differs ({} flushed client pages)",
        acked.len()
    );
    let mut again = Assembly::assemble(devs.to_vec()).unwrap();
    assert!(
        again.reshape().is_none(),
        "cut at write {w}: still mid-reshape"
    );
    // A cut inside a client's partial-stripe write leaves its stripe's
    // parity behind (md's write hole, resynced after an unclean stop);
    // every other cut is the walk's own, which leaves none.
    if unsure.is_empty() {
        let report = again
            .scrub(
                false,
                raidlab_raid::recovery::RunOptions::default(),
                &mut |_| {},
            )
            .unwrap();
        assert_eq!(report.mismatch_sectors, 0, "cut at write {w}");
    }
}
