//! `raidlab scan`: find md members in files, block devices, the partitions of
//! whole-disk images and the files of directories, group them into arrays by
//! UUID and say, for each, what it is and the command that exports it.
//!
//! Reads only the sectors where tables and superblocks can be (a partition
//! table; for each device or partition the four places a superblock can be),
//! opens everything read-only, and writes nothing.

use crate::cli::ScanArgs;
use crate::open::{open_members, partition_members, probe, shell_quote, Found};
use anyhow::Result;
use raidlab_core::size::format_size_approx;
use raidlab_core::Volume;
use raidlab_devices::{FileVolume, OpenMode};
use raidlab_md::superblock::feature;
use raidlab_raid::assemble::{format_uuid, ArrayState, Assembly, MemberState};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Serialize)]
struct ArrayOut {
    uuid: String,
    name: String,
    metadata: String,
    level: String,
    size_bytes: Option<u64>,
    state: String,
    members: Vec<MemberOut>,
    /// The export command, as arguments and as one shell line.
    command: Vec<String>,
    command_line: String,
}

#[derive(Debug, Serialize)]
struct MemberOut {
    device: String,
    role: Option<usize>,
    state: String,
    events: u64,
}

#[derive(Debug, Serialize)]
struct Skipped {
    path: String,
    why: String,
}

pub fn run(a: ScanArgs) -> Result<ExitCode> {
    let mut found: Vec<Found> = Vec::new();
    let mut skipped: Vec<Skipped> = Vec::new();
    for p in expand(&a.paths, &mut skipped) {
        look_at(&p, &mut found, &mut skipped);
    }
    // Group by array UUID, in the order first seen.
    let mut groups: BTreeMap<[u8; 16], Vec<Found>> = BTreeMap::new();
    let mut order: Vec<[u8; 16]> = Vec::new();
    for f in found {
        if !groups.contains_key(&f.sb.set_uuid) {
            order.push(f.sb.set_uuid);
        }
        groups.entry(f.sb.set_uuid).or_default().push(f);
    }
    let arrays: Vec<ArrayOut> = order
        .iter()
        .filter_map(|u| groups.remove(u))
        .map(describe)
        .collect();
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "arrays": arrays,
                "skipped": skipped,
            }))?
        );
    } else {
        for s in &skipped {
            eprintln!("raidlab: scan: {}: {}", s.path, s.why);
        }
        if arrays.is_empty() {
            outln!("no md members found");
        }
        for x in &arrays {
            outln!(
                "ARRAY {}  metadata {}  {}  {}  {}{}",
                x.uuid,
                x.metadata,
                x.level,
                x.size_bytes
                    .map_or("size unknown".into(), format_size_approx),
                x.state,
                if x.name.is_empty() {
                    String::new()
                } else {
                    format!("  name {:?}", x.name)
                }
            );
            for m in &x.members {
                outln!(
                    "  {}  {}  events {}",
                    m.device,
                    match m.role {
                        Some(r) => format!("role {r}, {}", m.state),
                        None => m.state.clone(),
                    },
                    m.events
                );
            }
            outln!("  {}", x.command_line);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Directories become their entries (files and block devices, sorted, not
/// recursive); anything else is looked at as given.
fn expand(paths: &[PathBuf], skipped: &mut Vec<Skipped>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            match std::fs::read_dir(p) {
                Ok(rd) => {
                    let mut v: Vec<PathBuf> = rd
                        .filter_map(|e| e.ok().map(|e| e.path()))
                        .filter(|e| !e.is_dir())
                        .collect();
                    v.sort();
                    out.extend(v);
                }
                Err(e) => skipped.push(Skipped {
                    path: p.display().to_string(),
                    why: format!("cannot list the directory: {e}"),
                }),
            }
        } else {
            out.push(p.clone());
        }
    }
    out
}

/// The superblock of `p` itself and of each partition of its table.
fn look_at(p: &Path, found: &mut Vec<Found>, skipped: &mut Vec<Skipped>) {
    let shown = p.display().to_string();
    let vol = match FileVolume::open(p, OpenMode::ReadOnly) {
        Ok(v) => std::sync::Arc::new(v) as std::sync::Arc<dyn Volume>,
        Err(e) => {
            skipped.push(Skipped {
                path: shown,
                why: e.to_string(),
            });
            return;
        }
    };
    let here = partition_members(vol.clone(), &shown, &mut |path, why| {
        skipped.push(Skipped { path, why })
    });
    let mut whole: Vec<Found> = probe(vol.as_ref(), shown, &mut |path, why| {
        skipped.push(Skipped { path, why })
    })
    .into_iter()
    .collect();
    // A superblock at the end of a disk whose last partition ends there too
    // (1.0, 0.90) shows through both: it belongs to the partition.
    whole.retain(|w| {
        !here
            .iter()
            .any(|h| h.sb.device_uuid == w.sb.device_uuid && h.sb.set_uuid == w.sb.set_uuid)
    });
    found.extend(here);
    found.extend(whole);
}

/// Assemble one group read-only and say what it is.
fn describe(members: Vec<Found>) -> ArrayOut {
    let newest = members
        .iter()
        .max_by_key(|f| f.sb.events)
        .map(|f| f.sb.clone());
    let sb = newest.unwrap_or_else(|| members[0].sb.clone());
    let names: Vec<String> = members.iter().map(|f| f.name.clone()).collect();
    let mut command = vec!["raidlab".to_string(), "export".to_string()];
    command.extend(names.iter().cloned());
    command.extend(["--output".to_string(), "ARRAY.img".to_string()]);
    let command_line = command
        .iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = ArrayOut {
        uuid: format_uuid(&sb.set_uuid),
        name: sb.set_name.clone(),
        metadata: sb.version().name().to_string(),
        level: format!("level {}", sb.level),
        size_bytes: None,
        state: String::new(),
        members: Vec::new(),
        command,
        command_line,
    };
    let paths: Vec<PathBuf> = names.iter().map(PathBuf::from).collect();
    let asm = open_members(&paths, OpenMode::ReadOnly).and_then(|d| Ok(Assembly::assemble(d)?));
    match asm {
        Ok(asm) => {
            out.level = asm.level_name().to_string();
            out.size_bytes = Some(asm.data_bytes());
            let mut words = Vec::new();
            if asm.state() != ArrayState::Failed {
                words.push(if asm.in_sync() { "clean" } else { "dirty" }.to_string());
            }
            match asm.state() {
                ArrayState::Clean => {}
                ArrayState::Degraded => {
                    words.push(format!("degraded (roles {:?} missing)", asm.missing()))
                }
                ArrayState::Failed => words.push(format!(
                    "failed: too many members missing (roles {:?})",
                    asm.missing()
                )),
            }
            let stale = asm
                .members
                .iter()
                .filter(|m| m.state == MemberState::Stale)
                .count();
            if stale > 0 {
                words.push(format!("{stale} stale member(s)"));
            }
            if asm
                .members
                .iter()
                .any(|m| m.sb.feature_map & feature::RESHAPE_ACTIVE != 0)
            {
                words.push("interrupted reshape".into());
            }
            if asm.read_needs_backup_file() {
                // md's rule: the window being rewritten may be whole only
                // in the backup file, so plain export is refused.
                words.push("read only with its backup file (mdadm's or raidlab's, the one given to the grow as --backup-file; export puts its window back on the members first)".into());
                let at = out.command.len() - 2;
                out.command
                    .splice(at..at, ["--backup-file".to_string(), "FILE".to_string()]);
                out.command_line = out
                    .command
                    .iter()
                    .map(|a| shell_quote(a))
                    .collect::<Vec<_>>()
                    .join(" ");
            }
            out.state = words.join(", ");
            out.members = asm
                .members
                .iter()
                .map(|m| MemberOut {
                    device: m.device.path.clone(),
                    role: m.role,
                    state: format!("{:?}", m.state).to_lowercase(),
                    events: m.sb.events,
                })
                .collect();
        }
        Err(e) => {
            out.level = format!("level {}", sb.level);
            out.state = format!("cannot be assembled: {e:#}");
            out.members = members
                .iter()
                .map(|f| MemberOut {
                    device: f.name.clone(),
                    role: None,
                    state: "found".into(),
                    events: f.sb.events,
                })
                .collect();
        }
    }
    out
}
