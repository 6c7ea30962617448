//! `grow` of an array `raidlab serve` serves: the command sends a restripe
//! (or `--continue`) to the server, which checks and starts it on its
//! assembly as offline (`served_start`) and walks it while clients keep
//! using the array (`raidlab_raid::live`); `--bitmap`,
//! `--consistency-policy` and a takeover that moves no data swap the
//! running array at once; `--size` swaps it for the array of the new size
//! and resyncs the new space in the server. Changes that need the array
//! stopped (a smaller --size, --no-sync, the other level changes) are
//! refused with what to do.

use super::*;
use raidlab_raid::grow::ReshapePlan;

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
/// `grow_served`), the same as offline's, in one pass: a takeover alone, or
/// a restripe to walk while serving; the other level changes are refused.
pub(crate) fn served_check(
    asm: &Assembly,
    req: &ReshapeRequest,
    adds: usize,
    array_bytes: Option<u64>,
) -> Result<ServedGrow> {
    if conversion(asm, req) {
        bail!("a level change by md's takeover (RAID 0/1/10 to or from 4/5/6, RAID 5 to 6 and back) changes the running array's level: stop the server (`raidlab stop`), grow offline, serve again; nothing was changed");
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

/// The start of a restripe `served_check` checked, on the assembly with the
/// requests held: the new members go in as spares and the reshape is
/// recorded, unless the members changed since the check.
pub(crate) fn served_start(
    asm: &mut Assembly,
    plan: ReshapePlan,
    seen: &Seen,
    adds: Vec<raidlab_raid::assemble::Device>,
    force: bool,
) -> Result<()> {
    if Seen::of(asm) != *seen {
        bail!("the array's members changed while the reshape was checked (a member failed, or one was added or removed): nothing was changed; ask again");
    }
    precheck_adds(asm, &adds, force)?;
    for d in adds {
        asm.add(d, force)?;
    }
    asm.reshape_start(plan)?;
    Ok(())
}
