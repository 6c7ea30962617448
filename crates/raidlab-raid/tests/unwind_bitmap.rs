//! A request dropped where the simulated power went, while another holds
//! the bitmap's lock across the bitmap's member writes: the dropped one is
//! unwound outside any runner (it cannot wait as a task), and its bitmap
//! bookkeeping must not wait for that lock, which the other, never to run
//! again, would not let go. Found as a hang of the served reshape torture's
//! first bitmap runs (2026-12-06). Run as tasks the test resumes one I/O
//! step at a time (`exec::Interleaved`), in a thread of its own so that a
//! hang fails the test instead of stopping the suite.

mod common;

use raidlab_core::task::{Runner, Stacks, Step, Task, Wait};
use raidlab_core::Volume;
use raidlab_devices::MemVolume;
use raidlab_layout::Level;
use raidlab_raid::assemble::Device;
use raidlab_raid::exec::Interleaved;
use std::sync::Arc;
use std::time::Duration;

const MIB: u64 = 1 << 20;
const BITMAP_CHUNK: u64 = 64 << 10;

/// A RAID 1 of two with a clean bitmap of 64 KiB chunks, run by tasks.
fn array() -> Arc<raidlab_raid::Array> {
    let devs: Vec<Device> = (0..2)
        .map(|i| Device {
            path: format!("m{i}"),
            volume: Arc::new(MemVolume::new(8 * MIB)),
        })
        .collect();
    let mut asm = common::create_with(Level::Raid1, &devs, |s| {
        s.bitmap = true;
        s.bitmap_chunk = Some(BITMAP_CHUNK as u32);
    });
    // mdadm creates every bit set; clear them, so that each write below
    // writes the bitmap (its lock held across those member writes).
    asm.bitmap.as_mut().unwrap().clear_all();
    asm.commit(|_| {}).unwrap();
    Arc::new(asm.array().unwrap().with_executor(Arc::new(Interleaved)))
}

/// One try: `b` resumed `k` times, then `a` once; when `a` then waits on
/// an I/O step (it holds the bitmap's lock in its bitmap write: its chunk
/// was clean) and `b` is past its own bitmap write (it let the lock go,
/// and holds its chunk as written), `b` is dropped. Returns whether that
/// state was reached; the drop returning at all is the point.
fn one(k: usize) -> bool {
    let _runner = Runner::enter();
    let mut stacks = Stacks::default();
    let array = array();
    let (x, y) = (array.clone(), array.clone());
    let mut b = Task::new(&mut stacks, move || {
        x.write_at(&[0xbb; 4096], 3 * BITMAP_CHUNK).unwrap()
    })
    .unwrap();
    let mut a = Task::new(&mut stacks, move || {
        y.write_at(&[0xaa; 4096], 9 * BITMAP_CHUNK).unwrap()
    })
    .unwrap();
    for _ in 0..k {
        if let Step::Done(()) = b.resume() {
            return false;
        }
    }
    let holds = matches!(a.resume(), Step::Waits(Wait::Runner(_)));
    // Where the power went: `b` is dropped suspended (unwound here).
    drop(b);
    // `a` goes on to its end: the lock it held is its own to let go.
    loop {
        if let Step::Done(()) = a.resume() {
            break;
        }
    }
    holds
}

#[test]
fn a_request_unwound_at_a_cut_does_not_wait_for_the_bitmap_lock() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let reached = (1..12).filter(|&k| one(k)).count();
        let _ = tx.send(reached);
    });
    let reached = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("dropping a request suspended with its bitmap chunks held hung");
    assert!(
        reached > 0,
        "no try reached a request holding the bitmap lock beside one holding its chunks"
    );
}
