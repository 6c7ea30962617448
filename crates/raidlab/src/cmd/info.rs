//! `raidlab examine` and `raidlab detail`.

use crate::cli::{DetailArgs, MembersJson};
use crate::open::open_members;
use anyhow::Result;
use raidlab_core::size::{format_size, format_size_approx};
use raidlab_devices::OpenMode;
use raidlab_md::Superblock;
use raidlab_raid::assemble::{format_uuid, ArrayState, Assembly, MemberState};
use raidlab_raid::live::WriteMark;
use serde::Serialize;
use std::process::ExitCode;

pub fn examine(a: MembersJson) -> Result<ExitCode> {
    let devices = open_members(&a.members, OpenMode::ReadOnly)?;
    let mut json = Vec::new();
    let mut failed = false;
    let mut bare = Vec::new();
    for d in devices {
        let sectors = d.volume.size() / 512;
        match Superblock::read_from(d.volume.as_ref()) {
            Ok(Some(sb)) => {
                // md's bad-block log: listed after the superblock's lines
                // (as `mdadm --examine-badblocks` prints it) when it lists
                // anything; in JSON always ("bad_blocks": null without a log).
                let bad = raidlab_md::badblocks::read(d.volume.as_ref(), &sb);
                if let Err(e) = &bad {
                    failed = true;
                    eprintln!("raidlab: {}: {e}", d.path);
                }
                let bad = bad.ok().flatten();
                // The internal bitmap, as `mdadm --examine-bitmap` shows it
                // (in --json only: the text form is mdadm --examine's, whose
                // labels State, Events and Version mean other things).
                let bitmap = raidlab_md::bitmap::Bitmap::read_from(d.volume.as_ref(), &sb);
                if let Err(e) = &bitmap {
                    failed = true;
                    eprintln!("raidlab: {}: {e}", d.path);
                }
                let bitmap = bitmap.ok().flatten().map(|b| b.examine_lines());
                if a.json {
                    let mut v = sb.examine_json(sectors);
                    if let Some(o) = v.as_object_mut() {
                        o.insert("device".into(), d.path.clone().into());
                        o.insert("bad_blocks".into(), serde_json::to_value(&bad)?);
                        o.insert(
                            "bitmap".into(),
                            bitmap.as_ref().map_or(serde_json::Value::Null, |lines| {
                                lines
                                    .iter()
                                    .map(|(l, v)| (l.clone(), serde_json::Value::from(v.clone())))
                                    .collect::<serde_json::Map<_, _>>()
                                    .into()
                            }),
                        );
                    }
                    json.push(v);
                } else {
                    outln!("{}:", d.path);
                    if sb.v0_90.is_some() {
                        // mdadm's 0.90 report ends with the disk table.
                        outln!("{}", sb.examine_text(sectors).trim_end());
                    } else {
                        for (label, value) in sb.examine_lines(sectors) {
                            outln!("{label:>15} : {value}");
                        }
                    }
                    if let Some(list) = bad.as_deref().filter(|l| !l.is_empty()) {
                        outln!();
                        out!("{}", raidlab_md::badblocks::render(&d.path, Some(list)));
                    }
                    outln!();
                }
            }
            Ok(None) => {
                failed = true;
                // Said after the loop, all together: partitions may hold them.
                bare.push(d.clone());
                json.push(serde_json::json!({"device": d.path, "error": "no md superblock"}));
            }
            Err(e) => {
                failed = true;
                eprintln!("raidlab: {}: {e}", d.path);
                json.push(serde_json::json!({"device": d.path, "error": e.to_string()}));
            }
        }
    }
    match crate::open::partition_hint(&bare) {
        Some(hint) => eprintln!("raidlab: {hint}"),
        None => {
            for d in &bare {
                eprintln!(
                    "raidlab: {}: no md superblock found (not an md 0.90, 1.0, 1.1 or 1.2 member)",
                    d.path
                );
            }
        }
    }
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&json)?);
    }
    Ok(if failed {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

#[derive(Serialize)]
struct DetailJson {
    /// md metadata version of the superblocks (1.0, 1.1, 1.2, 0.90).
    metadata: String,
    uuid: String,
    name: String,
    level: String,
    layout: String,
    chunk_bytes: u64,
    raid_devices: usize,
    total_devices: usize,
    array_size_bytes: u64,
    member_data_bytes: u64,
    events: u64,
    /// mdadm's `State :` line, as the text shows it (README, "Array states").
    state: String,
    /// The same, word by word.
    state_words: Vec<&'static str>,
    /// Whether every member is there: `optimal`, `degraded` or `failed`.
    health: &'static str,
    resync_pending: bool,
    /// `ppl` or `journal`: the next start for writing replays that log
    /// (after an unclean stop) instead of a resync.
    replay_pending: Option<String>,
    consistency_policy: String,
    bitmap_dirty_chunks: Option<u64>,
    members: Vec<MemberJson>,
    missing_roles: Vec<usize>,
    stale: Vec<String>,
    /// Former members the array records as removed (their data is out of date).
    removed: Vec<String>,
    /// File system options that align to the stripe (none for RAID 1).
    mkfs: Option<MkfsJson>,
    /// Present when a running server answered (`raidlab serve`).
    #[serde(skip_serializing_if = "Option::is_none")]
    served: Option<ServedInfo>,
    /// How the server answering submits member I/O (`io_uring` or
    /// `threads (why)`, with the members' direct/buffered mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    member_io_submission: Option<String>,
}

/// What `detail` says of a server's member I/O: the submission this process
/// (the server, which renders `detail`) chose, and which members it covers:
/// io_uring carries direct members' requests only, buffered members' go
/// through threads (a page-cache copy is cheaper on the caller's thread; see
/// `raidlab_raid::exec`'s uring module).
pub(crate) fn member_io_submission(modes: &[(String, raidlab_devices::IoMode)]) -> String {
    use raidlab_devices::IoMode;
    use std::os::unix::fs::FileTypeExt;
    let s = raidlab_raid::exec::submit::current();
    let direct = modes.iter().any(|(_, m)| *m == IoMode::Direct);
    let buffered = modes.iter().any(|(_, m)| *m == IoMode::Buffered);
    // A direct member that is a regular file (or a partition of an image
    // file) has its writes on threads: see raidlab_raid's exec::uring.
    let direct_file = modes.iter().any(|(name, m)| {
        *m == IoMode::Direct
            && !std::fs::metadata(name.split('@').next().unwrap_or(name))
                .is_ok_and(|md| md.file_type().is_block_device())
    });
    let files = if direct_file {
        "; writes to regular-file members on threads"
    } else {
        ""
    };
    match (s.uring, direct, buffered) {
        (true, true, false) => format!("io_uring (direct{files})"),
        (true, true, true) => {
            format!("io_uring for direct members{files}, threads for buffered ones")
        }
        (true, false, _) => {
            "threads (members buffered: io_uring carries direct members only)".into()
        }
        (false, true, false) => format!("{} (direct)", s.describe()),
        (false, false, true) => format!("{} (buffered)", s.describe()),
        (false, _, _) => s.describe(),
    }
}

/// What a server adds to `detail`: who serves the array, and what runs.
#[derive(Serialize)]
pub struct ServedInfo {
    pub pid: u32,
    pub export: String,
    #[serde(flatten)]
    pub status: raidlab_raid::live::LiveStatus,
    /// Each member's I/O counters since the server started (monotonic:
    /// `detail --watch` and the status page turn them into rates).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub member_io: Vec<raidlab_raid::live::MemberIoStatus>,
    /// Each member's I/O mode (direct or buffered) as the server opened it,
    /// by member name; shown per member (`io` in the JSON).
    #[serde(skip)]
    pub io_modes: Vec<(String, raidlab_devices::IoMode)>,
}

#[derive(Serialize)]
struct MkfsJson {
    ext4: String,
    xfs: String,
}

/// mkfs options that align a file system on the array (or on an NBD device
/// serving it) to its chunks and stripes: ext4 counts in its 4 KiB blocks, XFS in
/// bytes (su) and data disks (sw). RAID 1 has no stripe to align to.
fn mkfs_alignment(g: &raidlab_layout::Geometry) -> Option<MkfsJson> {
    if g.chunk_bytes == 0 || g.level == raidlab_layout::Level::Raid1 {
        return None;
    }
    let stride = (g.chunk_bytes / 4096).max(1);
    let dd = g.data_disks() as u64;
    Some(MkfsJson {
        ext4: format!(
            "mkfs.ext4 -b 4096 -E stride={stride},stripe-width={}",
            stride * dd
        ),
        xfs: format!("mkfs.xfs -d su={}k,sw={dd}", g.chunk_bytes / 1024),
    })
}

#[derive(Serialize)]
struct MemberJson {
    device: String,
    role: Option<usize>,
    state: MemberState,
    events: u64,
    /// "direct" or "buffered": how the server answering opened it (absent
    /// when no server serves the array: then nothing holds it open).
    #[serde(skip_serializing_if = "Option::is_none")]
    io: Option<&'static str>,
}

pub fn detail(d: DetailArgs) -> Result<ExitCode> {
    let a = d.members;
    if let Some(server) = crate::control::find(&a.members)? {
        if d.watch {
            return crate::cmd::watch::run(&server, &a.members, d.interval);
        }
        return crate::cmd::live::detail(&server, &a);
    }
    if d.watch {
        anyhow::bail!("--watch needs an array that `raidlab serve` is serving (it redraws the server's live figures); no server serves this one, so there is nothing live to watch: `raidlab detail` without --watch shows what the superblocks say");
    }
    let devices = open_members(&a.members, OpenMode::ReadOnly)?;
    let asm = crate::open::assemble(devices)?;
    out!("{}", render_detail(&asm, None, a.json)?);
    Ok(ExitCode::SUCCESS)
}

/// mdadm's words for the state of an array (`clean` or `active`, then
/// `degraded` or `FAILED`, then what runs: `recovering`, `resyncing`,
/// `checking`), with raidlab's for a stopped array: `dirty` after an unclean
/// stop, and what its next start for writing will do about it.
fn state_words(
    asm: &Assembly,
    served: Option<&ServedInfo>,
    dirty: bool,
    replay_pending: Option<&str>,
    resync_pending: bool,
) -> Vec<&'static str> {
    let mut words = vec![match served.map(|s| s.status.writes) {
        // md's safe mode: clean while no write is pending.
        Some(Some(WriteMark::Clean)) => "clean",
        Some(Some(WriteMark::Active)) => "active",
        // Served without safe mode (read-only, or a resync owed): what the
        // superblocks say, in md's word for a running array.
        Some(None) if asm.in_sync() => "clean",
        Some(None) => "active",
        // md's --examine says "active" here; nothing runs, so raidlab says
        // what it means: the last stop was not clean.
        None if dirty => "dirty",
        None => "clean",
    }];
    match asm.state() {
        ArrayState::Clean => {}
        ArrayState::Degraded => words.push("degraded"),
        ArrayState::Failed => words.push("FAILED"),
    }
    if let Some(s) = served {
        let runs = |t: &Option<raidlab_raid::live::TaskStatus>| {
            t.as_ref().filter(|t| t.running).map(|t| t.kind.clone())
        };
        if runs(&s.status.rebuild).is_some() {
            // A rebuild and a replacement alike, as md says.
            words.push("recovering");
        }
        if runs(&s.status.reshape).is_some() {
            words.push("reshaping");
        }
        match runs(&s.status.scrub).as_deref() {
            Some("check") => words.push("checking"),
            // md's mdstat calls a repair a resync, and mdadm after it.
            Some(_) => words.push("resyncing"),
            None => {}
        }
    }
    match replay_pending {
        Some("ppl") => words.push("partial parity log replay pending"),
        Some(_) => words.push("journal replay pending"),
        None if resync_pending => words.push("resync pending"),
        None => {}
    }
    if asm.reshape().is_some() {
        words.push("interrupted reshape (read-only)");
    }
    words
}

/// `detail`'s output for `asm` (text, or JSON with `json`), with what a server
/// knows when it is the one answering.
pub fn render_detail(asm: &Assembly, served: Option<ServedInfo>, json: bool) -> Result<String> {
    let mut text = String::new();
    let g = asm.geometry;
    let state = asm.state();
    // A served array is marked dirty while it runs (md's "active"): that is
    // not a resync left to do.
    let dirty = !asm.in_sync() && served.is_none();
    // What the next start for writing does about an unclean stop: replay a
    // log (PPL: from the members' logs; journal: from the journal device,
    // whose array stays marked clean) or, without a log, a resync.
    let replay_pending = if served.is_some() {
        None
    } else if dirty && asm.logs_partial_parity() {
        Some("ppl")
    } else if asm.journal_unreplayed().unwrap_or(0) > 0 {
        Some("journal")
    } else {
        None
    };
    let resync_pending = dirty && replay_pending.is_none();
    let words = state_words(asm, served.as_ref(), dirty, replay_pending, resync_pending);
    let state_text = words.join(", ");
    let reshape = asm.reshape();
    let set_aside = |st: MemberState| -> Vec<String> {
        asm.members
            .iter()
            .filter(|m| m.state == st)
            .map(|m| m.device.path.clone())
            .collect()
    };
    let stale = set_aside(MemberState::Stale);
    let removed = set_aside(MemberState::Removed);
    let out = DetailJson {
        metadata: asm
            .members
            .iter()
            .max_by_key(|m| m.sb.events)
            .map_or("1.2", |m| m.sb.version().name())
            .to_string(),
        uuid: format_uuid(&asm.uuid),
        name: asm.name.clone(),
        level: asm.level_name().to_string(),
        layout: zoned_layout(asm).unwrap_or_else(|| g.layout.name()),
        chunk_bytes: g.chunk_bytes,
        raid_devices: g.raid_disks,
        total_devices: asm.members.len(),
        array_size_bytes: asm.data_bytes(),
        member_data_bytes: g.member_bytes,
        events: asm.events,
        state: state_text.clone(),
        state_words: words,
        health: match state {
            ArrayState::Clean => "optimal",
            ArrayState::Degraded => "degraded",
            ArrayState::Failed => "failed",
        },
        resync_pending,
        replay_pending: replay_pending.map(str::to_string),
        consistency_policy: if asm.bitmap.is_some() {
            "bitmap"
        } else if asm.has_ppl() {
            "ppl"
        } else if asm.has_journal() {
            "journal"
        } else {
            "resync"
        }
        .into(),
        bitmap_dirty_chunks: asm.bitmap.as_ref().map(|b| b.dirty_count()),
        members: asm
            .members
            .iter()
            .map(|m| MemberJson {
                device: m.device.path.clone(),
                role: m.role,
                state: m.state,
                events: m.sb.events,
                io: served.as_ref().and_then(|s| {
                    s.io_modes
                        .iter()
                        .find(|(n, _)| *n == m.device.path)
                        .map(|(_, io)| io.as_str())
                }),
            })
            .collect(),
        missing_roles: asm.missing(),
        stale: stale.clone(),
        removed: removed.clone(),
        mkfs: mkfs_alignment(&g),
        member_io_submission: served.as_ref().map(|s| member_io_submission(&s.io_modes)),
        served,
    };
    if json {
        textln!(text, "{}", serde_json::to_string_pretty(&out)?);
        return Ok(text);
    }
    let rows: Vec<(&str, String)> = vec![
        ("Version", out.metadata.clone()),
        ("Raid Level", out.level.clone()),
        (
            "Array Size",
            format!(
                "{} ({})",
                out.array_size_bytes,
                format_size_approx(out.array_size_bytes)
            ),
        ),
        (
            "Used Dev Size",
            format!(
                "{} ({})",
                out.member_data_bytes,
                format_size_approx(out.member_data_bytes)
            ),
        ),
        ("Raid Devices", out.raid_devices.to_string()),
        ("Total Devices", out.total_devices.to_string()),
        ("State", state_text),
        ("Layout", out.layout.clone()),
        (
            "Chunk Size",
            if g.chunk_bytes == 0 {
                "-".into()
            } else {
                format_size(g.chunk_bytes)
            },
        ),
        ("Name", out.name.clone()),
        ("UUID", out.uuid.clone()),
        ("Events", out.events.to_string()),
        ("Consistency Policy", out.consistency_policy.clone()),
    ];
    let mut rows = rows;
    if let Some(m) = &out.member_io_submission {
        rows.push(("Member I/O", m.clone()));
    }
    if let Some(b) = &asm.bitmap {
        rows.push((
            "Intent Bitmap",
            format!(
                "Internal, {} chunk(s) of {} dirty of {}",
                b.dirty_count(),
                format_size(b.sb.chunk_sectors() * 512),
                b.chunks()
            ),
        ));
    }
    if let Some(r) = &reshape {
        let shape = geometry_shape;
        rows.push((
            "Reshape",
            match r {
                Ok(r) => {
                    let (below, above) = if r.backwards {
                        (&r.old, &r.new)
                    } else {
                        (&r.new, &r.old)
                    };
                    format!(
                        "stopped at byte {} ({}): below it {}, from it on {} (read through both; `mdadm --grow --continue` finishes it)",
                        r.position,
                        format_size_approx(r.position),
                        shape(below),
                        shape(above)
                    )
                }
                Err(e) => format!("cannot be read: {e}"),
            },
        ));
    }
    if let Some(m) = &out.mkfs {
        rows.push(("ext4 Alignment", m.ext4.clone()));
        rows.push(("XFS Alignment", m.xfs.clone()));
    }
    if asm.has_journal() {
        rows.push((
            "Journal",
            match asm.journal_member() {
                Some(j) => format!(
                    "{} (write-through, journal_tail at sector {})",
                    j.device.path,
                    raidlab_md::journal::journal_tail(&j.sb)
                ),
                None => "missing or stale: the array is refused, or read-only with --force, until its journal device is given".into(),
            },
        ));
    }
    if let Some(s) = &out.served {
        rows.push((
            "Served By",
            format!("raidlab serve (pid {}), export {:?}", s.pid, s.export),
        ));
        if let Some(cut) = s.status.array_size_cut_bytes {
            // md's Array Size after --grow --array-size: what is exposed.
            rows.push((
                "Exposed Size",
                format!(
                    "{cut} bytes ({}), cut by --array-size until the server stops",
                    format_size_approx(cut)
                ),
            ));
        }
        for t in s
            .status
            .rebuild
            .iter()
            .chain(&s.status.scrub)
            .chain(&s.status.reshape)
        {
            let label = match t.kind.as_str() {
                // md's mdadm --detail: "Reshape Status : 12% complete".
                "reshape" => "Reshape Status",
                // md calls a re-add's bitmap-based resync a recovery too.
                "rebuild" | "re-add" => "Rebuild Status",
                "replace" => "Replace Status",
                "check" => "Check Status",
                "resync" => "Resync Status",
                _ => "Repair Status",
            };
            let what = match (&t.error, t.running) {
                (_, true) => format!(
                    "{:.1}% complete ({} of {}, {}/s{})",
                    t.percent(),
                    format_size_approx(t.done),
                    format_size_approx(t.total),
                    format_size_approx(t.bytes_per_sec as u64),
                    t.role
                        .map(|r| format!(", role {r} onto {}", t.device))
                        .unwrap_or_default()
                ),
                (Some(e), false) => format!("stopped at {:.1}%: {e}", t.percent()),
                (None, false) => "finished".to_string(),
            };
            rows.push((label, what));
        }
        if let Some(j) = &s.status.journal {
            rows.push((
                "Journal",
                format!(
                    "{} on {}; {} stripes only in the journal; ring reclaimed {} times",
                    j.mode.name(),
                    j.device,
                    j.stripes_only_in_journal,
                    j.reclaims
                ),
            ));
        }
        if let Some(c) = &s.status.stripe_cache {
            let st = &c.stats;
            rows.push((
                "Stripe Cache",
                format!(
                    "{} stripes, hold {} ms; {} held now; {} whole stripes written with no reads, {} partial ({} by age, {} by size, {} by flush); {} member reads avoided; read hits {} (+{} partial); write plans: {} read-modify-write, {} reconstruct-write; rows kept {} of {}, {} member reads taken from them",
                    c.config.stripes,
                    c.config.hold.as_millis(),
                    st.held_now,
                    st.full_stripes,
                    st.partial_stripes,
                    st.expired,
                    st.evicted,
                    st.flushed,
                    st.reads_avoided,
                    st.read_hits,
                    st.read_partial_hits,
                    c.read_modify_write_plans,
                    c.reconstruct_write_plans,
                    c.kept_rows_now,
                    c.config.kept_rows,
                    c.kept_row_fills
                ),
            ));
        }
    }
    for (k, v) in rows {
        textln!(text, "{k:>18} : {v}");
    }
    textln!(text);
    // The I/O column only when a server answers: it is how that server
    // opened each member, which the superblocks do not record.
    let served = out.served.is_some();
    if served {
        textln!(text, "   Role  State      Events  I/O       Device");
    } else {
        textln!(text, "   Role  State      Events  Device");
    }
    let mut order: Vec<&MemberJson> = out.members.iter().collect();
    order.sort_by_key(|m| (m.role.is_none(), m.role));
    for m in order {
        let role = m.role.map_or("-".to_string(), |r| r.to_string());
        let st = serde_json::to_value(m.state)?
            .as_str()
            .unwrap_or("")
            .to_string();
        if served {
            let io = m.io.unwrap_or("-");
            textln!(
                text,
                "   {role:>4}  {st:<9} {:>7}  {io:<8}  {}",
                m.events,
                m.device
            );
        } else {
            textln!(text, "   {role:>4}  {st:<9} {:>7}  {}", m.events, m.device);
        }
    }
    for r in &out.missing_roles {
        textln!(text, "   {r:>4}  missing");
    }
    if !stale.is_empty() {
        textln!(text, "\nStale members (they missed writes: lower event count than the array; their data is out of date and is neither used nor written): {}. `raidlab add` with one as --new takes it back with a full rebuild.", stale.join(", "));
    }
    if !removed.is_empty() {
        textln!(text, "\nRemoved members (the array records them as removed; their data is out of date and is neither used nor written): {}. `raidlab add` with one as --new takes it back with a full rebuild.", removed.join(", "));
    }
    if resync_pending {
        textln!(text, "\nThe array was not stopped cleanly (or was created on members that held data), so parity/mirrors are not known to be consistent: reads of a complete array are correct; rebuilding a lost member is not until `raidlab resync` has run.");
    }
    match replay_pending {
        Some("ppl") => textln!(text, "\nThe array was not stopped cleanly: its partial parity log will be replayed by the next start for writing (`raidlab resync` does only that, in seconds), which makes parity consistent without a full resync."),
        Some(_) => textln!(text, "\nThe write journal holds writes from before an unclean stop: the next start for writing (`raidlab resync`, serve, import) writes them to the members."),
        None => {}
    }
    Ok(text)
}

/// The layout of a linear or multi-zone RAID 0 array as mdadm names it: a
/// multi-zone RAID 0's "original" or "alternate" (the zone map's choice), a
/// linear's "linear"; None for every other array.
fn zoned_layout(asm: &Assembly) -> Option<String> {
    let zones = asm.zone_map()?.ok()?;
    Some(match zones.kind {
        raidlab_layout::ZonedKind::Linear { .. } => "linear".into(),
        raidlab_layout::ZonedKind::Raid0 { alternate, .. } => {
            if alternate { "alternate" } else { "original" }.into()
        }
    })
}

/// A geometry in a few words, as `detail` and `explain` name the two sides
/// of a reshape: level, layout, members, chunk.
pub(crate) fn geometry_shape(g: &raidlab_layout::Geometry) -> String {
    format!(
        "{} {}, {} members, chunk {}",
        g.level.name(),
        g.layout.name(),
        g.raid_disks,
        format_size(g.chunk_bytes)
    )
}
