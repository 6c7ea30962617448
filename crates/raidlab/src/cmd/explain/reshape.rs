//! `raidlab explain --position`: one request on an array in the middle of a
//! reshape. The request is cut where the two geometries meet by the same
//! call the array's reshape view and the served walk's gate cut it
//! (`Reshape::split`), and each piece gets the level planner's plan on its
//! side's geometry: the member operations the engine carries out for it.
//!
//! It decides only what to show; it must never plan or cut a request
//! itself. Not shown: a served write that falls in the window the walk is
//! moving waits for the walk's next checkpoint before its plan runs.

use super::{plan_one, print_phases};
use crate::cli::{Direction, ExplainArgs};
use crate::cmd::info::geometry_shape as shape;
use anyhow::{bail, Result};
use raidlab_core::size::format_size;
use raidlab_layout::reshape::Reshape;
use raidlab_layout::{Geometry, Layout, Level};
use raidlab_raid::plan::Explained;
use serde::Serialize;
use std::process::ExitCode;

#[derive(Serialize)]
struct Piece {
    /// "new" or "old": the geometry holding these array bytes.
    geometry: &'static str,
    offset: u64,
    length: u64,
    plan: Explained,
}

#[derive(Serialize)]
struct Explanation {
    reshape: Reshape,
    pieces: Vec<Piece>,
    reads: usize,
    writes: usize,
}

pub(super) fn run(
    a: &ExplainArgs,
    old: Geometry,
    present: &[bool],
    position: u64,
) -> Result<ExitCode> {
    let r = reshape_of(a, old, position)?;
    let size = r.array_bytes();
    if !matches!(a.offset.checked_add(a.length), Some(end) if end <= size) {
        bail!(
            "{} bytes at offset {} are past the end of the array while it is mid-reshape ({size} bytes: the smaller of the two geometries)",
            a.length,
            a.offset
        );
    }
    let mut pieces = Vec::new();
    let (mut reads, mut writes) = (0, 0);
    for (new, at, len) in r.split(a.offset, a.length) {
        let geo = if new { r.new } else { r.old };
        // The roles the old geometry misses are missing in the new one
        // too; the roles a grow adds are there (a new member is written
        // whole by the walk before any piece is planned on it).
        let side: Vec<bool> = (0..geo.raid_disks)
            .map(|role| present.get(role).copied().unwrap_or(true))
            .collect();
        let plan = plan_one(&geo, &side, a.direction, at, len)?;
        let (pr, pw) = plan.op_counts();
        reads += pr;
        writes += pw;
        pieces.push(Piece {
            geometry: if new { "new" } else { "old" },
            offset: at,
            length: len,
            plan: plan.explain(),
        });
    }
    if a.json {
        let e = Explanation {
            reshape: r,
            pieces,
            reads,
            writes,
        };
        outln!("{}", serde_json::to_string_pretty(&e)?);
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{}, mid-reshape to {} ({}): {} {} at offset {}",
        shape(&r.old),
        shape(&r.new),
        if r.backwards {
            format!(
                "backwards: the new geometry holds the array from byte {}",
                r.position
            )
        } else {
            format!(
                "forwards: the new geometry holds the array below byte {}",
                r.position
            )
        },
        match a.direction {
            Direction::Read => "read",
            Direction::Write => "write",
        },
        format_size(a.length),
        a.offset
    );
    for (i, p) in pieces.iter().enumerate() {
        outln!(
            "piece {}: array bytes {}..{} ({}), {} geometry",
            i + 1,
            p.offset,
            p.offset + p.length,
            format_size(p.length),
            p.geometry
        );
        print_phases(&p.plan)?;
    }
    outln!("total: {reads} member read(s), {writes} member write(s)");
    outln!("(member offsets count from each geometry's own data start: a reshape that moves the data offset has two)");
    Ok(ExitCode::SUCCESS)
}

/// The reshape the options describe, checked as md checks a recorded one:
/// a level that restripes in place, a new geometry that differs and is
/// valid, a position inside the array and, for a parity level going
/// forwards, on the boundary md's walk records.
fn reshape_of(a: &ExplainArgs, old: Geometry, position: u64) -> Result<Reshape> {
    if !matches!(
        old.level,
        Level::Raid4 | Level::Raid5 | Level::Raid6 | Level::Raid10
    ) {
        bail!(
            "--position: a {} is not restriped in place by a reshape (raidlab and md reshape RAID 4, 5, 6 and 10 members; RAID 0 goes through RAID 4, RAID 1 through RAID 5): explain the request on those levels",
            old.level.name()
        );
    }
    let layout = match &a.to_layout {
        Some(l) => {
            Layout::parse(old.level, Some(l)).map_err(|e| anyhow::anyhow!("--to-layout: {e}"))?
        }
        None => old.layout,
    };
    let new = Geometry::new(
        old.level,
        layout,
        a.to_chunk.unwrap_or(old.chunk_bytes),
        a.to_raid_devices.unwrap_or(old.raid_disks),
        old.member_bytes,
    )
    .map_err(|e| anyhow::anyhow!("the geometry after the reshape (--to-*): {e}"))?;
    if let (Layout::Raid10(from), Layout::Raid10(to)) = (old.layout, new.layout) {
        if let Some(why) = raidlab_raid::grow::raid10_shapes_refusal(from, to) {
            bail!("--position: {why}: no such reshape is under way to explain");
        }
    }
    if new == old {
        bail!(
            "--position needs the geometry the array is being reshaped to: give --to-raid-devices, --to-chunk or --to-layout with a value that differs from the array's"
        );
    }
    // md walks a reshape to fewer data members from the end, one to more
    // from the start, and either way one that keeps their count.
    let backwards = match new.data_disks().cmp(&old.data_disks()) {
        std::cmp::Ordering::Less => true,
        std::cmp::Ordering::Greater if a.backwards => bail!(
            "--backwards: a reshape to more data members runs forwards (md's rule): drop --backwards"
        ),
        std::cmp::Ordering::Greater => false,
        std::cmp::Ordering::Equal => a.backwards,
    };
    let r = Reshape {
        old,
        new,
        position,
        backwards,
    };
    if position > r.array_bytes() {
        bail!(
            "--position {position}: past the end of the array while it is mid-reshape ({} bytes: the smaller of the two geometries)",
            r.array_bytes()
        );
    }
    // md resumes a RAID 10 at any position; a parity level only on its
    // walk's step.
    let unit = r.forward_unit();
    let parity = old.level != Level::Raid10;
    if parity && !r.backwards && unit > 0 && position % unit != 0 {
        bail!(
            "--position {position}: a forward reshape of this array stops only on a boundary of {unit} bytes, its walk's step (whole stripes of the new geometry at the larger chunk), and md refuses to resume at any other: for example {} or {}",
            position / unit * unit,
            (position / unit + 1) * unit
        );
    }
    if position % 512 != 0 {
        bail!("--position {position}: md records it in whole 512-byte sectors");
    }
    Ok(r)
}
