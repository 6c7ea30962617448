//! How each export's stack is opened and started, bottom up: the members
//! (counted, in their I/O mode) assembled and started as md starts an array
//! (logs replayed, resync if unclean, a reshape or rebuild resumed in the
//! background, safe mode's dirty mark), or a plain file opened; then a cache
//! in front when the export names one. What reaches the NBD server is the
//! top of that stack.
//!
//! Must never start an export `config::check_exports` has not passed, nor
//! leave one half open: a stack that fails part-way is stopped as it
//! started (`stop`), so a failed serve costs no resync.

use super::stop::stop;
use super::{config::ExportConfig, Served, STOP};
use crate::open::open_members_io;
use anyhow::{bail, Context, Result};
use raidlab_cache::{CacheStack, StackOptions};
use raidlab_core::size::format_size_approx;
use raidlab_core::Volume;
use raidlab_devices::{FileVolume, OpenMode};
use raidlab_nbd::Export;
use raidlab_raid::lifecycle::{StartOptions, Started, StartedParts};
use raidlab_raid::live::LiveArray;
use std::sync::Arc;

pub(super) fn open_export(e: &ExportConfig) -> Result<(Served, Export)> {
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
            let mut asm = crate::open::assemble(devices)
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
            // A stopped 0.90 restripe is read only with its backup file put
            // back (md's rule); the walk then carries on through it.
            let backup = match &e.backup_file {
                Some(path) => Some(
                    put_back(&mut asm, path)
                        .with_context(|| format!("export {label:?}: --backup-file {}", path.display()))?,
                ),
                None => None,
            };
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
            let mut parts = started.into_parts();
            // md's start: a degraded array's hot spares go into the missing
            // roles, rebuilt below with the rebuilds the superblocks record.
            // A commit that fails leaves the assembly as it was: the array
            // is served degraded, as before, and the reason is said.
            match parts.take_spares() {
                Ok(spares) => {
                    for &(i, role) in &spares.taken {
                        eprintln!(
                            "raidlab: export {label:?}: hot spare {} goes into missing role {role}",
                            parts.asm.members[i].device.path
                        );
                    }
                    if let Some(why) = spares.waits {
                        eprintln!(
                            "raidlab: export {label:?}: role(s) {:?} missing beside a hot spare: {why}",
                            parts.asm.missing()
                        );
                    }
                }
                Err(err) => eprintln!(
                    "raidlab: export {label:?}: cannot put a hot spare into missing role(s) {:?}: {err}; serving degraded (`raidlab detail` shows it)",
                    parts.asm.missing()
                ),
            }
            let StartedParts {
                asm,
                array,
                was_clean,
                resume,
                ..
            } = parts;
            // The engine's rule for what computes from parity or copies:
            // the start's dirty mark is this server's own when the array
            // was clean or resynced (its safe mode's, below).
            let rebuild_may_run = asm.trusts_redundancy(was_clean);
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
                match live.resume_reshape(opts, backup.as_ref()) {
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
                if rebuild_may_run {
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

/// `mdadm --assemble --backup-file` for a served array: the file checked,
/// the window it holds put back into the members (this writes them), and
/// the file kept for the walk that resumes. Refused, with nothing written,
/// for an array whose reshape does not need one.
fn put_back(
    asm: &mut raidlab_raid::assemble::Assembly,
    path: &std::path::Path,
) -> Result<raidlab_raid::grow::BackupFile> {
    if !asm.reshape_takes_backup_file() {
        bail!(
            "the array records no stopped metadata 0.90 restripe through a backup file, so there is nothing to put back: serve it without --backup-file; nothing was changed"
        );
    }
    let file = crate::open::put_back_backup_file(asm, path)?;
    eprintln!(
        "raidlab: the backup file {} was put back into the members where it covers the reshape's position; the reshape carries on through it",
        path.display()
    );
    Ok(file)
}
