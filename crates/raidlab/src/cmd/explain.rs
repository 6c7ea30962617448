//! `raidlab explain`: the plan the engine itself would carry out for one request.

use crate::cli::{Direction, ExplainArgs};
use anyhow::{bail, Result};
use raidlab_core::size::format_size;
use raidlab_layout::{Geometry, Layout, Level};
use raidlab_raid::planner::{plan_read, plan_write};
use raidlab_raid::OpKind;
use std::process::ExitCode;

pub fn run(a: ExplainArgs) -> Result<ExitCode> {
    let level = Level::from_name(&a.level)?;
    let layout = Layout::parse(level, a.layout.as_deref())?;
    let chunk = if level == Level::Raid1 { 0 } else { a.chunk };
    let geo = Geometry::new(level, layout, chunk, a.raid_devices, a.member_size)?;
    let mut present = vec![true; a.raid_devices];
    for &r in &a.missing {
        if r >= a.raid_devices {
            bail!(
                "--missing {r}: roles are numbered 0 to {}",
                a.raid_devices - 1
            );
        }
        present[r] = false;
    }
    let plan = match a.direction {
        Direction::Read => plan_read(&geo, &present, a.offset, a.length, 0)?,
        Direction::Write => plan_write(&geo, &present, a.offset, a.length)?,
    };
    let explained = plan.explain();
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&explained)?);
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{} {}, {} members, chunk {}{}: {} {} at offset {}",
        level.name(),
        geo.layout.name(),
        a.raid_devices,
        if chunk == 0 {
            "-".into()
        } else {
            format_size(chunk)
        },
        if a.missing.is_empty() {
            String::new()
        } else {
            format!(", missing {:?}", a.missing)
        },
        match a.direction {
            Direction::Read => "read",
            Direction::Write => "write",
        },
        format_size(a.length),
        a.offset
    );
    for c in &explained.computes {
        outln!("  first: {c}");
    }
    for (i, phase) in explained.phases.iter().enumerate() {
        outln!(
            "phase {} ({} member I/Os in parallel):",
            i + 1,
            phase.ops.len()
        );
        for op in &phase.ops {
            outln!(
                "  {:<5} member {:<3} offset {:<12} length {}",
                match op.kind {
                    OpKind::Read => "read",
                    OpKind::Write => "write",
                },
                op.member,
                op.offset,
                format_size(op.length)
            );
        }
        for c in &phase.then {
            outln!("  then: {c}");
        }
    }
    let (r, w) = plan.op_counts();
    outln!("total: {r} member read(s), {w} member write(s)");
    Ok(ExitCode::SUCCESS)
}
