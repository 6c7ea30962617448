//! What reaches the exports from outside the NBD protocol while serving: the
//! control socket (the array verbs and cache verbs sent to the server), the
//! monitor, the status page and the metrics endpoint, and which served
//! arrays and caches each one sees (an array under a cache too).
//!
//! Must never change an export itself: it hands the live arrays and caches
//! to `cmd/live.rs`, `cmd/http` and `metrics`, which act through them.

use super::{Served, STOP};
use crate::cmd::cache_live::{ManagedCache, ServedOrigin};
use crate::cmd::live::Managed;
use anyhow::{Context, Result};
use raidlab_nbd::Server;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::Arc;

/// What the metrics endpoint reports on: every served array (one under a
/// cache too), every cache, the NBD server's counters.
pub(super) fn metrics_sources(served: &[Served], server: &Server) -> crate::metrics::Sources {
    crate::metrics::Sources {
        arrays: served
            .iter()
            .filter_map(managed_array)
            .map(|m| (m.export, m.live))
            .collect(),
        caches: served
            .iter()
            .filter_map(|s| match s {
                Served::Cache {
                    name,
                    device,
                    stack,
                    ..
                } => Some(crate::metrics::CacheSource {
                    export: name.clone(),
                    device: crate::control::absolute(device).display().to_string(),
                    cached: stack.cached().clone(),
                }),
                _ => None,
            })
            .collect(),
        nbd: Some(server.stats_reader()),
    }
}

/// The control socket for live management of the arrays served, with its
/// threads (they end when the server stops).
pub(super) type Control = (PathBuf, Vec<std::thread::JoinHandle<Option<UnixListener>>>);

/// The array a served volume is or stands on, for the array verbs.
fn managed_array(s: &Served) -> Option<Managed> {
    match s {
        Served::Array {
            name,
            live,
            writable,
            io,
            io_modes,
            ..
        } => Some(Managed {
            export: name.clone(),
            live: live.clone(),
            writable: *writable,
            io: *io,
            io_modes: io_modes.clone(),
        }),
        Served::Plain { .. } => None,
        Served::Cache { origin, .. } => managed_array(origin),
    }
}

pub(super) fn start_control(
    served: &[Served],
    events: &Arc<crate::cmd::http::Events>,
    http: Option<crate::cmd::http::Bound>,
) -> Result<Option<Control>> {
    let managed: Vec<Managed> = served.iter().filter_map(managed_array).collect();
    let caches: Vec<ManagedCache> = served
        .iter()
        .filter_map(|s| match s {
            Served::Cache {
                name,
                device,
                stack,
                origin,
                origin_file,
                origin_label,
                ..
            } => Some(ManagedCache {
                export: name.clone(),
                device: crate::control::absolute(device).display().to_string(),
                cached: stack.cached().clone(),
                origin: match (&**origin, origin_file) {
                    (Served::Array { live, .. }, _) => ServedOrigin::Array(live.clone()),
                    (_, Some(f)) => {
                        ServedOrigin::File(crate::control::absolute(f).display().to_string())
                    }
                    _ => return None,
                },
                origin_label: origin_label.clone(),
            }),
            _ => None,
        })
        .collect();
    if managed.is_empty() && caches.is_empty() {
        return Ok(None);
    }
    let managed = Arc::new(managed);
    let caches = Arc::new(caches);
    let path = crate::control::socket_path()?;
    // Our own pid's name: anything there is left from an earlier process.
    let _ = std::fs::remove_file(&path);
    let listener = crate::socket_file::bind_listening(&path)
        .with_context(|| format!("cannot listen on the control socket {}", path.display()))?;
    let log: Arc<dyn Fn(&str) + Send + Sync> = {
        let e = events.clone();
        Arc::new(move |m: &str| e.say(m))
    };
    let page = http.map(|h| {
        h.start(
            managed.clone(),
            caches.clone(),
            events.clone(),
            path.clone(),
            &STOP,
        )
    });
    let (m1, l1) = (managed.clone(), log.clone());
    let control = std::thread::spawn(move || {
        crate::cmd::live::serve_control(&listener, m1, caches, &STOP, l1);
        Some(listener)
    });
    let monitor = std::thread::spawn(move || {
        crate::cmd::live::monitor(managed, &STOP, log);
        if let Some(p) = page {
            let _ = p.join();
        }
        None
    });
    eprintln!(
        "raidlab: management: `raidlab detail|fail|remove|add|replace|rebuild|check|repair|stop` with the array's members act on the served array, `raidlab cache detail|stats|flush|set|detach --cache DEV` on the served cache (control socket {})",
        path.display()
    );
    Ok(Some((path, vec![control, monitor])))
}
