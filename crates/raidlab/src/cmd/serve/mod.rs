//! `raidlab serve`: assemble arrays (or open plain files and block devices) and
//! serve each as a named NBD export until SIGTERM/SIGINT or the client-less end of
//! time. On a stop, open connections are drained (requests already read are
//! finished and answered), every array is flushed and marked clean.
//!
//! While serving, each writable array is marked dirty (md's "active") while
//! writes are pending and clean again 200 ms after the last (md's safe mode,
//! `raidlab_raid::live`), so a crash or kill -9 during writes is seen at the
//! next start as an unclean stop, and `serve` resyncs the array before serving
//! it again (the resync covers what md's consistency policy says: everything,
//! or the dirty regions of the write-intent bitmap).
//!
//! An export may put a raidlab cache (`raidlab cache create`) in front of its
//! array or file: the origin is opened and started as it would be served
//! alone, then the cache over it, with background cleaning while it serves; a
//! stop shuts the cache down cleanly before the origin.
//!
//! The NBD protocol itself lives in raidlab-nbd; this module only wires volumes
//! and sockets together and reports.
//!
//! Split along what each part decides: `config` (what is asked, checked
//! before anything starts), `listen` (where clients connect), `open` (each
//! export's stack opened and started), `management` (the control socket,
//! status page and metrics), `stop` (each export's clean end); `run` here
//! holds their order.

mod config;
mod listen;
mod management;
mod open;
mod stop;

use crate::cli::ServeArgs;
use anyhow::{bail, Context, Result};
use raidlab_cache::CacheStack;
use raidlab_core::size::format_size_approx;
use raidlab_core::Volume;
use raidlab_devices::{FileVolume, IoMode};
use raidlab_nbd::{Limits, Server};
use raidlab_raid::live::LiveArray;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Set by SIGINT or SIGTERM: stop serving, cleanly (a second signal exits
/// at once); the long runs started while serving watch it too.
static STOP: AtomicBool = AtomicBool::new(false);
/// Stops the metrics endpoint once the NBD listener has stopped.
static METRICS_STOP: AtomicBool = AtomicBool::new(false);

/// Each member of a served array, by name, with the I/O mode it was opened
/// in (grows as members are added while served).
pub type MemberIoModes = Arc<std::sync::Mutex<Vec<(String, IoMode)>>>;

/// One served volume and what it takes to stop it cleanly.
enum Served {
    Array {
        name: String,
        live: Arc<LiveArray>,
        was_clean: bool,
        writable: bool,
        /// The I/O mode asked for (members added later get it too), and
        /// the mode each member got, for `detail`.
        io: Option<IoMode>,
        io_modes: MemberIoModes,
    },
    Plain {
        volume: Arc<FileVolume>,
    },
    /// A cache in front of an array or a plain file (`origin`).
    Cache {
        name: String,
        device: PathBuf,
        /// The cache and its background cleaner (a writable cache's).
        stack: CacheStack<FileVolume, Arc<dyn Volume>>,
        origin: Box<Served>,
        origin_file: Option<PathBuf>,
        origin_label: String,
    },
}

pub fn run(a: ServeArgs) -> Result<ExitCode> {
    let config = config::from_args(&a)?;
    // SIGINT and SIGTERM (the `termination` feature) ask for a clean stop; a
    // second one exits at once, leaving arrays dirty for a resync at next start.
    // Installed before any socket is bound: a client (or systemd) that sees the
    // socket may signal at once, and the default action would kill serve with
    // its arrays marked dirty. A stop asked for while arrays start is honoured
    // as soon as they have started.
    ctrlc::set_handler(|| {
        if STOP.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
    })
    .context("cannot install the SIGINT/SIGTERM handler")?;
    // Before any array is opened: a bad address or a port in use stops here
    // with nothing written.
    let metrics = crate::metrics::bind(
        &a.metrics,
        config.metrics.as_deref(),
        config.metrics_allow_remote.unwrap_or(false),
    )?;
    // The status page's port is taken before any array is started, so a
    // port in use stops here with nothing written.
    let http = crate::cmd::http::options(&a)?;
    if http.is_some()
        && config
            .export
            .iter()
            .all(|e| e.members.is_empty() && e.cache.is_none())
    {
        bail!("--http shows arrays and caches, and this server serves neither (only plain files): nothing was started");
    }
    let http = http.map(crate::cmd::http::bind).transpose()?;
    // The NBD listeners too: a port in use or a bad certificate must stop
    // here, not after every array was started (marked dirty) and stopped.
    // Clients that connect while the arrays start wait in the backlog.
    let tls = listen::tls(&a, &config)?;
    let listeners = listen::bind(&a, &config, tls.as_ref().is_some_and(|t| t.require))?;

    // Every export is checked before any is started: starting an array
    // writes its superblocks, so a mistake in the third export must not leave
    // the first two started and dropped (marked dirty, resynced at next start).
    let mut served = Vec::new();
    let mut exports = Vec::new();
    let opened = config::check_exports(&config.export).and_then(|()| {
        config.export.iter().try_for_each(|e| {
            let (s, x) = open::open_export(e)?;
            served.push(s);
            exports.push(x);
            Ok(())
        })
    });
    if let Err(e) = opened {
        // Nobody will listen on the socket files made above.
        for p in &listeners.files {
            let _ = std::fs::remove_file(p);
        }
        // What could not be foreseen (a start refused, a device gone since
        // the check): the exports already started are stopped cleanly.
        stop::abandon(served);
        return Err(e);
    }
    let limits = Limits {
        max_connections: config.max_connections.unwrap_or(a.max_connections),
        max_inflight_bytes: a.max_inflight as usize,
        workers: a.workers,
        ..Limits::default()
    };
    for x in &exports {
        eprintln!(
            "raidlab: export {:?}: {} ({}{})",
            x.name,
            x.description,
            format_size_approx(x.volume.size()),
            if x.writable() { "" } else { ", read-only" }
        );
    }

    // Every line logged is also kept for the status page's recent events.
    let events = Arc::new(crate::cmd::http::Events::default());
    let log = {
        let e = events.clone();
        move |m: &str| e.say(m)
    };
    let control = match management::start_control(&served, &events, http) {
        Ok(c) => c,
        Err(e) => {
            for p in &listeners.files {
                let _ = std::fs::remove_file(p);
            }
            stop::abandon(served);
            return Err(e);
        }
    };
    let mut server =
        Server::new(exports, limits, Box::new(log.clone())).with_zero_copy(!a.copy_reads);
    if let Some(t) = tls {
        server = server.with_tls(t);
    }
    let metrics = match metrics {
        Some(m) => match m.start(management::metrics_sources(&served, &server), &METRICS_STOP) {
            Ok(t) => Some(t),
            Err(e) => {
                drop(server);
                for p in &listeners.files {
                    let _ = std::fs::remove_file(p);
                }
                stop::abandon(served);
                return Err(e);
            }
        },
        None => None,
    };
    for line in &listeners.said {
        eprintln!("{line}");
    }
    let served_result = raidlab_nbd::listen::run(&server, &listeners.listeners, &STOP, &log);
    METRICS_STOP.store(true, Ordering::SeqCst);
    if let Some(t) = metrics {
        let _ = t.join();
    }
    eprintln!("raidlab: stopping: connections drained, flushing and marking arrays clean");
    drop(server);
    // The control socket stays bound (accepting nothing) until the arrays are
    // clean: `raidlab stop` waits for it to go.
    let control = control.map(|(path, threads)| {
        let listeners: Vec<_> = threads
            .into_iter()
            .filter_map(|t| t.join().ok().flatten())
            .collect();
        (path, listeners)
    });
    for p in &listeners.files {
        let _ = std::fs::remove_file(p);
    }
    let mut failed = false;
    for s in served {
        if let Err(e) = stop::stop(s) {
            eprintln!("raidlab: error: {e:#}");
            failed = true;
        }
    }
    if let Some((path, listeners)) = control {
        drop(listeners);
        let _ = std::fs::remove_file(path);
    }
    served_result.context("serving stopped with an error")?;
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
