//! `serve --backup-file` of a stopped metadata 0.90 restripe puts the
//! file's window back once: the start's put-back
//! (`Assembly::reshape_put_back`), then the served walk carries on from it
//! (`Assembly::reshape_served_with_backup`) without putting the same
//! sections back a second time. The file's saved bytes are spoiled between
//! the two: a second put-back would write them into the array.

mod md090;

use md090::*;
use raidlab_core::Volume;
use raidlab_layout::Level;
use raidlab_raid::assemble::Assembly;
use raidlab_raid::grow::{BackupFile, ReshapeRequest};
use raidlab_raid::recovery::RunOptions;
use std::path::Path;
use std::sync::Arc;

#[test]
fn a_served_resume_after_its_start_put_back_puts_nothing_back_again() {
    let devs = mem_devices(4, 2 * MIB);
    let data = fill(Level::Raid5, &devs, 11);
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    let req = ReshapeRequest {
        chunk_bytes: Some(32 << 10),
        ..ReshapeRequest::default()
    };
    let plan = asm
        .reshape_check_with_backup(&req, Path::new("/nonexistent-dir-h78/backup"))
        .unwrap();
    let inner = mem_file(&plan);
    let file = BackupFile::on_volume("backup", inner.clone());
    asm.reshape_start_with_backup(plan, &file).unwrap();
    // Stopped by the server after two windows (the served walk's stop).
    let mut walk = asm.reshape_served_with_backup(false, &file).unwrap();
    let n = std::cell::Cell::new(0);
    let quit = || {
        n.set(n.get() + 1);
        n.get() >= 2
    };
    let stopped = walk.run(&mut asm, &RunOptions::default(), &quit);
    assert!(stopped.is_err(), "the walk stopped mid-way");
    drop(walk);
    drop(asm);

    // Served again with the file: the start puts it back...
    let mut asm = Assembly::assemble(devs.clone()).unwrap();
    let file = BackupFile::on_volume("backup", inner.clone());
    asm.reshape_put_back(&file).unwrap();
    // ...then every byte a section holds is spoiled (the record kept):
    // nothing may read them again.
    let sections = inner.size() - 4096;
    inner
        .write_at(&vec![0xa5; sections as usize], 4096)
        .unwrap();
    let mut walk = asm.reshape_served_with_backup(false, &file).unwrap();
    walk.run(&mut asm, &RunOptions::default(), &|| false)
        .unwrap();
    walk.end(&mut asm).unwrap();
    drop(asm);
    let got = read_all(&devs);
    let bad = (0..data.len() / 4096).find(|&p| got[p * 4096..][..4096] != data[p * 4096..][..4096]);
    assert!(bad.is_none(), "page {bad:?} differs: put back twice");
    let _: Arc<dyn Volume> = inner;
}
