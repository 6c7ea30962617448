//! A write in flight when a replacement begins, whose write to the member being
//! replaced then fails. The write ran on the membership from before the
//! replacement (the start takes no stripe locks), so it wrote the old member
//! directly, not through the replacement's tee. The old member's failure must
//! still turn the copy into a rebuild: had it gone on copying the old member,
//! it would have copied the block that member refused, and the new member would
//! serve old data once it took over (seen as a rare read-back mismatch in the
//! live tests under load).

use raidlab_core::{Error, ErrorKind, Op, Result, Volume};
use raidlab_devices::MemVolume;
use raidlab_layout::{Geometry, Layout, Level, ParityLayout};
use raidlab_raid::Array;
use std::sync::{Arc, Condvar, Mutex};

const CHUNK: u64 = 64 << 10;
const MEMBER: u64 = 1 << 20;

/// A member whose next write, once armed, waits until released and then fails
/// (a disk that dies with a write outstanding).
#[derive(Default)]
struct Stall {
    inner: Option<MemVolume>,
    /// (armed, entered, released)
    state: Mutex<(bool, bool, bool)>,
    cv: Condvar,
}

impl Stall {
    fn wait(&self, until: impl Fn(&(bool, bool, bool)) -> bool) {
        let mut s = self.state.lock().unwrap();
        while !until(&s) {
            s = self.cv.wait(s).unwrap();
        }
    }
    fn set(&self, f: impl FnOnce(&mut (bool, bool, bool))) {
        f(&mut self.state.lock().unwrap());
        self.cv.notify_all();
    }
    fn mem(&self) -> &MemVolume {
        self.inner.as_ref().unwrap()
    }
}

impl Volume for Stall {
    fn name(&self) -> String {
        "stall".into()
    }
    fn size(&self) -> u64 {
        self.mem().size()
    }
    fn block_size(&self) -> u32 {
        self.mem().block_size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.mem().read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let armed = self.state.lock().unwrap().0;
        if !armed {
            return self.mem().write_at(buf, offset);
        }
        self.set(|s| s.1 = true);
        self.wait(|s| s.2);
        Err(Error::new(ErrorKind::Io, Op::Write, "the disk died").at(offset, buf.len() as u64))
    }
    fn flush(&self) -> Result<()> {
        Ok(())
    }
}

#[test]
fn a_write_failing_on_the_replaced_member_across_the_start_turns_the_copy_into_a_rebuild() {
    let n = 4;
    let g = Geometry::new(
        Level::Raid5,
        Layout::Parity(ParityLayout::LeftSymmetric),
        CHUNK,
        n,
        MEMBER,
    )
    .unwrap();
    let old = Arc::new(Stall {
        inner: Some(MemVolume::new(MEMBER)),
        ..Default::default()
    });
    let mut members: Vec<Option<Arc<dyn Volume>>> = vec![Some(old.clone())];
    for _ in 1..n {
        members.push(Some(Arc::new(MemVolume::new(MEMBER))));
    }
    let array = Arc::new(Array::new("race", g, members).unwrap());
    let size = array.size() as usize;
    let before: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    array.write_at(&before, 0).unwrap();

    // Left-symmetric RAID 5: the first chunk of the array lies on role 0.
    let new_data = vec![0xA5u8; 4096];
    old.set(|s| s.0 = true);
    let writer = {
        let (array, data) = (array.clone(), new_data.clone());
        std::thread::spawn(move || array.write_at(&data, 0))
    };
    old.wait(|s| s.1);
    // The write holds its stripe locks and is inside role 0's member write.
    let target: Arc<dyn Volume> = Arc::new(MemVolume::new(MEMBER));
    let rec = array.begin_recovery(0, target, 0, true).unwrap();
    assert!(rec.replacing());
    old.set(|s| s.2 = true);
    writer
        .join()
        .unwrap()
        .expect("a degraded RAID 5 write succeeds without one member");
    assert!(
        !rec.replacing(),
        "the old member failed: the copy must carry on as a rebuild, not read it"
    );

    let mut scratch = Vec::new();
    while array.recovery_step(&rec, 256 << 10, &mut scratch).unwrap() < MEMBER {}
    array.finish_recovery(&rec).unwrap();
    assert!(array.live()[0], "the new member serves role 0");
    let mut got = vec![0u8; size];
    array.read_at(&mut got, 0).unwrap();
    let mut want = before;
    want[..4096].copy_from_slice(&new_data);
    assert!(
        got == want,
        "the rebuilt member serves the write it was sent"
    );
}
