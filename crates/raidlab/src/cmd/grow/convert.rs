//! `grow --level` by md's takeovers: RAID 5 to 6 and back through the "-6"
//! layouts, RAID 0 to 4/5/10 and back, RAID 1 and 5 of two; each takeover
//! with the rebuild or restripe it needs, offline.

use super::*;

/// RAID 5 to 6: the device for Q goes in as a spare, the takeover makes it
/// the last member (a RAID 6 in the "-6" layout), the rebuild computes Q,
/// then (unless `--layout preserve`) a restripe to the RAID 6 layout. RAID
/// 6 to 5: a restripe to the "-6" layout where needed, then the takeover
/// (Q's member becomes a spare).
pub(super) fn grow_convert(
    mut asm: Assembly,
    req: &ReshapeRequest,
    a: &GrowArgs,
) -> Result<ExitCode> {
    let (adds, created) = open_adds(a)?;
    let to = req.level.unwrap_or(asm.geometry.level);
    let checked = (|| -> Result<raidlab_raid::grow::Conversion> {
        // RAID 1 to 5 and RAID 0 to 10 take several, and RAID 0 to 4 or 5
        // with --raid-devices (their own checks).
        let several = matches!(asm.geometry.level, Level::Raid1 | Level::Raid0);
        if adds.len() > 1 && !several {
            bail!(
                "{} devices given with --add: the conversion takes one, for Q; add the others as spares with `raidlab add`; nothing was changed",
                adds.len()
            );
        }
        if to == Level::Raid5 && asm.geometry.level == Level::Raid6 && !adds.is_empty() {
            bail!(
                "--add goes with --level 6 (the device for Q), not --level 5; nothing was changed"
            );
        }
        let c = asm.convert_check(to, req.raid_devices, req.layout.as_deref(), adds.len())?;
        precheck_adds(&asm, &adds, a.force)?;
        Ok(c)
    })();
    let c = match checked {
        Ok(c) => c,
        Err(e) => {
            cleanup(&created);
            return Err(e);
        }
    };
    let from = describe(&asm.geometry);
    let restripe = |asm: &mut Assembly, layout: &str| -> Result<()> {
        let req = ReshapeRequest {
            layout: Some(layout.to_string()),
            ..ReshapeRequest::default()
        };
        let plan = asm.reshape_check(&req, 0)?;
        start_and_run(asm, plan, a)?;
        Ok(())
    };
    if to == Level::Raid1 {
        if !adds.is_empty() {
            cleanup(&created);
            bail!("--add goes with a level that takes new members; a RAID 5 of two becoming a RAID 1 takes none (add mirrors after, with `raidlab grow --raid-devices`); nothing was changed");
        }
        asm.raid1_takeover_raid5()?;
        outln!(
            "raidlab: {from} is now {} (md's takeover: the two members already hold the same bytes; no data moved)",
            describe(&asm.geometry)
        );
        return Ok(ExitCode::SUCCESS);
    }
    if to == Level::Raid0 {
        if !adds.is_empty() {
            cleanup(&created);
            bail!("--add goes with a level that takes new members; a {} becoming a RAID 0 takes none; nothing was changed", asm.geometry.level.name());
        }
        if asm.geometry.level != Level::Raid10 {
            // mdadm restripes a RAID 5 to parity-last first, then the
            // parity member leaves.
            if let Some(l) = &c.restripe_to {
                if a.no_sync {
                    bail!("--no-sync with --level 0 of a RAID 5 in {}: it is restriped to {l} first; run it without --no-sync", asm.geometry.layout.name());
                }
                restripe(&mut asm, l)?;
            }
            asm.raid0_takeover_raid45()?;
            outln!(
                "raidlab: {from} is now {} (md's takeover: the parity member and any spare left the array; no data moved)",
                describe(&asm.geometry)
            );
            return Ok(ExitCode::SUCCESS);
        }
        asm.raid0_takeover_raid10()?;
        outln!(
            "raidlab: {from} is now {} (md's takeover: one copy of each pair kept, the other left the array; no data moved)",
            describe(&asm.geometry)
        );
        return Ok(ExitCode::SUCCESS);
    }
    if asm.geometry.level == Level::Raid1 {
        // md's takeover, then (with --raid-devices) a restripe onto the
        // devices added for it.
        if adds.len() > c.new_raid_devices - 2 {
            cleanup(&created);
            bail!(
                "{} device(s) given with --add but only {} new slot(s) (--raid-devices {}): add the others as spares with `raidlab add`; nothing was changed",
                adds.len(),
                c.new_raid_devices - 2,
                c.new_raid_devices
            );
        }
        asm.raid5_takeover_raid1()?;
        outln!(
            "raidlab: {from} is now {} (md's takeover: each stripe's parity is its data, as the mirrors hold it; no data moved)",
            describe(&asm.geometry)
        );
        if c.new_raid_devices > c.old_raid_devices {
            for d in adds {
                let path = d.path.clone();
                asm.add(d, a.force)?;
                outln!("raidlab: {path} added as a spare for the reshape");
            }
            let req = ReshapeRequest {
                raid_devices: Some(c.new_raid_devices),
                ..ReshapeRequest::default()
            };
            let plan = asm.reshape_check(&req, 0)?;
            start_and_run(&mut asm, plan, a)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let from_raid0 = asm.geometry.level == Level::Raid0;
    if to == Level::Raid6 || from_raid0 {
        let what = match (from_raid0, to) {
            (true, Level::Raid10) => "the mirrors",
            (true, _) => "parity",
            _ => "Q",
        };
        if adds.len() > c.new_raid_devices - c.old_raid_devices {
            cleanup(&created);
            bail!(
                "{} devices given with --add but only {} new slot(s): add the others as spares with `raidlab add`; nothing was changed",
                adds.len(),
                c.new_raid_devices - c.old_raid_devices
            );
        }
        for d in adds {
            let path = d.path.clone();
            asm.add(d, a.force)?;
            outln!("raidlab: {path} added as a spare for {what}");
        }
        if from_raid0 && to == Level::Raid10 {
            asm.raid10_takeover_raid0()?;
        } else if from_raid0 {
            asm.raid0_parity_takeover(to)?;
        } else {
            asm.raid6_takeover()?;
        }
        outln!(
            "raidlab: {from} is now {} (md's takeover: {what} on the new member(s), to be rebuilt)",
            describe(&asm.geometry)
        );
        // A RAID 0 asked for more members than the one parity takes: the
        // others join by a reshape once parity is there.
        let more =
            (from_raid0 && to != Level::Raid10 && c.new_raid_devices > c.old_raid_devices + 1)
                .then_some(c.new_raid_devices);
        if a.no_sync {
            outln!(
                "raidlab: {what} is rebuilt by `raidlab rebuild`{}{}",
                match more {
                    Some(n) => format!(
                        "; then `raidlab grow --raid-devices {n}` restripes it onto the spares"
                    ),
                    None => String::new(),
                },
                match &c.restripe_to {
                    Some(l) => format!("; then `raidlab grow --layout {l}` restripes it"),
                    None => String::new(),
                }
            );
            return Ok(ExitCode::SUCCESS);
        }
        let report = asm.rebuild(options(&a.run, false), &mut bar("rebuild"))?;
        print_rebuild(&report, a.run.json)?;
        if let Some(n) = more {
            let req = ReshapeRequest {
                raid_devices: Some(n),
                ..ReshapeRequest::default()
            };
            let plan = asm.reshape_check(&req, 0)?;
            start_and_run(&mut asm, plan, a)?;
        }
        if let Some(l) = &c.restripe_to {
            restripe(&mut asm, l)?;
        }
    } else {
        if let Some(l) = &c.restripe_to {
            if a.no_sync {
                bail!("--no-sync with --level 5 of a RAID 6 in {}: the conversion restripes it to {l} first; run it without --no-sync", asm.geometry.layout.name());
            }
            restripe(&mut asm, l)?;
        }
        asm.raid5_takeover()?;
        outln!(
            "raidlab: the array is now {} (md's takeover); the member that held Q is a hot spare",
            describe(&asm.geometry)
        );
    }
    Ok(ExitCode::SUCCESS)
}
