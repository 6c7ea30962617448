//! `raidlab explain`: the plan the engine itself would carry out for one request,
//! or, for a sequence of requests, the member I/O a running array's stripe cache
//! and write path actually issue for each (an array over size-only members whose
//! executor records instead of doing I/O: the engine's own code decides).

use crate::cli::{Direction, ExplainArgs};
use anyhow::{bail, Result};
use raidlab_core::size::format_size;
use raidlab_core::IoKind;
use raidlab_core::ManualClock;
use raidlab_core::Volume;
use raidlab_devices::SizeOnly;
use raidlab_layout::{Geometry, Layout, Level};
use raidlab_raid::exec::Recording;
use raidlab_raid::planner::{plan_read, plan_write};
use raidlab_raid::stripe_cache::StripeCacheConfig;
use raidlab_raid::{Array, MemberOp, Step};
use serde::Serialize;
use std::process::ExitCode;
use std::sync::Arc;

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
    if a.stripe_cache || !a.more.is_empty() {
        return sequence(&a, geo, &present);
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
            print_op(op)?;
        }
        for c in &phase.then {
            outln!("  then: {c}");
        }
    }
    let (r, w) = plan.op_counts();
    outln!("total: {r} member read(s), {w} member write(s)");
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
struct Request {
    request: String,
    /// Member reads and writes this request caused (held: none yet).
    reads: usize,
    writes: usize,
    ops: Vec<MemberOp>,
}

fn sequence(a: &ExplainArgs, geo: Geometry, present: &[bool]) -> Result<ExitCode> {
    if a.more.len() % 3 != 0 {
        bail!(
            "after the first request, give requests as `read|write OFFSET LENGTH` triples (got {} extra word(s))",
            a.more.len()
        );
    }
    let mut requests = vec![(a.direction, a.offset, a.length)];
    for t in a.more.chunks(3) {
        let dir = match t[0].as_str() {
            "read" => Direction::Read,
            "write" => Direction::Write,
            other => bail!("`{other}`: each request starts with `read` or `write`"),
        };
        let parse = |w: &str| {
            raidlab_core::size::parse_size(w)
                .map_err(|e| anyhow::anyhow!("`{w}` in `{} {} {}`: {e}", t[0], t[1], t[2]))
        };
        requests.push((dir, parse(&t[1])?, parse(&t[2])?));
    }
    let members: Vec<Option<Arc<dyn Volume>>> = present
        .iter()
        .map(|&p| {
            p.then(|| Arc::new(SizeOnly::new("explain", geo.member_bytes)) as Arc<dyn Volume>)
        })
        .collect();
    let recorder = Arc::new(Recording::default());
    let array = Arc::new(Array::new("explain", geo, members)?.with_executor(recorder.clone()));
    // Driven by nobody, on a clock that never moves: nothing held expires
    // during the sequence.
    array.start_stripe_cache_driven(StripeCacheConfig::default(), ManualClock::new())?;
    let take = || -> Vec<MemberOp> {
        recorder
            .take()
            .iter()
            .flat_map(|plan| plan.steps.iter())
            .filter_map(|step| match step {
                Step::Io(ops) => Some(ops.iter().copied()),
                _ => None,
            })
            .flatten()
            .collect()
    };
    let mut out = Vec::new();
    for &(dir, offset, length) in &requests {
        let label = format!(
            "{} {} at {offset}",
            match dir {
                Direction::Read => "read",
                Direction::Write => "write",
            },
            format_size(length)
        );
        match dir {
            Direction::Read => {
                // The cache answers from what it holds; only the rest is read,
                // and reads of zero-filled scratch are all explain needs.
                let mut buf = vec![0u8; length as usize];
                array.read_at(&mut buf, offset)?;
            }
            Direction::Write => array.write_at(&vec![0u8; length as usize], offset)?,
        }
        out.push(summarise(label, take()));
    }
    array.flush()?;
    out.push(summarise("flush (what was still held)".into(), take()));
    let (cache, rmw, rcw) = array.stripe_cache_stats();
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "requests": out,
                "stripe_cache": cache.map(|(config, stats)| serde_json::json!({"config": config, "stats": stats})),
                "read_modify_write_plans": rmw,
                "reconstruct_write_plans": rcw,
            }))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{} {}, {} members, chunk {}: {} request(s) through the stripe cache",
        geo.level.name(),
        geo.layout.name(),
        geo.raid_disks,
        format_size(geo.chunk_bytes),
        requests.len()
    );
    let (mut reads, mut writes) = (0, 0);
    for r in &out {
        reads += r.reads;
        writes += r.writes;
        if r.ops.is_empty() {
            outln!(
                "{}: no member I/O ({})",
                r.request,
                if r.request.starts_with("flush") {
                    "nothing was held"
                } else {
                    "held in the stripe cache, or served from it"
                }
            );
            continue;
        }
        outln!(
            "{}: {} member read(s), {} member write(s)",
            r.request,
            r.reads,
            r.writes
        );
        for op in &r.ops {
            print_op(op)?;
        }
    }
    if let Some((_, st)) = cache {
        outln!(
            "stripe cache: {} whole stripe(s) written with no reads, {} partial; {} read-modify-write and {} reconstruct-write plan(s)",
            st.full_stripes,
            st.partial_stripes,
            rmw,
            rcw
        );
    } else {
        outln!(
            "no stripe cache: {} has no parity to merge for",
            geo.level.name()
        );
    }
    outln!("total: {reads} member read(s), {writes} member write(s)");
    Ok(ExitCode::SUCCESS)
}

fn summarise(request: String, ops: Vec<MemberOp>) -> Request {
    let count = |kinds: &[IoKind]| ops.iter().filter(|o| kinds.contains(&o.kind)).count();
    // A flush (the members' cache flushes, shown as operations) and a trim
    // move no data: neither is a read or a write.
    Request {
        request,
        reads: count(&[IoKind::Read]),
        writes: count(&[IoKind::Write, IoKind::Zero]),
        ops,
    }
}

fn print_op(op: &MemberOp) -> Result<()> {
    outln!(
        "  {:<5} member {:<3} offset {:<12} length {}",
        op.kind.name(),
        op.member,
        op.offset,
        format_size(op.length)
    );
    Ok(())
}
