//! Advisory locks on member files and devices: a writer takes an exclusive
//! `flock`, a reader a shared one, so two raidlab processes never write one
//! member at once; a refused lock names the process holding it when
//! /proc/locks tells. A lock held only for a moment is waited for (up to
//! [`LOCK_WAIT`]): a process that is exiting, or a child another process
//! forked while it had the member open, which holds the lock until it execs.

use raidlab_core::{Error, ErrorKind, Op, Result};
use std::fs::File;
use std::os::unix::fs::MetadataExt;

/// How long a conflicting lock is waited for before the member is refused.
pub(crate) const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Lock `file` (named `name`), exclusive for a writer; refused when another
/// process holds a conflicting lock for longer than [`LOCK_WAIT`].
pub(crate) fn lock(
    file: &File,
    name: &str,
    exclusive: bool,
    meta: &std::fs::Metadata,
) -> Result<()> {
    use std::os::fd::AsRawFd;
    let how = if exclusive {
        libc::LOCK_EX
    } else {
        libc::LOCK_SH
    } | libc::LOCK_NB;
    let waited = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(5);
    loop {
        // SAFETY: flock on a file descriptor we own; no memory is touched.
        let rc = unsafe { libc::flock(file.as_raw_fd(), how) };
        if rc == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(Error::io(Op::Lock, name, err));
        }
        if waited.elapsed() >= LOCK_WAIT {
            break;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(200));
    }
    let holder = lock_holder(meta)
        .map(|h| format!(" by {h}"))
        .unwrap_or_default();
    Err(Error::new(
        ErrorKind::Busy,
        Op::Lock,
        format!(
            "the member is locked{holder}: another raidlab process is using this array; stop it first"
        ),
    )
    .on_device(name))
}

/// Find which process holds a flock on this inode, from /proc/locks.
fn lock_holder(meta: &std::fs::Metadata) -> Option<String> {
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let dev = meta.dev();
    // /proc/locks prints MAJ:MIN:INODE with major and minor in hex.
    let major = libc::major(dev);
    let minor = libc::minor(dev);
    let wanted = format!("{major:02x}:{minor:02x}:{}", meta.ino());
    for line in locks.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"
        let Some(pos) = fields.iter().position(|f| *f == "FLOCK") else {
            continue;
        };
        let (Some(pid), Some(id)) = (fields.get(pos + 3), fields.get(pos + 4)) else {
            continue;
        };
        if id.eq_ignore_ascii_case(&wanted) {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
                .ok()
                .map(|c| {
                    String::from_utf8_lossy(&c)
                        .split('\0')
                        .filter(|s| !s.is_empty())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            return Some(if cmd.is_empty() {
                format!("process {pid}")
            } else {
                format!("process {pid} ({cmd})")
            });
        }
    }
    None
}
