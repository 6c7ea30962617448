//! A Unix socket's path appears only once something listens on it.
//!
//! `UnixListener::bind` makes the path at bind(2) and listens a moment later;
//! a client that sees the path in between is refused (`ECONNREFUSED`), and
//! raidlab's own verbs take a refused control socket for one a killed server
//! left behind and remove it. So the socket is bound and listening under a
//! private name in the same directory and renamed onto the path asked for:
//! rename(2) is atomic within a directory, and a socket is reached through
//! its inode, so the path goes from absent to listening in one step.
//!
//! Decides only how a listening socket is put at a path; never removes what
//! is already there (the callers decide whether a file there is stale).

use std::io;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Listen on `path`, which appears only when the socket already listens.
pub fn bind_listening(path: &Path) -> io::Result<UnixListener> {
    if path.file_name().is_none() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a socket path must end in a file name",
        ));
    }
    // Same directory (rename must not cross file systems), a name of this
    // process and bind so two binds never share it, and short: a socket path
    // has at most 107 bytes.
    static BINDS: AtomicU64 = AtomicU64::new(0);
    let tmp = path.with_file_name(format!(
        ".{}.{}",
        std::process::id(),
        BINDS.fetch_add(1, Ordering::Relaxed)
    ));
    let listener = match UnixListener::bind(&tmp) {
        Ok(l) => l,
        // The private name made the path too long where the asked-for one
        // is not: bind it directly (the window is back, but it works).
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => return UnixListener::bind(path),
        Err(e) => return Err(e),
    };
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// A watcher that connects the moment the path appears is never refused.
    /// Seen failing with `UnixListener::bind` in place of `bind_listening`
    /// (the bind-then-listen window), so it can fail.
    #[test]
    fn the_path_appears_only_when_the_socket_listens() {
        let dir = tempfile::tempdir().unwrap();
        let mut refused = 0;
        for round in 0..400 {
            let p = dir.path().join(format!("s{round}"));
            let done = Arc::new(AtomicBool::new(false));
            let watcher = {
                let (p, done) = (p.clone(), done.clone());
                std::thread::spawn(move || loop {
                    match UnixStream::connect(&p) {
                        Ok(_) => return 0,
                        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => return 1,
                        Err(_) if done.load(Ordering::SeqCst) => return 0,
                        Err(_) => std::hint::spin_loop(),
                    }
                })
            };
            let l = bind_listening(&p).unwrap();
            done.store(true, Ordering::SeqCst);
            refused += watcher.join().unwrap();
            drop(l);
        }
        assert_eq!(refused, 0, "connections refused while the path existed");
        // Nothing private is left beside the sockets.
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn a_path_in_a_missing_directory_is_an_error_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("gone").join("s.sock");
        assert!(bind_listening(&p).is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
