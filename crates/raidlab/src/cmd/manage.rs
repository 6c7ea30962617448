//! `fail`, `remove`, `add`, `replace`, `rebuild`, `resync`, `check`, `repair`.
//!
//! Every verb names the array by its member list (any order), the same way as
//! `detail` and `export`; the member a verb acts on is named with a flag. Long runs
//! show a progress bar with throughput and ETA on a terminal, stop cleanly on
//! Ctrl-C with their position saved in the superblocks, and resume from there.

use crate::cli::{AddArgs, FailArgs, RemoveArgs, ReplaceArgs, RunArgs, RunControl, ScrubArgs};
use crate::cmd::live;
use crate::open::{
    is_missing, member_exists, open_device, open_members, start_managed, stop_managed,
};
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use raidlab_core::size::format_size_approx;
use raidlab_core::Op;
use raidlab_devices::{FileVolume, OpenMode};
use raidlab_raid::assemble::{Assembly, Device, MemberState};
use raidlab_raid::lifecycle::{ManageOptions, Managed};
use raidlab_raid::manage::{Added, NoSpareTaken};
use raidlab_raid::recovery::{Progress, RunOptions, ScrubReport};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Set by Ctrl-C; long runs stop at the next step and save their position.
static STOP: AtomicBool = AtomicBool::new(false);

/// Exit status of `check`/`repair` when mismatches were found.
pub const MISMATCH_EXIT: u8 = 3;

/// Assemble and start for a verb that writes, through the lifecycle
/// ([`Managed::start`]): its logs replayed, members whose I/O fails there
/// taken out, and md's refusals with `--force` = `refuse` when given (`None`:
/// the verb's own steps refuse what they must).
/// `data`: the verb writes data to the members (named for its refusal on an
/// array whose journal is missing), not only membership records.
fn start_rw(members: &[PathBuf], refuse: Option<bool>, data: Option<&str>) -> Result<Managed> {
    let asm = crate::open::assemble(open_members(members, OpenMode::ReadWrite)?)?;
    if let Some(verb) = data {
        asm.refuse_data_writes_without_journal(verb)?;
    }
    start_managed(
        asm,
        ManageOptions {
            write: true,
            refuse,
        },
    )
}

/// Assemble for writing, with `check` asked of the assembly before the
/// lifecycle starts it (a log replay writes): a refusal there changes
/// nothing. The caller's own steps commit what they change.
pub(crate) fn assemble_rw_checked(
    members: &[PathBuf],
    check: impl FnOnce(&Assembly) -> Result<()>,
) -> Result<Assembly> {
    let asm = crate::open::assemble(open_members(members, OpenMode::ReadWrite)?)?;
    check(&asm)?;
    let managed = start_managed(
        asm,
        ManageOptions {
            write: true,
            refuse: None,
        },
    )?;
    Ok(managed.asm)
}

fn path_str(p: &Path) -> String {
    p.display().to_string()
}

pub(crate) fn options(run: &RunControl, force: bool) -> RunOptions {
    // A second Ctrl-C still kills the process; the first one asks for a clean stop.
    let _ = ctrlc::set_handler(|| {
        if STOP.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
    });
    RunOptions {
        max_rate: run.max_rate,
        stop: Some(&STOP),
        force,
        ..RunOptions::default()
    }
}

/// A progress bar on a terminal (stderr), nothing otherwise.
pub fn bar(what: &str) -> impl FnMut(Progress) {
    let pb = if std::io::stderr().is_terminal() {
        let pb = ProgressBar::new(0);
        pb.set_style(
            ProgressStyle::with_template(
                "{msg:8} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        pb.set_message(what.to_string());
        Some(pb)
    } else {
        None
    };
    move |p: Progress| {
        if let Some(pb) = &pb {
            pb.set_length(p.total);
            pb.set_position(p.done);
            if p.done >= p.total {
                pb.finish();
            }
        }
    }
}

/// Open a new member, creating the file sparse at `size` if it does not exist.
pub(crate) fn new_device(path: &Path, size: Option<u64>) -> Result<(Device, bool)> {
    if is_missing(path) {
        bail!("`missing` is not a device");
    }
    if member_exists(path) {
        return Ok((open_device(path, OpenMode::ReadWrite)?, false));
    }
    let Some(size) = size else {
        bail!(
            "{} does not exist: give --member-size to create it",
            path.display()
        );
    };
    let v = FileVolume::create_sparse(path, size)
        .with_context(|| format!("cannot create {}", path.display()))?;
    Ok((
        Device {
            path: path_str(path),
            volume: Arc::new(v),
        },
        true,
    ))
}

fn run_rebuild(asm: &mut Assembly, run: &RunControl, force: bool) -> Result<()> {
    let report = asm.rebuild(options(run, force), &mut bar("rebuild"))?;
    print_rebuild(&report, run.json)
}

pub(crate) fn print_rebuild(
    report: &raidlab_raid::recovery::RebuildReport,
    json: bool,
) -> Result<()> {
    if json {
        outln!("{}", serde_json::to_string_pretty(report)?);
    } else {
        for r in &report.rebuilt {
            let from = if r.resumed_from > 0 {
                format!(" (resumed at byte {})", r.resumed_from)
            } else {
                String::new()
            };
            if r.bitmap_based {
                // The figure a re-add is for: how little of the member it
                // had to rewrite.
                outln!(
                    "raidlab: resynced {} bytes of {} ({:.2}%) into role {}{from}: only the chunks the bitmap marked while it was away",
                    r.bytes,
                    r.member_bytes,
                    r.bytes as f64 * 100.0 / r.member_bytes.max(1) as f64,
                    r.role
                );
            } else {
                outln!("raidlab: rebuilt {} into role {}{from}", r.device, r.role);
            }
        }
    }
    Ok(())
}

pub fn fail(a: FailArgs) -> Result<ExitCode> {
    if let Some(server) = crate::control::find(&a.members)? {
        return live::fail(&server, a);
    }
    let mut managed = start_rw(&a.members, None, None)?;
    let asm = &mut managed.asm;
    let index = asm.find(&path_str(&a.member))?;
    if asm.members[index].state == MemberState::Faulty {
        // mdadm --fail of a faulty device succeeds and changes nothing (md's
        // md_error on a Faulty rdev returns at once); the start may have
        // taken it out just now, failing its I/O.
        outln!(
            "raidlab: {} is already faulty; nothing was changed",
            a.member.display()
        );
        stop_managed(managed)?;
        return Ok(ExitCode::SUCCESS);
    }
    let was_synced = asm.in_sync();
    let spare = asm.fail(index)?;
    if !was_synced && asm.geometry.is_parity() {
        eprintln!(
            "raidlab: warning: the array was not stopped cleanly and has not been resynced, so with {} failed it is dirty and degraded: data rebuilt for the failed role may be wrong in stripes written at the crash. raidlab (like md) now refuses to start it without --force; `raidlab resync` before failing a member avoids this when the member still works",
            a.member.display()
        );
    }
    let state = serde_json::to_value(asm.state())?;
    outln!(
        "raidlab: {} marked faulty; the array is now {}",
        a.member.display(),
        state.as_str().unwrap_or("changed")
    );
    if let Some(s) = spare {
        outln!(
            "raidlab: hot spare {} takes its place",
            asm.members[s].device.path
        );
        if !a.no_rebuild {
            run_rebuild(asm, &a.run, false)?;
        }
    }
    stop_managed(managed)?;
    Ok(ExitCode::SUCCESS)
}

pub fn remove(a: RemoveArgs) -> Result<ExitCode> {
    if let Some(server) = crate::control::find(&a.members)? {
        return live::remove(&server, a);
    }
    let mut managed = start_rw(&a.members, None, None)?;
    let index = managed.asm.find(&path_str(&a.member))?;
    managed.asm.remove(index)?;
    outln!("raidlab: {} removed from the array", a.member.display());
    stop_managed(managed)?;
    Ok(ExitCode::SUCCESS)
}

pub fn add(a: AddArgs) -> Result<ExitCode> {
    if let Some(server) = crate::control::find(&a.members)? {
        let (device, created) = new_device(&a.new, a.member_size)?;
        // The server opens (and locks) it itself.
        drop(device);
        let r = live::add(&server, &a);
        if r.is_err() && created {
            let _ = std::fs::remove_file(&a.new);
        }
        return r;
    }
    // A former member given among the members too is opened once, as the
    // device to add (a second open of it would not get its lock).
    let same_file = |p: &PathBuf| {
        p == &a.new
            || std::fs::canonicalize(p)
                .ok()
                .is_some_and(|c| std::fs::canonicalize(&a.new).ok() == Some(c))
    };
    let members: Vec<PathBuf> = a
        .members
        .iter()
        .filter(|p| !same_file(p))
        .cloned()
        .collect();
    let mut managed = start_rw(&members, None, Some("add a member"))?;
    if a.re_add || member_exists(&a.new) {
        let device = open_device(&a.new, OpenMode::ReadWrite)?;
        match managed.asm.re_add_check(&device) {
            Ok(_) => return re_add(managed, device, &a),
            Err(e) if a.re_add => return Err(e.into()),
            Err(e) => {
                // mdadm --add tries a re-add first and falls back to a new
                // member; say why when the device was one of this array's.
                if is_former_member(&managed.asm, &device) {
                    outln!("raidlab: {e}; adding it as a new member with a full rebuild instead");
                }
            }
        }
    }
    let asm = &mut managed.asm;
    let (device, created) = new_device(&a.new, a.member_size)?;
    let result = asm.add(device, a.force);
    if result.is_err() && created {
        let _ = std::fs::remove_file(&a.new);
    }
    match result? {
        Added::IntoSlot(slot) => {
            outln!(
                "raidlab: {} added into missing role {slot}",
                a.new.display()
            );
            if !a.no_rebuild {
                match asm.rebuild(options(&a.run, false), &mut bar("rebuild")) {
                    Ok(report) => print_rebuild(&report, a.run.json)?,
                    // The add itself is done; a rebuild the engine refuses
                    // (an array not stopped cleanly) needs the user's
                    // decision, which the refusal names.
                    Err(e) if e.kind == raidlab_core::ErrorKind::Refused => {
                        outln!("raidlab: role {slot} is not rebuilt yet: {e}");
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Added::Spare => outln!("raidlab: {} added as a hot spare", a.new.display()),
    }
    stop_managed(managed)?;
    Ok(ExitCode::SUCCESS)
}

/// Whether `device` carries a superblock of `asm`'s array.
fn is_former_member(asm: &Assembly, device: &Device) -> bool {
    matches!(
        raidlab_md::Superblock::read_from(device.volume.as_ref()),
        Ok(Some(sb)) if sb.set_uuid == asm.uuid
    )
}

/// Put a former member back into its role and (unless --no-rebuild) resync
/// the bitmap's dirty chunks onto it.
fn re_add(mut managed: Managed, device: Device, a: &AddArgs) -> Result<ExitCode> {
    let asm = &mut managed.asm;
    let r = asm.re_add(device)?;
    outln!(
        "raidlab: {} re-added into its role {} (its events {}, the bitmap cleared at {}; {} dirty chunk(s) to resync)",
        a.new.display(),
        r.slot,
        r.events,
        r.events_cleared,
        r.dirty_chunks
    );
    if !a.no_rebuild {
        match asm.rebuild(options(&a.run, false), &mut bar("re-add")) {
            Ok(report) => print_rebuild(&report, a.run.json)?,
            Err(e) if e.kind == raidlab_core::ErrorKind::Refused => {
                outln!("raidlab: role {} is not resynced yet: {e}", r.slot);
            }
            Err(e) => return Err(e.into()),
        }
    }
    stop_managed(managed)?;
    Ok(ExitCode::SUCCESS)
}

pub fn replace(a: ReplaceArgs) -> Result<ExitCode> {
    if let Some(server) = crate::control::find(&a.members)? {
        let (device, created) = new_device(&a.with, a.member_size)?;
        drop(device);
        let r = live::replace(&server, &a);
        if r.is_err() && created {
            let _ = std::fs::remove_file(&a.with);
        }
        return r;
    }
    let mut managed = start_rw(&a.members, None, Some("replace a member"))?;
    let asm = &mut managed.asm;
    let old = asm.find(&path_str(&a.old))?;
    let (device, created) = new_device(&a.with, a.member_size)?;
    let result = asm.replace(old, device, a.force);
    if result.is_err() && created {
        let _ = std::fs::remove_file(&a.with);
    }
    result?;
    outln!(
        "raidlab: {} will replace {}",
        a.with.display(),
        a.old.display()
    );
    if !a.no_rebuild {
        run_rebuild(asm, &a.run, false)?;
    }
    stop_managed(managed)?;
    Ok(ExitCode::SUCCESS)
}

pub fn rebuild(a: RunArgs) -> Result<ExitCode> {
    if let Some(server) = crate::control::find(&a.members)? {
        return live::rebuild(&server, &a);
    }
    let mut managed = start_rw(&a.members, Some(a.force), Some("rebuild"))?;
    spares_into_missing_roles(&mut managed.asm, a.force, a.run.json)?;
    run_rebuild(&mut managed.asm, &a.run, a.force)?;
    stop_managed(managed)?;
    Ok(ExitCode::SUCCESS)
}

/// md's start of a degraded array with hot spares (`mdadm --assemble`
/// puts them into the missing roles and recovers), for the offline verb that
/// rebuilds: the engine's rule ([`Assembly::spares_into_missing_roles`]),
/// the array writable, and consistent when in sync or when `--force`
/// accepts stale parity as md's `--force` does (it marks a dirty degraded
/// array clean, then recovers onto the spare; the rebuild then runs with
/// the same `--force`). A spare that waits is said; with no rebuild to run
/// beside it, that is the verb's error, nothing written.
fn spares_into_missing_roles(asm: &mut Assembly, force: bool, json: bool) -> Result<()> {
    let missing = asm.missing();
    let consistent = asm.in_sync() || force;
    let s = asm
        .spares_into_missing_roles(true, consistent)
        .with_context(|| {
            format!("cannot put a hot spare into missing role(s) {missing:?}; nothing changed")
        })?;
    for &(i, role) in &s.taken {
        let line = format!(
            "raidlab: hot spare {} goes into missing role {role}",
            asm.members[i].device.path
        );
        // `--json` prints the rebuild's report alone on stdout.
        if json {
            eprintln!("{line}");
        } else {
            outln!("{line}");
        }
    }
    let Some(why) = s.waits else {
        return Ok(());
    };
    let why = match why {
        NoSpareTaken::Inconsistent => "the array was not stopped cleanly and is degraded, so parity or copies may disagree and what a rebuild computes for the role may be wrong: run `raidlab resync` with the same members first where it can (redundancy left besides the missing role), or `raidlab rebuild --force` to rebuild onto the hot spare anyway (blocks of stripes written at the crash may come out wrong; md's --force takes the same risk)".to_string(),
        NoSpareTaken::Reshaping => "a reshape is recorded, and md runs it before it rebuilds: finish it with `raidlab grow --continue` and the same members, then `raidlab rebuild`".to_string(),
        other => other.to_string(),
    };
    if asm.rebuilding().is_empty() {
        bail!("role(s) {missing:?} missing beside a hot spare and not rebuilt: {why}; nothing was written");
    }
    eprintln!("raidlab: role(s) {missing:?} missing beside a hot spare wait: {why}");
    Ok(())
}

pub fn resync(a: RunArgs) -> Result<ExitCode> {
    if crate::control::find(&a.members)?.is_some() {
        bail!("a server (`raidlab serve`) is serving this array: it resyncs at start when it must; stop it first (`raidlab stop`) to resync by hand");
    }
    let asm = crate::open::assemble(open_members(&a.members, OpenMode::ReadWrite)?)?;
    // Before the start, which may write (a log replay, a dirty mark).
    asm.refuse_scrub_mid_reshape("resync", Op::Write)?;
    asm.refuse_data_writes_without_journal("resync")?;
    let mut managed = start_managed(
        asm,
        ManageOptions {
            write: true,
            refuse: None,
        },
    )?;
    let asm = &mut managed.asm;
    if let (Some(r), true) = (&managed.report.ppl, asm.in_sync()) {
        // md's way with a partial parity log: the replay took the place of a resync.
        if a.run.json {
            outln!("{}", serde_json::to_string_pretty(r)?);
        } else {
            outln!("raidlab: the partial parity log was replayed; the array is clean");
        }
    } else if asm.has_journal() && asm.journal_member().is_some() && asm.in_sync() {
        // md's way with a write journal: starting it replayed whatever it held;
        // stripes are consistent and the superblocks never stopped being clean.
        outln!("raidlab: the write journal was replayed at start; the array is clean");
    } else if asm.in_sync() {
        // Nothing to do is not a failure: the array ends consistent.
        outln!("raidlab: the array is already in sync (clean): nothing to resync; `raidlab check` verifies it");
    } else {
        let report = asm.resync(options(&a.run, a.force), &mut bar("resync"))?;
        if a.run.json {
            outln!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            outln!(
                "raidlab: resync complete, {} sectors corrected; the array is clean",
                report.mismatch_sectors
            );
            print_coverage(&report, true)?;
        }
    }
    stop_managed(managed)?;
    Ok(ExitCode::SUCCESS)
}

pub fn scrub(a: ScrubArgs, repair: bool) -> Result<ExitCode> {
    if let Some(server) = crate::control::find(&a.members)? {
        return live::scrub(&server, &a, repair);
    }
    let opts = ManageOptions {
        write: repair,
        refuse: None,
    };
    let mode = if repair {
        OpenMode::ReadWrite
    } else {
        OpenMode::ReadOnly
    };
    let asm = crate::open::assemble(open_members(&a.members, mode)?)?;
    // Before the start, which may write (a log replay, a dirty mark).
    let (verb, op) = if repair {
        ("repair", Op::Write)
    } else {
        ("check", Op::Read)
    };
    asm.refuse_scrub_mid_reshape(verb, op)?;
    if repair {
        asm.refuse_data_writes_without_journal("repair")?;
    }
    let mut managed = start_managed(asm, opts)?;
    let report = managed.asm.scrub(
        repair,
        options(&a.run, false),
        &mut bar(if repair { "repair" } else { "check" }),
    )?;
    stop_managed(managed)?;
    print_scrub(&report, repair, a.run.json)?;
    Ok(ExitCode::from(scrub_exit(&report, repair)))
}

/// `check` exits 3 when it found mismatches; `repair` exits 0 once it has
/// rewritten them (the array ends consistent), as it does with none.
pub fn scrub_exit(r: &ScrubReport, repair: bool) -> u8 {
    if r.mismatch_sectors > 0 && !repair {
        MISMATCH_EXIT
    } else {
        0
    }
}

fn print_scrub(r: &ScrubReport, repair: bool, json: bool) -> Result<()> {
    out!("{}", scrub_text(r, repair, json)?);
    Ok(())
}

/// What `check` and `repair` print (offline, or sent by a server).
pub fn scrub_text(r: &ScrubReport, repair: bool, json: bool) -> Result<String> {
    let mut text = String::new();
    if json {
        textln!(text, "{}", serde_json::to_string_pretty(r)?);
        return Ok(text);
    }
    textln!(
        text,
        "mismatch_cnt: {}{}",
        r.mismatch_sectors,
        if repair && r.mismatch_sectors > 0 {
            " (all rewritten: the array is consistent now)"
        } else {
            ""
        }
    );
    if r.unsynced {
        textln!(text, "note: the array has not been resynced since it was last stopped uncleanly: mismatches in stripes that were being written then are expected, and a block \"located from P+Q\" there may only be a torn stripe. `raidlab resync` recomputes parity from the data, as md does after a crash; `repair` is refused until then");
    }
    for f in &r.findings {
        textln!(
            text,
            "  {} {} (role {}) at sector {}: {}",
            if repair { "fixed" } else { "mismatch in" },
            f.device,
            f.role,
            f.sector,
            f.what
        );
    }
    if r.findings.len() >= 1000 {
        textln!(text, "  (first 1000 findings shown)");
    }
    text += &coverage_text(r, repair)?;
    Ok(text)
}

fn bytes(n: u64) -> String {
    format!("{n} bytes ({})", format_size_approx(n))
}

/// On a degraded array, say what was checked with less redundancy and what could
/// not be checked at all (nothing is printed for a complete array).
fn print_coverage(r: &ScrubReport, repair: bool) -> Result<()> {
    out!("{}", coverage_text(r, repair)?);
    Ok(())
}

fn coverage_text(r: &ScrubReport, repair: bool) -> Result<String> {
    let mut text = String::new();
    if r.missing_roles.is_empty() {
        return Ok(text);
    }
    textln!(
        text,
        "degraded: role(s) {:?} missing, not read; checked with the redundancy left",
        r.missing_roles
    );
    let one_syndrome = r.pages_checked_p_only + r.pages_checked_q_only;
    if one_syndrome > 0 {
        textln!(
            text,
            "  RAID 6 with one syndrome left: {} stripe pages checked against P only, {} against Q only",
            r.pages_checked_p_only,
            r.pages_checked_q_only
        );
        textln!(
            text,
            "  a mismatch there cannot be traced to one block, so {} rewrites only the parity it checked, never data",
            if repair { "this run" } else { "repair" }
        );
    } else if r.reduced_array_bytes > 0 {
        textln!(
            text,
            "  {} of array data compared across the copies left",
            bytes(r.reduced_array_bytes)
        );
    }
    if r.unchecked_array_bytes > 0 {
        textln!(
            text,
            "  {} of array data has a single copy left and was not checked (nothing to compare it with); add a member and rebuild to check it",
            bytes(r.unchecked_array_bytes)
        );
    }
    Ok(text)
}
