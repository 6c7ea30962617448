//! A metadata 0.90 restripe through mdadm's backup file walked while a
//! client uses the array (`Assembly::reshape_served_with_backup`): after
//! each window the client writes and flushes a page in the window just
//! walked (open now, in the new geometry) and one past the next window
//! (still in the old); a power cut at every write of the run (members and
//! file), then the offline resume from the file: every flushed write reads
//! back, parity clean. Before a walked window's own section was let go at
//! its opening, the resume put that section back over the client's page.

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

/// Power cut at write `w` of a served start and walk with a client
/// writing between windows; then resumed offline and checked. Whether the
/// cut came.
fn served_cut_at(w: u64, seed: u64) -> bool {
    let (devs, faults) = fault_devices(4, 2 * MIB);
    let data = fill(Level::Raid5, &devs, 7);
    let asm = Assembly::assemble(devs.clone()).unwrap();
    let req = ReshapeRequest {
        chunk_bytes: Some(32 << 10),
        ..ReshapeRequest::default()
    };
    let plan = asm
        .reshape_check_with_backup(&req, Path::new("/nonexistent-dir-h77/backup"))
        .unwrap();
    drop(asm);
    let wbytes = plan.backup_sectors * 512;
    let inner: Arc<dyn Volume> = mem_file(&plan);
    let fvol = Arc::new(FaultVolume::with_volatile_cache(inner));
    let all: Vec<Fault> = faults.iter().cloned().chain([fvol.clone()]).collect();
    let file = BackupFile::on_volume("backup", fvol.clone());
    // Pages the client's flush answered, and the ones a cut may have
    // caught mid-write (either way is right there).
    let acked: RefCell<Vec<(u64, Vec<u8>)>> = RefCell::new(Vec::new());
    let unsure: RefCell<Vec<(u64, Vec<u8>)>> = RefCell::new(Vec::new());
    // md090's cut, with the wire at hand: a write after the power went is
    // lost however it answers, so a client page counts only when the wire
    // had not tripped once its flush was answered.
    let wire = Tripwire::new(w);
    for f in &all {
        f.set_tripwire(Some(wire.clone()));
    }
    let work = || {
        let mut asm = Assembly::assemble(devs.clone()).unwrap();
        if asm.reshape_start_with_backup(plan, &file).is_err() {
            return;
        }
        let Ok(mut walk) = asm.reshape_served_with_backup(false, &file) else {
            return;
        };
        let vol = walk.volume("a".into());
        let gate = walk.gate().clone();
        let total = vol.size();
        let n = std::cell::Cell::new(0u64);
        let quit = || {
            // After a window's opening: the walk is at `p`; the window
            // below it is open, the one above closed until it is walked.
            let p = gate.position();
            let k = n.get();
            n.set(k + 1);
            let mut pages = vec![p - 4096];
            if p + wbytes + 4096 <= total {
                pages.push(p + wbytes + (k * 4096) % (total - p - wbytes));
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
        let opts = RunOptions::default();
        if walk.run(&mut asm, &opts, &quit).is_ok() {
            let _ = walk.end(&mut asm);
        }
    };
    work();
    let tripped = wire.tripped();
    power_back(&all, tripped, seed);
    resume_with_backup(&devs, &file, w);
    judge_served_cut(&devs, data, &acked.borrow(), &unsure.borrow(), w);
    tripped
}

#[test]
fn a_power_cut_at_any_write_of_a_served_walk_keeps_every_flushed_client_write() {
    let (mut w, mut cuts) = (1, 0);
    while served_cut_at(w, w * 7919) {
        cuts += 1;
        w += if w < 150 { 1 } else { 4 };
    }
    eprintln!("{cuts} runs cut (write {w} of the last, uncut)");
    assert!(cuts > 100, "only {cuts} cuts");
}
