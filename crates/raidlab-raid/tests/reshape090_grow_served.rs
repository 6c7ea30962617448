//! A metadata 0.90 RAID 5 grown from 3 to 4 members (and a RAID 6 from 4
//! to 5) through mdadm's backup
//! file while a client uses the array (`Assembly::reshape_served_with_backup`
//! of an in-place grow): the critical section saved in the file, put back
//! in the new geometry and the position committed past it before any
//! client request, then the in-place walk through the gate. Between steps
//! the client writes and flushes a page in the critical section (the new
//! geometry) and one above the walk (the old). A power cut at every write of
//! the served run (members and file), then the offline resume from the
//! file: every flushed write reads back, the new space zeros, parity
//! clean.

mod md090;

use md090::*;
use raidlab_core::Volume;
use raidlab_devices::fault::{FaultVolume, Tripwire};
use raidlab_layout::Level;
use raidlab_raid::assemble::Assembly;
use raidlab_raid::grow::{BackupFile, ReshapeRequest};
use raidlab_raid::recovery::RunOptions;
use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;

/// Power cut at write `w` of a served start and walk, a client writing
/// between steps; then resumed offline and checked. Whether the cut came.
fn served_grow_cut_at(level: Level, n: usize, w: u64, seed: u64) -> bool {
    let (devs, faults) = fault_devices(n + 1, 2 * MIB);
    let mut data = fill(level, &devs[..n], 5);
    let mut asm = Assembly::assemble(devs[..n].to_vec()).unwrap();
    asm.add(devs[n].clone(), false).unwrap();
    let parity = if level == Level::Raid6 { 2 } else { 1 };
    let req = ReshapeRequest {
        raid_devices: Some(n + 1),
        ..ReshapeRequest::default()
    };
    let plan = asm
        .reshape_check_with_backup(&req, Path::new("/nonexistent-dir-h78/backup"))
        .unwrap();
    let inner: Arc<dyn Volume> = mem_file(&plan);
    let fvol = Arc::new(FaultVolume::with_volatile_cache(inner));
    let all: Vec<Fault> = faults.iter().cloned().chain([fvol.clone()]).collect();
    let file = BackupFile::on_volume("backup", fvol.clone());
    // The start is offline's (a cut inside its commit, which can tear a
    // 0.90 superblock, is `reshape090_grow_backup`'s); the cuts come in
    // what the served run adds: the put-back with requests held, the walk
    // beside the client, the end.
    asm.reshape_start_with_backup(plan, &file).unwrap();
    drop(asm);
    for f in &all {
        f.flush().unwrap();
    }
    let acked: RefCell<Vec<(u64, Vec<u8>)>> = RefCell::new(Vec::new());
    let unsure: RefCell<Vec<(u64, Vec<u8>)>> = RefCell::new(Vec::new());
    let wire = Tripwire::new(w);
    for f in &all {
        f.set_tripwire(Some(wire.clone()));
    }
    let work = || {
        let mut asm = Assembly::assemble(devs.clone()).unwrap();
        let Ok(mut walk) = asm.reshape_served_with_backup(false, &file) else {
            return;
        };
        let vol = walk.volume("a".into());
        let gate = walk.gate().clone();
        let total = vol.size();
        // Past the critical section, put back and checkpointed: below it
        // a write goes to the new geometry at once. (Bytes walked since
        // the last checkpoint make a write wait for the next one, which
        // this thread, the walk's, would never make.)
        let put_back = gate.position();
        assert!(put_back >= 4096, "the critical section was put back");
        let n = std::cell::Cell::new(0u64);
        let quit = || {
            let p = gate.position() / 4096 * 4096;
            let k = n.get();
            n.set(k + 1);
            let mut pages = vec![(k * 13 * 4096) % put_back / 4096 * 4096];
            if p + 8192 <= total {
                pages.push(p + 4096 + (k * 7 * 4096) % (total - p - 4096) / 4096 * 4096);
            }
            for at in pages {
                let page = vec![(k % 250) as u8 + 1; 4096];
                let done = vol.write_at(&page, at).and_then(|()| vol.flush());
                if done.is_err() || wire.tripped() {
                    unsure.borrow_mut().push((at, page));
                    return true;
                }
                acked.borrow_mut().push((at, page));
            }
            false
        };
        if walk.run(&mut asm, &RunOptions::default(), &quit).is_ok() {
            let _ = walk.end(&mut asm);
        }
    };
    work();
    let tripped = wire.tripped();
    if !tripped {
        eprintln!(
            "uncut: {} client pages flushed beside the walk",
            acked.borrow().len()
        );
        assert!(acked.borrow().len() >= 10, "the client barely wrote");
    }
    power_back(&all, tripped, seed);
    resume_with_backup(&devs, &file, w);
    // Grown: the new space reads zeros.
    data.resize(data.len() / (n - parity) * (n + 1 - parity), 0);
    judge_served_cut(&devs, data, &acked.borrow(), &unsure.borrow(), w);
    tripped
}

fn every_cut(level: Level, n: usize) {
    let (mut w, mut cuts) = (1, 0);
    while served_grow_cut_at(level, n, w, w * 6151) {
        cuts += 1;
        w += if w < 150 { 1 } else { 4 };
    }
    eprintln!("{level:?} of {n}: {cuts} runs cut (write {w} of the last, uncut)");
    assert!(cuts > 100, "only {cuts} cuts");
}

#[test]
fn a_power_cut_at_any_write_of_a_served_090_raid5_grow_keeps_every_flushed_client_write() {
    every_cut(Level::Raid5, 3);
}

#[test]
fn a_power_cut_at_any_write_of_a_served_090_raid6_grow_keeps_every_flushed_client_write() {
    every_cut(Level::Raid6, 4);
}
