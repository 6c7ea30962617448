//! Members with direct I/O (`O_DIRECT`): any offset, length and buffer
//! address reads and writes exactly what a plain in-memory volume would
//! (the safe reference for the aligned bounce buffers and edge-block
//! read-modify-write), concurrent unaligned writes to one block keep each
//! other's bytes, and a file system that refuses direct I/O is named with
//! the way out (`--buffered`) and left unchanged.
//!
//! Files live under the target directory (on the disk the build uses, which
//! takes `O_DIRECT`; /tmp and /dev/shm may be tmpfs, which does not). The
//! loop-device test needs root (CI has it).

use raidlab_core::Volume;
use raidlab_devices::{FileVolume, IoMode, MemVolume, OpenMode};
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::sync::Arc;

/// A directory on a file system that takes `O_DIRECT` (the build's own).
fn disk_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// Random reads and writes (odd offsets, lengths and buffer addresses among
/// them, some longer than a bounce buffer) through `v` and through a memory
/// volume, which must agree at every read and at the end.
fn agrees_with_memory(v: &dyn Volume, seed: u64) {
    let size = v.size();
    let reference = MemVolume::new(size);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut init = vec![0u8; size as usize];
    v.read_at(&mut init, 0).unwrap();
    reference.write_at(&init, 0).unwrap();
    for step in 0..400 {
        let len = match rng.gen_range(0..10) {
            0 => rng.gen_range(1..16usize),
            1 => 4096,
            2 => rng.gen_range((1 << 20)..(3 << 20)).min(size as usize),
            _ => rng.gen_range(1..70_000usize),
        };
        let offset = if rng.gen_bool(0.3) {
            rng.gen_range(0..(size - len as u64) / 4096) * 4096
        } else {
            rng.gen_range(0..=size - len as u64)
        };
        // A buffer inside a larger one, so its start address varies too.
        let shift = rng.gen_range(0..64usize);
        let mut backing = vec![0u8; len + 64];
        let buf = &mut backing[shift..shift + len];
        if rng.gen_bool(0.5) {
            rng.fill(&mut buf[..]);
            if rng.gen_bool(0.2) {
                v.write_at_fua(buf, offset).unwrap();
            } else {
                v.write_at(buf, offset).unwrap();
            }
            reference.write_at(buf, offset).unwrap();
        } else {
            v.read_at(buf, offset).unwrap();
            let mut want = vec![0u8; len];
            reference.read_at(&mut want, offset).unwrap();
            assert!(
                buf[..] == want[..],
                "step {step}: {len} bytes at {offset} (buffer +{shift}) differ from the reference"
            );
        }
    }
    v.flush().unwrap();
    let mut all = vec![0u8; size as usize];
    v.read_at(&mut all, 0).unwrap();
    let mut want = vec![0u8; size as usize];
    reference.read_at(&mut want, 0).unwrap();
    assert!(all == want, "the whole volume differs from the reference");
}

#[test]
fn a_direct_file_reads_and_writes_any_range_as_memory_does() {
    let dir = disk_dir();
    let p = dir.path().join("m0");
    let v = FileVolume::create_sparse_io(&p, 8 << 20, Some(IoMode::Direct)).unwrap();
    assert_eq!(v.io_mode(), IoMode::Direct);
    agrees_with_memory(&v, 1);
    drop(v);
    // What went through O_DIRECT is what a buffered reader sees afterwards.
    let again = FileVolume::open(&p, OpenMode::ReadOnly).unwrap();
    assert_eq!(
        again.io_mode(),
        IoMode::Buffered,
        "files default to buffered"
    );
    let direct = FileVolume::open_io(&p, OpenMode::ReadOnly, Some(IoMode::Direct)).unwrap();
    let (mut a, mut b) = (vec![0u8; 8 << 20], vec![0u8; 8 << 20]);
    again.read_at(&mut a, 0).unwrap();
    direct.read_at(&mut b, 0).unwrap();
    assert!(a == b);
}

#[test]
fn concurrent_unaligned_writes_to_one_block_keep_each_others_bytes() {
    let dir = disk_dir();
    let p = dir.path().join("m0");
    let v = Arc::new(FileVolume::create_sparse_io(&p, 1 << 20, Some(IoMode::Direct)).unwrap());
    // Eight writers, each owning 8 bytes of the same two blocks (a range
    // that straddles the boundary at 8192), writing their own pattern over
    // and over: without the edge-block lock one writer's read-modify-write
    // would put back another's old bytes.
    const ROUNDS: u8 = 200;
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let v = v.clone();
            std::thread::spawn(move || {
                for r in 0..ROUNDS {
                    let at = 8192 - 32 + t * 8;
                    v.write_at(&[r ^ t as u8; 8], at).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut got = [0u8; 64];
    v.read_at(&mut got, 8192 - 32).unwrap();
    for t in 0..8u8 {
        let last = (ROUNDS - 1) ^ t;
        assert_eq!(
            got[t as usize * 8..t as usize * 8 + 8],
            [last; 8],
            "writer {t}'s last bytes were lost: {got:?}"
        );
    }
}

/// A ramfs mounted for one test (it refuses `O_DIRECT`, as tmpfs did
/// before Linux 6.6), unmounted on drop.
struct Ramfs(tempfile::TempDir);

impl Ramfs {
    fn new() -> Option<Ramfs> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            raidlab_core::skip::skip_or_fail(
                "direct I/O refusal: mounting a ramfs (a file system without O_DIRECT) needs root",
            );
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "ramfs", "ramfs"])
            .arg(dir.path())
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount -t ramfs failed");
        Some(Ramfs(dir))
    }
}

impl Drop for Ramfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.0.path())
            .status();
    }
}

#[test]
fn a_file_system_without_direct_io_is_named_with_the_way_out_and_nothing_changes() {
    let Some(fs) = Ramfs::new() else {
        return;
    };
    let p = fs.0.path().join("m0");
    std::fs::write(&p, vec![7u8; 1 << 20]).unwrap();
    let before = std::fs::metadata(&p).unwrap().modified().unwrap();
    let e = FileVolume::open_io(&p, OpenMode::ReadWrite, Some(IoMode::Direct)).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains(&p.display().to_string()), "{msg}");
    assert!(msg.contains("--buffered"), "{msg}");
    assert_eq!(std::fs::read(&p).unwrap(), vec![7u8; 1 << 20]);
    assert_eq!(std::fs::metadata(&p).unwrap().modified().unwrap(), before);
    // Not left locked either: a buffered opener gets it at once.
    let v = FileVolume::open(&p, OpenMode::ReadWrite).unwrap();
    assert_eq!(v.io_mode(), IoMode::Buffered);
    drop(v);
    // A new member there is refused without leaving a file behind.
    let q = fs.0.path().join("m1");
    let e = FileVolume::create_sparse_io(&q, 1 << 20, Some(IoMode::Direct)).unwrap_err();
    assert!(e.to_string().contains("--buffered"), "{e}");
    assert!(!q.exists(), "a refused member file was left behind");
}

#[test]
fn a_file_ending_inside_a_block_is_refused_for_direct_io() {
    let dir = disk_dir();
    let p = dir.path().join("odd");
    std::fs::write(&p, vec![1u8; 10_000]).unwrap();
    let e = FileVolume::open_io(&p, OpenMode::ReadWrite, Some(IoMode::Direct)).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("not a multiple") && msg.contains("--buffered"),
        "{msg}"
    );
    assert_eq!(std::fs::read(&p).unwrap(), vec![1u8; 10_000]);
}

/// A loop device over a file in the target directory, detached on drop.
struct Loop {
    dev: String,
    _dir: tempfile::TempDir,
}

impl Loop {
    fn new(size: u64) -> Option<Loop> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 || !Path::new("/dev/loop-control").exists() {
            raidlab_core::skip::skip_or_fail(
                "direct I/O on a block device: loop devices need root and /dev/loop-control",
            );
            return None;
        }
        let dir = disk_dir();
        let backing = dir.path().join("lo");
        std::fs::File::create(&backing)
            .unwrap()
            .set_len(size)
            .unwrap();
        let out = std::process::Command::new("losetup")
            .args(["-f", "--show"])
            .arg(&backing)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "losetup: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dev = String::from_utf8(out.stdout).unwrap().trim().to_string();
        Some(Loop { dev, _dir: dir })
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup")
            .arg("-d")
            .arg(&self.dev)
            .status();
    }
}

#[test]
fn a_block_device_is_direct_by_default_and_reads_as_memory_does() {
    let Some(lo) = Loop::new(8 << 20) else {
        return;
    };
    let v = FileVolume::open(Path::new(&lo.dev), OpenMode::ReadWrite).unwrap();
    assert_eq!(
        v.io_mode(),
        IoMode::Direct,
        "block devices default to direct"
    );
    agrees_with_memory(&v, 2);
    drop(v);
    let b = FileVolume::open_io(
        Path::new(&lo.dev),
        OpenMode::ReadWrite,
        Some(IoMode::Buffered),
    )
    .unwrap();
    assert_eq!(b.io_mode(), IoMode::Buffered);
    agrees_with_memory(&b, 3);
}
