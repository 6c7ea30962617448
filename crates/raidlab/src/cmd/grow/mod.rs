//! `grow`: one in-place change of an array per run, offline, as mdadm
//! --grow makes it (the rules are raidlab-raid's `grow`): --size (RAID
//! 1/4/5/6, RAID 10 near or offset), --bitmap,
//! --consistency-policy, --raid-devices of a RAID 1, more --raid-devices of
//! a RAID 0 and fewer (with --array-size), more or fewer (with
//! --array-size) of a RAID 10 (near or offset) and its --chunk or --layout
//! (near and offset, the same copies), and for a RAID 4/5/6 more or fewer
//! (with --array-size)
//! --raid-devices, --chunk, --layout, --level 4|5|6 (a reshape, run to
//! its end here; `--continue` finishes one that was interrupted; a
//! metadata 0.90 one's new chunk or layout, and its fewer members, run
//! through mdadm's `--backup-file`, which its `--continue` needs too; its
//! more members take one for their critical section if given). The resync of new space and the rebuild of new
//! mirrors run right after (the long runs of `manage`), unless --no-sync.
//! Every other restripe is refused before anything is written. The level
//! changes by md's takeovers are `convert`'s (their steps, decided once for
//! offline and served). Of a served array, a restripe (a 0.90 one's new
//! chunk or layout and fewer members through `--backup-file`, which the
//! server makes), a level change, --size and --consistency-policy are made
//! in the server (`served`).

use crate::cli::{GrowArgs, GrowBitmap};
use crate::cmd::manage::{assemble_rw_checked, bar, new_device, options, print_rebuild};
use anyhow::{bail, Result};
use raidlab_core::size::parse_size;
use raidlab_layout::Level;
use raidlab_raid::assemble::Assembly;
use raidlab_raid::grow::{BackupFile, Policy, ReshapeRequest, SizeRequest};
use raidlab_raid::manage::Added;
use std::process::ExitCode;

mod convert;
mod served;

use convert::grow_convert;
use served::grow_served;
pub(crate) use served::{served_check, served_convert, served_start, ServedGrow};

pub fn run(a: GrowArgs) -> Result<ExitCode> {
    if a.array_size.is_some() && a.raid_devices.is_none() && a.level.is_none() {
        // md's truncation of a running array: only a served one runs.
        return served::grow_array_size(&a);
    }
    let array_bytes = match a.array_size.as_deref() {
        None => None,
        Some(_) if a.raid_devices.is_none() || a.level.is_some() => bail!(
            "--array-size goes with fewer --raid-devices of a RAID 0/4/5/6 or 10 (the size the shrink truncates the array to), or of a served array alone or with --size; not with --level; nothing was changed"
        ),
        Some("max") => bail!(
            "--array-size max: the array already exposes all it holds offline (md forgets a smaller --array-size when the array stops); give the size a shrink truncates it to"
        ),
        Some(s) => Some(parse_size(s).map_err(|e| {
            anyhow::anyhow!("--array-size {s}: {} (give a size such as 96M)", e.message)
        })?),
    };
    let changes = [
        a.size.is_some(),
        a.bitmap.is_some(),
        a.consistency_policy.is_some(),
        // With --level, --raid-devices is part of that one change (md's
        // RAID 5 to 6 takes one member more); with --chunk or --layout too
        // (md's reshape records delta_disks, new_chunk and new_layout at
        // once).
        a.raid_devices.is_some() && a.level.is_none() && a.chunk.is_none() && a.layout.is_none(),
        a.continue_reshape,
        a.level.is_some() || a.chunk.is_some() || a.layout.is_some(),
    ]
    .iter()
    .filter(|&&c| c)
    .count();
    if changes == 0 {
        bail!("nothing to change: give --size, --bitmap, --consistency-policy, --raid-devices, --chunk, --layout, --level or --continue (see `raidlab grow --help`)");
    }
    if changes > 1 {
        bail!("one change per run: give only one of --size, --bitmap, --consistency-policy, --raid-devices, --continue, or a restripe (--chunk, --layout, --level, together and with --raid-devices if need be) (mdadm: \"cannot change component size at the same time as other changes\"; change one, check the data, then the next)");
    }
    if a.level.is_some() && a.chunk.is_some() {
        // mdadm's Grow.c refuses the pair before it looks at the array,
        // whether or not the level or the chunk would differ.
        bail!("--level with --chunk: mdadm refuses them together (\"Cannot change array level in the same operation as changing chunk size\"); change the level first, then reshape to the new chunk; nothing was changed");
    }
    if a.no_sync && a.continue_reshape {
        bail!("--no-sync with --continue: --continue runs the reshape; leave the array as it is instead");
    }
    if !a.add.is_empty() && a.raid_devices.is_none() && a.level.is_none() {
        bail!(
            "--add is for the new slots of --raid-devices (or Q's of --level 6); `raidlab add` adds a member or a spare"
        );
    }
    if a.bitmap_chunk.is_some() && a.bitmap != Some(GrowBitmap::Internal) {
        bail!("--bitmap-chunk goes with --bitmap internal");
    }
    if a.assume_clean && a.size.is_none() {
        bail!("--assume-clean goes with --size");
    }
    let size = match a.size.as_deref() {
        None => None,
        Some("max") => Some(SizeRequest::Max),
        Some(s) => Some(SizeRequest::Bytes(parse_size(s).map_err(|e| {
            anyhow::anyhow!(
                "--size {s}: {} (give a size such as 512M, or max)",
                e.message
            )
        })?)),
    };
    let policy = a
        .consistency_policy
        .as_deref()
        .map(parse_policy)
        .transpose()?;
    let bitmap_chunk = match a.bitmap_chunk {
        Some(c) => Some(u32::try_from(c).map_err(|_| {
            anyhow::anyhow!("--bitmap-chunk {c}: md's bitmap chunk is at most 2 GiB")
        })?),
        None => None,
    };
    let restripe = restripe_request(&a)?;
    if a.backup_file.is_some() && restripe.is_none() && !a.continue_reshape {
        bail!("--backup-file goes with a restripe (--raid-devices, --chunk, --layout) or --continue of a metadata 0.90 array; nothing was changed");
    }
    if let Some(server) = crate::control::find(&a.members)? {
        return grow_served(&server, &a, restripe, array_bytes, size, policy);
    }
    let mut asm = assemble_rw_checked(&a.members, |asm| {
        asm.refuse_data_writes_without_journal("grow")?;
        // A reshape's (and a size change's) refusals come before a log
        // replay could write.
        if size.is_some() {
            asm.size_change_logs_check()?;
        }
        match &restripe {
            Some(req) if conversion(asm, req) => {
                asm.convert_check(
                    req.level.unwrap_or(asm.geometry.level),
                    req.raid_devices,
                    req.layout.as_deref(),
                    a.add.len(),
                )?;
                Ok(())
            }
            Some(req)
                if (req.raid_devices.is_none()
                    || matches!(
                        asm.geometry.level,
                        Level::Raid0 | Level::Raid4 | Level::Raid5 | Level::Raid6 | Level::Raid10
                    ))
                    && asm.reshape().is_none() =>
            {
                reshape_plan(asm, req, &a, a.add.len(), array_bytes)?;
                Ok(())
            }
            _ => Ok(()),
        }
    })?;
    if let Some(req) = size {
        return grow_size(asm, req, &a);
    }
    if let Some(b) = a.bitmap {
        asm.grow_bitmap(b == GrowBitmap::Internal, bitmap_chunk)?;
        out!("{}", bitmap_text(&asm));
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(p) = policy {
        asm.grow_policy(p)?;
        outln!("raidlab: the consistency policy is now {}", p.name());
        return Ok(ExitCode::SUCCESS);
    }
    if a.continue_reshape {
        return run_reshape(&mut asm, &a);
    }
    if let Some(req) = restripe {
        if conversion(&asm, &req) {
            return grow_convert(asm, &req, &a);
        }
        let level = asm.geometry.level;
        match req.raid_devices {
            Some(n)
                if !matches!(
                    level,
                    Level::Raid0 | Level::Raid4 | Level::Raid5 | Level::Raid6 | Level::Raid10
                ) =>
            {
                return grow_devices(asm, n, &a)
            }
            _ => return grow_reshape(asm, &req, &a, array_bytes),
        }
    }
    unreachable!("one change was counted above")
}

/// The reshape `req` asks for, checked with `coming` new members: through
/// `--backup-file` when one is given (a metadata 0.90 restripe or shrink),
/// else as any other. The one place the two checks are chosen between, so
/// that the early refusal (before a log replay could write) and the grow's
/// own check agree.
fn reshape_plan(
    asm: &Assembly,
    req: &ReshapeRequest,
    a: &GrowArgs,
    coming: usize,
    array_bytes: Option<u64>,
) -> raidlab_core::Result<raidlab_raid::grow::ReshapePlan> {
    match &a.backup_file {
        Some(f) => asm.reshape_check_adding_with_backup(req, coming, f, array_bytes),
        None => asm.reshape_check_sized(req, coming, array_bytes),
    }
}

fn grow_size(mut asm: Assembly, req: SizeRequest, a: &GrowArgs) -> Result<ExitCode> {
    if a.no_sync && asm.logs_partial_parity() && !a.assume_clean {
        bail!("--no-sync on an array with a partial parity log: the next start replays the log and records the array clean, so the new space would never be resynced; grow without --no-sync (the resync runs now)");
    }
    let c = asm.grow_size(req, a.assume_clean)?;
    if a.run.json && (c.resync_from.is_none() || a.no_sync) {
        outln!("{}", serde_json::to_string_pretty(&c)?);
        return Ok(ExitCode::SUCCESS);
    }
    out!("{}", size_text(&c));
    let Some(from) = c.resync_from else {
        return Ok(ExitCode::SUCCESS);
    };
    if a.no_sync {
        outln!("raidlab: the new space (from member byte {from}) is resynced by `raidlab resync`");
        return Ok(ExitCode::SUCCESS);
    }
    // The same assembly, whose superblocks the change wrote: a new one
    // would replay a partial parity log first and call the array clean.
    let report = asm.resync(options(&a.run, false), &mut bar("resync"))?;
    if a.run.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        outln!("raidlab: the new space is resynced (from member byte {from}); the array is clean");
    }
    Ok(ExitCode::SUCCESS)
}

/// What a change of the component size did, offline or served (the
/// resync of the new space is said after).
pub(crate) fn size_text(c: &raidlab_raid::grow::SizeChange) -> String {
    if c.new_member_bytes == c.old_member_bytes {
        return format!(
            "raidlab: component size unchanged at {} bytes (array {} bytes); {} (spares count, as in md) has no more room\n",
            c.new_member_bytes, c.new_array_bytes, c.tightest_member
        );
    }
    let mut out = format!(
        "raidlab: component size set to {} bytes (was {}); the array is {} bytes (was {})\n",
        c.new_member_bytes, c.old_member_bytes, c.new_array_bytes, c.old_array_bytes
    );
    if c.new_member_bytes < c.old_member_bytes {
        out += "raidlab: what lay past the new end is no longer served; it stays on the members until written, and growing back to the old size brings it back\n";
    }
    if c.resync_from.is_some() && c.bitmap_chunks_marked > 0 {
        out += &format!(
            "raidlab: {} bitmap chunk(s) marked for the new space\n",
            c.bitmap_chunks_marked
        );
    }
    out
}

/// `--consistency-policy`'s value.
fn parse_policy(p: &str) -> Result<Policy> {
    Ok(match p {
        "resync" => Policy::Resync,
        "ppl" => Policy::Ppl,
        "bitmap" => Policy::Bitmap,
        "journal" => Policy::Journal,
        other => bail!(
            "--consistency-policy {other}: expected resync or ppl (a bitmap is added with --bitmap internal)"
        ),
    })
}

/// A served `grow --consistency-policy` (the server's side): `policy`'s
/// checks and metadata on the assembly with the requests held.
pub(crate) fn served_policy(
    live: &std::sync::Arc<raidlab_raid::live::LiveArray>,
    policy: &str,
) -> Result<String> {
    let p = parse_policy(policy)?;
    live.change_running(|asm| asm.grow_policy(p))?;
    Ok(format!(
        "raidlab: the consistency policy is now {}\n",
        p.name()
    ))
}

/// Open (or create, at --member-size) every `--add` device before anything
/// is written: the devices, and the files this run created, which
/// [`cleanup`] removes again when the grow is refused.
fn open_adds(
    a: &GrowArgs,
) -> Result<(Vec<raidlab_raid::assemble::Device>, Vec<std::path::PathBuf>)> {
    let mut adds = Vec::new();
    let mut created = Vec::new();
    for p in &a.add {
        match new_device(p, a.member_size) {
            Ok((d, c)) => {
                if c {
                    created.push(p.clone());
                }
                adds.push(d);
            }
            Err(e) => {
                cleanup(&created);
                return Err(e);
            }
        }
    }
    Ok((adds, created))
}

/// Remove the files a refused grow created (never a file that was there).
fn cleanup(created: &[std::path::PathBuf]) {
    for p in created {
        let _ = std::fs::remove_file(p);
    }
}

fn grow_devices(mut asm: Assembly, n: usize, a: &GrowArgs) -> Result<ExitCode> {
    // The devices to add are opened and checked before anything is written.
    let (adds, created) = open_adds(a)?;
    if n > asm.geometry.raid_disks && adds.len() > n - asm.geometry.raid_disks {
        cleanup(&created);
        bail!(
            "{} device(s) given with --add but only {} new slot(s): add the others as spares with `raidlab add`",
            adds.len(),
            n - asm.geometry.raid_disks
        );
    }
    if n < asm.geometry.raid_disks && !adds.is_empty() {
        cleanup(&created);
        bail!("--add goes with growing --raid-devices, not shrinking");
    }
    if let Err(e) = precheck_adds(&asm, &adds, a.force) {
        cleanup(&created);
        return Err(e);
    }
    let change = match asm.grow_raid_devices(n, adds.len(), a.force) {
        Ok(c) => c,
        Err(e) => {
            cleanup(&created);
            return Err(e.into());
        }
    };
    outln!(
        "raidlab: raid devices {} -> {}",
        change.old_raid_devices,
        change.new_raid_devices
    );
    for (p, from, to) in &change.moved {
        outln!("raidlab: {p} moved from role {from} to role {to}");
    }
    for p in &change.spares_activated {
        outln!("raidlab: hot spare {p} takes a new slot");
    }
    for d in adds {
        let path = d.path.clone();
        match asm.add(d, a.force)? {
            Added::IntoSlot(slot) => outln!("raidlab: {path} added into new role {slot}"),
            Added::Spare => outln!("raidlab: {path} added as a hot spare"),
        }
    }
    if !asm.rebuilding().is_empty() {
        if a.no_sync {
            outln!("raidlab: the new mirror(s) are rebuilt by `raidlab rebuild`");
        } else {
            let report = asm.rebuild(options(&a.run, false), &mut bar("rebuild"))?;
            print_rebuild(&report, a.run.json)?;
        }
    } else if change.new_raid_devices > change.old_raid_devices {
        outln!("raidlab: the array is degraded until members are added (`raidlab add`)");
    }
    Ok(ExitCode::SUCCESS)
}

/// `--raid-devices`, `--level`, `--chunk`, `--layout` as one restripe
/// request; `None` when none of them is given.
fn restripe_request(a: &GrowArgs) -> Result<Option<ReshapeRequest>> {
    if a.raid_devices.is_none() && a.level.is_none() && a.chunk.is_none() && a.layout.is_none() {
        return Ok(None);
    }
    let level = match a.level.as_deref() {
        None => None,
        Some(l) => {
            Some(Level::from_name(l).map_err(|e| anyhow::anyhow!("--level {l}: {}", e.message))?)
        }
    };
    let chunk_bytes = match a.chunk.as_deref() {
        None => None,
        Some(c) => {
            // mdadm reads a bare number as KiB.
            let bytes = if !c.is_empty() && c.chars().all(|ch| ch.is_ascii_digit()) {
                c.parse::<u64>().ok().and_then(|k| k.checked_mul(1024))
            } else {
                parse_size(c).ok()
            };
            Some(bytes.ok_or_else(|| {
                anyhow::anyhow!(
                    "--chunk {c}: not a size (give it as 64K, 512K, 1M; a bare number is KiB, as mdadm reads it)"
                )
            })?)
        }
    };
    Ok(Some(ReshapeRequest {
        raid_devices: a.raid_devices,
        level,
        chunk_bytes,
        layout: a.layout.clone(),
    }))
}

/// A restripe of a RAID 0/4/5/6 or 10 (more members; fewer of a RAID
/// 4/5/6 or 10; for RAID 0/4/5/6 and 10 a new chunk, for 4/5/6 a new
/// layout, for 10 near to offset and back,
/// RAID 4 to 5 and back): every check first (the devices to add, md's rules for
/// the reshape), then the devices go in as spares, the reshape is recorded
/// in the superblocks and run to its end. A change md makes by takeover
/// alone (RAID 4 and a RAID 5 in parity-last) only rewrites the
/// superblocks.
fn grow_reshape(
    mut asm: Assembly,
    req: &ReshapeRequest,
    a: &GrowArgs,
    array_bytes: Option<u64>,
) -> Result<ExitCode> {
    let old = asm.geometry.raid_disks;
    let n = req.raid_devices.unwrap_or(old);
    if n < old && !a.add.is_empty() {
        bail!("--add with fewer --raid-devices: a shrink takes no new member (add spares with `raidlab add`); nothing was changed");
    }
    let (adds, created) = open_adds(a)?;
    let checked = (|| -> Result<raidlab_raid::grow::ReshapePlan> {
        if n > old && adds.len() > n - old {
            bail!(
                "{} device(s) given with --add but only {} new slot(s): add the others as spares with `raidlab add`; nothing was changed",
                adds.len(),
                n - old
            );
        }
        let plan = reshape_plan(&asm, req, a, adds.len(), array_bytes)?;
        precheck_adds(&asm, &adds, a.force)?;
        Ok(plan)
    })();
    let plan = match checked {
        Ok(p) => p,
        Err(e) => {
            cleanup(&created);
            return Err(e);
        }
    };
    let from = describe(&asm.geometry);
    if !plan.restripes() {
        if let Some(to) = req.level {
            asm.takeover(to)?;
        }
        out!("{}", takeover_text(&from, &asm));
        return Ok(ExitCode::SUCCESS);
    }
    for d in adds {
        let path = d.path.clone();
        asm.add(d, a.force)?;
        outln!("raidlab: {path} added as a spare for the reshape");
    }
    let code = start_and_run(&mut asm, plan, a)?;
    if a.no_sync {
        return Ok(code);
    }
    if let Some(to) = plan.then_level {
        // md's last step of RAID 5 to 4: the array is now in parity-last.
        asm.takeover(to)?;
        outln!("raidlab: the array is now {}", describe(&asm.geometry));
    }
    Ok(code)
}

/// Record the checked restripe `plan` in the superblocks and run it to its
/// end (with `--no-sync`, only record it).
fn start_and_run(
    asm: &mut Assembly,
    plan: raidlab_raid::grow::ReshapePlan,
    a: &GrowArgs,
) -> Result<ExitCode> {
    let from = describe(&asm.geometry);
    if let Some(path) = &a.backup_file {
        return start_and_run_with_backup(asm, plan, path, a, &from);
    }
    asm.reshape_start(plan)?;
    let to = match asm.reshape() {
        Some(Ok(r)) => describe(&r.new),
        _ => describe(&asm.geometry),
    };
    if plan.backup_sectors > 0 {
        // Metadata 0.90: no new data offset; mdadm's words for the backup.
        outln!(
            "raidlab: reshape started: {from} -> {to}, in place (metadata 0.90 has no new data offset); backed up {}K of critical section on the new member(s), as mdadm does",
            plan.backup_sectors / 2
        );
    } else {
        outln!(
            "raidlab: reshape started: {from} -> {to}; the data offset moves {} {} KiB on every member",
            if plan.backwards {
                "up (a backward reshape, from the array's end)"
            } else {
                "down"
            },
            plan.gap_sectors / 2
        );
    }
    if a.no_sync {
        outln!("raidlab: the array is mid-reshape (readable, read-only): `raidlab grow --continue` with the same members restripes it");
        return Ok(ExitCode::SUCCESS);
    }
    run_reshape(asm, a)
}

/// Whether `req` changes the level by one of md's takeovers (the engine's
/// `is_conversion`), not a restripe at one level.
fn conversion(asm: &Assembly, req: &ReshapeRequest) -> bool {
    raidlab_raid::grow::is_conversion(asm, req)
}

/// Level, member count, chunk and layout, as `detail` names them.
pub(crate) fn describe(g: &raidlab_layout::Geometry) -> String {
    format!(
        "{} of {} members, {}K chunk, {}",
        g.level.name(),
        g.raid_disks,
        g.chunk_bytes / 1024,
        g.layout.name()
    )
}

/// What `--bitmap` did, offline or served.
pub(crate) fn bitmap_text(asm: &Assembly) -> String {
    match &asm.bitmap {
        Some(bm) => format!(
            "raidlab: internal bitmap added: {} chunks of {} bytes\n",
            bm.chunks(),
            bm.sb.chunksize
        ),
        None => "raidlab: internal bitmap removed; the consistency policy is resync\n".into(),
    }
}

/// What a takeover alone did (no data moved), offline or served.
pub(crate) fn takeover_text(from: &str, asm: &Assembly) -> String {
    format!(
        "raidlab: {from} is now {} (md's takeover: the same placement, no data moved)\n",
        describe(&asm.geometry)
    )
}

/// What a finished reshape says, offline or served.
pub(crate) fn reshape_text(
    report: &raidlab_raid::grow::ReshapeReport,
    g: &raidlab_layout::Geometry,
    json: bool,
) -> Result<String> {
    if json {
        return Ok(serde_json::to_string_pretty(report)? + "\n");
    }
    let mut out = String::new();
    if report.resumed {
        out += &format!(
            "raidlab: reshape resumed at array byte {}\n",
            report.resumed_from
        );
    }
    let members = if report.old_raid_devices == report.new_raid_devices {
        format!("over the same {} members", report.new_raid_devices)
    } else {
        format!(
            "raid devices {} -> {}",
            report.old_raid_devices, report.new_raid_devices
        )
    };
    out += &format!(
        "raidlab: reshape done: {members}; the array is {}, {} bytes (was {}); data offset moved {} {} bytes\n",
        describe(g),
        report.new_array_bytes,
        report.old_array_bytes,
        if report.backwards { "up" } else { "down" },
        report.data_offset_moved_bytes
    );
    if !report.spares.is_empty() {
        out += &format!(
            "raidlab: {} left the array's roles: spare(s) now, as md leaves them: take each out with `raidlab remove MEMBER... --member DEV` to use it elsewhere\n",
            report.spares.join(", ")
        );
    }
    if !report.removed.is_empty() {
        out += &format!(
            "raidlab: {} left the array (removed, as md's takeover back to RAID 0 leaves them: a RAID 0 has no spares); give only the other members from now on\n",
            report.removed.join(", ")
        );
    }
    Ok(out)
}

/// A 0.90 restripe over the same members, or onto fewer members, through
/// mdadm's backup file at `path`, made here for it (`raidlab_raid::grow::BackupFile`).
fn start_and_run_with_backup(
    asm: &mut Assembly,
    plan: raidlab_raid::grow::ReshapePlan,
    path: &std::path::Path,
    a: &GrowArgs,
    from: &str,
) -> Result<ExitCode> {
    let file = BackupFile::create(path, Assembly::backup_file_sectors(&plan))?;
    if let Err(e) = asm.reshape_start_with_backup(plan, &file) {
        if asm.reshape().is_none() {
            // Nothing recorded: the file holds nothing anyone needs.
            let _ = std::fs::remove_file(path);
        }
        return Err(e.into());
    }
    let to = match asm.reshape() {
        Some(Ok(r)) => describe(&r.new),
        _ => describe(&asm.geometry),
    };
    if plan.new_raid_devices > plan.old_raid_devices && !plan.backwards {
        outln!(
            "raidlab: reshape started: {from} -> {to}, in place (metadata 0.90 has no new data offset); backed up {}K of critical section in the backup file {}, as mdadm does",
            plan.backup_sectors / 2,
            path.display()
        );
    } else {
        outln!(
        "raidlab: reshape started: {from} -> {to}, in place (metadata 0.90 has no new data offset) through the backup file {} in windows of {}K{}, as mdadm does",
        path.display(),
        plan.backup_sectors / 2,
        if plan.backwards {
            ", backwards from the end (fewer members)"
        } else {
            ""
        }
    );
    }
    if a.no_sync {
        outln!("raidlab: the array is mid-reshape: `raidlab grow --continue --backup-file {}` with the same members restripes it", path.display());
        return Ok(ExitCode::SUCCESS);
    }
    run_with_file(asm, &file, a)
}

fn run_with_file(asm: &mut Assembly, file: &BackupFile, a: &GrowArgs) -> Result<ExitCode> {
    let report = asm.reshape_run_with_backup(file, options(&a.run, false), &mut bar("reshape"))?;
    out!("{}", reshape_text(&report, &asm.geometry, a.run.json)?);
    Ok(ExitCode::SUCCESS)
}

/// Run the reshape the superblocks record to its end.
fn run_reshape(asm: &mut Assembly, a: &GrowArgs) -> Result<ExitCode> {
    if let Some(path) = &a.backup_file {
        asm.backup_file_path_check(path, false)?;
        return run_with_file(asm, &BackupFile::open(path)?, a);
    }
    let report = asm.reshape_run(options(&a.run, false), &mut bar("reshape"))?;
    out!("{}", reshape_text(&report, &asm.geometry, a.run.json)?);
    Ok(ExitCode::SUCCESS)
}

/// The checks `add` makes of a new device (size, an md superblock on it),
/// made before the mirror count changes, so a device that cannot be added
/// stops the grow with nothing written.
fn precheck_adds(
    asm: &Assembly,
    adds: &[raidlab_raid::assemble::Device],
    force: bool,
) -> Result<()> {
    let offset = asm
        .members
        .iter()
        .filter(|m| m.is_live())
        .map(|m| m.sb.data_offset * 512)
        .max()
        .unwrap_or(0);
    for d in adds {
        let need = offset + asm.geometry.member_bytes;
        if d.volume.size() < need {
            bail!(
                "{} is {} bytes but a member of this array needs {need} (data offset {offset} + {} of data); nothing was changed",
                d.path,
                d.volume.size(),
                asm.geometry.member_bytes
            );
        }
        if !force {
            if let Ok(Some(sb)) = raidlab_md::Superblock::read_from(d.volume.as_ref()) {
                bail!(
                    "{} already carries an md superblock (array {}): it may hold someone's data; use --force to overwrite it; nothing was changed",
                    d.path,
                    raidlab_raid::assemble::format_uuid(&sb.set_uuid)
                );
            }
        }
    }
    Ok(())
}
