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

use crate::cli::ServeArgs;
use crate::cmd::cache_live::{ManagedCache, ServedOrigin};
use crate::cmd::live::Managed;
use crate::open::{open_members, open_members_io};
use anyhow::{bail, Context, Result};
use raidlab_cache::{CacheStack, StackOptions};
use raidlab_core::size::format_size_approx;
use raidlab_core::Volume;
use raidlab_devices::{FileVolume, IoMode, OpenMode};
use raidlab_nbd::listen::Listener;
use raidlab_nbd::tls::Tls;
use raidlab_nbd::{Export, Limits, Server};
use raidlab_raid::lifecycle::{self, StartOptions, Started, StartedParts};
use raidlab_raid::live::LiveArray;
use serde::Deserialize;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The NBD port registered with IANA.
pub const DEFAULT_PORT: u16 = 10809;

static STOP: AtomicBool = AtomicBool::new(false);
/// Stops the metrics endpoint once the NBD listener has stopped.
static METRICS_STOP: AtomicBool = AtomicBool::new(false);

/// A configuration file: where to listen and what to export.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    socket: Option<PathBuf>,
    tcp: Option<bool>,
    port: Option<u16>,
    listen: Option<String>,
    max_connections: Option<usize>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    tls_client_ca: Option<PathBuf>,
    tls_require: Option<bool>,
    /// The metrics endpoint's address, as --metrics.
    metrics: Option<String>,
    metrics_allow_remote: Option<bool>,
    #[serde(default)]
    export: Vec<ExportConfig>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExportConfig {
    name: String,
    /// Array members (any order; `missing` allowed as on the command line).
    #[serde(default)]
    members: Vec<PathBuf>,
    /// A plain file or block device, served as it is.
    file: Option<PathBuf>,
    #[serde(default)]
    read_only: bool,
    /// Start a degraded array that was not stopped cleanly.
    #[serde(default)]
    force: bool,
    /// A raidlab cache device in front of the array or file.
    cache: Option<PathBuf>,
    /// The stripe cache of a parity array: stripes held (0: off) and the hold
    /// time in milliseconds (defaults: 64 and 20, as on the command line).
    stripe_cache: Option<usize>,
    stripe_hold_ms: Option<u64>,
    /// md's journal mode: "write-through" (default) or "write-back".
    journal_mode: Option<String>,
    /// How the members (or the file) are opened: "direct" (O_DIRECT) or
    /// "buffered" (the page cache); default: block devices direct, files
    /// buffered (see `raidlab_devices::IoMode::default_for`).
    io: Option<String>,
}

impl ExportConfig {
    /// The I/O mode asked for, if any.
    fn io(&self) -> Result<Option<IoMode>> {
        self.io
            .as_deref()
            .map(|s| s.parse::<IoMode>())
            .transpose()
            .map_err(|e| anyhow::anyhow!("export {:?}: io = {e}", self.name))
    }

    /// The journal mode asked for (md's default, write-through, if none).
    fn journal_mode(&self) -> Result<raidlab_raid::journal::JournalMode> {
        self.journal_mode
            .as_deref()
            .map_or(
                Ok(Default::default()),
                raidlab_raid::journal::JournalMode::parse,
            )
            .map_err(|e| anyhow::anyhow!("export {:?}: journal_mode = {e}", self.name))
    }

    fn stripe_cache(&self) -> raidlab_raid::stripe_cache::StripeCacheConfig {
        let d = raidlab_raid::stripe_cache::StripeCacheConfig::default();
        raidlab_raid::stripe_cache::StripeCacheConfig {
            stripes: self.stripe_cache.unwrap_or(d.stripes),
            hold: self
                .stripe_hold_ms
                .map_or(d.hold, std::time::Duration::from_millis),
        }
    }
}

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
    let config = match &a.config {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read the configuration file {}", p.display()))?;
            let c: Config = toml::from_str(&text).map_err(|e| {
                anyhow::anyhow!(
                    "{}: {e}\n(see `raidlab serve --help` for the format)",
                    p.display()
                )
            })?;
            if !a.members.is_empty() || a.cache.is_some() {
                bail!("give exports either in --config or on the command line, not both (a cache in the file is an export's `cache = \"DEV\"`)");
            }
            let mut c = c;
            // --direct/--buffered: for the exports that do not say.
            for e in c.export.iter_mut().filter(|e| e.io.is_none()) {
                e.io = a.io.mode().map(|m| m.to_string());
            }
            c
        }
        None => {
            if a.plain && a.journal_mode == crate::cli::JournalModeArg::WriteBack {
                bail!("--journal-mode write-back is for an array with a write journal (RAID 4/5/6), not a --plain file");
            }
            if a.members.is_empty() {
                bail!("nothing to serve: give the members of an array, a file with --plain, or --config FILE");
            }
            let name = a.name.clone().unwrap_or_default();
            let e = if a.plain {
                if a.members.len() != 1 {
                    bail!(
                        "--plain serves one file or block device; {} were given",
                        a.members.len()
                    );
                }
                ExportConfig {
                    name,
                    members: vec![],
                    file: Some(a.members[0].clone()),
                    read_only: a.read_only,
                    force: a.force,
                    cache: a.cache.clone(),
                    stripe_cache: Some(a.stripe.stripe_cache),
                    stripe_hold_ms: Some(a.stripe.stripe_hold),
                    journal_mode: None,
                    io: a.io.mode().map(|m| m.to_string()),
                }
            } else {
                ExportConfig {
                    name,
                    members: a.members.clone(),
                    file: None,
                    read_only: a.read_only,
                    force: a.force,
                    cache: a.cache.clone(),
                    stripe_cache: Some(a.stripe.stripe_cache),
                    stripe_hold_ms: Some(a.stripe.stripe_hold),
                    journal_mode: Some(a.journal_mode.mode().name().to_string()),
                    io: a.io.mode().map(|m| m.to_string()),
                }
            };
            Config {
                export: vec![e],
                ..Config::default()
            }
        }
    };
    if config.export.is_empty() {
        bail!("the configuration lists no [[export]]: nothing to serve");
    }
    // A misspelt `io` stops here, before any member is opened.
    for e in &config.export {
        e.io()?;
    }
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
    let tls = tls(&a, &config)?;
    let listeners = bind(&a, &config, tls.as_ref().is_some_and(|t| t.require))?;

    // Every export is checked before any is started: starting an array
    // writes its superblocks, so a mistake in the third export must not leave
    // the first two started and dropped (marked dirty, resynced at next start).
    let mut served = Vec::new();
    let mut exports = Vec::new();
    let opened = check_exports(&config.export).and_then(|()| {
        config.export.iter().try_for_each(|e| {
            let (s, x) = open_export(e)?;
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
        abandon(served);
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
    let control = match start_control(&served, &events, http) {
        Ok(c) => c,
        Err(e) => {
            for p in &listeners.files {
                let _ = std::fs::remove_file(p);
            }
            abandon(served);
            return Err(e);
        }
    };
    let mut server =
        Server::new(exports, limits, Box::new(log.clone())).with_zero_copy(!a.copy_reads);
    if let Some(t) = tls {
        server = server.with_tls(t);
    }
    let metrics = match metrics {
        Some(m) => match m.start(metrics_sources(&served, &server), &METRICS_STOP) {
            Ok(t) => Some(t),
            Err(e) => {
                drop(server);
                for p in &listeners.files {
                    let _ = std::fs::remove_file(p);
                }
                abandon(served);
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
        if let Err(e) = stop(s) {
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

/// What the metrics endpoint reports on: every served array (one under a
/// cache too), every cache, the NBD server's counters.
fn metrics_sources(served: &[Served], server: &Server) -> crate::metrics::Sources {
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
type Control = (PathBuf, Vec<std::thread::JoinHandle<Option<UnixListener>>>);

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

fn start_control(
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
    let listener = UnixListener::bind(&path)
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

fn open_export(e: &ExportConfig) -> Result<(Served, Export)> {
    let Some(device) = &e.cache else {
        return open_origin(e);
    };
    // The cache's existence and its binding to this origin were checked
    // before any export started (`check_exports`).
    let (origin, x) = open_origin(e)?;
    let (id, origin_label) = match (&origin, &e.file) {
        (Served::Array { live, .. }, _) => {
            let uuid = live.with_assembly(|a| a.uuid);
            (
                raidlab_cache::OriginId::ArrayUuid(uuid),
                format!("array {}", raidlab_raid::assemble::format_uuid(&uuid)),
            )
        }
        (_, Some(f)) => match raidlab_cache::path_identity(f) {
            Ok(id) => (id, f.display().to_string()),
            Err(err) => {
                let _ = stop(origin);
                return Err(err.into());
            }
        },
        _ => bail!(
            "export {:?}: a cache needs an array or a file under it",
            e.name
        ),
    };
    // Read-only: both devices opened read-only and the cache opened so that
    // it writes nothing (no promotion, no cleaning, no table or counters):
    // hits, dirty blocks included, come from the cache device, the rest
    // from the origin.
    let mode = if e.read_only {
        OpenMode::ReadOnly
    } else {
        OpenMode::ReadWrite
    };
    let opts = StackOptions {
        read_only: e.read_only,
        background_clean: true,
    };
    let opened = FileVolume::open(device, mode)
        .map_err(anyhow::Error::from)
        .and_then(|c| {
            let clock = Arc::new(raidlab_devices::SystemClock::default());
            Ok(CacheStack::open(c, x.volume.clone(), id, clock, opts)?)
        })
        .with_context(|| {
            format!(
                "export {:?}: cannot open the cache on {} in front of {origin_label}",
                e.name,
                device.display()
            )
        });
    let stack = match opened {
        Ok(c) => c,
        Err(err) => {
            // Nothing was written through the origin: stop it as it started.
            if let Err(e2) = stop(origin) {
                eprintln!("raidlab: error: {e2:#}");
            }
            return Err(err);
        }
    };
    let sb = stack.cached().superblock();
    let export = Export {
        name: x.name.clone(),
        description: format!(
            "cache {} ({}, {} blocks of {}) in front of {}",
            device.display(),
            crate::cmd::cache::mode_name(sb.mode),
            sb.layout.cache_blocks,
            format_size_approx(u64::from(sb.block_size)),
            x.description
        ),
        volume: stack.cached().clone(),
        read_only: e.read_only,
        preferred_block: x.preferred_block,
        // The cache's flush writes its table, flushes its device and the
        // origin: it covers every completed write of any connection.
        multi_conn: true,
    };
    Ok((
        Served::Cache {
            name: x.name,
            device: device.clone(),
            stack,
            origin: Box::new(origin),
            origin_file: e.file.clone(),
            origin_label,
        },
        export,
    ))
}

/// The array or file of an export, opened and started as served alone.
fn open_origin(e: &ExportConfig) -> Result<(Served, Export)> {
    let mode = if e.read_only {
        OpenMode::ReadOnly
    } else {
        OpenMode::ReadWrite
    };
    let journal_mode = e.journal_mode()?;
    match (&e.file, e.members.is_empty()) {
        (Some(_), true) if journal_mode == raidlab_raid::journal::JournalMode::WriteBack => {
            bail!(
                "export {:?}: journal_mode = \"write-back\" is for an array with a write journal (RAID 4/5/6), not a plain file",
                e.name
            )
        }
        (Some(f), true) => {
            let v = Arc::new(
                FileVolume::open_io(f, mode, e.io()?)
                    .with_context(|| format!("export {:?}: cannot open {}", e.name, f.display()))?,
            );
            eprintln!(
                "raidlab: export {:?}: {}: {} I/O",
                e.name,
                f.display(),
                v.io_mode()
            );
            let name = if e.name.is_empty() {
                f.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            } else {
                e.name.clone()
            };
            let x = Export {
                name,
                description: format!("file {}", f.display()),
                volume: v.clone(),
                read_only: e.read_only,
                preferred_block: 4096,
                // A file's flush (fdatasync) covers every completed write.
                multi_conn: true,
            };
            Ok((Served::Plain { volume: v }, x))
        }
        (None, false) => {
            let (devices, io_modes) = open_members_io(&e.members, mode, e.io()?)
                .with_context(|| format!("export {:?}", e.name))?;
            // Said per member at start, as `detail` shows it while served.
            for (m, io) in &io_modes {
                eprintln!("raidlab: export {:?}: member {m}: {io} I/O", e.name);
            }
            eprintln!(
                "raidlab: export {:?}: member I/O: {}",
                e.name,
                crate::cmd::info::member_io_submission(&io_modes)
            );
            // Every member's I/O counted from the first superblock read on
            // (`raidlab_raid::live::stats`), for the metrics and status pages.
            let counted = raidlab_raid::live::MemberIoRegistry::default();
            let devices = devices.into_iter().map(|d| counted.count(d)).collect();
            let asm = crate::open::assemble(devices)
                .with_context(|| format!("export {:?}: cannot assemble the array", e.name))?;
            crate::open::warn_set_aside(&asm);
            let label = if e.name.is_empty() {
                if asm.name.is_empty() {
                    "array".to_string()
                } else {
                    asm.name.clone()
                }
            } else {
                e.name.clone()
            };
            // An array mid-reshape (stopped by a stop, a crash or md) is
            // started as read, then served writable through the reshape's
            // gate while the walk resumes, as md resumes a reshape at its
            // start (no log replay or resync: a reshape runs without logs,
            // and its walk rewrites every stripe it moves).
            let mid_reshape = !e.read_only && asm.reshape().is_some();
            // As md at every start: replay the journal or the partial parity
            // logs (after an unclean stop) and start them afresh, resync what no
            // log covered, mark the array dirty while it serves.
            let started = Started::start(
                asm,
                StartOptions {
                    write: !e.read_only && !mid_reshape,
                    force: e.force,
                    resync_unclean: true,
                    stripe_cache: Some(e.stripe_cache()),
                    journal_mode,
                },
            )
            .with_context(|| format!("export {label:?}"))?;
            crate::open::say_started(&started.report, &format!("export {label:?}: "));
            let StartedParts {
                asm,
                array,
                was_clean,
                consistent,
                resume,
                ..
            } = started.into_parts();
            let g = asm.geometry;
            // Linear and multi-zone RAID 0 run over a placeholder geometry:
            // their level and shape come from the assembly.
            let shape = if asm.zone_map().is_some() {
                format!("{}, {} members in zones", asm.level_name(), g.raid_disks)
            } else {
                format!(
                    "{} {}, {} members, chunk {}",
                    g.level.name(),
                    g.layout.name(),
                    g.raid_disks,
                    format_size_approx(g.chunk_bytes)
                )
            };
            let live = LiveArray::new(asm, array.clone());
            live.count_member_io(&counted);
            let mut writable = !e.read_only;
            if mid_reshape {
                let opts = raidlab_raid::recovery::RunOptions {
                    stop: Some(&STOP),
                    ..Default::default()
                };
                match live.resume_reshape(opts) {
                    Ok(()) => eprintln!("raidlab: export {label:?}: the array is mid-reshape; the reshape resumes in the background while it serves (`raidlab detail` shows progress)"),
                    Err(err) => {
                        writable = false;
                        eprintln!("raidlab: export {label:?}: the array is mid-reshape and served read-only: {err}");
                    }
                }
            }
            if writable {
                // md's safe mode: marked dirty only while writes are pending.
                live.start_safe_mode(was_clean);
            }
            if !e.read_only && !resume.is_empty() {
                if consistent {
                    // md resumes recovery at start; so does this, in the
                    // background, while the array serves.
                    live.resume(&resume)
                        .with_context(|| format!("export {label:?}: cannot resume the rebuild"))?;
                    eprintln!("raidlab: export {label:?}: a member is being rebuilt; the rebuild continues in the background (`raidlab detail` shows progress)");
                } else {
                    eprintln!("raidlab: export {label:?}: a member waits for a rebuild, but the array was not stopped cleanly and is degraded: not rebuilding (parity may be stale); stop, resync and rebuild");
                }
            }
            let stripe = g.chunk_bytes.max(4096) * g.data_disks().max(1) as u64;
            let x = Export {
                name: label.clone(),
                description: shape,
                // Every write (a cache's in front too) passes safe mode's gate.
                volume: live.volume(),
                // An array may refuse writes itself (a journal missing, opened
                // with --force; mid-reshape without its walk).
                read_only: !writable || !live.volume().is_writable(),
                preferred_block: stripe.min(u32::MAX as u64) as u32,
                // The array's flush flushes every member, covering every completed
                // write from any connection.
                multi_conn: true,
            };
            Ok((
                Served::Array {
                    name: label,
                    live,
                    was_clean,
                    writable,
                    io: e.io()?,
                    io_modes: Arc::new(std::sync::Mutex::new(io_modes)),
                },
                x,
            ))
        }
        _ => bail!(
            "export {:?}: give either `members` (an array) or `file` (a plain file or device), not both or neither",
            e.name
        ),
    }
}

/// Stop exports started before serve gave up starting the rest: each is
/// flushed and marked clean as at a normal stop, so serve's failure costs no
/// resync.
fn abandon(served: Vec<Served>) {
    for s in served {
        if let Err(e) = stop(s) {
            eprintln!("raidlab: error: {e:#}");
        }
    }
}

/// What can be known about every export without starting one: names differ,
/// no member or file is named by two exports, each file, member set and cache
/// opens read-only and (members) assembles, and a cache belongs to its
/// origin. Nothing is written.
fn check_exports(exports: &[ExportConfig]) -> Result<()> {
    let mut names = std::collections::HashSet::new();
    let mut used: Vec<(PathBuf, String)> = Vec::new();
    for e in exports {
        if !names.insert(e.name.as_str()) {
            bail!(
                "export name {:?} is given twice: names must differ; nothing was started",
                e.name
            );
        }
        let paths = e
            .members
            .iter()
            .filter(|p| !crate::open::is_missing(p))
            .chain(e.file.iter())
            .chain(e.cache.iter());
        for p in paths {
            // The same file under two names is the same device; a partition
            // (`IMAGE@N`) is compared as named.
            let key = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
            if let Some((_, other)) = used.iter().find(|(k, _)| *k == key) {
                bail!(
                    "{} is used by export {other:?} and by export {:?}: a device can serve one \
                     export; nothing was started",
                    p.display(),
                    e.name
                );
            }
            used.push((key, e.name.clone()));
        }
        // What the origin is, for a cache's binding: a file by its identity,
        // an array by its UUID.
        let named = match (&e.file, e.members.is_empty()) {
            (Some(f), true) => {
                FileVolume::open(f, OpenMode::ReadOnly).with_context(|| {
                    format!("export {:?}: cannot open {}; nothing was started", e.name, f.display())
                })?;
                raidlab_cache::path_identity(f).ok()
            }
            (None, false) => {
                let devices = open_members(&e.members, OpenMode::ReadOnly)
                    .with_context(|| format!("export {:?}; nothing was started", e.name))?;
                let asm = crate::open::assemble(devices).with_context(|| {
                    format!("export {:?}: cannot assemble the array; nothing was started", e.name)
                })?;
                Some(raidlab_cache::OriginId::ArrayUuid(asm.uuid))
            }
            _ => bail!(
                "export {:?}: give either `members` (an array) or `file` (a plain file or device), not both or neither",
                e.name
            ),
        };
        if let Some(device) = &e.cache {
            let recorded = check_cache(e, device)?;
            if named.is_some_and(|id| id != recorded.origin_id) {
                bail!(
                    "export {:?}: the cache on {} belongs to another origin ({}), not this one: give \
                     the origin it was created for; nothing was changed",
                    e.name,
                    device.display(),
                    recorded.origin_label
                );
            }
        }
    }
    Ok(())
}

/// The cache named by an export exists, is a raidlab cache and is attached.
fn check_cache(e: &ExportConfig, device: &Path) -> Result<raidlab_cache::Superblock> {
    let recorded = FileVolume::open(device, OpenMode::ReadOnly)
        .map_err(anyhow::Error::from)
        .and_then(|c| Ok(raidlab_cache::examine(&c)?))
        .with_context(|| {
            format!(
                "export {:?}: no usable cache on {} (make one with `raidlab cache create`)",
                e.name,
                device.display()
            )
        })?;
    if recorded.detached {
        bail!(
            "export {:?}: the cache on {} was detached from {}: `raidlab cache attach` binds it \
             again, or serve the origin without --cache",
            e.name,
            device.display(),
            recorded.origin_label
        );
    }
    Ok(recorded)
}

/// Flush and, for arrays, record what happened (failed members) and a clean stop.
fn stop(s: Served) -> Result<()> {
    match s {
        Served::Cache {
            name,
            device,
            stack,
            origin,
            ..
        } => {
            // The cache first (its dirty blocks stay in it, recorded), then the
            // origin under it; the origin is stopped even if the cache fails.
            let stopped = stack.stop();
            if let Some(err) = stopped.cleaner_error {
                eprintln!(
                    "raidlab: export {name:?}: background cleaning of the cache on {} had stopped: {err}",
                    device.display()
                );
            }
            let cache = stopped.shutdown.with_context(|| {
                format!(
                    "export {name:?}: the cache on {} could not be stopped cleanly; its next \
                     open recovers (dirty blocks are kept)",
                    device.display()
                )
            });
            let under = stop(*origin);
            cache.and(under)
        }
        Served::Plain { volume } => volume
            .flush()
            .with_context(|| format!("flushing {} failed", volume.name())),
        Served::Array {
            name,
            live,
            was_clean,
            writable,
            ..
        } => {
            // A rebuild saves its position and stops first.
            live.shutdown();
            if !writable {
                return Ok(());
            }
            let array = live.array().clone();
            // The writes with the assembly let go: one that takes a member
            // out records it through the live array, which takes it.
            lifecycle::stop_writes(&array)
                .with_context(|| format!("export {name:?}: the final flush failed; the array stays marked dirty and is resynced at the next start"))?;
            let failed = live
                .stop_records(&array, was_clean)
                .with_context(|| format!("export {name:?}: cannot mark the array clean"))?;
            for path in failed {
                eprintln!("raidlab: export {name:?}: {path} failed while serving and is now marked faulty; the array is degraded (`raidlab detail`)");
            }
            Ok(())
        }
    }
}

/// The socket path used when none is given: in the user's runtime directory.
fn default_socket() -> PathBuf {
    crate::control::per_user("raidlab-nbd", ".sock")
}

/// TLS settings from the flags, else the configuration file.
fn tls(a: &ServeArgs, c: &Config) -> Result<Option<Tls>> {
    let cert = a.tls_cert.clone().or(c.tls_cert.clone());
    let key = a.tls_key.clone().or(c.tls_key.clone());
    let ca = a.tls_client_ca.clone().or(c.tls_client_ca.clone());
    let require = a.tls_require || c.tls_require.unwrap_or(false);
    match (cert, key) {
        (Some(cert), Some(key)) => {
            let config = raidlab_nbd::tls::server_config(&cert, &key, ca.as_deref())
                .map_err(|e| anyhow::anyhow!("cannot set up TLS: {e}"))?;
            eprintln!(
                "raidlab: TLS offered (STARTTLS){}{}",
                if require { ", required" } else { ", optional" },
                if ca.is_some() { ", client certificates verified" } else { "" }
            );
            Ok(Some(Tls { config, require }))
        }
        (None, None) if ca.is_none() && !require => Ok(None),
        _ => bail!("TLS needs both a certificate and its key (--tls-cert and --tls-key, or tls_cert and tls_key in the configuration)"),
    }
}

/// Every listener asked for, bound.
struct Bound {
    listeners: Vec<Listener>,
    /// Socket files to remove at the end.
    files: Vec<PathBuf>,
    /// Where clients connect, said once the exports have started (a serve
    /// that fails to start one must not have said it listens).
    said: Vec<String>,
}

/// Bind every listener asked for.
fn bind(a: &ServeArgs, c: &Config, tls_required: bool) -> Result<Bound> {
    let mut out = Vec::new();
    let mut files = Vec::new();
    let mut said = Vec::new();
    let listen = a.listen.clone().or(c.listen.clone());
    let tcp = a.tcp || c.tcp.unwrap_or(false);
    let port = a.port.or(c.port).unwrap_or(DEFAULT_PORT);
    let socket = a.socket.clone().or(c.socket.clone());
    if let Some(addr) = &listen {
        let sa: SocketAddr = addr.parse().with_context(|| {
            format!("--listen {addr}: give an address and port, e.g. 0.0.0.0:10809 or [::]:10809")
        })?;
        if !sa.ip().is_loopback() && !tls_required {
            eprintln!(
                "raidlab: warning: serving on {sa} without required TLS: anyone who can reach this address can read and write the exports, and the data crosses the network in clear (use --tls-cert, --tls-key and --tls-require)"
            );
        }
        out.push(tcp_listener(sa, &mut said)?);
    } else if tcp {
        out.push(tcp_listener(
            SocketAddr::from(([127, 0, 0, 1], port)),
            &mut said,
        )?);
    }
    if socket.is_some() || out.is_empty() {
        let p = socket.unwrap_or_else(default_socket);
        if p.exists() {
            if UnixStream::connect(&p).is_ok() {
                bail!(
                    "{}: another server is listening on this socket; stop it or give another --socket",
                    p.display()
                );
            }
            // Left behind by a server that was killed: nobody listens on it.
            std::fs::remove_file(&p)
                .with_context(|| format!("cannot remove the stale socket {}", p.display()))?;
        }
        let l = UnixListener::bind(&p)
            .with_context(|| format!("cannot listen on the Unix socket {}", p.display()))?;
        said.push(format!(
            "raidlab: listening on unix socket {} (e.g. nbdinfo 'nbd+unix:///?socket={}')",
            p.display(),
            p.display()
        ));
        out.push(Listener::Unix(l));
        files.push(p);
    }
    Ok(Bound {
        listeners: out,
        files,
        said,
    })
}

fn tcp_listener(sa: SocketAddr, said: &mut Vec<String>) -> Result<Listener> {
    let l = TcpListener::bind(sa).with_context(|| {
        format!("cannot listen on {sa}: is another NBD server using the port? (try --port)")
    })?;
    said.push(format!(
        "raidlab: listening on tcp {sa} (e.g. nbdinfo nbd://{sa})"
    ));
    Ok(Listener::Tcp(l))
}
