//! `raidlab explain`: the plan the engine itself would carry out for one request,
//! or, for a sequence of requests, the member I/O a running array actually
//! issues for each: its stripe cache and write path, and what it writes besides
//! the data (the superblocks marked dirty by the first write to a clean array,
//! the bitmap's intent bits). The sequence runs on an array created as `raidlab
//! create` makes one, on members that keep only what is written to them, and
//! started as `serve` starts one, with an executor that records every plan
//! instead of doing its I/O: the engine's own code decides. It never plans
//! anything itself.

use crate::cli::{Direction, ExplainArgs};
use anyhow::{bail, Result};
use raidlab_core::size::format_size;
use raidlab_core::IoKind;
use raidlab_core::ManualClock;
use raidlab_core::Volume;
use raidlab_devices::SparseMemVolume;
use raidlab_layout::{Geometry, Layout, Level};
use raidlab_raid::assemble::{create, Assembly, CreateSpec, Device, NewMember};
use raidlab_raid::exec::Recording;
use raidlab_raid::lifecycle::{Driven, StartOptions, Started, StartedParts};
use raidlab_raid::live::{LiveArray, SAFE_MODE_DELAY};
use raidlab_raid::plan::Space;
use raidlab_raid::planner::{plan_read, plan_write};
use raidlab_raid::stripe_cache::StripeCacheConfig;
use raidlab_raid::{MemberOp, Plan, Step};
use serde::Serialize;
use std::process::ExitCode;
use std::sync::Arc;

mod reshape;

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
    let sequence_asked = a.stripe_cache || a.bitmap || !a.more.is_empty();
    if let Some(position) = a.position {
        if sequence_asked {
            bail!(
                "--position explains one request on an array mid-reshape, through no stripe cache or bitmap: drop --stripe-cache, --bitmap and the MORE requests, or drop --position and the --to-* options"
            );
        }
        return reshape::run(&a, geo, &present, position);
    }
    if a.to_raid_devices.is_some() || a.to_chunk.is_some() || a.to_layout.is_some() {
        bail!(
            "--to-raid-devices, --to-chunk and --to-layout describe the geometry of a reshape under way: give --position too (the array byte where the two geometries meet, md's reshape_position)"
        );
    }
    if sequence_asked {
        return sequence(&a, geo, &present);
    }
    let plan = plan_one(&geo, &present, a.direction, a.offset, a.length)?;
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
    print_phases(&explained)?;
    let (r, w) = plan.op_counts();
    outln!("total: {r} member read(s), {w} member write(s)");
    Ok(ExitCode::SUCCESS)
}

/// The level planner's plan for one request on `geo`: what the engine
/// carries out for it.
fn plan_one(
    geo: &Geometry,
    present: &[bool],
    direction: Direction,
    offset: u64,
    length: u64,
) -> Result<Plan> {
    Ok(match direction {
        Direction::Read => plan_read(geo, present, offset, length, 0)?,
        Direction::Write => plan_write(geo, present, offset, length)?,
    })
}

/// A plan's computations and phases, each member operation on a line.
fn print_phases(explained: &raidlab_raid::plan::Explained) -> Result<()> {
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
    Ok(())
}

#[derive(Serialize)]
struct Request {
    request: String,
    /// Member reads and writes of the array's data this request caused
    /// (held: none yet).
    reads: usize,
    writes: usize,
    ops: Vec<MemberOp>,
    /// What the array wrote outside the data areas for it (superblocks,
    /// bitmap), each labelled; `member` is the device's place in its plan's
    /// table (the members in service, in role order).
    metadata: Vec<Metadata>,
    /// Every operation in the order recorded, metadata labelled (the text
    /// output).
    #[serde(skip)]
    shown: Vec<(Option<&'static str>, MemberOp)>,
}

#[derive(Serialize)]
struct Metadata {
    what: &'static str,
    #[serde(flatten)]
    op: MemberOp,
}

/// Where the members keep their metadata, to name each device-space
/// operation: the superblock's and the bitmap's byte ranges (the same on
/// every member: they are of one size).
struct Places {
    superblock: (u64, u64),
    bitmap: Option<(u64, u64)>,
}

impl Places {
    fn of(asm: &Assembly) -> Result<Places> {
        let m = asm
            .members
            .iter()
            .find(|m| m.is_live())
            .ok_or_else(|| anyhow::anyhow!("internal: the explained array has no member"))?;
        let (at, bytes) = m.sb.placed(m.device.volume.size())?;
        let bitmap = match &asm.bitmap {
            Some(b) => {
                let (at, bytes) = b.placed(&m.sb)?;
                Some((at, bytes.len() as u64))
            }
            None => None,
        };
        Ok(Places {
            superblock: (at, bytes.len() as u64),
            bitmap,
        })
    }

    fn name(&self, op: &MemberOp) -> &'static str {
        let within = |(at, len): (u64, u64)| op.offset >= at && op.offset < at + len;
        match op.kind {
            IoKind::Flush => "flush",
            _ if within(self.superblock) => "superblock",
            _ if self.bitmap.is_some_and(within) => "bitmap",
            _ => "metadata",
        }
    }
}

/// Bytes before the data on each member of `member_bytes`, as `raidlab
/// create` (mdadm's rule) chooses them for a device just large enough: the
/// offset depends on the device's size, which includes it.
fn data_offset(member_bytes: u64, chunk_bytes: u64) -> u64 {
    let chunk_kib = (chunk_bytes / 1024) as u32;
    let mut off = 0;
    // The offset grows with the device and the device with the offset; it
    // settles within a few rounds (a multiple of 1 MiB, at most 129 MiB).
    for _ in 0..16 {
        let next = raidlab_md::superblock::mdadm_data_offset(member_bytes + off, chunk_kib);
        if next == off {
            break;
        }
        off = next;
    }
    off
}

/// The array a sequence runs on: created on members that keep only what is
/// written to them, started for writing with `recorder` carrying out every
/// plan, served with md's safe mode, and left idle until it is marked clean.
fn start_recorded(
    a: &ExplainArgs,
    geo: &Geometry,
    present: &[bool],
    recorder: &Arc<Recording>,
) -> Result<(Arc<LiveArray>, Places)> {
    if a.bitmap && geo.level == Level::Raid0 {
        bail!("RAID 0 has no redundancy to resync: a write-intent bitmap does not apply");
    }
    let bitmap_chunk = match a.bitmap_chunk {
        Some(c) if !c.is_power_of_two() || !(4096..=(1 << 30)).contains(&c) => {
            bail!("--bitmap-chunk {c}: use a power of two from 4K to 1G")
        }
        Some(c) => Some(c as u32),
        None => None,
    };
    let device_bytes = geo.member_bytes + data_offset(geo.member_bytes, geo.chunk_bytes);
    let devices: Vec<Device> = (0..geo.raid_disks)
        .map(|r| Device {
            path: format!("member{r}"),
            volume: Arc::new(SparseMemVolume::new(format!("member{r}"), device_bytes)),
        })
        .collect();
    let spec = CreateSpec {
        level: geo.level,
        layout: geo.layout,
        chunk_bytes: geo.chunk_bytes,
        spares: 0,
        name: "explain".into(),
        // Fewer members than mdadm wants (a RAID 5 of 2) still explain.
        force: true,
        bitmap: a.bitmap,
        bitmap_chunk,
        ppl: false,
    };
    let new = devices
        .iter()
        .map(|d| NewMember {
            device: d.clone(),
            zeroed: true,
        })
        .collect();
    let mut asm = create(&spec, new)?;
    if present.contains(&false) {
        // Missing roles: the others assembled alone, degraded and clean.
        asm = Assembly::assemble(
            devices
                .iter()
                .zip(present)
                .filter(|(_, &p)| p)
                .map(|(d, _)| d.clone())
                .collect(),
        )?;
    }
    if asm.geometry.member_bytes != geo.member_bytes {
        bail!(
            "a member of {} does not fit whole chunks of {}: give a --member-size that is a multiple of the chunk",
            format_size(geo.member_bytes),
            format_size(geo.chunk_bytes)
        );
    }
    let places = Places::of(&asm)?;
    let clock = ManualClock::new();
    let started = Started::start_with(
        asm,
        StartOptions {
            write: true,
            force: false,
            resync_unclean: false,
            stripe_cache: Some(StripeCacheConfig::default()),
            ..StartOptions::default()
        },
        // Driven by nobody, on a clock that only this moves: nothing held
        // expires during the sequence.
        Some(Driven {
            executor: recorder.clone(),
            clock: clock.clone(),
        }),
    )?;
    let StartedParts {
        asm,
        array,
        was_clean,
        ..
    } = started.into_parts();
    let live = LiveArray::new(asm, array);
    live.set_clock(clock.clone());
    live.start_safe_mode(was_clean);
    // Idle past md's safe-mode delay: marked clean, as a served array with no
    // writes for a while is. What the start and this wrote is not shown.
    clock.advance(SAFE_MODE_DELAY);
    if let Some(said) = live.poll().first() {
        bail!("internal: the explained array did not settle: {said}");
    }
    recorder.take();
    Ok((live, places))
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
    let recorder = Arc::new(Recording::default());
    let (live, places) = start_recorded(a, &geo, present, &recorder)?;
    // Clients' requests go where a served array's do: through safe mode,
    // which marks the superblocks dirty before the first write.
    let volume = live.volume();
    let array = live.array().clone();
    let take = || recorder.take();
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
                volume.read_at(&mut buf, offset)?;
            }
            Direction::Write => volume.write_at(&vec![0u8; length as usize], offset)?,
        }
        out.push(summarise(label, &places, take()));
    }
    volume.flush()?;
    out.push(summarise(
        "flush (what was still held)".into(),
        &places,
        take(),
    ));
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
        "{} {}, {} members, chunk {}{}{}: {} request(s) through the stripe cache, on a clean array",
        geo.level.name(),
        geo.layout.name(),
        geo.raid_disks,
        format_size(geo.chunk_bytes),
        if a.missing.is_empty() {
            String::new()
        } else {
            format!(", missing {:?}", a.missing)
        },
        if a.bitmap { ", bitmap" } else { "" },
        requests.len()
    );
    if !a.missing.is_empty() {
        let in_service: Vec<usize> = (0..present.len()).filter(|&r| present[r]).collect();
        outln!(
            "(metadata devices are the members in service numbered from 0 in role order: roles {in_service:?})"
        );
    }
    let (mut reads, mut writes, mut meta) = (0, 0, 0);
    for r in &out {
        reads += r.reads;
        writes += r.writes;
        meta += r.metadata.len();
        let metadata = if r.metadata.is_empty() {
            String::new()
        } else {
            format!("; {} metadata operation(s)", r.metadata.len())
        };
        if r.ops.is_empty() {
            outln!(
                "{}: no member I/O of data ({}){metadata}",
                r.request,
                if r.request.starts_with("flush") {
                    "nothing was held"
                } else {
                    "held in the stripe cache, or served from it"
                }
            );
        } else {
            outln!(
                "{}: {} member read(s), {} member write(s){metadata}",
                r.request,
                r.reads,
                r.writes
            );
        }
        for (what, op) in &r.shown {
            match what {
                Some(what) => print_metadata(what, op)?,
                None => print_op(op)?,
            }
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
    outln!("total: {reads} member read(s), {writes} member write(s) of data; {meta} metadata operation(s)");
    Ok(ExitCode::SUCCESS)
}

/// A request's recorded plans: the operations on the members' data areas,
/// and those on whole devices (metadata), named by `places`.
fn summarise(request: String, places: &Places, plans: Vec<Plan>) -> Request {
    let mut shown = Vec::new();
    for plan in &plans {
        let device = plan.space == Space::Device;
        for step in &plan.steps {
            if let Step::Io(ops) = step {
                for op in ops {
                    shown.push((device.then(|| places.name(op)), *op));
                }
            }
        }
    }
    let ops: Vec<MemberOp> = shown
        .iter()
        .filter(|(what, _)| what.is_none())
        .map(|(_, op)| *op)
        .collect();
    let metadata = shown
        .iter()
        .filter_map(|(what, op)| what.map(|what| Metadata { what, op: *op }))
        .collect();
    let count = |kinds: &[IoKind]| ops.iter().filter(|o| kinds.contains(&o.kind)).count();
    // A flush (the members' cache flushes, shown as operations) and a trim
    // move no data: neither is a read or a write.
    Request {
        request,
        reads: count(&[IoKind::Read]),
        writes: count(&[IoKind::Write, IoKind::Zero]),
        ops,
        metadata,
        shown,
    }
}

fn print_metadata(what: &str, op: &MemberOp) -> Result<()> {
    if op.kind == IoKind::Flush {
        // What it makes durable is the writes listed before it.
        outln!("  flush device {}", op.member);
        return Ok(());
    }
    outln!(
        "  {:<5} device {:<3} offset {:<12} length {} ({what})",
        op.kind.name(),
        op.member,
        op.offset,
        format_size(op.length)
    );
    Ok(())
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
