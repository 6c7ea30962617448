//! `grow` of an array `raidlab serve` serves: the command sends a restripe
//! (or `--continue`) to the server, which checks and starts it on its
//! assembly as offline (`served_start`) and walks it while clients keep
//! using the array (`raidlab_raid::live`); `--bitmap` and a takeover that
//! moves no data swap the running array at once. Changes that need the
//! array stopped (--size, --consistency-policy, the other level changes)
//! are refused with what to do.

use super::*;

/// A grow of an array `raidlab serve` serves: a restripe (or `--continue`)
/// is walked in the server while clients keep using the array; the other
/// changes need it stopped.
pub(super) fn grow_served(
    server: &std::path::Path,
    a: &GrowArgs,
    restripe: Option<ReshapeRequest>,
    array_bytes: Option<u64>,
) -> Result<ExitCode> {
    let stop_first = |what: &str| -> Result<ExitCode> {
        bail!(
            "the array is served by `raidlab serve` ({}): {what} of a served array is not built; stop it (`raidlab stop` with the same members), grow it offline, then serve it again (a restripe, --raid-devices, --chunk, --layout, runs while it serves, and --bitmap is made at once)",
            server.display()
        )
    };
    if a.size.is_some() {
        return stop_first("--size");
    }
    if a.consistency_policy.is_some() {
        return stop_first("--consistency-policy");
    }
    if a.no_sync {
        return stop_first("--no-sync");
    }
    let req = restripe.unwrap_or_default();
    let mut add = Vec::new();
    for p in &a.add {
        if !p.exists() {
            bail!(
                "{}: does not exist; the server opens the devices it adds (create the file first, e.g. `truncate -s SIZE {}`); nothing was changed",
                p.display(),
                p.display()
            );
        }
        add.push(crate::control::absolute(p).display().to_string());
    }
    crate::cmd::live::grow(
        server,
        &a.members,
        crate::control::Command::Grow {
            raid_devices: req.raid_devices,
            level: req.level.map(|l| l.name().to_string()),
            chunk_bytes: req.chunk_bytes,
            layout: req.layout,
            array_bytes,
            add,
            force: a.force,
            continue_reshape: a.continue_reshape,
            max_rate: a.run.max_rate,
            json: a.run.json,
            bitmap: a.bitmap.map(|b| b == GrowBitmap::Internal),
            bitmap_chunk: a.bitmap_chunk,
        },
    )
}

/// The checks and the start of a restripe of a served array, on its
/// assembly (the server's side of `grow_served`): the same as offline's,
/// for the restripes walked while serving.
pub(crate) fn served_start(
    asm: &mut Assembly,
    req: &ReshapeRequest,
    adds: Vec<raidlab_raid::assemble::Device>,
    array_bytes: Option<u64>,
    force: bool,
) -> Result<()> {
    if conversion(asm, req) {
        bail!("a level change by md's takeover (RAID 0/1/10 to or from 4/5/6, RAID 5 to 6 and back) changes the running array's level: stop the server (`raidlab stop`), grow offline, serve again; nothing was changed");
    }
    let old = asm.geometry.raid_disks;
    let n = req.raid_devices.unwrap_or(old);
    if n < old && !adds.is_empty() {
        bail!("--add with fewer --raid-devices: a shrink takes no new member (add spares with `raidlab add`); nothing was changed");
    }
    if n > old && adds.len() > n - old {
        bail!(
            "{} device(s) given with --add but only {} new slot(s): add the others as spares with `raidlab add`; nothing was changed",
            adds.len(),
            n - old
        );
    }
    let plan = asm.reshape_check_sized(req, adds.len(), array_bytes)?;
    if !plan.restripes() || plan.then_level.is_some() {
        // A takeover alone is `served_takeover`'s (asked first).
        bail!("this change ends with md's takeover of the array's level after its restripe: stop the server (`raidlab stop`), grow offline, serve again; nothing was changed");
    }
    precheck_adds(asm, &adds, force)?;
    for d in adds {
        asm.add(d, force)?;
    }
    asm.reshape_start(plan)?;
    Ok(())
}

/// The level a served restripe request changes by md's takeover alone (the
/// same placement, no data moved: RAID 4 and a RAID 5 in parity-last), when
/// it is one; checked as offline.
pub(crate) fn served_takeover(
    asm: &Assembly,
    req: &ReshapeRequest,
    adds: usize,
    array_bytes: Option<u64>,
) -> Result<Option<Level>> {
    if conversion(asm, req) || req.level.is_none() {
        return Ok(None);
    }
    let plan = asm.reshape_check_sized(req, adds, array_bytes)?;
    if plan.restripes() {
        return Ok(None);
    }
    if adds > 0 {
        bail!("--add with a takeover alone: it takes no new member; nothing was changed");
    }
    Ok(req.level)
}
