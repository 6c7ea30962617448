//! `raidlab monitor`: mdadm's `--monitor` for raidlab. Each poll sees every
//! watched array (`watch`), derives the events from what the previous poll
//! saw (`events`) and sends them (`alert`). It decides what is watched (the
//! named arrays, and with scanning every array a server serves), when the
//! loop ends (`--oneshot`, or never) and that watching nothing is an error.
//! It must never change an array, a cache or a server: it only asks and reads.

mod alert;
mod config;
mod events;
pub mod list;
mod watch;

use crate::cli::MonitorArgs;
use anyhow::{bail, Result};
use events::{Event, Snapshot, Tracked};
use std::collections::{BTreeMap, HashSet};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::ExitCode;
use watch::{Source, Warnings};

/// An array named on the command line or in the file.
struct NamedWatch {
    named: config::Named,
    tracked: Tracked,
}

/// An export found by scanning, named by its export name.
struct ScannedWatch {
    export: String,
    tracked: Tracked,
}

fn executable(p: &Path, what: &str) -> Result<()> {
    match std::fs::metadata(p) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(()),
        Ok(_) => bail!("{what} {} is not an executable file", p.display()),
        Err(e) => bail!("{what} {}: {e}", p.display()),
    }
}

/// The array in a few lines, for a mail.
fn describe(s: Option<&Snapshot>) -> String {
    let Some(s) = s else {
        return "(it cannot be seen now)".into();
    };
    let mut t = format!(
        "  uuid {}\n  {}\n",
        s.uuid,
        if s.degraded { "degraded" } else { "optimal" }
    );
    if let Some(p) = s.progress {
        t += &format!("  rebuild or scrub at {p}%\n");
    }
    for (d, st) in &s.members {
        t += &format!("  {st:<10} {d}\n");
    }
    t
}

fn send_all(alerts: &alert::Alerts, events: &[Event], array: &str, s: Option<&Snapshot>) {
    for e in events {
        alerts.send(e, array, &describe(s));
    }
}

pub fn run(a: MonitorArgs) -> Result<ExitCode> {
    let c = config::from_args(a)?;
    if let Some(p) = &c.program {
        executable(p, "the --program")?;
    }
    if c.mail.is_some() {
        executable(&c.sendmail, "sendmail (for --mail)")?;
    }
    let alerts = alert::Alerts::new(&c);
    let mut named: Vec<NamedWatch> = c
        .arrays
        .iter()
        .map(|n| NamedWatch {
            named: n.clone(),
            tracked: Tracked {
                spares: n.spares,
                ..Tracked::default()
            },
        })
        .collect();
    let mut scanned: BTreeMap<String, ScannedWatch> = BTreeMap::new();
    let mut warn = Warnings::default();
    let mut first = true;
    loop {
        let servers = watch::servers(&mut warn);
        let mut claimed: HashSet<(usize, usize)> = HashSet::new();
        for w in &mut named {
            let source = match watch::find(&servers, &w.named) {
                Some((s, i)) => {
                    let si = servers.iter().position(|x| std::ptr::eq(x, s)).unwrap_or(0);
                    claimed.insert((si, i));
                    let e = &s.served.exports[i];
                    Source::Served {
                        server: s,
                        members: &e.members,
                        cache: e.cache.as_deref(),
                    }
                }
                None => Source::Offline(&w.named.members),
            };
            let key = format!("array {:?}", w.named.members);
            let snap = match watch::snapshot(&source) {
                Ok(s) => {
                    warn.clear(&key);
                    Some(s)
                }
                Err(e) => {
                    let label = w.named.name.clone().unwrap_or_else(|| {
                        w.named
                            .members
                            .first()
                            .map(|m| m.display().to_string())
                            .unwrap_or_default()
                    });
                    warn.warn(&key, &format!("cannot see array {label}: {e:#}"));
                    None
                }
            };
            // Named by its name, else by its UUID (stable whoever serves it).
            let label = w
                .named
                .name
                .clone()
                .or_else(|| {
                    snap.as_ref()
                        .or(w.tracked.last.as_ref())
                        .map(|s| s.uuid.clone())
                })
                .unwrap_or_else(|| {
                    w.named
                        .members
                        .first()
                        .map(|m| m.display().to_string())
                        .unwrap_or_default()
                });
            if first && c.test {
                send_all(&alerts, &[test_message()], &label, snap.as_ref());
            }
            let events = w.tracked.poll(snap.clone(), c.increment);
            send_all(&alerts, &events, &label, snap.as_ref());
        }
        if c.scan {
            let mut seen = HashSet::new();
            for (si, s) in servers.iter().enumerate() {
                for (i, e) in s.served.exports.iter().enumerate() {
                    // A plain file behind a cache is no array to watch.
                    if claimed.contains(&(si, i)) || e.members.is_empty() {
                        continue;
                    }
                    let key = format!("{}\0{}", e.name, e.members.join("\0"));
                    seen.insert(key.clone());
                    let source = Source::Served {
                        server: s,
                        members: &e.members,
                        cache: e.cache.as_deref(),
                    };
                    let snap = match watch::snapshot(&source) {
                        Ok(s) => Some(s),
                        Err(err) => {
                            warn.warn(&key, &format!("cannot see export {:?}: {err:#}", e.name));
                            None
                        }
                    };
                    let new = !scanned.contains_key(&key);
                    let w = scanned.entry(key).or_insert_with(|| ScannedWatch {
                        export: e.name.clone(),
                        // Found by scanning: its first sight is a NewArray.
                        tracked: Tracked {
                            gone: true,
                            ..Tracked::default()
                        },
                    });
                    if new && first && c.test {
                        send_all(&alerts, &[test_message()], &w.export, snap.as_ref());
                    }
                    let events = w.tracked.poll(snap.clone(), c.increment);
                    send_all(&alerts, &events, &w.export, snap.as_ref());
                }
            }
            // No server serves it any more (stopped, or killed).
            for (_, w) in scanned.iter_mut().filter(|(k, _)| !seen.contains(*k)) {
                let events = w.tracked.poll(None, c.increment);
                send_all(&alerts, &events, &w.export, None);
            }
        }
        if first && named.is_empty() && scanned.is_empty() {
            bail!(
                "nothing to monitor: no array was named (members on the command line, or \
                 [[array]] in --config) and no `raidlab serve` in {} serves one",
                crate::control::run_dir().display()
            );
        }
        first = false;
        if c.oneshot {
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(c.delay);
    }
}

fn test_message() -> Event {
    Event {
        name: "TestMessage".into(),
        member: None,
    }
}
