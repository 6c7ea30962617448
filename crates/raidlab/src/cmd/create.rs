//! `raidlab create`.

use crate::cli::CreateArgs;
use crate::open::{is_missing, member_exists, open_with};
use anyhow::{bail, Context, Result};
use raidlab_core::size::format_size;
use raidlab_core::Volume as _;
use raidlab_devices::{FileVolume, MemberOpener, OpenMode};
use raidlab_layout::{Layout, Level};
use raidlab_md::MetadataVersion;
use raidlab_raid::assemble::{create_with_metadata, CreateSpec, Device, NewMember};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::process::ExitCode;
use std::sync::Arc;

pub fn run(a: CreateArgs) -> Result<ExitCode> {
    // md's linear has no Level of its own here: it is created as zones.
    let linear = matches!(a.level.to_ascii_lowercase().as_str(), "linear" | "-1");
    let level = if linear {
        if a.layout.is_some() {
            bail!("linear arrays have no layout: drop --layout");
        }
        Level::Raid0
    } else {
        Level::from_name(&a.level).map_err(|e| {
            anyhow::anyhow!("{e} (or linear: members one after another, md's linear)")
        })?
    };
    let Some(metadata) = MetadataVersion::parse(&a.metadata) else {
        bail!(
            "--metadata {}: raidlab writes md metadata 0.90 (the old format, superblock near the end), 1.0 (superblock at the end), 1.1 (at the start) or 1.2 (4 KiB from the start, the default); external formats (ddf, imsm) are not written",
            a.metadata
        );
    };
    let layout = Layout::parse(level, a.layout.as_deref())?;
    if level != Level::Raid1 && (a.chunk < 4096 || !a.chunk.is_power_of_two()) {
        bail!(
            "chunk size {} is not a power of two of at least 4K: use e.g. 64K, 512K or 1M",
            a.chunk
        );
    }
    if a.members.iter().any(|p| is_missing(p)) {
        bail!("`missing` cannot be used with create: every member must be a file or device");
    }
    // Refuse duplicates before touching anything: the same path twice, or two paths
    // naming one file.
    let mut seen: Vec<(u64, u64, String)> = Vec::new();
    let all: Vec<std::path::PathBuf> = a
        .members
        .iter()
        .chain(a.write_journal.iter())
        .cloned()
        .collect();
    for (i, p) in all.iter().enumerate() {
        if all[..i].contains(p) {
            bail!(
                "{} is given twice: each member must be a different file or device",
                p.display()
            );
        }
        if let Ok(meta) = std::fs::metadata(p) {
            let id = if meta.file_type().is_block_device() {
                (meta.rdev(), 0)
            } else {
                (meta.dev(), meta.ino())
            };
            if let Some((_, _, other)) = seen.iter().find(|(d, n, _)| (*d, *n) == id) {
                bail!(
                    "{} and {} are the same file: each member must be a different file or device",
                    other,
                    p.display()
                );
            }
            seen.push((id.0, id.1, p.display().to_string()));
        } else if !member_exists(p) && a.member_size.is_none() {
            bail!(
                "{} does not exist: give --member-size to create member files of that size",
                p.display()
            );
        }
    }
    let mut created = Vec::new();
    let result = open_and_create(&a, level, linear, layout, metadata, &mut created);
    if result.is_err() {
        // Leave the disk as we found it: remove only files this command made.
        for p in &created {
            let _ = std::fs::remove_file(p);
        }
    }
    let asm = result?;
    let g = asm.geometry;
    let zones = asm.zone_map().and_then(|z| z.ok());
    let (chunk, layout) = match &zones {
        Some(z) => zoned_words(z),
        None => (
            if g.chunk_bytes == 0 {
                "-".to_string()
            } else {
                format_size(g.chunk_bytes)
            },
            g.layout.name().to_string(),
        ),
    };
    outln!(
        "raidlab: created {} array {} ({}) on {} member(s){}: {} usable, chunk {chunk}, layout {layout}",
        asm.level_name(),
        if asm.name.is_empty() {
            "(unnamed)".to_string()
        } else {
            asm.name.clone()
        },
        raidlab_raid::assemble::format_uuid(&asm.uuid),
        g.raid_disks,
        if a.spares > 0 {
            format!(" + {} spare(s)", a.spares)
        } else {
            String::new()
        },
        format_size(asm.data_bytes()),
    );
    if let Some(j) = asm.journal_member() {
        outln!(
            "raidlab: write journal on {} (md's consistency policy journal, write-through): stripe writes go there first, so a crash cannot tear a stripe",
            j.device.path
        );
    }
    if !asm.in_sync() {
        outln!("raidlab: the members held data before, so parity/mirrors are not yet consistent: initial resync pending (see `raidlab detail`)");
    }
    Ok(ExitCode::SUCCESS)
}

/// The chunk and layout words of a zoned array, for the summary line.
fn zoned_words(z: &raidlab_layout::zones::ZoneMap) -> (String, String) {
    use raidlab_layout::zones::ZonedKind;
    let zones = format!("{} zone(s)", z.zones.len());
    match z.kind {
        ZonedKind::Linear { .. } => ("-".into(), format!("linear, {zones}")),
        ZonedKind::Raid0 {
            chunk_bytes,
            alternate,
        } => (
            format_size(chunk_bytes),
            format!(
                "{}, {zones}",
                if alternate { "alternate" } else { "original" }
            ),
        ),
    }
}

/// md's RAID 0 layout word from `--layout`: original (1, the default) or
/// alternate (2); they differ only over members of different sizes.
fn raid0_layout(name: Option<&str>) -> Result<u32> {
    use raidlab_layout::zones::{RAID0_ALTERNATE, RAID0_ORIGINAL};
    Ok(match name.map(str::to_ascii_lowercase).as_deref() {
        None | Some("original" | "1" | "none") => RAID0_ORIGINAL,
        Some("alternate" | "2") => RAID0_ALTERNATE,
        Some(other) => bail!("--layout {other} for RAID 0: use original or alternate"),
    })
}

/// Linear, or RAID 0 over members of different sizes: md's zones.
fn create_zoned(
    a: &CreateArgs,
    linear: bool,
    news: Vec<NewMember>,
    metadata: MetadataVersion,
) -> Result<raidlab_raid::assemble::Assembly> {
    let what = if linear {
        "linear"
    } else {
        "RAID 0 over members of different sizes"
    };
    if a.spares > 0 || a.write_journal.is_some() {
        bail!("{what} keeps no redundancy: spares and a write journal do not apply");
    }
    if a.consistency_policy.is_some() || a.bitmap_chunk.is_some() {
        bail!("{what} keeps no redundancy: a consistency policy or bitmap does not apply");
    }
    let spec = raidlab_raid::assemble::ZonedSpec {
        linear,
        chunk_bytes: a.chunk,
        raid0_layout: raid0_layout(a.layout.as_deref())?,
        name: a.name.clone(),
        force: a.force,
    };
    Ok(raidlab_raid::assemble::create_zoned(&spec, news, metadata)?)
}

fn open_and_create(
    a: &CreateArgs,
    level: Level,
    linear: bool,
    layout: Layout,
    metadata: MetadataVersion,
    created: &mut Vec<std::path::PathBuf>,
) -> Result<raidlab_raid::assemble::Assembly> {
    let mut members = Vec::new();
    let mut opener = MemberOpener::new(OpenMode::ReadWrite).with_io(a.io.mode());
    for p in a.members.iter().chain(a.write_journal.iter()) {
        if member_exists(p) {
            members.push((open_with(&mut opener, p)?, p.clone()));
        } else {
            let size = a.member_size.unwrap_or(0);
            let v = FileVolume::create_sparse_io(p, size, a.io.mode())
                .with_context(|| format!("cannot create member file {}", p.display()))?;
            created.push(p.clone());
            members.push((
                Device {
                    path: p.display().to_string(),
                    volume: Arc::new(v),
                },
                p.clone(),
            ));
        }
    }
    let mut news: Vec<NewMember> = members
        .into_iter()
        .map(|(d, p)| {
            let zeroed = created.contains(&p)
                || match opener.window(&p) {
                    // A partition of a fresh image (sfdisk writes only tables).
                    Some((image, start, len)) => {
                        raidlab_devices::partition::range_is_holes(image, start, len)
                    }
                    None => is_all_holes(&d),
                };
            NewMember { device: d, zeroed }
        })
        .collect();
    if linear
        || (level == Level::Raid0
            && raidlab_raid::assemble::raid0_sizes_differ(&news, a.chunk, metadata))
    {
        return create_zoned(a, linear, news, metadata);
    }
    let journal = if a.write_journal.is_some() {
        news.pop()
    } else {
        None
    };
    let smallest = news
        .iter()
        .map(|m| m.device.volume.size())
        .min()
        .unwrap_or(0);
    let ppl = a.consistency_policy.as_deref() == Some("ppl");
    match (a.consistency_policy.as_deref(), &a.write_journal) {
        (Some("journal"), None) => bail!(
            "--consistency-policy journal needs the journal device: add --write-journal DEV (a device or file that is not a member; a fast one is best)"
        ),
        (Some(p), Some(_)) if p != "journal" => bail!(
            "--write-journal makes the consistency policy journal, not {p}: md keeps one consistency policy (drop --consistency-policy or say journal)"
        ),
        _ => {}
    }
    if journal.is_some() && !matches!(level, Level::Raid4 | Level::Raid5 | Level::Raid6) {
        bail!(
            "--write-journal is for RAID 4, 5 and 6 (md journals parity stripes), not {}",
            level.name()
        );
    }
    let bitmap = match a.consistency_policy.as_deref() {
        Some("bitmap") => true,
        Some("resync" | "ppl" | "journal") => false,
        _ if journal.is_some() => false,
        Some(other) => bail!("--consistency-policy {other}: choose resync, bitmap, ppl or journal"),
        // mdadm adds an internal bitmap by default to arrays of 100 GiB and more.
        None => {
            level != Level::Raid0 && smallest.saturating_mul(a.members.len() as u64) >= 100 << 30
        }
    };
    if bitmap && level == Level::Raid0 {
        bail!("RAID 0 has no redundancy to resync: a write-intent bitmap does not apply");
    }
    let bitmap_chunk = match a.bitmap_chunk {
        Some(c) if !c.is_power_of_two() || !(4096..=(1 << 30)).contains(&c) => {
            bail!("--bitmap-chunk {c}: use a power of two from 4K to 1G")
        }
        Some(c) => Some(c as u32),
        None => None,
    };
    let spec = CreateSpec {
        level,
        layout,
        chunk_bytes: a.chunk,
        spares: a.spares,
        name: a.name.clone(),
        force: a.force,
        bitmap,
        bitmap_chunk,
        ppl,
    };
    Ok(create_with_metadata(&spec, news, journal, metadata)?)
}

/// An existing regular file that stores nothing (all holes) reads as zeros, which is
/// consistent parity for every level, so it needs no initial resync.
fn is_all_holes(d: &Device) -> bool {
    let Ok(meta) = std::fs::metadata(&d.path) else {
        return false;
    };
    meta.is_file() && meta.blocks() == 0
}
