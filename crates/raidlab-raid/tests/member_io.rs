//! Member I/O submitted through io_uring and through threads moves the same
//! bytes: RAID 0, 5 and 10 on real files (direct and buffered), written and
//! read at random offsets and sizes (whole blocks and ragged edges alike)
//! through one submission and read back through the other, against a model.
//! Each path is seen to be the one taken (this thread's ring submissions).

use raidlab_core::{SliceVolume, Volume};
use raidlab_devices::{uring, FileVolume, IoMode};
use raidlab_layout::{Geometry, Layout, Level, ParityLayout, Raid10Layout};
use raidlab_raid::exec::{Submission, ThreadPool};
use raidlab_raid::Array;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

const CHUNK: u64 = 64 << 10;
const MEMBER: u64 = 4 << 20;
/// Where each member's data area starts in its file, as an md superblock's
/// data offset puts it: requests reach the file shifted by it.
const DATA_OFFSET: u64 = 1 << 20;

fn geometry(level: Level, n: usize) -> Geometry {
    let layout = match level {
        Level::Raid0 => Layout::Plain,
        Level::Raid10 => Layout::Raid10(Raid10Layout::from_name("n2").unwrap()),
        _ => Layout::Parity(ParityLayout::LeftSymmetric),
    };
    Geometry::new(level, layout, CHUNK, n, MEMBER).unwrap()
}

/// Two arrays over the same member files, one per submission.
fn arrays(dir: &std::path::Path, level: Level, n: usize, io: IoMode) -> (Array, Array) {
    let vols: Vec<Arc<dyn Volume>> = (0..n)
        .map(|i| {
            let f = FileVolume::create_sparse_io(
                &dir.join(format!("m{i}")),
                DATA_OFFSET + MEMBER,
                Some(io),
            )
            .unwrap();
            assert_eq!(f.io_mode(), io);
            let area = SliceVolume::new(Arc::new(f), DATA_OFFSET, MEMBER).unwrap();
            Arc::new(area) as Arc<dyn Volume>
        })
        .collect();
    let with = |s: &Submission| {
        let members = vols.iter().map(|v| Some(v.clone())).collect();
        Array::new("m", geometry(level, n), members)
            .unwrap()
            .with_executor(Arc::new(ThreadPool::with_submission(s)))
    };
    (with(&Submission::uring()), with(&Submission::threads()))
}

#[test]
fn both_submissions_read_back_what_either_wrote_on_raid0_5_10_direct_and_buffered() {
    uring::probe().expect("io_uring is available on the test machines");
    for io in [IoMode::Direct, IoMode::Buffered] {
        for (level, n) in [(Level::Raid0, 3), (Level::Raid5, 4), (Level::Raid10, 4)] {
            let label = format!("{} {io}", level.name());
            // Under /tmp (ext4 on the test machines): /dev/shm's tmpfs may
            // refuse O_DIRECT.
            let dir = tempfile::tempdir_in("/var/tmp").unwrap();
            let (ring, threads) = arrays(dir.path(), level, n, io);
            let size = ring.size() as usize;
            let mut model = vec![0u8; size];
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(level as u64 * 2 + 1);
            for i in 0..80 {
                // Half block-aligned, half ragged; up to two stripes long.
                let aligned = i % 2 == 0;
                let mut len = rng.gen_range(1..=256usize << 10);
                let mut off = rng.gen_range(0..size - len);
                if aligned {
                    len = len.div_ceil(4096) * 4096;
                    off = off / 4096 * 4096;
                    if off + len > size {
                        off = size - len;
                    }
                }
                let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                let (writer, reader) = if i % 3 == 0 {
                    (&threads, &ring)
                } else {
                    (&ring, &threads)
                };
                let before = uring::submitted_on_this_thread();
                writer.write_at(&data, off as u64).unwrap();
                let sent = uring::submitted_on_this_thread() - before;
                if std::ptr::eq(writer, &threads) {
                    assert_eq!(sent, 0, "{label}: threads sent nothing to a ring");
                } else if aligned {
                    assert!(sent > 0, "{label}: an aligned write went through the ring");
                }
                model[off..off + len].copy_from_slice(&data);
                let mut back = vec![0u8; len];
                reader.read_at(&mut back, off as u64).unwrap();
                assert!(back == data, "{label}: op {i} at {off}+{len} read back differs");
            }
            ring.flush().unwrap();
            for a in [&ring, &threads] {
                let mut all = vec![0u8; size];
                a.read_at(&mut all, 0).unwrap();
                assert!(all == model, "{label}: the whole array differs from the model");
            }
        }
    }
}

#[test]
fn a_member_refusing_writes_fails_the_step_naming_it_through_the_ring() {
    // A member file opened read-only: the ring's request would fail with
    // EBADF, so it goes through the volume, which refuses it with its own
    // error; the other member is still written.
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let p0 = dir.path().join("m0");
    let p1 = dir.path().join("m1");
    drop(FileVolume::create_sparse(&p0, MEMBER).unwrap());
    drop(FileVolume::create_sparse(&p1, MEMBER).unwrap());
    let ro = FileVolume::open(&p0, raidlab_devices::OpenMode::ReadOnly).unwrap();
    let rw = FileVolume::open(&p1, raidlab_devices::OpenMode::ReadWrite).unwrap();
    let g = Geometry::new(Level::Raid1, Layout::Plain, 0, 2, MEMBER).unwrap();
    let a = Array::new(
        "r1",
        g,
        vec![
            Some(Arc::new(ro) as Arc<dyn Volume>),
            Some(Arc::new(rw) as Arc<dyn Volume>),
        ],
    )
    .unwrap()
    .with_executor(Arc::new(ThreadPool::with_submission(&Submission::uring())));
    // RAID 1 goes on without the member that failed its write.
    a.write_at(&[7u8; 4096], 8192).unwrap();
    let mut b = [0u8; 4096];
    a.read_at(&mut b, 8192).unwrap();
    assert_eq!(b, [7u8; 4096]);
    assert!(a.failed_members().contains(&0), "{:?}", a.failed_members());
}
