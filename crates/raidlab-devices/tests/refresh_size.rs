//! A member that grew while open (a file enlarged with `truncate`, a loop
//! device's backing file enlarged and `losetup -c`) keeps its old size until
//! asked again (`Volume::refresh_size`), through the wrappers a served member
//! sits under, then reads and writes all of it, the old bytes unchanged; a
//! size that direct I/O cannot use whole is refused and the old one kept.

use raidlab_core::{ErrorKind, Volume};
use raidlab_devices::{FaultVolume, FileVolume, IoMode, Limits, OpenMode, ThrottleVolume};
use std::path::Path;
use std::sync::Arc;

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(seed) ^ (i / 4093)) as u8)
        .collect()
}

fn enlarge(path: &Path, size: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(size)
        .unwrap();
}

#[test]
fn an_enlarged_file_is_seen_when_asked_again_through_wrappers() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m0");
    let file = Arc::new(FileVolume::create_sparse(&p, 1 << 20).unwrap());
    let old = pattern(1 << 20, 37);
    file.write_at(&old, 0).unwrap();
    let below: Arc<dyn Volume> = file.clone();
    let wrapped: Arc<dyn Volume> = Arc::new(FaultVolume::new(
        ThrottleVolume::new(below, Limits::default()).unwrap(),
    ));
    enlarge(&p, 3 << 20);
    // Not asked yet: the size found at open, and nothing past it.
    assert_eq!(wrapped.size(), 1 << 20);
    assert_eq!(
        wrapped.write_at(b"x", 2 << 20).unwrap_err().kind,
        ErrorKind::OutOfRange
    );
    assert_eq!(wrapped.refresh_size().unwrap(), 3 << 20);
    assert_eq!(wrapped.size(), 3 << 20);
    assert_eq!(file.size(), 3 << 20, "the file itself took the new size");
    let new = pattern(2 << 20, 101);
    wrapped.write_at(&new, 1 << 20).unwrap();
    let mut back = vec![0u8; 3 << 20];
    wrapped.read_at(&mut back, 0).unwrap();
    assert!(back[..1 << 20] == old[..], "the old bytes are unchanged");
    assert!(back[1 << 20..] == new[..]);
}

#[test]
fn a_mapping_made_before_is_made_again_at_the_new_size() {
    // Only files in memory are mapped (see `FileVolume::mapped`).
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = dir.path().join("m0");
    let v = FileVolume::create_sparse(&p, 1 << 20).unwrap();
    assert_eq!(v.mapped().unwrap().as_slice().len(), 1 << 20);
    enlarge(&p, 2 << 20);
    v.refresh_size().unwrap();
    v.write_at(b"tail", (2 << 20) - 4).unwrap();
    let map = v.mapped().unwrap();
    assert_eq!(map.as_slice().len(), 2 << 20);
    assert_eq!(&map.as_slice()[(2 << 20) - 4..], b"tail");
}

#[test]
fn a_size_direct_io_cannot_use_whole_is_refused_and_the_old_kept() {
    // A file system that takes O_DIRECT: the build's own disk.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let p = dir.path().join("m0");
    drop(FileVolume::create_sparse(&p, 1 << 20).unwrap());
    let v = FileVolume::open_io(&p, OpenMode::ReadWrite, Some(IoMode::Direct)).unwrap();
    enlarge(&p, (1 << 20) + 100);
    let e = v.refresh_size().unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("m0") && text.contains("1048676") && text.contains("still used as 1048576"),
        "{text}"
    );
    assert_eq!(v.size(), 1 << 20);
    enlarge(&p, 2 << 20);
    assert_eq!(v.refresh_size().unwrap(), 2 << 20);
}

#[test]
fn a_grown_loop_device_is_seen_when_asked_again() {
    use std::process::Command;
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 || !Path::new("/dev/loop-control").exists() {
        raidlab_core::skip::skip_or_fail(
            "a grown block device: loop devices need root and /dev/loop-control",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("lo");
    std::fs::File::create(&backing)
        .unwrap()
        .set_len(4 << 20)
        .unwrap();
    let out = Command::new("losetup")
        .args(["-f", "--show"])
        .arg(&backing)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "losetup: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lo = String::from_utf8(out.stdout).unwrap().trim().to_string();
    struct Detach(String);
    impl Drop for Detach {
        fn drop(&mut self) {
            let _ = Command::new("losetup").arg("-d").arg(&self.0).status();
        }
    }
    let _detach = Detach(lo.clone());
    let v = FileVolume::open(Path::new(&lo), OpenMode::ReadWrite).unwrap();
    let old = pattern(4 << 20, 53);
    v.write_at(&old, 0).unwrap();
    v.flush().unwrap();
    enlarge(&backing, 8 << 20);
    let st = Command::new("losetup").arg("-c").arg(&lo).status().unwrap();
    assert!(st.success(), "losetup -c {lo}");
    assert_eq!(v.size(), 4 << 20, "not asked yet");
    assert_eq!(v.refresh_size().unwrap(), 8 << 20);
    let new = pattern(4 << 20, 11);
    v.write_at(&new, 4 << 20).unwrap();
    let mut back = vec![0u8; 8 << 20];
    v.read_at(&mut back, 0).unwrap();
    assert!(back[..4 << 20] == old[..] && back[4 << 20..] == new[..]);
}
