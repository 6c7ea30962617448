//! The control socket of `raidlab serve`: how the management verbs reach an
//! array that a server is serving, and the messages they exchange.
//!
//! Each server listens on one Unix socket in the run directory
//! (`$RAIDLAB_RUN_DIR`, else `$XDG_RUNTIME_DIR/raidlab`, else
//! `/tmp/raidlab-UID`, made private to the user). A verb given an array's
//! members asks every server there whether it serves one of them; a socket
//! nobody listens on any more (a server killed) is removed. One request per
//! connection, one JSON object per line each way: the request, then progress
//! lines and one final `done` or `error`.
//!
//! A cache verb names the cache by its device instead (`cache`), and for the
//! verbs that also take the origin, the origin as the user gave it, which the
//! server checks against the one it serves.
//!
//! Never trusts a peer's message further than its shape: a request that does
//! not parse gets an error reply, and the members named are only matched.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One management request, for the array one of `members` belongs to.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Absolute member paths as the user named them (`missing` left out).
    pub members: Vec<String>,
    /// For a cache verb: the cache device's absolute path (then `members` is
    /// empty and the command is `Find` or one of the `Cache...` ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<String>,
    pub command: Command,
}

/// The origin a cache verb was given, for the server to check against the
/// one it serves: absolute paths, and whether they name a plain file or device.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheOriginNamed {
    pub paths: Vec<String>,
    pub plain: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "verb", deny_unknown_fields)]
pub enum Command {
    /// Does this server serve the array? (Answered `done`, exit 0, or an error.)
    Find,
    Detail {
        json: bool,
    },
    Fail {
        member: String,
        wait: bool,
        max_rate: Option<u64>,
    },
    Remove {
        member: String,
    },
    Add {
        new: String,
        force: bool,
        rebuild: bool,
        max_rate: Option<u64>,
        /// Only a re-add (md's, bitmap-based); refused when not possible.
        #[serde(default)]
        re_add: bool,
    },
    Replace {
        old: String,
        new: String,
        force: bool,
        rebuild: bool,
        max_rate: Option<u64>,
    },
    Rebuild {
        max_rate: Option<u64>,
        json: bool,
    },
    Check {
        repair: bool,
        json: bool,
        max_rate: Option<u64>,
    },
    /// A reshape of the served array (`grow` with a restripe, or
    /// `--continue`), walked while it serves.
    Grow {
        raid_devices: Option<usize>,
        level: Option<String>,
        chunk_bytes: Option<u64>,
        layout: Option<String>,
        /// A shrink's array size (`--array-size`).
        array_bytes: Option<u64>,
        /// Absolute paths of the devices for the new slots.
        add: Vec<String>,
        force: bool,
        continue_reshape: bool,
        max_rate: Option<u64>,
        json: bool,
        /// `--bitmap internal` (true) or `none` (false), instead of a
        /// restripe.
        #[serde(default)]
        bitmap: Option<bool>,
        #[serde(default)]
        bitmap_chunk: Option<u64>,
        /// `--size`: `max` or a component size in bytes, instead of a
        /// restripe; the new space resynced in the server unless
        /// `assume_clean`.
        #[serde(default)]
        size: Option<String>,
        #[serde(default)]
        assume_clean: bool,
        /// `--consistency-policy` (resync, ppl, bitmap, journal), instead of
        /// a restripe.
        #[serde(default)]
        consistency_policy: Option<String>,
        /// `--array-size` without a restripe: `max` or bytes, what the
        /// server exposes from now on (md's external size, kept while it
        /// serves), alone or set with `size`'s change.
        #[serde(default)]
        array_size: Option<String>,
        /// `--backup-file` (an absolute path) of a metadata 0.90 restripe
        /// over the same members or onto fewer members: the server makes
        /// it and walks the restripe through it.
        #[serde(default)]
        backup_file: Option<String>,
    },
    /// Stop the whole server (every export), as SIGTERM does.
    Stop,
    CacheDetail {
        json: bool,
    },
    CacheStats {
        json: bool,
        reset: bool,
    },
    CacheFlush {
        origin: CacheOriginNamed,
        json: bool,
    },
    CacheSet {
        origin: CacheOriginNamed,
        /// writeback, writethrough or writearound.
        mode: Option<String>,
        sequential_cutoff: Option<u64>,
        dirty_target: Option<u8>,
        clean_rate: Option<u64>,
        promote_threshold: Option<u32>,
        json: bool,
    },
    CacheDetach {
        origin: CacheOriginNamed,
        json: bool,
    },
    /// What this server serves: each export's name, members and cache device
    /// (for `raidlab monitor`; answered for the whole server, members ignored).
    List,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reply {
    Progress { what: String, done: u64, total: u64 },
    Done { stdout: String, exit: u8 },
    Error { message: String },
}

/// Where servers put their control sockets.
pub fn run_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("RAIDLAB_RUN_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    per_user("raidlab", "")
}

/// `name` + `ext` in the user's runtime directory, or, without one, in /tmp
/// with the user id in the name (`/tmp/name-UID.ext`), so users do not collide.
pub fn per_user(name: &str, ext: &str) -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !d.is_empty() => Path::new(&d).join(format!("{name}{ext}")),
        // SAFETY: getuid has no preconditions and cannot fail.
        _ => PathBuf::from(format!("/tmp/{name}-{}{ext}", unsafe { libc::getuid() })),
    }
}

/// The control socket path for this server process (the directory is made).
pub fn socket_path() -> Result<PathBuf> {
    let dir = run_dir();
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot make the run directory {}", dir.display()))?;
    // Other users must not reach the control sockets: they can fail members.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("cannot make {} private", dir.display()))?;
    Ok(dir.join(format!("serve-{}.ctl", std::process::id())))
}

/// Member paths as a server compares them: absolute, links resolved where the
/// file exists; the word `missing` left out.
pub fn member_paths(members: &[PathBuf]) -> Vec<String> {
    members
        .iter()
        .filter(|p| !crate::open::is_missing(p))
        .map(|p| absolute(p).display().to_string())
        .collect()
}

pub fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p)
        .or_else(|_| std::path::absolute(p))
        .unwrap_or_else(|_| p.to_path_buf())
}

/// How long a verb waits for a `raidlab serve` that holds the members but
/// does not answer yet: it locks and starts its arrays before it listens on
/// its control socket, which takes seconds on a loaded machine.
const STARTING_WAIT: Duration = Duration::from_secs(15);

/// A server that serves the array of these members, if one runs. A server
/// still starting (a member locked by `raidlab serve`, no control socket
/// answering for it yet) is waited for, up to [`STARTING_WAIT`], so that a
/// verb run right after `raidlab serve` reaches it instead of finding the
/// members locked.
pub fn find(members: &[PathBuf]) -> Result<Option<PathBuf>> {
    let paths = member_paths(members);
    if paths.is_empty() {
        return Ok(None);
    }
    let t = std::time::Instant::now();
    loop {
        if let Some(server) = find_with(&paths, None)? {
            return Ok(Some(server));
        }
        if t.elapsed() >= STARTING_WAIT || !paths.iter().any(|m| held_by_serve(Path::new(m))) {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether a `raidlab serve` process holds `member`'s writer lock.
fn held_by_serve(member: &Path) -> bool {
    raidlab_devices::lock::writer_of(member).is_some_and(|h| h.is_raidlab_serve())
}

/// A server that serves the cache on the device `cache`, if one runs.
pub fn find_cache(cache: &Path) -> Result<Option<PathBuf>> {
    find_with(&[], Some(absolute(cache).display().to_string()))
}

fn find_with(paths: &[String], cache: Option<String>) -> Result<Option<PathBuf>> {
    let Ok(entries) = std::fs::read_dir(run_dir()) else {
        return Ok(None);
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.extension().and_then(|x| x.to_str()) != Some("ctl") {
            continue;
        }
        let Ok(stream) = UnixStream::connect(&p) else {
            // Left by a server that was killed: nobody listens any more.
            let _ = std::fs::remove_file(&p);
            continue;
        };
        let req = Request {
            members: paths.to_vec(),
            cache: cache.clone(),
            command: Command::Find,
        };
        if let Ok(Reply::Done { .. }) = exchange(stream, &req, &mut |_| {}) {
            return Ok(Some(p));
        }
    }
    Ok(None)
}

/// Send `cmd` to the server at `socket`; progress lines go to `progress`.
/// Returns the server's output and exit status, or its error.
pub fn call(
    socket: &Path,
    members: &[PathBuf],
    command: Command,
    progress: &mut dyn FnMut(&Reply),
) -> Result<(String, u8)> {
    let req = Request {
        members: member_paths(members),
        cache: None,
        command,
    };
    call_request(socket, &req, progress)
}

/// Send a cache verb for the cache on the device `cache` to the server at `socket`.
pub fn call_cache(
    socket: &Path,
    cache: &Path,
    command: Command,
    progress: &mut dyn FnMut(&Reply),
) -> Result<(String, u8)> {
    let req = Request {
        members: vec![],
        cache: Some(absolute(cache).display().to_string()),
        command,
    };
    call_request(socket, &req, progress)
}

fn call_request(
    socket: &Path,
    req: &Request,
    progress: &mut dyn FnMut(&Reply),
) -> Result<(String, u8)> {
    let stream = UnixStream::connect(socket)
        .with_context(|| format!("cannot reach the server at {}", socket.display()))?;
    match exchange(stream, req, progress)? {
        Reply::Done { stdout, exit } => Ok((stdout, exit)),
        Reply::Error { message } => bail!("{message}"),
        Reply::Progress { .. } => bail!("the server ended its reply early"),
    }
}

fn exchange(stream: UnixStream, req: &Request, progress: &mut dyn FnMut(&Reply)) -> Result<Reply> {
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    let mut w = stream.try_clone()?;
    let mut line = serde_json::to_string(req)?;
    line.push('\n');
    w.write_all(line.as_bytes())?;
    let mut r = BufReader::new(stream);
    loop {
        let mut l = String::new();
        if r.read_line(&mut l)? == 0 {
            bail!("the server closed the connection without an answer (did it stop?)");
        }
        let reply: Reply = serde_json::from_str(&l)
            .with_context(|| format!("the server's reply does not parse: {}", l.trim()))?;
        match reply {
            Reply::Progress { .. } => progress(&reply),
            other => return Ok(other),
        }
    }
}

/// Read one request line (at most 64 KiB: a request names a few paths).
pub fn read_request(stream: &UnixStream) -> Result<Request> {
    use std::io::Read;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut r = BufReader::new(stream.take(64 << 10));
    let mut l = String::new();
    r.read_line(&mut l)?;
    if !l.ends_with('\n') {
        bail!("the request is not one line of at most 64 KiB");
    }
    serde_json::from_str(&l).context("the request does not parse")
}

/// Write one reply line.
pub fn send(mut stream: &UnixStream, reply: &Reply) -> std::io::Result<()> {
    let mut line = serde_json::to_string(reply).map_err(std::io::Error::other)?;
    line.push('\n');
    stream.write_all(line.as_bytes())
}
