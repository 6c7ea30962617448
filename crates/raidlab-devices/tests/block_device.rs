//! Block devices as members: what `raidlab serve` splices to a client comes
//! from the device itself (O_DIRECT) where it can, and reads the same as the
//! page cache would. Needs root and loop devices (CI has both).

use raidlab_core::Volume;
use raidlab_devices::{FileVolume, IoMode, OpenMode};
use std::path::Path;

/// Moves `len` bytes at `at` of `fd` through a pipe by splice, as the NBD
/// server takes stored pieces, and returns them with whether `fd` was
/// opened for direct I/O.
fn splice_out(
    fd: std::os::fd::BorrowedFd<'_>,
    at: u64,
    len: usize,
) -> std::io::Result<(Vec<u8>, bool)> {
    use std::io::Read;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array, which has room for two.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: pipe2 succeeded: both descriptors are open and ours alone.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: F_SETPIPE_SZ and F_GETFL touch no memory of ours.
    let (sized, flags) = unsafe {
        (
            libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20),
            libc::fcntl(fd.as_raw_fd(), libc::F_GETFL),
        )
    };
    assert!(sized >= len as i32 && flags >= 0);
    let mut off = at as i64;
    let mut done = 0;
    while done < len {
        // SAFETY: splice moves file pages into our pipe; only `off`, a
        // local, is written.
        let n = unsafe {
            libc::splice(
                fd.as_raw_fd(),
                &mut off,
                w.as_raw_fd(),
                std::ptr::null_mut(),
                len - done,
                0,
            )
        };
        if n <= 0 {
            return Err(std::io::Error::last_os_error());
        }
        done += n as usize;
    }
    drop(w);
    let mut out = Vec::new();
    std::fs::File::from(r).read_to_end(&mut out)?;
    Ok((out, flags & libc::O_DIRECT != 0))
}

/// A block device's stored pieces (what `raidlab serve` splices to a
/// client) come from the device with O_DIRECT when the member is direct (a
/// block device's default) and the piece is whole logical blocks; a piece
/// that is not is left to `read_at` (`Ok(false)`), so no member data enters
/// the page cache. A member opened buffered splices from the page cache.
/// All give the bytes written.
#[test]
fn a_block_device_serves_stored_pieces_from_the_device() {
    use std::process::Command;
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 || !Path::new("/dev/loop-control").exists() {
        raidlab_core::skip::skip_or_fail(
            "direct stored reads: loop devices need root and /dev/loop-control",
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
    let data: Vec<u8> = (0..4u32 << 20).map(|i| (i * 31 + i / 4091) as u8).collect();
    FileVolume::open(Path::new(&lo), OpenMode::ReadWrite)
        .unwrap()
        .write_at(&data, 0)
        .unwrap();
    // (offset, length, opened as, spliced from a direct descriptor or not
    // spliced at all). A loop device's logical blocks are 512 bytes.
    for (at, len, io, direct) in [
        (0u64, 1usize << 20, IoMode::Direct, Some(true)),
        (12 << 10, 256 << 10, IoMode::Direct, Some(true)),
        (512, 64 << 10, IoMode::Direct, Some(true)),
        (4096, 1000, IoMode::Direct, None),
        (0, 1 << 20, IoMode::Buffered, Some(false)),
        (4096, 1000, IoMode::Buffered, Some(false)),
    ] {
        let v = FileVolume::open_io(Path::new(&lo), OpenMode::ReadOnly, Some(io)).unwrap();
        let mut got = Vec::new();
        let mut was_direct = None;
        let mut sink = |fd: std::os::fd::BorrowedFd<'_>, o: u64, k: usize| {
            let (bytes, d) = splice_out(fd, o, k)?;
            got.extend_from_slice(&bytes);
            was_direct = Some(d);
            Ok(())
        };
        let spliced = v.read_stored(at, len as u64, &mut sink).unwrap();
        assert_eq!(spliced, direct.is_some(), "{len} bytes at {at} ({io})");
        assert_eq!(
            was_direct, direct,
            "{len} bytes at {at} ({io}): direct read or not"
        );
        if !spliced {
            got = vec![0u8; len];
            v.read_at(&mut got, at).unwrap();
        }
        assert!(
            got == data[at as usize..at as usize + len],
            "{len} bytes at {at} ({io}): the stored piece differs from what was written"
        );
    }
}
