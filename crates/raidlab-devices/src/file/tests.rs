//! A file member's discard, mapping, locks and refusals.

use super::*;

#[test]
fn discard_punches_a_hole_that_reads_as_zeros() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t0");
    let v = FileVolume::create_sparse(&p, 1 << 20).unwrap();
    v.write_at(&vec![0xabu8; 1 << 20], 0).unwrap();
    v.flush().unwrap();
    assert!(!v.is_hole(256 << 10, 256 << 10));
    assert!(v.discard_zeroes());
    v.discard(256 << 10, 256 << 10).unwrap();
    // The blocks went back to the file system; the size stayed.
    assert!(v.is_hole(256 << 10, 256 << 10));
    assert_eq!(std::fs::metadata(&p).unwrap().len(), 1 << 20);
    let mut b = vec![1u8; 1 << 20];
    v.read_at(&mut b, 0).unwrap();
    assert!(b[..256 << 10].iter().all(|&x| x == 0xab));
    assert!(b[256 << 10..512 << 10].iter().all(|&x| x == 0));
    assert!(b[512 << 10..].iter().all(|&x| x == 0xab));
    // An unaligned range zeroes exactly its bytes.
    v.discard(1000, 10).unwrap();
    let mut c = [1u8; 12];
    v.read_at(&mut c, 999).unwrap();
    assert_eq!(c, [0xab, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xab]);
    assert_eq!(
        v.discard(1 << 20, 1).unwrap_err().kind,
        ErrorKind::OutOfRange
    );
    drop(v);
    let r = FileVolume::open(&p, OpenMode::ReadOnly).unwrap();
    assert_eq!(r.discard(0, 4096).unwrap_err().kind, ErrorKind::ReadOnly);
}

#[test]
fn a_released_part_of_a_mapping_reads_the_same_afterwards() {
    // Only files in memory are mapped (see `map_file`), hence /dev/shm.
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = dir.path().join("m0");
    let v = FileVolume::create_sparse(&p, 1 << 20).unwrap();
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i * 7 + i / 4099) as u8).collect();
    v.write_at(&data, 0).unwrap();
    let map = v.mapped().expect("a file in /dev/shm maps");
    assert!(map.as_slice() == &data[..]);
    // Unaligned, whole, empty and out-of-view ranges: a hint, never a change.
    let part = map.narrow(1000, 600_000).unwrap();
    part.release(3, 500_000);
    part.release(0, 600_000);
    part.release(10, 0);
    part.release(599_999, u64::MAX);
    map.release(0, 1 << 20);
    assert!(part.as_slice() == &data[1000..601_000]);
    assert!(map.as_slice() == &data[..]);
    // Writes after a release are seen through the mapping (the page cache
    // is what it maps, before and after).
    v.write_at(b"after", 8192).unwrap();
    assert_eq!(&map.as_slice()[8192..8197], b"after");
    let mut back = vec![0u8; 1 << 20];
    v.read_at(&mut back, 0).unwrap();
    assert!(back == map.as_slice());
}

#[test]
fn create_write_read_and_lock() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m0");
    let v = FileVolume::create_sparse(&p, 1 << 20).unwrap();
    assert!(v.is_hole(0, 1 << 20));
    v.write_at(b"hello", 8192).unwrap();
    assert!(!v.is_hole(0, 1 << 20));
    assert!(v.is_hole(512 << 10, 512 << 10));
    let mut b = [0u8; 5];
    v.read_at(&mut b, 8192).unwrap();
    assert_eq!(&b, b"hello");
    assert_eq!(
        v.write_at(b"x", 1 << 20).unwrap_err().kind,
        ErrorKind::OutOfRange
    );
    // A second opener is refused while we hold the exclusive lock, and is told who.
    let e = FileVolume::open(&p, OpenMode::ReadOnly).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Busy);
    assert!(e.to_string().contains("locked by process"), "{e}");
    drop(v);
    let r = FileVolume::open(&p, OpenMode::ReadOnly).unwrap();
    // Readers share.
    let r2 = FileVolume::open(&p, OpenMode::ReadOnly).unwrap();
    assert_eq!(r.write_at(b"x", 0).unwrap_err().kind, ErrorKind::ReadOnly);
    drop((r, r2));
    assert!(
        FileVolume::create_sparse(&p, 10).is_err(),
        "never replaces a file"
    );
}

#[test]
fn a_lock_let_go_of_within_the_wait_is_taken() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m0");
    let v = FileVolume::create_sparse(&p, 1 << 20).unwrap();
    // Held a moment longer, as by a process on its way out (or a child
    // forked while the member was open, until it execs).
    let holder = std::thread::spawn(move || {
        std::thread::sleep(crate::lock::LOCK_WAIT / 5);
        drop(v);
    });
    let t = std::time::Instant::now();
    let r = FileVolume::open(&p, OpenMode::ReadWrite);
    holder.join().unwrap();
    assert!(r.is_ok(), "{:?}", r.err());
    assert!(t.elapsed() < crate::lock::LOCK_WAIT, "{:?}", t.elapsed());
}

#[test]
fn refuses_directories_and_missing_paths() {
    let dir = tempfile::tempdir().unwrap();
    let e = FileVolume::open(dir.path(), OpenMode::ReadOnly).unwrap_err();
    assert!(e.to_string().contains("not a regular file"), "{e}");
    let e = FileVolume::open(&dir.path().join("nope"), OpenMode::ReadOnly).unwrap_err();
    assert!(e.to_string().contains("check the path"), "{e}");
}
