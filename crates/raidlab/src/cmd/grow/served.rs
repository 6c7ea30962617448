//! `grow` of an array `raidlab serve` serves: the command sends a restripe
//! (or `--continue`) to the server, which checks and starts it on its
//! assembly as offline (`served_start`) and walks it while clients keep
//! using the array (`raidlab_raid::live`); `--bitmap`,
//! `--consistency-policy` and a takeover that moves no data swap the
//! running array at once; `--size` swaps it for the array of the new size
//! and resyncs the new space in the server. A level change by md's
//! takeovers runs the steps `convert::conversion_steps` gives, in its
//! order, each the served way (`served_convert`): new members by the
//! served add, the takeover by swapping the running array, the rebuild of
//! parity, Q or mirrors by the live rebuild, a restripe by the served walk.
//! `--array-size` alone cuts what the server exposes (md's truncation of a
//! running array, kept while it serves); a smaller `--size` follows it, or
//! comes with it in one command, the running array swapped for the smaller
//! one as for a bigger one. --no-sync needs the array stopped and is
//! refused with what to do.
//!
//! It decides nothing a check decides (those are offline's, run on the
//! server's assembly) and never changes the array before they pass.

use super::convert::{conversion_steps, step_request, takeover_text, Step};
use super::*;
use raidlab_raid::assemble::Device;
use raidlab_raid::grow::ReshapePlan;
use raidlab_raid::live::LiveArray;
use raidlab_raid::recovery::{Progress, RunOptions};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// A grow of an array `raidlab serve` serves: a restripe (or `--continue`)
/// is walked in the server while clients keep using the array, --size and
/// --consistency-policy are made there too; --no-sync needs it stopped.
pub(super) fn grow_served(
    server: &std::path::Path,
    a: &GrowArgs,
    restripe: Option<ReshapeRequest>,
    array_bytes: Option<u64>,
    size: Option<SizeRequest>,
    policy: Option<Policy>,
) -> Result<ExitCode> {
    if a.no_sync {
        bail!(
            "the array is served by `raidlab serve` ({}): --no-sync of a served array is not built; stop it (`raidlab stop` with the same members), grow it offline, then serve it again (a restripe, --size, --bitmap and --consistency-policy run while it serves)",
            server.display()
        );
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
            size: size.map(|s| match s {
                SizeRequest::Max => "max".to_string(),
                SizeRequest::Bytes(b) => b.to_string(),
            }),
            assume_clean: a.assume_clean,
            consistency_policy: policy.map(|p| p.name().to_string()),
            array_size: None,
            backup_file: a
                .backup_file
                .as_deref()
                .map(|p| crate::control::absolute(p).display().to_string()),
        },
    )
}

/// `--array-size` without a restripe (alone, or with `--size`): md's
/// truncation of a running array, so only of a served one; offline it
/// would change nothing (md forgets it when the array stops).
pub(super) fn grow_array_size(a: &GrowArgs) -> Result<ExitCode> {
    let others = a.bitmap.is_some()
        || a.consistency_policy.is_some()
        || a.chunk.is_some()
        || a.layout.is_some()
        || a.continue_reshape
        || !a.add.is_empty()
        || a.no_sync;
    if others {
        bail!("--array-size without --raid-devices goes alone or with --size (md's truncation of a running array, then its smaller component size); make the other change in another run; nothing was changed");
    }
    let given = a.array_size.as_deref().unwrap_or_default();
    let array_size = match given {
        "max" => "max".to_string(),
        s => parse_size(s)
            .map_err(|e| {
                anyhow::anyhow!(
                    "--array-size {s}: {} (give a size such as 96M, or max)",
                    e.message
                )
            })?
            .to_string(),
    };
    let size = match a.size.as_deref() {
        None => None,
        Some("max") => Some("max".to_string()),
        Some(s) => Some(
            parse_size(s)
                .map_err(|e| {
                    anyhow::anyhow!(
                        "--size {s}: {} (give a size such as 512M, or max)",
                        e.message
                    )
                })?
                .to_string(),
        ),
    };
    if a.assume_clean && size.is_none() {
        bail!("--assume-clean goes with --size");
    }
    let Some(server) = crate::control::find(&a.members)? else {
        bail!(
            "--array-size {given} without --raid-devices: md keeps an array size only while the array runs (mdadm --grow --array-size of a running array), and these members are not served, so offline it would change nothing; serve the array (`raidlab serve`) and give it there, or give it with fewer --raid-devices (the shrink it makes possible); nothing was changed"
        );
    };
    crate::cmd::live::grow(
        &server,
        &a.members,
        crate::control::Command::Grow {
            raid_devices: None,
            level: None,
            chunk_bytes: None,
            layout: None,
            array_bytes: None,
            add: Vec::new(),
            force: a.force,
            continue_reshape: false,
            max_rate: a.run.max_rate,
            json: a.run.json,
            bitmap: None,
            bitmap_chunk: None,
            size,
            assume_clean: a.assume_clean,
            consistency_policy: None,
            array_size: Some(array_size),
            backup_file: None,
        },
    )
}

/// What a served restripe request comes to, checked once as offline
/// checks it (`served_check`).
pub(crate) enum ServedGrow {
    /// md's takeover alone (the same placement, no data moved: RAID 4 and a
    /// RAID 5 in parity-last): the running array is swapped.
    Takeover(Level),
    /// A restripe walked while the array serves, checked against the
    /// assembly as `seen` records it.
    Walk { plan: ReshapePlan, seen: Seen },
    /// A level change by md's takeovers: its steps, in order, checked
    /// against the assembly as `seen` records it.
    Convert { steps: Vec<Step>, seen: Seen },
}

/// What a restripe's check read of the assembly and a start must find
/// unchanged: the check runs before the requests are held, and a member
/// that fails or joins meanwhile changes what md would allow.
#[derive(PartialEq)]
pub(crate) struct Seen {
    geometry: raidlab_layout::Geometry,
    slots: Vec<Option<usize>>,
    states: Vec<raidlab_raid::assemble::MemberState>,
}

impl Seen {
    fn of(asm: &Assembly) -> Seen {
        Seen {
            geometry: asm.geometry,
            slots: asm.slots.clone(),
            states: asm.members.iter().map(|m| m.state).collect(),
        }
    }
}

/// The checks of a served restripe request (the server's side of
/// `grow_served`), the same as offline's, in one pass: a takeover alone, a
/// restripe to walk while serving, or the steps of a level change.
pub(crate) fn served_check(
    asm: &Assembly,
    req: &ReshapeRequest,
    adds: usize,
    array_bytes: Option<u64>,
    backup: Option<&std::path::Path>,
) -> Result<ServedGrow> {
    if let Some(path) = backup {
        return served_check_with_backup(asm, req, adds, array_bytes, path);
    }
    if conversion(asm, req) {
        return Ok(ServedGrow::Convert {
            steps: conversion_steps(asm, req, adds)?,
            seen: Seen::of(asm),
        });
    }
    let old = asm.geometry.raid_disks;
    let n = req.raid_devices.unwrap_or(old);
    if n < old && adds > 0 {
        bail!("--add with fewer --raid-devices: a shrink takes no new member (add spares with `raidlab add`); nothing was changed");
    }
    if n > old && adds > n - old {
        bail!(
            "{adds} device(s) given with --add but only {} new slot(s): add the others as spares with `raidlab add`; nothing was changed",
            n - old
        );
    }
    let plan = asm.reshape_check_sized(req, adds, array_bytes)?;
    if let (false, Some(to)) = (plan.restripes(), req.level) {
        if adds > 0 {
            bail!("--add with a takeover alone: it takes no new member; nothing was changed");
        }
        return Ok(ServedGrow::Takeover(to));
    }
    if !plan.restripes() || plan.then_level.is_some() {
        bail!("this change ends with md's takeover of the array's level after its restripe: stop the server (`raidlab stop`), grow offline, serve again; nothing was changed");
    }
    Ok(ServedGrow::Walk {
        plan,
        seen: Seen::of(asm),
    })
}

/// [`served_check`] of a restripe through mdadm's backup file at `path`
/// (to be made): offline's check of one (a metadata 0.90 array's new chunk
/// or layout over the same members, fewer members, or more members, the
/// new ones given with `--add` or spares already; the file not on a
/// member, not existing). A level change takes no file.
fn served_check_with_backup(
    asm: &Assembly,
    req: &ReshapeRequest,
    adds: usize,
    array_bytes: Option<u64>,
    path: &std::path::Path,
) -> Result<ServedGrow> {
    if conversion(asm, req) {
        bail!(
            "--backup-file {}: a level change takes no backup file (it is a restripe's, of a metadata 0.90 array): leave it out; nothing was changed",
            path.display()
        );
    }
    let old = asm.geometry.raid_disks;
    let n = req.raid_devices.unwrap_or(old);
    if n <= old && adds > 0 {
        bail!("--add with --backup-file and no more --raid-devices: a new chunk or layout, or fewer members, takes no new member (add spares with `raidlab add`); nothing was changed");
    }
    if n > old && adds > n - old {
        bail!(
            "{adds} device(s) given with --add but only {} new slot(s): add the others as spares with `raidlab add`; nothing was changed",
            n - old
        );
    }
    // A grow to more members backs its critical section up in the file
    // and walks the rest in place, served as offline.
    let plan = asm.reshape_check_adding_with_backup(req, adds, path, array_bytes)?;
    Ok(ServedGrow::Walk {
        plan,
        seen: Seen::of(asm),
    })
}

/// The start of a restripe `served_check` checked, on the assembly with the
/// requests held: the new members go in as spares and the reshape is
/// recorded (through `backup`, the backup file made for it, when one is
/// given: its first window saved before the superblocks record it, as
/// offline), unless the members changed since the check.
pub(crate) fn served_start(
    asm: &mut Assembly,
    plan: ReshapePlan,
    seen: &Seen,
    adds: Vec<raidlab_raid::assemble::Device>,
    force: bool,
    backup: Option<&BackupFile>,
) -> Result<()> {
    if Seen::of(asm) != *seen {
        bail!("the array's members changed while the reshape was checked (a member failed, or one was added or removed): nothing was changed; ask again");
    }
    precheck_adds(asm, &adds, force)?;
    for d in adds {
        asm.add(d, force)?;
    }
    match backup {
        Some(f) => asm.reshape_start_with_backup(plan, f)?,
        None => asm.reshape_start(plan)?,
    }
    Ok(())
}

/// A level change on a served array (the server's side): the devices to
/// add checked as offline checks them, then each of `steps` made the served
/// way while clients keep using the array, its progress to `progress`,
/// what each did to `said`. Returns offline's text of every step. A step
/// that fails or a server that stops leaves what the earlier steps did
/// recorded, as md leaves it; the error says what is left and how it
/// resumes.
#[allow(clippy::too_many_arguments)]
pub(crate) fn served_convert(
    live: &Arc<LiveArray>,
    steps: &[Step],
    seen: &Seen,
    adds: Vec<Device>,
    force: bool,
    opts: RunOptions,
    json: bool,
    progress: &mut dyn FnMut(&str, Progress),
    said: &dyn Fn(&str),
) -> Result<String> {
    live.with_assembly(|asm| -> Result<()> {
        if Seen::of(asm) != *seen {
            bail!("the array's members changed while the level change was checked (a member failed, or one was added or removed): nothing was changed; ask again");
        }
        precheck_adds(asm, &adds, force)
    })?;
    let stopping = || opts.stop.is_some_and(|s| s.load(Ordering::Acquire));
    let mut adds = adds.into_iter();
    let mut text = String::new();
    for (i, step) in steps.iter().enumerate() {
        let done = match stopping() {
            true => Err(anyhow::anyhow!("the server is stopping")),
            false => served_step(
                live, step, &mut adds, force, &opts, json, progress, &stopping,
            ),
        };
        match done {
            Ok(t) => {
                said(t.trim_end().replace("raidlab: ", "").as_str());
                text += &t;
            }
            Err(e)
                if i == 0
                    && live.with_assembly(|a| Seen::of(a) == *seen && a.reshape().is_none()) =>
            {
                // The first step's own checks refused it: nothing changed.
                return Err(e);
            }
            Err(e) => {
                let now = live.with_assembly(|asm| describe(&asm.geometry));
                let why = format!(
                    "the level change stopped at its step {} of {}: {e:#}; the array is {now} (the steps before are recorded, as md leaves them); {}",
                    i + 1,
                    steps.len(),
                    left_to_do(&steps[i..])
                );
                // In the server's log too: a stopping server may be gone
                // before the command has its answer.
                said(&why);
                bail!(why);
            }
        }
    }
    Ok(text)
}

/// One step of a served level change; its text as offline's.
#[allow(clippy::too_many_arguments)]
fn served_step(
    live: &Arc<LiveArray>,
    step: &Step,
    adds: &mut dyn Iterator<Item = Device>,
    force: bool,
    opts: &RunOptions,
    json: bool,
    progress: &mut dyn FnMut(&str, Progress),
    stopping: &dyn Fn() -> bool,
) -> Result<String> {
    let mut text = String::new();
    match step {
        Step::Add { what } => {
            for d in adds {
                let path = d.path.clone();
                live.add(d, force, false)?;
                text += &format!("raidlab: {path} added as a spare for {what}\n");
            }
        }
        Step::Takeover(t) => {
            let from = live.with_assembly(|asm| describe(&asm.geometry));
            live.change_running(|asm| t.apply(asm))?;
            text = live.with_assembly(|asm| takeover_text(*t, &from, asm));
        }
        Step::Rebuild { .. } => {
            live.rebuild(opts.max_rate)?;
            text = wait_rebuilds(live, progress, stopping)?;
        }
        Step::Restripe(_) | Step::Reshape(_) => {
            let req = step_request(step);
            let report = live.reshape(
                |asm| {
                    let plan = asm.reshape_check(&req, 0)?;
                    asm.reshape_start(plan)
                },
                opts.clone(),
                &mut |p| progress("reshape", p),
            )?;
            text = live.with_assembly(|asm| reshape_text(&report, &asm.geometry, json))?;
        }
    }
    Ok(text)
}

/// Follow the live rebuild (one role after another) to its end, its
/// progress to `progress`; says each role rebuilt as offline's rebuild says
/// it.
/// An error when one stopped: failed, or the server stopping (its position
/// saved for the next start).
fn wait_rebuilds(
    live: &LiveArray,
    progress: &mut dyn FnMut(&str, Progress),
    stopping: &dyn Fn() -> bool,
) -> Result<String> {
    let mut rebuilt: Vec<(usize, String)> = Vec::new();
    loop {
        // Read together under the assembly's lock: a rebuild that ends
        // starts the next pending one under that lock, so a pending role
        // with none running then is one that will not start by itself.
        let (running, pending) =
            live.with_assembly(|asm| (live.rebuilding(), !asm.rebuilding().is_empty()));
        let st = live.status().rebuild;
        if let Some(s) = &st {
            let role = s.role.unwrap_or(0);
            if s.running {
                progress(
                    &s.kind,
                    Progress {
                        done: s.done,
                        total: s.total,
                    },
                );
            }
            if let Some(e) = &s.error {
                bail!(
                    "the {} of role {role} onto {} stopped: {e}",
                    s.kind,
                    s.device
                );
            }
            if !rebuilt.iter().any(|(r, d)| *r == role && *d == s.device) {
                rebuilt.push((role, s.device.clone()));
            }
        }
        match (running, pending) {
            (true, _) => {}
            (false, false) => {
                return Ok(rebuilt
                    .iter()
                    .map(|(role, dev)| format!("raidlab: rebuilt {dev} into role {role}\n"))
                    .collect())
            }
            (false, true) if stopping() => {
                bail!("the server is stopping (the rebuild saved its position)")
            }
            (false, true) => {
                bail!("a rebuild is pending but not running (see `raidlab detail`)")
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// What is left of a level change stopped at `rest`'s first step, and how
/// each part resumes.
fn left_to_do(rest: &[Step]) -> String {
    let mut out = Vec::new();
    for (i, s) in rest.iter().enumerate() {
        match s {
            Step::Add { .. } | Step::Takeover(_) => {
                out.push("`raidlab grow --level` as asked, again".to_string());
                break;
            }
            Step::Rebuild { what } if i == 0 => out.push(format!(
                "the rebuild of {what} resumes when the array is served again, or with `raidlab rebuild`"
            )),
            Step::Rebuild { what } => out.push(format!("the rebuild of {what} (`raidlab rebuild`)")),
            Step::Restripe(_) | Step::Reshape(_) if i == 0 => out.push(
                "the restripe resumes when the array is served again (`raidlab grow --continue` offline)".to_string(),
            ),
            Step::Restripe(l) => out.push(format!("`raidlab grow --layout {l}`")),
            Step::Reshape(n) => out.push(format!("`raidlab grow --raid-devices {n}`")),
        }
    }
    format!("left to do: {}", out.join(", then "))
}
