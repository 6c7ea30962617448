//! How the monitor sees the arrays it watches at one poll: every server in
//! the run directory is asked what it serves (`list`) and, for each array,
//! its `detail --json` and its cache's `cache detail --json`; a named array
//! no server serves is assembled read-only from its members. It decides
//! which arrays are watched and how an answer becomes a `Snapshot`. It must
//! never write anything: no member opened for writing, and no stale control
//! socket removed (the verbs that own the sockets do that).

use super::config::Named;
use super::events::{CacheSnapshot, Snapshot};
use super::list::Served;
use crate::control::{self, Command};
use anyhow::{anyhow, Context, Result};
use raidlab_devices::OpenMode;
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// One running server and what it said it serves.
pub struct Server {
    pub socket: PathBuf,
    pub served: Served,
}

/// Says a problem once per thing it is about, on stderr, and again only
/// after the thing worked in between.
#[derive(Default)]
pub struct Warnings {
    said: HashSet<String>,
}

impl Warnings {
    pub fn warn(&mut self, key: &str, what: &str) {
        if self.said.insert(key.to_string()) {
            eprintln!("raidlab monitor: {what}");
        }
    }

    pub fn clear(&mut self, key: &str) {
        self.said.remove(key);
    }
}

/// Every server in the run directory that answers; the others are skipped
/// with a warning (a `.ctl` left by a killed server, a server too old to
/// answer `list`).
pub fn servers(warn: &mut Warnings) -> Vec<Server> {
    let dir = control::run_dir();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return vec![];
    };
    let mut sockets: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().and_then(|x| x.to_str()) == Some("ctl"))
        .collect();
    sockets.sort();
    let mut out = vec![];
    for socket in sockets {
        let key = socket.display().to_string();
        if std::os::unix::net::UnixStream::connect(&socket).is_err() {
            warn.warn(
                &key,
                &format!("nobody listens on the control socket {key} (left by a server that was killed?): skipped"),
            );
            continue;
        }
        let asked =
            control::call(&socket, &[], Command::List, &mut |_| {}).and_then(|(text, _)| {
                serde_json::from_str::<Served>(&text)
                    .context("its answer to `list` does not parse (a server of another version?)")
            });
        match asked {
            Ok(served) => {
                warn.clear(&key);
                out.push(Server { socket, served });
            }
            Err(e) => warn.warn(&key, &format!("skipping the server at {key}: {e:#}")),
        }
    }
    out
}

/// Where one watched array is, this poll.
pub enum Source<'a> {
    Served {
        server: &'a Server,
        members: &'a [String],
        cache: Option<&'a str>,
    },
    /// Not served: assembled read-only from these members.
    Offline(&'a [PathBuf]),
}

/// The served export holding one of `named`'s members, if a server serves it.
pub fn find<'a>(servers: &'a [Server], named: &Named) -> Option<(&'a Server, usize)> {
    let want = control::member_paths(&named.members);
    servers.iter().find_map(|s| {
        s.served
            .exports
            .iter()
            .position(|e| e.members.iter().any(|m| want.contains(m)))
            .map(|i| (s, i))
    })
}

/// This poll's snapshot of one array.
pub fn snapshot(source: &Source) -> Result<Snapshot> {
    match source {
        Source::Served {
            server,
            members,
            cache,
        } => {
            let paths: Vec<PathBuf> = members.iter().map(PathBuf::from).collect();
            let (text, _) = control::call(
                &server.socket,
                &paths,
                Command::Detail { json: true },
                &mut |_| {},
            )?;
            let v: Value =
                serde_json::from_str(&text).context("the server's detail does not parse")?;
            let mut snap = from_detail(&v, Path::new(&server.served.cwd))?;
            snap.served = true;
            if let Some(dev) = cache {
                let (text, _) = control::call_cache(
                    &server.socket,
                    Path::new(dev),
                    Command::CacheDetail { json: true },
                    &mut |_| {},
                )?;
                let c: Value = serde_json::from_str(&text)
                    .context("the server's cache detail does not parse")?;
                snap.cache = cache_from_detail(&c, dev);
            }
            Ok(snap)
        }
        Source::Offline(members) => {
            let devices = crate::open::open_members(members, OpenMode::ReadOnly)?;
            let asm = crate::open::assemble(devices)?;
            let text = crate::cmd::info::render_detail(&asm, None, true)?;
            let v: Value = serde_json::from_str(&text)?;
            let cwd = std::env::current_dir().unwrap_or_default();
            from_detail(&v, &cwd)
        }
    }
}

/// A snapshot from `detail --json` (member paths made absolute against `cwd`,
/// the directory of whoever named them).
pub fn from_detail(v: &Value, cwd: &Path) -> Result<Snapshot> {
    let field = |k: &str| {
        v.get(k)
            .ok_or_else(|| anyhow!("`detail --json` has no {k:?}: {v}"))
    };
    let members = field("members")?
        .as_array()
        .ok_or_else(|| anyhow!("`detail --json`'s members are not a list"))?
        .iter()
        .map(|m| {
            let dev = m["device"].as_str().unwrap_or_default();
            let dev = if Path::new(dev).is_relative() {
                cwd.join(dev).display().to_string()
            } else {
                dev.to_string()
            };
            (dev, m["state"].as_str().unwrap_or("unknown").to_string())
        })
        .collect();
    // mdstat shows one figure: the rebuild's, else a resync/check/repair's.
    let percent = |t: &Value| -> Option<u8> {
        if t["running"].as_bool() != Some(true) {
            return None;
        }
        let (done, total) = (t["done"].as_u64()?, t["total"].as_u64()?);
        Some((done.saturating_mul(100) / total.max(1)).min(99) as u8)
    };
    let served = &v["served"];
    let progress = percent(&served["rebuild"]).or_else(|| percent(&served["scrub"]));
    Ok(Snapshot {
        uuid: field("uuid")?.as_str().unwrap_or_default().to_string(),
        degraded: field("health")?.as_str() != Some("optimal"),
        members,
        progress,
        cache: None,
        served: false,
    })
}

/// A cache's figures from `cache detail --json`; a detached cache holds
/// nothing and has no target to exceed. A failed one is `state: failed`.
fn cache_from_detail(c: &Value, device: &str) -> Option<CacheSnapshot> {
    if c["state"].as_str() == Some("detached") {
        return None;
    }
    Some(CacheSnapshot {
        device: device.to_string(),
        dirty_blocks: c["dirty_blocks"].as_u64()?,
        cache_blocks: c["cache_blocks"].as_u64()?,
        dirty_target_pct: c["dirty_target_pct"].as_u64()?.min(100) as u8,
        failed: c["state"].as_str() == Some("failed"),
    })
}
