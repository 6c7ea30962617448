//! `grow --level` by md's takeovers: RAID 5 to 6 and back through the "-6"
//! layouts, RAID 0 to 4/5/10 and back, RAID 1 and 5 of two; each takeover
//! with the rebuild or restripe it needs.
//!
//! The steps of a level change and their order are the engine's
//! (`raidlab_raid::grow::conversion_steps`, a plan as data, which the served
//! fault simulation runs too); this runs them offline ([`grow_convert`]),
//! as a served array runs them the served way (`served::served_convert`),
//! and says what each did. It must never check a conversion itself (md's
//! rules are `Assembly::convert_check` and `reshape_check`) nor move data
//! outside the rebuild and the restripe those steps name.

use super::*;
pub(crate) use raidlab_raid::grow::{conversion_steps, step_request, Step, Takeover};

/// What the takeover `t` did, the array described `from` before it and as
/// `asm` has it after, offline or served.
pub(crate) fn takeover_text(t: Takeover, from: &str, asm: &Assembly) -> String {
    let now = describe(&asm.geometry);
    match t {
        Takeover::Raid5FromRaid6 => format!(
            "raidlab: the array is now {now} (md's takeover); the member that held Q is a hot spare\n"
        ),
        Takeover::Raid6 | Takeover::Raid0Parity(_) | Takeover::Raid10FromRaid0 => format!(
            "raidlab: {from} is now {now} (md's takeover: {} on the new member(s), to be rebuilt)\n",
            t.rebuilds().unwrap_or_default()
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
                out!("{}", takeover_text(*t, &from, &asm));
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
