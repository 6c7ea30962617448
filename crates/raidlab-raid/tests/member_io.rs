//! Member I/O submitted through io_uring and through threads moves the same
//! bytes: RAID 0, 5 and 10 on real files (direct and buffered), written and
//! read at random offsets and sizes (whole blocks and ragged edges alike)
//! through one submission and read back through the other, against a model.
//! Each path is seen to be the one taken (this thread's ring submissions):
//! direct members' steps through the ring, buffered members' through threads
//! whichever submission the array has.

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

/// Two arrays over the same members, one per submission: files made in
/// `dir`, or the block devices `devices` when given.
fn arrays_on(
    dir: &std::path::Path,
    devices: &[String],
    level: Level,
    n: usize,
    io: IoMode,
) -> (Array, Array) {
    let vols: Vec<Arc<dyn Volume>> = (0..n)
        .map(|i| {
            let f = match devices.get(i) {
                Some(d) => open_device(d, raidlab_devices::OpenMode::ReadWrite, io),
                None => FileVolume::create_sparse_io(
                    &dir.join(format!("m{i}")),
                    DATA_OFFSET + MEMBER,
                    Some(io),
                ),
            }
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

fn arrays(dir: &std::path::Path, level: Level, n: usize, io: IoMode) -> (Array, Array) {
    arrays_on(dir, &[], level, n, io)
}

/// Random writes through one submission, each read back through the other,
/// then the whole array through both, against a model. Which requests take
/// the ring: a direct member's reads and flushes, and its writes on a block
/// device; never anything of the threads array or of buffered members.
fn round_trip(label: &str, ring: &Array, threads: &Array, io: IoMode, devices: bool) {
    let size = ring.size() as usize;
    let mut model = vec![0u8; size];
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(size as u64 ^ devices as u64);
    // Members reused from another level hold copies that disagree: every
    // block written once first, so that any copy reads as the model.
    threads.write_at(&model, 0).unwrap();
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
        let ring_writes = i % 3 != 0;
        let (writer, reader) = if ring_writes {
            (ring, threads)
        } else {
            (threads, ring)
        };
        let before = uring::submitted_on_this_thread();
        writer.write_at(&data, off as u64).unwrap();
        let wrote = uring::submitted_on_this_thread() - before;
        model[off..off + len].copy_from_slice(&data);
        let mut back = vec![0u8; len];
        let before = uring::submitted_on_this_thread();
        reader.read_at(&mut back, off as u64).unwrap();
        let read = uring::submitted_on_this_thread() - before;
        assert!(
            back == data,
            "{label}: op {i} at {off}+{len} read back differs"
        );
        let (ring_sent, threads_sent) = if ring_writes {
            (wrote, read)
        } else {
            (read, wrote)
        };
        assert_eq!(threads_sent, 0, "{label}: threads sent nothing to a ring");
        if io == IoMode::Buffered {
            assert_eq!(ring_sent, 0, "{label}: buffered members keep the threads");
        } else if aligned && (!ring_writes || devices) {
            assert!(ring_sent > 0, "{label}: op {i} went through the ring");
        }
    }
    ring.flush().unwrap();
    for a in [ring, threads] {
        let mut all = vec![0u8; size];
        a.read_at(&mut all, 0).unwrap();
        assert!(
            all == model,
            "{label}: the whole array differs from the model"
        );
    }
}

#[test]
fn both_submissions_read_back_what_either_wrote_on_raid0_5_10_direct_and_buffered() {
    uring::probe().expect("io_uring is available on the test machines");
    for io in [IoMode::Direct, IoMode::Buffered] {
        for (level, n) in [(Level::Raid0, 3), (Level::Raid5, 4), (Level::Raid10, 4)] {
            let label = format!("{} {io} files", level.name());
            // /var/tmp: a disk's file system (/dev/shm's tmpfs may refuse
            // O_DIRECT).
            let dir = tempfile::tempdir_in("/var/tmp").unwrap();
            let (ring, threads) = arrays(dir.path(), level, n, io);
            round_trip(&label, &ring, &threads, io, false);
        }
    }
}

/// A loop device just attached, opened as raidlab opens a member
/// (exclusively): another process may still hold or probe the device for a
/// moment after `losetup` (seen once as "Device or resource busy" on
/// /dev/loop0 while another test binary used loop devices), so a busy
/// device is asked again for up to 5 s before its error stands.
fn open_device(
    path: &str,
    mode: raidlab_devices::OpenMode,
    io: IoMode,
) -> raidlab_core::Result<FileVolume> {
    let mut tries = 0;
    loop {
        match FileVolume::open_io(std::path::Path::new(path), mode, Some(io)) {
            Err(e) if busy(&e) && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            other => return other,
        }
    }
}

fn busy(e: &raidlab_core::Error) -> bool {
    use std::error::Error as _;
    e.source()
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .and_then(std::io::Error::raw_os_error)
        == Some(libc::EBUSY)
}

/// A loop device over a file, detached when dropped.
struct Loop(String);

impl Loop {
    fn new(backing: &std::path::Path) -> Loop {
        let out = std::process::Command::new("losetup")
            .args(["--direct-io=on", "-f", "--show"])
            .arg(backing)
            .output()
            .expect("losetup runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Loop(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup")
            .arg("-d")
            .arg(&self.0)
            .status();
    }
}

#[test]
fn both_submissions_agree_on_block_device_members_whose_writes_take_the_ring() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        raidlab_core::skip::skip_or_fail("block device members: needs root (loop devices)");
        return;
    }
    uring::probe().expect("io_uring is available on the test machines");
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let loops: Vec<Loop> = (0..4)
        .map(|i| {
            let p = dir.path().join(format!("b{i}"));
            std::fs::File::create(&p)
                .unwrap()
                .set_len(DATA_OFFSET + MEMBER)
                .unwrap();
            Loop::new(&p)
        })
        .collect();
    let names: Vec<String> = loops.iter().map(|l| l.0.clone()).collect();
    for (level, n) in [(Level::Raid0, 3), (Level::Raid5, 4), (Level::Raid10, 4)] {
        let label = format!("{} direct block devices", level.name());
        let (ring, threads) = arrays_on(dir.path(), &names, level, n, IoMode::Direct);
        round_trip(&label, &ring, &threads, IoMode::Direct, true);
    }
}

#[test]
fn a_member_refusing_writes_fails_at_that_write_while_the_other_takes_it_through_the_ring() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        raidlab_core::skip::skip_or_fail("read-only member: needs root (loop devices)");
        return;
    }
    // RAID 1 on two direct block devices, one opened read-only: its write
    // cannot go to the ring (EBADF would name no cause), so it goes through
    // the volume, which refuses it with its own error, and the member is
    // failed there; the other member's write goes through the ring.
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let loops: Vec<Loop> = (0..2)
        .map(|i| {
            let p = dir.path().join(format!("r{i}"));
            std::fs::File::create(&p).unwrap().set_len(MEMBER).unwrap();
            Loop::new(&p)
        })
        .collect();
    let ro = open_device(
        &loops[0].0,
        raidlab_devices::OpenMode::ReadOnly,
        IoMode::Direct,
    )
    .unwrap();
    let rw = open_device(
        &loops[1].0,
        raidlab_devices::OpenMode::ReadWrite,
        IoMode::Direct,
    )
    .unwrap();
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
    let before = uring::submitted_on_this_thread();
    a.write_at(&[7u8; 4096], 8192).unwrap();
    assert!(
        uring::submitted_on_this_thread() > before,
        "the other member's write went through the ring"
    );
    assert_eq!(a.failed_members(), vec![0]);
    let mut b = [0u8; 4096];
    a.read_at(&mut b, 8192).unwrap();
    assert_eq!(b, [7u8; 4096]);
}

/// Install a seccomp filter on this thread (and threads it starts) that
/// refuses `io_uring_setup` with ENOSYS, as a container runtime's default
/// profile or a kernel built without io_uring does. Only this thread: the
/// filter is installed without synchronising the process's other threads.
fn refuse_io_uring_on_this_thread() {
    const BPF_LD_W_ABS: u16 = 0x20;
    const BPF_JMP_JEQ_K: u16 = 0x15;
    const BPF_RET_K: u16 = 0x06;
    const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
    const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
    const SECCOMP_MODE_FILTER: libc::c_ulong = 2;
    let nr = libc::SYS_io_uring_setup as u32;
    let mut filter = [
        // The system call's number (seccomp_data.nr, offset 0).
        libc::sock_filter {
            code: BPF_LD_W_ABS,
            jt: 0,
            jf: 0,
            k: 0,
        },
        libc::sock_filter {
            code: BPF_JMP_JEQ_K,
            jt: 0,
            jf: 1,
            k: nr,
        },
        libc::sock_filter {
            code: BPF_RET_K,
            jt: 0,
            jf: 0,
            k: SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
        },
        libc::sock_filter {
            code: BPF_RET_K,
            jt: 0,
            jf: 0,
            k: SECCOMP_RET_ALLOW,
        },
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_mut_ptr(),
    };
    // SAFETY: prctl with PR_SET_NO_NEW_PRIVS takes no pointers; with
    // PR_SET_SECCOMP it reads the program `prog` describes, alive for the
    // call (the kernel copies it).
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        assert_eq!(
            libc::prctl(
                libc::PR_SET_SECCOMP,
                SECCOMP_MODE_FILTER,
                &prog as *const _ as libc::c_ulong,
                0,
                0
            ),
            0,
            "seccomp: {}",
            std::io::Error::last_os_error()
        );
    }
}

#[test]
fn where_the_kernel_refuses_io_uring_auto_falls_back_to_threads_saying_why() {
    use raidlab_raid::exec::{submit, MemberIo};
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let dir = dir.path().to_path_buf();
    std::thread::spawn(move || {
        refuse_io_uring_on_this_thread();
        let s = submit::choose(MemberIo::Auto).unwrap();
        assert!(!s.uring);
        let shown = s.describe();
        assert!(
            shown.starts_with("threads (io_uring unavailable: io_uring_setup failed:"),
            "{shown}"
        );
        assert!(shown.contains("not implemented"), "{shown}");
        // Asked for outright, it is an error naming the way out.
        let e = submit::choose(MemberIo::Uring).unwrap_err().to_string();
        assert!(e.contains("--member-io threads"), "{e}");
        // And an executor that was told io_uring on a thread where no ring
        // can be made still moves the right bytes, with blocking calls.
        let (ring, threads) = arrays(&dir, Level::Raid5, 4, IoMode::Direct);
        let data: Vec<u8> = (0..64u32 << 10).map(|i| (i % 251) as u8).collect();
        ring.write_at(&data, 12288).unwrap();
        let mut back = vec![0u8; data.len()];
        threads.read_at(&mut back, 12288).unwrap();
        assert!(back == data);
        assert_eq!(uring::submitted_on_this_thread(), 0);
    })
    .join()
    .unwrap();
    // The rest of the process keeps io_uring.
    assert!(uring::probe().is_ok());
}

/// A read that takes more than one member request is not spliced from direct
/// members: the sink would take the places one after the other, each its own
/// request, where `read_at`'s step sends them together (merged by the block
/// layer where contiguous). A read of one member request still is, and
/// buffered members (read ahead in the page cache) splice any plain read.
#[test]
fn direct_members_splice_only_a_read_of_one_member_request() {
    for io in [IoMode::Direct, IoMode::Buffered] {
        let dir = tempfile::tempdir().unwrap();
        let (ring, _) = arrays(dir.path(), Level::Raid0, 4, io);
        let mut places = 0;
        let mut sink = |_: std::os::fd::BorrowedFd<'_>, _: u64, _: usize| {
            places += 1;
            Ok(())
        };
        assert!(
            ring.read_stored(CHUNK, CHUNK, &mut sink).unwrap(),
            "{io:?}: a read of one chunk was not spliced"
        );
        let whole = ring.read_stored(0, 4 * CHUNK, &mut sink).unwrap();
        assert_eq!(
            whole,
            io == IoMode::Buffered,
            "{io:?}: a read of four chunks on four members spliced: {whole}"
        );
        let expected = if io == IoMode::Buffered { 5 } else { 1 };
        assert_eq!(places, expected, "{io:?}: places handed to the sink");
    }
}
