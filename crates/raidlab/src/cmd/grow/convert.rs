//! `grow --level` by md's takeovers: RAID 5 to 6 and back through the "-6"
//! layouts, RAID 0 to 4/5/10 and back, RAID 1 and 5 of two; each takeover
//! with the rebuild or restripe it needs.
//!
//! What it decides: the steps of a level change and their order, once
//! ([`conversion_steps`], a plan as data), for both the offline run here
//! ([`grow_convert`]) and a served array (`served::served_convert`, each
//! step made the served way). It must never check a conversion itself
//! (md's rules are `Assembly::convert_check` and `reshape_check`) nor move
//! data outside the rebuild and the restripe those steps name.

use super::*;

/// One step of a level change, in the order md makes them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// The devices given with `--add` go in as spares, for `what` (parity,
    /// Q, the mirrors, the reshape).
    Add { what: &'static str },
    /// md's takeover: the superblocks say the new level in one commit.
    Takeover(Takeover),
    /// The rebuild of what the takeover left to compute on the new
    /// member(s) (`what`: parity, Q, the mirrors).
    Rebuild { what: &'static str },
    /// A restripe to this layout, same level and members.
    Restripe(String),
    /// A restripe onto this many members (the spares added for it).
    Reshape(usize),
}

/// Which of md's takeovers a [`Step::Takeover`] is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Takeover {
    /// RAID 5 of n as RAID 6 of n+1 in the "-6" layout (Q to be rebuilt).
    Raid6,
    /// RAID 6 in a "-6" layout as RAID 5 (Q's member a spare).
    Raid5FromRaid6,
    /// RAID 0 as RAID 4 or 5 in parity-last (parity to be rebuilt).
    Raid0Parity(Level),
    /// RAID 0 as RAID 10 (the mirrors to be rebuilt).
    Raid10FromRaid0,
    /// RAID 4 or 5 in parity-last as RAID 0.
    Raid0FromRaid45,
    /// RAID 10 as RAID 0 (one copy of each pair kept).
    Raid0FromRaid10,
    /// RAID 1 of two as RAID 5 of two.
    Raid5FromRaid1,
    /// RAID 5 of two as RAID 1.
    Raid1FromRaid5,
}

impl Takeover {
    /// Make the takeover on `asm` (its own checks, one commit).
    pub(crate) fn apply(self, asm: &mut Assembly) -> raidlab_core::Result<()> {
        match self {
            Takeover::Raid6 => asm.raid6_takeover(),
            Takeover::Raid5FromRaid6 => asm.raid5_takeover(),
            Takeover::Raid0Parity(to) => asm.raid0_parity_takeover(to),
            Takeover::Raid10FromRaid0 => asm.raid10_takeover_raid0(),
            Takeover::Raid0FromRaid45 => asm.raid0_takeover_raid45(),
            Takeover::Raid0FromRaid10 => asm.raid0_takeover_raid10(),
            Takeover::Raid5FromRaid1 => asm.raid5_takeover_raid1(),
            Takeover::Raid1FromRaid5 => asm.raid1_takeover_raid5(),
        }
    }

    /// What the takeover did, the array described `from` before it and as
    /// `asm` has it after, offline or served.
    pub(crate) fn text(self, from: &str, asm: &Assembly) -> String {
        let now = describe(&asm.geometry);
        match self {
            Takeover::Raid5FromRaid6 => format!(
                "raidlab: the array is now {now} (md's takeover); the member that held Q is a hot spare\n"
            ),
            Takeover::Raid6 | Takeover::Raid0Parity(_) | Takeover::Raid10FromRaid0 => format!(
                "raidlab: {from} is now {now} (md's takeover: {} on the new member(s), to be rebuilt)\n",
                self.rebuilds().unwrap_or_default()
            ),
            Takeover::Raid0FromRaid45 => format!(
                "raidlab: {from} is now {now} (md's takeover: the parity member and any spare left the array; no data moved)\n"
            ),
            Takeover::Raid0FromRaid10 => format!(
                "raidlab: {from} is now {now} (md's takeover: one copy of each pair kept, the other left the array; no data moved)\n"
            ),
            Takeover::Raid5FromRaid1 => format!(
                "raidlab: {from} is now {now} (md's takeover: each stripe's parity is its data, as the mirrors hold it; no data moved)\n"
            ),
            Takeover::Raid1FromRaid5 => format!(
                "raidlab: {from} is now {now} (md's takeover: the two members already hold the same bytes; no data moved)\n"
            ),
        }
    }

    /// What the takeover leaves to rebuild on the new member(s), if any.
    fn rebuilds(self) -> Option<&'static str> {
        match self {
            Takeover::Raid6 => Some("Q"),
            Takeover::Raid0Parity(_) => Some("parity"),
            Takeover::Raid10FromRaid0 => Some("the mirrors"),
            _ => None,
        }
    }
}

/// The steps of the level change `req` asks of `asm` (a conversion, as
/// `conversion` says), with `adds` devices given to add: md's checks
/// (`convert_check`) and the checks of how many devices each takes, then
/// the order md makes them in. Nothing is written.
pub(crate) fn conversion_steps(
    asm: &Assembly,
    req: &ReshapeRequest,
    adds: usize,
) -> Result<Vec<Step>> {
    let from = asm.geometry.level;
    let to = req.level.unwrap_or(from);
    // RAID 1 to 5 and RAID 0 to 10 take several, and RAID 0 to 4 or 5
    // with --raid-devices (their own checks).
    if adds > 1 && !matches!(from, Level::Raid1 | Level::Raid0) {
        bail!(
            "{adds} devices given with --add: the conversion takes one, for Q; add the others as spares with `raidlab add`; nothing was changed"
        );
    }
    if to == Level::Raid5 && from == Level::Raid6 && adds > 0 {
        bail!("--add goes with --level 6 (the device for Q), not --level 5; nothing was changed");
    }
    let c = asm.convert_check(to, req.raid_devices, req.layout.as_deref(), adds)?;
    let restripe = c.restripe_to.clone().map(Step::Restripe);
    if to == Level::Raid1 {
        if adds > 0 {
            bail!("--add goes with a level that takes new members; a RAID 5 of two becoming a RAID 1 takes none (add mirrors after, with `raidlab grow --raid-devices`); nothing was changed");
        }
        return Ok(vec![Step::Takeover(Takeover::Raid1FromRaid5)]);
    }
    if to == Level::Raid0 {
        if adds > 0 {
            bail!("--add goes with a level that takes new members; a {} becoming a RAID 0 takes none; nothing was changed", from.name());
        }
        if from == Level::Raid10 {
            return Ok(vec![Step::Takeover(Takeover::Raid0FromRaid10)]);
        }
        // mdadm restripes a RAID 5 to parity-last first, then the parity
        // member leaves.
        return Ok(restripe
            .into_iter()
            .chain([Step::Takeover(Takeover::Raid0FromRaid45)])
            .collect());
    }
    if from == Level::Raid1 {
        // md's takeover, then (with --raid-devices) a restripe onto the
        // devices added for it.
        if adds > c.new_raid_devices - 2 {
            bail!(
                "{adds} device(s) given with --add but only {} new slot(s) (--raid-devices {}): add the others as spares with `raidlab add`; nothing was changed",
                c.new_raid_devices - 2,
                c.new_raid_devices
            );
        }
        let mut steps = vec![Step::Takeover(Takeover::Raid5FromRaid1)];
        if c.new_raid_devices > c.old_raid_devices {
            if adds > 0 {
                steps.push(Step::Add {
                    what: "the reshape",
                });
            }
            steps.push(Step::Reshape(c.new_raid_devices));
        }
        return Ok(steps);
    }
    let from_raid0 = from == Level::Raid0;
    if to == Level::Raid6 || from_raid0 {
        let takeover = match (from_raid0, to) {
            (true, Level::Raid10) => Takeover::Raid10FromRaid0,
            (true, _) => Takeover::Raid0Parity(to),
            _ => Takeover::Raid6,
        };
        let what = takeover.rebuilds().unwrap_or_default();
        if adds > c.new_raid_devices - c.old_raid_devices {
            bail!(
                "{adds} devices given with --add but only {} new slot(s): add the others as spares with `raidlab add`; nothing was changed",
                c.new_raid_devices - c.old_raid_devices
            );
        }
        let mut steps = Vec::new();
        if adds > 0 {
            steps.push(Step::Add { what });
        }
        steps.push(Step::Takeover(takeover));
        steps.push(Step::Rebuild { what });
        // A RAID 0 asked for more members than the one parity takes: the
        // others join by a reshape once parity is there.
        if from_raid0 && to != Level::Raid10 && c.new_raid_devices > c.old_raid_devices + 1 {
            steps.push(Step::Reshape(c.new_raid_devices));
        }
        steps.extend(restripe);
        return Ok(steps);
    }
    Ok(restripe
        .into_iter()
        .chain([Step::Takeover(Takeover::Raid5FromRaid6)])
        .collect())
}

/// `--no-sync` with a conversion whose first step is a restripe: refused,
/// since the takeover after it needs the restripe done.
fn no_sync_check(asm: &Assembly, steps: &[Step]) -> Result<()> {
    let (Some(Step::Restripe(l)), Some(Step::Takeover(t))) = (steps.first(), steps.get(1)) else {
        return Ok(());
    };
    let layout = asm.geometry.layout.name();
    if *t == Takeover::Raid0FromRaid45 {
        bail!("--no-sync with --level 0 of a RAID 5 in {layout}: it is restriped to {l} first; run it without --no-sync");
    }
    bail!("--no-sync with --level 5 of a RAID 6 in {layout}: the conversion restripes it to {l} first; run it without --no-sync")
}

/// What is left to run by hand after a `--no-sync` conversion stopped at
/// its rebuild: the commands for the steps after it.
fn left_by_hand(what: &str, rest: &[Step]) -> String {
    let mut out = format!("raidlab: {what} is rebuilt by `raidlab rebuild`");
    for s in rest {
        match s {
            Step::Reshape(n) => {
                out += &format!(
                    "; then `raidlab grow --raid-devices {n}` restripes it onto the spares"
                )
            }
            Step::Restripe(l) => out += &format!("; then `raidlab grow --layout {l}` restripes it"),
            _ => {}
        }
    }
    out
}

/// A level change offline: the steps [`conversion_steps`] gives, each run
/// to its end here (with `--no-sync`, up to the rebuild).
pub(super) fn grow_convert(
    mut asm: Assembly,
    req: &ReshapeRequest,
    a: &GrowArgs,
) -> Result<ExitCode> {
    let (adds, created) = open_adds(a)?;
    let checked = (|| -> Result<Vec<Step>> {
        let steps = conversion_steps(&asm, req, adds.len())?;
        precheck_adds(&asm, &adds, a.force)?;
        if a.no_sync {
            no_sync_check(&asm, &steps)?;
        }
        Ok(steps)
    })();
    let steps = match checked {
        Ok(s) => s,
        Err(e) => {
            cleanup(&created);
            return Err(e);
        }
    };
    let mut adds = adds.into_iter();
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::Add { what } => {
                for d in adds.by_ref() {
                    let path = d.path.clone();
                    asm.add(d, a.force)?;
                    outln!("raidlab: {path} added as a spare for {what}");
                }
            }
            Step::Takeover(t) => {
                let from = describe(&asm.geometry);
                t.apply(&mut asm)?;
                out!("{}", t.text(&from, &asm));
            }
            Step::Rebuild { what } => {
                if a.no_sync {
                    outln!("{}", left_by_hand(what, &steps[i + 1..]));
                    return Ok(ExitCode::SUCCESS);
                }
                let report = asm.rebuild(options(&a.run, false), &mut bar("rebuild"))?;
                print_rebuild(&report, a.run.json)?;
            }
            Step::Restripe(_) | Step::Reshape(_) => {
                let plan = asm.reshape_check(&step_request(step), 0)?;
                start_and_run(&mut asm, plan, a)?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The restripe a [`Step::Restripe`] or [`Step::Reshape`] asks for.
pub(crate) fn step_request(step: &Step) -> ReshapeRequest {
    match step {
        Step::Restripe(l) => ReshapeRequest {
            layout: Some(l.clone()),
            ..ReshapeRequest::default()
        },
        Step::Reshape(n) => ReshapeRequest {
            raid_devices: Some(*n),
            ..ReshapeRequest::default()
        },
        _ => ReshapeRequest::default(),
    }
}
