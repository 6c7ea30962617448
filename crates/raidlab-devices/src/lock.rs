//! Advisory locks on member files and devices: a writer takes an exclusive
//! `flock`, a reader a shared one, so two raidlab processes never write one
//! member at once; a refused lock names the process holding it when
//! /proc/locks tells. A lock held only for a moment is waited for (up to
//! `LOCK_WAIT`): a process that is exiting, or a child another process
//! forked while it had the member open, which holds the lock until it execs.
//! [`writer_of`] tells, without locking, which process holds a member for
//! writing (so a verb can wait for a `raidlab serve` that is starting).

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
    let how = if exclusive {
        libc::LOCK_EX
    } else {
        libc::LOCK_SH
    };
    let waited = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(5);
    loop {
        if try_flock(file, how).map_err(|e| Error::io(Op::Lock, name, e))? {
            return Ok(());
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

/// `flock(how | LOCK_NB)` on `file`: `Ok(false)` when another open file holds
/// a conflicting lock.
fn try_flock(file: &File, how: libc::c_int) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a file descriptor we own; no memory is touched.
    if unsafe { libc::flock(file.as_raw_fd(), how | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(err)
    }
}

/// The process that holds a writer's (exclusive) lock on the member named
/// `member` (a file, a block device, or `IMAGE@N`, whose image is locked),
/// when another one does. `None` when readers may use it, when it cannot be
/// opened, or when /proc/locks does not name the holder. Opens the member
/// read-only and takes nothing: a shared lock that is granted is let go at
/// once.
pub fn writer_of(member: &std::path::Path) -> Option<Holder> {
    let path = match crate::partition::MemberPath::parse(member) {
        crate::partition::MemberPath::Whole(p) => p,
        crate::partition::MemberPath::Partition { image, .. } => image,
    };
    let file = File::open(&path).ok()?;
    // Granted (or failed for another reason): no writer; closing the file
    // lets the shared lock go.
    if try_flock(&file, libc::LOCK_SH).unwrap_or(true) {
        return None;
    }
    lock_holder(&file.metadata().ok()?)
}

/// A process holding a member's lock, as /proc tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    /// Its command line, arguments joined by spaces (empty if unreadable).
    pub command: String,
}

impl Holder {
    /// Whether it is `raidlab serve` (whatever the binary's directory).
    pub fn is_raidlab_serve(&self) -> bool {
        let mut words = self.command.split(' ');
        let program = words.next().unwrap_or_default();
        if !std::path::Path::new(program)
            .file_name()
            .is_some_and(|n| n == "raidlab")
        {
            return false;
        }
        // Global options may come before the verb (`raidlab --member-io
        // threads serve ...`); each of raidlab's takes a value, as the next
        // word or after `=`.
        while let Some(w) = words.next() {
            if !w.starts_with('-') {
                return w == "serve";
            }
            if !w.contains('=') {
                words.next();
            }
        }
        false
    }
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.command.is_empty() {
            write!(f, "process {}", self.pid)
        } else {
            write!(f, "process {} ({})", self.pid, self.command)
        }
    }
}

/// Find which process holds a flock on this inode, from /proc/locks.
fn lock_holder(meta: &std::fs::Metadata) -> Option<Holder> {
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
            return Some(Holder {
                pid: pid.parse().ok()?,
                command: cmd,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FileVolume, OpenMode};

    #[test]
    fn the_writer_is_named_and_readers_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m0");
        let w = FileVolume::create_sparse(&p, 1 << 20).unwrap();
        let h = writer_of(&p).expect("a member open for writing has a writer");
        assert_eq!(h.pid, std::process::id());
        assert!(!h.is_raidlab_serve(), "{h}");
        drop(w);
        assert_eq!(writer_of(&p), None, "let go");
        let r = FileVolume::open(&p, OpenMode::ReadOnly).unwrap();
        assert_eq!(writer_of(&p), None, "a reader is no writer");
        // The probe took nothing: a writer can still have it once the reader goes.
        drop(r);
        FileVolume::open(&p, OpenMode::ReadWrite).unwrap();
        assert_eq!(writer_of(&dir.path().join("absent")), None);
    }

    #[test]
    fn raidlab_serve_is_told_by_its_program_and_verb() {
        let h = |c: &str| Holder {
            pid: 1,
            command: c.into(),
        };
        assert!(h("/usr/local/bin/raidlab serve --socket s m0 m1").is_raidlab_serve());
        assert!(h("raidlab serve").is_raidlab_serve());
        assert!(h("/x/raidlab --member-io threads serve --direct m0").is_raidlab_serve());
        assert!(h("raidlab --member-io=uring serve m0").is_raidlab_serve());
        assert!(!h("raidlab --member-io threads rebuild m0").is_raidlab_serve());
        assert!(!h("raidlab --member-io serve").is_raidlab_serve());
        assert!(!h("/usr/local/bin/raidlab rebuild m0 m1").is_raidlab_serve());
        assert!(!h("/usr/bin/raidlab-old serve").is_raidlab_serve());
        assert!(!h("").is_raidlab_serve());
        assert_eq!(h("").to_string(), "process 1");
    }
}
