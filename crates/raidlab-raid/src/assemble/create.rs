//! Creating a new array: checks everything the user asked for, then writes one
//! superblock (and bitmap, PPL area or empty journal) per member. It must never
//! write a member before every check has passed, and never writes data.

use super::new_member::check_new_members;
use super::*;
use crate::level;

/// What the user asked `create` for.
#[derive(Debug, Clone)]
pub struct CreateSpec {
    pub level: Level,
    pub layout: Layout,
    /// Chunk in bytes (ignored for RAID 1).
    pub chunk_bytes: u64,
    pub spares: usize,
    pub name: String,
    /// Accept members that already carry a superblock, and fewer members than mdadm
    /// wants without --force (down to what md itself can run).
    pub force: bool,
    /// Keep an internal write-intent bitmap (md's --consistency-policy=bitmap),
    /// so a resync after an unclean stop covers only the regions written.
    pub bitmap: bool,
    /// Bytes of each member per bitmap bit (mdadm's --bitmap-chunk); None: mdadm's
    /// choice (64 MiB, more if the bits would not fit).
    pub bitmap_chunk: Option<u32>,
    /// Keep md's partial parity log (--consistency-policy=ppl, RAID 5 only):
    /// closes the write hole, and an unclean stop needs no resync.
    pub ppl: bool,
}

/// Write superblocks that make `members` an array, and return it assembled.
/// Checks everything before writing anything.
pub fn create(spec: &CreateSpec, members: Vec<NewMember>) -> Result<Assembly> {
    create_with_journal(spec, members, None)
}

/// [`create`] with md's write journal on `journal` (mdadm's `--write-journal
/// DEV`, consistency policy `journal`; RAID 4/5/6): every device gets the
/// JOURNAL feature, the journal device role 0xfffd (the device number after the
/// members and spares), its whole space after the data offset as the ring, and
/// an empty log. Start it with [`Assembly::start_journal`].
pub fn create_with_journal(
    spec: &CreateSpec,
    members: Vec<NewMember>,
    journal: Option<NewMember>,
) -> Result<Assembly> {
    create_with_metadata(spec, members, journal, MetadataVersion::V1_2)
}

/// [`create_with_journal`] with the superblocks where metadata `version` keeps
/// them (mdadm's `--metadata 1.0|1.1|1.2`); where that puts the data and how
/// large each member is are raidlab-md's rules (`mdadm_data_offset_for`,
/// `default_member_sectors_for`, `new_member_at`).
pub fn create_with_metadata(
    spec: &CreateSpec,
    members: Vec<NewMember>,
    journal: Option<NewMember>,
    version: MetadataVersion,
) -> Result<Assembly> {
    let exec: Arc<dyn crate::exec::Executor> = Arc::new(crate::exec::ThreadPool::default());
    create_with_executor(spec, members, journal, version, exec)
}

/// [`create_with_metadata`], the superblocks written by `exec`, which the
/// new assembly keeps: a driver that decides the order of every member I/O
/// (the torture harness's `exec::InOrder`) keeps it from the first write.
pub fn create_with_executor(
    spec: &CreateSpec,
    members: Vec<NewMember>,
    journal: Option<NewMember>,
    version: MetadataVersion,
    exec: Arc<dyn crate::exec::Executor>,
) -> Result<Assembly> {
    create_placed(spec, members, journal, version, exec, None)
}

/// Where the data lies on every member when the caller says (mdadm's
/// `--data-offset` and `--size`), instead of mdadm's defaults for the
/// devices given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// Bytes before the data on each member (a whole number of 4 KiB).
    pub data_offset: u64,
    /// Bytes of data per member, rounded as md rounds it for the level
    /// (`Geometry::new`).
    pub member_bytes: u64,
    /// Whether the members keep md's bad-block log, as mdadm 3.3 and later
    /// create them (without one, as older mdadm's or after `mdadm
    /// --assemble --update=no-bbl`, a member whose rewrite fails is taken
    /// out rather than its range listed).
    pub bad_block_log: bool,
}

/// [`create_with_executor`], the data placed as `placement` says when given
/// (metadata 1.1 and 1.2 only: they keep everything before the data, and
/// raidlab-md refuses a bitmap or log area that does not end before it): a
/// simulator whose device models were laid out with one data offset for
/// members of any size.
pub fn create_placed(
    spec: &CreateSpec,
    members: Vec<NewMember>,
    journal: Option<NewMember>,
    version: MetadataVersion,
    exec: Arc<dyn crate::exec::Executor>,
    placement: Option<Placement>,
) -> Result<Assembly> {
    if let Some(p) = placement {
        if !matches!(version, MetadataVersion::V1_1 | MetadataVersion::V1_2) {
            return Err(Error::invalid(format!(
                "a chosen data offset and size are built for metadata 1.1 and 1.2 only (which keep their metadata before the data), not {version:?}"
            )));
        }
        if p.data_offset % 4096 != 0 || p.data_offset < 8192 {
            return Err(Error::invalid(format!(
                "data offset {} bytes: expected a whole number of 4 KiB, at least 8 KiB (room for the superblock)",
                p.data_offset
            )));
        }
    }
    if version == MetadataVersion::V0_90 {
        check_090(spec, members.len(), journal.is_some())?;
    }
    if version == MetadataVersion::V1_0 && (journal.is_some() || spec.ppl) {
        return Err(Error::invalid(
            "metadata 1.0 with a partial parity log or a write journal is not built yet (md keeps them before the superblock at the end of each member): use metadata 1.1 or 1.2, or a bitmap or resync",
        ));
    }
    if let Some(j) = &journal {
        if !level::rules(spec.level).journal {
            return Err(Error::invalid(format!(
                "a write journal (--write-journal) is for RAID 4, 5 and 6, not {}: md journals parity stripes only",
                spec.level.name()
            )));
        }
        if spec.ppl || spec.bitmap {
            return Err(Error::invalid(
                "a write journal cannot be combined with a bitmap or a partial parity log (md allows one consistency policy)",
            ));
        }
        if members.iter().any(|m| {
            Arc::ptr_eq(&m.device.volume, &j.device.volume) || m.device.path == j.device.path
        }) {
            return Err(Error::invalid(format!(
                "{} is given both as a member and as the journal: the journal needs a device of its own",
                j.device.path
            )));
        }
    }
    let journal_dev = journal.as_ref().map(|j| j.device.clone());
    let mut members = members;
    let member_count = members.len();
    if let Some(j) = journal {
        members.push(j);
    }
    let total = member_count;
    if spec.spares >= total {
        return Err(Error::invalid(format!(
            "{} spare(s) asked for but only {total} member(s) given: the last --spares members become spares, the rest make up the array",
            spec.spares
        )));
    }
    let raid_disks = total - spec.spares;
    let min = spec.level.min_members();
    if raid_disks < min && !spec.force {
        return Err(Error::invalid(format!(
            "{} needs at least {min} members, {raid_disks} given (plus {} spare(s)); add members, or --force to create it with fewer",
            spec.level.name(),
            spec.spares
        )));
    }
    check_new_members(&members, spec.force)?;
    if version == MetadataVersion::V0_90
        && level::rules(spec.level).sized_per_member
        && super::create_zoned::raid0_sizes_differ(&members, spec.chunk_bytes, version)
    {
        // 0.90 records no data size: md would lay these out in zones.
        return Err(Error::invalid(
            "metadata 0.90 does not record each member's data size, so md lays out RAID 0 over members of different sizes in zones: create it as a multi-zone RAID 0 (`create_zoned`, as `raidlab create` does), or give members of one size",
        ));
    }
    let smallest = members
        .iter()
        .take(member_count)
        .map(|m| m.device.volume.size())
        .min()
        .unwrap_or(0);
    let chunk = if level::rules(spec.level).chunked {
        spec.chunk_bytes
    } else {
        0
    };
    if spec.ppl && !level::rules(spec.level).ppl {
        return Err(Error::invalid(format!(
            "a partial parity log (--consistency-policy ppl) is for RAID 5 only, not {}: use resync or bitmap",
            spec.level.name()
        )));
    }
    if spec.ppl && spec.bitmap {
        return Err(Error::invalid(
            "a partial parity log and a write-intent bitmap cannot be combined (md allows one consistency policy)",
        ));
    }
    if spec.ppl && spec.chunk_bytes > raidlab_md::ppl::MULTIPLE_PPL_AREA_SIZE_SUPER1 - 4096 {
        return Err(Error::invalid(format!(
            "chunk {} KiB is too large for a partial parity log: one stripe's partial parity must fit md's 1 MiB log area; use a chunk of 512K or less",
            spec.chunk_bytes / 1024
        )));
    }
    // mdadm takes the data offset from the first member and uses it for all.
    let first = members.first().map(|m| m.device.volume.size()).unwrap_or(0);
    let data_offset = if let Some(p) = placement {
        p.data_offset
    } else if spec.ppl {
        raidlab_md::ppl::mdadm_ppl_data_offset(first, (chunk / 1024) as u32)
    } else {
        raidlab_md::mdadm_data_offset_for(version, first, (chunk / 1024) as u32)
    };
    let usable = smallest.saturating_sub(data_offset);
    let member_bytes = if let Some(p) = placement {
        if p.member_bytes > usable {
            return Err(Error::invalid(format!(
                "{} bytes of data per member asked for, but the smallest member holds {usable} after the data offset of {data_offset} bytes",
                p.member_bytes
            )));
        }
        p.member_bytes
    } else if data_offset >= smallest {
        0
    } else {
        raidlab_md::default_member_sectors_for(
            version,
            smallest,
            data_offset,
            spec.level.md_level(),
            (chunk / 512) as u32,
        ) * SECTOR
    };
    let geometry = Geometry::new(spec.level, spec.layout, chunk, raid_disks, member_bytes)
        .map_err(|e| {
            let mut e = e;
            e.message = format!(
                "{} (smallest member {} bytes, {} of them after md's data offset of {} bytes)",
                e.message, smallest, usable, data_offset
            );
            e
        })?;
    let zeroed = members.iter().take(raid_disks).all(|m| m.zeroed);
    let clean = zeroed || !level::rules(spec.level).resyncs;
    let array = NewArray {
        uuid: *uuid::Uuid::new_v4().as_bytes(),
        name: spec.name.clone(),
        level: spec.level.md_level(),
        layout: geometry.md_layout(),
        chunk_sectors: geometry.md_chunk_sectors(),
        raid_disks: raid_disks as u32,
        member_sectors: geometry.member_bytes / SECTOR,
        data_offset_sectors: data_offset / SECTOR,
        total_devices: members.len() as u32,
        clean,
    };
    if let Some(j) = &journal_dev {
        // The journal's ring is everything after the data offset.
        let ring = (j.volume.size() / SECTOR).saturating_sub(data_offset / SECTOR);
        if ring * SECTOR < 256 << 10 {
            return Err(Error::invalid(format!(
                "the journal device is {} bytes: it needs at least 256 KiB after md's data offset of {} bytes",
                j.volume.size(),
                data_offset
            ))
            .on_device(j.path.clone()));
        }
    }
    let now = now_secs();
    // Every superblock, bitmap, log area and the journal's first block, as
    // one plan over the devices (in `members` order): the writes overlap,
    // then each device is flushed once.
    let mut writes = crate::metadata_plan::DeviceWrites::default();
    let mut journal_sb = None;
    for (i, m) in members.iter().enumerate() {
        let role = if i < raid_disks {
            i as u16
        } else if i >= total {
            raidlab_md::ROLE_JOURNAL
        } else {
            raidlab_md::ROLE_SPARE
        };
        let mut sb = raidlab_md::new_member_at(
            &array,
            version,
            i as u32,
            role,
            *uuid::Uuid::new_v4().as_bytes(),
            m.device.volume.size() / SECTOR,
            now,
        );
        if level::rules(spec.level).sized_per_member {
            // md sizes RAID 0 from each member's data_size: make them equal so md
            // sees one zone, exactly the striping raidlab uses, on unequal members.
            sb.data_size = array.member_sectors;
        }
        if let Some(t) = sb.v0_90.as_mut() {
            // Every 0.90 table lists every device of the new array, spares too.
            t.in_service = Some(raidlab_md::sb090::InService {
                numbers: (0..members.len() as u32).collect(),
                rebuilding: Vec::new(),
            });
        }
        if spec.ppl {
            raidlab_md::ppl::enable_ppl(&mut sb).map_err(|e| e.on_device(m.device.path.clone()))?;
        }
        if journal_dev.is_some() {
            let ctx = |e: Error| e.on_device(m.device.path.clone());
            // Every device lists the journal in its role table.
            if let Some(r) = sb.dev_roles.get_mut(total) {
                *r = raidlab_md::ROLE_JOURNAL;
            }
            if i >= total {
                raidlab_md::journal::make_journal_device(&mut sb).map_err(ctx)?;
                sb.data_size = m.device.volume.size() / SECTOR - data_offset / SECTOR;
            } else {
                raidlab_md::journal::enable_journal_feature(&mut sb).map_err(ctx)?;
            }
        }
        if placement.is_some_and(|p| !p.bad_block_log) {
            sb.bblog_offset = 0;
            sb.bblog_size = 0;
        }
        let bitmap = if spec.bitmap {
            let mut bm = raidlab_md::bitmap::new_internal(&mut sb, spec.bitmap_chunk)
                .map_err(|e| e.on_device(m.device.path.clone()))?;
            if clean {
                // Nothing to resync on a zeroed array: start with no dirty chunk.
                bm.clear_all();
            }
            Some(bm)
        } else {
            None
        };
        let ctx = |e: Error| e.on_device(m.device.path.clone());
        let (at, bytes) = sb.placed(m.device.volume.size()).map_err(ctx)?;
        writes.push(i, at, &bytes);
        if let Some(bm) = bitmap {
            let (at, bytes) = bm.placed(&sb).map_err(ctx)?;
            writes.push(i, at, &bytes);
        }
        if spec.ppl {
            writes.push_empty_ppl(i, &sb).map_err(ctx)?;
        }
        if journal_dev.is_some() && i >= total {
            journal_sb = Some(sb);
        }
    }
    if let (Some(j), Some(sb)) = (&journal_dev, &journal_sb) {
        // An empty log at the start of the ring, as md begins one.
        let ctx = |e: Error| e.on_device(j.path.clone());
        let seed = raidlab_md::journal::uuid_seed(&array.uuid);
        let empty = raidlab_md::journal::MetaBlock::empty(u64::from(seed), 0)
            .to_bytes(seed)
            .map_err(ctx)?;
        writes
            .push_journal_blocks(members.len() - 1, sb, 0, &empty)
            .map_err(ctx)?;
    }
    let table: Vec<Option<Arc<dyn Volume>>> = members
        .iter()
        .map(|m| Some(Arc::clone(&m.device.volume)))
        .collect();
    // The new array's executor writes its superblocks and keeps its plans.
    writes.run(exec.as_ref(), &table)?;
    Ok(Assembly::assemble(members.into_iter().map(|m| m.device).collect())?.with_executor(exec))
}

/// What metadata 0.90 cannot record, refused before anything is written:
/// more than its 27 device descriptors, and a PPL or journal (0.90 has
/// neither; its bitmap is raidlab-md's, in the 60 KiB after the superblock).
fn check_090(spec: &CreateSpec, devices: usize, journal: bool) -> Result<()> {
    if devices > raidlab_md::sb090::DISKS {
        return Err(Error::invalid(format!(
            "metadata 0.90 records at most {} devices, {devices} given: use metadata 1.x",
            raidlab_md::sb090::DISKS
        )));
    }
    if spec.ppl || journal {
        return Err(Error::invalid(
            "metadata 0.90 has no partial parity log or journal: use --consistency-policy resync or bitmap, or metadata 1.x",
        ));
    }
    Ok(())
}
